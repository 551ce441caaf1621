"""`dpposterior reproduce dp-fast-mh`: the pieces (KL, batch-cap rule, Done-when summaries) and the
--quick pipeline end to end (toy sizes: a smoke test, not results)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpposterior.reproduce import dp_fast_mh as rep


def test_symmetric_kl():
    p = np.array([0.2, 0.3, 0.5])
    assert rep.symmetric_kl(p, p) == 0.0
    q = np.array([0.3, 0.3, 0.4])
    expected = np.sum(p * np.log(p / q)) + np.sum(q * np.log(q / p))
    assert rep.symmetric_kl(p, q) == pytest.approx(expected, rel=1e-12)
    with pytest.raises(ValueError, match="strictly positive"):
        rep.symmetric_kl(np.array([0.0, 1.0]), np.array([0.5, 0.5]))


def test_sample_histogram_has_an_outside_bin_and_sums_to_one():
    edges = (np.linspace(0, 1, 5), np.linspace(0, 1, 3))
    smp = np.array([[0.1, 0.1], [0.9, 0.9], [5.0, 0.5]])
    p = rep.sample_probs(smp, edges)
    assert p.shape == (4 * 2 + 1,) and p.sum() == pytest.approx(1.0)
    assert p[-1] == pytest.approx(1.5 / (3 + 0.5 * 9))  # one sample outside, plus half a count


def test_batch_cap_rule_makes_the_minibatch_branch_noise_free():
    eps, big_c, c_max, lam = 0.05, 681.7, 0.02616, 10.0
    k = rep.fast_mh_batch_cap(eps, big_c, c_max, lam)
    eps_p = eps * big_c / (6 * k * c_max)
    d1_at_boundary = 2 * math.log1p((k - lam) / lam)  # C M = K - lam
    assert d1_at_boundary == pytest.approx(eps_p, rel=1e-6)
    k_paper = eps * big_c / (6 * c_max)
    assert lam < k < k_paper  # the paper's K (epsilon' = 1) adds noise over most of its minibatch branch


def _gmm_rows():
    rows = []
    for label, kls, batch, wall in (
        ("DP-Fast MH", [0.5, 0.7], 900.0, 2.0),
        ("penalty", [0.9, 1.1], 1000.0, 8.0),
        ("DP Barker", [0.6, 0.6], 1000.0, 1.0),
    ):
        for seed, kl in enumerate(kls):
            rows.append(
                dict(
                    label=label,
                    epsilon=0.05,
                    kl=[2.0 + seed, kl],
                    checkpoints=[100, 1000],
                    nonprivate_mean_batch=batch,
                    seed=seed,
                    wall_seconds=wall,
                )
            )
    return dict(rows=rows, num_records=1000)


def test_done_when_summaries():
    d = rep.gmm_done_when(_gmm_rows())
    assert d["kl_fast"][0] == pytest.approx(0.6) and d["kl_penalty"][0] == pytest.approx(1.0)
    assert d["lower_than_penalty"] is True and d["lower_than_barker"] is False
    assert d["batch_fraction"] == pytest.approx(0.9)
    # at DP-Fast MH's 2 s: penalty (8 ms per iteration) has reached only its 100-iteration checkpoint
    assert d["at_time"]["seconds"] == 2.0 and d["at_time"]["penalty"] == (100, 2.5)
    assert d["at_time"]["DP-Fast MH"] == (1000, pytest.approx(0.6)) and d["at_time"]["DP Barker"][0] == 1000
    m = [
        dict(
            projection="public",
            label="DP-Fast MH",
            epsilon=0.05,
            seg_times=[1.0, 2.0, 3.0],
            accuracy=[0.6, 0.8, 0.9],
            wall_seconds=3.0,
            nonprivate_mean_batch=10.0,
        ),
        dict(
            projection="public",
            label="penalty",
            epsilon=0.05,
            seg_times=[2.5, 5.0],
            accuracy=[0.85, 0.95],
            wall_seconds=5.0,
            nonprivate_mean_batch=100.0,
        ),
    ]
    (w,) = rep.mnist_done_when(m)
    assert w["seconds"] == 3.0 and w["acc_fast"] == 0.9 and w["acc_penalty"] == 0.85 and w["holds"] is True


@pytest.mark.slow  # long: kept out of the default run, which must stay short
def test_quick_run_writes_the_report(tmp_path):
    results = rep.run_dp_fast_mh(quick=True)
    rows = results["gmm"]["rows"]
    assert {r["label"] for r in rows} == {"DP-Fast MH", "penalty"}
    for r in rows:
        assert len(r["kl"]) == len(r["checkpoints"]) and all(np.isfinite(r["kl"]))
        assert r["nonprivate_bound_violations"] == 0 and r["total_epsilon"] > 0
    assert results["gmm"]["reference"].sum() == pytest.approx(1.0)
    assert [r["label"] for r in results["mnist"]] == ["penalty"]
    assert all(0.0 <= r["accuracy"][-1] <= 1.0 for r in results["mnist"])
    path = rep.write_dp_fast_mh_report(
        results, tmp_path, quick=True, wall_seconds=1.0, command="dpposterior reproduce dp-fast-mh --quick"
    )
    text = path.read_text()
    assert path.name == "dp-fast-mh-quick.md" and "NOT results" in text
    assert "`dpposterior reproduce dp-fast-mh --quick`" in text and "UNACCOUNTED" in text
    assert "### Done-when (mixture, per-iteration epsilon 0.05)" in text
    for png in ("gmm-kl", "gmm-epsilon", "gmm-density", "mnist"):
        assert (tmp_path / f"dp-fast-mh-quick-{png}.png").stat().st_size > 1000
    import json

    data = json.loads((tmp_path / "dp-fast-mh-quick.json").read_text())  # every chain's row, machine-readable
    assert [r["kl"] for r in data["gmm"]] == [r["kl"] for r in rows] and len(data["mnist"]) == len(results["mnist"])
