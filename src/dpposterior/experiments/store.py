"""Results on disk: one JSON file per finished cell, written atomically, matched on the full configuration.

Layout of a results folder::

    <out>/cells/<model>/eps<epsilon>_<method>_<digest[:12]>.json    one finished cell
    <out>/coverage_<model>.png, coverage_table.csv, coverage_table.md   (reports, :mod:`.report`)

A cell file is written to a temporary file in the same folder, flushed to disk and renamed over its
final name (``os.replace``, atomic on POSIX), so a reader sees either no file or a complete one, and
an interrupted run loses at most the cells in progress. The file holds the cell's configuration; a
re-run skips a cell only if a file holds exactly the same configuration. A file that cannot be read,
is not a cell result, or holds another configuration than its name promises is reported as corrupted
(with its path), never silently recomputed over or trusted.

A file's digest is that of the configuration as written in it. Method options are written in their
canonical spelling (:func:`~dpposterior.experiments.methods.canonical_method_options`); a
file written under another spelling of the same options (e.g. ``bounds``
``"0.0,5.0"``, now ``"0,5"``) has another digest and file name, and :meth:`ResultStore.load` still
finds it (its record read with the canonical configuration, the one as written kept under
``"config_as_written"``), so the cell is not computed twice.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path
from typing import Any, Iterator

from .._io import write_bytes_atomic

from .cell import RESULT_FORMAT, RESULT_VERSION
from .config import CellConfig

_REQUIRED = (
    "config",
    "config_digest",
    "coverage",
    "alpha",
    "rmse",
    "single_draw_rmse",
    "sharpness",
    "seed",
    "coverage_sd",
    "single_draw_rmse_mean",
    "single_draw_rmse_sd",
    "num_replicates_used",
)
#: the numbers and curves the reports read (:mod:`.report`), checked when a file is read.
_NUMBERS = ("rmse", "sharpness", "single_draw_rmse_mean", "single_draw_rmse_sd")
_CURVES = ("alpha", "coverage", "coverage_sd")
#: the per-coordinate figures a cell records beside the joint ones (absent from files written before);
#: checked when present, so that the reports never format a value of the wrong type.
_PER_COORDINATE = ("marginal_rmse", "central_coverage", "central_coverage_se")


class CorruptResultError(ValueError):
    """A results file exists but is not a valid cell result (the message names the file)."""


def _fmt_eps(eps: float) -> str:
    return repr(float(eps)).replace(".", "p").replace("-", "m").replace("+", "")


def write_json_atomic(path: str | os.PathLike, obj: Any) -> Path:
    """Writes ``obj`` as JSON to ``path`` atomically (temporary file, fsync, ``os.replace``)."""
    text = json.dumps(obj, indent=1, sort_keys=True, allow_nan=False)
    return write_bytes_atomic(path, (text + "\n").encode("utf-8"))


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """Writes ``text`` to ``path`` atomically."""
    return write_bytes_atomic(path, text.encode("utf-8"))


class ResultStore:
    """The cell results under a folder (see the module docstring)."""

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)

    def path(self, config: CellConfig) -> Path:
        """Where the result of ``config`` lives."""
        name = f"eps{_fmt_eps(config.epsilon)}_{config.method}_{config.digest()[:12]}.json"
        return self.root / "cells" / config.model / name

    def load(self, config: CellConfig) -> dict[str, Any] | None:
        """The finished result of ``config``, or None if there is none.

        Raises:
          CorruptResultError: the file exists but is unreadable, not a cell result, or holds another
            configuration.
        """
        path = self.path(config)
        if not path.exists():
            return self._load_older_spelling(config)
        record = read_result(path)
        if record["config_digest"] != config.digest() or record["config"] != config.to_dict():
            raise CorruptResultError(
                f"results file {path} holds the configuration {record['config']!r}, not the one its name promises "
                f"({config.to_dict()!r}); delete the file to recompute the cell"
            )
        return record

    def _load_older_spelling(self, config: CellConfig) -> dict[str, Any] | None:
        """The record of a file of the same model, epsilon and method whose options are another spelling of
        ``config``'s (written before the canonical spellings), read as ``config``'s; None if there is none.
        Files that cannot be read are passed over here: they are reported when their own cell is loaded."""
        prefix = f"eps{_fmt_eps(config.epsilon)}_{config.method}_"
        for p in sorted((self.root / "cells" / config.model).glob(f"{prefix}*.json")):
            try:
                record = read_result(p)
                if CellConfig.from_dict(record["config"]) != config:
                    continue
            except (CorruptResultError, TypeError, ValueError):
                continue
            return canonical_view(record)
        return None

    def save(self, record: dict[str, Any]) -> Path:
        """Writes a result atomically to the path of its configuration."""
        config = CellConfig.from_dict(record["config"])
        return write_json_atomic(self.path(config), record)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        """Every finished cell under the folder (corrupted files raise)."""
        for p in sorted((self.root / "cells").glob("*/*.json")):
            yield read_result(p)


def written_digest(config: dict[str, Any]) -> str:
    """SHA-256 of a configuration as written in a file (sorted keys, compact separators): for a
    configuration in canonical spelling, :meth:`CellConfig.digest`."""
    text = json.dumps(config, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def canonical_view(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with its configuration and digest in canonical spelling (a copy, the configuration as
    written under ``"config_as_written"``), or ``record`` itself when they already are."""
    config = CellConfig.from_dict(record["config"])
    if config.digest() == written_digest(record["config"]):
        return record
    return dict(record, config=config.to_dict(), config_digest=config.digest(), config_as_written=record["config"])


def read_result(path: str | os.PathLike) -> dict[str, Any]:
    """Reads and checks one cell result file.

    Raises:
      CorruptResultError: unreadable JSON, not a cell result of a known version, or missing fields.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
        record = json.loads(text)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CorruptResultError(
            f"results file {path} is corrupted ({type(e).__name__}: {e}); delete it to recompute the cell"
        ) from e
    if not isinstance(record, dict) or record.get("format") != RESULT_FORMAT:
        raise CorruptResultError(
            f"results file {path} is not a coverage cell result (format "
            f"{record.get('format') if isinstance(record, dict) else type(record).__name__!r}); "
            "delete it to recompute the cell"
        )
    if record.get("version") != RESULT_VERSION:
        raise CorruptResultError(
            f"results file {path} has version {record.get('version')!r}; this dpposterior "
            f"reads version {RESULT_VERSION}: delete it to recompute the cell"
        )
    missing = [k for k in _REQUIRED if k not in record]
    if missing:
        raise CorruptResultError(f"results file {path} lacks the fields {missing}; delete it to recompute the cell")
    bad = [
        k
        for k in _NUMBERS
        if isinstance(record[k], bool) or not isinstance(record[k], (int, float)) or not math.isfinite(record[k])
    ]
    curves = [record[k] for k in _CURVES]
    if (
        bad
        or not all(
            isinstance(c, list)
            and c
            and len(c) == len(curves[0])
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in c)
            for c in curves
        )
        or isinstance(record["num_replicates_used"], bool)
        or not isinstance(record["num_replicates_used"], int)
    ):
        raise CorruptResultError(
            f"results file {path} holds values of the wrong type or length "
            f"({', '.join(bad) if bad else 'alpha/coverage/coverage_sd or num_replicates_used'}); "
            "delete it to recompute the cell"
        )
    present = [k for k in _PER_COORDINATE if k in record]
    lengths = {len(record[k]) for k in present if isinstance(record[k], list)}
    if present and (
        len(lengths) != 1
        or not all(
            isinstance(record[k], list)
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in record[k])
            for k in present
        )
    ):
        raise CorruptResultError(
            f"results file {path} holds per-coordinate figures ({', '.join(present)}) that are "
            "not lists of finite numbers of one length per latent coordinate; delete it to "
            "recompute the cell"
        )
    try:
        CellConfig.from_dict(record["config"])
    except (TypeError, ValueError) as e:
        raise CorruptResultError(f"results file {path} holds an invalid configuration: {e}") from e
    if written_digest(record["config"]) != record["config_digest"]:  # the digest of what the file says
        raise CorruptResultError(
            f"results file {path}: its configuration does not match its digest (edited?); "
            "delete it to recompute the cell"
        )
    return record
