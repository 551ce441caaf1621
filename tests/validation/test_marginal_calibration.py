"""Per-coordinate calibration: marginal TARP RMSE and central-interval coverage.

The statistical checks use fixed seeds and tolerances derived from the number of replicates K:
- a marginal TARP RMSE of a calibrated coordinate lies below sqrt(1.168 / K), the 0.1% critical value
  of the Cramer-von Mises statistic (the squared RMSE over the default alpha grid is that statistic);
- a central 90% coverage of a calibrated coordinate lies within 4 binomial standard errors of 0.9.
The power check is a twin that is over-confident in one narrow coordinate only: the joint TARP stays
below the same bound (the wide coordinates dominate the Euclidean distance) while that coordinate fails
both marginal checks.
"""

import numpy as np
import pytest

import dpposterior.validation as val
from dpposterior.validation import coverage as coverage_module

K, M, R = 400, 400, 5
#: posterior sd of each coordinate: two wide ones and a narrow one
SD = np.array([1.0, 1.0, 0.1])
RMSE_BOUND = np.sqrt(1.168 / K)
COVERAGE_TOL = 4 * np.sqrt(0.9 * 0.1 / K)


def _calibrated(seed, sd_used=SD):
    """Posterior N(centre, SD^2) per coordinate and truths drawn from it (calibrated by construction);
    the draws use ``sd_used`` instead of SD (a miscalibrated twin when they differ)."""
    rng = np.random.default_rng(seed)
    centre = rng.normal(size=(K, SD.size))
    theta = centre + SD * rng.normal(size=(K, SD.size))
    draws = centre[:, None, :] + sd_used * rng.normal(size=(K, M, SD.size))
    refs = val.repeated_reference_points(seed, centre, np.broadcast_to(sd_used, centre.shape), R)
    return draws, theta, refs


def test_calibrated_case_passes_every_marginal():
    draws, theta, refs = _calibrated(0)
    rmse = val.marginal_tarp_rmse(draws, theta, refs)
    assert rmse.shape == (3,)
    assert (rmse < RMSE_BOUND).all(), (rmse, RMSE_BOUND)
    assert val.tarp_coverage_repeats(draws, theta, refs).rmse < RMSE_BOUND
    central = val.central_coverage(draws, theta, level=0.9)
    assert central.coverage.shape == (3,) and central.covered.shape == (K, 3)
    assert (np.abs(central.coverage - 0.9) < COVERAGE_TOL).all(), central.coverage
    np.testing.assert_allclose(central.standard_error, np.sqrt(central.coverage * (1 - central.coverage) / K))


def test_twin_over_confident_in_one_coordinate_is_caught_per_latent():
    sd_twin = SD * np.array([1.0, 1.0, 0.5])  # the narrow coordinate's posterior twice too narrow
    draws, theta, refs = _calibrated(0, sd_twin)
    joint = val.tarp_coverage_repeats(draws, theta, refs).rmse
    assert joint < RMSE_BOUND, joint  # the joint check alone passes it
    rmse = val.marginal_tarp_rmse(draws, theta, refs)
    assert (rmse[:2] < RMSE_BOUND).all() and rmse[2] > 2 * RMSE_BOUND, rmse
    central = val.central_coverage(draws, theta, level=0.9)
    assert (np.abs(central.coverage[:2] - 0.9) < COVERAGE_TOL).all()
    # N(0, 1) truth in an interval of half-width 1.645 / 2: covered with probability 0.59
    assert central.coverage[2] < 0.9 - COVERAGE_TOL, central.coverage


def test_under_confident_coordinate_covers_too_often():
    draws, theta, refs = _calibrated(1, SD * np.array([2.0, 1.0, 1.0]))
    assert val.marginal_tarp_rmse(draws, theta, refs)[0] > RMSE_BOUND
    assert val.central_coverage(draws, theta).coverage[0] > 0.9 + COVERAGE_TOL


def test_marginal_f_equals_the_distance_comparison():
    rng = np.random.default_rng(3)
    draws = rng.normal(size=(50, 120, 4))
    theta = rng.normal(size=(50, 4))
    refs = rng.normal(size=(3, 50, 4))
    f = val.marginal_tarp_f(draws, theta, refs)
    assert f.shape == (3, 50, 4)
    for r in range(3):
        np.testing.assert_array_equal(f[r], val.marginal_coverage(draws, theta, refs[r]).f)
        np.testing.assert_array_equal(val.marginal_tarp_f(draws, theta, refs[r]), f[r])


def test_marginal_f_ties_are_not_closer():
    # integer points: many draws exactly as far from the reference as the truth; strict rule
    rng = np.random.default_rng(4)
    draws = rng.integers(-3, 4, size=(40, 30, 2)).astype(float)
    theta = rng.integers(-3, 4, size=(40, 2)).astype(float)
    refs = rng.integers(-2, 3, size=(40, 2)).astype(float)
    loop = np.mean(np.abs(draws - refs[:, None]) < np.abs(theta - refs)[:, None], axis=1)
    np.testing.assert_array_equal(val.marginal_tarp_f(draws, theta, refs), loop)
    same = val.marginal_tarp_f(draws, refs, refs)  # truth at the reference: no draw is closer
    assert (same == 0).all()


def test_one_coordinate_equals_the_joint_rmse():
    rng = np.random.default_rng(5)
    draws = rng.integers(-5, 6, size=(60, 50, 1)).astype(float)
    theta = rng.integers(-5, 6, size=(60, 1)).astype(float)
    refs = rng.integers(-4, 5, size=(4, 60, 1)).astype(float)
    joint = val.tarp_coverage_repeats(draws, theta, refs).rmse
    np.testing.assert_array_equal(val.marginal_tarp_rmse(draws, theta, refs), [joint])


def test_chunking_does_not_change_results(monkeypatch):
    draws, theta, refs = _calibrated(6)
    draws = draws[:37, :50]
    theta, refs = theta[:37], refs[:, :37]
    whole_f = val.marginal_tarp_f(draws, theta, refs)
    whole_c = val.central_coverage(draws, theta).covered
    monkeypatch.setattr(coverage_module, "_CHUNK_BYTES", 50 * 3 * 8 * 4)  # 4 replicates a chunk
    np.testing.assert_array_equal(val.marginal_tarp_f(draws, theta, refs), whole_f)
    np.testing.assert_array_equal(val.central_coverage(draws, theta).covered, whole_c)


def test_central_coverage_equals_a_plain_loop():
    rng = np.random.default_rng(7)
    draws = rng.gamma(2.0, size=(30, 101, 2)).astype(np.float32)
    theta = rng.gamma(2.0, size=(30, 2))
    result = val.central_coverage(draws, theta, level=0.8)
    for i in range(30):
        for j in range(2):
            lo, hi = np.quantile(draws[i, :, j].astype(np.float64), [0.1, 0.9])
            assert result.covered[i, j] == (lo <= theta[i, j] <= hi)
    assert result.level == 0.8


@pytest.mark.parametrize("level", [0.0, 1.0, 1.5, -0.1, float("nan")])
def test_central_coverage_refuses_levels_outside_the_open_unit_interval(level):
    with pytest.raises(ValueError, match=r"level .* open interval \(0, 1\)"):
        val.central_coverage(np.zeros((2, 3, 1)), np.zeros((2, 1)), level=level)


def test_marginal_errors_name_the_argument_and_what_is_allowed():
    d, t = np.zeros((4, 5, 2)), np.zeros((4, 2))
    with pytest.raises(TypeError, match="level must be a real number"):
        val.central_coverage(d, t, level=True)
    with pytest.raises(ValueError, match=r"theta_true must have shape \(K, n\) = \(4, 2\)"):
        val.central_coverage(d, np.zeros((4, 3)))
    with pytest.raises(ValueError, match=r"draws must have shape \(K, M, n\)"):
        val.central_coverage(np.zeros((4, 5)), t)
    with pytest.raises(ValueError, match=r"references must have shape \(R, K, n\)"):
        val.marginal_tarp_rmse(d, t, np.zeros((3, 4, 3)))
    with pytest.raises(ValueError, match=r"references must have shape \(K, n\)"):
        val.marginal_tarp_rmse(d, t, np.zeros((4, 3)))
    bad = d.copy()
    bad[2, 1, 0] = np.nan
    with pytest.raises(ValueError, match=r"draws must be finite, but they hold NaN at index \(2, 1, 0\)"):
        val.marginal_tarp_f(bad, t, t)
    with pytest.raises(ValueError, match=r"draws must be finite"):
        val.central_coverage(bad, t)
    with pytest.raises(ValueError, match="overflows float64"):
        val.marginal_tarp_f(d, np.full((4, 2), 1e308), np.full((4, 2), -1e308))
