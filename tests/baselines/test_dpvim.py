"""DPVIm: aligned-gradient DPVI with iterate averaging and its noise-aware reading."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import digamma, polygamma

from near_noiseless import uncertified_epsilon

from dpposterior import noise_aware_posterior
from dpposterior.baselines import dpvim_cell
from dpposterior.models import beta_bernoulli
from dpposterior.privacy import calibrate_noise_multiplier, dpsgd_epsilon
from dpposterior.privacy.randomness import resolve_key
from dpposterior.privacy.noise import tail_delta
from dpposterior.releases import family
from dpposterior.vi import _dpvim as DV

N, T, Q = 2000, 2000, 0.1


@pytest.fixture(scope="module")
def bern():
    x = (np.random.default_rng(3).random(N) < 0.3).astype(np.int32)
    with uncertified_epsilon():  # epsilon 300: the DP noise is small (the record says its delta is vacuous)
        trace = DV.dpvim(
            beta_bernoulli,
            x,
            epsilon=300.0,
            delta=1e-5,
            num_steps=T,
            sampling_rate=Q,
            clip=2.0,
            natural_gradient=True,
            check_clip=False,  # the record of the DPVIm mechanism alone (the check composes: tests/vi/test_auto_clip.py)
            rng_key=11,
        )
    return x, trace


def _exact_logit(x):
    a, b = 10 + x.sum(), 10 + len(x) - x.sum()
    return digamma(a) - digamma(b), math.sqrt(polygamma(1, a) + polygamma(1, b))


def test_negligible_noise_recovers_the_conjugate_posterior(bern):
    x, trace = bern
    mean, sd = _exact_logit(x)
    post = trace.noise_aware_posterior()
    got_mean = float(post.mean_unconstrained()[0])
    got_sd = float(post.sd_unconstrained()[0])
    assert post.diagnostics["converged"]
    # the mean-field Gaussian is exact here up to the logit-Beta's skew; DP noise is negligible
    assert abs(got_mean - mean) < 0.25 * sd, (got_mean, mean, sd)
    assert 0.8 < got_sd / sd < 1.3, (got_sd, sd)
    avg = trace.averaged_posterior()
    assert abs(float(avg.mean_unconstrained()[0]) - mean) < 0.25 * sd
    assert float(avg.sd_unconstrained()[0]) <= got_sd + 1e-6
    # power: the same check against the posterior of data with 3% of the records flipped fails
    wrong_mean, _ = _exact_logit(np.where(np.arange(N) < 0.03 * N, 1 - x, x))
    assert abs(got_mean - wrong_mean) > 0.25 * sd


def test_the_baselines_warn_without_advice_that_fails_on_a_dpvim_trace(bern):
    """DPVIm's posteriors are baselines and say so; their advice names dpvi, because
    ``noise_aware_posterior`` refuses a DPVIm trace (it keeps no gradients)."""
    _, trace = bern
    for post in (trace.noise_aware_posterior(), trace.averaged_posterior(), trace.last_iterate_posterior()):
        assert post.warnings[0].startswith("DPVIm baseline"), post.warnings
        assert "fit with dpposterior.dpvi" in post.warnings[0] and "one DP-SGD iterate" not in post.warnings[0]
    with pytest.raises(TypeError):
        noise_aware_posterior(trace)


def test_privacy_record(bern):
    _, trace = bern
    p = trace.privacy
    sigma = calibrate_noise_multiplier(300.0, 1e-5, Q, T)
    assert trace.noise_multiplier == sigma == p.noise_multiplier
    assert p.epsilon == pytest.approx(dpsgd_epsilon(sigma, 1e-5, Q, T)) and p.epsilon <= 300.0
    assert (p.sampling_rate, p.num_steps, p.neighbouring) == (Q, T, "add_remove")
    # delta: the accountant's plus the noise sampler's tail term (1 + e^epsilon) n 2^-96, which at
    # epsilon near 300 makes the bound vacuous: the record says so rather than claiming 1e-5
    tail = tail_delta(T * 2 * trace.layout.num_latent, p.epsilon)
    assert p.delta == min(1.0, 1e-5 + tail) and p.detail("noise_tail_delta") == tail
    assert p.mechanism == "poisson_subsampled_gaussian" and p.seeded_by == "user"
    assert p.detail("clip") == 2.0 and p.detail("clipped") == "loc gradient only"


def test_scale_update_is_rebuilt_from_the_noisy_loc_gradient(bern):
    """rho_{t+1} = rho_t - lr (T'(rho) eta g~_mu - q T'(rho) / s), natural form and damped: the scale
    update is a function of the released loc gradient, the step's public Monte Carlo draw and public
    settings only."""
    _, trace = bern
    base = jax.random.wrap_key_data(resolve_key(11)[0])
    lr_mu, lr_rho = float(trace.learning_rate[0]), float(trace.learning_rate[-1])
    for t in range(5):
        eta = float(DV._eta(jax.random.fold_in(base, t), 1)[0])
        mu, rho, g = float(trace.mu[t, 0]), float(trace.rho[t, 0]), float(trace.loc_grads[t, 0])
        s = float(family.scale(jnp.float32(rho)))
        tp = 1.0 / (1.0 + math.exp(-rho))
        g_rho = tp * eta * g - Q * tp / s
        noise = trace.noise_multiplier * trace.clip  # the damping 1 / (1 + lr sigma C s / kappa)
        damp_mu, damp_rho = (1.0 / (1.0 + lr * noise * s / DV.NATURAL_DAMPING) for lr in (lr_mu, lr_rho))
        assert trace.rho[t + 1, 0] == pytest.approx(
            rho - lr_rho * damp_rho * 0.5 * (s / tp) ** 2 * g_rho, rel=1e-4, abs=1e-5
        )
        assert trace.mu[t + 1, 0] == pytest.approx(mu - lr_mu * damp_mu * s * s * g, rel=1e-4, abs=1e-6)


def test_convergence_window_and_averaging():
    t = np.arange(2000, dtype=np.float32)
    flat = np.random.default_rng(0).normal(0, 0.01, 2000).astype(np.float32)
    ramp = np.where(t < 700, 3.0 * (1 - t / 700), 0.0).astype(np.float32) + flat
    out = DV.trace_summary(jnp.asarray(ramp[:, None]), jnp.zeros((2000, 1)), num_windows=20)
    assert bool(out["converged"]) and int(out["start"]) == 700  # windows of 100 steps; the ramp ends at 700
    assert abs(float(out["mean_mu"][0])) < 0.005 and float(out["var_mu"][0]) == pytest.approx(1e-4, rel=0.2)
    # power: a trace that drifts throughout never converges; the last window is used
    drift = DV.trace_summary(jnp.asarray(t[:, None] / 100.0), jnp.zeros((2000, 1)), num_windows=20)
    assert not bool(drift["converged"]) and int(drift["start"]) == 1900


@pytest.mark.parametrize(
    "kw, err",
    [
        ({"epsilon": 0.0}, ValueError),
        ({"delta": 1.0}, ValueError),
        ({"learning_rate": [1.0, 2.0, 3.0]}, ValueError),
        ({"natural_gradient": 1}, TypeError),
        ({"sampling_rate": 1.5}, ValueError),
        ({"clip": -1.0}, ValueError),
    ],
)
def test_invalid_arguments_raise(kw, err):
    args = {"epsilon": 1.0, "delta": 1e-5, "num_steps": 10, "clip": 1.0}
    args.update(kw)
    with pytest.raises(err):
        DV.dpvim(beta_bernoulli, np.array([0, 1, 1], np.int32), **args)


@pytest.mark.slow
def test_cell_function_shapes_and_privacy():
    x = (np.random.default_rng(1).random((2, 300)) < 0.5).astype(np.int32)
    out = dpvim_cell("beta-bernoulli", (x,), 1.0, 0, 50, num_steps=200)
    assert out.draws.shape == (2, 50, 1) and out.posterior_sd.shape == (2, 1)
    assert np.all(np.isfinite(out.draws)) and np.all(out.posterior_sd > 0)
    assert out.privacy.epsilon <= 1.0 and out.privacy.num_steps == 200


def _normal_model(x=None):
    import numpyro
    import numpyro.distributions as dist

    mu = numpyro.sample("mu", dist.Normal(0.0, 10.0))
    sigma = numpyro.sample("sigma", dist.HalfNormal(5.0))
    with numpyro.plate("records", x.shape[0]):
        numpyro.sample("x", dist.Normal(mu, sigma), obs=x)


def test_default_natural_gradient_run_is_stable_under_strong_noise():
    """Undamped, the natural steps multiplied the noise by s^2: at epsilon 1 on 100 records, of
    these four seeds one overflowed float32 and three returned a q far from the data (mean of mu from
    -70 to 86; rho from -49 to 22, scales from 5e-22 to 22). Damped, each run ends near the data."""
    x = np.random.default_rng(0).normal(1.0, 2.0, 100).astype(np.float32)
    for seed in (0, 1, 4, 7):
        trace = DV.dpvim(_normal_model, x, epsilon=1.0, delta=1e-5, clip=2.0, natural_gradient=True, rng_key=seed)
        assert np.all(np.abs(trace.rho) < 10), (seed, trace.rho.min(), trace.rho.max())
        post = trace.noise_aware_posterior()
        mean, sd = float(post.mean_unconstrained()[0]), float(post.sd_unconstrained()[0])
        assert 0.01 < sd < 5.0 and abs(mean - x.mean()) < 3 * sd + 0.5, (seed, mean, sd)


def test_a_collapsed_scale_is_refused_not_read(bern):
    """A q whose scale collapsed (mu + s == mu in float32) stops mu too (the natural step is s^2 times
    the gradient), so every reading had width zero and printed sd 0.0: each now refuses it, naming
    the coordinate. Where mu still moves, the noise-aware reading's trace variance is a width."""
    import dataclasses

    _, trace = bern
    flat = dataclasses.replace(
        trace,
        mu=np.full_like(trace.mu, trace.mu[-1, 0]),
        rho=np.full_like(trace.rho, -40.0),
        final_phi=np.concatenate([trace.final_phi[:1], [-40.0]]).astype(np.float32),
    )
    for reading in (flat.noise_aware_posterior, flat.averaged_posterior, flat.last_iterate_posterior):
        with pytest.raises(ValueError, match="degenerate: the scale of q collapsed.*theta"):
            reading()
    moving = dataclasses.replace(flat, mu=trace.mu)
    assert float(moving.noise_aware_posterior().sd_unconstrained()[0]) > 0


def test_dpvim_summary_of_a_short_trace_says_how_many_windows_fit():
    # "the trace of 30 steps is too short for 20 windows" did not say what num_windows or T would do

    from dpposterior.vi._dpvim import trace_summary

    with pytest.raises(ValueError, match=r"30 steps .* 20 windows.*at most 15 .*num_windows=.*at least 40 steps"):
        trace_summary(jnp.zeros((30, 2)), jnp.zeros((30, 2)))
    assert int(trace_summary(jnp.zeros((30, 2)), jnp.zeros((30, 2)), num_windows=15)["start"]) == 0
