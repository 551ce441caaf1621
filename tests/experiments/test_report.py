"""Tests of the coverage reports' tables and plots on hand-made records (no computation).

``run_coverage`` returns one record per requested configuration, so a list that
named a cell twice (``[grid, naive, grid]``) gave ``write_reports(summary.results, out)`` the record
twice: two identical table rows and two plot lines for one cell. And a cell of one reference draw
(R = 1) showed its undefined sd over draws as "± 0.0000".
"""

from __future__ import annotations

import csv

import numpy as np

from dpposterior.experiments import CellConfig, report, write_reports
from dpposterior.experiments.report import table_csv, table_markdown

SMALL = dict(replicates=4, num_steps=20, num_records=20, num_draws=50)


def _record(method="grid", rmse=0.1, repeats=2):
    c = CellConfig("beta-bernoulli", 1.0, method, repeats=repeats, **SMALL)
    alpha = np.linspace(0, 1, 5)
    return {
        "config": c.to_dict(),
        "config_digest": c.digest(),
        "alpha": alpha.tolist(),
        "coverage": (1 - alpha).tolist(),
        "coverage_sd": [0.0] * 5,
        "rmse": rmse,
        "single_draw_rmse_mean": rmse,
        "single_draw_rmse_sd": 0.01 if repeats > 1 else 0.0,
        "sharpness": 0.3,
        "num_replicates_used": 4,
    }


def test_a_cell_given_twice_is_one_row_and_one_line(tmp_path, monkeypatch):
    grid, naive = _record("grid", 0.1), _record("naive", 0.2)
    results = [grid, naive, dict(grid)]  # as run_coverage([g, n, g]).results
    md = table_markdown(results)
    assert md.count("| grid |") == 1 and md.count("| naive |") == 1, md
    rows = list(csv.DictReader(table_csv(results).splitlines()))
    assert [r["method"] for r in rows] == ["grid", "naive"]
    assert [float(r["rmse"]) for r in rows] == [0.1, 0.2]  # the table holds the records' numbers
    labels = []

    def capture(fig, path, dpi=110):
        labels.extend(t.get_text() for ax in fig.axes for t in ax.get_legend().get_texts())
        return path

    monkeypatch.setattr(report, "save_figure_atomic", capture)
    write_reports(results, tmp_path)
    assert labels == ["grid (RMSE 0.100)", "naive (RMSE 0.200)"]
    assert (tmp_path / "coverage_table.md").read_text() == md


def test_one_reference_draw_shows_no_sd():
    md = table_markdown([_record("grid", 0.1, repeats=1), _record("naive", 0.2, repeats=3)])
    assert "| 0.1000 | 0.1000 (R = 1: no sd) |" in md, md
    assert "| 0.2000 | 0.2000 ± 0.0100 |" in md, md
    assert "± 0.0000" not in md


def _captured_figures(monkeypatch):
    """Figures that the reports would save, drawn (so that their text has a size), instead of saved."""
    figures = []

    def capture(fig, path, dpi=110):
        fig.canvas.draw()
        figures.append((fig, fig.canvas.get_renderer()))
        return path

    monkeypatch.setattr(report, "save_figure_atomic", capture)
    return figures


def test_the_plot_title_fits_a_one_panel_figure(tmp_path, monkeypatch):
    """The title of a one-epsilon plot ("beta-bernoulli: TARP coverage, N = 20, T = 20,
    q = 0.1, delta = 1e-05, 2 reference draws") was one line 627 px wide on a 420 px figure, cut off at
    both edges; now it is wrapped to the figure's width, and says the same."""
    figures = _captured_figures(monkeypatch)
    write_reports([_record("grid"), _record("naive")], tmp_path)
    ((fig, renderer),) = figures
    title = fig._suptitle
    box = title.get_window_extent(renderer)
    assert 0 <= box.x0 and box.x1 <= fig.bbox.width and box.y1 <= fig.bbox.height, (box, fig.bbox)
    assert " ".join(title.get_text().split()) == (
        "beta-bernoulli: TARP coverage, N = 20, T = 20, q = 0.1, delta = 1e-05, 2 reference draws"
    )


def test_a_line_says_how_many_replicates_it_used(tmp_path, monkeypatch):
    """The panel's title names the configured K; a cell that excluded replicates says so in its legend (before:
    only the table did, so the plot read K = 4 for a curve of 3 replicates)."""
    figures = _captured_figures(monkeypatch)
    short = dict(_record("naive", 0.2), num_replicates_used=3)
    write_reports([_record("grid"), short], tmp_path)
    ((fig, _),) = figures
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels == ["grid (RMSE 0.100)", "naive (RMSE 0.200, 3 of 4 replicates)"]
    assert fig.axes[0].get_title() == "epsilon = 1 (K = 4)"


def test_two_epsilons_that_print_alike_are_told_apart(tmp_path, monkeypatch):
    """Epsilon 0.3 (the command line's) and 0.1 * 3 = 0.30000000000000004 (a Python
    loop's) are two cells, but the table showed both rows as "| beta-bernoulli | 0.3 | grid |" with different
    RMSEs, and the plot two panels titled "epsilon = 0.3"; now such epsilons are written exactly."""

    def at(eps, rmse):
        c = CellConfig("beta-bernoulli", eps, "grid", **SMALL)
        return dict(_record("grid", rmse), config=c.to_dict(), config_digest=c.digest())

    results = [at(0.3, 0.1), at(0.1 * 3, 0.2), at(1.0, 0.3)]
    md = table_markdown(results)
    assert "| beta-bernoulli | 0.3 | grid |" in md and "| beta-bernoulli | 0.30000000000000004 | grid |" in md, md
    assert "| beta-bernoulli | 1 | grid |" in md  # unambiguous epsilons stay short
    figures = _captured_figures(monkeypatch)
    write_reports(results, tmp_path)
    ((fig, _),) = figures
    assert [ax.get_title() for ax in fig.axes] == [
        "epsilon = 0.3 (K = 4)",
        "epsilon = 0.30000000000000004 (K = 4)",
        "epsilon = 1 (K = 4)",
    ]


def test_marginals_stand_beside_the_joint_figures():
    c = CellConfig("linear-regression", 0.3, "grid", repeats=2, **SMALL)
    rec = dict(
        _record("grid", 0.05),
        config=c.to_dict(),
        config_digest=c.digest(),
        coordinates=["w[0]", "sigma2"],
        marginal_rmse=[0.02, 0.31],
        central_coverage_level=0.9,
        central_coverage=[0.875, 0.5],
        central_coverage_se=[0.1654, 0.25],
    )
    md = table_markdown([rec])
    assert "| 0.3100 (sigma2) | 0.500 – 0.875 |" in md, md
    assert "| linear-regression | 0.3 | grid | sigma2 | 0.3100 | 0.500 ± 0.250 |" in md, md
    assert "| linear-regression | 0.3 | grid | w[0] | 0.0200 | 0.875 ± 0.165 |" in md, md
    row = next(csv.DictReader(table_csv([rec]).splitlines()))
    assert float(row["marginal_rmse_max"]) == 0.31 and row["marginal_rmse"] == "0.02;0.31"
    assert row["central_coverage_0.9"] == "0.875;0.5"


def test_files_without_marginals_say_so():
    one = dict(_record("grid", 0.07), coordinates=["logit(p)"])  # one coordinate: marginal = joint
    c = CellConfig("dirichlet-categorical", 1.0, "grid", repeats=2, **SMALL)
    two = dict(_record("grid", 0.05), config=c.to_dict(), config_digest=c.digest(), coordinates=["a", "b"])
    md = table_markdown([one, two])
    assert "| logit(p) | 0.0700 (= joint) | not in file (no draws kept) |" in md, md
    assert "| 0.0700 (logit(p)) | not in file |" in md, md
    assert "not in file | not in file |" in md and "dirichlet-categorical epsilon 1 grid." in md, md
    assert report.marginal_summary(two)["rmse"] is None


def test_a_line_names_its_worst_marginal(tmp_path, monkeypatch):
    c = CellConfig("linear-regression", 0.3, "grid", repeats=2, **SMALL)
    several = dict(
        _record("grid", 0.05),
        config=c.to_dict(),
        config_digest=c.digest(),
        coordinates=["w[0]", "sigma2"],
        marginal_rmse=[0.02, 0.31],
    )
    one = dict(_record("naive", 0.2), coordinates=["theta"], marginal_rmse=[0.2])
    labels = []

    def capture(fig, path, dpi=110):
        labels.extend(t.get_text() for ax in fig.axes for t in ax.get_legend().get_texts())
        return path

    monkeypatch.setattr(report, "save_figure_atomic", capture)
    write_reports([several, one], tmp_path)
    assert "naive (RMSE 0.200)" in labels  # one coordinate: the joint curve is its own
    assert "grid (RMSE 0.050; worst marginal 0.310)" in labels, labels
