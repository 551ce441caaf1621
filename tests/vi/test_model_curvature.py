"""The model's curvature terms that dpvi attaches to a trace (vi.model_curvature, releases.model_curvature)."""

from __future__ import annotations

import dataclasses
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest

from dpposterior.releases.model_curvature import ModelCurvature, check_model_curvature
from dpposterior.vi import DPVITrace, RunOptions, dpvi
from dpposterior.vi.dpvi import _cached_loss
from dpposterior.vi.model_curvature import NUM_RECORDS, model_curvature, simulated_sites
from dpposterior.vi.model_inspect import inspect_model

N = 1000
MU, SD = math.log(3.0), 0.01


def poisson(y):
    lam = numpyro.sample("lam", dist.Gamma(2.0, 1.0))
    with numpyro.plate("n", y.shape[0]):
        numpyro.sample("y", dist.Poisson(lam), obs=y)


def regression(x, y):
    w = numpyro.sample("w", dist.Normal(0.0, 1.0))
    with numpyro.plate("n", y.shape[0]):
        numpyro.sample("y", dist.Normal(w * x, 1.0), obs=y)


def logged(y):
    lam = numpyro.sample("lam", dist.Gamma(2.0, 1.0))
    with numpyro.plate("n", y.shape[0]):
        numpyro.sample("y", dist.Normal(jnp.log(lam), 1.0), obs=jnp.log(y))


def two_observed(z, y):
    p = numpyro.sample("p", dist.Beta(2.0, 2.0))
    rate = numpyro.sample("rate", dist.Gamma(2.0, 1.0))
    with numpyro.plate("n", y.shape[0]):
        numpyro.sample("z", dist.Bernoulli(p), obs=z)
        numpyro.sample("y", dist.Exponential(rate), obs=y)


def _data(fill=1.0, n=N):
    return (jnp.full((n,), fill, jnp.float32),)


def _terms(data, clip, key=0):
    layout = inspect_model(poisson, data, {})
    loss = _cached_loss(poisson, layout, N, 10, {})
    phi = np.tile(np.array([MU, math.log(math.expm1(SD))], np.float32), (50, 1))
    return model_curvature(
        poisson, layout, data, {}, loss, phi, np.array([1.0, 100.0]), clip, N, jax.random.PRNGKey(key)
    )


def test_sites_of_a_model_that_simulates_its_records():
    assert simulated_sites(poisson, _data(), {}) == ("y",)
    assert simulated_sites(two_observed, (jnp.zeros(5), jnp.ones(5)), {}) == ("z", "y")


def test_no_sites_for_covariates_or_transformed_observations():
    assert simulated_sites(regression, (jnp.zeros(5), jnp.ones(5)), {}) is None  # x is a covariate
    assert simulated_sites(logged, _data(), {}) is None  # the observed value is not the argument


def test_curvature_is_the_models_without_clipping():
    """Poisson with lam = exp(theta): the curvature of the N-record negative ELBO in mu is
    (N + 1) E_q[exp(theta)] = (N + 1) exp(mu + sd^2 / 2) (the likelihood's and the Gamma(2, 1) prior's)."""
    terms = _terms(_data(), clip=1e6)
    assert terms.curvature[0] == pytest.approx((N + 1) * math.exp(MU + SD**2 / 2), rel=0.01)
    assert terms.hessian_diag[0] == pytest.approx((N + 1) * math.exp(MU + SD**2 / 2), rel=0.01)
    np.testing.assert_allclose(terms.clip_shift, 0.0, atol=1e-5)  # nothing clipped: no shift (float rounding)
    assert terms.point == pytest.approx([MU, math.log(math.expm1(SD))], rel=1e-6)


def test_a_binding_clip_flattens_the_curvature_and_shifts_the_fixed_point():
    """Clipping caps the pull of the far records: the clipped gradient's slope is smaller, and the
    long right tail of the Poisson pulls less, so the clipped zero lies below the ELBO's optimum."""
    free, clipped = _terms(_data(), clip=1e6), _terms(_data(), clip=0.5)
    assert clipped.curvature[0] < 0.8 * free.curvature[0]
    assert clipped.clip_shift[0] > 0


def test_reads_only_the_shapes_of_the_data():
    """The records are simulated: data of the same shape give the same terms whatever their values."""
    a, b = _terms(_data(1.0), clip=0.5), _terms(_data(float("nan")), clip=0.5)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    c = _terms(_data(1.0), clip=0.5, key=1)
    assert not np.array_equal(a.curvature, c.curvature)  # the key drives the simulation


def test_none_for_a_model_with_covariates():
    data = (jnp.zeros(N), jnp.ones(N))
    layout = inspect_model(regression, data, {})
    loss = _cached_loss(regression, layout, N, 10, {})
    phi = np.zeros((50, 2), np.float32)
    assert model_curvature(regression, layout, data, {}, loss, phi, np.ones(2), 1.0, N, jax.random.PRNGKey(0)) is None


@pytest.fixture(scope="module")
def released():
    y = jax.random.poisson(jax.random.PRNGKey(5), 3.0, (N,)).astype(jnp.float32)
    return dpvi(poisson, y, epsilon=1.0, delta=1e-5, num_steps=300, rng_key=1, run_options=RunOptions(progress=False))


def test_dpvi_attaches_the_terms_at_the_trace_mean(released):
    terms = released.model_curvature
    assert isinstance(terms, ModelCurvature) and terms.num_records == NUM_RECORDS
    np.testing.assert_allclose(terms.point, np.asarray(released.phi, np.float64)[60:].mean(0), rtol=1e-6)
    assert terms.curvature.shape == (1,) and terms.curvature[0] > 0


def test_dpvi_attaches_nothing_for_a_regression():
    x = jax.random.normal(jax.random.PRNGKey(0), (N,))
    trace = dpvi(
        regression,
        x,
        x + 1.0,
        epsilon=1.0,
        delta=1e-5,
        num_steps=100,
        clip=2.0,
        rng_key=1,
        check_clip=False,
        run_options=RunOptions(progress=False),
    )
    assert trace.model_curvature is None


def test_the_terms_survive_save_and_load(released, tmp_path):
    path = released.save(tmp_path / "t.npz")
    back = DPVITrace.load(path).model_curvature
    for x, y in zip(released.model_curvature, back):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_a_file_from_before_the_covariates_field_reads_as_none(released):
    old = released.model_curvature.to_dict()
    del old["covariates"]
    assert ModelCurvature.from_dict(old).covariates == "none"


def test_a_trace_without_terms_saves_no_field(released, tmp_path):
    bare = dataclasses.replace(released, model_curvature=None)
    assert "model_curvature" not in bare._metadata()
    assert DPVITrace.load(bare.save(tmp_path / "b.npz")).model_curvature is None


@pytest.mark.parametrize(
    "change, message",
    [
        ({"curvature": np.array([-1.0])}, "must be > 0"),
        ({"curvature": np.array([1.0, 2.0])}, "must have shape"),
        ({"clip_shift": np.array([0.0, np.nan])}, "NaN or inf"),
        ({"num_records": 0}, "positive integer"),
        ({"covariates": "private"}, "covariates must be one of"),
    ],
)
def test_bad_terms_are_refused(released, change, message):
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(released, model_curvature=released.model_curvature._replace(**change))


def test_terms_of_another_type_are_refused(released):
    with pytest.raises(TypeError, match="ModelCurvature"):
        check_model_curvature({"curvature": [1.0]}, 2)


def test_a_file_with_bad_terms_is_refused(released, tmp_path):
    from dpposterior._io import read_checked_npz, write_checked_npz

    path = released.save(tmp_path / "t.npz")
    names = ("phi", "grads", "final_phi", "beta", "learning_rate")
    meta, arrays = read_checked_npz(path, names, "DPVI trace")
    edited = json.loads(meta)
    edited["model_curvature"]["curvature"] = [float("inf")]
    write_checked_npz(path, arrays, json.dumps(edited, sort_keys=True))
    with pytest.raises(ValueError, match="model_curvature"):
        DPVITrace.load(path)


def gamma_shape_rate(y):
    shape = numpyro.sample("shape", dist.LogNormal(0.5, 0.5))
    rate = numpyro.sample("rate", dist.LogNormal(0.0, 0.5))
    with numpyro.plate("n", y.shape[0]):
        numpyro.sample("y", dist.Gamma(shape, rate), obs=y)


def test_the_hessian_block_over_the_means_is_the_models_fisher_information():
    """Gamma(a, b) records in u = log a, v = log b: the expected Hessian of N records is
    N [[a^2 psi'(a), -a], [-a, a]] plus the LogNormal priors' 1 / 0.5^2 on the diagonal. Its correlation,
    -1 / sqrt(a psi'(a)) = -0.88 at a = 2, makes a mean-field q understate each latent's marginal sd
    2.1 times, which the linear-response shape restores."""
    from scipy.special import polygamma

    from dpposterior.noise_aware.model_terms import linear_response

    a, b = 2.0, 1.5
    data = (jnp.ones((N,), jnp.float32),)
    layout = inspect_model(gamma_shape_rate, data, {})
    loss = _cached_loss(gamma_shape_rate, layout, N, 10, {})
    rho = math.log(math.expm1(SD))
    phi = np.tile(np.array([math.log(a), math.log(b), rho, rho], np.float32), (50, 1))
    terms = model_curvature(
        gamma_shape_rate,
        layout,
        data,
        {},
        loss,
        phi,
        np.array([1.0, 1.0, 100.0, 100.0]),
        1e6,
        N,
        jax.random.PRNGKey(0),
    )
    expected = N * np.array([[a**2 * float(polygamma(1, a)), -a], [-a, a]]) + np.diag([4.0, 4.0])
    np.testing.assert_allclose(terms.hessian_means, expected, rtol=0.06)
    np.testing.assert_allclose(np.diag(terms.hessian_means), terms.hessian_diag[:2], rtol=1e-5)
    shape = linear_response(terms)
    corr = expected[0, 1] / math.sqrt(expected[0, 0] * expected[1, 1])
    np.testing.assert_allclose(np.sqrt(np.sum(shape**2, axis=1)), 1 / math.sqrt(1 - corr**2), rtol=0.08)


@jax.custom_vjp
def _reverse_only_softplus(x):
    return jnp.logaddexp(x, 0.0)


_reverse_only_softplus.defvjp(lambda x: (_reverse_only_softplus(x), x), lambda x, g: (g * jax.nn.sigmoid(x),))


def reverse_only(y):
    a = numpyro.sample("a", dist.Normal(0.0, 2.0))
    with numpyro.plate("n", y.shape[0]):
        numpyro.sample("y", dist.Exponential(_reverse_only_softplus(a)), obs=y)


def test_a_model_with_reverse_mode_only_functions_keeps_its_release():
    """A custom_vjp function (or odeint) has no forward-over-reverse derivative, which the curvature terms
    take: the release is kept, without the terms (the default then reads the trace's slope)."""
    y = np.random.default_rng(0).exponential(1.0, 200).astype(np.float32)
    trace = dpvi(reverse_only, y, epsilon=1.0, delta=1e-5, num_steps=20, clip=1.0, rng_key=0, check_clip=False)
    assert trace.model_curvature is None and trace.phi.shape == (20, 2)
