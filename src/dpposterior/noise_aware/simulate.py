"""A simulator of the linear-Gaussian trace model itself (papers/na-dpvi.txt eq. 10 and eq. 22).

Given a known diagonal A = diag(a) and optimum phi*, DP-SGD on a quadratic loss produces

    g~_t = q a (phi_t - phi*) + e_t,   e_t ~ N(0, s^2 + (sigma C / beta)^2),
    phi_{t+1} = phi_t - lr g~_t,

which is eq. 22 (phi_{t+1} | phi_t ~ N(phi_t - lr q A (phi_t - phi*), lr^2 Sigma_total)) with the gradient
kept. The post-processing model is then exactly right, so the simulator is the ground truth for the
calibration tests of the solvers. It sees no data (there is none).
"""

from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from ..privacy.spent import not_private
from ..vi.layout import ParamLayout
from ..vi.trace import DPVITrace


def heuristic_learning_rate(noise_multiplier: float, clip: float, num_steps: int, num_params: int,
                            beta, lr_scale: float = 1.0) -> np.ndarray:
    """The paper's learning rate sqrt(2) lr_scale beta / (sigma C sqrt(T d)) (section 9 and 13.2)."""
    return (math.sqrt(2.0) * lr_scale / (noise_multiplier * clip * math.sqrt(num_steps * num_params))
            * np.asarray(beta, dtype=np.float64))


@partial(jax.jit, static_argnames=("num_steps",))
def simulate_trace_arrays(key: jax.Array, phi_star, a, noise_sd, learning_rate, phi_init, num_steps: int,
                          sampling_rate, subsampling_sd=0.0):
    """Pure-jnp simulation: returns (phi (T, d) before each update, grads (T, d), final phi (d,)).

    All array arguments broadcast to (d,); ``num_steps`` is static. ``vmap`` over ``key`` (and any
    other argument) simulates many replicates in one program.
    """
    phi_star = jnp.asarray(phi_star, dtype=jnp.float32)
    shape = phi_star.shape
    c = sampling_rate * jnp.broadcast_to(jnp.asarray(a, jnp.float32), shape)
    sd = jnp.sqrt(jnp.square(noise_sd) + jnp.square(subsampling_sd)) * jnp.ones(shape, jnp.float32)
    lr = jnp.broadcast_to(jnp.asarray(learning_rate, jnp.float32), shape)
    noise = jax.random.normal(key, (num_steps,) + shape, dtype=jnp.float32) * sd

    def step(phi, e):
        g = c * (phi - phi_star) + e
        return phi - lr * g, (phi, g)

    init = jnp.broadcast_to(jnp.asarray(phi_init, jnp.float32), shape)
    final, (phis, grads) = jax.lax.scan(step, init, noise)
    return phis, grads, final


def simulate_trace(key: jax.Array, phi_star, a, *, num_steps: int = 10_000, sampling_rate: float = 0.1,
                   noise_multiplier: float = 1.0, clip: float = 2.0, beta=None, learning_rate=None,
                   lr_scale: float = 1.0, phi_init=None, subsampling_sd=0.0) -> DPVITrace:
    """A :class:`DPVITrace` (flat layout) simulated from the linear-Gaussian trace model.

    Args:
      key: JAX PRNG key.
      phi_star: (d,) the optimum, d = 2n (phi = (mu, rho) as in a DPVI trace).
      a: (d,) or scalar, the diagonal of A (> 0).
      num_steps, sampling_rate, noise_multiplier, clip: T, q, sigma, C.
      beta: (d,) preconditioning (default: ones).
      learning_rate: (d,) elementwise learning rate; default the paper's heuristic times beta.
      lr_scale: lambda_c of the heuristic.
      phi_init: (d,) starting point (default zeros).
      subsampling_sd: (d,) or scalar standard deviation s of extra (subsampling) noise on g~.

    Returns:
      A DPVITrace with ``ParamLayout.flat(d // 2)`` and a "not private" privacy record (simulated).
    """
    phi_star = np.asarray(phi_star, dtype=np.float32)
    if phi_star.ndim != 1 or phi_star.shape[0] % 2:
        raise ValueError(f"phi_star must be a vector of even length d = 2n, got shape {phi_star.shape}")
    d = phi_star.shape[0]
    a = np.broadcast_to(np.asarray(a, dtype=np.float32), (d,))
    if not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise ValueError("a (the diagonal of A) must be finite and > 0")
    beta = np.ones(d, np.float32) if beta is None else np.broadcast_to(np.asarray(beta, np.float32), (d,))
    if learning_rate is None:
        learning_rate = heuristic_learning_rate(noise_multiplier, clip, num_steps, d, beta, lr_scale)
    learning_rate = np.broadcast_to(np.asarray(learning_rate, np.float32), (d,))
    phi_init = np.zeros(d, np.float32) if phi_init is None else np.asarray(phi_init, np.float32)
    noise_sd = noise_multiplier * clip / beta
    subsampling_sd = np.broadcast_to(np.asarray(subsampling_sd, np.float32), (d,))
    if not np.all(np.isfinite(subsampling_sd)) or np.any(subsampling_sd < 0):
        raise ValueError("subsampling_sd must be finite and >= 0")
    phis, grads, final = simulate_trace_arrays(key, phi_star, a, noise_sd, learning_rate, phi_init,
                                               num_steps, sampling_rate, subsampling_sd)
    privacy = not_private("simulated_linear_gaussian_trace",
                          reason="simulated from the trace model (papers/na-dpvi.txt eq. 22); no data")
    return DPVITrace(phi=np.asarray(phis), grads=np.asarray(grads), final_phi=np.asarray(final), beta=beta,
                     learning_rate=learning_rate, clip=float(clip), noise_multiplier=float(noise_multiplier),
                     sampling_rate=float(sampling_rate), num_steps=int(num_steps), dataset_size=0, num_mc=0,
                     layout=ParamLayout.flat(d // 2), privacy=privacy, model_name="simulated_trace_model")
