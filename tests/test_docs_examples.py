"""Every ```python example in README.md and docs/ runs (DESIGN.md: the docs stay true to the code)."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def _examples():
    for path in DOCS:
        for i, m in enumerate(BLOCK.finditer(path.read_text())):
            yield pytest.param(m.group(1), id=f"{path.relative_to(ROOT)}#{i}")


@pytest.mark.parametrize("code", list(_examples()))
def test_doc_example_runs(code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "<doc example>", "exec"), {"__name__": "__doc_example__"})


def test_there_are_examples():
    assert len(list(_examples())) >= 2
