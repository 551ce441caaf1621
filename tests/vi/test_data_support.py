"""dpvi and dpvim refuse records whose observed values lie outside the likelihood's support.

Before this check a negative record under a LogNormal got a NaN gradient, which DP-SGD zeroes: the fit
ran on the other records without a word. A Bernoulli record of 0.5 or a Poisson count of -1 has a finite
but meaningless log likelihood and was fitted as if it were data of the model.
"""

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from numpyro import handlers

from dpposterior.vi import data_support
from dpposterior.vi.dpvi import dpvi
from dpposterior.vi._dpvim import dpvim

KW = dict(epsilon=1.0, delta=1e-5, num_steps=12, sampling_rate=0.5, clip=1.0, rng_key=0)


def lognormal(y):
    m = numpyro.sample("m", dist.Normal(0.0, 3.0))
    with numpyro.plate("records", y.shape[0]):
        numpyro.sample("y", dist.LogNormal(m, 1.0), obs=y)


def bernoulli(y):
    p = numpyro.sample("p", dist.Beta(1.0, 1.0))
    with numpyro.plate("records", y.shape[0]):
        numpyro.sample("y", dist.Bernoulli(p), obs=y)


def poisson_regression(x, y):
    b = numpyro.sample("b", dist.Normal(0.0, 1.0))
    with numpyro.plate("records", x.shape[0]):
        numpyro.sample("y", dist.Poisson(jnp.exp(b * x)), obs=y)


def masked_lognormal(y, observed):
    m = numpyro.sample("m", dist.Normal(0.0, 3.0))
    with numpyro.plate("records", y.shape[0]):
        numpyro.sample("y", dist.LogNormal(m, 1.0).mask(observed), obs=y)


def handler_masked_lognormal(y, observed):
    m = numpyro.sample("m", dist.Normal(0.0, 3.0))
    with numpyro.plate("records", y.shape[0]), handlers.mask(mask=observed):
        numpyro.sample("y", dist.LogNormal(m, 1.0), obs=y)


def uniform_upper(y):
    top = numpyro.sample("top", dist.Gamma(2.0, 1.0))
    with numpyro.plate("records", y.shape[0]):
        numpyro.sample("y", dist.Uniform(0.0, top), obs=y)


def _positive(n=40):
    return np.random.default_rng(0).lognormal(size=n).astype(np.float32)


@pytest.mark.parametrize("fit", [dpvi, dpvim])
def test_negative_records_under_a_lognormal_are_refused(fit):
    y = _positive()
    y[[3, 17]] = -1.0
    with pytest.raises(
        ValueError,
        match=r"observed site 'y' \(LogNormal with support Positive.*in 2 of 40 records "
        r"\(the first is record 3\)",
    ):
        fit(lognormal, y, **KW)


def test_meaningless_finite_values_are_refused():
    y = (np.arange(30) % 2).astype(np.float32)
    y[5] = 0.5  # a finite log likelihood under Bernoulli, but not a Bernoulli outcome
    with pytest.raises(ValueError, match=r"'y' \(Bernoulli.*1 of 30 records \(the first is record 5\)"):
        dpvi(bernoulli, y, **KW)
    x = np.linspace(-1, 1, 30).astype(np.float32)
    counts = np.ones(30, np.float32)
    counts[[0, 29]] = [-1.0, 2.5]
    with pytest.raises(ValueError, match=r"'y' \(Poisson.*2 of 30 records"):
        dpvi(poisson_regression, x, counts, **KW)


def test_valid_data_and_masked_placeholders_pass():
    y = _positive()
    assert dpvi(lognormal, y, **KW).phi.shape == (12, 2)
    observed = np.ones(40, bool)
    observed[[1, 2]] = False
    y[[1, 2]] = -1.0  # placeholders of missing values, masked out of the likelihood
    assert dpvi(masked_lognormal, y, observed, **KW).phi.shape == (12, 2)
    assert dpvi(handler_masked_lognormal, y, observed, **KW).phi.shape == (12, 2)
    observed[1] = True  # a placeholder the mask lets through is refused
    with pytest.raises(ValueError, match=r"1 of 40 records \(the first is record 1\)"):
        dpvi(masked_lognormal, y, observed, **KW)


def test_a_support_that_depends_on_the_latent_values_is_not_checked():
    # Uniform(0, top): whether y = 30 is inside depends on top, which no prior draw settles; the fit decides
    y = np.full(20, 30.0, np.float32)
    assert dpvi(uniform_upper, y, **KW).phi.shape == (12, 2)


def test_records_past_the_first_chunk_are_checked(monkeypatch):
    monkeypatch.setattr(data_support, "CHUNK_RECORDS", 16)
    y = _positive(50)
    y[[20, 49]] = 0.0
    with pytest.raises(ValueError, match=r"2 of 50 records \(the first is record 20\)"):
        dpvi(lognormal, y, **KW)
