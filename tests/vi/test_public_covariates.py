"""A public sample of a regression's covariates gives its release the model's curvature
(dpvi(..., public_covariates=...), vi.public_covariates, vi.model_curvature)."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest

import dpposterior as dpp
from dpposterior.noise_aware import CurvatureFromTraceWarning
from dpposterior.vi import DPVITrace, RunOptions, dpvi
from dpposterior.vi.dpvi import _cached_loss
from dpposterior.vi.model_curvature import argument_sites, model_curvature, simulated_sites
from dpposterior.vi.model_inspect import inspect_model
from dpposterior.vi.public_covariates import check_public_covariates

N = 1000


def regression(x, y):
    w = numpyro.sample("w", dist.Normal(0.0, 1.0))
    with numpyro.plate("n", y.shape[0]):
        numpyro.sample("y", dist.Normal(w * x, 1.0), obs=y)


def product(x1, x2, y):
    w = numpyro.sample("w", dist.Normal(0.0, 1.0))
    with numpyro.plate("n", y.shape[0]):
        numpyro.sample("y", dist.Normal(w * x1 * x2, 1.0), obs=y)


def _private(n=N, key=0):
    x = jax.random.normal(jax.random.PRNGKey(key), (n,))
    return x, 0.5 * x + jax.random.normal(jax.random.PRNGKey(key + 1), (n,))


def _terms(model, data, covariates, key=0):
    layout = inspect_model(model, data, {})
    loss = _cached_loss(model, layout, N, 10, {})
    phi = np.tile(np.array([0.5, -3.0], np.float32), (50, 1))
    return model_curvature(
        model, layout, data, {}, loss, phi, np.array([1.0, 100.0]), 1e6, N, jax.random.PRNGKey(key), covariates
    )


def test_the_arguments_are_told_apart():
    data = _private()
    assert argument_sites(regression, data, {}) == (None, "y")
    assert simulated_sites(regression, data, {}) is None  # a covariate: nothing to simulate it from
    assert simulated_sites(regression, data, {}, given=(True, False)) == (None, "y")


def test_the_curvature_is_the_public_samples():
    """y ~ N(w x, 1): the curvature of the N-record negative ELBO in w's mean is N E[x^2] + 1 (the prior's
    1), with E over the public sample: x = +-2 gives 4 N + 1, whatever the private x (here sd 1)."""
    signs = np.where(np.arange(2000) % 2 == 0, 2.0, -2.0).astype(np.float32)
    terms = _terms(regression, _private(), (signs, None))
    assert terms is not None and terms.covariates == "public sample"
    assert terms.curvature[0] == pytest.approx(4 * N + 1, rel=1e-3)
    assert terms.hessian_diag[0] == pytest.approx(4 * N + 1, rel=1e-3)


def test_a_records_covariates_are_drawn_together():
    """Rows (1, 1) and (3, 3): E[(x1 x2)^2] = (1 + 81) / 2 = 41 where the rows stay whole, against
    E[x1^2] E[x2^2] = 25 were the columns drawn apart."""
    col = np.where(np.arange(2000) % 2 == 0, 1.0, 3.0).astype(np.float32)
    x, y = _private()
    terms = _terms(product, (x, x, y), (col, col, None))
    assert terms.curvature[0] == pytest.approx(41 * N + 1, rel=0.06)


def test_reads_only_the_shapes_of_the_private_data():
    x, y = _private()
    signs = np.where(np.arange(500) % 3 == 0, 1.5, -0.5).astype(np.float32)
    a = _terms(regression, (x, y), (signs, None))
    b = _terms(regression, (jnp.full_like(x, jnp.nan), jnp.full_like(y, jnp.nan)), (signs, None))
    for u, v in zip(a, b):
        np.testing.assert_array_equal(np.asarray(u), np.asarray(v))


@pytest.mark.parametrize(
    "given, error, message",
    [
        ("x", TypeError, "one entry per data argument"),
        ((None,), ValueError, "one entry per data argument \\(2\\)"),
        ((None, None), ValueError, "gives no sample"),
        ((np.zeros((10, 2)), None), ValueError, "must have shape \\(m,\\) \\+ \\(\\)"),
        ((np.array([1.0, np.nan]), None), ValueError, "NaN or inf"),
        ((np.array(["a", "b"]), None), TypeError, "real numbers"),
        ((np.ones(10), np.ones(10)), ValueError, "which the model observes"),
    ],
)
def test_bad_samples_are_refused(given, error, message):
    with pytest.raises(error, match=message):
        check_public_covariates(given, _private(), regression, {})


def test_a_sample_for_every_covariate_with_shared_rows():
    x, y = _private()
    with pytest.raises(ValueError, match="must give a public sample of it"):
        check_public_covariates((np.ones(10), None, None), (x, x, y), product, {})
    with pytest.raises(ValueError, match="share their number of rows"):
        check_public_covariates((np.ones(10), np.ones(11), None), (x, x, y), product, {})


def test_the_private_records_are_refused_as_a_sample():
    x, y = _private()
    for same in (x, np.asarray(x).copy()):
        with pytest.raises(ValueError, match="never the private records"):
            check_public_covariates((same, None), (x, y), regression, {})


def _release(**more):
    x, y = _private()
    return dpvi(
        regression,
        x,
        y,
        epsilon=1.0,
        delta=1e-5,
        num_steps=300,
        clip=3.0,
        rng_key=2,
        check_clip=False,
        run_options=RunOptions(progress=False),
        **more,
    )


@pytest.fixture(scope="module")
def with_sample():
    public = np.asarray(jax.random.normal(jax.random.PRNGKey(9), (N,)))
    return _release(public_covariates=(public, None))


def test_dpvi_attaches_the_terms_which_the_default_leaves_to_a_request(with_sample, tmp_path):
    terms = with_sample.model_curvature
    assert terms is not None and terms.covariates == "public sample"
    assert terms.hessian_diag[0] == pytest.approx(N + 1, rel=0.1)  # the public x is standard normal too
    assert DPVITrace.load(with_sample.save(tmp_path / "t.npz")).model_curvature.covariates == "public sample"
    with pytest.warns(CurvatureFromTraceWarning, match="public covariate sample, which the default does not use"):
        post = dpp.noise_aware_posterior(with_sample, rng_key=0)
    assert post.diagnostics["h_prior"] == "trace slope" and post.diagnostics["model_terms"] is None
    with warnings.catch_warnings():
        warnings.simplefilter("error", CurvatureFromTraceWarning)
        asked = dpp.noise_aware_posterior(with_sample, priors="model", rng_key=0)
    assert asked.diagnostics["h_prior"] == "model curvature (public covariates)"


def test_without_a_sample_the_default_warns_that_the_slope_is_used():
    trace = _release()
    assert trace.model_curvature is None
    with pytest.warns(CurvatureFromTraceWarning, match="carries no curvature of the model"):
        post = dpp.noise_aware_posterior(trace, rng_key=0)
    assert post.diagnostics["h_prior"] == "trace slope"
    assert any("trace's own slope" in w for w in post.summary(num_samples=100).warnings)
    with warnings.catch_warnings():  # the trace slope asked for by name: the user chose it, no warning
        warnings.simplefilter("error", CurvatureFromTraceWarning)
        dpp.noise_aware_posterior(trace, priors="paper", rng_key=0)


def test_dpvi_refuses_a_bad_sample_before_it_runs():
    x, y = _private()
    with pytest.raises(ValueError, match="never the private records"):
        dpvi(regression, x, y, epsilon=1.0, delta=1e-5, public_covariates=(x, None))
