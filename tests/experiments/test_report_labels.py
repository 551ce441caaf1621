"""Reports tell cells apart: cells that differ in a setting other than epsilon and method, and a baseline
released under another neighbouring relation, are labelled as such in the table and the plot.
"""

from __future__ import annotations

from small_cells import SMALL, cell_record

from dpposterior.experiments import CellConfig


def test_reports_tell_apart_cells_that_differ_in_other_settings(tmp_path, monkeypatch):
    import csv

    from dpposterior.experiments import report, write_reports
    from dpposterior.experiments.report import table_csv, table_markdown

    results = [cell_record(20, 0.1), cell_record(40, 0.2)]
    md = table_markdown(results)
    assert "| N |" in md
    assert "| beta-bernoulli | 1 | grid | 4 | 2 | 20 | 0.1000 |" in md
    assert "| beta-bernoulli | 1 | grid | 4 | 2 | 40 | 0.2000 |" in md
    assert "| N |" not in table_markdown(results[:1])  # uniform cells: the table as before
    rows = list(csv.DictReader(table_csv(results).splitlines()))
    assert {r["num_draws"] for r in rows} == {"50"} and "method_options" in rows[0]

    seen = {}

    def capture(fig, path, dpi=110):
        seen["title"] = fig._suptitle.get_text()
        seen["labels"] = [t.get_text() for ax in fig.axes for t in ax.get_legend().get_texts()]
        return path

    monkeypatch.setattr(report, "save_figure_atomic", capture)
    write_reports(results, tmp_path)
    assert "N = " not in seen["title"] and "T = 20" in seen["title"], seen["title"]
    assert seen["labels"] == ["grid, N = 20 (RMSE 0.100)", "grid, N = 40 (RMSE 0.200)"]
    write_reports([cell_record(20, 0.1, seed=0), cell_record(20, 0.2, seed=1)], tmp_path)
    assert "N = 20" in seen["title"]
    assert seen["labels"] == ["grid, seed = 0 (RMSE 0.100)", "grid, seed = 1 (RMSE 0.200)"]
    write_reports([cell_record(20, 0.1), cell_record(20, 0.2, method="naive")], tmp_path)
    assert seen["labels"] == ["grid (RMSE 0.100)", "naive (RMSE 0.200)"]  # nothing to tell apart


# A baseline released under replace-one neighbours (method option neighbouring="replace_one") sat in the
# report's table and plot as plain "bernstein-sheldon" beside the add/remove-one DP-SGD methods at the
# same epsilon: only the cell file said that its epsilon is for another neighbouring relation.
def test_report_says_when_a_baseline_used_another_neighbouring_relation():
    from dpposterior.experiments.report import table_markdown

    rec = cell_record(20, 0.1, method="bernstein-sheldon")
    rec["config"] = CellConfig(
        "beta-bernoulli", 1.0, "bernstein-sheldon", method_options={"neighbouring": "replace_one"}, **SMALL
    ).to_dict()
    md = table_markdown([rec, cell_record(20, 0.2)])  # beside grid (DP-SGD, add/remove-one)
    assert "| bernstein-sheldon (neighbouring replace_one) |" in md
    assert "| bernstein-sheldon |" in table_markdown([cell_record(20, 0.2, method="bernstein-sheldon")])  # default
    # (the burn-in h prior needs >= 10 burn-in steps: 50 steps at the default burn-in 0.2)
    assert "(priors burn_in)" in table_markdown(
        [
            dict(
                cell_record(20, 0.1),
                config=CellConfig(
                    "beta-bernoulli", 1.0, "grid", method_options={"priors": "burn_in"}, **dict(SMALL, num_steps=50)
                ).to_dict(),
            )
        ]
    )
