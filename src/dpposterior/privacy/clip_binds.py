"""When a release's clip binds: the rule and the warning shared by the mechanisms that check their
clip (:mod:`dpposterior.vi.auto_clip`) and the post-processing that reports it
(:func:`dpposterior.noise_aware_posterior` reads the check from the release's privacy record).

A clip check releases a noisy count of the records whose clipped vector has a norm at or above the
clip C; its share of N and standard error are in the record's details (``clip_check_clipped_share``,
``clip_check_se``). Clipping bias is outside the noise-aware model, so a share above
:data:`CLIP_WARN_SHARE` by two standard errors is a warning that the intervals can miss.
"""

from __future__ import annotations

from typing import Any

#: the clip check warns when the noisy share of records at or above C exceeds this by two standard errors.
CLIP_WARN_SHARE = 0.05


class ClipBindsWarning(RuntimeWarning):
    """The clip binds for a large share of the records: the fit is biased, and the noise-aware
    posterior does not account for it."""


def binds(check: dict[str, float]) -> bool:
    """Whether a clip check's noisy share exceeds :data:`CLIP_WARN_SHARE` by two standard errors."""
    return check["share"] > CLIP_WARN_SHARE + 2.0 * check["se"]


def binds_message(check: dict[str, float], clip: float, auto: bool = False) -> str:
    """The text of the :class:`ClipBindsWarning` of a clip check that :func:`binds`; ``auto``: the clip was
    chosen by ``clip="auto"`` (then the advice is a larger clip by hand, not the default the run used)."""
    advice = (
        "clip='auto' chose C from the norms before the end of the run, and the run moved to where more records "
        "exceed it: pass a larger clip by hand"
        if auto
        else "use clip='auto' (the default) or a larger clip"
    )
    return (
        f"the clip C = {clip:.4g} binds for a large share of the records: the release's private clip check "
        f"counts about {check['share']:.1%} (noisy, standard error {check['se']:.1%}) of them with a gradient norm at or above "
        f"C, or not finite (such a record is dropped), at the end of the run (more than {CLIP_WARN_SHARE:.0%}). "
        "Clipping or dropping that many moves the fit, and the "
        f"noise-aware posterior does not account for it, so its intervals can miss: {advice}"
    )


def clip_binds_message(privacy: Any) -> str | None:
    """The warning text for a release whose own clip check (in ``privacy.details``, with its ``clip``)
    :func:`binds`, else None (also when the release ran no check)."""
    details = dict(privacy.details)
    if "clip_check_clipped_share" not in details:
        return None
    check = {"share": float(details["clip_check_clipped_share"]), "se": float(details["clip_check_se"])}
    auto = details.get("clip_choice") == "auto"
    return binds_message(check, float(details["clip"]), auto) if binds(check) else None
