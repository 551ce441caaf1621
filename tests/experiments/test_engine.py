"""The coverage engine runs the public mechanism: its vmapped replicates equal ``dpvi`` runs, and every
method turns them into sane coverage results."""

from __future__ import annotations

import numpy as np
import pytest

from dpposterior.experiments import CellConfig, METHODS, run_coverage
from dpposterior.experiments.config import postprocessing_keys, replicate_keys
from dpposterior.experiments.replicates import dpvi_privacy, dpvi_setup, replicate_data, run_replicates
from dpposterior.noise_aware.stats import burn_in_start, sufficient_statistics
from dpposterior.vi.dpvi import dpvi


def test_replicates_equal_dpvi_traces(tiny):
    """Replicate k of the compiled program = ``dpvi`` on replicate k's data with replicate k's key.

    Tolerance: the vmapped program and dpvi's chunked scan compute the same float32 operations in a
    different vectorisation, so traces agree to float32 rounding accumulated over T steps (measured:
    phi to 5e-7, g~ to 1e-7 of its scale); 1e-5 relative is 20x that and 1e-4 of what a different key
    changes (the power check below)."""
    cfg = tiny("grid", replicates=3)
    setup = dpvi_setup(cfg)
    out = run_replicates(cfg, setup, batch_size=3, return_traces=True)
    for k in (0, 2):
        theta, data, key = replicate_data(cfg, k)
        trace = dpvi(setup.spec.model, *data, rng_key=key, **setup.dpvi_kwargs(cfg))
        assert trace.noise_multiplier == setup.noise_multiplier
        assert dpvi_privacy(cfg, setup) == trace.privacy  # what the records of NA-DPVI methods store
        np.testing.assert_array_equal(trace.learning_rate, setup.learning_rate)
        np.testing.assert_array_equal(trace.beta, setup.beta)
        np.testing.assert_array_equal(trace.phi[0], setup.phi0)
        g_scale = np.abs(trace.grads).max()
        np.testing.assert_allclose(out.phi[k], trace.phi, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(out.grads[k], trace.grads, rtol=0, atol=1e-5 * g_scale)
        np.testing.assert_allclose(out.final_phi[k], trace.final_phi, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(out.theta[k], np.asarray(trace.layout.unconstrain(theta)), rtol=1e-6)
        ref = sufficient_statistics(trace.phi, trace.grads, cfg.burn_in)
        for got, want in zip(out.stats, ref):
            np.testing.assert_allclose(got[k], want, rtol=1e-3, atol=1e-6 * max(1.0, np.abs(want).max()))
        start = burn_in_start(cfg.num_steps, cfg.burn_in)
        ref = sufficient_statistics(trace.phi[:start], trace.grads[:start], 0.0)  # the burn-in steps
        for got, want in zip(out.burn_stats, ref):
            np.testing.assert_allclose(got[k], want, rtol=1e-3, atol=1e-6 * max(1.0, np.abs(want).max()))
    # power: another replicate's trace is far outside that tolerance
    assert np.abs(out.grads[0] - out.grads[1]).max() > 1e-2 * np.abs(out.grads[0]).max()


def test_keys_depend_only_on_seed_and_index(tiny):
    a = np.asarray(replicate_keys(7, 0, 4))
    b = np.asarray(replicate_keys(7, 2, 2))
    np.testing.assert_array_equal(a[2:], b)
    assert not np.array_equal(np.asarray(replicate_keys(8, 0, 4)), a)
    assert not np.array_equal(
        np.asarray(postprocessing_keys(7, "grid", 3)), np.asarray(postprocessing_keys(7, "naive", 3))
    )
    # the group (and so the replicates) of a cell does not depend on the method
    assert tiny("grid").group_key() == tiny("naive").group_key()
    assert tiny("grid").group_key() != tiny("grid", epsilon=3.0).group_key()


def _check_sane(rec, cfg, calibrated_ends=True):
    alpha = np.asarray(rec["alpha"])
    cov = np.asarray(rec["coverage"])
    assert alpha.shape == cov.shape == (999,)
    assert np.all((cov >= 0) & (cov <= 1))
    assert np.all(np.diff(cov) <= 1e-12), "coverage must not increase with alpha"
    if calibrated_ends:
        assert cov[0] >= 0.5 and cov[-1] <= 0.5
    assert 0 <= rec["rmse"] < 0.6
    assert len(rec["single_draw_rmse"]) == cfg.repeats
    assert rec["single_draw_rmse_sd"] >= 0
    assert rec["sharpness"] > 0 and np.isfinite(rec["sharpness"])
    assert rec["num_replicates_used"] == cfg.replicates
    assert rec["seed"] == cfg.seed and rec["config"] == cfg.to_dict()
    # beside the joint figure, one marginal per latent coordinate; Beta-Bernoulli has one, whose
    # marginal TARP statistic is the joint one (same references)
    assert rec["marginal_rmse"] == pytest.approx([rec["rmse"]], abs=1e-12)
    assert rec["central_coverage_level"] == 0.9
    k = rec["num_replicates_used"]
    cov90 = np.asarray(rec["central_coverage"])
    assert cov90.shape == (1,) and np.all(np.round(cov90 * k) == cov90 * k)  # a share of the K replicates
    np.testing.assert_allclose(rec["central_coverage_se"], np.sqrt(cov90 * (1 - cov90) / k))


def test_every_method_end_to_end(tiny, tmp_path):
    cells = [tiny(m) for m in ("naive", "grid", "laplace", "nuts")]
    summary = run_coverage(cells, tmp_path, progress=False)
    assert [CellConfig.from_dict(r["config"]) for r in summary.results] == cells
    by = {r["config"]["method"]: r for r in summary.results}
    for cfg in cells:
        _check_sane(by[cfg.method], cfg)
    # one group: the DP-SGD replicates ran once for the four methods
    assert {tuple(r["execution"]["group_methods"]) for r in summary.results} == {("naive", "grid", "laplace", "nuts")}
    # the noise-aware posteriors are wider than the last iterate, which ignores the DP noise
    for m in ("grid", "nuts"):
        assert by[m]["sharpness"] > 1.5 * by["naive"]["sharpness"]
    # grid and NUTS sample the same posterior: their sharpness agrees to Monte Carlo error
    assert by["nuts"]["sharpness"] == pytest.approx(by["grid"]["sharpness"], rel=0.1)
    assert by["nuts"]["diagnostics"]["divergences"] >= 0


@pytest.mark.slow
def test_burn_in_priors_option_reaches_laplace_and_nuts(tiny, tmp_path):
    """``priors="burn_in"`` in the Laplace and NUTS solvers (new compilations of both: slow), on the
    same releases as the grid's."""
    burn = (("priors", "burn_in"),)
    cells = [
        tiny("grid", method_options=burn),
        tiny("laplace", method_options=burn),
        tiny("nuts", method_options=(("num_samples", 200), ("num_warmup", 100)) + burn),
    ]
    by = {r["config"]["method"]: r for r in run_coverage(cells, tmp_path, progress=False).results}
    for cfg in cells:
        _check_sane(by[cfg.method], cfg)
    assert by["grid"]["sharpness"] == pytest.approx(by["nuts"]["sharpness"], rel=0.1)


def test_burn_in_priors_option_in_the_grid_solver(tiny, tmp_path):
    """``priors="burn_in"`` (the h prior from the burn-in steps) runs on the same releases as the paper's
    priors, and its priors are ``noise_aware.burn_in_priors`` of the release's statistics."""
    import jax

    from dpposterior.experiments import methods as MM
    from dpposterior.experiments.cell import releases_of
    from dpposterior.noise_aware import burn_in_priors, trace_priors

    cells = [tiny("grid"), tiny("grid", method_options=(("priors", "burn_in"),))]
    paper, burned = run_coverage(cells, tmp_path, progress=False).results
    for cfg, rec in zip(cells, (paper, burned)):
        _check_sane(rec, cfg)
    assert {tuple(r["execution"]["group_methods"]) for r in (paper, burned)} == {("grid", "grid")}
    assert burned["sharpness"] != paper["sharpness"]  # the option has an effect
    # the priors the solvers use: burn_in_priors of the release's statistics, as noise_aware_posterior builds
    cfg = tiny("grid")
    setup = dpvi_setup(cfg)
    rel = releases_of(run_replicates(cfg, setup, batch_size=cfg.replicates), setup, cfg)
    st, bs = MM._stats32(rel), MM._burn32(rel, "burn_in")
    noise_sd, q = jax.numpy.asarray(rel.noise_sd), jax.numpy.float32(rel.sampling_rate)
    got = MM._replicate_priors(st, bs, noise_sd, q)
    for a, b in zip(got, burn_in_priors(st, bs, noise_sd, q)):
        np.testing.assert_array_equal(a, b)
    assert not np.allclose(got.h_loc, trace_priors(st, noise_sd, q).h_loc)
    assert MM._burn32(rel, "paper") is None


def test_burn_in_priors_option_is_checked(tiny):
    with pytest.raises(ValueError, match="priors option must be one of"):
        tiny("grid", method_options=(("priors", "uniform"),))
    from dpposterior.experiments import methods as MM

    short = MM.CellReleases(stats=None, final_phi=None, noise_sd=None, sampling_rate=0.1, num_latent=1)
    with pytest.raises(ValueError, match="raise burn_in"):
        MM._burn32(short, "burn_in")


@pytest.mark.parametrize("method", ["grid", "laplace", "nuts"])
def test_burn_in_priors_with_too_short_a_burn_in_are_refused_when_configured(tiny, method):
    """``priors="burn_in"`` on a cell whose burn-in keeps fewer than 10 steps (T = 40,
    burn_in 0.2: 8 steps) was configured, its group's DP-SGD replicates ran, and then the
    run stopped with "raise burn_in", the later groups never computed; now the cell is refused at once."""
    burn = (("priors", "burn_in"),)
    with pytest.raises(
        ValueError,
        match=rf"method '{method}' with priors=\"burn_in\".*num_steps=40 with "
        r"burn_in=0.2 keeps 8 of them, fewer than 10",
    ):
        tiny(method, method_options=burn, num_steps=40)
    assert tiny(method, method_options=burn, num_steps=50).burn_in == 0.2  # 10 burn-in steps: enough
    assert tiny(method, num_steps=40).num_steps == 40  # the paper's priors need none


def test_registered_method_plugs_in(tiny, tmp_path):
    """A new method (here: a deliberately overconfident one) runs through the same interface."""
    from dpposterior.experiments import MethodOutput, register_method
    from dpposterior.experiments.methods import METHODS as REG, naive_method

    def shrunk(releases, settings):
        out = naive_method(releases, settings)
        mean = out.draws.mean(axis=1, keepdims=True)
        draws = (mean + 0.1 * (out.draws - mean)).astype(np.float32)
        return MethodOutput(draws, 0.1 * out.posterior_sd, {"shrink": 0.1})

    register_method("test-shrunk", shrunk, description="naive shrunk 10x (test)")
    try:
        with pytest.raises(ValueError, match="already registered"):
            register_method("test-shrunk", shrunk)
        rec = run_coverage([tiny("test-shrunk")], tmp_path, progress=False).results[0]
        _check_sane(rec, tiny("test-shrunk"), calibrated_ends=False)
        assert rec["diagnostics"] == {"shrink": 0.1}
        naive = run_coverage([tiny("naive")], tmp_path, progress=False).results[0]
        assert rec["sharpness"] == pytest.approx(0.1 * naive["sharpness"], rel=1e-6)
        assert rec["rmse"] > naive["rmse"]
        # the cell records which function computed it: another function registered under the name
        # (replace=True, an edited notebook cell) makes it stale, so it is recomputed, not reused
        from dpposterior.experiments.runner import stale_reason

        assert rec["method_fingerprint"].startswith(f"{shrunk.__module__}.") and naive["method_fingerprint"] is None
        assert stale_reason(rec, tiny("test-shrunk")) is None and stale_reason(naive, tiny("naive")) is None

        def shrunk_more(releases, settings):
            return shrunk(releases, settings)._replace(posterior_sd=None)

        register_method("test-shrunk", shrunk_more, replace=True)
        assert "is now another function" in stale_reason(rec, tiny("test-shrunk"))
        register_method("test-shrunk", shrunk, replace=True)
        assert stale_reason(rec, tiny("test-shrunk")) is None
    finally:
        REG.pop("test-shrunk", None)
    with pytest.raises(ValueError, match="unknown method 'test-shrunk'"):
        tiny("test-shrunk")


def test_config_validation(tiny):
    with pytest.raises(ValueError, match="unknown model"):
        CellConfig("no-such-model", 1.0, "grid")
    with pytest.raises(ValueError, match="unknown method"):
        CellConfig("beta-bernoulli", 1.0, "no-such-method")
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="epsilon"):
            tiny(epsilon=bad)
    with pytest.raises(ValueError, match="replicates"):
        tiny(replicates=1)
    with pytest.raises(ValueError, match="burn_in"):
        tiny(burn_in=1.0)
    with pytest.raises(ValueError, match="seed"):
        tiny(seed=-1)
    with pytest.raises(TypeError, match="method_options"):
        tiny(method_options={"num_points": [1, 2]})
    c = tiny("grid", method_options={"num_points": 64})
    assert CellConfig.from_dict(c.to_dict()) == c
    assert c.digest() != tiny("grid").digest()
    assert set(METHODS) >= {"grid", "nuts", "laplace", "naive"}


#: the tiny cells' sizes (conftest.TINY), for cells of other models than the fixture's.
_TINY = dict(replicates=6, repeats=4, num_steps=60, num_records=200, num_draws=400)


@pytest.mark.parametrize(
    "model, method, spelling, canonical",
    [
        ("gamma-exponential", "bernstein-sheldon", {"bounds": "0.0,5.0"}, {"bounds": "0,5"}),
        ("gamma-exponential", "bernstein-sheldon", {"bounds": " 0 , 5.000"}, {"bounds": "0,5"}),
        ("gamma-exponential", "bernstein-sheldon", {"bounds": "5e-1,4"}, {"bounds": "0.5,4"}),
        ("beta-bernoulli", "bernstein-sheldon", {"thin": None, "num_warmup": 7}, {"num_warmup": 7}),
        (
            "linear-regression",
            "gibbs-ss-noisy",
            {"budget_split": "yy=.2, xx=0.40,xy=4e-1"},
            {"budget_split": "xx=0.4,xy=0.4,yy=0.2"},
        ),
        (
            "linear-regression",
            "gibbs-ss-noisy",
            {"x_bound": 3, "y_bound": np.float32(4)},
            {"x_bound": 3.0, "y_bound": 4.0},
        ),
        ("beta-bernoulli", "dpvim", {"clip": 2, "lr_mu": None, "lr_rho": None}, {"clip": 2.0}),
        ("beta-bernoulli", "laplace", {"tol": 1}, {"tol": 1.0}),
        ("beta-bernoulli", "grid", {"tail": 0.0000001}, {"tail": 1e-7}),
    ],
)
def test_equivalent_option_spellings_are_one_cell(model, method, spelling, canonical, tmp_path):
    """Options that mean the same computation give one configuration, one digest and one file name (not
    separate cells, each computed); the canonical spelling is what is recorded."""
    from dpposterior.experiments.store import ResultStore

    a = CellConfig(model, 1.0, method, method_options=spelling, **_TINY)
    b = CellConfig(model, 1.0, method, method_options=canonical, **_TINY)
    assert a == b and a.digest() == b.digest() and ResultStore(tmp_path).path(a) == ResultStore(tmp_path).path(b)
    assert a.to_dict()["method_options"] == canonical
    assert [type(v) for v in a.to_dict()["method_options"].values()] == [type(v) for v in canonical.values()]
    assert CellConfig.from_dict(a.to_dict()) == a


def test_options_that_differ_stay_different_cells():
    """Canonical spellings never merge different computations: an int option stays an int (3.0 is still
    refused), another number is another cell, an option at its default value is not dropped."""
    a = CellConfig("gamma-exponential", 1.0, "bernstein-sheldon", method_options={"bounds": "0,5"}, **_TINY)
    assert a != CellConfig(
        "gamma-exponential", 1.0, "bernstein-sheldon", method_options={"bounds": "0,5.0001"}, **_TINY
    )
    assert a != CellConfig("gamma-exponential", 1.0, "bernstein-sheldon", **_TINY)
    with pytest.raises(ValueError, match="thin must be an integer"):
        CellConfig("beta-bernoulli", 1.0, "bernstein-sheldon", method_options={"thin": 3.0}, **_TINY)
    with pytest.raises(ValueError, match="bounds must be a string 'lo,hi'"):
        CellConfig("gamma-exponential", 1.0, "bernstein-sheldon", method_options={"bounds": "0,5,6"}, **_TINY)


def test_tracked_cells_keep_their_digests():
    """The canonical spellings leave every configuration of the tracked reproduction unchanged: each
    tracked cell file's configuration and digest are its canonical ones, so the store still finds it."""
    import json
    from pathlib import Path

    from dpposterior.experiments.store import ResultStore

    work = Path(__file__).resolve().parents[2] / "docs" / "results" / "na-dpvi-work"
    files = sorted(work.glob("*/cells/*/*.json"))  # the coverage and width cells
    assert len(files) > 80  # 87 tracked: the plan less the regression cells not recomputed under its settings
    for path in files:
        rec = json.loads(path.read_text())
        cfg = CellConfig.from_dict(rec["config"])
        assert cfg.to_dict() == rec["config"] and cfg.digest() == rec["config_digest"], path
        assert ResultStore(path.parents[2]).path(cfg) == path


def test_canonical_options_hook_is_checked(tiny):
    """A method's own ``canonical_options`` must return a dict of its options, unchanged by a second pass."""
    from dpposterior.experiments import register_method
    from dpposterior.experiments.methods import METHODS as REG, naive_method

    def register(hook):
        register_method("test-canon", naive_method, options=("width",), canonical_options=hook, replace=True)

    try:
        register(lambda o: {**o, "width": float(o["width"])} if "width" in o else o)
        assert tiny("test-canon", method_options={"width": 2}) == tiny("test-canon", method_options={"width": 2.0})
        register(lambda o: [("width", 1)])
        with pytest.raises(TypeError, match="canonical_options of method 'test-canon' must return a dict"):
            tiny("test-canon", method_options={"width": 2})
        register(lambda o: {"height": 1})
        with pytest.raises(
            ValueError,
            match=r"canonical_options of method 'test-canon' returned unknown options "
            r"\['height'\]",
        ):
            tiny("test-canon", method_options={"width": 2})
        register(lambda o: {"width": o.get("width", 0) + 1})
        with pytest.raises(ValueError, match="canonical_options of method 'test-canon' is not idempotent"):
            tiny("test-canon", method_options={"width": 2})
        with pytest.raises(TypeError, match="canonical_options must be None or callable"):
            register("float")
    finally:
        REG.pop("test-canon", None)


def test_method_fingerprint_is_the_same_in_every_process():
    """A method with a nested code object (a comprehension before Python 3.12, a lambda) has the same
    fingerprint when its code is compiled again (in a Ray worker, in another process): the fingerprint
    must not hash the repr of the nested code object, which holds its memory address."""
    from dpposterior.experiments import register_method
    from dpposterior.experiments.methods import METHODS as REG, method_fingerprint

    source = "def user_method(releases, settings):\n    return [k for k in settings.keys], (lambda x: x + 1)\n"
    prints = []
    try:
        for _ in range(2):
            namespace = {"__name__": "user_methods"}
            exec(compile(source, "user_methods.py", "exec"), namespace)
            register_method("test-nested", namespace["user_method"], replace=True)
            prints.append(method_fingerprint("test-nested"))
        namespace = {"__name__": "user_methods"}
        exec(compile(source.replace("x + 1", "x + 2"), "user_methods.py", "exec"), namespace)
        register_method("test-nested", namespace["user_method"], replace=True)
        prints.append(method_fingerprint("test-nested"))
    finally:
        REG.pop("test-nested", None)
    assert prints[0] == prints[1] and prints[0].startswith("user_methods.user_method:")
    assert prints[2] != prints[0]  # an edit inside the nested code is another function
