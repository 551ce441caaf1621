"""Gaussian privacy noise whose support leaves no gap a record can use.

Why a sampler of our own. ``jax.random.normal`` in float32 is ``sqrt(2) erfinv(u)`` on a grid of
2^-23 uniforms: its values lie in [-5.42, 5.22] and the extreme values carry mass 2^-23. A record
that shifts a noisy sum by ``a > 0`` makes values above ``5.22 sigma`` reachable for its data set
and unreachable for the neighbour; that event has probability of order 2^-23 per coordinate and
step, and none of it is in the accounted delta. Adding float32 noise to a float32 sum also leaves
the sum's low-order bits in the release (Mironov 2012, "On significance of the least significant
bits for differential privacy").

What this module draws instead (the same transform for keyed and secure noise):

- Box-Muller in float64 on two uniforms built from five uint32 words a pair of normals:
  ``u1 = w0 2^-32 + w1 2^-64 + (w2 + 1/2) 2^-96`` in (0, 1] (never 0) and
  ``u2 = (w3 2^21 + floor(w4 / 2^11) + 1/2) 2^-53`` in (0, 1);
  ``r = sqrt(-2 ln u1)``, ``(r cos 2 pi u2, r sin 2 pi u2)``.
- The largest magnitude reachable is ``sqrt(2 ln 2^97) = 11.6`` (u1 = 2^-97). Under the coupling
  that maps a continuous uniform to the midpoint of its 2^-96 bucket, the draws differ from exact
  Box-Muller normals in the tail only when the continuous ``U1 < 2^-96``: probability at most
  ``TAIL_PROBABILITY = 2^-96`` a normal (a pair shares one radius, so per normal over-counts).
- The noise is added to the exact sum in float64 and the result rounded once to float32: the noise
  grid (2^-53 relative) is 2^29 times finer than the float32 release grid, so the release's low
  bits come from the noise, not from the sum.

What is left over, and where it goes. If every draw of a mechanism were exact, it would be
(epsilon, delta)-DP; the draws differ from exact ones with total probability at most
``eta = n TAIL_PROBABILITY`` over ``n`` normals, so the mechanism as run is
``(epsilon, delta + (1 + e^epsilon) eta)``-DP (the standard total-variation argument).
:func:`tail_delta` gives that term; the mechanisms add it to the delta they record (it is below
1e-17 for any run of fewer than 10^12 normals at epsilon <= 10). It grows as e^epsilon: the
mechanisms that take a budget (``dpvi``, ``dpvim``, ``gaussian_mechanism``) refuse one whose term
would exceed :data:`MAX_TAIL_SHARE` of its delta (:func:`check_noise_tail`) and are calibrated at
delta less the term (:func:`mechanism_delta`), so that a release never states a delta above the one
asked for; a record made from a given noise multiplier states its delta with the term, up to 1 (a
vacuous bound at an epsilon in the hundreds, which the record then says).

Not claimed: a proof that rounding a float64 Box-Muller draw to the float32 release grid leaves
every output's probability ratio within the continuous mechanism's; the grid argument above is why
the low bits carry no usable signal. Pure-epsilon Laplace releases use the snapping mechanism
(:mod:`dpposterior.privacy.snapping`), which has such a proof.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "MAX_ABS",
    "TAIL_PROBABILITY",
    "MAX_TAIL_SHARE",
    "WORDS_PER_PAIR",
    "add_gaussian_noise",
    "check_noise_tail",
    "mechanism_delta",
    "float32_at_least",
    "normal_words",
    "normals_from_words",
    "normals_from_words_np",
    "standard_normal",
    "tail_delta",
    "with_noise_tail",
]

#: uint32 words consumed by one pair of normals (three for u1, two for u2).
WORDS_PER_PAIR = 5
#: the probability, per normal, that a draw differs from an exact normal's tail (see module docstring).
TAIL_PROBABILITY = 2.0**-96
#: the largest magnitude a draw can take: sqrt(-2 ln 2^-97).
MAX_ABS = math.sqrt(2.0 * 97.0 * math.log(2.0))


def num_pairs(n: int) -> int:
    """Pairs of normals needed for ``n`` normals."""
    return (int(n) + 1) // 2


def tail_delta(num_normals: Any, epsilon: float) -> float:
    """The delta to add for ``num_normals`` draws in a mechanism accounted at ``epsilon``.

    ``(1 + e^epsilon) * num_normals * TAIL_PROBABILITY``; 0 for no draws, inf for epsilon = inf.
    """
    n = float(num_normals)
    if n <= 0:
        return 0.0
    eps = float(epsilon)
    if not math.isfinite(eps) or eps > 700:
        return math.inf
    return (1.0 + math.exp(eps)) * n * TAIL_PROBABILITY


#: the largest share of a mechanism's delta that the sampler's tail term may add to it.
MAX_TAIL_SHARE = 0.01


def check_noise_tail(epsilon: float, delta: float, num_normals: Any, where: str) -> None:
    """Refuses a mechanism whose noise-tail term would add more than :data:`MAX_TAIL_SHARE` of ``delta``.

    Called before any noise is drawn by the mechanisms that take a budget (``dpvi``, ``dpvim``), so that
    no release states a delta far above the one asked for.

    Raises:
      ValueError: ``tail_delta(num_normals, epsilon) > MAX_TAIL_SHARE * delta`` (``delta > 0``), naming
        the largest epsilon the sampler certifies for that many normals at that delta.
    """
    delta, n = float(delta), float(num_normals)
    if delta <= 0 or n <= 0:
        return
    tail = tail_delta(n, epsilon)
    if tail <= MAX_TAIL_SHARE * delta:
        return
    ratio = MAX_TAIL_SHARE * delta / (n * TAIL_PROBABILITY)
    largest = f"{math.log(ratio - 1.0):.1f}" if ratio > 2.0 else "none"
    raise ValueError(
        f"{where}: epsilon={float(epsilon):g} at delta={delta:g} is beyond what the noise sampler certifies for "
        f"{int(n)} normals: its float tail adds (1 + e^epsilon) * {int(n)} * 2^-96 = {tail:.3g} to delta, more "
        f"than {MAX_TAIL_SHARE:.0%} of it (dpposterior.privacy.noise); the largest epsilon it certifies here "
        f"is {largest}: ask for a smaller epsilon or a larger delta"
    )


def mechanism_delta(epsilon: float, delta: float, num_normals: Any, where: str) -> float:
    """The delta a budgeted mechanism is calibrated at, so that its record states no more than ``delta``.

    A mechanism that takes a budget (epsilon, delta) and draws ``num_normals`` normals records its
    delta plus :func:`tail_delta` (:func:`with_noise_tail`). It is therefore calibrated at ``delta``
    less that term, after :func:`check_noise_tail` has refused a term above :data:`MAX_TAIL_SHARE` of
    ``delta``. The returned value ``d`` satisfies ``d + tail_delta(num_normals, epsilon) <= delta`` in
    floating point; where :data:`MAX_TAIL_SHARE` has been lifted and the term is at least ``delta``, it
    returns ``delta``, and the record states a vacuous delta. ``epsilon`` is the budget's epsilon, at
    least the epsilon the record will state, so the term the record adds is at most the one set aside.

    Raises:
      ValueError: as :func:`check_noise_tail`.
    """
    check_noise_tail(epsilon, delta, num_normals, where)
    delta = float(delta)
    tail = tail_delta(num_normals, epsilon)
    if tail == 0.0 or not tail < delta:  # the latter only where MAX_TAIL_SHARE is lifted: a vacuous record
        return delta
    d = delta - tail
    while d + tail > delta:  # rounding: the record's sum must not exceed the budget
        d = math.nextafter(d, 0.0)
    return d


def with_noise_tail(privacy: Any, num_normals: Any) -> Any:
    """``privacy`` (a :class:`~dpposterior.privacy.PrivacySpent`) with :func:`tail_delta` added to its delta.

    The added term is recorded in ``details`` as ``("noise_tail_delta", value)``. A record that is
    not private (epsilon inf) is returned unchanged.
    """
    if not privacy.is_private:
        return privacy
    extra = tail_delta(num_normals, privacy.epsilon)
    return dataclasses.replace(
        privacy, delta=min(1.0, privacy.delta + extra), details=privacy.details + (("noise_tail_delta", extra),)
    )


def float32_at_least(x: float) -> jax.Array:
    """The smallest float32 >= ``x`` (a noise scale is never rounded below the accounted one)."""
    f = np.float32(x)
    if float(f) < float(x):
        f = np.nextafter(f, np.float32(np.inf))
    return jnp.float32(f)


def normal_words(key: Any, n: int) -> jax.Array:
    """The uint32 words, shape (WORDS_PER_PAIR, ceil(n / 2)), behind ``n`` normals, from a JAX key."""
    return jax.random.bits(key, (WORDS_PER_PAIR, num_pairs(n)), jnp.uint32)


def normals_from_words(words: jax.Array, n: int) -> jax.Array:
    """``n`` float64 standard normals from :func:`normal_words`-shaped uint32 words.

    Traced with 64-bit types enabled for its own operations, so it works inside a jitted float32
    program; the result is float64 and must be consumed under ``jax.enable_x64(True)`` (as
    :func:`add_gaussian_noise` does) or cast down by the caller.
    """
    with jax.enable_x64(True):
        f = jnp.asarray(words).astype(jnp.float64)
        u1 = f[0] * 2.0**-32 + f[1] * 2.0**-64 + (f[2] + 0.5) * 2.0**-96
        u2 = (f[3] * 2.0**21 + jnp.floor(f[4] * 2.0**-11) + 0.5) * 2.0**-53
        r = jnp.sqrt(-2.0 * jnp.log(u1))
        theta = (2.0 * math.pi) * u2
        z = jnp.concatenate([r * jnp.cos(theta), r * jnp.sin(theta)], axis=0)
        return z[:n]


def normals_from_words_np(words: np.ndarray, n: int) -> np.ndarray:
    """The NumPy twin of :func:`normals_from_words` (same transform, float64), for host-side noise."""
    f = np.asarray(words, np.uint32).astype(np.float64)
    u1 = f[0] * 2.0**-32 + f[1] * 2.0**-64 + (f[2] + 0.5) * 2.0**-96
    u2 = (f[3] * 2.0**21 + np.floor(f[4] * 2.0**-11) + 0.5) * 2.0**-53
    r = np.sqrt(-2.0 * np.log(u1))
    theta = (2.0 * math.pi) * u2
    return np.concatenate([r * np.cos(theta), r * np.sin(theta)], axis=0)[:n]


def standard_normal(key: Any, shape: Any) -> jax.Array:
    """Float64 standard normals of ``shape`` from a JAX key (consume under ``jax.enable_x64(True)``)."""
    shape = tuple(int(s) for s in shape)
    n = math.prod(shape)
    with jax.enable_x64(True):
        return normals_from_words(normal_words(key, n), n).reshape(shape)


def add_gaussian_noise(value: jax.Array, scale: Any, words: jax.Array, divisor: Any = None) -> jax.Array:
    """``float32((value + scale * z) / divisor)`` with z from ``words``, computed in float64.

    Args:
      value: the exact (float32) noiseless quantity, any shape.
      scale: the noise standard deviation (scalar or broadcastable to ``value``), or a tuple of
        factors whose product it is (multiplied in float64, so e.g. sigma * C is not rounded to float32).
      words: uint32 words for ``value.size`` normals (:func:`normal_words`, or OS words in secure mode).
      divisor: None, or a positive array broadcastable to ``value`` (DP-SGD's preconditioner beta).

    Returns:
      float32 array of ``value``'s shape: the noisy value rounded once.
    """
    value = jnp.asarray(value)
    n = math.prod(value.shape)
    z = normals_from_words(words, n)
    with jax.enable_x64(True):
        sd = jnp.float64(1.0)
        for factor in scale if isinstance(scale, tuple) else (scale,):
            sd = sd * jnp.asarray(factor).astype(jnp.float64)
        out = value.astype(jnp.float64) + sd * z.reshape(value.shape)
        if divisor is not None:
            out = out / jnp.asarray(divisor).astype(jnp.float64)
        return out.astype(jnp.float32)
