"""Shared pieces of the DP MH tests: a conjugate Gaussian-mean model and a KS check of a kernel's
invariance.

Model: x_i ~ N(theta, 1), prior theta ~ N(0, TAU^2), N records; exact posterior N(mean, sd^2) with
precision N + 1/TAU^2. The prior is informative (TAU = 0.15) so that a kernel that drops it is
visibly wrong. Bound: |U_i(theta) - U_i(theta')| = |theta - theta'| |2 x_i - theta - theta'| / 2
<= (|x_i| + R) |theta - theta'| on the box |theta| <= R, so c_i = |x_i| + R.

Invariance check: chains start from exact posterior draws (stationarity) and run ``steps`` steps;
the final states are independent draws from the posterior if and only if the kernel leaves it
invariant (up to the box, whose mass outside is ~1e-100 here). A KS test on them at level ALPHA,
with a fixed seed; the power twins feed a deliberately wrong kernel or model to the same check.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats

from dpposterior import mcmc
from dpposterior.mcmc.kernels import init_states

N = 100
R = 3.0
TAU = 0.15
ALPHA = 0.01


class Conjugate:
    def __init__(self, seed: int = 0, n: int = N):
        rng = np.random.default_rng(seed)
        self.x = rng.normal(1.0, 1.0, n).astype(np.float32)
        prec = n + 1.0 / TAU**2
        self.mean = float(np.sum(self.x, dtype=np.float64) / prec)
        self.sd = float(prec**-0.5)
        self.c = np.abs(self.x).astype(np.float64) + R

    @staticmethod
    def energy(theta, record):
        return 0.5 * (record - theta[0]) ** 2

    @staticmethod
    def log_prior(theta):
        return -0.5 * jnp.sum(theta**2) / TAU**2

    def model(self, *, with_prior: bool = True, box=(-R, R), c=None):
        log_prior = self.log_prior if with_prior else (lambda theta: jnp.float32(0.0))
        return mcmc.energy_model(
            self.energy, self.x, log_prior_fn=log_prior, bound_constants=self.c if c is None else c, box=box
        )

    def posterior_draws(self, num: int, seed: int) -> np.ndarray:
        rng = np.random.default_rng(seed)
        return (self.mean + self.sd * rng.standard_normal((num, 1))).astype(np.float32)

    def cdf(self, v):
        return stats.norm(self.mean, self.sd).cdf(v)


def final_states(step, init_positions: np.ndarray, model, steps: int, seed: int):
    """Runs ``step`` (a pure kernel step) from each initial position; returns (final positions, infos)."""
    state = init_states(model, init_positions)
    keys = jax.random.split(jax.random.key(seed), init_positions.shape[0])

    def chain(key, s):
        def body(carry, k):
            return step(k, carry)

        return jax.lax.scan(body, s, jax.random.split(key, steps))

    final, info = jax.jit(jax.vmap(chain))(keys, state)
    return np.asarray(final.position[:, 0]), jax.tree.map(np.asarray, info)


def ks_pvalue(draws: np.ndarray, cdf) -> float:
    return float(stats.kstest(draws, cdf).pvalue)
