"""Calibration of each latent coordinate on its own: marginal TARP RMSE and central-interval coverage.

Why: a joint TARP curve in n dimensions measures distances with the Euclidean norm, so the widest
coordinate dominates it, and an over-confident coordinate can be cancelled by an under-confident one.
The joint RMSE can then look fine while single coordinates are badly calibrated. These functions check
every coordinate separately, with the same reference points as the joint check.

Marginal TARP (Lemos et al., "Sampling-based accuracy testing of posterior estimators for general
inference", 2023) in one dimension: the credible region centred on the reference ``ref`` that reaches
the truth is the open interval ``(ref - r, ref + r)`` with ``r = |theta - ref|``, so

    f_ij = (1/M) * #{ m : |theta~_imj - ref_ij| < |theta_ij - ref_ij| }

is the share of replicate i's draws of coordinate j inside that interval. For a calibrated marginal
posterior f_ij ~ Uniform(0, 1) (a rank/PIT-type check); the coverage curve and its RMSE follow as for
the joint check. The draws of each replicate and coordinate are sorted once, after which each
reference costs two binary searches, not a pass over the M draws.

Central coverage: the share of replicates whose truth lies in the equal-tailed ``level`` interval of
the marginal posterior draws (the ``(1 - level)/2`` and ``(1 + level)/2`` sample quantiles, linear
interpolation, both ends included); it should equal ``level``. Its Monte Carlo standard error over the
K replicates is the binomial ``sqrt(c (1 - c) / K)``.

Noise floor of the RMSE. With K replicates and one reference draw, the squared RMSE of a calibrated
curve over the default alpha grid is the Cramer-von Mises statistic omega^2 of K uniform values: mean
1/(6K) (RMSE about 0.018 at K = 500), and K omega^2 exceeds 1.168 with probability 0.001 (Anderson
and Darling, "Asymptotic theory of certain goodness of fit criteria based on stochastic processes",
1952). The RMSE of the curve averaged over reference re-draws is at most the mean RMSE of the
single-draw curves (the norm is convex), so it sits below that floor.

Post-processing only: these functions take posterior draws, true parameters and reference points.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from .._checks import check_real
from ._inputs import as_real_array
from ._inputs import check_alpha
from ._inputs import check_finite
from ._inputs import check_nonempty
from . import coverage as _coverage_module
from .coverage import _check_tarp_inputs
from .coverage import _coverage
from .coverage import coverage_rmse


def _finite_block(block: np.ndarray, start: int) -> None:
    finite = np.isfinite(block)
    if not finite.all():
        i, j, k = (int(v) for v in np.argwhere(~finite)[0])
        kind = "NaN" if np.isnan(block[i, j, k]) else "an infinite value"
        raise ValueError(
            f"draws must be finite, but they hold {kind} at index {(start + i, j, k)} (replicate, draw, parameter)"
        )


def marginal_tarp_f(draws: Any, theta_true: Any, references: Any) -> np.ndarray:
    """Per-coordinate TARP statistics: the share of draws strictly closer to the reference than the truth.

    ``f[r, i, j]`` is the share of replicate i's draws of coordinate j with
    ``|draw - references[r, i, j]| < |theta_true[i, j] - references[r, i, j]|``. It equals
    :func:`marginal_coverage`'s ``f`` for each reference set, computed from sorted draws (two binary
    searches per reference instead of a pass over the draws). A draw within rounding of the interval's
    end (a relative 1e-16) may be counted differently from the distance comparison; exact ties (e.g.
    integer-valued draws) follow the strict rule.

    Args:
      draws: posterior draws in the unconstrained space, shape ``(K, M, n)``.
      theta_true: true parameters, shape ``(K, n)``.
      references: reference points, shape ``(K, n)`` (one set) or ``(R, K, n)`` (R re-draws, see
        :func:`repeated_reference_points`).

    Returns:
      float64 array of shape ``(K, n)`` for one set of references, ``(R, K, n)`` for R sets.

    Raises:
      TypeError: if an argument is not an array of real numbers.
      ValueError: on wrong or mismatched shapes, empty arrays, NaN or infinite values, or values so large
        that ``reference +- distance`` overflows float64.
    """
    refs_given = as_real_array("references", references)
    repeated = refs_given.ndim == 3
    draws, theta, refs = _check_tarp_inputs(draws, theta_true, refs_given, repeated=repeated)
    f = _marginal_f(draws, theta, refs)
    return f if repeated else f[0]


def _marginal_f(draws: np.ndarray, theta: np.ndarray, refs: np.ndarray) -> np.ndarray:
    """(R, K, n) marginal TARP statistics from validated inputs (refs of shape (R, K, n))."""
    K, M, n = draws.shape
    R = refs.shape[0]
    with np.errstate(over="ignore", invalid="ignore"):
        radius = np.abs(theta[None] - refs)  # (R, K, n)
        low, high = refs - radius, refs + radius
    if not (np.isfinite(low).all() and np.isfinite(high).all()):
        raise ValueError(
            "theta_true and references are too far apart: reference +- |truth - reference| "
            "overflows float64 (values above about 1e308); rescale the parameters (the "
            "unconstrained space should be of order 1)"
        )
    out = np.empty((R, K, n), dtype=np.float64)
    chunk = max(1, _coverage_module._CHUNK_BYTES // (M * n * 8))  # the joint check's chunk size
    for start in range(0, K, chunk):
        stop = min(start + chunk, K)
        block = np.asarray(draws[start:stop], dtype=np.float64)
        _finite_block(block, start)
        ordered = np.sort(block, axis=1)  # (c, M, n): each replicate's draws of each coordinate sorted
        for i in range(stop - start):
            for j in range(n):
                column = ordered[i, :, j]
                # draws strictly inside (low, high): those below high, less those at or below low
                inside = np.searchsorted(column, high[:, start + i, j], side="left") - np.searchsorted(
                    column, low[:, start + i, j], side="right"
                )
                out[:, start + i, j] = np.maximum(inside, 0) / M  # an empty interval (r = 0) holds none
    return out


def marginal_tarp_rmse(draws: Any, theta_true: Any, references: Any, alpha: Any = None) -> np.ndarray:
    """The TARP coverage RMSE of each latent coordinate on its own.

    Coordinate j's curve is the TARP coverage of ``draws[..., j]`` against ``theta_true[:, j]`` with
    ``references[..., j]`` (one-dimensional credible intervals centred on the references); with R
    reference sets the curve is averaged over them before the RMSE is taken, as the joint summary of
    :func:`tarp_coverage_repeats` is. With one coordinate the result equals the joint RMSE.

    Example::

        refs = repeated_reference_points(0, center, posterior_sd, repeats=20)
        joint = tarp_coverage_repeats(draws, theta_true, refs).rmse
        per_latent = marginal_tarp_rmse(draws, theta_true, refs)   # shape (n,)

    Args:
      draws: posterior draws in the unconstrained space, shape ``(K, M, n)``.
      theta_true: true parameters, shape ``(K, n)``.
      references: reference points, ``(K, n)`` or ``(R, K, n)``; the same ones as the joint check.
      alpha: miscoverage levels in (0, 1), 1-D; None for :func:`default_alpha_grid`.

    Returns:
      float64 array of shape ``(n,)``: the RMSE of each coordinate's (averaged) coverage curve.

    Raises:
      TypeError: if an argument is not an array of real numbers.
      ValueError: as for :func:`marginal_tarp_f`, or alpha not a 1-D array of values in (0, 1).
    """
    alpha = check_alpha(alpha)
    f = marginal_tarp_f(draws, theta_true, references)
    f = f if f.ndim == 3 else f[None]
    curves = np.mean([_coverage(f[r], alpha) for r in range(f.shape[0])], axis=0)  # (n, A)
    return np.atleast_1d(coverage_rmse(alpha, curves))


@dataclasses.dataclass(frozen=True, eq=False)
class CentralCoverage:
    """Coverage of the equal-tailed central credible interval of each coordinate.

    Attributes:
      level: the interval's central probability (e.g. 0.9).
      coverage: share of replicates whose truth lies in the interval, shape ``(n,)``.
      standard_error: binomial Monte Carlo standard error ``sqrt(c (1 - c) / K)``, shape ``(n,)``.
      covered: whether each replicate's truth lies in its interval, shape ``(K, n)``.
    """

    level: float
    coverage: np.ndarray
    standard_error: np.ndarray
    covered: np.ndarray


def _check_level(level: Any) -> float:
    value = check_real("level", level)
    if not 0 < value < 1:
        raise ValueError(
            f"level is the central probability of the interval and must lie in the open interval "
            f"(0, 1), e.g. 0.9; got {level!r}"
        )
    return value


def central_coverage(draws: Any, theta_true: Any, level: float = 0.9) -> CentralCoverage:
    """Share of replicates whose truth lies in the equal-tailed ``level`` credible interval, per coordinate.

    The interval of replicate i and coordinate j runs from the ``(1 - level)/2`` to the
    ``(1 + level)/2`` sample quantile of ``draws[i, :, j]`` (linear interpolation, both ends included).
    A calibrated posterior covers with probability ``level`` in every coordinate; an over-confident
    coordinate covers less, an under-confident one more.

    Example::

        result = central_coverage(draws, theta_true, level=0.9)
        result.coverage, result.standard_error   # each of shape (n,)

    Args:
      draws: posterior draws, shape ``(K, M, n)``, in the space in which the interval is taken (sample
        quantiles commute with increasing maps, so the unconstrained and constrained spaces agree up
        to the interpolation between neighbouring draws).
      theta_true: true parameters in the same space, shape ``(K, n)``.
      level: central probability of the interval, in (0, 1).

    Returns:
      A :class:`CentralCoverage`.

    Raises:
      TypeError: if an array is not real, or ``level`` not a real number.
      ValueError: on wrong or mismatched shapes, empty arrays, NaN or infinite values, or ``level``
        outside (0, 1).
    """
    value = _check_level(level)
    arr = as_real_array("draws", draws)
    if arr.ndim != 3:
        raise ValueError(
            "draws must have shape (K, M, n) = (replicates, posterior draws per replicate, "
            f"parameters), got shape {arr.shape}"
        )
    check_nonempty("draws", arr, "(K replicates, M draws, n parameters)")
    K, M, n = arr.shape
    theta = as_real_array("theta_true", theta_true)
    if theta.shape != (K, n):
        raise ValueError(
            f"theta_true must have shape (K, n) = {(K, n)} to match draws of shape {arr.shape} "
            f"(K, M, n), got shape {theta.shape}"
        )
    theta = theta.astype(np.float64)
    check_finite("theta_true", theta)
    quantiles = np.array([(1.0 - value) / 2.0, (1.0 + value) / 2.0])
    covered = np.empty((K, n), dtype=bool)
    chunk = max(1, _coverage_module._CHUNK_BYTES // (M * n * 8))  # the joint check's chunk size
    for start in range(0, K, chunk):
        stop = min(start + chunk, K)
        block = np.asarray(arr[start:stop], dtype=np.float64)
        _finite_block(block, start)
        low, high = np.quantile(block, quantiles, axis=1)  # each (c, n)
        covered[start:stop] = (low <= theta[start:stop]) & (theta[start:stop] <= high)
    coverage = covered.mean(axis=0)
    return CentralCoverage(
        level=value, coverage=coverage, standard_error=np.sqrt(coverage * (1 - coverage) / K), covered=covered
    )
