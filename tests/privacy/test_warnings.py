"""Warnings that speak up: non-secure noise (once per process), delta >= 1/N, NUTS divergences."""

from __future__ import annotations

import warnings

import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest

import dpposterior as dpp
from dpposterior.noise_aware import postprocess
from dpposterior.privacy import LargeDeltaWarning, NoiseNotSecureWarning
from dpposterior.privacy import secure as SEC


def _model(y):
    mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
    with numpyro.plate("data", y.shape[0]):
        numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)


Y = np.random.default_rng(0).normal(1.0, 1.0, 200).astype(np.float32)


def _fit(**kw):
    args = dict(epsilon=1.0, delta=1e-4, num_steps=30, sampling_rate=0.2, clip=2.0, check_clip=False)
    args["run_options"] = dpp.vi.RunOptions(progress=False)
    args.update(kw)
    return dpp.dpvi(_model, Y, **args)


def test_os_seeded_noise_warns_once_per_process(monkeypatch):
    monkeypatch.setattr(SEC, "_WARNED_NOT_SECURE", False)
    with pytest.warns(NoiseNotSecureWarning, match="secure=True"):
        SEC.resolve_noise_source(None, False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        SEC.resolve_noise_source(None, False)  # the second time: silent
    monkeypatch.setattr(SEC, "_WARNED_NOT_SECURE", False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        SEC.resolve_noise_source(3, False)  # a user key (reproduction): no warning
        SEC.resolve_noise_source(None, True)  # secure mode: no warning


def test_delta_at_least_one_over_n_warns():
    """Once per release, pointing at the caller's line (not at the library's DP-SGD phases)."""
    with pytest.warns(LargeDeltaWarning, match=r"1/N = 1/200") as caught:
        _fit(delta=0.01, rng_key=0)
    large = [w for w in caught if issubclass(w.category, LargeDeltaWarning)]
    assert len(large) == 1 and large[0].filename == __file__, [(w.filename, w.lineno) for w in large]
    with warnings.catch_warnings():
        warnings.simplefilter("error", LargeDeltaWarning)
        _fit(delta=1e-4, rng_key=0)  # below 1/N: silent (power twin)


def test_nuts_divergences_warn(monkeypatch):
    trace = _fit(rng_key=1)
    real = postprocess.N.nuts_posterior

    def with_divergences(*a, **kw):
        draws, diag = real(*a, **kw)
        return draws, dict(diag, num_divergences=3)

    monkeypatch.setattr(postprocess.N, "nuts_posterior", with_divergences)
    opts = dict(method="nuts", num_warmup=50, num_samples=50)
    with pytest.warns(RuntimeWarning, match="3 divergent transitions"):
        post = dpp.noise_aware_posterior(trace, **opts)
    assert post.diagnostics["num_divergences"] == 3
    monkeypatch.setattr(postprocess.N, "nuts_posterior", real)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        clean = dpp.noise_aware_posterior(trace, **opts)
    assert clean.diagnostics["num_divergences"] == 0
