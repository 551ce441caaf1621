"""Calibration of predicted probabilities: equal-count reliability curve, Brier score, RMSE.

Used for the UCI Adult experiment of Räisä et al. 2024 (its reference implementation: "calibration curve
with 10 equal-count bins"). Post-processing: takes predicted probabilities and observed binary
outcomes (e.g. of a held-out test set), never training records.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from .._checks import check_positive_int
from ._inputs import as_real_array
from ._inputs import check_not_masked


@dataclasses.dataclass(frozen=True, eq=False)
class CalibrationResult:
    """An equal-count calibration (reliability) curve and its summaries.

    Attributes:
      mean_predicted: mean predicted probability in each bin, shape ``(B,)``, increasing.
      observed_frequency: share of positive outcomes in each bin, shape ``(B,)`` (predictions tied
        across a bin boundary count with their tie's mean outcome: see :func:`calibration_curve`).
      counts: number of predictions in each bin, shape ``(B,)``; they differ by at most one.
      bin_lower: smallest predicted probability in each bin, shape ``(B,)``.
      bin_upper: largest predicted probability in each bin, shape ``(B,)``.
      brier: the Brier score, ``mean((probability - outcome)^2)`` over all predictions.
      rmse: the calibration RMSE, ``sqrt(mean over bins of (observed - predicted)^2)``; weighted by
        the bin counts when ``weighted`` is True.
      weighted: whether ``rmse`` weights the bins by their counts.
    """

    mean_predicted: np.ndarray
    observed_frequency: np.ndarray
    counts: np.ndarray
    bin_lower: np.ndarray
    bin_upper: np.ndarray
    brier: float
    rmse: float
    weighted: bool


def _check_probabilities(probabilities: Any) -> np.ndarray:
    p = as_real_array("probabilities", probabilities)
    if p.ndim != 1:
        raise ValueError(f"probabilities must be a 1-D array (one per prediction), got shape {p.shape}")
    if p.size == 0:
        raise ValueError("probabilities must not be empty")
    p = p.astype(np.float64)
    if np.isnan(p).any():
        first = int(np.flatnonzero(np.isnan(p))[0])
        raise ValueError(f"probabilities must not contain NaN (first at index {first})")
    bad = (p < 0) | (p > 1)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"probabilities must lie in [0, 1], got {float(p[i])!r} at index {i}")
    return p


def _check_outcomes(outcomes: Any, length: int) -> np.ndarray:
    check_not_masked("outcomes", outcomes)
    try:
        y = np.asarray(outcomes)
    except ValueError:  # ragged nested lists: as_real_array gives the TypeError
        y = None
    if y is not None and y.dtype.kind == "b":
        y = y.astype(np.float64)
    else:
        y = as_real_array("outcomes", outcomes)
    if y.ndim != 1:
        raise ValueError(f"outcomes must be a 1-D array (one per prediction), got shape {y.shape}")
    if y.shape[0] != length:
        raise ValueError(
            f"outcomes and probabilities must have the same length, got {y.shape[0]} outcomes "
            f"and {length} probabilities"
        )
    y = y.astype(np.float64)
    if np.isnan(y).any():
        first = int(np.flatnonzero(np.isnan(y))[0])
        raise ValueError(f"outcomes must not contain NaN (first at index {first})")
    bad = (y != 0) & (y != 1)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"outcomes must be 0 or 1 (or booleans), got {float(y[i])!r} at index {i}")
    return y


def calibration_curve(
    probabilities: Any,
    outcomes: Any,
    bins: int = 10,
    *,
    weighted: bool = False,
) -> CalibrationResult:
    """Equal-count calibration curve of predicted probabilities against binary outcomes.

    The predictions are sorted by predicted probability (a stable sort) and cut into ``bins``
    consecutive groups of equal size (sizes differ by at most one when the count does not divide:
    the first groups get the extra one). These are quantile bins of the predicted probability; when
    several predictions share one value at a bin boundary they may fall in adjacent bins, which keeps
    the counts equal. Which of the tied predictions fall in which bin is then arbitrary (the input
    order), so each of them counts in ``observed_frequency`` with the mean outcome of its tie: the
    expected curve over every order of the tied predictions. The curve is thus a function of the
    (probability, outcome) pairs, not of their order (with 6 predictions of 0.5, three of them
    positive, and 2 bins, both bins observe 0.5 whatever the order).

    The calibration RMSE is ``sqrt(mean_b (observed_b - predicted_b)^2)`` over the bins, unweighted
    by default (the paper's "calibration RMSE"); with ``weighted=True`` each bin counts in proportion
    to its size (with equal-count bins the two differ only by the rounding of the sizes).

    Args:
      probabilities: predicted probabilities of the positive class, 1-D, in [0, 1], no NaN.
      outcomes: observed outcomes, 1-D, same length, each 0 or 1 (or booleans).
      bins: number of bins, an integer in [1, number of predictions].
      weighted: weight the bins by their counts in the RMSE.

    Returns:
      A :class:`CalibrationResult`.

    Raises:
      TypeError: if an argument has the wrong type (non-numeric arrays, a non-integer ``bins``).
      ValueError: on empty inputs, lengths that differ, NaN, probabilities outside [0, 1], outcomes
        other than 0/1, or ``bins`` outside [1, number of predictions].
    """
    p = _check_probabilities(probabilities)
    y = _check_outcomes(outcomes, p.shape[0])
    num_bins = check_positive_int(bins, "bins", minimum=1)
    if num_bins > p.shape[0]:
        raise ValueError(
            f"bins must be at most the number of predictions ({p.shape[0]}) so that no bin is empty, got {bins}"
        )
    if not isinstance(weighted, (bool, np.bool_)):
        raise TypeError(f"weighted must be True or False, got {weighted!r}")
    weighted = bool(weighted)  # a numpy boolean (e.g. read from a settings array) is the bool it holds

    order = np.argsort(p, kind="stable")
    p_sorted, y_sorted = p[order], y[order]
    # each run of tied probabilities shares its mean outcome (the bins cut through ties by position)
    starts = np.flatnonzero(np.r_[True, p_sorted[1:] != p_sorted[:-1]])
    sizes = np.diff(np.r_[starts, p_sorted.shape[0]])
    y_tied = np.repeat(np.add.reduceat(y_sorted, starts) / sizes, sizes)
    groups = np.array_split(np.arange(p_sorted.shape[0]), num_bins)
    counts = np.array([g.shape[0] for g in groups], dtype=np.int64)
    mean_predicted = np.array([p_sorted[g].mean() for g in groups])
    observed = np.array([y_tied[g].mean() for g in groups])
    bin_lower = np.array([p_sorted[g].min() for g in groups])
    bin_upper = np.array([p_sorted[g].max() for g in groups])

    gap2 = (observed - mean_predicted) ** 2
    if weighted:
        rmse = float(np.sqrt(np.sum(counts * gap2) / counts.sum()))
    else:
        rmse = float(np.sqrt(np.mean(gap2)))
    brier = float(np.mean((p - y) ** 2))
    return CalibrationResult(
        mean_predicted=mean_predicted,
        observed_frequency=observed,
        counts=counts,
        bin_lower=bin_lower,
        bin_upper=bin_upper,
        brier=brier,
        rmse=rmse,
        weighted=weighted,
    )
