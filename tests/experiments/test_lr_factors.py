"""Per-site learning-rate factors of the experiment models, and why linear regression needs one.

The 10-D regression's DP-SGD settings keep the wander ratio rho = sum_j eta_j sigma^2 C^2 E[x_j^2] /
(2 q N) of the weights small: rho is the share by which their wander inflates the residuals, so the
noise variance's fixed point is sigma_y^2 / (1 - rho) (models/registry.py; measured in
docs/results/na-dpvi-regression-analysis.md).
"""

from __future__ import annotations

import numpy as np
import pytest

from dpposterior.experiments import CellConfig, dpvi_setup
from dpposterior.experiments.replicates import mean_learning_rate_factors, model_settings
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
    np.testing.assert_allclose(s.learning_rate, (want * heur).astype(np.float32), rtol=1e-6)
    assert s.learning_rate[1] < 0.2 * s.learning_rate[0]  # weights slower than the noise variance


@pytest.mark.parametrize("factors, match", [((("v", 0.5),), "no latent site 'v'"),
                                            ((("w", 0.0),), "finite and > 0"),
                                            ((("w", float("nan")),), "finite and > 0")])
def test_bad_factors_are_refused(factors, match):
    with pytest.raises(ValueError, match=match):
        mean_learning_rate_factors(_setup().layout, factors)


def test_settings_record_factors_only_where_set():
    """Records of models without factors keep matching (no stale recomputation of their cells)."""
    assert model_settings("linear-regression", 5000)["mean_lr_factors"] == {"w": 0.1}
    assert "mean_lr_factors" not in model_settings("beta-bernoulli", 5000)


def test_dpvi_kwargs_run_the_same_learning_rate():
    s = _setup(num_records=40, num_steps=20)
    cfg = CellConfig("linear-regression", 1.0, "grid", num_records=40, num_steps=20)
    X = np.random.default_rng(0).normal(size=(40, 10)).astype(np.float32)
    y = (X[:, 0] * 0.3).astype(np.float32)
    trace = dpvi(s.spec.model, X, y, rng_key=0, **s.dpvi_kwargs(cfg))
    np.testing.assert_array_equal(trace.learning_rate, s.learning_rate)


def _wander_ratio(setup, num_weights=11, sampling_rate=0.1, num_records=5000):
    eta_w = float(setup.learning_rate[1])
    return num_weights * eta_w * (setup.noise_multiplier * setup.clip) ** 2 / (2 * sampling_rate * num_records)


def test_regression_settings_keep_the_noise_variance_fixed_point():
    """rho < 0.05 at epsilon 1 and the weights relax within a tenth of the burn-in (eta q N / sigma_y^2
    per step, sigma_y^2 at its prior mean 0.026); the reference's settings give rho > 1 (no fixed
    point: the noise variance runs away unless held still)."""
    spec = get_model("linear-regression")
    assert (spec.clip, spec.beta_rho, spec.lr_scale, spec.mean_lr_factors) == (60.0, 100.0, 4.0, (("w", 0.1),))
    s = _setup(1.0)
    assert _wander_ratio(s) < 0.05
    relax_steps = 1.0 / (float(s.learning_rate[1]) * 0.1 * 5000 / 0.026)
    assert relax_steps < 200, relax_steps
    # the control: the reference's C = 260 with every mean at the heuristic rate
    ref_lr = float(heuristic_learning_rate(10_000, 24, s.noise_multiplier, 260.0, np.ones(24), 4.0)[1])
    assert 11 * ref_lr * (s.noise_multiplier * 260.0) ** 2 / (2 * 0.1 * 5000) > 1.0
