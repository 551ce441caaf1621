"""benchmarks/dp_fast_mh_chains.py --quick runs every method end to end and prints its rows."""

import pytest


@pytest.mark.slow  # long: kept out of the default run, which must stay short
def test_fast_mh_chains_quick(capsys, benchmark_script):
    m = benchmark_script("dp_fast_mh_chains")
    assert m.main(["--quick", "--methods", "penalty", "fast-mh:200", "barker"]) == 0
    out = capsys.readouterr().out
    assert "noise-free only for moves M <" in out
    rows = [line for line in out.splitlines() if "KL after 200" in line]
    assert [r.split()[0] for r in rows] == ["penalty", "fast-mh:200", "barker"]
    assert "ratio to the first row 1.000" in rows[0]
