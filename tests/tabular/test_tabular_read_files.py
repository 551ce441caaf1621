"""CSV files as users bring them to ``dpposterior fit`` / ``compare``: compressed, exported from
spreadsheets and other tools, joined, with booleans, in other encodings and separators, with too many
fields or repeated names. Read and design only: no DP-SGD run is reached."""

from __future__ import annotations

import gzip

import numpy as np
import pandas as pd
import pytest

from dpposterior.cli import main
from dpposterior.tabular import load_schema, parse_schema, read_table
from dpposterior.tabular.design import build_design

#: the tiny table's records (conftest's TINY_CSV, the fixture tiny_table's d.csv)
TINY_CSV = "age,region,y\n30,north,no\n45,south,yes\n60,north,yes\n"
#: what the tiny table (with its schema, s.toml) gives, however its file is spelled
X_TINY = [[-2 / 3, 0.0, 1.0], [-0.25, 1.0, 1.0], [1 / 6, 0.0, 1.0]]


def test_the_tiny_table_is_conftests(tiny_table):
    assert (tiny_table / "d.csv").read_text() == TINY_CSV


def _design(tmp, name="d.csv", schema="s.toml"):
    return build_design(read_table(tmp / name), load_schema(tmp / schema), "y")


# ---------------------------------------------------------------------------------------------
# already right (kept so): a byte-order mark, CRLF or CR line endings, blank lines
# at the end, spaces around values and names (as in the raw UCI Adult files), bzip2


@pytest.mark.parametrize(
    "content",
    [
        "\ufeff" + TINY_CSV,
        TINY_CSV.replace("\n", "\r\n"),
        "\ufeff" + TINY_CSV.replace("\n", "\r\n"),
        TINY_CSV.replace("\n", "\r"),
        TINY_CSV + "\n\n   \n",
        " age , region , y \n30, north, no\n 45 , south ,yes\n60 ,north , yes\n",
    ],
    ids=["bom", "crlf", "bom-crlf", "cr", "blank-lines", "spaces"],
)
def test_file_spellings_give_the_same_design(tiny_table, content):
    (tiny_table / "d.csv").write_bytes(content.encode("utf-8"))
    d = _design(tiny_table)
    assert np.allclose(d.X, X_TINY) and d.y.tolist() == [0, 1, 1]


# ---------------------------------------------------------------------------------------------
# gzip told by its content: a gzip file named .csv (or gzip bytes from a pipe) was read as text,
# "it is not UTF-8 text (... from a Latin-1, Windows-1252 or UTF-16 file)"; a plain file named .gz
# was "Not a gzipped file (b'ag')", quoting the file's first bytes


@pytest.mark.parametrize("name", ["d.csv.gz", "d.csv", "d"])
def test_a_gzip_file_is_read_whatever_its_name(tiny_table, name):
    (tiny_table / name).write_bytes(gzip.compress(("\ufeff" + TINY_CSV.replace("\n", "\r\n")).encode()))
    d = _design(tiny_table, name)
    assert np.allclose(d.X, X_TINY) and d.y.tolist() == [0, 1, 1]


@pytest.mark.skipif(not __import__("pathlib").Path("/dev/fd").is_dir(), reason="needs /dev/fd (Linux, macOS)")
def test_gzip_bytes_from_a_pipe_are_read(tiny_table):
    import os

    r, w = os.pipe()
    try:
        os.write(w, gzip.compress(TINY_CSV.encode()))  # a few bytes: fits the pipe's buffer
        os.close(w)
        frame = read_table(f"/dev/fd/{r}")
    finally:
        os.close(r)
    assert frame.to_dict("list")["y"] == ["no", "yes", "yes"]


def test_a_plain_file_named_gz_is_named_as_such(tiny_table):
    (tiny_table / "d.csv.gz").write_text(TINY_CSV)
    with pytest.raises(ValueError, match="it is named .gz but is not gzip-compressed") as e:
        read_table(tiny_table / "d.csv.gz")
    assert "b'" not in str(e.value) and "age" not in str(e.value)


# ---------------------------------------------------------------------------------------------
# rows that are not records: ",," rows below a spreadsheet's table were records of missing values
# ("column 'age' has missing values", which the user cannot find); a repeated header (two exports
# joined) was "column 'age' is declared numeric but holds values that are not numbers"


@pytest.mark.parametrize("content", [TINY_CSV + ",,\n,,\n", TINY_CSV + " , ,\n"], ids=["commas", "spaces"])
def test_rows_of_only_separators_are_named(capsys, tiny_table, content):
    (tiny_table / "d.csv").write_text(content)
    with pytest.raises(ValueError, match="it has rows whose every field is empty \\(only separators"):
        read_table(tiny_table / "d.csv")
    rc = main(
        [
            "fit",
            str(tiny_table / "d.csv"),
            "--target",
            "y",
            "--epsilon",
            "1",
            "--delta",
            "1e-5",
            "--bounds",
            str(tiny_table / "s.toml"),
            "--out",
            str(tiny_table / "out"),
            "--no-progress",
        ]
    )
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err and "every field is empty" in err


def test_a_repeated_header_row_is_named(tiny_table):
    body = TINY_CSV.split("\n", 1)[1]
    (tiny_table / "d.csv").write_text(TINY_CSV + " age , region,y\n" + body)
    with pytest.raises(ValueError, match="it has rows that repeat the header row \\(files joined"):
        read_table(tiny_table / "d.csv")
    # a value equal to a column's name in that column alone is a value
    (tiny_table / "d.csv").write_text("age,region,y\n30,region,no\n")
    assert read_table(tiny_table / "d.csv").shape == (1, 3)


# ---------------------------------------------------------------------------------------------
# categories as other tools write them: "1.0" (pandas' to_csv of an integer column that held missing
# values) was refused as "not among its declared categories ['0', '1']" although the same 1.0 in a
# Parquet file matched; booleans could not be declared (TOML [false, true] refused) and "TRUE" (R)
# or "True" (pandas) did not match a declared "true"


def test_whole_numbers_with_a_decimal_point_match_integer_levels(tmp_path):
    (tmp_path / "d.csv").write_text("grade,y\n2.0,1.\n0,0.0\n1.00,1\n")
    doc = {
        "columns": {
            "grade": {"type": "categorical", "categories": [0, 1, 2]},
            "y": {"type": "categorical", "categories": [0, 1]},
        }
    }
    d = build_design(read_table(tmp_path / "d.csv"), parse_schema(doc), "y")
    assert d.X[:, :2].tolist() == [[0, 1], [0, 0], [1, 0]] and d.y.tolist() == [1, 0, 1]
    for bad in ("2.5", "1.0e0", "1,0"):
        (tmp_path / "d.csv").write_text(f'grade,y\n"{bad}",1\n')
        with pytest.raises(ValueError, match="column 'grade' has values that are not among its declared categories"):
            build_design(read_table(tmp_path / "d.csv"), parse_schema(doc), "y")


@pytest.mark.parametrize("cats", [[False, True], ["false", "true"], ["False", "True"]])
def test_boolean_levels_match_every_spelling(tmp_path, cats):
    (tmp_path / "d.csv").write_text("flag,y\ntrue,TRUE\nFALSE,false\nTrue,False\n")
    doc = {
        "columns": {
            "flag": {"type": "categorical", "categories": cats},
            "y": {"type": "categorical", "categories": cats},
        }
    }
    d = build_design(read_table(tmp_path / "d.csv"), parse_schema(doc), "y")
    assert d.X[:, 0].tolist() == [1, 0, 1] and d.y.tolist() == [1, 0, 0]
    (tmp_path / "d.csv").write_text("flag,y\nyes,true\n")
    with pytest.raises(ValueError, match="column 'flag' has values that are not among its declared categories"):
        build_design(read_table(tmp_path / "d.csv"), parse_schema(doc), "y")


@pytest.mark.parametrize("cats", [[True, True], [False, "true"], [False, True, False]])
def test_boolean_levels_must_be_the_two_booleans(cats):
    with pytest.raises(ValueError, match="strings or integers, or the two booleans \\[false, true\\]"):
        parse_schema({"columns": {"flag": {"type": "categorical", "categories": cats}}})


def test_true_false_in_a_numeric_column_points_to_boolean_levels(tmp_path):
    (tmp_path / "d.csv").write_text("age,y\n30,true\n40,false\n")
    doc = {"columns": {"age": {"type": "numeric", "bounds": [0, 100]}, "y": {"type": "numeric", "bounds": [0, 1]}}}
    with pytest.raises(ValueError, match="not numbers .*true/false is categorical, categories = \\[false, true\\]"):
        build_design(read_table(tmp_path / "d.csv"), parse_schema(doc), "y")


# ---------------------------------------------------------------------------------------------
# a wide file: 1,000 columns read and built promptly; an error lists a few of the 1,001 names


def test_a_wide_file_error_lists_a_few_names(tmp_path):
    names = [f"c{i}" for i in range(1000)] + ["y"]
    (tmp_path / "d.csv").write_text(",".join(names) + "\n" + "\n".join([",".join(["1"] * 1000 + ["yes"])] * 5) + "\n")
    doc = {
        "columns": {
            **{f"c{i}": {"type": "numeric", "bounds": [0, 2]} for i in range(1000)},
            "y": {"type": "categorical", "categories": ["no", "yes"]},
        }
    }
    frame = read_table(tmp_path / "d.csv")
    assert build_design(frame, parse_schema(doc), "y").X.shape == (5, 1001)
    with pytest.raises(ValueError) as e:
        build_design(frame, parse_schema(doc), "income")
    assert str(e.value).endswith("(columns: " + ", ".join(names[:20]) + ", ... and 981 more)")


# repeated column names
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


def test_a_table_whose_shifted_values_would_pass_every_check_is_refused(tmp_path):
    # two numeric columns with the same bounds and a numeric 0/1 target: the shifted table passed every
    # check (a <- b's values, b <- y's values, y <- the surplus column) and would have been fitted
    from dpposterior.tabular import read_table

    (tmp_path / "d.csv").write_text("a,b,y\n5,1,0,1\n6,0,1,0\n")
    with pytest.raises(ValueError, match="more fields than the header"):
        read_table(tmp_path / "d.csv")


# a Parquet file without the .parquet/.pq suffix (data.parq, or no suffix) was read as CSV text:
# "cannot read data file ...: 'utf-8' codec can't decode byte ..."
@pytest.mark.parametrize("name", ["d.parq", "records"])
def test_a_parquet_file_is_recognised_by_its_magic_bytes(tiny_table, name):
    pytest.importorskip("pyarrow", reason="Parquet needs pyarrow (the dev extra installs it)")

    from dpposterior.tabular import read_table

    pd.read_csv(tiny_table / "d.csv").to_parquet(tiny_table / name)
    frame = read_table(tiny_table / name)
    assert list(frame.columns) == ["age", "region", "y"] and frame["age"].tolist() == [30, 45, 60]


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
