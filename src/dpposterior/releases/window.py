"""Where the modelled window of a DPVI trace starts: one rule for the mechanism that runs the trace (the
``clip="auto"`` pilot ends there) and for the post-processing that models it (the burn-in T*)."""

from __future__ import annotations

import math


def burn_in_start(num_steps: int, burn_in: float) -> int:
    """T* = floor(burn_in * T), the first step used (0-based).

    The product is taken as exact when it lies within 1e-9 (relative) of an integer: in floating point
    0.29 * 100 is 28.999999999999996, whose floor would drop 28 steps where 29 are meant.

    Raises:
      ValueError: ``burn_in`` is not a number in [0, 1) (a negative share would count steps twice).
    """
    if not 0.0 <= burn_in < 1.0:  # also refuses NaN
        raise ValueError(f"burn_in must lie in [0, 1) (the share of the trace dropped at its start), got {burn_in!r}")
    x = burn_in * num_steps
    nearest = round(x)
    if abs(x - nearest) <= 1e-9 * max(1.0, abs(x)):
        return int(nearest)
    return int(math.floor(x))
