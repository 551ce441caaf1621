"""Data-dependent reference points for TARP (Räisä et al. 2024, 13.4).

TARP with reference points that do not depend on the release cannot tell the prior from the
posterior (Lemos et al. 2023): the prior used as the posterior has perfect coverage then. The paper
therefore centres each reference on a statistic of the release (the mean of the DP-SGD trace after
burn-in, mapped to the space the draws live in) and spreads it by the posterior standard deviation:

    reference_i = center_i + u_i * scale_i,   u_i ~ Uniform(low, high) per dimension (default (-4, 4)).

Both ``center`` and ``scale`` must be functions of the release only (never of the true parameter).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import FLOAT32_MAX
from .._checks import check_positive_int
from ..privacy.randomness import resolve_key
from ._inputs import as_real_array
from ._inputs import check_bound_pair
from ._inputs import check_finite


def _check_center_scale(center: Any, scale: Any) -> tuple[np.ndarray, np.ndarray]:
    c = as_real_array("center", center)
    s = as_real_array("scale", scale)
    if c.ndim < 1:
        raise ValueError(f"center must have shape (K, n) (one point per replicate), got shape {c.shape}")
    if s.shape != c.shape:
        raise ValueError(f"scale must have the shape of center, {c.shape} (K, n), got shape {s.shape}")
    if c.size == 0:
        raise ValueError(f"center and scale must not be empty, got shape {c.shape}")
    c = c.astype(np.float64)
    s = s.astype(np.float64)
    check_finite("center", c)
    check_finite("scale", s)
    if (s <= 0).any():
        raise ValueError(
            f"scale holds posterior standard deviations and must be > 0, got a minimum of {float(s.min())!r}"
        )
    return c, s


def _offsets(key: jax.Array, shape: tuple[int, ...], low: float, high: float) -> np.ndarray:
    u = jax.random.uniform(key, shape, dtype=jnp.float32, minval=low, maxval=high)
    return np.asarray(u, dtype=np.float64)


def _points(key: jax.Array, c: np.ndarray, s: np.ndarray, low: float, high: float) -> np.ndarray:
    """``c + Uniform(low, high) * s``, or a ValueError instead of a NaN or infinite point."""
    offsets = _offsets(key, c.shape, low, high) if max(-low, high) <= FLOAT32_MAX else None
    if offsets is None or not np.isfinite(offsets).all():
        raise ValueError(
            f"low and high must lie within the float32 range, with high - low too (the offsets "
            f"are drawn in float32, |x| <= {FLOAT32_MAX:.4g}), got low={low!r}, high={high!r}"
        )
    with np.errstate(over="ignore", invalid="ignore"):
        points = c + offsets * s
    if not np.isfinite(points).all():
        raise ValueError(
            "center + offset * scale overflows float64 (values above about 1.8e308); rescale "
            "center and scale (the unconstrained space should be of order 1)"
        )
    return points


def reference_points(
    key: Any,
    center: Any,
    scale: Any,
    low: float = -4.0,
    high: float = 4.0,
) -> np.ndarray:
    """The paper's data-dependent reference points: ``center + Uniform(low, high) * scale``.

    Args:
      key: JAX PRNG key or int seed; None seeds from the operating system (not reproducible).
      center: shape ``(K, n)``: per replicate, a statistic of the release in the space the draws
        live in (the paper: the mean of the DP-SGD mu-trace after burn-in).
      scale: shape ``(K, n)``: per replicate, the posterior standard deviation of each parameter,
        > 0.
      low: lower end of the uniform offset, in units of ``scale``.
      high: upper end of the uniform offset, in units of ``scale``; ``low < high``.

    Returns:
      float64 array of the shape of ``center``; each offset ``(ref - center) / scale`` lies in
      ``[low, high)``, independently per entry.

    Raises:
      TypeError: if ``key`` is not a key, int or None, or an array argument is not real.
      ValueError: on mismatched or empty shapes, non-finite values, ``scale <= 0``,
        ``low >= high``, ``low``/``high`` beyond the float32 range, or points that overflow.
    """
    raw_key, _ = resolve_key(key)
    c, s = _check_center_scale(center, scale)
    lo, hi = check_bound_pair(low, high)
    return _points(raw_key, c, s, lo, hi)


def repeated_reference_points(
    key: Any,
    center: Any,
    scale: Any,
    repeats: int,
    low: float = -4.0,
    high: float = 4.0,
) -> np.ndarray:
    """R independent draws of :func:`reference_points` over the same replicates.

    ``result[r]`` equals ``reference_points(jax.random.split(key, repeats)[r], center, scale, low,
    high)``. Feed the result to :func:`tarp_coverage_repeats` for the paper's error bands (20
    repeats in the paper).

    Args:
      key: JAX PRNG key or int seed; None seeds from the operating system (not reproducible).
      center: shape ``(K, n)``, as for :func:`reference_points`.
      scale: shape ``(K, n)``, > 0.
      repeats: number R of reference draws, >= 1.
      low: lower end of the uniform offset, in units of ``scale``.
      high: upper end of the uniform offset; ``low < high``.

    Returns:
      float64 array of shape ``(R,) + center.shape``.

    Raises:
      TypeError: as for :func:`reference_points`, or if ``repeats`` is not an integer.
      ValueError: as for :func:`reference_points`, or if ``repeats < 1``.
    """
    raw_key, _ = resolve_key(key)
    c, s = _check_center_scale(center, scale)
    lo, hi = check_bound_pair(low, high)
    num = check_positive_int(repeats, "repeats", minimum=1)
    keys = jax.random.split(raw_key, num)
    return np.stack([_points(keys[r], c, s, lo, hi) for r in range(num)])
