"""Effective sample sizes of the Gibbs baselines' chains (baselines/_mixing.py)."""

import numpy as np
import pytest

from dpposterior.baselines._mixing import ess_per_replicate, ess_summary


def _ar1(rng, k, m, n, rho):
    x = np.empty((k, m, n))
    x[:, 0] = rng.normal(size=(k, n))
    e = rng.normal(size=(k, m, n)) * np.sqrt(1 - rho**2)
    for t in range(1, m):
        x[:, t] = rho * x[:, t - 1] + e[:, t]
    return x


def test_ess_matches_independent_and_ar1_chains():
    rng = np.random.default_rng(0)
    m = 10_000
    iid = ess_per_replicate(rng.normal(size=(3, m, 2)))
    assert np.all(np.abs(iid / m - 1) < 0.3)
    rho = 0.9  # integrated autocorrelation time (1 + rho) / (1 - rho) = 19
    ar = ess_per_replicate(_ar1(rng, 3, m, 2, rho))
    assert np.all(np.abs(ar / (m * (1 - rho) / (1 + rho)) - 1) < 0.35)


def test_summary_counts_poorly_mixed_replicates_and_frozen_coordinates():
    rng = np.random.default_rng(1)
    d = rng.normal(size=(5, 1000, 2))  # the median replicate is an independent chain
    d[1] = _ar1(rng, 1, 1000, 2, 0.995)[0]  # ESS about 2.5
    d[2, :, 1] = 0.7  # a coordinate that never moved
    s = ess_summary(d)
    assert s["replicates_with_ess_below_100"] == 2
    assert s["ess_min"] == 0.0
    assert 600 < s["ess_median"] < 1500


def test_bad_shape_is_an_error():
    with pytest.raises(ValueError, match=r"\(K, M, n\)"):
        ess_per_replicate(np.zeros((10, 3)))
    with pytest.raises(ValueError, match="M >= 4"):
        ess_per_replicate(np.zeros((2, 3, 1)))


def test_agrees_with_the_tests_independent_estimator(helpers):
    rng = np.random.default_rng(2)
    d = np.concatenate([_ar1(rng, 2, 5000, 1, 0.5), _ar1(rng, 2, 5000, 1, 0.97)], axis=2)  # (2, M, 2)
    ours = ess_per_replicate(d)
    theirs = helpers.ess(d.transpose(0, 2, 1))  # chains along the last axis
    np.testing.assert_allclose(ours, theirs, rtol=0.15)


# A Bernstein-Sheldon (or Gibbs-SS-Noisy) cell with M = 2 or 3 draws (CellConfig allows M >= 2) ran its
# chains and then failed in the ESS diagnostic ("draws must be (K, M, n) with M >= 4"): the draws were lost.
def test_ess_summary_of_fewer_than_four_draws_is_empty_not_an_error():
    from dpposterior.baselines._mixing import ess_summary  # what both Gibbs cells call on their draws

    draws = np.random.default_rng(0).normal(size=(2, 3, 1))
    assert ess_summary(draws) == {"ess_min": None, "ess_median": None, "replicates_with_ess_below_100": None}
    assert ess_summary(np.random.default_rng(0).normal(size=(2, 50, 1)))["ess_min"] > 0
