"""A statistician's own table through ``dpposterior fit`` / ``compare`` and ``dpposterior.tabular``.

Bugs found by a bug hunt on the user-table path (2026-12-02): settings that made a DP release and
then lost it, files and column types that were read silently wrong, and valid data that was refused
for the wrong reason. Each test was red before its fix. No test reaches a DP-SGD run: command-line
cases run ``dpposterior.cli.main`` in-process and stop at checks made before any release (a release
reached anyway fails loudly), and the readers are tested on tiny tables, so the file runs in seconds.
"""

from __future__ import annotations

import re

import pytest

from cli_errors import cli_error as _error


def _argv(tmp, command, *extra, csv="d.csv", out="out", epsilon="1"):
    return [
        command,
        tmp / csv,
        "--target",
        "y",
        "--bounds",
        tmp / "s.toml",
        "--epsilon",
        epsilon,
        "--delta",
        "1e-5",
        "--no-progress",
        "--out",
        tmp / out,
        *extra,
    ]


def _no_release(monkeypatch):
    """Makes any DP release fail loudly: the checks under test must come first."""

    def boom(*a, **k):
        raise AssertionError("a release was computed before the check")

    monkeypatch.setattr("dpposterior.vi.dpvi", boom)
    monkeypatch.setattr("dpposterior.vi.dpvim.dpvim", boom)
    monkeypatch.setattr("dpposterior.tabular.fit.dp_fast_mh_logistic", boom)


# ---------------------------------------------------------------------------------------------
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
    _no_release(monkeypatch)
    msg = _error(capsys, _argv(tiny_table, command, "--steps", steps, *methods), command)
    assert msg.startswith("steps (num_steps) must be at least") and need in msg, msg
    assert not (tiny_table / "out").exists()


# ---------------------------------------------------------------------------------------------
# dates in a column declared numeric (Parquet keeps their type): read as nanoseconds since 1970 or
# period ordinals, then clipped to the bounds without a word (every record at the upper bound)

SCHEMA = {
    "columns": {
        "age": {"type": "numeric", "bounds": [18, 90]},
        "region": {"type": "categorical", "categories": ["north", "south"]},
        "y": {"type": "categorical", "categories": ["no", "yes"]},
    }
}


def _frame(**age):
    import pandas as pd

    return pd.DataFrame({"region": ["north", "south"], "y": ["no", "yes"], **age})


@pytest.mark.parametrize(
    "values, kind",
    [
        ("2020-01-01 2021-06-30", "dates"),
        ("2020-01-01 2021-06-30 UTC", "dates"),
        ("period", "dates"),
        ("timedelta", "time spans"),
        ("complex", "complex numbers"),
    ],
)
def test_dates_and_times_in_a_numeric_column_are_refused(values, kind):
    import pandas as pd

    from dpposterior.tabular import build_design, parse_schema

    column = {
        "2020-01-01 2021-06-30": pd.to_datetime(["2020-01-01", "2021-06-30"]),
        "2020-01-01 2021-06-30 UTC": pd.to_datetime(["2020-01-01", "2021-06-30"]).tz_localize("UTC"),
        "period": pd.period_range("2020", periods=2, freq="Y"),
        "timedelta": pd.to_timedelta([30, 45], unit="D"),
        "complex": [30 + 0j, 45 + 1j],
    }[values]
    with pytest.raises(ValueError, match=f"column 'age' is declared numeric but holds {kind} "):
        build_design(_frame(age=column), parse_schema(SCHEMA), "y")


def test_dates_in_a_parquet_file_are_refused_by_fit(capsys, tiny_table, monkeypatch):
    pytest.importorskip("pyarrow", reason="Parquet needs pyarrow (the dev extra installs it)")
    import pandas as pd

    _no_release(monkeypatch)
    _frame(age=pd.to_datetime(["1990-01-01", "1970-05-01"])).to_parquet(tiny_table / "d.parquet")
    msg = _error(capsys, _argv(tiny_table, "fit", "--steps", "20", csv="d.parquet"), "fit")
    assert msg.startswith("column 'age' is declared numeric but holds dates (dtype datetime64"), msg


# ---------------------------------------------------------------------------------------------
# CSV rows with more fields than the header: pandas took the first field as a row index and shifted
# every value one column to the right of its name (here age <- region's values, y <- empty)


@pytest.mark.parametrize(
    "text",
    [
        "age,region,y\n30,north,no,\n45,south,yes,\n",  # a separator at the end of every row
        "age,y\n1,30,no\n2,45,yes\n",  # row numbers without a header name
        "age,y\n1,30,no,x\n2,45,yes,x\n",  # two surplus fields
    ],
)
def test_rows_longer_than_the_header_are_refused_not_shifted(tmp_path, text):
    from dpposterior.tabular import read_table

    (tmp_path / "d.csv").write_text(text)
    with pytest.raises(ValueError, match=r"its rows have more fields than the header has column names"):
        read_table(tmp_path / "d.csv")


def test_a_shifted_table_no_longer_fits_silently(tmp_path):
    # two numeric columns with the same bounds and a numeric 0/1 target: the shifted table passed every
    # check (a <- b's values, b <- y's values, y <- the surplus column) and would have been fitted
    from dpposterior.tabular import read_table

    (tmp_path / "d.csv").write_text("a,b,y\n5,1,0,1\n6,0,1,0\n")
    with pytest.raises(ValueError, match="more fields than the header"):
        read_table(tmp_path / "d.csv")


# ---------------------------------------------------------------------------------------------
# a declared category that pandas reads as missing ("NA" for North America, "None" for no answer):
# the CSV was refused with "has missing values" (a Parquet file with the same strings was accepted)

NA_SCHEMA = {
    "columns": {
        "age": {"type": "numeric", "bounds": [18, 90]},
        "region": {"type": "categorical", "categories": ["EU", "NA", "None"]},
        "y": {"type": "categorical", "categories": ["no", "yes"]},
    }
}


def test_a_declared_category_that_looks_like_a_missing_marker_is_a_category(tmp_path):
    from dpposterior.tabular import build_design, parse_schema, read_table

    (tmp_path / "d.csv").write_text("age,region,y\n30,NA,no\n45,EU,yes\n60,None,no\n")
    d = build_design(read_table(tmp_path / "d.csv"), parse_schema(NA_SCHEMA), "y")
    assert d.feature_names == ("age", "region=NA", "region=None", "(intercept)")
    assert d.X[:, 1:3].tolist() == [[1, 0], [0, 0], [0, 1]]


@pytest.mark.parametrize(
    "text, column",
    [
        ("age,region,y\nNA,EU,no\n45,EU,yes\n", "column 'age'"),  # a marker in a numeric column
        ("age,region,y\n30,null,no\n45,EU,yes\n", "column 'region'"),  # an undeclared marker
        ("age,region,y\n30,EU,?\n45,EU,yes\n", "target column 'y'"),  # "?", as in the UCI Adult data
        ("age,region,y\n,EU,no\n45,EU,yes\n", "column 'age'"),  # an empty cell
    ],
)
def test_undeclared_missing_markers_are_still_missing_values(tmp_path, text, column):
    from dpposterior.tabular import build_design, parse_schema, read_table

    (tmp_path / "d.csv").write_text(text)
    with pytest.raises(ValueError, match=f"^{column} has missing values; the tool does not impute"):
        build_design(read_table(tmp_path / "d.csv"), parse_schema(NA_SCHEMA), "y")


# ---------------------------------------------------------------------------------------------
# a column name with dots written unquoted in the schema, [columns.capital.gain]: TOML nests it, and
# the error blamed an undeclared type of a column 'capital' the user never named


@pytest.mark.parametrize("header, name", [("capital.gain", "capital.gain"), ("hours.per.week", "hours.per.week")])
def test_an_unquoted_dotted_column_name_gets_a_hint(tmp_path, header, name):
    from dpposterior.tabular import load_schema

    (tmp_path / "s.toml").write_text(f'[columns.{header}]\ntype = "numeric"\nbounds = [0, 100]\n')
    with pytest.raises(ValueError, match=f'for a column named {name!r} write \\[columns."{name}"\\]'):
        load_schema(tmp_path / "s.toml")


def test_invalid_toml_says_how_to_quote_a_column_name(tmp_path):
    from dpposterior.tabular import load_schema

    (tmp_path / "s.toml").write_text('[columns.native country]\ntype = "categorical"\ncategories = ["a", "b"]\n')
    with pytest.raises(ValueError, match=r"is not valid TOML: .* goes in quotes"):
        load_schema(tmp_path / "s.toml")


# ---------------------------------------------------------------------------------------------
# a 0/1 target declared numeric [0, 1] holding a 2, with the default out_of_bounds = "clip": the
# error claimed out_of_bounds = "error" and advised setting "clip", which the schema already had


def test_a_binary_numeric_target_outside_0_1_says_what_it_must_hold():
    import pandas as pd

    from dpposterior.tabular import build_design, parse_schema

    doc = {"columns": {"age": {"type": "numeric", "bounds": [18, 90]}, "y": {"type": "numeric", "bounds": [0, 1]}}}
    frame = pd.DataFrame({"age": ["30", "40"], "y": ["0", "2"]})
    with pytest.raises(ValueError, match=r"^target column 'y' must hold only 0 and 1 for this model"):
        build_design(frame, parse_schema(doc), "y")
    with pytest.raises(ValueError, match=r"outside its declared bounds \[0, 1\] \(out_of_bounds = \"error\""):
        build_design(frame, parse_schema({**doc, "out_of_bounds": "error"}), "y")


# ---------------------------------------------------------------------------------------------
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


# ---------------------------------------------------------------------------------------------
# a Parquet file without the .parquet/.pq suffix (data.parq, or no suffix) was read as CSV text:
# "cannot read data file ...: 'utf-8' codec can't decode byte ..."


@pytest.mark.parametrize("name", ["d.parq", "records"])
def test_a_parquet_file_is_recognised_by_its_magic_bytes(tiny_table, name):
    pytest.importorskip("pyarrow", reason="Parquet needs pyarrow (the dev extra installs it)")
    import pandas as pd

    from dpposterior.tabular import read_table

    pd.read_csv(tiny_table / "d.csv").to_parquet(tiny_table / name)
    frame = read_table(tiny_table / name)
    assert list(frame.columns) == ["age", "region", "y"] and frame["age"].tolist() == [30, 45, 60]


# ---------------------------------------------------------------------------------------------
# a file separated by semicolons or tabs: read as one column named "age;region;y", and the error was
# "target column 'y' is missing from the data (columns: age;region;y)"; a .tsv file was not read


@pytest.mark.parametrize("sep, name", [(";", "semicolons"), ("\t", "tabs"), ("|", "vertical bars")])
def test_a_file_with_another_separator_is_named_as_such(tmp_path, sep, name):
    from dpposterior.tabular import read_table

    (tmp_path / "d.csv").write_text(sep.join(["age", "region", "y"]) + "\n" + sep.join(["30", "north", "no"]) + "\n")
    with pytest.raises(ValueError, match=f"its header was read as one column: the file seems separated by {name}"):
        read_table(tmp_path / "d.csv")


@pytest.mark.parametrize("name", ["d.tsv", "d.tsv.gz"])
def test_a_tsv_file_is_read_as_tab_separated(tmp_path, name):
    import gzip

    from dpposterior.tabular import read_table

    text = b"age\tregion\ty\n30\tnorth, east\tno\n"
    (tmp_path / name).write_bytes(gzip.compress(text) if name.endswith(".gz") else text)
    frame = read_table(tmp_path / name)
    assert frame.to_dict("list") == {"age": ["30"], "region": ["north, east"], "y": ["no"]}


# ---------------------------------------------------------------------------------------------
# a CSV saved as Latin-1 / Windows-1252 or UTF-16 (Excel's defaults in many places): the error was
# Python's "'utf-8' codec can't decode byte 0xf6 in position 1: invalid start byte", quoting a byte
# of a record and not saying what to do


@pytest.mark.parametrize("encoding", ["latin-1", "utf-16"])
def test_a_csv_that_is_not_utf8_says_so_without_quoting_its_bytes(tmp_path, encoding):
    from dpposterior.tabular import read_table

    (tmp_path / "d.csv").write_bytes("age,region,y\n30,Zürich,no\n".encode(encoding))
    with pytest.raises(ValueError, match="it is not UTF-8 text .*save it as UTF-8") as e:
        read_table(tmp_path / "d.csv")
    assert "0x" not in str(e.value) and "position" not in str(e.value)


# ---------------------------------------------------------------------------------------------
# integer categories [0, 1] and a float column of whole numbers (an integer column that once held
# missing values, as pandas writes it to Parquet): 1.0 was compared as the text "1.0", and the
# error said the column "has values that are not among its declared categories ['0', '1']"


def test_a_float_column_of_whole_numbers_matches_integer_categories():
    import pandas as pd

    from dpposterior.tabular import build_design, parse_schema

    doc = {
        "columns": {
            "grade": {"type": "categorical", "categories": [0, 1, 2]},
            "y": {"type": "categorical", "categories": [0, 1]},
        }
    }
    frame = pd.DataFrame({"grade": [2.0, 0.0, 1.0], "y": pd.array([1.0, 0.0, 1.0], dtype="Float64")})
    d = build_design(frame, parse_schema(doc), "y")
    assert d.X[:, :2].tolist() == [[0, 1], [0, 0], [1, 0]] and d.y.tolist() == [1, 0, 1]
    frame["grade"] = [2.5, 0.0, 1.0]
    with pytest.raises(ValueError, match="column 'grade' has values that are not among its declared categories"):
        build_design(frame, parse_schema(doc), "y")


# ---------------------------------------------------------------------------------------------
# data from a pipe (dpposterior fit <(zcat data.csv.gz) ..., /dev/stdin): the file was read twice
# (the records, then the header as written), and the second read found the pipe empty: "cannot read
# data file '/dev/fd/63': No columns to parse from file"


@pytest.mark.skipif(not __import__("pathlib").Path("/dev/fd").is_dir(), reason="needs /dev/fd (Linux, macOS)")
def test_a_csv_from_a_pipe_is_read(tiny_table):
    import os

    from dpposterior.tabular import read_table

    r, w = os.pipe()
    try:
        os.write(w, (tiny_table / "d.csv").read_bytes())  # a few bytes: fits the pipe's buffer
        os.close(w)
        frame = read_table(f"/dev/fd/{r}")
    finally:
        os.close(r)
    assert frame.to_dict("list") == {
        "age": ["30", "45", "60"],
        "region": ["north", "south", "north"],
        "y": ["no", "yes", "yes"],
    }


# ---------------------------------------------------------------------------------------------
# an empty file (0 bytes, or blank lines only): pandas' "No columns to parse from file"


@pytest.mark.parametrize("content", [b"", b"\n\n", b"   \n"])
def test_an_empty_file_is_called_empty(capsys, tiny_table, monkeypatch, content):
    _no_release(monkeypatch)
    (tiny_table / "empty.csv").write_bytes(content)
    msg = _error(capsys, _argv(tiny_table, "fit", "--steps", "20", csv="empty.csv"), "fit")
    assert msg == (
        f"data file {str(tiny_table / 'empty.csv')!r} is empty: it needs a header row naming the columns "
        "and a row per record"
    )


# ---------------------------------------------------------------------------------------------
# the same name or level in two Unicode spellings ("é" as one code point in the schema, as "e" and a
# combining accent in the data): "column 'région' ... is missing from the data (columns: région, ...)",
# two names that print alike


def test_names_and_levels_match_whatever_their_unicode_spelling(tmp_path):
    import unicodedata

    from dpposterior.tabular import build_design, load_schema, read_table

    def nfd(text):
        return unicodedata.normalize("NFD", text)

    (tmp_path / "d.csv").write_text(f"{nfd('größe')},{nfd('région')},y\n170,{nfd('Zürich')},no\n180,Genève,yes\n")
    (tmp_path / "s.toml").write_text(
        '[columns."größe"]\ntype = "numeric"\nbounds = [100, 220]\n'
        '[columns."région"]\ntype = "categorical"\ncategories = ["Zürich", "Genève"]\n'
        '[columns.y]\ntype = "categorical"\ncategories = ["no", "yes"]\n'
    )
    d = build_design(read_table(tmp_path / "d.csv"), load_schema(tmp_path / "s.toml"), "y")
    assert d.feature_names == ("größe", "région=Genève", "(intercept)")
    assert d.X[:, 1].tolist() == [0, 1]
    d = build_design(read_table(tmp_path / "d.csv"), load_schema(tmp_path / "s.toml"), "y", features=[nfd("région")])
    assert d.feature_names == ("région=Genève", "(intercept)")


# ---------------------------------------------------------------------------------------------
# a column named like another column's indicator ("region=south") or like the intercept: two design
# columns with one name, two report rows that could not be told apart


@pytest.mark.parametrize("name, clash", [("region=south", "region=south"), ("(intercept)", "(intercept)")])
def test_design_columns_that_would_share_a_name_are_refused(name, clash):
    import pandas as pd

    from dpposterior.tabular import build_design, parse_schema

    doc = {
        "columns": {
            "region": {"type": "categorical", "categories": ["north", "south"]},
            name: {"type": "numeric", "bounds": [0, 1]},
            "y": {"type": "categorical", "categories": ["no", "yes"]},
        }
    }
    frame = pd.DataFrame({"region": ["north", "south"], name: ["0", "1"], "y": ["no", "yes"]})
    with pytest.raises(ValueError, match=re.escape(f"two design columns would be named {clash!r}")):
        build_design(frame, parse_schema(doc), "y")


# ---------------------------------------------------------------------------------------------
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


# ---------------------------------------------------------------------------------------------
# an error of the post-processing after the DPVI release (a solver failure, a figure matplotlib
# cannot draw): the release was saved (trace.npz) and added to --ledger only at the end of the
# report, so the error lost it, and the ledger did not count the privacy it had spent


def _fake_release(T=20, d=6):
    import numpy as np

    from dpposterior.privacy import PrivacySpent, dpsgd_epsilon
    from dpposterior.releases.layout import ParamLayout
    from dpposterior.releases.trace import DPVITrace

    rng = np.random.default_rng(0)
    # a record that describes the trace (saving checks it): sigma 2 on gradients of noise std 2
    spent = PrivacySpent(
        epsilon=dpsgd_epsilon(2.0, 1e-5, 0.1, T),
        delta=1e-5,
        neighbouring="add_remove",
        accountant="pld",
        mechanism="poisson_subsampled_gaussian",
        noise_multiplier=2.0,
        sampling_rate=0.1,
        num_steps=T,
    )
    return DPVITrace(
        phi=rng.normal(size=(T, d)),
        grads=2.0 * rng.normal(size=(T, d)),
        final_phi=rng.normal(size=d),
        beta=np.ones(d),
        learning_rate=0.01,
        clip=1.0,
        noise_multiplier=2.0,
        sampling_rate=0.1,
        num_steps=T,
        dataset_size=3,
        num_mc=10,
        layout=ParamLayout.flat(d // 2),
        privacy=spent,
    )


def test_fit_saves_the_release_and_its_ledger_entry_before_the_post_processing(capsys, tiny_table, monkeypatch):
    from dpposterior.privacy import Ledger

    def failing_solver(*a, **k):
        raise ValueError("the solver failed")

    monkeypatch.setattr("dpposterior.vi.dpvi", lambda *a, **k: _fake_release())
    monkeypatch.setattr("dpposterior.noise_aware.noise_aware_posterior", failing_solver)
    ledger = tiny_table / "ledger.json"
    msg = _error(capsys, _argv(tiny_table, "fit", "--steps", "20", "--ledger", ledger), "fit")
    assert msg.startswith(
        "the solver failed (this came after the DP release, which is saved in "
        f"{str(tiny_table / 'out' / 'trace.npz')!r} and recorded in the ledger"
    ), msg
    assert (tiny_table / "out" / "trace.npz").is_file() and len(Ledger.load(ledger)) == 1


# ---------------------------------------------------------------------------------------------
# a wide table (a categorical column with thousands of declared levels): the interval figures had a row
# per parameter, 3,000 rows took 30 s to draw and 10,000 over 4 minutes (beyond matplotlib's image
# size), all after the release


def test_interval_figures_of_a_wide_table_show_a_stated_subset(tmp_path, monkeypatch):
    from dpposterior.tabular import fit

    seen = {}

    def record(rows, labels, path, title, **kwargs):
        seen.update(rows=rows, title=title)
        return path

    monkeypatch.setattr("dpposterior.plots.interval_plot", record)
    rows = [{f"w[{j}]": (-1.0, 0.0, 1.0) for j in range(3000)}] * 2
    fit._figure_intervals(rows, ["a", "b"], tmp_path / "f.png", "90% intervals")
    assert [len(r) for r in seen["rows"]] == [fit.MAX_FIGURE_PARAMETERS] * 2
    assert list(seen["rows"][0]) == [f"w[{j}]" for j in range(fit.MAX_FIGURE_PARAMETERS)]
    assert f"the first {fit.MAX_FIGURE_PARAMETERS} of 3000 parameters; the table lists all" in seen["title"]
    assert fit._every_parameter([{}] * 3000) == (
        f"the first {fit.MAX_FIGURE_PARAMETERS} of the 3000 parameters (the table lists all)"
    )


# ---------------------------------------------------------------------------------------------
# a CSV without a header row: its first record became the column names, and the error quoted them,
# "target column 'y' is missing from the data (columns: 30, north, no)", a record's values in the
# message (which must never show one), with no hint that the header row is missing


def test_a_file_without_a_header_row_is_named_without_quoting_its_first_record(capsys, tiny_table, monkeypatch):
    _no_release(monkeypatch)
    (tiny_table / "nohead.csv").write_text("37,south,yes\n45,south,yes\n60,north,no\n")
    msg = _error(capsys, _argv(tiny_table, "fit", "--steps", "20", csv="nohead.csv"), "fit")
    assert msg.startswith(
        "none of the 3 column names of the data matches a column declared in s.toml (age, region, "
        "y): does the file start with a header row"
    ), msg
    assert "37" not in msg and "south" not in msg


# ---------------------------------------------------------------------------------------------
# out_of_bounds = "error" written at the end of the schema file: TOML gives it to the last column
# table, and the error said only "unknown keys ['out_of_bounds']; allowed: type, bounds, ..."


def test_out_of_bounds_below_a_column_table_says_where_it_belongs(tmp_path):
    from dpposterior.tabular import load_schema

    (tmp_path / "s.toml").write_text('[columns.age]\ntype = "numeric"\nbounds = [18, 90]\nout_of_bounds = "error"\n')
    with pytest.raises(ValueError, match="out_of_bounds is a top-level key .*: put it above the first"):
        load_schema(tmp_path / "s.toml")


# ---------------------------------------------------------------------------------------------
# a DataFrame with column names that are not strings (pd.read_csv(header=None) numbers them): the
# missing-column error failed in its own message, "TypeError: sequence item 0: expected str instance,
# int found"


@pytest.mark.parametrize(
    "columns, missing", [([0, "y"], "column 'age' (declared in the schema)"), (["age", 1], "target column 'y'")]
)
def test_a_missing_column_beside_non_string_names_is_a_value_error(columns, missing):
    import pandas as pd

    from dpposterior.tabular import build_design, parse_schema

    doc = {
        "columns": {
            "age": {"type": "numeric", "bounds": [18, 90]},
            "y": {"type": "categorical", "categories": ["no", "yes"]},
        }
    }
    frame = pd.DataFrame(dict(zip(columns, [["30", "40"], ["no", "yes"]])))
    with pytest.raises(ValueError, match=re.escape(f"{missing} is missing from the data (columns: ")):
        build_design(frame, parse_schema(doc), "y")


# ---------------------------------------------------------------------------------------------
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


# ---------------------------------------------------------------------------------------------
# compare with dp-fast-mh at a budget its calibration refuses (per-iteration epsilon >= 1): the
# error came after the DPVI release had been computed, which was then lost


def test_compare_checks_the_dp_fast_mh_calibration_before_any_release(capsys, tiny_table, monkeypatch):
    _no_release(monkeypatch)
    argv = _argv(tiny_table, "compare", "--steps", "20", "--methods", "na-dpvi", "dp-fast-mh", epsilon="50")
    msg = _error(capsys, argv, "compare")
    assert "allows a per-iteration epsilon >= 1" in msg, msg


# ---------------------------------------------------------------------------------------------
# bounds beyond the float range: [-1e308, 1e308] made upper - lower = inf, so every value of the
# feature was rescaled to 0 (a constant feature, silently); an integer bound of 400 digits (TOML
# integers are unbounded) was an OverflowError traceback


def test_bounds_beyond_the_float_range_are_refused(tmp_path):
    from dpposterior.tabular import load_schema, parse_schema

    with pytest.raises(ValueError, match=r"bounds \[-1e\+308, 1e\+308\] are too far apart"):
        parse_schema({"columns": {"age": {"type": "numeric", "bounds": [-1e308, 1e308]}}})
    (tmp_path / "s.toml").write_text('[columns.age]\ntype = "numeric"\nbounds = [0, 1' + "0" * 400 + "]\n")
    with pytest.raises(ValueError, match="bounds must be two finite numbers"):
        load_schema(tmp_path / "s.toml")


# ---------------------------------------------------------------------------------------------
# compare --budget each with dp-fast-mh and another method: the chain's (epsilon, delta) release
# uses all of delta itself, so the ledger has no finite total at delta, and ledger.total(delta)
# raised after every release had been computed; the report, and the releases, were lost


def test_compare_each_with_dp_fast_mh_states_a_total_instead_of_losing_the_releases(tiny_table, monkeypatch):
    import numpy as np

    from dpposterior.baselines import DrawsPosterior
    from dpposterior.privacy import PrivacySpent
    from dpposterior.tabular import compare_table

    release = _fake_release(T=20, d=6)
    chain = PrivacySpent(
        epsilon=1.0,
        delta=1e-5,
        neighbouring="replace_one",
        accountant="optimal",
        mechanism="dp_fast_mh",
        noise_multiplier=400.0,
        sampling_rate=1.0,
        num_steps=20,
    )

    def fake_chain(design, **kw):
        return DrawsPosterior(
            layout=release.layout,
            draws=np.zeros((10, 3), np.float32),
            privacy=chain,
            method="dp_fast_mh",
            diagnostics={"moved": 0.0, "mean_step": 0.0, "distance_from_start": 0.0},
        )

    def fake_figure(rows, labels, path, title):
        path.write_bytes(b"png")
        return path

    monkeypatch.setattr("dpposterior.vi.dpvi", lambda *a, **k: release)
    monkeypatch.setattr("dpposterior.noise_aware.noise_aware_posterior", lambda trace, **k: fake_chain(None))
    monkeypatch.setattr("dpposterior.tabular.fit.dp_fast_mh_logistic", fake_chain)
    monkeypatch.setattr("dpposterior.vi.model_inspect.inspect_model", lambda *a, **k: release.layout)
    monkeypatch.setattr("dpposterior.tabular.fit._figure_intervals", fake_figure)
    res = compare_table(
        tiny_table / "d.csv",
        tiny_table / "s.toml",
        "y",
        methods=["na-dpvi", "dp-fast-mh"],
        budget="each",
        epsilon=1.0,
        delta=1e-5,
        num_steps=20,
        out=tiny_table / "out",
        log=lambda line: None,
    )
    assert res["total"].delta == pytest.approx(2e-5) and 1.0 < res["total"].epsilon < 10.0
    md = res["report_md"].read_text()
    assert "at delta = 2e-05 (2 x delta: the releases' own deltas" in md


# ---------------------------------------------------------------------------------------------
# an Excel or OpenDocument workbook given as the data: read as CSV text, "it is not UTF-8 text (...
# from a Latin-1, Windows-1252 or UTF-16 file)", which does not say what the file is


@pytest.mark.parametrize(
    "name, content",
    [
        ("d.xlsx", b"PK\x03\x04" + b"\x00" * 60),
        ("d.ods", b"PK\x03\x04" + b"\x00" * 60),
        ("d.csv", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 60),
    ],
    ids=["xlsx", "ods", "xls-saved-as-csv"],
)
def test_a_spreadsheet_workbook_is_named_as_such(tmp_path, name, content):
    from dpposterior.tabular import read_table

    (tmp_path / name).write_bytes(content)
    with pytest.raises(ValueError, match="it is a spreadsheet workbook .*, not CSV; save the sheet as CSV"):
        read_table(tmp_path / name)


# ---------------------------------------------------------------------------------------------
# the report did not say which level of a binary target is coded 1, nor the reference level of a
# categorical feature: with categories = ["yes", "no"] the coefficients are for P(no), and nothing
# in the report showed it (signs read the wrong way round)


def test_the_report_states_the_coding_of_the_target_and_the_reference_levels(tiny_table):
    from dpposterior.tabular import build_design, load_schema, read_table

    (tiny_table / "r.toml").write_text((tiny_table / "s.toml").read_text().replace('["no", "yes"]', '["yes", "no"]'))
    d = build_design(read_table(tiny_table / "d.csv"), load_schema(tiny_table / "r.toml"), "y")
    lines = d.transforms()
    assert "target y: binary, y = 1 for 'no' and 0 for 'yes' (the second declared category is coded 1)" in lines
    assert any(
        line.startswith(
            "region: categorical, a 0/1 indicator per declared level but the first, 'north' (the reference level"
        )
        for line in lines
    )
    assert d.y.tolist() == [1, 0, 0]


# ---------------------------------------------------------------------------------------------
# --features age,region (a comma-separated list, as many tools take it): "column 'age,region' is not
# declared in s.toml (declared: age, region, y); add a [columns.age,region] table ..."


def test_comma_separated_features_say_to_separate_them(capsys, tiny_table, monkeypatch):
    _no_release(monkeypatch)
    msg = _error(capsys, _argv(tiny_table, "fit", "--steps", "20", "--features", "age,region"), "fit")
    assert msg == (
        "feature 'age,region' is not a column: give the features as separate names, ['age', 'region'] "
        "(on the command line: --features age region)"
    )


def test_an_undeclared_column_is_shown_with_the_toml_quotes_it_needs():
    from dpposterior.tabular import parse_schema

    schema = parse_schema({"columns": {"age": {"type": "numeric", "bounds": [0, 1]}}})
    with pytest.raises(ValueError, match=re.escape('add a [columns."capital.gain"] table')):
        schema.column("capital.gain")
    with pytest.raises(ValueError, match=re.escape("add a [columns.age2] table")):
        schema.column("age2")


# ---------------------------------------------------------------------------------------------
# categories that could never match the data, whose values are compared without surrounding spaces:
# " north" (the data's "north" was refused as undeclared) and "" (an empty cell was refused as
# missing "unless declared as a category", although it was declared)


def test_categories_are_compared_without_spaces_and_cannot_be_empty(tiny_table):
    from dpposterior.tabular import build_design, parse_schema, read_table

    doc = {
        "columns": {
            "region": {"type": "categorical", "categories": [" north", "south "]},
            "y": {"type": "categorical", "categories": ["no", "yes"]},
        }
    }
    d = build_design(read_table(tiny_table / "d.csv"), parse_schema(doc), "y")
    assert d.feature_names == ("region=south", "(intercept)") and d.X[:, 0].tolist() == [0, 1, 0]
    doc["columns"]["region"]["categories"] = ["north", "south", ""]
    with pytest.raises(ValueError, match="a category cannot be empty"):
        parse_schema(doc)


def test_column_names_are_compared_without_surrounding_spaces(tiny_table):
    # [columns." age"] and --target "y " never matched the data's names, which read_table strips:
    # "column ' age' ... is missing from the data (columns: age, region, y)"
    from dpposterior.tabular import build_design, parse_schema, read_table

    doc = {
        "columns": {
            " age": {"type": "numeric", "bounds": [18, 90]},
            "y": {"type": "categorical", "categories": ["no", "yes"]},
        }
    }
    d = build_design(read_table(tiny_table / "d.csv"), parse_schema(doc), "y ")
    assert d.feature_names == ("age", "(intercept)")


# ---------------------------------------------------------------------------------------------
# a model of your own with a proportion target declared numeric [0, 1]: the schema alone made it a
# 0/1 target ("must hold only 0 and 1"), so a Beta or binomial-proportion model could not be fitted


def test_a_proportion_target_of_a_model_of_your_own_can_be_declared_numeric(tmp_path):
    import pandas as pd

    from dpposterior.tabular import build_design, load_schema
    from dpposterior.tabular.fit import _target_kind

    (tmp_path / "s.toml").write_text(
        '[columns.age]\ntype = "numeric"\nbounds = [18, 90]\n\n[columns.y]\ntype = "numeric"\nbounds = [0, 1]\n'
    )
    schema = load_schema(tmp_path / "s.toml")
    assert _target_kind(schema, "y", "") == "binary"  # the default, from the schema alone
    kind = _target_kind(schema, "y", "", "numeric")  # --target-kind numeric
    d = build_design(pd.DataFrame({"age": [30.0, 60.0], "y": [0.3, 0.75]}), schema, "y", target_kind=kind)
    assert d.target_kind == "numeric" and d.y.tolist() == pytest.approx([-0.4, 0.5])
    with pytest.raises(ValueError, match="target_kind must be one of"):
        _target_kind(schema, "y", "", "proportion")


def test_target_kind_against_a_built_in_model_is_refused(capsys, tiny_table, monkeypatch):
    _no_release(monkeypatch)
    msg = _error(capsys, _argv(tiny_table, "fit", "--target-kind", "numeric"), "fit")
    assert "does not fit the built-in model, whose target is binary" in msg and "--target-kind" in msg, msg
    assert not (tiny_table / "out").exists()


# ---------------------------------------------------------------------------------------------
# compare: the releases were kept in memory until the report was written, so an error of a later
# release (or of any post-processing) lost the earlier ones, with the privacy they had spent


def test_compare_writes_each_release_and_the_ledger_as_soon_as_it_is_made(capsys, tiny_table, monkeypatch):
    from dpposterior.privacy import Ledger
    from dpposterior.releases.trace import DPVITrace

    def second_release_fails(*a, **k):
        raise ValueError("the second mechanism failed")

    monkeypatch.setattr("dpposterior.vi.dpvi", lambda *a, **k: _fake_release(T=60))
    monkeypatch.setattr("dpposterior.vi.dpvim.dpvim", second_release_fails)
    msg = _error(capsys, _argv(tiny_table, "compare", "--steps", "60", "--methods", "na-dpvi", "dpvim"), "compare")
    out = tiny_table / "out"
    assert msg.startswith(
        "the second mechanism failed (this came after the DP releases, which are saved in "
        f"{str(out / 'releases')!r} and recorded in the ledger {str(out / 'ledger.json')!r})"
    ), msg
    saved = DPVITrace.load(out / "releases" / "na-dpvi.npz")
    assert saved.privacy == _fake_release(T=60).privacy
    assert [e.label for e in Ledger.load(out / "ledger.json").entries] == ["na-dpvi (DPVI release; naive shares it)"]


def test_every_kind_of_compare_release_is_written_with_its_privacy(tmp_path):
    import json

    import numpy as np

    from dpposterior.baselines import DrawsPosterior, release_regression_statistics
    from dpposterior.privacy import PrivacySpent
    from dpposterior.tabular.releases import save_release

    rng = np.random.default_rng(0)
    rel = release_regression_statistics(
        rng.uniform(-1, 1, (30, 2)), rng.uniform(-1, 1, 30), epsilon=1.0, x_bound=1.0, y_bound=1.0, rng_key=0
    )
    fake = _fake_release()
    chain = DrawsPosterior(
        layout=fake.layout,
        draws=np.zeros((5, 3), np.float32),
        privacy=fake.privacy,
        method="dp_fast_mh",
        diagnostics={"moved": 0.5},
    )
    for name, release, arrays in (
        ("gibbs", rel, {"noisy_xx", "noisy_xy", "noisy_yy", "x_bound"}),
        ("chain", chain, {"draws"}),
    ):
        with np.load(save_release(release, tmp_path / f"{name}.npz")) as z:
            meta = json.loads(z["metadata"].tobytes().decode())
            assert arrays | {"metadata", "checksum"} == set(z.files)
            assert (
                PrivacySpent.from_dict(meta["privacy"]) == release.privacy and meta["format"] == "dpposterior-release"
            )
            if name == "gibbs":
                np.testing.assert_array_equal(z["noisy_xy"], rel.noisy["xy"])
    with pytest.raises(TypeError, match="cannot save a release of type dict"):
        save_release({}, tmp_path / "x.npz")


# ---------------------------------------------------------------------------------------------
# fit --ledger whose earlier release is composed from its (epsilon, delta) (a DP-Fast MH chain, a
# pure-DP statistic) with a delta at least this run's: ledger.total(delta) has no finite value, and it
# raised after the release, in the report


def test_fit_ledger_with_an_approximate_dp_release_states_the_total_at_a_larger_delta(tiny_table, monkeypatch):
    from dpposterior.privacy import Ledger, PrivacySpent
    from dpposterior.tabular import fit_table

    chain = PrivacySpent(
        epsilon=1.0,
        delta=1e-5,
        neighbouring="add_remove",
        accountant="optimal",
        mechanism="dp_fast_mh",
        noise_multiplier=400.0,
        sampling_rate=1.0,
        num_steps=20,
    )
    book = Ledger()
    book.add(chain, "an earlier chain")
    ledger = book.save(tiny_table / "ledger.json")
    assert book.delta_used() == 1e-5

    def fake_figure(rows, labels, path, title):
        path.write_bytes(b"png")
        return path

    monkeypatch.setattr("dpposterior.vi.dpvi", lambda *a, **k: _fake_release(T=60))
    monkeypatch.setattr("dpposterior.noise_aware.noise_aware_posterior", lambda t, **k: t.last_iterate_posterior())
    monkeypatch.setattr("dpposterior.tabular.fit._figure_intervals", fake_figure)
    monkeypatch.setattr("dpposterior.plots.trace_plot", lambda trace, path, **k: fake_figure(0, 0, path, 0))
    fit_table(
        tiny_table / "d.csv",
        tiny_table / "s.toml",
        "y",
        epsilon=1.0,
        delta=1e-5,
        num_steps=60,
        out=tiny_table / "out",
        ledger=ledger,
        progress=False,
        log=lambda line: None,
    )
    md = (tiny_table / "out" / "summary.md").read_text()
    assert "at delta = 2e-05 (add_remove neighbours); stated at this larger delta" in md, md
    assert len(Ledger.load(ledger)) == 2
    # a ledger whose releases leave no delta below 1 is refused before the release
    book.add(
        PrivacySpent(
            epsilon=1.0,
            delta=0.99999,
            neighbouring="add_remove",
            accountant="basic",
            mechanism="dp_fast_mh",
            noise_multiplier=1.0,
            sampling_rate=1.0,
            num_steps=1,
        ),
        "x",
    )
    book.save(ledger)
    _no_release(monkeypatch)
    with pytest.raises(ValueError, match="already use a total delta of 1"):
        fit_table(
            tiny_table / "d.csv",
            tiny_table / "s.toml",
            "y",
            epsilon=1.0,
            delta=1e-5,
            num_steps=60,
            out=tiny_table / "out2",
            ledger=ledger,
            progress=False,
            log=lambda line: None,
        )
