"""DP-SGLD's privacy accounting: sigma for a target (epsilon, delta), and epsilon for a sigma.

A T-step chain is T uses of the Poisson-subsampled Gaussian mechanism on the clipped gradient sum
(noise std 2 C sigma; replace-one adjacency, sensitivity 2C, or C under add/remove-one), composed by
the accountant of the user's choice through :func:`dpposterior.privacy.dpd_epsilon`: ``"ac"``
(DPD-AC, advanced composition), ``"zcdp"`` (DPD-zCDP), ``"pld"`` (tight) or, under add/remove-one
adjacency only, ``"rdp"``. Reference: Ermis & Cemgil, "Differentially private dropout" (2017).
"""

from __future__ import annotations

from typing import Literal

from ..._checks import check_delta, check_positive, check_positive_int, check_sampling_rate
from ...privacy.dp_dropout import DPD_ACCOUNTANTS, calibrate_dpd_noise_multiplier, dpd_epsilon
from ...privacy.spent import NEIGHBOURING_RELATIONS, Neighbouring

__all__ = ["epsilons_for", "noise_multiplier_for"]


def noise_multiplier_for(
    epsilon: float,
    delta: float,
    sampling_rate: float,
    num_steps: int,
    accountant: Literal["ac", "zcdp", "pld", "rdp"] = "pld",
    *,
    neighbouring: Literal["replace_one", "add_remove"] = "replace_one",
) -> float:
    """The smallest sigma (noise std / 2C) whose T-step DP-SGLD run is (epsilon, delta)-DP.

    Under the accountant of the user's choice: ``"ac"`` (DPD-AC), ``"zcdp"`` (DPD-zCDP),
    ``"pld"`` (tight, default), ``"rdp"`` (add/remove-one only). Conservative (never less noise than
    the target needs): :func:`dpposterior.privacy.calibrate_dpd_noise_multiplier`.

    Args:
      epsilon: the total epsilon of the T-step release, > 0.
      delta: the total delta, in (0, 1).
      sampling_rate: q in (0, 1], the Poisson sampling rate.
      num_steps: T >= 1.
      accountant: ``"pld"`` (default), ``"ac"``, ``"zcdp"`` or ``"rdp"`` (add/remove-one only).
      neighbouring: ``"replace_one"`` (default; sensitivity 2C) or ``"add_remove"`` (sensitivity C).

    Returns:
      sigma, the noise std on the clipped gradient sum divided by 2C.

    Raises:
      ValueError / TypeError: an argument outside its range, or a target no sigma reaches.
    """
    return calibrate_dpd_noise_multiplier(
        epsilon, delta, sampling_rate, num_steps, accountant, neighbouring=neighbouring
    )


def epsilons_for(
    noise_multiplier: float,
    delta: float,
    sampling_rate: float,
    num_steps: int,
    *,
    neighbouring: Literal["replace_one", "add_remove"] = "replace_one",
) -> dict[str, float | None]:
    """The epsilon each accountant certifies for the same sigma: {"ac", "zcdp", "pld"[, "rdp"]}.

    None where an accountant gives no bound for these (valid) arguments: DPD-AC when the
    per-iteration epsilon reaches 1, PLD below its noise or delta resolution (e.g. delta < 1e-15),
    zCDP when its epsilon overflows. RDP under replace-one adjacency is left out.

    Args:
      noise_multiplier: sigma > 0 (noise std / 2C).
      delta: the total delta, in (0, 1).
      sampling_rate: q in (0, 1].
      num_steps: T >= 1.
      neighbouring: ``"replace_one"`` (default; sensitivity 2C) or ``"add_remove"`` (sensitivity C).

    Returns:
      ``{accountant: epsilon or None}``.

    Raises:
      ValueError / TypeError: an argument outside its range (checked before any accountant runs).
    """
    return _epsilons_by_accountant(noise_multiplier, delta, sampling_rate, num_steps, neighbouring, {})


def _epsilons_by_accountant(
    noise_multiplier: float,
    delta: float,
    sampling_rate: float,
    num_steps: int,
    neighbouring: Neighbouring,
    known: dict[str, float],
) -> dict[str, float | None]:
    """:func:`epsilons_for`, taking the accountants in ``known`` as already computed."""
    check_positive(noise_multiplier, "noise_multiplier")
    check_delta(delta)
    check_sampling_rate(sampling_rate)
    check_positive_int(num_steps, "num_steps")
    if neighbouring not in NEIGHBOURING_RELATIONS:
        raise ValueError(f"neighbouring must be one of {NEIGHBOURING_RELATIONS}, got {neighbouring!r}")
    out: dict[str, float | None] = {}
    for acc in DPD_ACCOUNTANTS:
        if acc == "rdp" and neighbouring != "add_remove":
            continue
        if acc in known:
            out[acc] = known[acc]
            continue
        try:
            out[acc] = dpd_epsilon(
                noise_multiplier, delta, sampling_rate, num_steps, acc, neighbouring=neighbouring
            ).epsilon
        except ValueError:  # the arguments are valid (checked above): this accountant gives no bound
            out[acc] = None
    return out
