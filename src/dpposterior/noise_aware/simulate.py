"""A simulator of the linear-Gaussian trace model itself (Räisä et al. 2024, eq. 10
and eq. 22).

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

from .._checks import check_positive, check_positive_int, check_sampling_rate
from ..privacy.spent import not_private
from ..releases.layout import ParamLayout
from ..releases.trace import DPVITrace


def heuristic_learning_rate(
    noise_multiplier: float, clip: float, num_steps: int, num_params: int, beta, lr_scale: float = 1.0
) -> np.ndarray:
    """The paper's learning rate sqrt(2) lr_scale beta / (sigma C sqrt(T d)) (section 9 and 13.2)."""
    return (
        math.sqrt(2.0)
        * lr_scale
        / (noise_multiplier * clip * math.sqrt(num_steps * num_params))
        * np.asarray(beta, dtype=np.float64)
    )


@partial(jax.jit, static_argnames=("num_steps",))
def simulate_trace_arrays(
    key: jax.Array, phi_star, a, noise_sd, learning_rate, phi_init, num_steps: int, sampling_rate, subsampling_sd=0.0
):
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


def simulate_trace(
    key: jax.Array,
    phi_star,
    a,
    *,
    num_steps: int = 10_000,
    sampling_rate: float = 0.1,
    noise_multiplier: float = 1.0,
    clip: float = 2.0,
    beta=None,
    learning_rate=None,
    lr_scale: float = 1.0,
    phi_init=None,
    subsampling_sd=0.0,
) -> DPVITrace:
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

    Raises:
      TypeError: ``num_steps`` not an integer (bools refused), a setting that is not a real number.
      ValueError: ``num_steps`` < 1, ``sampling_rate`` outside (0, 1], ``noise_multiplier``, ``clip``,
        ``lr_scale``, ``a``, ``beta`` or ``learning_rate`` not finite and > 0, ``phi_star``,
        ``phi_init`` or ``subsampling_sd`` not finite or of the wrong shape, a noise sd
        sigma C / beta that overflows float32, a trace that leaves float32 (diverges).
    """
    num_steps = check_positive_int(num_steps, "num_steps")
    sampling_rate = check_sampling_rate(sampling_rate, "sampling_rate")
    noise_multiplier = check_positive(noise_multiplier, "noise_multiplier")
    clip = check_positive(clip, "clip")
    lr_scale = check_positive(lr_scale, "lr_scale")
    phi_star = np.asarray(phi_star, dtype=np.float32)
    if phi_star.ndim != 1 or phi_star.shape[0] % 2:
        raise ValueError(f"phi_star must be a vector of even length d = 2n, got shape {phi_star.shape}")
    if not np.all(np.isfinite(phi_star)):
        raise ValueError("phi_star must be finite")
    d = phi_star.shape[0]
    a = _vector("a (the diagonal of A)", a, d)
    beta = np.ones(d, np.float32) if beta is None else _vector("beta", beta, d)
    if learning_rate is None:
        learning_rate = heuristic_learning_rate(noise_multiplier, clip, num_steps, d, beta, lr_scale)
    learning_rate = _vector("learning_rate", learning_rate, d)
    phi_init = np.zeros(d, np.float32) if phi_init is None else np.asarray(phi_init, np.float32)
    if phi_init.shape != (d,) or not np.all(np.isfinite(phi_init)):
        raise ValueError(f"phi_init must be a finite vector of shape ({d},) like phi_star, got shape {phi_init.shape}")
    if not np.all(noise_multiplier * clip / beta.astype(np.float64) < np.finfo(np.float32).max):
        raise ValueError(f"the noise sd noise_multiplier * clip / beta overflows float32 (beta {beta.tolist()})")
    noise_sd = noise_multiplier * clip / beta
    try:
        subsampling_sd = np.broadcast_to(np.asarray(subsampling_sd, np.float32), (d,))
    except ValueError:
        raise ValueError(
            f"subsampling_sd must be a scalar or of shape ({d},), got {np.shape(subsampling_sd)}"
        ) from None
    if not np.all(np.isfinite(subsampling_sd)) or np.any(subsampling_sd < 0):
        raise ValueError("subsampling_sd must be finite and >= 0")
    phis, grads, final = (
        np.asarray(x)
        for x in simulate_trace_arrays(
            key, phi_star, a, noise_sd, learning_rate, phi_init, num_steps, sampling_rate, subsampling_sd
        )
    )
    if not (np.all(np.isfinite(phis)) and np.all(np.isfinite(grads)) and np.all(np.isfinite(final))):
        raise ValueError(
            "the simulated trace left float32 (NaN or inf): the iteration diverges; lower the "
            f"learning rate (here {learning_rate.tolist()}; lr q a < 2 is needed)"
        )
    privacy = not_private(
        "simulated_linear_gaussian_trace", reason="simulated from the trace model (Räisä et al. 2024, eq. 22); no data"
    )
    return DPVITrace(
        phi=np.asarray(phis),
        grads=np.asarray(grads),
        final_phi=np.asarray(final),
        beta=beta,
        learning_rate=learning_rate,
        clip=float(clip),
        noise_multiplier=float(noise_multiplier),
        sampling_rate=float(sampling_rate),
        num_steps=int(num_steps),
        dataset_size=0,
        num_mc=0,
        layout=ParamLayout.flat(d // 2),
        privacy=privacy,
        model_name="simulated_trace_model",
    )


def _vector(name: str, value, d: int) -> np.ndarray:
    """``value`` as a float32 (d,) vector (a scalar is broadcast) of finite numbers > 0."""
    try:
        arr = np.asarray(value, dtype=np.float64)
        arr = np.broadcast_to(arr, (d,))
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number or a vector of shape ({d},) of numbers > 0, got {value!r}") from None
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0) or np.any(arr > np.finfo(np.float32).max):
        raise ValueError(f"{name} must be finite and > 0 (within float32), got {arr.tolist()}")
    return arr.astype(np.float32)
