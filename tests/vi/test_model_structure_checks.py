"""Models that ``dpvi`` cannot fit as written are refused before any release, with a message that says why
and what to write instead; the structures it can fit (per-record weights, masks, public keywords) pass.

Tiny models and data: the checks run before DP-SGD, and the few runs are a handful of steps.
"""

from __future__ import annotations

import sys

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest

import dpposterior as dpp
from input_checks import raises_with as _raises

RUN = dict(epsilon=1.0, delta=1e-5, num_steps=20, sampling_rate=0.3, clip=1.0, rng_key=0)
X = np.random.default_rng(0).normal(size=(40, 2)).astype(np.float32)
Y = (np.random.default_rng(1).random(40) < 0.5).astype(np.float32)


def linear(X, y=None):
    w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([X.shape[1]]).to_event(1))
    with numpyro.plate("records", X.shape[0]):
        numpyro.sample("y", dist.Normal(X @ w, 1.0), obs=y)


# dpvi: model structures the registry does not have
def test_data_passed_as_keyword_is_refused_not_broadcast_into_every_record():
    # y=y lands in model_kwargs: every record's likelihood would hold ALL the labels, unprotected
    _raises(lambda: dpp.dpvi(linear, X, y=Y, **RUN), ValueError, "'y'", "positionally")


def linear_y_first(y, X=None):
    w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([X.shape[1]]).to_event(1))
    with numpyro.plate("records", y.shape[0]):
        numpyro.sample("y", dist.Normal(X @ w, 1.0), obs=y)


def test_a_covariate_passed_as_keyword_is_named_when_the_model_fails_on_it():
    # X=X lands in model_kwargs whole, so the model fails on the dummy records with a shape error that
    # says nothing of X: the message names the keyword and says to pass it positionally
    _raises(lambda: dpp.dpvi(linear_y_first, Y, X=X, **RUN), ValueError, "X= (shape (40, 2))", "positionally")


def test_support_that_depends_on_another_latent_site_is_refused():
    def model(x):
        top = numpyro.sample("top", dist.Exponential(0.2))
        b = numpyro.sample("b", dist.Uniform(0.0, top))
        with numpyro.plate("records", x.shape[0]):
            numpyro.sample("x", dist.Normal(b, 1.0), obs=x)

    _raises(lambda: dpp.dpvi(model, X[:, 0], **RUN), ValueError, "'b'", "depends on")


def test_subsampled_plate_gets_its_own_message():
    def model(x):
        m = numpyro.sample("m", dist.Normal(0.0, 1.0))
        with numpyro.plate("records", x.shape[0], subsample_size=2) as idx:
            numpyro.sample("x", dist.Normal(m, 1.0), obs=x[idx])

    _raises(lambda: dpp.dpvi(model, X[:, 0], **RUN), ValueError, "subsample_size")


def test_factor_outside_the_record_plate_gets_its_own_message():
    def model(x):
        m = numpyro.sample("m", dist.Normal(0.0, 1.0))
        numpyro.factor("penalty", -(m**2))
        with numpyro.plate("records", x.shape[0]):
            numpyro.sample("x", dist.Normal(m, 1.0), obs=x)

    _raises(lambda: dpp.dpvi(model, X[:, 0], **RUN), ValueError, "factor", "'penalty'")


def test_dict_of_data_is_a_clear_type_error():
    _raises(lambda: dpp.dpvi(linear, {"X": X, "y": Y}, **RUN), TypeError, "dict", "positionally")


RNG = np.random.default_rng(1202)
X20 = RNG.normal(3.0, 1.0, size=20).astype(np.float32)
SETTINGS = dict(epsilon=10.0, delta=1e-5, num_steps=20, sampling_rate=0.5, clip=5.0, rng_key=0)


def _no_release(monkeypatch):
    """Makes any DP release fail loudly: the checks under test must come first."""

    def boom(*a, **k):
        raise AssertionError("a release was computed before the check")

    monkeypatch.setattr("dpposterior.dpsgd.dpsgd", boom)


def _subsampled(x, size=3):
    mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
    with numpyro.plate("records", x.shape[0], subsample_size=size) as idx:
        numpyro.sample("x", dist.Normal(mu, 1.0), obs=x[idx])


def test_record_plate_subsample_size_equal_to_a_probe_size_is_refused(monkeypatch):
    # subsample_size=3 (the size of the first dummy batch) passed the check and the model ran with
    # NumPyro's own subsampling inside dpvi's Poisson-sampled steps
    _no_release(monkeypatch)
    with pytest.raises(ValueError, match="subsample_size"):
        dpp.dpvi(_subsampled, X20, size=3, **SETTINGS)


def _keyword_observed(x, y=None):
    mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
    with numpyro.plate("records", x.shape[0]):
        numpyro.sample("x", dist.Normal(mu, 1.0), obs=x)
        numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)


@pytest.mark.parametrize("n", [3, 5])
def test_observed_data_as_keyword_is_refused_for_three_or_five_records(monkeypatch, n):
    # with 3 records, y=y (all 3 rows reach every record, unclipped and unsampled) passed the check
    _no_release(monkeypatch)
    with pytest.raises(ValueError, match="keyword argument"):
        dpp.dpvi(_keyword_observed, X20[:n], y=X20[:n], **SETTINGS)


def _column_likelihood(x):
    mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
    with numpyro.plate("records", x.shape[0]):
        numpyro.sample("x", dist.Normal(mu, 1.0), obs=x)


def test_column_data_against_a_scalar_likelihood_names_the_shape_not_keywords(monkeypatch):
    # an (N, 1) array passed positionally was refused as "data passed as a keyword argument"
    _no_release(monkeypatch)
    with pytest.raises(ValueError) as info:
        dpp.dpvi(_column_likelihood, X20[:, None], **SETTINGS)
    msg = str(info.value)
    assert "keyword" not in msg and "(3, 1)" in msg and "to_event" in msg and "y[:, 0]" in msg, msg


def _direction(x):
    u = numpyro.sample("u", dist.ProjectedNormal(np.ones(2, np.float32)))
    with numpyro.plate("records", x.shape[0]):
        numpyro.sample("x", dist.Normal(u[0], 1.0), obs=x)


def test_latent_site_without_a_bijection_is_refused_with_a_value_error(monkeypatch):
    # a ProjectedNormal (sphere) latent site raised NumPyro's bare NotImplementedError with no message
    _no_release(monkeypatch)
    with pytest.raises(ValueError, match=r"latent site 'u' has a support \(Sphere\(\)\).*biject_to"):
        dpp.dpvi(_direction, X20, **SETTINGS)


def _point_mass(x):
    d = numpyro.sample("d", dist.Delta(1.0))
    m = numpyro.sample("m", dist.Normal(0.0, 1.0))
    with numpyro.plate("records", x.shape[0]):
        numpyro.sample("x", dist.Normal(d + m, 1.0), obs=x)


def test_delta_latent_site_is_refused(monkeypatch):
    # a Delta latent site was fitted as a free parameter under a flat prior (log 1[d == 1] has zero
    # gradient): its "posterior" wandered away from the point mass without a word
    _no_release(monkeypatch)
    with pytest.raises(ValueError, match="latent site 'd' is a Delta.*numpyro.deterministic"):
        dpp.dpvi(_point_mass, X20, **SETTINGS)


X2 = RNG.normal(size=(20, 2)).astype(np.float32)
Y20 = (X2 @ np.array([1.0, -1.0], np.float32) + RNG.normal(size=20)).astype(np.float32)


def _centred_inside(X, y):
    w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([2]).to_event(1))
    with numpyro.plate("records", X.shape[0]):
        numpyro.sample("y", dist.Normal((X - X.mean(0)) @ w, 1.0), obs=y)


def _prior_from_n(X, y):
    w = numpyro.sample("w", dist.Normal(0.0, 10.0 / np.sqrt(X.shape[0])).expand([2]).to_event(1))
    with numpyro.plate("records", X.shape[0]):
        numpyro.sample("y", dist.Normal(X @ w, 1.0), obs=y)


@pytest.mark.parametrize(
    "model, what",
    [
        (_centred_inside, "likelihood of a record changes with the other records"),
        (_prior_from_n, "prior changes with the number of records"),
    ],
)
def test_model_that_reads_the_whole_batch_is_refused(monkeypatch, model, what):
    # dpvi evaluates each record alone: covariates centred inside the model became X_i - X_i = 0 (the
    # weights kept their prior), a prior scaled by X.shape[0] became the N = 1 prior; both silently
    _no_release(monkeypatch)
    with pytest.raises(ValueError, match=what):
        dpp.dpvi(model, X2, Y20, **SETTINGS)


def _separate(X, y, c, b):
    w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([2]).to_event(1))
    a = numpyro.sample("a", dist.Normal(0.0, 1.0))  # Normal latents only: Gamma / Beta draws compile slowly
    with numpyro.plate("records", X.shape[0]):
        numpyro.sample("y", dist.Normal(X @ w, 1.0), obs=y)
        numpyro.sample("c", dist.Poisson(jnp.exp(a)), obs=c)
        numpyro.sample("b", dist.Bernoulli(logits=a), obs=b)


def test_separate_records_with_float_count_and_bool_data_pass_the_check():
    from dpposterior.vi.model_inspect import check_data, inspect_model

    data = check_data((X2, Y20, RNG.poisson(3.0, size=20), RNG.random(20) < 0.5))
    assert inspect_model(_separate, data, {}).names == ("w", "a")


def _imputing(x, observed):
    mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
    with numpyro.plate("records", x.shape[0]):
        numpyro.sample("x", dist.Normal(mu, 1.0), obs=x, obs_mask=observed)


def test_obs_mask_is_refused_with_the_masking_that_works(monkeypatch):
    # obs_mask was refused as "latent site 'x_unobserved' lies inside the plate over the records", a site
    # the user never wrote, with no word on obs_mask or on the masking dpvi supports
    _no_release(monkeypatch)
    with pytest.raises(ValueError, match=r"obs_mask=.*'x_unobserved'.*handlers\.mask"):
        dpp.dpvi(_imputing, X20, X20 > 3.0, **SETTINGS)


W20 = RNG.uniform(0.5, 2.0, size=20).astype(np.float32)


def _weighted(x, weight):
    mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
    with numpyro.plate("records", x.shape[0]):
        with numpyro.handlers.scale(scale=weight):
            numpyro.sample("x", dist.Normal(mu, 1.0), obs=x)


def test_per_record_weights_in_handlers_scale_are_accepted_and_weight_each_record():
    # survey weights passed as a data array were refused: the model was probed on records of zeros, and
    # handlers.scale refuses a zero scale ("the model failed ...: 'scale' argument should be positive")
    import jax

    from dpposterior.vi.dpvi import make_elbo_loss
    from dpposterior.vi.model_inspect import check_data, inspect_model

    data = check_data((X20, W20))
    layout = inspect_model(_weighted, data, {})
    assert layout.names == ("mu",)
    per_record = jax.jit(jax.vmap(make_elbo_loss(_weighted, layout, 20, 1), in_axes=(None, 0, None)))

    def total(mu):  # q a near point mass at mu (sd 1e-13): minus the log joint, plus log q (the same for any mu)
        phi = jnp.array([mu, -30.0], jnp.float32)
        return float(jnp.sum(per_record(phi, data, jax.random.PRNGKey(0))))

    def log_joint(mu):  # the weighted log likelihood and the prior
        return -0.5 * np.sum(W20 * (X20 - mu) ** 2) - 0.5 * (mu / 5.0) ** 2

    assert total(2.0) - total(1.0) == pytest.approx(-(log_joint(2.0) - log_joint(1.0)), rel=1e-4, abs=1e-3)


def _prior_precision(x, beta=1.0):
    mu = numpyro.sample("mu", dist.Normal(0.0, 1.0 / beta))
    with numpyro.plate("records", x.shape[0]):
        numpyro.sample("x", dist.Normal(mu, 1.0), obs=x)


def _prior_scale(x, init_scale=1.0):
    mu = numpyro.sample("mu", dist.Normal(0.0, init_scale))
    with numpyro.plate("records", x.shape[0]):
        numpyro.sample("x", dist.Normal(mu, 1.0), obs=x)


def _boom(*a, **k):
    raise AssertionError("a release was computed before the check (or the model run)")


@pytest.mark.parametrize(
    "fitter, model, name", [("dpvi", _prior_precision, "beta"), ("dpvim", _prior_scale, "init_scale")]
)
def test_model_keyword_named_like_a_setting_is_refused(monkeypatch, fitter, model, name):
    # dpvi(model, x, ..., beta=0.01) meant for model(x, beta=...) became dpvi's preconditioning vector and
    # the model kept beta=1.0, silently (dpvim: init_scale)
    import functools

    from dpposterior.vi._dpvim import dpvim

    fit = dpp.dpvi if fitter == "dpvi" else dpvim
    _no_release(monkeypatch)
    for module in ("dpposterior.vi.dpvi", "dpposterior.vi._dpvim"):  # the check comes before the model is run
        monkeypatch.setattr(sys.modules[module], "inspect_model", _boom)
    with pytest.raises(
        ValueError,
        match=rf"{name}= is a setting of {fitter} and also a parameter of your model.*"
        rf"functools\.partial\(model, {name}=\.\.\.\)",
    ):
        fit(model, X20, **{name: 0.5}, **SETTINGS)
    # bound with functools.partial, it is the model's, and the fitter's own setting stays at its default
    with pytest.raises(AssertionError, match="a release was computed"):
        fit(functools.partial(model, **{name: 0.5}), X20, **SETTINGS)


def _fixed_plate(x, N=20):
    mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
    with numpyro.plate("records", N):
        numpyro.sample("x", dist.Normal(mu, 1.0), obs=x)


def test_record_plate_of_a_fixed_size_is_named_with_its_size(monkeypatch):
    # plate("records", N) with N = 20 fixed was told to "wrap the likelihood in numpyro.plate('records',
    # X.shape[0])" as if it had no plate at all
    _no_release(monkeypatch)
    with pytest.raises(ValueError, match=r"plate\(s\) 'records' of size 20, whose size stays fixed"):
        dpp.dpvi(_fixed_plate, X20, N=20, **SETTINGS)


G20 = RNG.integers(0, 4, size=20)


def _groups_from_data(g, y):
    with numpyro.plate("groups", int(g.max()) + 1):
        a = numpyro.sample("a", dist.Normal(0.0, 3.0))
    with numpyro.plate("records", g.shape[0]):
        numpyro.sample("y", dist.Normal(a[g], 1.0), obs=y)


def test_model_whose_structure_comes_from_the_data_values_is_refused_before_the_run(monkeypatch):
    # int(g.max()) + 1 groups: the layout came from the dummy records (1 group), and the run failed inside
    # the DP-SGD engine with JAX's ConcretizationTypeError
    _no_release(monkeypatch)
    with pytest.raises(ValueError, match=r"concrete values of the data.*public keyword arguments"):
        dpp.dpvi(_groups_from_data, G20, X20, **SETTINGS)


def _hierarchical(x):
    tau = numpyro.sample("tau", dist.HalfNormal(1.0))
    mu = numpyro.sample("mu", dist.Normal(0.0, tau))
    with numpyro.plate("records", x.shape[0]):
        numpyro.sample("x", dist.Normal(mu, 1.0), obs=x)


def test_global_site_fixed_by_condition_gets_a_hint(monkeypatch):
    # handlers.condition(model, {"tau": 1.0}) was told only to "wrap the likelihood in numpyro.plate(...)"
    _no_release(monkeypatch)
    with pytest.raises(ValueError, match=r"observed site 'tau'.*handlers\.condition.*numpyro\.deterministic"):
        dpp.dpvi(numpyro.handlers.condition(_hierarchical, {"tau": 1.0}), X20, **SETTINGS)


def _normal_mean(X, y=None, offset=0.0):
    w = numpyro.sample("w", dist.Normal(0.0, 1.0))
    with numpyro.plate("records", X.shape[0]):
        numpyro.sample("y", dist.Normal(X * w, 1.0), obs=y if y is None else y - offset)


@pytest.mark.parametrize("num_records", [1, 2])
def test_keyword_data_of_one_record_is_refused(num_records):
    # y of one record passed as a keyword broadcast against every dummy record and passed the shape check:
    # the private y went unclipped into every record's likelihood
    X = np.ones(num_records, np.float32)
    y = np.full(num_records, 2.0, np.float32)
    with pytest.raises(ValueError, match="keyword argument"):  # two records: the shape check's error
        dpp.dpvi(_normal_mean, X, y=y, epsilon=1.0, delta=1e-5, num_steps=5, sampling_rate=1.0, clip=1.0, rng_key=0)


def test_public_keyword_arrays_that_do_not_feed_an_observation_pass():
    # a scalar keyword (a public constant) passes; an array keyword that the observed value is computed from
    # is refused, as data passed by keyword would be
    X = np.ones(4, np.float32)
    y = np.full(4, 2.0, np.float32)
    dpp.dpvi(
        _normal_mean, X, y, offset=1.0, epsilon=1.0, delta=1e-5, num_steps=5, sampling_rate=1.0, clip=1.0, rng_key=0
    )
    with pytest.raises(ValueError, match="keyword argument 'offset'"):
        dpp.dpvi(
            _normal_mean,
            X,
            y,
            offset=np.ones(1, np.float32),
            epsilon=1.0,
            delta=1e-5,
            num_steps=5,
            sampling_rate=1.0,
            clip=1.0,
            rng_key=0,
        )
