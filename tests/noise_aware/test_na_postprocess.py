"""noise_aware_posterior: the three solvers agree, the Posterior it returns, and its errors."""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dpposterior.noise_aware as na
from dpposterior.noise_aware.grid import phi_star_moments
from dpposterior.noise_aware import model as M


@pytest.fixture(scope="module")
def posteriors(small_trace):
    return {m: na.noise_aware_posterior(small_trace, m, rng_key=7) for m in ("grid", "laplace", "nuts")}


def test_solvers_agree_on_a_trace(posteriors):
    """Means within 0.05 posterior sd, sds within 5% (grid is the reference: exact up to its grid)."""
    ref_mean = posteriors["grid"].diagnostics["phi_star_mean"]
    ref_sd = posteriors["grid"].diagnostics["phi_star_sd"]
    for m in ("laplace", "nuts"):
        mean = posteriors[m].diagnostics["phi_star_mean"]
        sd = posteriors[m].diagnostics["phi_star_sd"]
        assert np.all(np.abs(mean - ref_mean) < 0.05 * ref_sd), (m, (mean - ref_mean) / ref_sd)
        assert np.all(np.abs(sd / ref_sd - 1) < 0.05), (m, sd / ref_sd)
    d = posteriors["nuts"].diagnostics
    assert d["max_r_hat"] < 1.01 and d["min_ess"] > 1000 and d["num_divergences"] == 0
    assert posteriors["laplace"].diagnostics["converged"]
    assert posteriors["grid"].diagnostics["edge_mass"] < 1e-10
    # the stored draws of every method describe the same posterior
    for m, post in posteriors.items():
        draws = np.asarray(post.phi_star, np.float64)
        assert draws.shape == (4000, 6)
        assert np.all(np.abs(draws.mean(0) - ref_mean) < 0.1 * ref_sd), m


def test_nuts_with_phi_star_marginalised(posteriors, small_trace):
    post = na.noise_aware_posterior(small_trace, "nuts", rng_key=8, marginalize_phi_star=True)
    ref = posteriors["grid"].diagnostics
    d = post.diagnostics
    assert np.all(np.abs(d["phi_star_mean"] - ref["phi_star_mean"]) < 0.05 * ref["phi_star_sd"])
    assert np.all(np.abs(d["phi_star_sd"] / ref["phi_star_sd"] - 1) < 0.05)
    assert d["max_r_hat"] < 1.01 and d["min_ess"] > 2000


def test_posterior_object(posteriors, small_trace):
    for m, post in posteriors.items():
        assert post.method == m
        assert post.privacy is small_trace.privacy
        assert post.layout is small_trace.layout
        draws = post.sample(jax.random.PRNGKey(0), 4000)
        assert set(draws) == {"theta"} and draws["theta"].shape == (4000, 3)
        again = post.sample(jax.random.PRNGKey(0), 4000)
        np.testing.assert_array_equal(np.asarray(draws["theta"]), np.asarray(again["theta"]))
        # the mixture's sd: sqrt(E softplus(rho*)^2 + Var mu*), from the stored draws
        mu, rho = np.split(np.asarray(post.phi_star, np.float64), 2, axis=1)
        expect = np.sqrt(np.mean(np.logaddexp(0, rho) ** 2, 0) + mu.var(0))
        np.testing.assert_allclose(np.asarray(post.sd_unconstrained()), expect, rtol=1e-4)
    grid = posteriors["grid"]
    assert grid.phi_sampler is not None
    x = np.asarray(grid.sample_phi(jax.random.PRNGKey(1), 4000), np.float64)
    mean, sd = grid.diagnostics["phi_star_mean"], grid.diagnostics["phi_star_sd"]
    assert np.all(np.abs(x.mean(0) - mean) < 5 * sd / math.sqrt(4000))


def test_grid_is_deterministic_given_the_key(small_trace):
    a = na.noise_aware_posterior(small_trace, "grid", rng_key=3)
    b = na.noise_aware_posterior(small_trace, "grid", rng_key=3)
    np.testing.assert_array_equal(np.asarray(a.phi_star), np.asarray(b.phi_star))
    np.testing.assert_array_equal(a.diagnostics["phi_star_sd"], b.diagnostics["phi_star_sd"])
    c = na.noise_aware_posterior(small_trace, "grid")  # OS-seeded draws, same solution
    assert c.diagnostics["seeded_by"] == "os"
    np.testing.assert_array_equal(a.diagnostics["phi_star_mean"], c.diagnostics["phi_star_mean"])


@pytest.mark.slow  # long: kept out of the default run, which must stay short
def test_subsampling_noise_through_the_api(small_trace):
    out = {
        m: na.noise_aware_posterior(
            small_trace,
            m,
            subsampling_noise=True,
            rng_key=0,
            **({"num_warmup": 200, "num_samples": 400} if m == "nuts" else {}),
        )
        for m in ("grid", "laplace", "nuts")
    }
    ref = out["grid"].diagnostics
    assert ref["subsampling_noise"]
    for m in ("laplace", "nuts"):
        d = out[m].diagnostics
        assert np.all(np.abs(d["phi_star_mean"] - ref["phi_star_mean"]) < 0.15 * ref["phi_star_sd"]), m
        assert np.all(np.abs(d["phi_star_sd"] / ref["phi_star_sd"] - 1) < 0.15), m
    assert "s_draws" in out["nuts"].diagnostics


def test_prior_readings_and_overrides(small_trace):
    paper = na.noise_aware_posterior(small_trace, "grid", rng_key=0)
    inv = na.noise_aware_posterior(small_trace, "grid", rng_key=0, priors="softplus_inverse")
    st = paper.diagnostics["stats"]
    ns = M.noise_sd_of(small_trace.noise_multiplier, small_trace.clip, small_trace.beta)
    m = np.abs(st.cross_ss) / (0.1 * st.phi_ss)
    np.testing.assert_allclose(np.asarray(paper.diagnostics["priors"].h_loc), m, rtol=1e-6)
    np.testing.assert_allclose(
        np.asarray(paper.diagnostics["priors"].h_scale), np.asarray(ns) / np.sqrt(st.phi_ss) / 0.1, rtol=1e-6
    )
    np.testing.assert_allclose(np.asarray(jax.nn.softplus(inv.diagnostics["priors"].h_loc)), m, rtol=1e-5)
    # only the rho coordinates (a = O(1)) see the difference
    rel = np.abs(inv.diagnostics["phi_star_sd"] / paper.diagnostics["phi_star_sd"] - 1)
    assert np.all(rel[:3] < 1e-3) and np.any(rel[3:] > 0.01)
    custom = na.TracePriors(
        phi_loc=st.phi_mean,
        phi_scale=1.0,
        h_loc=paper.diagnostics["priors"].h_loc,
        h_scale=paper.diagnostics["priors"].h_scale,
        s_scale=1.0,
    )
    over = na.noise_aware_posterior(small_trace, "grid", rng_key=0, priors=custom)
    np.testing.assert_allclose(over.diagnostics["phi_star_sd"], paper.diagnostics["phi_star_sd"], rtol=1e-5)
    # "burn_in": the h prior from the steps before T*, the phi* prior as the paper's
    burn = na.noise_aware_posterior(small_trace, "grid", rng_key=0, priors="burn_in")
    start = burn.diagnostics["burn_in_start"]
    bst = na.sufficient_statistics(small_trace.phi[:start], small_trace.grads[:start], 0.0)
    pb = burn.diagnostics["priors"]
    np.testing.assert_allclose(np.asarray(pb.h_loc), np.abs(bst.cross_ss) / (0.1 * bst.phi_ss), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(pb.h_scale), np.asarray(ns) / np.sqrt(bst.phi_ss) / 0.1, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(pb.phi_loc), st.phi_mean, rtol=1e-12)
    assert not np.allclose(np.asarray(pb.h_loc), np.asarray(paper.diagnostics["priors"].h_loc))


def _replace(trace, **kw):
    return dataclasses.replace(trace, **kw)


def test_errors(small_trace):
    t = small_trace
    with pytest.raises(ValueError, match=r"method must be one of \('grid', 'nuts', 'laplace'\), got 'mcmc'"):
        na.noise_aware_posterior(t, "mcmc")
    for b in (-0.1, 1.0, 1.5, float("nan")):
        with pytest.raises(ValueError, match=r"burn_in must lie in \[0, 1\)"):
            na.noise_aware_posterior(t, burn_in=b)
    with pytest.raises(TypeError, match="burn_in must be a number"):
        na.noise_aware_posterior(t, burn_in="0.2")
    short = _replace(t, phi=t.phi[:11], grads=t.grads[:11])
    with pytest.raises(ValueError, match=r"too short after burn-in: T=11 steps with burn_in=0.2 leave 9 steps"):
        na.noise_aware_posterior(short)
    na.noise_aware_posterior(_replace(t, phi=t.phi[:12], grads=t.grads[:12]), rng_key=0)  # 10 steps: enough
    phi = t.phi.copy()
    phi[5000, 2] = np.nan
    with pytest.raises(ValueError, match=r"trace.phi contains NaN or inf \(first at index \[5000, 2\]\)"):
        na.noise_aware_posterior(_replace(t, phi=phi))
    grads = t.grads.copy()
    grads[10, 0] = np.inf
    with pytest.raises(ValueError, match="trace.grads contains NaN or inf"):
        na.noise_aware_posterior(_replace(t, grads=grads))
    with pytest.raises(ValueError, match="noise_multiplier must be a finite number > 0"):
        na.noise_aware_posterior(_replace(t, noise_multiplier=0.0))
    with pytest.raises(ValueError, match="beta must be > 0"):
        na.noise_aware_posterior(_replace(t, beta=np.r_[np.ones(5), 0.0]))
    frozen = t.phi.copy()
    frozen[:, 4] = 1.0
    with pytest.raises(ValueError, match=r"coordinates \['rho\[theta\[1\]\]'\] do not move after burn-in"):
        na.noise_aware_posterior(_replace(t, phi=frozen))
    with pytest.raises(TypeError, match=r"unknown solver options \['num_sample'\] for method 'nuts'"):
        na.noise_aware_posterior(t, "nuts", num_sample=10)
    with pytest.raises(TypeError, match="trace must be a DPVITrace"):
        na.noise_aware_posterior({"phi": t.phi})
    with pytest.raises(ValueError, match="priors must be a TracePriors or one of"):
        na.noise_aware_posterior(t, priors="flat")
    with pytest.raises(
        ValueError,
        match=r'priors="burn_in" takes the h prior from the burn-in steps, but burn_in '
        r"leaves 0 of them \(T=10000\); it needs at least 10: raise burn_in",
    ):
        na.noise_aware_posterior(t, burn_in=0.0, priors="burn_in")
    still = t.phi.copy()
    still[:2000, 1] = 0.25
    with pytest.raises(ValueError, match=r"coordinates \['mu\[theta\[1\]\]'\] do not move during burn-in"):
        na.noise_aware_posterior(_replace(t, phi=still), priors="burn_in")
    bad = na.TracePriors(0.0, 1.0, 1.0, -1.0, 1.0)
    with pytest.raises(ValueError, match="h_scale and s_scale > 0"):
        na.noise_aware_posterior(t, priors=bad)


def test_float32_grid_matches_float64(small_trace):
    """The default float32 grid against the same computation in float64."""
    st = na.sufficient_statistics(small_trace.phi, small_trace.grads, 0.2)
    ns = M.noise_sd_of(small_trace.noise_multiplier, small_trace.clip, small_trace.beta)
    m32, s32 = (np.asarray(x) for x in phi_star_moments(st.astype(jnp.float32), jnp.asarray(ns), 0.1))
    with jax.enable_x64(True):
        st64, ns64 = st.astype(jnp.float64), jnp.asarray(ns, jnp.float64)
        m64, s64 = (np.asarray(x) for x in phi_star_moments(st64, ns64, 0.1))
    assert np.all(np.abs(m32 - m64) < 1e-3 * s64)
    np.testing.assert_allclose(s32, s64, rtol=1e-3)
