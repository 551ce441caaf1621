"""Fixtures for the noise-aware post-processing tests: traces simulated from the trace model itself."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dpposterior.noise_aware as na
from dpposterior.noise_aware.stats import burn_in_start
from dpposterior.noise_aware.simulate import heuristic_learning_rate, simulate_trace, simulate_trace_arrays
from dpposterior.privacy.spent import not_private
from dpposterior.releases.layout import ParamLayout
from dpposterior.releases.trace import DPVITrace

N_LATENT = 3  # phi = (mu (3), rho (3)): d = 6 coordinates per replicate
CLIP = 2.0
Q = 0.1
NUM_STEPS = 10_000
BETA = np.r_[np.ones(N_LATENT), 100.0 * np.ones(N_LATENT)]


@dataclasses.dataclass
class Replicates:
    """R simulated traces flattened into one problem of R*d independent coordinates."""

    stats: na.TraceStats  # float64 numpy, (R*d,)
    noise_sd: np.ndarray  # (R*d,)
    truth: np.ndarray  # phi* (R*d,)
    a: np.ndarray  # the true diagonal of A (R*d,)
    num_replicates: int
    num_params: int
    priors: na.TracePriors | None = None  # the priors the truth was drawn from (exact design)
    final_phi: np.ndarray | None = None
    trace_sd: np.ndarray | None = None  # sd of phi over the trace after burn-in
    traces: list | None = None  # the DPVITraces (only when asked for)
    burn_stats: na.TraceStats | None = None  # statistics of the burn-in steps (burn_in > 0)

    def stats32(self):
        return self.stats.astype(jnp.float32)

    def by_replicate(self, x):
        return jnp.reshape(jnp.asarray(x), (self.num_replicates, self.num_params))


def simulate_replicates(
    seed: int,
    num_replicates: int,
    design: str,
    burn_in: float = 0.2,
    num_steps: int = NUM_STEPS,
    keep_traces: bool = False,
    adult_sigma: float = 37.36,
) -> Replicates:
    """Simulates ``num_replicates`` DPVI-like traces (d = 6) from the linear-Gaussian trace model.

    design "realistic": what a DPVI trace looks like (papers/NOTES.md 1): sigma ~ logU[1, 10], C = 2,
      q = 0.1, T = 10^4, beta = (1, 100), the paper's learning-rate heuristic (lambda_c = 1); a of the mu
      coordinates ~ logU[50, 5000] (N times the per-record curvature), a of the rho coordinates
      ~ U[0.8, 2.5] (for a mean-field Gaussian the curvature of the negative ELBO in rho at its optimum
      is 2 sigmoid(rho)^2 / sd^2 with sd = softplus(rho): 2 for a data-dominated coordinate, 0.8 at
      sd = 1); mu* ~ N(0, 1), rho* ~ N(-1, 1); start at (0, softplus^-1(1)), away from phi*.
    design "exact": a and phi* drawn from fixed priors that are then given to the solver:
      phi* ~ N(0, 1), h ~ N(300, 100) (mu) and N(1, 1) (rho), a = softplus(h); start at 0. Use with
      burn_in = 0, so that the posterior conditions on the whole trace and is exactly calibrated.
    designs "adult_like" / "adult_like_exact": the settings of the Adult demo trace (epsilon 1: sigma
      37.36, C = 11, beta = (1, 550), the heuristic for d = 114 with lambda_c = sqrt(57)), which put
      kappa = lr q a in [1e-4, 4e-3]: a weakly identified regime (relative standard error of a 0.3 -
      1.5, as measured on the real Adult trace). "adult_like": a_mu ~ logU[50, 1500], a_rho ~ U[0.8,
      2.5], phi* and start as "realistic"; "adult_like_exact": phi* ~ N(0, 1), h ~ N(600, 300) (mu) and
      N(1.5, 0.5) (rho), start at 0, priors returned (use burn_in = 0).
    """
    rng = np.random.default_rng(seed)
    n, d = N_LATENT, 2 * N_LATENT
    r = num_replicates
    sigma = np.exp(rng.uniform(np.log(1.0), np.log(10.0), r))
    clip, beta, lr_params, lr_scale = CLIP, BETA, d, 1.0
    if design.startswith("adult_like"):
        sigma = np.full(r, adult_sigma)  # 37.36: epsilon 1 (112.45: 0.3, 307.58: 0.1)
        clip, beta, lr_params, lr_scale = 11.0, np.r_[np.ones(n), 550.0 * np.ones(n)], 114, np.sqrt(57.0)
    priors = None
    if design == "adult_like":
        a = np.concatenate(
            [np.exp(rng.uniform(np.log(50.0), np.log(1500.0), (r, n))), rng.uniform(0.8, 2.5, (r, n))], axis=1
        )
        phi_star = np.concatenate([rng.normal(0.0, 1.0, (r, n)), rng.normal(-1.0, 1.0, (r, n))], axis=1)
        phi0 = np.tile(np.r_[np.zeros(n), 0.5413 * np.ones(n)], (r, 1))
    elif design == "adult_like_exact":
        h_loc = np.r_[600.0 * np.ones(n), 1.5 * np.ones(n)]
        h_scale = np.r_[300.0 * np.ones(n), 0.5 * np.ones(n)]
        h = h_loc + h_scale * rng.normal(size=(r, d))
        a = np.logaddexp(0.0, h)
        phi_star = rng.normal(size=(r, d))
        phi0 = np.zeros((r, d))
        priors = na.TracePriors(np.zeros(r * d), np.ones(r * d), np.tile(h_loc, r), np.tile(h_scale, r), np.ones(r * d))
    elif design == "realistic":
        a = np.concatenate(
            [np.exp(rng.uniform(np.log(50.0), np.log(5000.0), (r, n))), rng.uniform(0.8, 2.5, (r, n))], axis=1
        )
        phi_star = np.concatenate([rng.normal(0.0, 1.0, (r, n)), rng.normal(-1.0, 1.0, (r, n))], axis=1)
        phi0 = np.tile(np.r_[np.zeros(n), 0.5413 * np.ones(n)], (r, 1))
    elif design == "exact":
        h_loc = np.r_[300.0 * np.ones(n), np.ones(n)]
        h_scale = np.r_[100.0 * np.ones(n), np.ones(n)]
        h = h_loc + h_scale * rng.normal(size=(r, d))
        a = np.logaddexp(0.0, h)
        phi_star = rng.normal(size=(r, d))
        phi0 = np.zeros((r, d))
        priors = na.TracePriors(np.zeros(r * d), np.ones(r * d), np.tile(h_loc, r), np.tile(h_scale, r), np.ones(r * d))
    else:
        raise ValueError(design)
    lr = np.stack([heuristic_learning_rate(s, clip, num_steps, lr_params, beta, lr_scale) for s in sigma])
    noise_sd = sigma[:, None] * clip / beta
    keys = jax.random.split(jax.random.PRNGKey(seed), r)
    sim = jax.vmap(lambda k, ps, aa, ns, ll, p0: simulate_trace_arrays(k, ps, aa, ns, ll, p0, num_steps, Q))
    phis, grads, final = sim(keys, phi_star, a, noise_sd, lr, phi0)
    phis, grads = np.asarray(phis), np.asarray(grads)
    parts = [na.sufficient_statistics(phis[i], grads[i], burn_in) for i in range(r)]
    stats = na.TraceStats(*(np.concatenate([p[k] for p in parts]) for k in range(6)))
    burn_stats = None
    start = burn_in_start(num_steps, burn_in)
    if start >= 10:
        burn = [na.sufficient_statistics(phis[i][:start], grads[i][:start], 0.0) for i in range(r)]
        burn_stats = na.TraceStats(*(np.concatenate([p[k] for p in burn]) for k in range(6)))
    traces = None
    if keep_traces:
        traces = [
            DPVITrace(
                phi=phis[i],
                grads=grads[i],
                final_phi=np.asarray(final[i]),
                beta=beta,
                learning_rate=lr[i],
                clip=clip,
                noise_multiplier=float(sigma[i]),
                sampling_rate=Q,
                num_steps=num_steps,
                dataset_size=0,
                num_mc=0,
                layout=ParamLayout.flat(n),
                privacy=not_private("simulated_trace"),
            )
            for i in range(r)
        ]
    return Replicates(
        stats=stats,
        noise_sd=noise_sd.ravel(),
        truth=phi_star.ravel(),
        a=a.ravel(),
        num_replicates=r,
        num_params=d,
        priors=priors,
        final_phi=np.asarray(final).ravel(),
        trace_sd=np.sqrt(stats.phi_ss / stats.count),
        traces=traces,
        burn_stats=burn_stats,
    )


def coverage(lo, hi, truth) -> float:
    return float(np.mean((np.asarray(truth) >= lo) & (np.asarray(truth) <= hi)))


@pytest.fixture(scope="session")
def realistic_replicates() -> Replicates:
    return simulate_replicates(seed=0, num_replicates=200, design="realistic", keep_traces=True)


@pytest.fixture(scope="session")
def exact_replicates() -> Replicates:
    return simulate_replicates(seed=1, num_replicates=200, design="exact", burn_in=0.0)


@pytest.fixture(scope="session")
def adult_like_exact() -> Replicates:
    return simulate_replicates(seed=6, num_replicates=200, design="adult_like_exact", burn_in=0.0)


@pytest.fixture(scope="session")
def adult_like() -> Replicates:
    return simulate_replicates(seed=5, num_replicates=200, design="adult_like")


@pytest.fixture(scope="session")
def adult_like_at():
    """The "adult_like" design at another noise multiplier: a factory, ``adult_like_at(sigma)``."""

    def make(sigma: float) -> Replicates:
        return simulate_replicates(seed=5, num_replicates=200, design="adult_like", adult_sigma=sigma)

    return make


@pytest.fixture(scope="session")
def small_trace():
    """One DPVI-like trace (d = 6) in the well-identified regime, where all three solvers should agree."""
    phi_star = np.array([0.3, -1.0, 2.0, -2.0, -1.5, -3.0], np.float32)
    a = np.array([300.0, 1000.0, 3000.0, 1.0, 3.0, 2.0], np.float32)
    return simulate_trace(
        jax.random.PRNGKey(0),
        phi_star,
        a,
        noise_multiplier=3.0,
        clip=CLIP,
        beta=BETA,
        num_steps=NUM_STEPS,
        phi_init=np.r_[np.zeros(3), 0.5 * np.ones(3)],
    )
