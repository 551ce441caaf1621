"""Secure randomness: privacy noise and sampling bits from the operating system's CSPRNG.

In the default mode privacy noise comes from JAX's threefry generator with a 64-bit seed drawn from
the operating system (:func:`~dpposterior.privacy.randomness.os_seeded_key`). Threefry is a fast counter-based
generator, not a vetted cryptographic one, and the whole noise stream is a function of that seed:
whoever learns it (a memory dump, a logged key, a reused key) can regenerate and subtract the noise.

In secure mode (``secure=True`` on a mechanism) every random bit the privacy guarantee rests on
(the Gaussian or Laplace noise and the Poisson subsampling bits of DP-SGD) is read from
:func:`os.urandom` (the kernel's CSPRNG: ``getrandom(2)`` on Linux) at the moment it is used. There
is no seed and no stream to leak or reproduce; a key passed together with ``secure=True`` is refused.

The variates are computed on the host from the OS bytes:

- uniform bits: the bytes as unsigned integers;
- uniforms in the open interval (0, 1): 53 random bits, ``(k + 1/2) 2^-53`` (never 0 or 1);
- standard normals: Box-Muller in float64 on OS words (:mod:`dpposterior.privacy.noise`);
- Laplace(b): ``b (E1 - E2)`` with E = -log(U) standard exponentials (a difference of two
  independent exponentials is Laplace-distributed).

What secure mode does NOT fix: the noise is still a continuous distribution approximated in
floating point, so the low-order bits of a released float can reveal information about the
noise (Mironov 2012, "On significance of the least significant bits for differential privacy";
Jin et al. 2022, "Are we there yet? Timing and floating-point attacks on differential privacy
systems"). See the threat model in docs/user-guide.md.
"""

from __future__ import annotations

import math
import os
from typing import Any, Final

import numpy as np

from .._checks import check_positive
from .randomness import resolve_key
from .spent import SeededBy

#: the ``seeded_by`` value of a release whose noise came from the OS CSPRNG.
SECURE: Final = "secure"

_TWO_M53 = 2.0**-53


def _count(shape: Any) -> tuple[tuple[int, ...], int]:
    """``shape`` (an int or a sequence of ints >= 0; bools, floats and strings refused) and its size."""
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, (bool, np.bool_)):
        sizes: Any = (shape,)
    elif isinstance(shape, (tuple, list)):
        sizes = shape
    else:
        raise TypeError(f"shape must be an int or a tuple of ints, got {shape!r} of type {type(shape).__name__}")
    for s in sizes:
        if isinstance(s, (bool, np.bool_)) or not isinstance(s, (int, np.integer)):
            raise TypeError(f"shape must hold integer sizes, got {s!r} of type {type(s).__name__} in {shape!r}")
    shape = tuple(int(s) for s in sizes)
    if any(s < 0 for s in shape):
        raise ValueError(f"shape must hold non-negative sizes, got {shape}")
    return shape, math.prod(shape)


def secure_bits(shape: Any) -> np.ndarray:
    """Uniform uint32 words read from the operating system's CSPRNG (:func:`os.urandom`)."""
    shape, n = _count(shape)
    return np.frombuffer(os.urandom(4 * n), dtype=np.uint32).reshape(shape)


def secure_uniform(shape: Any) -> np.ndarray:
    """Float64 uniforms on the open interval (0, 1) from 53 OS-random bits each: ``(k + 1/2) 2^-53``."""
    shape, n = _count(shape)
    words = np.frombuffer(os.urandom(8 * n), dtype=np.uint64) >> np.uint64(11)
    return ((words.astype(np.float64) + 0.5) * _TWO_M53).reshape(shape)


def secure_normal(shape: Any) -> np.ndarray:
    """Float64 standard normals from the OS CSPRNG: :mod:`dpposterior.privacy.noise`'s Box-Muller
    transform of OS words (the same transform as keyed noise). The largest magnitude reachable is
    ``noise.MAX_ABS`` = 11.6; the tail beyond it (probability 2^-96 a normal) is cut off.
    """
    from .noise import WORDS_PER_PAIR, normals_from_words_np, num_pairs

    shape, n = _count(shape)
    return normals_from_words_np(secure_bits((WORDS_PER_PAIR, num_pairs(n))), n).reshape(shape)


def secure_laplace(shape: Any, scale: float) -> np.ndarray:
    """Float64 Laplace(0, ``scale``) variates from the OS CSPRNG: ``scale * (E1 - E2)``, E = -log U."""
    shape, n = _count(shape)
    scale = check_positive(scale, "scale")
    u = secure_uniform((2, n))
    return (scale * (np.log(u[1]) - np.log(u[0]))).reshape(shape)


def check_secure(secure: Any) -> bool:
    """``secure`` as a bool (TypeError for anything but True/False)."""
    if not isinstance(secure, (bool, np.bool_)):
        raise TypeError(f"secure must be True or False, got {secure!r}")
    return bool(secure)


def resolve_noise_source(rng_key: Any, secure: Any) -> tuple[Any, SeededBy]:
    """``(raw key or None, seeded_by)`` for a mechanism called with ``rng_key`` and ``secure``.

    Default mode: :func:`~dpposterior.privacy.randomness.resolve_key` (OS seed, or the user's key).
    Secure mode: ``(None, "secure")``; the noise must then come from :func:`secure_normal`,
    :func:`secure_laplace` or :func:`secure_bits`.

    Raises:
      TypeError: ``secure`` not a bool, or an invalid key (see ``resolve_key``).
      ValueError: a key given together with ``secure=True``.
    """
    if check_secure(secure):
        if rng_key is not None:
            raise ValueError(
                "rng_key must be None when secure=True: secure mode draws every noise and sampling bit from "
                "the operating system's CSPRNG, so there is no seed to give (a key would make the noise "
                f"reproducible by whoever knows it); got rng_key={rng_key!r}. Pass secure=False to reproduce "
                "a run from a key"
            )
        return None, SECURE
    if rng_key is None:
        warn_not_secure_once()
    return resolve_key(rng_key)


class NoiseNotSecureWarning(UserWarning):
    """Privacy noise from JAX's threefry generator (an OS seed), not from the OS CSPRNG (secure mode)."""


_WARNED_NOT_SECURE = False


def warn_not_secure_once() -> None:
    """Warns, once per process, that default-mode noise is not cryptographically generated."""
    global _WARNED_NOT_SECURE
    if _WARNED_NOT_SECURE:
        return
    _WARNED_NOT_SECURE = True
    import warnings

    warnings.warn(
        "privacy noise comes from JAX's threefry generator with a seed from the operating system: fine "
        "for experiments, but threefry is not a cryptographic generator and whoever learns the seed (a "
        "memory dump, a logged key) can subtract the noise. For a release you publish, pass secure=True "
        "(CLI: --secure), which reads every noise bit from the OS CSPRNG. Shown once per process.",
        NoiseNotSecureWarning,
        stacklevel=3,
    )


# ------------------------------------------------------------------------------------------------
# A JAX key whose every draw reads the OS CSPRNG (for mechanisms written against jax.random)


def _os_seed(seed: Any) -> Any:
    import jax.numpy as jnp

    return jnp.zeros((1,), jnp.uint32)


def _os_split(key: Any, shape: Any) -> Any:
    import jax.numpy as jnp

    return jnp.broadcast_to(key, tuple(shape) + (1,))


def _os_fold_in(key: Any, data: Any) -> Any:
    return key


_BITS_DTYPES = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


def _os_random_bits(key: Any, bit_width: int, shape: Any) -> Any:
    import jax
    from jax.experimental import io_callback

    dtype = _BITS_DTYPES[int(bit_width)]
    shape = tuple(int(s) for s in shape)

    def draw(k: np.ndarray) -> np.ndarray:
        # ``k`` carries vmap's batch axes in front of the key's own axis: one fresh draw per batch entry
        out = np.shape(k)[:-1] + shape
        n = math.prod(out)
        return np.frombuffer(os.urandom(n * np.dtype(dtype).itemsize), dtype=dtype).reshape(out)

    # the key is passed so that vmap batches the callback (one independent draw per key), and the
    # callback is effectful (io_callback), so XLA neither caches nor merges two draws
    return io_callback(draw, jax.ShapeDtypeStruct(shape, dtype), key, ordered=False)


_OS_IMPL: Any = None


def _os_impl() -> Any:
    global _OS_IMPL
    if _OS_IMPL is None:
        from jax.extend.random import define_prng_impl

        _OS_IMPL = define_prng_impl(
            key_shape=(1,),
            seed=_os_seed,
            split=_os_split,
            random_bits=_os_random_bits,
            fold_in=_os_fold_in,
            name="dpposterior_os_csprng",
        )
    return _OS_IMPL


def os_key() -> Any:
    """A JAX key whose every draw is fresh bits from the operating system's CSPRNG.

    For mechanisms written against ``jax.random`` (the DP MCMC kernels, Entropy-SGLD, DP-SGLD):
    in secure mode they are given this key instead of a threefry key. The key holds no state and
    no seed: ``jax.random.split`` and ``fold_in`` return the same placeholder, and every call that
    needs random bits (``normal``, ``uniform``, ``randint``, ``bernoulli``, ...) reads them from
    :func:`os.urandom` through ``jax.experimental.io_callback`` at the moment it runs, under
    ``jit``, ``vmap`` and ``lax.scan`` alike (one independent draw per vmapped key). The variates
    are JAX's own transforms of those bits (e.g. a float32 normal from 23 random mantissa bits).
    Draws cannot be reproduced, by design. ``jax.random.poisson`` refuses non-threefry keys: use
    :func:`dpposterior.privacy.secure.poisson` instead, which accepts both kinds.

    Each draw is a host round trip, so this suits mechanisms with a few draws per
    iteration; the DP-SGD engine's secure mode draws its noise in chunks on the host instead.
    """
    import jax

    return jax.random.key(0, impl=_os_impl())


def is_os_key(key: Any) -> bool:
    """True when ``key`` is a typed key from :func:`os_key` (or split from one)."""
    import jax

    try:
        impl = jax.random.key_impl(key)
    except (TypeError, ValueError):
        return False
    return getattr(impl, "name", None) == "dpposterior_os_csprng" or impl == _os_impl()


def poisson(key: Any, lam: Any) -> Any:
    """One Poisson(``lam``) count as int32, for threefry keys and :func:`os_key` keys alike.

    Threefry keys use ``jax.random.poisson`` (so keyed runs are unchanged). OS keys use an exact
    sampler written on uniforms only: Knuth's product of uniforms for ``lam < 10`` and Hoermann's
    transformed rejection PTRS (1993) for ``lam >= 10``; both loop until acceptance. ``lam`` is a
    traced scalar >= 0 (0 gives 0).
    """
    import jax
    import jax.numpy as jnp

    if not is_os_key(key):
        return jax.random.poisson(key, lam).astype(jnp.int32)
    lam = jnp.asarray(lam, jnp.float32)
    return jax.lax.cond(lam < 10.0, lambda: _knuth(key, lam), lambda: _ptrs(key, jnp.maximum(lam, 10.0)))


def _knuth(key: Any, lam: Any) -> Any:
    import jax
    import jax.numpy as jnp

    limit = jnp.exp(-jnp.minimum(lam, 10.0))

    def cond(c):
        return c[1] > limit

    def body(c):
        k, prod = c
        return k + 1, prod * jax.random.uniform(key, (), jnp.float32)

    # count the uniforms multiplied before the product falls to exp(-lam) or below
    first = jax.random.uniform(key, (), jnp.float32)
    k, _ = jax.lax.while_loop(cond, body, (jnp.int32(0), first))
    return k


def _ptrs(key: Any, lam: Any) -> Any:
    import jax
    import jax.numpy as jnp

    slam = jnp.sqrt(lam)
    log_lam = jnp.log(lam)
    b = 0.931 + 2.53 * slam
    a = -0.059 + 0.02483 * b
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    v_r = 0.9277 - 3.6224 / (b - 2.0)

    def cond(c):
        return ~c[1]

    def body(c):
        u = jax.random.uniform(key, (), jnp.float32) - 0.5
        v = jax.random.uniform(key, (), jnp.float32)
        us = 0.5 - jnp.abs(u)
        k = jnp.floor((2.0 * a / us + b) * u + lam + 0.43)
        quick = (us >= 0.07) & (v <= v_r)
        bad = (k < 0) | ((us < 0.013) & (v > us))
        lhs = jnp.log(v) + jnp.log(inv_alpha) - jnp.log(a / (us * us) + b)
        rhs = -lam + k * log_lam - jax.lax.lgamma(k + 1.0)
        ok = quick | (~bad & (lhs <= rhs))
        return k.astype(jnp.int32), ok

    k, _ = jax.lax.while_loop(cond, body, (jnp.int32(0), jnp.bool_(False)))
    return k
