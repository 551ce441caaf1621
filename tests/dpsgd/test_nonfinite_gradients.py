"""Non-finite per-example gradients are dropped (they contribute exactly zero), and privacy holds for that
rule: removing any record, whatever its gradient, moves the clipped sum by at most the clip.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dpposterior.dpsgd import dpsgd
from dpposterior.dpsgd.core import clipped_sum
from input_checks import FAST


# non-finite per-example gradients: dropped (zero), and privacy holds for that rule
def _hostile_loss(p, r):
    # gradient x for a normal record (r[2] = 0); NaN when r[2] < 0 (sqrt of a negative number);
    # a gradient whose squared norm overflows float32 when r[2] is huge (1e20 * ones).
    x, z = r[:2], r[2]
    return jnp.dot(p, x) + jnp.sqrt(z) * jnp.sum(p)


def _released_sum(data, *, noise=0.0, clip=1.0):
    """grads[0] of one step with q = 1 and learning rate 0: the released (noisy) clipped sum."""
    tr = dpsgd(
        _hostile_loss,
        np.zeros(2, np.float32),
        data,
        noise_multiplier=noise,
        clip=clip,
        sampling_rate=1.0,
        num_steps=1,
        learning_rate=0.0,
        delta=1e-5,
        rng_key=3,
    )
    return tr.grads[0]


def test_records_with_non_finite_gradients_contribute_exactly_zero():
    rng = np.random.default_rng(1)
    normal = np.column_stack([rng.normal(size=(12, 2)), np.zeros(12)]).astype(np.float32)
    nan_record = np.array([[0.3, -0.2, -1.0]], np.float32)  # NaN gradient
    overflow_record = np.array([[0.3, -0.2, 3e38]], np.float32)  # finite gradient ~1.7e19, squared norm overflows
    base = _released_sum(normal)
    for hostile in (nan_record, overflow_record):
        with_it = _released_sum(np.concatenate([normal[:5], hostile, normal[5:]]))
        np.testing.assert_allclose(with_it, base, rtol=1e-6, atol=1e-6)
        # with noise and the same key the whole release is the same distribution: the same draw here
        np.testing.assert_allclose(
            _released_sum(np.concatenate([normal, hostile]), noise=2.0),
            _released_sum(normal, noise=2.0),
            rtol=1e-6,
            atol=1e-6,
        )
    # power: a finite large record is not dropped, it is clipped to norm C (and moves the sum by <= C)
    big = _released_sum(np.concatenate([normal, np.array([[50.0, 0.0, 0.0]], np.float32)]))
    assert 0.5 < np.linalg.norm(big - base) <= 1.0 + 1e-5


ROW = st.one_of(st.floats(-1e3, 1e3), st.sampled_from([math.nan, math.inf, -math.inf, 3e38, -3e38, 1e20, 1e-45]))
_clipped = jax.jit(clipped_sum, static_argnums=3)


@FAST
@given(g=hnp.arrays(np.float32, (6, 3), elements=ROW), drop=st.integers(0, 5), clip=st.sampled_from([0.1, 1.0, 7.0]))
def test_clipped_sum_sensitivity_is_at_most_clip_for_any_gradients(g, drop, clip):
    """Add/remove-one: removing any record (whatever its gradient) moves the sum by at most C."""
    mask = np.ones(6, bool)
    without = mask.copy()
    without[drop] = False
    for params_major, a in ((False, g), (True, g.T.copy())):
        full = np.asarray(_clipped(jnp.asarray(a), jnp.asarray(mask), jnp.float32(clip), params_major))
        less = np.asarray(_clipped(jnp.asarray(a), jnp.asarray(without), jnp.float32(clip), params_major))
        assert np.isfinite(full).all() and np.isfinite(less).all()
        assert np.linalg.norm(full.astype(np.float64) - less) <= clip * (1 + 1e-5)
        with np.errstate(over="ignore", invalid="ignore"):
            dropped_is_non_finite = not np.isfinite(np.sum(np.square(g[drop])))
        if dropped_is_non_finite:
            np.testing.assert_array_equal(full, less)  # a non-finite gradient contributes exactly 0
