"""benchmarks/postprocess.py --quick runs and prints its table."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "postprocess.py"


def test_postprocess_benchmark_quick(capsys):
    spec = importlib.util.spec_from_file_location("postprocess_benchmark", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert "simulated from the trace model (--quick)" in out
    for method in ("full-trace NUTS", "stats NUTS", "laplace", "grid"):
        assert f"| {method} |" in out
    assert "NUTS speed-up from the statistics" in out
