"""Reports of coverage results: a table (CSV and Markdown) and a coverage plot per model.

The table holds numbers that depend only on the cells' configurations (no wall times), so a resumed
run writes the same table as an uninterrupted one. Wall times stay in the cell files.

The reports in a results folder show every finished cell in it (:func:`folder_results`), whichever
run computed it: a second run into the folder adds its cells to the tables and plots, beside the
earlier runs' (each row and line marked with the settings that tell it apart), instead of replacing
them.
"""

from __future__ import annotations

import csv
import io
import json
import os
import textwrap
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .._io import save_figure_atomic
from .methods import method_label
from .store import write_text_atomic

TABLE_COLUMNS = (
    "model",
    "epsilon",
    "method",
    "replicates",
    "repeats",
    "num_steps",
    "num_records",
    "sampling_rate",
    "delta",
    "seed",
    "rmse",
    "single_draw_rmse_mean",
    "single_draw_rmse_sd",
    "sharpness",
    "coverage_at_0.95",
    "marginal_rmse_max",
    "marginal_rmse",
    "central_coverage_0.9",
    "central_coverage_0.9_se",
    "replicates_used",
    "num_draws",
    "burn_in",
    "num_mc",
    "accountant",
    "method_options",
)

#: configuration fields that tell apart cells of one (model, epsilon, method), with their short names
#: in the Markdown table and the plots' legends (shown only where they differ, :func:`distinguishing_fields`).
_SETTING_NAMES = {
    "replicates": "K",
    "repeats": "R",
    "num_steps": "T",
    "num_records": "N",
    "sampling_rate": "q",
    "delta": "delta",
    "seed": "seed",
    "num_draws": "M",
    "burn_in": "burn_in",
    "num_mc": "num_mc",
    "accountant": "accountant",
    "method_options": "options",
}


#: characters of a plot's title (fontsize 10) per inch of figure width, a little under what fits.
_TITLE_CHARS_PER_INCH = 11

#: the settings a plot's title names when all its cells share them (else each line's legend names them).
_TITLE_FIELDS = {
    "num_records": "N = {}",
    "num_steps": "T = {}",
    "sampling_rate": "q = {:g}",
    "delta": "delta = {:g}",
    "repeats": "{} reference draws",
}


def _options_text(config: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted((config.get("method_options") or {}).items()))


def _setting(config: dict[str, Any], field: str) -> Any:
    return _options_text(config) if field == "method_options" else config[field]


def distinguishing_fields(results: Sequence[dict[str, Any]]) -> list[str]:
    """Configuration fields (of :data:`_SETTING_NAMES`) whose values differ between cells of the same
    model, epsilon and method label: without them such cells would be indistinguishable rows and lines."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in results:
        c = r["config"]
        groups.setdefault((c["model"], c["epsilon"], method_label(c)), []).append(c)
    return [f for f in _SETTING_NAMES if any(len({repr(_setting(c, f)) for c in cs}) > 1 for cs in groups.values())]


def _settings_text(config: dict[str, Any], fields: Sequence[str]) -> str:
    return ", ".join(f"{_SETTING_NAMES[f]} = {_setting(config, f)}" for f in fields)


def epsilon_texts(values: Any) -> dict[float, str]:
    """Each epsilon as short text (``f"{eps:g}"``: ``0.3``, ``1``, ``1e-05``), or as its exact shortest repr
    where the short texts of two different values would be alike (``0.3`` and ``0.1 * 3`` =
    ``0.30000000000000004``: two cells shown as "0.3" with different numbers)."""
    short = {float(v): f"{float(v):g}" for v in values}
    taken: dict[str, int] = {}
    for t in short.values():
        taken[t] = taken.get(t, 0) + 1
    return {v: t if taken[t] == 1 else repr(v) for v, t in short.items()}


def _coverage_at(record: dict[str, Any], nominal: float) -> float:
    alpha = np.asarray(record["alpha"])
    i = int(np.argmin(np.abs((1.0 - alpha) - nominal)))
    return float(record["coverage"][i])


def marginal_summary(record: dict[str, Any]) -> dict[str, Any]:
    """Per-coordinate calibration of a cell: its coordinates' names, marginal TARP RMSEs and 90% central
    coverages (with standard errors), as far as its file holds them.

    A cell computed before the engine recorded marginals has none, except that with one latent coordinate
    the marginal TARP statistic is the joint one (the same references, and a Euclidean distance in one
    dimension is the absolute difference), so its marginal RMSE is its joint RMSE; its central coverage
    needs the posterior draws, which no cell file keeps, and stays None.

    Returns:
      A dict with ``coordinates`` (names), ``rmse`` and ``rmse_source`` (``"stored"``, ``"joint (one
      coordinate)"`` or None), ``central``, ``central_se`` and ``level`` (None where not recorded).
    """
    names = list(record.get("coordinates") or [])
    if not names:
        names = [f"theta[{j}]" for j in range(len(record.get("sharpness_per_coordinate") or []))]
    source: str | None
    rmse, source = record.get("marginal_rmse"), "stored"
    if rmse is None:
        rmse, source = ([record["rmse"]], "joint (one coordinate)") if len(names) == 1 else (None, None)
    return {
        "coordinates": names,
        "rmse": rmse,
        "rmse_source": source,
        "central": record.get("central_coverage"),
        "central_se": record.get("central_coverage_se"),
        "level": record.get("central_coverage_level"),
    }


def _joined(values: Any) -> str:
    return "" if values is None else ";".join(repr(float(v)) for v in values)


def unique_cells(results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records with one per configuration (the first), in order: ``run_coverage`` returns a record per
    requested cell, so a list of configurations that names a cell twice gives its record twice."""
    seen: set[str] = set()
    out = []
    for r in results:
        key = json.dumps(r["config"], sort_keys=True)
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


def table_rows(results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per cell (a cell given twice is one row, :func:`unique_cells`), sorted by model, epsilon,
    method (columns :data:`TABLE_COLUMNS`, and the cell's configuration under ``"_config"``)."""
    rows = []
    for r in unique_cells(results):
        c = r["config"]
        m = marginal_summary(r)
        rows.append(
            {
                "model": c["model"],
                "epsilon": c["epsilon"],
                "method": method_label(c),
                "replicates": c["replicates"],
                "repeats": c["repeats"],
                "num_steps": c["num_steps"],
                "num_records": c["num_records"],
                "sampling_rate": c["sampling_rate"],
                "delta": c["delta"],
                "seed": c["seed"],
                "rmse": r["rmse"],
                "single_draw_rmse_mean": r["single_draw_rmse_mean"],
                "single_draw_rmse_sd": r["single_draw_rmse_sd"],
                "sharpness": r["sharpness"],
                "coverage_at_0.95": _coverage_at(r, 0.95),
                "marginal_rmse_max": max(m["rmse"]) if m["rmse"] else "",
                "marginal_rmse": _joined(m["rmse"]),
                "central_coverage_0.9": _joined(m["central"]),
                "central_coverage_0.9_se": _joined(m["central_se"]),
                "_marginal": m,
                "replicates_used": r["num_replicates_used"],
                "num_draws": c["num_draws"],
                "burn_in": c["burn_in"],
                "num_mc": c["num_mc"],
                "accountant": c["accountant"],
                "method_options": _options_text(c),
                "_config": c,
            }
        )
    rows.sort(
        key=lambda x: (
            x["model"],
            x["epsilon"],
            x["method"],
            x["seed"],
            x["replicates"],
            x["num_records"],
            x["num_steps"],
            x["sampling_rate"],
            x["delta"],
            x["method_options"],
        )
    )
    return rows


def table_csv(results: Sequence[dict[str, Any]]) -> str:
    """The table as CSV text (full float precision)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(TABLE_COLUMNS), lineterminator="\n", extrasaction="ignore")
    w.writeheader()
    for row in table_rows(results):
        w.writerow({k: repr(v) if isinstance(v, float) else v for k, v in row.items()})
    return buf.getvalue()


def table_markdown(results: Sequence[dict[str, Any]]) -> str:
    """The table as Markdown: RMSE of the repeat-averaged curve, single-draw RMSE mean +- sd, sharpness,
    and beside the joint figures the marginal ones: the worst coordinate's marginal TARP RMSE and the
    range of the coordinates' 90% central coverage; then a second table with every coordinate
    (:func:`marginal_table_markdown`).

    Cells of one model, epsilon and method that differ in another setting (N, T, q, delta, seed, options
    ...) get one more column per such setting (:func:`distinguishing_fields`), so no two rows look alike.
    A cell of one reference draw (R = 1) has no sd over draws and shows "(R = 1: no sd)" (the CSV and
    the cell file hold 0.0 there). A cell whose file holds no marginals (computed before they were
    recorded) shows "not in file" there (:func:`marginal_summary`).
    """
    extra = [f for f in distinguishing_fields(results) if f not in ("replicates", "repeats")]
    lines = [
        "| model | epsilon | method | K | R | "
        + "".join(f"{_SETTING_NAMES[f]} | " for f in extra)
        + "RMSE (averaged curve) | single-draw RMSE (mean ± sd) | sharpness (mean posterior sd) "
        "| coverage at 0.95 | worst marginal RMSE (coordinate) | 90% central coverage (lowest – highest) |",
        "|---|---:|---|---:|---:|" + "---|" * len(extra) + "---:|---:|---:|---:|---:|---:|",
    ]
    rows = table_rows(results)
    eps_text = epsilon_texts(r["epsilon"] for r in rows)
    for r in rows:
        k = (
            f"{r['replicates_used']}"
            if r["replicates_used"] == r["replicates"]
            else f"{r['replicates_used']} of {r['replicates']}"
        )
        settings = "".join(f"{_setting(r['_config'], f)} | " for f in extra)
        # one reference draw (R = 1) has no sd over draws: its file's 0.0 is not shown as "± 0.0000"
        sd = f" ± {r['single_draw_rmse_sd']:.4f}" if r["repeats"] > 1 else " (R = 1: no sd)"
        eps = eps_text[float(r["epsilon"])]
        lines.append(
            f"| {r['model']} | {eps} | {r['method']} | {k} | {r['repeats']} | {settings}"
            f"{r['rmse']:.4f} | {r['single_draw_rmse_mean']:.4f}{sd} | "
            f"{r['sharpness']:.4f} | {r['coverage_at_0.95']:.3f} | {worst_marginal_text(r['_marginal'])} | "
            f"{central_range_text(r['_marginal'])} |"
        )
    return "\n".join(lines) + "\n" + marginal_table_markdown(results)


def worst_marginal_text(m: dict[str, Any]) -> str:
    """``"0.0123 (w[3])"``: the largest marginal TARP RMSE of a :func:`marginal_summary` and its coordinate."""
    if not m["rmse"]:
        return "not in file"
    j = int(np.argmax(m["rmse"]))
    return f"{m['rmse'][j]:.4f} ({m['coordinates'][j]})"


def central_range_text(m: dict[str, Any]) -> str:
    """``"0.874 – 0.912"``: the lowest and highest 90% central coverage of a :func:`marginal_summary`."""
    if not m["central"]:
        return "not in file"
    lo, hi = min(m["central"]), max(m["central"])
    return f"{lo:.3f}" if len(m["central"]) == 1 else f"{lo:.3f} – {hi:.3f}"


def marginal_text(record: dict[str, Any]) -> str:
    """One line for logs: ``"worst marginal RMSE 0.0310 (w[3]), 90% central coverage 0.862 – 0.914"``."""
    m = marginal_summary(record)
    return f"worst marginal RMSE {worst_marginal_text(m)}, 90% central coverage {central_range_text(m)}"


def marginal_table_markdown(results: Sequence[dict[str, Any]]) -> str:
    """Markdown: one row per cell and latent coordinate with its marginal TARP RMSE (same references as the
    joint curve, averaged over the reference re-draws) and its 90% central coverage ± its binomial
    standard error. Cells whose files hold no marginals are named below the table instead."""
    extra = [f for f in distinguishing_fields(results) if f not in ("replicates", "repeats")]
    lines = [
        "",
        "Marginal calibration per latent coordinate (each coordinate's own TARP curve with the joint "
        "curve's references; the share of replicates whose truth lies in the equal-tailed 90% interval "
        "of that coordinate's draws):",
        "",
        "| model | epsilon | method | "
        + "".join(f"{_SETTING_NAMES[f]} | " for f in extra)
        + "coordinate | marginal RMSE | 90% central coverage ± se |",
        "|---|---:|---|" + "---|" * len(extra) + "---|---:|---:|",
    ]
    rows = table_rows(results)
    eps_text = epsilon_texts(r["epsilon"] for r in rows)
    missing = []
    for r in rows:
        m = r["_marginal"]
        if not m["rmse"] and not m["central"]:
            missing.append(f"{r['model']} epsilon {eps_text[float(r['epsilon'])]} {r['method']}")
            continue
        settings = "".join(f"{_setting(r['_config'], f)} | " for f in extra)
        for j, name in enumerate(m["coordinates"]):
            rmse = f"{m['rmse'][j]:.4f}" if m["rmse"] else "not in file"
            if m["rmse_source"] == "joint (one coordinate)":
                rmse += " (= joint)"
            central = (
                f"{m['central'][j]:.3f} ± {m['central_se'][j]:.3f}" if m["central"] else "not in file (no draws kept)"
            )
            lines.append(
                f"| {r['model']} | {eps_text[float(r['epsilon'])]} | {r['method']} | {settings}{name} | "
                f"{rmse} | {central} |"
            )
    if missing:
        lines += [
            "",
            "No marginals in the files of these cells (computed before the engine recorded them, and a "
            "cell file keeps no posterior draws to compute them from; the engine records them for every "
            "cell it computes): " + "; ".join(missing) + ".",
        ]
    return "\n".join(lines) + "\n"


def coverage_plot(results: Sequence[dict[str, Any]], path: str | os.PathLike, title: str = "") -> Path:
    """Coverage curves (one panel per epsilon, one line per cell, band = sd over reference re-draws).

    A line is labelled by its method, and by the settings that tell it apart from other cells of the same
    epsilon and method (:func:`distinguishing_fields`), e.g. ``grid, N = 100``, with its RMSE and, when
    replicates were excluded, how many it used (a panel's K is the configured number), and, for a cell of
    several latent coordinates whose file records them, its worst marginal TARP RMSE. A long title is
    wrapped to the figure's width."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    results = unique_cells(results)
    eps = sorted({r["config"]["epsilon"] for r in results})
    eps_text = epsilon_texts(eps)
    extra = distinguishing_fields(results)
    extra += [f for f in _TITLE_FIELDS if f not in extra and len({r["config"][f] for r in results}) > 1]

    def label(c: dict[str, Any]) -> str:
        return method_label(c) + (f", {_settings_text(c, extra)}" if extra else "")

    fig, axes = plt.subplots(1, len(eps), figsize=(4.2 * len(eps), 4.2), squeeze=False)
    for ax, e in zip(axes[0], eps):
        ax.plot([0, 1], [0, 1], color="k", lw=0.8, ls=":")
        for r in sorted((r for r in results if r["config"]["epsilon"] == e), key=lambda r: label(r["config"])):
            nominal = 1.0 - np.asarray(r["alpha"])
            cov = np.asarray(r["coverage"])
            sd = np.asarray(r["coverage_sd"])
            used, k = r["num_replicates_used"], r["config"]["replicates"]
            note = "" if used == k else f", {used} of {k} replicates"  # the panel's K is the configured one
            m = marginal_summary(r)
            if len(m["coordinates"]) > 1 and m["rmse"]:  # one coordinate: its marginal is the joint curve
                note += f"; worst marginal {max(m['rmse']):.3f}"
            (line,) = ax.plot(nominal, cov, lw=1.2, label=f"{label(r['config'])} (RMSE {r['rmse']:.3f}{note})")
            ax.fill_between(
                nominal, np.clip(cov - sd, 0, 1), np.clip(cov + sd, 0, 1), color=line.get_color(), alpha=0.2, lw=0
            )
        k = {r["config"]["replicates"] for r in results if r["config"]["epsilon"] == e}
        ax.set_title(f"epsilon = {eps_text[float(e)]} (K = {', '.join(map(str, sorted(k)))})", fontsize=9)
        ax.set_xlabel("credibility level 1 - alpha")
        ax.set_ylabel("expected coverage (TARP)")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_aspect("equal")
        ax.legend(fontsize=7, loc="upper left")
    if title:
        # wrapped to the figure's width: one line ran off both edges of a one-panel figure (4.2 in wide)
        fig.suptitle(textwrap.fill(title, width=int(_TITLE_CHARS_PER_INCH * fig.get_figwidth())), fontsize=10)
    fig.tight_layout()
    try:
        path = save_figure_atomic(fig, path)
    finally:
        plt.close(fig)
    return path


def write_reports(results: Sequence[dict[str, Any]], out: str | os.PathLike) -> dict[str, Path]:
    """Writes ``coverage_table.csv``, ``coverage_table.md`` and ``coverage_<model>.png`` under ``out``.

    A plot's title names the settings its cells share (N, T, q, delta, reference draws); a setting that
    differs between them is named in the legend instead (:func:`coverage_plot`). A cell given twice is shown
    once (:func:`unique_cells`)."""
    out = Path(out)
    results = unique_cells(results)
    paths = {
        "csv": write_text_atomic(out / "coverage_table.csv", table_csv(results)),
        "markdown": write_text_atomic(out / "coverage_table.md", table_markdown(results)),
    }
    for model in sorted({r["config"]["model"] for r in results}):
        rs = [r for r in results if r["config"]["model"] == model]
        shared = []
        for field, text in _TITLE_FIELDS.items():
            values = {r["config"][field] for r in rs}
            if len(values) == 1:
                shared.append(text.format(values.pop()))
        title = f"{model}: TARP coverage" + "".join(f", {t}" for t in shared)
        paths[f"plot:{model}"] = coverage_plot(rs, out / f"coverage_{model}.png", title=title)
    return paths


def folder_results(
    out: str | os.PathLike, results: Sequence[dict[str, Any]] = ()
) -> tuple[list[dict[str, Any]], list[str]]:
    """Every finished cell in the results folder ``out`` that this process can show, and notes on the
    files it leaves out.

    A file is left out, with a note naming it and why, when it is corrupted (:func:`.store.read_result`),
    when its method or model is not registered in this process (a method or model of the user's own from
    another process: register it to show the cell), or when it is stale (computed under other model settings or
    by another function of its method, :func:`.runner.stale_reason`: run its configuration again to
    recompute it). A file written under an older spelling of its options is read as its canonical
    configuration, and one record is kept per configuration (the canonical file's).

    Args:
      out: the results folder (:mod:`.store`).
      results: records that take the place of the folder's for their configurations (e.g. the records
        of the run that just wrote the folder); each is kept even if its file is gone.

    Returns:
      (records, notes): the records in file order, then any of ``results`` not found in the folder; one
      sentence per file left out.
    """
    from ..models.registry import MODELS
    from .config import CellConfig
    from .methods import METHODS
    from .runner import stale_reason
    from .store import CorruptResultError, canonical_view, read_result

    given = {r["config_digest"]: r for r in results}
    found: dict[str, dict[str, Any]] = {}
    notes: list[str] = []
    for path in sorted((Path(out) / "cells").glob("*/*.json")):
        try:
            rec = read_result(path)
        except CorruptResultError as e:
            method = _written_method(path)
            model = _written_method(path, "model")
            if method is not None and method not in METHODS:
                notes.append(
                    f"the tables and plots leave out {path}: its method {method!r} is not registered in "
                    "this process (register it, then write the reports again, to show the cell)"
                )
            elif model is not None and model not in MODELS:
                notes.append(
                    f"the tables and plots leave out {path}: its model {model!r} is not registered in "
                    "this process (register it with dpposterior.models.register_model, then write the "
                    "reports again, to show the cell)"
                )
            else:
                notes.append(f"the tables and plots leave out a file: {e}")
            continue
        rec = canonical_view(rec)
        digest = rec["config_digest"]
        if digest in given:
            found[digest] = given[digest]
            continue
        why = stale_reason(rec, CellConfig.from_dict(rec["config"]))
        if why is not None:
            notes.append(
                f"the tables and plots leave out {path}: it is stale ({why}); run its configuration "
                "again to recompute it"
            )
            continue
        if digest not in found or "config_as_written" in found[digest]:
            found[digest] = rec
    records = list(found.values()) + [r for d, r in given.items() if d not in found]
    return records, notes


def _written_method(path: Path, field: str = "method") -> str | None:
    """The method (or other ``field``) named in a cell file's configuration, or None if the file does not
    say."""
    try:
        method = json.loads(path.read_text(encoding="utf-8"))["config"][field]
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError):
        return None
    return method if isinstance(method, str) else None
