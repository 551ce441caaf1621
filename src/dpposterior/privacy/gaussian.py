"""Calibrating the Gaussian mechanism: the classic bound and the analytic (exact) one.

The Gaussian mechanism releases ``f(D) + N(0, sigma^2 I)``. Its guarantee holds for whichever
neighbouring relation the L2 sensitivity ``Delta = max ||f(D) - f(D')||_2`` is computed under: for a
sum of per-record vectors clipped to norm C, Delta = C under add/remove-one adjacency and 2C under
replace-one adjacency. No sampling is involved here (see :mod:`.composition` for amplification by
subsampling).
"""

from __future__ import annotations

import math

from scipy.special import log_ndtr, ndtr

from .._checks import check_delta, check_epsilon, check_positive


def gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """The classic calibration of the Gaussian mechanism: sigma = Delta sqrt(2 ln(1.25/delta)) / epsilon.

    Privacy: adding N(0, sigma^2 I) with this sigma to a function of L2 sensitivity ``sensitivity``
    gives (epsilon, delta)-DP under the neighbouring relation the sensitivity is computed for
    (Dwork & Roth 2014, Theorem A.1). The theorem holds only for epsilon < 1; for larger epsilon
    use :func:`analytic_gaussian_sigma`, which is exact for every epsilon and never larger than
    this bound. No subsampling.

    Args:
      epsilon: target epsilon, in (0, 1).
      delta: target delta, in (0, 1).
      sensitivity: L2 sensitivity Delta of the released function, finite and > 0.

    Returns:
      The noise standard deviation sigma (in the units of the released function).

    Raises:
      ValueError: epsilon outside (0, 1), delta outside (0, 1), or a sensitivity that is not a
        finite number > 0.
    """
    eps = check_epsilon(epsilon)
    if eps >= 1.0:
        raise ValueError(
            f"the classic Gaussian mechanism bound sqrt(2 ln(1.25/delta))/epsilon holds only for "
            f"epsilon < 1 (Dwork & Roth 2014, Theorem A.1), got epsilon={epsilon!r}; use "
            "analytic_gaussian_sigma, which is exact for every epsilon")
    d = check_delta(delta)
    sens = check_positive(sensitivity, "sensitivity")
    return sens * math.sqrt(2.0 * math.log(1.25 / d)) / eps


def _analytic_gaussian_delta(noise_multiplier: float, epsilon: float) -> float:
    """The exact delta(epsilon) of the Gaussian mechanism with noise std = noise_multiplier * Delta.

    Balle & Wang (2018), Theorem 8: the mechanism is (epsilon, delta)-DP iff
    delta >= Phi(1/(2s) - epsilon s) - e^epsilon Phi(-1/(2s) - epsilon s), s = sigma / Delta.
    """
    s = noise_multiplier
    a = 0.5 / s - epsilon * s
    b = -0.5 / s - epsilon * s
    first = float(ndtr(a))
    second = math.exp(min(epsilon + float(log_ndtr(b)), 700.0))
    return max(first - second, 0.0)


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """The smallest sigma for which the Gaussian mechanism is (epsilon, delta)-DP (analytic calibration).

    Privacy: adding N(0, sigma^2 I) to a function of L2 sensitivity ``sensitivity`` is
    (epsilon, delta)-DP, under the neighbouring relation the sensitivity is computed for, exactly
    when Phi(Delta/(2 sigma) - epsilon sigma/Delta) - e^epsilon Phi(-Delta/(2 sigma) - epsilon sigma/Delta)
    <= delta (Balle & Wang 2018, "Improving the Gaussian mechanism for differential privacy",
    Theorem 8). We solve that condition by bisection on sigma / Delta to about 1e-12 relative
    and return the upper end of the final bracket, so the condition holds at the returned sigma
    (conservative). Valid for every epsilon > 0; never larger than :func:`gaussian_sigma`. No
    subsampling.

    Args:
      epsilon: target epsilon, finite and > 0.
      delta: target delta, in (0, 1).
      sensitivity: L2 sensitivity Delta of the released function, finite and > 0.

    Returns:
      The noise standard deviation sigma (in the units of the released function).

    Raises:
      ValueError: epsilon not a finite number > 0, delta outside (0, 1), or an invalid sensitivity.
    """
    eps = check_epsilon(epsilon)
    d = check_delta(delta)
    sens = check_positive(sensitivity, "sensitivity")
    # Bracket s = sigma / Delta: delta(s) decreases in s.
    hi = math.sqrt(2.0 * math.log(1.25 / d)) / eps
    while _analytic_gaussian_delta(hi, eps) > d:
        hi *= 2.0
    lo = hi / 2.0
    while _analytic_gaussian_delta(lo, eps) <= d:
        hi, lo = lo, lo / 2.0
        if lo < 1e-300:
            raise ArithmeticError(f"analytic Gaussian calibration failed for epsilon={eps}, delta={d}")
    for _ in range(200):
        if hi - lo <= 1e-12 * hi:
            break
        mid = 0.5 * (lo + hi)
        if _analytic_gaussian_delta(mid, eps) <= d:
            hi = mid
        else:
            lo = mid
    return sens * hi
