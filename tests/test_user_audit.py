"""A careful new user's mistakes with models, data and options the examples do not use.

Each case was a silent wrong result or an internal traceback before it was fixed; the fix makes it a
ValueError/TypeError that names what was wrong and what is allowed. Models are tiny and the few DP-SGD
runs short (T <= 30, N <= 40), so the file runs in seconds.
"""

from __future__ import annotations

import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest

import dpposterior as dpp
from dpposterior.privacy.spent import PrivacySpent
from dpposterior.vi import DPVITrace, ParamLayout

RUN = dict(epsilon=1.0, delta=1e-5, num_steps=20, sampling_rate=0.3, clip=1.0, rng_key=0)
X = np.random.default_rng(0).normal(size=(40, 2)).astype(np.float32)
Y = (np.random.default_rng(1).random(40) < 0.5).astype(np.float32)


def linear(X, y=None):
    w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([X.shape[1]]).to_event(1))
    with numpyro.plate("records", X.shape[0]):
        numpyro.sample("y", dist.Normal(X @ w, 1.0), obs=y)


def _raises(fn, exc, *words):
    with pytest.raises(exc) as info:
        fn()
    for w in words:
        assert w in str(info.value), (w, str(info.value))


# ---------------------------------------------------------------------------------------------
# dpvi: model structures the registry does not have


def test_data_passed_as_keyword_is_refused_not_broadcast_into_every_record():
    # y=y lands in model_kwargs: every record's likelihood would hold ALL the labels, unprotected
    _raises(lambda: dpp.dpvi(linear, X, y=Y, **RUN), ValueError, "'y'", "positionally")


def test_support_that_depends_on_another_latent_site_is_refused():
    def model(x):
        top = numpyro.sample("top", dist.Exponential(0.2))
        b = numpyro.sample("b", dist.Uniform(0.0, top))
        with numpyro.plate("records", x.shape[0]):
            numpyro.sample("x", dist.Normal(b, 1.0), obs=x)

    _raises(lambda: dpp.dpvi(model, X[:, 0], **RUN), ValueError, "'b'", "depends on")


def test_subsampled_plate_gets_its_own_message():
    def model(x):
        m = numpyro.sample("m", dist.Normal(0.0, 1.0))
        with numpyro.plate("records", x.shape[0], subsample_size=2) as idx:
            numpyro.sample("x", dist.Normal(m, 1.0), obs=x[idx])

    _raises(lambda: dpp.dpvi(model, X[:, 0], **RUN), ValueError, "subsample_size")


def test_factor_outside_the_record_plate_gets_its_own_message():
    def model(x):
        m = numpyro.sample("m", dist.Normal(0.0, 1.0))
        numpyro.factor("penalty", -(m**2))
        with numpyro.plate("records", x.shape[0]):
            numpyro.sample("x", dist.Normal(m, 1.0), obs=x)

    _raises(lambda: dpp.dpvi(model, X[:, 0], **RUN), ValueError, "factor", "'penalty'")


def test_dict_of_data_is_a_clear_type_error():
    _raises(lambda: dpp.dpvi(linear, {"X": X, "y": Y}, **RUN), TypeError, "dict", "positionally")


# ---------------------------------------------------------------------------------------------
# noise_aware_posterior: solver options


def _trace(T=40):
    rng = np.random.default_rng(0)
    privacy = PrivacySpent(
        epsilon=1.0,
        delta=1e-5,
        neighbouring="add_remove",
        accountant="pld",
        mechanism="poisson_subsampled_gaussian",
        noise_multiplier=2.0,
        sampling_rate=0.1,
        num_steps=T,
    )
    return DPVITrace(
        phi=rng.normal(size=(T, 4)),
        grads=rng.normal(size=(T, 4)),
        final_phi=rng.normal(size=4),
        beta=np.ones(4),
        learning_rate=0.01,
        clip=1.0,
        noise_multiplier=2.0,
        sampling_rate=0.1,
        num_steps=T,
        dataset_size=100,
        num_mc=10,
        layout=ParamLayout.flat(2),
        privacy=privacy,
    )


@pytest.mark.parametrize(
    "method,kw,words",
    [
        ("grid", dict(num_points=0), ("num_points", ">= 2")),
        ("grid", dict(num_points=1.5), ("num_points", "integer")),
        ("grid", dict(num_points_s=1), ("num_points_s",)),
        ("grid", dict(num_stages=0), ("num_stages",)),
        ("grid", dict(tail=2.0), ("tail", "(0, 0.5)")),
        ("grid", dict(tail=float("nan")), ("tail",)),
        ("grid", dict(num_draws=0), ("num_draws",)),
        ("grid", dict(num_draws=-3), ("num_draws",)),
        ("laplace", dict(num_iterations=0), ("num_iterations",)),
        ("laplace", dict(tol=-1.0), ("tol",)),
        ("nuts", dict(num_chains=0), ("num_chains",)),
        ("nuts", dict(num_samples=0), ("num_samples",)),
        ("nuts", dict(num_warmup=-1), ("num_warmup",)),
        ("nuts", dict(target_accept_prob=1.5), ("target_accept_prob",)),
    ],
)
def test_bad_solver_options_are_refused_by_name(method, kw, words):
    with pytest.raises((ValueError, TypeError)) as info:
        dpp.noise_aware_posterior(_trace(), method=method, rng_key=0, **kw)
    for w in words:
        assert w in str(info.value), (w, str(info.value))


# ---------------------------------------------------------------------------------------------
# Posterior: keys and predictive


def _posterior():
    return _trace().last_iterate_posterior()


@pytest.mark.parametrize("key", ["abc", 1.5, None, True])
def test_bad_sampling_keys_are_refused_by_name(key):
    _raises(lambda: _posterior().sample(key, 3), TypeError, "key")


def test_predictive_with_a_model_lacking_the_posterior_sites_is_refused():
    def other(x):
        mu = numpyro.sample("mu", dist.Normal(100.0, 1.0))
        with numpyro.plate("records", x.shape[0]):
            numpyro.sample("x", dist.Normal(mu, 1.0))

    # before: 'theta' silently ignored and 'mu' drawn from its prior, returned as a "prediction"
    _raises(lambda: _posterior().predictive(0, other, X[:3, 0], num_samples=5), ValueError, "'theta'", "'mu'")


def test_predictive_refuses_an_extra_global_latent_inside_a_non_record_plate():
    def with_groups(x):
        theta = numpyro.sample("theta", dist.Normal(0.0, 1.0).expand([2]).to_event(1))
        with numpyro.plate("groups", 2):
            b = numpyro.sample("b", dist.Normal(0.0, 100.0))
        with numpyro.plate("records", x.shape[0]):
            z = numpyro.sample("z", dist.Normal(0.0, 0.1))  # a per-record latent: predicted, allowed
            numpyro.sample("x", dist.Normal(theta[0] + b[0] + z, 1.0))

    # before: only latents outside every plate counted as global, so 'b' was drawn from its prior
    _raises(lambda: _posterior().predictive(0, with_groups, X[:3, 0], num_samples=5), ValueError, "['b']")

    def with_local(x):
        theta = numpyro.sample("theta", dist.Normal(0.0, 1.0).expand([2]).to_event(1))
        with numpyro.plate("records", x.shape[0]):
            z = numpyro.sample("z", dist.Normal(0.0, 0.1))
            numpyro.sample("x", dist.Normal(theta[0] + z, 1.0))

    out = _posterior().predictive(0, with_local, X[:3, 0], num_samples=5)
    assert set(out) == {"x", "z"} and out["x"].shape == (5, 3)


def test_predictive_with_the_fitted_model_still_works():
    def model(x):
        theta = numpyro.sample("theta", dist.Normal(0.0, 1.0).expand([2]).to_event(1))
        with numpyro.plate("records", x.shape[0]):
            numpyro.sample("x", dist.Normal(theta[0], 1.0))

    out = _posterior().predictive(0, model, X[:3, 0], num_samples=5)
    assert set(out) == {"x"} and out["x"].shape == (5, 3)


# ---------------------------------------------------------------------------------------------
# the demo: settings checked before anything is printed or written


@pytest.mark.parametrize(
    "kw,word",
    [
        (dict(epsilon=0.0), "epsilon"),
        (dict(delta=1.0), "delta"),
        (dict(num_steps=0), "num_steps"),
        (dict(sampling_rate=2.0), "sampling_rate"),
        (dict(clip=float("nan")), "clip"),
        (dict(method="mcmc"), "method"),
    ],
)
def test_demo_refuses_bad_settings_before_printing_a_target_or_making_the_folder(tmp_path, kw, word):
    from dpposterior.demo import run_demo

    lines = []
    _raises(lambda: run_demo(out=tmp_path / "out", log=lines.append, progress=False, **kw), ValueError, word)
    assert lines == [] and not (tmp_path / "out").exists()
