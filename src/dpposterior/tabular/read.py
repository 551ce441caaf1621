"""Reading a table of records (CSV, or Parquet with pyarrow installed) as text columns."""

from __future__ import annotations

import io
from pathlib import Path

from .schema import nfc

PARQUET_SUFFIXES = (".parquet", ".pq")
PARQUET_MAGIC = b"PAR1"
TAB_SUFFIXES = (".tsv", ".tab")
SPREADSHEET_SUFFIXES = (".xlsx", ".xlsm", ".xls", ".ods")
#: the first 8 bytes of an .xls (OLE2 compound file); .xlsx/.ods are zip files, told by their suffix
SPREADSHEET_MAGIC = (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1",)
OTHER_SEPARATORS = {";": "semicolons (;)", "\t": "tabs", "|": "vertical bars (|)"}
#: the first 2 bytes of a gzip file (``data.csv.gz``, or one named ``.csv``, or gzip bytes from a pipe)
GZIP_MAGIC = b"\x1f\x8b"


def read_table(path: str | Path):
    """Reads ``path`` into a pandas DataFrame; every CSV cell is kept as text (typed later by the schema).

    An empty (or blank) CSV cell is read as missing; a marker such as ``NA``, ``null`` or ``?`` is kept
    as text, and :func:`~dpposterior.tabular.build_design` treats it as missing unless the schema
    declares it as a category of that column.

    CSV (any other suffix; tab-separated for ``.tsv``/``.tab``) is read with a header row, as UTF-8
    with or without a byte-order mark, with any line endings (``\\n``, ``\\r\\n``), compressed or not
    (gzip, told by its first bytes whatever the name; ``.bz2``, ``.xz``, ``.zip`` of one file by the
    suffix); Parquet (``.parquet``/``.pq``, or any file that starts and ends with Parquet's magic
    bytes) needs pyarrow (``pip install 'dpposterior[parquet]'``). Blank lines are skipped.

    Raises:
      FileNotFoundError: no such file.
      ValueError: a file that cannot be read or parsed, that holds no records, whose header names a
        column twice, whose rows have more fields than its header names, whose header reads as one
        column holding a semicolon, a tab or a vertical bar (not comma-separated), a file named
        ``.gz`` that is not gzip-compressed, a row whose every field is empty (only separators, as
        a spreadsheet leaves below a table), or a row that repeats the header (files joined one
        after another).
    """
    import pandas as pd

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"data file {str(path)!r} does not exist")
    if path.is_dir():
        raise ValueError(f"cannot read data file {str(path)!r}: it is a directory")
    try:
        # a pipe (<(zcat data.csv.gz), /dev/stdin) can be read only once: read it into memory
        source = path if path.is_file() else io.BytesIO(path.read_bytes())
        if path.suffix.lower() in SPREADSHEET_SUFFIXES or _head(source, 8) in SPREADSHEET_MAGIC:
            raise ValueError(
                f"cannot read data file {str(path)!r}: it is a spreadsheet workbook (Excel or "
                "OpenDocument), not CSV; save the sheet as CSV (Excel: 'CSV UTF-8') or Parquet"
            )
        if path.suffix.lower() in PARQUET_SUFFIXES or _is_parquet(source):
            try:
                import pyarrow  # noqa: F401
            except ImportError:
                raise ValueError(
                    f"cannot read {str(path)!r}: reading Parquet needs pyarrow, which is not installed "
                    "(pip install 'dpposterior[parquet]'), or save the table as CSV"
                ) from None
            frame = pd.read_parquet(source)
        else:
            # only empty cells are read as missing here: a marker such as "NA" or "None" may be a declared
            # category (North America; no answer), so build_design decides, knowing the schema
            sep = "\t" if any(x.lower() in TAB_SUFFIXES for x in path.suffixes[-2:]) else ","  # data.tsv.gz
            compression = _compression(source, path)
            frame = pd.read_csv(
                _rewound(source),
                sep=sep,
                dtype=str,
                keep_default_na=False,
                na_values=[""],
                skipinitialspace=True,
                compression=compression,
            )
            _check_separator(frame, path)
            if not isinstance(frame.index, pd.RangeIndex):
                # pandas takes the surplus leading fields of rows longer than the header as an index,
                # which shifts every value one column to the right of its name
                raise ValueError(
                    f"cannot read data file {str(path)!r}: its rows have more fields than the header "
                    f"has column names ({frame.shape[1]}): a separator at the end of every row, or a "
                    "first column without a name in the header? Make the header name every column"
                )
            # pandas renames a repeated header name ("age", "age.1"): read the header as written
            header = (
                pd.read_csv(
                    _rewound(source),
                    sep=sep,
                    header=None,
                    nrows=1,
                    dtype=str,
                    keep_default_na=False,
                    skipinitialspace=True,
                    compression=compression,
                )
                .iloc[0]
                .tolist()
            )
            _check_unique_names([nfc(str(c).strip()) for c in header], path)
            _check_rows(frame, header, path)
    except pd.errors.EmptyDataError:  # pandas: "No columns to parse from file"
        raise ValueError(
            f"data file {str(path)!r} is empty: it needs a header row naming the columns and a row per record"
        ) from None
    except UnicodeDecodeError:  # a ValueError too; its bytes (a record's) are not quoted
        raise ValueError(
            f"cannot read data file {str(path)!r}: it is not UTF-8 text (it holds bytes UTF-8 does not "
            "allow, e.g. from a Latin-1, Windows-1252 or UTF-16 file); save it as UTF-8 (Excel: 'CSV "
            "UTF-8'; LibreOffice: character set 'Unicode (UTF-8)')"
        ) from None
    except ValueError as e:
        if str(e).startswith(("cannot read", "data file")):
            raise
        raise ValueError(f"cannot read data file {str(path)!r}: {_first_line(e)}") from None
    except OSError as e:
        raise ValueError(f"cannot read data file {str(path)!r}: {_first_line(e)}") from None
    except Exception as e:  # pandas/pyarrow parser errors (ParserError, ArrowInvalid, ...)
        raise ValueError(f"cannot read data file {str(path)!r}: {type(e).__name__}: {_first_line(e)}") from None
    if frame.shape[0] == 0:
        raise ValueError(f"data file {str(path)!r} holds no records (only a header)")
    frame.columns = [nfc(str(c).strip()) for c in frame.columns]
    _check_unique_names(list(frame.columns), path)
    return frame


def _check_separator(frame, path: Path) -> None:
    """A header read as one column that holds another separator: the file is not comma-separated."""
    if frame.shape[1] != 1:
        return
    found = [name for sep, name in OTHER_SEPARATORS.items() if sep in str(frame.columns[0])]
    if found:
        raise ValueError(
            f"cannot read data file {str(path)!r}: its header was read as one column: the file seems "
            f"separated by {found[0]}, not commas; save it as comma-separated CSV (a tab-separated file "
            "may also be named .tsv)"
        )


def _compression(source, path: Path) -> str | None:
    """How the CSV ``source`` is compressed: gzip by its first bytes (whatever its name, or from a pipe),
    else by the suffix as pandas infers it (``.bz2``, ``.xz``, ``.zip``, ...); a ``.gz`` name on a file
    that is not gzip is refused (pandas' own error quotes the file's first bytes)."""
    if _head(source, 2) == GZIP_MAGIC:
        return "gzip"
    if path.suffix.lower() == ".gz":
        raise ValueError(
            f"cannot read data file {str(path)!r}: it is named .gz but is not gzip-compressed; "
            "compress it with gzip, or remove .gz from its name if it is plain CSV"
        )
    return "infer" if isinstance(source, Path) else None


def _check_rows(frame, header: list, path: Path) -> None:
    """Refuses rows that are not records: every field empty (only separators), or the header again.

    Neither is dropped: a careful user wants to know the file is not what it seems (an export with
    spreadsheet leftovers, two files joined), and the count of such rows is not shown.
    """
    if frame.shape[0] == 0:
        return
    if bool(frame.isna().all(axis=1).any()):
        raise ValueError(
            f"cannot read data file {str(path)!r}: it has rows whose every field is empty (only "
            "separators, such as ',,' that a spreadsheet leaves below a table); delete those rows "
            "(a record with no values cannot be fitted)"
        )
    names = [str(c).strip() for c in header]
    first = frame.iloc[:, 0]
    candidates = first.notna() & (first.str.strip() == names[0])
    if bool(candidates.any()):
        rows = frame[candidates.to_numpy()].fillna("")
        same = rows.apply(lambda col: col.str.strip()).eq(names).all(axis=1)
        if bool(same.any()):
            raise ValueError(
                f"cannot read data file {str(path)!r}: it has rows that repeat the header row (files "
                "joined one after another, each with its header?); keep only the first header row"
            )


def _rewound(source):
    """``source`` (a path, or the bytes of a pipe) ready to be read from its start."""
    if isinstance(source, io.BytesIO):
        source.seek(0)
    return source


def _head(source, n: int) -> bytes:
    """The first ``n`` bytes of ``source`` (a path, or the bytes of a pipe); b"" if unreadable."""
    if isinstance(source, io.BytesIO):
        return source.getvalue()[:n]
    try:
        with open(source, "rb") as f:
            return f.read(n)
    except OSError:  # pandas says what is wrong below
        return b""


def _is_parquet(source) -> bool:
    """A Parquet file under another suffix (``.parq``, none): it starts and ends with ``PAR1``."""
    if isinstance(source, io.BytesIO):
        data = source.getvalue()
        return len(data) >= 8 and data[:4] == PARQUET_MAGIC and data[-4:] == PARQUET_MAGIC
    try:
        with open(source, "rb") as f:
            head = f.read(4)
            f.seek(-4, 2)
            return head == PARQUET_MAGIC and f.read(4) == PARQUET_MAGIC
    except OSError:  # too short to seek back (or unreadable: pandas says so below)
        return False


def _check_unique_names(names: list[str], path: Path) -> None:
    """Refuses repeated column names, naming the columns by position (1 = first), not by name: in a file
    without a header row the "names" are the first record's values, which an error must not show."""
    groups: dict[str, list[int]] = {}
    for i, n in enumerate(names, start=1):
        groups.setdefault(n, []).append(i)
    repeated = [pos for pos in groups.values() if len(pos) > 1]
    if repeated:
        which = "; ".join(", ".join(map(str, pos[:-1])) + " and " + str(pos[-1]) for pos in repeated[:5])
        more = f" (and {len(repeated) - 5} more groups)" if len(repeated) > 5 else ""
        raise ValueError(
            f"data file {str(path)!r} has more than one column of the same name: columns {which}"
            f"{more} (counting from 1); column names must be unique. If the file has no header "
            "row, add one: the first row is read as the column names"
        )


def _first_line(e: BaseException) -> str:
    text = str(getattr(e, "strerror", None) or e).strip()
    return text.splitlines()[0] if text else type(e).__name__
