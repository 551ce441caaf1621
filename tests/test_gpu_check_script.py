"""benchmarks/gpu_check.sh on a machine without a GPU: it says so and stops with status 3 (so the
script stays runnable; on a GPU machine it times the K = 500 cell and the Adult pipeline)."""

import os
import subprocess
import sys
from pathlib import Path

import jax
import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(jax.devices()[0].platform == "gpu", reason="a GPU is present: the script would time it")
def test_gpu_check_stops_without_a_gpu(tmp_path):
    env = dict(os.environ, OUT=str(tmp_path / "gpu"), PYTHON=sys.executable)
    p = subprocess.run(
        ["bash", str(ROOT / "benchmarks" / "gpu_check.sh")], env=env, capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 3, (p.returncode, p.stdout, p.stderr)
    assert "JAX sees no GPU" in p.stdout
    assert (tmp_path / "gpu" / "devices.txt").read_text().strip().endswith("JAX sees no GPU: nothing to time")
    assert (tmp_path / "gpu" / "date.txt").exists()
