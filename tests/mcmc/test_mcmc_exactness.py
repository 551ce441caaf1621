"""Exactness of the samplers on a conjugate model (KS test of invariance), with power twins.

Tolerance: KS at level ALPHA = 0.01 on CHAINS independent final states (the KS critical distance
is about 1.63 / sqrt(CHAINS) = 0.07 for 500 chains); fixed seeds make every outcome deterministic.
Each exact kernel has a twin, a deliberately wrong kernel or model, that the same check rejects.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dpposterior import mcmc
from dpposterior.mcmc.kernels import MHState, _full_log_ratio, _propose

from mcmc_testlib import ALPHA, final_states, ks_pvalue

CHAINS = 500
STEPS = 150
SCALE = 0.12


def _run(conj, kernel, steps=STEPS, seed=1, chains=CHAINS):
    return final_states(kernel.step, conj.posterior_draws(chains, seed + 100), kernel.model, steps, seed)


# ---------------------------------------------------------------------------------------------
# noise off


def test_tuna_mh_samples_the_exact_posterior(conj):
    kernel = mcmc.tuna_mh_kernel(conj.model(), mcmc.random_walk(SCALE))
    draws, info = _run(conj, kernel)
    assert ks_pvalue(draws, conj.cdf) > ALPHA
    assert 0.2 < info.accepted.mean() < 0.9  # the chains moved
    assert info.batch_size.mean() < 0.6 * len(conj.x)  # a minibatch method
    assert info.bound_violations.sum() == 0


def test_tuna_mh_without_the_prior_is_rejected(conj):
    # power: the authors' code omitted the prior; with an informative prior the test catches it
    kernel = mcmc.tuna_mh_kernel(conj.model(with_prior=False), mcmc.random_walk(SCALE))
    draws, _ = _run(conj, kernel)
    assert ks_pvalue(draws, conj.cdf) < ALPHA


def test_dp_fast_mh_without_noise_samples_the_exact_posterior(conj):
    kernel = mcmc.dp_fast_mh_kernel(
        conj.model(), mcmc.random_walk(SCALE), epsilon=None, delta=None, batch_cap=50.0, lam=10.0, private=False
    )
    draws, info = _run(conj, kernel)
    assert ks_pvalue(draws, conj.cdf) > ALPHA
    assert 0.15 < info.used_full_batch.mean() < 0.85  # both branches ran often
    assert np.all(info.noise_std == 0)


def test_penalty_without_noise_samples_the_exact_posterior(conj):
    kernel = mcmc.penalty_kernel(conj.model(), mcmc.random_walk(SCALE), private=False)
    draws, info = _run(conj, kernel)
    assert ks_pvalue(draws, conj.cdf) > ALPHA
    assert np.all(info.used_full_batch)


# ---------------------------------------------------------------------------------------------
# noise on: the penalty correction keeps the chain exact


def test_penalty_with_noise_samples_the_exact_posterior(conj):
    kernel = mcmc.penalty_kernel(conj.model(), mcmc.random_walk(SCALE), noise_multiplier=0.8)
    draws, info = _run(conj, kernel, steps=300)
    assert ks_pvalue(draws, conj.cdf) > ALPHA
    assert np.median(info.noise_std) > 0.5  # the noise is not negligible
    assert info.accepted.mean() > 0.1


def _broken_penalty_without_correction(model, proposal, sigma):
    """BROKEN on purpose (test only): noise added to the log ratio without the -s^2/2 correction."""

    def step(key, state):
        k_prop, k_noise, k_u = jax.random.split(key, 3)
        p = _propose(k_prop, state, model, proposal)
        log_r, _ = _full_log_ratio(model.energy_fn, model.data, model.bound_constants, state.position, p.theta_new, p.m)
        sd = sigma * 2.0 * jnp.max(model.bound_constants) * p.m
        log_a = p.base_log_ratio + log_r + sd * jax.random.normal(k_noise, ())
        acc = p.in_box & (jnp.log(jax.random.uniform(k_u, ())) < log_a)
        return MHState(
            jnp.where(acc, p.theta_new, state.position), jnp.where(acc, p.log_prior_new, state.log_prior)
        ), acc

    return step


def test_penalty_noise_without_the_correction_is_rejected(conj):
    model = conj.model()
    mcmc.penalty_kernel(model, mcmc.random_walk(SCALE), noise_multiplier=0.8)
    step = _broken_penalty_without_correction(model, mcmc.random_walk(SCALE), 0.8)
    draws, _ = final_states(step, conj.posterior_draws(CHAINS, 101), model, 300, 1)
    assert ks_pvalue(draws, conj.cdf) < ALPHA


def _noisy_fast_mh(conj, delta, with_prior=True):
    # Per-iteration deltas this large are for the tests only: whenever the minibatch noise is on its
    # std is at least sqrt(2 ln(1.25/delta')), and a small one lets the chains move.
    return mcmc.dp_fast_mh_kernel(
        conj.model(with_prior=with_prior), mcmc.random_walk(0.05), epsilon=0.9, delta=delta, batch_cap=30.0, lam=15.0
    )


def _check_noisy_fast_mh(info):
    noisy = info.noise_std > 0
    assert noisy[~info.used_full_batch].mean() > 0.5  # the minibatch branch added noise most of the time
    assert np.all(noisy[info.used_full_batch])
    assert 0.15 < info.used_full_batch.mean() < 0.85  # both branches ran often
    assert info.accepted.mean() > 0.1


def test_dp_fast_mh_with_noise_samples_the_exact_posterior(conj):
    draws, info = _run(conj, _noisy_fast_mh(conj, 0.3), steps=300)
    _check_noisy_fast_mh(info)
    assert np.median(info.noise_std[info.noise_std > 0]) > 1.5
    assert ks_pvalue(draws, conj.cdf) > ALPHA


@pytest.mark.slow
def test_dp_fast_mh_with_noise_samples_the_exact_posterior_long(conj):
    draws, info = _run(conj, _noisy_fast_mh(conj, 0.01), steps=1500, chains=2000, seed=3)
    _check_noisy_fast_mh(info)
    assert ks_pvalue(draws, conj.cdf) > ALPHA


@pytest.mark.slow
def test_dp_fast_mh_with_noise_without_the_prior_is_rejected(conj):
    draws, _ = _run(conj, _noisy_fast_mh(conj, 0.01, with_prior=False), steps=1500, chains=2000, seed=3)
    assert ks_pvalue(draws, conj.cdf) < ALPHA


# ---------------------------------------------------------------------------------------------
# the box and the proposal ratio


def test_box_rejects_proposals_outside_and_targets_the_truncated_posterior(conj):
    lo, hi = conj.mean - 0.5 * conj.sd, conj.mean + 1.0 * conj.sd
    model = conj.model(box=(lo, hi))
    kernel = mcmc.penalty_kernel(model, mcmc.random_walk(SCALE), private=False)
    a, b = (lo - conj.mean) / conj.sd, (hi - conj.mean) / conj.sd
    truncated = stats.truncnorm(a, b, loc=conj.mean, scale=conj.sd)
    init = truncated.rvs(size=(CHAINS, 1), random_state=np.random.default_rng(5)).astype(np.float32)
    draws, info = final_states(kernel.step, init, model, STEPS, 2)
    assert np.all((draws >= np.float32(lo)) & (draws <= np.float32(hi)))
    assert not info.proposal_in_box.all()
    assert not np.any(info.accepted & ~info.proposal_in_box)
    assert ks_pvalue(draws, truncated.cdf) > ALPHA


def _independence_proposal(centre, scale, with_ratio=True):
    def sample(key, theta):
        return centre + scale * jax.random.normal(key, theta.shape)

    def log_q(v):
        return -0.5 * jnp.sum(((v - centre) / scale) ** 2)

    return mcmc.Proposal(
        sample=sample, log_ratio=(lambda th, th_new: log_q(th) - log_q(th_new)) if with_ratio else None
    )


def test_asymmetric_proposal_ratio_is_included(conj):
    prop = _independence_proposal(conj.mean + conj.sd, 1.5 * conj.sd)
    kernel = mcmc.penalty_kernel(conj.model(), prop, private=False)
    draws, info = _run(conj, kernel, steps=60)
    assert info.accepted.mean() > 0.3
    assert ks_pvalue(draws, conj.cdf) > ALPHA


def test_asymmetric_proposal_without_its_ratio_is_rejected(conj):
    prop = _independence_proposal(conj.mean + conj.sd, 1.5 * conj.sd, with_ratio=False)
    kernel = mcmc.penalty_kernel(conj.model(), prop, private=False)
    draws, _ = _run(conj, kernel, steps=60)
    assert ks_pvalue(draws, conj.cdf) < ALPHA


# ---------------------------------------------------------------------------------------------
# run_chain, diagnostics, bound violations


def test_run_chain_and_diagnostics(conj):
    kernel = mcmc.dp_fast_mh_kernel(
        conj.model(), mcmc.random_walk(SCALE), epsilon=None, delta=None, batch_cap=50.0, private=False
    )
    res = mcmc.run_chain(kernel, conj.posterior_draws(4, 7), 400, rng_key=3)
    assert res.samples.shape == (4, 400, 1)
    assert not res.privacy.is_private
    d = mcmc.diagnostics(res, burn_in=50)
    assert d.ess.shape == (1,) and d.ess[0] > 50
    assert abs(d.rhat[0] - 1.0) < 0.1
    assert 0.2 < d.nonprivate_acceptance_rate < 0.9
    assert 0 < d.nonprivate_mean_batch_size < len(conj.x)
    assert 0.15 < d.nonprivate_full_batch_fraction < 0.85
    assert d.nonprivate_bound_violations == 0
    pooled = res.samples[:, 50:, 0].ravel()
    assert abs(pooled.mean() - conj.mean) < 5 * conj.sd / np.sqrt(d.ess[0])


def test_bound_violations_are_counted(conj):
    model = conj.model(c=0.1 * conj.c)  # a wrong (too small) bound
    kernel = mcmc.penalty_kernel(model, mcmc.random_walk(SCALE), private=False)
    res = mcmc.run_chain(kernel, np.array([conj.mean]), 20, rng_key=0)
    assert res.nonprivate_info.bound_violations.sum() > 0
