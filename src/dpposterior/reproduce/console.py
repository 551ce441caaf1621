"""Progress rows of a reproduction, printed as an aligned table as they arrive.

A reproduction runs for minutes to hours and finishes one row (a method at an epsilon and a seed) at a
time. Each row is printed when it is done, under a header printed before the first, in columns of fixed
width; the full rows, every field at full precision, go to the report's JSON file.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Sequence


@dataclasses.dataclass(frozen=True)
class Column:
    """One column of a progress table.

    Attributes:
      key: the row's field.
      header: the column's heading.
      fmt: a format spec for a number (``".4f"``, ``".3g"``, ``"d"``); text is shown as it is.
      width: the column's width in characters (at least the header's and what ``fmt`` gives).
    """

    key: str
    header: str
    fmt: str = ".4g"
    width: int = 8

    def cell(self, row: dict[str, Any]) -> str:
        """The row's value in this column: ``-`` where it has none (a missing field or None)."""
        value = row.get(self.key)
        if value is None:
            return "-"
        if isinstance(value, bool) or isinstance(value, str):
            return str(value)
        if isinstance(value, float) and not math.isfinite(value):
            return str(value)
        try:
            return format(value, self.fmt)
        except (TypeError, ValueError):  # a value the spec does not fit (an int under ".4f" fits; a list not)
            return str(value)


class RowPrinter:
    """Prints rows under a header, each value right-aligned in its column (text left-aligned).

    ``printer(row)`` prints one row; the header is printed before the first. A value wider than its
    column widens that row only, so nothing is ever cut.
    """

    def __init__(self, columns: Sequence[Column], write: Callable[[str], Any] = print, title: str | None = None):
        if not columns:
            raise ValueError("a progress table needs at least one column")
        self.columns = tuple(columns)
        self.widths = [max(c.width, len(c.header)) for c in self.columns]
        self._write = write
        self._title = title
        self._started = False

    def header(self) -> str:
        """The header line and the rule under it."""
        names = "  ".join(
            c.header.rjust(w) if self._numeric(c) else c.header.ljust(w) for c, w in zip(self.columns, self.widths)
        )
        return names.rstrip() + "\n" + "  ".join("-" * w for w in self.widths)

    def line(self, row: dict[str, Any]) -> str:
        """One row as a line of the table."""
        cells = []
        for c, w in zip(self.columns, self.widths):
            text = c.cell(row)
            cells.append(text.rjust(w) if self._numeric(c) else text.ljust(w))
        return "  ".join(cells).rstrip()

    def __call__(self, row: dict[str, Any]) -> None:
        if not self._started:
            if self._title:
                self._emit(self._title)
            self._emit(self.header())
            self._started = True
        self._emit(self.line(row))

    def _emit(self, text: str) -> None:
        if self._write is print:
            print(text, flush=True)
        else:
            self._write(text)

    @staticmethod
    def _numeric(c: Column) -> bool:
        return c.fmt != "s"


def format_rows(rows: Sequence[dict[str, Any]], columns: Sequence[Column]) -> str:
    """Rows as one aligned table (header, rule, one line per row)."""
    p = RowPrinter(columns)
    return "\n".join([p.header(), *(p.line(r) for r in rows)])
