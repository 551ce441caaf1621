"""The design matrix of a regression model from a table and its declared schema.

Every transform here is fixed by the schema alone (data-independent), so it changes nothing in the
privacy analysis of the mechanism that later reads the matrix:

- numeric features: clipped to their declared bounds [lo, hi] (``out_of_bounds = "clip"``; with
  ``"error"`` a value outside is refused instead), then rescaled to [-1, 1] by
  x' = (x - (lo + hi) / 2) / ((hi - lo) / 2);
- categorical features: one 0/1 column per declared level except the first (the reference level);
  a value that is not a declared level is an error (a float column's whole numbers, 1.0, and the
  text "1.0" match the integer level 1; a column declared with the two levels false and true
  matches every spelling of a boolean, false/False/FALSE, and a boolean column);
- an intercept column of ones (``intercept=True``);
- the target: a 0/1 code for a binary target (a categorical column with two levels, the second
  coded 1, or a numeric column with bounds [0, 1] holding only 0 and 1), or the rescaled value of a
  numeric target (clipped to its bounds like a feature).

Missing values are an error (the tool does not impute): empty cells, and text markers such as ``NA``,
``null`` or ``?`` unless the schema declares them as a category of the column. So are dates, times
and complex numbers in a numeric column (a Parquet file keeps such types). Error messages never
quote a record's value.
"""

from __future__ import annotations

import collections
import dataclasses
import re
from typing import Any, Sequence

import numpy as np

from .schema import Column, Schema, levels, nfc, numeric_bounds

INTERCEPT = "(intercept)"


@dataclasses.dataclass(frozen=True)
class Design:
    """A design matrix and target built from a table by a schema.

    Attributes:
      X: (N, p) float32 design matrix, every entry in [-1, 1].
      y: (N,) int32 0/1 codes (``target_kind == "binary"``) or float32 rescaled values (``"numeric"``).
      feature_names: the p column names of X (``"age"``, ``"sector=public"``, ``"(intercept)"``).
      feature_scales: for each column of X, how many original units one unit of it is (the half-range
        of a numeric column; None for indicator and intercept columns).
      target: the target column's declared schema entry.
      target_kind: ``"binary"`` or ``"numeric"``.
      clipped_to_bounds: True when the schema's policy clips out-of-bounds values (whether any record
        was clipped is not computed: that would be a statistic of the private data).
      reference_levels: (column, reference level) of each categorical feature: its indicators'
        coefficients are differences from that level.
    """

    X: np.ndarray
    y: np.ndarray
    feature_names: tuple[str, ...]
    feature_scales: tuple[float | None, ...]
    target: Column
    target_kind: str
    clipped_to_bounds: bool
    reference_levels: tuple[tuple[str, str], ...] = ()

    @property
    def num_records(self) -> int:
        """N, the rows of the design matrix."""
        return int(self.X.shape[0])

    def transforms(self) -> list[str]:
        """Human-readable lines describing every transform applied (all data-independent)."""
        lines = []
        for name, scale in zip(self.feature_names, self.feature_scales):
            if scale is not None:
                lines.append(
                    f"{name}: numeric, one unit of the feature = {scale:g} original units "
                    "(rescaled from its declared bounds to [-1, 1])"
                )
        for name, level in self.reference_levels:
            lines.append(
                f"{name}: categorical, a 0/1 indicator per declared level but the first, {level!r} (the "
                "reference level: each indicator's coefficient is a difference from it)"
            )
        if self.target_kind == "numeric":
            lo, hi = numeric_bounds(self.target)
            lines.append(f"target {self.target.name}: rescaled from its declared bounds [{lo:g}, {hi:g}] to [-1, 1]")
        elif self.target.type == "categorical":
            no, yes = levels(self.target)
            lines.append(
                f"target {self.target.name}: binary, y = 1 for {yes!r} and 0 for {no!r} (the second "
                "declared category is coded 1)"
            )
        else:
            lines.append(f"target {self.target.name}: binary, its values 0 and 1 as they are")
        return lines


def _numeric(frame: Any, col: Column, policy: str, what: str) -> np.ndarray:
    """The column's values as float64; outside the bounds: ``policy`` "clip", "error" or "keep"."""
    import pandas as pd

    raw = frame[col.name]
    kind = _not_numbers(raw.dtype)
    if kind:
        hint = "a real number" if kind == "complex numbers" else "a number (e.g. a year, or days since a fixed date)"
        raise ValueError(
            f"{what} {col.name!r} is declared numeric but holds {kind} (dtype {raw.dtype}), which would "
            f"be read as the wrong numbers; convert each value to {hint} with public bounds before "
            "fitting"
        )
    values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=np.float64)
    bad = np.isnan(values) & raw.notna().to_numpy()
    if bad.any():
        raise ValueError(
            f"{what} {col.name!r} is declared numeric but holds values that are not numbers (a number "
            "is written like 1234.5 or 1.2e3: no thousands separator, no decimal comma, no unit; a "
            "column of true/false is categorical, categories = [false, true])"
        )
    if not np.all(np.isfinite(values[~np.isnan(values)])):
        raise ValueError(f"{what} {col.name!r} holds infinite values")
    lo, hi = numeric_bounds(col)
    outside = (values < lo) | (values > hi)
    if outside.any() and policy != "keep":
        if policy == "error":
            raise ValueError(
                f"{what} {col.name!r} has values outside its declared bounds [{lo:g}, {hi:g}] "
                '(out_of_bounds = "error"; set out_of_bounds = "clip" to clip them to the bounds)'
            )
        values = np.clip(values, lo, hi)
    return values


def _not_numbers(dtype: Any) -> str:
    """What a column of ``dtype`` holds if it is not numbers pandas would convert faithfully ("" if it is).

    Dates, times and periods would become nanoseconds or period ordinals, complex numbers would lose
    their imaginary part (the values of a Parquet file or a DataFrame keep such types; CSV is text).
    """
    import pandas as pd
    from pandas.api import types

    if isinstance(dtype, pd.CategoricalDtype):
        dtype = dtype.categories.dtype
    if types.is_datetime64_any_dtype(dtype) or isinstance(dtype, pd.PeriodDtype):
        return "dates"
    if types.is_timedelta64_dtype(dtype):
        return "time spans"
    if types.is_complex_dtype(dtype):
        return "complex numbers"
    return ""


#: text that marks a missing value (pandas' default markers and "?", as in the UCI Adult data), unless
#: the schema declares it as a category of the column
MISSING_MARKERS = frozenset(
    {
        "",
        "#N/A",
        "#N/A N/A",
        "#NA",
        "-1.#IND",
        "-1.#QNAN",
        "-NaN",
        "-nan",
        "1.#IND",
        "1.#QNAN",
        "<NA>",
        "N/A",
        "NA",
        "NULL",
        "NaN",
        "None",
        "n/a",
        "nan",
        "null",
        "?",
    }
)


def _check_missing(frame: Any, col: Column, what: str) -> None:
    values = frame[col.name]
    missing = np.array(values.isna(), dtype=bool)
    text = values.dtype == object or str(values.dtype) in ("string", "str", "category")
    if text and not missing.all():
        markers = MISSING_MARKERS - set(col.categories or ())
        stripped = values[~missing].astype(str).str.strip()
        missing[~missing] = stripped.isin(markers).to_numpy()
    if bool(missing.any()):
        raise ValueError(
            f"{what} {col.name!r} has missing values; the tool does not impute: remove or fill them "
            "before fitting (with a rule that does not depend on the other records); empty cells and "
            "markers such as NA, NaN, null, None and ? count as missing unless declared as a category"
        )


def _listed(names: list, most: int = 20) -> str:
    """The column names for an error message: the first ``most`` of a wide table, and how many more."""
    shown = ", ".join(map(str, names[:most]))
    return shown if len(names) <= most else f"{shown}, ... and {len(names) - most} more"


def _one_level(col: Any) -> bool:
    return col.type == "categorical" and len(col.categories) == 1


def build_design(
    frame: Any,
    schema: Schema,
    target: str,
    *,
    features: Sequence[str] | None = None,
    intercept: bool = True,
    target_kind: str = "binary",
) -> Design:
    """Builds X and y (see the module docstring).

    Args:
      frame: a pandas DataFrame of the records (from :func:`~dpposterior.tabular.read_table`).
      schema: the declared schema.
      target: the target column's name.
      features: the feature columns (default: every declared column except the target and any
        categorical column with a single declared level, which adds no design column).
      intercept: append an intercept column of ones.
      target_kind: ``"binary"`` (logistic regression) or ``"numeric"`` (linear regression).

    Raises:
      TypeError: ``frame`` is not a pandas DataFrame, ``schema`` not a :class:`Schema`, or ``features``
        a single string instead of a list of column names.
      ValueError: no records, a missing, undeclared or repeated column, missing values, non-numeric
        values in a numeric column, a value outside the bounds (policy ``"error"``) or outside the
        declared categories, a target that does not fit ``target_kind``.
    """
    import pandas as pd

    if not isinstance(frame, pd.DataFrame):
        raise TypeError(
            f"frame must be a pandas DataFrame of the records (e.g. from read_table), got {type(frame).__name__}"
        )
    if not isinstance(schema, Schema):
        raise TypeError(f"schema must be a Schema (from load_schema or parse_schema), got {type(schema).__name__}")
    if target_kind not in ("binary", "numeric"):
        raise ValueError(f"target_kind must be 'binary' or 'numeric', got {target_kind!r}")
    if isinstance(features, str):
        raise TypeError(
            f"features must be a list of column names, got the single string {features!r}; write [{features!r}]"
        )
    # names and levels are compared in Unicode normal form NFC, without surrounding spaces: "é" typed as
    # one code point or as "e" and a combining accent (macOS, some editors) look alike and must match
    frame = frame.rename(columns=lambda c: nfc(c).strip() if isinstance(c, str) else c)
    target = nfc(target).strip() if isinstance(target, str) else target
    features = None if features is None else [nfc(f).strip() if isinstance(f, str) else f for f in features]
    available = list(frame.columns)
    repeated = sorted({str(c) for c in frame.columns[frame.columns.duplicated()]})
    if repeated:
        raise ValueError(
            f"the data has more than one column named {', '.join(map(repr, repeated))}; column names must be unique"
        )
    if frame.shape[0] == 0:
        raise ValueError("the data holds no records (0 rows); at least one record is required")
    if not any(c in schema.columns for c in available):
        # a file without a header row: its first record was read as the column names, which must not be
        # quoted (error messages never show a record's values)
        raise ValueError(
            f"none of the {len(available)} column names of the data matches a column declared in "
            f"{schema.source or 'the schema'} ({', '.join(schema.columns)}): does the file start with a "
            "header row naming the columns as the schema does? (the names are not shown: without a "
            "header row they would be the first record's values)"
        )
    if target not in available:
        raise ValueError(f"target column {target!r} is missing from the data (columns: {_listed(available)})")
    tcol = schema.column(target)
    # a one-level categorical column carries no information (no indicator column): left out of the
    # default features, refused as a named one (below)
    names = (
        [c for c, col in schema.columns.items() if c != target and not _one_level(col)]
        if features is None
        else list(features)
    )
    if target in names:
        raise ValueError(f"the target column {target!r} cannot also be a feature")
    twice = sorted({str(c) for c, count in collections.Counter(names).items() if count > 1})
    if twice:
        raise ValueError(
            f"features must not repeat a column (each would add the same design columns twice), "
            f"got {', '.join(map(repr, twice))} more than once"
        )
    if not names and not intercept:
        raise ValueError("no feature columns: declare at least one column besides the target")
    for name in names:
        parts = [p.strip() for p in name.split(",")] if isinstance(name, str) and name not in schema.columns else []
        if len(parts) > 1 and all(p in schema.columns for p in parts):
            raise ValueError(
                f"feature {name!r} is not a column: give the features as separate names, "
                f"{parts!r} (on the command line: --features {' '.join(parts)})"
            )
        if _one_level(schema.column(name)):
            raise ValueError(
                f"feature {name!r} is categorical with one declared level "
                f"({levels(schema.columns[name])[0]!r}): it adds no design column (every record "
                f"has that level); leave it out of the features, or declare its other levels"
            )
        if name not in available:
            raise ValueError(
                f"column {name!r} (declared in {schema.source or 'the schema'}) is missing from the "
                f"data (columns: {_listed(available)})"
            )
    planned = [f"{name}={lev}" for name in names for lev in (schema.columns[name].categories or ())[1:]]
    planned += [name for name in names if schema.columns[name].type == "numeric"] + [INTERCEPT] * intercept
    clash = sorted({c for c, count in collections.Counter(planned).items() if count > 1})
    if clash:
        raise ValueError(
            f"two design columns would be named {', '.join(map(repr, clash))} (a column named like the "
            f"indicator of another column's level, 'column=level', or like the intercept {INTERCEPT!r}), "
            "and the report could not tell them apart; rename the column"
        )
    policy = schema.out_of_bounds
    blocks, fnames = [], []
    scales: list[float | None] = []
    for name in names:
        col = schema.columns[name]
        _check_missing(frame, col, "column")
        if col.type == "numeric":
            v = _numeric(frame, col, policy, "column")
            lo, hi = numeric_bounds(col)
            blocks.append(((v - (lo + hi) / 2.0) / col.half_range)[:, None])
            fnames.append(name)
            scales.append(col.half_range)
        else:
            codes = _codes(frame, col, "column")
            cats = levels(col)
            onehot = (codes[:, None] == np.arange(1, len(cats))[None, :]).astype(np.float64)
            blocks.append(onehot)
            fnames.extend(f"{name}={lev}" for lev in cats[1:])
            scales.extend([None] * (len(cats) - 1))
    n = frame.shape[0]
    if intercept:
        blocks.append(np.ones((n, 1)))
        fnames.append(INTERCEPT)
        scales.append(None)
    X = np.concatenate(blocks, axis=1).astype(np.float32)

    _check_missing(frame, tcol, "target column")
    if target_kind == "binary":
        if tcol.type == "categorical":
            if len(levels(tcol)) != 2:
                raise ValueError(
                    f"target column {target!r} must be binary for this model: declare exactly two "
                    f"categories (the second is coded 1), got {len(levels(tcol))}"
                )
            y = _codes(frame, tcol, "target column").astype(np.int32)
        else:
            # never clipped: clipping a 2 to the bound 1 would turn it into a silent 1
            v = _numeric(frame, tcol, "error" if policy == "error" else "keep", "target column")
            if not np.all((v == 0) | (v == 1)):
                raise ValueError(
                    f"target column {target!r} must hold only 0 and 1 for this model (or be declared "
                    "categorical with two levels)"
                )
            y = v.astype(np.int32)
    else:
        if tcol.type != "numeric":
            raise ValueError(
                f"target column {target!r} must be numeric (with public bounds) for this model, "
                "but it is declared categorical"
            )
        v = _numeric(frame, tcol, policy, "target column")
        lo, hi = numeric_bounds(tcol)
        y = ((v - (lo + hi) / 2.0) / tcol.half_range).astype(np.float32)
    refs = tuple(
        (name, levels(schema.columns[name])[0]) for name in names if schema.columns[name].type == "categorical"
    )
    return Design(
        X=X,
        y=y,
        feature_names=tuple(fnames),
        feature_scales=tuple(scales),
        target=tcol,
        target_kind=target_kind,
        clipped_to_bounds=policy == "clip",
        reference_levels=refs,
    )


def _whole(text: str) -> str | None:
    """``"12"`` for the text ``"12.0"`` / ``"12."`` (a whole number with a decimal point), else None."""
    m = _WHOLE.fullmatch(text)
    return str(int(m.group(1))) if m else None


_WHOLE = re.compile(r"([+-]?[0-9]+)\.0*")


def _codes(frame: Any, col: Column, what: str) -> np.ndarray:
    raw = frame[col.name]
    if raw.dtype.kind == "f":
        # a float column of whole numbers (an integer column that held missing values, in a Parquet file
        # or a DataFrame) matches integer categories: 1.0 is the level 1, not "1.0"
        values = np.array([str(int(v)) if float(v).is_integer() else str(v) for v in raw.to_numpy()], dtype=object)
    else:
        values = np.array([nfc(v) for v in raw.astype(str).str.strip()], dtype=object)
    cats = levels(col)
    lookup: dict[str | None, int] = {lev: i for i, lev in enumerate(cats)}  # _whole(v) may be None
    if {lev.lower() for lev in cats} == {"false", "true"}:
        # a boolean column: every writer's spelling (false/False/FALSE: R, pandas, Spark; a Parquet bool)
        lookup.update({lev.lower(): i for i, lev in enumerate(cats)})
        values = np.array([v.lower() if v.lower() in ("false", "true") else v for v in values], dtype=object)
    # a whole number written as text with a decimal point ("1.0": pandas writes an integer column that
    # held missing values so) matches the integer level 1, as the same float in a Parquet file does
    codes = np.fromiter((lookup.get(v, lookup.get(_whole(v), -1)) for v in values), dtype=np.int64, count=len(values))
    if (codes < 0).any():
        raise ValueError(
            f"{what} {col.name!r} has values that are not among its declared categories "
            f"{list(cats)}; declare every level (a public list) or recode the data"
        )
    return codes
