"""Bad input to ``dpposterior fit`` / ``compare``: exit code 2 and a one-line reason, before any
private computation (no DP-SGD run is reached in these tests)."""

from __future__ import annotations

import pytest

from dpposterior.cli import main
from dpposterior.tabular import load_schema, parse_schema, read_table
from dpposterior.tabular.design import build_design


@pytest.fixture
def files(tiny_table):
    return tiny_table


def _run(capsys, *argv, command="fit"):
    rc = main([command, *map(str, argv)])
    err = capsys.readouterr().err.strip()
    return rc, err


def _fit(capsys, tmp, *, csv="d.csv", schema="s.toml", target="y", extra=(), command="fit", eps="1"):
    return _run(
        capsys,
        tmp / csv,
        "--target",
        target,
        "--epsilon",
        eps,
        "--delta",
        "1e-5",
        "--bounds",
        tmp / schema,
        "--out",
        tmp / "out",
        "--no-progress",
        *extra,
        command=command,
    )


def _one_line(rc, err, prefix="dpposterior fit: error: "):
    assert rc == 2
    assert "\n" not in err, err
    assert err.startswith(prefix), err
    return err[len(prefix) :]


@pytest.mark.parametrize("command", ["fit", "compare"])
def test_missing_target_column(capsys, files, command):
    msg = _one_line(*_fit(capsys, files, target="income", command=command), prefix=f"dpposterior {command}: error: ")
    assert msg.startswith("target column 'income' is missing from the data (columns: age, region, y)")


def test_missing_feature_column(capsys, files):
    (files / "d.csv").write_text("age,y\n30,no\n45,yes\n")
    msg = _one_line(*_fit(capsys, files))
    assert msg.startswith("column 'region' (declared in s.toml) is missing from the data (columns: age, y)")


def test_undeclared_feature_column(capsys, files):
    msg = _one_line(*_fit(capsys, files, extra=("--features", "age", "colour")))
    assert msg.startswith("column 'colour' is not declared in s.toml")


def test_unbounded_numeric_column(capsys, files):
    (files / "s.toml").write_text((files / "s.toml").read_text().replace("bounds = [18, 90]\n", ""))
    msg = _one_line(*_fit(capsys, files))
    assert msg.startswith(
        "s.toml: column 'age' is numeric but has no public bounds: add bounds = [lower, upper] "
        "from public knowledge (the tool never reads a bound from the data"
    )


@pytest.mark.parametrize("bounds", ["[90, 18]", "[0, inf]", "[1]", '["a", "b"]'])
def test_invalid_bounds(bounds):
    with pytest.raises(ValueError, match="bounds must be two finite numbers"):
        parse_schema({"columns": {"age": {"type": "numeric", "bounds": eval(bounds.replace("inf", "1e999"))}}})


@pytest.mark.parametrize(
    "eps, reason",
    [
        ("0", "epsilon must be a finite number > 0, got 0.0"),
        ("-1", "epsilon must be a finite number > 0, got -1.0"),
        ("nan", "epsilon must be a finite number > 0, got nan"),
        ("inf", "epsilon must be a finite number > 0, got inf"),
    ],
)
def test_invalid_epsilon(capsys, files, eps, reason):
    assert _one_line(*_fit(capsys, files, eps=eps)) == reason


def test_epsilon_that_is_not_a_number(capsys, files):
    with pytest.raises(SystemExit) as e:
        main(
            [
                "fit",
                str(files / "d.csv"),
                "--target",
                "y",
                "--epsilon",
                "one",
                "--delta",
                "1e-5",
                "--bounds",
                str(files / "s.toml"),
            ]
        )
    assert e.value.code == 2
    assert "dpposterior fit: error: argument --epsilon: invalid float value: 'one'" in capsys.readouterr().err


def test_missing_data_file(capsys, files):
    msg = _one_line(*_fit(capsys, files, csv="nope.csv"))
    assert msg == f"data file {str(files / 'nope.csv')!r} does not exist"


def test_unreadable_data_file(capsys, files):
    (files / "dir.csv").mkdir()
    assert (
        _one_line(*_fit(capsys, files, csv="dir.csv"))
        == f"cannot read data file {str(files / 'dir.csv')!r}: it is a directory"
    )
    (files / "bin.csv").write_bytes(b"\xff\xfe\x00\x81age\n\x00\x00")
    assert _one_line(*_fit(capsys, files, csv="bin.csv")).startswith(
        f"cannot read data file {str(files / 'bin.csv')!r}: "
    )
    (files / "empty.csv").write_text("age,region,y\n")
    assert (
        _one_line(*_fit(capsys, files, csv="empty.csv"))
        == f"data file {str(files / 'empty.csv')!r} holds no records (only a header)"
    )


def test_parquet_without_pyarrow_says_what_to_install(capsys, files, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "pyarrow", None)  # as if pyarrow were not installed
    (files / "d.parquet").write_bytes(b"PAR1")
    assert "reading Parquet needs pyarrow" in _one_line(*_fit(capsys, files, csv="d.parquet"))


def test_parquet_gives_the_same_design_as_csv(tmp_path):
    pytest.importorskip("pyarrow", reason="Parquet needs pyarrow (the dev extra installs it)")
    import numpy as np
    import pandas as pd

    from pathlib import Path

    examples = Path(__file__).resolve().parents[2] / "docs" / "examples"
    schema = load_schema(examples / "loans.toml")
    csv = read_table(examples / "loans.csv")
    typed = pd.read_csv(examples / "loans.csv")  # numbers as numbers, as Parquet stores them
    typed.to_parquet(tmp_path / "loans.parquet")
    pq = read_table(tmp_path / "loans.parquet")
    a = build_design(csv, schema, "default")
    b = build_design(pq, schema, "default")
    assert np.array_equal(a.X, b.X) and np.array_equal(a.y, b.y)
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 not really parquet")
    with pytest.raises(ValueError, match="cannot read data file"):
        read_table(tmp_path / "bad.parquet")


def test_missing_and_invalid_schema_file(capsys, files):
    assert (
        _one_line(*_fit(capsys, files, schema="nope.toml"))
        == f"schema file {str(files / 'nope.toml')!r} does not exist"
    )
    (files / "bad.toml").write_text("[columns.age\n")
    assert _one_line(*_fit(capsys, files, schema="bad.toml")).startswith(
        f"schema file {str(files / 'bad.toml')!r} is not valid TOML"
    )


def test_values_outside_bounds_clip_or_error(files):
    frame = read_table(files / "d.csv")
    frame.loc[0, "age"] = "150"
    clipped = build_design(frame, load_schema(files / "s.toml"), "y")
    assert clipped.clipped_to_bounds and clipped.X[0, 0] == 1.0  # 150 -> 90 -> +1
    assert clipped.X[1, 0] == pytest.approx((45 - 54) / 36)
    (files / "e.toml").write_text('out_of_bounds = "error"\n' + (files / "s.toml").read_text())
    with pytest.raises(ValueError, match=r"column 'age' has values outside its declared bounds \[18, 90\]"):
        build_design(frame, load_schema(files / "e.toml"), "y")


def test_undeclared_category_non_numeric_and_missing_values(capsys, files):
    base = (files / "d.csv").read_text()
    (files / "d.csv").write_text(base + "50,west,no\n")
    assert "column 'region' has values that are not among its declared categories ['north', 'south']" in _one_line(
        *_fit(capsys, files)
    )
    (files / "d.csv").write_text(base + "old,north,no\n")
    assert _one_line(*_fit(capsys, files)).startswith(
        "column 'age' is declared numeric but holds values that are not numbers (a number is written like"
    )
    (files / "d.csv").write_text(base + ",north,no\n")
    assert _one_line(*_fit(capsys, files)).startswith("column 'age' has missing values; the tool does not impute")


def test_bad_model_and_compare_method(capsys, files):
    assert _one_line(*_fit(capsys, files, extra=("--model", "probit"))).startswith(
        "model must be 'logistic', 'linear' or a NumPyro model given as 'module:function'"
    )
    assert _one_line(*_fit(capsys, files, extra=("--model", "no_such_module_xyz:f"))).startswith(
        "cannot import module 'no_such_module_xyz'"
    )
    rc, err = _fit(capsys, files, command="compare", extra=("--methods", "na-dpvi", "gibbs-ss-noisy"))
    assert (
        _one_line(rc, err, "dpposterior compare: error: ")
        == "gibbs-ss-noisy is a linear-regression method: use --model linear or drop it"
    )


def test_linear_model_needs_numeric_target(capsys, files):
    assert _one_line(*_fit(capsys, files, extra=("--model", "linear"))).startswith(
        "target column 'y' must be numeric (with public bounds) for this model"
    )


@pytest.mark.parametrize("command", ["fit", "compare"])
def test_help_has_examples(capsys, command):
    with pytest.raises(SystemExit) as e:
        main([command, "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "examples:" in out and f"dpposterior {command} data.csv --target" in out and "--bounds" in out


def test_secure_with_a_seed_is_refused(capsys, files):
    msg = _one_line(*_fit(capsys, files, extra=("--secure", "--seed", "3")))
    assert msg.startswith("--seed cannot be combined with --secure")


def test_secure_reaches_dpvi(capsys, files, monkeypatch):
    import dpposterior.vi as vi

    seen = {}

    def fake_dpvi(*args, **kwargs):
        seen.update(kwargs)
        raise ValueError("stop here")  # the flag is what is checked, not a run

    monkeypatch.setattr(vi, "dpvi", fake_dpvi)
    assert _one_line(*_fit(capsys, files, extra=("--secure",))) == "stop here"
    assert seen["secure"] is True and seen["rng_key"] is None


def test_a_one_level_categorical_column_is_left_out_of_the_default_features(files):
    """A schema column with one declared level (constant in this table, e.g. a
    country column of a one-country extract) made the whole schema invalid, even when unused. It adds
    no design column: left out of the default features, refused as a named feature, and a binary target
    still needs two levels."""
    text = '[columns.country]\ntype = "categorical"\ncategories = ["NZ"]\n\n' + (files / "s.toml").read_text()
    (files / "s.toml").write_text(text)
    (files / "d.csv").write_text("age,region,country,y\n30,north,NZ,no\n45,south,NZ,yes\n60,north,NZ,yes\n")
    schema, frame = load_schema(files / "s.toml"), read_table(files / "d.csv")
    assert schema.columns["country"].categories == ("NZ",)
    d = build_design(frame, schema, "y")
    assert d.feature_names == ("age", "region=south", "(intercept)")
    assert dict(d.reference_levels) == {"region": "north"}
    with pytest.raises(
        ValueError,
        match=r"feature 'country' is categorical with one declared level \('NZ'\): it "
        r"adds no design column .*leave it out of the features",
    ):
        build_design(frame, schema, "y", features=["age", "country"])
    with pytest.raises(ValueError, match=r"target column 'country' must be binary .*got 1"):
        build_design(frame, schema, "country")
    with pytest.raises(ValueError, match=r"categories = \[\.\.\.\], a public list of levels"):
        parse_schema({"columns": {"c": {"type": "categorical", "categories": []}}})
