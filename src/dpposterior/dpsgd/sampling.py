"""Exact Poisson subsampling in O(qN) work per step, with static shapes.

A Poisson sample includes every record independently with probability q. Instead of N coin flips
we draw the gaps between consecutive included records: the number of trials up to and including
the next success is Geometric(q) on {1, 2, ...}, and the included indices are the cumulative sums
of independent gaps (starting before record 0). The cumulative sums fill a buffer of fixed
``capacity``; indices >= N are masked out. If the buffer fills before passing N, the next chunk of
``capacity`` gaps continues from the last index drawn, until past N: the sample is never truncated
and never redrawn (both would change the distribution the accountant assumes).

Precision (float32, no x64 needed):
- Gaps come from 32 random bits by inversion, with ``log(1 - u)`` evaluated as ``log1p(-u)`` for
  u < 1/2 and as ``log`` of the complement otherwise, so both tails keep ~1e-7 relative accuracy;
  no gap is ever infinite. P(gap = 1) equals q up to the 2^-32 grid of the bits and float32
  rounding (relative ~1e-7); jax.random.uniform's 2^-23 grid would be 1% off at q = 1e-5.
- Gaps are clamped at N + 1 (any larger gap also ends the step) and summed in float32 by a parallel
  prefix scan. Partial sums below 2^24 are exact integers and larger ones stay >= 2^24, so
  ``index < N`` is decided exactly for N < 2^24 (``MAX_RECORDS``). ``jnp.cumsum`` is much slower on
  CPU in the vmapped replicate engine.

The functions here are the engine's sampler; ``poisson_sample_indices`` and ``debug_batch_sizes``
reveal which records (or how many) a step used, so they are non-private debug tools.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

#: the largest number of records the sampler decides exactly in float32 (see module docstring).
MAX_RECORDS = 2**24 - 2

#: the smallest default buffer capacity.
MIN_CAPACITY = 16

_TWO_M32 = 2.0**-32


def as_key(key: Any) -> jax.Array:
    """A typed JAX key from a typed key or a raw uint32 key of shape (2,)."""
    key = jnp.asarray(key) if not isinstance(key, jax.Array) else key
    if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
        return key
    return jax.random.wrap_key_data(key.astype(jnp.uint32))


def step_keys(base_key: Any, step: Any) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The independent (sampling, loss, noise) keys of step ``step``.

    ``key_t = fold_in(base_key, t)`` split three ways: every step and every purpose gets its own
    stream, so privacy noise is never reused across steps, keys or chunks.
    """
    k = jax.random.fold_in(as_key(base_key), step)
    ks = jax.random.split(k, 3)
    return ks[0], ks[1], ks[2]


def default_capacity(num_records: int, sampling_rate: float) -> int:
    """Buffer size for one chunk: about qN + 5 standard deviations, at least 16, at most N.

    A larger sample is not truncated: it continues in further chunks (each a full buffer of work).
    Five standard deviations make that rare (about 3e-7 of steps by the normal tail) while keeping the
    padded slots, which cost as much as sampled ones, to ~5 sd / qN of the buffer.
    """
    n, q = int(num_records), float(sampling_rate)
    mean = q * n
    sd = math.sqrt(n * q * (1.0 - q))
    cap = int(math.ceil(mean + 5.0 * sd))
    return max(1, min(n, max(MIN_CAPACITY, cap)))


def blocked_cumsum(x: jnp.ndarray) -> jnp.ndarray:
    """Inclusive cumulative sum of a 1-D float32 vector by a parallel prefix (associative) scan.

    Exact for non-negative integer-valued inputs while partial sums stay below 2^24; larger partial
    sums stay >= 2^24 (float addition of non-negative numbers is monotone, whatever the order of the
    scan's tree). XLA's CPU ``cumsum`` (a reduce-window) and 128-wide triangular matmuls were both
    measured ~2x slower on the 712-slot buffers of the vmapped replicate engine.
    """
    return jax.lax.associative_scan(jnp.add, x, axis=x.ndim - 1)


def geometric_gaps(key: jax.Array, shape: tuple[int, ...], sampling_rate: float, max_gap: int) -> jnp.ndarray:
    """Independent Geometric(q) gaps on {1, 2, ...} as float32, clamped at ``max_gap``."""
    q = float(sampling_rate)
    if q >= 1.0:
        return jnp.ones(shape, jnp.float32)
    return gaps_from_bits(jax.random.bits(key, shape, jnp.uint32), q, max_gap)


def gaps_from_bits(b: jnp.ndarray, sampling_rate: float, max_gap: int) -> jnp.ndarray:
    """Geometric(q) gaps (float32, clamped at ``max_gap``) by inversion of uniform uint32 words ``b``.

    The sampler's one transformation of random bits, whether they come from threefry or (secure mode)
    from the operating system's CSPRNG.
    """
    q = float(sampling_rate)
    if q >= 1.0:
        return jnp.ones(b.shape, jnp.float32)
    u = (b.astype(jnp.float32) + 0.5) * _TWO_M32  # accurate for small u
    uc = ((~b).astype(jnp.float32) + 0.5) * _TWO_M32  # 1 - u, accurate for small 1 - u
    log1m_u = jnp.where(b < jnp.uint32(2**31), jnp.log1p(-u), jnp.log(uc))
    denom = jnp.float32(math.log1p(-q))
    gaps = 1.0 + jnp.floor(log1m_u / denom)
    return jnp.minimum(gaps, jnp.float32(max_gap))


def sample_chunk(
    key: jax.Array,
    start: jnp.ndarray,
    *,
    num_records: int,
    sampling_rate: float,
    capacity: int,
    bits: jnp.ndarray | None = None,
) -> tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray]:
    """One chunk of a step's Poisson sample, continuing after index ``start`` (float32; -1 first).

    Returns:
      (indices int32 (capacity,), mask bool (capacity,), last float32): masked-out slots hold index
      0; ``last`` is the last index drawn (possibly >= N). The step needs another chunk iff
      ``last < N - 1``. With ``bits`` (uint32 (capacity,), secure mode) the gaps come from those
      words and ``key`` is not used.
    """
    n = int(num_records)
    if bits is None:
        gaps = geometric_gaps(key, (capacity,), sampling_rate, n + 1)
    else:
        gaps = gaps_from_bits(bits, sampling_rate, n + 1)
    pos = start + blocked_cumsum(gaps)
    mask = pos < n
    idx = jnp.where(mask, pos, 0.0).astype(jnp.int32)
    return idx, mask, pos[-1]


def needs_more(last: jnp.ndarray, num_records: int) -> jnp.ndarray:
    """Whether a step whose last drawn index is ``last`` may include further records."""
    return last < jnp.float32(num_records - 1)


def chunk_key(sampling_key: jax.Array, chunk: Any) -> jax.Array:
    """The key of overflow chunk ``chunk`` (0 for the first) of a step."""
    return jax.random.fold_in(sampling_key, chunk)


def masked_inclusion(key: jax.Array, num_records: int, sampling_rate: float) -> jnp.ndarray:
    """The full-N Bernoulli(q) inclusion mask of the ``"masked"`` engine (32-bit threshold)."""
    q = float(sampling_rate)
    if q >= 1.0:
        return jnp.ones((num_records,), bool)
    return inclusion_from_bits(jax.random.bits(key, (num_records,), jnp.uint32), q)


def inclusion_from_bits(b: jnp.ndarray, sampling_rate: float) -> jnp.ndarray:
    """Bernoulli(q) inclusion from uniform uint32 words ``b`` (32-bit threshold)."""
    q = float(sampling_rate)
    if q >= 1.0:
        return jnp.ones(b.shape, bool)
    thresh = int(round(q * 2.0**32))
    return b < jnp.uint32(max(1, min(thresh, 2**32 - 1)))


def _check_sampler_args(num_records: Any, sampling_rate: Any, capacity: Any, sampling: str):
    from .._checks import check_positive_int, check_sampling_rate

    n = check_positive_int(num_records, "num_records")
    if n > MAX_RECORDS:
        raise ValueError(f"num_records must be <= {MAX_RECORDS} (exact float32 sampling), got {n}")
    q = check_sampling_rate(sampling_rate)
    cap = default_capacity(n, q) if capacity is None else check_positive_int(capacity, "capacity")
    if sampling not in ("packed", "masked"):
        raise ValueError(f"sampling must be 'packed' or 'masked', got {sampling!r}")
    return n, q, cap


@functools.partial(jax.jit, static_argnames=("num_records", "sampling_rate", "capacity"))
def _packed_chunk(key, chunk, start, *, num_records, sampling_rate, capacity):
    return sample_chunk(
        chunk_key(key, chunk), start, num_records=num_records, sampling_rate=sampling_rate, capacity=capacity
    )


def poisson_sample_indices(
    sampling_key: Any, num_records: int, sampling_rate: float, capacity: int | None = None, sampling: str = "packed"
) -> np.ndarray:
    """NON-PRIVATE DEBUG TOOL: the record indices of one step's Poisson sample.

    Draws exactly the sample that the engine draws from the step's sampling key (the first key of
    :func:`step_keys`), including overflow chunks. The result reveals which records a step used;
    never release it.

    Args:
      sampling_key: the step's sampling key (typed or raw uint32).
      num_records: N.
      sampling_rate: q in (0, 1].
      capacity: the packed buffer size (default :func:`default_capacity`); the sample depends on it.
      sampling: ``"packed"`` (geometric gaps, the default engine) or ``"masked"`` (full-N mask).

    Returns:
      Sorted int64 indices of the included records (possibly empty).
    """
    n, q, cap = _check_sampler_args(num_records, sampling_rate, capacity, sampling)
    key = as_key(sampling_key)
    if sampling == "masked":
        return np.flatnonzero(np.asarray(masked_inclusion(key, n, q))).astype(np.int64)
    out = []
    start = jnp.float32(-1.0)
    chunk = 0
    while True:
        idx, mask, last = _packed_chunk(key, chunk, start, num_records=n, sampling_rate=q, capacity=cap)
        out.append(np.asarray(idx)[np.asarray(mask)])
        if not bool(needs_more(last, n)):
            break
        start, chunk = last, chunk + 1
    return np.concatenate(out).astype(np.int64)


@functools.partial(jax.jit, static_argnames=("num_records", "sampling_rate", "capacity", "num_steps", "sampling"))
def _batch_sizes(base_key, *, num_records, sampling_rate, capacity, num_steps, sampling):
    def one(t):
        ks, _, _ = step_keys(base_key, t)
        if sampling == "masked":
            return jnp.sum(masked_inclusion(ks, num_records, sampling_rate), dtype=jnp.int32)

        def body(c):
            chunk, start, count, _ = c
            _, mask, last = sample_chunk(
                chunk_key(ks, chunk), start, num_records=num_records, sampling_rate=sampling_rate, capacity=capacity
            )
            return chunk + 1, last, count + jnp.sum(mask, dtype=jnp.int32), needs_more(last, num_records)

        init = (jnp.int32(0), jnp.float32(-1.0), jnp.int32(0), jnp.bool_(True))
        return jax.lax.while_loop(lambda c: c[3], body, init)[2]

    return jax.lax.map(one, jnp.arange(num_steps))


def debug_batch_sizes(
    rng_key: Any,
    num_records: int,
    sampling_rate: float,
    num_steps: int,
    capacity: int | None = None,
    sampling: str = "packed",
) -> np.ndarray:
    """NON-PRIVATE DEBUG TOOL: the realised batch size of each step of a run with key ``rng_key``.

    The sizes are data-dependent counts that no release may contain; this exists for tests and
    diagnostics of the sampler only.

    Args:
      rng_key: the run's key (int seed, typed key, or raw uint32 key), as passed to ``dpsgd``.
      num_records, sampling_rate, capacity, sampling: as in ``dpsgd``.
      num_steps: how many steps (from step 0).

    Returns:
      int64 array (num_steps,).
    """
    from ..privacy.randomness import resolve_key
    from .._checks import check_positive_int

    if rng_key is None:
        raise ValueError("rng_key must be given (an int seed or a JAX key) for debug_batch_sizes")
    raw, _ = resolve_key(rng_key)
    n, q, cap = _check_sampler_args(num_records, sampling_rate, capacity, sampling)
    t = check_positive_int(num_steps, "num_steps")
    return np.asarray(
        _batch_sizes(raw, num_records=n, sampling_rate=q, capacity=cap, num_steps=t, sampling=sampling)
    ).astype(np.int64)
