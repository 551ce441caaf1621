"""The library source says what and why, never when, in which run, or in which file outside the repository.

Every text file under src/ is checked for a mention of a work session, a calendar date, a machine, or a
reference to notes and paper copies that the repository does not contain (``NOTES.md``, ``papers/*.txt``,
``../shared``). History belongs in git and CHANGELOG.md; measurements in benchmarks/README.md; papers are
cited by authors, title and year.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"

#: (what is forbidden, pattern); each pattern is searched line by line.
FORBIDDEN = (
    ("a work session", re.compile(r"\bsessions?\b", re.IGNORECASE)),
    ("a calendar date", re.compile(r"\b(19|20)\d\d-[01]\d-[0-3]\d\b")),
    ("a reference to NOTES.md", re.compile(r"\bNOTES\b")),
    ("a reference to a papers/ copy", re.compile(r"\bpapers/[\w.-]*")),
    ("a reference to ../shared", re.compile(r"\.\./shared\b")),
    ("a machine note", re.compile(r"\b\d+-core\b|\bon \d+ (shared )?cores\b|\b\d\d:\d\d UTC\b")),
)

_BINARY_SUFFIXES = {".gz", ".npz", ".pyc", ".png", ".so"}


def _source_files() -> list[Path]:
    # build outputs (an editable install's *.egg-info copies the README) are not sources
    return sorted(
        p
        for p in SRC.rglob("*")
        if p.is_file()
        and p.suffix not in _BINARY_SUFFIXES
        and "__pycache__" not in p.parts
        and not any(part.endswith(".egg-info") for part in p.parts)
    )


def _offences(text: str) -> list[str]:
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for what, pattern in FORBIDDEN:
            match = pattern.search(line)
            if match:
                found.append(f"line {number}: {what} ({match.group(0)!r})")
    return found


def test_the_source_tree_is_scanned():
    files = _source_files()
    assert any(p.name == "__init__.py" for p in files)
    assert not any(p.suffix == ".gz" for p in files)


def test_no_history_or_missing_references_under_src():
    offences = []
    for path in _source_files():
        for offence in _offences(path.read_text(encoding="utf-8")):
            offences.append(f"{path.relative_to(ROOT)}: {offence}")
    assert not offences, f"{len(offences)} mention(s) of history or missing files under src/:\n" + "\n".join(offences)


# the examples of history are assembled from parts, so that this file does not itself carry them
_DAY = "-".join(("2026", "12"))


@pytest.mark.parametrize(
    "line",
    [
        "# measured in the eleventh " + "session",
        "used until " + _DAY + "-02",
        "(NOTES.md section 4)",
        "the bound of NOTES 6",
        "papers/na-dpvi.txt section 4",
        "see ../shared/papers",
        "measured on the 2-core machine",
        "about 7.5 hours of compute on 2 cores",
        "(" + _DAY + "-01, 14:41 UTC)",
    ],
)
def test_each_pattern_catches_its_example(line):
    assert _offences(line)


@pytest.mark.parametrize(
    "line",
    [
        'Räisä, Jälkö & Honkela, "Noise-aware differentially private variational inference" (2024)',
        "one eta shared by the records",
        "version 1.2.3; seed 2026",
    ],
)
def test_ordinary_text_passes(line):
    assert not _offences(line)
