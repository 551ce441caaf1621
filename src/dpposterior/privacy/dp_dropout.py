"""Accountants of DP dropout / DP-SGLD (Ermis & Cemgil, "Differentially private dropout" (2017)).

The mechanism: at each of T iterations a minibatch is drawn (every record independently with
probability q, Poisson sampling), per-example gradients are clipped to L2 norm C and summed, and
Gaussian noise N(0, 4 C^2 sigma^2 I) is added to the sum. The paper states replace-one adjacency,
under which the sum has L2 sensitivity 2C, so ``sigma`` (called ``noise_multiplier`` below, as in
the paper) is the noise std divided by 2C. Under add/remove-one adjacency the sensitivity is C and
the same noise is 2 sigma times it.

Two accountants are as the paper describes them (loose, kept for reproduction):

- DPD-AC (:func:`dpd_ac_epsilon`): each iteration is a Gaussian mechanism with
  sigma = sqrt(2 ln(1.25/delta_iter)) / epsilon_iter, i.e. epsilon_iter = sqrt(2 ln(1.25/delta_iter))
  / sigma (valid only for epsilon_iter < 1), amplified by subsampling to
  (ln(1 + q (e^epsilon_iter - 1)), q delta_iter), and T iterations composed by advanced composition
  with slack delta'; delta_iter = (delta - delta') / (T q), so the total delta is delta.
- DPD-zCDP (:func:`dpd_zcdp_epsilon`): rho = 1 / (2 sigma^2) per iteration, T rho in all, and
  epsilon = T rho + 2 sqrt(T rho ln(1/delta)). No amplification by subsampling is used.

Beside them, :func:`dpd_epsilon` offers the tight modern accountant of the same mechanism
(``"pld"``, dp-accounting's privacy loss distributions, for either relation; ``"rdp"`` for
add/remove only), and :func:`calibrate_dpd_noise_multiplier` turns a total (epsilon, delta) into
sigma under any of the four.

Why the paper's bounds hold under both relations: a Gaussian mechanism calibrated to the
replace-one sensitivity 2C is (epsilon_iter, delta_iter)-DP both for replacing a record and for
adding or removing one (sensitivity C <= 2C), and then Poisson subsampling amplifies it to
(ln(1 + q (e^epsilon_iter - 1)), q delta_iter) under replace-one adjacency as well (advanced joint
convexity, Balle, Barthe & Gaboardi 2018, Theorem 2); the zCDP of the Gaussian mechanism likewise
bounds both relations. Under add/remove-one adjacency these bounds are loose by the factor 2 in
sensitivity on top of their own looseness.

Fixed-size minibatches (the paper's experiments) are not Poisson sampling: these functions account
for Poisson sampling only.
"""

from __future__ import annotations

import math
from typing import Final, Literal, cast

from .._checks import check_delta, check_epsilon, check_positive, check_positive_int, check_sampling_rate
from .composition import _amplify, _finite
from .dpsgd_accounting import MAX_NOISE_MULTIPLIER, _check_rtol, _decide, _Decision, _epsilon
from .dpsgd_accounting import _PldLevels, _search_noise_multiplier
from .spent import NEIGHBOURING_RELATIONS, Neighbouring, PrivacySpent, SeededBy

DPDAccountant = Literal["ac", "zcdp", "pld", "rdp"]
DPD_ACCOUNTANTS: Final = ("ac", "zcdp", "pld", "rdp")
MECHANISM = "dp_dropout_gaussian"


def _check_neighbouring(neighbouring: str) -> Neighbouring:
    if neighbouring not in NEIGHBOURING_RELATIONS:
        raise ValueError(f"neighbouring must be one of {NEIGHBOURING_RELATIONS}, got {neighbouring!r}")
    return cast(Neighbouring, neighbouring)


def _check_dpd_accountant(accountant: str) -> DPDAccountant:
    if accountant not in DPD_ACCOUNTANTS:
        raise ValueError(f"accountant must be one of {DPD_ACCOUNTANTS}, got {accountant!r}")
    return cast(DPDAccountant, accountant)


def _delta_prime(delta: float, delta_prime: float | None) -> float:
    if delta_prime is None:
        return delta / 2.0
    dp = check_delta(delta_prime, "delta_prime")
    if dp >= delta:
        raise ValueError(f"delta_prime must lie in (0, delta) = (0, {delta:g}), got {delta_prime!r}")
    return dp


def _delta_iter(delta: float, delta_prime: float, q: float, t: int) -> float:
    d_iter = (delta - delta_prime) / (t * q)
    if d_iter >= 1.0:
        raise ValueError(
            f"delta_iter = (delta - delta_prime) / (num_steps * sampling_rate) = {d_iter:g} >= 1: "
            "the per-iteration Gaussian mechanism needs a delta below 1; lower delta or raise "
            "num_steps * sampling_rate"
        )
    return d_iter


def _ac(sigma: float, delta: float, q: float, t: int, delta_prime: float) -> tuple[float, dict]:
    """DPD-AC total epsilon and its intermediate values; ValueError if epsilon_iter >= 1."""
    d_iter = _delta_iter(delta, delta_prime, q, t)
    # differences of logs, never ln(1.25 / delta_iter) or ln(1 / delta'): the quotients overflow to inf
    # for a subnormal delta (below 2.2e-308), where the bounds are still finite
    c = math.sqrt(2.0 * (math.log(1.25) - math.log(d_iter)))
    eps_iter = c / sigma
    if eps_iter >= 1.0:
        raise ValueError(
            "DPD-AC: the per-iteration epsilon sqrt(2 ln(1.25/delta_iter))/noise_multiplier = "
            f"{eps_iter:.4g} >= 1 (delta_iter={d_iter:.3g}), where the classic Gaussian mechanism bound "
            f"does not hold (Dwork & Roth 2014, Theorem A.1); use noise_multiplier > {c:.4g} or "
            "accountant 'pld'"
        )
    eps_step = _amplify(eps_iter, q)
    d_step = q * d_iter
    eps_total = math.sqrt(-2.0 * t * math.log(delta_prime)) * eps_step + t * eps_step * math.expm1(eps_step)
    return eps_total, {
        "epsilon_iter": eps_iter,
        "delta_iter": d_iter,
        "epsilon_step": eps_step,
        "delta_step": d_step,
        "delta_prime": delta_prime,
    }


def _zcdp(sigma: float, delta: float, t: int) -> tuple[float, dict]:
    """DPD-zCDP total epsilon and rho; ValueError (never an inf epsilon) when they overflow."""
    variance = 2.0 * sigma * sigma
    rho = t / variance if variance > 0 else math.inf
    eps = _finite(
        "the DPD-zCDP epsilon",
        rho + 2.0 * math.sqrt(-rho * math.log(delta)),
        f"noise_multiplier={sigma!r}, num_steps={t}, delta={delta!r}",
    )
    return eps, {"rho": rho}


def _record(
    eps: float,
    delta: float,
    sigma: float,
    q: float,
    t: int,
    accountant: str,
    neighbouring: Neighbouring,
    seeded_by: SeededBy,
    details: dict,
) -> PrivacySpent:
    sens, per = ("2 * clip", 1.0) if neighbouring == "replace_one" else ("clip", 2.0)
    extra = {
        "dpd_noise_multiplier": sigma,
        "noise_std": "2 * clip * dpd_noise_multiplier",
        "sensitivity": sens,
        "sampling": "poisson",
        **details,
    }
    return PrivacySpent(
        epsilon=float(eps),
        delta=float(delta),
        neighbouring=neighbouring,
        accountant=accountant,
        mechanism=MECHANISM,
        noise_multiplier=per * sigma,
        sampling_rate=q,
        num_steps=t,
        seeded_by=seeded_by,
        details=tuple(extra.items()),
    )


def _validate(
    noise_multiplier: float, delta: float, sampling_rate: float, num_steps: int, neighbouring: str
) -> tuple[float, float, float, int, Neighbouring]:
    return (
        check_positive(noise_multiplier, "noise_multiplier"),
        check_delta(delta),
        check_sampling_rate(sampling_rate),
        check_positive_int(num_steps, "num_steps"),
        _check_neighbouring(neighbouring),
    )


def dpd_ac_epsilon(
    noise_multiplier: float,
    delta: float,
    sampling_rate: float,
    num_steps: int,
    *,
    delta_prime: float | None = None,
    neighbouring: Literal["replace_one", "add_remove"] = "replace_one",
    seeded_by: SeededBy = "os",
) -> PrivacySpent:
    """DPD-AC: the DP dropout paper's accounting by advanced composition.

    Privacy: T iterations, each Poisson-sampling records with rate q and adding N(0, 4 C^2 sigma^2 I)
    to the sum of per-example gradients clipped to C (sensitivity 2C under replace-one adjacency,
    C under add/remove-one). Per iteration the classic Gaussian mechanism bound gives
    epsilon_iter = sqrt(2 ln(1.25/delta_iter)) / sigma with delta_iter = (delta - delta') / (T q);
    subsampling amplifies it to (ln(1 + q (e^epsilon_iter - 1)), q delta_iter); advanced
    composition over T iterations gives epsilon = sqrt(2 T ln(1/delta')) epsilon_step +
    T epsilon_step (e^epsilon_step - 1) and delta = T q delta_iter + delta'. Reference:
    Ermis & Cemgil, "Differentially private dropout" (2017); valid for both relations (see the
    module docstring).

    Loose: the classic Gaussian bound, the amplification bound and advanced composition each give
    away a lot; for the same sigma the PLD accountant (``dpd_epsilon(..., accountant="pld")``)
    certifies a much smaller epsilon. The paper does not say how delta is split between delta_iter
    and delta'; we default to delta' = delta / 2.

    Args:
      noise_multiplier: sigma, the noise std divided by 2C (the paper's sigma), > 0.
      delta: the total delta, in (0, 1).
      sampling_rate: Poisson sampling rate q, in (0, 1].
      num_steps: iterations T, an int >= 1.
      delta_prime: the advanced-composition slack delta', in (0, delta); default delta / 2.
      neighbouring: the relation reported, ``"replace_one"`` (the paper's) or ``"add_remove"``.
      seeded_by: how the run's noise was seeded, copied into the record.

    Returns:
      The PrivacySpent record (accountant ``"dpd_ac"``), with the per-iteration values in details.

    Raises:
      ValueError: invalid arguments; delta_iter >= 1; or epsilon_iter >= 1, where the classic
        Gaussian bound does not hold (the message gives the smallest sigma allowed).
    """
    sigma, d, q, t, rel = _validate(noise_multiplier, delta, sampling_rate, num_steps, neighbouring)
    dp = _delta_prime(d, delta_prime)
    eps, details = _ac(sigma, d, q, t, dp)
    return _record(eps, d, sigma, q, t, "dpd_ac", rel, seeded_by, details)


def dpd_zcdp_epsilon(
    noise_multiplier: float,
    delta: float,
    sampling_rate: float,
    num_steps: int,
    *,
    neighbouring: Literal["replace_one", "add_remove"] = "replace_one",
    seeded_by: SeededBy = "os",
) -> PrivacySpent:
    """DPD-zCDP: the DP dropout paper's accounting by zero-concentrated DP.

    Privacy: the mechanism of :func:`dpd_ac_epsilon`. Each iteration is a Gaussian mechanism with
    noise std sigma times the sensitivity 2C, hence rho = 1 / (2 sigma^2)-zCDP (Bun & Steinke 2016,
    Proposition 1.6); T iterations are T rho-zCDP (Lemma 2.3); converted with
    epsilon = T rho + 2 sqrt(T rho ln(1/delta)) (Proposition 1.3). Reference: Ermis & Cemgil,
    "Differentially private dropout" (2017); valid for both relations (see the module docstring).

    Loose: no amplification by subsampling is used (so ``sampling_rate`` only goes into the
    record), and the classic conversion is looser than the tight one of
    :func:`~dpposterior.privacy.zcdp_to_dp` (``method="tight"``).

    Args:
      noise_multiplier: sigma, the noise std divided by 2C (the paper's sigma), > 0.
      delta: the total delta, in (0, 1).
      sampling_rate: Poisson sampling rate q, in (0, 1] (recorded, not used in the bound).
      num_steps: iterations T, an int >= 1.
      neighbouring: the relation reported, ``"replace_one"`` (the paper's) or ``"add_remove"``.
      seeded_by: how the run's noise was seeded, copied into the record.

    Returns:
      The PrivacySpent record (accountant ``"dpd_zcdp"``), with the total rho in details.

    Raises:
      ValueError: invalid arguments, or a noise multiplier so small (below about 1e-150) that the
        epsilon overflows.
    """
    sigma, d, q, t, rel = _validate(noise_multiplier, delta, sampling_rate, num_steps, neighbouring)
    eps, details = _zcdp(sigma, d, t)
    return _record(eps, d, sigma, q, t, "dpd_zcdp", rel, seeded_by, details)


def _modern(sigma: float, d: float, q: float, t: int, accountant: str, rel: str) -> float:
    """The PLD / RDP epsilon of the DP dropout mechanism: dp-accounting's noise multiplier is the
    noise std over the clip norm C, i.e. 2 sigma, for either relation (dp-accounting's replace-one
    convention lets one record's contribution move by 2C)."""
    return _epsilon(2.0 * sigma, d, q, t, accountant, rel)


def dpd_epsilon(
    noise_multiplier: float,
    delta: float,
    sampling_rate: float,
    num_steps: int,
    accountant: DPDAccountant = "ac",
    *,
    delta_prime: float | None = None,
    neighbouring: Literal["replace_one", "add_remove"] = "replace_one",
    seeded_by: SeededBy = "os",
) -> PrivacySpent:
    """The privacy of a DP dropout run under the chosen accountant.

    Privacy: the mechanism of :func:`dpd_ac_epsilon` (Poisson sampling with rate q, clip C, noise
    N(0, 4 C^2 sigma^2 I) on the gradient sum, T iterations). Accountants: ``"ac"``
    (:func:`dpd_ac_epsilon`), ``"zcdp"`` (:func:`dpd_zcdp_epsilon`), ``"pld"`` (dp-accounting's
    privacy loss distributions for the Poisson-subsampled Gaussian mechanism, discretisation
    refined as in :func:`~dpposterior.privacy.dpsgd_epsilon`; tight, either relation) and
    ``"rdp"`` (dp-accounting's RDP; add/remove-one adjacency only). Under add/remove-one adjacency
    ``"pld"`` and ``"rdp"`` equal ``dpsgd_epsilon(2 * noise_multiplier, ...)``.

    Args:
      noise_multiplier: sigma, the noise std divided by 2C (the paper's sigma), > 0.
      delta: the total delta, in (0, 1).
      sampling_rate: Poisson sampling rate q, in (0, 1].
      num_steps: iterations T, an int >= 1.
      accountant: ``"ac"`` (default), ``"zcdp"``, ``"pld"`` or ``"rdp"``.
      delta_prime: the advanced-composition slack (``"ac"`` only; default delta / 2).
      neighbouring: ``"replace_one"`` (default, the paper's) or ``"add_remove"``.
      seeded_by: how the run's noise was seeded, copied into the record.

    Returns:
      The PrivacySpent record.

    Raises:
      ValueError: invalid arguments, an unknown accountant, ``"rdp"`` with replace-one adjacency,
        or the conditions of :func:`dpd_ac_epsilon` for ``"ac"``.
    """
    accountant = _check_dpd_accountant(accountant)
    if accountant == "ac":
        return dpd_ac_epsilon(
            noise_multiplier,
            delta,
            sampling_rate,
            num_steps,
            delta_prime=delta_prime,
            neighbouring=neighbouring,
            seeded_by=seeded_by,
        )
    if delta_prime is not None:
        raise ValueError(f"delta_prime applies to accountant 'ac' only, got accountant={accountant!r}")
    if accountant == "zcdp":
        return dpd_zcdp_epsilon(
            noise_multiplier, delta, sampling_rate, num_steps, neighbouring=neighbouring, seeded_by=seeded_by
        )
    sigma, d, q, t, rel = _validate(noise_multiplier, delta, sampling_rate, num_steps, neighbouring)
    eps = _modern(sigma, d, q, t, accountant, rel)
    return _record(eps, d, sigma, q, t, accountant, rel, seeded_by, {})


def calibrate_dpd_noise_multiplier(
    epsilon: float,
    delta: float,
    sampling_rate: float,
    num_steps: int,
    accountant: DPDAccountant = "ac",
    *,
    delta_prime: float | None = None,
    neighbouring: Literal["replace_one", "add_remove"] = "replace_one",
    max_noise_multiplier: float = MAX_NOISE_MULTIPLIER,
    rtol: float = 1e-4,
) -> float:
    """The smallest DP dropout sigma (to relative tolerance ``rtol``) whose epsilon is <= target.

    Conservative: the returned sigma always satisfies
    ``dpd_epsilon(sigma, delta, sampling_rate, num_steps, accountant, ...).epsilon <= epsilon``.
    Mechanism and accountants as :func:`dpd_epsilon`; sigma is the paper's (noise std / 2C).

    With ``"ac"`` sigma never goes below sqrt(2 ln(1.25/delta_iter)), where the per-iteration
    epsilon reaches 1 and the classic Gaussian bound stops holding: if the target would allow less
    noise, that smallest valid sigma is returned (more noise than needed, never less). Sigma is
    searched down to 0.01 (0.005 under ``"pld"`` / ``"rdp"``, whose noise multiplier is 2 sigma).

    Args:
      epsilon: the total target epsilon, finite and > 0.
      delta: the total delta, in (0, 1).
      sampling_rate: Poisson sampling rate q, in (0, 1].
      num_steps: iterations T, an int >= 1.
      accountant: ``"ac"`` (default), ``"zcdp"``, ``"pld"`` or ``"rdp"``.
      delta_prime: the advanced-composition slack (``"ac"`` only; default delta / 2).
      neighbouring: ``"replace_one"`` (default, the paper's) or ``"add_remove"``.
      max_noise_multiplier: the largest sigma searched (default 1e6).
      rtol: relative width of the final bracket on sigma, in [1e-12, 1).

    Raises:
      ValueError: invalid arguments, an unknown accountant, ``"rdp"`` with replace-one adjacency,
        delta_iter >= 1 (``"ac"``), or a target that no sigma up to ``max_noise_multiplier`` reaches.
    """
    target = check_epsilon(epsilon)
    d = check_delta(delta)
    q = check_sampling_rate(sampling_rate)
    t = check_positive_int(num_steps, "num_steps")
    rel = _check_neighbouring(neighbouring)
    accountant = _check_dpd_accountant(accountant)
    max_sigma = check_positive(max_noise_multiplier, "max_noise_multiplier")
    rtol = _check_rtol(rtol)
    if accountant != "ac" and delta_prime is not None:
        raise ValueError(f"delta_prime applies to accountant 'ac' only, got accountant={accountant!r}")
    unreachable = (
        f"no noise multiplier <= max_noise_multiplier={max_sigma:g} reaches epsilon={target:g} with "
        f"delta={d:g}, sampling_rate={q:g}, num_steps={t} (DP dropout, accountant {accountant}, "
        f"{rel}); raise epsilon or delta, lower num_steps or sampling_rate, or raise max_noise_multiplier"
    )

    if accountant in ("pld", "rdp"):
        # Search the dp-accounting noise multiplier s = 2 sigma.
        if accountant == "rdp" and rel != "add_remove":
            _epsilon(1.0, d, q, t, accountant, rel)  # raises the explanatory ValueError
        s = _search_noise_multiplier(
            lambda s: _decide(s, target, d, q, t, accountant, rel),
            target,
            max_sigma=2.0 * max_sigma,
            rtol=rtol,
            unreachable=unreachable,
            pld=_PldLevels(d, q, t, rel) if accountant == "pld" else None,
        )
        return s / 2.0

    if accountant == "ac":
        dp = _delta_prime(d, delta_prime)
        _delta_iter(d, dp, q, t)  # raises if no sigma can help

        def eps_of(sigma: float) -> float:
            try:
                return _ac(sigma, d, q, t, dp)[0]
            except ValueError:  # epsilon_iter >= 1: the classic Gaussian bound does not hold
                return math.inf
    else:

        def eps_of(sigma: float) -> float:
            return _zcdp(sigma, d, t)[0]

    def decide(sigma: float) -> _Decision:
        e = eps_of(sigma)
        return _Decision(e <= target, e, 0.0)

    return _search_noise_multiplier(decide, target, max_sigma=max_sigma, rtol=rtol, unreachable=unreachable)
