"""A privacy researcher's first runs of the coverage engine (``dpposterior.experiments``, ``dpposterior
coverage``) and the baselines (``dpposterior.baselines``) with inputs and methods the examples do not use.

Bugs found by a bug hunt (2026-12-02): settings that were stored in a cell's configuration but
truncated, ignored or refused only after the DP-SGD replicates had run, a repeated command-line flag that
dropped values, results lost after the computation (a method of the user's own, an output folder that
was a file, too few draws for a diagnostic), reports that mislabelled cells or trusted a broken file, a
privacy budget split that could spend more than recorded, a Dirichlet Gibbs chain that did not move
from its start, and raw internal errors where a clear one naming the argument was due. Each test was
red before its fix. No test runs DP-SGD: configurations are checked before anything runs, cells are
evaluated with a method of the test's own (its own mechanism on tiny synthetic data sets), reports are
written from small records, and one short Gibbs chain is the only compiled sampler (about 35 s in all
on a cold JAX cache, 20 s on a warm one, on 2 shared cores).
"""

from __future__ import annotations

import numpy as np
import pytest

from dpposterior.experiments import CellConfig

SMALL = dict(replicates=4, repeats=2, num_steps=20, num_records=20, num_draws=50)


# ---------------------------------------------------------------------------------------------
# NA-DPVI solver options of a cell: only "priors" was checked. A float num_points was truncated (the
# file said 64.5, the grid used 64), and a string, a negative count or target_accept_prob = 2 failed
# (or ran) only after the group's DP-SGD replicates; duplicated (name, value) pairs kept one silently;
# a NaN option made the finished cell unsavable (the JSON writer refuses NaN).


@pytest.mark.parametrize(
    "method, options, exc, words",
    [
        ("grid", {"num_points": 64.5}, TypeError, ("grid option num_points", "integer >= 2")),
        ("grid", {"num_points": "x"}, TypeError, ("grid option num_points",)),
        ("grid", {"num_stages": 0}, ValueError, ("grid option num_stages", ">= 1")),
        ("grid", {"tail": 0.7}, ValueError, ("tail", "(0, 0.5)")),
        ("grid", {"num_phi_draws": 0}, ValueError, ("num_phi_draws", ">= 1")),
        ("laplace", {"tol": -1.0}, ValueError, ("laplace option tol",)),
        ("laplace", {"num_iterations": 0}, ValueError, ("laplace option num_iterations",)),
        ("nuts", {"num_warmup": -1}, ValueError, ("nuts option num_warmup", ">= 0")),
        ("nuts", {"num_samples": 0}, ValueError, ("nuts option num_samples", ">= 1")),
        ("nuts", {"target_accept_prob": 2.0}, ValueError, ("target_accept_prob", "(0, 1)")),
        ("grid", {"num_points": float("nan")}, ValueError, ("finite", "num_points")),
        ("grid", (("num_points", 32), ("num_points", 64)), ValueError, ("'num_points' more than once",)),
    ],
)
def test_solver_options_are_checked_when_the_cell_is_configured(method, options, exc, words):
    with pytest.raises(exc) as info:
        CellConfig("beta-bernoulli", 1.0, method, method_options=options, **SMALL)
    for w in words:
        assert w in str(info.value), (w, str(info.value))


def test_valid_solver_options_still_pass_and_numpy_numbers_are_numbers():
    c = CellConfig("beta-bernoulli", 1.0, "grid", method_options={"num_points": np.int64(64), "tail": 1e-6}, **SMALL)
    assert dict(c.method_options) == {"num_points": 64, "tail": 1e-6}
    assert (
        c.digest()
        == CellConfig("beta-bernoulli", 1.0, "grid", method_options={"num_points": 64, "tail": 1e-6}, **SMALL).digest()
    )
    CellConfig("beta-bernoulli", 1.0, "nuts", method_options={"num_warmup": 0, "target_accept_prob": 0.9}, **SMALL)
    CellConfig("beta-bernoulli", 1.0, "grid", burn_in=np.float64(0.25), **SMALL)


# ---------------------------------------------------------------------------------------------
# A method of the user's own (register_method): its diagnostics went into the record as returned, so
# a numpy number (np.float32) or a NaN made the finished cell unsavable (a raw TypeError / ValueError
# from the JSON writer, after the computation: the result was lost), and a fresh record differed from
# the one read back (tuples against lists); a posterior_sd of the wrong shape was broadcast silently
# (shape (1, n): every replicate got the first one's scale) or failed deep inside NumPy; a release
# that spent more than the cell's budget was reported under the cell's epsilon.


def _own_privacy(epsilon, delta=0.0):
    from dpposterior.privacy.spent import PrivacySpent

    return PrivacySpent(
        epsilon=epsilon,
        delta=delta,
        neighbouring="add_remove",
        accountant="pure",
        mechanism="test_own_mechanism",
        noise_multiplier=None,
        sampling_rate=1.0,
        num_steps=1,
        seeded_by="user",
    )


@pytest.fixture(scope="module")
def own_method_cell():
    """Evaluates cells of a method of the test's own (its own mechanism: no DP-SGD) on a fake group
    setup; ``run(**returned)`` overrides what the method returns."""
    from dpposterior.baselines.expfam_gibbs import family_layout
    from dpposterior.experiments import CellData, MethodOutput, ReplicateSummaries, evaluate_cell, register_method
    from dpposterior.experiments.methods import METHODS
    from dpposterior.experiments.replicates import DPVISetup
    from dpposterior.models.registry import get_model

    returned: dict = {}

    def own(releases, settings, data):
        k = data.num_replicates
        rng = np.random.default_rng(0)
        draws = rng.normal(size=(k, settings.num_draws, 1)).astype(np.float32)
        out = dict(
            draws=draws,
            posterior_sd=draws.std(axis=1).astype(np.float64),
            diagnostics={"ok": 1},
            privacy=_own_privacy(data.epsilon),
        )
        out.update(returned)
        return MethodOutput(**out)

    register_method("test-audit-own", own, needs_data=True, description="test: a user's own mechanism")
    cfg = CellConfig("beta-bernoulli", 1.0, "test-audit-own", **SMALL)
    k, n = cfg.replicates, cfg.num_records
    setup = DPVISetup(
        spec=get_model("beta-bernoulli"),
        layout=family_layout("beta-bernoulli"),
        num_latent=1,
        phi0=np.zeros(2, np.float32),
        beta=np.ones(2, np.float32),
        learning_rate=np.ones(2, np.float32),
        noise_multiplier=1.0,
        clip=2.0,
        data_shapes=(),
    )
    rng = np.random.default_rng(1)
    summaries = ReplicateSummaries(theta=rng.normal(size=(k, 1)), final_phi=None, stats=None)
    data = CellData(
        "beta-bernoulli",
        (rng.integers(0, 2, (k, n)).astype(np.int32),),
        1.0,
        cfg.delta,
        cfg.num_steps,
        cfg.sampling_rate,
        n,
        "pld",
        2.0,
    )

    def run(**override):
        returned.clear()
        returned.update(override)
        return evaluate_cell(cfg, setup, summaries, data=data)

    yield cfg, run
    METHODS.pop("test-audit-own", None)


def test_own_method_diagnostics_are_stored_as_they_read_back(own_method_cell, tmp_path):
    from dpposterior.experiments import ResultStore

    cfg, run = own_method_cell
    diag = {
        "spread": np.float32(1.5),
        "counts": np.array([1, 2]),
        "pair": (1, 2.5),
        "bad": float("nan"),
        "worst": -np.inf,
        "flag": np.bool_(True),
        3: "int key",
    }
    rec = run(diagnostics=diag)
    store = ResultStore(tmp_path)
    store.save(rec)  # was: TypeError / ValueError from json, the cell lost
    back = store.load(cfg)
    assert back == rec  # the fresh record is the one a resumed run reads back
    assert (
        back["diagnostics"]
        == rec["diagnostics"]
        == {
            "spread": 1.5,
            "counts": [1, 2],
            "pair": [1, 2.5],
            "bad": "nan",
            "worst": "-inf",
            "flag": True,
            "3": "int key",
        }
    )
    with pytest.raises(TypeError, match=r"test-audit-own.*diagnostics\.obj is a object"):
        run(diagnostics={"obj": object()})


def test_own_method_output_shapes_and_budget_are_checked(own_method_cell):
    cfg, run = own_method_cell
    sd = np.ones((1, 1))
    with pytest.raises(ValueError, match=r"posterior_sd of shape \(1, 1\), expected \(4, 1\)"):
        run(posterior_sd=sd)
    with pytest.raises(ValueError, match=r"posterior_sd of shape \(4,\)"):
        run(posterior_sd=np.ones(4))
    with pytest.raises(ValueError, match=r"epsilon=2.*more than the cell's budget \(epsilon=1"):
        run(privacy=_own_privacy(2.0))
    with pytest.raises(ValueError, match="more than the cell's budget"):
        run(privacy=_own_privacy(1.0, delta=1e-3))
    assert run(privacy=_own_privacy(0.5))["privacy"]["epsilon"] == 0.5  # less than the budget is fine


# ---------------------------------------------------------------------------------------------
# Reports of cells that differ in a setting other than epsilon and method (run_coverage from Python
# with two N, two T or two seeds): the Markdown table gave them identical-looking rows, the plot two
# lines with the same legend, and its title named the first cell's N and T as if all cells had them.


def _record(num_records, rmse, seed=0, method="grid"):
    c = CellConfig("beta-bernoulli", 1.0, method, seed=seed, **dict(SMALL, num_records=num_records)).to_dict()
    alpha = np.linspace(0, 1, 5)
    return {
        "config": c,
        "alpha": alpha.tolist(),
        "coverage": (1 - alpha).tolist(),
        "coverage_sd": [0.0] * 5,
        "rmse": rmse,
        "single_draw_rmse_mean": rmse,
        "single_draw_rmse_sd": 0.0,
        "sharpness": 0.3,
        "num_replicates_used": 4,
    }


def test_reports_tell_apart_cells_that_differ_in_other_settings(tmp_path, monkeypatch):
    import csv

    from dpposterior.experiments import report, table_csv, table_markdown, write_reports

    results = [_record(20, 0.1), _record(40, 0.2)]
    md = table_markdown(results)
    assert "| N |" in md
    assert "| beta-bernoulli | 1 | grid | 4 | 2 | 20 | 0.1000 |" in md
    assert "| beta-bernoulli | 1 | grid | 4 | 2 | 40 | 0.2000 |" in md
    assert "| N |" not in table_markdown(results[:1])  # uniform cells: the table as before
    rows = list(csv.DictReader(table_csv(results).splitlines()))
    assert {r["num_draws"] for r in rows} == {"50"} and "method_options" in rows[0]

    seen = {}

    def capture(fig, path, dpi=110):
        seen["title"] = fig._suptitle.get_text()
        seen["labels"] = [t.get_text() for ax in fig.axes for t in ax.get_legend().get_texts()]
        return path

    monkeypatch.setattr(report, "save_figure_atomic", capture)
    write_reports(results, tmp_path)
    assert "N = " not in seen["title"] and "T = 20" in seen["title"], seen["title"]
    assert seen["labels"] == ["grid, N = 20 (RMSE 0.100)", "grid, N = 40 (RMSE 0.200)"]
    write_reports([_record(20, 0.1, seed=0), _record(20, 0.2, seed=1)], tmp_path)
    assert "N = 20" in seen["title"]
    assert seen["labels"] == ["grid, seed = 0 (RMSE 0.100)", "grid, seed = 1 (RMSE 0.200)"]
    write_reports([_record(20, 0.1), _record(20, 0.2, method="naive")], tmp_path)
    assert seen["labels"] == ["grid (RMSE 0.100)", "naive (RMSE 0.200)"]  # nothing to tell apart


# ---------------------------------------------------------------------------------------------
# Bernstein-Sheldon release: Exponential bounds with three values ended in Python's own "too many
# values to unpack (expected 2)", which names neither the argument nor what is allowed.


def test_exponential_bounds_of_the_wrong_length_are_named():
    from dpposterior.baselines import release_sufficient_statistics

    for bounds, n in (((0.0, 1.0, 5.0), 3), ((5.0,), 1)):
        with pytest.raises(ValueError, match=rf"bounds must be a pair of numbers \(lo, hi\), got {n} values"):
            release_sufficient_statistics("gamma-exponential", [1.0, 2.0], epsilon=1.0, bounds=bounds, rng_key=0)


# ---------------------------------------------------------------------------------------------
# DrawsPosterior without its PrivacySpent (privacy=None) was accepted: a posterior that could be shown
# with no record of what its release cost; summary(prob="0.5") ended in Python's "'<' not supported";
# bernstein_sheldon_gibbs(prior="abc") in NumPy's "could not convert string to float", and a prior of
# strings ("10", "10") was converted silently.


@pytest.fixture(scope="module")
def dirichlet_release():
    from dpposterior.baselines import release_sufficient_statistics

    return release_sufficient_statistics("dirichlet-categorical", [0, 1, 1, 2, 2, 2], epsilon=1.0, rng_key=0)


def test_draws_posterior_needs_its_privacy_and_a_numeric_prob(dirichlet_release):
    from dpposterior.baselines import DrawsPosterior
    from dpposterior.baselines.expfam_gibbs import family_layout

    layout = family_layout("dirichlet-categorical")
    draws = np.zeros((5, 2), np.float32)
    with pytest.raises(TypeError, match="privacy must be the PrivacySpent"):
        DrawsPosterior(layout=layout, draws=draws, privacy=None, method="x")
    post = DrawsPosterior(layout=layout, draws=draws, privacy=dirichlet_release.privacy, method="x")
    with pytest.raises(TypeError, match="prob must be a real number"):
        post.summary(prob="0.5")
    assert len(post.summary(prob=0.5)) == 3


@pytest.mark.parametrize("prior", ["abc", ("10", "10", "10"), [[1, 2], [3]]])
def test_bernstein_sheldon_prior_must_be_numbers(dirichlet_release, prior):
    from dpposterior.baselines import bernstein_sheldon_gibbs

    with pytest.raises(TypeError, match="prior must be a sequence of numbers"):
        bernstein_sheldon_gibbs(dirichlet_release, prior=prior, num_warmup=0, num_draws=2, rng_key=0)


# ---------------------------------------------------------------------------------------------
# Gibbs-SS-Noisy with a public covariate model whose cov is not a covariance (negative eigenvalues,
# asymmetric, NaN) ended in NumPy's "Matrix is not positive definite" (or ran on the NaN).


@pytest.mark.parametrize(
    "cov, words",
    [
        (-np.eye(2), "positive semi-definite"),
        (np.array([[1.0, 0.5], [0.0, 1.0]]), "symmetric"),
        (np.array([[1.0, np.nan], [np.nan, 1.0]]), "finite"),
    ],
)
def test_public_covariate_model_must_be_a_covariance(cov, words):
    from dpposterior.baselines import release_regression_statistics
    from dpposterior.baselines.regression_params import sampler_params as regression_sampler_params

    rng = np.random.default_rng(0)
    rel = release_regression_statistics(
        rng.normal(size=(20, 2)), rng.normal(size=20), epsilon=1.0, x_bound=3.0, y_bound=5.0, rng_key=0
    )
    with pytest.raises(ValueError, match=words):
        regression_sampler_params(rel, fourth_moments=(np.zeros(2), cov))
    regression_sampler_params(rel, fourth_moments=(np.zeros(2), np.diag([1.0, 0.0])))  # a constant covariate is fine


# ---------------------------------------------------------------------------------------------
# `dpposterior coverage --epsilon 0.1 --epsilon 1` (a flag given twice, as with most command lines)
# kept only the last value: the run silently dropped epsilon 0.1 (likewise --model and --method).


@pytest.mark.parametrize(
    "flags, cells",
    [
        (
            ["--model", "beta-bernoulli", "--epsilon", "0.1", "--epsilon", "1"],
            [
                ("beta-bernoulli", 0.1, "grid"),
                ("beta-bernoulli", 0.1, "naive"),
                ("beta-bernoulli", 1.0, "grid"),
                ("beta-bernoulli", 1.0, "naive"),
            ],
        ),
        (
            ["--model", "beta-bernoulli", "--model", "gamma-exponential", "--epsilon", "1", "--method", "naive"],
            [("beta-bernoulli", 1.0, "naive"), ("gamma-exponential", 1.0, "naive")],
        ),
        (
            ["--model", "beta-bernoulli", "--epsilon", "1", "--method", "grid", "--method", "laplace"],
            [("beta-bernoulli", 1.0, "grid"), ("beta-bernoulli", 1.0, "laplace")],
        ),
        (
            ["--model", "beta-bernoulli", "--epsilon", "1", "0.5"],  # the default methods
            [
                ("beta-bernoulli", 1.0, "grid"),
                ("beta-bernoulli", 1.0, "naive"),
                ("beta-bernoulli", 0.5, "grid"),
                ("beta-bernoulli", 0.5, "naive"),
            ],
        ),
    ],
)
def test_coverage_command_keeps_every_value_of_a_repeated_flag(flags, cells, tmp_path, monkeypatch):
    import dpposterior.experiments.runner as runner
    from dpposterior.cli import main

    seen = []

    def stop(configs, out, **kw):
        seen.extend((c.model, c.epsilon, c.method) for c in configs)
        raise ImportError("stop before computing (test)")

    monkeypatch.setattr(runner, "run_coverage", stop)
    assert main(["coverage", *flags, "--out", str(tmp_path / "out"), "--no-progress"]) == 2
    assert seen == cells


# ---------------------------------------------------------------------------------------------
# run_coverage (Python) with an ``out`` that is a file, or whose cells/<model> is a file: the cells were
# computed, then lost when the first save failed (NotADirectoryError / FileExistsError); the command line
# checks --out first, the Python entry point did not.


def test_run_coverage_checks_its_folder_before_computing(tmp_path, monkeypatch):
    import dpposterior.experiments.runner as runner
    from dpposterior.experiments import run_coverage

    def must_not_run(*a, **k):
        raise AssertionError("a cell was computed before the output folder was checked")

    monkeypatch.setattr(runner, "compute_group", must_not_run)
    cfg = CellConfig("beta-bernoulli", 1.0, "naive", **SMALL)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="is a file, not a folder"):
        run_coverage([cfg], tmp_path / "file", progress=False)
    (tmp_path / "out" / "cells").mkdir(parents=True)
    (tmp_path / "out" / "cells" / "beta-bernoulli").write_text("x")
    with pytest.raises(ValueError, match="beta-bernoulli"):
        run_coverage([cfg], tmp_path / "out", progress=False)


# ---------------------------------------------------------------------------------------------
# DPVIm in a cell with T < 40 steps (the cell's minimum is 10) passed the configuration, then failed
# only after the group's DP-SGD replicates and cheaper cells, with "the trace of 20 steps is too short
# for 20 windows"; dpvim_cell itself took learning_rate=-1 (a negative step), a learning rate of three
# values failed in NumPy's broadcasting, natural_gradient="no" was taken as True.


def test_dpvim_steps_and_learning_rates_are_checked_first():
    from dpposterior.baselines import dpvim_cell

    with pytest.raises(ValueError, match=r"method 'dpvim' needs num_steps >= 40 DP-SGD steps, got 20"):
        CellConfig("beta-bernoulli", 1.0, "dpvim", **SMALL)
    CellConfig("beta-bernoulli", 1.0, "dpvim", **dict(SMALL, num_steps=40))
    data = (np.zeros((2, 20), np.int32),)
    kw = dict(num_steps=40, sampling_rate=0.2)
    for lr in (-1.0, [1.0, 2.0, 3.0], "a", (0.1, float("nan"))):
        with pytest.raises(ValueError, match="learning_rate must be None, a finite number > 0 or a pair"):
            dpvim_cell("beta-bernoulli", data, 1.0, 0, 10, learning_rate=lr, **kw)
    with pytest.raises(TypeError, match="natural_gradient must be True or False"):
        dpvim_cell("beta-bernoulli", data, 1.0, 0, 10, natural_gradient="no", **kw)
    with pytest.raises(ValueError, match="num_steps must be an integer >= 40"):
        dpvim_cell("beta-bernoulli", data, 1.0, 0, 10, num_steps=20, sampling_rate=0.2)


# ---------------------------------------------------------------------------------------------
# run_coverage / compute_group from Python: batch_size=0 or -5 was silently replaced by the device count,
# 2.5 truncated to 2, "a" failed inside min() after the set-up (the command line checks --batch-size).


@pytest.mark.parametrize("batch_size, exc", [(0, ValueError), (-5, ValueError), (2.5, TypeError), ("a", TypeError)])
def test_batch_size_is_checked_before_computing(batch_size, exc, tmp_path, monkeypatch):
    import dpposterior.experiments.replicates as replicates
    from dpposterior.experiments import compute_group, run_coverage

    def must_not_run(*a, **k):
        raise AssertionError("the group was set up before batch_size was checked")

    monkeypatch.setattr(replicates, "dpvi_setup", must_not_run)
    cfg = CellConfig("beta-bernoulli", 1.0, "naive", **SMALL)
    with pytest.raises(exc, match="batch_size"):
        run_coverage([cfg], tmp_path, batch_size=batch_size, progress=False)
    with pytest.raises(exc, match="batch_size"):
        compute_group([cfg], batch_size=batch_size)
    with pytest.raises(exc, match="batch_size"):
        replicates.run_replicates(cfg, batch_size=batch_size)


# ---------------------------------------------------------------------------------------------
# A baseline released under replace-one neighbours (method option neighbouring="replace_one") sat in the
# report's table and plot as plain "bernstein-sheldon" beside the add/remove-one DP-SGD methods at the
# same epsilon: only the cell file said that its epsilon is for another neighbouring relation.


def test_report_says_when_a_baseline_used_another_neighbouring_relation():
    from dpposterior.experiments import table_markdown

    rec = _record(20, 0.1, method="bernstein-sheldon")
    rec["config"] = CellConfig(
        "beta-bernoulli", 1.0, "bernstein-sheldon", method_options={"neighbouring": "replace_one"}, **SMALL
    ).to_dict()
    md = table_markdown([rec, _record(20, 0.2)])  # beside grid (DP-SGD, add/remove-one)
    assert "| bernstein-sheldon (neighbouring replace_one) |" in md
    assert "| bernstein-sheldon |" in table_markdown([_record(20, 0.2, method="bernstein-sheldon")])  # default
    # (the burn-in h prior needs >= 10 burn-in steps: 50 steps at the default burn-in 0.2)
    assert "(priors burn_in)" in table_markdown(
        [
            dict(
                _record(20, 0.1),
                config=CellConfig(
                    "beta-bernoulli", 1.0, "grid", method_options={"priors": "burn_in"}, **dict(SMALL, num_steps=50)
                ).to_dict(),
            )
        ]
    )


# ---------------------------------------------------------------------------------------------
# A cell file (hand-edited, or written by another tool) with a valid configuration but without the
# fields the reports read, or with text where numbers belong, was trusted as finished: the run then
# ended in a raw KeyError / TypeError while writing the reports (after computing the other cells).


@pytest.mark.parametrize(
    "edit",
    [
        lambda r: r.pop("single_draw_rmse_mean"),
        lambda r: r.pop("coverage_sd"),
        lambda r: r.__setitem__("rmse", "0.1"),
        lambda r: r.__setitem__("coverage", r["coverage"][:-1]),
        lambda r: r.__setitem__("num_replicates_used", "4"),
    ],
)
def test_a_finished_cell_file_must_hold_what_the_reports_read(edit, own_method_cell, tmp_path):
    import json

    from dpposterior.experiments import CorruptResultError, ResultStore

    cfg, run = own_method_cell
    rec = run()
    edit(rec)
    store = ResultStore(tmp_path)
    path = store.path(cfg)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(rec))
    with pytest.raises(CorruptResultError, match="delete it to recompute the cell"):
        store.load(cfg)


# ---------------------------------------------------------------------------------------------
# A Bernstein-Sheldon (or Gibbs-SS-Noisy) cell with M = 2 or 3 draws (CellConfig allows M >= 2) ran its
# chains and then failed in the ESS diagnostic ("draws must be (K, M, n) with M >= 4"): the draws were lost.


def test_baseline_cell_with_fewer_than_four_draws_keeps_its_draws():
    from dpposterior.baselines._mixing import ess_summary  # what both Gibbs cells call on their draws

    draws = np.random.default_rng(0).normal(size=(2, 3, 1))
    assert ess_summary(draws) == {"ess_min": None, "ess_median": None, "replicates_with_ess_below_100": None}
    assert ess_summary(np.random.default_rng(0).normal(size=(2, 50, 1)))["ess_min"] > 0


# ---------------------------------------------------------------------------------------------
# register_method(options="alpha") registered the options "a", "l", "p", "h", "a" (a string is a tuple of
# its letters), so the method's own option "alpha" was then refused as unknown; a misspelt model name in
# models= made the method unusable with every model, found only when a cell was configured.


def test_register_method_checks_its_options_and_models():
    from dpposterior.experiments import register_method
    from dpposterior.experiments.methods import METHODS

    def fn(releases, settings):
        raise AssertionError("not run")

    try:
        with pytest.raises(TypeError, match="options must be a tuple of option names"):
            register_method("test-audit-opts", fn, options="alpha")
        with pytest.raises(ValueError, match=r"unknown model\(s\) \['beta-bernouli'\]"):
            register_method("test-audit-opts", fn, models=("beta-bernouli",))
        assert "test-audit-opts" not in METHODS
        register_method("test-audit-opts", fn, options=("alpha",), models=("beta-bernoulli",))
        assert CellConfig(
            "beta-bernoulli", 1.0, "test-audit-opts", method_options={"alpha": 0.5}, **SMALL
        ).method_options == (("alpha", 0.5),)
    finally:
        METHODS.pop("test-audit-opts", None)


# ---------------------------------------------------------------------------------------------
# Gibbs-SS-Noisy's budget split is accepted when it sums to 1 within 1e-9; the parts were then released
# with epsilon times the given shares, so a split summing to 1 + 5e-10 spent more than the epsilon that
# the release's PrivacySpent records.


def test_budget_split_parts_never_add_up_to_more_than_epsilon():
    import math

    from dpposterior.baselines import release_regression_statistics

    rng = np.random.default_rng(0)
    rel = release_regression_statistics(
        rng.normal(size=(20, 2)),
        rng.normal(size=20),
        epsilon=1.0,
        x_bound=3.0,
        y_bound=5.0,
        budget_split={"xx": 0.5, "xy": 0.3, "yy": 0.2 + 5e-10},
        rng_key=0,
    )
    assert math.fsum(rel.epsilon_parts.values()) <= rel.privacy.epsilon * (1 + 1e-15)


# ---------------------------------------------------------------------------------------------
# Bernstein-Sheldon Gibbs for Dirichlet-Categorical with unused categories did not recover the exact
# conjugate posterior at a huge epsilon: K = 20 categories, 5 used, N = 100, epsilon = 1e4 gave theta_4 =
# 0.086 (seed 1) or 0.108 (seed 2) against the exact 0.125, 1.6 posterior sd off after 500 warm-up sweeps.
# The coordinate updates held the last count (N minus the others) fixed, so mass moved between categories
# only by small steps from the chain's start at the prior mean.


def test_dirichlet_gibbs_with_unused_categories_recovers_the_exact_posterior():
    from dpposterior.baselines import bernstein_sheldon_gibbs, release_sufficient_statistics

    x = np.random.default_rng(0).integers(0, 5, 100)
    rel = release_sufficient_statistics("dirichlet-categorical", x, epsilon=1e4, num_categories=20, rng_key=0)
    theta = np.asarray(
        bernstein_sheldon_gibbs(rel, num_warmup=200, num_draws=800, rng_key=1).constrained_draws()["theta"]
    )
    alpha = 5.0 + np.bincount(x, minlength=20)
    mean = alpha / alpha.sum()
    sd = np.sqrt(mean * (1 - mean) / (alpha.sum() + 1))
    # 800 draws: the Monte Carlo error of a mean is a few hundredths of a posterior sd
    assert np.max(np.abs(theta.mean(0) - mean) / sd) < 0.3, (theta.mean(0) - mean) / sd
    assert np.all(np.abs(theta.std(0) / sd - 1) < 0.15), theta.std(0) / sd


# Gibbs-SS-Noisy on very few records (N <= p + 1) keeps almost no latent proposal (p = 2, N = 1,
# epsilon = 1: acceptance 0.0), so its draws mostly reflect its data-independent start; only
# diagnostics["acceptance"] showed it. The chain is replaced by its recorded outcome here (the real
# one compiles for about 10 s): the check under test is what gibbs_ss_noisy does with it.
def test_gibbs_ss_noisy_warns_when_its_chain_barely_moves(monkeypatch):
    import jax.numpy as jnp

    from dpposterior.baselines import regression_gibbs as RG
    from dpposterior.baselines import regression_release as RGR

    rng = np.random.default_rng(0)
    rel = RGR.release_regression_statistics(
        rng.uniform(-1, 1, (1, 2)), rng.uniform(-1, 1, 1), epsilon=1.0, x_bound=1.0, y_bound=1.0, rng_key=0
    )

    def chain(acceptance):
        return lambda *a, **k: (jnp.zeros((4, 3)), jnp.ones(4), jnp.float32(acceptance))

    monkeypatch.setattr(RG, "sample_chain", chain(0.0))
    with pytest.warns(RuntimeWarning, match=r"kept 0\.0% of its latent proposals .* here N = 1 for 2 features"):
        post = RG.gibbs_ss_noisy(rel, num_warmup=1, num_draws=4, rng_key=0)
    assert post.diagnostics["acceptance"] == 0.0
    monkeypatch.setattr(RG, "sample_chain", chain(0.5))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        RG.gibbs_ss_noisy(rel, num_warmup=1, num_draws=4, rng_key=0)


# the coverage command's errors from CellConfig named its fields ("replicates must be ...",
# "num_steps ..."), not the flags the user typed
def test_coverage_command_errors_name_the_flags(capsys, tmp_path):
    from cli_errors import cli_error

    base = ["coverage", "--model", "beta-bernoulli", "--epsilon", "1", "--out", tmp_path / "o", "--no-progress"]
    assert cli_error(capsys, base + ["--replicates", "1"], "coverage").startswith("--replicates must be")
    msg = cli_error(capsys, base + ["--method", "dpvim", "--num-steps", "20"], "coverage")
    assert "--num-steps" in msg and "num_steps" not in msg.replace("--num-steps", ""), msg


# DrawsPosterior.summary keyed the ends of a 0.999 interval "q0.0005" and "q1" (three digits of 0.9995),
# a name that reads as the maximum; Posterior.summary had the same bug (fixed by the core hunt)
def test_draws_posterior_summary_keys_name_their_quantile_levels():
    from dpposterior.baselines import DrawsPosterior
    from dpposterior.baselines.expfam_gibbs import family_layout

    post = DrawsPosterior(
        layout=family_layout("beta-bernoulli"),
        draws=np.linspace(-1, 1, 50, dtype=np.float32)[:, None],
        privacy=_own_privacy(1.0),
        method="test",
    )
    (row,) = post.summary(prob=0.999)
    assert {"q0.0005", "q0.9995"} <= set(row) and "q1" not in row
    (row,) = post.summary(prob=0.9)
    assert {"q0.05", "q0.95"} <= set(row)
