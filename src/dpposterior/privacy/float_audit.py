"""Audits of the bits of privacy noise: a sampler's support, and the floating-point attack.

Two ways a floating-point noise sampler breaks a guarantee its accountant states:

- **Bounded support.** A sampler that cannot return values beyond ``extent`` standard deviations puts
  no mass where an exact Gaussian puts ``2 Q(extent)`` (Q the normal tail). A record that shifts the
  noisy value then makes outputs reachable from its data set only. The accountant's delta does not
  cover that event unless the missing mass, summed over every draw of the release, is added to delta.
  :func:`gaussian_support_audit` finds the extent by running the sampler on keys whose every random
  bit is 0 or 1 (where inversion and Box-Muller samplers reach their extremes) and compares the
  missing mass with what the release recorded (``noise_tail_delta``).
- **The floating-point attack** (Mironov 2012, "On significance of the least significant bits for
  differential privacy"). Plain float32 noise added to a float64 sum leaves ``release - sum`` on the
  float32 lattice for the true sum and, almost surely, off it for any other. :func:`float_attack`
  counts how often that test tells two neighbouring sums apart; an epsilon-DP release allows a
  success rate of at most ``e^epsilon / (1 + e^epsilon)``.

Both are positive-control audits: run on the samplers the package used before it drew its noise
through :mod:`dpposterior.privacy.noise` and snapping, they fail.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

import numpy as np
from scipy import special

__all__ = ["GaussianSupportAudit", "constant_bits_key", "float_attack", "gaussian_support_audit", "normal_tail"]


def normal_tail(x: float) -> float:
    """Q(x) = P(Z > x) for a standard normal Z, accurate far into the tail."""
    return float(0.5 * special.erfc(x / math.sqrt(2.0)))


_IMPLS: dict[int, Any] = {}


def constant_bits_key(word: int) -> Any:
    """A JAX key whose every draw returns the uint32 ``word`` in every position (for support audits).

    ``split`` and ``fold_in`` return the same key, so every key derived from it draws the same bits.
    """
    import jax
    import jax.numpy as jnp
    from jax.extend.random import define_prng_impl

    word = int(word) & 0xFFFFFFFF
    if word not in _IMPLS:
        dtypes = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}

        def bits(key: Any, bit_width: int, shape: Any) -> Any:
            dtype = dtypes[int(bit_width)]
            fill = word if bit_width <= 32 else (word << 32) | word
            return jnp.full(tuple(shape), fill & ((1 << int(bit_width)) - 1), dtype)

        _IMPLS[word] = define_prng_impl(
            key_shape=(1,),
            seed=lambda s: jnp.zeros((1,), jnp.uint32),
            split=lambda k, shape: jnp.broadcast_to(k, tuple(shape) + (1,)),
            random_bits=bits,
            fold_in=lambda k, d: k,
            name=f"dpposterior_constant_{word:08x}",
        )
    return jax.random.key(0, impl=_IMPLS[word])


#: bit patterns tried: all zeros, all ones, and the two words next to the sign bit.
EXTREME_WORDS = (0x00000000, 0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, 0x00000001, 0xFFFFFFFE)


@dataclasses.dataclass(frozen=True)
class GaussianSupportAudit:
    """What :func:`gaussian_support_audit` found.

    Attributes:
      extent: the largest magnitude (in standard deviations) the sampler returned on extreme bits.
      missing_mass: ``num_draws * 2 Q(extent)``: the exact Gaussian's mass that the sampler cannot
        produce, over every draw of the release (a lower bound on their total-variation distance).
      allowance: the delta the release set aside for it (its ``noise_tail_delta``; 0 if none).
      passed: ``missing_mass <= allowance``.
    """

    extent: float
    missing_mass: float
    allowance: float
    passed: bool


def gaussian_support_audit(
    sampler: Callable[[Any, tuple[int, ...]], Any], *, num_draws: float, allowance: float = 0.0, size: int = 64
) -> GaussianSupportAudit:
    """Checks that a standard-normal sampler's bounded support is paid for in delta.

    Args:
      sampler: ``(key, shape) -> standard normals``, e.g. ``jax.random.normal`` or
        ``dpposterior.privacy.noise.standard_normal``.
      num_draws: how many normals the release draws (e.g. steps x parameters for DP-SGD).
      allowance: the delta the release recorded for its sampler's tail (``noise_tail_delta``).
      size: normals drawn per extreme key.
    """
    extent = 0.0
    for w in EXTREME_WORDS:
        z = np.asarray(sampler(constant_bits_key(w), (size,)), np.float64)
        if not np.all(np.isfinite(z)):
            raise ValueError(f"the sampler returned a non-finite value on the constant bit pattern {w:#010x}")
        extent = max(extent, float(np.max(np.abs(z))))
    missing = float(num_draws) * 2.0 * normal_tail(extent)
    return GaussianSupportAudit(
        extent=extent, missing_mass=missing, allowance=float(allowance), passed=missing <= allowance
    )


def float_attack(
    release: Callable[[Any, int], float],
    true_value: float,
    other_value: float,
    *,
    num_runs: int,
    noise_dtype: Any = np.float32,
) -> float:
    """The success rate of Mironov's lattice test at telling ``true_value`` from ``other_value``.

    Args:
      release: ``(query value, run index) -> released float``; the run index seeds the noise.
      true_value, other_value: the query on two neighbouring data sets.
      num_runs: releases of ``true_value`` (and as many of ``other_value``) to attack.
      noise_dtype: the lattice the attacker tests ``release - value`` against.

    Returns:
      The fraction of the 2 ``num_runs`` releases whose data set the test names correctly (it guesses
      by a fair coin when both or neither difference is on the lattice). An epsilon-DP release keeps
      it at most ``e^epsilon / (1 + e^epsilon)`` up to sampling error.
    """

    def on_lattice(z: float, s: float) -> bool:
        d = z - s
        return abs(float(np.asarray(d, noise_dtype)) - d) <= 1e-12 * max(1.0, abs(z))

    correct = 0.0
    for truth, value in ((True, true_value), (False, other_value)):
        for i in range(int(num_runs)):
            z = float(release(value, 2 * i + (0 if truth else 1)))
            a, b = on_lattice(z, true_value), on_lattice(z, other_value)
            guess_true = 0.5 if a == b else float(a)
            correct += guess_true if truth else 1.0 - guess_true
    return correct / (2 * int(num_runs))
