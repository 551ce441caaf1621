"""UCI Adult: raw columns, the design matrix with reference levels, and the NA-DPVI reference's one-hot one."""

import importlib.resources

import numpy as np
import pytest

from dpposterior.datasets import ADULT_CATEGORIES
from dpposterior.datasets import ADULT_COLUMNS
from dpposterior.datasets import ADULT_REFERENCE_LEVELS
from dpposterior.datasets import ADULT_SCALING_BOUNDS
from dpposterior.datasets import adult_design
from dpposterior.datasets import adult_feature_names
from dpposterior.datasets import encode_adult
from dpposterior.datasets import load_adult

CONTINUOUS = ("age", "fnlwgt", "capital-gain", "capital-loss", "hours-per-week")
CATEGORICAL = ("workclass", "education", "marital-status", "occupation", "race", "sex")


@pytest.fixture(scope="module")
def raw_train():
    return load_adult("train")


@pytest.fixture(scope="module")
def designs():
    return {split: adult_design(split) for split in ("train", "test")}


@pytest.fixture(scope="module")
def onehot():
    """The NA-DPVI reference's design: every level one-hot (reference_levels=False)."""
    return adult_design("train", reference_levels=False)


def _record(**changes):
    """One complete raw record (the first line of adult.data), with some fields changed."""
    record = {
        "age": [39],
        "workclass": ["State-gov"],
        "fnlwgt": [77516],
        "education": ["Bachelors"],
        "education-num": [13],
        "marital-status": ["Never-married"],
        "occupation": ["Adm-clerical"],
        "relationship": ["Not-in-family"],
        "race": ["White"],
        "sex": ["Male"],
        "capital-gain": [2174],
        "capital-loss": [0],
        "hours-per-week": [40],
        "native-country": ["United-States"],
        "income": ["<=50K"],
    }
    record.update(changes)
    return record


# Counts from adult.names: 32,561 / 16,281 records, 30,162 / 15,060 without unknowns.
@pytest.mark.parametrize(
    ("split", "drop_missing", "n"),
    [("train", False, 32_561), ("train", True, 30_162), ("test", False, 16_281), ("test", True, 15_060)],
)
def test_row_counts(split, drop_missing, n):
    columns = load_adult(split, drop_missing=drop_missing)
    assert tuple(columns) == ADULT_COLUMNS
    assert all(values.shape == (n,) for values in columns.values())


def test_raw_columns_types_labels_and_missing_values():
    columns = load_adult("test", drop_missing=False)
    # The comment line is skipped: the first record is the first data line of adult.test.
    assert columns["age"][0] == 25 and columns["workclass"][0] == "Private" and columns["fnlwgt"][0] == 226802
    assert columns["age"].dtype == np.int64 and columns["education"].dtype.kind == "U"
    # Labels lose the final dot of the test file.
    assert set(np.unique(columns["income"]).tolist()) == {"<=50K", ">50K"}
    text = {name: values for name, values in columns.items() if values.dtype.kind == "U"}
    missing = {name: int((values == "?").sum()) for name, values in text.items()}
    assert missing == {
        "workclass": 963,
        "education": 0,
        "marital-status": 0,
        "occupation": 966,
        "relationship": 0,
        "race": 0,
        "sex": 0,
        "native-country": 274,
        "income": 0,
    }


def test_callers_get_their_own_arrays():
    first = load_adult("test")
    first["age"][:] = -1
    first["sex"][:] = "?"
    second = load_adult("test")
    assert second["age"].min() >= 17 and "?" not in second["sex"]


def test_dropping_missing_keeps_exactly_the_complete_records(raw_train):
    for name, values in raw_train.items():
        if values.dtype.kind == "U":
            assert not (values == "?").any(), name
            if name in ADULT_CATEGORIES:
                assert set(np.unique(values).tolist()) <= set(ADULT_CATEGORIES[name]), name


def test_design_shapes_types_and_identical_columns(designs):
    names = adult_feature_names()
    assert len(names) == 51 and names[-1] == "intercept" and names[:5] == CONTINUOUS
    assert len(adult_feature_names(reference_levels=False)) == 57
    for split, n in (("train", 30_162), ("test", 15_060)):
        X, y, feature_names = designs[split]
        assert feature_names == names
        assert X.shape == (n, 51) and X.dtype == np.float32
        assert y.shape == (n,) and y.dtype == np.int32
        assert set(np.unique(y).tolist()) == {0, 1}


def test_scaled_columns_lie_in_the_unit_interval_and_use_the_public_bounds(designs, raw_train):
    X, _, names = designs["train"]
    assert X.min() >= 0.0 and X.max() <= 1.0
    for name in CONTINUOUS:
        low, high = ADULT_SCALING_BOUNDS[name]
        expected = ((raw_train[name] - low) / (high - low)).astype(np.float32)
        np.testing.assert_allclose(X[:, names.index(name)], expected, rtol=1e-6, atol=1e-7)


def test_one_hot_blocks_sum_to_one_and_match_the_raw_levels(onehot, raw_train):
    X, _, names = onehot
    for column in CATEGORICAL:
        block = [j for j, name in enumerate(names) if name.startswith(f"{column}=")]
        np.testing.assert_array_equal(X[:, block].sum(axis=1), 1.0)
        chosen = np.array([names[j].split("=", 1)[1] for j in block])[X[:, block].argmax(axis=1)]
        np.testing.assert_array_equal(chosen, raw_train[column])
    np.testing.assert_array_equal(X[:, names.index("intercept")], 1.0)
    # Every design column varies on the training data: no dead level.
    assert (X[:, :-1].max(axis=0) > X[:, :-1].min(axis=0)).all()


def test_indicator_blocks_leave_out_the_reference_level_and_match_the_raw_levels(designs, raw_train):
    X, _, names = designs["train"]
    for column in CATEGORICAL:
        block = [j for j, name in enumerate(names) if name.startswith(f"{column}=")]
        levels = np.array([ADULT_REFERENCE_LEVELS[column]] + [names[j].split("=", 1)[1] for j in block])
        assert ADULT_REFERENCE_LEVELS[column] == ADULT_CATEGORIES[column][0]  # the schema's first level
        assert X[:, block].sum(axis=1).max() == 1.0
        # a record of the reference level has zeros in the block
        chosen = levels[np.where(X[:, block].sum(axis=1) == 0, 0, X[:, block].argmax(axis=1) + 1)]
        np.testing.assert_array_equal(chosen, raw_train[column])
    assert (X[:, :-1].max(axis=0) > X[:, :-1].min(axis=0)).all()


def test_the_design_has_full_column_rank(designs, onehot):
    """Every categorical one-hot encoded beside an intercept gave 57 columns of rank 51: along six
    directions the coefficients were the prior's alone. With reference levels every column counts."""
    for split in ("train", "test"):
        X = designs[split].X.astype(np.float64)
        assert np.linalg.matrix_rank(X) == X.shape[1] == 51
    assert np.linalg.matrix_rank(onehot.X.astype(np.float64)) == 51 < onehot.X.shape[1]


def _schema_from_adult_names():
    """The attribute lines of the vendored adult.names: {column: levels, or "continuous"}."""
    text = importlib.resources.files("dpposterior.datasets").joinpath("data", "adult.names").read_text()
    schema = {}
    for line in text.splitlines():
        if line.startswith("|") or ":" not in line:
            continue
        name, values = line.split(":", 1)
        values = values.strip().rstrip(".")
        levels = tuple(v.strip() for v in values.split(","))
        schema[name.strip()] = values if values == "continuous" else levels
    return schema


def test_schema_constants_match_adult_names():
    schema = _schema_from_adult_names()
    assert tuple(schema) == ADULT_COLUMNS[:-1]
    assert {name: levels for name, levels in schema.items() if levels != "continuous"} == ADULT_CATEGORIES


def test_levels_come_from_the_schema_in_its_order():
    names = adult_feature_names()
    for column in CATEGORICAL:
        levels = [name.split("=", 1)[1] for name in names if name.startswith(f"{column}=")]
        expected = [level for level in ADULT_CATEGORIES[column] if level != "Never-worked"]
        assert levels == expected[1:]
    assert len(names) == 5 + 6 + 15 + 6 + 13 + 4 + 1 + 1


def test_label_balance(designs):
    # adult.names: 24.78% of complete records have income > 50K.
    assert 0.245 < designs["train"].y.mean() < 0.250
    assert 0.240 < designs["test"].y.mean() < 0.250
    assert int(designs["train"].y.sum()) == 7_508


def test_without_intercept():
    X, y, names = adult_design("test", intercept=False)
    assert X.shape == (15_060, 50) and names == adult_feature_names(intercept=False)
    assert "intercept" not in names


def test_out_of_bound_values_are_clipped_to_the_public_bounds():
    two = {name: values * 2 for name, values in _record().items()}
    two.update(
        {
            "age": [5, 120],
            "fnlwgt": [-1, 2e6],
            "capital-gain": [-3, 10**6],
            "capital-loss": [-1, 10**4],
            "hours-per-week": [-5, 168],
        }
    )
    X, _, _ = encode_adult(two)
    np.testing.assert_array_equal(X[0, :5], 0.0)
    np.testing.assert_array_equal(X[1, :5], 1.0)


@pytest.mark.parametrize("split", ["train", "test"])
def test_the_public_bounds_clip_nothing_in_the_vendored_files(split):
    columns = load_adult(split, drop_missing=False)
    for name, (low, high) in ADULT_SCALING_BOUNDS.items():
        assert low <= columns[name].min() and columns[name].max() <= high, name


def test_encode_adult_encodes_one_record():
    X, y, names = encode_adult(_record(income=[">50K"]))
    row = dict(zip(names, X[0].tolist(), strict=True))
    assert row["age"] == pytest.approx((39 - 17) / 73)
    assert row["workclass=State-gov"] == 1.0 and "workclass=Private" not in names  # Private: the reference
    assert sum(v for k, v in row.items() if k.startswith("education=")) == 0.0  # Bachelors: the reference
    assert row["marital-status=Never-married"] == 1.0
    assert y.tolist() == [1]
    X, _, names = encode_adult(_record(), reference_levels=False)
    row = dict(zip(names, X[0].tolist(), strict=True))
    assert row["workclass=Private"] == 0.0 and row["education=Bachelors"] == 1.0


@pytest.mark.parametrize("split", ["validation", "Train", "", None, 1])
def test_invalid_split_is_refused(split):
    with pytest.raises(ValueError, match="split must be one of"):
        load_adult(split)
    with pytest.raises(ValueError, match="split must be one of"):
        adult_design(split)


def test_non_bool_flags_are_refused():
    with pytest.raises(TypeError, match="drop_missing must be a bool"):
        load_adult("train", drop_missing="yes")
    with pytest.raises(TypeError, match="intercept must be a bool"):
        adult_design("train", intercept=1)
    with pytest.raises(TypeError, match="intercept must be a bool"):
        adult_feature_names(intercept=None)
    with pytest.raises(TypeError, match="reference_levels must be a bool"):
        adult_design("train", reference_levels="no")


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        ({k: v for k, v in _record().items() if k != "sex"}, "lacks the required column"),
        (_record(age=[39, 40]), "same length"),
        ({k: [] for k in _record()}, "no records"),
        (_record(age=[[39]]), "must be 1-D"),
        (_record(age=[float("nan")]), "finite numbers"),
        (_record(fnlwgt=["many"]), "real numbers"),
        (_record(occupation=["?"]), "missing values"),
        (_record(race=["Martian"]), "not levels of the design"),
        (_record(workclass=["Never-worked"]), "no column in the design"),
        (_record(income=[">50K."]), "income values must be one of"),
    ],
)
def test_encode_adult_errors(columns, message):
    with pytest.raises(ValueError, match=message):
        encode_adult(columns)


def test_encode_adult_refuses_a_non_mapping():
    with pytest.raises(TypeError, match="mapping"):
        encode_adult([1, 2, 3])
