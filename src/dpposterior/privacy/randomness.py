"""Where privacy noise gets its randomness.

Privacy noise with no key given is seeded from the operating system (``secrets``), and the seed is
never stored in or printed with a release. A user-given key is allowed for tests and reproduction;
the release then records ``seeded_by="user"``: anyone who knows that key can subtract the noise.
"""

from __future__ import annotations

import secrets
from typing import Any

import jax
import numpy as np


def os_seeded_key() -> jax.Array:
    """A fresh JAX PRNG key whose 64-bit seed comes from the operating system's CSPRNG."""
    seed = secrets.randbits(64)
    # jax.random.key takes an int64-range seed; split the 64 bits into two uint32 words.
    words = np.array([seed >> 32, seed & 0xFFFFFFFF], dtype=np.uint32)
    return jax.random.wrap_key_data(words, impl="threefry2x32")


def resolve_key(rng_key: Any) -> tuple[jax.Array, str]:
    """Returns (raw uint32 key, seeded_by) for a user key or, when ``rng_key is None``, an OS seed.

    Args:
      rng_key: None (seed from the OS), a ``jax.random.PRNGKey``/``jax.random.key``, or an int seed.

    Raises:
      TypeError: if ``rng_key`` is none of these.
      ValueError: an int seed outside [0, 2**32) (JAX would keep only its low 32 bits, and a negative
        seed gives the key of a seed in that range); an array of keys, or a key of another
        implementation than JAX's default (e.g. ``impl="rbg"``), which the callers cannot use.
    """
    if rng_key is None:
        return jax.random.key_data(os_seeded_key()), "os"
    if isinstance(rng_key, bool):
        raise TypeError(f"rng_key must be None, an int seed or a JAX PRNG key, got {rng_key!r}")
    if isinstance(rng_key, (int, np.integer)):
        seed = int(rng_key)
        if not 0 <= seed < 2**32:
            # JAX keeps only 32 bits of an int seed (x64 off): larger seeds would silently share keys, and
            # so would negative ones (-1 gives the key of 2**32 - 1).
            raise ValueError(f"rng_key as an int seed must lie in [0, 2**32), got {seed}; pass a JAX key "
                             "(jax.random.key) for other seeds")
        return jax.random.PRNGKey(seed), "user"
    if isinstance(rng_key, jax.Array) or isinstance(rng_key, np.ndarray):
        if jax.dtypes.issubdtype(rng_key.dtype, jax.dtypes.prng_key):
            # the callers wrap the key data back into a key of the default implementation: one key of that kind
            if rng_key.shape != ():
                raise ValueError(f"rng_key must be a single JAX key, got an array of keys of shape {rng_key.shape} "
                                 "(one run takes one key: pass keys[i])")
            impl, default = str(jax.random.key_impl(rng_key)), str(jax.random.key_impl(jax.random.key(0)))
            if impl != default:
                raise ValueError(f"rng_key must be a key of JAX's default implementation {default!r} "
                                 f"(jax.random.key(seed)), got a key of implementation {impl!r}")
            return jax.random.key_data(rng_key), "user"
        if rng_key.shape == (2,) and rng_key.dtype == np.uint32:
            return jax.numpy.asarray(rng_key), "user"
        raise TypeError("rng_key as a raw key (jax.random.PRNGKey) must be a uint32 array of shape (2,), got dtype "
                        f"{rng_key.dtype} and shape {rng_key.shape}; an int seed or jax.random.key(seed) also works")
    raise TypeError(
        "rng_key must be None (seed from the operating system), an int seed, or a JAX PRNG key "
        f"(jax.random.PRNGKey / jax.random.key), got {type(rng_key).__name__}"
    )
