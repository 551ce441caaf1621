"""Empirical privacy audit of the DP Barker kernel with a worst-case canary, and positive controls.

The mechanism (``mcmc.dp_barker_kernel``, private): each step draws b of N records without
replacement, clips each log ratio d_i = U_i(theta) - U_i(theta') to [-B, B], B = 0.99 sqrt(b) / N,
and accepts iff N mean(d) + log prior ratio + N(0, C - s2) + V_corr > 0 (C = 2). Accounting
(``mcmc.chain_privacy`` -> ``mcmc.barker_epsilon``): the RDP bound of Heikkila et al. per step,
amplified by sampling b of N without replacement (Wang, Balle & Kasiviswanathan 2019, Theorem 9)
when b < N, composed over T steps, converted to (epsilon, delta). Replace-one adjacency.

The canary: N records, energy U(theta, x) = x theta (1-D), the canary record x_0 = +X on one data
set and x_0 = -X on its neighbour (replace-one), every other record 0. The proposal is
deterministic, theta' = theta + H, and X H = 1 > B, so the canary's clipped log ratio is -B or +B
(the bound is saturated) and every other record contributes 0; the prior is flat. The test then
reads Delta* = -+0.99 / sqrt(b) when the canary is in the batch and 0 when it is not, with the
same s2 on both data sets: the chain reveals the canary only through the test's noise (and the
batch sampling). The decisions do not depend on the position, so the number of accepted moves,
read back from the released chain, is the Neyman-Pearson statistic (the steps are independent
Bernoulli trials, with a higher acceptance rate on the neighbour); the score is minus that number.

Each step is one bit with the same two acceptance probabilities at every step (for b = N nearly
randomised response with log-odds 0.99 / sqrt(b): N(0, C) + V_corr is Logistic(0, 1) up to the
correction's CDF error). The T-fold product of that Bernoulli pair has an exact epsilon, the most
this canary can show (:func:`canary_exact_epsilon`): the claim must cover it at every setting, and
docs/reliability.md quotes it beside the claim, which is far larger (the RDP bound is loose for this
mechanism), and beside the audit's bound, which comes near it with 1,000,000 runs.

Honest audits assert that the lower bound never exceeds the claim. Positive controls are
deliberately BROKEN variants defined here (never in the package): the kernel's step with its noise
(Gaussian and correction) removed or shrunk to a tenth (:func:`BROKEN_barker`), or the kernel run
without its clip (``private=False``), each claiming the private kernel's accounting; the audit must
find a lower bound above that claim.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dpposterior import mcmc
from dpposterior.mcmc.chain import make_chain_run
from dpposterior.mcmc.barker import CLIP_FACTOR, sample_correction
from dpposterior.mcmc.kernels import _decide_with, _energies, _propose, _take
from dpposterior.privacy import audit_many_runs
from dpposterior.privacy.noise import add_gaussian_noise, normal_words

DELTA = 1e-5
H = 1.0  # the deterministic proposal's step
X = 1.0  # |canary|: X H = 1 exceeds every clip bound B = 0.99 sqrt(b) / N <= 0.99 / sqrt(N)


def canary_model(num_records: int, x: float = X) -> tuple[mcmc.EnergyModel, mcmc.Proposal]:
    """N records (the canary slot first, at -x, the others 0), U = x theta, flat prior, theta' = theta + H."""
    data = np.zeros(num_records, np.float32)
    data[0] = -x
    model = mcmc.energy_model(
        lambda th, r: r * th[0],
        data,
        log_prior_fn=lambda th: jnp.float32(0.0),
        bound_constants=np.full(num_records, x),
        box=(-1e4, 1e4),
    )
    return model, mcmc.Proposal(sample=lambda key, th: th + H)


def mechanism(kernel: mcmc.Kernel, steps: int, x: float = X):
    """run(key, include) -> minus the accepted moves of one chain of ``steps`` from 0 (include: canary +x)."""
    run = make_chain_run(kernel, steps)
    n = kernel.model.num_records
    with_c = jnp.zeros(n, jnp.float32).at[0].set(x)
    without_c = jnp.zeros(n, jnp.float32).at[0].set(-x)
    c = kernel.model.bound_constants

    def mech(key, include):
        data = jnp.where(include, with_c, without_c)
        positions, _ = run(key, mcmc.MHState(jnp.zeros(1), jnp.float32(0.0)), data, c)
        return -positions[-1, 0] / H

    return mech


def BROKEN_barker(kernel: mcmc.Kernel, proposal: mcmc.Proposal, noise_scale: float) -> mcmc.Kernel:
    """BROKEN: ``kernel`` (a private DP Barker kernel) with its test noise multiplied by ``noise_scale``.

    The step of ``dp_barker_kernel(private=True)`` line by line (same keys, same clip, same s2 and cap),
    except that the acceptance test reads ``Delta* + noise_scale * noise > 0`` (the Gaussian part drawn
    as the kernel draws it, :mod:`dpposterior.privacy.noise`). The kernel's config
    is kept, so ``mcmc.chain_privacy`` of the result claims the honest kernel's epsilon.
    """
    model, cfg = kernel.model, kernel.config
    n, b, clip, c_var = model.num_records, cfg.batch_size, cfg.clip, cfg.normal_variance

    def step_on_data(key, state, data, c):
        k_prop, k_batch, k_acc = jax.random.split(key, 3)
        p = _propose(k_prop, state, model, proposal)
        if b == n:
            records = data
        else:
            _, idx = jax.lax.top_k(jax.random.uniform(k_batch, (n,)), b)
            records = _take(data, idx)
        du = _energies(model.energy_fn, p.theta_new, records) - _energies(model.energy_fn, state.position, records)
        d = -du
        d = jnp.clip(jnp.where(jnp.isnan(d), 0.0, d), -clip, clip)
        delta_star = n * jnp.mean(d) + p.base_log_ratio
        k_gauss, k_corr = jax.random.split(k_acc)
        s2 = jnp.minimum((1.0 - b / n) * n * n * jnp.var(d, ddof=1) / b, CLIP_FACTOR**2)
        sd = jnp.sqrt(jnp.maximum(c_var - s2, 0.0)).astype(jnp.float32)
        noisy = add_gaussian_noise(
            delta_star + noise_scale * sample_correction(k_corr, cfg.correction),
            noise_scale * sd,
            normal_words(k_gauss, 1),
        )
        accept = p.in_box & (noisy > 0)
        return _decide_with(state, p, accept, sd, b, b == n, jnp.int32(0))

    return kernel._replace(step_on_data=step_on_data)


def claimed_epsilon(kernel: mcmc.Kernel, steps: int) -> float:
    return mcmc.chain_privacy(kernel, steps, total_delta=DELTA).epsilon


def canary_acceptance(kernel: mcmc.Kernel, noise_scale: float = 1.0) -> tuple[float, float]:
    """(P[accept] with the canary, P[accept] with its replacement) of one step of ``kernel`` (private).

    The test accepts iff Delta* + noise_scale (G + V_corr) > 0, G ~ N(0, C - s2), and G + V_corr is
    the mixture sum_k w_k N(m_k, C - s2 + h^2). In the batch (probability q = b/N) the canary gives
    Delta* = -+N B / b and s2 = (1 - q) N^2 (B^2 / b) / b; out of it Delta* = 0 (acceptance 1/2).
    """
    cfg, n = kernel.config, kernel.model.num_records
    b, clip, corr = cfg.batch_size, cfg.clip, cfg.correction
    q = b / n
    s2 = min((1.0 - q) * n * n * (clip * clip / b) / b, CLIP_FACTOR**2)
    scale = math.sqrt(cfg.normal_variance - s2 + corr.std**2)
    means, weights = np.asarray(corr.means), np.asarray(corr.weights)

    def accept(delta_star):
        return float(weights @ stats.norm.cdf((delta_star / noise_scale + means) / scale))

    shift = n * clip / b
    return (1.0 - q) * 0.5 + q * accept(-shift), (1.0 - q) * 0.5 + q * accept(shift)


def canary_exact_epsilon(p_with: float, p_without: float, steps: int, delta: float = DELTA) -> float:
    """The smallest epsilon at which Binomial(T, p_with) and Binomial(T, p_without) are (epsilon, delta)-close.

    The chain's accepted-move count is sufficient for the canary here, so this is the epsilon of the
    whole released chain of the canary experiment (both directions; bisection to 1e-9).
    """
    k = np.arange(steps + 1)
    p, r = stats.binom.pmf(k, steps, p_with), stats.binom.pmf(k, steps, p_without)

    def hockey(eps):
        return max(np.sum(np.maximum(p - math.exp(eps) * r, 0.0)), np.sum(np.maximum(r - math.exp(eps) * p, 0.0)))

    lo, hi = 0.0, 1.0
    while hockey(hi) > delta:
        hi *= 2.0
    while hi - lo > 1e-9:
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if hockey(mid) <= delta else (mid, hi)
    return hi


@pytest.mark.parametrize(
    "num_records,batch_size,steps",
    [(200, 200, 8), (50, 50, 64), (200, 50, 4), (15, 15, 16), (1000, 100, 64), (1000, 1000, 256)],
)
def test_dp_barker_claim_covers_the_canarys_exact_epsilon(num_records, batch_size, steps):
    """Analytic, no sampling: the claim is above what this canary's chain can reveal at delta 1e-5."""
    model, prop = canary_model(num_records)
    kernel = mcmc.dp_barker_kernel(model, prop, batch_size=batch_size, delta=DELTA)
    exact = canary_exact_epsilon(*canary_acceptance(kernel), steps)
    assert 0.0 < exact <= claimed_epsilon(kernel, steps)


def test_canary_exact_epsilon_exceeds_the_claim_with_a_tenth_of_the_noise():
    """Power twin: the same computation for the kernel with a tenth of its noise exceeds the claim."""
    model, prop = canary_model(200)
    kernel = mcmc.dp_barker_kernel(model, prop, delta=DELTA)
    p_with, p_without = canary_acceptance(kernel)
    assert canary_exact_epsilon(p_with, p_without, 8) == pytest.approx(0.5546, abs=1e-3)  # cf. docs
    assert canary_exact_epsilon(*canary_acceptance(kernel, noise_scale=0.1), 8) > claimed_epsilon(kernel, 8) + 2.0


# ------------------------------------------------------------------------------------------------
# honest audits: the real package kernel


@pytest.mark.parametrize(
    "num_records,batch_size,steps,min_lower",
    [
        # b = N (no subsampling), the controls' setup: this canary's exact epsilon 0.555 (claim 2.521)
        pytest.param(200, 200, 8, 0.0, id="full-batch-N200-T8", marks=pytest.mark.slow),  # 3 s: the test budget
        # b = N, more leakage a step over more steps (exact 4.811, claim 35.770): the audit sees the canary
        pytest.param(50, 50, 64, 1.0, id="full-batch-N50-T64"),
        # b < N: the claim (3.000) uses the amplification by sampling b of N without replacement (exact 0.139)
        pytest.param(200, 50, 4, 0.0, id="subsampled-N200-b50-T4"),
    ],
)
def test_dp_barker_audit_never_exceeds_claimed_epsilon(num_records, batch_size, steps, min_lower):
    model, prop = canary_model(num_records)
    kernel = mcmc.dp_barker_kernel(model, prop, batch_size=batch_size, delta=DELTA)
    claimed = claimed_epsilon(kernel, steps)
    res = audit_many_runs(mechanism(kernel, steps), num_runs=4000, delta=DELTA, rng_key=61, static_include=False)
    assert res.epsilon_lower <= claimed
    assert res.epsilon_lower >= min_lower


@pytest.mark.slow
def test_dp_barker_audit_never_exceeds_claimed_epsilon_many_runs():
    """The controls' setup with 1,000,000 runs: the bound nears this canary's exact epsilon (0.555)."""
    steps = 8
    model, prop = canary_model(200)
    kernel = mcmc.dp_barker_kernel(model, prop, delta=DELTA)
    claimed = claimed_epsilon(kernel, steps)
    res = audit_many_runs(mechanism(kernel, steps), num_runs=1_000_000, delta=DELTA, rng_key=62, static_include=False)
    assert res.epsilon_lower <= claimed
    assert res.epsilon_lower > 0.3  # power: 4,000 runs find 0.11, 1,000,000 should find about 0.5


# ------------------------------------------------------------------------------------------------
# positive controls: deliberately broken, claiming the private kernel's accounting


@pytest.mark.parametrize(
    "batch_size",
    [
        pytest.param(200, id="full-batch"),
        pytest.param(50, id="subsampled", marks=pytest.mark.slow),  # 3 s of compilation: the test budget
    ],
)
def test_broken_barker_at_full_noise_is_the_kernel(batch_size):
    """The control's step differs from the package kernel only in the noise: at scale 1 the steps agree."""
    model, prop = canary_model(200)
    honest = mcmc.dp_barker_kernel(model, prop, batch_size=batch_size, delta=DELTA)
    mirror = BROKEN_barker(honest, prop, noise_scale=1.0)
    keys = jax.random.split(jax.random.key(5), 2000)
    state = mcmc.MHState(jnp.zeros(1), jnp.float32(0.0))
    data = jnp.zeros(200, jnp.float32).at[0].set(X)  # the canary present: acceptance 0.483 (b = N), 0.491 (b = 50)
    accepted = [
        np.asarray(
            jax.jit(jax.vmap(k.step_on_data, in_axes=(0, None, None, None)))(keys, state, data, model.bound_constants)[
                1
            ].accepted
        )
        for k in (honest, mirror)
    ]
    np.testing.assert_array_equal(accepted[0], accepted[1])
    assert 0.45 < np.mean(accepted[0]) < 0.53  # both decisions occur (2000 draws: sd 0.011)


@pytest.mark.parametrize(
    "num_records,batch_size,steps,noise_scale,margin",
    [
        pytest.param(200, 200, 8, 0.0, 2.0, id="no-noise-full-batch", marks=pytest.mark.slow),  # (tenth is stricter)
        pytest.param(200, 200, 8, 0.1, 0.3, id="tenth-noise-full-batch"),
        pytest.param(200, 50, 4, 0.0, 2.0, id="no-noise-subsampled"),
    ],
)
def test_control_dp_barker_with_less_noise_is_caught(num_records, batch_size, steps, noise_scale, margin):
    model, prop = canary_model(num_records)
    honest = mcmc.dp_barker_kernel(model, prop, batch_size=batch_size, delta=DELTA)
    claimed = claimed_epsilon(honest, steps)
    broken = BROKEN_barker(honest, prop, noise_scale)  # BROKEN: less noise, claim as honest
    res = audit_many_runs(mechanism(broken, steps), num_runs=4000, delta=DELTA, rng_key=63, static_include=False)
    assert res.epsilon_lower > claimed + margin


def test_control_dp_barker_without_clip_is_caught():
    steps, x = 8, 10.0  # an unclipped log ratio of X H = 10 (the clip would cut it to 0.07)
    model, prop = canary_model(200, x)
    honest = mcmc.dp_barker_kernel(model, prop, delta=DELTA)
    claimed = claimed_epsilon(honest, steps)
    broken = mcmc.dp_barker_kernel(model, prop, private=False)  # BROKEN: no clip (exact test), claim as honest
    res = audit_many_runs(mechanism(broken, steps, x), num_runs=4000, delta=DELTA, rng_key=64, static_include=False)
    assert res.epsilon_lower > claimed + 2.0
