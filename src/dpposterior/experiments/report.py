"""Reports of coverage results: a table (CSV and Markdown) and a coverage plot per model.

The table holds numbers that depend only on the cells' configurations (no wall times), so a resumed
run writes the same table as an uninterrupted one. Wall times stay in the cell files.
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .._io import save_figure_atomic
from .methods import method_label
from .store import write_text_atomic

TABLE_COLUMNS = ("model", "epsilon", "method", "replicates", "repeats", "num_steps", "num_records",
                 "sampling_rate", "delta", "seed", "rmse", "single_draw_rmse_mean", "single_draw_rmse_sd",
                 "sharpness", "coverage_at_0.95", "replicates_used")


def _coverage_at(record: dict[str, Any], nominal: float) -> float:
    alpha = np.asarray(record["alpha"])
    i = int(np.argmin(np.abs((1.0 - alpha) - nominal)))
    return float(record["coverage"][i])


def table_rows(results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per cell, sorted by model, epsilon, method (columns :data:`TABLE_COLUMNS`)."""
    rows = []
    for r in results:
        c = r["config"]
        rows.append({
            "model": c["model"], "epsilon": c["epsilon"], "method": method_label(c), "replicates": c["replicates"],
            "repeats": c["repeats"], "num_steps": c["num_steps"], "num_records": c["num_records"],
            "sampling_rate": c["sampling_rate"], "delta": c["delta"], "seed": c["seed"], "rmse": r["rmse"],
            "single_draw_rmse_mean": r["single_draw_rmse_mean"], "single_draw_rmse_sd": r["single_draw_rmse_sd"],
            "sharpness": r["sharpness"], "coverage_at_0.95": _coverage_at(r, 0.95),
            "replicates_used": r["num_replicates_used"],
        })
    rows.sort(key=lambda x: (x["model"], x["epsilon"], x["method"], x["seed"], x["replicates"]))
    return rows


def table_csv(results: Sequence[dict[str, Any]]) -> str:
    """The table as CSV text (full float precision)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(TABLE_COLUMNS), lineterminator="\n")
    w.writeheader()
    for row in table_rows(results):
        w.writerow({k: repr(v) if isinstance(v, float) else v for k, v in row.items()})
    return buf.getvalue()


def table_markdown(results: Sequence[dict[str, Any]]) -> str:
    """The table as Markdown: RMSE of the repeat-averaged curve, single-draw RMSE mean +- sd, sharpness."""
    lines = ["| model | epsilon | method | K | R | RMSE (averaged curve) | single-draw RMSE (mean ± sd) "
             "| sharpness (mean posterior sd) | coverage at 0.95 |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|"]
    for r in table_rows(results):
        k = f"{r['replicates_used']}" if r["replicates_used"] == r["replicates"] else \
            f"{r['replicates_used']} of {r['replicates']}"
        lines.append(f"| {r['model']} | {r['epsilon']:g} | {r['method']} | {k} | {r['repeats']} | {r['rmse']:.4f} | "
                     f"{r['single_draw_rmse_mean']:.4f} ± {r['single_draw_rmse_sd']:.4f} | {r['sharpness']:.4f} | "
                     f"{r['coverage_at_0.95']:.3f} |")
    return "\n".join(lines) + "\n"


def coverage_plot(results: Sequence[dict[str, Any]], path: str | os.PathLike, title: str = "") -> Path:
    """Coverage curves (one panel per epsilon, one line per method, band = sd over reference re-draws)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    eps = sorted({r["config"]["epsilon"] for r in results})
    fig, axes = plt.subplots(1, len(eps), figsize=(4.2 * len(eps), 4.2), squeeze=False)
    for ax, e in zip(axes[0], eps):
        ax.plot([0, 1], [0, 1], color="k", lw=0.8, ls=":")
        for r in sorted((r for r in results if r["config"]["epsilon"] == e), key=lambda r: method_label(r["config"])):
            nominal = 1.0 - np.asarray(r["alpha"])
            cov = np.asarray(r["coverage"])
            sd = np.asarray(r["coverage_sd"])
            line, = ax.plot(nominal, cov, lw=1.2, label=f"{method_label(r['config'])} (RMSE {r['rmse']:.3f})")
            ax.fill_between(nominal, np.clip(cov - sd, 0, 1), np.clip(cov + sd, 0, 1), color=line.get_color(),
                            alpha=0.2, lw=0)
        k = {r["config"]["replicates"] for r in results if r["config"]["epsilon"] == e}
        ax.set_title(f"epsilon = {e:g} (K = {', '.join(map(str, sorted(k)))})", fontsize=9)
        ax.set_xlabel("credibility level 1 - alpha")
        ax.set_ylabel("expected coverage (TARP)")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_aspect("equal")
        ax.legend(fontsize=7, loc="upper left")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    try:
        path = save_figure_atomic(fig, path)
    finally:
        plt.close(fig)
    return path


def write_reports(results: Sequence[dict[str, Any]], out: str | os.PathLike) -> dict[str, Path]:
    """Writes ``coverage_table.csv``, ``coverage_table.md`` and ``coverage_<model>.png`` under ``out``."""
    out = Path(out)
    paths = {"csv": write_text_atomic(out / "coverage_table.csv", table_csv(results)),
             "markdown": write_text_atomic(out / "coverage_table.md", table_markdown(results))}
    for model in sorted({r["config"]["model"] for r in results}):
        rs = [r for r in results if r["config"]["model"] == model]
        c = rs[0]["config"]
        title = (f"{model}: TARP coverage, N = {c['num_records']}, T = {c['num_steps']}, q = {c['sampling_rate']:g}, "
                 f"delta = {c['delta']:g}, {c['repeats']} reference draws")
        paths[f"plot:{model}"] = coverage_plot(rs, out / f"coverage_{model}.png", title=title)
    return paths
