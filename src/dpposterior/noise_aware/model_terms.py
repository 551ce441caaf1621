"""The noise-aware model with the model's own curvature (a trace's :class:`ModelCurvature`).

NA-DPVI's gradient model g~_t ~ N(q A (phi_t - phi*), noise) reads A from the trace's own slope. Over a
window of W steps, a coordinate that relaxes in tau steps identifies its slope at about z = sqrt(W / 2 tau)
standard errors, and the least-squares slope is biased up by a factor of about 1 + 2 / z^2 (Kendall,
"Note on bias in the estimation of autocorrelation", 1954): where tau / W is not small the restoring force
is read too steep and the phi* intervals come out too narrow. No learning rate cures it, because the
wander of the iterate grows with z too (docs/results/calibration-suite.md).

Where dpvi could simulate the model's records (a model without covariates), the release carries the
model's curvature at the trace mean, and this module uses it, in three ways (:func:`apply`):

1. the h prior of each mean coordinate is centred on the model's curvature A_j, with a relative sd of
   :data:`RELATIVE_SD`, instead of on the trace's slope (which the likelihood also holds);
2. each step's gradient is freed of the second-order push of the OTHER coordinates' wander,
   q (1/2) sum_{j != k} dH_jj/dphi_k (phi_j,t - phibar_j)^2, which the linear model would read as a move
   of phi*_k (a scale parameter and the location whose curvature it sets);
3. the posterior's phi* is moved by the clipping shift, phi*_ELBO - phi*_clipped, so that it describes
   the unclipped ELBO's optimum rather than the clipped gradient's zero;
4. q's diagonal Gaussian is given the linear-response shape of Giordano, Broderick & Jordan, "Linear
   response methods for accurate covariance estimates from mean field variational Bayes" (2015): a
   mean-field q sets each latent's sd to 1 / sqrt(H_jj), its spread with the OTHER latents held fixed,
   which understates the marginal spread sqrt((H^-1)_jj) wherever latents are correlated (a
   regression's intercept and slopes, a shape and a rate). Draws become theta = mu* + sd * (L eps),
   L L^T = R = D^1/2 H^-1 D^1/2 over the means (D = diag H), so each latent's q sd is widened by
   sqrt(R_jj) and the latents take H's correlations (:func:`linear_response`).

All four are post-processing of the release (the curvature terms are public), so they cost no privacy.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np

from ..releases.model_curvature import ModelCurvature
from ..releases.trace import DPVITrace
from .model import TracePriors, softplus_inverse


class CurvatureFromTraceWarning(RuntimeWarning):
    """The default post-processing read the h prior from the trace's slope: the release carries no model
    curvature that the default uses (a model with covariates, more than 32 variational parameters, a
    trace made without it), and that slope is coarse under DP noise, so the intervals can be too narrow."""


class CoupledLatentsWarning(RuntimeWarning):
    """The model's Hessian couples latents strongly (:func:`coupled`): NA-DPVI's gradient model reads each
    coordinate's fixed point from its own gradient alone, so where latents are coupled the phi* intervals
    are too narrow, by at least the linear-response widening of q, which this release exceeds."""


#: the linear-response widening sqrt(R_jj) above which a latent counts as coupled. A 90% interval whose
#: sd is too small by a factor f covers P(|Z| < 1.645 / f), below 0.85 for f > 1.14; the coupled linear
#: model's phi* error is at least f times the per-coordinate one (two latents of equal noise at
#: correlation r: sqrt(1 + r^2) / (1 - r^2) against f = 1 / sqrt(1 - r^2)), and the linear response
#: corrects q's part only.
COUPLING_LIMIT = 1.14


def coupled(widening: dict[str, float], narrowing: dict[str, float] | None = None) -> dict[str, float]:
    """The latents whose linear-response widening (``{latent coordinate name: factor}``, as
    ``diagnostics["linear_response"]`` holds it) or whose :func:`noise_narrowing` (as
    ``diagnostics["noise_coupling"]`` holds it) exceeds :data:`COUPLING_LIMIT`, each with the larger
    of its two factors."""
    both = {name: max(w, (narrowing or {}).get(name, 1.0)) for name, w in widening.items()}
    return {name: f for name, f in both.items() if f > COUPLING_LIMIT}


def noise_narrowing(
    terms: ModelCurvature, q_sd: np.ndarray, phi_star_sd: np.ndarray, prior_only: np.ndarray | None = None
) -> np.ndarray | None:
    """(n,) per latent, the factor by which its interval is too narrow because NA-DPVI reads each mean
    coordinate's fixed point from its own gradient, or None where it cannot be formed (as
    :func:`linear_response`).

    The per-coordinate gradient model gives phi*_j an error of sd ``phi_star_sd_j`` = s_j / H_jj, for a
    gradient noise of sd s_j on coordinate j. Solved jointly, the fixed point's error is H^-1 times the
    noise, of variance (H^-1 S H^-1)_jj with S = diag(s^2) (the DP noise is independent between
    coordinates). With q's sd ``q_sd`` (already given the linear-response widening), a latent's posterior
    variance is q_sd^2 + phi_star_sd^2 where q_sd^2 + (H^-1 S H^-1)_jj is due: the factor is the square
    root of their ratio, 1 for a latent uncorrelated with the others. ``prior_only`` latents are left
    uncoupled, as in :func:`linear_response`. The noise sd is read from the release's own phi* posterior,
    so the factor is post-processing of the release.
    """
    h = _hessian_means(terms)
    if h is None:
        return None
    n = h.shape[0]
    diag = np.diag(h)
    if prior_only is not None and np.any(prior_only):  # a principal block and a diagonal: still definite
        keep = ~np.asarray(prior_only, bool)
        h = np.where(np.outer(keep, keep) | np.eye(n, dtype=bool), h, 0.0)
    h_inv = np.linalg.inv(h)
    per_coordinate = np.asarray(phi_star_sd, np.float64)[:n]
    noise_var = (per_coordinate * diag) ** 2
    joint = np.einsum("jk,k,jk->j", h_inv, noise_var, h_inv)
    q_var = np.asarray(q_sd, np.float64) ** 2
    return np.sqrt((q_var + joint) / (q_var + per_coordinate**2))


def coupled_message(latents: dict[str, float]) -> str:
    """The text of :class:`CoupledLatentsWarning` for :func:`coupled`'s latents."""
    shown = ", ".join(f"{k} {v:.2f}x" for k, v in latents.items())
    return (
        f"the model's curvature couples latents {list(latents)}: their intervals are too narrow by about "
        f"({shown}). The linear-response shape restores a mean-field q's marginal sd, but NA-DPVI's gradient "
        "model reads each coordinate's fixed point from its own gradient alone, so the noise-aware part of "
        "their intervals stays too narrow and the intervals can miss (reparametrise towards uncorrelated "
        'latents where you can; post.diagnostics["linear_response"] and ["noise_coupling"] have every factor)'
    )


def default_uses(terms: ModelCurvature | None) -> bool:
    """Whether ``noise_aware_posterior``'s default (``priors="auto"``) uses ``terms``: only the terms of
    records the model simulated alone. Terms over a public covariate sample are used on request
    (``priors="model"``): on the calibration suite's regressions they calibrated a weakly identified
    logistic regression but made the Poisson and probit regressions under-cover more than the trace's
    slope (docs/results/calibration-suite.md)."""
    return terms is not None and terms.covariates == "none"


def trace_slope_message(trace: DPVITrace) -> str:
    """The text of :class:`CurvatureFromTraceWarning` for ``trace``."""
    terms = trace.model_curvature
    why = (
        "the release's model curvature was computed over a public covariate sample, which the default does not "
        'use (priors="model" uses it; measured mixed on regressions)'
        if terms is not None
        else "the release carries no curvature of the model (trace.model_curvature is None: covariates, a mask or "
        "a factor likelihood, more than 32 variational parameters, or a failed simulation)"
    )
    return (
        why + ", so the h prior of each mean coordinate comes from the trace's own slope, which the DP noise "
        "makes coarse and biases upwards where a coordinate relaxes slowly: the intervals can be too narrow "
        "(the calibration suite's regressions under-cover with it, docs/results/calibration-suite.md)"
    )


#: the relative sd of the h prior around the model's curvature: the simulated records are not the
#: private ones, and the trace mean is not the fixed point, so the model's A is known to a few percent
#: (the ratio of the model's curvature to the one the release's own records give at the unclipped optimum,
#: docs/results/calibration-suite.md), not exactly.
RELATIVE_SD = 0.05


def without_forcing(trace: DPVITrace, terms: ModelCurvature) -> DPVITrace:
    """``trace`` with each step's gradient less the other coordinates' second-order push (module
    docstring, point 2), centred on the point where the terms were taken."""
    dh = np.array(terms.hessian_diag_slope, np.float64)
    np.fill_diagonal(dh, 0.0)  # a coordinate's own curvature change stays with the linear model
    phi = np.asarray(trace.phi, np.float64)
    forcing = float(trace.sampling_rate) * 0.5 * ((phi - terms.point) ** 2) @ dh
    return dataclasses.replace(trace, grads=np.asarray(trace.grads, np.float64) - forcing)


def curvature_priors(priors: TracePriors, terms: ModelCurvature) -> TracePriors:
    """``priors`` with the h prior of each mean coordinate at softplus^-1(A_j), its sd
    :data:`RELATIVE_SD` A_j carried through softplus^-1 (module docstring, point 1)."""
    a = np.asarray(terms.curvature, np.float64)
    n = a.shape[0]
    h_loc = np.array(priors.h_loc, np.float64)
    h_scale = np.array(priors.h_scale, np.float64)
    h_loc[:n] = np.asarray(softplus_inverse(jnp.asarray(a)), np.float64)
    h_scale[:n] = RELATIVE_SD * a / -np.expm1(-a)  # d softplus^-1(a) / da = 1 / (1 - exp(-a))
    return priors._replace(h_loc=jnp.asarray(h_loc), h_scale=jnp.asarray(h_scale))


def _hessian_means(terms: ModelCurvature) -> np.ndarray | None:
    """The (n, n) Hessian over the means where a coupling can be read from it: the terms carry it, n >= 2,
    and it is positive definite at the trace mean (else None: no local Gaussian shape to take)."""
    if terms.hessian_means is None:
        return None
    h = np.asarray(terms.hessian_means, np.float64)
    diag = np.diag(h)
    if h.shape[0] < 2 or not np.all(diag > 0):
        return None
    scale = np.sqrt(diag)
    try:
        np.linalg.cholesky(h / np.outer(scale, scale))
    except np.linalg.LinAlgError:
        return None
    return h


def linear_response(terms: ModelCurvature, prior_only: np.ndarray | None = None) -> np.ndarray | None:
    """(n, n) the lower Cholesky factor L of R = D^1/2 H^-1 D^1/2 (module docstring, point 4), or None
    where it changes nothing or cannot be formed: the terms carry no Hessian block (a record made without
    it), n = 1 (R = 1), or H over the means is not positive definite at the trace mean (no local Gaussian
    shape to take; the posterior keeps the diagonal q and says so in its diagnostics).

    ``prior_only``: (n,) bool, the latents that get the model prior's push-forward; they keep R_jj = 1 and
    no correlation (their draws are prior draws, independent of the other latents).
    """
    h = _hessian_means(terms)
    if h is None:
        return None
    n = h.shape[0]
    scale = np.sqrt(np.diag(h))
    r = np.linalg.inv(h / np.outer(scale, scale))  # R is the inverse of H's correlation form
    if prior_only is not None and np.any(prior_only):
        keep = ~np.asarray(prior_only, bool)
        r = np.where(np.outer(keep, keep), r, np.eye(n))
    return np.linalg.cholesky(0.5 * (r + r.T))


def clip_shift(terms: ModelCurvature) -> np.ndarray:
    """(d,) what phi* draws are moved by (module docstring, point 3)."""
    return np.asarray(terms.clip_shift, np.float64)
