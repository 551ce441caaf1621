"""A warning for circular latents whose fit reaches the seam of their (-pi, pi) mapping.

NumPyro maps a circular support (``VonMises`` latents) to the open interval (-pi, pi) with a bijection
of the real line, which cannot wrap around: a posterior near +-pi is cut at the seam, and DPVI then
either pushes it to one side or spreads q over the whole circle (a truth at 3.136 rad, N = 300,
epsilon 1: q's sd on the unconstrained line grew to 25, and the NA-DPVI posterior's sd was 3.0 rad
against 0.03 for the same data rotated to 2.0 rad). The check below reads only the release's last
iterate (a post-processing of the release, no privacy cost) and names the site.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
from scipy import stats

from ..releases import family
from ..releases.layout import ParamLayout

#: q's mass within this many radians of +-pi counts as reaching the seam.
SEAM_WIDTH = 0.1
#: the share of q's mass within ``SEAM_WIDTH`` of +-pi above which the fit is warned about.
SEAM_MASS = 0.01


def seam_mass(layout: ParamLayout, phi: Any) -> dict[str, float]:
    """Per circular latent site, the largest (over its elements) mass of q(theta; phi) within
    ``SEAM_WIDTH`` of +-pi, where the site's (-pi, pi) mapping has its seam. Sites of other supports
    are not listed."""
    circular = [s for s in layout.sites if s.support.get("kind") == "circular"]
    if not circular:
        return {}
    mu, rho = family.split_phi(np.asarray(phi, np.float64))
    mus, sds = layout.split(mu), layout.split(np.asarray(family.scale(rho), np.float64))
    out = {}
    for s in circular:
        t = s.transform()
        hi = float(np.asarray(t.inv(np.float64(math.pi - SEAM_WIDTH))))
        lo = float(np.asarray(t.inv(np.float64(-math.pi + SEAM_WIDTH))))
        m, v = np.asarray(mus[s.name], np.float64), np.asarray(sds[s.name], np.float64)
        out[s.name] = float(np.max(stats.norm.sf((hi - m) / v) + stats.norm.cdf((lo - m) / v)))
    return out


def warn_if_near_seam(layout: ParamLayout, final_phi: Any, fitter: str) -> None:
    """A RuntimeWarning naming each circular latent whose last iterate's q puts more than
    ``SEAM_MASS`` of its mass within ``SEAM_WIDTH`` of +-pi (see the module docstring)."""
    near = {k: v for k, v in seam_mass(layout, final_phi).items() if v > SEAM_MASS}
    if not near:
        return
    what = ", ".join(f"{k!r} ({v:.0%} of q's mass)" for k, v in near.items())
    warnings.warn(
        f"{fitter}: the circular latent {what} reaches within {SEAM_WIDTH} rad of +-pi, the seam of its (-pi, pi) "
        "mapping, which cannot wrap: the fit and any posterior read from it can be cut there (pushed to one "
        "side or spread around the whole circle). Rotate the angles by a public constant so that the latent "
        "lies away from +-pi before fitting (a new fit is a new release and spends its own budget)",
        RuntimeWarning,
        stacklevel=3,
    )
