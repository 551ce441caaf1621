"""A careful new user's mistakes with the command line, the tables of ``fit``, and the plots.

Each case was a traceback, a silent wrong result or a result lost after the computation before it
was fixed. Command-line cases run ``dpposterior.cli.main`` in-process and stop at argument checks,
before any DP-SGD run, so the file runs in seconds.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpposterior import plots
from dpposterior.tabular import build_design, load_schema, read_table
from dpposterior.validation import calibration_curve

from cli_errors import cli_error as _error

COVERAGE = [
    "coverage",
    "--model",
    "beta-bernoulli",
    "--epsilon",
    "1",
    "--replicates",
    "2",
    "--repeats",
    "1",
    "--num-steps",
    "20",
    "--num-records",
    "10",
    "--num-draws",
    "2",
    "--no-progress",
]


@pytest.fixture
def files(tiny_table):
    (tiny_table / "a_file").write_text("not a folder")
    return tiny_table


def _table_argv(tmp, command, *extra, out="out"):
    return [
        command,
        tmp / "d.csv",
        "--target",
        "y",
        "--bounds",
        tmp / "s.toml",
        "--epsilon",
        "1",
        "--delta",
        "1e-5",
        "--steps",
        "20",
        "--no-progress",
        "--out",
        tmp / out,
        *extra,
    ]


def _no_release(monkeypatch):
    """Makes any DP release fail loudly: the checks under test must come first."""

    def boom(*a, **k):
        raise AssertionError("a release was computed before the argument check")

    monkeypatch.setattr("dpposterior.vi.dpvi", boom)
    monkeypatch.setattr("dpposterior.vi.dpvim.dpvim", boom)


# ---------------------------------------------------------------------------------------------
# --out that is a file: a traceback after the computation, before the fix


@pytest.mark.parametrize("command", ["fit", "compare"])
def test_table_out_that_is_a_file_is_refused_before_the_release(capsys, files, monkeypatch, command):
    _no_release(monkeypatch)
    msg = _error(capsys, _table_argv(files, command, out="a_file"), command)
    assert "is a file, not a folder" in msg and "a_file" in msg


def test_table_out_below_a_file_is_refused(capsys, files, monkeypatch):
    _no_release(monkeypatch)
    msg = _error(capsys, _table_argv(files, "fit", out="a_file/report"), "fit")
    assert "cannot be created" in msg and "is a file, not a folder" in msg


def test_ledger_below_a_file_is_refused_before_the_release(capsys, files, monkeypatch):
    # the ledger was saved after the release, and its failure lost the report
    _no_release(monkeypatch)
    msg = _error(capsys, _table_argv(files, "fit", "--ledger", files / "a_file" / "ledger.json"), "fit")
    assert msg.startswith("ledger ") and "cannot be created" in msg


def test_coverage_out_that_is_a_file_is_refused_before_any_cell(capsys, files, monkeypatch):
    def boom(*a, **k):
        raise AssertionError("cells were computed before the --out check")

    monkeypatch.setattr("dpposterior.experiments.runner.run_coverage", boom)
    msg = _error(capsys, [*COVERAGE, "--out", files / "a_file"], "coverage")
    assert msg.startswith("--out ") and "is a file, not a folder" in msg


def test_demo_out_that_is_a_file_is_an_error_not_a_traceback(capsys, files):
    msg = _error(capsys, ["demo", "--steps", "5", "--out", files / "a_file"], "demo")
    assert "is a file, not a folder" in msg


# ---------------------------------------------------------------------------------------------
# values silently clamped or aliased


@pytest.mark.parametrize("size", ["0", "-3"])
def test_coverage_batch_size_below_one_is_refused_not_clamped(capsys, tmp_path, size):
    msg = _error(capsys, [*COVERAGE, "--out", tmp_path / "c", "--batch-size", size], "coverage")
    assert msg == f"--batch-size must be >= 1 (replicates per compiled batch), got {size}"


@pytest.mark.parametrize("seed", [2**32 + 5, -1])
def test_table_seed_that_jax_would_alias_is_refused(capsys, files, monkeypatch, seed):
    # --seed 4294967301 gave the same privacy noise as --seed 5, and -1 the same as 4294967295
    _no_release(monkeypatch)
    msg = _error(capsys, _table_argv(files, "fit", "--seed", seed), "fit")
    assert msg.startswith("seed must be an integer in [0, 2**32)")


def test_huge_seed_is_an_error_not_an_overflow_traceback(capsys, files, monkeypatch):
    _no_release(monkeypatch)
    msg = _error(capsys, _table_argv(files, "compare", "--seed", 10**30), "compare")
    assert msg.startswith("seed must be an integer in [0, 2**32)")
    assert _error(capsys, ["demo", "--seed", 10**30, "--out", files / "d"], "demo").startswith("seed must be")


def test_compare_seed_plus_release_index_must_stay_below_2_32(capsys, files, monkeypatch):
    _no_release(monkeypatch)
    # na-dpvi and dpvim: the second release would be seeded with 2**32, i.e. seed 0
    msg = _error(capsys, _table_argv(files, "compare", "--seed", 2**32 - 1), "compare")
    assert "seed + i" in msg


def test_fit_beta_rho_is_checked_before_the_data_are_read(capsys, files, monkeypatch):
    _no_release(monkeypatch)
    monkeypatch.setattr("dpposterior.tabular.fit.read_table", lambda *a: pytest.fail("data read first"))
    assert (
        _error(capsys, _table_argv(files, "fit", "--beta-rho", "-1"), "fit")
        == "beta_rho must be a finite number > 0, got -1.0"
    )


# ---------------------------------------------------------------------------------------------
# tables: repeated columns, wrong types


def test_repeated_header_in_a_csv_is_refused(tmp_path):
    # pandas renamed the second 'age' to 'age.1', and the fit silently used only the first
    (tmp_path / "d.csv").write_text("age,region,age,y\n30,north,70,no\n")
    with pytest.raises(ValueError, match="more than one column of the same name: columns 1 and 3 "):
        read_table(tmp_path / "d.csv")


def test_repeated_values_of_a_headerless_file_are_not_quoted(tmp_path):
    # no header row: the first record is read as the names, and its repeated value must not be shown
    (tmp_path / "d.csv").write_text("73125,north,73125,1\n30,south,70,0\n")
    with pytest.raises(ValueError, match="columns 1 and 3 .*no header row") as err:
        read_table(tmp_path / "d.csv")
    assert "73125" not in str(err.value)


def test_repeated_feature_is_refused(schema):
    frame = pd.DataFrame({"age": ["30", "40"], "region": ["north", "south"], "y": ["no", "yes"]})
    with pytest.raises(ValueError, match="features must not repeat a column.*'age'"):
        build_design(frame, schema, "y", features=["age", "age"])


def test_features_as_one_string_is_a_type_error(schema):
    frame = pd.DataFrame({"age": ["30"], "y": ["no"]})
    with pytest.raises(TypeError, match=r"single string 'age'; write \['age'\]"):
        build_design(frame, schema, "y", features="age")


def test_build_design_names_wrong_argument_types_and_empty_tables(schema):
    frame = pd.DataFrame({"age": ["30"], "region": ["north"], "y": ["no"]})
    with pytest.raises(TypeError, match="frame must be a pandas DataFrame"):
        build_design({"age": ["30"]}, schema, "y")
    with pytest.raises(TypeError, match="schema must be a Schema"):
        build_design(frame, {"columns": {}}, "y")
    with pytest.raises(ValueError, match="no records"):
        build_design(frame.iloc[:0], schema, "y")


def test_empty_features_list_is_not_replaced_by_every_column(files):
    from dpposterior.tabular.fit import _load

    design, *_ = _load(files / "d.csv", files / "s.toml", "y", "logistic", [], log=lambda s: None)
    assert design.feature_names == ("(intercept)",)


@pytest.fixture
def schema(tiny_table):
    return load_schema(tiny_table / "s.toml")


# ---------------------------------------------------------------------------------------------
# plots: mismatched lengths, skewed posteriors, paths

ROW = {"a": (0.0, 1.0, 2.0), "b": (-1.0, 0.0, 1.0)}


@pytest.mark.parametrize("rows, labels", [([ROW, ROW], ["one"]), ([ROW], ["one", "two"])])
def test_interval_plot_refuses_rows_and_labels_of_different_lengths(tmp_path, rows, labels):
    # zip() silently dropped the extra method or label
    with pytest.raises(ValueError, match=f"got {len(rows)} row\\(s\\) and {len(labels)} label\\(s\\)"):
        plots.interval_plot(rows, labels, tmp_path / "i.png")


def test_interval_plot_draws_a_mean_outside_a_narrow_central_interval(tmp_path):
    # a skewed posterior's mean can lie outside a narrow interval (fit --prob 0.1): matplotlib's negative
    # xerr raised after the release, and the report was lost
    path = plots.interval_plot([{"sigma2": (0.1, 0.5, 0.2)}], ["noise-aware"], tmp_path / "i.png")
    assert path.stat().st_size > 0


def test_interval_plot_shows_every_parameter_of_every_row(tmp_path):
    # a parameter missing from the first row was a KeyError, one only in a later row silently dropped
    path = plots.interval_plot([{"a": (0, 1, 2)}, ROW], ["x", "y"], tmp_path / "i.png")
    assert path.exists()
    with pytest.raises(ValueError, match="three numbers"):
        plots.interval_plot([{"a": (0, 1)}], ["x"], tmp_path / "j.png")
    with pytest.raises(ValueError, match="rows is empty"):
        plots.interval_plot([], [], tmp_path / "k.png")


@pytest.mark.parametrize(
    "entry, error, match",
    [
        ((float("nan"), 0.0, 1.0), ValueError, r"rows\[0\]\['a'\] must be finite numbers \(lo, mean, hi\), got \(nan"),
        ((0.0, 1.0, float("inf")), ValueError, r"rows\[0\]\['a'\] must be finite numbers"),
        (("0", "1", "2"), TypeError, r"each entry of rows\[0\]\['a'\] \(lo, mean, hi\) must be a real number, got '0'"),
        ((False, True, True), TypeError, r"must be a real number, got False of type bool"),
        ((0j, 1.0, 2.0), TypeError, r"must be a real number, got 0j of type complex"),
    ],
)
def test_interval_plot_refuses_entries_that_are_not_finite_numbers(tmp_path, entry, error, match):
    """Twenty-first session: a NaN or infinite end was drawn as no interval without a word, strings and bools
    were converted silently ("0" -> 0.0, True -> 1.0), a complex number failed in float() with no name."""
    with pytest.raises(error, match=match):
        plots.interval_plot([{"a": entry}], ["x"], tmp_path / "i.png")
    assert not (tmp_path / "i.png").exists()
    assert plots.interval_plot([{"a": np.array([0, 1, 2])}], ["x"], tmp_path / "j.png").exists()  # numpy numbers


def test_plot_path_without_a_suffix_or_a_folder_is_refused(tmp_path):
    # matplotlib wrote PATH.png (or FOLDER.png) while the function returned PATH
    with pytest.raises(ValueError, match="must end in the suffix of an image format"):
        plots.interval_plot([ROW], ["x"], tmp_path / "figure")
    with pytest.raises(ValueError, match="is a folder"):
        plots.interval_plot([ROW], ["x"], tmp_path)
    assert not (tmp_path / "figure.png").exists() and not tmp_path.with_suffix(".png").exists()


def test_a_plot_into_a_missing_folder_creates_it_and_a_path_under_a_file_is_refused_before_drawing(
    tmp_path, monkeypatch
):
    """Twenty-first session: ``calibration_plot(curves, "figures/c.png")`` without a ``figures`` folder drew
    the figure and then failed with matplotlib's bare ``FileNotFoundError`` (a path under a file: a
    ``NotADirectoryError``), though the package's other writers create the folder; now the folder is
    created and the file written atomically in its suffix's format, and a path that cannot be written is
    a ValueError before anything is drawn."""
    curve = calibration_curve(np.linspace(0.01, 0.99, 40), np.arange(40) % 2, bins=4)
    png = plots.calibration_plot({"m": curve}, tmp_path / "figures" / "new" / "c.png")
    assert png == tmp_path / "figures" / "new" / "c.png" and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pdf = plots.interval_plot([ROW], ["x"], tmp_path / "other" / "i.pdf")
    assert pdf.read_bytes()[:5] == b"%PDF-"
    assert sorted(p.name for p in (tmp_path / "other").iterdir()) == ["i.pdf"]  # no temporary file left
    (tmp_path / "table.csv").write_text("a\n")
    monkeypatch.setattr(plots, "_plt", lambda: pytest.fail("drew before checking the path"))
    with pytest.raises(ValueError, match="path .*table.csv/c.png' cannot be created: .*table.csv' is a file"):
        plots.calibration_plot({"m": curve}, tmp_path / "table.csv" / "c.png")


def test_calibration_plot_refuses_empty_or_wrong_curves(tmp_path):
    curve = calibration_curve(np.linspace(0.01, 0.99, 40), np.arange(40) % 2, bins=4)
    assert plots.calibration_plot({"m": curve}, tmp_path / "c.png").exists()
    with pytest.raises(ValueError, match="curves is empty"):
        plots.calibration_plot({}, tmp_path / "c.png")
    with pytest.raises(TypeError, match="must be a mapping"):
        plots.calibration_plot([curve], tmp_path / "c.png")


def test_trace_plot_refuses_settings_that_drew_an_empty_or_misplaced_figure(tmp_path):
    # max_coords=0 drew no line (and an empty legend); burn_in=1.5 put the cut past the trace's end
    from types import SimpleNamespace

    trace = SimpleNamespace(
        phi=np.zeros((10, 4)),
        layout=SimpleNamespace(coordinate_names=lambda: ["a", "b"]),
        privacy=SimpleNamespace(summary=lambda: "epsilon 1"),
    )
    assert plots.trace_plot(trace, tmp_path / "t.png").exists()
    with pytest.raises(ValueError, match="max_coords must be an integer >= 1"):
        plots.trace_plot(trace, tmp_path / "t.png", max_coords=0)
    with pytest.raises(ValueError, match=r"burn_in must be a share of the trace in \[0, 1\)"):
        plots.trace_plot(trace, tmp_path / "t.png", burn_in=1.5)
    with pytest.raises(TypeError, match="DP-SGD release"):
        plots.trace_plot(np.zeros((10, 4)), tmp_path / "t.png")
