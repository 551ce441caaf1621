"""Empirical privacy audit of ``dpvi``'s mechanism: the DP-SGD engine on a NumPyro model's per-record ELBO.

``dpvi`` releases the trace of DP-SGD on the per-record negative ELBO (``vi.dpvi.make_elbo_loss``); the
audit runs exactly that mechanism (``make_dpsgd_run`` with the ELBO loss, the preconditioning and the
noise multiplier calibrated by the accountant, as ``dpvi`` and the coverage engine do) with a
worst-case canary: a record so far out that its beta-scaled per-record gradient is clipped to norm
exactly C, pointing (almost exactly) along the variational mean. The dataset size in the loss is the
public N for both neighbours (as the papers treat it), so the neighbouring datasets differ only in the
canary record (add/remove adjacency, the canary replaced by an inert record). The lower bound must
stay at or below the epsilon that the accountant claims for the same (sigma, q, T, delta).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist

from dpposterior.dpsgd import make_dpsgd_run
from dpposterior.privacy import audit_many_runs, calibrate_noise_multiplier, dpsgd_epsilon
from dpposterior.vi.dpvi import make_elbo_loss
from dpposterior.vi.model_inspect import inspect_model

DELTA = 1e-5
CLIP = 1.0
N = 8
CANARY = 1e4


def normal_mean_model(x):
    mu = numpyro.sample("mu", dist.Normal(0.0, 10.0))
    with numpyro.plate("records", x.shape[0]):
        numpyro.sample("x", dist.Normal(mu, 1.0), obs=x)


def dpvi_mechanism(*, sigma: float, q: float, steps: int):
    """``run(key, include) -> score``: dpvi's DP-SGD on the ELBO, canary present or absent.

    Inert records sit at 0 (the prior mean), the canary at 1e4: its per-record gradient w.r.t. the
    variational mean is about -1e4, clipped to -C; with beta_rho = 1 and q's sd at 0.1 its component
    along rho is below 2% of C. Score: the Neyman-Pearson statistic of the worst-case canary applied
    to -g~_mu / C (the mean's released noisy gradient in units of C).
    """
    x = np.zeros((N,), np.float32)
    layout = inspect_model(normal_mean_model, (x,), {})
    loss = make_elbo_loss(normal_mean_model, layout, N, num_mc=10)
    run = make_dpsgd_run(
        loss, num_records=N, num_params=2, clip=CLIP, sampling_rate=q, num_steps=steps, loss_needs_key=True
    )
    with_c = jnp.asarray(np.r_[CANARY, np.zeros(N - 1)].astype(np.float32))
    without_c = jnp.zeros((N,), jnp.float32)
    phi0 = jnp.asarray([0.0, np.log(np.expm1(0.1))], jnp.float32)  # prior median, sd 0.1 (as dpvi)
    beta = jnp.ones(2, jnp.float32)

    def mech(key, include):
        data = jnp.where(include, with_c, without_c)
        _, grads, _ = run(key, phi0, (data,), sigma, 0.0, beta)  # learning rate 0: phi stays at phi0
        g = -grads[:, 0] / CLIP
        return jnp.sum(jnp.logaddexp(jnp.log1p(-q) if q < 1 else -jnp.inf, jnp.log(q) + (g - 0.5) / sigma**2))

    return mech


def test_canary_gradient_is_clipped_to_C_along_the_mean():
    x = np.r_[CANARY, np.zeros(N - 1)].astype(np.float32)
    layout = inspect_model(normal_mean_model, (x,), {})
    loss = make_elbo_loss(normal_mean_model, layout, N, num_mc=10)
    phi0 = jnp.asarray([0.0, np.log(np.expm1(0.1))], jnp.float32)
    g = np.asarray(jax.grad(loss)(phi0, (jnp.asarray(x[0]),), jax.random.key(0)))
    scale = min(1.0, CLIP / np.linalg.norm(g))
    clipped = g * scale
    assert np.linalg.norm(clipped) <= CLIP * (1 + 1e-6)
    assert clipped[0] < -0.98 * CLIP  # along the variational mean, pointing down
    inert = np.asarray(jax.grad(loss)(phi0, (jnp.asarray(0.0),), jax.random.key(0)))
    assert abs(inert[0]) < 0.05 * CLIP  # the inert records barely move the mean's gradient sum


def test_dpvi_audit_never_exceeds_claimed_epsilon():
    q, steps, epsilon = 0.5, 8, 2.0
    sigma = calibrate_noise_multiplier(epsilon, DELTA, q, steps)
    claimed = dpsgd_epsilon(sigma, DELTA, q, steps)
    assert claimed <= epsilon
    res = audit_many_runs(
        dpvi_mechanism(sigma=sigma, q=q, steps=steps), num_runs=3000, delta=DELTA, rng_key=21, static_include=False
    )
    print(f"dpvi audit: claimed {claimed:.3f}, lower bound {res.epsilon_lower:.3f}")
    assert res.epsilon_lower <= claimed
    assert res.epsilon_lower > 0.2  # power: the audit does see the canary
