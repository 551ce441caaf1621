"""Accounting for Poisson-subsampled Gaussian DP-SGD (add/remove-one adjacency), on dp-accounting.

The PLD accountant is the default. It is an upper bound whose tightness depends on its value
discretisation interval, and how fine the interval must be depends on the
setting: about epsilon / 1000 suffices for one step, but the rounding error grows with the number of
composed steps: with an interval of epsilon / 1000, sigma 197, q 0.01, T 1e5, delta 1e-5 reads 0.0494
where the converged value (confirmed by prv-accountant) is 0.0460, 7% less. So we refine the interval
until successive values agree (an estimated remaining error below 0.1% of epsilon, or 1e-6 absolute)
and report the smallest value met; every value met is a valid upper bound, so the smallest one is too.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator
from typing import Literal, NamedTuple, cast

from dp_accounting import dp_event
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.privacy_accountant import NeighboringRelation
from dp_accounting.rdp import rdp_privacy_accountant

from .._checks import check_delta, check_epsilon, check_positive, check_positive_int, check_sampling_rate

Accountant = Literal["pld", "rdp"]
ACCOUNTANTS = ("pld", "rdp")

#: default bounds searched by calibration.
MIN_NOISE_MULTIPLIER = 1e-2
MAX_NOISE_MULTIPLIER = 1e6

#: PLD refinement: start at the interval _PLD_START_DVI, refine by factors of 4 or more (powers of
#: two) until the estimated remaining discretisation error of epsilon is below
#: max(_PLD_RTOL * epsilon, _PLD_ATOL); never finer than _PLD_MIN_DVI; at most
#: _PLD_MAX_REFINEMENTS refinements.
_PLD_RTOL = 1e-3
_PLD_ATOL = 1e-6
_PLD_MIN_DVI = 1e-6
_PLD_START_DVI = 2.0**-4
_PLD_MAX_REFINEMENTS = 10

_RELATIONS = {
    "add_remove": NeighboringRelation.ADD_OR_REMOVE_ONE,
    "replace_one": NeighboringRelation.REPLACE_ONE,
}


def _check_accountant(accountant: str) -> Accountant:
    if accountant not in ACCOUNTANTS:
        raise ValueError(f"accountant must be one of {ACCOUNTANTS}, got {accountant!r}")
    return cast(Accountant, accountant)  # one of ACCOUNTANTS, checked above


def _event(
    noise_multiplier: float, sampling_rate: float, num_steps: int, extra_gaussian: float | None = None
) -> dp_event.DpEvent:
    gauss = dp_event.GaussianDpEvent(noise_multiplier)
    step = gauss if sampling_rate == 1.0 else dp_event.PoissonSampledDpEvent(sampling_rate, gauss)
    run = dp_event.SelfComposedDpEvent(step, num_steps)
    if extra_gaussian is None:
        return run
    return dp_event.ComposedDpEvent([dp_event.GaussianDpEvent(extra_gaussian), run])


@functools.lru_cache(maxsize=4096)
def _epsilon_raw(
    noise_multiplier: float,
    delta: float,
    sampling_rate: float,
    num_steps: int,
    accountant: str,
    dvi: float,
    neighbouring: str = "add_remove",
    extra_gaussian: float | None = None,
) -> float:
    """One run of dp-accounting. Under ``"replace_one"`` a record's contribution may change by twice
    the clip norm (dp-accounting's REPLACE_ONE convention); ``noise_multiplier`` is always the noise
    std divided by the clip norm. ``extra_gaussian``: the noise multiplier of one more Gaussian
    mechanism of sensitivity 1 composed with the run (None: none)."""
    relation = _RELATIONS[neighbouring]
    if accountant == "pld" and noise_multiplier < MIN_NOISE_MULTIPLIER:
        # Below this the PLD grid takes gigabytes and minutes (1e-4: 6 GB, still running after a
        # minute), for an epsilon in the tens of thousands.
        raise ValueError(
            f"the pld accountant needs noise_multiplier >= {MIN_NOISE_MULTIPLIER:g} (below it its grid takes "
            f"gigabytes and minutes, for a useless epsilon), got noise_multiplier={noise_multiplier!r} "
            f"(sampling_rate={sampling_rate!r}, num_steps={num_steps}, delta={delta!r}); use accountant='rdp'"
        )
    if accountant == "pld":
        acc = pld_privacy_accountant.PLDAccountant(neighboring_relation=relation, value_discretization_interval=dvi)
    else:
        acc = rdp_privacy_accountant.RdpAccountant(neighboring_relation=relation)
    try:
        acc.compose(_event(noise_multiplier, sampling_rate, num_steps, extra_gaussian))
        eps = float(acc.get_epsilon(delta))
    except (MemoryError, OverflowError, ValueError) as e:  # e.g. a PLD grid too large to allocate
        raise ValueError(
            f"the {accountant} accountant cannot evaluate noise_multiplier={noise_multiplier!r}, "
            f"sampling_rate={sampling_rate!r}, num_steps={num_steps}, delta={delta!r}: "
            f"{type(e).__name__}: {e}; these arguments are outside what it can compute (typically a "
            "noise_multiplier below 0.01 or a subnormal sampling_rate, whose epsilon is useless anyway); "
            "use noise_multiplier >= 0.01, or accountant='rdp'"
        ) from e
    if math.isnan(eps) or eps < 0:
        raise ArithmeticError(
            f"the {accountant} accountant returned epsilon={eps} for noise_multiplier={noise_multiplier}, "
            f"sampling_rate={sampling_rate}, num_steps={num_steps}, delta={delta} ({neighbouring})"
        )
    return eps


def _ladder(dvi: float) -> float:
    """The largest power of two <= dvi: nearby noise multipliers then share intervals (and the
    cache of :func:`_epsilon_raw`)."""
    return 2.0 ** math.floor(math.log2(dvi))


def _pld_epsilons(
    noise_multiplier: float,
    delta: float,
    sampling_rate: float,
    num_steps: int,
    neighbouring: str = "add_remove",
    extra_gaussian: float | None = None,
) -> Iterator[tuple[float, float]]:
    """(interval, PLD upper bound on epsilon) for ever finer discretisation intervals, until the
    bounds converge.

    Deterministic: the same arguments give the same sequence, so a caller that stops early (as
    calibration does once a value meets its target) sees a prefix of what :func:`dpsgd_epsilon`
    takes the minimum over.
    """

    def run(dvi: float) -> float:
        return _epsilon_raw(noise_multiplier, delta, sampling_rate, num_steps, "pld", dvi, neighbouring, extra_gaussian)

    def small(remaining: float, best: float) -> bool:
        return remaining <= max(_PLD_RTOL * best, _PLD_ATOL)

    dvi = _PLD_START_DVI
    eps = run(dvi)
    yield dvi, eps
    best = eps
    if best == 0.0 or math.isinf(best):
        # inf: delta is below the tail mass the discretised PLD resolves; refining cannot help (and
        # each refinement costs 4x the last), so the caller reports it at once.
        return
    if dvi <= best / 400.0:
        # Already fine for an epsilon this large: check against a coarser (cheaper) interval;
        # the rounding error is at most about proportional to the interval.
        coarse = 4.0 * dvi
        eps_c = run(coarse)
        yield coarse, eps_c
        best = min(best, eps_c)
        if small(abs(eps_c - eps) / 3.0, best):
            return
    values = [(dvi, eps)]
    for _ in range(_PLD_MAX_REFINEMENTS):
        dvi = max(_ladder(min(dvi / 4.0, best / 100.0)), _PLD_MIN_DVI)
        eps = run(dvi)
        yield dvi, eps
        best = min(best, eps)
        values.append((dvi, eps))
        if best == 0.0 or dvi <= _PLD_MIN_DVI:
            return
        (d1, e1), (d2, e2) = values[-2], values[-1]
        change = e1 - e2
        # What remains at the finest interval: with three values and a shrinking change, the tail
        # of a geometric series with the observed ratio (Aitken); otherwise assume the error is
        # proportional to the interval (it falls faster in practice, so this over-refines).
        remaining = abs(change) / (d1 / d2 - 1.0)
        if len(values) >= 3 and change > 0:
            prev_change = values[-3][1] - e1
            if prev_change > change:
                remaining = min(remaining, change / (prev_change / change - 1.0))
        if small(remaining, best):
            return


def _check_relation(accountant: str, neighbouring: str) -> None:
    if accountant == "rdp" and neighbouring != "add_remove":
        raise ValueError(
            "the rdp accountant (dp-accounting) has no replace-one analysis of Poisson subsampling; "
            "use accountant='pld' for replace-one adjacency"
        )


def _epsilon(
    noise_multiplier: float,
    delta: float,
    sampling_rate: float,
    num_steps: int,
    accountant: str,
    neighbouring: str = "add_remove",
    extra_gaussian: float | None = None,
) -> float:
    """Validated-argument core of :func:`dpsgd_epsilon`, with the neighbouring relation explicit."""
    _check_relation(accountant, neighbouring)
    if accountant == "rdp":
        eps = _epsilon_raw(noise_multiplier, delta, sampling_rate, num_steps, "rdp", 0.0, neighbouring, extra_gaussian)
    else:
        eps = min(
            eps
            for _, eps in _pld_epsilons(noise_multiplier, delta, sampling_rate, num_steps, neighbouring, extra_gaussian)
        )
    if math.isinf(eps):
        raise ValueError(
            f"the {accountant} accountant gives no finite epsilon for delta={delta!r} "
            f"(noise_multiplier={noise_multiplier!r}, sampling_rate={sampling_rate!r}, num_steps={num_steps}): "
            f"at this noise delta is below what the {accountant} accountant resolves (the PLD accountant "
            "truncates tail mass near 1e-15, so its epsilon is unbounded); use a larger delta (>= 1e-12) "
            "or noise_multiplier, or accountant='rdp'"
        )
    return eps


class _PldLevels(NamedTuple):
    """PLD epsilon at one fixed interval, and the finest interval the refinement uses, as functions
    of the noise multiplier (the other arguments fixed)."""

    delta: float
    sampling_rate: float
    num_steps: int
    neighbouring: str
    extra_gaussian: float | None = None

    def epsilon_at(self, noise_multiplier: float, dvi: float) -> float:
        return _epsilon_raw(
            noise_multiplier,
            self.delta,
            self.sampling_rate,
            self.num_steps,
            "pld",
            dvi,
            self.neighbouring,
            self.extra_gaussian,
        )

    def epsilons(self, noise_multiplier: float) -> Iterator[tuple[float, float]]:
        return _pld_epsilons(
            noise_multiplier, self.delta, self.sampling_rate, self.num_steps, self.neighbouring, self.extra_gaussian
        )

    def finest(self, noise_multiplier: float) -> float:
        return min(d for d, _ in self.epsilons(noise_multiplier))


class _Decision(NamedTuple):
    meets: bool  # exactly _epsilon(...) <= target
    epsilon: float  # the converged epsilon if not meets, else some upper bound <= target
    level: float  # the finest PLD interval used (0.0 for rdp)


def _decide(
    noise_multiplier: float,
    target: float,
    delta: float,
    sampling_rate: float,
    num_steps: int,
    accountant: str,
    neighbouring: str = "add_remove",
    extra_gaussian: float | None = None,
) -> _Decision:
    """Whether ``_epsilon(...) <= target``, stopping the PLD refinement as soon as that is known."""
    _check_relation(accountant, neighbouring)
    if accountant == "rdp":
        eps = _epsilon_raw(noise_multiplier, delta, sampling_rate, num_steps, "rdp", 0.0, neighbouring, extra_gaussian)
        return _Decision(eps <= target, eps, 0.0)
    best, dvi = math.inf, 0.0
    for dvi, eps in _pld_epsilons(noise_multiplier, delta, sampling_rate, num_steps, neighbouring, extra_gaussian):
        if eps <= target:
            return _Decision(True, eps, dvi)
        best = min(best, eps)
    return _Decision(False, best, dvi)


def dpsgd_epsilon(
    noise_multiplier: float,
    delta: float,
    sampling_rate: float,
    num_steps: int,
    accountant: Accountant = "pld",
    *,
    extra_gaussian: float | None = None,
) -> float:
    """Epsilon spent by Poisson-subsampled Gaussian DP-SGD (and one more Gaussian release, if given).

    Privacy: each of ``num_steps`` steps includes every record independently with probability
    ``sampling_rate`` and adds Gaussian noise of std ``noise_multiplier`` times the L2 sensitivity
    (the clip norm) to the sum of clipped per-record gradients. Add/remove-one adjacency.

    ``extra_gaussian``: the noise multiplier of one more Gaussian mechanism of L2 sensitivity 1 (under
    the same add/remove-one adjacency) released from the same data, e.g. the private choice of the clip
    (:mod:`dpposterior.vi.auto_clip`); the epsilon is then that of the composition of both releases,
    accounted together by the same accountant (dp-accounting's ``ComposedDpEvent``). Several Gaussian
    mechanisms of sensitivity 1 with noise multipliers s_i compose exactly into one with noise
    multiplier ``(sum_i s_i^-2)^-1/2`` (Dong, Roth & Su, "Gaussian differential privacy", 2022,
    Corollary 3.3), so one number describes any number of them.

    Args:
      noise_multiplier: sigma, the noise std divided by the clip norm; > 0.
      delta: target delta in (0, 1).
      sampling_rate: Poisson sampling rate q in (0, 1].
      num_steps: number of released steps T >= 1 (an int; a float such as 1e4 is refused).
      accountant: ``"pld"`` (default; dp-accounting's privacy-loss-distribution accountant, its
        discretisation interval refined until epsilon has converged to about 0.1%) or ``"rdp"``.
      extra_gaussian: None (DP-SGD alone) or a noise multiplier > 0 (see above).

    Returns:
      An upper bound on epsilon (both accountants are pessimistic). It can be 0 only when the
      mechanism really is (0, delta)-DP (delta at least the total variation distance), e.g. a huge
      noise multiplier.

    Raises:
      ValueError, TypeError: invalid arguments; also a ValueError (never an infinite epsilon) when
        the accountant cannot give a finite bound, e.g. a delta below about 1e-15 with PLD (its
        truncated tail mass), or arguments it cannot compute (PLD: a noise multiplier below 0.01).
        PLD's cost grows with ``num_steps``: beyond about 1e6 steps it takes minutes (use "rdp").
    """
    sigma = check_positive(noise_multiplier, "noise_multiplier")
    delta = check_delta(delta)
    q = check_sampling_rate(sampling_rate)
    t = check_positive_int(num_steps, "num_steps")
    accountant = _check_accountant(accountant)
    extra = _check_extra(extra_gaussian)
    return _epsilon(sigma, delta, q, t, accountant, "add_remove", extra)


def _check_extra(extra_gaussian: float | None) -> float | None:
    """``extra_gaussian`` as None or a finite float > 0 (a bool, a string or a non-positive value refused)."""
    if extra_gaussian is None:
        return None
    return check_positive(extra_gaussian, "extra_gaussian")


def _search_noise_multiplier(
    decide: Callable[[float], _Decision],
    target: float,
    *,
    max_sigma: float,
    rtol: float,
    unreachable: str,
    pld: _PldLevels | None = None,
) -> float:
    """The smallest sigma (to relative tolerance ``rtol``) for which ``decide(sigma).meets`` holds.

    ``decide`` must be (essentially) monotone in sigma: False below a threshold, True above. The
    search brackets the threshold (jumping by the ratio epsilon / target, since epsilon falls like
    1/sigma to 1/sigma^2), then narrows the bracket by regula falsi on log(epsilon / target) in log
    sigma with the Illinois modification.

    For the PLD accountant (``pld`` given), ``decide`` refines the discretisation at every sigma,
    which makes it costly and slightly jagged in sigma. So the bracket is narrowed with ``decide``
    only to 2%, and then to ``rtol`` on PLD epsilon at one fixed interval (the finest that the
    refinement uses at the bracket's upper end): a smooth function of sigma costing one accountant
    run. Whatever the narrowing finds is finally checked with ``decide`` itself and raised until it
    passes, so the result always satisfies ``decide``. Sigma below MIN_NOISE_MULTIPLIER is not
    searched (the smallest sigma tried at or above it is returned if it already meets the target).

    Raises:
      ValueError(``unreachable``): if ``decide(max_sigma)`` fails.
    """
    log_target = math.log(target)

    def g(e: float) -> float:
        return math.log(min(max(e, 1e-300), 1e300)) - log_target

    top = decide(max_sigma)
    if not top.meets:
        raise ValueError(unreachable)
    hi, g_hi = max_sigma, g(top.epsilon)
    # Bracket, starting at sigma = 1: hi meets the target, lo does not.
    x = min(1.0, max_sigma)
    d = decide(x)
    if d.meets:
        hi, g_hi = x, g(d.epsilon)
        while True:
            if hi <= MIN_NOISE_MULTIPLIER:
                return hi  # conservative: no smaller sigma is searched
            x = max(hi * min(max(math.exp(min(g_hi, 0.0)), 1e-2), 0.5), MIN_NOISE_MULTIPLIER)
            d = decide(x)
            if not d.meets:
                break
            hi, g_hi = x, g(d.epsilon)
    else:
        while True:
            lo_d, lo = d, x
            x = min(
                lo * min(max(math.exp(min(g(d.epsilon), 10.0)), 2.0), 100.0), max_sigma
            )  # capped: no overflow at a subnormal target
            if x >= max_sigma:
                break  # hi = max_sigma meets the target
            d = decide(x)
            if d.meets:
                hi, g_hi = x, g(d.epsilon)
                break
        d, x = lo_d, lo
    lo, g_lo = x, g(d.epsilon)

    def by_decide(s: float) -> tuple[bool, float]:
        dd = decide(s)
        return dd.meets, g(dd.epsilon)

    if pld is None:
        lo, hi = _narrow(by_decide, lo, hi, g_lo, g_hi, rtol)
    else:
        # Narrow to 2% with decide, then to rtol at the interval the refinement needs at hi.
        floor = lo  # decide fails here with margin: never evaluate below it
        lo, hi = _narrow(by_decide, lo, hi, g_lo, g_hi, max(rtol, 2e-2))
        if (hi - lo) / hi > rtol:
            fixed = pld.finest(hi)

            def by_level(s: float) -> tuple[bool, float]:
                e = pld.epsilon_at(s, fixed)
                return e <= target, g(e)

            ok_lo, g_lo = by_level(lo)
            ok_hi, g_hi = by_level(hi)
            for _ in range(4):  # (rare) make [lo, hi] a bracket at this interval, within limits
                if ok_lo and lo > floor:
                    hi, g_hi, ok_hi = lo, g_lo, True
                    lo = max(lo / 1.05, floor)
                    ok_lo, g_lo = by_level(lo)
                elif not ok_hi and hi < max_sigma:
                    lo, g_lo, ok_lo = hi, g_hi, False
                    hi = min(hi * 1.05, max_sigma)
                    ok_hi, g_hi = by_level(hi)
            if ok_hi and not ok_lo:
                lo, hi = _narrow(by_level, lo, hi, g_lo, g_hi, rtol)
    # The guarantee is about decide itself: check, and step up until it holds.
    step = rtol
    for _ in range(200):
        if hi >= max_sigma or decide(hi).meets:
            if pld is not None:
                _check_pld_resolves(pld, min(hi, max_sigma), target)
            return min(hi, max_sigma)
        hi *= 1.0 + step
        step *= 2.0
    raise ArithmeticError(f"noise calibration did not converge near sigma={hi:g}")


#: below this delta calibration also checks every PLD refinement at the answer for an unbounded epsilon
#: (dp-accounting truncates tail mass of about 1e-15 per step; deltas of 1e-14 still calibrate)
_PLD_TAIL_RISK_DELTA = 1e-9


def _check_pld_resolves(pld: _PldLevels, sigma: float, target: float) -> None:
    """Raises if PLD's epsilon just below the calibrated ``sigma``, or at ``sigma`` at some interval of
    its refinement, is unbounded: then ``sigma`` is where the accountant starts to resolve ``delta``
    (its truncated tail mass), not where epsilon reaches the target, and it can be orders of magnitude
    more noise than the target needs."""
    below = sigma / 1.01
    unbounded = below >= MIN_NOISE_MULTIPLIER and math.isinf(pld.epsilon_at(below, _PLD_START_DVI))
    if not unbounded and pld.delta < _PLD_TAIL_RISK_DELTA:
        # near the edge PLD's epsilon jumps between finite and inf as its interval is refined (only for
        # deltas near the truncated tail mass; the refinements cost more than the calibration itself)
        unbounded = any(math.isinf(e) for _, e in pld.epsilons(sigma))
    if unbounded:
        raise ValueError(
            f"the pld accountant cannot resolve delta={pld.delta!r} (sampling_rate={pld.sampling_rate!r}, "
            f"num_steps={pld.num_steps}): its epsilon is unbounded for noise multipliers up to about "
            f"{sigma:.4g} (it truncates tail mass near 1e-15), so calibration would return {sigma:.4g}, far "
            f"more noise than epsilon={target:g} needs; use a larger delta (>= 1e-12) or accountant='rdp'"
        )


def _narrow(
    h: Callable[[float], tuple[bool, float]], lo: float, hi: float, g_lo: float, g_hi: float, tol: float
) -> tuple[float, float]:
    """Shrinks a bracket (h(lo) fails, h(hi) holds) to relative width ``tol``: regula falsi on
    g = log(epsilon / target) over log sigma, Illinois-modified, stepping a little past each
    estimate towards the end that stalls, with bisection when an estimate leaves the bracket."""
    a, b = math.log(lo), math.log(hi)
    g_a, g_b = max(g_lo, 1e-12), min(g_hi, 0.0)
    nudge = 0.4 * math.log1p(tol)
    kept = 0  # +k: hi moved k times in a row (lo kept); -k: lo moved k times in a row
    iterations = 0
    while (hi - lo) / hi > tol:
        iterations += 1
        z = a + g_a / (g_a - g_b) * (b - a)
        z += -nudge if kept > 0 else nudge
        if iterations > 30 or not (a + 0.25 * nudge < z < b - 0.25 * nudge):
            z = 0.5 * (a + b)
        ok, gz = h(math.exp(z))
        if ok:
            b, hi, g_b = z, math.exp(z), min(gz, 0.0)
            kept = kept + 1 if kept > 0 else 1
            if kept >= 2:
                g_a *= 0.5
        else:
            a, lo, g_a = z, math.exp(z), max(gz, 1e-12)
            kept = kept - 1 if kept < 0 else -1
            if kept <= -2:
                g_b *= 0.5
    return lo, hi


def calibrate_noise_multiplier(
    epsilon: float,
    delta: float,
    sampling_rate: float,
    num_steps: int,
    accountant: Accountant = "pld",
    *,
    max_noise_multiplier: float = MAX_NOISE_MULTIPLIER,
    rtol: float = 1e-4,
    extra_gaussian: float | None = None,
) -> float:
    """The smallest noise multiplier (to relative tolerance ``rtol``) whose epsilon is <= target.

    Conservative by construction: the returned sigma always satisfies
    ``dpsgd_epsilon(sigma, delta, sampling_rate, num_steps, accountant, extra_gaussian=extra_gaussian)
    <= epsilon``. Add/remove-one adjacency, Poisson subsampling, as :func:`dpsgd_epsilon`. Sigma is
    searched in [0.01, ``max_noise_multiplier``]; if even 0.01 meets the target, 0.01 is returned.
    With ``extra_gaussian`` the DP-SGD run gets what the composition leaves after that Gaussian release
    (:func:`dpsgd_epsilon`): the two together are (epsilon, delta)-DP.

    Args:
      epsilon: target epsilon, finite and > 0.
      delta: target delta in (0, 1).
      sampling_rate: Poisson sampling rate q in (0, 1].
      num_steps: number of steps T >= 1 (an int).
      accountant: ``"pld"`` (default) or ``"rdp"``.
      max_noise_multiplier: the largest sigma searched (default 1e6).
      rtol: relative width of the final bracket on sigma, in [1e-12, 1).
      extra_gaussian: None, or the noise multiplier (> 0) of one more Gaussian mechanism of
        sensitivity 1 released from the same data (see :func:`dpsgd_epsilon`).

    Raises:
      ValueError: invalid arguments, a target that no sigma up to ``max_noise_multiplier`` reaches (with
        ``extra_gaussian``: also when that release alone spends the target), or (PLD) a delta too small
        for the accountant to resolve (below about 1e-15: its epsilon is unbounded up to an arbitrarily
        large sigma; use "rdp").
    """
    target = check_epsilon(epsilon)
    delta = check_delta(delta)
    q = check_sampling_rate(sampling_rate)
    t = check_positive_int(num_steps, "num_steps")
    accountant = _check_accountant(accountant)
    max_sigma = check_positive(max_noise_multiplier, "max_noise_multiplier")
    rtol = _check_rtol(rtol)
    extra = _check_extra(extra_gaussian)
    also = "" if extra is None else f" together with a Gaussian release of noise multiplier {extra:.6g}"
    return _search_noise_multiplier(
        lambda s: _decide(s, target, delta, q, t, accountant, "add_remove", extra),
        target,
        max_sigma=max_sigma,
        rtol=rtol,
        pld=None if accountant == "rdp" else _PldLevels(delta, q, t, "add_remove", extra),
        unreachable=(
            f"no noise multiplier <= max_noise_multiplier={max_sigma:g} reaches epsilon={target:g} with "
            f"delta={delta:g}, sampling_rate={q:g}, num_steps={t} ({accountant}){also}; raise epsilon or "
            "delta, lower num_steps or sampling_rate, or raise max_noise_multiplier"
            + (
                "; or, at a large delta, lower it: a share of the budget calibrated alone at a large delta "
                "can spend more of epsilon in the composition than it did alone"
                if extra is not None and delta >= 0.01
                else ""
            )
        ),
    )


#: the smallest relative tolerance of a noise calibration: a bracket on sigma cannot shrink much
#: below float64 resolution (about 2e-16), and the search then never ends.
MIN_RTOL = 1e-12


def _check_rtol(rtol: float) -> float:
    r = check_positive(rtol, "rtol")
    if not MIN_RTOL <= r < 1:
        raise ValueError(
            f"rtol must lie in [{MIN_RTOL:g}, 1) (float64 cannot resolve a finer bracket on sigma), got {rtol!r}"
        )
    return r
