"""``noise_aware_posterior``: a DPVI trace in, a noise-aware Posterior out. Never sees data.

Post-processing of a released trace costs no further privacy: the Posterior carries the trace's
PrivacySpent unchanged.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from .._checks import check_positive, check_positive_int, check_real
from ..privacy.clip_binds import ClipBindsWarning, clip_binds_message
from ..privacy.randomness import resolve_key
from ..releases import family
from ..releases.dpvim_trace import DPVImTrace
from ..releases.trace import DPVITrace
from . import grid as G
from . import identify as I
from . import structure as S
from . import laplace as L
from . import model as M
from . import model_terms as MT
from . import nuts as N
from . import samplers as SM
from .model import TracePriors
from ..releases.posterior import PhiSampler, Posterior
from .stats import MIN_STEPS_AFTER_BURN_IN, TraceStats, burn_in_start, sufficient_statistics

METHODS = ("grid", "nuts", "laplace")
_OPTIONS = {
    "grid": ("num_points", "num_points_s", "num_stages", "tail", "num_draws"),
    "laplace": ("num_iterations", "num_points", "tol", "num_draws"),
    "nuts": N.NUTS_OPTIONS + ("full_trace",),
}
EDGE_MASS_WARNING = 1e-4
#: the named prior choices of ``noise_aware_posterior(priors=...)``.
PRIOR_CHOICES = M.H_LOCATIONS + ("burn_in", "model", "auto")


def noise_aware_posterior(
    trace: DPVITrace,
    method: str = "grid",
    burn_in: float = 0.2,
    subsampling_noise: bool = False,
    rng_key: Any = None,
    *,
    priors: TracePriors | str = "auto",
    prior: Any = None,
    **solver_options: Any,
) -> Posterior:
    """The noise-aware posterior of NA-DPVI (Räisä et al. 2024, section 3.3) from a DPVI trace alone.

    Model, per coordinate j of phi = (mu, rho) (A = diag(softplus(h)) is diagonal, so the posterior
    factorises into d independent low-dimensional problems):

        g~_t,j ~ N(q softplus(h_j) (phi_t,j - phi*_j), s_j^2 + (sigma C / beta_j)^2),  t >= T* = burn_in T,
        phi*_j ~ N(phibar_j, 1),        phibar = trace mean after burn-in,
        h_j    ~ N(m_j, sd_j),          m_j = |sum_t g~_t,j (phi_t,j - phibar_j)| / (q sum_t (phi_t,j - phibar_j)^2),
                                        sd_j = sigma C / (beta_j sqrt(sum_t (phi_t,j - phibar_j)^2)) / q,
        s_j    ~ HalfNormal(1) if ``subsampling_noise`` else s_j = 0.

    sd_j is a standard deviation (the standard error of the regression slope m_j); appendix 13.3 of
    the paper prints its square, a variance, where a standard deviation belongs (the variance
    reading miscalibrates). m_j estimates a_j = softplus(h_j) but, as in the paper
    (13.3 puts the prior on v_i, a_i = softplus(v_i)) and its reference code, it is used as the location of h_j
    itself; the two agree for a_j >> 1 and differ by at most log 2 in the implied a_j otherwise.
    Every solver works from six centred float64 sufficient statistics per coordinate
    (:mod:`dpposterior.noise_aware.stats`), so a density evaluation costs O(d), not O(T d).

    The result is the mixture over phi* draws of q(theta; phi*) (eq. 13).

    Calibration of the phi* intervals, measured on traces simulated from the trace model
    (tests/noise_aware/test_na_calibration.py; 1,200 intervals each; 90% / 50% nominal):
    with the priors the truth was drawn from, the grid is exact (0.91 / 0.48; 0.89 / 0.48 in the weakly
    identified regime of the Adult demo trace, kappa = lr q a ~ 1e-4 - 4e-3); with the trace-based priors
    on DPVI-like traces (kappa ~ 1e-3 - 1) grid 0.88 / 0.47, Laplace 0.87 / 0.46, NUTS 0.88 / 0.47. In
    the Adult-like regime the trace-based priors are too narrow (grid 0.81 / 0.40: the h prior reuses
    the slope the likelihood also holds), and Laplace is too narrow there even with exact priors
    (0.83 / 0.44): its Gaussian misses the heavy tails of phi* that a poorly identified A causes.
    ``priors="burn_in"`` takes the h prior from the burn-in steps instead (grid 0.87 / 0.45 there, the
    same as the paper's on the simulated DPVI-like traces). It needs burn-in steps that have settled
    near the fixed point: on the reproduction's 10-D linear regression, whose weights still relax in
    the burn-in, it is far worse than the default (docs/results/na-dpvi-misses.md).
    Prefer "grid" (exact, fast) or "nuts"; check ``diagnostics["phi_star_sd"]`` against the trace.

    Args:
      trace: the released DPVITrace (never the data).
      method: "grid" (exact up to an adaptive grid: phi* | h is integrated exactly, h (and s) gridded;
        deterministic and fast; sampling is exact), "nuts" (NumPyro NUTS on the same density; default
        1,000 warm-up and 4,000 draws, one chain), or "laplace" (joint mode by damped Newton, inverse
        Hessian; phi* ~ N(mode, marginal variance)).
      burn_in: share of the trace dropped at its start, in [0, 1); T* = floor(burn_in T). On a trace made
        with ``clip="auto"`` it must drop the pilot (the default 0.2 does).
      subsampling_noise: model subsampling noise s_j ~ HalfNormal(1) (else s_j = 0).
      rng_key: JAX key or int seed for NUTS and for the stored draws; None draws a seed from the
        operating system (post-processing randomness, not privacy noise).
      priors: "auto" (the default): "model" where the trace carries the model's curvature from records
        the model simulated alone (``trace.model_curvature`` with ``covariates == "none"``, which dpvi
        adds where the model can simulate its own records: no covariates), else "paper", with a
        :class:`~dpposterior.noise_aware.CurvatureFromTraceWarning`: the trace's slope is coarse under DP
        noise and the intervals can be too narrow. Terms from a public covariate sample are used only
        when asked for by ``priors="model"`` (measured mixed: docs/results/calibration-suite.md).
        "model": the trace-based priors above, except that the h prior of each mean coordinate is
        centred on the model's curvature A_j (sd 5% of it) instead of on the trace's slope, which is biased up where a coordinate relaxes slowly against the window; each step's
        gradient is freed of the other coordinates' second-order wander push; and phi* is moved by the
        clipping shift to the unclipped ELBO's optimum; and q takes the linear-response shape of the
        model's Hessian over the means, which widens each latent's sd to its marginal spread where latents
        are correlated (Giordano, Broderick & Jordan 2015; ``diagnostics["linear_response"]`` gives the
        factor per latent; :mod:`dpposterior.noise_aware.model_terms`).
        "paper": the trace-based priors above, "softplus_inverse" (the same with the
        location of h at softplus^-1(m_j), so that it maps to a_j = m_j; see :func:`model.trace_priors`),
        "burn_in" (m_j and sd_j from the burn-in steps, whose noise the likelihood does not use, so the
        slope is not counted twice; better calibrated where A is weakly identified, as on Adult, and the
        same elsewhere: :func:`model.burn_in_priors`; needs at least 10 burn-in steps and a trace made
        with a given clip: with ``clip="auto"`` the burn-in steps are the pilot's, at another clip), or a
        :class:`TracePriors` (fields broadcastable to (d,)) to override them (experiments, tests).
      prior: None, or a sampler ``(key, m) -> (m, n)`` of the model's prior in the unconstrained space
        (:func:`dpposterior.noise_aware.model_prior_sampler`). Latents that the release cannot identify
        (:func:`dpposterior.noise_aware.identifiability`: the relaxation time 1 / (eta q A) of their mean
        coordinate, at two standard errors below the fitted slope A, exceeds the steps after burn-in)
        then get the prior's push-forward with their likelihood term dropped: their draws are prior draws,
        independent of the other latents. Without it such latents keep the gradient model's posterior,
        with an :class:`~dpposterior.noise_aware.identify.UnidentifiedLatentsWarning` (a RuntimeWarning)
        that names them.
      **solver_options:
        grid: num_points (256, cells per stage along h), num_points_s (48, along s), num_stages (3),
          tail (1e-7), num_draws (4000 stored draws; sampling is exact on demand).
        laplace: num_iterations (100), num_points (128, starting grid), tol (1e-2), num_draws (4000).
        nuts: num_warmup (1000), num_samples (4000), num_chains (1), target_accept_prob (0.8),
          max_tree_depth (10), dense_mass (False), thinning (1), progress_bar (False), chain_method,
          marginalize_phi_star (False: NUTS on the joint (phi*, h[, s]) as in the paper; True: NUTS on
          (h[, s]) with phi* integrated out, then phi* drawn exactly given each draw - the same
          posterior without the funnel, about 10x the effective sample size on the Adult trace),
          full_trace (False: the likelihood from the six statistics, O(d) per gradient; True: from
          the whole trace after burn-in, O(T d) per gradient, as the reference implementation does -
          the same density, kept for comparison: benchmarks/pipeline.py).

    Returns:
      A Posterior with phi_star draws (M, d), the trace's PrivacySpent, and diagnostics: the per-
      coordinate posterior mean and sd of phi* ("phi_star_mean", "phi_star_sd"), the burn-in used,
      "h_prior" (where the mean coordinates' h prior came from: "model curvature", "model curvature
      (public covariates)", "trace slope" or "given"), "model_terms" (the ModelCurvature used, or None),
      "linear_response" (where model terms are used: ``{latent coordinate name: the factor by which q's sd
      widens}``, 1 for a latent uncorrelated with the others; :attr:`Posterior.linear_response`),
      "noise_coupling" (where the linear response gives q a shape: ``{latent coordinate name: the factor
      by which its interval is too narrow because the DP noise's part is read per coordinate}``,
      :func:`~dpposterior.noise_aware.model_terms.noise_narrowing`; with "linear_response", the
      factors :class:`~dpposterior.noise_aware.CoupledLatentsWarning` compares with its limit),
      "identifiability" (:class:`~dpposterior.noise_aware.identify.Identifiability`),
      "unidentified_latents" (``{latent coordinate name: reason}``, whatever ``prior``),
      "prior_only_latents" (the same for the latents that got the prior: empty without ``prior``),
      "hierarchical_latents" (``{latent site: the latent sites its prior depends on}``; where it is not
      empty the call warns with :class:`~dpposterior.noise_aware.HierarchicalPriorWarning`: the parents'
      intervals are not calibrated, :mod:`dpposterior.noise_aware.structure`),
      "warnings" (every warning this call raised, and the note on prior-only latents, as text: the
      same list as :attr:`Posterior.warnings`, which summaries and reports carry),
      and the solver's checks (grid: "edge_mass", "max_cell_mass"; laplace: "converged",
      "max_grad_norm"; nuts: split R-hat, ESS and divergences from numpyro.diagnostics, and "stuck",
      the chains and coordinates whose draws never changed, with a RuntimeWarning).

    Raises:
      TypeError: ``trace`` is not a DPVITrace, an unknown solver option, a non-integer count option, a
        flag (``subsampling_noise``, a NUTS flag) that is not True or False, or a TracePriors field that
        is not real numbers.
      ValueError: unknown method, a solver option out of its range, burn_in outside [0, 1) or keeping
        steps of a ``clip="auto"`` pilot (another clip and learning rate) in the modelled window, fewer than
        10 steps after burn-in, ``priors="model"`` for a trace without the model's curvature, non-finite
        values in the trace, non-positive beta, noise multiplier, clip
        or sampling rate, a coordinate that does not move after burn-in, a coordinate whose DP noise sd
        sigma C / beta_j lies outside ``NOISE_SD_RANGE`` = [1e-10, 1e12] (or whose gradients or parameters
        have a mean square above 1e24) where the float32 solvers were not checked, a posterior that came
        out NaN or inf, or a TracePriors field that does not broadcast to (d,), is not finite, or (a
        scale) is not > 0.
    """
    if not isinstance(trace, DPVITrace):
        hint = ""
        if isinstance(trace, DPVImTrace):
            hint = (
                "; a DPVIm release holds the noisy gradients of mu only, which this model cannot use: call "
                "its own trace.noise_aware_posterior() (the paper's DPVIm baseline)"
            )
        raise TypeError(f"trace must be a DPVITrace (from dpvi), got {type(trace).__name__}{hint}")
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    unknown = sorted(set(solver_options) - set(_OPTIONS[method]))
    if unknown:
        raise TypeError(f"unknown solver options {unknown} for method {method!r}; allowed: {list(_OPTIONS[method])}")
    _check_solver_options(method, solver_options)
    if not isinstance(subsampling_noise, (bool, np.bool_)):
        raise TypeError(f"subsampling_noise must be True or False, got {subsampling_noise!r}")
    if prior is not None and not callable(prior):
        raise TypeError(
            f"prior must be None or a sampler (key, m) -> (m, n) of the model's prior in the "
            f"unconstrained space (dpposterior.noise_aware.model_prior_sampler(model, *data)), got "
            f"{type(prior).__name__}"
        )
    if isinstance(priors, str) and priors not in PRIOR_CHOICES:
        raise ValueError(f"priors must be a TracePriors or one of {PRIOR_CHOICES}, got {priors!r}")
    terms = None
    # the default uses the model's curvature only where the model simulated its own records: with a
    # public covariate sample it made the suite's Poisson and probit regressions worse (MT.trace_slope_message)
    slope_fallback = priors == "auto" and not MT.default_uses(trace.model_curvature)
    if priors in ("auto", "model"):
        if trace.model_curvature is None and priors == "model":
            raise ValueError(
                'priors="model" needs a trace that carries the model\'s curvature (trace.model_curvature), which '
                "dpvi adds where the model can simulate its own records (every data argument an observed site: "
                'no covariates, or a public sample of them); this trace has none: use priors="auto" or "paper"'
            )
        terms = None if slope_fallback else trace.model_curvature
        priors = "paper"
    modelled = trace
    if terms is not None:
        _checked_statistics(trace, burn_in, bool(subsampling_noise))  # the release as it came
        modelled = MT.without_forcing(trace, terms)
    stats, noise_sd, start = _checked_statistics(modelled, burn_in, bool(subsampling_noise))
    q = float(trace.sampling_rate)
    user_priors = not isinstance(priors, str)
    if isinstance(priors, str):
        if priors == "burn_in":
            priors = M.burn_in_priors(stats, _burn_in_statistics(trace, start), noise_sd, q)
        else:
            priors = M.trace_priors(stats, noise_sd, q, h_location=priors)
            if terms is not None:
                priors = MT.curvature_priors(priors, terms)
    else:
        if not isinstance(priors, TracePriors):
            raise TypeError(f"priors must be a TracePriors or one of {PRIOR_CHOICES}, got {type(priors).__name__}")
        priors = _checked_priors(priors, trace.num_params)
        if not all(np.all(np.isfinite(x)) for x in priors) or not all(
            np.all(x > 0) for x in (priors.phi_scale, priors.h_scale, priors.s_scale)
        ):
            raise ValueError("priors must be finite with phi_scale, h_scale and s_scale > 0")
    raw_key, seeded_by = resolve_key(rng_key)
    diagnostics: dict[str, Any] = {
        "burn_in": float(burn_in),
        "burn_in_start": start,
        "num_steps_used": int(trace.phi.shape[0] - start),
        "subsampling_noise": bool(subsampling_noise),
        "seeded_by": seeded_by,
        "stats": stats,
        "priors": priors,
        "h_prior": _h_prior_name(terms, user_priors),
        "model_terms": terms,
        "warnings": [],
    }
    if slope_fallback:  # the default found no model curvature: say that the h prior is the trace's slope
        _warn(diagnostics, MT.trace_slope_message(trace), MT.CurvatureFromTraceWarning)
    binds = clip_binds_message(trace.privacy)
    if binds is not None:  # the release's own clip check: clipping bias is outside the noise model
        _warn(diagnostics, binds, ClipBindsWarning)
    stats32 = stats.astype(jnp.float32)
    priors32 = TracePriors(*(jnp.asarray(x, jnp.float32) for x in priors))
    noise32 = jnp.asarray(noise_sd, jnp.float32)
    sampler: PhiSampler | None = None
    phi_draws: jax.Array | np.ndarray  # NUTS returns NumPy draws, the other methods jax ones
    if method == "grid":
        num_draws = solver_options.pop("num_draws", 4000)
        grid = G.grid_posterior(stats32, priors32, noise32, q, subsampling_noise=subsampling_noise, **solver_options)
        mean, sd = G.grid_phi_star_moments(grid)
        edge = np.asarray(grid.edge_mass)
        diagnostics.update(
            grid=grid,
            edge_mass=float(edge.max()),
            max_cell_mass=float(np.max(grid.max_cell_mass)),
            log_evidence=float(np.sum(grid.log_evidence)),
        )
        if edge.max() > EDGE_MASS_WARNING:
            at_edge = np.nonzero(edge > EDGE_MASS_WARNING)[0]
            names = _coordinate_names(trace)
            which = [names[i] for i in at_edge] if edge.shape == (len(names),) else at_edge.tolist()
            _warn(
                diagnostics,
                f"grid: coordinates {which} have posterior mass "
                f"up to {edge.max():.2g} at the edge of the widest grid box; the trace may not fit the "
                "linear gradient model (not converged?)",
                RuntimeWarning,
            )

        sampler = SM.GridSampler(grid)
    elif method == "laplace":
        num_draws = solver_options.pop("num_draws", 4000)
        res = L.laplace_posterior(stats32, priors32, noise32, q, subsampling_noise=subsampling_noise, **solver_options)
        mean, sd = res.phi_star_mode, res.phi_star_sd
        conv = np.asarray(res.converged)
        diagnostics.update(laplace=res, converged=bool(conv.all()), max_grad_norm=float(np.max(res.grad_norm)))
        if not conv.all():
            _warn(
                diagnostics,
                f"laplace: the mode search did not converge (or the Hessian is not negative definite) "
                f"for coordinates {np.nonzero(~conv)[0].tolist()}",
                RuntimeWarning,
            )

        sampler = SM.LaplaceSampler(res)
    else:
        full = solver_options.pop("full_trace", False)
        if not isinstance(full, (bool, np.bool_)):
            raise TypeError(f"full_trace must be True or False, got {full!r}")
        if full:
            solver_options["full_trace"] = (np.asarray(modelled.phi)[start:], np.asarray(modelled.grads)[start:])
        phi_draws, nd = N.nuts_posterior(
            stats32, priors32, noise32, q, raw_key, subsampling_noise=subsampling_noise, **solver_options
        )
        diagnostics.update(nd)
        mean, sd = phi_draws.mean(axis=0), phi_draws.std(axis=0)
        stuck = np.asarray(nd["stuck"])
        if nd["num_divergences"] > 0:
            _warn(
                diagnostics,
                f"nuts: {nd['num_divergences']} divergent transitions after warm-up: the draws may miss "
                "part of the posterior; raise target_accept_prob (default 0.8, e.g. 0.95) or use "
                'method="grid" (diagnostics["num_divergences"])',
                RuntimeWarning,
            )
        if stuck.any():
            _warn(
                diagnostics,
                f"nuts: chains {np.nonzero(stuck.any(axis=1))[0].tolist()} never moved for coordinates "
                f"{_named(trace, stuck.any(axis=0))[1]} (every draw the same), so "
                "the draws are not a posterior sample; with num_warmup="
                f"{solver_options.get('num_warmup', 1000)} NUTS's step size was not adapted to the "
                'posterior: raise num_warmup (default 1000), or use method="grid"',
                RuntimeWarning,
            )
    if terms is not None:  # phi* of the unclipped ELBO, not of the clipped gradient's zero
        shift = jnp.asarray(MT.clip_shift(terms), jnp.float32)
        mean = jnp.asarray(mean) + shift
        if sampler is None:
            phi_draws = jnp.asarray(phi_draws) + shift
        else:
            sampler = SM.ShiftedSampler(sampler, shift)

    if sampler is not None:  # every solver but NUTS, whose draws are phi_draws
        phi_draws = sampler(jax.random.fold_in(raw_key, 1), num_draws)
    ident = I.identifiability(stats, noise_sd, q, np.asarray(trace.learning_rate, np.float64))
    if terms is not None:  # the gradient model reads the trace at the model's curvature: so does the rule
        ident = I.with_model_curvature(ident, terms.curvature, q, np.asarray(trace.learning_rate, np.float64))
    unidentified = I.reasons(ident, trace.layout.coordinate_names())
    diagnostics.update(identifiability=ident, unidentified_latents=unidentified, prior_only_latents={})
    diagnostics["hierarchical_latents"] = S.hierarchy(trace.layout)
    hierarchical = S.hierarchical_message(trace.layout)
    if hierarchical:
        _warn(diagnostics, hierarchical, S.HierarchicalPriorWarning)
    if unidentified and prior is None:
        shown = list(unidentified.items())[:MAX_REASONS]
        more = len(unidentified) - len(shown)
        _warn(
            diagnostics,
            f"the release does not identify latents {list(unidentified)}: "
            + "; ".join(f"{k}: {v}" for k, v in shown)
            + (f'; and {more} more (every reason: diagnostics["unidentified_latents"])' if more else "")
            + _unconstrained_note(trace, unidentified)
            + ". Their noise-aware posterior rests on a drift, not a fixed point; pass "
            "prior=dpposterior.noise_aware.model_prior_sampler(model, *data) to give them the model "
            "prior's push-forward",
            I.UnidentifiedLatentsWarning,
        )
    elif unidentified:
        mask = jnp.asarray(ident.prior_only)
        phi_draws = SM.prior_latents(prior, jax.random.fold_in(raw_key, 2), phi_draws, mask, trace.num_params // 2)
        sampler = SM.PriorLatentsSampler(sampler, prior, mask, trace.num_params // 2, jnp.asarray(phi_draws))

        mean, sd = jnp.mean(phi_draws, axis=0), jnp.std(phi_draws, axis=0)
        diagnostics["prior_only_latents"] = unidentified
        diagnostics["warnings"].append(
            f"the release does not identify latents {list(unidentified)}, so their posterior is the model "
            "prior's push-forward (their likelihood term is dropped): the data said nothing about them "
            "through this release"
        )
    _check_finite_result(trace, method, mean, sd, phi_draws, noise_sd, user_priors=user_priors)
    diagnostics["phi_star_mean"] = np.asarray(mean)
    diagnostics["phi_star_sd"] = np.asarray(sd)
    prior_only = np.asarray(ident.prior_only) if prior is not None else None
    shape = _linear_response(trace, terms, diagnostics, prior_only)
    _noise_coupling(trace, terms, diagnostics, shape, prior_only)
    strongly = MT.coupled(diagnostics.get("linear_response", {}), diagnostics.get("noise_coupling"))
    if strongly:
        _warn(diagnostics, MT.coupled_message(strongly), MT.CoupledLatentsWarning)
    if terms is not None and shape is None and terms.hessian_means is not None and trace.layout.num_latent > 1:
        _warn(
            diagnostics,
            "the model's Hessian over the means is not positive definite at the trace mean, so q keeps its "
            "diagonal (mean-field) shape: where latents are correlated, their intervals can be too narrow",
            RuntimeWarning,
        )
    return Posterior(
        layout=trace.layout,
        phi_star=jnp.asarray(phi_draws),
        privacy=trace.privacy,
        method=method,
        phi_sampler=sampler,
        diagnostics=diagnostics,
        linear_response=shape,
    )


def _linear_response(
    trace: DPVITrace, terms: Any, diagnostics: dict[str, Any], prior_only: np.ndarray | None
) -> np.ndarray | None:
    """The linear-response shape of q where the posterior uses the model's curvature terms
    (:func:`model_terms.linear_response`), with ``diagnostics["linear_response"]``: per latent coordinate,
    the factor sqrt(R_jj) by which it widens q's sd (absent where there are no terms; 1 everywhere where
    the terms give no shape)."""
    if terms is None:
        return None
    shape = MT.linear_response(terms, prior_only)
    names = trace.layout.coordinate_names()
    widen = np.ones(len(names)) if shape is None else np.sqrt(np.sum(shape**2, axis=1))
    diagnostics["linear_response"] = {name: float(w) for name, w in zip(names, widen)}
    return shape


def _noise_coupling(
    trace: DPVITrace, terms: Any, diagnostics: dict[str, Any], shape: np.ndarray | None, prior_only: np.ndarray | None
) -> None:
    """``diagnostics["noise_coupling"]``: per latent coordinate, :func:`model_terms.noise_narrowing` at the
    posterior's mean phi* (absent where the linear response gives no shape)."""
    if terms is None or shape is None:
        return
    n = trace.layout.num_latent
    mean = np.asarray(diagnostics["phi_star_mean"], np.float64)
    q_sd = np.asarray(family.scale(mean[n:]), np.float64) * np.sqrt(np.sum(shape**2, axis=1))
    factor = MT.noise_narrowing(terms, q_sd, np.asarray(diagnostics["phi_star_sd"]), prior_only)
    if factor is not None:
        names = trace.layout.coordinate_names()
        diagnostics["noise_coupling"] = {name: float(f) for name, f in zip(names, factor)}


def _checked_priors(priors: TracePriors, d: int) -> TracePriors:
    """Each field of a user's TracePriors as a float64 (d,) array; TypeError / ValueError naming the field."""
    fields = []
    for name, value in zip(TracePriors._fields, priors):
        try:
            arr = np.asarray(value)
        except (ValueError, TypeError):  # ragged and the like
            arr = np.asarray(None)
        if arr.dtype.kind not in "iuf":  # None, strings, bools, objects: refused, not converted
            raise TypeError(
                f"priors.{name} must be a real number or an array of real numbers broadcastable to "
                f"(d,) = ({d},), got {value!r}"
            )
        try:
            fields.append(np.broadcast_to(arr.astype(np.float64), (d,)))
        except ValueError:
            raise ValueError(
                f"priors.{name} has shape {arr.shape}, which does not broadcast to (d,) = ({d},): one "
                "value per variational parameter (2 x the model's unconstrained size), or a scalar"
            ) from None
    return TracePriors._make(fields)  # NumPy float64 fields, as the statistics of a trace are


#: NumPyro's ways of running several chains.
_CHAIN_METHODS = ("sequential", "parallel", "vectorized")
#: the smallest value of each integer solver option (grids need two cells to hold a box).
_INT_MINIMUM = {
    "num_points": 2,
    "num_points_s": 2,
    "num_stages": 1,
    "num_draws": 1,
    "num_iterations": 1,
    "num_warmup": 0,
    "num_samples": 1,
    "num_chains": 1,
    "thinning": 1,
    "max_tree_depth": 1,
}


def _check_solver_options(method: str, options: dict[str, Any]) -> None:
    """Refuses solver options that would crash deep in JAX or give NaN or empty draws."""
    for name, value in options.items():
        if name in _INT_MINIMUM:
            check_positive_int(value, f"{method} option {name}", minimum=_INT_MINIMUM[name])
    if "tail" in options:
        tail = check_real("grid option tail", options["tail"])
        if not 0.0 < tail < 0.5:
            raise ValueError(
                f"grid option tail (the quantile each side that bounds the next stage's box) must lie "
                f"in (0, 0.5), got {options['tail']!r}"
            )
    if "tol" in options:
        check_positive(options["tol"], "laplace option tol")
    for name in ("dense_mass", "progress_bar", "marginalize_phi_star"):
        if name in options and not isinstance(options[name], (bool, np.bool_)):
            raise TypeError(f"nuts option {name} must be True or False, got {options[name]!r}")
    if "chain_method" in options and options["chain_method"] not in _CHAIN_METHODS:
        raise ValueError(f"nuts option chain_method must be one of {_CHAIN_METHODS}, got {options['chain_method']!r}")
    if "target_accept_prob" in options:
        p = check_real("nuts option target_accept_prob", options["target_accept_prob"])
        if not 0.0 < p < 1.0:
            raise ValueError(
                f"nuts option target_accept_prob must lie in (0, 1), got {options['target_accept_prob']!r}"
            )


#: how many unidentified latents the warning gives a reason for (the diagnostics keep every reason)
MAX_REASONS = 3


def _h_prior_name(terms: Any, user_priors: bool) -> str:
    """``diagnostics["h_prior"]``: where the mean coordinates' h prior came from."""
    if user_priors:
        return "given"
    if terms is None:
        return "trace slope"
    return "model curvature (public covariates)" if terms.covariates == "public sample" else "model curvature"


def _warn(diagnostics: dict[str, Any], message: str, category: type[Warning]) -> None:
    """Warns at the caller of :func:`noise_aware_posterior` and keeps the message in
    ``diagnostics["warnings"]``, so that :attr:`Posterior.warnings`, its summary and reports carry it."""
    diagnostics["warnings"].append(message)
    warnings.warn(message, category, stacklevel=3)


def _checked_statistics(
    trace: DPVITrace, burn_in: Any, subsampling_noise: bool = False
) -> tuple[TraceStats, np.ndarray, int]:
    """Validates what post-processing needs and returns (float64 statistics, noise sd (d,), T*)."""
    if isinstance(burn_in, bool) or not isinstance(burn_in, (int, float, np.integer, np.floating)):
        raise TypeError(f"burn_in must be a number in [0, 1), got {burn_in!r}")
    if not (0.0 <= float(burn_in) < 1.0):
        raise ValueError(f"burn_in must lie in [0, 1), got {burn_in!r}")
    num_steps = trace.phi.shape[0]
    start = burn_in_start(num_steps, float(burn_in))
    pilot = _pilot_steps(trace)
    if start < pilot:
        raise ValueError(
            f"burn_in={burn_in} starts the modelled steps at T*={start}, inside the pilot of clip='auto' "
            f"(steps 0-{pilot - 1}, run at clip {trace.privacy.detail('pilot_clip')!r} with its own learning "
            f"rate; the run's clip is {trace.clip!r}): the gradient model needs the steps of one clip and one "
            f"learning rate; use burn_in >= {pilot}/{num_steps} (the default 0.2 does)"
        )
    remaining = num_steps - start
    if remaining < MIN_STEPS_AFTER_BURN_IN:
        raise ValueError(
            f"the trace is too short after burn-in: T={num_steps} steps with burn_in={burn_in} leave "
            f"{remaining} steps; the post-processing model needs at least {MIN_STEPS_AFTER_BURN_IN}"
        )
    for name in ("phi", "grads", "beta"):
        arr = np.asarray(getattr(trace, name))
        if not np.all(np.isfinite(arr)):
            bad = np.argwhere(~np.isfinite(arr))[0].tolist()
            raise ValueError(
                f"trace.{name} contains NaN or inf (first at index {bad}); post-processing needs finite values"
            )
    for name in ("noise_multiplier", "clip", "sampling_rate"):
        v = float(getattr(trace, name))
        if not math.isfinite(v) or v <= 0:
            raise ValueError(
                f"trace.{name} must be a finite number > 0 for noise-aware post-processing, got {v!r}"
                + (" (a non-private trace has no DP noise to be aware of)" if name == "noise_multiplier" else "")
            )
    if float(trace.sampling_rate) > 1:
        raise ValueError(f"trace.sampling_rate must lie in (0, 1], got {trace.sampling_rate!r}")
    beta = np.asarray(trace.beta, np.float64)
    if np.any(beta <= 0):
        raise ValueError(
            f"trace.beta must be > 0, got {beta[beta <= 0][:5].tolist()} at {np.nonzero(beta <= 0)[0][:5].tolist()}"
        )
    stats = sufficient_statistics(trace.phi, trace.grads, float(burn_in))
    frozen = ~(stats.phi_ss > 0)
    if frozen.any():
        raise ValueError(
            f"coordinates {_named(trace, frozen)[1]} do not move after burn-in (zero variance "
            "of phi): the gradient model cannot be fitted to them"
        )
    noise_sd = float(trace.noise_multiplier) * float(trace.clip) / beta
    _check_float32_range(trace, stats, noise_sd, subsampling_noise)
    return stats, noise_sd, start


#: the range of the DP noise sd sigma C / beta in which the float32 solvers were checked against each
#: other and against rescaled traces (gradients x s with beta / s for s from 1e-9 to 1e11: grid, Laplace
#: and NUTS within their sampling noise of the unscaled trace's phi* sd; docs/reliability.md); outside it
#: their densities' products leave float32 and some solvers return NaN or a wrong spread.
NOISE_SD_RANGE = (1e-10, 1e12)
#: with ``subsampling_noise=True`` the noise sd must also be at least this (the s grid and Laplace's
#: derivatives in log s were checked down to 4e-6 against the posterior without subsampling noise).
SUBSAMPLING_NOISE_MIN_SD = 1e-6
#: the largest mean square of a coordinate's gradients or parameters after burn-in (float32 headroom).
_MAX_MEAN_SQUARE = 1e24
#: the smallest sum of squares of a coordinate's parameters (a normal float32 number, with headroom).
_MIN_PHI_SS = 1e-30


def _check_float32_range(
    trace: DPVITrace, stats: TraceStats, noise_sd: np.ndarray, subsampling_noise: bool = False
) -> None:
    """Refuses coordinates whose noise variance or statistics leave the float32 range of the solvers
    (they would come out NaN or inf), naming them with the values and the settings that set them; with
    ``subsampling_noise`` the noise sd must also reach ``SUBSAMPLING_NOISE_MIN_SD``."""
    small = noise_sd < SUBSAMPLING_NOISE_MIN_SD
    if subsampling_noise and small.any():
        j, names = _named(trace, small)
        raise ValueError(
            f"subsampling_noise=True needs the DP noise sd sigma*C/beta >= {SUBSAMPLING_NOISE_MIN_SD:g} "
            f"(where its s grid and Laplace's derivatives were checked), but coordinates {names} have "
            f"{np.array2string(noise_sd[j], precision=3)}: post-process without subsampling noise, or "
            "choose beta so that sigma*C/beta is of the order of the gradients"
        )
    lo, hi = NOISE_SD_RANGE
    n = stats.count
    bad = (
        ~((noise_sd >= lo) & (noise_sd <= hi))
        | ~(stats.grad_ss / n <= _MAX_MEAN_SQUARE)
        | ~(stats.phi_ss / n <= _MAX_MEAN_SQUARE)
        | ~(stats.phi_ss >= _MIN_PHI_SS)
    )
    if bad.any():
        j, names = _named(trace, bad)
        raise ValueError(
            f"coordinates {names} are outside the float32 range of the post-processing solvers: "
            f"their DP noise sd sigma*C/beta = {trace.noise_multiplier:.3g}*{trace.clip:.3g}/beta is "
            f"{np.array2string(noise_sd[j], precision=3)} "
            f"(beta {np.array2string(np.asarray(trace.beta)[j], precision=3)}), the sum of squares of their "
            f"gradients after burn-in {np.array2string(np.asarray(stats.grad_ss)[j], precision=3)} and of "
            f"their parameters {np.array2string(np.asarray(stats.phi_ss)[j], precision=3)}; the solvers (float32) need the "
            f"noise sd in [{lo:g}, {hi:g}], mean squares of gradients and parameters up to {_MAX_MEAN_SQUARE:g} "
            f"and parameters that move (sum of squares >= {_MIN_PHI_SS:g}): choose beta (and clip) so that "
            "sigma*C/beta is of the order of the gradients"
        )


def _check_finite_result(
    trace: DPVITrace, method: str, mean: Any, sd: Any, draws: Any, noise_sd: np.ndarray, user_priors: bool = False
) -> None:
    """Refuses a posterior whose moments or draws came out NaN or inf, naming the coordinates (a silent
    NaN would otherwise reach every summary); ``user_priors``: the priors were the caller's TracePriors."""
    bad = ~(
        np.isfinite(np.asarray(mean)) & np.isfinite(np.asarray(sd)) & np.all(np.isfinite(np.asarray(draws)), axis=0)
    )
    if bad.any():
        j, names = _named(trace, bad)
        raise ValueError(
            f"method={method!r}: the posterior of coordinates {names} came out NaN or inf "
            f"(the solvers work in float32; their DP noise sd sigma*C/beta is "
            f"{np.array2string(noise_sd[j], precision=3)}); no result is returned: "
            + (
                "check the TracePriors given (locations and scales of the order of the trace's phi and "
                "h, not 1e30 or 1e-50), "
                if user_priors
                else ""
            )
            + 'try method="grid", or a beta that brings sigma*C/beta to the order of the gradients'
        )


def _pilot_steps(trace: DPVITrace) -> int:
    """The steps of the trace's clip='auto' pilot (0 when it has none), from its privacy record."""
    return int(trace.privacy.detail("pilot_steps", 0) or 0)


def _burn_in_statistics(trace: DPVITrace, start: int) -> TraceStats:
    """Statistics of the burn-in steps 0 .. T*-1, for ``priors="burn_in"``."""
    pilot = _pilot_steps(trace)
    if pilot:
        raise ValueError(
            f'priors="burn_in" takes the h prior from the burn-in steps, but the first {pilot} of them are '
            f"the pilot of clip='auto', run at clip {trace.privacy.detail('pilot_clip')!r} with its own "
            f"learning rate (the run's clip is {trace.clip!r}): their slope is another restoring force and "
            'their noise sd is not the run\'s; use priors="paper" (the default), or a trace made with a given clip'
        )
    if start < MIN_STEPS_AFTER_BURN_IN:
        raise ValueError(
            f'priors="burn_in" takes the h prior from the burn-in steps, but burn_in leaves {start} of '
            f"them (T={trace.phi.shape[0]}); it needs at least {MIN_STEPS_AFTER_BURN_IN}: raise burn_in"
        )
    burn = sufficient_statistics(np.asarray(trace.phi)[:start], np.asarray(trace.grads)[:start], 0.0)
    frozen = ~(burn.phi_ss > 0)
    if frozen.any():
        raise ValueError(
            f'coordinates {_named(trace, frozen)[1]} do not move during burn-in: priors="burn_in" '
            'cannot estimate their slope there; use priors="paper"'
        )
    return burn


def _unconstrained_note(trace: DPVITrace, latents: dict[str, str]) -> str:
    """For the sites among ``latents`` whose unconstrained shape differs from their shape (a simplex, a
    Cholesky factor), a note that the latents' indices number the unconstrained coordinates, not the
    entries of the posterior's summary (``p[1]`` of a 3-simplex is its second stick-breaking coordinate,
    not the summary's ``p[1]``); "" where there are none."""
    sites = [
        s
        for s in trace.layout.sites
        if tuple(s.unconstrained_shape) != tuple(s.shape) and any(k.startswith(s.name + "[") for k in latents)
    ]
    if not sites:
        return ""
    shapes = ", ".join(f"{s.name} {tuple(s.unconstrained_shape)} against {tuple(s.shape)}" for s in sites)
    return (
        f" (the indices of {', '.join(s.name for s in sites)} number the site's unconstrained coordinates, "
        f"not the entries of its summary: {shapes})"
    )


def _coordinate_names(trace: DPVITrace) -> list[str]:
    names = trace.layout.coordinate_names()
    return [f"mu[{c}]" for c in names] + [f"rho[{c}]" for c in names]


def _named(trace: DPVITrace, mask: ArrayLike, limit: int = 10) -> tuple[np.ndarray, list[str]]:
    """The first ``limit`` coordinates where ``mask`` (d,) is True: their indices and names (for errors)."""
    j = np.nonzero(np.asarray(mask))[0][:limit]
    names = _coordinate_names(trace)
    return j, [names[i] for i in j]
