"""Secure randomness: privacy noise and sampling bits from the operating system's CSPRNG.

In the default mode privacy noise comes from JAX's threefry generator with a 64-bit seed drawn from
the operating system (:func:`~dpposterior.privacy.os_seeded_key`). Threefry is a fast counter-based
generator, not a vetted cryptographic one, and the whole noise stream is a function of that seed:
whoever learns it (a memory dump, a logged key, a reused key) can regenerate and subtract the noise.

In secure mode (``secure=True`` on a mechanism) every random bit the privacy guarantee rests on
(the Gaussian or Laplace noise and the Poisson subsampling bits of DP-SGD) is read from
:func:`os.urandom` (the kernel's CSPRNG: ``getrandom(2)`` on Linux) at the moment it is used. There
is no seed and no stream to leak or reproduce; a key passed together with ``secure=True`` is refused.

The variates are computed on the host from the OS bytes:

- uniform bits: the bytes as unsigned integers;
- uniforms in the open interval (0, 1): 53 random bits, ``(k + 1/2) 2^-53`` (never 0 or 1);
- standard normals: Box-Muller in float64 on two such uniforms (both outputs used);
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
from typing import Any

import numpy as np

from .randomness import resolve_key

#: the ``seeded_by`` value of a release whose noise came from the OS CSPRNG.
SECURE = "secure"

_TWO_M53 = 2.0**-53


def _count(shape: Any) -> tuple[tuple[int, ...], int]:
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
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
    """Float64 standard normals from the OS CSPRNG by Box-Muller on 53-bit uniforms.

    ``r = sqrt(-2 log U1)``, ``(r cos 2 pi U2, r sin 2 pi U2)``; both outputs are used. The largest
    magnitude reachable is sqrt(-2 ln 2^-54) ~ 8.65 (U1 >= 2^-54): the tail beyond it (probability
    ~1e-17) is cut off.
    """
    shape, n = _count(shape)
    m = (n + 1) // 2
    u = secure_uniform((2, m))
    r = np.sqrt(-2.0 * np.log(u[0]))
    theta = (2.0 * math.pi) * u[1]
    z = np.concatenate([r * np.cos(theta), r * np.sin(theta)])[:n]
    return z.reshape(shape)


def secure_laplace(shape: Any, scale: float) -> np.ndarray:
    """Float64 Laplace(0, ``scale``) variates from the OS CSPRNG: ``scale * (E1 - E2)``, E = -log U."""
    shape, n = _count(shape)
    scale = float(scale)
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be a finite number > 0, got {scale!r}")
    u = secure_uniform((2, n))
    return (scale * (np.log(u[1]) - np.log(u[0]))).reshape(shape)


def check_secure(secure: Any) -> bool:
    """``secure`` as a bool (TypeError for anything but True/False)."""
    if not isinstance(secure, (bool, np.bool_)):
        raise TypeError(f"secure must be True or False, got {secure!r}")
    return bool(secure)


def resolve_noise_source(rng_key: Any, secure: Any) -> tuple[Any, str]:
    """``(raw key or None, seeded_by)`` for a mechanism called with ``rng_key`` and ``secure``.

    Default mode: :func:`~dpposterior.privacy.resolve_key` (OS seed, or the user's key).
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
                "a run from a key")
        return None, SECURE
    return resolve_key(rng_key)
