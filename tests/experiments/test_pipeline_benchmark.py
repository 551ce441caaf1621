"""benchmarks/pipeline.py --quick runs: ours and the reference approach on a slice of Adult."""

from __future__ import annotations

import pytest

import re


@pytest.mark.slow  # long: kept out of the default run, which must stay short
def test_pipeline_benchmark_quick(capsys, benchmark_script):
    module = benchmark_script("pipeline")
    assert module.main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"reference: masked DP-SGD \+ full-trace NUTS +[\d.]+ +[\d.]+ +[\d.]+ +1\.0x", out)
    assert re.search(r"target >= 20x end to end \(grid\): (met|NOT met) \([\d.]+x\)", out)
    assert "same privacy spent by both releases: True" in out
