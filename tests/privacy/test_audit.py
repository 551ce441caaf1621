"""Tests of the auditors themselves: Clopper-Pearson, the many-run and one-run bounds, on mechanisms
whose privacy is known exactly (the Gaussian mechanism, randomised response), each with a twin fed a
mechanism that violates its claim and must be caught. Audits of the DP-SGD engine are in
test_audit_dpsgd.py."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpposterior import privacy
from dpposterior.privacy import AuditResult, analytic_gaussian_sigma, audit_one_run, epsilon_lower_bound_from_scores
from dpposterior.privacy.audit import (
    clopper_pearson_lower,
    clopper_pearson_upper,
    epsilon_lower_bound_from_counts,
    one_run_epsilon_lower_bound,
)

DELTA = 1e-5


# ------------------------------------------------------------------------------------------------
# Clopper-Pearson


@pytest.mark.parametrize("k,n", [(0, 10), (3, 10), (9, 10), (0, 1000), (17, 1000), (500, 1000)])
def test_clopper_pearson_upper_is_exact_binomial_inversion(k, n):
    alpha = 0.025
    u = clopper_pearson_upper(k, n, alpha)
    # the defining property: P[Binomial(n, u) <= k] = alpha
    assert stats.binom.cdf(k, n, u) == pytest.approx(alpha, rel=1e-6)
    lo = clopper_pearson_lower(k, n, alpha)
    if k > 0:
        assert stats.binom.sf(k - 1, n, lo) == pytest.approx(alpha, rel=1e-6)
    else:
        assert lo == 0.0
    assert lo <= k / n <= u


def test_clopper_pearson_closed_forms():
    assert clopper_pearson_upper(0, 1000, 0.05) == pytest.approx(1 - 0.05 ** (1 / 1000))
    assert clopper_pearson_lower(1000, 1000, 0.05) == pytest.approx(0.05 ** (1 / 1000))
    assert clopper_pearson_upper(5, 5, 0.05) == 1.0


def test_clopper_pearson_coverage_by_simulation():
    # The upper bound must cover the true rate in at least 1 - alpha of the experiments.
    rng = np.random.default_rng(0)
    p, n, alpha, reps = 0.03, 200, 0.05, 4000
    ks = rng.binomial(n, p, size=reps)
    miss = np.mean(
        [clopper_pearson_upper(int(k), n, alpha) < p for k in np.unique(ks) for _ in range(int(np.sum(ks == k)))]
    )
    # tolerance: 4 binomial standard errors of the miss rate at its nominal level
    assert miss <= alpha + 4 * math.sqrt(alpha * (1 - alpha) / reps)


# ------------------------------------------------------------------------------------------------
# many-run distinguishing on the Gaussian mechanism (exact epsilon known)


def gaussian_scores(rng, sigma, n, shift=1.0):
    """Scores of the Gaussian mechanism with sensitivity 1: N(0, sigma^2) vs N(shift, sigma^2)."""
    return rng.normal(0.0, sigma, n), shift + rng.normal(0.0, sigma, n)


def test_many_run_bound_below_exact_gaussian_epsilon():
    sigma = 1.0
    claimed = privacy.dpsgd_epsilon(sigma, DELTA, 1.0, 1)  # one unsampled step = Gaussian mechanism
    rng = np.random.default_rng(1)
    out, inn = gaussian_scores(rng, sigma, 20_000)
    res = epsilon_lower_bound_from_scores(out, inn, delta=DELTA, confidence=0.95)
    assert isinstance(res, AuditResult)
    assert res.method == "many_run/split" and res.confidence == 0.95
    assert 0.5 < res.epsilon_lower <= claimed
    assert res.detail("num_negatives") == 10_000 and res.detail("rule") == "present_if_above"


def test_many_run_catches_gaussian_with_tenth_of_claimed_noise():
    # power twin: the mechanism claims sigma = 2 but adds sigma = 0.2
    claimed = privacy.dpsgd_epsilon(2.0, DELTA, 1.0, 1)
    rng = np.random.default_rng(2)
    out, inn = gaussian_scores(rng, 0.2, 4000)
    res = epsilon_lower_bound_from_scores(out, inn, delta=DELTA)
    assert res.epsilon_lower > claimed + 1.0


def test_many_run_reversed_score_uses_other_direction():
    rng = np.random.default_rng(3)
    out, inn = gaussian_scores(rng, 0.2, 4000)
    res = epsilon_lower_bound_from_scores(-out, -inn, delta=DELTA)
    assert res.detail("rule") == "present_if_below"
    assert res.epsilon_lower > 3.0


def test_many_run_identical_distributions_give_zero_or_tiny_bound():
    rng = np.random.default_rng(4)
    res = epsilon_lower_bound_from_scores(rng.normal(size=4000), rng.normal(size=4000), delta=DELTA)
    assert res.epsilon_lower < 0.2


def test_grid_selection_union_bound():
    sigma = 1.0
    claimed = privacy.dpsgd_epsilon(sigma, DELTA, 1.0, 1)
    rng = np.random.default_rng(5)
    out, inn = gaussian_scores(rng, sigma, 10_000)
    grid = np.linspace(-1.0, 4.0, 21)  # fixed before the scores
    res = epsilon_lower_bound_from_scores(out, inn, delta=DELTA, selection="grid", thresholds=grid)
    assert res.method == "many_run/grid" and res.detail("num_thresholds") == 21
    assert 0.5 < res.epsilon_lower <= claimed
    # one threshold of the grid reproduces the count bound with the union-bound level
    t = res.detail("threshold")
    fp, fn = int(np.sum(out > t)), int(np.sum(inn <= t))
    if res.detail("rule") == "present_if_below":
        fp, fn = out.size - fp, inn.size - fn
    # 4 x 21 rates at alpha / 84 = the count bound's alpha / (2 num_tests) with num_tests = 42
    direct = epsilon_lower_bound_from_counts(fp, out.size, fn, inn.size, delta=DELTA, num_tests=42)
    assert direct == pytest.approx(res.epsilon_lower, rel=1e-9)


def test_many_run_bound_is_valid_at_stated_confidence_by_repetition():
    # Repeat a small audit of the exact Gaussian mechanism at its TRUE epsilon: the bound may exceed
    # it in at most 5% of repetitions (tolerance: 4 binomial standard errors over 300 repetitions).
    sigma = 1.0
    true_eps = privacy.dpsgd_epsilon(sigma, DELTA, 1.0, 1)
    rng = np.random.default_rng(6)
    reps, over = 300, 0
    for _ in range(reps):
        out, inn = gaussian_scores(rng, sigma, 200)
        over += epsilon_lower_bound_from_scores(out, inn, delta=DELTA).epsilon_lower > true_eps
    assert over / reps <= 0.05 + 4 * math.sqrt(0.05 * 0.95 / reps)


def test_many_run_validation():
    with pytest.raises(ValueError, match="confidence"):
        epsilon_lower_bound_from_scores([0.0, 1.0], [1.0, 2.0], delta=DELTA, confidence=1.0)
    with pytest.raises(ValueError, match="delta"):
        epsilon_lower_bound_from_scores([0.0, 1.0], [1.0, 2.0], delta=1.0)
    with pytest.raises(ValueError, match="finite"):
        epsilon_lower_bound_from_scores([0.0, np.nan], [1.0, 2.0], delta=DELTA)
    with pytest.raises(ValueError, match="thresholds"):
        epsilon_lower_bound_from_scores([0.0, 1.0], [1.0, 2.0], delta=DELTA, selection="grid")
    with pytest.raises(ValueError, match="thresholds"):
        epsilon_lower_bound_from_scores([0.0, 1.0], [1.0, 2.0], delta=DELTA, thresholds=[0.5])
    with pytest.raises(ValueError, match="selection"):
        epsilon_lower_bound_from_scores([0.0, 1.0], [1.0, 2.0], delta=DELTA, selection="best")
    with pytest.raises(ValueError, match="1-D"):
        epsilon_lower_bound_from_scores(np.zeros((2, 2)), [1.0, 2.0], delta=DELTA)


# ------------------------------------------------------------------------------------------------
# one-run audit on randomised response (pure eps, where the bound is tight)


def randomised_response_scores(rng, eps, m):
    """m canaries included w.p. 1/2; the output reports each inclusion bit flipped w.p. 1/(1+e^eps)."""
    included = rng.random(m) < 0.5
    keep = rng.random(m) < math.exp(eps) / (1 + math.exp(eps))
    reported = np.where(keep, included, ~included)
    return reported.astype(float) + 1e-3 * rng.random(m), included  # tiny jitter: ties by chance


def test_one_run_bound_on_randomised_response_is_valid_and_nearly_tight():
    rng = np.random.default_rng(7)
    res = audit_one_run(
        *randomised_response_scores(rng, 2.0, 1000), num_positive_guesses=500, num_negative_guesses=500, delta=0.0
    )
    assert res.method == "one_run" and res.detail("num_guesses") == 1000
    assert 1.5 < res.epsilon_lower <= 2.0


def test_one_run_catches_randomised_response_weaker_than_claimed():
    rng = np.random.default_rng(8)
    res = audit_one_run(
        *randomised_response_scores(rng, 3.0, 1000), num_positive_guesses=500, num_negative_guesses=500, delta=0.0
    )
    assert res.epsilon_lower > 2.0


def test_one_run_bound_counts():
    # all r guesses correct: p* = alpha'^(1/r), eps = logit(p*)
    alpha = 0.05 - 2 * 1000 * DELTA
    p = alpha ** (1 / 400)
    assert one_run_epsilon_lower_bound(1000, 400, 400, delta=DELTA) == pytest.approx(math.log(p / (1 - p)))
    assert one_run_epsilon_lower_bound(1000, 400, 200, delta=DELTA) == 0.0
    assert one_run_epsilon_lower_bound(1000, 0, 0, delta=DELTA) == 0.0
    # more delta only lowers the bound
    assert one_run_epsilon_lower_bound(1000, 400, 380, delta=1e-6) > one_run_epsilon_lower_bound(
        1000, 400, 380, delta=1e-5
    )


def test_one_run_bound_is_valid_at_stated_confidence_by_repetition():
    # at the TRUE epsilon of randomised response the bound exceeds it in <= 5% of repetitions
    rng = np.random.default_rng(9)
    reps, over = 400, 0
    for _ in range(reps):
        s, inc = randomised_response_scores(rng, 1.0, 200)
        res = audit_one_run(s, inc, num_positive_guesses=100, num_negative_guesses=100, delta=0.0)
        over += res.epsilon_lower > 1.0
    assert over / reps <= 0.05 + 4 * math.sqrt(0.05 * 0.95 / reps)


def test_one_run_validation():
    with pytest.raises(ValueError, match="2 \\* num_canaries \\* delta"):
        one_run_epsilon_lower_bound(10_000, 10, 10, delta=1e-5)
    with pytest.raises(ValueError, match="num_correct"):
        one_run_epsilon_lower_bound(10, 5, 6, delta=0.0)
    with pytest.raises(ValueError, match="num_guesses"):
        one_run_epsilon_lower_bound(10, 11, 6, delta=0.0)
    with pytest.raises(ValueError, match="included"):
        audit_one_run([0.0, 1.0], [0, 1], num_positive_guesses=1, num_negative_guesses=1, delta=0.0)
    with pytest.raises(ValueError, match="<= 2 canaries"):
        audit_one_run([0.0, 1.0], np.array([False, True]), num_positive_guesses=2, num_negative_guesses=1, delta=0.0)


def test_analytic_gaussian_consistency_of_claimed_epsilon():
    # the claimed epsilon of one unsampled step is the Gaussian mechanism's: the auditors' reference
    eps = privacy.dpsgd_epsilon(2.0, DELTA, 1.0, 1)
    assert analytic_gaussian_sigma(eps, DELTA) == pytest.approx(2.0, rel=2e-2)


# ------------------------------------------------------------------------------------------------
# audit_many_runs: the vmapped driver


def _jax_gaussian(sigma):
    import jax
    import jax.numpy as jnp

    def run(key, include):
        return jnp.where(include, 1.0, 0.0) + sigma * jax.random.normal(key)

    return run


def test_audit_many_runs_static_and_traced_include_agree():
    from dpposterior.privacy import audit_many_runs

    run = _jax_gaussian(1.0)
    a = audit_many_runs(run, num_runs=2000, delta=DELTA, rng_key=3)
    b = audit_many_runs(run, num_runs=2000, delta=DELTA, rng_key=3, static_include=False)
    assert a.epsilon_lower == pytest.approx(b.epsilon_lower, rel=1e-6)
    assert a.detail("num_runs") == 2000
    assert 0.0 < a.epsilon_lower <= privacy.dpsgd_epsilon(1.0, DELTA, 1.0, 1)


def test_audit_many_runs_validation():
    import jax.numpy as jnp

    from dpposterior.privacy import audit_many_runs

    with pytest.raises(TypeError, match="run must be a callable"):
        audit_many_runs(3.0, num_runs=10, delta=DELTA, rng_key=0)
    with pytest.raises(ValueError, match="num_runs"):
        audit_many_runs(_jax_gaussian(1.0), num_runs=1, delta=DELTA, rng_key=0)
    with pytest.raises(ValueError, match="scalar score"):
        audit_many_runs(lambda k, inc: jnp.zeros(2), num_runs=10, delta=DELTA, rng_key=0)
    with pytest.raises(TypeError, match="static_include"):
        audit_many_runs(_jax_gaussian(1.0), num_runs=10, delta=DELTA, rng_key=0, static_include=1)
