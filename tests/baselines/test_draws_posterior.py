"""``DrawsPosterior``, the baselines' posterior: it needs its privacy record, and its summary keys name their
quantile levels.
"""

from __future__ import annotations

import numpy as np
import pytest

from release_fakes import own_privacy


def test_draws_posterior_needs_its_privacy_and_a_numeric_prob(dirichlet_release):
    from dpposterior.baselines import DrawsPosterior
    from dpposterior.baselines.expfam_gibbs import family_layout

    layout = family_layout("dirichlet-categorical")
    draws = np.zeros((5, 2), np.float32)
    with pytest.raises(TypeError, match="privacy must be the PrivacySpent"):
        DrawsPosterior(layout=layout, draws=draws, privacy=None, method="x")
    post = DrawsPosterior(layout=layout, draws=draws, privacy=dirichlet_release.privacy, method="x")
    with pytest.raises(TypeError, match="prob must be a real number"):
        post.summary(prob="0.5")
    assert len(post.summary(prob=0.5)) == 3


# DrawsPosterior.summary keyed the ends of a 0.999 interval "q0.0005" and "q1" (three digits of 0.9995),
# a name that reads as the maximum; Posterior.summary keys them alike
def test_draws_posterior_summary_keys_name_their_quantile_levels():
    from dpposterior.baselines import DrawsPosterior
    from dpposterior.baselines.expfam_gibbs import family_layout

    post = DrawsPosterior(
        layout=family_layout("beta-bernoulli"),
        draws=np.linspace(-1, 1, 50, dtype=np.float32)[:, None],
        privacy=own_privacy(1.0),
        method="test",
    )
    (row,) = post.summary(prob=0.999)
    assert {"q0.0005", "q0.9995"} <= set(row) and "q1" not in row
    (row,) = post.summary(prob=0.9)
    assert {"q0.05", "q0.95"} <= set(row)
