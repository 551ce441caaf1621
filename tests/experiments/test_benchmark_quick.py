"""benchmarks/coverage_cell.py --quick runs (in this process, on the tests' tiny sizes)."""

from __future__ import annotations

import re


def test_coverage_cell_benchmark_quick(capsys, benchmark_script):
    module = benchmark_script("coverage_cell")
    assert module.main(["--quick", "--epsilon", "0.5"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"vmapped cell: +[\d.]+ s wall", out)
    assert "EXTRAPOLATED to 6 replicates" in out and "measured on 2 of 6" in out
    assert re.search(r"speed-up of the vmapped cell: [\d.]+x", out)
    assert re.search(r"grid +RMSE [\d.]+ \(single draw", out)
