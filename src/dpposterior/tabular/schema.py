"""The declared schema of a table: column types, public bounds and categories (a TOML file).

Example ``bounds.toml``::

    out_of_bounds = "clip"          # or "error": what to do with a value outside its bounds

    [columns.age]
    type = "numeric"
    bounds = [18, 90]               # public knowledge, never read from the data

    [columns.sector]
    type = "categorical"
    categories = ["private", "public", "self-employed"]   # the first is the reference level

    [columns.income]
    type = "categorical"
    categories = ["low", "high"]    # a binary target: the second category is coded 1
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import tomllib
import unicodedata
from pathlib import Path
from typing import Any

OUT_OF_BOUNDS = ("clip", "error")
QUOTE_HINT = (
    "a column name with characters other than letters A-Z, digits, _ and - (a dot, a space, an accent) "
    'goes in quotes: [columns."capital.gain"]'
)
TYPES = ("numeric", "categorical")


@dataclasses.dataclass(frozen=True)
class Column:
    """One declared column.

    Attributes:
      name: the column's name in the table.
      type: ``"numeric"`` or ``"categorical"``.
      bounds: (lower, upper) public bounds of a numeric column (None for a categorical one).
      categories: the public list of levels of a categorical column (None for a numeric one).
    """

    name: str
    type: str
    bounds: tuple[float, float] | None = None
    categories: tuple[str, ...] | None = None

    @property
    def half_range(self) -> float:
        """(upper - lower) / 2: one unit of the rescaled feature in the column's own units."""
        lo, hi = numeric_bounds(self)
        return (hi - lo) / 2.0


@dataclasses.dataclass(frozen=True)
class Schema:
    """The declared columns and the out-of-bounds policy (``"clip"`` or ``"error"``)."""

    columns: dict[str, Column]
    out_of_bounds: str = "clip"
    source: str = ""

    def column(self, name: str) -> Column:
        """The declared column ``name`` (compared in Unicode NFC); a ValueError saying what is declared if not."""
        name = nfc(name).strip() if isinstance(name, str) else name
        if name not in self.columns:
            raise ValueError(
                f"column {name!r} is not declared in {self.source or 'the schema'} "
                f"(declared: {', '.join(self.columns) or 'none'}); add a [columns.{toml_key(str(name))}] "
                "table with its type and public bounds or categories"
            )
        return self.columns[name]


def numeric_bounds(col: Column) -> tuple[float, float]:
    """The declared (lower, upper) of a numeric column; a ValueError for a column without bounds."""
    if col.bounds is None:
        raise ValueError(f"column {col.name!r} has no declared bounds: it is not a numeric column")
    return col.bounds


def levels(col: Column) -> tuple[str, ...]:
    """The declared categories of a categorical column; a ValueError for a column without them."""
    if col.categories is None:
        raise ValueError(f"column {col.name!r} has no declared categories: it is not a categorical column")
    return col.categories


def nfc(text: str) -> str:
    """``text`` in Unicode normal form NFC (one code point for "é", not "e" and a combining accent)."""
    return unicodedata.normalize("NFC", text)


def toml_key(name: str) -> str:
    """``name`` as a TOML key: bare if it is only letters A-Z, digits, _ and -, else in quotes."""
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else json.dumps(name, ensure_ascii=False)


def load_schema(path: str | Path) -> Schema:
    """Reads and validates a schema TOML file (see the module docstring)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(f"schema file {str(path)!r} does not exist") from None
    except OSError as e:
        raise ValueError(f"cannot read schema file {str(path)!r}: {e.strerror or e}") from None
    try:
        doc = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise ValueError(f"schema file {str(path)!r} is not valid TOML: {e} ({QUOTE_HINT})") from None
    return parse_schema(doc, source=path.name)


def parse_schema(doc: dict[str, Any], source: str = "the schema") -> Schema:
    """Validates a schema given as a dict (the parsed TOML); raises ValueError saying what is wrong."""
    if not isinstance(doc, dict):
        raise TypeError(f"a schema must be a table (dict), got {type(doc).__name__}")
    unknown = set(doc) - {"columns", "out_of_bounds"}
    if unknown:
        raise ValueError(
            f"{source}: unknown top-level keys {sorted(unknown)}; allowed: 'out_of_bounds' and [columns.NAME] tables"
        )
    policy = doc.get("out_of_bounds", "clip")
    if policy not in OUT_OF_BOUNDS:
        raise ValueError(f"{source}: out_of_bounds must be one of {OUT_OF_BOUNDS}, got {policy!r}")
    cols = doc.get("columns", {})
    if not isinstance(cols, dict) or not cols:
        raise ValueError(f"{source}: declares no columns; add a [columns.NAME] table per column you use")
    columns = {}
    for name, spec in cols.items():
        column = _column(nfc(name).strip(), spec, source)  # the data's names are stripped too
        if column.name in columns:
            raise ValueError(
                f"{source}: column {column.name!r} is declared twice (the same name in two Unicode "
                "spellings, or with surrounding spaces)"
            )
        columns[column.name] = column
    return Schema(columns=columns, out_of_bounds=policy, source=source)


def _column(name: str, spec: Any, source: str) -> Column:
    where = f"{source}: column {name!r}"
    if not isinstance(spec, dict):
        raise ValueError(f'{where} must be a table with a type, e.g. [columns.{name}] type = "numeric"')
    kind = spec.get("type")
    if "type" not in spec and spec and all(isinstance(v, dict) for v in spec.values()):
        # TOML reads [columns.capital.gain] as a table "gain" inside a column "capital"
        parts, node = [name], spec
        while "type" not in node and len(node) == 1 and isinstance(next(iter(node.values())), dict):
            parts.append(next(iter(node)))
            node = node[parts[-1]]
        dotted = ".".join(parts)
        raise ValueError(
            f"{where} has no type but holds the table(s) {sorted(spec)}: TOML reads the dots of "
            f"[columns.{dotted}] as nested tables; for a column named {dotted!r} write "
            f'[columns."{dotted}"] (quotes also for a name with spaces or accents)'
        )
    if kind not in TYPES:
        raise ValueError(f"{where}: type must be one of {TYPES}, got {kind!r}")
    extra = set(spec) - {"type", "bounds", "categories", "description"}
    if extra:
        hint = (
            "; out_of_bounds is a top-level key (for every column): put it above the first [columns.NAME] table, "
            "since TOML gives a key below a table header to that table"
            if "out_of_bounds" in extra
            else ""
        )
        raise ValueError(
            f"{where}: unknown keys {sorted(extra)}; allowed: type, bounds, categories, description" + hint
        )
    if kind == "numeric":
        if "bounds" not in spec:
            raise ValueError(
                f"{where} is numeric but has no public bounds: add bounds = [lower, upper] from public "
                "knowledge (the tool never reads a bound from the data: bounds taken from the records would "
                "leak them, and differential privacy needs them to limit what one record can change)"
            )
        b = spec["bounds"]
        ok = (
            isinstance(b, list)
            and len(b) == 2
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in b)
        )
        try:
            ok = ok and all(math.isfinite(float(v)) for v in b) and float(b[0]) < float(b[1])
        except OverflowError:  # an integer beyond the float range
            ok = False
        if not ok:
            raise ValueError(f"{where}: bounds must be two finite numbers [lower, upper] with lower < upper, got {b!r}")
        if not math.isfinite(float(b[1]) - float(b[0])):  # the rescaling would divide by inf: every value -> 0
            raise ValueError(
                f"{where}: bounds {b!r} are too far apart (upper - lower overflows the float range); "
                "declare public bounds of a realistic size"
            )
        if "categories" in spec:
            raise ValueError(f"{where} is numeric: categories are for categorical columns")
        return Column(name=name, type=kind, bounds=(float(b[0]), float(b[1])))
    cats = spec.get("categories")
    # one level is allowed: a schema may describe a column that is constant in this table; it adds no
    # design column, so build_design leaves it out of the default features and refuses it as a named one
    if isinstance(cats, list) and len(cats) == 2 and all(isinstance(c, bool) for c in cats) and cats[0] != cats[1]:
        # TOML booleans: the levels "false" and "true", which match every writer's spelling of a boolean
        # (false/False/FALSE: R, pandas, Spark) and a boolean column of a Parquet file
        cats = ["true" if c else "false" for c in cats]
    if not (
        isinstance(cats, list)
        and len(cats) >= 1
        and all(isinstance(c, (str, int)) and not isinstance(c, bool) for c in cats)
    ):
        raise ValueError(
            f"{where} is categorical and needs categories = [...], a public list of levels "
            f"(strings or integers, or the two booleans [false, true]; a feature needs at least two), "
            f"got {cats!r}"
        )
    # the data's values are compared without surrounding spaces, so the levels are too
    levels = tuple(nfc(str(c)).strip() for c in cats)
    if "" in levels:
        raise ValueError(
            f"{where}: a category cannot be empty (or only spaces): an empty cell is a missing value; "
            'recode it in the data as a named level (e.g. "none") and declare that'
        )
    if len(set(levels)) != len(levels):
        raise ValueError(f"{where}: categories must be distinct (compared without surrounding spaces), got {cats!r}")
    if "bounds" in spec:
        raise ValueError(f"{where} is categorical: bounds are for numeric columns")
    return Column(name=name, type=kind, categories=levels)
