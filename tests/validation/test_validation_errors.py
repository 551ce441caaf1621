"""Wrong inputs raise TypeError/ValueError with a message that says what was given and what is allowed."""

import re

import numpy as np
import pytest

import dpposterior.validation as val

K, M, N_PARAMS = 6, 5, 2


def _ok():
    rng = np.random.default_rng(0)
    return rng.normal(size=(K, M, N_PARAMS)), rng.normal(size=(K, N_PARAMS)), rng.normal(size=(K, N_PARAMS))


def _with_nan(a, index):
    a = a.copy()
    a[index] = np.nan
    return a


@pytest.mark.parametrize(
    "make, error, message",
    [
        (lambda d, t, r: (d[0], t, r), ValueError, r"draws must have shape \(K, M, n\).*got shape \(5, 2\)"),
        (
            lambda d, t, r: (d, t[:4], r),
            ValueError,
            r"theta_true must have shape \(K, n\) = \(6, 2\).*got shape \(4, 2\)",
        ),
        (
            lambda d, t, r: (d, t, r[:, :1]),
            ValueError,
            r"references must have shape \(K, n\) = \(6, 2\).*got shape \(6, 1\)",
        ),
        (lambda d, t, r: (d[:, :0], t, r), ValueError, r"draws must not be empty: got shape \(6, 0, 2\)"),
        (lambda d, t, r: (d[:0], t[:0], r[:0]), ValueError, r"draws must not be empty"),
        (
            lambda d, t, r: (_with_nan(d, (3, 1, 0)), t, r),
            ValueError,
            r"draws must be finite.*NaN at index \(3, 1, 0\)",
        ),
        (lambda d, t, r: (d, _with_nan(t, (2, 1)), r), ValueError, r"theta_true must be finite.*NaN at index \(2, 1\)"),
        (lambda d, t, r: (d, t, np.full_like(r, np.inf)), ValueError, r"references must be finite.*infinite"),
        (lambda d, t, r: ({"w": d}, t, r), TypeError, r"draws must be an array of real numbers, got a dict"),
        (lambda d, t, r: (d.astype(complex), t, r), TypeError, r"draws must be an array of real numbers.*complex"),
        (lambda d, t, r: (d, t > 0, r), TypeError, r"theta_true must be an array of real numbers.*bool"),
    ],
)
def test_tarp_input_errors(make, error, message):
    d, t, r = make(*_ok())
    for function in (val.tarp_coverage, val.marginal_coverage, val.tarp_f_values):
        with pytest.raises(error, match=message):
            function(d, t, r)


def test_nan_in_a_later_chunk_names_the_replicate(monkeypatch):
    from dpposterior.validation import coverage as coverage_module  # noqa: PLC0415

    monkeypatch.setattr(coverage_module, "_CHUNK_BYTES", 2 * M * N_PARAMS * 8)  # 2 replicates a chunk
    d, t, r = _ok()
    with pytest.raises(ValueError, match=re.escape("NaN at index (5, 4, 1)")):
        val.tarp_coverage(_with_nan(d, (5, 4, 1)), t, r)


@pytest.mark.parametrize(
    "alpha, message",
    [
        ([0.0, 0.5], r"alpha must lie in the open interval \(0, 1\), got \[0.0\]"),
        ([0.5, 1.0], r"alpha must lie in the open interval \(0, 1\), got \[1.0\]"),
        ([-0.1], r"open interval \(0, 1\)"),
        ([0.2, np.nan], r"alpha must not contain NaN"),
        ([], r"alpha must not be empty"),
        ([[0.1, 0.2]], r"alpha must be a 1-D array.*got shape \(1, 2\)"),
        (0.05, r"alpha must be a 1-D array.*got shape \(\)"),
    ],
)
def test_alpha_errors(alpha, message):
    d, t, r = _ok()
    with pytest.raises(ValueError, match=message):
        val.tarp_coverage(d, t, r, alpha=alpha)
    with pytest.raises(ValueError, match=message):
        val.coverage_from_f(np.linspace(0, 1, 5), alpha)
    with pytest.raises(ValueError, match=message):
        val.coverage_rmse(alpha, [0.5, 0.5])


def test_bootstrap_and_band_errors():
    d, t, r = _ok()
    with pytest.raises(ValueError, match=r"bootstrap must be an integer >= 0, got -1"):
        val.tarp_coverage(d, t, r, bootstrap=-1)
    with pytest.raises(TypeError, match=r"bootstrap must be an integer >= 0, got 2.5"):
        val.tarp_coverage(d, t, r, bootstrap=2.5)
    with pytest.raises(ValueError, match=r"band_level must lie in the open interval \(0, 1\), got 1.0"):
        val.tarp_coverage(d, t, r, bootstrap=10, rng_key=0, band_level=1.0)
    with pytest.raises(TypeError, match=r"rng_key must be None"):
        val.tarp_coverage(d, t, r, bootstrap=10, rng_key="seed")


def test_repeats_and_f_errors():
    d, t, r = _ok()
    expected = r"references must have shape \(R, K, n\) = \(R, 6, 2\).*got shape \(6, 2\)"
    with pytest.raises(ValueError, match=expected):
        val.tarp_coverage_repeats(d, t, r)
    with pytest.raises(ValueError, match=r"references must not be empty"):
        val.tarp_coverage_repeats(d, t, r[None][:0])
    with pytest.raises(ValueError, match=r"f must hold shares in \[0, 1\]"):
        val.coverage_from_f([0.2, 1.5])
    with pytest.raises(ValueError, match=r"f must be finite.*NaN"):
        val.coverage_from_f([0.2, np.nan])
    with pytest.raises(ValueError, match=r"f must not be empty"):
        val.coverage_from_f([])


def test_coverage_rmse_errors():
    alpha = np.array([0.1, 0.5, 0.9])
    expected = r"coverage must have shape \(\.\.\., A\) with A = 3.*got shape \(2,\)"
    with pytest.raises(ValueError, match=expected):
        val.coverage_rmse(alpha, [0.9, 0.5])
    with pytest.raises(ValueError, match=r"coverage must hold probabilities in \[0, 1\]"):
        val.coverage_rmse(alpha, [0.9, 0.5, 1.2])
    with pytest.raises(ValueError, match=r"coverage must be finite"):
        val.coverage_rmse(alpha, [0.9, np.nan, 0.1])


def test_reference_point_errors():
    c = np.zeros((4, 2))
    s = np.ones((4, 2))
    with pytest.raises(ValueError, match=r"scale must have the shape of center, \(4, 2\).*got shape \(4,\)"):
        val.reference_points(0, c, s[:, 0])
    with pytest.raises(ValueError, match=r"scale holds posterior standard deviations and must be > 0"):
        val.reference_points(0, c, -s)
    with pytest.raises(ValueError, match=r"center must be finite.*NaN"):
        val.reference_points(0, np.full((4, 2), np.nan), s)
    with pytest.raises(ValueError, match=r"center and scale must not be empty"):
        val.reference_points(0, c[:0], s[:0])
    with pytest.raises(ValueError, match=r"low and high must be finite with low < high"):
        val.reference_points(0, c, s, low=1.0, high=1.0)
    with pytest.raises(ValueError, match=r"repeats must be an integer >= 1, got 0"):
        val.repeated_reference_points(0, c, s, repeats=0)
    with pytest.raises(TypeError, match=r"rng_key must be None"):
        val.reference_points(1.5, c, s)


@pytest.mark.parametrize(
    "p, y, bins, error, message",
    [
        ([0.1, 1.2], [0, 1], 1, ValueError, r"probabilities must lie in \[0, 1\], got 1.2 at index 1"),
        ([0.1, np.nan], [0, 1], 1, ValueError, r"probabilities must not contain NaN \(first at index 1\)"),
        ([0.1, 0.2], [0, 2], 1, ValueError, r"outcomes must be 0 or 1 \(or booleans\), got 2.0 at index 1"),
        ([0.1, 0.2], [0, np.nan], 1, ValueError, r"outcomes must not contain NaN"),
        ([0.1, 0.2], [0, 1, 1], 1, ValueError, r"same length, got 3 outcomes and 2 probabilities"),
        ([], [], 1, ValueError, r"probabilities must not be empty"),
        ([[0.1, 0.2]], [[0, 1]], 1, ValueError, r"probabilities must be a 1-D array.*got shape \(1, 2\)"),
        ([0.1, 0.2], [0, 1], 3, ValueError, r"bins must be at most the number of predictions \(2\).*got 3"),
        ([0.1, 0.2], [0, 1], 0, ValueError, r"bins must be an integer >= 1, got 0"),
        ([0.1, 0.2], [0, 1], 2.0, TypeError, r"bins must be an integer >= 1, got 2.0"),
        (["a", "b"], [0, 1], 1, TypeError, r"probabilities must be an array of real numbers"),
    ],
)
def test_calibration_errors(p, y, bins, error, message):
    with pytest.raises(error, match=message):
        val.calibration_curve(p, y, bins=bins)


def _masked(a, index):
    mask = np.zeros(np.shape(a), bool)
    mask[index] = True
    return np.ma.masked_array(a, mask=mask)


def test_masked_entries_are_refused_not_used():
    """Twenty-first session: ``np.asarray`` dropped a masked array's mask, so the values under it were used:
    draws with one replicate's draws masked gave the same f as unmasked ones (0.78 0.37 0.9 0.56 0.78 on
    the probe); outcomes [0, 0, 1, 5] with the 5 masked were refused as "got 5.0 at index 3", and with a
    masked 1 used as 1. Now a ValueError says how many values are masked; a mask with nothing masked is
    fine."""
    d, t, r = _ok()
    calls = [
        ("draws", lambda: val.tarp_coverage(_masked(d, (1, 2, 0)), t, r)),
        ("theta_true", lambda: val.marginal_coverage(d, _masked(t, (0, 0)), r)),
        ("references", lambda: val.tarp_f_values(d, t, _masked(r, (0, 1)))),
        ("f", lambda: val.coverage_from_f(_masked(np.full(4, 0.5), 2))),
        ("coverage", lambda: val.coverage_rmse([0.5], _masked(np.array([0.5]), 0))),
        ("center", lambda: val.reference_points(0, _masked(t, (3, 1)), np.ones_like(t))),
        ("probabilities", lambda: val.calibration_curve(_masked(np.full(4, 0.5), 1), [0, 1, 0, 1], bins=2)),
        ("outcomes", lambda: val.calibration_curve([0.1, 0.2, 0.3, 0.4], _masked(np.array([0, 0, 1, 1]), 3), bins=2)),
        (
            "outcomes",
            lambda: val.calibration_curve([0.1, 0.2, 0.3, 0.4], _masked(np.array([0, 0, 1, 1], bool), 3), bins=2),
        ),
    ]
    for name, call in calls:
        with pytest.raises(ValueError, match=rf"^{name} is a masked array with 1 masked value\(s\)"):
            call()
    unmasked = np.ma.masked_array(d, mask=False)
    assert np.array_equal(val.tarp_f_values(unmasked, t, r), val.tarp_f_values(d, t, r))
