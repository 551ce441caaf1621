"""Privacy of the DP MH samplers: per-iteration constants, composition over a chain, calibration.

Neighbouring relation: replace-one (two data sets differ in the value of one record, N fixed), as in
Zhang, Zhang & De Sa, "DP-Fast MH: private, fast, and accurate Metropolis-Hastings for large-scale Bayesian
inference" (2023): "differ in the values at most one entry".

- DP-Fast MH (Zhang, Zhang & De Sa 2023, Theorem 2): every iteration is
  (epsilon, delta)-DP, whichever branch runs. A chain of T iterations is accounted by composing T
  (epsilon, delta)-DP mechanisms: by default with the optimal composition theorem (Kairouz, Oh &
  Viswanath 2015, Theorem 3.3; exact, computed in closed form), or with dp-accounting's PLD of the
  (epsilon, delta) dominating pair (a cross-check), or with the advanced composition theorem the
  paper cites (Dwork, Rothblum & Vadhan 2010: the authors' own accounting, for comparison), or
  basic composition.
- The penalty algorithm (Yildirim & Ermis 2019): every iteration is a Gaussian mechanism with noise
  multiplier sigma (noise std over the L2 sensitivity 2 c_max M). T of them compose to a Gaussian
  mechanism with multiplier sigma / sqrt(T): accounted with dp-accounting's PLD (default) or RDP, in
  closed form ("exact", Balle & Wang 2018), or by advanced composition of the per-iteration
  (epsilon, delta) of the classic calibration (the authors' style).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Final, Literal, cast

import numpy as np
from scipy.special import gammaln, logsumexp

from .._checks import check_delta, check_epsilon, check_float32_positive, check_positive, check_positive_int, check_real
from ..privacy import advanced_composition, analytic_gaussian_sigma, dpsgd_epsilon
from ..privacy.dpsgd_accounting import Accountant, calibrate_noise_multiplier
from ..privacy.gaussian import _analytic_gaussian_delta

FastMHAccountant = Literal["optimal", "pld", "advanced", "basic"]
GaussianAccountant = Literal["pld", "rdp", "exact", "advanced"]
FAST_MH_ACCOUNTANTS = ("optimal", "pld", "advanced", "basic")
GAUSSIAN_ACCOUNTANTS = ("pld", "rdp", "exact", "advanced")
NEIGHBOURING: Final = "replace_one"


def classic_noise_multiplier(epsilon: float, delta: float) -> float:
    """sigma = sqrt(2 ln(1.25/delta)) / epsilon: the Gaussian mechanism's classic calibration.

    Valid (Dwork & Roth 2014, Theorem A.1) for epsilon < 1, as the DP MH papers use it.
    """
    eps = check_epsilon(epsilon)
    d = check_delta(delta)
    if eps >= 1.0:
        raise ValueError(
            f"per-iteration epsilon must be < 1 (the classic Gaussian mechanism calibration the DP MH "
            f"papers use holds only for epsilon < 1), got {epsilon!r}"
        )
    sigma = math.sqrt(2.0 * math.log(1.25 / d)) / eps
    if not math.isfinite(sigma):
        raise ValueError(
            f"sigma = sqrt(2 ln(1.25/delta)) / epsilon overflows the float range for epsilon={epsilon!r}, "
            f"delta={delta!r}: epsilon or delta is far too small for any useful chain"
        )
    return sigma


@dataclasses.dataclass(frozen=True)
class FastMHConstants:
    """The per-iteration constants of DP-Fast MH (Zhang, Zhang & De Sa 2023, Theorem 2).

    Attributes:
      epsilon, delta: the per-iteration guarantee (replace-one adjacency).
      epsilon_prime, delta_prime: the minibatch branch's Gaussian mechanism parameters,
        epsilon' = epsilon C / (6 K c_max), delta' = delta C / (2 K c_max).
      sigma1: minibatch noise multiplier sqrt(2 ln(1.25/delta')) / epsilon' (noise std sigma1 D1,
        D1 = 2 log(1 + C M / lambda)); noise is added only when D1 >= epsilon'.
      sigma2: full-batch noise multiplier sqrt(2 ln(1.25/delta)) / epsilon (noise std sigma2 D2,
        D2 = 2 c_max M).
      batch_cap: K; the minibatch branch runs when lambda + C M < K.
      lam: lambda, the constant of the minibatch branch's batch-size distribution.
      total_bound, max_bound: C and c_max.
    """

    epsilon: float
    delta: float
    epsilon_prime: float
    delta_prime: float
    sigma1: float
    sigma2: float
    batch_cap: float
    lam: float
    total_bound: float
    max_bound: float


def dp_fast_mh_constants(
    epsilon: float, delta: float, *, total_bound: float, max_bound: float, batch_cap: float, lam: float = 10.0
) -> FastMHConstants:
    """The per-iteration constants of DP-Fast MH for a per-iteration (epsilon, delta).

    Args:
      epsilon: per-iteration epsilon in (0, 1).
      delta: per-iteration delta in (0, 1).
      total_bound: C = sum_i c_i > 0.
      max_bound: c_max = max_i c_i > 0.
      batch_cap: K > 0 (the paper recommends about epsilon C / (6 c_max)).
      lam: lambda > 0 (10 in the authors' runs).

    Raises:
      ValueError: invalid arguments, delta' = delta C / (2 K c_max) >= 1 (the minibatch branch's
        Gaussian mechanism is then undefined: raise K or lower delta), or epsilon, delta, epsilon',
        delta', sigma1 or sigma2 outside the positive normal float32 range (the kernel computes in
        float32, where they would become 0 or inf).
    """
    sigma2 = check_float32_positive(
        classic_noise_multiplier(epsilon, delta), "sigma2 = sqrt(2 ln(1.25/delta)) / epsilon"
    )
    big_c = check_positive(total_bound, "total_bound")
    c_max = check_positive(max_bound, "max_bound")
    k = check_positive(batch_cap, "batch_cap")
    lam = check_positive(lam, "lam")
    check_float32_positive(float(epsilon), "epsilon")
    check_float32_positive(float(delta), "delta")
    eps_p = check_float32_positive(epsilon * big_c / (6.0 * k * c_max), "epsilon' = epsilon C / (6 K c_max)")
    delta_p = delta * big_c / (2.0 * k * c_max)
    if not delta_p < 1.0:
        raise ValueError(
            f"delta' = delta C / (2 K c_max) = {delta_p:.4g} must be < 1 for the minibatch branch's "
            f"Gaussian mechanism (delta={delta}, C={big_c:.4g}, K={k}, c_max={c_max:.4g}); raise "
            "batch_cap or lower delta"
        )
    check_float32_positive(delta_p, "delta' = delta C / (2 K c_max)")
    sigma1 = check_float32_positive(
        math.sqrt(2.0 * math.log(1.25 / delta_p)) / eps_p, "sigma1 = sqrt(2 ln(1.25/delta')) / epsilon'"
    )
    return FastMHConstants(
        epsilon=float(epsilon),
        delta=float(delta),
        epsilon_prime=eps_p,
        delta_prime=delta_p,
        sigma1=sigma1,
        sigma2=sigma2,
        batch_cap=k,
        lam=lam,
        total_bound=big_c,
        max_bound=c_max,
    )


# --------------------------------------------------------------------------------------------
# composition of T (epsilon, delta)-DP mechanisms


#: terms of the optimal-composition sum further (in log) than this plus log(T + 1) below the largest
#: one are left out: together they are below e^-60 of the sum.
_LOG_TERM_DROP = 60.0


def _optimal_log_terms(epsilon: float, k: int, eps_total: float, lo: int, hi: int) -> np.ndarray:
    """log of C(k, j) max(0, e^{j eps} - e^{eps_g} e^{(k-j) eps}) for j = lo .. hi - 1 (-inf where 0)."""
    j = np.arange(lo, hi, dtype=np.float64)
    a = j * epsilon
    b = eps_total + (k - j) * epsilon
    out = np.full(j.shape, -np.inf)
    pos = a > b
    jp = j[pos]
    out[pos] = (
        gammaln(k + 1.0) - gammaln(jp + 1.0) - gammaln(k - jp + 1.0) + a[pos] + np.log(-np.expm1(b[pos] - a[pos]))
    )
    return out


def _optimal_log_delta_rr(epsilon: float, num_steps: int, eps_total: float) -> float:
    """log of sum_j C(k,j) max(0, e^{j eps} - e^{eps_g} e^{(k-j) eps}) / (1 + e^eps)^k.

    The log of the terms is concave in j (a log-concave binomial coefficient, a linear term and
    log(1 - e^-x) of a linear x), so they rise to one peak and fall away on both sides. The sum is
    taken over a window around the peak (near the binomial mode or the first positive term), widened
    until both its ends lie ``_LOG_TERM_DROP + log(T + 1)`` below the largest term: the at most T terms
    left out are then together below e^-60 of the sum. So the work is O(sqrt(T)), not O(T) (a chain of
    1e9 iterations needs no array of 1e9 terms).
    """
    k = num_steps
    first = math.floor((k + eps_total / epsilon) / 2.0) + 1  # first j with j eps > eps_g + (k - j) eps
    if first > k:
        return -math.inf
    p = 1.0 / (1.0 + math.exp(-epsilon))
    centre = min(k, max(first, math.floor((k + 1) * p)))
    drop = _LOG_TERM_DROP + math.log(k + 1.0)
    half = int(math.ceil(math.sqrt(2.0 * drop * k * p * (1.0 - p)))) + 64
    while True:
        lo, hi = max(0, centre - half), min(k + 1, centre + half + 1)
        terms = _optimal_log_terms(epsilon, k, eps_total, lo, hi)
        peak = float(np.max(terms))  # -inf: no positive term in the window (its ends are then never below)
        if (lo == 0 or terms[0] < peak - drop) and (hi == k + 1 or terms[-1] < peak - drop):
            break
        half *= 4
    if not np.isfinite(peak):
        return -math.inf
    log_norm = k * (epsilon + math.log1p(math.exp(-epsilon))) if epsilon > 30 else k * math.log1p(math.exp(epsilon))
    return float(logsumexp(terms) - log_norm)


def optimal_composition_delta(epsilon: float, delta: float, num_steps: int, total_epsilon: float) -> float:
    """The smallest delta_g for which T (epsilon, delta)-DP mechanisms compose to (total_epsilon, delta_g)-DP.

    Kairouz, Oh & Viswanath 2015 (Theorem 3.3), exact for adaptive composition of arbitrary
    (epsilon, delta)-DP mechanisms under any one neighbouring relation:
    delta_g = 1 - (1 - delta)^T (1 - delta_RR), delta_RR the hockey-stick divergence of T-fold
    randomized response at total_epsilon.

    Args:
      epsilon: per-iteration epsilon, finite and > 0.
      delta: per-iteration delta in [0, 1).
      num_steps: T >= 1 (an int).
      total_epsilon: the total epsilon, finite and >= 0.

    Raises:
      ValueError, TypeError: an argument outside its range.
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta, allow_zero=True)
    num_steps = check_positive_int(num_steps, "num_steps")
    total_epsilon = check_positive(total_epsilon, "total_epsilon", allow_zero=True)
    log_rr = _optimal_log_delta_rr(epsilon, num_steps, total_epsilon)
    rr = math.exp(log_rr) if log_rr > -745 else 0.0
    keep = math.exp(num_steps * math.log1p(-delta)) if delta > 0 else 1.0
    return 1.0 - keep * (1.0 - rr)


def _pld_compose_epsilon(epsilon: float, delta: float, num_steps: int, total_delta: float) -> float:
    from dp_accounting.pld import common, privacy_loss_distribution

    dvi = min(1e-4, epsilon / 1000.0)
    pld = privacy_loss_distribution.from_privacy_parameters(
        common.DifferentialPrivacyParameters(epsilon, delta), value_discretization_interval=dvi
    )
    return float(pld.self_compose(num_steps).get_epsilon_for_delta(total_delta))


def compose_iterations(
    epsilon: float,
    delta: float,
    num_steps: int,
    total_delta: float,
    accountant: FastMHAccountant = "optimal",
) -> float:
    """The total epsilon of T adaptively composed (epsilon, delta)-DP iterations, at ``total_delta``.

    Args:
      epsilon: per-iteration epsilon, finite and > 0.
      delta: per-iteration delta in [0, 1).
      num_steps: T >= 1 (an int).
      total_delta: the delta of the total guarantee, in (0, 1); it must exceed what the iterations'
        deltas alone force (1 - (1 - delta)^T for "optimal"/"pld", T delta for "advanced"/"basic").
      accountant: ``"optimal"`` (exact; Kairouz et al. 2015), ``"pld"`` (dp-accounting, an upper
        bound; slow for large T), ``"advanced"`` (Dwork, Rothblum & Vadhan 2010 as in Dwork & Roth
        2014 Thm 3.20, with slack total_delta - T delta: the composition the paper cites), ``"basic"``
        (T epsilon, valid when total_delta >= T delta).

    Returns:
      The total epsilon (finite, >= 0).

    Raises:
      ValueError: invalid arguments, or a total_delta too small for the accountant.
    """
    eps = check_epsilon(epsilon)
    d = check_delta(delta, allow_zero=True)
    t = check_positive_int(num_steps, "num_steps")
    dg = check_delta(total_delta, "total_delta")
    if accountant not in FAST_MH_ACCOUNTANTS:
        raise ValueError(f"accountant must be one of {FAST_MH_ACCOUNTANTS}, got {accountant!r}")
    if accountant in ("advanced", "basic"):
        if not dg > t * d:
            raise ValueError(
                f"total_delta={dg:g} must exceed num_steps * delta = {t * d:g} for {accountant} composition"
            )
        if accountant == "basic":
            return t * eps
        return min(advanced_composition(eps, d, t, dg - t * d)[0], t * eps)
    floor = 1.0 - math.exp(t * math.log1p(-d)) if d > 0 else 0.0
    if not dg > floor:
        raise ValueError(
            f"total_delta={dg:g} must exceed 1 - (1 - delta)^T = {floor:g}, what {t} iterations with "
            f"delta={d:g} force; raise total_delta or lower the per-iteration delta"
        )
    if accountant == "pld":
        return _pld_compose_epsilon(eps, d, t, dg)
    # bisection on the total epsilon: delta_g(eps_g) decreases in eps_g; t * eps has delta_g = floor
    if optimal_composition_delta(eps, d, t, 0.0) <= dg:
        return 0.0
    lo, hi = 0.0, t * eps
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if optimal_composition_delta(eps, d, t, mid) <= dg:
            hi = mid
        else:
            lo = mid
        if hi - lo <= 1e-10 * max(hi, 1e-12):
            break
    return hi


# --------------------------------------------------------------------------------------------
# composition of T Gaussian mechanisms (the penalty algorithm)


def gaussian_chain_epsilon(
    noise_multiplier: float,
    num_steps: int,
    total_delta: float,
    accountant: GaussianAccountant = "pld",
    per_iteration_delta: float | None = None,
) -> float:
    """The total epsilon of T Gaussian mechanisms, each with noise std ``noise_multiplier`` x sensitivity.

    No subsampling; the neighbouring relation is the one the sensitivity holds for (replace-one for
    the DP MH samplers). ``"pld"``/``"rdp"``: dp-accounting (through
    :func:`dpposterior.privacy.dpsgd_epsilon` with sampling rate 1, where the relation does not
    matter given the sensitivity); ``"exact"``: T Gaussians compose to one with multiplier
    sigma / sqrt(T), whose exact delta(epsilon) is Balle & Wang 2018, Theorem 8; ``"advanced"``:
    each iteration taken as (sqrt(2 ln(1.25/d))/sigma, d)-DP with d = ``per_iteration_delta``
    (the classic calibration, so its epsilon must be < 1) and composed by advanced composition.
    """
    sigma = check_positive(noise_multiplier, "noise_multiplier")
    t = check_positive_int(num_steps, "num_steps")
    dg = check_delta(total_delta, "total_delta")
    if accountant not in GAUSSIAN_ACCOUNTANTS:
        raise ValueError(f"accountant must be one of {GAUSSIAN_ACCOUNTANTS}, got {accountant!r}")
    if per_iteration_delta is not None:  # checked even where unused: a wrong value is a user error
        check_delta(per_iteration_delta, "per_iteration_delta")
    if accountant in ("pld", "rdp"):
        return dpsgd_epsilon(sigma, dg, 1.0, t, accountant)
    if accountant == "exact":
        s = sigma / math.sqrt(t)
        if _analytic_gaussian_delta(s, 0.0) <= dg:
            return 0.0
        lo, hi = 0.0, 1.0
        while _analytic_gaussian_delta(s, hi) > dg:
            hi *= 2.0
            if hi > 1e300:
                raise ValueError(
                    f"noise_multiplier={sigma!r} over {t} steps is too small: the total epsilon exceeds "
                    "1e300 (no meaningful privacy); raise noise_multiplier"
                )
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            if _analytic_gaussian_delta(s, mid) <= dg:
                hi = mid
            else:
                lo = mid
            if hi - lo <= 1e-12 * hi:
                break
        return hi
    if per_iteration_delta is None:
        raise ValueError("accountant='advanced' needs per_iteration_delta (the delta of the classic calibration)")
    d = check_delta(per_iteration_delta, "per_iteration_delta")
    eps_i = math.sqrt(2.0 * math.log(1.25 / d)) / sigma
    if eps_i >= 1.0:
        raise ValueError(
            f"the per-iteration epsilon {eps_i:.4g} of the classic calibration is >= 1, where it "
            "does not hold; use accountant='pld' or 'exact'"
        )
    return compose_iterations(eps_i, d, t, dg, "advanced")


# --------------------------------------------------------------------------------------------
# calibration: a total (epsilon, delta) to per-iteration parameters


@dataclasses.dataclass(frozen=True)
class PerIteration:
    """Per-iteration privacy parameters for a chain of ``num_steps`` iterations.

    Attributes:
      epsilon, delta: the per-iteration (epsilon, delta) (DP-Fast MH; for the penalty method the
        classic-calibration equivalent at ``delta``, or None when it would be >= 1).
      noise_multiplier: the penalty method's noise std over sensitivity (None for DP-Fast MH).
      num_steps, total_epsilon, total_delta, accountant: what the calibration targeted.
      batch_size: DP Barker's batch size b (None for the other methods); its ``epsilon`` is then
        the per-iteration epsilon of that b at ``delta``.
    """

    epsilon: float | None
    delta: float
    noise_multiplier: float | None
    num_steps: int
    total_epsilon: float
    total_delta: float
    accountant: str
    batch_size: int | None = None


def calibrate_chain(
    method: Literal["dp_fast_mh", "penalty", "dp_barker"],
    total_epsilon: float,
    total_delta: float,
    num_steps: int,
    *,
    accountant: str | None = None,
    delta_fraction: float | None = None,
    num_records: int | None = None,
) -> PerIteration:
    """Per-iteration parameters that make a chain of ``num_steps`` iterations (total_epsilon, total_delta)-DP.

    ``"dp_fast_mh"``: the per-iteration delta is ``delta_fraction * total_delta / num_steps``
    (``delta_fraction`` in (0, 1), default 0.5; the other methods take none) and the
    per-iteration epsilon is the largest (to 1e-6 relative) whose T-fold composition (``accountant``,
    default ``"optimal"``) is at most ``total_epsilon``; it must come out < 1 (the paper's constants
    use the classic Gaussian calibration). ``"penalty"``: the smallest noise multiplier whose T-fold
    Gaussian composition (default ``"pld"``, via
    :func:`dpposterior.privacy.calibrate_noise_multiplier` with sampling rate 1; ``"exact"``
    available) is at most ``total_epsilon`` at ``total_delta``. ``"dp_barker"``: the largest batch
    size (:func:`barker_batch_size`, RDP) for ``num_records`` N (required). Replace-one adjacency.

    Raises:
      ValueError: invalid arguments, ``delta_fraction`` given for a method other than
        ``"dp_fast_mh"`` or ``num_records`` for one other than ``"dp_barker"`` (they would be
        ignored), or a target whose per-iteration epsilon would be >= 1.
    """
    eps_t = check_epsilon(total_epsilon, "total_epsilon")
    dg = check_delta(total_delta, "total_delta")
    t = check_positive_int(num_steps, "num_steps")
    if method in ("penalty", "dp_barker") and delta_fraction is not None:
        raise ValueError(
            f"delta_fraction applies to method 'dp_fast_mh' only (the {method} calibration uses the "
            f"whole total_delta), got delta_fraction={delta_fraction!r}; leave it None"
        )
    if method in ("penalty", "dp_fast_mh") and num_records is not None:
        raise ValueError(
            f"num_records applies to method 'dp_barker' only (it picks the batch size), got "
            f"num_records={num_records!r} for method {method!r}; leave it None"
        )
    frac = 0.5 if delta_fraction is None else check_positive(delta_fraction, "delta_fraction")
    if frac >= 1:
        raise ValueError(f"delta_fraction must lie in (0, 1), got {delta_fraction!r}")
    if method == "penalty":
        acc = accountant or "pld"
        if acc not in ("pld", "rdp", "exact"):
            raise ValueError(f"accountant for the penalty method must be 'pld', 'rdp' or 'exact', got {acc!r}")
        if acc == "exact":
            sigma = analytic_gaussian_sigma(eps_t, dg, 1.0) * math.sqrt(t)
            # the chain is accounted by gaussian_chain_epsilon(..., "exact"), whose bisection (and the
            # round trip through sqrt(T)) can put the answer a few 1e-14 above the target: step sigma up
            for _ in range(100):
                if gaussian_chain_epsilon(sigma, t, dg, "exact") <= eps_t:
                    break
                sigma *= 1.0 + 1e-9
            else:  # pragma: no cover - 100 steps of 1e-9 cover any rounding
                raise RuntimeError(f"the exact penalty calibration did not meet epsilon={eps_t} (sigma={sigma})")
        else:
            sigma = calibrate_noise_multiplier(eps_t, dg, 1.0, t, cast(Accountant, acc))  # "pld" or "rdp" here
        eps_i = math.sqrt(2.0 * math.log(1.25 / dg)) / sigma
        return PerIteration(
            epsilon=eps_i if eps_i < 1 else None,
            delta=dg,
            noise_multiplier=sigma,
            num_steps=t,
            total_epsilon=eps_t,
            total_delta=dg,
            accountant=acc,
        )
    if method == "dp_barker":
        if accountant not in (None, "rdp"):
            raise ValueError(f"accountant for dp_barker must be 'rdp', got {accountant!r}")
        if num_records is None:
            raise ValueError("calibrate_chain('dp_barker', ...) needs num_records (N)")
        b = barker_batch_size(eps_t, dg, num_records, t)
        return PerIteration(
            epsilon=barker_epsilon(b, num_records, 1, dg)[0],
            delta=dg,
            noise_multiplier=None,
            num_steps=t,
            total_epsilon=eps_t,
            total_delta=dg,
            accountant="rdp",
            batch_size=b,
        )
    if method != "dp_fast_mh":
        raise ValueError(f"method must be 'dp_fast_mh', 'penalty' or 'dp_barker', got {method!r}")
    acc = accountant or "optimal"
    d_i = frac * dg / t
    if acc not in FAST_MH_ACCOUNTANTS:
        raise ValueError(f"accountant must be one of {FAST_MH_ACCOUNTANTS}, got {acc!r}")

    def total(e: float) -> float:
        return compose_iterations(e, d_i, t, dg, cast(FastMHAccountant, acc))  # checked above

    lo, hi = 0.0, min(eps_t, 1.0)
    if total(hi) <= eps_t:
        lo = hi
    else:
        for _ in range(80):
            mid = 0.5 * (lo + hi)
            if total(mid) <= eps_t:
                lo = mid
            else:
                hi = mid
            if hi - lo <= 1e-6 * hi:
                break
    if lo >= 1.0:
        raise ValueError(
            f"a total (epsilon={eps_t}, delta={dg}) over {t} iterations allows a per-iteration epsilon "
            ">= 1, where the paper's constants (classic Gaussian calibration) do not hold; use more "
            "iterations or a smaller total epsilon"
        )
    if lo <= 0.0:
        raise ValueError(f"no per-iteration epsilon > 0 reaches total epsilon {eps_t} at total delta {dg}")
    return PerIteration(
        epsilon=lo, delta=d_i, noise_multiplier=None, num_steps=t, total_epsilon=eps_t, total_delta=dg, accountant=acc
    )


# --------------------------------------------------------------------------------------------
# DP Barker (Heikkila, Jalko, Dikmen & Honkela 2019): Renyi DP of one step, subsampled, composed

#: the Gaussian variance C of the minibatch Barker test (C = 2, as in Heikkilä et al. 2019).
BARKER_NORMAL_VARIANCE = 2.0
#: the clip bound on each per-record log ratio is BARKER_CLIP_FACTOR sqrt(b) / N (Heikkilä et al. 2019).
BARKER_CLIP_FACTOR = 0.99


def barker_rdp(alpha: float, batch_size: int) -> float:
    """Renyi DP of order ``alpha`` of one DP Barker test on a batch of b records, before subsampling.

    eps(alpha) = 5/(2b) + ln(2b/(b - 5 alpha))/(2(alpha - 1)) + 2 alpha/(b - 5 alpha), for
    1 < alpha < b/5 (Heikkilä, Jälkö, Dikmen & Honkela, "Differentially private Markov chain
    Monte Carlo", 2019; log-likelihood ratios
    clipped to 0.99 sqrt(b)/(tau N), Gaussian variance C = 2). Replace-one adjacency within the
    batch. Open question (noted, not changed): the middle term tends to ln(2)/(2(alpha - 1)), not 0,
    as b grows; we read it as the crude bound 2 on the ratio of the two noise variances (both lie in
    [C - 1, C]) and use the formula as stated, which can only overstate epsilon.

    Raises:
      ValueError: alpha not in (1, b/5), or b not an integer >= 6.
    """
    b = check_positive_int(batch_size, "batch_size", minimum=6)
    a = check_real("alpha", alpha)
    if not (1.0 < a < b / 5.0):
        raise ValueError(f"alpha must lie in (1, batch_size/5) = (1, {b / 5:g}), got {alpha!r}")
    return 5.0 / (2.0 * b) + math.log(2.0 * b / (b - 5.0 * a)) / (2.0 * (a - 1.0)) + 2.0 * a / (b - 5.0 * a)


def barker_subsampled_rdp(alpha: int, batch_size: int, num_records: int) -> float:
    """RDP of order ``alpha`` (an integer >= 2) of one DP Barker step on a batch of b of N records.

    The batch is drawn uniformly without replacement (sampling ratio gamma = b/N); the
    amplification is Wang, Balle & Kasiviswanathan 2019, Theorem 9 (replace-one adjacency), with
    eps(infinity) = infinity (a Gaussian-noise test):
    (1/(alpha-1)) log(1 + gamma^2 C(alpha,2) min(4(e^{eps(2)} - 1), 2 e^{eps(2)})
    + sum_{j=3..alpha} 2 gamma^j C(alpha,j) e^{(j-1) eps(j)}), eps = :func:`barker_rdp`.
    Returns the smaller of that bound and :func:`barker_rdp` itself (subsampling never weakens the
    guarantee: the Renyi divergence is jointly quasi-convex), so b = N gives :func:`barker_rdp`.
    """
    a = check_positive_int(alpha, "alpha", minimum=2)
    b = check_positive_int(batch_size, "batch_size", minimum=6)
    n = check_positive_int(num_records, "num_records")
    if b > n:
        raise ValueError(f"batch_size must be <= num_records, got {b} > {n}")
    if not a < b / 5.0:
        raise ValueError(f"alpha must be < batch_size/5 = {b / 5:g}, got {alpha!r}")
    return float(_barker_subsampled_rdp(np.array([a]), b, n)[0])


def _barker_rdp_vec(alpha: np.ndarray, b: int) -> np.ndarray:
    a = np.asarray(alpha, np.float64)
    return 5.0 / (2.0 * b) + np.log(2.0 * b / (b - 5.0 * a)) / (2.0 * (a - 1.0)) + 2.0 * a / (b - 5.0 * a)


def _barker_subsampled_rdp(orders: np.ndarray, b: int, n: int) -> np.ndarray:
    """:func:`barker_subsampled_rdp` at several integer orders (validated by the callers), vectorised."""
    orders = np.asarray(orders, np.int64)
    base = _barker_rdp_vec(orders, b)
    if b == n:
        return base
    g = b / n
    e2 = float(_barker_rdp_vec(np.array([2.0]), b)[0])
    a_all = orders.astype(np.float64)
    term2 = (
        2.0 * math.log(g)
        + _log_binom_vec(a_all, 2.0)
        + min(math.log(4.0) + math.log(math.expm1(e2)), math.log(2.0) + e2)
    )
    # the j-terms of order a run over j = 3..a: one row per order (a full (orders x max order) matrix
    # made barker_batch_size take minutes at N = 1e6, most of it on masked entries)
    j_all = np.arange(3, int(orders.max()) + 1, dtype=np.float64)
    j_common = math.log(2.0) + j_all * math.log(g) - gammaln(j_all + 1.0) + (j_all - 1.0) * _barker_rdp_vec(j_all, b)
    out = np.empty(len(orders))
    for i, a in enumerate(a_all):
        m = int(a) - 2
        terms_j = j_common[:m] + gammaln(a + 1.0) - gammaln(a - j_all[:m] + 1.0)
        out[i] = logsumexp(np.concatenate([[0.0, term2[i]], terms_j])) / (a - 1.0)
    return np.minimum(out, base)


def _log_binom_vec(n: np.ndarray, k: float) -> np.ndarray:
    return gammaln(n + 1.0) - gammaln(k + 1.0) - gammaln(n - k + 1.0)


def _rdp_orders(batch_size: int) -> np.ndarray:
    top = int(math.ceil(batch_size / 5.0)) - 1
    grid = np.unique(
        np.concatenate([np.arange(2, min(top, 64) + 1), np.round(np.geomspace(64, max(top, 64), 48)).astype(int)])
    )
    return grid[(grid >= 2) & (grid <= top)]


def barker_full_batch_rdp(alpha: float, num_records: int) -> float:
    """Renyi DP of order ``alpha`` of one DP Barker test on all N records (b = N): a Gaussian mechanism.

    With b = N the kernel's variance estimate s2 carries the finite-population factor (1 - b/N) = 0, so
    the test adds N(0, C) with C = 2 whatever the data (plus the data-free correction noise V_corr, which
    can only help), to Delta* = sum_i d_i of log ratios clipped to B = 0.99 sqrt(N)/N each. Replacing one
    record moves Delta* by at most 2B, so the step is the Gaussian mechanism of sensitivity 2B and
    variance C: eps(alpha) = alpha (2B)^2 / (2C) = alpha 0.99^2 / N (Mironov 2017, Prop. 7), for every
    alpha > 1. Replace-one adjacency. This is the exact RDP of that mechanism; the paper's bound
    (:func:`barker_rdp`, which also covers a data-dependent variance C - s2) is larger at b = N, by a
    factor of about 2-20 in epsilon over the settings measured (docs/reliability.md, DP Barker audit).

    Raises:
      ValueError: alpha not > 1, or N not an integer >= 1.
    """
    n = check_positive_int(num_records, "num_records")
    a = check_real("alpha", alpha)
    if not a > 1.0:
        raise ValueError(f"alpha must be > 1, got {alpha!r}")
    return float(_barker_full_batch_rdp_vec(np.array([a]), n)[0])


def _barker_full_batch_rdp_vec(alpha: np.ndarray, n: int) -> np.ndarray:
    sensitivity = 2.0 * BARKER_CLIP_FACTOR * math.sqrt(n) / n
    return np.asarray(alpha, np.float64) * sensitivity**2 / (2.0 * BARKER_NORMAL_VARIANCE)


def barker_epsilon(batch_size: int, num_records: int, num_steps: int, delta: float) -> tuple[float, int]:
    """(epsilon, best order) of T DP Barker steps at ``delta``: T-fold RDP composition of
    :func:`barker_subsampled_rdp`, converted with Canonne, Kamath & Steinke 2020 (Prop. 12):
    epsilon = T rdp(alpha) + log((alpha - 1)/alpha) - (log delta + log alpha)/(alpha - 1), minimised
    over integer orders 2 <= alpha < b/5. Replace-one adjacency.

    With b = N each order's RDP is the smaller of that bound and :func:`barker_full_batch_rdp` (the
    exact RDP of the full-batch test, a Gaussian mechanism; both are valid, so is their minimum), and
    orders up to 4,096 are searched (the Gaussian bound holds at every order).

    Raises:
      ValueError: invalid arguments, or b < 15 (no integer order below b/5).
    """
    b = check_positive_int(batch_size, "batch_size", minimum=6)
    n = check_positive_int(num_records, "num_records")
    t = check_positive_int(num_steps, "num_steps")
    d = check_delta(delta)
    orders = _rdp_orders(b)
    if orders.size == 0:
        raise ValueError(f"batch_size must be >= 15 for an RDP order 2 <= alpha < b/5, got {b}")
    if b > n:
        raise ValueError(f"batch_size must be <= num_records, got {b} > {n}")
    if b == n:
        below = orders
        orders = np.unique(np.concatenate([orders, np.arange(2, 65), np.round(np.geomspace(64, 4096, 64)).astype(int)]))
        rdp = _barker_full_batch_rdp_vec(orders, n)
        paper = np.isin(orders, below)
        rdp[paper] = np.minimum(rdp[paper], _barker_subsampled_rdp(orders[paper], b, n))
    else:
        rdp = _barker_subsampled_rdp(orders, b, n)
    a = orders.astype(np.float64)
    eps = t * rdp + np.log1p(-1.0 / a) - (math.log(d) + np.log(a)) / (a - 1.0)
    k = int(np.argmin(eps))
    return max(float(eps[k]), 0.0), int(orders[k])


def barker_batch_size(epsilon: float, delta: float, num_records: int, num_steps: int = 1) -> int:
    """The largest batch size b whose T DP Barker steps are (epsilon, delta)-DP (:func:`barker_epsilon`).

    A larger batch allows a larger clip bound 0.99 sqrt(b)/N on the log ratios (so larger steps);
    epsilon is not monotone in b (subsampling amplifies less as b grows, while the per-step bound
    shrinks), so every b in [15, N] is checked on a grid and the largest feasible one refined.

    Raises:
      ValueError: no batch size reaches the target.
    """
    eps = check_epsilon(epsilon)
    d = check_delta(delta)
    n = check_positive_int(num_records, "num_records", minimum=15)
    t = check_positive_int(num_steps, "num_steps")
    cands = np.unique(np.round(np.geomspace(15, n, 60)).astype(int))
    ok = [int(b) for b in cands if barker_epsilon(int(b), n, t, d)[0] <= eps]
    if not ok:
        raise ValueError(
            f"no DP Barker batch size in [15, {n}] gives epsilon <= {eps} at delta {d} over {t} "
            "steps (the per-step RDP bound is too large); raise epsilon"
        )
    lo = max(ok)
    hi = next((int(b) for b in cands if b > lo), lo)
    while hi - lo > 1:  # refine up to the next infeasible grid point
        mid = (lo + hi) // 2
        if barker_epsilon(mid, n, t, d)[0] <= eps:
            lo = mid
        else:
            hi = mid
    return lo
