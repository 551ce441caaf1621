"""Running a compiled, batched function over many rows in fixed-size chunks."""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np


def map_in_chunks(fn: Callable[..., Any], batched_args: tuple, size: int, progress: Any = None) -> Any:
    """``fn(*chunk)`` over chunks of ``size`` rows (axis 0 of every leaf of ``batched_args``), concatenated.

    The last chunk is padded by repeating its last row, so one compiled program serves every chunk, and
    the padding is dropped from the outputs. ``progress`` (a tqdm-like object or None) advances by the
    rows of each chunk. Outputs come back as numpy arrays.
    """
    k = int(jax.tree.leaves(batched_args)[0].shape[0])
    size = max(1, min(int(size), k))
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
