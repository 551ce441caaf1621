"""Per-record gradient norms, as DP-SGD clips them, for the private looks at clipping.

The private choice of the clip (:mod:`dpposterior.vi.auto_clip`) and the clip checks
(:mod:`dpposterior.vi.clip_check`) count records by the L2 norm of the vector DP-SGD clips: dpvi's
beta-scaled per-record ELBO gradient, or DPVIm's per-record loc gradient. This module computes those
norms exactly; it releases nothing (the callers add the privacy noise).

The ELBO's Monte Carlo draws (DPVIm: its one shared eta) come from fixed, public keys (:data:`MC_SEED`):
they protect nothing, and fixing them makes every norm a function of the record and the public point
alone, so a count of records is a deterministic function of the data and the privacy noise is its only
randomness.

Why several draws. DP-SGD draws new Monte Carlo values at every step, and one step's draws are shared by
all its records, so the norms move together from step to step: the rho half of dpvi's gradient, scaled
by beta_rho, is mostly the records' mean-half gradients times the step's mean draw. A quantile of the
norms at ONE draw is then the quantile of an arbitrary step: at a draw two sds out it overstates the
typical step's norms by half, at a small one it understates them, and the clip chosen there is too
large (more noise) or too small (clipping bias) for the run. So the norms are taken at
:data:`NUM_DRAWS` public draws, and a count is the MEAN over the draws of the number of records at or
above an edge (:func:`count_at_least`): the expected number of records a step clips at that edge. Each
record adds at most 1 to that mean, so its sensitivity under add/remove-one is still 1.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

#: records per compiled batch of per-record gradients.
BATCH_RECORDS = 1024
#: the seed of the public keys of the ELBO's Monte Carlo draws in the per-record norms (not privacy noise)
MC_SEED = 20_231
#: the public draws at which every norm is taken (module docstring): draw m uses ``fold_in(MC_SEED, m)``.
NUM_DRAWS = 16


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
    """The L2 norm of ``beta * grad loss(phi, record_i, key_m)`` for every public draw m and record i.

    Args:
      loss: a per-record loss ``loss(phi, record, key)`` (dpvi's ELBO loss or DPVIm's loc loss).
      beta: the elementwise scaling DP-SGD applies before clipping (ones for DPVIm), length d.
      phi: the public point, length d.
      arrays: the data arrays (records on the leading axis), already checked.

    Returns:
      The norms, float32 of shape (:data:`NUM_DRAWS`, N), records in order along the second axis; a
      gradient that is not finite gives a norm that is not finite (DP-SGD drops it).
    """
    beta_t = tuple(float(b) for b in np.asarray(beta, np.float32).reshape(-1))
    fn = norms_fn(loss, beta_t)
    point = jnp.asarray(phi, jnp.float32)
    keys = [jax.random.fold_in(jax.random.PRNGKey(MC_SEED), m) for m in range(NUM_DRAWS)]
    num = int(arrays[0].shape[0])
    size = min(BATCH_RECORDS, num)
    out = np.empty((NUM_DRAWS, num), np.float32)
    for start in range(0, num, size):
        batch = tuple(a[start : start + size] for a in arrays)
        short = size - int(batch[0].shape[0])
        if short:  # pad the last batch with copies of its first record: one compiled shape; padding dropped
            batch = tuple(jnp.concatenate([b, jnp.repeat(b[:1], short, axis=0)]) for b in batch)
        for m, key in enumerate(keys):
            out[m, start : start + size - short] = np.asarray(fn(point, batch, key))[: size - short]
    return out


def count_at_least(norms: Any, edge: float) -> float:
    """The mean over the draws of the number of records whose norm is at least ``edge`` or not finite.

    A record whose gradient is not finite (a likelihood that is -inf, NaN or overflows for it) is dropped
    by DP-SGD (its gradient is zeroed): it is counted with the clipped ones, the extreme of clipping, so
    that the clip check warns when many records are lost that way. ``norms`` as :func:`record_norms`
    returns them (draws x records; a 1-D array is one draw). Adding or removing one record moves the
    result by at most 1: the sensitivity of the private counts built on it.
    """
    norms = np.atleast_2d(np.asarray(norms))
    return float(np.count_nonzero(~np.isfinite(norms) | (norms >= edge))) / norms.shape[0]
