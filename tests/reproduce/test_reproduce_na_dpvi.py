"""``dpposterior reproduce na-dpvi --quick``: every part runs, the report is written, a re-run resumes."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest

from dpposterior import datasets
from dpposterior.reproduce import AdultSettings, na_dpvi_plan, run_na_dpvi
from dpposterior.reproduce.adult import _keys, _posterior_stats, dpvi_release


def test_full_plan_is_the_papers_grid():
    p = na_dpvi_plan(quick=False)
    cells = {(c.model, c.epsilon, c.method, dict(c.method_options).get("priors", "paper")) for c in p.cells}
    assert len(cells) == len(p.cells) == 3 * 3 * 6 + 3 * 6 + 4 * 3  # + grid with the burn-in h prior
    assert {(m, e) for m, e, meth, pr in cells if pr == "burn_in" and meth == "grid"} == {
        (m, e)
        for m in ("beta-bernoulli", "gamma-exponential", "dirichlet-categorical", "linear-regression")
        for e in (0.1, 0.3, 1.0)
    }
    cells = {(m, e, meth) for m, e, meth, _ in cells}
    for c in p.cells:
        assert (c.replicates, c.repeats, c.num_steps, c.num_records, c.sampling_rate, c.delta) == (
            500,
            20,
            10_000,
            5_000,
            0.1,
            1e-5,
        )
    assert ("beta-bernoulli", 0.1, "bernstein-sheldon") in cells
    assert ("linear-regression", 0.3, "gibbs-ss-noisy") in cells
    assert ("dirichlet-categorical", 1.0, "dpvim") in cells
    gibbs = {c.epsilon: dict(c.method_options) for c in p.cells if c.method == "gibbs-ss-noisy"}
    assert gibbs == {0.1: {"thin": 2}, 0.3: {"thin": 2}, 1.0: {"thin": 2}}
    bs = {(c.model, c.epsilon): dict(c.method_options) for c in p.cells if c.method == "bernstein-sheldon"}
    assert bs[("gamma-exponential", 0.1)] == {"thin": 3} and bs[("beta-bernoulli", 0.1)] == {}
    assert p.adult.epsilons == (0.1, 0.3, 1.0) and p.adult.repeats == 20
    assert set(p.adult.methods) == {"nuts", "laplace", "naive", "dpvim"}
    assert p.adult.burn_in_prior_methods == ("nuts",)
    assert p.adult.labels() == p.adult.methods + ("nuts (priors burn_in)",)
    settings = {(c.epsilon, c.num_steps, c.sampling_rate) for c in p.widths}
    assert len(settings) == len(p.widths) == 12 and (0.1, 10_000, 0.1) in settings


def test_adult_settings_reject_bad_input():
    with pytest.raises(ValueError, match="subset of"):
        AdultSettings(methods=("nuts", "magic"))
    with pytest.raises(ValueError, match="epsilon"):
        AdultSettings(epsilons=(0.0,))
    with pytest.raises(ValueError, match="clip"):
        AdultSettings(clip=float("nan"))
    for bad in (("naive",), ("nuts", "magic"), "nuts"):
        with pytest.raises(ValueError, match="burn_in_prior_methods must be a tuple of NA-DPVI solvers"):
            AdultSettings(burn_in_prior_methods=bad)
    # the burn-in choice is part of the settings digest: records of other choices are never reused
    assert AdultSettings().run_settings(1.0) != AdultSettings(burn_in_prior_methods=()).run_settings(1.0)


def test_quick_reproduction_runs_every_part_and_resumes(tmp_path):
    logs: list[str] = []
    out = run_na_dpvi(work=tmp_path / "work", out=tmp_path / "docs", quick=True, progress=False, log=logs.append)
    report = (tmp_path / "docs" / "na-dpvi-quick.md").read_text()
    assert out["report"] == tmp_path / "docs" / "na-dpvi-quick.md"
    for needle in (
        "## Wall time",
        "bernstein-sheldon",
        "gibbs-ss-noisy",
        "dpvim",
        "| beta-bernoulli |",
        "## UCI Adult",
        "best NA-DPVI solver",
        "smoke test",
        "## Widths",
        "| 0.5 | 60 | 0.1 |",
        "### Solver and sampler diagnostics per cell",
        "ess_min",
        "latent_acceptance_mean",
        # the marginal figures beside the joint ones: every coordinate of the regression cells
        "worst marginal RMSE (coordinate)",
        "meets bar (every marginal)",
        "### Marginal calibration per coordinate",
        "| linear-regression | 1 | grid | sigma2 |",
        "| linear-regression | 1 | naive | w[10] |",
    ):
        assert needle in report, needle
    for r in out["coverage"]:
        assert len(r["marginal_rmse"]) == len(r["central_coverage"]) == len(r["coordinates"])
    pngs = sorted(p.name for p in (tmp_path / "docs").glob("*.png"))
    assert "na-dpvi-quick-adult-calibration.png" in pngs
    assert "na-dpvi-quick-coverage-linear-regression.png" in pngs
    for r in out["coverage"]:
        assert r["rmse"] >= 0 and r["sharpness"] > 0
    (adult,) = out["adult"]
    assert set(adult["methods"]) == {"nuts", "laplace", "naive", "dpvim", "grid (priors burn_in)"}
    # the burn-in prior reached the solver: the same release read with other priors gives another posterior
    assert adult["methods"]["grid (priors burn_in)"]["sharpness"] != adult["methods"]["nuts"]["sharpness"]
    assert "| 1 | grid (priors burn_in) | 1 |" in report
    for m in adult["methods"].values():
        assert 0 <= m["calibration_rmse"] < 1 and m["sharpness"] > 0
    assert adult["privacy_dpvi"]["epsilon"] <= 1.0 and adult["privacy_dpvim"]["epsilon"] <= 1.0

    # a re-run computes nothing and reproduces the same numbers
    logs.clear()
    again = run_na_dpvi(work=tmp_path / "work", out=tmp_path / "docs", quick=True, progress=False, log=logs.append)
    assert any("0 computed" in line for line in logs)
    assert json.dumps(again["adult"], sort_keys=True) == json.dumps(out["adult"], sort_keys=True)

    # --report-only: nothing computed; a removed cell and a removed release are named as missing
    cell = next((tmp_path / "work" / "coverage" / "cells" / "linear-regression").glob("*naive*.json"))
    cell.unlink()
    next((tmp_path / "work" / "adult").glob("*/repeat000.json")).unlink()
    part = run_na_dpvi(
        work=tmp_path / "work", out=tmp_path / "partial", quick=True, progress=False, log=logs.append, report_only=True
    )
    assert part["not_computed"] == ["linear-regression eps=1 naive", "adult eps=1 repeat 0"]
    assert len(part["coverage"]) == len(out["coverage"]) - 1 and part["adult"] == []
    text = (tmp_path / "partial" / "na-dpvi-quick.md").read_text()
    assert "Incomplete: 2 planned cells or releases have no result" in text and "linear-regression eps=1 naive" in text
    assert "(no naive or DPVIm cell)" in text and "--report-only`" in text
    assert not cell.exists()
    assert [r["rmse"] for r in again["coverage"]] == [r["rmse"] for r in out["coverage"]]


@pytest.mark.slow
def test_analysis_scripts_helper_remakes_the_adult_release(tmp_path):
    """The analysis scripts' helper (docs/results/scripts) re-makes the very release behind an Adult
    record; slow: two more DPVI runs on Adult beside the quick reproduction's Adult part."""
    out = run_na_dpvi(
        work=tmp_path / "work", out=tmp_path / "docs", quick=True, progress=False, parts=("adult",), log=lambda _: None
    )
    (adult,) = out["adult"]
    settings = na_dpvi_plan(quick=True).adult
    (X, y), (Xt, yt) = (datasets.adult_design(split, reference_levels=False)[:2] for split in ("train", "test"))
    trace = dpvi_release(settings, 1.0, 0, X, y)
    i_naive = settings.methods.index("naive")
    again_naive = _posterior_stats(
        trace.last_iterate_posterior(),
        Xt,
        yt,
        jax.random.fold_in(_keys(settings.seed, 1.0, 0)["post"], i_naive),
        settings.num_predictive,
        settings.bins,
    )
    assert again_naive["calibration_rmse"] == adult["methods"]["naive"]["calibration_rmse"]
    assert trace.privacy.summary() == adult["privacy_dpvi"]["summary"]
    faster = dpvi_release(settings, 1.0, 0, X, y, lr_multiplier=2.0)
    np.testing.assert_allclose(faster.learning_rate, 2.0 * np.asarray(trace.learning_rate), rtol=1e-6)
    assert not np.array_equal(faster.final_phi, trace.final_phi)


def test_reproduce_cli_rejects_unknown_parts(capsys):
    from dpposterior.cli import main

    with pytest.raises(SystemExit):
        main(["reproduce", "na-dpvi", "--parts", "everything"])
    assert "invalid choice" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--out", "--work"])
def test_reproduce_cli_refuses_a_file_as_folder_before_computing(tmp_path, capsys, flag):
    from dpposterior.cli import main

    afile = tmp_path / "afile"
    afile.write_text("x")
    argv = ["reproduce", "na-dpvi", "--quick", "--work", str(tmp_path / "w"), "--out", str(tmp_path / "o")]
    argv[argv.index(flag) + 1] = str(afile)
    assert main(argv) == 2
    assert f"{flag} '{afile}' is a file, not a folder" in capsys.readouterr().err
    assert not (tmp_path / "w").exists() and not (tmp_path / "o").exists()  # nothing was computed
    for seed in ("-1", str(2**32)):
        assert (
            main(
                [
                    "reproduce",
                    "na-dpvi",
                    "--quick",
                    "--work",
                    str(tmp_path / "w"),
                    "--out",
                    str(tmp_path / "o"),
                    "--seed",
                    seed,
                ]
            )
            == 2
        )
        assert "--seed must be an integer in [0, 2**32)" in capsys.readouterr().err


@pytest.mark.parametrize(
    "extra",
    [
        ["--report-only"],
        ["--parts", "adult"],
        ["--seed", "5"],
        ["--work", "w"],
        ["--backend", "ray"],
        ["--address", "auto"],
    ],
)
def test_reproduce_cli_refuses_na_dpvi_options_for_the_other_experiments(tmp_path, capsys, extra):
    # were silently ignored: pacbayes --report-only computed everything, --seed changed no key
    from dpposterior.cli import main

    for experiment in ("pacbayes", "dp-dropout", "dp-fast-mh"):
        assert main(["reproduce", experiment, "--quick", "--out", str(tmp_path / "o"), *extra]) == 2
        assert f"{extra[0]} applies to na-dpvi only" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()  # nothing was computed


def test_adult_records_that_are_corrupted_are_a_clear_error(tmp_path):
    from dpposterior.experiments import CorruptResultError
    from dpposterior.reproduce.adult import RESULT_FORMAT, RESULT_VERSION, _read_record

    path = tmp_path / "repeat000.json"
    good = {"format": RESULT_FORMAT, "version": RESULT_VERSION, "digest": "abc", "repeat": 0, "methods": {}}
    path.write_text(json.dumps(good)[:-5])
    with pytest.raises(CorruptResultError, match="unreadable.*delete it"):
        _read_record(path, "abc", 0)
    path.write_text(json.dumps({**good, "version": 7}))
    with pytest.raises(CorruptResultError, match="version 7"):
        _read_record(path, "abc", 0)
    path.write_text(json.dumps({**good, "digest": "xyz"}))
    with pytest.raises(CorruptResultError, match="not hold the release"):
        _read_record(path, "abc", 0)
    path.write_text(json.dumps(good))
    assert _read_record(path, "abc", 0)["repeat"] == 0


def test_default_folders_are_under_the_working_directory_not_the_source_tree(monkeypatch, tmp_path, capsys):
    # --out defaulted to docs/results and --work to docs/results/na-dpvi-work: `reproduce na-dpvi --quick` wrote
    # into the source tree (untracked files in git), or made a docs/ folder wherever it ran
    from pathlib import Path

    import dpposterior.reproduce.na_dpvi as na
    from dpposterior.cli import main

    assert na.default_work("docs/results", False) == Path("docs/results/na-dpvi-work")  # the maintainers' run
    assert na.default_work("x", True) == Path("x/na-dpvi-quick-work")
    assert na.DEFAULT_OUT == "dpposterior-results/na-dpvi"
    import inspect

    assert inspect.signature(na.run).parameters["out"].default == na.DEFAULT_OUT
    seen = []
    monkeypatch.setattr(na, "run", lambda **kw: seen.append(kw))
    monkeypatch.setattr("dpposterior.experiments.xla.configure_xla_cpu", lambda n: None)
    monkeypatch.chdir(tmp_path)
    assert main(["reproduce", "na-dpvi", "--report-only"]) == 0
    assert seen[-1]["out"] == "dpposterior-results/na-dpvi" and seen[-1]["work"] is None  # run() picks out/...
    assert seen[-1]["quick"] is False
    assert main(["reproduce", "na-dpvi", "--work", "elsewhere", "--quick", "--report-only"]) == 0
    assert seen[-1]["work"] == "elsewhere" and seen[-1]["quick"] is True
    assert main(["reproduce", "na-dpvi", "--out", "docs/results", "--report-only"]) == 0
    assert seen[-1]["out"] == "docs/results"  # still the maintainers' path on request
    with pytest.raises(SystemExit):
        main(["reproduce", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "default ./dpposterior-results/<experiment>" in help_text and "--out docs/results" in help_text


def _adult_record(eps: float, errors: dict[str, list[float]], rmse_shift: float = 0.0) -> dict:
    """A minimal Adult record: per method, a calibration curve whose bins err by ``errors[m]``."""
    methods = {}
    for m, e in errors.items():
        pred = np.linspace(0.05, 0.95, len(e))
        obs = pred + np.asarray(e)
        methods[m] = {
            "mean_predicted": pred.tolist(),
            "observed_frequency": obs.tolist(),
            "calibration_rmse": float(np.sqrt(np.mean(np.square(e)))) + rmse_shift,
            "brier": 0.1,
            "test_accuracy": 0.8,
            "sharpness": 0.2,
        }
    return {"epsilon": eps, "methods": methods}


def test_adult_summary_splits_the_error_into_averaged_curve_and_release_spread():
    from dpposterior.reproduce.adult import summarise

    # two releases that err in opposite directions: the averaged curve is exact, each release is off by 0.04
    recs = [
        _adult_record(1.0, {"nuts": [0.04, -0.04, 0.04], "dpvim": [0.02, 0.02, 0.02]}),
        _adult_record(1.0, {"nuts": [-0.04, 0.04, -0.04], "dpvim": [0.02, 0.02, 0.02]}),
    ]
    rows = {r["method"]: r for r in summarise(recs)}
    assert rows["nuts"]["averaged_curve_rmse"] == pytest.approx(0.0, abs=1e-12)
    assert rows["nuts"]["release_spread"] == pytest.approx(0.04)
    assert rows["nuts"]["calibration_rmse"] == pytest.approx(0.04)
    assert rows["dpvim"]["averaged_curve_rmse"] == pytest.approx(0.02)
    assert rows["dpvim"]["release_spread"] == pytest.approx(0.0, abs=1e-12)
    # the two parts add up to the mean squared per-release error, on irregular curves too
    rng = np.random.default_rng(0)
    recs = [_adult_record(0.3, {"nuts": list(rng.normal(0.01, 0.03, 10))}) for _ in range(7)]
    (row,) = summarise(recs)
    ms = np.mean(
        [
            np.mean(
                np.square(
                    np.subtract(r["methods"]["nuts"]["observed_frequency"], r["methods"]["nuts"]["mean_predicted"])
                )
            )
            for r in recs
        ]
    )
    assert row["averaged_curve_rmse"] ** 2 + row["release_spread"] ** 2 == pytest.approx(ms)


def test_adult_report_checks_the_bar_under_both_readings():
    from dpposterior.reproduce.report import _adult_table

    # NA-DPVI: averaged curve exact but releases scattered by 0.04; DPVIm: a steady 0.02 bias
    recs = [_adult_record(1.0, {"nuts": [s * 0.04] * 4, "dpvim": [0.02] * 4, "naive": [0.05] * 4}) for s in (1, -1)]
    text = "\n".join(_adult_table(recs))
    assert "| 1 | averaged curve | nuts | 0.0000 | 0.0500 | 0.0200 | yes | yes |" in text
    assert "| 1 | per release | nuts | 0.0400 | 0.0500 | 0.0200 | NO | NO |" in text
