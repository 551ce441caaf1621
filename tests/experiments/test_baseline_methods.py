"""The baselines as coverage methods: they release the group's own synthetic data sets by their mechanism,
return draws with their PrivacySpent, and fail early on models they do not handle."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from dpposterior.cli import main
from dpposterior.experiments import METHODS, CellConfig, run_coverage
from dpposterior.experiments.cell import comparable
from dpposterior.experiments.runner import compute_group
from dpposterior.experiments.replicates import cell_data, replicate_data, run_replicates, simulate_data

#: the tiny sizes of conftest.py (so the compiled replicate program is shared with the other engine tests).
TINY = dict(replicates=6, repeats=4, num_steps=60, num_records=200, num_draws=400)
BASELINES = ("bernstein-sheldon", "gibbs-ss-noisy", "dpvim")


def test_baselines_are_registered_as_mechanism_methods():
    for name in BASELINES:
        m = METHODS[name]
        assert m.needs_data and m.description and m.options
    assert METHODS["bernstein-sheldon"].models == ("beta-bernoulli", "dirichlet-categorical", "gamma-exponential")
    assert METHODS["gibbs-ss-noisy"].models == ("linear-regression",)
    assert METHODS["dpvim"].models is None  # every model
    assert not any(METHODS[m].needs_data for m in ("naive", "grid", "laplace", "nuts"))


@pytest.mark.parametrize(
    "model, method, message",
    [
        (
            "linear-regression",
            "bernstein-sheldon",
            "method 'bernstein-sheldon' does not support model 'linear-regression'; it supports: ['beta-bernoulli', "
            "'dirichlet-categorical', 'gamma-exponential']",
        ),
        (
            "beta-bernoulli",
            "gibbs-ss-noisy",
            "method 'gibbs-ss-noisy' does not support model 'beta-bernoulli'; it supports: ['linear-regression']",
        ),
    ],
)
def test_unsupported_model_fails_when_the_cell_is_configured(model, method, message):
    with pytest.raises(ValueError) as e:
        CellConfig(model, 1.0, method, **TINY)
    assert message in str(e.value)


@pytest.mark.parametrize(
    "model, method, options, message",
    [
        ("beta-bernoulli", "bernstein-sheldon", {"bounds": "0,5"}, "bounds applies only to gamma-exponential"),
        ("gamma-exponential", "bernstein-sheldon", {"bounds": "5,1"}, "0 <= lo < hi"),
        ("gamma-exponential", "bernstein-sheldon", {"bounds": "1"}, "'lo,hi' of two numbers"),
        ("beta-bernoulli", "bernstein-sheldon", {"thin": 0}, "thin must be an integer >= 1"),
        ("beta-bernoulli", "bernstein-sheldon", {"neighbouring": "swap"}, "neighbouring must be one of"),
        ("beta-bernoulli", "bernstein-sheldon", {"snapping": 1}, "snapping must be one of [True, False]"),
        ("linear-regression", "gibbs-ss-noisy", {"snapping": "yes"}, "snapping must be one of [True, False]"),
        (
            "linear-regression",
            "gibbs-ss-noisy",
            {"budget_split": "xx=0.5,xy=0.5"},
            "exactly the parts ['xx', 'xy', 'yy']",
        ),
        ("linear-regression", "gibbs-ss-noisy", {"budget_split": "xx=a"}, "budget_split must be a string like"),
        ("linear-regression", "gibbs-ss-noisy", {"x_bound": -1.0}, "x_bound must be a finite number > 0"),
        ("beta-bernoulli", "dpvim", {"lr_mu": 0.01}, "lr_mu and lr_rho go together"),
        ("beta-bernoulli", "dpvim", {"reading": "last"}, "reading must be one of ['noise_aware', 'averaged']"),
        ("beta-bernoulli", "dpvim", {"num_warmup": 10}, "unknown options ['num_warmup'] for method 'dpvim'"),
    ],
)
def test_bad_options_fail_when_the_cell_is_configured(model, method, options, message):
    with pytest.raises(ValueError) as e:
        CellConfig(model, 1.0, method, method_options=options, **TINY)
    assert message in str(e.value)


@pytest.mark.slow  # long: kept out of the default run, which must stay short
def test_regenerated_data_are_the_programs_data():
    """The data sets a baseline releases are those the compiled replicate program simulated: the same theta
    bit for bit (whatever the chunking), and replicate k's data equal :func:`replicate_data`'s."""
    cfg = CellConfig("beta-bernoulli", 0.5, "naive", **TINY)
    summaries = run_replicates(cfg)
    theta, data = simulate_data(cfg, chunk_size=4)  # two chunks, the last padded
    np.testing.assert_array_equal(theta, summaries.theta)
    theta1, data1 = simulate_data(cfg)
    np.testing.assert_array_equal(theta1, theta)
    np.testing.assert_array_equal(data1[0], data[0])
    assert data[0].shape == (TINY["replicates"], TINY["num_records"])
    _, d3, _ = replicate_data(cfg, 3)
    np.testing.assert_array_equal(data[0][3], np.asarray(d3[0]))
    cd = cell_data(cfg)
    np.testing.assert_array_equal(cd.arrays[0], data[0])
    assert (cd.epsilon, cd.num_steps, cd.num_records, cd.num_replicates) == (
        0.5,
        TINY["num_steps"],
        TINY["num_records"],
        TINY["replicates"],
    )
    # power: another seed simulates other replicates
    other, _ = simulate_data(CellConfig("beta-bernoulli", 0.5, "naive", **{**TINY, "seed": 1}))
    assert not np.allclose(other, theta)


def _check_record(rec, cfg):
    assert rec["config"] == cfg.to_dict()
    assert math.isfinite(rec["rmse"]) and 0 <= rec["rmse"] <= 1
    assert math.isfinite(rec["sharpness"]) and rec["sharpness"] > 0
    assert rec["num_replicates_used"] == cfg.replicates
    json.dumps(rec, allow_nan=False)  # what the store writes


@pytest.mark.slow  # long: kept out of the default run, which must stay short
def test_baselines_run_through_compute_group(monkeypatch):
    """Bernstein-Sheldon and DPVIm in one group with naive: ordered by cost, the data simulated once, each
    record with its own release's privacy (and naive with the group's DP-SGD release's)."""
    from dpposterior.experiments import replicates as R

    calls = []
    real = R.simulate_data
    monkeypatch.setattr(R, "simulate_data", lambda *a, **k: calls.append(1) or real(*a, **k))
    cfgs = [CellConfig("beta-bernoulli", 0.5, m, **TINY) for m in ("dpvim", "bernstein-sheldon", "naive")]
    recs = compute_group(cfgs)
    assert [r["config"]["method"] for r in recs] == ["naive", "bernstein-sheldon", "dpvim"]
    assert len(calls) == 1
    by = {r["config"]["method"]: r for r in recs}
    for cfg in cfgs:
        _check_record(by[cfg.method], cfg)

    p = by["bernstein-sheldon"]["privacy"]
    assert p["release"] == "method" and p["accountant"] == "pure" and p["epsilon"] == 0.5 and p["delta"] == 0
    assert p["seeded_by"] == "user" and "(epsilon=0.5, delta=0)-DP" in p["summary"]
    p = by["dpvim"]["privacy"]
    assert p["release"] == "method" and p["mechanism"] == "poisson_subsampled_gaussian"
    assert p["epsilon"] <= 0.5 * (1 + 1e-3) and p["delta"] == cfg.delta and p["num_steps"] == TINY["num_steps"]
    p = by["naive"]["privacy"]
    assert p["release"] == "dpvi" and p["noise_multiplier"] == by["naive"]["noise_multiplier"]
    assert p["epsilon"] <= 0.5 * (1 + 1e-3)
    assert by["bernstein-sheldon"]["sharpness"] != by["naive"]["sharpness"]  # a posterior of its own
    assert all(r["execution"]["group_ran_dpsgd"] for r in recs)

    # Alone (e.g. added to a finished run), a mechanism-only method runs no DP-SGD: its releases are not
    # its to use and its references are centred on its own posterior, so its record is the same.
    monkeypatch.setattr(R, "run_replicates", lambda *a, **k: pytest.fail("DP-SGD ran for a mechanism-only group"))
    (alone,) = compute_group([c for c in cfgs if c.method == "bernstein-sheldon"])
    assert comparable(alone) == comparable(by["bernstein-sheldon"])
    assert alone["execution"]["group_ran_dpsgd"] is False


def test_post_processing_without_releases_is_an_error():
    from dpposterior.experiments.cell import evaluate_cell
    from dpposterior.experiments.replicates import ReplicateSummaries, dpvi_setup

    cfg = CellConfig("beta-bernoulli", 0.5, "naive", **TINY)
    with pytest.raises(ValueError, match="post-processes the group's DP-SGD releases"):
        evaluate_cell(cfg, dpvi_setup(cfg), ReplicateSummaries(np.zeros((6, 1)), None, None))


def _fake_cell(calls, n):
    from dpposterior.baselines.cells import BaselineCellOutput
    from dpposterior.privacy.spent import PrivacySpent

    def fake(*args, **kwargs):
        calls.append((args, kwargs))
        k, m = 6, TINY["num_draws"]
        return BaselineCellOutput(
            draws=np.zeros((k, m, n), np.float32),
            posterior_sd=np.ones((k, n)),
            diagnostics={"x": np.float32(1.5)},
            privacy=PrivacySpent(1.0, 0.0, "add_remove", "pure", "laplace", seeded_by="user"),
        )

    return fake


@pytest.mark.parametrize(
    "model, method, cell_fn, options, expected",
    [
        (
            "gamma-exponential",
            "bernstein-sheldon",
            "bernstein_sheldon_cell",
            {"bounds": "0.5,4", "thin": 3, "num_warmup": 7, "neighbouring": "replace_one", "snapping": True},
            {"bounds": (0.5, 4.0), "thin": 3, "num_warmup": 7, "neighbouring": "replace_one", "snapping": True},
        ),
        (
            "beta-bernoulli",
            "bernstein-sheldon",
            "bernstein_sheldon_cell",
            {},
            {"bounds": None, "thin": None, "num_warmup": 1000, "neighbouring": "add_remove", "snapping": False},
        ),
        (
            "linear-regression",
            "gibbs-ss-noisy",
            "gibbs_ss_noisy_cell",
            {
                "budget_split": "xx=0.5,xy=0.25,yy=0.25",
                "x_bound": 2.0,
                "y_bound": 4.0,
                "interweave": False,
                "thin": 2,
                "snapping": True,
            },
            {
                "budget_split": {"xx": 0.5, "xy": 0.25, "yy": 0.25},
                "x_bound": 2.0,
                "y_bound": 4.0,
                "interweave": False,
                "thin": 2,
                "num_warmup": 1000,
                "fourth_moments": "normal",
                "snapping": True,
            },
        ),
        (
            "beta-bernoulli",
            "dpvim",
            "dpvim_cell",
            {"lr_mu": 0.01, "lr_rho": 1.0, "reading": "averaged"},
            {
                "learning_rate": (0.01, 1.0),
                "reading": "averaged",
                "natural_gradient": False,
                "clip": 2.0,
                "num_steps": TINY["num_steps"],
                "sampling_rate": 0.1,
                "delta": 1e-5,
                "accountant": "pld",
            },
        ),
    ],
)
def test_options_reach_the_baselines_cell_function(model, method, cell_fn, options, expected, monkeypatch):
    """The registered method hands the cell's data, budget, mechanism key and parsed options to the
    baseline's cell function, and returns its draws with its privacy (the real runs: the tests above and
    the slow regression cell below)."""
    from dpposterior.baselines import cells as BC
    from dpposterior.experiments.methods import CellData, MethodSettings

    calls = []
    monkeypatch.setattr(BC, cell_fn, _fake_cell(calls, 3))
    cfg = CellConfig(model, 0.7, method, method_options=options, **TINY)
    arrays = (np.zeros((6, 200)),)
    data = CellData(model, arrays, 0.7, cfg.delta, cfg.num_steps, cfg.sampling_rate, 200, "pld", 2.0)
    key = np.array([3, 4], np.uint32)
    out = METHODS[method].fn(
        None, MethodSettings(np.zeros((6, 2), np.uint32), TINY["num_draws"], dict(cfg.method_options), key), data
    )
    ((args, kwargs),) = calls
    assert args[-4] is arrays and args[-3] == 0.7 and args[-2] is key and args[-1] == TINY["num_draws"]
    if method != "gibbs-ss-noisy":
        assert args[0] == model
    for name, value in expected.items():
        assert kwargs[name] == value, name
    assert out.privacy.accountant == "pure" and out.draws.shape == (6, TINY["num_draws"], 3)
    assert out.diagnostics == {"x": 1.5} and type(out.diagnostics["x"]) is float  # JSON-ready


@pytest.mark.slow
def test_gibbs_ss_noisy_cell_through_compute_group():
    """The regression baseline's real cell (slow: it compiles the regression replicate program and the
    Gibbs-SS-Noisy chain)."""
    cfgs = [CellConfig("linear-regression", 1.0, m, **TINY) for m in ("naive", "gibbs-ss-noisy")]
    recs = compute_group(cfgs)
    for rec, cfg in zip(recs, cfgs):
        _check_record(rec, cfg)
    p = recs[1]["privacy"]
    assert p["release"] == "method" and p["accountant"] == "pure" and p["epsilon"] == 1.0 and p["delta"] == 0
    assert recs[1]["diagnostics"]["latent_acceptance_min"] > 0


def test_cli_runs_a_baseline_and_resumes_without_recomputing(tmp_path, capsys, tiny_cli_args):
    args = [
        "coverage",
        "--model",
        "beta-bernoulli",
        "--epsilon",
        "0.5",
        "--method",
        "naive",
        "bernstein-sheldon",
        "--out",
        str(tmp_path),
        *tiny_cli_args,
    ]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "2 cell(s) computed, 0 found finished" in out and "| beta-bernoulli | 0.5 | bernstein-sheldon |" in out
    files = {p.name.split("_")[1]: p for p in (tmp_path / "cells" / "beta-bernoulli").glob("*.json")}
    assert set(files) == {"naive", "bernstein-sheldon"}
    first = json.loads(files["bernstein-sheldon"].read_text())
    assert first["privacy"]["release"] == "method"
    naive_before = files["naive"].read_bytes()
    files["bernstein-sheldon"].unlink()
    assert main(args) == 0
    assert "1 cell(s) computed, 1 found finished" in capsys.readouterr().out
    assert files["naive"].read_bytes() == naive_before  # not recomputed
    again = json.loads(files["bernstein-sheldon"].read_text())
    assert comparable(again) == comparable(first)  # the same keys give the same release and draws


def test_cli_refuses_an_unsupported_model_before_running(tmp_path, capsys):
    argv = [
        "coverage",
        "--model",
        "linear-regression",
        "--epsilon",
        "1",
        "--method",
        "bernstein-sheldon",
        "--out",
        str(tmp_path),
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not support model 'linear-regression'" in err
    assert not (tmp_path / "cells").exists()


def test_cli_help_lists_every_method(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")
    with pytest.raises(SystemExit):
        main(["coverage", "--help"])
    text = capsys.readouterr().out
    for name in METHODS:
        assert name in text


def test_run_coverage_with_a_baseline_skips_finished_cells(tmp_path):
    cfg = CellConfig("beta-bernoulli", 0.5, "bernstein-sheldon", **TINY)
    first = run_coverage([cfg], tmp_path, progress=False)
    assert first.computed == [cfg]
    again = run_coverage([cfg], tmp_path, progress=False)
    assert again.computed == [] and again.skipped == [cfg]
    assert comparable(again.results[0]) == comparable(first.results[0])
