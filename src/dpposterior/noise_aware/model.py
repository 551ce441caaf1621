"""The noise-aware post-processing model (Räisä, Jälkö & Honkela, "Noise-aware differentially private
variational inference" (2024), section 3.3, eq. 10 / 59; appendix 13.3).

Per coordinate j (A is diagonal, so everything factorises over the d coordinates):

    g~_t,j ~ N(q * softplus(h_j) * (phi_t,j - phi*_j), s_j^2 + (sigma C / beta_j)^2),   t >= T*,
    phi*_j ~ N(phibar_j, 1),
    h_j    ~ N(m_j, sd_j),
    s_j    ~ HalfNormal(1)        (only with subsampling noise; else s_j = 0),

with a_j = softplus(h_j) (the paper's v_i, section 4.1), phibar the trace mean after burn-in, and

    m_j  = |sum_t g~_t,j (phi_t,j - phibar_j)| / (q sum_t (phi_t,j - phibar_j)^2),
    sd_j = sigma C / (beta_j sqrt(sum_t (phi_t,j - phibar_j)^2)) / q.

Readings of the paper:

* m_j is the least-squares slope of the gradient on the parameter divided by q, i.e. an estimate of
  a_j itself; following the paper (13.3 puts N(mu_v, sigma_v^2) on v_i) and its reference code it is used as the
  LOCATION OF h_j, not mapped through softplus^-1. For a_j >> 1 the two agree (softplus(h) ~ h); for
  a_j of order 1 the prior's implied a is larger than m_j by at most log 2.
* sd_j is a STANDARD DEVIATION: the standard error of that slope. Appendix 13.3 prints
  sigma^2 C^2 / (q^2 beta^2 sum (...)^2), which is its square (a variance), where a standard deviation
  belongs; reading it as a variance miscalibrates.
* The noise variance of g~ is (sigma C / beta_j)^2: g~ is the noisy sum divided by beta (eq. 58), so
  eq. 59's "1/beta (.)" is read as dividing the standard deviation by beta.
* s_j is the standard deviation of the subsampling noise in the units of g~ (after dividing by beta).

All functions here are pure ``jax.numpy`` and broadcast over any leading axes, so they can be
``jit``-ed and ``vmap``-ped (over replicates, grid nodes, ...).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from .stats import TraceStats

_LOG_2PI = math.log(2.0 * math.pi)


class TracePriors(NamedTuple):
    """Priors of the post-processing model, per coordinate (each field broadcastable to (..., d)).

    Attributes:
      phi_loc, phi_scale: phi* ~ N(phi_loc, phi_scale^2).
      h_loc, h_scale: h ~ N(h_loc, h_scale^2) (h_scale is a standard deviation), a = softplus(h).
      s_scale: s ~ HalfNormal(s_scale) (used only with subsampling noise).
    """

    phi_loc: jax.Array
    phi_scale: jax.Array
    h_loc: jax.Array
    h_scale: jax.Array
    s_scale: jax.Array


def noise_sd_of(noise_multiplier: float, clip: float, beta) -> jax.Array:
    """The standard deviation sigma C / beta_j of the DP noise on each coordinate of g~."""
    return noise_multiplier * clip / jnp.asarray(beta)


H_LOCATIONS = ("paper", "softplus_inverse")


def trace_priors(stats: TraceStats, noise_sd: ArrayLike, sampling_rate, h_location: str = "paper") -> TracePriors:
    """The trace-based priors of appendix 13.3, as read in this module's docstring.

    Args:
      stats: the statistics (..., d).
      noise_sd: sigma C / beta (..., d).
      sampling_rate: q.
      h_location: "paper" (default; the paper's reading): h ~ N(m, sd), the slope estimate m
        of a = softplus(h) used as the location of h itself. "softplus_inverse": h ~ N(softplus^-1(m), sd),
        so that the prior's location maps to a = m; it differs from "paper" only for coordinates with
        a = O(1) (the rho coordinates of a DPVI trace have a close to 2), where "paper" makes A larger
        and the phi* intervals narrower. Measured on simulated traces in
        tests/noise_aware/test_na_calibration.py (90% intervals of the rho coordinates: 0.83 - 0.89
        with "paper", 0.86 - 0.92 with "softplus_inverse").

    Both readings centre the h prior on the slope estimate that the likelihood also contains (the data
    are used twice). Where A is well identified this is harmless; where it is not (kappa = lr q a below
    about 3e-3, e.g. the Adult demo trace) the posterior of A becomes too narrow and the phi* intervals
    too: 90% intervals cover about 0.81 in simulations of that regime.
    """
    if h_location not in H_LOCATIONS:
        raise ValueError(f"h_location must be one of {H_LOCATIONS}, got {h_location!r}")
    sxx = stats.phi_ss
    m = jnp.abs(stats.cross_ss) / (sampling_rate * sxx)
    return TracePriors(
        phi_loc=stats.phi_mean,
        phi_scale=jnp.ones_like(stats.phi_mean),
        h_loc=m if h_location == "paper" else softplus_inverse(m),
        h_scale=noise_sd / (jnp.sqrt(sxx) * sampling_rate),
        s_scale=jnp.ones_like(stats.phi_mean),
    )


def burn_in_priors(
    stats: TraceStats, burn_stats: TraceStats, noise_sd: ArrayLike, sampling_rate, h_location: str = "paper"
) -> TracePriors:
    """Trace-based priors whose h prior comes from the burn-in segment, not from the steps modelled.

    The phi* prior is :func:`trace_priors`' N(phibar, 1) (phibar after burn-in); the h prior has the
    same form, N(m, sd), but m and sd are the slope estimate and its standard error of the steps
    BEFORE T* (``burn_stats``). The DP noise of those steps is independent of the noise of the steps
    the likelihood uses, so the slope information is not counted twice. :func:`trace_priors` centres
    the h prior on the slope estimate that the likelihood also contains; where A is well identified that
    is harmless, where it is weakly identified it makes the posterior of A, and with it the phi*
    intervals, too narrow. The burn-in segment usually holds the transient towards phi*, whose larger
    spread of phi identifies the slope better; the prior assumes the gradient is linear over it too.

    Measured on traces simulated from the trace model (grid solver, 200 traces of d = 6, 1,200
    intervals, tests/noise_aware/test_na_calibration.py), coverage of the 90% / 50% intervals:

    * the weakly identified regime of the Adult experiment (C = 11, beta_rho = 550) at the noise of
      epsilon 1 / 0.3 / 0.1 (sigma 37 / 112 / 308): trace_priors 0.81 / 0.72 / 0.64 (90%) and
      0.40 / 0.34 / 0.28 (50%); these priors 0.87 / 0.85 / 0.79 and 0.45 / 0.41 / 0.35: better, and still
      too narrow at the smaller epsilons;
    * DPVI-like traces (well identified): 0.87 / 0.47 (trace_priors 0.88 / 0.47).

    Args:
      stats: the statistics after burn-in (..., d).
      burn_stats: the statistics of the burn-in steps (..., d); their phi must move (phi_ss > 0).
      noise_sd, sampling_rate, h_location: as in :func:`trace_priors`.
    """
    after = trace_priors(stats, noise_sd, sampling_rate, h_location)
    before = trace_priors(burn_stats, noise_sd, sampling_rate, h_location)
    return after._replace(h_loc=before.h_loc, h_scale=before.h_scale)


def softplus_inverse(a: jax.Array) -> jax.Array:
    """h with softplus(h) = a, for a > 0 (stable for small and large a)."""
    a = jnp.asarray(a)
    return a + jnp.log(-jnp.expm1(-a))


def _variance(noise_sd, s):
    v = jnp.square(noise_sd)
    return v if s is None else v + jnp.square(s)


def _slope_and_residual(stats: TraceStats):
    """Least-squares slope b = Sxy / Sxx and residual sum of squares R0 = Syy - b Sxy (>= 0)."""
    b = stats.cross_ss / stats.phi_ss
    r0 = jnp.maximum(stats.grad_ss - b * stats.cross_ss, 0.0)
    return b, r0


def log_likelihood_stats(stats: TraceStats, noise_sd, sampling_rate, phi_star, h, s=None) -> jax.Array:
    """log p(g~_{T*:T} | phi_{T*:T}, phi*, h, s) per coordinate, from the statistics in O(d).

    Uses sum_t (g~_t - c (phi_t - phi*))^2 = R0 + Sxx (c - b)^2 + n (gbar - c (phibar - phi*))^2 with
    c = q softplus(h), the completed-square form that stays accurate when the signal dominates.
    All arguments broadcast; ``s=None`` means no subsampling noise.
    """
    varying, constant = log_likelihood_parts(stats, noise_sd, sampling_rate, phi_star - stats.phi_mean, h, s)
    return varying + constant


def log_likelihood_parts(stats: TraceStats, noise_sd, sampling_rate, offset, h, s=None):
    """:func:`log_likelihood_stats` at phi* = phibar + ``offset``, split as (varying part, constant).

    The constant -n/2 log(2 pi v0) - R0 / (2 v0) (v0 = noise_sd^2) is of order n and does not depend on
    (phi*, h, s); the varying part is small near the posterior mode, so float32 keeps its digits.
    """
    n = stats.count
    c = sampling_rate * jax.nn.softplus(h)
    v0 = jnp.square(noise_sd)
    b, r0 = _slope_and_residual(stats)
    varying: float | jax.Array
    if s is None:
        v = v0
        varying = 0.0
    else:
        s2 = jnp.square(s)
        v = v0 + s2
        varying = -0.5 * n * jnp.log1p(s2 / v0) + 0.5 * (r0 / v0) * (s2 / v)
    dev = stats.grad_mean + c * offset
    varying = varying - 0.5 * (stats.phi_ss * jnp.square(c - b) + n * jnp.square(dev)) / v
    constant = -0.5 * n * (_LOG_2PI + jnp.log(v0)) - 0.5 * r0 / v0
    return varying, constant


def log_likelihood_full(phi, grads, noise_sd, sampling_rate, phi_star, h, s=None) -> jax.Array:
    """The same log-likelihood from the full trace, O(T d): ``phi``, ``grads`` (T, d) after burn-in.

    For tests and for the benchmark; the solvers use :func:`log_likelihood_stats`.
    """
    c = sampling_rate * jax.nn.softplus(h)
    v = _variance(noise_sd, s)
    r = grads - c * (phi - phi_star)
    return jnp.sum(-0.5 * (_LOG_2PI + jnp.log(v)) - 0.5 * jnp.square(r) / v, axis=0)


def _log_normal(x, loc, scale):
    z = (x - loc) / scale
    return -0.5 * (_LOG_2PI + jnp.square(z)) - jnp.log(scale)


def log_prior(priors: TracePriors, phi_star, h, s=None) -> jax.Array:
    """log p(phi*) + log p(h) (+ log p(s)) per coordinate."""
    out = _log_normal(phi_star, priors.phi_loc, priors.phi_scale) + _log_normal(h, priors.h_loc, priors.h_scale)
    if s is not None:
        out = out + math.log(2.0) + _log_normal(s, 0.0, priors.s_scale)
    return out


def log_joint(stats: TraceStats, priors: TracePriors, noise_sd, sampling_rate, phi_star, h, s=None) -> jax.Array:
    """log p(trace, phi*, h[, s]) per coordinate (the unnormalised posterior density), O(d)."""
    return log_prior(priors, phi_star, h, s) + log_likelihood_stats(stats, noise_sd, sampling_rate, phi_star, h, s)


def log_joint_parts(stats: TraceStats, priors: TracePriors, noise_sd, sampling_rate, offset, h, s=None):
    """:func:`log_joint` at phi* = phibar + ``offset``, split as (varying part, constant) like
    :func:`log_likelihood_parts` (the solvers optimise and sample the varying part)."""
    varying, constant = log_likelihood_parts(stats, noise_sd, sampling_rate, offset, h, s)
    prior = _log_normal(offset + (stats.phi_mean - priors.phi_loc), 0.0, priors.phi_scale) + _log_normal(
        h, priors.h_loc, priors.h_scale
    )
    if s is not None:
        prior = prior + math.log(2.0) + _log_normal(s, 0.0, priors.s_scale)
    return varying + prior, constant


def log_marginal_h(stats: TraceStats, priors: TracePriors, noise_sd, sampling_rate, h, s=None) -> jax.Array:
    """log of the joint density with phi* integrated out exactly: log p(trace, h[, s]) per coordinate.

    Given h (and s) the model is linear-Gaussian in phi*: with c = q softplus(h), v the noise variance,
    z = gbar + c (phi_loc - phibar) ~ N(0, v/n + c^2 phi_scale^2) under the marginal, so

        log p(trace, h) = log p(h) - n/2 log(2 pi v) - (R0 + Sxx (c - b)^2) / (2 v)
                          - 1/2 log(1 + n c^2 phi_scale^2 / v) - z^2 / (2 (v/n + c^2 phi_scale^2)).
    """
    varying, constant = log_marginal_h_parts(stats, priors, noise_sd, sampling_rate, h, s)
    return varying + constant


def log_marginal_h_parts(stats: TraceStats, priors: TracePriors, noise_sd, sampling_rate, h, s=None):
    """:func:`log_marginal_h` split as (part that varies with h and s, per-coordinate constant).

    The constant -n/2 log(2 pi v0) - R0 / (2 v0) (v0 = noise_sd^2) is of order n; keeping it apart keeps
    the varying part accurate in float32 (the grid solver uses only the varying part).
    """
    varying = marginal_log_likelihood_varying(stats, priors, noise_sd, sampling_rate, h, s) + _log_normal(
        h, priors.h_loc, priors.h_scale
    )
    if s is not None:
        varying = varying + math.log(2.0) + _log_normal(s, 0.0, priors.s_scale)
    n = stats.count
    v0 = jnp.square(noise_sd)
    _, r0 = _slope_and_residual(stats)
    constant = -0.5 * n * (_LOG_2PI + jnp.log(v0)) - 0.5 * r0 / v0
    return varying, constant


def marginal_log_likelihood_varying(stats: TraceStats, priors: TracePriors, noise_sd, sampling_rate, h, s=None):
    """log p(trace | h, s) with phi* integrated out over its prior, without the per-coordinate constant
    of :func:`log_marginal_h_parts` (and without the priors of h and s)."""
    n = stats.count
    c = sampling_rate * jax.nn.softplus(h)
    v0 = jnp.square(noise_sd)
    b, r0 = _slope_and_residual(stats)
    tau2 = jnp.square(priors.phi_scale)
    if s is None:
        v = v0
        varying = 0.0
    else:
        s2 = jnp.square(s)
        v = v0 + s2
        varying = -0.5 * n * jnp.log1p(s2 / v0) + 0.5 * (r0 / v0) * (s2 / v)
    z = stats.grad_mean + c * (priors.phi_loc - stats.phi_mean)
    w = v / n + jnp.square(c) * tau2
    return (
        varying
        - 0.5 * stats.phi_ss * jnp.square(c - b) / v
        - 0.5 * jnp.log1p(n * jnp.square(c) * tau2 / v)
        - 0.5 * jnp.square(z) / w
    )


def conditional_phi_star(stats: TraceStats, priors: TracePriors, noise_sd, sampling_rate, h, s=None):
    """The exact Gaussian p(phi* | trace, h, s): returns (mean - phibar, variance), per coordinate.

    The mean is returned as an offset from phibar so that float32 keeps its digits.
    """
    n = stats.count
    c = sampling_rate * jax.nn.softplus(h)
    v = _variance(noise_sd, s)
    tau2 = jnp.square(priors.phi_scale)
    prec = 1.0 / tau2 + n * jnp.square(c) / v
    offset = ((priors.phi_loc - stats.phi_mean) / tau2 - n * c * stats.grad_mean / v) / prec
    return offset, 1.0 / prec
