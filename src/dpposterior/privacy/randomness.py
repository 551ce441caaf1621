"""Where privacy noise gets its randomness.

Privacy noise with no key given is seeded from the operating system (``secrets``), and the seed is
never stored in or printed with a release. A user-given key is allowed for tests and reproduction;
the release then records ``seeded_by="user"``: anyone who knows that key can subtract the noise.
"""

from __future__ import annotations

import secrets
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .spent import SeededBy


def os_seeded_key() -> jax.Array:
    """A fresh JAX PRNG key whose 64-bit seed comes from the operating system's CSPRNG."""
    seed = secrets.randbits(64)
    # jax.random.key takes an int64-range seed; split the 64 bits into two uint32 words.
    words = np.array([seed >> 32, seed & 0xFFFFFFFF], dtype=np.uint32)
    return jax.random.wrap_key_data(jnp.asarray(words), impl="threefry2x32")


_FORMS = "a JAX PRNG key (jax.random.key / jax.random.PRNGKey) or an int seed"


def user_key(key: Any, name: str = "rng_key", forms: str = _FORMS) -> jax.Array | np.ndarray:
    """A user-given key checked for its form: an int seed in [0, 2**32) (as ``jax.random.PRNGKey``), a single
    typed JAX key (returned as it is), or a raw uint32 key of shape (2,) (returned as it is: a NumPy array
    stays one); anything else is an error naming ``name`` (and the accepted ``forms``, in words). The one
    check behind :func:`resolve_key` and the posteriors' ``key`` arguments.

    Raises:
      TypeError: a bool, a raw key of another shape or dtype, or none of these forms.
      ValueError: an int seed outside [0, 2**32) (JAX would keep only its low 32 bits, and a negative
        seed gives the key of a seed in that range: another seed's draws, silently); an array of keys.
    """
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
        seed = int(key)
        if not 0 <= seed < 2**32:
            raise ValueError(
                f"{name} as an int seed must lie in [0, 2**32), got {seed} (JAX keeps only its low 32 "
                "bits, so it would give the key of another seed); pass a JAX key (jax.random.key) for "
                "other seeds"
            )
        return jax.random.PRNGKey(seed)
    if isinstance(key, (jax.Array, np.ndarray)):
        if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
            if key.shape != ():
                raise ValueError(
                    f"{name} must be a single JAX key, got an array of keys of shape {key.shape} (one "
                    "call takes one key: pass keys[i])"
                )
            return key
        if key.shape == (2,) and key.dtype == np.uint32:
            return key
        raise TypeError(
            f"{name} as a raw key (jax.random.PRNGKey) must be a uint32 array of shape (2,), got dtype "
            f"{key.dtype} and shape {key.shape}; an int seed or jax.random.key(seed) also works"
        )
    raise TypeError(f"{name} must be {forms}, got {key!r} of type {type(key).__name__}")


def resolve_key(rng_key: Any) -> tuple[jax.Array, SeededBy]:
    """Returns (raw uint32 key, seeded_by) for a user key or, when ``rng_key is None``, an OS seed.

    Args:
      rng_key: None (seed from the OS), a ``jax.random.PRNGKey``/``jax.random.key``, or an int seed.

    Raises:
      TypeError: if ``rng_key`` is none of these (:func:`user_key`).
      ValueError: an int seed outside [0, 2**32) or an array of keys (:func:`user_key`); a key of another
        implementation than JAX's default (e.g. ``impl="rbg"``), which the callers cannot use.
    """
    if rng_key is None:
        return jax.random.key_data(os_seeded_key()), "os"
    key = user_key(
        rng_key,
        "rng_key",
        "None (seed from the operating system), an int seed, or a JAX PRNG key (jax.random.PRNGKey / jax.random.key)",
    )
    if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
        # the callers wrap the key data back into a key of the default implementation: one key of that kind
        impl, default = str(jax.random.key_impl(key)), str(jax.random.key_impl(jax.random.key(0)))
        if impl != default:
            raise ValueError(
                f"rng_key must be a key of JAX's default implementation {default!r} "
                f"(jax.random.key(seed)), got a key of implementation {impl!r}"
            )
        return jax.random.key_data(key), "user"
    return jax.numpy.asarray(key), "user"
