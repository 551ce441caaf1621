"""benchmarks/scaling.py: the exponent fit, and --quick runs a sweep end to end (subprocess points, table, PNG)."""

from __future__ import annotations

import pytest

import math


def test_slope_recovers_a_power_law(benchmark_script):
    m = benchmark_script("scaling")
    xs = [10.0, 100.0, 1000.0]
    assert math.isclose(m.slope(xs, [3 * x**1.5 for x in xs]), 1.5, rel_tol=1e-12)
    assert math.isclose(m.slope(xs, [7.0, 7.0, 7.0]), 0.0, abs_tol=1e-12)


@pytest.mark.slow  # long: kept out of the default run, which must stay short
def test_scaling_quick_runs_a_sweep_end_to_end(capsys, benchmark_script, tmp_path):
    m = benchmark_script("scaling")
    png = tmp_path / "scaling.png"
    assert m.main(["--quick", "--sweeps", "N", "--png", str(png)]) == 0  # two points, each a fresh process
    out = capsys.readouterr().out
    assert out.count("     N ") >= 3 and "time exponent (upper half)" in out
    assert png.stat().st_size > 0
