"""Figures from releases and posteriors (post-processing only: no data arrays of records).

Each function checks its arguments and its ``path`` before drawing, and writes the figure exactly to
``path``, in the format its suffix names (``.png``, ``.pdf``, ``.svg``, ...), atomically, creating the
path's folder if it is missing.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ._checks import check_output_file, check_positive_int, check_real


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _figure_path(path: Any) -> Path:
    """``path`` as a Path whose suffix names a format Matplotlib writes; refuses a folder, and a path whose
    folder cannot be created (a parent that is a file, a folder that is not writable)."""
    if not isinstance(path, (str, Path)):
        raise TypeError(f"path must be a file path (str or Path), got {type(path).__name__}")
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"path {str(path)!r} is a folder: give a file path such as {str(path / 'figure.png')!r}")
    check_output_file(path, "path")
    from matplotlib.backend_bases import FigureCanvasBase

    formats = FigureCanvasBase.get_supported_filetypes()
    fmt = path.suffix.lstrip(".").lower()
    if fmt not in formats:
        raise ValueError(
            f"path {str(path)!r} must end in the suffix of an image format, one of "
            f"{', '.join('.' + f for f in sorted(formats))}; got {path.suffix or 'no suffix'!r}"
        )
    return path


def _save(fig, path: Path) -> Path:
    """Writes the figure in the format of ``path``'s suffix, atomically, creating its folder if missing
    (as the package's other writers do: a missing folder was a ``FileNotFoundError`` after drawing)."""
    import io

    from ._io import write_bytes_atomic

    buf = io.BytesIO()
    try:
        fig.savefig(buf, dpi=110, format=path.suffix.lstrip(".").lower())
    finally:
        _plt().close(fig)
    return write_bytes_atomic(path, buf.getvalue())


def trace_plot(
    trace, path: str | Path, max_coords: int | None = None, burn_in: float = 0.2, names: Sequence[str] | None = None
) -> Path:
    """Plots the released DP-SGD trace (mu and rho blocks) and the burn-in cut.

    Args:
      trace: a DP-SGD release with ``phi`` (T, 2 d), ``layout`` and ``privacy`` (e.g. a ``DPVITrace``).
      path: the image file to write (its suffix names the format).
      max_coords: how many coordinates of each block to draw (>= 1); None (the default) draws every one.
        A legend names them when there are at most :data:`MAX_LEGEND` (the rest are drawn unnamed).
      burn_in: where to draw the burn-in cut, as a share of the trace in [0, 1).
      names: one label per latent coordinate (e.g. the design's column names) instead of the layout's
        ``w[3]``-style names.

    Returns:
      ``path`` as a Path.

    Raises:
      TypeError, ValueError: an argument of the wrong type or outside its range, or a path that is a
        folder or lacks an image suffix.
    """
    if not all(hasattr(trace, a) for a in ("phi", "layout", "privacy")):
        raise TypeError(
            f"trace must be a DP-SGD release with phi, layout and privacy (e.g. a DPVITrace), got "
            f"{type(trace).__name__}"
        )
    if max_coords is not None:
        check_positive_int(max_coords, "max_coords")
    b = check_real("burn_in", burn_in)
    if not 0.0 <= b < 1.0:
        raise ValueError(f"burn_in must be a share of the trace in [0, 1), got {burn_in!r}")
    path = _figure_path(path)
    plt = _plt()
    phi = np.asarray(trace.phi)
    T, d = phi.shape
    n = d // 2
    k = n if max_coords is None else min(max_coords, n)
    if names is None:
        names = trace.layout.coordinate_names()
    elif isinstance(names, str) or len(names) != n:
        raise ValueError(
            f"names must give one label per latent coordinate ({n}), got "
            f"{names if isinstance(names, str) else len(names)!r}"
        )
    legend = k <= MAX_LEGEND
    fig, axes = plt.subplots(2, 1, figsize=(8, 5), sharex=True)
    for j in range(k):
        axes[0].plot(phi[:, j], lw=0.6 if legend else 0.4, label=str(names[j]) if legend else None)
        axes[1].plot(phi[:, n + j], lw=0.6 if legend else 0.4)
    for ax, lab in zip(axes, ("mu (variational mean)", "rho (softplus^-1 of sd)")):
        ax.axvline(b * T, color="k", ls="--", lw=0.8)
        ax.set_ylabel(lab)
    if legend:
        axes[0].legend(fontsize=7, ncol=3)
    else:
        axes[0].set_title(f"all {k} coordinates (too many to name; the report's tables list them)", fontsize=8)
    axes[1].set_xlabel("DP-SGD step")
    fig.suptitle(f"Released DP-SGD trace ({trace.privacy.summary().split(';')[0]})", fontsize=9)
    fig.tight_layout()
    return _save(fig, path)


#: the most coordinates :func:`trace_plot` names in a legend
MAX_LEGEND = 12


def calibration_plot(curves: Mapping[str, Any], path: str | Path, title: str = "") -> Path:
    """Reliability diagram: one line per method from ``validation.calibration_curve`` results.

    Args:
      curves: a non-empty mapping from method name to a ``CalibrationResult``.
      path: the image file to write (its suffix names the format).
      title: the figure's title.

    Returns:
      ``path`` as a Path.

    Raises:
      TypeError, ValueError: ``curves`` not a non-empty mapping of calibration results, or a path that is
        a folder or lacks an image suffix.
    """
    if not isinstance(curves, Mapping):
        raise TypeError(
            f"curves must be a mapping from method name to a calibration_curve result, got {type(curves).__name__}"
        )
    if not curves:
        raise ValueError("curves is empty: give at least one calibration_curve result")
    for name, c in curves.items():
        if not all(hasattr(c, a) for a in ("mean_predicted", "observed_frequency", "rmse")):
            raise TypeError(f"curves[{name!r}] must be a validation.calibration_curve result, got {type(c).__name__}")
        if np.shape(c.mean_predicted) != np.shape(c.observed_frequency):
            raise ValueError(
                f"curves[{name!r}]: mean_predicted and observed_frequency must have the same shape, got "
                f"{np.shape(c.mean_predicted)} and {np.shape(c.observed_frequency)}"
            )
    path = _figure_path(path)
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5, 5))
    ax.plot([0, 1], [0, 1], color="k", lw=0.8, ls=":", label="perfect")
    for name, c in curves.items():
        ax.plot(
            np.asarray(c.mean_predicted),
            np.asarray(c.observed_frequency),
            marker="o",
            ms=3,
            label=f"{name} (cal. RMSE {float(c.rmse):.3f})",
        )
    ax.set_xlabel("mean predicted probability (bin)")
    ax.set_ylabel("observed frequency (bin)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


def interval_plot(
    rows: Sequence[Mapping[str, Any]],
    labels: Sequence[str],
    path: str | Path,
    title: str = "",
    xlabel: str = "posterior value (dot: mean; line: central interval)",
    reference: float | None = 0.0,
) -> Path:
    """Side-by-side posterior intervals: ``rows[m][param] = (lo, mean, hi)`` for each method ``labels[m]``.

    The parameters are those of every row, in order of first appearance; a method without a parameter
    has no interval on its line. The mean is a dot and may lie outside [lo, hi] (a skewed posterior's
    mean can lie outside a narrow central interval).

    Args:
      rows: one mapping per method from parameter name to ``(lo, mean, hi)``.
      labels: one name per row.
      path: the image file to write (its suffix names the format).
      title: the figure's title.
      xlabel: the x axis's label (what the values are, in which units).
      reference: a value drawn as a vertical line (0 by default: "no effect" for a coefficient), or
        None for none.

    Returns:
      ``path`` as a Path.

    Raises:
      TypeError, ValueError: no rows, a number of labels other than the number of rows, an entry that is
        not three finite real numbers with lo <= hi, or a path that is a folder or lacks an image suffix.
    """
    if isinstance(labels, str) or not isinstance(labels, Sequence) or not isinstance(rows, Sequence):
        raise TypeError(
            "rows and labels must be sequences (one mapping and one name per method), got "
            f"{type(rows).__name__} and {type(labels).__name__}"
        )
    if not rows:
        raise ValueError("rows is empty: give one mapping {parameter: (lo, mean, hi)} per method")
    if len(labels) != len(rows):
        raise ValueError(f"labels must name each row: got {len(rows)} row(s) and {len(labels)} label(s)")
    params: list[str] = []
    for m, r in enumerate(rows):
        if not isinstance(r, Mapping):
            raise TypeError(f"rows[{m}] must be a mapping {{parameter: (lo, mean, hi)}}, got {type(r).__name__}")
        for p, v in r.items():
            if np.shape(v) != (3,):
                raise ValueError(f"rows[{m}][{p!r}] must be three numbers (lo, mean, hi), got {v!r}")
            # each a real number (a string "0.5" or a bool was converted silently, a complex number failed in
            # float()), and finite (a NaN interval was left out of the figure without a word)
            lo, mid, hi = (check_real(f"each entry of rows[{m}][{p!r}] (lo, mean, hi)", x) for x in v)
            if not all(np.isfinite((lo, mid, hi))):
                raise ValueError(f"rows[{m}][{p!r}] must be finite numbers (lo, mean, hi), got {v!r}")
            if lo > hi:
                raise ValueError(f"rows[{m}][{p!r}] must have lo <= hi, got {v!r}")
            if p not in params:
                params.append(p)
    if not params:
        raise ValueError("rows hold no parameters")
    path = _figure_path(path)
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, max(3, 0.22 * len(params))))
    for m, (r, lab) in enumerate(zip(rows, labels)):
        off = (m - (len(rows) - 1) / 2) * 0.25
        y = np.array([j for j, p in enumerate(params) if p in r], dtype=float) + off
        los, mids, his = (np.array([float(r[p][i]) for p in params if p in r]) for i in range(3))
        (dots,) = ax.plot(mids, y, "o", ms=2, label=lab)
        ax.hlines(y, los, his, color=dots.get_color(), lw=1)
    if reference is not None:
        ax.axvline(check_real("reference", reference), color="0.5", lw=0.8, ls="--", zorder=0)
    ax.set_yticks(np.arange(len(params)), params, fontsize=6)
    ax.invert_yaxis()
    ax.set_xlabel(xlabel, fontsize=8)
    ax.legend(fontsize=8, loc="best")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return _save(fig, path)
