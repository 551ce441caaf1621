"""benchmarks/dpsgd_throughput.py --quick: every column of the table is timed and printed (smoke test;
no timing is asserted)."""


def test_dpsgd_throughput_quick(capsys, benchmark_script):
    m = benchmark_script("dpsgd_throughput")
    assert m.main(["--quick"]) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line.strip().startswith("1,000 ")]
    assert len(rows) == 1
    assert all(float(v.rstrip("x")) > 0 for v in rows[0][2:10])   # four times and four ratios
    assert "fixed cost of one dpsgd() call" in out
