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


def _suite():
    import importlib.util

    spec = importlib.util.spec_from_file_location("calibration_suite", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cell(rmse, cov, silent=None, num_silent=100):
    per = {"x": {"tarp_rmse": rmse, "coverage90": cov, "sharpness": 1.0}}
    cell = {"noise_aware": {"per_latent": per}, "silent_replicates": num_silent}
    if silent is not None:
        cell["noise_aware_silent"] = {"per_latent": {"x": {"tarp_rmse": silent[0], "coverage90": silent[1]}}}
    return cell


def test_the_verdict_counts_a_miss_as_warned_only_where_the_silent_releases_meet_the_bar():
    suite = _suite()
    assert suite.verdict(_cell(0.02, 0.90)) == "meets"
    assert suite.verdict(_cell(0.02, 0.84)) == "misses"  # coverage below the bar, nothing said
    assert suite.verdict(_cell(0.06, 0.80, silent=(0.02, 0.89))) == "warns"  # the misses are the warned releases
    assert suite.verdict(_cell(0.06, 0.80, silent=(0.05, 0.89))) == "misses"  # silent releases miss too
    assert suite.verdict(_cell(0.06, 0.80, silent=(0.02, 0.96))) == "misses"  # over-covering is off the bar too
    assert suite.verdict(_cell(0.20, 0.40, num_silent=0)) == "warns"  # every release warned


def test_the_results_page_shows_the_table_of_the_stored_cells():
    """docs/results/calibration-suite.md carries exactly the table that ``--report`` prints from the cells
    stored beside it, so the page cannot drift from its data."""
    suite = _suite()
    root = SCRIPT.parents[1]
    table = suite.report(root / "calibration-suite")
    assert table.strip() in (root / "calibration-suite.md").read_text()


def test_the_public_covariate_cells_are_shown_on_the_page():
    """The experiment with a public sample of the covariates (its own folder) has its table on the page."""
    suite = _suite()
    root = SCRIPT.parents[1]
    table = suite.report(root / "calibration-suite" / "public-covariates")
    assert "(public covariates)" in table
    assert table.strip() in (root / "calibration-suite.md").read_text()


def test_the_spot_check_cells_are_shown_on_the_page():
    """The models that no issue names (their own folder) have their table on the page, and are not suite
    cells (the quick run and the default --models leave them out)."""
    suite = _suite()
    root = SCRIPT.parents[1]
    table = suite.report(root / "calibration-suite" / "spot-checks")
    assert "| gamma-shape-rate |" in table and table.strip() in (root / "calibration-suite.md").read_text()
    assert not set(suite.SPOT_CHECKS) & set(suite.SUITE)


def test_the_paper_cells_page_shows_the_table_of_its_stored_cells():
    """docs/results/paper-defaults.md (the paper's models with the defaults only) carries exactly the table
    that ``--report`` prints from its stored cells."""
    suite = _suite()
    root = SCRIPT.parents[1]
    table = suite.report(root / "paper-defaults")
    assert "| beta-bernoulli |" in table
    assert table.strip() in (root / "paper-defaults.md").read_text()


def test_the_sharpness_reference_is_the_sharpest_hand_set_cell_that_meets_the_bar():
    suite = _suite()
    sd, label = suite.fixed_sharpness("beta-bernoulli", 0.1, 0.03)  # grid 0.098, NUTS 0.096, Laplace 0.072
    assert label == "laplace" and abs(sd - 0.0720) < 1e-3
    sd, label = suite.fixed_sharpness("gamma-exponential", 0.1, 0.03)  # none meets 0.03: the sharpest of all
    assert label.endswith("none meets the bar") and sd < 1.1
    assert suite.fixed_sharpness("no-such-model", 0.1, 0.03) is None
