"""Per-site learning-rate factors and initial points of the experiment models.

The 10-D regression runs with the authors' public settings at every epsilon (models/registry.py):
the weights relax within the burn-in, the noise variance's mean is held nearly still, so that the
identifiability rule gives it the prior (docs/results/na-dpvi-regression-analysis.md).
"""

from __future__ import annotations

import numpy as np
import pytest

from dpposterior.experiments import CellConfig
from dpposterior.experiments.replicates import dpvi_setup, mean_learning_rate_factors, model_settings
from dpposterior.models.registry import get_model
from dpposterior.vi.dpvi import heuristic_learning_rate, dpvi


def _setup(epsilon=1.0, **kw):
    return dpvi_setup(CellConfig("linear-regression", epsilon, "grid", **kw))


def test_factors_scale_only_the_named_sites_means():
    s = _setup()
    n = s.num_latent
    w = s.layout.site_slice("w")
    assert (w.start, w.stop) == (1, 12) and s.layout.site_slice("sigma2") == slice(0, 1)
    f = mean_learning_rate_factors(s.layout, (("w", 0.1),))
    want = np.ones(2 * n)
    want[1:12] = 0.1
    np.testing.assert_array_equal(f, want)
    heur = np.asarray(heuristic_learning_rate(10_000, 2 * n, s.noise_multiplier, s.clip, s.beta, 4.0))
    spec_factors = np.ones(2 * n)
    spec_factors[0] = 1 / 28
    np.testing.assert_allclose(s.learning_rate, (spec_factors * heur).astype(np.float32), rtol=1e-6)
    assert abs(s.learning_rate[0] / s.learning_rate[1] - 1 / 28) < 1e-6  # the noise variance 28x slower


@pytest.mark.parametrize(
    "factors, match",
    [
        ((("v", 0.5),), "no latent site 'v'"),
        ((("w", 0.0),), "finite and > 0"),
        ((("w", float("nan")),), "finite and > 0"),
    ],
)
def test_bad_factors_are_refused(factors, match):
    with pytest.raises(ValueError, match=match):
        mean_learning_rate_factors(_setup().layout, factors)


def test_settings_record_factors_only_where_set():
    """Records of models without factors keep matching (no stale recomputation of their cells)."""
    lr = model_settings("linear-regression", 5000)
    assert lr["mean_lr_factors"] == {"sigma2": 1 / 28}
    assert lr["init_loc"] == {"w": 1.0, "sigma2": pytest.approx(np.log(np.log1p(np.exp(-4.0))))}
    assert lr["init_rho"] == -6.0
    bb = model_settings("beta-bernoulli", 5000)
    assert not {"mean_lr_factors", "init_loc", "init_rho"} & set(bb)


def test_dpvi_kwargs_run_the_same_learning_rate():
    s = _setup(num_records=40, num_steps=20)
    cfg = CellConfig("linear-regression", 1.0, "grid", num_records=40, num_steps=20)
    X = np.random.default_rng(0).normal(size=(40, 10)).astype(np.float32)
    y = (X[:, 0] * 0.3).astype(np.float32)
    trace = dpvi(s.spec.model, X, y, rng_key=0, **s.dpvi_kwargs(cfg))
    np.testing.assert_array_equal(trace.learning_rate, s.learning_rate)


def test_regression_settings_are_the_authors_at_every_epsilon():
    """C 260, beta_rho 1500, lr scale 4, noise variance's mean at 1/28, init w = 1, sigma^2 = softplus(-4),
    rho = -6; the same at every epsilon. With them the weights relax within half of the 2,000-step burn-in
    (1 / (eta q A), A = N E[x^2] / sigma_y^2 at the prior mean 0.026) and the noise variance's mean
    (A = N / 2 in log sigma^2) takes far longer than the 8,000 modelled steps: the identifiability
    rule gives it the prior."""
    spec = get_model("linear-regression")
    assert (spec.clip, spec.beta_rho, spec.lr_scale) == (260.0, 1500.0, 4.0)
    assert spec.mean_lr_factors == (("sigma2", 1 / 28),) and spec.init_rho == -6.0
    for eps in (0.1, 0.3, 1.0):
        s = _setup(eps)
        np.testing.assert_allclose(s.phi0[1:12], 1.0)
        np.testing.assert_allclose(s.phi0[0], np.log(np.log1p(np.exp(-4.0))), rtol=1e-6)
        np.testing.assert_allclose(s.phi0[12:], -6.0)
        tau_w = 1.0 / (float(s.learning_rate[1]) * 0.1 * 5000 / 0.026)
        tau_s = 1.0 / (float(s.learning_rate[0]) * 0.1 * 5000 / 2)
        assert tau_w < 1000, (eps, tau_w)
        assert tau_s > 10 * 8000, (eps, tau_s)
