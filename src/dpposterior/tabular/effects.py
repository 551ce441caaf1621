"""Coefficients in the units of the user's table: the effect of one round number of original units of
each numeric feature, or of each category against its reference level, on the target's own scale
(linear model) or as an odds ratio (logistic model).

Post-processing only: a function of posterior draws and of the schema's public transforms (the design's
feature scales and the target's declared bounds), never of the records.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from .design import INTERCEPT, Design


def round_unit(scale: float) -> float:
    """A round number of original units near a feature's scale, so that an effect is neither lost in
    digits (per dollar of a salary) nor a whole range (per 72 years): 1 when the feature's half-range is
    at most 10, else the power of ten below it (10 for 36, 10,000 for 50,000)."""
    if scale <= 10:
        return 1.0
    return float(10 ** math.floor(math.log10(scale)))


def original_unit_effects(
    w_draws: np.ndarray, columns: Sequence[str], design: Design, model: str, prob: float
) -> list[dict[str, Any]]:
    """One row per coefficient other than the intercept: what it means in the table's units.

    Args:
      w_draws: (M, p) posterior draws of the weights, in the order of ``columns``.
      columns: the design column each weight multiplies.
      design: the design (its public feature scales, reference levels and target bounds are read).
      model: ``"linear"`` (effects on the target, in its units) or ``"logistic"`` (odds ratios).
      prob: the central interval's probability.

    Returns:
      Rows with ``term`` (the feature, or ``column=level``), ``per`` (the change of the feature it
      describes), ``measure`` (what the numbers are), ``median`` and the central interval ``lo``, ``hi``.
    """
    w = np.asarray(w_draws, np.float64)
    scales = dict(zip(design.feature_names, design.feature_scales))
    refs = dict(design.reference_levels)
    lo_q, hi_q = (1 - prob) / 2, 1 - (1 - prob) / 2
    rows = []
    for j, name in enumerate(columns):
        if name == INTERCEPT:
            continue
        scale = scales.get(name)
        if scale is not None:
            unit = round_unit(scale)
            per = f"+{unit:g} {name}"
            slope = w[:, j] * unit / scale  # change of the linear predictor per `unit` original units
        else:
            column, _, level = name.partition("=")
            per = f"{level} instead of {refs[column]}" if column in refs else f"{name} (1 instead of 0)"
            slope = w[:, j]
        if model == "linear":
            values, measure = slope * design.target.half_range, f"change in {design.target.name}"
        else:
            values, measure = np.exp(slope), "odds ratio"
        lo, med, hi = np.quantile(values, [lo_q, 0.5, hi_q])
        rows.append(
            {"term": name, "per": per, "measure": measure, "median": float(med), "lo": float(lo), "hi": float(hi)}
        )
    return rows
