"""dpposterior.demo: the Adult demo's printed table (whole names, aligned columns, warnings shown)."""

from __future__ import annotations

import re

import pytest

from dpposterior import datasets
from dpposterior.demo import run_demo


@pytest.fixture(scope="module")
def printed(tmp_path_factory):
    lines: list[str] = []
    run_demo(num_steps=60, seed=0, progress=False, log=lines.append, out=tmp_path_factory.mktemp("demo"))
    return lines


def test_demo_table_keeps_whole_names_and_aligns_its_columns(printed):
    start = next(i for i, line in enumerate(printed) if line.startswith("coefficient"))
    header, rows = printed[start], []
    for line in printed[start + 1:]:
        if not line or line.startswith("warning:"):
            break
        rows.append(line)
    longest = max(datasets.adult_design("test")[2], key=len)
    assert len(longest) > 31 and any(r.startswith(longest + " ") for r in rows)   # whole, not cut at 31
    ends = [m.end() for m in re.finditer(r"interval|ratio", header)]
    for r in rows:   # every right-aligned column ends where its header does
        assert [m.end() for m in re.finditer(r"\]|\S$", r)][-3:] == ends, (header, r)


def test_demo_prints_what_the_post_processing_warned_about(printed):
    # 60 steps leave most coefficients unidentified: the terminal says so under the table
    assert any(line.startswith("warning: the release does not identify latents") for line in printed)
