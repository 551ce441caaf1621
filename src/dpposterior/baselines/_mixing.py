"""How well the baselines' Gibbs chains mixed: effective sample sizes of a cell's K chains.

A Gibbs baseline returns ``M`` thinned draws per replicate; when the chain's integrated
autocorrelation time is long next to ``M`` the draws understate the posterior's spread and the
baseline's coverage suffers for a reason that is not the method's. The coverage cells record these
numbers in their diagnostics so that a report can tell the two apart. Post-processing only: the
draws are already a release's post-processing.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpyro.diagnostics import effective_sample_size

#: a replicate whose least-mixed coordinate has fewer effective draws than this is counted.
LOW_ESS = 100


def ess_per_replicate(draws: Any) -> np.ndarray:
    """(K, n) effective sample size of each replicate's chain, coordinate by coordinate.

    Args:
      draws: (K, M, n) draws, one chain per replicate (M >= 4), in any parameterisation.

    Returns:
      float64 (K, n): the single-chain ESS (NumPyro's estimator: Geyer's initial monotone sequence on
      the FFT autocorrelation). 0 where a coordinate never moved (no information about its spread).
    """
    d = np.asarray(draws, np.float64)
    if d.ndim != 3 or d.shape[1] < 4:
        raise ValueError(f"draws must be (K, M, n) with M >= 4 draws per chain, got shape {d.shape}")
    ess = np.stack([np.asarray(effective_sample_size(chain[None]), np.float64) for chain in d])
    moved = np.ptp(d, axis=1) > 0
    return np.where(moved & np.isfinite(ess), ess, 0.0)


def ess_summary(draws: Any) -> dict[str, Any]:
    """JSON-ready summary of :func:`ess_per_replicate` over a cell, per replicate's least-mixed coordinate:
    ``ess_min`` (worst replicate), ``ess_median`` (median replicate) and ``replicates_with_ess_below_100``;
    all three None when the chains hold fewer than 4 draws (too few to estimate an autocorrelation)."""
    if np.ndim(draws) == 3 and np.shape(draws)[1] < 4:
        return {"ess_min": None, "ess_median": None, f"replicates_with_ess_below_{LOW_ESS}": None}
    worst = ess_per_replicate(draws).min(axis=1)
    return {
        "ess_min": float(worst.min()),
        "ess_median": float(np.median(worst)),
        f"replicates_with_ess_below_{LOW_ESS}": int(np.sum(worst < LOW_ESS)),
    }
