"""``noise_aware_posterior`` refuses broken releases, solver options and trace priors by name, before any
solver runs.
"""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest

import dpposterior as dpp
from input_checks import raises_clear
from release_fakes import fake_trace


@pytest.mark.parametrize(
    "method,kw,words",
    [
        ("grid", dict(num_points=0), ("num_points", ">= 2")),
        ("grid", dict(num_points=1.5), ("num_points", "integer")),
        ("grid", dict(num_points_s=1), ("num_points_s",)),
        ("grid", dict(num_stages=0), ("num_stages",)),
        ("grid", dict(tail=2.0), ("tail", "(0, 0.5)")),
        ("grid", dict(tail=float("nan")), ("tail",)),
        ("grid", dict(num_draws=0), ("num_draws",)),
        ("grid", dict(num_draws=-3), ("num_draws",)),
        ("laplace", dict(num_iterations=0), ("num_iterations",)),
        ("laplace", dict(tol=-1.0), ("tol",)),
        ("nuts", dict(num_chains=0), ("num_chains",)),
        ("nuts", dict(num_samples=0), ("num_samples",)),
        ("nuts", dict(num_warmup=-1), ("num_warmup",)),
        ("nuts", dict(target_accept_prob=1.5), ("target_accept_prob",)),
    ],
)
def test_bad_solver_options_are_refused_by_name(method, kw, words):
    with pytest.raises((ValueError, TypeError)) as info:
        dpp.noise_aware_posterior(fake_trace(), method=method, rng_key=0, **kw)
    for w in words:
        assert w in str(info.value), (w, str(info.value))


@pytest.fixture(scope="module")
def simulated_trace():

    from dpposterior.noise_aware.simulate import simulate_trace

    return simulate_trace(
        jax.random.PRNGKey(0),
        np.array([0.5, -1.0], np.float32),
        2.0,
        num_steps=40,
        sampling_rate=0.5,
        noise_multiplier=1.0,
        clip=1.0,
    )


@pytest.mark.parametrize(
    "field, exc, words",
    [
        (np.zeros(3), ValueError, ["priors.phi_loc", "shape (3,)", "(2,)"]),
        (None, TypeError, ["priors.phi_loc", "None"]),
        ("0.5", TypeError, ["priors.phi_loc", "'0.5'"]),
    ],
)
def test_trace_priors_of_the_wrong_shape_or_type_name_the_field(simulated_trace, field, exc, words):
    # a TracePriors field of the wrong length raised NumPy's "operands could not be broadcast together
    # with remapped shapes"; a string, "could not convert string to float"
    from dpposterior.noise_aware import TracePriors

    with pytest.raises(exc) as info:
        dpp.noise_aware_posterior(simulated_trace, priors=TracePriors(field, 1.0, 1.0, 1.0, 1.0), rng_key=0)
    for w in words:
        assert w in str(info.value), (w, str(info.value))


@pytest.mark.parametrize(
    "make,kw,names",
    [
        (lambda: {"phi": np.zeros((10, 4))}, {}, "trace"),
        (lambda: None, {}, "trace"),
        (lambda: fake_trace(), dict(method="mcmc"), "method"),
        (lambda: fake_trace(), dict(burn_in=1.0), "burn_in"),
        (lambda: fake_trace(), dict(burn_in=math.nan), "burn_in"),
        (lambda: fake_trace(), dict(burn_in=True), "burn_in"),
        (lambda: fake_trace(), dict(burn_in="0.2"), "burn_in"),
        (lambda: fake_trace(), dict(bogus_option=1), "bogus_option"),
        (lambda: fake_trace(phi=np.where(np.eye(40, 4) > 0, np.nan, 1.0)), {}, "phi"),
        (lambda: fake_trace(grads=np.full((40, 4), np.inf)), {}, "grads"),
        (lambda: fake_trace(T=2), {}, "too short"),
        (lambda: fake_trace(noise_multiplier=0.0), {}, "noise_multiplier"),
        (lambda: fake_trace(clip=math.nan), {}, "clip"),
        (lambda: fake_trace(sampling_rate=1.5), {}, "sampling_rate"),
        (lambda: fake_trace(beta=-np.ones(4)), {}, "beta"),
        (lambda: fake_trace(phi=np.ones((40, 4))), {}, "do not move"),
    ],
)
def test_noise_aware_posterior_refuses_broken_releases(make, kw, names):
    raises_clear(lambda: dpp.noise_aware_posterior(make(), **kw), names)
