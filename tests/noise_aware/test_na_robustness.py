"""noise_aware_posterior on inputs at the edges: DP noise far from s_scale, scales beyond float32, a NUTS
chain that never moves, and a trace that cannot be saved."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest

import dpposterior.noise_aware as na
from dpposterior.noise_aware.simulate import heuristic_learning_rate, simulate_trace
from dpposterior.noise_aware.stats import burn_in_start
from dpposterior.noise_aware import postprocess as P
from dpposterior.releases.trace import DPVITrace

PHI_STAR = np.array([0.5, -1.0, 0.2, -0.5], np.float32)
A = np.array([200.0, 300.0, 1.5, 2.0])


@pytest.fixture(scope="module")
def small_noise_trace():
    """rho coordinates with beta 1e5: DP noise sd sigma C / beta = 4e-5, far below s_scale = 1."""
    lr = heuristic_learning_rate(2.0, 2.0, 2000, 4, np.array([1.0, 1.0, 100.0, 100.0]))
    return simulate_trace(
        jax.random.PRNGKey(0),
        PHI_STAR,
        A,
        num_steps=2000,
        noise_multiplier=2.0,
        clip=2.0,
        beta=np.array([1.0, 1.0, 1e5, 1e5]),
        learning_rate=lr,
    )


@pytest.mark.parametrize("method", ["grid", "laplace"])
def test_subsampling_noise_is_resolved_when_the_dp_noise_is_small(small_noise_trace, method):
    """The s grid spanned [0, 6 s_scale] = [0, 6]; three stages shrink it to cells of 5e-4, far wider than
    s can be (s^2 <= the residual variance, about (4e-5)^2), so phi*'s sd came out 5.3x too wide (grid) or
    NaN (Laplace: the second derivative of r0 s^2 / (v v0) in log s overflowed float32). The true s is 0
    here: with subsampling noise the posterior must stay close to the one without."""
    ref = na.noise_aware_posterior(small_noise_trace, "grid", rng_key=0).diagnostics["phi_star_sd"]
    sd = na.noise_aware_posterior(small_noise_trace, method, rng_key=0, subsampling_noise=True).diagnostics[
        "phi_star_sd"
    ]
    assert np.all(np.isfinite(sd)), sd
    assert np.all(np.abs(sd / ref - 1) < 0.1), sd / ref


@pytest.mark.parametrize("change", ["beta_tiny", "beta_huge", "sigma_huge"])
def test_a_scale_beyond_the_float32_solvers_is_an_error_not_nan(small_noise_trace, change):
    """Were NaN means and sds, returned silently (grid) or NumPyro's "Cannot find valid initial parameters"."""
    tr = small_noise_trace
    if change == "beta_tiny":  # gradients 1e18 times larger with the noise: squares overflow float32
        bad = dataclasses.replace(tr, grads=tr.grads * np.float32(1e18), beta=tr.beta / 1e18)
    elif change == "beta_huge":  # noise variance below float32's smallest normal number
        bad = dataclasses.replace(tr, grads=tr.grads * np.float32(1e-20), beta=tr.beta * 1e20)
    else:
        bad = dataclasses.replace(tr, noise_multiplier=1e19)
    with pytest.raises(ValueError, match=r"outside the float32 range.*noise sd in \[1e-10, 1e\+12\]"):
        na.noise_aware_posterior(bad, "grid", rng_key=0)


def test_a_non_finite_solver_result_is_an_error(small_noise_trace, monkeypatch):
    """A last guard: a NaN moment is refused, naming the coordinate, never returned."""
    real = P.G.grid_phi_star_moments

    def nan_first(grid):
        mean, sd = real(grid)
        return mean.at[0].set(np.nan), sd

    monkeypatch.setattr(P.G, "grid_phi_star_moments", nan_first)
    with pytest.raises(ValueError, match=r"mu\[theta\[0\]\].*NaN or inf"):
        na.noise_aware_posterior(small_noise_trace, "grid", rng_key=0)


@pytest.mark.slow  # NUTS compilation, about 9 s on 2 busy cores
def test_a_nuts_chain_that_never_moves_warns(small_noise_trace):
    """num_warmup=0: the step size is never adapted and every draw is the initial point (mean 1.9 for a
    phi* of 0.5, sd 0); this was returned without a word."""
    with pytest.warns(RuntimeWarning, match="never moved"):
        post = na.noise_aware_posterior(small_noise_trace, "nuts", rng_key=0, num_warmup=0, num_samples=20)
    assert post.diagnostics["stuck"].all()


def test_save_refuses_a_trace_that_load_would_refuse(small_noise_trace, tmp_path):
    """save wrote the file; load then refused it ("array 'grads' contains NaN or inf")."""
    grads = small_noise_trace.grads.copy()
    grads[5, 1] = np.nan
    bad = dataclasses.replace(small_noise_trace, grads=grads)
    path = tmp_path / "t.npz"
    with pytest.raises(ValueError, match="cannot be saved.*NaN or inf.*nothing was written"):
        bad.save(path)
    assert not path.exists()
    short = dataclasses.replace(small_noise_trace, num_steps=5)
    with pytest.raises(ValueError, match="num_steps"):
        short.save(path)
    small_noise_trace.save(path)  # a good trace still round-trips
    np.testing.assert_array_equal(DPVITrace.load(path).grads, small_noise_trace.grads)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"num_steps": 0}, "num_steps must be an integer >= 1"),  # was ZeroDivisionError
        ({"num_steps": True}, "num_steps must be an integer"),  # was a trace of 1 step
        ({"noise_multiplier": -1.0}, "noise_multiplier must be a finite number > 0"),  # was a trace, sigma -1
        ({"noise_multiplier": 0.0}, "noise_multiplier must be a finite number > 0"),  # was ZeroDivisionError
        ({"sampling_rate": 2.0}, r"sampling_rate must lie in \(0, 1\]"),  # was a trace with q = 2
        ({"clip": 0.0}, "clip must be a finite number > 0"),  # was ZeroDivisionError
        ({"beta": [1.0, 1.0, 0.0, 0.0]}, "beta must be finite and > 0"),  # was an inf/NaN trace
        ({"learning_rate": np.nan}, "learning_rate must be finite and > 0"),  # was a NaN trace
        ({"phi_init": np.zeros(3)}, r"phi_init must be a finite vector of shape \(4,\)"),  # was a JAX error
        ({"learning_rate": 1e3}, "diverges"),  # was an inf/NaN trace
    ],
)
def test_simulate_trace_refuses_bad_settings(kwargs, match):
    with pytest.raises((TypeError, ValueError), match=match):
        simulate_trace(jax.random.PRNGKey(0), PHI_STAR, A, num_steps=kwargs.pop("num_steps", 50), **kwargs)


def test_burn_in_start_is_the_floor_of_the_exact_product(small_noise_trace):
    """0.29 * 100 is 28.999999999999996 in floating point: 28 steps were dropped where 29 are meant."""
    assert burn_in_start(100, 0.29) == 29 and burn_in_start(100, 0.57) == 57
    assert burn_in_start(100, 0.295) == 29 and burn_in_start(10_000, 0.2) == 2000
    assert burn_in_start(7, 0.5) == 3 and burn_in_start(100, 0.0) == 0
    tr = dataclasses.replace(
        small_noise_trace, phi=small_noise_trace.phi[:100], grads=small_noise_trace.grads[:100], num_steps=100
    )
    post = na.noise_aware_posterior(tr, "grid", burn_in=0.29, rng_key=0)
    assert post.diagnostics["burn_in_start"] == 29 and post.diagnostics["num_steps_used"] == 71


def test_last_iterate_of_a_non_finite_final_phi_is_an_error(small_noise_trace):
    """Was a posterior whose summary had mean inf and sd NaN."""
    final = small_noise_trace.final_phi.copy()
    final[0] = np.inf
    with pytest.raises(ValueError, match=r"final_phi contains NaN or inf \(at \[0\]\)"):
        dataclasses.replace(small_noise_trace, final_phi=final).last_iterate_posterior()


@pytest.mark.parametrize("burn_in", [-0.5, float("nan"), 1.0])
def test_sufficient_statistics_refuses_a_burn_in_outside_0_1(burn_in):
    """-0.5 gave count 150 for T = 100 with the means of the last 50 rows (phi[-50:]): statistics of a
    trace three times as long, silently; NaN was "cannot convert float NaN to integer"."""
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match=r"burn_in must lie in \[0, 1\)"):
        na.sufficient_statistics(rng.normal(size=(100, 2)), rng.normal(size=(100, 2)), burn_in)


def test_a_dpvim_trace_is_pointed_to_its_own_method(small_noise_trace):
    """Was "trace must be a DPVITrace, got DPVImTrace", with no word of the method that does apply."""
    from dpposterior.vi._dpvim import DPVImTrace

    tr = small_noise_trace
    dpvim_trace = DPVImTrace(
        mu=tr.phi[:, :2],
        rho=tr.phi[:, 2:],
        loc_grads=tr.grads[:, :2],
        final_phi=tr.final_phi,
        layout=tr.layout,
        privacy=tr.privacy,
        clip=tr.clip,
        noise_multiplier=tr.noise_multiplier,
        sampling_rate=tr.sampling_rate,
        num_steps=tr.num_steps,
        dataset_size=0,
        learning_rate=tr.learning_rate,
        natural_gradient=False,
    )
    with pytest.raises(TypeError, match=r"got DPVImTrace; .*trace\.noise_aware_posterior\(\)"):
        na.noise_aware_posterior(dpvim_trace)


def test_tracepriors_beyond_float32_are_an_error_naming_the_priors(small_noise_trace):
    """phi_scale 1e-50 (> 0, so accepted) is 0 in the float32 solvers: the posterior was NaN, returned."""
    pr = na.noise_aware_posterior(small_noise_trace, "grid", rng_key=0).diagnostics["priors"]
    with pytest.raises(ValueError, match="NaN or inf.*check the TracePriors given"):
        na.noise_aware_posterior(small_noise_trace, "grid", rng_key=0, priors=pr._replace(phi_scale=np.full(4, 1e-50)))


def test_subsampling_noise_below_its_checked_noise_sd_is_an_error(small_noise_trace):
    """The s grid and Laplace were checked down to a noise sd of 4e-6; the solvers without subsampling
    noise hold far smaller ones (rescaled traces down to 1e-9), so only the subsampling path refuses."""
    tiny = dataclasses.replace(
        small_noise_trace, grads=small_noise_trace.grads * np.float32(1e-3), beta=small_noise_trace.beta * 1e3
    )  # rho coordinates' noise sd 4e-8
    with pytest.raises(ValueError, match=r"subsampling_noise=True needs the DP noise sd .* >= 1e-06"):
        na.noise_aware_posterior(tiny, "grid", rng_key=0, subsampling_noise=True)
    post = na.noise_aware_posterior(tiny, "grid", rng_key=0, priors="softplus_inverse")
    assert np.all(np.isfinite(post.diagnostics["phi_star_sd"]))
