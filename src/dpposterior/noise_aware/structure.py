"""Latents that mean-field NA-DPVI cannot serve: those behind a hierarchical prior.

NA-DPVI reads the release as the fixed point phi* of a mean-field Gaussian q(theta; phi) and returns the
mixture of q(theta; phi*) over the phi* the trace allows (Räisä, Jälkö & Honkela, "Noise-aware
differentially private variational inference", 2024). That describes a latent well where its posterior
concentrates around a Gaussian as N grows. A latent that sets the prior of other latents (``mu`` and
``tau`` in ``theta ~ Normal(mu, tau)``) is informed through the values of those latents, not through the
records: a fixed number of them however large N is, so its posterior does not concentrate, is often
skewed (a scale near zero), and the mean-field q, which also drops its coupling to the latents below
it, cannot represent it. Its intervals can then miss badly, and no diagnostic of the trace shows it.

The rule reads the model's structure only (:attr:`dpposterior.releases.layout.Site.parents`, found
on dummy records when the release was made): a latent that is the parent of another latent gets a
:class:`HierarchicalPriorWarning` from :func:`dpposterior.noise_aware_posterior`, kept in
``Posterior.warnings``.
"""

from __future__ import annotations

from typing import Any


class HierarchicalPriorWarning(RuntimeWarning):
    """The model's prior is hierarchical: the latents that set other latents' prior are informed only
    through them, and mean-field NA-DPVI's intervals for them are not calibrated (the message names them)."""


def hierarchy(layout: Any) -> dict[str, tuple[str, ...]]:
    """``{latent site: the latent sites its prior depends on}`` for the sites that have any."""
    return {s.name: tuple(s.parents) for s in layout.sites if getattr(s, "parents", ())}


def hierarchical_message(layout: Any) -> str | None:
    """The text of the :class:`HierarchicalPriorWarning` for a layout with a hierarchical prior, else None."""
    children = hierarchy(layout)
    if not children:
        return None
    parents = [s.name for s in layout.sites if any(s.name in p for p in children.values())]
    sizes = {s.name: s.size for s in layout.sites}
    through = ", ".join(f"the {sizes[c]} coordinates of {c!r}" if sizes[c] > 1 else repr(c) for c in children)
    return (
        f"the model's prior is hierarchical: latents {parents} set the prior of {list(children)}. Mean-field "
        f"NA-DPVI describes a latent by a Gaussian around the fixed point of the fit, which holds where its "
        f"posterior concentrates as the records grow; {parents} are informed through the values of "
        f"{through}, not through the records, so their posterior does not concentrate and their intervals "
        "can miss badly (docs/results/calibration-suite.md). Do not rely on their intervals: fix them at "
        "public values (constants in the model) to fit the rest, or use a model without the hierarchical prior"
    )
