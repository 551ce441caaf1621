"""The ``dpposterior coverage`` command: a tiny real run, and one-line errors for bad input."""

from __future__ import annotations

import csv

import pytest

from dpposterior.cli import main


def test_cli_runs_cells_and_writes_reports(tmp_path, capsys, tiny_cli_args):
    args = [
        "coverage",
        "--model",
        "beta-bernoulli",
        "--epsilon",
        "0.5",
        "2.0",
        "--method",
        "grid",
        "naive",
        "--out",
        str(tmp_path),
        *tiny_cli_args,
    ]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "4 cell(s) computed, 0 found finished" in out
    assert "| beta-bernoulli | 0.5 | grid |" in out
    assert (tmp_path / "coverage_beta-bernoulli.png").stat().st_size > 10_000
    rows = list(csv.DictReader((tmp_path / "coverage_table.csv").read_text().splitlines()))
    assert [(r["epsilon"], r["method"]) for r in rows] == [
        ("0.5", "grid"),
        ("0.5", "naive"),
        ("2.0", "grid"),
        ("2.0", "naive"),
    ]
    for r in rows:
        assert 0 <= float(r["rmse"]) <= 1 and float(r["sharpness"]) > 0
        assert float(r["single_draw_rmse_sd"]) >= 0
        # beside the joint figures, the marginal ones (one latent coordinate: its TARP is the joint one)
        assert float(r["marginal_rmse"]) == pytest.approx(float(r["rmse"]), abs=1e-12)
        assert 0 <= float(r["central_coverage_0.9"]) <= 1
    md = (tmp_path / "coverage_table.md").read_text()
    joint, marginal = md.split("Marginal calibration per latent coordinate")
    assert joint.count("| beta-bernoulli |") == 4 and "single-draw RMSE (mean ± sd)" in joint
    assert "worst marginal RMSE (coordinate)" in joint and marginal.count("| theta |") == 4
    assert "Marginal calibration per latent coordinate" in out  # the printed table shows them too
    assert main(args) == 0  # a re-run finds every cell finished
    assert "0 cell(s) computed, 4 found finished" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--model", "nope", "--epsilon", "1"], "unknown model 'nope'; available: beta-bernoulli"),
        (["--model", "beta-bernoulli", "--epsilon", "1", "--method", "mcmc"], "unknown method 'mcmc'; available:"),
        (["--model", "beta-bernoulli", "--epsilon", "0"], "invalid epsilon '0'"),
        (["--model", "beta-bernoulli", "--epsilon", "-0.5"], "invalid epsilon '-0.5'"),
        (["--model", "beta-bernoulli", "--epsilon", "nan"], "invalid epsilon 'nan'"),
        (["--model", "beta-bernoulli", "--epsilon", "one"], "invalid epsilon 'one'"),
        (["--model", "beta-bernoulli", "--epsilon", "1", "--backend", "dask"], "unknown backend 'dask'"),
        (["--model", "beta-bernoulli", "--epsilon", "1", "--address", "auto"], "--address needs --backend ray"),
        (["--model", "beta-bernoulli", "--epsilon", "1", "--replicates", "1"], "replicates must be an integer >= 2"),
        (["--model", "beta-bernoulli", "--epsilon", "1", "--delta", "1.5"], "delta must lie in (0, 1)"),
    ],
)
def test_cli_bad_input_exits_nonzero_with_one_line(argv, message, tmp_path, capsys):
    assert main(["coverage", *argv, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("dpposterior coverage: error: ")
    assert message in err
    assert not (tmp_path / "cells").exists()


def test_cli_reports_corrupted_results_file(tmp_path, capsys, tiny_cli_args):
    args = [
        "coverage",
        "--model",
        "beta-bernoulli",
        "--epsilon",
        "0.5",
        "--method",
        "naive",
        "--out",
        str(tmp_path),
        *tiny_cli_args,
    ]
    assert main(args) == 0
    (cell,) = (tmp_path / "cells" / "beta-bernoulli").glob("*.json")
    cell.write_text('{"format": "dpposterior.coverage_cell", "version": 1, "config": ')
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(cell) in err and "corrupted" in err


def test_a_second_run_into_the_same_folder_keeps_the_earlier_cells_in_the_tables(tmp_path, capsys, tiny_cli_args):
    """The folder's tables and plots show every finished cell in it (not only the cells of the latest run); the printed table is this run's cells. A file that cannot be shown
    (corrupted, or of a method this process does not know) is named on stderr, never dropped silently."""
    import json

    base = ["coverage", "--model", "beta-bernoulli", "--method", "naive", "--out", str(tmp_path), *tiny_cli_args]
    assert main(base + ["--epsilon", "0.5"]) == 0
    capsys.readouterr()
    assert main(base + ["--epsilon", "2.0"]) == 0
    out = capsys.readouterr().out
    assert "| beta-bernoulli | 2 | naive |" in out and "| beta-bernoulli | 0.5 | naive |" not in out
    assert (
        "the tables and plots in" in out
        and ("cover 2 finished cell(s): the 1 in the table above and 1 other cell(s) in the folder") in out
    )
    rows = list(csv.DictReader((tmp_path / "coverage_table.csv").read_text().splitlines()))
    assert [(r["epsilon"], r["method"]) for r in rows] == [("0.5", "naive"), ("2.0", "naive")]
    joint, marginal = (tmp_path / "coverage_table.md").read_text().split("Marginal calibration per latent coordinate")
    assert joint.count("| beta-bernoulli |") == 2 and marginal.count("| beta-bernoulli |") == 2

    cells = sorted((tmp_path / "cells" / "beta-bernoulli").glob("*.json"))
    gone = json.loads(cells[0].read_text())
    gone["config"]["method"] = "a-method-not-registered-here"
    (cells[0].parent / "eps0p5_a-method-not-registered-here_000000000000.json").write_text(json.dumps(gone))
    (cells[0].parent / "eps9p0_naive_111111111111.json").write_text("{truncated")
    assert main(base + ["--epsilon", "2.0"]) == 0
    captured = capsys.readouterr()
    assert "0 cell(s) computed, 1 found finished" in captured.out
    # not "cover 2 finished cell(s), 1 from earlier runs": "cover 2 finished cell(s), 1 from earlier runs", though the cell found
    # finished came from an earlier run too (both did)
    assert "cover 2 finished cell(s): the 1 in the table above and 1 other cell(s) in the folder" in captured.out
    assert "a-method-not-registered-here" in captured.err and "not registered in this process" in captured.err
    assert "eps9p0_naive_111111111111.json" in captured.err and "corrupted" in captured.err
    rows = list(csv.DictReader((tmp_path / "coverage_table.csv").read_text().splitlines()))
    assert [(r["epsilon"], r["method"]) for r in rows] == [("0.5", "naive"), ("2.0", "naive")]
