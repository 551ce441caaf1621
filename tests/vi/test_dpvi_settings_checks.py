"""``dpvi`` and ``dpvim`` refuse bad settings by name, a run that overflows is an error, and records whose
per-record gradient is NaN are ignored.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest

import dpposterior as dpp
from input_checks import raises_clear
from public_calls import CALLS


@pytest.mark.parametrize("fn", ["dpvi", "dpvim"])
@pytest.mark.parametrize(
    "kw,names",
    [
        (dict(clip=1e300), "clip"),  # was: a NaN trace (dpvim) / inf noise
        (dict(init_scale=1e300), "init_scale"),  # was: a NaN trace
        (dict(init_scale=1e-300), "init_scale"),  # was: rho = -inf, a NaN trace
        (dict(learning_rate="0.1"), "learning_rate"),  # was: silently 0.1
        (dict(learning_rate=True), "learning_rate"),  # was: silently 1.0
        (dict(learning_rate=[[1.0], [1.0, 2.0]]), "learning_rate"),
        (dict(learning_rate=1e300), "learning_rate"),
        (dict(dataset_size=True), "dataset_size"),
        (dict(dataset_size=0), "dataset_size"),
        (dict(model_name=3), "model_name"),
        (dict(accountant=None), "accountant"),
        (dict(lr_scale=-1.0), "lr_scale"),
    ],
)
def test_dpvi_and_dpvim_refuse_bad_settings_by_name(fn, kw, names):
    raises_clear(lambda: CALLS[fn](**kw), names)


@pytest.mark.parametrize(
    "kw",
    [
        dict(beta=True),
        dict(beta="1"),
        dict(beta=1 + 1j),
        dict(beta=np.ones(5)),
        dict(beta=1e-300),
        dict(num_mc=0),
        dict(num_mc=2.0),
    ],
)
def test_dpvi_refuses_bad_beta_and_num_mc(kw):
    raises_clear(lambda: CALLS["dpvi"](**kw), *kw)


def test_dpvim_run_that_overflows_is_an_error_not_a_nan_trace():
    with pytest.raises(ValueError, match="overflowed float32.*learning_rate"):
        CALLS["dpvim"](learning_rate=1e30)


# dpvi on a model whose per-record gradient is NaN for some records (compiles: N = 20, T = 10)
def sqrt_model(x, y, validate=False):
    w = numpyro.sample("w", dist.Normal(0.0, 1.0))
    with numpyro.plate("records", x.shape[0]):
        # NaN likelihood for x < 0; NumPyro's own check of the loc is off unless validate
        numpyro.sample("y", dist.Normal(w * jnp.sqrt(x), 1.0, validate_args=validate), obs=y)


def test_dpvi_with_nan_record_gradients_is_finite_and_ignores_them():
    """Records whose gradient is NaN are dropped by DP-SGD (their contribution zeroed; the clip check
    counts them with the clipped ones, tests/vi/test_data_support.py); where NumPyro's own validation
    refuses the records' values, dpvi refuses the data, quoting it."""
    import warnings

    from dpposterior.privacy.clip_binds import ClipBindsWarning

    rng = np.random.default_rng(2)
    x = rng.random(20).astype(np.float32) + 0.5
    y = (0.7 * np.sqrt(x) + rng.normal(size=20)).astype(np.float32)
    kw = dict(epsilon=2.0, delta=1e-5, num_steps=10, sampling_rate=1.0, clip=2.0, rng_key=5, dataset_size=20, num_mc=2)
    clean = dpp.dpvi(sqrt_model, x[:18], y[:18], **kw)
    hostile_x = x.copy()
    hostile_x[18:] = -1.0  # two records whose per-record ELBO gradient is NaN
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ClipBindsWarning)  # the noisy count of 2 in 20 may or may not warn
        hostile = dpp.dpvi(sqrt_model, hostile_x, y, **kw)
    assert np.isfinite(hostile.phi).all() and np.isfinite(hostile.grads).all()
    np.testing.assert_allclose(hostile.phi, clean.phi, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match=r"the model raised ValueError when run on the records \(Normal "):
        dpp.dpvi(sqrt_model, hostile_x, y, validate=True, **kw)
