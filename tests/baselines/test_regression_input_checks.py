"""The regression release and Gibbs-SS-Noisy: bad input refused by name, huge records clipped, the budget
split never spending more than epsilon, and a warning when the chain barely moves.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
import pytest

from dpposterior.baselines.regression_release import release_regression_statistics
from input_checks import raises_clear
from public_calls import X20, Y20


# Gibbs-SS-Noisy with a public covariate model whose cov is not a covariance (negative eigenvalues,
# asymmetric, NaN) ended in NumPy's "Matrix is not positive definite" (or ran on the NaN).
@pytest.mark.parametrize(
    "cov, words",
    [
        (-np.eye(2), "positive semi-definite"),
        (np.array([[1.0, 0.5], [0.0, 1.0]]), "symmetric"),
        (np.array([[1.0, np.nan], [np.nan, 1.0]]), "finite"),
    ],
)
def test_public_covariate_model_must_be_a_covariance(cov, words):
    from dpposterior.baselines import release_regression_statistics
    from dpposterior.baselines.regression_params import sampler_params as regression_sampler_params

    rng = np.random.default_rng(0)
    rel = release_regression_statistics(
        rng.normal(size=(20, 2)), rng.normal(size=20), epsilon=1.0, x_bound=3.0, y_bound=5.0, rng_key=0
    )
    with pytest.raises(ValueError, match=words):
        regression_sampler_params(rel, fourth_moments=(np.zeros(2), cov))
    regression_sampler_params(rel, fourth_moments=(np.zeros(2), np.diag([1.0, 0.0])))  # a constant covariate is fine


# Gibbs-SS-Noisy's budget split is accepted when it sums to 1 within 1e-9; the parts were then released
# with epsilon times the given shares, so a split summing to 1 + 5e-10 spent more than the epsilon that
# the release's PrivacySpent records.
def test_budget_split_parts_never_add_up_to_more_than_epsilon():
    import math

    from dpposterior.baselines import release_regression_statistics

    rng = np.random.default_rng(0)
    rel = release_regression_statistics(
        rng.normal(size=(20, 2)),
        rng.normal(size=20),
        epsilon=1.0,
        x_bound=3.0,
        y_bound=5.0,
        budget_split={"xx": 0.5, "xy": 0.3, "yy": 0.2 + 5e-10},
        rng_key=0,
    )
    assert math.fsum(rel.epsilon_parts.values()) <= rel.privacy.epsilon * (1 + 1e-15)


# Gibbs-SS-Noisy on very few records (N <= p + 1) keeps almost no latent proposal (p = 2, N = 1,
# epsilon = 1: acceptance 0.0), so its draws mostly reflect its data-independent start; only
# diagnostics["acceptance"] showed it. The chain is replaced by its recorded outcome here (the real
# one is slow to compile): the check under test is what gibbs_ss_noisy does with it.
def test_gibbs_ss_noisy_warns_when_its_chain_barely_moves(monkeypatch):

    from dpposterior.baselines import regression_gibbs as RG
    from dpposterior.baselines import regression_release as RGR

    rng = np.random.default_rng(0)
    rel = RGR.release_regression_statistics(
        rng.uniform(-1, 1, (1, 2)), rng.uniform(-1, 1, 1), epsilon=1.0, x_bound=1.0, y_bound=1.0, rng_key=0
    )

    def chain(acceptance):
        return lambda *a, **k: (jnp.zeros((4, 3)), jnp.ones(4), jnp.float32(acceptance))

    monkeypatch.setattr(RG, "sample_chain", chain(0.0))
    with pytest.warns(RuntimeWarning, match=r"kept 0\.0% of its latent proposals .* here N = 1 for 2 features"):
        post = RG.gibbs_ss_noisy(rel, num_warmup=1, num_draws=4, rng_key=0)
    assert post.diagnostics["acceptance"] == 0.0
    monkeypatch.setattr(RG, "sample_chain", chain(0.5))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        RG.gibbs_ss_noisy(rel, num_warmup=1, num_draws=4, rng_key=0)


@pytest.mark.parametrize(
    "kw,names",
    [
        (dict(x_bound=1e100), "x_bound"),  # was: an inf release (x'x sensitivity 1e200)
        (dict(x_bound=1e30), "noise scale"),  # was: an inf release (float32 noise)
        (dict(epsilon=1e-300), "epsilon"),  # was: an inf release
        (dict(x_bound=True), "x_bound"),  # was: silently 1.0
        (dict(x_bound="2.0"), "x_bound"),  # was: silently 2.0
        (dict(x_bound=[1.0, 2.0, 3.0]), "x_bound"),
        (dict(x_bound=-1.0), "x_bound"),
        (dict(y_bound=math.nan), "y_bound"),
        (dict(y_bound=False), "y_bound"),
        (dict(budget_split={"xx": 0.5, "xy": 0.5}), "budget_split"),
        (dict(fourth_moments="yes"), "fourth_moments"),
        (dict(X=X20[:, 0]), "X"),
        (dict(X=X20[:0], y=Y20[:0]), "records"),
        (dict(y=Y20[:5]), "same N"),
        (dict(X=np.where(X20 > 1, np.nan, X20)), "X"),
        (dict(X=X20.astype(complex)), "X"),
        (dict(y=Y20.astype(str)), "y"),
    ],
)
def test_release_regression_statistics_refuses_bad_input(kw, names):
    kw = {**dict(X=X20, y=Y20.astype(np.float32), epsilon=1.0, x_bound=2.0, y_bound=1.0, rng_key=0), **kw}
    raises_clear(lambda: release_regression_statistics(**kw), names)


def test_release_regression_statistics_one_record_and_huge_values():
    one = release_regression_statistics(X20[:1], Y20[:1], epsilon=1.0, x_bound=2.0, y_bound=1.0, rng_key=0)
    huge = release_regression_statistics(
        X20.astype(np.float64) * 1e300, Y20, epsilon=1.0, x_bound=2.0, y_bound=1.0, rng_key=0
    )
    for r in (one, huge):  # huge records are clipped into the box (documented)
        assert all(np.isfinite(v).all() for v in r.noisy.values())
