"""A ``Posterior``'s sampling keys, summary keys and predictive on new data: inputs converted as ``dpvi``
converts them, and a model or key that does not fit the posterior refused by name.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest

import dpposterior as dpp
from input_checks import raises_with as _raises
from release_fakes import fake_trace

X = np.random.default_rng(0).normal(size=(40, 2)).astype(np.float32)


# Posterior: keys and predictive
def _posterior():
    return fake_trace().last_iterate_posterior()


@pytest.mark.parametrize("key", ["abc", 1.5, None, True])
def test_bad_sampling_keys_are_refused_by_name(key):
    _raises(lambda: _posterior().sample(key, 3), TypeError, "key")


def test_predictive_with_a_model_lacking_the_posterior_sites_is_refused():
    def other(x):
        mu = numpyro.sample("mu", dist.Normal(100.0, 1.0))
        with numpyro.plate("records", x.shape[0]):
            numpyro.sample("x", dist.Normal(mu, 1.0))

    # before: 'theta' silently ignored and 'mu' drawn from its prior, returned as a "prediction"
    _raises(lambda: _posterior().predictive(0, other, X[:3, 0], num_samples=5), ValueError, "'theta'", "'mu'")


def test_predictive_refuses_an_extra_global_latent_inside_a_non_record_plate():
    def with_groups(x):
        theta = numpyro.sample("theta", dist.Normal(0.0, 1.0).expand([2]).to_event(1))
        with numpyro.plate("groups", 2):
            b = numpyro.sample("b", dist.Normal(0.0, 100.0))
        with numpyro.plate("records", x.shape[0]):
            z = numpyro.sample("z", dist.Normal(0.0, 0.1))  # a per-record latent: predicted, allowed
            numpyro.sample("x", dist.Normal(theta[0] + b[0] + z, 1.0))

    # before: only latents outside every plate counted as global, so 'b' was drawn from its prior
    _raises(lambda: _posterior().predictive(0, with_groups, X[:3, 0], num_samples=5), ValueError, "['b']")

    def with_local(x):
        theta = numpyro.sample("theta", dist.Normal(0.0, 1.0).expand([2]).to_event(1))
        with numpyro.plate("records", x.shape[0]):
            z = numpyro.sample("z", dist.Normal(0.0, 0.1))
            numpyro.sample("x", dist.Normal(theta[0] + z, 1.0))

    out = _posterior().predictive(0, with_local, X[:3, 0], num_samples=5)
    assert set(out) == {"x", "z"} and out["x"].shape == (5, 3)


def test_predictive_with_the_fitted_model_still_works():
    def model(x):
        theta = numpyro.sample("theta", dist.Normal(0.0, 1.0).expand([2]).to_event(1))
        with numpyro.plate("records", x.shape[0]):
            numpyro.sample("x", dist.Normal(theta[0], 1.0))

    out = _posterior().predictive(0, model, X[:3, 0], num_samples=5)
    assert set(out) == {"x"} and out["x"].shape == (5, 3)


def _point_posterior():
    from dpposterior.noise_aware import point_posterior
    from dpposterior.releases.layout import ParamLayout

    spent = dpp.PrivacySpent(
        epsilon=1.0,
        delta=1e-5,
        neighbouring="add_remove",
        accountant="pld",
        mechanism="poisson_subsampled_gaussian",
        noise_multiplier=1.0,
        sampling_rate=0.1,
        num_steps=100,
    )
    return point_posterior(ParamLayout.flat(1, "mu"), np.array([0.0, 0.5413], np.float32), spent)  # N(0, 1)


@pytest.mark.parametrize(
    "prob, lo, hi", [(0.9, "q0.05", "q0.95"), (0.999, "q0.0005", "q0.9995"), (0.9999, "q5e-05", "q0.99995")]
)
def test_summary_interval_keys_name_their_quantile_levels(prob, lo, hi):
    # at prob=0.999 the upper end (the 0.9995 quantile) was keyed "q1", which names the maximum
    row = _point_posterior().summary(prob=prob, num_samples=20_000)[0]
    assert list(row) == ["parameter", "mean", "sd", "robust_sd", lo, hi]
    z = NormalDist().inv_cdf(float(hi[1:]))  # the N(0, 1) quantile that the key names
    se = math.sqrt((1 - float(hi[1:])) / 20_000) / NormalDist().pdf(z)  # Monte Carlo error of that quantile
    assert row[hi] == pytest.approx(z, abs=4 * se) and row[lo] == pytest.approx(-z, abs=4 * se)


def _regression(X, y=None):
    w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([2]).to_event(1))
    with numpyro.plate("records", X.shape[0]):
        numpyro.sample("y", dist.Normal(X @ w, 1.0), obs=y)


def _regression_posterior():

    from dpposterior.noise_aware import point_posterior
    from dpposterior.releases.layout import ParamLayout, Site

    layout = ParamLayout((Site("w", (2,), (2,), {"kind": "independent", "base": {"kind": "real"}, "ndims": 1}),))
    spent = _point_posterior().privacy
    return point_posterior(layout, jnp.array([1.0, -1.0, -30.0, -30.0]), spent)  # w = (1, -1), sd 1e-13


def test_predictive_takes_a_dataframe_and_a_list_as_dpvi_does():
    # dpvi accepts a DataFrame; predictive on one raised JAX's "concatenate requires ndarray or scalar
    # arguments", and on a list "'list' object has no attribute 'shape'"
    pd = pytest.importorskip("pandas")
    post = _regression_posterior()
    new = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]], np.float32)
    from_frame = post.predictive(0, _regression, pd.DataFrame(new, columns=["a", "b"]), num_samples=5)["y"]
    np.testing.assert_allclose(post.predictive(0, _regression, new.tolist(), num_samples=5)["y"], from_frame)
    assert from_frame.shape == (5, 3)
    np.testing.assert_allclose(from_frame.mean(0), [1.0, -1.0, 0.0], atol=1.5)  # y ~ N(X w, 1), w = (1, -1)


def test_predictive_on_no_records_is_a_value_error():
    # zero new records raised NumPyro's bare AssertionError "size of plate should be positive"
    with pytest.raises(ValueError, match="new data argument 0 has no records"):
        _regression_posterior().predictive(0, _regression, np.zeros((0, 2), np.float32))


def test_predictive_without_the_model_argument_names_it():
    # predictive(key, X) (the model forgotten) raised NumPyro's "Expected `fn` to be a Python callable object"
    new = np.ones((3, 2), np.float32)
    with pytest.raises(TypeError, match=r"model must be the fitted NumPyro model \(a callable\), got ndarray"):
        _regression_posterior().predictive(0, new, None)


def _regression_with_draws(X, y=None, num_samples=3):
    w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([2]).to_event(1))
    with numpyro.plate("records", X.shape[0]):
        numpyro.sample("y", dist.Normal(X @ w, 1.0).expand([X.shape[0]]), obs=y)
    numpyro.deterministic("num_samples_seen", jnp.asarray(num_samples))


def test_predictive_passes_a_model_keyword_named_num_samples_through_model_kwargs():
    # a model keyword named num_samples was taken by predictive as its number of draws, silently; now the
    # model's goes through model_kwargs, and num_samples= given by name warns when the model has one too
    post = _regression_posterior()
    new = np.array([[1.0, 0.0]], np.float32)
    out = post.predictive(0, _regression_with_draws, new, num_samples=4, model_kwargs={"num_samples": 7})
    assert out["y"].shape == (4, 1)
    np.testing.assert_array_equal(out["num_samples_seen"], 7)
    with pytest.warns(UserWarning, match="model_kwargs"):
        out = post.predictive(0, _regression_with_draws, new, num_samples=4)
    np.testing.assert_array_equal(out["num_samples_seen"], 3)  # the model's default, as the warning says
    with pytest.raises(ValueError, match="both in model_kwargs and by name"):
        post.predictive(0, _regression, new, model_kwargs={"y": None}, y=None)
    with pytest.raises(TypeError, match="model_kwargs must be a dict"):
        post.predictive(0, _regression, new, model_kwargs=[("y", None)])
    assert post.predictive(0, _regression, new)["y"].shape == (1000, 1)  # the default number of draws


def test_draws_posterior_predictive_converts_inputs_as_posterior_does():
    # DrawsPosterior.predictive (the baselines') skipped the conversion of DataFrames and lists and the
    # check of empty inputs that Posterior.predictive has; both now run the same code
    pd = pytest.importorskip("pandas")
    from dpposterior.baselines.draws_posterior import DrawsPosterior

    post = _regression_posterior()
    draws = DrawsPosterior(
        layout=post.layout, draws=np.tile([1.0, -1.0], (50, 1)).astype(np.float32), privacy=post.privacy, method="test"
    )
    new = np.array([[1.0, 2.0], [0.5, 0.5]], np.float32)
    a = draws.predictive(0, _regression, pd.DataFrame(new, columns=["a", "b"]), num_samples=5)["y"]
    np.testing.assert_allclose(draws.predictive(0, _regression, new.tolist(), num_samples=5)["y"], a)
    with pytest.raises(ValueError, match="no records"):
        draws.predictive(0, _regression, new[:0])
