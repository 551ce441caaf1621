"""Figures from releases and posteriors (post-processing only: no data arrays of records)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def trace_plot(trace, path: str | Path, max_coords: int = 6, burn_in: float = 0.2) -> Path:
    """Plots the first coordinates of the released DP-SGD trace (mu and rho blocks) and the burn-in cut."""
    plt = _plt()
    phi = np.asarray(trace.phi)
    T, d = phi.shape
    n = d // 2
    k = min(max_coords, n)
    names = trace.layout.coordinate_names()
    fig, axes = plt.subplots(2, 1, figsize=(8, 5), sharex=True)
    for j in range(k):
        axes[0].plot(phi[:, j], lw=0.6, label=names[j])
        axes[1].plot(phi[:, n + j], lw=0.6)
    for ax, lab in zip(axes, ("mu (variational mean)", "rho (softplus^-1 of sd)")):
        ax.axvline(burn_in * T, color="k", ls="--", lw=0.8)
        ax.set_ylabel(lab)
    axes[0].legend(fontsize=7, ncol=3)
    axes[1].set_xlabel("DP-SGD step")
    fig.suptitle(f"Released DP-SGD trace ({trace.privacy.summary().split(';')[0]})", fontsize=9)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def calibration_plot(curves: dict[str, Any], path: str | Path, title: str = "") -> Path:
    """Reliability diagram: one line per method from ``validation.calibration_curve`` results."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5, 5))
    ax.plot([0, 1], [0, 1], color="k", lw=0.8, ls=":", label="perfect")
    for name, c in curves.items():
        ax.plot(np.asarray(c.mean_predicted), np.asarray(c.observed_frequency), marker="o", ms=3,
                label=f"{name} (cal. RMSE {float(c.rmse):.3f})")
    ax.set_xlabel("mean predicted probability (bin)")
    ax.set_ylabel("observed frequency (bin)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def interval_plot(rows: Sequence[dict[str, Any]], labels: Sequence[str], path: str | Path,
                  title: str = "") -> Path:
    """Side-by-side posterior intervals: ``rows[m][param] = (lo, mean, hi)`` for each method ``labels[m]``."""
    plt = _plt()
    params = list(rows[0].keys())
    fig, ax = plt.subplots(figsize=(7, max(3, 0.22 * len(params))))
    y = np.arange(len(params))
    for m, (r, lab) in enumerate(zip(rows, labels)):
        off = (m - (len(rows) - 1) / 2) * 0.25
        lo = np.array([r[p][0] for p in params])
        mid = np.array([r[p][1] for p in params])
        hi = np.array([r[p][2] for p in params])
        ax.errorbar(mid, y + off, xerr=[mid - lo, hi - mid], fmt="o", ms=2, lw=1, label=lab)
    ax.set_yticks(y, params, fontsize=6)
    ax.invert_yaxis()
    ax.legend(fontsize=8)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
