"""``fit`` / ``compare`` (command line and Python) check their arguments before any release: too few steps,
empty or headerless files, a model file that fails to import, a calibration that cannot succeed, arguments
of the wrong type. A release reached anyway fails loudly.
"""

from __future__ import annotations

import re

import pytest
from table_cli import no_release, table_argv

from cli_errors import cli_error as _error


# --steps too few for the post-processing: the release was computed (privacy spent), then the run
# stopped with "the trace is too short" and nothing was written (nor added to --ledger)
@pytest.mark.parametrize(
    "command, steps, methods, need",
    [
        ("fit", "8", (), "at least 12"),
        ("compare", "30", ("--methods", "na-dpvi", "dpvim"), "dpvim needs 40"),
        ("compare", "5", ("--methods", "naive"), "na-dpvi needs 12"),
        ("compare", "3", ("--methods", "dp-fast-mh"), "dp-fast-mh needs 19"),
    ],
)
def test_too_few_steps_are_refused_before_the_release(capsys, tiny_table, monkeypatch, command, steps, methods, need):
    no_release(monkeypatch)
    msg = _error(capsys, table_argv(tiny_table, command, "--steps", steps, *methods), command)
    assert msg.startswith("steps (num_steps) must be at least") and need in msg, msg
    assert not (tiny_table / "out").exists()


# fit_table / compare_table given a DataFrame or a Schema instead of file paths, or a list as the
# target: Python's "expected str, bytes or os.PathLike object, not DataFrame" (no argument named),
# or "target column ['y'] is missing from the data (columns: ..., y)"
@pytest.mark.parametrize("which", ["fit_table", "compare_table"])
def test_table_pipelines_name_a_dataframe_schema_or_list_target(tiny_table, which):
    import pandas as pd

    from dpposterior import tabular
    from dpposterior.tabular import load_schema

    run = getattr(tabular, which)
    data, schema = tiny_table / "d.csv", tiny_table / "s.toml"
    kw = dict(epsilon=1.0, delta=1e-5, num_steps=50, out=tiny_table / "out", log=lambda line: None)
    with pytest.raises(TypeError, match="^data must be the path of a CSV or Parquet file, got DataFrame"):
        run(pd.read_csv(data), schema, "y", **kw)
    with pytest.raises(TypeError, match="^schema must be the path of a TOML schema file, got Schema"):
        run(data, load_schema(schema), "y", **kw)
    with pytest.raises(TypeError, match=r"^target must be the name of one column \(a string\), got \['y'\]"):
        run(data, schema, ["y"], **kw)


# an empty file (0 bytes, or blank lines only): pandas' "No columns to parse from file"
@pytest.mark.parametrize("content", [b"", b"\n\n", b"   \n"])
def test_an_empty_file_is_called_empty(capsys, tiny_table, monkeypatch, content):
    no_release(monkeypatch)
    (tiny_table / "empty.csv").write_bytes(content)
    msg = _error(capsys, table_argv(tiny_table, "fit", "--steps", "20", csv="empty.csv"), "fit")
    assert msg == (
        f"data file {str(tiny_table / 'empty.csv')!r} is empty: it needs a header row naming the columns "
        "and a row per record"
    )


# compare_table(methods="dpvim"): split into letters, "methods must be among (...), got ['d', 'p', ...]"
def test_compare_methods_as_one_string_is_a_type_error(tiny_table):
    from dpposterior.tabular import compare_table

    with pytest.raises(TypeError, match=r"^methods must be a list of method names, got the single string 'dpvim'"):
        compare_table(
            tiny_table / "d.csv",
            tiny_table / "s.toml",
            "y",
            methods="dpvim",
            epsilon=1.0,
            delta=1e-5,
            num_steps=50,
            out=tiny_table / "out",
            log=lambda line: None,
        )


# a CSV without a header row: its first record became the column names, and the error quoted them,
# "target column 'y' is missing from the data (columns: 30, north, no)", a record's values in the
# message (which must never show one), with no hint that the header row is missing
def test_a_file_without_a_header_row_is_named_without_quoting_its_first_record(capsys, tiny_table, monkeypatch):
    no_release(monkeypatch)
    (tiny_table / "nohead.csv").write_text("37,south,yes\n45,south,yes\n60,north,no\n")
    msg = _error(capsys, table_argv(tiny_table, "fit", "--steps", "20", csv="nohead.csv"), "fit")
    assert msg.startswith(
        "none of the 3 column names of the data matches a column declared in s.toml (age, region, "
        "y): does the file start with a header row"
    ), msg
    assert "37" not in msg and "south" not in msg


# --model mymodels.py:f where the user's file has a syntax error or raises on import: a traceback
# (only ImportError was caught)
@pytest.mark.parametrize(
    "source, words",
    [
        ("def f(X, y):\n    return sum((X, y)\n", "SyntaxError: '(' was never closed"),
        ('import math\nraise RuntimeError("not ready")\n', "importing it raised RuntimeError: not ready"),
    ],
)
def test_a_model_file_that_fails_to_import_is_a_one_line_error(tmp_path, source, words):
    from dpposterior.tabular.fit import resolve_model

    (tmp_path / "mymodels.py").write_text(source)
    with pytest.raises(ValueError, match=re.escape(f"cannot import module {str(tmp_path / 'mymodels.py')!r}")) as e:
        resolve_model(f"{tmp_path / 'mymodels.py'}:f")
    assert words in str(e.value) and "mymodels.py, line 2)" in str(e.value)


# compare with dp-fast-mh at a budget its calibration refuses (per-iteration epsilon >= 1): the
# error came after the DPVI release had been computed, which was then lost
def test_compare_checks_the_dp_fast_mh_calibration_before_any_release(capsys, tiny_table, monkeypatch):
    no_release(monkeypatch)
    argv = table_argv(tiny_table, "compare", "--steps", "20", "--methods", "na-dpvi", "dp-fast-mh", epsilon="50")
    msg = _error(capsys, argv, "compare")
    assert "allows a per-iteration epsilon >= 1" in msg, msg


# --features age,region (a comma-separated list, as many tools take it): "column 'age,region' is not
# declared in s.toml (declared: age, region, y); add a [columns.age,region] table ..."
def test_comma_separated_features_say_to_separate_them(capsys, tiny_table, monkeypatch):
    no_release(monkeypatch)
    msg = _error(capsys, table_argv(tiny_table, "fit", "--steps", "20", "--features", "age,region"), "fit")
    assert msg == (
        "feature 'age,region' is not a column: give the features as separate names, ['age', 'region'] "
        "(on the command line: --features age region)"
    )


def test_target_kind_against_a_built_in_model_is_refused(capsys, tiny_table, monkeypatch):
    no_release(monkeypatch)
    msg = _error(capsys, table_argv(tiny_table, "fit", "--target-kind", "numeric"), "fit")
    assert "does not fit the built-in model, whose target is binary" in msg and "--target-kind" in msg, msg
    assert not (tiny_table / "out").exists()
