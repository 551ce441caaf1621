"""TARP estimates of expected coverage with positionable credible regions.

Reference: Lemos, Coogan et al. 2023, "Sampling-Based Accuracy Testing of Posterior Estimators for
General Inference" (TARP); its use for noise-aware DP posteriors in Räisä, Jälkö & Honkela, "Noise-aware
differentially private variational inference" (2024), sections 2.2, 3.1 and 13.4.

Setting. For replicates i = 1..K: theta_i ~ prior, data ~ p(data | theta_i), a release xi_i from a DP
mechanism, and M draws ``theta~_ij`` from the approximate posterior p~(theta | xi_i), all in the
unconstrained space. Given a reference point ``theta_ref,i`` (a function of the release only),

    f_i = (1/M) * #{ j : ||theta~_ij - theta_ref,i|| < ||theta_i - theta_ref,i|| }     (Euclidean)

is the posterior mass of the smallest ball around the reference that reaches the truth, and the
expected coverage of the (1 - alpha) credible ball is estimated by

    C(alpha) = (1/K) * #{ i : f_i < 1 - alpha }.

A calibrated posterior has C(alpha) = 1 - alpha for every alpha (and, with data-dependent references,
only a calibrated posterior has). Distances are compared as squared distances (the same order, and no
square root to round).

These functions are post-processing: they take posterior draws, true parameters and reference
points, never data records.

Memory: draws are read in chunks of replicates (about 64 MiB of float64 at a time), so K = 500,
M = 20,000, n = 11 needs the draws themselves plus about 0.2 GiB, and takes seconds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any, cast

import jax
import numpy as np

from .._checks import check_positive_int
from .._checks import check_real
from ..privacy.randomness import resolve_key
from ._inputs import as_real_array
from ._inputs import check_alpha
from ._inputs import check_finite
from ._inputs import check_nonempty

# Size of one chunk of draws converted to float64 (bytes); tests lower it to exercise chunking.
_CHUNK_BYTES = 64 * 2**20

#: A statistic f_i within this distance of 1 - alpha counts as equal to it (not covered).
_LEVEL_TIE = 1e-12


def _levels(alpha: np.ndarray) -> np.ndarray:
    """The credibility levels 1 - alpha, lowered by ``_LEVEL_TIE`` so that ``f < level`` applies the
    strict rule ``f_i < 1 - alpha`` to a statistic equal to 1 - alpha up to rounding the same way at
    every alpha. Without it the float 1.0 - alpha decided: f = 0.3 (3 of 10 draws) was inside the
    alpha = 0.7 region (1.0 - 0.7 = 0.30000000000000004) while f = 0.7 was outside the alpha = 0.3
    one (1.0 - 0.3 = 0.7), and with M = 1000 draws 211 of the 999 default levels counted such ties
    as covered. f takes the values j / M, so no genuine difference is this small."""
    return (1.0 - alpha) - _LEVEL_TIE


@dataclasses.dataclass(frozen=True, eq=False)
class TarpResult:
    """A TARP coverage curve, with optional bootstrap bands.

    Iterating over a result yields ``(alpha, coverage)`` only, whatever else it holds, so
    ``alpha, coverage = tarp_coverage(...)`` works with and without bootstrap bands.

    Attributes:
      alpha: the miscoverage levels, shape ``(A,)``.
      coverage: ``coverage[..., k]`` is the estimated expected coverage of the ``(1 - alpha[k])``
        credible region; shape ``(A,)`` (joint) or ``(n, A)`` (marginal, one row per dimension).
      f: the per-replicate TARP statistics ``f_i``, shape ``(K,)`` (joint) or ``(K, n)`` (marginal).
      lower: lower end of the bootstrap band (same shape as ``coverage``), or None without bootstrap.
      upper: upper end of the bootstrap band, or None without bootstrap.
      bootstrap_coverage: the bootstrap curves, shape ``(B, A)`` or ``(B, n, A)``, or None.
      band_level: the central probability of the band (e.g. 0.95), or None without bootstrap.
    """

    alpha: np.ndarray
    coverage: np.ndarray
    f: np.ndarray
    lower: np.ndarray | None = None
    upper: np.ndarray | None = None
    bootstrap_coverage: np.ndarray | None = None
    band_level: float | None = None

    def __iter__(self) -> Iterator[np.ndarray]:
        return iter((self.alpha, self.coverage))

    @property
    def rmse(self) -> float | np.ndarray:
        """:func:`coverage_rmse` of the curve (one value per dimension for a marginal result)."""
        return coverage_rmse(self.alpha, self.coverage)


@dataclasses.dataclass(frozen=True, eq=False)
class TarpRepeatsResult:
    """TARP coverage over R re-draws of the reference points on the same K replicates.

    Iterating over a result yields ``(alpha, coverage)`` with the curve averaged over repeats.

    Attributes:
      alpha: the miscoverage levels, shape ``(A,)``.
      coverage: the coverage curve averaged over the R repeats, shape ``(A,)``.
      per_repeat: one curve per reference draw, shape ``(R, A)``.
      f: the per-replicate statistics for each repeat, shape ``(R, K)``.
    """

    alpha: np.ndarray
    coverage: np.ndarray
    per_repeat: np.ndarray
    f: np.ndarray

    def __iter__(self) -> Iterator[np.ndarray]:
        return iter((self.alpha, self.coverage))

    @property
    def rmse(self) -> float:
        """RMSE of the averaged curve (the paper's summary number)."""
        return cast(float, coverage_rmse(self.alpha, self.coverage))  # one curve (A,): a float

    @property
    def single_draw_rmse(self) -> np.ndarray:
        """RMSE of each repeat's own curve, shape ``(R,)`` (more sampling noise; report beside)."""
        return cast(np.ndarray, coverage_rmse(self.alpha, self.per_repeat))  # a stack (R, A): an array

    @property
    def std(self) -> np.ndarray:
        """Standard deviation over repeats of the coverage at each alpha, shape ``(A,)``."""
        return self.per_repeat.std(axis=0)


def _check_tarp_inputs(draws: Any, theta_true: Any, references: Any, repeated: bool):
    """Validated (draws, theta float64, references float64 of shape (R, K, n))."""
    draws = as_real_array("draws", draws)
    if draws.ndim != 3:
        raise ValueError(
            "draws must have shape (K, M, n) = (replicates, posterior draws per replicate, "
            f"parameters in the unconstrained space), got shape {draws.shape}"
        )
    check_nonempty("draws", draws, "(K replicates, M draws, n parameters)")
    K, M, n = draws.shape
    theta = as_real_array("theta_true", theta_true)
    if theta.shape != (K, n):
        raise ValueError(
            f"theta_true must have shape (K, n) = {(K, n)} to match draws of shape {draws.shape} "
            f"(K, M, n), got shape {theta.shape}"
        )
    refs = as_real_array("references", references)
    if repeated:
        if refs.ndim != 3 or refs.shape[1:] != (K, n):
            raise ValueError(
                f"references must have shape (R, K, n) = (R, {K}, {n}) (R reference draws) to match "
                f"draws of shape {draws.shape} (K, M, n), got shape {refs.shape}"
            )
        check_nonempty("references", refs, "(R repeats, K replicates, n parameters)")
    else:
        if refs.shape != (K, n):
            raise ValueError(
                f"references must have shape (K, n) = {(K, n)} to match draws of shape {draws.shape} "
                f"(K, M, n), got shape {refs.shape}"
            )
        refs = refs[None]
    theta = theta.astype(np.float64)
    refs = refs.astype(np.float64)
    check_finite("theta_true", theta)
    check_finite("references", refs)
    return draws, theta, refs


def _f_statistics(draws: np.ndarray, theta: np.ndarray, refs: np.ndarray, marginal: bool) -> np.ndarray:
    """TARP statistics for R sets of references: shape (R, K), or (R, K, n) when ``marginal``.

    Reads the draws one chunk of replicates at a time (converted to float64) and reuses each chunk
    for all R reference sets.
    """
    K, M, n = draws.shape
    R = refs.shape[0]
    with np.errstate(over="ignore", invalid="ignore"):
        to_theta = theta[None] - refs  # (R, K, n)
        if marginal:
            radius = to_theta * to_theta  # (R, K, n): squared distance per dimension
            out = np.empty((R, K, n), dtype=np.float64)
        else:
            radius = np.einsum("rkn,rkn->rk", to_theta, to_theta)  # (R, K)
            out = np.empty((R, K), dtype=np.float64)
    _check_no_overflow("theta_true and references", radius)
    chunk = max(1, _CHUNK_BYTES // (M * n * 8))
    buffer = np.empty((min(chunk, K), M, n), dtype=np.float64)
    for start in range(0, K, chunk):
        stop = min(start + chunk, K)
        block = np.asarray(draws[start:stop], dtype=np.float64)
        finite = np.isfinite(block)
        if not finite.all():
            i, j, k = (int(v) for v in np.argwhere(~finite)[0])
            kind = "NaN" if np.isnan(block[i, j, k]) else "an infinite value"
            raise ValueError(
                f"draws must be finite, but they hold {kind} at index {(start + i, j, k)} (replicate, draw, parameter)"
            )
        diff = buffer[: stop - start]
        for r in range(R):
            with np.errstate(over="ignore", invalid="ignore"):
                np.subtract(block, refs[r, start:stop, None, :], out=diff)
                if marginal:
                    np.multiply(diff, diff, out=diff)
                    dist = diff
                else:
                    dist = np.einsum("kmn,kmn->km", diff, diff)  # (c, M)
            _check_no_overflow("draws and references", dist)
            inside = dist < (radius[r, start:stop, None, :] if marginal else radius[r, start:stop, None])
            out[r, start:stop] = np.count_nonzero(inside, axis=1) / M
    return out


def _check_no_overflow(names: str, squared_distances: np.ndarray) -> None:
    """Raises instead of comparing squared distances that overflowed float64 (a silently wrong f)."""
    if not np.isfinite(squared_distances).all():
        raise ValueError(
            f"{names} are too far apart: their squared distances overflow float64 (values above "
            "about 1e154); rescale the parameters (the unconstrained space should be of order 1)"
        )


def tarp_f_values(draws: Any, theta_true: Any, references: Any) -> np.ndarray:
    """Per-replicate TARP statistics f_i.

    ``f_i`` is the share of replicate i's posterior draws strictly closer (Euclidean distance) to the
    reference point than the true parameter is: the posterior mass of the smallest reference-centred
    ball that contains the truth. For a calibrated posterior, f_i ~ Uniform(0, 1).

    Args:
      draws: posterior draws in the unconstrained space, shape ``(K, M, n)`` (replicates, draws per
        replicate, parameters); numpy or JAX array.
      theta_true: the true parameters in the same space, shape ``(K, n)``.
      references: one reference point per replicate, shape ``(K, n)`` (see
        :func:`reference_points`).

    Returns:
      float64 array of shape ``(K,)`` with values in ``{0, 1/M, ..., 1}``.

    Raises:
      TypeError: if an argument is not an array of real numbers.
      ValueError: on wrong or mismatched shapes, empty arrays, NaN or infinite values.
    """
    draws, theta, refs = _check_tarp_inputs(draws, theta_true, references, repeated=False)
    return _f_statistics(draws, theta, refs, marginal=False)[0]


def _check_f(f: Any) -> tuple[np.ndarray, np.dtype]:
    """``f`` as float64, and the float dtype it was given in (float64 for integers)."""
    arr = as_real_array("f", f)
    given = arr.dtype if arr.dtype.kind == "f" else np.dtype(np.float64)
    if arr.ndim < 1:
        raise ValueError(f"f must be an array of shape (K,) or (K, ...) with K replicates, got shape {arr.shape}")
    check_nonempty("f", arr, "(K replicates, ...)")
    arr = arr.astype(np.float64)
    check_finite("f", arr)
    if (arr < 0).any() or (arr > 1).any():
        raise ValueError(f"f must hold shares in [0, 1], got values from {float(arr.min())!r} to {float(arr.max())!r}")
    return arr, given


def _levels_in(alpha: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The levels 1 - alpha against which statistics given in ``dtype`` are compared strictly.

    float64: :func:`_levels`. A lower precision (float32, float16): 1 - alpha lowered by two units in the
    last place of that precision, so that a statistic j / M computed in it (a share of draws in JAX is
    float32, rounded, and its ``mean`` is up to an ulp off) is decided by the tie rule, not by its
    rounding: with the float64 levels, float32(0.7) = 0.69999999 counted as covered at alpha = 0.3
    while float32(0.3) = 0.30000001 did not at alpha = 0.7 (489 of the 999 default levels differed for
    f = j / 1000). A float32 statistic within two ulps of 1 - alpha counts as equal to it (not covered);
    on the default grid, j / M and 1 - alpha that differ are at least 1 / (1000 M) apart, more than four
    float32 ulps for M <= 4,000 draws, so those are still told apart.
    """
    if dtype.itemsize >= 8:
        return _levels(alpha)
    level = 1.0 - alpha
    return level - 2.0 * np.spacing(level.astype(dtype)).astype(np.float64)


def _coverage_of_sorted(f_sorted: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """Share of values strictly below each level, for a sorted 1-D ``f_sorted``."""
    return np.searchsorted(f_sorted, levels, side="left") / f_sorted.shape[0]


def coverage_from_f(f: Any, alpha: Any = None) -> np.ndarray:
    """Expected coverage curve from TARP statistics: ``C(alpha) = mean_i 1[f_i < 1 - alpha]``.

    A statistic equal to ``1 - alpha`` (within 1e-12, so that the rounding of ``1 - alpha`` does not
    decide, e.g. f = 0.3 at alpha = 0.7) is not below it: the region does not cover it. Statistics
    given in float32 (or float16), as a share of draws computed in JAX is, count as equal to
    ``1 - alpha`` within two units in the last place of that precision, so that their own rounding
    does not decide either (exact for M <= 4,000 draws on the default grid).

    Args:
      f: TARP statistics with the replicates on the first axis: shape ``(K,)``, or ``(K, ...)`` for
        several curves at once (e.g. ``(K, n)`` for marginal statistics).
      alpha: miscoverage levels in (0, 1), 1-D; None for :func:`default_alpha_grid`.

    Returns:
      float64 array of shape ``f.shape[1:] + (A,)``; entry ``[..., k]`` estimates the expected
      coverage of the ``(1 - alpha[k])`` credible region.

    Raises:
      TypeError: if ``f`` or ``alpha`` is not an array of real numbers.
      ValueError: if ``f`` is empty, holds NaN or values outside [0, 1], or ``alpha`` is not a 1-D
        array of values in (0, 1).
    """
    f, given = _check_f(f)
    alpha = check_alpha(alpha)
    return _coverage(f, alpha, _levels_in(alpha, given))


def _coverage(f: np.ndarray, alpha: np.ndarray, levels: np.ndarray | None = None) -> np.ndarray:
    levels = _levels(alpha) if levels is None else levels
    K = f.shape[0]
    columns = np.sort(f.reshape(K, -1), axis=0).T  # (curves, K), each sorted
    curves = np.stack([_coverage_of_sorted(col, levels) for col in columns])
    return curves.reshape(f.shape[1:] + (alpha.shape[0],))


def _bootstrap(f: np.ndarray, alpha: np.ndarray, num: int, rng_key: Any, level: float):
    """Percentile bootstrap over replicates: (curves (B, ..., A), lower, upper)."""
    key, _ = resolve_key(rng_key)
    K = f.shape[0]
    idx = np.asarray(jax.random.randint(key, (num, K), 0, K))
    # Multiplicity of each replicate in each resample, (B, K); a resampled curve is then a weighted
    # share, computed for all resamples at once as a matrix product.
    weights = np.bincount((idx + K * np.arange(num)[:, None]).ravel(), minlength=num * K)
    weights = weights.reshape(num, K).astype(np.float64)
    levels = _levels(alpha)
    flat = f.reshape(K, -1)
    curves = np.stack(
        [weights @ (flat[:, c, None] < levels[None, :]).astype(np.float64) / K for c in range(flat.shape[1])],
        axis=1,
    )  # (B, curves, A)
    curves = curves.reshape((num,) + f.shape[1:] + (alpha.shape[0],))
    tail = (1.0 - level) / 2.0
    lower = np.quantile(curves, tail, axis=0)
    upper = np.quantile(curves, 1.0 - tail, axis=0)
    return curves, lower, upper


def _check_band_level(band_level: Any) -> float:
    v = check_real("band_level", band_level)
    if not 0 < v < 1:
        raise ValueError(f"band_level must lie in the open interval (0, 1), got {v!r}")
    return v


def _result(f: np.ndarray, alpha: np.ndarray, num: int, rng_key: Any, level: float) -> TarpResult:
    coverage = _coverage(f, alpha)
    if num == 0:
        return TarpResult(alpha=alpha, coverage=coverage, f=f)
    curves, lower, upper = _bootstrap(f, alpha, num, rng_key, level)
    return TarpResult(
        alpha=alpha,
        coverage=coverage,
        f=f,
        lower=lower,
        upper=upper,
        bootstrap_coverage=curves,
        band_level=level,
    )


def tarp_coverage(
    draws: Any,
    theta_true: Any,
    references: Any,
    alpha: Any = None,
    bootstrap: int = 0,
    rng_key: Any = None,
    *,
    band_level: float = 0.95,
) -> TarpResult:
    """TARP estimate of the expected coverage of reference-centred credible balls.

    For each replicate, ``f_i`` is the share of posterior draws strictly closer (Euclidean, in the
    unconstrained space) to the reference point than the true parameter; the coverage of the
    ``(1 - alpha)`` region is the share of replicates with ``f_i < 1 - alpha``
    (Räisä et al. 2024, 13.4), an f_i equal to ``1 - alpha`` (within 1e-12, whatever the rounding of
    ``1 - alpha``) counting as not covered. Both comparisons are strict, as in the paper and the
    ``tarp`` package: a draw exactly as far from the reference as the truth is not closer. No
    normalisation is applied to any input.

    Example::

        alpha, coverage = tarp_coverage(draws, theta_true, references)
        rmse = coverage_rmse(alpha, coverage)

    Args:
      draws: posterior draws in the unconstrained space, shape ``(K, M, n)``: K replicates, M draws
        each, n parameters. Any real dtype; numpy or JAX. Processed in chunks of replicates.
      theta_true: true parameters in the same space, shape ``(K, n)``.
      references: reference points, shape ``(K, n)``; they must not depend on ``theta_true`` other
        than through the release (see :func:`reference_points`).
      alpha: miscoverage levels, 1-D, each in (0, 1); None for :func:`default_alpha_grid`
        (0.001 to 0.999, step 0.001).
      bootstrap: number of bootstrap resamples of the replicates for a percentile band (0: none).
        The band covers the sampling noise of the K replicates, not that of the reference draw (for
        that, see :func:`tarp_coverage_repeats`).
      rng_key: JAX PRNG key or int seed for the bootstrap; None seeds it from the operating system.
      band_level: central probability of the bootstrap band, in (0, 1).

    Returns:
      A :class:`TarpResult`. It unpacks as ``alpha, coverage`` (shape ``(A,)`` each); with
      ``bootstrap > 0`` its ``lower`` and ``upper`` hold the band and ``bootstrap_coverage`` the
      resampled curves; ``f`` holds the per-replicate statistics.

    Raises:
      TypeError: if an array argument is not an array of real numbers, or ``bootstrap`` is not an
        integer.
      ValueError: on wrong or mismatched shapes, empty arrays, NaN or infinite values, alpha outside
        (0, 1), ``bootstrap < 0`` or ``band_level`` outside (0, 1).
    """
    alpha = check_alpha(alpha)
    draws, theta, refs = _check_tarp_inputs(draws, theta_true, references, repeated=False)
    num = check_positive_int(bootstrap, "bootstrap", minimum=0)
    level = _check_band_level(band_level)
    f = _f_statistics(draws, theta, refs, marginal=False)[0]
    return _result(f, alpha, num, rng_key, level)


def marginal_coverage(
    draws: Any,
    theta_true: Any,
    references: Any,
    alpha: Any = None,
    bootstrap: int = 0,
    rng_key: Any = None,
    *,
    band_level: float = 0.95,
) -> TarpResult:
    """TARP coverage of each parameter on its own (intervals ``|theta~ - ref| < |theta - ref|``).

    Dimension j uses only coordinate j of the draws, truth and references, so row j equals
    ``tarp_coverage(draws[..., j:j+1], theta_true[:, j:j+1], references[:, j:j+1])``
    (Räisä et al. 2024, 13.4, marginal coverages).

    Args:
      draws: posterior draws in the unconstrained space, shape ``(K, M, n)``.
      theta_true: true parameters, shape ``(K, n)``.
      references: reference points, shape ``(K, n)``.
      alpha: miscoverage levels in (0, 1), 1-D; None for :func:`default_alpha_grid`.
      bootstrap: number of bootstrap resamples of the replicates (0: none).
      rng_key: JAX PRNG key or int seed for the bootstrap; None seeds it from the operating system.
      band_level: central probability of the bootstrap band, in (0, 1).

    Returns:
      A :class:`TarpResult` that unpacks as ``alpha`` (shape ``(A,)``) and ``coverage`` (shape
      ``(n, A)``, one row per dimension); ``f`` has shape ``(K, n)``; bands, if any, ``(n, A)``.

    Raises:
      TypeError: if an array argument is not an array of real numbers.
      ValueError: as for :func:`tarp_coverage`.
    """
    alpha = check_alpha(alpha)
    draws, theta, refs = _check_tarp_inputs(draws, theta_true, references, repeated=False)
    num = check_positive_int(bootstrap, "bootstrap", minimum=0)
    level = _check_band_level(band_level)
    f = _f_statistics(draws, theta, refs, marginal=True)[0]  # (K, n)
    return _result(f, alpha, num, rng_key, level)


def tarp_coverage_repeats(
    draws: Any,
    theta_true: Any,
    references: Any,
    alpha: Any = None,
) -> TarpRepeatsResult:
    """TARP coverage for R re-draws of the reference points over the same K replicates.

    This is how the paper's error bands are made (the "20 repeats" re-draw the
    references, they are not new DP runs). The curve averaged over repeats carries less noise from
    the reference draw; report its RMSE (``result.rmse``) with the single-draw RMSEs beside it
    (``result.single_draw_rmse``). Each chunk of draws is read once for all R reference sets.

    Args:
      draws: posterior draws in the unconstrained space, shape ``(K, M, n)``.
      theta_true: true parameters, shape ``(K, n)``.
      references: R sets of reference points, shape ``(R, K, n)`` (see
        :func:`repeated_reference_points`).
      alpha: miscoverage levels in (0, 1), 1-D; None for :func:`default_alpha_grid`.

    Returns:
      A :class:`TarpRepeatsResult`; it unpacks as ``alpha, coverage`` with the averaged curve, and
      ``per_repeat[r]`` equals ``tarp_coverage(draws, theta_true, references[r], alpha).coverage``.

    Raises:
      TypeError: if an array argument is not an array of real numbers.
      ValueError: on wrong or mismatched shapes, empty arrays, NaN or infinite values, or alpha
        outside (0, 1).
    """
    alpha = check_alpha(alpha)
    draws, theta, refs = _check_tarp_inputs(draws, theta_true, references, repeated=True)
    f = _f_statistics(draws, theta, refs, marginal=False)  # (R, K)
    per_repeat = _coverage(f.T, alpha)  # (R, A)
    return TarpRepeatsResult(alpha=alpha, coverage=per_repeat.mean(axis=0), per_repeat=per_repeat, f=f)


def coverage_rmse(alpha: Any, coverage: Any) -> float | np.ndarray:
    """Root mean square coverage error over the alpha grid (Räisä et al. 2024, eq. 15).

    ``RMSE = sqrt(mean_k (C(alpha_k) - (1 - alpha_k))^2)``, the mean taken over the given grid
    (use the grid the curve was computed on; the default grid of every coverage function is
    :func:`default_alpha_grid`).

    Args:
      alpha: miscoverage levels, 1-D of length A, each in (0, 1).
      coverage: a curve of shape ``(A,)``, or a stack ``(..., A)`` (e.g. ``(R, A)`` repeats or
        ``(n, A)`` marginal curves), with values in [0, 1].

    Returns:
      A float for one curve; a float64 array of shape ``coverage.shape[:-1]`` for a stack.

    Raises:
      TypeError: if an argument is not an array of real numbers.
      ValueError: if alpha is not 1-D in (0, 1), the last axis of ``coverage`` does not match it, or
        ``coverage`` holds NaN or values outside [0, 1].
    """
    alpha = check_alpha(alpha)
    cov = as_real_array("coverage", coverage)
    if cov.ndim < 1 or cov.shape[-1] != alpha.shape[0]:
        raise ValueError(
            f"coverage must have shape (..., A) with A = {alpha.shape[0]} (the length of alpha), got shape {cov.shape}"
        )
    check_nonempty("coverage", cov, "(..., A)")
    cov = cov.astype(np.float64)
    check_finite("coverage", cov)
    if (cov < 0).any() or (cov > 1).any():
        raise ValueError(
            f"coverage must hold probabilities in [0, 1], got values from {float(cov.min())!r} to {float(cov.max())!r}"
        )
    err = cov - (1.0 - alpha)
    rmse = np.sqrt(np.mean(err * err, axis=-1))
    return float(rmse) if rmse.ndim == 0 else rmse
