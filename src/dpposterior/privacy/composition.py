"""Classic composition tools: advanced composition, amplification by Poisson subsampling, zCDP.

These serve the DP dropout and DP MCMC methods, whose papers account with them. They are valid but
loose next to the PLD accountant of :mod:`.dpsgd_accounting`, which should be preferred for new
work. Each function states the neighbouring relation it assumes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Literal

import numpy as np
from scipy.optimize import minimize_scalar

from .._checks import check_delta, check_epsilon, check_positive, check_positive_int, check_sampling_rate
from .spent import NEIGHBOURING_RELATIONS


def _exp_minus_one(x: float) -> float:
    """e^x - 1, inf instead of an OverflowError."""
    try:
        return math.expm1(x)
    except OverflowError:
        return math.inf


def advanced_composition(epsilon: float, delta: float, num_steps: int, delta_prime: float) -> tuple[float, float]:
    """Advanced composition of ``num_steps`` (epsilon, delta)-DP mechanisms (Dwork & Roth 2014, Thm 3.20).

    The k-fold adaptive composition of (epsilon, delta)-DP mechanisms is (epsilon_total,
    delta_total)-DP with

        epsilon_total = sqrt(2 k ln(1/delta')) epsilon + k epsilon (e^epsilon - 1),
        delta_total = k delta + delta'.

    Holds for any neighbouring relation, as long as every mechanism's guarantee is for that same
    relation. The bound is returned as stated, without taking the minimum with basic composition
    (k epsilon, k delta), which is smaller when epsilon is large or k small; and it is much looser
    than a PLD or RDP accountant for Gaussian mechanisms.

    Args:
      epsilon: per-mechanism epsilon, finite and > 0.
      delta: per-mechanism delta, in [0, 1) (0 for pure DP).
      num_steps: number of composed mechanisms k, an int >= 1.
      delta_prime: the slack delta' in (0, 1).

    Returns:
      (epsilon_total, delta_total); epsilon_total is ``inf`` if e^epsilon overflows.

    Raises:
      ValueError: invalid arguments, or delta_total >= 1 (a vacuous guarantee).
      TypeError: num_steps not an int.
    """
    eps = check_epsilon(epsilon)
    d = check_delta(delta, allow_zero=True)
    k = check_positive_int(num_steps, "num_steps")
    dp = check_delta(delta_prime, "delta_prime")
    eps_total = math.sqrt(-2.0 * k * math.log(dp)) * eps + k * eps * _exp_minus_one(eps)
    delta_total = k * d + dp
    if delta_total >= 1.0:
        raise ValueError(
            f"advanced composition gives delta_total = num_steps * delta + delta_prime = {delta_total:g} "
            f">= 1 (num_steps={k}, delta={d:g}, delta_prime={dp:g}): the guarantee is vacuous; lower delta "
            "or delta_prime"
        )
    return eps_total, delta_total


def amplify_by_poisson_subsampling(
    epsilon: float,
    delta: float,
    sampling_rate: float,
    neighbouring: Literal["add_remove", "replace_one"] = "add_remove",
) -> tuple[float, float]:
    """Privacy amplification by Poisson subsampling of an (epsilon, delta)-DP mechanism.

    Running an (epsilon, delta)-DP mechanism (add/remove-one adjacency) on a subsample that
    includes every record independently with probability q gives
    (ln(1 + q (e^epsilon - 1)), q delta)-DP under add/remove-one adjacency (Balle, Barthe &
    Gaboardi 2018, "Privacy amplification by subsampling", Theorem 8 / Table 1).

    Replace-one adjacency is refused: the same bound then needs the base mechanism to be
    (epsilon, delta)-DP under both replace-one and add/remove-one adjacency of the subsample (it
    follows from the advanced joint convexity of Balle et al. 2018, Theorem 2), which this function
    cannot check. A Gaussian mechanism calibrated to the replace-one sensitivity satisfies both; the
    DP dropout accountants (:mod:`.dp_dropout`) use the bound on that basis.

    Args:
      epsilon: the base mechanism's epsilon, finite and > 0.
      delta: the base mechanism's delta, in [0, 1).
      sampling_rate: the Poisson sampling rate q, in (0, 1].
      neighbouring: ``"add_remove"`` (the only relation accepted).

    Returns:
      (epsilon', delta') of the subsampled mechanism.

    Raises:
      ValueError: invalid arguments, or ``neighbouring="replace_one"``.
    """
    eps = check_epsilon(epsilon)
    d = check_delta(delta, allow_zero=True)
    q = check_sampling_rate(sampling_rate)
    if neighbouring not in NEIGHBOURING_RELATIONS:
        raise ValueError(f"neighbouring must be one of {NEIGHBOURING_RELATIONS}, got {neighbouring!r}")
    if neighbouring == "replace_one":
        raise ValueError(
            "amplify_by_poisson_subsampling supports neighbouring='add_remove' only: under replace-one "
            "adjacency ln(1 + q(e^epsilon - 1)) holds only if the base mechanism is (epsilon, delta)-DP "
            "under both replace-one and add/remove-one adjacency (Balle, Barthe & Gaboardi 2018, "
            "Theorem 2), which cannot be checked here"
        )
    return _amplify(eps, q), q * d


def _amplify(epsilon: float, q: float) -> float:
    """ln(1 + q (e^epsilon - 1)), stable for tiny and huge epsilon."""
    if epsilon < 1.0:
        return math.log1p(q * math.expm1(epsilon))
    # = epsilon + ln(q + (1 - q) e^-epsilon), no overflow
    return epsilon + math.log(q + (1.0 - q) * math.exp(-epsilon))


def gaussian_zcdp_rho(noise_multiplier: float) -> float:
    """rho = 1 / (2 sigma^2): the zCDP of one Gaussian mechanism with noise std sigma * Delta.

    Privacy: adding N(0, (sigma Delta)^2 I) to a function of L2 sensitivity Delta is rho-zCDP
    (Bun & Steinke 2016, Proposition 1.6) under the neighbouring relation Delta is computed for.
    ``noise_multiplier`` is sigma, the noise std divided by that sensitivity. No subsampling
    (zCDP has no simple amplification by subsampling).

    Args:
      noise_multiplier: sigma, finite and > 0.

    Returns:
      rho > 0.

    Raises:
      TypeError: a noise multiplier that is not a real number.
      ValueError: a noise multiplier that is not finite and > 0, or so small (below about 1e-154)
        that rho overflows.
    """
    sigma = check_positive(noise_multiplier, "noise_multiplier")
    variance = 2.0 * sigma * sigma
    return _finite(
        "gaussian_zcdp_rho", 1.0 / variance if variance > 0 else math.inf, f"noise_multiplier={noise_multiplier!r}"
    )


def _finite(what: str, value: float, args: str) -> float:
    """``value``, or a ValueError when it overflowed or is NaN (never a silent inf or NaN)."""
    if not math.isfinite(value):
        raise ValueError(
            f"{what} is not representable as a finite float for {args} (got {value!r}); use "
            "arguments within a few hundred orders of magnitude of 1"
        )
    return value


def zcdp_compose(rhos: Iterable[float]) -> float:
    """zCDP composes additively: mechanisms that are rho_i-zCDP are (sum_i rho_i)-zCDP together.

    Bun & Steinke 2016, Lemma 2.3 (adaptive composition), for one neighbouring relation shared by
    all the mechanisms.

    Args:
      rhos: the rho of each mechanism, finite and >= 0; at least one.

    Returns:
      The total rho.

    Raises:
      ValueError: an empty input, a rho that is negative, NaN or infinite, or a total that overflows.
      TypeError: ``rhos`` not an iterable (a single number, a string, a dict), or a rho that is not a
        real number.
    """
    if isinstance(rhos, (str, bytes, Mapping)) or not isinstance(rhos, (Iterable, np.ndarray)):
        raise TypeError(f"rhos must be an iterable of real numbers (e.g. a list), got {type(rhos).__name__}")
    items = np.ravel(rhos).tolist() if isinstance(rhos, np.ndarray) else list(rhos)
    values = [check_positive(r, "rho", allow_zero=True) for r in items]
    if not values:
        raise ValueError("zcdp_compose needs at least one rho, got none")
    try:
        total = math.fsum(values)
    except OverflowError:
        total = math.inf
    return _finite("the total rho", total, f"{len(values)} rhos up to {max(values)!r}")


def zcdp_to_dp(rho: float, delta: float, method: Literal["classic", "tight"] = "classic") -> float:
    """The epsilon of (epsilon, delta)-DP implied by rho-zCDP.

    ``method="classic"``: epsilon = rho + 2 sqrt(rho ln(1/delta)) (Bun & Steinke 2016,
    Proposition 1.3), the conversion used by the DP dropout paper.

    ``method="tight"``: epsilon = inf over alpha > 1 of
    alpha rho + (ln(1/delta) + (alpha - 1) ln(1 - 1/alpha) - ln(alpha)) / (alpha - 1)
    (Canonne, Kamath & Steinke 2020, "The discrete Gaussian for differential privacy",
    Proposition 12 / Corollary 13, applied to the RDP curve alpha rho). Every alpha gives a valid
    bound, so the numerical minimisation can only be loose, never unsafe; the classic bound's
    optimal alpha is among those tried, so it is never looser than ``"classic"``. A negative
    infimum (tiny rho) is reported as 0: the mechanism is then (0, delta)-DP.

    The relation is the one the zCDP guarantee holds for.

    Args:
      rho: the zCDP parameter, finite and >= 0.
      delta: target delta, in (0, 1).
      method: ``"classic"`` (default) or ``"tight"``.

    Returns:
      epsilon >= 0.

    Raises:
      ValueError: invalid arguments or an unknown method.
    """
    r = check_positive(rho, "rho", allow_zero=True)
    d = check_delta(delta)
    if method not in ("classic", "tight"):
        raise ValueError(f"method must be 'classic' or 'tight', got {method!r}")
    log_inv_delta = -math.log(d)  # not log(1 / d): 1 / d overflows for a subnormal delta
    classic = _finite("epsilon", r + 2.0 * math.sqrt(r * log_inv_delta), f"rho={rho!r}, delta={delta!r}")
    if method == "classic" or r == 0.0:
        return classic

    def eps_at(log_am1: float) -> float:
        am1 = math.exp(log_am1)  # alpha - 1
        alpha = 1.0 + am1
        if not (alpha > 1.0 and math.isfinite(alpha)):  # alpha - 1 beyond float resolution: no bound here
            return math.inf
        value = alpha * r + (log_inv_delta + am1 * math.log1p(-1.0 / alpha) - math.log(alpha)) / am1
        return value if math.isfinite(value) else math.inf

    # classic optimum alpha* = 1 + sqrt(ln(1/delta) / rho); search alpha - 1 over a wide log grid
    # (clipped for extreme rho: every alpha tried gives a valid bound, and the classic one is kept)
    star = min(max(0.5 * (math.log(log_inv_delta) - math.log(r)), -300.0), 300.0)
    grid = np.linspace(min(star, 0.0) - 12.0, max(star, 0.0) + 12.0, 241)
    values = [eps_at(float(x)) for x in grid]
    i = int(np.argmin(values))
    best = min(values[i], eps_at(star), classic)
    lo, hi = float(grid[max(i - 1, 0)]), float(grid[min(i + 1, len(grid) - 1)])
    if hi > lo and math.isfinite(values[max(i - 1, 0)]) and math.isfinite(values[min(i + 1, len(grid) - 1)]):
        res = minimize_scalar(eps_at, bounds=(lo, hi), method="bounded", options={"xatol": 1e-10})
        if np.isfinite(res.fun):
            best = min(best, float(res.fun))
    return max(best, 0.0)
