"""Privacy of the DP MH chains: per-iteration constants, composition, calibration, the release record."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpposterior import mcmc
from dpposterior.mcmc.accounting import classic_noise_multiplier, dp_fast_mh_constants, optimal_composition_delta
from dpposterior.mcmc.chain import make_chain_run
from dpposterior.privacy import advanced_composition

DELTA = 1e-5


def test_dp_fast_mh_constants_are_the_papers():
    c = dp_fast_mh_constants(0.05, 1e-5, total_bound=1000.0, max_bound=2.0, batch_cap=50.0, lam=10.0)
    eps_p = 0.05 * 1000.0 / (6 * 50.0 * 2.0)
    delta_p = 1e-5 * 1000.0 / (2 * 50.0 * 2.0)
    assert c.epsilon_prime == pytest.approx(eps_p, rel=1e-12)
    assert c.delta_prime == pytest.approx(delta_p, rel=1e-12)
    assert c.sigma1 == pytest.approx(math.sqrt(2 * math.log(1.25 / delta_p)) / eps_p, rel=1e-12)
    assert c.sigma2 == pytest.approx(math.sqrt(2 * math.log(1.25 / 1e-5)) / 0.05, rel=1e-12)
    # the penalty method's multiplier is the classic calibration too
    assert classic_noise_multiplier(0.05, 1e-5) == pytest.approx(c.sigma2, rel=1e-12)


def test_optimal_composition_agrees_with_dp_accounting_pld():
    eps, d, t, dg = 0.1, 1e-7, 50, 1e-5
    exact = mcmc.compose_iterations(eps, d, t, dg, "optimal")
    pld = mcmc.compose_iterations(eps, d, t, dg, "pld")
    adv = mcmc.compose_iterations(eps, d, t, dg, "advanced")
    # PLD is an upper bound; on this grid-aligned epsilon it meets the exact value (to bisection tolerance)
    assert exact * (1 - 1e-8) <= pld <= exact * 1.02 + 1e-3
    assert exact < adv <= t * eps
    # one iteration: (eps, d) itself
    assert mcmc.compose_iterations(eps, d, 1, d * (1 + 1e-6), "optimal") == pytest.approx(eps, rel=1e-4)
    # the defining identity, at the value returned
    assert optimal_composition_delta(eps, d, t, exact) <= dg * (1 + 1e-9)
    assert optimal_composition_delta(eps, d, t, exact * 0.99) > dg


def test_composition_is_monotone_in_the_number_of_iterations():
    steps = [1, 10, 100, 1000, 10_000]
    fast = [mcmc.compose_iterations(0.05, 1e-9, t, 1e-4, "optimal") for t in steps]
    pen = [mcmc.gaussian_chain_epsilon(50.0, t, DELTA, "pld") for t in steps]
    assert all(a < b for a, b in zip(fast, fast[1:]))
    assert all(a < b for a, b in zip(pen, pen[1:]))


def test_gaussian_chain_accountants_agree():
    sigma, t = 40.0, 2000
    exact = mcmc.gaussian_chain_epsilon(sigma, t, DELTA, "exact")
    pld = mcmc.gaussian_chain_epsilon(sigma, t, DELTA, "pld")
    rdp = mcmc.gaussian_chain_epsilon(sigma, t, DELTA, "rdp")
    assert exact <= pld <= exact * 1.01 + 1e-4
    assert rdp >= exact
    # the authors' style (advanced composition of the per-iteration classic guarantee) is far looser
    adv = mcmc.gaussian_chain_epsilon(sigma, t, 2 * t * 1e-8 + DELTA, "advanced", per_iteration_delta=1e-8)
    assert adv > 2 * exact


@pytest.mark.parametrize("accountant", ["optimal", "advanced"])
def test_calibration_round_trip_dp_fast_mh(accountant):
    per = mcmc.calibrate_chain("dp_fast_mh", 1.0, DELTA, 1000, accountant=accountant)
    assert per.noise_multiplier is None and 0 < per.epsilon < 1
    assert per.delta == pytest.approx(0.5 * DELTA / 1000)
    total = mcmc.compose_iterations(per.epsilon, per.delta, 1000, DELTA, accountant)
    assert 0.999 <= total <= 1.0


@pytest.mark.parametrize("accountant", ["pld", "exact"])
def test_calibration_round_trip_penalty(accountant):
    per = mcmc.calibrate_chain("penalty", 1.0, DELTA, 1000, accountant=accountant)
    total = mcmc.gaussian_chain_epsilon(per.noise_multiplier, 1000, DELTA, accountant)
    assert 0.99 <= total <= 1.0


def test_the_papers_per_iteration_budget_forces_a_large_total_delta():
    # per-iteration (0.05, 1e-5) over 1e4 iterations: the deltas alone force 1 - (1 - 1e-5)^1e4 ~ 0.095
    with pytest.raises(ValueError, match="must exceed"):
        mcmc.compose_iterations(0.05, 1e-5, 10_000, 0.05)
    eps = mcmc.compose_iterations(0.05, 1e-5, 10_000, 0.2)
    assert eps < advanced_composition(0.05, 1e-5, 10_000, 0.1)[0]


def _tiny_model():
    x = np.linspace(-1, 1, 20).astype(np.float32)
    return mcmc.energy_model(
        lambda th, r: 0.5 * (r - th[0]) ** 2,
        x,
        log_prior_fn=lambda th: -0.5 * jnp.sum(th**2),
        bound_constants=np.abs(x) + 2.0,
        box=(-2.0, 2.0),
    )


def test_chain_release_carries_its_privacy():
    model = _tiny_model()
    per = mcmc.calibrate_chain("dp_fast_mh", 1.0, DELTA, 3 * 30)
    kernel = mcmc.dp_fast_mh_kernel(model, mcmc.random_walk(0.1), epsilon=per.epsilon, delta=per.delta, batch_cap=10.0)
    res = mcmc.run_chain(kernel, np.zeros((3, 1)), 30, rng_key=4, total_delta=DELTA)
    p = res.privacy
    assert p.is_private and p.neighbouring == "replace_one" and p.mechanism == "dp_fast_mh"
    assert p.num_steps == 90  # every iteration of every chain is composed
    assert p.epsilon == pytest.approx(1.0, rel=1e-3) and p.epsilon <= 1.0
    assert p.delta == DELTA and p.seeded_by == "user"
    assert p.detail("epsilon_advanced_composition") > p.epsilon
    assert p.detail("per_iteration_epsilon") == per.epsilon


def test_noise_without_a_key_is_seeded_from_the_os():
    model = _tiny_model()
    kernel = mcmc.penalty_kernel(model, mcmc.random_walk(0.3), epsilon=0.5, delta=DELTA)
    # four chains each: at epsilon 0.5 one chain of 25 steps rejects every proposal about 15% of the time
    # (3 of 20 measured), so two one-chain runs were both all zeros about 2% of the time (a CI failure);
    # eight chains that all stay put happen about 0.15^8 ~ 3e-7 of the time
    a = mcmc.run_chain(kernel, np.zeros((4, 1)), 25)
    b = mcmc.run_chain(kernel, np.zeros((4, 1)), 25)
    assert a.privacy.seeded_by == "os" and b.privacy.seeded_by == "os"
    assert not np.array_equal(a.samples, b.samples)
    assert a.privacy.accountant == "pld" and a.privacy.delta == DELTA
    assert a.privacy.noise_multiplier == pytest.approx(classic_noise_multiplier(0.5, DELTA))
    c = mcmc.run_chain(kernel, np.zeros((4, 1)), 25, rng_key=9)
    d = mcmc.run_chain(kernel, np.zeros((4, 1)), 25, rng_key=9)
    assert c.privacy.seeded_by == "user" and np.array_equal(c.samples, d.samples)


def test_non_private_chains_say_so():
    model = _tiny_model()
    tuna = mcmc.tuna_mh_kernel(model, mcmc.random_walk(0.3))
    res = mcmc.run_chain(tuna, np.zeros(1), 12, rng_key=0)  # 12 steps: the program of the test below
    assert not res.privacy.is_private and math.isinf(res.privacy.epsilon)
    # the record run_chain attaches (chain_privacy) for the other two, without compiling their chains
    for kernel in (
        tuna,
        mcmc.penalty_kernel(model, mcmc.random_walk(0.3), private=False),
        mcmc.dp_fast_mh_kernel(model, mcmc.random_walk(0.3), epsilon=None, delta=None, batch_cap=10.0, private=False),
    ):
        privacy = mcmc.chain_privacy(kernel, 5)
        assert not privacy.is_private and math.isinf(privacy.epsilon) and privacy.mechanism == kernel.method


def test_step_runs_under_jit_with_traced_data():
    # what an audit needs: one program in which a canary record is switched in or out
    model = _tiny_model()
    kernel = mcmc.dp_fast_mh_kernel(model, mcmc.random_walk(0.1), epsilon=0.5, delta=1e-4, batch_cap=10.0)
    with_c = model.data.at[0].set(1.0)

    @jax.jit
    def run(key, include):
        data = jnp.where(include, with_c, model.data)
        state = mcmc.MHState(jnp.zeros(1), jnp.float32(0.0))
        return kernel.step_on_data(key, state, data, model.bound_constants)

    s1, info1 = run(jax.random.key(0), True)
    s0, info0 = run(jax.random.key(0), False)
    assert s1.position.shape == (1,) and info0.batch_size.dtype == jnp.int32


def test_make_chain_run_is_the_pure_core_of_run_chain():
    model = _tiny_model()
    kernel = mcmc.tuna_mh_kernel(model, mcmc.random_walk(0.3))
    run = jax.jit(make_chain_run(kernel, 12))
    state = kernel.init(np.zeros(1))
    key = jax.random.key(5)
    positions, info = run(jax.random.split(key, 1)[0], state, model.data, model.bound_constants)
    via_run_chain = mcmc.run_chain(kernel, np.zeros(1), 12, rng_key=key)
    assert info.accepted.any()
    assert positions.shape == (12, 1) and info.accepted.shape == (12,)
    np.testing.assert_array_equal(np.asarray(positions), via_run_chain.samples[0])


def _full_log_delta_rr(epsilon, k, eps_total):
    """The optimal-composition sum over all T + 1 terms (the definition, O(T))."""
    from scipy.special import gammaln, logsumexp

    j = np.arange(k + 1, dtype=np.float64)
    a, b = j * epsilon, eps_total + (k - j) * epsilon
    pos = a > b
    if not np.any(pos):
        return -np.inf
    j, a, b = j[pos], a[pos], b[pos]
    terms = gammaln(k + 1.0) - gammaln(j + 1.0) - gammaln(k - j + 1.0) + a + np.log(-np.expm1(b - a))
    return float(logsumexp(terms) - k * np.logaddexp(0.0, epsilon))


@pytest.mark.parametrize("k", [1, 3, 50, 20_000, 300_000])
@pytest.mark.parametrize("eps", [1e-3, 0.1, 5.0])
def test_optimal_composition_window_equals_the_full_sum(k, eps):
    """The O(sqrt(T)) window of the optimal composition gives the full sum's value (and its zeros)."""
    from dpposterior.mcmc.accounting import _optimal_log_delta_rr

    for frac in (0.0, 0.05, 0.5, 0.99, 1.1):
        full = _full_log_delta_rr(eps, k, frac * k * eps)
        fast = _optimal_log_delta_rr(eps, k, frac * k * eps)
        if np.isinf(full):
            assert fast == full
        else:
            assert fast == pytest.approx(full, rel=1e-10, abs=1e-10)


def test_calibrate_chain_optimal_handles_a_million_iterations_in_seconds():
    """Was an array of T + 1 terms in every bisection step (1e9 iterations: a hang / out of memory)."""
    import time

    t0 = time.perf_counter()
    per = mcmc.calibrate_chain("dp_fast_mh", 0.5, 1e-5, 10**6)
    assert time.perf_counter() - t0 < 30
    assert mcmc.compose_iterations(per.epsilon, per.delta, 10**6, 1e-5) <= 0.5
