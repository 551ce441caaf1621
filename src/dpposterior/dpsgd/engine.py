"""The public DP-SGD entry points: ``dpsgd`` (a private release) and ``make_dpsgd_run`` (pure core)."""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from collections.abc import Mapping
from typing import Any, Callable, Literal, cast

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from .._batching import cpu_kernel_calls
from .._checks import (
    FLOAT32_MAX,
    check_delta,
    check_float32_array,
    check_float32_positive,
    check_positive,
    check_positive_int,
    check_sampling_rate,
    check_trace_memory,
    warn_if_delta_large,
)
from ..privacy import PrivacySpent, dpsgd_epsilon
from ..privacy.spent import not_private
from ..privacy.randomness import os_seeded_key, resolve_key
from ..privacy.noise import WORDS_PER_PAIR, float32_at_least, num_pairs, with_noise_tail
from ..privacy.secure import check_secure, resolve_noise_source
from .core import (
    EngineConfig,
    TreeSpec,
    check_data_shapes,
    clip_scale,
    host_secure_draws,
    params_major,
    per_example_grad_fn,
    scan_steps,
    secure_bits_width,
)
from .sampling import MAX_RECORDS, default_capacity
from .checkpoint import Checkpoint, load_checkpoint, run_settings, save_checkpoint
from .trace import DPSGDTrace

Sampling = Literal["packed", "masked"]
SAMPLINGS = ("packed", "masked")
MECHANISM = "poisson_subsampled_gaussian"

#: default steps between checkpoints (when ``dpsgd(checkpoint=...)`` is given).
DEFAULT_CHECKPOINT_EVERY = 2000
#: default number of steps compiled into one scan (the progress bar advances per chunk).
DEFAULT_CHUNK_STEPS = 1000
#: runs with num_steps * capacity above this show a progress bar by default (on a terminal).
PROGRESS_WORK = 20_000_000


# --------------------------------------------------------------------------------------------
# validation at the public boundary


def _check_sampling(sampling: Any) -> Sampling:
    if sampling not in SAMPLINGS:
        raise ValueError(f"sampling must be one of {SAMPLINGS}, got {sampling!r}")
    return cast(Sampling, sampling)


def _check_bool(value: Any, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


#: rows per block of the finiteness check (a boolean temporary of at most ~16 MB, not one of the data's size)
_FINITE_BLOCK_ELEMENTS = 1 << 24


def _all_finite(a: Any) -> bool:
    """Whether every value of ``a`` is finite, checked in blocks of rows (memory bounded by the block).

    A JAX array is checked where it lives, by one reduction (no host copy; shards stay on their
    devices)."""
    if isinstance(a, jax.Array):
        return bool(jnp.all(jnp.isfinite(a)))
    if a.ndim == 0 or a.size == 0:
        return bool(np.isfinite(a).all())
    rows = max(1, _FINITE_BLOCK_ELEMENTS // max(1, a.size // a.shape[0]))
    return all(bool(np.isfinite(a[lo : lo + rows]).all()) for lo in range(0, a.shape[0], rows))


def _check_loss(loss: Any) -> Callable[..., Any]:
    if not callable(loss):
        raise TypeError(f"loss must be a callable loss(params, record) -> scalar, got {type(loss).__name__}")
    return loss


def _as_numeric_array(x: Any, name: str) -> Any:
    """``x`` as a numpy array, or ``x`` itself when it is a JAX array (checked without a host copy)."""
    if isinstance(x, jax.Array):
        if x.dtype.kind not in "biuf":
            raise TypeError(f"{name} must hold real numbers (bool, int or float), got dtype {x.dtype}")
        return x
    if np.ma.is_masked(x):
        raise ValueError(
            f"{name} is a masked array with {int(np.ma.count_masked(x))} masked value(s); the mask "
            "would be ignored and the values under it used: remove or impute them first"
        )
    try:
        a = np.asarray(x)
    except Exception as e:  # noqa: BLE001 - report what could not be converted
        raise TypeError(f"{name} must be an array, got {type(x).__name__}: {e}") from e
    if a.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold real numbers (bool, int or float), got dtype {a.dtype}")
    return a


def _nested_container(x: Any) -> str | None:
    """What ``x`` is when it is a container of arrays (a dict, or a tuple/list holding arrays or dicts), which
    numpy would stack into one array or refuse as objects; None for an array-like of numbers."""
    if isinstance(x, Mapping):
        return f"a {type(x).__name__} with keys {list(x)[:5]}"
    if isinstance(x, (tuple, list)) and any(
        isinstance(e, Mapping)
        or (isinstance(e, (np.ndarray, jax.Array)) and np.ndim(e) > 0)
        or (isinstance(e, (tuple, list)) and _nested_container(e) is not None)
        for e in x
    ):
        return f"a {type(x).__name__} of {len(x)} arrays or containers"
    return None


def _refuse_python_sequences(data: tuple | list) -> None:
    """A tuple/list of Python lists (or of Python numbers) is ambiguous: rows of records or columns of
    fields. The engine reads a sequence as columns (one entry per field, records on each entry's first
    axis), so ``[[x0, y0], [x1, y1], [x2, y2]]`` would silently become 2 records of 3 fields. Refused when
    no entry is an array (beside an array of N records, a list of N numbers is plainly a column): the
    caller says which by passing arrays."""
    kind = type(data).__name__
    has_array = any(isinstance(e, (np.ndarray, jax.Array)) for e in data)
    for i, e in enumerate(data):
        if isinstance(e, (tuple, list)) and not has_array:
            raise TypeError(
                f"data[{i}] is a Python {type(e).__name__}: in a {kind} of Python sequences dpsgd cannot tell "
                f"rows (records) from columns (fields), and it reads each entry as a column with the records "
                f"on its first axis. Pass arrays: np.asarray(rows) for one (N, ...) array of records, or a tuple "
                f"of column arrays (np.asarray(x), np.asarray(y)) sharing the leading record axis"
            )
        if isinstance(e, (bool, int, float, complex, np.generic)) and not isinstance(e, np.ndarray):
            raise TypeError(
                f"data[{i}] is a Python number: a {kind} of numbers is read as columns of 0-d arrays, which "
                f"hold no records. Pass np.asarray(data) for N records of one value each, or a tuple of "
                f"arrays with a leading record axis"
            )


def _check_data(data: Any) -> tuple[Any, int]:
    """Returns (data as jnp arrays with the caller's structure, N)."""
    what: str | None
    if isinstance(data, Mapping):
        what = f"data is {_nested_container(data)}"
    elif isinstance(data, (tuple, list)):
        what = next((f"data[{i}] is {w}" for i, w in enumerate(map(_nested_container, data)) if w), None)
    else:
        what = None
    if what is not None:  # numpy would stack a tuple of arrays into one (records mixed up) or make objects
        raise TypeError(
            f"data must be one array or a flat tuple of arrays sharing the leading record axis; "
            f"{what}: pass the arrays as entries of one tuple (data=(x, y, w), the record is then "
            "(x_i, y_i, w_i)); nested containers and dicts are not supported"
        )
    if isinstance(data, (tuple, list)):
        if len(data) == 0:
            raise ValueError("data must be an array or a non-empty tuple of arrays, got an empty sequence")
        _refuse_python_sequences(data)
        arrays = [_as_numeric_array(a, f"data[{i}]") for i, a in enumerate(data)]
        names = [f"data[{i}]" for i in range(len(arrays))]
    else:
        arrays = [_as_numeric_array(data, "data")]
        names = ["data"]
    for a, name in zip(arrays, names):
        if a.ndim < 1:
            raise ValueError(f"{name} must have a leading record axis, got a 0-d array")
    lengths = [a.shape[0] for a in arrays]
    if len(set(lengths)) != 1:
        raise ValueError(f"data arrays must share their first axis (records): got lengths {lengths}")
    n = lengths[0]
    if n < 1:
        raise ValueError("data must hold at least one record, got 0 records")
    if n > MAX_RECORDS:
        raise ValueError(f"data may hold at most {MAX_RECORDS} records (exact float32 Poisson sampling), got {n}")
    for a, name in zip(arrays, names):
        if a.dtype.kind == "f" and not _all_finite(a):
            bad = int(np.size(a) - np.count_nonzero(np.isfinite(a)))
            raise ValueError(f"{name} must not contain NaN or inf: found {bad} non-finite values")
        check_float32_array(name, a, private=True)
    # JAX arrays are used as they are; numpy arrays may be aliased instead of copied (read only).
    out = [
        x if isinstance(x, jax.Array) else jax.device_put(a, may_alias=True)
        for x, a in zip(data if isinstance(data, (tuple, list)) else [data], arrays)
    ]
    return (tuple(out) if isinstance(data, (tuple, list)) else out[0]), n


def _check_params(params: Any) -> tuple[Any, jax.Array, Callable[[Any], Any]]:
    leaves, treedef = jax.tree_util.tree_flatten(params)
    if not leaves:
        raise ValueError("params must contain at least one array of parameters, got an empty pytree")
    new = []
    for i, x in enumerate(leaves):
        a = _as_numeric_array(x, "params")
        if a.dtype.kind != "f":
            raise TypeError(f"params must hold floating-point arrays, got dtype {a.dtype} at leaf {i}")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"params must be finite, got NaN or inf at leaf {i}")
        check_float32_array(f"params (leaf {i})", a)
        new.append(jnp.asarray(a, jnp.float32))
    params32 = jax.tree_util.tree_unflatten(treedef, new)
    phi0, unravel = ravel_pytree(params32)
    if phi0.shape[0] == 0:
        raise ValueError("params must contain at least one parameter, got size 0")
    return params32, phi0, unravel


def _per_param(value: Any, name: str, params32: Any, d: int, *, allow_zero: bool) -> jax.Array:
    """A scalar, a pytree like params (each leaf of its parameter's shape, or a number for the whole
    leaf), or a flat (d,) vector, as a flat float32 (d,) vector."""
    rel = ">= 0" if allow_zero else "> 0"
    what = (
        f"{name} must be a finite number {rel}, a pytree like params (each leaf of its parameter's shape "
        f"or one number for the leaf), or a flat vector of length {d} with entries {rel}"
    )
    if isinstance(value, (bool, str, bytes)) or value is None:
        raise TypeError(f"{what}; got {value!r}")
    flat = None
    treedef: Any  # jaxlib's PyTreeDef: jaxlib ships no type stubs for it, so mypy cannot compare two
    leaves, treedef = jax.tree_util.tree_flatten(value)
    p_paths, p_treedef = jax.tree_util.tree_flatten_with_path(params32)
    if treedef == p_treedef and not all(np.shape(a) == np.shape(b) for a, (_, b) in zip(leaves, p_paths)):
        # a pytree like params with one number for a whole leaf ({"w": 0.1, "b": 0.01}): broadcast over
        # that leaf; a leaf of another shape is an error naming it (never a guess at the layout)
        for a, (path, b) in zip(leaves, p_paths):
            if np.ndim(a) != 0 and np.shape(a) != np.shape(b):
                raise ValueError(
                    f"{what}; got a leaf of shape {np.shape(a)} at {jax.tree_util.keystr(path)!r}, "
                    f"whose parameter has shape {np.shape(b)}"
                )
        leaves = [
            a if np.shape(a) == np.shape(b) else np.broadcast_to(_as_numeric_array(a, name), np.shape(b))
            for a, (_, b) in zip(leaves, p_paths)
        ]
    if treedef == p_treedef:
        arrays = [_as_numeric_array(a, name) for a in leaves]
        if any(a.dtype.kind == "b" for a in arrays):  # True is not a learning rate of 1.0
            raise TypeError(f"{what}; got a boolean leaf")
        flat = np.concatenate([np.ravel(a) for a in arrays]).astype(np.float64)
    else:
        try:
            arr = np.asarray(value)
        except Exception:  # noqa: BLE001 - a ragged or exotic pytree: reported below
            arr = None
        if (arr is None or arr.dtype.kind == "O") and not jax.tree_util.treedef_is_leaf(treedef):
            # a pytree that is not like params (other keys, a list for a tuple): say so, not "dtype object"
            raise ValueError(f"{what}; got a pytree of structure {treedef}, params have {p_treedef}")
        if arr is not None and arr.dtype.kind not in "iuf":
            raise TypeError(f"{what}; got dtype {arr.dtype}")
        if arr is not None:
            if arr.ndim == 0:
                flat = np.full((d,), arr, dtype=np.float64)
            elif arr.shape == (d,):
                flat = arr.astype(np.float64)
    if flat is None:
        shapes = [np.shape(a) for a in leaves]
        raise ValueError(f"{what}; got leaves of shapes {shapes}")
    ok = np.isfinite(flat) & ((flat >= 0) if allow_zero else (flat > 0))
    if not np.all(ok):
        raise ValueError(f"{what}; got {flat[~ok][0]!r} at flat position {int(np.flatnonzero(~ok)[0])}")
    # The engine runs in float32: a value that would overflow to inf there (or a beta that would
    # round to 0, whose inverse the engine multiplies by) is refused, not silently changed.
    low = 0.0 if allow_zero else float(np.finfo(np.float32).tiny)
    ok = (flat <= FLOAT32_MAX) & (flat >= low)
    if not np.all(ok):
        bad = int(np.flatnonzero(~ok)[0])
        raise ValueError(
            f"{name} must lie in the float32 range [{low:.4g}, {FLOAT32_MAX:.4g}] (the engine computes in "
            f"float32), got {flat[bad]!r} at flat position {bad}"
        )
    return jnp.asarray(flat, jnp.float32)


def _check_capacity(capacity: Any, n: int, q: float, sampling: str) -> int:
    if capacity is None:
        return default_capacity(n, q)
    if sampling == "masked":  # the masked engine has no buffer: a capacity would be ignored silently
        raise ValueError(
            f"capacity applies to sampling='packed' only (sampling='masked' draws a mask over all N "
            f"records and has no buffer); leave capacity None, got {capacity!r}"
        )
    cap = check_positive_int(capacity, "capacity")
    if cap > n:
        raise ValueError(
            f"capacity must be at most the number of records N={n} (a buffer of records per chunk), got {capacity!r}"
        )
    return cap


def _check_loss_call(loss: Callable[..., Any], params32: Any, data: Any, needs_key: bool) -> None:
    """Calls ``loss`` abstractly (no computation) on the params and one record's shapes, so a loss
    that fails or returns something other than a real scalar is reported before the run, in terms of
    its arguments rather than from inside the compiled engine."""
    record = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape[1:], a.dtype), data)
    args = (params32, record) + ((jax.random.key(0),) if needs_key else ())
    try:
        out = jax.eval_shape(loss, *args)
    except Exception as e:  # noqa: BLE001 - the user's loss failed on arguments of these shapes
        shapes = jax.tree_util.tree_map(lambda a: tuple(a.shape), (params32, record))
        raise ValueError(
            f"loss(params, record{', key' if needs_key else ''}) failed for params and one record of "
            f"shapes {shapes}: {type(e).__name__}: {e}"
        ) from e
    if not hasattr(out, "shape"):
        raise ValueError(f"loss must return a scalar for one record, got {type(out).__name__}")
    if out.shape != ():
        raise ValueError(f"loss must return a scalar for one record, got shape {out.shape}")
    if not jnp.issubdtype(out.dtype, jnp.floating):
        raise ValueError(
            f"loss must return a scalar for one record of floating-point dtype (to be "
            f"differentiated), got dtype {out.dtype}"
        )


# --------------------------------------------------------------------------------------------
# the pure core


def make_dpsgd_run(
    loss: Callable[..., Any],
    *,
    num_records: int,
    num_params: int,
    clip: float,
    sampling_rate: float,
    num_steps: int,
    capacity: int | None = None,
    loss_needs_key: bool = False,
    sampling: Sampling = "packed",
    unravel: Callable[[jax.Array], Any] | None = None,
    secure: bool = False,
) -> Callable[..., Any]:
    """A pure DP-SGD run for jit and vmap (e.g. hundreds of replicates as one compiled program).

    ``run(key, params0_flat, data, noise_multiplier, learning_rate_flat, beta_flat)`` returns
    ``(phi_trace (T, d), grad_trace (T, d), final_params (d,))`` with exactly the mechanism,
    randomness and numerics of :func:`dpsgd` (both run the same step function). It has no Python side effects
    and does no accounting: ``jax.jit(jax.vmap(run, in_axes=(0, 0, 0, None, None, None)))`` runs
    replicates, each with its own key, start and data set. The caller is responsible for valid
    arguments and for attaching a :class:`~dpposterior.privacy.PrivacySpent` to anything released.

    Privacy: as :func:`dpsgd` (Poisson sampling with rate ``sampling_rate``, per-example clipping of
    the beta-scaled gradient to ``clip``, Gaussian noise ``noise_multiplier * clip``; add/remove-one
    adjacency).

    Args:
      loss: ``loss(params, record)`` (or ``loss(params, record, key)`` with ``loss_needs_key``),
        a scalar per record; ``params`` is ``unravel(phi)`` (the flat vector when ``unravel`` is
        None).
      num_records: N, the leading axis of every data array.
      num_params: d.
      clip: C > 0 (static: compiled in).
      sampling_rate: q in (0, 1].
      num_steps: T >= 1.
      capacity: packed buffer size (default about qN + 5 sd; overflow is processed in chunks);
        ``"packed"`` sampling only.
      loss_needs_key: pass the step's loss key (one per step, shared by its records) to ``loss``.
      sampling: ``"packed"`` (O(qN) per step) or ``"masked"`` (O(N) per step, reference approach).
      unravel: maps the flat (d,) vector to the pytree ``loss`` expects.
      secure: draw the sampling bits and the Gaussian noise from the operating system's CSPRNG by a
        host callback inside every step (``key`` then seeds only the loss keys). Not for
        ``jax.vmap``: JAX refuses the callback there (NotImplementedError).

    Returns:
      ``run``: ``key`` is a raw uint32 (2,) or typed JAX key; ``learning_rate_flat`` and
      ``beta_flat`` are scalars or (d,) vectors; ``noise_multiplier`` a scalar.
    """
    loss = _check_loss(loss)
    n = check_positive_int(num_records, "num_records")
    if n > MAX_RECORDS:
        raise ValueError(f"num_records must be <= {MAX_RECORDS} (exact float32 Poisson sampling), got {n}")
    d = check_positive_int(num_params, "num_params")
    c = check_positive(clip, "clip")
    q = check_sampling_rate(sampling_rate)
    t_steps = check_positive_int(num_steps, "num_steps")
    sampling = _check_sampling(sampling)
    cap = _check_capacity(capacity, n, q, sampling)
    cfg = EngineConfig(
        loss=loss,
        loss_needs_key=_check_bool(loss_needs_key, "loss_needs_key"),
        num_records=n,
        num_params=d,
        sampling_rate=q,
        capacity=cap,
        sampling=sampling,
        unravel=unravel,
        secure=check_secure(secure),
    )

    def run(key, params0_flat, data, noise_multiplier, learning_rate_flat, beta_flat):
        check_data_shapes(data, n)
        phi0 = jnp.asarray(params0_flat, jnp.float32)
        if phi0.shape != (d,):
            raise ValueError(f"params0_flat must have shape ({d},), got {phi0.shape}")
        lr = jnp.broadcast_to(jnp.asarray(learning_rate_flat, jnp.float32), (d,))
        beta = jnp.broadcast_to(jnp.asarray(beta_flat, jnp.float32), (d,))
        sigma = jnp.asarray(noise_multiplier, jnp.float32)
        final, phis, gs = scan_steps(cfg, key, jnp.int32(0), phi0, data, sigma, jnp.float32(c), lr, beta, t_steps)
        return phis, gs, final

    return run


@functools.partial(jax.jit, static_argnums=(0, 1))
def _run_chunk(cfg, length, base_key, t0, n_valid, phi, data, sigma, clip, lr, beta, draws=None):
    # Module-level jit: compiled once per (loss, parameter structure, static settings, chunk length,
    # data shapes); sigma, clip, learning rate, beta, key and step offset are runtime values, and so
    # are secure mode's host draws.
    return scan_steps(cfg, base_key, t0, phi, data, sigma, clip, lr, beta, length, n_valid, draws)


# --------------------------------------------------------------------------------------------
# data on several XLA CPU devices


def _device_count(tree: Any) -> int:
    """The most devices any JAX array of ``tree`` is placed on (1 for numpy arrays and numbers)."""
    return max([len(a.sharding.device_set) for a in jax.tree.leaves(tree) if isinstance(a, jax.Array)], default=1)


def _spread_kernels(cfg: EngineConfig, args: tuple) -> tuple[str, ...]:
    """The custom kernels of ``cfg``'s step program (``_run_chunk``, one step) that must not run on
    several XLA CPU devices at once (:func:`dpposterior._batching.cpu_kernel_calls`); the host
    callbacks of secure mode are left out (a secure run on data sharded over several CPU devices,
    every step overflowing its buffer and so calling back, runs through)."""
    calls = cpu_kernel_calls(functools.partial(_run_chunk, cfg, 1), *args)
    return tuple(c for c in calls if "python_cpu_callback" not in c)


def _one_device_if_cpu_kernels(
    cfg: EngineConfig, base_key: Any, phi: Any, data: Any, sigma: Any, clip: Any, lr: Any, beta: Any
) -> tuple[Any, Any, Any, Any]:
    """``(phi, data, lr, beta)`` of the step program, gathered onto one device when they are spread over
    several XLA CPU devices and the program calls a jaxlib CPU kernel that would hang there; otherwise
    unchanged.

    Why: jaxlib's CPU LAPACK kernels (``lapack_spotrf_ffi`` for a batched Cholesky factorisation, ...)
    split their batch over XLA's intra-op thread pool and wait for the pieces; with every thread of that
    pool running a device's program, nothing runs the pieces and the process hangs at 0% CPU
    (for example a loss with a per-record Cholesky factorisation, records sharded over several
    CPU devices). The program is lowered from the
    arrays' shapes (no computation, a fraction of a second) only in that case: data on several CPU
    devices. Gathering costs a copy of the sharded arrays on one device (host memory on CPU) for the
    run; the program is then the one-device program, so the trace is the one an unsharded run gives.
    A note on stderr says so.
    """
    named = {"params": phi, "data": data, "learning_rate": lr, "beta": beta}
    spread = [(name, a) for name, a in named.items() if _device_count(a) > 1]
    if not spread:
        return phi, data, lr, beta
    devices: set[Any] = set().union(  # jax Devices: jaxlib ships no type stubs for them
        *(x.sharding.device_set for _, a in spread for x in jax.tree.leaves(a) if isinstance(x, jax.Array))
    )
    if any(dev.platform != "cpu" for dev in devices):
        return phi, data, lr, beta
    kernels = _spread_kernels(cfg, (base_key, jnp.int32(0), jnp.int32(1), phi, data, sigma, clip, lr, beta))
    if not kernels:
        return phi, data, lr, beta
    target = min(devices, key=lambda dev: dev.id)
    nbytes = sum(x.nbytes for _, a in spread for x in jax.tree.leaves(a) if isinstance(x, jax.Array))
    print(
        f"dpposterior: dpsgd's step program calls jaxlib CPU kernels ({', '.join(kernels)}) that hang the "
        f"process on several XLA CPU devices at once; running on one device ({target}) instead of "
        f"{len(devices)}, with a copy of the sharded {', '.join(n for n, _ in spread)} gathered there "
        f"({nbytes / 2**20:.1f} MiB more host memory during the run)",
        file=sys.stderr,
    )
    return tuple(jax.device_put(a, target) if _device_count(a) > 1 else a for a in (phi, data, lr, beta))


#: secure mode generates its draws on the host per chunk of steps: chunks are shortened so that
#: those arrays stay within about this many 4-byte words (16 MB).
SECURE_CHUNK_WORDS = 2**22


def _secure_chunk_length(length: int, cfg: EngineConfig) -> int:
    """The largest power of two <= ``length`` whose chunk of host draws fits SECURE_CHUNK_WORDS."""
    per_step = secure_bits_width(cfg) + WORDS_PER_PAIR * num_pairs(cfg.num_params)
    cap = max(1, SECURE_CHUNK_WORDS // per_step)
    return length if length <= cap else 1 << (cap.bit_length() - 1)


def _chunk_length(num_steps: int, chunk_steps: int | None) -> int:
    if chunk_steps is not None:
        return min(chunk_steps, num_steps)
    # Powers of two below the default: runs of similar length share one compiled program.
    return min(DEFAULT_CHUNK_STEPS, 1 << max(0, (num_steps - 1).bit_length()))


def _show_progress(progress: Any, work: int) -> bool:
    if progress is None:
        isatty = getattr(sys.stderr, "isatty", None)
        return bool(work >= PROGRESS_WORK and isatty is not None and isatty())
    return _check_bool(progress, "progress")


# --------------------------------------------------------------------------------------------
# the release


def dpsgd(
    loss: Callable[..., Any],
    params: Any,
    data: Any,
    *,
    noise_multiplier: float,
    clip: float,
    sampling_rate: float,
    num_steps: int,
    learning_rate: Any,
    delta: float,
    beta: Any = None,
    rng_key: Any = None,
    loss_needs_key: bool = False,
    capacity: int | None = None,
    sampling: Sampling = "packed",
    chunk_steps: int | None = None,
    progress: bool | None = None,
    accountant: Literal["pld", "rdp"] = "pld",
    secure: bool = False,
    checkpoint: str | os.PathLike | None = None,
    checkpoint_every: int = DEFAULT_CHECKPOINT_EVERY,
) -> DPSGDTrace:
    """Differentially private SGD with exact Poisson subsampling and optional preconditioning.

    Each step t: draw a Poisson sample (every record independently with probability q), compute
    per-example gradients g_i, scale by beta, clip each jointly to L2 norm C, sum, add Gaussian noise
    and undo the scaling:

        g~_t = (sum_i clip(beta * g_i, C) + sigma * C * xi_t) / beta,   xi_t ~ N(0, I_d)
        phi_{t+1} = phi_t - learning_rate * g~_t                         (elementwise)

    with clip(v, C) = v * min(1, C / ||v||) (exact for v = 0). The sum is NOT divided by the
    realised batch size (a data-dependent count); fold 1/(qN) into the learning rate if wanted.

    Privacy: each step includes every record independently with probability ``sampling_rate``
    (exact Poisson subsampling: the sample is never truncated or redrawn; samples larger than the
    buffer are processed in further chunks); each record's beta-scaled gradient is clipped to L2 norm
    ``clip``, so the sum has L2 sensitivity C under add/remove-one adjacency; Gaussian noise of std
    ``noise_multiplier * clip`` is added to the sum. Dividing by beta afterwards is post-processing.
    Add/remove-one adjacency, accounted by :func:`dpposterior.privacy.dpsgd_epsilon` over
    ``num_steps`` compositions (PLD by default). The whole trace (phi_t, g~_t) is released.
    A per-example gradient that is not finite (NaN or inf, e.g. a model that overflows), or whose
    beta-scaled squared norm overflows float32, is replaced by the zero vector before summing, so
    every record's contribution keeps norm <= C and the sum's sensitivity stays C (a record with a
    NaN gradient contributes exactly what an absent record does); nothing about this is counted or
    released.
    ``noise_multiplier=0`` is allowed for debugging: the release then carries
    ``privacy.spent.not_private(...)`` (epsilon = inf) and must not be presented as private.

    Threat model and randomness: with ``rng_key=None`` the seed comes from the operating system and
    is never stored (``privacy.seeded_by == "os"``); a given key is recorded as ``"user"`` (whoever
    knows it can subtract the noise). Step t uses ``fold_in(key, t)`` split into independent sampling,
    loss and noise keys, so noise is never reused across steps or keys. Noise is drawn in float32
    with JAX's threefry generator; the floating-point low-bit attack of Mironov (2012) is not
    mitigated. The dataset size N is treated as public.
    With ``secure=True`` every Poisson sampling bit and every Gaussian noise draw is read from the
    operating system's CSPRNG (``os.urandom``, :mod:`dpposterior.privacy.secure`): drawn on the host
    for each chunk of steps and fed to the same compiled step as inputs (the rare overflow chunks of
    a large sample read theirs by a host callback), through the same sampler and noise code
    (``privacy.seeded_by == "secure"``). Only the loss keys (Monte Carlo draws of a VI loss, not
    part of the mechanism) stay on an OS-seeded JAX key. It was measured no slower than the default
    mode (benchmarks/README.md, "Secure mode"); the noise is still floating-point noise (see the
    threat model in docs/user-guide.md).

    References: Abadi et al., "Deep Learning with Differential Privacy", CCS 2016 (DP-SGD);
    preconditioning as in Räisä, Jälkö & Honkela, "Noise-aware differentially private variational
    inference" (2024), section 13.2.

    Args:
      loss: ``loss(params, record) -> scalar`` for one record, or ``loss(params, record, key)``
        when ``loss_needs_key``. ``record`` has the structure of ``data`` with the record axis
        removed (a tuple of rows, or one row when ``data`` is a single array). The jitted program is
        cached per loss function object: pass the same function (not a fresh lambda) to reuse it.
      params: initial parameters, a pytree of float arrays (flattened internally, float32).
      data: an array or a tuple of arrays sharing the leading record axis N (1 <= N < 2^24); no NaN
        or inf, and every value representable in 32 bits (|x| <= 3.4e38; integers within int32).
        JAX arrays are used as they are; numpy arrays are copied to the device once (for data of
        several GB pass ``jax.device_put(x)`` and drop the numpy copy: the run's working memory is
        then bounded by the sampled batch, not by N; docs/reliability.md "Load"). Arrays sharded over
        several devices (``jax.device_put(x, NamedSharding(mesh, P("records")))``) stay sharded, except
        on several XLA CPU devices with a loss whose step calls jaxlib's CPU kernels (LAPACK: e.g.
        ``jnp.linalg.cholesky`` or ``jax.scipy.linalg.solve`` on a per-record matrix), which hang the
        process there (they wait on XLA's intra-op thread pool, whose threads all run the devices'
        programs). Then the data are copied onto one device for the run (the step program is lowered
        first, only in that case) and a note on stderr gives the extra host memory: the
        size of the sharded arrays. Running so, rather than refusing, loses no result: the trace is
        the unsharded run's, bit for bit; on CPU the devices share the host's memory, so only the copy
        is added.
      noise_multiplier: sigma >= 0 (0: not private, see above); sigma * C at most 5.3e36 (float32).
      clip: C > 0, the L2 bound on each beta-scaled per-example gradient (a normal float32).
      sampling_rate: q in (0, 1].
      num_steps: T >= 1.
      learning_rate: a number >= 0, or a pytree like params / flat (d,) vector (elementwise). A
        pytree's leaf is an array of its parameter's shape or one number for the whole leaf
        (``{"w": 0.1, "b": 0.01}``); the flat vector follows ``jax.flatten_util.ravel_pytree``'s order
        of params (dict keys sorted).
      delta: the delta in (0, 1) at which epsilon is reported.
      beta: preconditioning > 0 (pytree like params, as ``learning_rate``; flat (d,) vector or number);
        default ones.
      rng_key: None (seed from the OS), an int seed or a JAX key (reproduction only).
      loss_needs_key: pass one key per step (shared by all records of the step) to ``loss``, e.g.
        for Monte Carlo draws of a VI loss.
      capacity: records per packed chunk (default about qN + 5 sd, at least 16, at most N). Any
        capacity is exact; a small one only costs extra chunks. ``"packed"`` sampling only (an error
        with ``"masked"``, which has no buffer).
      sampling: ``"packed"`` (default, O(qN) work per step) or ``"masked"`` (all N per-example
        gradients masked by a Bernoulli(q) draw, O(N) per step: the reference implementation's
        approach, for benchmarks). Same accounting and the same distribution of results.
      chunk_steps: steps per compiled scan (default min(T rounded up to a power of two, 1000)).
      progress: show a tqdm bar (None: only for long runs on a terminal; False: never).
      accountant: ``"pld"`` (default) or ``"rdp"``.
      secure: draw all privacy randomness from the OS CSPRNG (see above); ``rng_key`` must then be
        None (ValueError otherwise).
      checkpoint: a file path (None: no checkpoints). The run writes its progress there every
        ``checkpoint_every`` steps (at chunk ends) and deletes the file when it finishes; if the file
        exists when the run starts, the run resumes from it (its settings must match, ValueError
        otherwise, and so must its noise source: the same ``rng_key`` for a run started with one,
        ``rng_key=None`` for one seeded by the OS, ``secure=True`` for a secure one) and continues
        the same noise stream, so the final trace equals an uninterrupted
        run's (in secure mode the resumed steps draw fresh OS noise instead). The privacy is that of
        the T released steps, accounted once. The file holds the noise key: keep it as secret as the
        data (:mod:`dpposterior.dpsgd.checkpoint`).
      checkpoint_every: steps between checkpoints (>= 1; rounded up to whole chunks).

    Returns:
      A :class:`DPSGDTrace` (phi_t before each update, g~_t, final parameters, settings and the
      :class:`~dpposterior.privacy.PrivacySpent`).

    Raises:
      TypeError: a loss that is not callable, non-numeric data or params, a non-integer step count.
      ValueError: any argument outside its allowed range (the message names it and the range), data
        with NaN/inf or beyond float32, empty data, data arrays with different numbers of records, a
        loss that fails on the params and one record or does not return a floating-point scalar
        (checked before the run), and a run whose iterates overflow float32 (checked after it: a
        post-processing of the release, never a silent NaN trace).
    """
    loss = _check_loss(loss)
    params32, phi0, unravel = _check_params(params)
    d = int(phi0.shape[0])
    data_j, n = _check_data(data)
    sigma = check_positive(noise_multiplier, "noise_multiplier", allow_zero=True)
    c = check_float32_positive(check_positive(clip, "clip"), "clip")
    if sigma * c > FLOAT32_MAX / 64:  # the noise std sigma*C times a normal draw must stay finite in float32
        raise ValueError(
            f"noise_multiplier * clip (the noise std) must be at most {FLOAT32_MAX / 64:.4g} so that "
            f"the float32 noise stays finite, got noise_multiplier={noise_multiplier!r}, clip={clip!r}"
        )
    q = check_sampling_rate(sampling_rate)
    t_steps = check_positive_int(num_steps, "num_steps")
    check_trace_memory(t_steps, 2 * d, "the trace (phi_t and g~_t)")
    lr = _per_param(learning_rate, "learning_rate", params32, d, allow_zero=True)
    beta_flat = jnp.ones((d,), jnp.float32) if beta is None else _per_param(beta, "beta", params32, d, allow_zero=False)
    delta = check_delta(delta)
    warn_if_delta_large(delta, n)
    needs_key = _check_bool(loss_needs_key, "loss_needs_key")
    sampling = _check_sampling(sampling)
    cap = _check_capacity(capacity, n, q, sampling)
    chunk_steps = None if chunk_steps is None else check_positive_int(chunk_steps, "chunk_steps")
    checkpoint_every = check_positive_int(checkpoint_every, "checkpoint_every")
    if checkpoint is not None:
        if not isinstance(checkpoint, (str, os.PathLike)):
            raise TypeError(
                f"checkpoint must be a file path (str or os.PathLike) or None, got {type(checkpoint).__name__}"
            )
        if Path(checkpoint).is_dir():
            raise ValueError(f"checkpoint must be a file path, got the directory {str(checkpoint)!r}")
    if accountant not in ("pld", "rdp"):
        raise ValueError(f"accountant must be one of ('pld', 'rdp'), got {accountant!r}")
    _check_loss_call(loss, params32, data_j, needs_key)
    show = _show_progress(progress, t_steps * (n if sampling == "masked" else cap))

    base_key, seeded_by = resolve_noise_source(rng_key, secure)
    secure = seeded_by == "secure"
    if secure:  # seeds only the loss keys; sampling bits and noise come from the OS CSPRNG
        base_key = jax.random.key_data(os_seeded_key())
    if sigma == 0.0:
        privacy = not_private(MECHANISM, reason="noise_multiplier=0: no noise was added")
    else:
        eps = dpsgd_epsilon(sigma, delta, q, t_steps, accountant)
        privacy = with_noise_tail(
            PrivacySpent(
                epsilon=eps,
                delta=delta,
                neighbouring="add_remove",
                accountant=accountant,
                mechanism=MECHANISM,
                noise_multiplier=sigma,
                sampling_rate=q,
                num_steps=t_steps,
                seeded_by=seeded_by,
                details=(("clip", c), ("sampling", "poisson")),
            ),
            t_steps * d,
        )

    cfg = EngineConfig(
        loss=loss,
        loss_needs_key=needs_key,
        num_records=n,
        num_params=d,
        sampling_rate=q,
        capacity=cap,
        sampling=sampling,
        unravel=TreeSpec.of(params32),
        secure=secure,
    )
    length = _chunk_length(t_steps, chunk_steps)
    if secure:
        length = _secure_chunk_length(length, cfg)
    phis = np.empty((t_steps, d), np.float32)
    grads = np.empty((t_steps, d), np.float32)
    sigma_j, clip_j = float32_at_least(sigma), jnp.float32(c)
    phi, start = phi0, 0
    ckpt_settings = None
    if checkpoint is not None:
        ckpt_settings = run_settings(
            loss=loss,
            num_records=n,
            num_params=d,
            sampling_rate=q,
            capacity=cap,
            sampling=sampling,
            noise_multiplier=sigma,
            clip=c,
            learning_rate=np.asarray(lr),
            beta=np.asarray(beta_flat),
            num_steps=t_steps,
            accountant=accountant,
            delta=delta,
            phi0=np.asarray(phi0),
            seeded_by=seeded_by,
            loss_needs_key=needs_key,
        )
        if Path(checkpoint).exists():
            ck = load_checkpoint(checkpoint, ckpt_settings)
            if not secure:
                if ck.base_key is None:  # load_checkpoint matched seeded_by: a run not in secure mode saved its key
                    raise ValueError(f"{checkpoint} holds no base key although the run is not in secure mode")
                if seeded_by == "user" and not np.array_equal(np.asarray(base_key, np.uint32).reshape(-1), ck.base_key):
                    raise ValueError(
                        f"{checkpoint} was written by a run started with another rng_key; resume "
                        "with the rng_key that run was started with, or delete the checkpoint to "
                        "start afresh with this key (rng_key=None resumes only a run that was "
                        "itself started with rng_key=None)"
                    )
                base_key = jnp.asarray(ck.base_key, jnp.uint32)
            start = ck.steps_done
            phis[:start], grads[:start] = ck.phis, ck.grads
            phi = jnp.asarray(ck.phi, jnp.float32)
    last_ckpt = start

    bar = None
    if show:
        from tqdm.auto import tqdm

        bar = tqdm(total=t_steps, unit="step", desc="dpsgd", file=sys.stderr)

    def finish_chunk(t0, p_out, g_out, n_valid, phi_after):
        nonlocal last_ckpt
        _store(phis, grads, t0, p_out, g_out, n_valid)
        if bar is not None:
            bar.update(n_valid)
        done = t0 + n_valid
        if ckpt_settings is not None and done < t_steps and done - last_ckpt >= checkpoint_every:
            save_checkpoint(
                checkpoint,
                Checkpoint(
                    settings=ckpt_settings,
                    steps_done=done,
                    phi=np.asarray(phi_after, np.float32),
                    phis=phis[:done],
                    grads=grads[:done],
                    base_key=None if secure else np.asarray(base_key, np.uint32).reshape(-1),
                ),
            )
            last_ckpt = done

    # data (or params) on several XLA CPU devices and a loss calling jaxlib's LAPACK kernels: one device
    phi, data_j, lr, beta_flat = _one_device_if_cpu_kernels(cfg, base_key, phi, data_j, sigma_j, clip_j, lr, beta_flat)
    if bar is not None and start:
        bar.update(start)
    try:
        pending = None
        for t0 in range(start, t_steps, length):
            n_valid = min(length, t_steps - t0)
            # secure mode: this chunk's sampling words and normals, fresh from the OS CSPRNG
            draws = host_secure_draws(cfg, length, n_valid) if secure else None
            phi, p_out, g_out = _run_chunk(
                cfg,
                length,
                base_key,
                jnp.int32(t0),
                jnp.int32(n_valid),
                phi,
                data_j,
                sigma_j,
                clip_j,
                lr,
                beta_flat,
                draws,
            )
            if pending is not None:  # copy the previous chunk while this one runs
                finish_chunk(*pending)
            pending = (t0, p_out, g_out, n_valid, phi)
        if pending is not None:
            finish_chunk(*pending)
        final = np.asarray(phi, np.float32)
    finally:
        if bar is not None:
            bar.close()
    _check_finite_run(phis, grads, final)
    if checkpoint is not None and Path(checkpoint).exists():
        Path(checkpoint).unlink()  # the run is complete: the file (it holds the noise key) goes

    return DPSGDTrace(
        params=phis,
        grads=grads,
        final_params=final,
        learning_rate=np.asarray(lr),
        beta=np.asarray(beta_flat),
        clip=c,
        noise_multiplier=sigma,
        sampling_rate=q,
        num_steps=t_steps,
        num_records=n,
        privacy=privacy,
        unravel=unravel,
    )


def _check_finite_run(phis: np.ndarray, grads: np.ndarray, final: np.ndarray) -> None:
    """Raises instead of returning a trace that overflowed (never a silent NaN or inf release).

    Looking at the released values is post-processing: the error reveals nothing more than the trace.
    """
    if np.isfinite(final).all() and np.isfinite(grads).all() and np.isfinite(phis).all():
        return
    bad = ~(np.isfinite(grads).all(axis=1) & np.isfinite(phis).all(axis=1))
    step = int(np.flatnonzero(bad)[0]) if bad.any() else len(phis)
    raise ValueError(
        f"the DP-SGD run overflowed float32: the parameters or noisy gradients became NaN or inf "
        f"at step {step} of {len(phis)}; lower learning_rate (or clip, noise_multiplier, the scale "
        "of the parameters) so that the iterates stay within float32"
    )


def _store(phis: np.ndarray, grads: np.ndarray, t0: int, p_out: Any, g_out: Any, n_valid: int) -> None:
    phis[t0 : t0 + n_valid] = np.asarray(p_out)[:n_valid]
    grads[t0 : t0 + n_valid] = np.asarray(g_out)[:n_valid]


# --------------------------------------------------------------------------------------------
# non-private diagnostics (never part of a release)


def per_example_gradients(
    loss: Callable[..., Any], params: Any, data: Any, *, key: Any = None, loss_needs_key: bool = False
) -> np.ndarray:
    """NON-PRIVATE DEBUG TOOL: the flat per-example gradients the engine computes, shape (N, d).

    Uses the engine's own ``vmap(grad)`` (unclipped, unscaled). Reveals per-record quantities:
    never release the result.
    """
    loss = _check_loss(loss)
    params32, phi0, _ = _check_params(params)
    data_j, n = _check_data(data)
    needs_key = _check_bool(loss_needs_key, "loss_needs_key")
    if needs_key and key is None:
        raise ValueError("key must be given when loss_needs_key=True")
    k = jax.random.wrap_key_data(resolve_key(key)[0]) if needs_key else jax.random.key(0)
    cfg = EngineConfig(
        loss=loss,
        loss_needs_key=needs_key,
        num_records=n,
        num_params=int(phi0.shape[0]),
        sampling_rate=1.0,
        capacity=n,
        sampling="masked",
        unravel=TreeSpec.of(params32),
    )
    g = np.asarray(per_example_grad_fn(cfg)(phi0, data_j, k))
    return g.T if params_major(cfg) else g


def clip_gradients(grads: Any, clip: float) -> np.ndarray:
    """Clips each row of ``grads`` (B, d) to L2 norm ``clip``: ``g * min(1, C / ||g||)``.

    The engine's clipping factor (exact for the zero row: no NaN). Rows with non-finite norms are
    returned as zeros, as the engine treats them.
    """
    c = check_positive(clip, "clip")
    g = jnp.asarray(grads, jnp.float32)
    if g.ndim != 2:
        raise ValueError(f"grads must have shape (B, d), got {g.shape}")
    sumsq = jnp.sum(jnp.square(g), axis=1)
    ok = jnp.isfinite(sumsq)
    scale = jnp.where(ok, clip_scale(sumsq, jnp.float32(c)), 0.0)
    return np.asarray(jnp.where(ok[:, None], g * scale[:, None], 0.0))
