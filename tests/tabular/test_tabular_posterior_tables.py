"""DrawsPosterior.summary_table: ArviZ's table, with the privacy record (Posterior.summary_table is
checked on the fitted example in test_tabular_fit.py)."""

from __future__ import annotations

import numpy as np
import pytest

from dpposterior.baselines import DrawsPosterior
from dpposterior.baselines.regression_gibbs import regression_layout
from dpposterior.privacy import PrivacySpent

PRIVACY = PrivacySpent(
    epsilon=0.5, delta=0.0, neighbouring="add_remove", accountant="pure", mechanism="laplace_sufficient_statistics"
)


def test_draws_posterior_table_matches_its_draws():
    rng = np.random.default_rng(0)
    draws = np.c_[rng.normal(-1.0, 0.1, 3000), rng.normal([0.5, -2.0, 1.0], 0.2, (3000, 3))]  # log sigma2, w
    post = DrawsPosterior(layout=regression_layout(2), draws=draws, privacy=PRIVACY, method="gibbs_ss_noisy")
    table = post.summary_table(prob=0.8)
    assert list(table.index) == ["sigma2", "w[0]", "w[1]", "w[2]"]
    assert list(table.columns) == ["mean", "sd", "hdi_10%", "hdi_90%"]
    assert table.loc["w[1]", "mean"] == pytest.approx(-2.0, abs=0.02)
    assert table.loc["sigma2", "mean"] == pytest.approx(np.exp(-1.0 + 0.005), abs=0.01)
    assert table.attrs["privacy"] == PRIVACY.summary()
    with pytest.raises(ValueError, match="prob must lie in"):
        post.summary_table(prob=1.0)


def test_draws_posterior_predictive_checks_the_model_like_posterior():
    # DrawsPosterior.predictive had no model check: a model with other latent names had them drawn
    # from their prior and returned as "predictions"
    import numpyro
    import numpyro.distributions as dist

    from dpposterior.models import linear_regression

    rng = np.random.default_rng(0)
    draws = np.c_[rng.normal(-1.0, 0.1, 200), rng.normal([0.5, -2.0, 1.0], 0.2, (200, 3))]
    post = DrawsPosterior(layout=regression_layout(2), draws=draws, privacy=PRIVACY, method="gibbs_ss_noisy")
    X_new = rng.normal(size=(4, 2)).astype(np.float32)
    out = post.predictive(0, linear_regression, X_new, num_samples=7)
    assert set(out) == {"y"} and out["y"].shape == (7, 4)

    def other(X, y=None):
        beta = numpyro.sample("beta", dist.Normal(0.0, 10.0).expand([3]).to_event(1))
        with numpyro.plate("records", X.shape[0]):
            numpyro.sample("y", dist.Normal(X @ beta[:2], 1.0), obs=y)

    with pytest.raises(
        ValueError,
        match=r"lacks the posterior's latent sites \['sigma2', 'w'\] and has global "
        r"latent sites \['beta'\]",
    ):
        post.predictive(0, other, X_new, num_samples=7)
