"""Sufficient statistics and the post-processing density: the O(d) form equals the O(T d) one."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate

import dpposterior.noise_aware as na
from dpposterior.noise_aware.model import (
    conditional_phi_star,
    log_joint,
    log_likelihood_full,
    log_likelihood_stats,
    log_marginal_h,
)
from dpposterior.noise_aware.stats import burn_in_start, sufficient_statistics_jnp
from dpposterior.noise_aware import model as M


def _tail(trace, burn_in=0.2):
    start = burn_in_start(trace.phi.shape[0], burn_in)
    return trace.phi[start:], trace.grads[start:]


def test_statistics_match_direct_float64_sums(small_trace):
    phi, g = (x.astype(np.float64) for x in _tail(small_trace))
    st = na.sufficient_statistics(small_trace.phi, small_trace.grads, 0.2)
    n = phi.shape[0]
    assert np.all(st.count == n) and n == 8000
    np.testing.assert_allclose(st.phi_mean, phi.mean(0), rtol=1e-14)
    np.testing.assert_allclose(st.phi_ss, ((phi - phi.mean(0)) ** 2).sum(0), rtol=1e-12)
    np.testing.assert_allclose(st.cross_ss, ((phi - phi.mean(0)) * (g - g.mean(0))).sum(0), rtol=1e-10)
    raw = st.raw_sums()
    np.testing.assert_allclose(raw["sum_phi2"], (phi**2).sum(0), rtol=1e-12)
    np.testing.assert_allclose(raw["sum_grad_phi"], (phi * g).sum(0), rtol=1e-10, atol=1e-9)


def test_jnp_statistics_float32_accuracy_and_vmap(small_trace):
    st64 = na.sufficient_statistics(small_trace.phi, small_trace.grads, 0.2)
    start = burn_in_start(small_trace.phi.shape[0], 0.2)
    fn = jax.jit(sufficient_statistics_jnp, static_argnums=2)
    st32 = fn(jnp.asarray(small_trace.phi), jnp.asarray(small_trace.grads), start)
    assert st32.phi_mean.dtype == jnp.float32
    for f64, f32 in zip(st64, st32):
        np.testing.assert_allclose(np.asarray(f32), f64, rtol=2e-5, atol=1e-6 * np.abs(f64).max())
    # vmapped over replicates: the same as one at a time
    phis = jnp.stack([small_trace.phi, small_trace.phi[::-1]])
    grads = jnp.stack([small_trace.grads, small_trace.grads[::-1]])
    batched = jax.vmap(lambda p, g: sufficient_statistics_jnp(p, g, start))(phis, grads)
    single = sufficient_statistics_jnp(phis[1], grads[1], start)
    for b, s in zip(batched, single):
        np.testing.assert_allclose(b[1], s, rtol=1e-6)


@pytest.mark.parametrize("with_s", [False, True])
def test_stats_density_equals_full_trace_density(small_trace, with_s):
    """Several random (phi*, h, s) points, float64: relative difference below 1e-6."""
    phi, g = _tail(small_trace)
    rng = np.random.default_rng(1)
    with jax.enable_x64(True):
        st = na.sufficient_statistics(small_trace.phi, small_trace.grads, 0.2).astype(jnp.float64)
        ns = jnp.asarray(M.noise_sd_of(small_trace.noise_multiplier, small_trace.clip, small_trace.beta), jnp.float64)
        pr = na.trace_priors(st, ns, small_trace.sampling_rate)
        phi64, g64 = jnp.asarray(phi, jnp.float64), jnp.asarray(g, jnp.float64)
        for _ in range(5):
            p = st.phi_mean + rng.normal(0, 0.05, 6)
            h = pr.h_loc + pr.h_scale * rng.normal(0, 2, 6)
            s = jnp.asarray(np.abs(rng.normal(0, 1, 6))) if with_s else None
            ls = np.asarray(log_likelihood_stats(st, ns, 0.1, p, h, s))
            lf = np.asarray(log_likelihood_full(phi64, g64, ns, 0.1, p, h, s))
            np.testing.assert_allclose(ls, lf, rtol=1e-6)
            lj = np.asarray(log_joint(st, pr, ns, 0.1, p, h, s))
            assert np.all(np.isfinite(lj)) and not np.allclose(lj, ls)


def test_stats_density_float32_is_close(small_trace):
    """The default float32 path stays within 1e-5 relative of the float64 full-trace density."""
    phi, g = _tail(small_trace)
    st64 = na.sufficient_statistics(small_trace.phi, small_trace.grads, 0.2)
    ns = M.noise_sd_of(small_trace.noise_multiplier, small_trace.clip, small_trace.beta)
    p = st64.phi_mean + 0.01
    h = np.array([300.0, 900.0, 3100.0, 1.0, 2.9, 1.8])
    ls = np.asarray(
        log_likelihood_stats(st64.astype(jnp.float32), jnp.asarray(ns), 0.1, jnp.asarray(p, jnp.float32), h)
    )
    with jax.enable_x64(True):
        lf = np.asarray(
            log_likelihood_full(
                jnp.asarray(phi, jnp.float64),
                jnp.asarray(g, jnp.float64),
                jnp.asarray(ns, jnp.float64),
                0.1,
                jnp.asarray(p),
                jnp.asarray(h),
            )
        )
    np.testing.assert_allclose(ls, lf, rtol=1e-5)


@pytest.mark.parametrize("with_s", [False, True])
def test_phi_star_integrated_exactly(small_trace, with_s):
    """log_marginal_h = log of the numerical integral over phi* of the joint; the conditional is its
    normalised integrand (mean and variance by quadrature)."""
    with jax.enable_x64(True):
        st = na.sufficient_statistics(small_trace.phi, small_trace.grads, 0.2).astype(jnp.float64)
        ns = jnp.asarray(M.noise_sd_of(small_trace.noise_multiplier, small_trace.clip, small_trace.beta), jnp.float64)
        pr = na.trace_priors(st, ns, 0.1)
        pr = pr._replace(phi_loc=pr.phi_loc + 0.3, phi_scale=pr.phi_scale * 0.7)  # a prior off the trace mean
        h = pr.h_loc - 0.5 * pr.h_scale
        s = jnp.full(6, 0.5) if with_s else None
        lm = np.asarray(log_marginal_h(st, pr, ns, 0.1, h, s))
        off, var = (np.asarray(x) for x in conditional_phi_star(st, pr, ns, 0.1, h, s))
        for j in range(6):
            sub = lambda x, j=j: x[j] if jnp.ndim(x) else x  # noqa: E731
            stj = na.TraceStats(*(sub(x) for x in st))
            prj = na.TracePriors(*(sub(x) for x in pr))
            sj = None if s is None else s[j]
            centre = float(stj.phi_mean) + off[j]
            sd = np.sqrt(var[j])

            xs = np.linspace(centre - 12 * sd, centre + 12 * sd, 4001)
            dens = np.exp(np.asarray(log_joint(stj, prj, ns[j], 0.1, jnp.asarray(xs), h[j], sj)) - lm[j])
            total = integrate.trapezoid(dens, xs)
            np.testing.assert_allclose(total, 1.0, rtol=1e-6)
            mean = integrate.trapezoid(xs * dens, xs)
            np.testing.assert_allclose(mean, centre, atol=1e-6 * sd)
            np.testing.assert_allclose(integrate.trapezoid((xs - mean) ** 2 * dens, xs), var[j], rtol=1e-6)
