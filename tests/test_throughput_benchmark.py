"""benchmarks/dpsgd_throughput.py --quick: every column of the table is timed and printed (smoke test;
no timing is asserted)."""

import pytest

import numpy as np


@pytest.mark.slow  # long: kept out of the default run, which must stay short
def test_dpsgd_throughput_quick(capsys, benchmark_script):
    m = benchmark_script("dpsgd_throughput")
    assert m.main(["--quick"]) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line.strip().startswith("1,000 ")]
    assert len(rows) == 1
    values = [float(v.rstrip("x")) for v in rows[0][2:10]]  # four times (ms) and four ratios
    # marginal times at these tiny sizes can print as 0.000 ms on a busy machine: only their form is checked
    assert all(np.isfinite(v) and v >= 0 for v in values), values
    assert "fixed cost of one dpsgd() call" in out
