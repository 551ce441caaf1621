"""Empirical privacy audit of ``vi.gradient_norm_histogram`` (the clip check's Laplace histogram).

The claim: each record's beta-scaled gradient norm falls into exactly one bin (norm bins at multiples of
C, or the bin of non-finite gradients), so adding or removing one record changes one count by 1 (L1
sensitivity 1 under add/remove-one), and Laplace noise of scale 1 / epsilon on every count makes the
release epsilon-DP (pure). The audit checks the two halves separately, because a release through the
public function costs about 0.1 s (the model checks run every call):

(a) sensitivity, through the REAL public function: neighbouring datasets D and D' = D + one canary
    record, released at epsilon 1e6 (noise scale 1e-6), give exact counts at L1 distance exactly 1,
    one bin apart (for a DPVI trace, and for a DPVIm release, checked on its loc gradients);
(b) noise: thousands of runs of the release step ``clip_check._noisy_counts`` (the function that
    ``gradient_norm_histogram`` calls; test ``test_public_release_is_the_audited_release_step``) on
    the two exact count vectors from (a), scored by the canary's bin count, audited by
    ``epsilon_lower_bound_from_scores`` at 95%: the lower bound must stay at or below the claim;
(c) positive control: the release step run at 2 epsilon (half the noise) while claiming epsilon must
    give a lower bound above the claim.

Score: the noisy count of the canary's bin. The other counts have the same distribution on D and D',
and the Laplace log-likelihood ratio of that coordinate, (|x - c| - |x - c - 1|) / b, is a
non-decreasing function of it: a threshold on the count is the Neyman-Pearson test (ties aside).
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

import clip_check_models
from clip_check_models import Y, location, log_location
from dpposterior.privacy import epsilon_lower_bound_from_scores
from dpposterior.privacy.secure import resolve_noise_source
from dpposterior.vi import gradient_norm_histogram
from dpposterior.vi import clip_check
from dpposterior.vi.clip_check import BATCH_RECORDS, _noisy_counts
from dpposterior.vi.dpvi import dpvi

DELTA = 0.0  # the claim is pure epsilon-DP
CONFIDENCE = 0.95
HUGE_EPSILON = 1e6  # noise scale 1e-6: the released counts are the exact ones to float32 noise
CANARY = 1e3  # a far outlier: norm 1000 C, bin [4C, inf) (index 5)
CANARY_BIN = 5


@pytest.fixture(scope="module")
def location_trace():
    """tests/clip_check_models.py: record i's gradient norm is |y_i| at this trace's final iterate."""
    return clip_check_models.point_trace()


@pytest.fixture(scope="module")
def log_trace():
    y = np.array([1.0, 2.0, 0.5, 3.0], np.float32)
    return dpvi(log_location, y, epsilon=1.0, delta=1e-5, num_steps=12, sampling_rate=0.5, clip=1.0, rng_key=0), y


def exact_counts(trace, model, y):
    """The exact histogram through the public function: released at epsilon 1e6 and rounded."""
    h = gradient_norm_histogram(trace, model, y, epsilon=HUGE_EPSILON, rng_key=0)
    exact = np.round(h.counts)
    assert np.max(np.abs(h.counts - exact)) < 1e-3  # Laplace(1e-6) noise: nowhere near half a count
    return exact


@pytest.fixture(scope="module")
def neighbours(location_trace):
    """(exact counts on D, on D' = D + canary, public N): the pair the noise audit runs on."""
    without = exact_counts(location_trace, location, Y)
    with_c = exact_counts(location_trace, location, np.r_[Y, CANARY].astype(np.float32))
    return without, with_c, int(location_trace.dataset_size)


# ------------------------------------------------------------------------------------------------
# (a) sensitivity through the public function


def test_one_outlier_record_changes_one_bin_by_one(neighbours):
    without, with_c, _ = neighbours
    np.testing.assert_array_equal(without, [1, 1, 2, 1, 1, 3, 0])
    diff = with_c - without
    assert np.sum(np.abs(diff)) == 1.0  # L1 distance exactly 1 ...
    assert np.flatnonzero(diff).tolist() == [CANARY_BIN]  # ... in the canary's bin, [4C, inf)


def test_one_non_finite_record_changes_only_the_non_finite_bin(log_trace):
    trace, y = log_trace
    without = exact_counts(trace, log_location, y)
    with_c = exact_counts(trace, log_location, np.r_[y, -1.0].astype(np.float32))  # LogNormal at -1: NaN gradient
    assert without[-1] == 0 and np.sum(without) == y.size
    diff = with_c - without
    assert np.sum(np.abs(diff)) == 1.0
    assert np.flatnonzero(diff).tolist() == [diff.size - 1]


def test_removing_a_record_across_a_batch_boundary_changes_one_bin_by_one(location_trace, monkeypatch):
    # D' has one batch of BATCH_RECORDS records and the canary alone in a padded second batch: the
    # batching neither drops the canary nor counts its padding copies. The data outnumber the trace's
    # public N, which the release clamps every count to, so the counts are read before the release step.
    monkeypatch.setattr(clip_check, "_noisy_counts", lambda counts, *a: (counts, 1.0, ()))
    y = np.resize(Y, BATCH_RECORDS)
    without = gradient_norm_histogram(location_trace, location, y, epsilon=1.0, rng_key=0).counts
    with_c = gradient_norm_histogram(
        location_trace, location, np.r_[y, CANARY].astype(np.float32), epsilon=1.0, rng_key=0
    ).counts
    assert np.sum(without) == BATCH_RECORDS
    diff = with_c - without
    assert np.sum(np.abs(diff)) == 1.0 and np.flatnonzero(diff).tolist() == [CANARY_BIN]


def test_a_dpvim_release_has_the_same_sensitivity_and_release_step():
    # a DPVIm release is checked on its own per-record vector (the loc gradient): one outlier record still
    # moves one count by one, and the counts are the same audited release step of the exact ones
    trace = clip_check_models.dpvim_point_trace()
    without = exact_counts(trace, location, Y)
    with_c = exact_counts(trace, location, np.r_[Y, CANARY].astype(np.float32))
    np.testing.assert_array_equal(without, [1, 1, 2, 1, 1, 3, 0])
    diff = with_c - without
    assert np.sum(np.abs(diff)) == 1.0 and np.flatnonzero(diff).tolist() == [CANARY_BIN]
    h = gradient_norm_histogram(trace, location, Y, epsilon=1.0, rng_key=5)
    raw, _ = resolve_noise_source(5, False)
    _, k_noise = jax.random.split(jax.random.wrap_key_data(raw))
    np.testing.assert_array_equal(h.counts, _noisy_counts(without, 1.0, k_noise, int(trace.dataset_size))[0])


# ------------------------------------------------------------------------------------------------
# (b), (c) the noise: many runs of the release step


def test_public_release_is_the_audited_release_step(location_trace, neighbours):
    """gradient_norm_histogram's counts are _noisy_counts of the exact counts with the key it derives."""
    without, _, n = neighbours
    for seed in (3, 4):
        h = gradient_norm_histogram(location_trace, location, Y, epsilon=1.0, rng_key=seed)
        raw, _ = resolve_noise_source(seed, False)
        _, k_noise = jax.random.split(jax.random.wrap_key_data(raw))
        noisy, scale, extra = _noisy_counts(without, 1.0, k_noise, n)
        np.testing.assert_array_equal(h.counts, noisy)
        assert (
            h.noise_scale == scale and 1.0 <= scale < 1.0 + 1e-9 and dict(extra)["snapping_grid"] == 2.0
        )  # the power of two >= the scale


def canary_bin_scores(counts, epsilon, num_runs, seed, num_records):
    """The canary bin's noisy count in ``num_runs`` default-mode releases (independent JAX keys)."""
    keys = jax.random.split(jax.random.key(seed), num_runs)
    return np.array([_noisy_counts(counts, epsilon, k, num_records)[0][CANARY_BIN] for k in keys])


def audit(neighbours, *, run_epsilon, num_runs, seed):
    without, with_c, n = neighbours
    s_out = canary_bin_scores(without, run_epsilon, num_runs, seed, n)
    s_in = canary_bin_scores(with_c, run_epsilon, num_runs, seed + 1, n)
    return epsilon_lower_bound_from_scores(s_out, s_in, delta=DELTA, confidence=CONFIDENCE)


# 2,000 runs per dataset: enough for the power asserted, short enough for the default run
@pytest.mark.parametrize("epsilon, seed, power", [(1.0, 11, 0.3), (2.0, 13, 1.0)])
def test_release_audit_stays_at_or_below_the_claim(neighbours, epsilon, seed, power):
    res = audit(neighbours, run_epsilon=epsilon, num_runs=2000, seed=seed)
    print(f"clip-check histogram audit: claimed {epsilon}, lower bound {res.epsilon_lower:.3f}")
    assert res.epsilon_lower <= epsilon
    assert res.epsilon_lower > power  # the audit sees the canary: most of the claim is shown


@pytest.mark.parametrize("epsilon, seed", [(1.0, 17), (2.0, 19)])
def test_positive_control_half_the_noise_is_caught(neighbours, epsilon, seed):
    # a broken release: noise of scale 1 / (2 epsilon) while claiming epsilon
    res = audit(neighbours, run_epsilon=2 * epsilon, num_runs=2000, seed=seed)
    print(f"clip-check control (half noise): claimed {epsilon}, lower bound {res.epsilon_lower:.3f}")
    assert res.epsilon_lower > epsilon


@pytest.mark.slow
def test_release_audit_many_runs(neighbours):
    res = audit(neighbours, run_epsilon=1.0, num_runs=40_000, seed=23)
    print(f"clip-check histogram audit, 40,000 runs: claimed 1.0, lower bound {res.epsilon_lower:.3f}")
    assert 0.85 < res.epsilon_lower <= 1.0


# ------------------------------------------------------------------------------------------------
# secure mode (the snapping mechanism on [0, N])


def test_secure_releases_on_neighbours_have_the_documented_form(location_trace, neighbours):
    without, with_c, n = neighbours
    for y, exact in ((Y, without), (np.r_[Y, CANARY].astype(np.float32), with_c)):
        h = gradient_norm_histogram(location_trace, location, y, epsilon=1e4, secure=True)
        details = dict(h.privacy.details)
        assert h.privacy.seeded_by == "secure" and h.privacy.epsilon == 1e4 and h.privacy.delta == 0.0
        assert "snapping" in details and details["sensitivity_l1"] == 1.0
        grid = details["snapping_grid"]
        np.testing.assert_allclose(np.round(h.counts / grid) * grid, h.counts, rtol=0, atol=1e-12)  # on the grid
        assert np.all((h.counts >= 0) & (h.counts <= n))  # clamped to the public range [0, N]
        np.testing.assert_allclose(h.counts, exact, atol=1e-2)
        assert h.noise_scale >= 1e-4  # the noise's own epsilon is at most the claim


def snapped_scores(counts, epsilon, num_runs, seed, num_records):
    """The canary bin's count in ``num_runs`` snapped releases, their bits from a JAX key (reproducible)."""
    keys = jax.random.key_data(jax.random.split(jax.random.key(seed), num_runs))
    return np.array([_noisy_counts(counts, epsilon, np.asarray(k), num_records)[0][CANARY_BIN] for k in keys])


@pytest.mark.slow
@pytest.mark.parametrize("run_factor, seed", [(1.0, 29), (2.0, 31)])
def test_secure_release_audit(neighbours, run_factor, seed):
    # snapping on [0, N] at epsilon 1 (factor 1: honest, the bound stays at or below 1) and at 2 while
    # claiming 1 (factor 2: the control, caught); 2,000 runs per dataset, about 2 ms a release (7 s a test)
    without, with_c, n = neighbours
    s_out = snapped_scores(without, run_factor, 2000, seed, n)
    s_in = snapped_scores(with_c, run_factor, 2000, seed + 1, n)
    res = epsilon_lower_bound_from_scores(s_out, s_in, delta=DELTA, confidence=CONFIDENCE)
    print(f"clip-check secure audit, run at {run_factor} claiming 1: lower bound {res.epsilon_lower:.3f}")
    if run_factor == 1.0:
        assert 0.4 < res.epsilon_lower <= 1.0
    else:
        assert res.epsilon_lower > 1.0
