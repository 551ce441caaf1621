"""Atomic file writes (a temporary file beside the target, fsync, then rename), checksummed
``.npz`` release files, and the field checks the loaded DP-SGD releases share."""

from __future__ import annotations

import hashlib
import io
import math
import os
import tempfile
from pathlib import Path
from typing import Any, Callable

import numpy as np


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> Path:
    """Writes ``data`` to ``path`` so that readers see either the old file or the whole new one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix="." + path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def save_figure_atomic(fig, path: str | os.PathLike, dpi: int = 110) -> Path:
    """Saves a Matplotlib figure as PNG to ``path`` atomically (readers never see a partial file)."""
    buf = io.BytesIO()
    fig.savefig(buf, dpi=dpi, format="png")
    return write_bytes_atomic(path, buf.getvalue())


def array_digest(arrays: dict[str, np.ndarray], meta: str) -> str:
    """SHA-256 over the named arrays (name, dtype, shape, bytes; in name order) and the metadata text."""
    h = hashlib.sha256()
    for k in sorted(arrays):
        a = np.ascontiguousarray(arrays[k])
        h.update(k.encode())
        h.update(str(a.dtype).encode())
        h.update(str(a.shape).encode())
        h.update(a.tobytes())
    h.update(meta.encode())
    return h.hexdigest()


def write_checked_npz(
    path: str | os.PathLike, arrays: dict[str, np.ndarray], meta: str, *, compress: bool = True
) -> Path:
    """Writes ``arrays`` and the metadata text to one ``.npz`` with a SHA-256 checksum, atomically."""
    buf = io.BytesIO()
    save: Callable[..., None] = np.savez_compressed if compress else np.savez  # arrays by keyword
    save(
        buf,
        metadata=np.frombuffer(meta.encode(), dtype=np.uint8),
        checksum=np.frombuffer(array_digest(arrays, meta).encode(), dtype=np.uint8),
        **arrays,
    )
    return write_bytes_atomic(path, buf.getvalue())


def read_checked_npz(path: str | os.PathLike, names: tuple[str, ...], what: str) -> tuple[str, dict[str, np.ndarray]]:
    """Reads a file of :func:`write_checked_npz`: (metadata text, the arrays ``names``), checksum verified.

    Raises:
      FileNotFoundError: no such file.
      ValueError: unreadable (truncated, corrupted), arrays missing, or the checksum does not match.
    """
    path = Path(path)
    raw = path.read_bytes()  # FileNotFoundError propagates as is
    try:
        with np.load(io.BytesIO(raw), allow_pickle=False) as z:
            contents = {k: z[k] for k in z.files}
    except Exception as e:  # noqa: BLE001 - zipfile.BadZipFile, EOFError, ValueError, OSError ...
        raise ValueError(f"{path} is not a readable {what} file (truncated or corrupted?): {e}") from e
    missing = [k for k in names + ("metadata", "checksum") if k not in contents]
    if missing:
        raise ValueError(f"{path} is not a {what} file: missing {missing}")
    meta_text = contents["metadata"].tobytes().decode(errors="replace")
    arrays = {k: contents[k] for k in names}
    if contents["checksum"].tobytes().decode(errors="replace") != array_digest(arrays, meta_text):
        raise ValueError(f"{path}: checksum mismatch — the {what} file was modified or corrupted")
    return meta_text, arrays


def check_dpsgd_fields(
    meta: dict[str, Any], arrays: dict[str, np.ndarray], counts: tuple[tuple[str, int], ...]
) -> None:
    """Checks the fields every loaded DP-SGD release shares: real finite arrays, the integer ``counts``
    (name, lowest allowed value), and the finite clip > 0, noise multiplier >= 0, sampling rate in (0, 1].

    Raises:
      ValueError: naming the first field that fails.
    """
    for name, a in arrays.items():
        if a.dtype.kind not in "fiu":
            raise ValueError(f"array {name!r} must hold real numbers, got dtype {a.dtype}")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"array {name!r} contains NaN or inf")
    for name, low in counts:
        v = meta[name]
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {v!r}")
    for name in ("clip", "noise_multiplier", "sampling_rate"):
        v = meta[name]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ValueError(f"{name} must be a finite number, got {v!r}")
    if meta["clip"] <= 0 or meta["noise_multiplier"] < 0 or not 0 < meta["sampling_rate"] <= 1:
        raise ValueError(
            f"need clip > 0, noise_multiplier >= 0 and sampling_rate in (0, 1], got "
            f"{meta['clip']!r}, {meta['noise_multiplier']!r}, {meta['sampling_rate']!r}"
        )
