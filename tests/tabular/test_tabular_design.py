"""``build_design`` on the columns users bring: dates, missing-value markers, whole-number floats, Unicode
spellings, names with spaces, clashing design-column names, and the coding of targets and levels.
"""

from __future__ import annotations

import re

import pandas as pd
import pytest
from table_cli import no_release, table_argv

from cli_errors import cli_error as _error
from dpposterior.tabular import build_design, load_schema, read_table


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


def test_empty_features_list_is_not_replaced_by_every_column(tiny_table):
    from dpposterior.tabular.fit import _load

    design, *_ = _load(tiny_table / "d.csv", tiny_table / "s.toml", "y", "logistic", [], log=lambda s: None)
    assert design.feature_names == ("(intercept)",)


@pytest.fixture
def schema(tiny_table):
    return load_schema(tiny_table / "s.toml")


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

    no_release(monkeypatch)
    _frame(age=pd.to_datetime(["1990-01-01", "1970-05-01"])).to_parquet(tiny_table / "d.parquet")
    msg = _error(capsys, table_argv(tiny_table, "fit", "--steps", "20", csv="d.parquet"), "fit")
    assert msg.startswith("column 'age' is declared numeric but holds dates (dtype datetime64"), msg


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
    from dpposterior.tabular import build_design, parse_schema

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
    from dpposterior.tabular import build_design, parse_schema

    (tmp_path / "d.csv").write_text(text)
    with pytest.raises(ValueError, match=f"^{column} has missing values; the tool does not impute"):
        build_design(read_table(tmp_path / "d.csv"), parse_schema(NA_SCHEMA), "y")


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


# the same name or level in two Unicode spellings ("é" as one code point in the schema, as "e" and a
# combining accent in the data): "column 'région' ... is missing from the data (columns: région, ...)",
# two names that print alike
def test_names_and_levels_match_whatever_their_unicode_spelling(tmp_path):
    import unicodedata

    from dpposterior.tabular import build_design, load_schema

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


# the report did not say which level of a binary target is coded 1, nor the reference level of a
# categorical feature: with categories = ["yes", "no"] the coefficients are for P(no), and nothing
# in the report showed it (signs read the wrong way round)
def test_the_report_states_the_coding_of_the_target_and_the_reference_levels(tiny_table):
    from dpposterior.tabular import build_design, load_schema

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


# categories that could never match the data, whose values are compared without surrounding spaces:
# " north" (the data's "north" was refused as undeclared) and "" (an empty cell was refused as
# missing "unless declared as a category", although it was declared)
def test_categories_are_compared_without_spaces_and_cannot_be_empty(tiny_table):
    from dpposterior.tabular import build_design, parse_schema

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
    from dpposterior.tabular import build_design, parse_schema

    doc = {
        "columns": {
            " age": {"type": "numeric", "bounds": [18, 90]},
            "y": {"type": "categorical", "categories": ["no", "yes"]},
        }
    }
    d = build_design(read_table(tiny_table / "d.csv"), parse_schema(doc), "y ")
    assert d.feature_names == ("age", "(intercept)")


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
