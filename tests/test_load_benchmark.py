"""benchmarks/load_test.py --quick runs and prints its figures."""

from __future__ import annotations


def test_load_benchmark_quick(capsys, benchmark_script):
    module = benchmark_script("load_test")
    assert module.main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert "N = 20,000 records, d = 50 parameters" in out
    assert "peak resident" in out and "above the data" in out


def test_finiteness_check_is_blockwise_and_exact():
    import numpy as np

    from dpposterior.dpsgd import engine

    a = np.zeros((3000, 7), np.float32)
    old = engine._FINITE_BLOCK_ELEMENTS
    try:
        engine._FINITE_BLOCK_ELEMENTS = 64  # many blocks: the last row must still be seen
        assert engine._all_finite(a)
        a[-1, -1] = np.nan
        assert not engine._all_finite(a)
        a[-1, -1] = np.inf
        assert not engine._all_finite(a)
    finally:
        engine._FINITE_BLOCK_ELEMENTS = old
