"""The grid solver against brute-force quadrature; its sampler, vmap, determinism and speed."""

from __future__ import annotations

import dataclasses
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate

import dpposterior.noise_aware as na
from dpposterior.noise_aware.grid import (
    grid_h_moments,
    grid_phi_star_moments,
    grid_phi_star_quantiles,
    grid_phi_star_sampler,
    grid_sample,
    grid_sample_phi_star,
)
from dpposterior.noise_aware.simulate import simulate_trace
from dpposterior.noise_aware.stats import burn_in_start
from dpposterior.noise_aware import model as M

PROBS = np.array([0.05, 0.25, 0.5, 0.75, 0.95])


def _raw(trace, burn_in=0.2):
    start = burn_in_start(trace.phi.shape[0], burn_in)
    x = trace.phi[start:].astype(np.float64)
    y = trace.grads[start:].astype(np.float64)
    return {
        "n": x.shape[0],
        "sx": x.sum(0),
        "sxx": (x * x).sum(0),
        "sy": y.sum(0),
        "syy": (y * y).sum(0),
        "sxy": (x * y).sum(0),
        "xbar": x.mean(0),
    }


def _brute_force(raw, j, noise_sd, q, priors, s_nodes=None, num_h=801, num_p=3001):
    """p(phi*, h[, s] | trace) on a dense tensor grid straight from the raw float64 sums, independent
    of the package's statistics and integration. phi* nodes are sinh-spaced (dense at the centre, the
    funnel's wide tails still covered); s is integrated slice by slice."""
    n = raw["n"]
    hl, hs = float(priors.h_loc[j]), float(priors.h_scale[j])
    h = np.linspace(hl - 12 * hs, hl + 12 * hs, num_h)
    u = np.linspace(-np.arcsinh(8.0 / 0.002), np.arcsinh(8.0 / 0.002), num_p)
    centre = float(priors.phi_loc[j])
    p = centre + 0.002 * np.sinh(u)
    dp_du = 0.002 * np.cosh(u)
    H, P = np.meshgrid(h, p, indexing="ij")
    c = q * np.logaddexp(0.0, H)
    # sum_t (y - c (x - p))^2 from the raw sums
    sxxp = raw["sxx"][j] - 2 * P * raw["sx"][j] + n * P * P
    rss = raw["syy"][j] - 2 * c * (raw["sxy"][j] - P * raw["sy"][j]) + c * c * sxxp
    prior = -0.5 * ((P - centre) / float(priors.phi_scale[j])) ** 2 - 0.5 * ((H - hl) / hs) ** 2

    def log_slice(s):
        v = noise_sd[j] ** 2 + s**2
        return -0.5 * n * np.log(v) - 0.5 * rss / v + prior - 0.5 * s**2

    if s_nodes is None:
        lp = log_slice(0.0)
        w_hp = np.exp(lp - lp.max())
    else:  # trapezoid rule over s, accumulated slice by slice
        top = max(log_slice(s).max() for s in s_nodes)
        ws = np.r_[0.5, np.ones(len(s_nodes) - 2), 0.5] * (s_nodes[1] - s_nodes[0])
        w_hp = sum(wk * np.exp(log_slice(s) - top) for wk, s in zip(ws, s_nodes))
    w_p = integrate.trapezoid(w_hp, h, axis=0)  # density of phi* at the nodes (per unit phi*)
    dens = w_p / integrate.trapezoid(w_p, p)
    mean = integrate.trapezoid(p * dens, p)
    sd = np.sqrt(integrate.trapezoid((p - mean) ** 2 * dens, p))
    cdf = integrate.cumulative_trapezoid(dens, p, initial=0.0)
    quant = np.interp(PROBS, cdf, p)
    w_h = integrate.trapezoid(w_hp * dp_du[None, :], u, axis=1)
    w_h = w_h / integrate.trapezoid(w_h, h)
    h_mean = integrate.trapezoid(h * w_h, h)
    h_sd = np.sqrt(integrate.trapezoid((h - h_mean) ** 2 * w_h, h))
    return mean, sd, quant, h_mean, h_sd


@pytest.fixture(scope="module")
def funnel_trace():
    """Slowly mixing coordinates (kappa = lr q a ~ 1e-3 - 3e-3): a weakly identified, phi* | h funnel."""
    phi_star = np.array([0.5, -0.4, 1.0, -1.0], np.float32)
    a = np.array([10.0, 30.0, 0.3, 0.8], np.float32)
    return simulate_trace(
        jax.random.PRNGKey(5),
        phi_star,
        a,
        noise_multiplier=3.0,
        clip=2.0,
        beta=[1.0, 1.0, 100.0, 100.0],
        phi_init=phi_star,
    )


@pytest.mark.parametrize("which", ["small", "funnel"])
def test_grid_matches_brute_force_quadrature(which, small_trace, funnel_trace):
    trace = small_trace if which == "small" else funnel_trace
    st = na.sufficient_statistics(trace.phi, trace.grads, 0.2)
    ns = np.asarray(M.noise_sd_of(trace.noise_multiplier, trace.clip, trace.beta), np.float64)
    pr = na.trace_priors(st.astype(jnp.float32), jnp.asarray(ns, jnp.float32), 0.1)
    g = na.grid_posterior(st.astype(jnp.float32), pr, jnp.asarray(ns, jnp.float32), 0.1)
    mean, sd = (np.asarray(x) for x in grid_phi_star_moments(g))
    quant = np.asarray(grid_phi_star_quantiles(g, PROBS))
    h_mean, h_sd = (np.asarray(x) for x in grid_h_moments(g))
    assert float(np.max(g.edge_mass)) < 1e-10
    raw = _raw(trace)
    for j in range(trace.num_params):
        bm, bsd, bq, bhm, bhs = _brute_force(raw, j, ns, 0.1, pr)
        assert abs(mean[j] - bm) < 2e-3 * bsd, (j, mean[j], bm, bsd)
        assert abs(sd[j] / bsd - 1) < 2e-3, (j, sd[j], bsd)
        np.testing.assert_allclose(quant[:, j], bq, atol=3e-3 * bsd, rtol=0)
        assert abs(h_mean[j] - bhm) < 5e-3 * bhs and abs(h_sd[j] / bhs - 1) < 5e-3, (j, h_mean[j], bhm, h_sd[j], bhs)


def test_grid_with_subsampling_noise_matches_brute_force():
    """Noise small enough (beta large) that s is identified: the 2-D (h, s) grid against a 3-D quadrature."""
    phi_star = np.array([0.2, -0.5], np.float32)
    trace = simulate_trace(
        jax.random.PRNGKey(2),
        phi_star,
        np.array([3.0, 1.5]),
        noise_multiplier=1.0,
        clip=2.0,
        beta=[2.0, 4.0],
        num_steps=4000,
        phi_init=phi_star,
        subsampling_sd=[0.7, 0.2],
    )
    st = na.sufficient_statistics(trace.phi, trace.grads, 0.2)
    ns = np.asarray(M.noise_sd_of(1.0, 2.0, trace.beta), np.float64)
    pr = na.trace_priors(st.astype(jnp.float32), jnp.asarray(ns, jnp.float32), 0.1)
    g = na.grid_posterior(st.astype(jnp.float32), pr, jnp.asarray(ns, jnp.float32), 0.1, subsampling_noise=True)
    mean, sd = (np.asarray(x) for x in grid_phi_star_moments(g))
    quant = np.asarray(grid_phi_star_quantiles(g, PROBS))
    raw = _raw(trace)
    s_nodes = np.linspace(0.0, 4.0, 161)
    for j in range(2):
        bm, bsd, bq, _, _ = _brute_force(raw, j, ns, 0.1, pr, s_nodes=s_nodes, num_h=241, num_p=1201)
        assert abs(mean[j] - bm) < 3e-3 * bsd and abs(sd[j] / bsd - 1) < 3e-3, (j, mean[j], bm, sd[j], bsd)
        np.testing.assert_allclose(quant[:, j], bq, atol=5e-3 * bsd, rtol=0)
    draws = grid_sample(g, jax.random.PRNGKey(0), 4000)
    s = np.asarray(draws["s"])
    assert s.min() >= 0
    # the subsampling noise is found: its posterior excludes 0 for the first coordinate
    assert np.quantile(s[:, 0], 0.01) > 0.3


def test_sampler_reproduces_the_exact_moments(funnel_trace):
    """Draws against the exact moments and quantiles, on the heavy-tailed (funnel) posteriors."""
    st = na.sufficient_statistics(funnel_trace.phi, funnel_trace.grads, 0.2).astype(jnp.float32)
    ns = jnp.asarray(M.noise_sd_of(funnel_trace.noise_multiplier, funnel_trace.clip, funnel_trace.beta), jnp.float32)
    g = na.grid_posterior(st, na.trace_priors(st, ns, 0.1), ns, 0.1)
    mean, sd = (np.asarray(x) for x in grid_phi_star_moments(g))
    num = 40_000
    x = np.asarray(grid_sample_phi_star(g, jax.random.PRNGKey(3), num)).astype(np.float64)
    assert x.shape == (num, 4)
    assert np.all(np.abs(x.mean(0) - mean) < 5 * sd / np.sqrt(num))
    qs = np.asarray(grid_phi_star_quantiles(g, [0.05, 0.5, 0.95]))
    emp = np.mean(x[None] <= qs[:, None, :], axis=1)
    assert np.all(np.abs(emp - np.array([[0.05], [0.5], [0.95]])) < 5 * np.sqrt(0.25 / num))


def test_vmap_over_replicates_equals_loop(realistic_replicates):
    """The pure sampler vmapped over replicates (as the coverage engine runs it) = one at a time."""
    reps = realistic_replicates
    r = 4
    st_b = na.TraceStats(*(reps.by_replicate(x)[:r] for x in reps.stats32()))
    ns_b = reps.by_replicate(jnp.asarray(reps.noise_sd, jnp.float32))[:r]
    q_b = jnp.full((r,), 0.1)
    keys = jax.random.split(jax.random.PRNGKey(0), r)
    draws = jax.vmap(lambda s, n, q, k: grid_phi_star_sampler(s, n, q, k, 50))(st_b, ns_b, q_b, keys)
    assert draws.shape == (r, 50, reps.num_params)
    for i in range(r):
        sti = na.TraceStats(*(x[i] for x in st_b))
        np.testing.assert_allclose(draws[i], grid_phi_star_sampler(sti, ns_b[i], 0.1, keys[i], 50), rtol=1e-5)


def test_grid_is_deterministic_and_fast():
    """A 1,000-coordinate trace: statistics + grid posterior + moments in well under a second."""
    d = 1000
    rng = np.random.default_rng(0)
    beta = np.r_[np.ones(d // 2), 100.0 * np.ones(d // 2)]
    a = np.r_[rng.uniform(100, 3000, d // 2), rng.uniform(0.8, 2.5, d // 2)]
    trace = simulate_trace(jax.random.PRNGKey(1), rng.normal(size=d), a, noise_multiplier=3.0, beta=beta)
    ns = jnp.asarray(M.noise_sd_of(3.0, 2.0, beta), jnp.float32)

    def solve():
        st = na.sufficient_statistics(trace.phi, trace.grads, 0.2).astype(jnp.float32)
        g = na.grid_posterior(st, na.trace_priors(st, ns, 0.1), ns, 0.1)
        return jax.block_until_ready(grid_phi_star_moments(g))

    first = solve()  # compiles
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        again = solve()
        times.append(time.perf_counter() - t0)
    for x, y in zip(first, again):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    assert min(times) < 1.0, times


def test_misfitting_trace_warns_about_edge_mass():
    """A coordinate that drifts away (negative curvature) does not fit the model: the grid says so."""
    trace = simulate_trace(
        jax.random.PRNGKey(0), np.zeros(2), np.array([1000.0, 1000.0]), noise_multiplier=1.0, num_steps=2000
    )
    grads = trace.grads.copy()
    grads[:, 0] = -grads[:, 0]  # a slope of the wrong sign, 45 standard errors from zero
    bad = dataclasses.replace(trace, grads=grads)
    with pytest.warns(RuntimeWarning, match=r"coordinates \['mu\[.*edge of the widest grid box"):  # named
        post = na.noise_aware_posterior(bad, "grid", rng_key=0, priors="paper")
    assert post.diagnostics["edge_mass"] > 1e-4
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        na.noise_aware_posterior(trace, "grid", rng_key=0, priors="paper")
