"""The public entry points that take privacy settings and records, each called with valid defaults, so that a
test can change one argument: ``CALLS["dpvi"](epsilon=-1)``. Tiny data (N = 20, two features)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

import dpposterior as dpp
from dpposterior import privacy
from dpposterior.baselines.expfam_release import release_sufficient_statistics
from dpposterior.baselines.regression_release import release_regression_statistics
from dpposterior.dpsgd import dpsgd
from dpposterior.models import logistic_regression
from dpposterior.vi._dpvim import dpvim


def xy(n=20, p=2):
    """``n`` records of ``p`` standard normal features (float32) and 0/1 labels (int32)."""
    rng = np.random.default_rng(0)
    return rng.normal(size=(n, p)).astype(np.float32), (rng.random(n) < 0.5).astype(np.int32)


def dot_loss(p, x):
    """A per-record loss for :func:`dpsgd`: the dot product of the parameters and the record."""
    return jnp.dot(p, x)


X20, Y20 = xy()
DPSGD_KW = dict(
    noise_multiplier=1.0, clip=1.0, sampling_rate=0.5, num_steps=5, learning_rate=0.1, delta=1e-5, rng_key=0
)
VI_KW = dict(epsilon=1.0, delta=1e-5, num_steps=5, sampling_rate=0.5, clip=1.0, rng_key=0)

CALLS = {
    "calibrate_noise_multiplier": lambda **k: privacy.calibrate_noise_multiplier(
        **{**dict(epsilon=1.0, delta=1e-5, sampling_rate=0.1, num_steps=10), **k}
    ),
    "dpsgd_epsilon": lambda **k: privacy.dpsgd_epsilon(
        **{**dict(noise_multiplier=1.0, delta=1e-5, sampling_rate=0.1, num_steps=10), **k}
    ),
    "gaussian_sigma": lambda **k: privacy.gaussian_sigma(**{**dict(epsilon=0.5, delta=1e-5), **k}),
    "analytic_gaussian_sigma": lambda **k: privacy.analytic_gaussian_sigma(**{**dict(epsilon=1.0, delta=1e-5), **k}),
    "dpvi": lambda **k: dpp.dpvi(logistic_regression, X20, Y20, **{**VI_KW, **k}),
    "dpvim": lambda **k: dpvim(logistic_regression, X20, Y20, **{**VI_KW, **k}),
    "dpsgd": lambda **k: dpsgd(dot_loss, np.zeros(2, np.float32), X20, **{**DPSGD_KW, **k}),
    "release_sufficient_statistics": lambda **k: release_sufficient_statistics(
        "beta-bernoulli", np.array([0, 1, 1]), **{**dict(epsilon=1.0, rng_key=0), **k}
    ),
    "release_regression_statistics": lambda **k: release_regression_statistics(
        X20, Y20.astype(np.float32), **{**dict(epsilon=1.0, x_bound=2.0, y_bound=1.0, rng_key=0), **k}
    ),
}
