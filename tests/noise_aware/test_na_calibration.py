"""Calibration of the phi* posterior on traces simulated from the trace model itself (issue 3 Done-when).

Two designs (tests/noise_aware/conftest.py, ``simulate_replicates``), 200 traces of d = 6 each, so
1,200 central intervals pooled over coordinates (the coordinates are independent problems, so the
1,200 hits are independent Bernoulli draws: the binomial sd is 0.9% at 90% and 1.4% at 50%; the
tolerances 90% +- 4% and 50% +- 5% are about 4 sd).

* "exact": phi* and h are drawn from fixed priors, the traces from the model, and the solvers are given
  those priors with burn_in = 0 (the likelihood of the whole trace). Bayesian credible intervals are
  then exactly calibrated when averaged over the prior: any solver error shows. (With burn-in the
  posterior conditions on phi_{T*}, which itself carries information about phi*; with the trace-based
  priors, which depend on the trace, no simulation can draw the truth from the prior used.)
* "realistic": DPVI-like traces (the paper's learning-rate heuristic, beta = (1, 100), curvatures of
  mu and rho coordinates as a DPVI trace has them) with the paper's trace-based priors and burn-in
  0.2, as users run it. Why the test is valid although the priors depend on the trace: the phi* prior
  N(phibar, 1) is flat where the likelihood lives (posterior sds are 1e-4 - 1e-1), and given the
  curvature c = q a the flat-prior posterior of phi* is exact (gbar = c (phibar - phi*) + mean noise, the
  noise being independent of the past, so the interval is a pivot); what is tested is the treatment of
  the uncertainty about a with the paper's data-based prior on h. This is the check the Done-when asks
  for; the "exact" design is the stronger check of the solvers.

* "adult_like" / "adult_like_exact": the settings of the Adult demo trace, a weakly identified regime.
  The grid is exactly calibrated there with the true priors; the Laplace approximation and the
  trace-based priors are not (a documented limitation, asserted so that a change is noticed).

Power: deliberately wrong posteriors fail the same test.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import norm

import dpposterior.noise_aware as na
from dpposterior.noise_aware.grid import grid_phi_star_quantiles
from dpposterior.noise_aware.nuts import nuts_posterior_batch

Z90, Z50 = norm.ppf(0.95), norm.ppf(0.75)


def _grid_intervals(reps, priors=None, noise_sd=None):
    st = reps.stats32()
    ns = jnp.asarray(reps.noise_sd if noise_sd is None else noise_sd, jnp.float32)
    if priors is None:
        priors = na.trace_priors(st, ns, 0.1)
    g = na.grid_posterior(st, na.TracePriors(*(jnp.asarray(x, jnp.float32) for x in priors)), ns, 0.1)
    assert float(jnp.max(g.edge_mass)) < 1e-6
    return np.asarray(grid_phi_star_quantiles(g, [0.05, 0.95, 0.25, 0.75]))


def _laplace_intervals(reps, priors=None):
    st = reps.stats32()
    ns = jnp.asarray(reps.noise_sd, jnp.float32)
    if priors is None:
        priors = na.trace_priors(st, ns, 0.1)
    res = na.laplace_posterior(st, na.TracePriors(*(jnp.asarray(x, jnp.float32) for x in priors)), ns, 0.1)
    assert bool(jnp.all(res.converged))
    m, s = np.asarray(res.phi_star_mode, np.float64), np.asarray(res.phi_star_sd, np.float64)
    return np.stack([m - Z90 * s, m + Z90 * s, m - Z50 * s, m + Z50 * s])


def _nuts_intervals(reps, num_warmup, num_samples, priors=None, max_tree_depth=10):
    st = reps.stats32()
    ns = jnp.asarray(reps.noise_sd, jnp.float32)
    if priors is None:
        priors = na.trace_priors(st, ns, 0.1)
    by = reps.by_replicate
    phi, diag = nuts_posterior_batch(
        na.TraceStats(*(by(x) for x in st)),
        na.TracePriors(*(by(x) for x in priors)),
        by(ns),
        0.1,
        jax.random.PRNGKey(11),
        num_warmup=num_warmup,
        num_samples=num_samples,
        max_tree_depth=max_tree_depth,
    )
    phi = np.asarray(phi, np.float64).transpose(1, 0, 2).reshape(num_samples, -1)
    return np.quantile(phi, [0.05, 0.95, 0.25, 0.75], axis=0), diag


def _coverages(iv, truth):
    c90 = float(np.mean((truth >= iv[0]) & (truth <= iv[1])))
    c50 = float(np.mean((truth >= iv[2]) & (truth <= iv[3])))
    return c90, c50


def _calibrated(c90, c50):
    return abs(c90 - 0.90) <= 0.04 and abs(c50 - 0.50) <= 0.05


def _check(label, iv, reps):
    assert iv.shape[1] >= 1000
    c90, c50 = _coverages(iv, reps.truth)
    print(f"\n{label}: 90% intervals cover {c90:.3f}, 50% intervals cover {c50:.3f} ({iv.shape[1]} intervals)")
    assert _calibrated(c90, c50), (label, c90, c50)


# ------------------------------------------------------------------------------- realistic design
@pytest.mark.parametrize("h_location", ["paper", "softplus_inverse"])
def test_grid_calibrated_on_realistic_traces(realistic_replicates, h_location):
    reps = realistic_replicates
    priors = na.trace_priors(reps.stats32(), jnp.asarray(reps.noise_sd, jnp.float32), 0.1, h_location=h_location)
    _check(f"grid ({h_location} priors), realistic", _grid_intervals(reps, priors), reps)


def test_laplace_calibrated_on_realistic_traces(realistic_replicates):
    _check("laplace, realistic", _laplace_intervals(realistic_replicates), realistic_replicates)


@pytest.mark.slow  # long: kept out of the default run, which must stay short
def test_nuts_calibrated_on_realistic_traces_short_chains(realistic_replicates):
    """The default-run NUTS check: all 200 traces, shorter chains (300 warm-up, 700 draws) and trees
    capped at depth 6 (vectorised over replicates, each iteration waits for the longest trajectory;
    the rare funnel replicates would want depth 10)."""
    iv, diag = _nuts_intervals(realistic_replicates, 300, 700, max_tree_depth=6)
    assert float(np.median(diag["ess_phi_star"])) > 100
    _check("nuts (300 + 700 draws), realistic", iv, realistic_replicates)


@pytest.mark.slow
def test_nuts_calibrated_on_realistic_traces_full_chains(realistic_replicates):
    iv, diag = _nuts_intervals(realistic_replicates, 1000, 4000)
    assert float(np.max(diag["r_hat_phi_star"])) < 1.05
    _check("nuts (1000 + 4000 draws), realistic", iv, realistic_replicates)


# ------------------------------------------------------------------------------- exact design
def test_grid_calibrated_exactly(exact_replicates):
    _check("grid, exact design", _grid_intervals(exact_replicates, exact_replicates.priors), exact_replicates)


def test_laplace_calibrated_exactly(exact_replicates):
    _check("laplace, exact design", _laplace_intervals(exact_replicates, exact_replicates.priors), exact_replicates)


@pytest.mark.slow
def test_nuts_calibrated_exactly(exact_replicates):
    iv, _ = _nuts_intervals(exact_replicates, 1000, 4000, exact_replicates.priors)
    _check("nuts, exact design", iv, exact_replicates)


# ------------------------------------------------------------------------------- Adult-like regime
def test_grid_calibrated_exactly_in_the_adult_regime(adult_like_exact):
    """The weakly identified regime of the Adult demo trace (heavy-tailed phi* posteriors): the grid is
    exactly calibrated there when given the priors the truth came from."""
    _check(
        "grid, Adult-like exact design", _grid_intervals(adult_like_exact, adult_like_exact.priors), adult_like_exact
    )


def test_known_limitations_in_the_adult_regime(adult_like_exact, adult_like):
    """Measured, reported in the docstrings: in the Adult-like regime the Laplace approximation is too
    narrow even with the right priors, and the paper's trace-based priors make every solver too narrow
    (the h prior reuses the slope estimate the likelihood also contains). If this test starts failing,
    something changed for the better: update the docs."""
    c_lap = _coverages(_laplace_intervals(adult_like_exact, adult_like_exact.priors), adult_like_exact.truth)
    c_trace = _coverages(_grid_intervals(adult_like), adult_like.truth)
    print(f"\nAdult-like exact design, laplace: {c_lap[0]:.3f} (90%), {c_lap[1]:.3f} (50%)")
    print(
        f"Adult-like traces, grid with the paper's trace-based priors: {c_trace[0]:.3f} (90%), {c_trace[1]:.3f} (50%)"
    )
    assert not _calibrated(*c_lap) and c_lap[0] < 0.86
    assert not _calibrated(*c_trace) and c_trace[0] < 0.86


def _burn_in_priors(reps):
    ns = jnp.asarray(reps.noise_sd, jnp.float32)
    return na.burn_in_priors(reps.stats32(), reps.burn_stats.astype(jnp.float32), ns, 0.1)


def test_burn_in_priors_calibrated_on_realistic_traces(realistic_replicates):
    """The h prior from the burn-in steps changes nothing where A is well identified."""
    _check(
        "grid (burn-in priors), realistic",
        _grid_intervals(realistic_replicates, _burn_in_priors(realistic_replicates)),
        realistic_replicates,
    )


def test_burn_in_priors_repair_most_of_the_adult_regime(adult_like):
    """Where A is weakly identified, the h prior from the burn-in steps (no slope counted twice) brings the
    90% intervals from about 0.81 to 0.87 and the 50% ones from 0.40 to 0.45 (measured, seed 5)."""
    paper = _coverages(_grid_intervals(adult_like), adult_like.truth)
    burn = _coverages(_grid_intervals(adult_like, _burn_in_priors(adult_like)), adult_like.truth)
    print(
        f"\nAdult-like traces, grid: trace-based priors {paper[0]:.3f} / {paper[1]:.3f}, "
        f"burn-in priors {burn[0]:.3f} / {burn[1]:.3f} (90% / 50%)"
    )
    assert burn[0] >= 0.86 and burn[0] - paper[0] >= 0.04 and burn[1] - paper[1] >= 0.03


@pytest.mark.parametrize("sigma, epsilon", [(112.45, 0.3), (307.58, 0.1)])
def test_burn_in_priors_at_the_adult_experiments_smaller_epsilons(adult_like_at, sigma, epsilon):
    """The same regime at the noise of the Adult experiment's epsilon 0.3 and 0.1 (T = 10,000, q = 0.1,
    delta = 1e-5): both priors are too narrow there, the burn-in ones much less (measured, mu and rho
    pooled: 90% intervals 0.72 -> 0.85 at 0.3, 0.64 -> 0.79 at 0.1)."""
    reps = adult_like_at(sigma)
    paper = _coverages(_grid_intervals(reps), reps.truth)
    burn = _coverages(_grid_intervals(reps, _burn_in_priors(reps)), reps.truth)
    print(
        f"\nAdult-like traces at epsilon {epsilon}, grid: trace-based priors {paper[0]:.3f} / {paper[1]:.3f}, "
        f"burn-in priors {burn[0]:.3f} / {burn[1]:.3f} (90% / 50%)"
    )
    assert burn[0] - paper[0] >= 0.08 and burn[1] - paper[1] >= 0.04
    assert paper[0] < 0.80


# ------------------------------------------------------------------------------- power
def test_wrong_posteriors_fail_the_same_test(realistic_replicates):
    reps = realistic_replicates
    st = reps.stats32()
    ns = jnp.asarray(reps.noise_sd, jnp.float32)
    paper = na.trace_priors(st, ns, 0.1)
    wrong = {
        # the DP noise variance under-stated by a factor 2 (e.g. sigma C / beta read without a sqrt 2)
        "noise sd / sqrt 2": _grid_intervals(reps, paper, np.asarray(reps.noise_sd) / np.sqrt(2.0)),
        # ignoring beta in the noise (sigma C instead of sigma C / beta)
        "noise without beta": _grid_intervals(reps, paper, np.repeat(np.asarray(reps.noise_sd)[::6], 6)),
        # an uninformative prior on h instead of the trace-based one (paper section 3.3: works poorly)
        "flat h prior": _grid_intervals(reps, paper._replace(h_scale=paper.h_scale * 1e3)),
    }
    # ignoring the noise altogether: the last iterate as a point estimate
    last = reps.final_phi
    wrong["last iterate"] = np.stack([last, last, last, last])
    for label, iv in wrong.items():
        c90, c50 = _coverages(iv, reps.truth)
        print(f"\nwrong posterior '{label}': {c90:.3f} (90%), {c50:.3f} (50%)")
        assert not _calibrated(c90, c50), label
    # Reported, not asserted: the paper's printed reading of the h prior scale (a variance) is not caught
    # by the pooled phi* intervals of this design (it moves the rho coordinates only; NOTES section 8
    # found it in the TARP coverage of theta).
    iv = _grid_intervals(reps, paper._replace(h_scale=jnp.square(paper.h_scale)))
    c90, c50 = _coverages(iv, reps.truth)
    print(f"\nprior sd of h read as a variance: {c90:.3f} (90%), {c50:.3f} (50%) (reported only)")


def test_api_equals_the_flattened_solver(realistic_replicates):
    """noise_aware_posterior on a trace gives what the calibration tests compute on the pooled
    coordinates (the coordinates are independent problems)."""
    reps = realistic_replicates
    pooled = _grid_intervals(reps)
    for r in (0, 1):
        post = na.noise_aware_posterior(reps.traces[r], "grid", rng_key=0)
        qs = np.asarray(grid_phi_star_quantiles(post.diagnostics["grid"], [0.05, 0.95, 0.25, 0.75]))
        np.testing.assert_allclose(qs, pooled[:, 6 * r : 6 * r + 6], rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------------- the model's curvature
def _curvature_priors(reps, relative_error_seed: int):
    """The trace-based priors with the h prior at a given curvature: the true A, off by a relative error
    of sd :data:`model_terms.RELATIVE_SD` (what the model's curvature is known to), so that the truth is
    a draw from the h prior used."""
    from dpposterior.noise_aware import model_terms
    from dpposterior.releases.model_curvature import ModelCurvature

    z = np.random.default_rng(relative_error_seed).standard_normal(reps.a.shape)
    given = reps.a * np.exp(model_terms.RELATIVE_SD * z)
    size = given.shape[0]
    terms = ModelCurvature(
        point=np.zeros(size),
        curvature=given,
        hessian_diag=np.ones(size),
        hessian_diag_slope=np.zeros((size, size)),
        clip_shift=np.zeros(size),
        num_records=1,
    )
    base = na.trace_priors(reps.stats32(), jnp.asarray(reps.noise_sd, jnp.float32), 0.1)
    return model_terms.curvature_priors(na.TracePriors(*(np.asarray(x, np.float64) for x in base)), terms)


def test_curvature_priors_calibrated_where_the_trace_slope_is_not(adult_like):
    """In the weakly identified regime the trace's own slope makes the intervals too narrow (asserted in
    :func:`test_known_limitations_in_the_adult_regime`); an h prior at the curvature, known to 5%, makes
    them calibrated. This is what ``priors="model"`` does with the curvature the model gives."""
    _check(
        "grid (curvature priors), Adult-like", _grid_intervals(adult_like, _curvature_priors(adult_like, 3)), adult_like
    )


def test_curvature_priors_calibrated_on_realistic_traces(realistic_replicates):
    _check(
        "grid (curvature priors), realistic",
        _grid_intervals(realistic_replicates, _curvature_priors(realistic_replicates, 4)),
        realistic_replicates,
    )


def test_a_wrong_curvature_fails_the_same_check(realistic_replicates):
    """Power: the curvature four times too large (intervals about half as wide) is caught."""
    from dpposterior.noise_aware import model_terms

    priors = _curvature_priors(realistic_replicates, 4)
    a = np.asarray(realistic_replicates.a) * 4.0
    wrong = priors._replace(h_loc=a + np.log(-np.expm1(-a)), h_scale=model_terms.RELATIVE_SD * a / -np.expm1(-a))
    c90, c50 = _coverages(_grid_intervals(realistic_replicates, wrong), realistic_replicates.truth)
    assert not _calibrated(c90, c50) and c90 < 0.86, (c90, c50)
