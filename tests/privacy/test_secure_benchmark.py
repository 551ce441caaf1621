"""benchmarks/secure_mode.py --quick runs (in this process, at tiny sizes) and prints its table."""

from __future__ import annotations

import pytest

import re


@pytest.mark.slow  # long: kept out of the default run, which must stay short
def test_secure_mode_benchmark_quick(capsys, benchmark_script):
    module = benchmark_script("secure_mode")
    assert module.main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert "secure/default" in out
    rows = re.findall(r"^ *(logistic d=100|small d=2) .* ([\d.]+)x +([\d.]+) +([\d.]+)$", out, re.M)
    assert [r[0] for r in rows] == ["logistic d=100", "small d=2"], out
    # --quick timings are too short to mean anything (a ratio may print as 0.00x): only the format is checked
    assert all(float(r[1]) >= 0 for r in rows)
