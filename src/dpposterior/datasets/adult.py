"""UCI Adult ("Census Income"), vendored, and its design matrix for logistic regression.

The raw files are the original UCI ``adult.data`` and ``adult.test`` (gzip-compressed inside the
package, beside the public schema ``adult.names``; sources and licence in
``datasets/data/LICENSE.md``). The preprocessing follows the NA-DPVI
reference implementation of Räisä et al. (2024): drop records with missing values, drop
education-num, native-country and relationship, one-hot encode the categorical columns, scale the
continuous columns to [0, 1] and add an intercept. By default one level of each categorical column,
its first in ``adult.names`` (:data:`ADULT_REFERENCE_LEVELS`), is the reference level and has no
column, so the design has full column rank (51 columns); ``reference_levels=False`` keeps every
level, the reference implementation's 57 columns (rank 51).

Nothing in the preprocessing is learnt from the data, so the transformation applied to one record
does not depend on any other record and costs no privacy: the category levels come from the public
schema (``adult.names``), and the scaling bounds of the continuous columns are fixed in advance
from public knowledge of the census extract (:data:`ADULT_SCALING_BOUNDS`).
"""

from __future__ import annotations

import csv
import functools
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from ._files import check_split
from ._files import open_gzip_text

ADULT_COLUMNS: tuple[str, ...] = (
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education-num",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital-gain",
    "capital-loss",
    "hours-per-week",
    "native-country",
    "income",
)
"""The 15 columns of the raw files, in file order; ``income`` is the label (``adult.names`` names
the other 14)."""

ADULT_CONTINUOUS: tuple[str, ...] = (
    "age",
    "fnlwgt",
    "education-num",
    "capital-gain",
    "capital-loss",
    "hours-per-week",
)
"""The integer-valued ("continuous" in ``adult.names``) columns of the raw files."""

ADULT_CATEGORIES: dict[str, tuple[str, ...]] = {
    "workclass": (
        "Private",
        "Self-emp-not-inc",
        "Self-emp-inc",
        "Federal-gov",
        "Local-gov",
        "State-gov",
        "Without-pay",
        "Never-worked",
    ),
    "education": (
        "Bachelors",
        "Some-college",
        "11th",
        "HS-grad",
        "Prof-school",
        "Assoc-acdm",
        "Assoc-voc",
        "9th",
        "7th-8th",
        "12th",
        "Masters",
        "1st-4th",
        "10th",
        "Doctorate",
        "5th-6th",
        "Preschool",
    ),
    "marital-status": (
        "Married-civ-spouse",
        "Divorced",
        "Never-married",
        "Separated",
        "Widowed",
        "Married-spouse-absent",
        "Married-AF-spouse",
    ),
    "occupation": (
        "Tech-support",
        "Craft-repair",
        "Other-service",
        "Sales",
        "Exec-managerial",
        "Prof-specialty",
        "Handlers-cleaners",
        "Machine-op-inspct",
        "Adm-clerical",
        "Farming-fishing",
        "Transport-moving",
        "Priv-house-serv",
        "Protective-serv",
        "Armed-Forces",
    ),
    "relationship": (
        "Wife",
        "Own-child",
        "Husband",
        "Not-in-family",
        "Other-relative",
        "Unmarried",
    ),
    "race": ("White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black"),
    "sex": ("Female", "Male"),
    "native-country": (
        "United-States",
        "Cambodia",
        "England",
        "Puerto-Rico",
        "Canada",
        "Germany",
        "Outlying-US(Guam-USVI-etc)",
        "India",
        "Japan",
        "Greece",
        "South",
        "China",
        "Cuba",
        "Iran",
        "Honduras",
        "Philippines",
        "Italy",
        "Poland",
        "Jamaica",
        "Vietnam",
        "Mexico",
        "Portugal",
        "Ireland",
        "France",
        "Dominican-Republic",
        "Laos",
        "Ecuador",
        "Taiwan",
        "Haiti",
        "Columbia",
        "Hungary",
        "Guatemala",
        "Nicaragua",
        "Scotland",
        "Thailand",
        "Yugoslavia",
        "El-Salvador",
        "Trinadad&Tobago",
        "Peru",
        "Hong",
        "Holand-Netherlands",
    ),
}
"""The levels of every categorical column, in the order of the public schema ``adult.names``."""

ADULT_LABELS: tuple[str, str] = ("<=50K", ">50K")
"""The two values of ``income`` (label 0 and label 1 of the design)."""

MISSING = "?"
"""How the raw files mark a missing value (``adult.names``: "Convert Unknown to '?'")."""

ADULT_SCALING_BOUNDS: dict[str, tuple[float, float]] = {
    "age": (17.0, 90.0),
    "fnlwgt": (0.0, 1.5e6),
    "capital-gain": (0.0, 100_000.0),
    "capital-loss": (0.0, 5_000.0),
    "hours-per-week": (0.0, 100.0),
}
"""Public bounds (low, high) of the continuous columns of the design, fixed without reading the data.

Each bound comes from the published description of the extract (``adult.names``) or of the census
public-use files, so it is known before any record is seen:

- age: the extract kept people older than 16 (``adult.names``: AAGE > 16) and the census public
  files top-code age at 90: every value lies in [17, 90].
- fnlwgt: a census sampling weight (the number of people a record stands for); 1.5 million is an
  a-priori ceiling for the weight of a single CPS record.
- capital-gain: the census public files top-code capital gains at 99,999 dollars.
- capital-loss: an a-priori ceiling of 5,000 dollars of reported capital loss.
- hours-per-week: the extract kept people working more than 0 hours (``adult.names``: HRSWK > 0)
  and the census public files top-code weekly hours at 99.
"""

DESIGN_CATEGORICAL: tuple[str, ...] = (
    "workclass",
    "education",
    "marital-status",
    "occupation",
    "race",
    "sex",
)
"""The categorical columns kept in the design (relationship and native-country are dropped)."""

DESIGN_CONTINUOUS: tuple[str, ...] = ("age", "fnlwgt", "capital-gain", "capital-loss", "hours-per-week")
"""The continuous columns kept in the design (education-num is dropped)."""

_EXCLUDED_LEVELS: dict[str, tuple[str, ...]] = {"workclass": ("Never-worked",)}
# A person who never worked has no occupation: the census leaves occupation "not in universe"
# (Unknown, written "?" in these files) for them, so every Never-worked record has a missing value
# and is removed by the missing-value rule. The level therefore never occurs in a complete record and
# would only add a column of zeros. This follows from the schema, not from the data (the vendored
# files agree: 10 such records, all with occupation "?"); the NA-DPVI reference's 57 features have
# no such column either.

DESIGN_LEVELS: dict[str, tuple[str, ...]] = {
    column: tuple(level for level in ADULT_CATEGORIES[column] if level not in _EXCLUDED_LEVELS.get(column, ()))
    for column in DESIGN_CATEGORICAL
}
"""The one-hot levels of the design per categorical column: the schema's levels, except
workclass "Never-worked" (such records always have a missing occupation; see :func:`encode_adult`)."""

ADULT_REFERENCE_LEVELS: dict[str, str] = {column: DESIGN_LEVELS[column][0] for column in DESIGN_CATEGORICAL}
"""The reference level of each categorical column of the design: its first level in ``adult.names``
(workclass Private, education Bachelors, marital-status Married-civ-spouse, occupation Tech-support,
race White, sex Female). Chosen from the public schema's order, never from the data (the most
common level of the records would be a statistic of the private data). With reference levels the
coefficient of ``"<column>=<level>"`` is the difference in log-odds from the reference level."""

INTERCEPT_NAME = "intercept"


def adult_feature_names(*, intercept: bool = True, reference_levels: bool = True) -> tuple[str, ...]:
    """The column names of the Adult design matrix, in column order.

    First the five scaled continuous columns (``age``, ``fnlwgt``, ``capital-gain``,
    ``capital-loss``, ``hours-per-week``), then one column ``"<column>=<level>"`` per level of
    :data:`DESIGN_LEVELS` (workclass, education, marital-status, occupation, race, sex, each in the
    order of ``adult.names``) except each column's reference level (:data:`ADULT_REFERENCE_LEVELS`)
    when ``reference_levels`` is true, then ``"intercept"`` when ``intercept`` is true: 51 names
    (50 without the intercept); with ``reference_levels=False`` 57 (56). The names depend only on
    the public schema, never on data.

    Args:
      intercept: whether the design ends with an intercept column of ones.
      reference_levels: leave out each categorical column's reference level (full column rank).

    Returns:
      The names, as a tuple of str.

    Raises:
      TypeError: ``intercept`` or ``reference_levels`` is not a bool.
    """
    _check_bool("intercept", intercept)
    _check_bool("reference_levels", reference_levels)
    names = list(DESIGN_CONTINUOUS)
    for column in DESIGN_CATEGORICAL:
        names.extend(f"{column}={level}" for level in DESIGN_LEVELS[column][1 if reference_levels else 0 :])
    if intercept:
        names.append(INTERCEPT_NAME)
    return tuple(names)


class AdultDesign(NamedTuple):
    """The Adult design matrix, labels and column names (unpacks as ``X, y, feature_names``).

    Attributes:
      X: float32 array of shape (N, p); p = 51 with the intercept and reference levels, 57 with every
        level (see :func:`adult_feature_names`).
      y: int32 array of shape (N,); 1 for income ">50K", 0 for "<=50K".
      feature_names: the p column names of ``X``.
    """

    X: np.ndarray
    y: np.ndarray
    feature_names: tuple[str, ...]


def load_adult(split: str = "train", drop_missing: bool = True) -> dict[str, np.ndarray]:
    """Reads the raw columns of the vendored UCI Adult data.

    Mechanism-side: this returns the sensitive records themselves. Only mechanism code may call it.

    The test file's first line (a comment) is skipped, and the dot that ends its labels
    (``">50K."``) is removed, so both splits use the labels of :data:`ADULT_LABELS`. Surrounding
    spaces are stripped from every field.

    Args:
      split: ``"train"`` (``adult.data``: 32,561 records, 30,162 without missing values) or
        ``"test"`` (``adult.test``: 16,281 records, 15,060 without missing values).
      drop_missing: drop every record with a missing value (``"?"``, which occurs only in
        workclass, occupation and native-country). Dropping is decided record by record, so it is
        a per-record filter, not a statistic of the data. When false, missing values stay ``"?"``.

    Returns:
      A dict from column name (:data:`ADULT_COLUMNS`, in file order) to a numpy array of length N:
      int64 for the integer-valued columns (:data:`ADULT_CONTINUOUS`), str for the others,
      including the label column ``"income"`` (``"<=50K"`` or ``">50K"``).

    Raises:
      ValueError: ``split`` is not ``"train"`` or ``"test"``, or the vendored file is malformed.
      TypeError: ``drop_missing`` is not a bool.
    """
    check_split(split)
    _check_bool("drop_missing", drop_missing)
    # The parsed columns are cached (the vendored files never change); callers get their own copies.
    return {name: values.copy() for name, values in _parsed_columns(split, bool(drop_missing)).items()}


@functools.lru_cache(maxsize=4)
def _parsed_columns(split: str, drop_missing: bool) -> dict[str, np.ndarray]:
    filename = "adult.data.gz" if split == "train" else "adult.test.gz"
    rows = _read_rows(filename, drop_missing)
    columns: dict[str, np.ndarray] = {}
    for j, name in enumerate(ADULT_COLUMNS):
        values = [row[j] for row in rows]
        if name in ADULT_CONTINUOUS:
            columns[name] = np.array([int(v) for v in values], dtype=np.int64)
        else:
            columns[name] = np.array(values, dtype=str)
    return columns


def adult_design(split: str = "train", *, intercept: bool = True, reference_levels: bool = True) -> AdultDesign:
    """The Adult design matrix for (Bayesian) logistic regression.

    Mechanism-side: this returns the sensitive records themselves. Only mechanism code may call it.

    Equivalent to ``encode_adult(load_adult(split, drop_missing=True), intercept=intercept,
    reference_levels=reference_levels)``; see :func:`encode_adult` for the encoding. Both splits have
    the same columns, since the encoding reads nothing from the data. Train: 30,162 records; test:
    15,060. With the intercept the design has 51 columns (5 continuous + 45 indicators + 1
    intercept), of full column rank; with ``reference_levels=False`` 57 (5 + 51 one-hot + 1), the
    dimension the NA-DPVI reference used, of rank 51.

    Args:
      split: ``"train"`` or ``"test"``.
      intercept: end the design with a column of ones (the logistic regression's bias).
      reference_levels: leave out each categorical column's reference level
        (:data:`ADULT_REFERENCE_LEVELS`); False keeps every level (the reference implementation's design).

    Returns:
      ``AdultDesign(X, y, feature_names)``: X float32 (N, p), y int32 (N,) with 1 for ">50K",
      feature_names a tuple of p str.

    Raises:
      ValueError: ``split`` is not ``"train"`` or ``"test"``.
      TypeError: ``intercept`` or ``reference_levels`` is not a bool.
    """
    check_split(split)
    _check_bool("intercept", intercept)
    _check_bool("reference_levels", reference_levels)
    return encode_adult(load_adult(split, drop_missing=True), intercept=intercept, reference_levels=reference_levels)


def encode_adult(columns: Mapping[str, Any], *, intercept: bool = True, reference_levels: bool = True) -> AdultDesign:
    """Encodes raw Adult columns (as :func:`load_adult` returns them) into the design matrix.

    The encoding is a fixed function of each record alone; nothing is estimated from the data:

    - education-num, relationship and native-country are not used.
    - Continuous columns (:data:`DESIGN_CONTINUOUS`) are clipped to the public bounds of
      :data:`ADULT_SCALING_BOUNDS` and mapped linearly to [0, 1]: ``(clip(x, lo, hi) - lo) / (hi -
      lo)``. Clipping to a bound is fine for differential privacy: the bound is public (chosen
      before seeing the data), and clipping changes one record using only that record, so it is a
      per-record transformation of the input, not a data-dependent statistic. Bounds read from the
      data (a min-max scaler) would instead leak the extremes of the sensitive records. With these
      bounds no value in the vendored files is clipped.
    - Categorical columns get a 0/1 indicator per level of :data:`DESIGN_LEVELS` (fixed from the
      public schema ``adult.names``, in its order), so every split gets identical columns.
      By default each column's reference level (:data:`ADULT_REFERENCE_LEVELS`, its first level)
      has no indicator: a record of that level has zeros in the block, each indicator's
      coefficient is a difference from the reference level, and the design has full column rank.
      With ``reference_levels=False`` every level is kept (one-hot, the NA-DPVI reference's
      design): each block of a row sums to 1, so together with the intercept six columns are
      linear combinations of the others (rank 51 of 57), and along those directions the
      coefficients are identified by the prior alone; their intervals are the prior's.
      The schema level workclass "Never-worked" has no column: such a person has no occupation,
      so the census leaves occupation unknown ("?") and the record always goes with the
      missing-value rule.
    - The intercept, when asked for, is the last column, all ones: with reference levels, the
      log-odds of a record at every reference level and every continuous column's lower bound.

    Resulting columns (:func:`adult_feature_names`): 5 continuous, then 6 workclass, 15 education,
    6 marital-status, 13 occupation, 4 race and 1 sex indicators, then the intercept: 51 in all
    (50 without the intercept); with ``reference_levels=False`` 7, 16, 7, 14, 5 and 2 indicators,
    57 in all (56).

    Args:
      columns: a mapping with at least the columns of :data:`DESIGN_CONTINUOUS`,
        :data:`DESIGN_CATEGORICAL` and ``"income"``, each a 1-D sequence of the same length N >= 1.
        Continuous values must be finite real numbers, categorical values levels of
        :data:`DESIGN_LEVELS`, income one of :data:`ADULT_LABELS`. Other columns are ignored.
      intercept: end the design with a column of ones.
      reference_levels: leave out each categorical column's reference level (default; full rank).

    Returns:
      ``AdultDesign(X, y, feature_names)``: X float32 (N, p) with every entry in [0, 1], y int32
      (N,) with 1 for ">50K" and 0 for "<=50K".

    Raises:
      TypeError: ``columns`` is not a mapping, or ``intercept`` or ``reference_levels`` is not a bool.
      ValueError: a column is missing, not 1-D, of another length than the others, or empty; a
        continuous value is not a finite number; a categorical value is missing (``"?"``: drop
        such records first, e.g. with ``load_adult(drop_missing=True)``) or not a level of the
        design; an income value is not ``"<=50K"`` or ``">50K"``.
    """
    if not isinstance(columns, Mapping):
        raise TypeError(f"columns must be a mapping from column name to values, got {type(columns).__name__}")
    _check_bool("intercept", intercept)
    _check_bool("reference_levels", reference_levels)
    required = (*DESIGN_CONTINUOUS, *DESIGN_CATEGORICAL, "income")
    absent = [name for name in required if name not in columns]
    if absent:
        raise ValueError(f"columns lacks the required column(s) {absent}; required: {list(required)}")
    arrays = {name: np.asarray(columns[name]) for name in required}
    for name, values in arrays.items():
        if values.ndim != 1:
            raise ValueError(f"column {name!r} must be 1-D (one value per record), got shape {values.shape}")
    lengths = {name: values.shape[0] for name, values in arrays.items()}
    if len(set(lengths.values())) != 1:
        raise ValueError(f"columns must all have the same length (records): got lengths {lengths}")
    n = next(iter(lengths.values()))
    if n == 0:
        raise ValueError("columns hold no records (length 0); at least one record is required")

    blocks: list[np.ndarray] = []
    for name in DESIGN_CONTINUOUS:
        values = _as_finite_float(name, arrays[name])
        low, high = ADULT_SCALING_BOUNDS[name]
        blocks.append(((np.clip(values, low, high) - low) / (high - low))[:, None])
    for name in DESIGN_CATEGORICAL:
        one_hot = _one_hot(name, arrays[name], DESIGN_LEVELS[name])
        blocks.append(one_hot[:, 1:] if reference_levels else one_hot)  # column 0: the reference level
    if intercept:
        blocks.append(np.ones((n, 1)))
    X = np.concatenate(blocks, axis=1).astype(np.float32)

    income = arrays["income"].astype(str)
    unknown = sorted(set(np.unique(income)) - set(ADULT_LABELS))
    if unknown:
        raise ValueError(f"income values must be one of {ADULT_LABELS}, got {unknown[:5]}")
    y = (income == ADULT_LABELS[1]).astype(np.int32)
    return AdultDesign(
        X=X, y=y, feature_names=adult_feature_names(intercept=intercept, reference_levels=reference_levels)
    )


def _read_rows(filename: str, drop_missing: bool) -> list[list[str]]:
    """Parses a vendored Adult file into rows of 15 stripped fields, labels without a final dot."""
    rows: list[list[str]] = []
    with open_gzip_text(filename) as text:
        for line_number, row in enumerate(csv.reader(text, skipinitialspace=True), start=1):
            if not row or (len(row) == 1 and not row[0].strip()):
                continue  # blank line (both files end with one)
            if row[0].startswith("|"):
                continue  # comment line (the first line of adult.test)
            if len(row) != len(ADULT_COLUMNS):
                raise ValueError(
                    f"malformed vendored file {filename}: line {line_number} has {len(row)} fields, "
                    f"expected {len(ADULT_COLUMNS)}"
                )
            row = [field.strip() for field in row]
            row[-1] = row[-1].removesuffix(".")
            if row[-1] not in ADULT_LABELS:
                raise ValueError(
                    f"malformed vendored file {filename}: line {line_number} has label {row[-1]!r}, "
                    f"expected one of {ADULT_LABELS}"
                )
            if drop_missing and MISSING in row:
                continue
            rows.append(row)
    return rows


def _as_finite_float(name: str, values: np.ndarray) -> np.ndarray:
    try:
        out = values.astype(np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"column {name!r} must hold real numbers, got values of dtype {values.dtype}") from None
    if not np.all(np.isfinite(out)):
        bad = out[~np.isfinite(out)][:5]
        raise ValueError(f"column {name!r} must hold finite numbers, got {bad.tolist()}")
    return out


def _one_hot(name: str, values: np.ndarray, levels: tuple[str, ...]) -> np.ndarray:
    values = values.astype(str)
    index = {level: k for k, level in enumerate(levels)}
    unknown = sorted(set(np.unique(values)) - set(levels))
    if MISSING in unknown:
        raise ValueError(
            f"column {name!r} has missing values ({MISSING!r}); drop those records first, "
            "e.g. with load_adult(drop_missing=True)"
        )
    excluded = [level for level in unknown if level in _EXCLUDED_LEVELS.get(name, ())]
    if excluded:
        raise ValueError(
            f"column {name!r} has the level(s) {excluded}, which have no column in the design: such "
            "records have no occupation and are dropped as records with missing values"
        )
    if unknown:
        raise ValueError(
            f"column {name!r} has values that are not levels of the design: {unknown[:5]}; allowed: {levels}"
        )
    codes = np.fromiter((index[v] for v in values), dtype=np.intp, count=values.shape[0])
    out = np.zeros((values.shape[0], len(levels)))
    out[np.arange(values.shape[0]), codes] = 1.0
    return out


def _check_bool(name: str, value: Any) -> None:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool (True or False), got {value!r} of type {type(value).__name__}")
