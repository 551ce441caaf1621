"""dpvi and dpvim refuse records whose observed values lie outside the likelihood's support.

Before this check a negative record under a LogNormal got a NaN gradient, which DP-SGD zeroes: the fit
ran on the other records without a word. A Bernoulli record of 0.5 or a Poisson count of -1 has a finite
but meaningless log likelihood and was fitted as if it were data of the model.
"""

import warnings

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


def test_a_support_that_depends_on_the_latent_values_is_refused():
    # Uniform(0, top): log_prob is -log top for every record, inside the support or not, so the gradient
    # pulls top below the data and the fit is confidently wrong; refused before any release, whatever the data
    for y in (np.full(20, 30.0, np.float32), np.full(20, 0.5, np.float32)):
        with pytest.raises(ValueError, match=r"observed site 'y' \(Uniform with support .*depends on the latent"):
            dpvi(uniform_upper, y, **KW)


def test_records_past_the_first_chunk_are_checked(monkeypatch):
    monkeypatch.setattr(data_support, "CHUNK_RECORDS", 16)
    y = _positive(50)
    y[[20, 49]] = 0.0
    with pytest.raises(ValueError, match=r"2 of 50 records \(the first is record 20\)"):
        dpvi(lognormal, y, **KW)


def factor_lognormal(y):
    mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
    with numpyro.plate("records", y.shape[0]):
        numpyro.factor("lik", dist.LogNormal(mu, 0.5).log_prob(y))


def test_records_a_factor_likelihood_drops_are_counted_by_the_clip_check():
    """A factor likelihood is not an observed site, so the support check cannot see its records; those
    whose likelihood is not finite are dropped by DP-SGD. The clip check counts them with the clipped
    ones (at a clip no valid record reaches), so the release warns instead of fitting a third of the
    data silently; valid data raise no NumPyro support warning from the set-up's dummy records."""
    from dpposterior.privacy.clip_binds import ClipBindsWarning

    y = np.random.default_rng(0).lognormal(1.0, 0.5, 1500).astype(np.float32)
    kw = dict(epsilon=1.0, delta=1e-5, num_steps=40, sampling_rate=0.2, clip=1e6, rng_key=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dpvi(factor_lognormal, y, **kw)
    assert not [w for w in caught if "Out-of-support" in str(w.message) or issubclass(w.category, ClipBindsWarning)]
    y[:500] = -y[:500]
    with pytest.warns(ClipBindsWarning, match=r"or not finite \(such a record is dropped\)"):
        dpvi(factor_lognormal, y, **kw)


def grouped(g, y):
    theta = numpyro.sample("theta", dist.Normal(0.0, 3.0).expand([5]).to_event(1))
    with numpyro.plate("records", y.shape[0]):
        numpyro.sample("y", dist.Normal(theta[g], 0.5), obs=y)


def test_an_index_out_of_bounds_is_refused_not_clamped():
    """JAX clamps theta[7] to theta[4] with 5 groups: the record would be fitted to the wrong group. dpvi
    and dpvim refuse before any release; indices in bounds (negative ones count from the end) pass."""
    rng = np.random.default_rng(0)
    g = rng.integers(0, 5, 200).astype(np.int32)
    y = rng.normal(0.0, 1.0, 200).astype(np.float32)
    g[0] = -1  # NumPy's meaning: the last group
    assert dpvi(grouped, g, y, **KW).phi.shape == (12, 10)
    bad = g.copy()
    bad[150] = 7
    for fit in (dpvi, dpvim):
        with pytest.raises(ValueError, match=r"indexes an array out of its bounds .*index 7 is out of bounds"):
            fit(grouped, bad, y, **KW)


def weighted_lognormal(y, w):
    m = numpyro.sample("m", dist.Normal(0.0, 3.0))
    with numpyro.plate("records", y.shape[0]), handlers.scale(scale=w):
        numpyro.sample("y", dist.LogNormal(m, 1.0), obs=y)


@pytest.mark.parametrize("fit", [dpvi, dpvim])
def test_record_weights_numpyro_refuses_are_refused(fit):
    """NumPyro refuses a handlers.scale weight <= 0 only on concrete values; under the compiled run a
    negative weight made a record's likelihood a penalty and was fitted silently."""
    y = _positive()
    w = np.ones(40, np.float32)
    w[[4, 9]] = [0.5, 2.0]
    assert fit(weighted_lognormal, y, w, **KW).privacy.epsilon <= 1.0
    w[7] = -1.0
    with pytest.raises(
        ValueError,
        match=r"the model raised ValueError when run on the records \('scale' argument should be "
        r"positive.\), but not on arrays of their shapes",
    ):
        fit(weighted_lognormal, y, w, **KW)
