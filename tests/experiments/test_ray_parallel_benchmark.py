"""benchmarks/ray_parallel.py --quick runs (one tiny group, in-process and on a local Ray cluster)."""

from __future__ import annotations

import pytest

pytest.importorskip("ray", reason="Ray is not installed (pip install 'dpposterior[distributed]')")


def test_ray_parallel_benchmark_quick(capsys, benchmark_script):
    module = benchmark_script("ray_parallel")
    assert module.main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert "every cell identical to the in-process backend (bit for bit): True" in out
    assert "local/ray = " in out and "most groups running at the same moment: 1" in out
