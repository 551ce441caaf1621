"""The TOML schema as users write it: dotted and spaced column names, keys in the wrong table, bounds beyond
the float range; each mistake named with the fix.
"""

from __future__ import annotations

import re

import pytest


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


# out_of_bounds = "error" written at the end of the schema file: TOML gives it to the last column
# table, and the error said only "unknown keys ['out_of_bounds']; allowed: type, bounds, ..."
def test_out_of_bounds_below_a_column_table_says_where_it_belongs(tmp_path):
    from dpposterior.tabular import load_schema

    (tmp_path / "s.toml").write_text('[columns.age]\ntype = "numeric"\nbounds = [18, 90]\nout_of_bounds = "error"\n')
    with pytest.raises(ValueError, match="out_of_bounds is a top-level key .*: put it above the first"):
        load_schema(tmp_path / "s.toml")


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


def test_an_undeclared_column_is_shown_with_the_toml_quotes_it_needs():
    from dpposterior.tabular import parse_schema

    schema = parse_schema({"columns": {"age": {"type": "numeric", "bounds": [0, 1]}}})
    with pytest.raises(ValueError, match=re.escape('add a [columns."capital.gain"] table')):
        schema.column("capital.gain")
    with pytest.raises(ValueError, match=re.escape("add a [columns.age2] table")):
        schema.column("age2")
