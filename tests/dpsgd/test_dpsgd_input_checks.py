"""``dpsgd`` refuses bad arguments and losses by name before the run; the few inputs that do run (one record,
values near the float32 limit) give a finite trace, and a run that overflows is an error, not a NaN trace.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from dpposterior.dpsgd import dpsgd
from input_checks import raises_clear
from public_calls import DPSGD_KW, X20, dot_loss


# bad arguments (validated before compilation) ...
@pytest.mark.parametrize(
    "kw,names",
    [
        (dict(params=np.full(2, 1e300)), "params"),  # was: inf parameters after float32 cast
        (dict(params=np.zeros(2, complex)), "params"),
        (dict(params="ab"), "params"),
        (dict(params=np.array([0.0, np.nan])), "params"),
        (dict(learning_rate=1e300), "learning_rate"),  # was: a NaN trace
        (dict(learning_rate=0.1 + 0j), "learning_rate"),
        (dict(learning_rate=np.array([0.1, np.nan])), "learning_rate"),
        (dict(beta=1e-300), "beta"),  # was: beta -> 0 in float32, a NaN trace
        (dict(beta=1e300), "beta"),
        (dict(beta=True), "beta"),
        (dict(clip=1e300), "clip"),  # was: a NaN trace
        (dict(noise_multiplier=1e30, clip=1e30), "noise_multiplier * clip"),
        (dict(capacity=10**12), "capacity"),  # was: a 32 TB allocation attempt
        (dict(capacity=True), "capacity"),
        (dict(rng_key=2**70), "rng_key"),  # was: OverflowError inside JAX
        (dict(rng_key=2**40), "rng_key"),  # was: silently the same key as 2**40 mod 2**32
        (dict(rng_key=-1), "rng_key"),  # was: silently the same key as 2**32 - 1
        (dict(rng_key="0"), "rng_key"),
        (dict(data=np.ma.masked_array(X20, mask=X20 > 1)), "masked"),  # was: the values under the mask used
        (dict(rng_key=1.5), "rng_key"),
        (dict(sampling="poisson"), "sampling"),
        (dict(accountant="gdp"), "accountant"),
        (dict(progress="yes"), "progress"),
        (dict(loss_needs_key=1), "loss_needs_key"),
    ],
)
def test_dpsgd_refuses_bad_arguments_by_name(kw, names):
    kw = dict(kw)
    params = kw.pop("params", np.zeros(2, np.float32))
    data = kw.pop("data", X20)
    raises_clear(lambda: dpsgd(dot_loss, params, data, **{**DPSGD_KW, **kw}), names)


@pytest.mark.parametrize(
    "loss,names",
    [
        (lambda p, x: p - x, "scalar"),
        (lambda p, x: "x", "loss"),
        (lambda p, x: jnp.sum(p[:3] @ x[:3].T @ jnp.ones((5, 5))), "loss"),  # fails on these shapes
        (lambda p, x: 1 / 0, "ZeroDivisionError"),
        (lambda p, x: jnp.int32(1), "floating-point"),
        ("loss", "callable"),
    ],
)
def test_dpsgd_bad_losses_are_reported_before_the_run(loss, names):
    raises_clear(lambda: dpsgd(loss, np.zeros(2, np.float32), X20, **DPSGD_KW), names)


# ... and the few inputs that do run (tiny): documented results, never NaN
def _quadratic(p, x):
    return 0.5 * jnp.sum((p - x) ** 2)


def test_dpsgd_one_record_and_huge_float32_values_give_a_finite_trace():
    one = dpsgd(_quadratic, np.zeros(2, np.float32), X20[:1], **DPSGD_KW)
    assert one.num_records == 1 and np.isfinite(one.grads).all()
    # Values near the float32 limit: each gradient's squared norm overflows, so (documented) the
    # gradient is dropped (zero), and only the noise moves the parameters.
    huge = dpsgd(_quadratic, np.zeros(2, np.float32), X20 * np.float32(1e30), **DPSGD_KW)
    assert np.isfinite(huge.grads).all() and np.isfinite(huge.final_params).all()
    assert np.abs(huge.final_params).max() < 10


def test_dpsgd_that_overflows_is_an_error_not_a_nan_trace():
    with pytest.raises(ValueError, match="overflowed float32.*learning_rate"):
        dpsgd(_quadratic, np.zeros(2, np.float32), X20, **{**DPSGD_KW, "learning_rate": 3e38, "num_steps": 20})
