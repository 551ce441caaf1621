"""Validation helpers for the public boundary.

Every public function validates its arguments here and raises a ``ValueError`` or ``TypeError``
whose message names the argument, what it was, and what is allowed. Nothing is silently clamped.
"""

from __future__ import annotations

import math
import numbers
import os
from pathlib import Path
from typing import Any

import numpy as np

#: the largest finite float32: JAX computes in float32 (x64 off), and larger values become inf.
FLOAT32_MAX = float(np.finfo(np.float32).max)
#: the smallest normal float32 > 0: smaller positive values become 0 or lose precision in float32.
FLOAT32_TINY = float(np.finfo(np.float32).tiny)


def _is_real_number(x: Any) -> bool:
    if isinstance(x, bool):
        return False
    if isinstance(x, numbers.Real):
        return True
    # numpy / jax scalars (0-d arrays)
    shape = getattr(x, "shape", None)
    return shape == () and hasattr(x, "dtype") and getattr(x.dtype, "kind", "") in "fiu"


def check_real(name: str, value: Any) -> float:
    """Returns ``value`` as a float, or raises TypeError if it is not a real number."""
    if not _is_real_number(value):
        raise TypeError(f"{name} must be a real number, got {value!r} of type {type(value).__name__}")
    return float(value)


def check_epsilon(epsilon: Any, name: str = "epsilon") -> float:
    """Epsilon must be finite and > 0."""
    eps = check_real(name, epsilon)
    if not math.isfinite(eps) or eps <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {epsilon!r}")
    return eps


def check_delta(delta: Any, name: str = "delta", allow_zero: bool = False) -> float:
    """Delta must lie in (0, 1) (or [0, 1) when ``allow_zero``)."""
    d = check_real(name, delta)
    low_ok = d >= 0 if allow_zero else d > 0
    if not math.isfinite(d) or not low_ok or d >= 1:
        allowed = "[0, 1)" if allow_zero else "(0, 1)"
        raise ValueError(f"{name} must lie in {allowed}, got {delta!r}")
    return d


class LargeDeltaWarning(UserWarning):
    """delta of at least 1/N: a guarantee that allows releasing one whole record."""


def warn_if_delta_large(delta: float, num_records: int) -> None:
    """Warns when ``delta >= 1 / num_records``.

    An (epsilon, delta) guarantee with delta >= 1/N is met by a mechanism that publishes a random
    record in full with probability delta N / N = delta, so it protects no one in particular; the usual
    choice is delta well below 1/N (e.g. 1/N^1.1 or 1e-5 for N up to 10^5).
    """
    if num_records > 0 and delta >= 1.0 / num_records:
        import warnings

        warnings.warn(
            f"delta={delta:g} is at least 1/N = 1/{num_records} = {1.0 / num_records:.3g}: such a guarantee "
            "allows a release that publishes a random record in full; choose delta well below 1/N",
            LargeDeltaWarning,
            stacklevel=3,
        )


def check_sampling_rate(q: Any, name: str = "sampling_rate") -> float:
    """The Poisson sampling rate must lie in (0, 1]."""
    v = check_real(name, q)
    if not math.isfinite(v) or v <= 0 or v > 1:
        raise ValueError(f"{name} must lie in (0, 1], got {q!r}")
    return v


def check_positive_int(value: Any, name: str, minimum: int = 1) -> int:
    """An integer >= ``minimum`` (bools are refused)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        # numpy integer scalars are numbers.Integral; floats such as 1e4 are refused on purpose.
        raise TypeError(f"{name} must be an integer >= {minimum}, got {value!r} of type {type(value).__name__}")
    if int(value) < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_positive(value: Any, name: str, allow_zero: bool = False) -> float:
    """A finite real > 0 (or >= 0 when ``allow_zero``)."""
    v = check_real(name, value)
    ok = v >= 0 if allow_zero else v > 0
    if not math.isfinite(v) or not ok:
        rel = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be a finite number {rel}, got {value!r}")
    return v


def check_float32_array(name: str, arr: np.ndarray, private: bool = False) -> None:
    """Refuses values that would change when JAX casts ``arr`` to 32 bits (its default precision).

    A float beyond the float32 range would become inf, and a 64-bit integer outside the 32-bit range
    would wrap around; both would corrupt the computation silently, so they are errors. With
    ``private`` (the records) the message counts the offending values instead of quoting them: an
    error message is not a release, and a value of the data must not reach logs through it.
    """
    if arr.size == 0:
        return
    if arr.dtype.kind == "f" and arr.dtype.itemsize > 4:
        with np.errstate(invalid="ignore"):
            big = np.abs(arr) > FLOAT32_MAX
        if big.any():
            got = (
                f"{int(big.sum())} value(s) lie beyond it (values of the data are not quoted)"
                if private
                else f"got {arr[big].flat[0]!r}"
            )
            raise ValueError(
                f"{name} must lie within the float32 range |x| <= {FLOAT32_MAX:.4g} (JAX computes in "
                f"float32 and larger values become inf), {got}"
            )
    elif arr.dtype.kind in "iu" and arr.dtype.itemsize > 4:
        info = np.iinfo(np.int32 if arr.dtype.kind == "i" else np.uint32)
        outside = (arr < info.min) | (arr > info.max)
        if outside.any():
            got = (
                f"{int(outside.sum())} value(s) lie outside it (values of the data are not quoted)"
                if private
                else f"got values in [{arr.min()}, {arr.max()}]"
            )
            raise ValueError(
                f"{name} must lie within the 32-bit integer range [{info.min}, {info.max}] (JAX "
                f"computes in 32 bits and larger integers wrap around), {got}"
            )


#: the largest Laplace scale whose float32 noise stays finite: a float32 Exponential(1) draw is at
#: most about 17 (-log of the smallest uniform), so a margin of 64 is safe.
MAX_LAPLACE_SCALE = float(np.finfo(np.float32).max) / 64


def check_laplace_scale(scale: float, what: str) -> None:
    """Raises ValueError if float32 Laplace noise of this scale could overflow to inf."""
    if not (math.isfinite(scale) and 0 < scale <= MAX_LAPLACE_SCALE):
        raise ValueError(
            f"the Laplace noise scale {what} = {scale:.4g} must be at most {MAX_LAPLACE_SCALE:.4g} "
            "(noise is drawn in float32 and would overflow to inf); raise epsilon or narrow the bounds"
        )


def check_float32_positive(value: float, name: str) -> float:
    """A value already checked finite and > 0 that must also stay finite and > 0 in float32."""
    if not FLOAT32_TINY <= value <= FLOAT32_MAX:
        raise ValueError(
            f"{name} must lie in [{FLOAT32_TINY:.4g}, {FLOAT32_MAX:.4g}] (the positive normal float32 "
            f"range: the computation runs in float32), got {value!r}"
        )
    return value


def machine_memory_bytes() -> int | None:
    """This machine's physical memory in bytes (None where the OS does not say)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def check_trace_memory(
    num_steps: int, values_per_step: int, what: str, name: str = "num_steps", unit: str = "steps"
) -> None:
    """Refuses, before any computation, a run whose released trace (``num_steps`` x ``values_per_step``
    float32 values) would not fit: more than half of this machine's memory (the run holds it on the
    device and again on the host). A huge step count otherwise ran the accountant for minutes and then
    failed to allocate, or took the machine's memory."""
    need = 4 * int(num_steps) * int(values_per_step)
    total = machine_memory_bytes()
    if total is not None and need > total // 2:
        raise ValueError(
            f"{name}={num_steps} is too large for this machine: {what} would hold {num_steps} x "
            f"{values_per_step} float32 values ({need / 2**30:.3g} GiB), more than half its memory "
            f"({total / 2**30:.3g} GiB); use at most {total // 2 // (4 * int(values_per_step))} {unit}"
        )


#: seeds are kept below 2**32: JAX (x64 off) keeps only 32 bits of an int seed, so a larger seed, or a
#: negative one, would silently give the same noise as another seed.
SEED_LIMIT = 2**32


def check_seed(seed: Any, name: str = "seed") -> int | None:
    """None, or an integer seed in [0, 2**32) (larger or negative ones would alias other seeds in JAX)."""
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"{name} must be None or an integer in [0, 2**32), got {seed!r} of type {type(seed).__name__}")
    if not 0 <= int(seed) < SEED_LIMIT:
        raise ValueError(
            f"{name} must be an integer in [0, 2**32) (JAX keeps only 32 bits of a seed, so another "
            f"one would silently repeat the noise of a seed in that range), got {seed!r}"
        )
    return int(seed)


def _check_creatable(p: Path, name: str) -> None:
    """Raises ValueError unless ``p``'s nearest existing ancestor (or itself) is a writable folder."""
    existing = p
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise ValueError(f"{name} {str(p)!r} cannot be created: {str(existing)!r} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"{name} {str(p)!r} cannot be written: the folder {str(existing)!r} is not writable")


def check_output_dir(path: Any, name: str = "out") -> Path:
    """A folder that exists or can be created, checked before any computation so that no result is lost.

    Nothing is created here.

    Raises:
      TypeError: ``path`` is not a str or os.PathLike.
      ValueError: ``path`` is a file, a parent of it is a file, or the nearest existing folder is not
        writable.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{name} must be a folder path (str or os.PathLike), got {type(path).__name__}")
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise ValueError(f"{name} {str(p)!r} is a file, not a folder: give a folder (it is created if missing)")
    _check_creatable(p, name)
    return p


def check_output_file(path: Any, name: str) -> Path:
    """A file that can be written: not a folder, and its folder exists or can be created.

    Raises:
      TypeError: ``path`` is not a str or os.PathLike.
      ValueError: ``path`` is a folder, a parent of it is a file, or the nearest existing folder is not
        writable.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{name} must be a file path (str or os.PathLike), got {type(path).__name__}")
    p = Path(path)
    if p.is_dir():
        raise ValueError(f"{name} {str(p)!r} is a folder, not a file")
    if not p.exists():
        _check_creatable(p, name)
    elif not os.access(p, os.W_OK):
        raise ValueError(f"{name} {str(p)!r} cannot be written: the file is not writable")
    return p
