"""Calibration curve: equal-count bins, hand-computed values, and a calibrated/miscalibrated pair."""

import numpy as np
import pytest

import dpposterior.validation as val

N = 20_000
BINS = 10


def _synthetic(seed):
    rng = np.random.default_rng(seed)
    p = rng.uniform(size=N)
    y = (rng.uniform(size=N) < p).astype(int)  # outcomes ~ Bernoulli(p): p is calibrated
    return p, y


def test_hand_computed_curve_and_brier():
    p = np.array([0.3, 0.1, 0.4, 0.2])
    y = np.array([0, 0, 1, 1])
    result = val.calibration_curve(p, y, bins=2)
    np.testing.assert_allclose(result.mean_predicted, [0.15, 0.35])
    np.testing.assert_allclose(result.observed_frequency, [0.5, 0.5])
    np.testing.assert_array_equal(result.counts, [2, 2])
    np.testing.assert_allclose(result.bin_lower, [0.1, 0.3])
    np.testing.assert_allclose(result.bin_upper, [0.2, 0.4])
    assert result.rmse == pytest.approx(np.sqrt((0.35**2 + 0.15**2) / 2))
    assert result.brier == pytest.approx((0.3**2 + 0.1**2 + 0.6**2 + 0.8**2) / 4)
    assert not result.weighted


def test_brier_score_by_hand():
    p = [0.1, 0.8, 0.5, 1.0]
    y = [False, True, True, False]  # booleans are accepted
    assert val.calibration_curve(p, y, bins=1).brier == pytest.approx((0.01 + 0.04 + 0.25 + 1.0) / 4)


def test_weighted_rmse_weights_bins_by_count():
    p = np.array([0.1, 0.2, 0.9])
    y = np.array([1, 1, 1])
    # bins: [0.1, 0.2] (2 predictions, gap 0.85), [0.9] (1 prediction, gap 0.1)
    plain = val.calibration_curve(p, y, bins=2)
    weighted = val.calibration_curve(p, y, bins=2, weighted=True)
    np.testing.assert_array_equal(plain.counts, [2, 1])
    assert plain.rmse == pytest.approx(np.sqrt((0.85**2 + 0.1**2) / 2))
    assert weighted.rmse == pytest.approx(np.sqrt((2 * 0.85**2 + 0.1**2) / 3))
    assert weighted.weighted


@pytest.mark.parametrize("n", [100, 103, 109])
def test_bins_have_equal_counts_and_are_ordered(n):
    rng = np.random.default_rng(n)
    # Many ties: probabilities on a coarse grid.
    p = rng.integers(0, 7, size=n) / 6
    y = rng.integers(0, 2, size=n)
    result = val.calibration_curve(p, y, bins=BINS)
    assert result.counts.sum() == n
    assert result.counts.max() - result.counts.min() <= (0 if n % BINS == 0 else 1)
    assert np.all(result.bin_upper[:-1] <= result.bin_lower[1:])
    assert np.all(np.diff(result.mean_predicted) >= 0)
    # Each bin is a block of the sorted predictions (quantile bins).
    sorted_p = np.sort(p)
    bounds = np.concatenate([[0], np.cumsum(result.counts)])
    for b in range(BINS):
        assert result.mean_predicted[b] == pytest.approx(sorted_p[bounds[b] : bounds[b + 1]].mean())


def test_ties_across_a_bin_boundary_do_not_depend_on_the_input_order():
    # Six predictions of 0.5, three positive: perfectly calibrated. With 2 bins the boundary cuts the
    # tie; the observed frequencies were [1, 0] (RMSE 0.5) or [0, 1] by the order of the input.
    p = np.full(6, 0.5)
    for y in ([1, 1, 1, 0, 0, 0], [0, 0, 0, 1, 1, 1], [1, 0, 1, 0, 1, 0]):
        result = val.calibration_curve(p, y, bins=2)
        np.testing.assert_allclose(result.observed_frequency, [0.5, 0.5])
        assert result.rmse == pytest.approx(0.0)
    # a tie of four at 0.3 (outcomes 1, 1, 0, 0) split 2 / 2: each bin gets the tie's mean, 0.5
    p = np.array([0.1, 0.1, 0.3, 0.3, 0.3, 0.3, 0.8, 0.8])
    y = np.array([0, 0, 1, 1, 0, 0, 1, 1])
    expected = [(0 + 0 + 0.5 + 0.5) / 4, (0.5 + 0.5 + 1 + 1) / 4]
    rng = np.random.default_rng(0)
    for _ in range(5):
        perm = rng.permutation(p.shape[0])
        result = val.calibration_curve(p[perm], y[perm], bins=2)
        np.testing.assert_allclose(result.observed_frequency, expected)
        np.testing.assert_allclose(result.mean_predicted, [0.2, 0.55])
    # without ties nothing changes: the hand-computed curve above, and one bin is the plain mean
    assert val.calibration_curve(p, y, bins=1).observed_frequency[0] == pytest.approx(0.5)


def test_calibrated_predictor_has_small_rmse():
    p, y = _synthetic(0)
    result = val.calibration_curve(p, y, bins=BINS)
    # Each bin holds N / BINS = 2000 outcomes; its observed frequency differs from its mean
    # prediction only by binomial noise, sd <= sqrt(0.25 / 2000) = 0.0112. Three such sd bound the
    # RMSE over the bins with a wide margin (RMSE^2 / sd^2 is at most chi2_10 / 10 in distribution).
    sd = np.sqrt(0.25 / (N / BINS))
    assert result.rmse <= 3 * sd
    assert np.all(np.abs(result.observed_frequency - result.mean_predicted) <= 4 * sd)
    assert result.brier == pytest.approx(np.mean((p - y) ** 2))


@pytest.mark.parametrize(
    "miscalibrate",
    [lambda p: p**2, lambda p: np.clip(0.5 + 2 * (p - 0.5), 0.0, 1.0)],
    ids=["squared", "overconfident"],
)
def test_miscalibrated_predictor_is_caught(miscalibrate):
    p, y = _synthetic(1)
    reported = miscalibrate(p)
    result = val.calibration_curve(reported, y, bins=BINS)
    sd = np.sqrt(0.25 / (N / BINS))
    # The power check: the same bar as the calibrated test fails here by a wide margin
    # (measured RMSE 0.18 for p^2 and 0.13 for the stretched predictor; 0.010 when calibrated).
    assert result.rmse > 0.1
    assert result.rmse > 3 * sd
    calibrated = val.calibration_curve(p, y, bins=BINS)
    assert result.brier > calibrated.brier


def test_tied_curve_is_the_average_over_every_input_order():
    """The documented curve (each tied prediction counts with its tie's mean
    outcome) equals the average, over all orders of the input, of a naive stable-sort equal-count
    curve: all probabilities equal, two distinct values, ties across edges, bins = 1 and bins = n."""
    import itertools

    def naive(p, y, bins):
        groups = np.array_split(np.argsort(p, kind="stable"), bins)
        return np.array([y[g].mean() for g in groups])

    cases = [
        ([0.5] * 6, [1, 1, 1, 0, 0, 0], 2),
        ([0.3] * 5, [1, 0, 0, 0, 1], 3),
        ([0.2, 0.8, 0.2, 0.8, 0.2], [1, 1, 0, 0, 0], 4),
        ([0.0, 1.0, 0.0, 1.0, 1.0], [0, 1, 1, 1, 0], 2),
        ([0.4, 0.4, 0.6], [1, 0, 1], 1),
        ([0.1, 0.1, 0.9], [1, 0, 1], 3),
    ]
    for p, y, bins in cases:
        p, y = np.array(p), np.array(y, dtype=float)
        perms = [np.array(q) for q in itertools.permutations(range(p.size))]
        expected = np.mean([naive(p[q], y[q], bins) for q in perms], axis=0)
        result = val.calibration_curve(p, y.astype(bool), bins)
        np.testing.assert_allclose(result.observed_frequency, expected, atol=1e-12)
        assert result.brier == pytest.approx(np.mean((p - y) ** 2), rel=1e-12)
    with pytest.raises(ValueError, match="outcomes must be 0 or 1"):
        val.calibration_curve([0.2, 0.5, 0.9], [-1, 1, 1], 2)


def test_a_numpy_boolean_weighted_flag_is_the_bool_it_holds():
    """``weighted=np.True_`` (a flag read from a numpy array or a pandas column) was
    refused as "weighted must be True or False, got np.True_", unlike the package's other flags."""
    p, y = np.linspace(0.05, 0.95, 7), np.array([0, 0, 1, 0, 1, 1, 1])
    for flag in (np.True_, np.False_):
        got = val.calibration_curve(p, y, bins=3, weighted=flag)
        want = val.calibration_curve(p, y, bins=3, weighted=bool(flag))
        assert got.rmse == want.rmse and got.weighted is bool(flag)
    assert val.calibration_curve(p, y, bins=3, weighted=True).rmse != val.calibration_curve(p, y, bins=3).rmse
    with pytest.raises(TypeError, match="weighted must be True or False, got 1"):
        val.calibration_curve(p, y, bins=3, weighted=1)
