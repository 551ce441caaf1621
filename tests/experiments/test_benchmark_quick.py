"""benchmarks/coverage_cell.py --quick runs (in this process, on the tests' tiny sizes)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "coverage_cell.py"


def test_coverage_cell_benchmark_quick(capsys):
    spec = importlib.util.spec_from_file_location("coverage_cell_benchmark", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--quick", "--epsilon", "0.5"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"vmapped cell: +[\d.]+ s wall", out)
    assert "EXTRAPOLATED to 6 replicates" in out and "measured on 2 of 6" in out
    assert re.search(r"speed-up of the vmapped cell: [\d.]+x", out)
    assert re.search(r"grid +RMSE [\d.]+ \(single draw", out)
