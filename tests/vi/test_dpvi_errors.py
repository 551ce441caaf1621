"""dpvi validates its inputs before touching the mechanism: each bad input gets a clear error."""

import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest

from dpposterior.models import logistic_regression
from dpposterior.vi.dpvi import dpvi


def _data(n=50, p=3):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, p)).astype(np.float32)
    y = (rng.random(n) < 0.5).astype(np.int32)
    return X, y


def no_plate_model(X, y):
    w = numpyro.sample("w", dist.Normal(0, 1).expand([X.shape[1]]).to_event(1))
    numpyro.sample("y", dist.Bernoulli(logits=X @ w).to_event(1), obs=y)


def discrete_latent_model(X, y):
    k = numpyro.sample("k", dist.Bernoulli(0.5))
    w = numpyro.sample("w", dist.Normal(0, 1).expand([X.shape[1]]).to_event(1))
    with numpyro.plate("records", X.shape[0]):
        numpyro.sample("y", dist.Bernoulli(logits=X @ w + k), obs=y)


def local_latent_model(X, y):
    w = numpyro.sample("w", dist.Normal(0, 1).expand([X.shape[1]]).to_event(1))
    with numpyro.plate("records", X.shape[0]):
        z = numpyro.sample("z", dist.Normal(0, 1))
        numpyro.sample("y", dist.Bernoulli(logits=X @ w + z), obs=y)


KW = dict(epsilon=1.0, delta=1e-5, num_steps=10, sampling_rate=0.1, clip=1.0, rng_key=0)


def test_model_without_plate_over_records():
    with pytest.raises(ValueError, match="no plate over the records"):
        dpvi(no_plate_model, *_data(), **KW)


def test_discrete_latent_site():
    with pytest.raises(ValueError, match="latent site 'k' is discrete"):
        dpvi(discrete_latent_model, *_data(), **KW)


def test_param_site_is_refused_not_left_at_its_initial_value():
    # a numpyro.param was ignored: the fit ran with the noise scale fixed at its initial 1.0
    def with_param(X, y):
        w = numpyro.sample("w", dist.Normal(0, 1).expand([X.shape[1]]).to_event(1))
        b = numpyro.param("b", 0.0)
        with numpyro.plate("records", X.shape[0]):
            numpyro.sample("y", dist.Bernoulli(logits=X @ w + b), obs=y)

    with pytest.raises(ValueError, match=r"numpyro.param sites \['b'\]: dpvi fits only latent sample sites"):
        dpvi(with_param, *_data(), **KW)


def test_per_record_latent_site():
    with pytest.raises(ValueError, match="inside the plate over the records"):
        dpvi(local_latent_model, *_data(), **KW)


def feature_plate_model(X, y):
    with numpyro.plate("features", X.shape[1]):
        w = numpyro.sample("w", dist.Normal(0, 1))
    with numpyro.plate("groups", 3):
        a = numpyro.sample("a", dist.Normal(0, 1))
    with numpyro.plate("records", X.shape[0]):
        numpyro.sample("y", dist.Bernoulli(logits=X @ w + a[0]), obs=y)


def test_a_global_plate_as_large_as_the_probe_batch_is_not_the_plate_over_the_records():
    # 3 features and 3 groups: the size of inspect_model's first dummy batch; they were refused as
    # per-record latents, so a 3-feature regression with a feature plate could not be fitted
    from dpposterior.vi.model_inspect import inspect_model

    X, y = _data(p=3)
    layout = inspect_model(feature_plate_model, (X, y), {})
    assert [(s.name, s.shape) for s in layout.sites] == [("w", (3,)), ("a", (3,))]

    def column_plate(X, y):  # a plate over the 3 columns is not a plate over the records
        w = numpyro.sample("w", dist.Normal(0, 1))
        with numpyro.plate("columns", X.shape[1]):
            numpyro.sample("X", dist.Normal(w, 1).expand([X.shape[0], X.shape[1]]), obs=X)

    with pytest.raises(ValueError, match="no plate over the records"):
        inspect_model(column_plate, (X, y), {})


def test_arrays_of_different_lengths():
    X, y = _data()
    with pytest.raises(ValueError, match=r"share their first axis \(records\): got lengths \[50, 49\]"):
        dpvi(logistic_regression, X, y[:-1], **KW)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_data(bad):
    X, y = _data()
    X[3, 1] = bad
    with pytest.raises(ValueError, match="NaN or infinite"):
        dpvi(logistic_regression, X, y, **KW)


def test_masked_data_is_refused_not_used_under_its_mask():
    # np.asarray drops the mask: the masked (missing) values were fitted as if observed
    X, y = _data()
    X = np.ma.masked_array(X, mask=np.zeros_like(X, bool))
    X[3, 1] = np.ma.masked
    with pytest.raises(ValueError, match="data argument 0 is a masked array with 1 masked value"):
        dpvi(logistic_regression, X, y, **KW)


def test_empty_data():
    X, y = _data()
    with pytest.raises(ValueError, match="no records"):
        dpvi(logistic_regression, X[:0], y[:0], **KW)


def test_no_data_and_non_numeric_data():
    with pytest.raises(ValueError, match="no data given"):
        dpvi(logistic_regression, **KW)
    X, y = _data()
    with pytest.raises(TypeError, match="must be numeric"):
        dpvi(logistic_regression, X.astype(str), y, **KW)


def test_data_given_by_keyword_are_named_not_reported_missing():
    """Data passed as keywords (``dpvi(model, X=X, y=y)``) reach the model as public constants: the error
    says which keywords those were and to pass them positionally, not that no data were given."""
    X, y = _data()
    with pytest.raises(ValueError, match=r"no data given: X=, y= went to the model as keyword argument") as err:
        dpvi(logistic_regression, X=X, y=y, **KW)
    assert "pass the data arrays positionally" in str(err.value)


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("epsilon", 0.0, "epsilon must be a finite number > 0"),
        ("epsilon", -1.0, "epsilon must be a finite number > 0"),
        ("epsilon", float("nan"), "epsilon must be a finite number > 0"),
        ("epsilon", float("inf"), "epsilon must be a finite number > 0"),
        ("delta", 0.0, r"delta must lie in \(0, 1\)"),
        ("delta", 1.0, r"delta must lie in \(0, 1\)"),
        ("sampling_rate", 0.0, r"sampling_rate must lie in \(0, 1\]"),
        ("sampling_rate", 1.5, r"sampling_rate must lie in \(0, 1\]"),
        ("num_steps", 0, "num_steps must be an integer >= 1"),
        ("clip", 0.0, "clip must be a finite number > 0"),
        ("num_mc", 0, "num_mc must be an integer >= 1"),
    ],
)
def test_invalid_privacy_and_optimiser_parameters(field, value, message):
    kw = dict(KW)
    kw[field] = value
    with pytest.raises(ValueError, match=message):
        dpvi(logistic_regression, *_data(), **kw)


def test_run_options_are_checked_and_the_old_keywords_are_refused_by_name():
    """The operational settings live in RunOptions: a bad value is refused by the engine with its name, a
    dict is refused with the type expected, and ``progress=`` given to dpvi (where it was a keyword) is
    refused rather than passed to the model as a model keyword."""
    from dpposterior.vi import RunOptions

    with pytest.raises(ValueError, match=r"sampling must be one of \('packed', 'masked'\)"):
        dpvi(logistic_regression, *_data(), **KW, run_options=RunOptions(sampling="bernoulli"))
    with pytest.raises(TypeError, match=r"run_options must be a dpposterior.vi.RunOptions.*got dict"):
        dpvi(logistic_regression, *_data(), **KW, run_options={"progress": False})
    for name, value in (("progress", False), ("checkpoint", "run.ckpt"), ("sampling", "masked")):
        with pytest.raises(TypeError, match=rf"{name}= is not a keyword of dpvi.*RunOptions\({name}="):
            dpvi(logistic_regression, *_data(), **KW, **{name: value})


def test_float_num_steps_is_a_type_error():
    kw = dict(KW, num_steps=1e4)
    with pytest.raises(TypeError, match="num_steps must be an integer"):
        dpvi(logistic_regression, *_data(), **kw)


def test_bad_beta_shape():
    with pytest.raises(ValueError, match="beta must be a scalar or a vector of length d=6"):
        dpvi(logistic_regression, *_data(), beta=np.ones(5), **KW)


def test_model_that_fails_on_the_data_shapes():
    def broken(X, y):
        raise RuntimeError("boom")

    with pytest.raises(ValueError, match="the model failed .*RuntimeError: boom"):
        dpvi(broken, *_data(), **KW)


def test_improper_prior_gets_a_hint_not_a_bare_not_implemented_error():
    # the message was "the model failed ...: NotImplementedError: " with nothing after it
    def improper(X, y):
        w = numpyro.sample("w", dist.ImproperUniform(dist.constraints.real_vector, (), (X.shape[1],)))
        with numpyro.plate("records", X.shape[0]):
            numpyro.sample("y", dist.Bernoulli(logits=X @ w), obs=y)

    with pytest.raises(
        ValueError,
        match="NotImplementedError; a latent site whose distribution cannot be sampled "
        r"\(an improper prior such as ImproperUniform\)",
    ):
        dpvi(improper, *_data(), **KW)
