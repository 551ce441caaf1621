"""DP Barker: the fitted correction, exactness of the non-private full-data test, the private test
within a tolerance derived from the correction's error, and its privacy accounting.

Tolerance of the approximate tests: every acceptance probability of the private test differs from
Barker's exact test by at most eps_c = ``max_cdf_error`` of the correction (when the clip does not
bind, which the model and step below guarantee for a full batch, see _no_clip_setup). Coupling the
two chains step by step, the law of the state after t steps from the posterior is within total
variation t eps_c of the posterior, so the KS distance of CHAINS final states is below
KS_CRIT + t eps_c (KS_CRIT the level-ALPHA critical value): a tolerance that could fail, and does
for the power twins.
"""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest
from scipy import stats

from dpposterior import mcmc
from dpposterior.mcmc.accounting import barker_full_batch_rdp, barker_rdp, barker_subsampled_rdp
from dpposterior.mcmc.barker import barker_correction, sample_correction
from dpposterior.mcmc.kernels import init_states

from mcmc_testlib import ALPHA, ks_pvalue

CHAINS = 500
KS_CRIT = stats.kstwo.ppf(1 - ALPHA, CHAINS)


def _ks_distance(draws, cdf):
    return float(stats.kstest(draws, cdf).statistic)


def test_correction_is_fitted_once_and_sums_to_a_logistic():
    corr = barker_correction()
    assert barker_correction() is corr  # cached: fitted once per process
    assert corr.normal_variance == 2.0 and math.isclose(sum(corr.weights), 1.0, rel_tol=1e-9)
    assert np.allclose(corr.means, -np.asarray(corr.means)[::-1])  # symmetric
    assert 1e-4 < corr.max_cdf_error < 1e-3  # measured 6.2e-4: the ill-posed deconvolution's floor
    n = 200_000
    k1, k2 = jax.random.split(jax.random.key(0))
    gauss = math.sqrt(2.0) * np.asarray(jax.random.normal(k1, (n,)), np.float64)
    v = np.asarray(sample_correction(k2, corr, (n,)), np.float64)
    crit = stats.kstwo.ppf(1 - ALPHA, n)
    assert _ks_distance(gauss + v, stats.logistic.cdf) < crit + corr.max_cdf_error
    # power: N(0, C) alone is not logistic
    assert _ks_distance(gauss, stats.logistic.cdf) > crit + corr.max_cdf_error


def test_correction_rejects_a_variance_above_the_logistic():
    with pytest.raises(ValueError, match="pi"):
        barker_correction(3.5)


def _final_states_on(kernel, init, steps, seed, data):
    """final_states with the data as an argument: one compiled program for the right and wrong data."""
    state = init_states(kernel.model, init)
    keys = jax.random.split(jax.random.key(seed), init.shape[0])

    @jax.jit
    def run(keys, state, data):
        def chain(key, s):
            def body(carry, k):
                return kernel.step_on_data(k, carry, data, kernel.model.bound_constants)

            return jax.lax.scan(body, s, jax.random.split(key, steps))

        return jax.vmap(chain)(keys, state)

    final, info = run(keys, state, data)
    return np.asarray(final.position[:, 0]), jax.tree.map(np.asarray, info)


def test_exact_barker_samples_the_exact_posterior(conj):
    kernel = mcmc.dp_barker_kernel(conj.model(), mcmc.random_walk(0.12), private=False)
    assert kernel.config.correction is None and kernel.config.batch_size == len(conj.x)
    init = conj.posterior_draws(CHAINS, 101)
    draws, info = _final_states_on(kernel, init, 150, 1, kernel.model.data)
    assert 0.2 < info.accepted.mean() < 0.7
    assert ks_pvalue(draws, conj.cdf) > ALPHA
    # power twin: the same kernel on deliberately wrong data (records shifted by -0.5) is rejected
    wrong, _ = _final_states_on(kernel, init, 150, 1, kernel.model.data - 0.5)
    assert ks_pvalue(wrong, conj.cdf) < ALPHA


def _uniform_walk(h):
    return mcmc.Proposal(sample=lambda key, th: th + h * jax.random.uniform(key, th.shape, minval=-1.0, maxval=1.0))


def _no_clip_setup(conj, batch):
    """A step small enough that no per-record log ratio reaches the private clip 0.99 sqrt(b)/N:
    |d_i| = |theta' - theta| |x_i - (theta + theta')/2| <= h (max|x| + R) on the box."""
    clip = 0.99 * math.sqrt(batch) / len(conj.x)
    h = 0.999 * clip / (np.max(np.abs(conj.x)) + 3.0)
    return _uniform_walk(h), h


@pytest.mark.parametrize("batch", [100, 50])
def test_private_barker_is_within_the_correction_tolerance(conj, batch):
    prop, h = _no_clip_setup(conj, batch)
    kernel = mcmc.dp_barker_kernel(conj.model(), prop, batch_size=batch)
    steps = 200
    init = conj.posterior_draws(CHAINS, 101)
    draws, info = _final_states_on(kernel, init, steps, 1, kernel.model.data)
    eps_c = kernel.config.correction.max_cdf_error
    assert np.all(info.batch_size == batch) and info.accepted.mean() > 0.3
    assert np.all(info.noise_std > 0.5)  # the Gaussian of the test is there
    # the chains moved across the posterior: the summed step lengths exceed its sd
    assert steps * info.accepted.mean() * h / 2 > conj.sd
    tol = KS_CRIT + steps * eps_c
    assert _ks_distance(draws, conj.cdf) < tol
    # power twin: the same kernel fed deliberately wrong data (every record shifted by -0.5, which
    # moves the posterior mean by about 4 sd) is far outside the tolerance
    wrong, _ = _final_states_on(kernel, init, steps, 1, kernel.model.data - 0.5)
    assert _ks_distance(wrong, conj.cdf) > tol


def test_barker_privacy_record(conj):
    kernel = mcmc.dp_barker_kernel(conj.model(), mcmc.random_walk(0.01), batch_size=40)
    res = mcmc.run_chain(kernel, np.array([conj.mean]), 30, rng_key=0, total_delta=1e-5)
    p = res.privacy
    assert p.is_private and p.mechanism == "dp_barker" and p.accountant == "rdp"
    assert p.neighbouring == "replace_one" and p.num_steps == 30 and p.sampling_rate == 0.4
    eps, _ = mcmc.barker_epsilon(40, len(conj.x), 30, 1e-5)
    assert p.epsilon == eps and p.detail("per_iteration_epsilon") < eps
    d = mcmc.diagnostics(res)
    assert d.nonprivate_mean_batch_size == 40 and d.nonprivate_full_batch_fraction == 0.0
    assert not mcmc.chain_privacy(
        mcmc.dp_barker_kernel(conj.model(), mcmc.random_walk(0.01), private=False), 5
    ).is_private


def test_barker_rdp_formula_and_amplification():
    b, n = 1000, 50_000
    a = 7
    expected = 5 / (2 * b) + math.log(2 * b / (b - 5 * a)) / (2 * (a - 1)) + 2 * a / (b - 5 * a)
    assert barker_rdp(a, b) == pytest.approx(expected, rel=1e-12)
    # subsampling helps at small ratios and never hurts
    assert barker_subsampled_rdp(a, b, n) < 0.1 * barker_rdp(a, b)
    assert barker_subsampled_rdp(a, b, b) == barker_rdp(a, b)
    # order 2 by hand (Wang, Balle & Kasiviswanathan 2019, Thm 9, only the j = 2 term)
    g, e2 = b / n, barker_rdp(2, b)
    assert barker_subsampled_rdp(2, b, n) == pytest.approx(
        math.log1p(g * g * min(4 * math.expm1(e2), 2 * math.exp(e2))), rel=1e-9
    )
    with pytest.raises(ValueError, match="alpha"):
        barker_rdp(b / 5, b)
    e1, _ = mcmc.barker_epsilon(b, n, 1, 1e-5)
    e100, _ = mcmc.barker_epsilon(b, n, 100, 1e-5)
    assert 0 < e1 < e100 < 100 * e1


def test_barker_batch_size_meets_the_target():
    n = 50_000
    b = mcmc.barker_batch_size(0.05, 1e-5, n)
    assert mcmc.barker_epsilon(b, n, 1, 1e-5)[0] <= 0.05
    with pytest.raises(ValueError, match="no DP Barker batch size"):
        mcmc.barker_batch_size(1e-3, 1e-5, n)
    b2 = mcmc.barker_batch_size(0.2, 1e-5, n, num_steps=10)
    assert mcmc.barker_epsilon(b2, n, 10, 1e-5)[0] <= 0.2
    if b2 < n:
        assert mcmc.barker_epsilon(b2 + 1, n, 10, 1e-5)[0] > 0.2


def test_calibrate_chain_gives_barker_a_batch_size():
    per = mcmc.calibrate_chain("dp_barker", 1.0, 1e-5, 100, num_records=50_000)
    assert per.batch_size is not None and per.noise_multiplier is None and per.accountant == "rdp"
    assert mcmc.barker_epsilon(per.batch_size, 50_000, 100, 1e-5)[0] <= 1.0
    assert per.epsilon == mcmc.barker_epsilon(per.batch_size, 50_000, 1, 1e-5)[0]
    with pytest.raises(ValueError, match="num_records"):
        mcmc.calibrate_chain("dp_barker", 1.0, 1e-5, 100)


def test_barker_argument_errors(conj):
    model = conj.model()
    with pytest.raises(ValueError, match="batch_size"):
        mcmc.dp_barker_kernel(model, mcmc.random_walk(0.1), batch_size=len(conj.x) + 1)
    with pytest.raises(ValueError, match="normal_variance = 2.0 only"):
        mcmc.dp_barker_kernel(model, mcmc.random_walk(0.1), normal_variance=1.0)
    with pytest.raises(ValueError, match=">= 15"):
        mcmc.dp_barker_kernel(model, mcmc.random_walk(0.1), batch_size=10)
    with pytest.raises(TypeError, match="private"):
        mcmc.dp_barker_kernel(model, mcmc.random_walk(0.1), private=1)


@pytest.mark.parametrize("n, t", [(200, 8), (50, 64), (50_000, 10_000), (1_000, 1)])
def test_full_batch_barker_is_accounted_as_the_gaussian_mechanism_it_is(n, t):
    """At b = N the test adds N(0, C) to a sum of log ratios clipped to B = 0.99 sqrt(N)/N (s2 = 0): a
    Gaussian mechanism of replace-one sensitivity 2B. Its epsilon must lie above the exact (PLD) epsilon of
    that mechanism (validity) and below the paper's RDP bound alone (the minimum of two valid bounds)."""
    import dp_accounting

    b = n
    assert barker_full_batch_rdp(3.0, n) == pytest.approx(3.0 * 0.99**2 / n, rel=1e-12)
    eps, order = mcmc.barker_epsilon(b, n, t, 1e-5)
    z = math.sqrt(2.0) / (2 * 0.99 * math.sqrt(n) / n)  # sd sqrt(C) over the sensitivity 2B
    pld = dp_accounting.pld.PLDAccountant()
    pld.compose(dp_accounting.GaussianDpEvent(z), t)
    exact = pld.get_epsilon(1e-5)
    orders = np.arange(2, int(math.ceil(b / 5)))
    paper = min(
        t * barker_subsampled_rdp(int(a), b, n) + math.log1p(-1 / a) - (math.log(1e-5) + math.log(a)) / (a - 1)
        for a in orders
    )
    assert exact <= eps <= paper
    assert eps <= 1.35 * exact  # RDP's conversion loses little against the exact curve here
    with pytest.raises(ValueError, match="alpha must be > 1"):
        barker_full_batch_rdp(1.0, n)


def test_subsampled_barker_keeps_the_papers_bound():
    b, n, t = 50, 200, 4
    orders = np.arange(2, 10)
    paper = min(
        t * barker_subsampled_rdp(int(a), b, n) + math.log1p(-1 / a) - (math.log(1e-5) + math.log(a)) / (a - 1)
        for a in orders
    )
    assert mcmc.barker_epsilon(b, n, t, 1e-5)[0] == pytest.approx(max(paper, 0.0), rel=1e-12)
