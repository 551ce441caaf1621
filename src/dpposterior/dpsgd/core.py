"""The pure DP-SGD step and run: no Python side effects, so they jit and vmap over replicates.

Everything works on a flat float32 parameter vector ``phi`` of length d; ``unravel`` maps it to the
user's pytree inside the loss. Per-example gradients come from ``vmap(grad(loss))``, laid out
(d, batch) for small models (``out_axes=1``) and (batch, d) for larger ones,
computed in tiles of the packed buffer, clipped and summed in one fused pass (a select that drops
non-finite gradients runs only when one occurs)."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, cast

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from ..privacy.noise import WORDS_PER_PAIR, add_gaussian_noise, normal_words, num_pairs
from .sampling import as_key, chunk_key, inclusion_from_bits, masked_inclusion, needs_more, sample_chunk, step_keys


@dataclasses.dataclass(frozen=True)
class TreeSpec:
    """A hashable description of a parameter pytree (structure, leaf shapes and dtypes)."""

    treedef: Any
    leaves: tuple[tuple[tuple[int, ...], str], ...]

    @classmethod
    def of(cls, tree: Any) -> "TreeSpec":
        leaves, treedef = jax.tree_util.tree_flatten(tree)
        return cls(treedef, tuple((tuple(np.shape(x)), str(jnp.asarray(x).dtype)) for x in leaves))


@functools.lru_cache(maxsize=256)
def _unravel_of_spec(spec: TreeSpec) -> Callable[[jax.Array], Any]:
    zeros = [jnp.zeros(s, d) for s, d in spec.leaves]
    _, unravel = ravel_pytree(jax.tree_util.tree_unflatten(spec.treedef, zeros))
    return unravel


def _identity(x):
    return x


@dataclasses.dataclass(frozen=True)
class EngineConfig:
    """The static settings of a compiled engine (hashable: part of the jit cache key)."""

    loss: Callable[..., Any]
    loss_needs_key: bool
    num_records: int
    num_params: int
    sampling_rate: float
    capacity: int
    sampling: str
    unravel: Any = None  # None (loss takes the flat vector), a TreeSpec, or a callable
    secure: bool = False  # noise and sampling bits from the OS CSPRNG (privacy.secure), not from keys

    def unravel_fn(self) -> Callable[[jax.Array], Any]:
        if self.unravel is None:
            return _identity
        if isinstance(self.unravel, TreeSpec):
            return _unravel_of_spec(self.unravel)
        return self.unravel


#: models with at most this many parameters get per-example gradients laid out (d, batch), larger
#: ones (batch, d): for d = 2 the (d, batch) norms and sums are many times cheaper,
#: for d = 100 with (N, d) data the (batch, d) layout avoids a transpose and is ~2x faster.
PARAMS_MAJOR_MAX_D = 16


def params_major(cfg: "EngineConfig") -> bool:
    """Whether the engine lays per-example gradients out (d, batch) rather than (batch, d)."""
    return cfg.num_params <= PARAMS_MAJOR_MAX_D


def per_example_grad_fn(cfg: EngineConfig) -> Callable[[jax.Array, Any, jax.Array], jax.Array]:
    """``(phi, batch, loss_key) -> per-example gradients`` of the flat-parameter loss.

    Shape (d, B) when :func:`params_major`, else (B, d).
    """
    unravel = cfg.unravel_fn()
    loss = cfg.loss

    def f(phi, record, key):
        params = unravel(phi)
        out = loss(params, record, key) if cfg.loss_needs_key else loss(params, record)
        if jnp.shape(out) != ():
            raise ValueError(f"loss must return a scalar for one record, got shape {jnp.shape(out)}")
        return out

    return jax.vmap(jax.grad(f), in_axes=(None, 0, None), out_axes=1 if params_major(cfg) else 0)


def clip_scale(sumsq: jax.Array, clip: Any) -> jax.Array:
    """``min(1, C / sqrt(sumsq))``: the factor that clips a vector of squared norm ``sumsq`` to C.

    For the zero vector ``C / 0 = inf`` and the factor is 1 (no NaN; C > 0).
    """
    return jnp.minimum(1.0, clip / jnp.sqrt(sumsq))


def clipped_sum(g: jax.Array, mask: jax.Array, clip: Any, params_major: bool) -> jax.Array:
    """``sum_i mask_i * clip(g_i, C)`` for per-example (already beta-scaled) gradients ``g``.

    ``g`` is (d, B) when ``params_major`` else (B, d). ``clip(v, C) = v * min(1, C / ||v||)``, exact
    (no NaN) for v = 0. A per-example gradient whose squared norm is not finite (NaN/inf in the
    gradient, or float32 overflow) is replaced by zero.
    """
    ax_d, ax_b = (0, 1) if params_major else (1, 0)
    sumsq = jnp.sum(jnp.square(g), axis=ax_d)
    finite = jnp.isfinite(sumsq)
    scale = jnp.expand_dims(jnp.where(finite & mask, clip_scale(sumsq, clip), 0.0), ax_d)

    def weighted_sum(v):
        if params_major:  # (d, B): a fused multiply-reduce along the rows
            return jnp.sum(v * scale, axis=ax_b)
        # (B, d): a matrix-vector product; XLA's CPU column reduction of v * scale was measured
        # ~1.5x slower per record (benchmarks/README.md, DP-SGD throughput).
        return jnp.dot(scale[:, 0], v, precision=jax.lax.Precision.HIGHEST)

    def fast():  # every gradient finite
        return weighted_sum(g)

    def safe():  # drop non-finite gradients by a select: scale = 0 alone would give NaN * 0 = NaN
        return weighted_sum(jnp.where(jnp.expand_dims(finite, ax_d), g, 0.0))

    return jax.lax.cond(jnp.all(finite), fast, safe)


def _gather(data: Any, idx: jax.Array) -> Any:
    return jax.tree_util.tree_map(lambda a: jnp.take(a, idx, axis=0, mode="clip"), data)


#: per-example gradients are computed in tiles of at most about this many floats (tile x d, 16 MB),
#: so memory stays bounded however large the sample and the model. (Tiles sized for the L2 cache
#: were no faster single-threaded and slower multi-threaded.)
TILE_FLOATS = 2**22
MIN_TILE = 128


def tiling(num_params: int, capacity: int) -> tuple[int, int]:
    """(number of tiles, records per tile) covering a packed chunk of ``capacity`` records."""
    target = max(MIN_TILE, TILE_FLOATS // max(1, num_params))
    n_tiles = -(-capacity // target)
    return n_tiles, -(-capacity // n_tiles)


def _packed_sum(
    cfg: EngineConfig,
    grads: Callable[[Any], jax.Array],
    data: Any,
    idx: jax.Array,
    mask: jax.Array,
    clip: Any,
    pm: bool,
) -> jax.Array:
    n_tiles, tile = tiling(cfg.num_params, cfg.capacity)
    if n_tiles == 1:
        return clipped_sum(grads(_gather(data, idx)), mask, clip, pm)
    pad = n_tiles * tile - cfg.capacity  # padded slots are masked out
    idx_t = jnp.pad(idx, (0, pad)).reshape(n_tiles, tile)
    mask_t = jnp.pad(mask, (0, pad)).reshape(n_tiles, tile)

    def body(acc, im):
        i, m = im
        return acc + clipped_sum(grads(_gather(data, i)), m, clip, pm), None

    return jax.lax.scan(body, jnp.zeros((cfg.num_params,), jnp.float32), (idx_t, mask_t))[0]


def _host_secure_draws(num_bits: int, num_normals: int) -> tuple[np.ndarray, np.ndarray]:
    from ..privacy.secure import secure_bits

    return secure_bits((num_bits,)), secure_bits((WORDS_PER_PAIR, num_pairs(num_normals)))


def _host_secure_bits(num_bits: int) -> np.ndarray:
    from ..privacy.secure import secure_bits

    return secure_bits((num_bits,))


def secure_bits_width(cfg: EngineConfig) -> int:
    """How many uint32 sampling words secure mode feeds one step (the first packed chunk, or N masked)."""
    if cfg.sampling_rate >= 1.0:  # every record is included: no bits needed
        return 0
    return cfg.num_records if cfg.sampling == "masked" else cfg.capacity


def host_secure_draws(cfg: EngineConfig, num_steps: int, num_valid: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Secure mode's draws for ``num_steps`` steps, read from the OS CSPRNG on the host.

    Returns (sampling words uint32 (num_steps, width), noise words uint32 (num_steps, WORDS_PER_PAIR,
    ceil(d / 2)): the words behind d normals, :mod:`dpposterior.privacy.noise`), the inputs of
    :func:`scan_steps`'s ``draws``; fresh bytes on every call, never reused. Only the first
    ``num_valid`` rows (default all) are drawn; the rest, for steps a chunk skips, are zeros.
    """
    from ..privacy.secure import secure_bits

    k = num_steps if num_valid is None else num_valid
    bits = np.zeros((num_steps, secure_bits_width(cfg)), np.uint32)
    words = np.zeros((num_steps, WORDS_PER_PAIR, num_pairs(cfg.num_params)), np.uint32)
    bits[:k] = secure_bits((k, bits.shape[1]))
    words[:k] = secure_bits((k,) + words.shape[1:])
    return bits, words


def secure_step_draws(num_bits: int, num_normals: int) -> tuple[jax.Array, jax.Array]:
    """(uint32 (num_bits,), the uint32 words behind ``num_normals`` normals) read from the OS CSPRNG at run time.

    An ``io_callback`` (an effect: never cached, deduplicated or reordered away), so every call inside
    the compiled step draws fresh bytes from :func:`os.urandom`.
    """
    from jax.experimental import io_callback

    shapes = (
        jax.ShapeDtypeStruct((num_bits,), jnp.uint32),
        jax.ShapeDtypeStruct((WORDS_PER_PAIR, num_pairs(num_normals)), jnp.uint32),
    )
    return io_callback(functools.partial(_host_secure_draws, num_bits, num_normals), shapes, ordered=False)


def secure_chunk_bits(num_bits: int) -> jax.Array:
    """uint32 (num_bits,) from the OS CSPRNG at run time (the overflow chunks of a packed sample)."""
    from jax.experimental import io_callback

    return io_callback(
        functools.partial(_host_secure_bits, num_bits), jax.ShapeDtypeStruct((num_bits,), jnp.uint32), ordered=False
    )


def noisy_gradient(
    cfg: EngineConfig,
    keys: tuple[jax.Array, jax.Array, jax.Array],
    phi: jax.Array,
    data: Any,
    sigma: Any,
    clip: Any,
    beta: jax.Array,
    draws: tuple[jax.Array, jax.Array] | None = None,
) -> jax.Array:
    """One step's released gradient ``g~ = (sum_i clip(beta g_i, C) + sigma C xi) / beta``.

    xi is :mod:`dpposterior.privacy.noise`'s float64 Box-Muller normal (no gap in its support below
    11.6 sd), added to the float32 sum in float64 and the result rounded once to float32.
    Default mode: the sampling bits and the noise words come from the step's threefry keys. Secure mode
    (``cfg.secure``): they come from the OS CSPRNG, either as ``draws`` (this step's row of
    :func:`host_secure_draws`, generated on the host per chunk of steps by ``dpsgd``) or, when
    ``draws`` is None, read inside the step (:func:`secure_step_draws`); further chunks of an
    overflowing packed sample always by :func:`secure_chunk_bits`. They pass through the same
    sampler transformation and the same noise addition; the sampling and noise keys are unused.
    """
    k_samp, k_loss, k_noise = keys
    per_example = per_example_grad_fn(cfg)
    pm = params_major(cfg)
    d = cfg.num_params
    beta_b = beta[:, None] if pm else beta[None, :]

    def grads(batch):  # beta-scaled per-example gradients; the multiply fuses into their producer
        return per_example(phi, batch, k_loss) * beta_b

    words = first_bits = None
    if cfg.secure:
        width = secure_bits_width(cfg)
        first_bits, words = secure_step_draws(width, d) if draws is None else draws

    if cfg.sampling == "masked":
        mask = (
            masked_inclusion(k_samp, cfg.num_records, cfg.sampling_rate)
            if not cfg.secure
            else inclusion_from_bits(cast(jax.Array, first_bits), cfg.sampling_rate)  # drawn above (secure)
            if width
            else jnp.ones((cfg.num_records,), bool)
        )
        total = clipped_sum(grads(data), mask, clip, pm)
    else:

        def chunk_bits(c):
            if not cfg.secure or not width:
                return None
            return jax.lax.cond(c == 0, lambda: first_bits, lambda: secure_chunk_bits(width))

        def body(carry):
            c, start, acc = carry
            idx, mask, last = sample_chunk(
                chunk_key(k_samp, c),
                start,
                num_records=cfg.num_records,
                sampling_rate=cfg.sampling_rate,
                capacity=cfg.capacity,
                bits=chunk_bits(c),
            )
            return c + 1, last, acc + _packed_sum(cfg, grads, data, idx, mask, clip, pm)

        # Chunk after chunk, each continuing from the last index drawn, until past N (one chunk
        # unless the sample overflows the buffer). Peeling the first chunk out of the loop was
        # measured: no faster, and 1.5x the compile time.
        init = (jnp.int32(0), jnp.float32(-1.0), jnp.zeros((d,), jnp.float32))
        total = jax.lax.while_loop(lambda c: needs_more(c[1], cfg.num_records), body, init)[2]

    if words is None:
        words = normal_words(k_noise, d)
    return add_gaussian_noise(total, (sigma, clip), words, beta)


def scan_steps(
    cfg: EngineConfig,
    base_key: Any,
    t0: Any,
    phi0: jax.Array,
    data: Any,
    sigma: Any,
    clip: Any,
    lr: jax.Array,
    beta: jax.Array,
    length: int,
    n_valid: Any = None,
    draws: tuple[jax.Array, jax.Array] | None = None,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Runs steps ``t0, ..., t0 + length - 1`` (only the first ``n_valid`` when given).

    ``draws`` (secure mode only): :func:`host_secure_draws` for these ``length`` steps, row i feeding
    step t0 + i; None in secure mode reads them inside each step instead.

    Returns:
      (final phi (d,), phi_t before each update (length, d), g~_t (length, d)); skipped steps
      (index >= n_valid) leave phi unchanged and record zeros.
    """
    key = as_key(base_key)

    def step(phi, i):
        row = None if draws is None else (draws[0][i], draws[1][i])
        g = noisy_gradient(cfg, step_keys(key, t0 + i), phi, data, sigma, clip, beta, row)
        return phi - lr * g, g

    if n_valid is None:

        def body(phi, i):
            new, g = step(phi, i)
            return new, (phi, g)

        final, (phis, gs) = jax.lax.scan(body, phi0, jnp.arange(length, dtype=jnp.int32))
        return final, phis, gs

    # A dynamic number of steps in a fixed-size program (one compilation serves every run up to
    # ``length`` steps). Not lax.cond inside a scan: its branches copy their operands, data included.
    def loop_body(i, carry):
        phi, phis, gs = carry
        new, g = step(phi, i)
        return new, phis.at[i].set(phi), gs.at[i].set(g)

    d = phi0.shape[0]
    init = (phi0, jnp.zeros((length, d), jnp.float32), jnp.zeros((length, d), jnp.float32))
    return jax.lax.fori_loop(0, n_valid, loop_body, init)


def check_data_shapes(data: Any, num_records: int) -> None:
    """Trace-time check that every data leaf has leading axis ``num_records``."""
    leaves = jax.tree_util.tree_leaves(data)
    if not leaves:
        raise ValueError("data must hold at least one array with a leading record axis")
    lengths = [jnp.shape(a)[0] if jnp.ndim(a) >= 1 else None for a in leaves]
    if any(n != num_records for n in lengths):
        raise ValueError(
            f"data arrays must share their first axis of length num_records={num_records}: got lengths {lengths}"
        )
