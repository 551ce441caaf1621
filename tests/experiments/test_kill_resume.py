"""A real interruption: the coverage command is killed (SIGKILL) after its first cell file appears, then
re-run. Slow (three command-line processes that each compile the engine): ``pytest -m slow``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

CMD = [
    sys.executable,
    "-m",
    "dpposterior.cli",
    "coverage",
    "--model",
    "beta-bernoulli",
    "--epsilon",
    "0.5",
    "2.0",
    "--method",
    "naive",
    "grid",
    "--replicates",
    "6",
    "--repeats",
    "4",
    "--num-steps",
    "60",
    "--num-records",
    "200",
    "--num-draws",
    "400",
    "--no-progress",
]


def _run(out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*CMD, "--out", str(out)], capture_output=True, text=True, timeout=900)


def _cells(out: Path) -> list[Path]:
    return sorted((out / "cells").glob("*/*.json"))


@pytest.mark.slow
def test_killed_run_resumes(tmp_path):
    full = _run(tmp_path / "full")
    assert full.returncode == 0, full.stderr
    assert "4 cell(s) computed" in full.stdout

    out = tmp_path / "killed"
    proc = subprocess.Popen(
        [*CMD, "--out", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 900
        while not _cells(out):
            assert proc.poll() is None, "the run ended before writing a cell"
            assert time.monotonic() < deadline
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    finished = _cells(out)
    assert 1 <= len(finished) < 4
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp")]
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in finished}

    resumed = _run(out)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{4 - len(finished)} cell(s) computed, {len(finished)} found finished" in resumed.stdout
    for p, (mtime, content) in before.items():
        assert p.stat().st_mtime_ns == mtime and p.read_bytes() == content
    assert len(_cells(out)) == 4
    assert (out / "coverage_table.csv").read_text() == (tmp_path / "full" / "coverage_table.csv").read_text()
