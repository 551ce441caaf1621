"""benchmarks/scaling.py: the exponent fit, and --quick runs one point per sweep kind end to end."""

from __future__ import annotations

import math


def test_slope_recovers_a_power_law(benchmark_script):
    m = benchmark_script("scaling")
    xs = [10.0, 100.0, 1000.0]
    assert math.isclose(m.slope(xs, [3 * x**1.5 for x in xs]), 1.5, rel_tol=1e-12)
    assert math.isclose(m.slope(xs, [7.0, 7.0, 7.0]), 0.0, abs_tol=1e-12)


def test_scaling_quick_point(benchmark_script):
    m = benchmark_script("scaling")
    r = m.point("N", 1_000, quick=True)   # in this process: a tiny dpsgd sweep point
    assert r["kind"] == "N" and r["time"] > 0 and r["peak_mib"] > 0
