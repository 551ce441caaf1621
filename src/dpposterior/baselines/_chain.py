"""What the baselines' Gibbs samplers share: their (init, step) pair and the loop that runs a chain.

Post-processing only: nothing here reads records or a mechanism.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp


class GibbsAlgorithm(NamedTuple):
    """A Gibbs sampler with its release and settings closed over, in the shape of BlackJAX's
    ``SamplingAlgorithm``: ``init(key)`` gives the chain's start and ``step(key, state)`` one sweep,
    returning ``(state, info)``. Both are pure functions of JAX arrays (jit and vmap them freely).

    Attributes:
      init: ``init(key) -> state``.
      step: ``step(key, state) -> (state, info)``.
    """

    init: Callable[[jax.Array], Any]
    step: Callable[[jax.Array, Any], tuple[Any, Any]]


def run_sweeps(
    key: jax.Array, state: Any, sweep: Any, output: Any, *, num_warmup: int, num_draws: int, thin: int
) -> jax.Array:
    """Runs ``num_warmup + num_draws * thin`` sweeps ``state = sweep(key_i, state)`` in ONE loop (one
    compiled body) and returns ``output(state)`` after every ``thin``-th sweep past the warm-up,
    stacked (num_draws, ...). Sweep i uses ``fold_in(key, i)``."""
    total = num_warmup + num_draws * thin
    first = output(state)
    buf = jnp.zeros((num_draws,) + first.shape, first.dtype)

    def body(i, carry):
        st, out = carry
        st = sweep(jax.random.fold_in(key, i), st)
        j = i - num_warmup
        keep = (j >= 0) & (j % thin == thin - 1)
        idx = jnp.clip(j // thin, 0, num_draws - 1)
        out = out.at[idx].set(jnp.where(keep, output(st), out[idx]))
        return st, out

    _, out = jax.lax.fori_loop(0, total, body, (state, buf))
    return out


def typed_key(key: Any) -> jax.Array:
    """A typed JAX key from a typed key or a raw uint32 (2,) key."""
    key = jnp.asarray(key) if not isinstance(key, jax.Array) else key
    if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
        return key
    return jax.random.wrap_key_data(key.astype(jnp.uint32))
