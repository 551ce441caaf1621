"""Argument checks shared by the validation functions.

Every public function of :mod:`dpposterior.validation` checks its arguments here and raises a
``TypeError`` (wrong kind of object) or ``ValueError`` (wrong shape or value) whose message names the
argument, what was given and what is allowed. Nothing is clamped or reshaped silently.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from .._checks import check_real

#: Number of points of the default alpha grid: alpha = 0.001, 0.002, ..., 0.999.
DEFAULT_ALPHA_POINTS = 999


def default_alpha_grid() -> np.ndarray:
    """The default grid of miscoverage levels alpha, shared by every coverage function.

    The grid is ``alpha = 0.001, 0.002, ..., 0.999`` (999 points, step 0.001), the range of
    the reference implementation of Räisä et al. (2024). Why so fine: the empirical coverage curve is a
    step function with a step at each replicate's ``1 - f_i``; with a step of 0.001 every step of a curve from up to
    about 1000 replicates is seen, and the RMSE over the grid is then the L2 distance between the
    curve and the diagonal (a Riemann sum of it), not a value that depends on where a coarse grid
    happens to fall. It costs nothing (one sort of the K values ``f_i`` and a binary search).

    Returns:
      A new float64 array of shape ``(999,)``.
    """
    return np.arange(1, DEFAULT_ALPHA_POINTS + 1, dtype=np.float64) / (DEFAULT_ALPHA_POINTS + 1)


def check_not_masked(name: str, value: Any) -> None:
    """Raises ValueError if ``value`` is a numpy masked array with masked entries: ``np.asarray`` drops
    the mask, so the values under it (a user's missing or excluded entries) would be used silently."""
    if np.ma.is_masked(value):
        raise ValueError(
            f"{name} is a masked array with {int(np.ma.count_masked(value))} masked value(s); the "
            "mask would be ignored and the values under it used: remove those entries (or replicates) "
            "first"
        )


def as_real_array(name: str, value: Any) -> np.ndarray:
    """``value`` as a numpy array of real numbers (dtype kept), or a TypeError.

    Accepts numpy arrays, JAX arrays and nested sequences. Booleans, complex numbers, strings,
    objects and mappings (e.g. a dict of posterior sites) are refused, and so (a ValueError) is a
    masked array with masked entries (:func:`check_not_masked`).
    """
    check_not_masked(name, value)
    if isinstance(value, Mapping):
        raise TypeError(
            f"{name} must be an array of real numbers, got a {type(value).__name__} "
            f"(keys {list(value)[:5]}); stack the sites into one array first"
        )
    try:
        arr = np.asarray(value)
    except Exception as err:  # ragged lists and the like
        raise TypeError(f"{name} must be an array of real numbers, could not convert it: {err}") from err
    if arr.dtype.kind not in "fiu":
        raise TypeError(
            f"{name} must be an array of real numbers (float or int), got dtype {arr.dtype} "
            f"from a {type(value).__name__}"
        )
    return arr


def check_finite(name: str, arr: np.ndarray) -> None:
    """Raises ValueError if ``arr`` holds a NaN or an infinity, saying where the first one is."""
    finite = np.isfinite(arr)
    if not finite.all():
        where = tuple(int(i) for i in np.argwhere(~finite)[0])
        kind = "NaN" if np.isnan(arr[where]) else "an infinite value"
        raise ValueError(f"{name} must be finite, but it holds {kind} at index {where}")


def check_nonempty(name: str, arr: np.ndarray, axes_names: str) -> None:
    """Raises ValueError if any axis of ``arr`` has length 0."""
    if arr.size == 0:
        raise ValueError(f"{name} must not be empty: got shape {arr.shape} for {axes_names}")


def check_alpha(alpha: Any) -> np.ndarray:
    """The alpha grid as a float64 1-D array with every value in the open interval (0, 1).

    ``None`` gives :func:`default_alpha_grid`.
    """
    if alpha is None:
        return default_alpha_grid()
    arr = as_real_array("alpha", alpha)
    if arr.ndim != 1:
        raise ValueError(f"alpha must be a 1-D array of miscoverage levels, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError("alpha must not be empty: give at least one level in (0, 1)")
    arr = arr.astype(np.float64)
    if np.isnan(arr).any():
        raise ValueError("alpha must not contain NaN; every level must lie in the open interval (0, 1)")
    bad = (arr <= 0) | (arr >= 1)
    if bad.any():
        raise ValueError(
            f"alpha must lie in the open interval (0, 1), got {arr[bad][:5].tolist()} "
            f"(at positions {np.flatnonzero(bad)[:5].tolist()})"
        )
    return arr


def check_bound_pair(low: Any, high: Any) -> tuple[float, float]:
    """``low`` and ``high`` as finite floats with ``low < high``."""
    lo = check_real("low", low)
    hi = check_real("high", high)
    if not (math.isfinite(lo) and math.isfinite(hi)) or not lo < hi:
        raise ValueError(f"low and high must be finite with low < high, got low={lo!r}, high={hi!r}")
    return lo, hi
