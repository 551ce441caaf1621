"""The Ray backend against a real local Ray cluster started here: same results, bit for bit."""

from __future__ import annotations

import os
import warnings

import pytest

from dpposterior.experiments import comparable, run_coverage

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'dpposterior[distributed]'); the Ray "
                                        "backend cannot be tested")


@pytest.fixture(scope="module")
def local_cluster():
    """A local two-CPU Ray cluster, shut down after the module."""
    if ray.is_initialized():
        ray.shutdown()
    with warnings.catch_warnings():
        # ray.init starts Ray's own server binaries (GCS, raylet) by fork + exec from this process,
        # which has JAX loaded; JAX warns at every fork. The children exec at once and never run JAX.
        warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        yield ray
    finally:
        ray.shutdown()


def test_ray_backend_equals_local_bit_for_bit(grid_cells, tmp_path, local_cluster):
    cells = grid_cells[:2]  # one group: naive and grid on the same replicates (one Ray task)
    local = run_coverage(cells, tmp_path / "local", progress=False)
    remote = run_coverage(cells, tmp_path / "ray", backend="ray", progress=False)
    assert len(remote.computed) == 2
    assert {r["execution"]["backend"] for r in remote.results} == {"ray"}
    # every number of every cell (curves, RMSEs, sharpness, diagnostics) is identical
    assert [comparable(r) for r in remote.results] == [comparable(r) for r in local.results]
    # the group ran as a Ray task in a worker process, not in this one
    assert os.getpid() not in {r["execution"]["pid"] for r in remote.results}
    again = run_coverage(cells, tmp_path / "ray", backend="ray", progress=False)
    assert again.computed == [] and len(again.skipped) == 2


def test_ray_parallel_benchmark_quick(capsys, benchmark_script, local_cluster):
    """benchmarks/ray_parallel.py --quick on this module's cluster (one tiny group, the same cells)."""
    module = benchmark_script("ray_parallel")
    assert module.main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert "every cell identical to the in-process backend (bit for bit): True" in out
    assert "local/ray = " in out and "most groups running at the same moment: 1" in out
    assert local_cluster.is_initialized()   # the benchmark reused the cluster and left it running
