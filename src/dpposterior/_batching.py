"""Running a compiled, batched function over many rows in fixed-size chunks, on one or several devices."""

from __future__ import annotations

import functools
import re
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

#: custom calls that shard_map itself adds to a lowered program (not kernels of the program's own).
_SHARDING_CALLS = frozenset({"Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape"})
_CUSTOM_CALL = re.compile(r"stablehlo\.custom_call @([\w.]+)")


def custom_calls(lowered_text: str) -> tuple[str, ...]:
    """The custom-call targets in a lowered program's text (``jax.jit(f).lower(...).as_text()``), less the
    ones shard_map adds: on CPU, jaxlib's LAPACK/BLAS kernels (``lapack_spotrf_ffi`` ...), FFT, host
    callbacks."""
    return tuple(sorted(set(_CUSTOM_CALL.findall(lowered_text)) - _SHARDING_CALLS))


def cpu_kernel_calls(fn: Callable[..., Any], *args: Any) -> tuple[str, ...]:
    """The custom kernels (:func:`custom_calls`) that ``fn`` calls at the shapes of ``args`` (arrays or
    ``jax.ShapeDtypeStruct``s) when JAX runs on CPU; () on other platforms.

    Why: jaxlib's CPU kernels (LAPACK, 0.10) split their own batch over XLA's intra-op thread pool and
    wait for the pieces (``ParallelBatchMap``); with every thread of that pool running an XLA CPU
    device's program, the process hangs at 0% CPU (for example two batched Cholesky factorisations
    per step on two CPU devices). A program that calls any such kernel runs on one device. Found by
    lowering ``fn`` (abstract shapes; nothing is computed)."""
    if jax.default_backend() != "cpu":
        return ()
    abstract = jax.tree.map(
        lambda a: a if isinstance(a, jax.ShapeDtypeStruct) else jax.ShapeDtypeStruct(np.shape(a), _dtype(a)), args
    )
    return custom_calls(jax.jit(fn).lower(*abstract).as_text())


def _dtype(a: Any) -> Any:
    return a.dtype if hasattr(a, "dtype") else np.asarray(a).dtype


@functools.lru_cache(maxsize=8)
def _mesh(devices: int) -> Any:
    return jax.sharding.Mesh(np.asarray(jax.devices()[:devices]), ("rows",))


def spread_over_devices(fn: Callable[..., Any], example: tuple, devices: int) -> tuple[Callable[..., Any], int]:
    """(``fn`` split row-wise over ``devices`` XLA devices by ``shard_map``, devices used), or (``fn``, 1)
    when ``devices`` is 1 or, on CPU, the program calls a custom kernel (:func:`cpu_kernel_calls`: it
    would hang the process), at the shapes of ``example``."""
    if devices <= 1 or cpu_kernel_calls(fn, *example):
        return fn, 1
    from jax.sharding import PartitionSpec as P

    sharded = jax.jit(jax.shard_map(fn, mesh=_mesh(devices), in_specs=P("rows"), out_specs=P("rows"), check_vma=False))
    return sharded, devices


def map_in_chunks(
    fn: Callable[..., Any], batched_args: tuple, size: int, progress: Any = None, devices: int = 1
) -> Any:
    """``fn(*chunk)`` over chunks of ``size`` rows (axis 0 of every leaf of ``batched_args``), concatenated.

    The last chunk is padded by repeating its last row, so one compiled program serves every chunk, and
    the padding is dropped from the outputs. ``progress`` (a tqdm-like object or None) advances by the
    rows of each chunk. Outputs come back as numpy arrays.

    ``devices`` > 1: each chunk is split row-wise over that many XLA devices (the chunk size rounded up
    to a multiple of it), unless the program calls a custom kernel (:func:`spread_over_devices`). Rows
    must be independent (``fn`` vmapped over them); the numbers then equal a one-device run's up to the
    last bits of floating point (other batch shapes).
    """
    k = int(jax.tree.leaves(batched_args)[0].shape[0])
    size = max(1, min(int(size), k))
    if isinstance(devices, bool) or not isinstance(devices, int) or not 1 <= devices <= jax.device_count():
        raise ValueError(
            f"devices must be an integer in [1, {jax.device_count()}] (jax.device_count()), got {devices!r}"
        )
    if devices > 1:
        padded = -(-size // devices) * devices
        example = jax.tree.map(
            lambda a: jax.ShapeDtypeStruct((padded,) + np.shape(a)[1:], _dtype(a)), batched_args
        )  # shapes only: no copy of the data
        fn, used = spread_over_devices(fn, example, devices)
        if used > 1:
            size = padded
    outs = []
    for lo in range(0, k, size):
        hi = min(lo + size, k)

        def take(a, lo=lo, hi=hi):
            a = np.asarray(a)[lo:hi]
            if hi - lo < size:
                a = np.concatenate([a, np.repeat(a[-1:], size - (hi - lo), axis=0)])
            return jnp.asarray(a)

        out = jax.device_get(fn(*jax.tree.map(take, batched_args)))
        outs.append(jax.tree.map(lambda a, m=hi - lo: np.asarray(a)[:m], out))
        if progress is not None:
            progress.update(hi - lo)
    return jax.tree.map(lambda *xs: np.concatenate(xs, axis=0), *outs)
