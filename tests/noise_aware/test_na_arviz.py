"""ArviZ's view of a posterior: several chains, named coordinates, the privacy record as numbers.

``to_arviz`` gave one chain (``az.summary``: R-hat NaN and a shape warning in ArviZ's log), no
coordinates and the privacy record as strings. Built on hand-made layouts (no DPVI run).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import warnings

import matplotlib
import numpy as np
import pytest

import dpposterior as dpp
from dpposterior.privacy.spent import not_private
from dpposterior._arviz import import_arviz
from dpposterior.baselines import DrawsPosterior
from dpposterior.noise_aware import Posterior, point_posterior
from dpposterior.releases.layout import ParamLayout, Site

SPENT = dpp.PrivacySpent(
    epsilon=1.0,
    delta=1e-5,
    neighbouring="add_remove",
    accountant="pld",
    mechanism="poisson_subsampled_gaussian",
    noise_multiplier=1.1,
    sampling_rate=0.1,
    num_steps=100,
    details=(("clip", 2.5), ("sampling", "poisson"), ("exact", True), ("parts", (("a", 1.0),))),
)
REAL = {"kind": "independent", "base": {"kind": "real"}, "ndims": 1}
MATRIX = {"kind": "independent", "base": {"kind": "real"}, "ndims": 2}
FEATURES = ["age", "income", "region=south"]


def _layout() -> ParamLayout:
    return ParamLayout(
        (Site("s", (), (), {"kind": "positive"}), Site("w", (3,), (3,), REAL), Site("M", (2, 2), (2, 2), MATRIX))
    )


def _mixture() -> Posterior:
    layout = _layout()
    n = layout.num_latent
    rng = np.random.default_rng(0)
    phi = np.c_[rng.normal(size=(20, n)), np.full((20, n), -1.0)].astype(np.float32)
    return Posterior(layout=layout, phi_star=phi, privacy=SPENT, method="grid")


def _draws(m: int = 1000) -> DrawsPosterior:
    layout = _layout()
    draws = np.random.default_rng(1).normal(size=(m, layout.num_latent)).astype(np.float32)
    return DrawsPosterior(layout=layout, draws=draws, privacy=SPENT, method="gibbs")


def _posteriors():
    return [_mixture(), point_posterior(_layout(), np.zeros(2 * _layout().num_latent, np.float32), SPENT), _draws()]


IDS = ["Posterior", "point", "DrawsPosterior"]


@contextlib.contextmanager
def arviz_log():
    """The warnings ArviZ logs (its shape check logs, it does not warn). ArviZ's main logger is not under
    logging's root (pytest's caplog misses it) and logs each message once per process: its cache is
    emptied here, so a message an earlier test logged is seen again."""
    az = import_arviz()
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append
    loggers = [az._log, logging.getLogger("arviz")]
    cache = list(az._log.cache)
    az._log.cache.clear()
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield records
    finally:
        for logger in loggers:
            logger.removeHandler(handler)
        az._log.cache[:] = cache


@pytest.fixture
def no_arviz_log():
    """Fails the test if ArviZ logs a warning."""
    with arviz_log() as records:
        yield
    assert not [r.getMessage() for r in records], [r.getMessage() for r in records]


def test_the_log_check_sees_arviz_shape_warning():
    # the check above can fail: one chain, as to_arviz gave, is logged
    az = import_arviz()
    one = az.from_dict(posterior={"w": np.random.default_rng(0).normal(size=(1, 100, 2))})
    for _ in range(2):  # logged every time, not once per process
        with arviz_log() as records:
            table = az.summary(one)
        assert any("Shape validation failed" in r.getMessage() for r in records)
    assert table["r_hat"].isna().all()


@pytest.mark.parametrize("post", _posteriors(), ids=IDS)
def test_az_summary_has_a_finite_r_hat_and_warns_of_nothing(post, no_arviz_log):
    az = import_arviz()
    idata = post.to_arviz()
    assert idata.posterior.sizes["chain"] == 4 and idata.posterior.sizes["draw"] == 1000 // 4 * (
        4 if isinstance(post, Posterior) else 1
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        table = az.summary(idata)
    assert np.all(np.isfinite(table["r_hat"])), table
    assert np.all(table["r_hat"] < 1.05), table  # independent draws (or one well-mixed run's blocks)
    assert np.all(np.isfinite(table["ess_bulk"]))


def test_the_chains_are_the_draws_of_sample_in_order():
    post = _mixture()
    idata = post.to_arviz(key=3, num_samples=400, num_chains=4)
    w = np.asarray(post.sample(3, 400)["w"])
    np.testing.assert_array_equal(idata.posterior["w"].values.reshape(400, 3), w)
    assert idata.posterior["w"].shape == (4, 100, 3)
    assert "independent" in idata.attrs["chains"] and idata.attrs["num_chains"] == 4
    one = post.to_arviz(key=3, num_samples=400, num_chains=1)
    assert one.posterior["w"].shape == (1, 400, 3)


def test_draws_posterior_blocks_leave_out_the_first_remainder_and_say_so():
    post = _draws(1002)
    idata = post.to_arviz()
    assert idata.posterior["w"].shape == (4, 250, 3)
    assert idata.attrs["draws_left_out"] == 2 == idata.posterior.attrs["draws_left_out"]
    np.testing.assert_array_equal(
        idata.posterior["w"].values.reshape(1000, 3), np.asarray(post.constrained_draws()["w"])[2:]
    )
    assert "consecutive blocks" in idata.attrs["chains"]
    with pytest.raises(ValueError, match="num_chains=2000 is more than the 1002 stored draws"):
        post.to_arviz(num_chains=2000)


def test_a_number_of_draws_that_does_not_split_evenly_is_an_error():
    with pytest.raises(ValueError, match="num_samples=50 is not a multiple of num_chains=4"):
        _mixture().to_arviz(num_samples=50)
    for bad, err in ((0, ValueError), (2.0, TypeError), (True, TypeError)):
        with pytest.raises(err, match="num_chains must be an integer >= 1"):
            _mixture().to_arviz(num_samples=40, num_chains=bad)


@pytest.mark.parametrize("post", _posteriors(), ids=IDS)
def test_coords_and_dims_name_the_entries(post, no_arviz_log):
    az = import_arviz()
    idata = post.to_arviz(coords={"feature": FEATURES, "M_dim_1": ["x", "y"]}, dims={"w": ["feature"]})
    assert idata.posterior["w"].dims == ("chain", "draw", "feature")
    assert list(idata.posterior["feature"].values) == FEATURES
    assert list(idata.posterior["M"].dims) == ["chain", "draw", "M_dim_0", "M_dim_1"]
    table = az.summary(idata, kind="stats")
    assert [f"w[{f}]" for f in FEATURES] == [i for i in table.index if i.startswith("w[")]
    assert "M[0, y]" in table.index
    # the draws are those without names
    np.testing.assert_array_equal(idata.posterior["w"].values, post.to_arviz().posterior["w"].values)


def test_coords_and_dims_that_do_not_fit_the_sites_are_errors():
    post = _mixture()
    cases = [
        (dict(dims={"v": ["feature"]}), ValueError, r"dims names 'v', which is not a latent site"),
        (dict(dims={"w": ["a", "b"]}), ValueError, r"dims\['w'\] must give one name \(a string\) per axis"),
        (dict(dims={"w": ["chain"]}), ValueError, r"'chain' and 'draw' are ArviZ's sample dimensions"),
        (dict(coords={"feature": FEATURES}), ValueError, r"coords labels the dimension 'feature', which no latent"),
        (
            dict(coords={"feature": FEATURES[:2]}, dims={"w": ["feature"]}),
            ValueError,
            r"coords\['feature'\] has 2 labels, but the dimension 'feature' has 3 entries",
        ),
        (dict(coords={"feature": ["a", "a", "b"]}, dims={"w": ["feature"]}), ValueError, "repeats a label"),
        (dict(coords={"draw": [1]}), ValueError, r"'chain' and 'draw' are ArviZ's sample dimensions"),
        (dict(coords=["age"]), TypeError, "coords must be a dict"),
        (dict(dims=["w"]), TypeError, "dims must be a dict"),
    ]
    for kwargs, err, message in cases:
        with pytest.raises(err, match=message):
            post.to_arviz(num_samples=8, **kwargs)


@pytest.mark.parametrize("post", _posteriors(), ids=IDS)
def test_the_privacy_record_is_numbers_and_text(post):
    idata = post.to_arviz(num_samples=40)
    for attrs in (idata.attrs, idata.posterior.attrs):
        assert attrs["privacy_epsilon"] == 1.0 and isinstance(attrs["privacy_epsilon"], float)
        assert attrs["privacy_delta"] == 1e-5 and attrs["privacy_noise_multiplier"] == 1.1
        assert attrs["privacy_sampling_rate"] == 0.1
        assert attrs["privacy_num_steps"] == 100 and isinstance(attrs["privacy_num_steps"], int)
        assert attrs["privacy_neighbouring"] == "add_remove" and attrs["privacy_accountant"] == "pld"
        assert attrs["privacy_detail_clip"] == 2.5 and attrs["privacy_detail_sampling"] == "poisson"
        assert attrs["privacy_detail_exact"] == "True" and "privacy_detail_parts" not in attrs
        assert attrs["privacy"] == SPENT.summary() and attrs["method"] == post.method
        assert dpp.PrivacySpent.from_dict(json.loads(attrs["privacy_record"])) == SPENT


def test_a_record_without_a_noise_multiplier_or_epsilon_is_written_too(tmp_path):
    az = import_arviz()
    spent = not_private("debug", reason="a test")
    post = point_posterior(_layout(), np.zeros(2 * _layout().num_latent, np.float32), spent)
    idata = post.to_arviz(num_samples=40)
    assert "privacy_noise_multiplier" not in idata.attrs and math.isinf(idata.attrs["privacy_epsilon"])
    back = az.from_netcdf(idata.to_netcdf(str(tmp_path / "p.nc")))
    assert math.isinf(back.attrs["privacy_epsilon"])
    assert dpp.PrivacySpent.from_dict(json.loads(back.attrs["privacy_record"])) == spent


@pytest.mark.parametrize("post", _posteriors(), ids=IDS)
def test_to_netcdf_round_trips_draws_names_and_the_privacy_record(post, tmp_path):
    az = import_arviz()
    idata = post.to_arviz(coords={"feature": FEATURES}, dims={"w": ["feature"]})
    back = az.from_netcdf(idata.to_netcdf(str(tmp_path / "posterior.nc")))
    np.testing.assert_array_equal(back.posterior["w"].values, idata.posterior["w"].values)
    assert list(back.posterior["feature"].values) == FEATURES
    assert list(back.posterior.data_vars) == ["s", "w", "M"]
    for attrs in (back.attrs, back.posterior.attrs):
        assert float(attrs["privacy_epsilon"]) == 1.0 and int(attrs["privacy_num_steps"]) == 100
        assert dpp.PrivacySpent.from_dict(json.loads(attrs["privacy_record"])) == SPENT


def test_plot_forest_runs_without_warnings(no_arviz_log):
    import matplotlib.pyplot as plt

    az = import_arviz()
    matplotlib.use("Agg")
    idata = _mixture().to_arviz(coords={"feature": FEATURES}, dims={"w": ["feature"]})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        axes = az.plot_forest(idata, var_names=["w"], combined=True, r_hat=True)
    labels = [t.get_text() for t in np.ravel(axes)[0].get_yticklabels()]
    assert any("age" in label for label in labels), labels
    plt.close("all")


def test_chain_diagnostics_of_one_chain_log_nothing_and_give_r_hat_nan():
    # mcmc.diagnostics asked ArviZ for the R-hat of a single chain: NaN, and a shape warning in ArviZ's log
    import jax.numpy as jnp

    from dpposterior import mcmc

    x = np.clip(np.random.default_rng(0).normal(1.0, 1.0, 50), -3, 3).astype(np.float32)
    model = mcmc.energy_model(
        lambda th, xi: 0.5 * (xi - th[0]) ** 2,
        x,
        log_prior_fn=lambda th: -0.5 * jnp.sum(th**2),
        bound_constants=np.full(50, 6.0),
        box=(-3.0, 3.0),
    )
    kernel = mcmc.tuna_mh_kernel(model, mcmc.random_walk(0.1))
    one = mcmc.run_chain(kernel, np.zeros(1), 40, rng_key=0)
    two = mcmc.run_chain(kernel, np.zeros((2, 1)), 40, rng_key=0)
    with arviz_log() as records:
        d1, d2 = mcmc.diagnostics(one), mcmc.diagnostics(two)
    assert not records, [r.getMessage() for r in records]
    assert np.isnan(d1.rhat).all() and np.isfinite(d1.ess).all()
    assert np.isfinite(d2.rhat).all() and d2.rhat.shape == (1,)
