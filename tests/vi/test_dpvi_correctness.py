"""DPVI's ELBO and the DP-SGD loop find the exact posterior when the noise is negligible."""

import jax
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest

from near_noiseless import uncertified_epsilon

from dpposterior.releases import family
from dpposterior.vi import RunOptions
from dpposterior.vi.dpvi import dpvi

PRIOR_SD = 2.0


def normal_known_variance(x):
    m = numpyro.sample("m", dist.Normal(0.0, PRIOR_SD))
    with numpyro.plate("records", x.shape[0]):
        numpyro.sample("x", dist.Normal(m, 1.0), obs=x)


def _fit(x, mean_shift=0.0, **kw):
    n = x.shape[0]
    # lr_mu ~ 0.5 / curvature N; lr_rho small enough that the Monte Carlo noise of the scale gradient
    # leaves the last iterate within 0.5% of its optimum (stationary variance lr * Var / (2 * 2)).
    lr = np.array([0.5 / n, 0.005], dtype=np.float32)
    with uncertified_epsilon():  # epsilon 1e4: the DP noise is negligible
        return dpvi(
            normal_known_variance,
            x + mean_shift,
            epsilon=1e4,
            delta=1e-5,
            num_steps=3000,
            sampling_rate=1.0,
            clip=50.0,
            learning_rate=lr,
            num_mc=50,
            rng_key=3,
            run_options=RunOptions(progress=False),
            **kw,
        )


@pytest.fixture(scope="module")
def data():
    return np.random.default_rng(0).normal(1.3, 1.0, size=500).astype(np.float32)


@pytest.fixture(scope="module")
def fitted(data):
    return _fit(data)


def _exact(x):
    post_var = 1.0 / (1.0 / PRIOR_SD**2 + x.shape[0])
    return post_var * x.sum(), np.sqrt(post_var)


def test_huge_epsilon_last_iterate_matches_exact_posterior(fitted, data):
    mean, sd = _exact(data)
    mu, rho = family.split_phi(fitted.final_phi)
    assert abs(float(mu[0]) - mean) / abs(mean) < 0.02
    assert abs(float(family.scale(rho)[0]) - sd) / sd < 0.02
    # the posterior object says the same
    post = fitted.last_iterate_posterior()
    draws = post.sample(jax.random.PRNGKey(0), 20000)["m"]
    assert abs(float(draws.mean()) - mean) < 4 * sd / np.sqrt(20000) + 0.02 * abs(mean)
    assert abs(float(draws.std()) - sd) / sd < 0.03


def test_power_wrong_data_is_detected(data):
    """Twin: a fit on shifted data misses the exact posterior of the unshifted data by far more than 2%."""
    mean, _ = _exact(data)
    wrong = _fit(data, mean_shift=0.2)
    mu, _ = family.split_phi(wrong.final_phi)
    assert abs(float(mu[0]) - mean) / abs(mean) > 0.1


def test_privacy_record_and_trace_shapes(fitted):
    assert fitted.phi.shape == (3000, 2) and fitted.grads.shape == (3000, 2)
    assert fitted.privacy.seeded_by == "user"
    assert fitted.privacy.neighbouring == "add_remove"
    assert fitted.privacy.epsilon <= 1e4
    assert fitted.dataset_size == 500
    # the trace starts at the data-independent initial point: prior median, sd 0.1
    np.testing.assert_allclose(family.scale(fitted.phi[0, 1]), 0.1, rtol=1e-5)
    assert abs(float(fitted.phi[0, 0])) < 0.5
