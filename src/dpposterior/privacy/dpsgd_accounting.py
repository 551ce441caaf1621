"""Accounting for Poisson-subsampled Gaussian DP-SGD (add/remove-one adjacency), on dp-accounting.

The PLD accountant is the default: it is an upper bound whose tightness depends on its value
discretisation interval, so we scale that interval with the epsilon being computed (about
epsilon / 1000; NOTES.md section 7), instead of using a fixed 1e-3 that overstates small budgets.
"""

from __future__ import annotations

import functools
import math
from typing import Literal

from dp_accounting import dp_event
from dp_accounting.privacy_accountant import NeighboringRelation
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.rdp import rdp_privacy_accountant

from .._checks import check_delta, check_epsilon, check_positive, check_positive_int, check_sampling_rate

Accountant = Literal["pld", "rdp"]
ACCOUNTANTS = ("pld", "rdp")

#: default bounds searched by calibration.
MIN_NOISE_MULTIPLIER = 1e-2
MAX_NOISE_MULTIPLIER = 1e6


def _check_accountant(accountant: str) -> str:
    if accountant not in ACCOUNTANTS:
        raise ValueError(f"accountant must be one of {ACCOUNTANTS}, got {accountant!r}")
    return accountant


def _event(noise_multiplier: float, sampling_rate: float, num_steps: int) -> dp_event.DpEvent:
    gauss = dp_event.GaussianDpEvent(noise_multiplier)
    step = gauss if sampling_rate == 1.0 else dp_event.PoissonSampledDpEvent(sampling_rate, gauss)
    return dp_event.SelfComposedDpEvent(step, num_steps)


def _pld_dvi(epsilon_scale: float) -> float:
    """The value discretisation interval used for an epsilon of about ``epsilon_scale``."""
    return float(min(max(epsilon_scale / 1000.0, 1e-5), 1e3))


@functools.lru_cache(maxsize=4096)
def _epsilon_raw(noise_multiplier: float, delta: float, sampling_rate: float, num_steps: int,
                 accountant: str, dvi: float) -> float:
    if accountant == "pld":
        acc = pld_privacy_accountant.PLDAccountant(
            neighboring_relation=NeighboringRelation.ADD_OR_REMOVE_ONE,
            value_discretization_interval=dvi)
    else:
        acc = rdp_privacy_accountant.RdpAccountant(
            neighboring_relation=NeighboringRelation.ADD_OR_REMOVE_ONE)
    acc.compose(_event(noise_multiplier, sampling_rate, num_steps))
    eps = float(acc.get_epsilon(delta))
    if math.isnan(eps) or eps < 0:
        raise ArithmeticError(
            f"the {accountant} accountant returned epsilon={eps} for noise_multiplier={noise_multiplier}, "
            f"sampling_rate={sampling_rate}, num_steps={num_steps}, delta={delta}")
    return eps


def dpsgd_epsilon(noise_multiplier: float, delta: float, sampling_rate: float, num_steps: int,
                  accountant: Accountant = "pld") -> float:
    """Epsilon spent by Poisson-subsampled Gaussian DP-SGD.

    Privacy: each of ``num_steps`` steps includes every record independently with probability
    ``sampling_rate`` and adds Gaussian noise of std ``noise_multiplier`` times the L2 sensitivity
    (the clip norm) to the sum of clipped per-record gradients. Add/remove-one adjacency.

    Args:
      noise_multiplier: sigma, the noise std divided by the clip norm; > 0.
      delta: target delta in (0, 1).
      sampling_rate: Poisson sampling rate q in (0, 1].
      num_steps: number of released steps T >= 1.
      accountant: ``"pld"`` (default; dp-accounting's privacy-loss-distribution accountant with a
        discretisation interval scaled to the result) or ``"rdp"``.

    Returns:
      An upper bound on epsilon (both accountants are pessimistic).
    """
    sigma = check_positive(noise_multiplier, "noise_multiplier")
    delta = check_delta(delta)
    q = check_sampling_rate(sampling_rate)
    t = check_positive_int(num_steps, "num_steps")
    accountant = _check_accountant(accountant)
    if accountant == "rdp":
        return _epsilon_raw(sigma, delta, q, t, "rdp", 0.0)
    # Refine the discretisation until it is about 1/1000 of the epsilon it yields: a coarse interval
    # overstates small budgets many times over (1e-2 gives 0.57 where the tight value is 0.0999).
    # Start from an interval scaled to the fast RDP bound (an upper bound too), so large epsilons
    # (small sigma) are not discretised absurdly finely (that took minutes for epsilon ~ 1e4).
    rdp = _epsilon_raw(sigma, delta, q, t, "rdp", 0.0)
    dvi = min(max(rdp / 100.0, 1e-6), 1e3) if math.isfinite(rdp) else 1e-2
    best = min(rdp, _epsilon_raw(sigma, delta, q, t, "pld", dvi))
    for _ in range(8):
        new_dvi = _pld_dvi(best)
        if new_dvi >= dvi * 0.999:
            break
        dvi = new_dvi
        new = _epsilon_raw(sigma, delta, q, t, "pld", dvi)
        improved = new < 0.99 * best
        best = min(best, new)
        if not improved:  # converged: a finer interval changes epsilon by < 1%
            break
    return best


def calibrate_noise_multiplier(epsilon: float, delta: float, sampling_rate: float, num_steps: int,
                               accountant: Accountant = "pld", *,
                               max_noise_multiplier: float = MAX_NOISE_MULTIPLIER,
                               rtol: float = 1e-4) -> float:
    """The smallest noise multiplier (to relative tolerance ``rtol``) whose epsilon is <= target.

    Conservative by construction: the returned sigma always satisfies
    ``dpsgd_epsilon(sigma, delta, sampling_rate, num_steps, accountant) <= epsilon``. Add/remove-one
    adjacency, Poisson subsampling, as :func:`dpsgd_epsilon`.

    Raises:
      ValueError: invalid arguments, or a target that no sigma up to ``max_noise_multiplier`` reaches.
    """
    target = check_epsilon(epsilon)
    delta = check_delta(delta)
    q = check_sampling_rate(sampling_rate)
    t = check_positive_int(num_steps, "num_steps")
    accountant = _check_accountant(accountant)
    max_sigma = check_positive(max_noise_multiplier, "max_noise_multiplier")

    def eps_of(s: float) -> float:
        # One accountant call per bisection step, discretised finely relative to the target; the
        # answer is re-checked with dpsgd_epsilon (the function users call) before returning.
        rdp = _epsilon_raw(s, delta, q, t, "rdp", 0.0)
        if accountant == "rdp":
            return rdp
        # Far from the answer (RDP >> target) a coarse interval suffices and a fine one would make
        # the PLD huge (out of memory for small sigma and many steps); near it, about target/1000.
        if not math.isfinite(rdp):
            scale = 1e3 * target
        else:
            scale = target if rdp <= 20.0 * target else rdp / 20.0
        return _epsilon_raw(s, delta, q, t, "pld", _pld_dvi(scale))

    if eps_of(max_sigma) > target:
        raise ValueError(
            f"no noise multiplier <= max_noise_multiplier={max_sigma:g} reaches epsilon={target:g} with "
            f"delta={delta:g}, sampling_rate={q:g}, num_steps={t} ({accountant}); raise epsilon or delta, "
            "lower num_steps or sampling_rate, or raise max_noise_multiplier")
    lo, hi = None, 1.0
    # Bracket: hi satisfies the target, lo does not.
    if eps_of(hi) <= target:
        while True:
            cand = hi / 2.0
            if cand < MIN_NOISE_MULTIPLIER:
                # conservative: even sigma this small meets the target
                return _confirm(hi, target, delta, q, t, accountant, max_sigma, rtol)
            if eps_of(cand) <= target:
                hi = cand
            else:
                lo = cand
                break
    else:
        lo = hi
        hi = min(hi * 2.0, max_sigma)
        while eps_of(hi) > target:
            lo, hi = hi, min(hi * 2.0, max_sigma)
    while (hi - lo) / hi > rtol:
        mid = math.sqrt(lo * hi)
        if eps_of(mid) <= target:
            hi = mid
        else:
            lo = mid
    return _confirm(hi, target, delta, q, t, accountant, max_sigma, rtol)


def _confirm(sigma: float, target: float, delta: float, q: float, t: int, accountant: str,
             max_sigma: float, rtol: float) -> float:
    """Raises sigma in small steps until ``dpsgd_epsilon`` itself certifies the target."""
    for _ in range(200):
        if dpsgd_epsilon(sigma, delta, q, t, accountant) <= target:
            return sigma
        sigma = min(sigma * (1.0 + rtol), max_sigma)
    raise ArithmeticError(f"calibration did not converge for epsilon={target}, delta={delta}, q={q}, T={t}")
