"""The released DPVIm trace (:func:`dpposterior.vi.dpvim` makes it) and its readings, all
post-processing of the release.

Iterate averaging (in the unconstrained space): the mu-trace is cut into windows; in each window the
least-squares slope of every mu coordinate against time measured in window lengths (the fitted
drift across one window) is computed; the first window where every |slope| < ``slope_threshold``
(default 0.05) marks convergence, and mu and rho are averaged from its start to the end. If no window
qualifies, the last window is used and ``converged`` is False. Readings:

* ``averaged_posterior``: N(mean mu, diag(softplus(mean rho)^2));
* ``noise_aware_posterior`` (the NA-DPVI paper's DPVIm baseline): N(mean mu, diag(sigma_q^2 + Var mu)),
  sigma_q = softplus(mean rho) and Var mu the variance of the mu-trace after convergence;
* ``last_iterate_posterior``: q at the final parameters.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import check_positive, check_positive_int
from ..privacy.spent import PrivacySpent
from . import family
from .layout import ParamLayout
from .posterior import point_posterior

DEFAULT_SLOPE_THRESHOLD = 0.05
DEFAULT_NUM_WINDOWS = 20


def trace_summary(
    mu_trace: jax.Array,
    rho_trace: jax.Array,
    num_windows: int = DEFAULT_NUM_WINDOWS,
    slope_threshold: float = DEFAULT_SLOPE_THRESHOLD,
) -> dict[str, jax.Array]:
    """Iterate averaging after convergence (module docstring), pure jnp (vmappable).

    Returns a dict: ``mean_mu``, ``var_mu``, ``mean_rho`` (n,), ``start`` (first averaged step),
    ``converged`` (bool), ``slopes`` (num_windows, n).
    """
    t, n = mu_trace.shape
    w = t // num_windows
    if w < 2:
        fewer = (
            f"num_windows may be at most {t // 2} (pass num_windows=..., default {DEFAULT_NUM_WINDOWS}), or "
            if t >= 2
            else ""
        )
        raise ValueError(
            f"the trace of {t} steps is too short for {num_windows} windows: each window needs at least 2 "
            f"steps, so {fewer}run at least {2 * num_windows} steps"
        )
    used = w * num_windows
    off = t - used  # windows cover the last `used` steps
    win = mu_trace[off:].reshape(num_windows, w, n)
    x = (jnp.arange(w, dtype=jnp.float32) - 0.5 * (w - 1)) / w  # time in window lengths, centred
    slopes = jnp.einsum("i,kin->kn", x, win - jnp.mean(win, axis=1, keepdims=True)) / jnp.sum(x * x)
    ok = jnp.all(jnp.abs(slopes) < slope_threshold, axis=1)
    first = jnp.where(jnp.any(ok), jnp.argmax(ok), num_windows - 1)
    start = off + first * w
    mask = (jnp.arange(t) >= start)[:, None].astype(jnp.float32)
    cnt = jnp.sum(mask[:, 0])
    mean_mu = jnp.sum(mask * mu_trace, axis=0) / cnt
    var_mu = jnp.sum(mask * jnp.square(mu_trace - mean_mu), axis=0) / cnt
    mean_rho = jnp.sum(mask * rho_trace, axis=0) / cnt
    return {
        "mean_mu": mean_mu,
        "var_mu": var_mu,
        "mean_rho": mean_rho,
        "start": start,
        "converged": jnp.any(ok),
        "slopes": slopes,
    }


def check_scale(phi: Any, layout: ParamLayout, reading: str) -> None:
    """Refuses a Gaussian reading whose scale is not finite or has collapsed.

    Collapsed: the sd is at most 16 float32 rounding units of the mean, 2^-19 max(1, |mu|): mu + s
    is mu or its neighbouring float32 numbers, so every draw of q is the point mu and the interval has
    width zero (a trace variance of that size is the rounding of a frozen mu's float32 mean). It is
    an artefact of the optimisation, not a posterior.

    Raises:
      ValueError: naming the reading and the first coordinates whose scale is degenerate.
    """
    mu, rho = (np.asarray(v, np.float64) for v in family.split_phi(np.asarray(phi, np.float32)))
    sd = np.asarray(family.scale(jnp.asarray(rho, jnp.float32)), np.float64)
    bad = ~np.isfinite(sd) | ~np.isfinite(mu) | (sd <= 2.0**-19 * np.maximum(1.0, np.abs(mu)))
    if bad.any():
        names = layout.coordinate_names()
        idx = np.flatnonzero(bad)[:5]
        where = ", ".join(f"{names[i]}: sd {sd[i]:.3g} at mean {mu[i]:.4g}" for i in idx)
        raise ValueError(
            f"the DPVIm {reading} reading is degenerate: the scale of q collapsed to zero or is "
            f"not finite ({where}; {int(bad.sum())} of {bad.size} coordinates), so its intervals "
            "would have width zero. The optimisation failed, this is no posterior: run again with "
            "a smaller learning_rate or lr_scale, more num_steps, or natural_gradient=False"
        )


def noise_aware_phi(summary: dict[str, jax.Array]) -> jax.Array:
    """phi = (mean mu, rho) with softplus(rho)^2 = softplus(mean rho)^2 + Var mu: the noise-aware reading."""
    sd = jnp.sqrt(jnp.square(family.scale(summary["mean_rho"])) + summary["var_mu"])
    return jnp.concatenate([summary["mean_mu"], family.inverse_scale(sd)])


def averaged_phi(summary: dict[str, jax.Array]) -> jax.Array:
    """phi = (mean mu, mean rho): the averaged iterate."""
    return jnp.concatenate([summary["mean_mu"], summary["mean_rho"]])


@dataclasses.dataclass(frozen=True, eq=False)
class DPVImTrace:
    """A DPVIm release: the traces of mu and rho and the noisy loc gradients.

    Every array is a post-processing of the DP-SGD mechanism's noisy loc-gradient sums (plus public
    settings and the public Monte Carlo draws), so it is covered by ``privacy``.

    Attributes:
      mu, rho: (T, n) parameters BEFORE the update of each step.
      loc_grads: (T, n) the noisy loc gradients g~_mu.
      final_phi: (2n,) the last iterate.
      layout: the model's latent sites.
      privacy: the PrivacySpent.
      clip, noise_multiplier, sampling_rate, num_steps, dataset_size: the DP-SGD settings.
      learning_rate: (2n,) (lr_mu, lr_rho).
      natural_gradient: whether the natural-gradient variant was used.
      model_name: a label.
    """

    mu: Any
    rho: Any
    loc_grads: Any
    final_phi: Any
    layout: ParamLayout
    privacy: PrivacySpent
    clip: float
    noise_multiplier: float
    sampling_rate: float
    num_steps: int
    dataset_size: int
    learning_rate: Any
    natural_gradient: bool
    model_name: str = ""

    def summary(
        self, num_windows: int = DEFAULT_NUM_WINDOWS, slope_threshold: float = DEFAULT_SLOPE_THRESHOLD
    ) -> dict[str, Any]:
        """Iterate averaging after convergence (see :func:`trace_summary`), as numpy values."""
        num_windows = check_positive_int(num_windows, "num_windows")
        slope_threshold = check_positive(slope_threshold, "slope_threshold")
        out = trace_summary(jnp.asarray(self.mu), jnp.asarray(self.rho), num_windows, slope_threshold)
        return {k: np.asarray(v) for k, v in out.items()}

    def averaged_posterior(self, **kw: Any):
        """N(mean mu, diag(softplus(mean rho)^2)) after convergence (a Posterior)."""
        s = self.summary(**kw)
        check_scale(averaged_phi(s), self.layout, "averaged")
        return point_posterior(self.layout, averaged_phi(s), self.privacy, "dpvim_average")

    def noise_aware_posterior(self, **kw: Any):
        """N(mean mu, diag(sigma_q^2 + Var mu)) after convergence: the NA-DPVI paper's DPVIm baseline."""
        s = self.summary(**kw)
        check_scale(noise_aware_phi(s), self.layout, "noise-aware")
        post = point_posterior(self.layout, noise_aware_phi(s), self.privacy, "dpvim_noise_aware")
        post.diagnostics.update({"start": int(s["start"]), "converged": bool(s["converged"])})
        return post

    def last_iterate_posterior(self):
        """q at the last iterate."""
        check_scale(self.final_phi, self.layout, "last-iterate")
        return point_posterior(self.layout, jnp.asarray(self.final_phi), self.privacy, "dpvim_last_iterate")
