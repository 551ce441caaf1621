"""A release-only rule for latents whose DP-SGD trace cannot identify them.

NA-DPVI's gradient model (Räisä, Jälkö, Honkela, "Noise-aware differentially private variational
inference", 2024, eq. 10) reads each coordinate's trace as a noisy linear restoring force,
g~_t = q A_j (phi_t - phi*_j) + noise, around a fixed point phi*_j. That reading needs the trace to
have relaxed towards phi*_j within the steps it models. With a constant learning rate eta_j a
coordinate relaxes in about 1 / (eta_j q A_j) steps; a coordinate whose relaxation time exceeds the
window of steps after burn-in has drifted, not fluctuated, and its fitted slope and fixed point are
the drift's, not the posterior's. With a slope that the DP noise swamps, the relaxation time itself is
not known.

Rule (per latent coordinate i, judged on its mean coordinate j = i of phi; everything is a function of
the release: the trace's statistics after burn-in, its learning rate, q and sigma C / beta):

    slope        m_j  = |Sxy_j| / (q Sxx_j)                      (the h prior's location; an estimate of A_j)
    its s.e.     se_j = sigma C / (beta_j q sqrt(Sxx_j))         (the h prior's scale)
    lower bound  A_lo = m_j - z se_j,  z = SLOPE_Z = 2
    relaxation   tau_j = 1 / (eta_j q A_lo)   (infinite when A_lo <= 0)
    fails        tau_j > W,  W = T - T* (the steps modelled)

i.e. the latent fails when the trace cannot show, at two standard errors of its slope, that the
coordinate relaxes within the modelled window. Where the h prior is the model's curvature A_j
(``noise_aware_posterior``'s default for a model that simulates its records,
:mod:`dpposterior.noise_aware.model_terms`), the gradient model reads the trace with that A_j, so a
latent also fails when 1 / (eta_j q A_j) exceeds W (:func:`with_model_curvature`): its trace drifted
at the model's own curvature, whatever slope the noise lent it. Both of the ways a trace cannot identify a coordinate
are in it: a slope within two standard errors of zero (A_lo <= 0), and a restoring force too weak
for the window at the learning rate used. A failing latent gets the model prior's push-forward in the
unconstrained space: its likelihood term is dropped and its draws come from the prior, independent of
the other latents (``noise_aware_posterior(prior=...)``). The rho coordinates set only the width of
q(theta; phi*); they are judged and reported (``rho_fails``) but do not make a latent prior-only.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

#: standard errors below the fitted slope at which its lower bound is taken.
SLOPE_Z = 2.0


class UnidentifiedLatentsWarning(RuntimeWarning):
    """``noise_aware_posterior`` found latents that the release cannot identify and was given no prior
    sampler, so their posterior is the gradient model's, resting on a drift (the message names them and
    why)."""


class Identifiability(NamedTuple):
    """The rule's quantities per coordinate of phi (each (..., d)) and its verdict per latent.

    Attributes:
      slope: m_j, the fitted slope |Sxy| / (q Sxx) (an estimate of A_j).
      slope_se: its standard error sigma C / (beta_j q sqrt(Sxx)).
      slope_z: slope / slope_se.
      relaxation_steps: 1 / (eta_j q (m_j - SLOPE_Z se_j)), inf where that bound is <= 0.
      window: W, the steps after burn-in the gradient model uses.
      coordinate_fails: relaxation_steps > window, per coordinate of phi.
      prior_only: (..., n) the latents judged not identified (their mean coordinate fails).
      model_relaxation_steps: (..., n) 1 / (eta_j q A_j) at the model's curvature A_j of each mean
        coordinate (:func:`with_model_curvature`), or None where the rule used the trace's slope alone.
    """

    slope: np.ndarray
    slope_se: np.ndarray
    slope_z: np.ndarray
    relaxation_steps: np.ndarray
    window: np.ndarray
    coordinate_fails: np.ndarray
    prior_only: np.ndarray
    model_relaxation_steps: np.ndarray | None = None


def identifiability(
    stats: Any, noise_sd: Any, sampling_rate: float, learning_rate: Any, slope_z: float = SLOPE_Z
) -> Identifiability:
    """The release-only identifiability rule (module docstring) from a trace's statistics.

    Args:
      stats: :class:`~dpposterior.noise_aware.stats.TraceStats` after burn-in, fields (..., d).
      noise_sd: (d,) or (..., d) the DP noise sd sigma C / beta_j of g~.
      sampling_rate: q.
      learning_rate: (d,) the trace's per-coordinate learning rate eta_j (public: it is in the release).
      slope_z: standard errors below the slope at which the relaxation time is judged (default 2).

    Returns:
      :class:`Identifiability` as float64 / bool numpy arrays.
    """
    sxx = np.asarray(stats.phi_ss, np.float64)
    sxy = np.asarray(stats.cross_ss, np.float64)
    count = np.asarray(stats.count, np.float64)
    q = float(sampling_rate)
    eta = np.broadcast_to(np.asarray(learning_rate, np.float64), sxx.shape)
    noise = np.broadcast_to(np.asarray(noise_sd, np.float64), sxx.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = np.abs(sxy) / (q * sxx)
        se = noise / (q * np.sqrt(sxx))
        lower = slope - float(slope_z) * se
        tau = np.where(lower > 0, 1.0 / (eta * q * np.where(lower > 0, lower, 1.0)), np.inf)
        z = slope / se
    window = np.broadcast_to(count, sxx.shape)
    fails = ~(tau <= window)
    n = sxx.shape[-1] // 2
    return Identifiability(
        slope=slope,
        slope_se=se,
        slope_z=z,
        relaxation_steps=tau,
        window=np.asarray(window),
        coordinate_fails=fails,
        prior_only=fails[..., :n],
    )


def with_model_curvature(
    ident: Identifiability, curvature: Any, sampling_rate: float, learning_rate: Any
) -> Identifiability:
    """``ident`` with each latent also failing where the model's curvature says its trace cannot relax.

    The h prior at the model's curvature A_j (``priors="auto"`` for a model that simulates its records)
    tells the gradient model that mean coordinate j relaxes in 1 / (eta_j q A_j) steps. Where that
    exceeds the window W, the trace drifted for the whole window, and its fixed point is that of the
    drift, pinned down only by the prior of phi* around the trace mean: its interval can be narrow
    and far from the truth (a location whose data lie in the millions, under a prior of that scale,
    barely leaves its starting point). Such a latent fails even where the trace's own slope, which the
    DP noise and the other coordinates' moves can lend it, passes the rule.

    Args:
      ident: the rule's verdict from the trace's slope (:func:`identifiability`), fields (d,).
      curvature: (n,) A_j of each mean coordinate (``ModelCurvature.curvature``), > 0.
      sampling_rate: q.
      learning_rate: (d,) the trace's per-coordinate learning rate eta_j.

    Returns:
      :class:`Identifiability` with ``model_relaxation_steps`` set and ``prior_only`` (and the mean
      coordinates of ``coordinate_fails``) also True where it exceeds the window.
    """
    a = np.asarray(curvature, np.float64)
    n = a.shape[-1]
    eta = np.broadcast_to(np.asarray(learning_rate, np.float64), np.shape(ident.window))[..., :n]
    with np.errstate(divide="ignore", over="ignore"):
        tau = 1.0 / (eta * float(sampling_rate) * a)
    slow = ~(tau <= np.asarray(ident.window)[..., :n])
    fails = np.array(ident.coordinate_fails, copy=True)
    fails[..., :n] |= slow
    return ident._replace(
        coordinate_fails=fails,
        prior_only=np.asarray(ident.prior_only) | slow,
        model_relaxation_steps=tau,
    )


def reasons(ident: Identifiability, names: list[str]) -> dict[str, str]:
    """``{latent coordinate name: why it is prior-only}`` for one release (fields (d,)); ``names`` are the
    n latent coordinate names."""
    out = {}
    model_tau = ident.model_relaxation_steps
    for i in np.flatnonzero(ident.prior_only):
        tau, w, z = ident.relaxation_steps[i], ident.window[i], ident.slope_z[i]
        if model_tau is not None and not model_tau[i] <= w:
            why = (
                f"relaxation time 1/(eta q A) = {model_tau[i]:.3g} steps at the model's curvature A "
                f"(trace.model_curvature) exceeds the {int(w)}-step window after burn-in: the trace drifted "
                f"rather than relaxed (its own slope, {ident.slope[i]:.3g} at {z:.2f} s.e., does not count then)"
            )
        elif np.isfinite(tau):
            why = (
                f"relaxation time 1/(eta q A) = {tau:.3g} steps at the slope's lower {SLOPE_Z:g}-s.e. bound "
                f"exceeds the {int(w)}-step window after burn-in (slope {ident.slope[i]:.3g}, "
                f"{z:.2f} s.e.)"
            )
        else:
            why = (
                f"fitted slope {ident.slope[i]:.3g} is within {SLOPE_Z:g} standard errors "
                f"({ident.slope_se[i]:.3g}) of zero: {z:.2f} s.e.; the DP noise swamps the restoring force"
            )
        out[names[i]] = why
    return out


#: rho of the point masses that carry prior draws in phi* (softplus(-60) = 9e-27: q's sd is nil).
PRIOR_POINT_RHO = -60.0


def model_prior_sampler(model: Any, *data: Any, **model_kwargs: Any):
    """A sampler ``(key, m) -> (m, n)`` of the model's prior of its latent sites in the unconstrained
    space, for ``noise_aware_posterior(prior=...)``.

    Only the shapes and dtypes of ``data`` are read: the model runs on one record of zeros of the same
    trailing shapes (arrays, or ``jax.ShapeDtypeStruct``), so the private values are never used; the
    priors of the global latents must not depend on the number of records.

    Raises:
      ValueError: ``dpvi``'s model checks on those shapes fail (:func:`dpposterior.releases.model_inspect.inspect_model`).
    """
    import jax
    from numpyro import handlers

    from ..releases.model_inspect import inspect_model

    def zeros(a):
        shape = tuple(getattr(a, "shape", np.shape(a)))
        dtype = getattr(a, "dtype", None) or np.asarray(a).dtype
        return np.zeros((1,) + shape[1:] if shape else (), dtype)

    dummy = tuple(zeros(a) for a in data)
    layout = inspect_model(model, dummy, model_kwargs)

    def one(key):
        tr = handlers.trace(handlers.seed(model, key)).get_trace(*dummy, **model_kwargs)
        return layout.unconstrain({name: tr[name]["value"] for name in layout.names})

    @jax.jit
    def _draw(keys):
        return jax.vmap(one)(keys)

    def sampler(key, m):
        return _draw(jax.random.split(key, int(m)))

    return sampler


def with_prior_latents(phi: Any, prior_draws: Any, prior_only: Any) -> Any:
    """phi* draws (m, 2n) whose prior-only latents carry prior draws (m, n) as point masses: mu = the
    draw, rho = :data:`PRIOR_POINT_RHO`, so that the mixture of q(theta; phi*) has the prior there."""
    import jax.numpy as jnp

    phi = jnp.asarray(phi)
    n = phi.shape[-1] // 2
    mask = jnp.asarray(prior_only, bool)
    mu = jnp.where(mask, jnp.asarray(prior_draws, phi.dtype), phi[..., :n])
    rho = jnp.where(mask, jnp.asarray(PRIOR_POINT_RHO, phi.dtype), phi[..., n:])
    return jnp.concatenate([mu, rho], axis=-1)
