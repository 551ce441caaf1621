"""The calibration suite's quick run (docs/results/scripts/calibration_suite.py --quick): every model with
the defaults only, K = 8 replicates of N = 500, at both epsilons. A smoke run of the whole pipeline, not a
calibration check (K = 8 cannot measure coverage); the full suite's figures are in
docs/results/calibration-suite.md."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "docs" / "results" / "scripts" / "calibration_suite.py"


@pytest.mark.slow  # long: 22 cells of 8 releases each
def test_the_quick_suite_runs_every_model_with_the_defaults(tmp_path):
    subprocess.run([sys.executable, str(SCRIPT), "--quick", "--out", str(tmp_path)], check=True)
    cells = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("*.json"))]
    assert len(cells) == 11 * 2
    for c in cells:
        if c["refused"]:  # N = 500 at epsilon 0.3 is too few records for the private clip search: refused
            assert all("cannot choose a clip privately" in r for r in c["refused"]), c["refused"][:1]
            assert c["epsilon"] == 0.3 and "noise_aware" not in c
            continue
        per = c["noise_aware"]["per_latent"]
        assert set(per) == set(c["coordinates"])
        assert all(0.0 <= v["coverage90"] <= 1.0 and v["sharpness"] > 0 for v in per.values())
    table = subprocess.run(
        [sys.executable, str(SCRIPT), "--report", "--out", str(tmp_path)], check=True, capture_output=True, text=True
    ).stdout
    assert table.count("| poisson |") == 1 and "refused in every replicate" in table
