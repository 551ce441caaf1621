"""Per-record gradient norms, as DP-SGD clips them, for the private looks at clipping.

The private choice of the clip (:mod:`dpposterior.vi.auto_clip`) and the clip checks
(:mod:`dpposterior.vi.clip_check`) count records by the L2 norm of the vector DP-SGD clips: dpvi's
beta-scaled per-record ELBO gradient, or DPVIm's per-record loc gradient. This module computes those
norms exactly; it releases nothing (the callers add the privacy noise).

The ELBO's Monte Carlo draws (DPVIm: its one shared eta) come from a fixed, public key (:data:`MC_SEED`):
they protect nothing, and fixing them makes every norm a function of the record and the public point
alone, so a count of records is a deterministic function of the data (sensitivity 1 under
add/remove-one) and the privacy noise is its only randomness.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

#: records per compiled batch of per-record gradients.
BATCH_RECORDS = 1024
#: the seed of the public key of the ELBO's Monte Carlo draws in the per-record norms (not privacy noise)
MC_SEED = 20_231


@functools.lru_cache(maxsize=16)
def norms_fn(loss: Callable, beta: tuple[float, ...]) -> Callable:
    """The compiled per-record norms of ``beta * grad loss``; cached by the loss object (dpvi's cached
    loss: one per model and settings), so repeated looks compile once."""
    grads = jax.vmap(jax.grad(loss), in_axes=(None, 0, None))
    scale = jnp.asarray(beta, jnp.float32)

    @jax.jit
    def norms(phi, batch, key):
        return jnp.sqrt(jnp.sum(jnp.square(grads(phi, batch, key) * scale), axis=1))

    return norms


def record_norms(loss: Callable, beta: Any, phi: Any, arrays: tuple[Any, ...]) -> np.ndarray:
    """The L2 norm of ``beta * grad loss(phi, record_i, key)`` for every record i, float64, in record order.

    Args:
      loss: a per-record loss ``loss(phi, record, key)`` (dpvi's ELBO loss or DPVIm's loc loss).
      beta: the elementwise scaling DP-SGD applies before clipping (ones for DPVIm), length d.
      phi: the public point, length d.
      arrays: the data arrays (records on the leading axis), already checked.

    Returns:
      The norms; a gradient that is not finite gives a norm that is not finite (DP-SGD drops it).
    """
    beta_t = tuple(float(b) for b in np.asarray(beta, np.float32).reshape(-1))
    fn = norms_fn(loss, beta_t)
    point = jnp.asarray(phi, jnp.float32)
    key = jax.random.PRNGKey(MC_SEED)
    num = int(arrays[0].shape[0])
    size = min(BATCH_RECORDS, num)
    out = []
    for start in range(0, num, size):
        batch = tuple(a[start : start + size] for a in arrays)
        short = size - int(batch[0].shape[0])
        if short:  # pad the last batch with copies of its first record: one compiled shape; padding dropped
            batch = tuple(jnp.concatenate([b, jnp.repeat(b[:1], short, axis=0)]) for b in batch)
        out.append(np.asarray(fn(point, batch, key), np.float64)[: size - short])
    return np.concatenate(out)
