"""DP Barker where it should be exact: the private full-batch test (b = N) with a clip that does not bind.

With b = N the variance estimate s2 is 0 (finite-population factor), so the private test is
"accept iff Delta* + N(0, 2) + V_corr > 0" with Delta* the sum of the clipped log ratios plus the
log prior ratio. When no ratio reaches the clip B = 0.99 sqrt(b) / N, Delta* is the exact log
target ratio and the test is Barker's, up to the correction's CDF error ``max_cdf_error`` (6e-4):
the acceptance probability is expit(Delta) and the chain samples the exact posterior. Two checks
of that, both able to fail (a kernel with its correction dropped, the Gaussian alone, accepts with
Phi(Delta / sqrt 2), 0.76 instead of 0.73 at Delta = 1, and its chain's sd is 6% too small):

- the acceptance probability at fixed (theta, theta') pairs over many keys, against expit(Delta);
  a pair where the clip binds accepts with expit of the CLIPPED ratio (the documented bias) and
  reports its clipped records in ``MHInfo.clipped_ratios``;
- the chain's mean and second moment on the conjugate model (known posterior), from exact
  posterior draws, against the exact values within 4.5 standard errors.

The bias when the clip binds (docs/reliability.md, "DP Barker's clip"): measured, not tested here.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from scipy import special

from dpposterior import mcmc
from dpposterior.mcmc.kernels import init_states

from mcmc_testlib import TAU

Z = 4.5  # standard errors allowed (fixed seeds; a two-sided normal tail of 7e-6 per check)


def _shift(delta):
    return mcmc.Proposal(sample=lambda key, th: th + jnp.float32(delta))


def _log_ratios(conj, theta, delta):
    """float64 per-record log ratios d_i = U_i(theta) - U_i(theta') and the log prior ratio."""
    x = conj.x.astype(np.float64)
    th_new = theta + delta
    d = 0.5 * (x - theta) ** 2 - 0.5 * (x - th_new) ** 2
    return d, -0.5 * (th_new**2 - theta**2) / TAU**2


def _acceptance(kernel, thetas, num_keys, seed):
    """Empirical acceptance rate and clipped counts of one step from each theta, over num_keys keys."""
    state = init_states(kernel.model, np.repeat(np.asarray(thetas, np.float32)[:, None], num_keys, axis=0))
    keys = jax.random.split(jax.random.key(seed), state.position.shape[0])
    _, info = jax.jit(jax.vmap(kernel.step))(keys, state)
    acc = np.asarray(info.accepted).reshape(len(thetas), num_keys).mean(axis=1)
    clipped = np.asarray(info.clipped_ratios).reshape(len(thetas), num_keys)
    return acc, clipped


def test_private_full_batch_barker_accepts_with_barkers_probability(conj):
    n = len(conj.x)
    clip = 0.99 * math.sqrt(n) / n
    num_keys = 40_000
    thetas = conj.mean + conj.sd * np.array([-3.0, -1.5, 0.0, 1.0, 2.5])
    for delta in (0.025, -0.025):  # |d_i| <= |delta| |x_i - theta - delta / 2| < B here
        kernel = mcmc.dp_barker_kernel(conj.model(), _shift(delta))
        assert kernel.config.clip == clip and kernel.config.batch_size == n
        acc, clipped = _acceptance(kernel, thetas, num_keys, 3)
        for theta, a, c in zip(thetas, acc, clipped):
            d, prior = _log_ratios(conj, theta, delta)
            assert np.max(np.abs(d)) < clip and np.all(c == 0)  # the clip does not bind
            p = special.expit(d.sum() + prior)
            tol = kernel.config.correction.max_cdf_error + Z * math.sqrt(p * (1 - p) / num_keys)
            assert abs(a - p) < tol, (theta, delta, a, p, tol)
    # a step that the clip binds: the test uses the clipped ratios (biased, as documented) and says so
    delta = 0.15
    kernel = mcmc.dp_barker_kernel(conj.model(), _shift(delta))
    theta = conj.mean - 2.0 * conj.sd
    acc, clipped = _acceptance(kernel, [theta], num_keys, 4)
    d, prior = _log_ratios(conj, theta, delta)
    assert np.all(clipped == np.sum(np.abs(d) > clip)) and clipped[0, 0] > 10
    p_clipped, p_exact = special.expit(np.clip(d, -clip, clip).sum() + prior), special.expit(d.sum() + prior)
    tol = kernel.config.correction.max_cdf_error + Z * math.sqrt(p_clipped * (1 - p_clipped) / num_keys)
    assert abs(acc[0] - p_clipped) < tol and abs(p_exact - p_clipped) > 5 * tol


def test_private_barker_chain_samples_the_exact_posterior_when_the_clip_does_not_bind(conj):
    n = len(conj.x)
    clip = 0.99 * math.sqrt(n) / n
    # a uniform walk of half-width h: |d_i| <= h |x_i - theta| + h^2 / 2 < B while |theta - mean| < 6 sd
    h = 0.95 * clip / (np.max(np.abs(conj.x - conj.mean)) + 6.0 * conj.sd + 0.1)
    prop = mcmc.Proposal(sample=lambda key, th: th + h * jax.random.uniform(key, th.shape, minval=-1.0, maxval=1.0))
    kernel = mcmc.dp_barker_kernel(conj.model(), prop)
    chains, steps = 300, 1500
    res = mcmc.run_chain(kernel, conj.posterior_draws(chains, 7), steps, rng_key=11)
    assert res.privacy.is_private
    info = res.nonprivate_info
    assert np.sum(info.clipped_ratios) == 0 and 0.3 < np.mean(info.accepted) < 0.95
    draws = res.samples[:, :, 0].astype(np.float64)
    # per-chain mean and second moment about the exact mean: unbiased at stationarity (exact start)
    m1 = draws.mean(axis=1)
    m2 = ((draws - conj.mean) ** 2).mean(axis=1)
    se1, se2 = m1.std(ddof=1) / math.sqrt(chains), m2.std(ddof=1) / math.sqrt(chains)
    assert abs(m1.mean() - conj.mean) < Z * se1, (m1.mean(), conj.mean, se1)
    assert abs(m2.mean() - conj.sd**2) < Z * se2, (math.sqrt(m2.mean()), conj.sd, se2)
    # the chain moved: its steps add up to several posterior sds (not just the exact start re-read)
    assert steps * np.mean(info.accepted) * h / 2 > 5 * conj.sd


def test_diagnostics_report_the_share_of_clipped_log_ratios(conj):
    n = len(conj.x)
    binding = mcmc.dp_barker_kernel(conj.model(), mcmc.random_walk(0.2))  # |d_i| up to ~0.2 |x_i - theta| > B
    res = mcmc.run_chain(binding, conj.posterior_draws(4, 5), 40, rng_key=2)
    frac = mcmc.diagnostics(res).nonprivate_clipped_fraction
    assert frac == np.sum(res.nonprivate_info.clipped_ratios) / (n * res.nonprivate_info.clipped_ratios.size) > 0.05
    exact = mcmc.dp_barker_kernel(conj.model(), mcmc.random_walk(0.2), private=False)  # no clip: nothing counted
    assert (
        mcmc.diagnostics(mcmc.run_chain(exact, conj.posterior_draws(4, 5), 40, rng_key=2)).nonprivate_clipped_fraction
        == 0
    )
