"""Wrong inputs raise TypeError/ValueError with a message that says what was given and what is allowed."""

import math
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import dpposterior.validation as val
from dpposterior import validation
from dpposterior.validation import calibration_curve, tarp_coverage
from input_checks import CLEAR, FAST, raises_clear
from input_checks import raises_with as _raises

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
    """``np.asarray`` drops a masked array's mask, so the values under it would be used:
    draws with one replicate's draws masked gave the same f as unmasked ones (0.78 0.37 0.9 0.56 0.78 in
    one example); outcomes [0, 0, 1, 5] with the 5 masked were refused as "got 5.0 at index 3", and with a
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


CENTER = np.zeros((3, 2))
SCALE = np.ones((3, 2))


@pytest.mark.parametrize("low,high", [(-1e39, 0.0), (-3e38, 3e38)])
def test_reference_offsets_beyond_float32_are_refused_not_nan(low, high):
    # were NaN reference points (the offsets are drawn in float32)
    _raises(lambda: validation.reference_points(0, CENTER, SCALE, low=low, high=high), ValueError, "float32", "low")
    _raises(
        lambda: validation.repeated_reference_points(0, CENTER, SCALE, 2, low=low, high=high), ValueError, "float32"
    )


def test_reference_points_that_overflow_are_refused_not_inf():
    big = np.full((2, 2), 1e308)
    _raises(lambda: validation.reference_points(0, big, big), ValueError, "overflows")


def test_ragged_outcomes_are_a_type_error_naming_outcomes():
    _raises(lambda: validation.calibration_curve([0.1, 0.2], [[0], [1, 0]], bins=1), TypeError, "outcomes")


SHAPES = st.tuples(st.integers(0, 4), st.integers(0, 4), st.integers(0, 3))
VALUES = st.sampled_from([0.0, 1.0, -2.5, math.nan, math.inf, 1e200])


@FAST
@given(
    dshape=st.one_of(SHAPES, st.tuples(st.integers(1, 3), st.integers(1, 3))),
    tshape=st.tuples(st.integers(0, 4), st.integers(0, 3)),
    rshape=st.tuples(st.integers(0, 4), st.integers(0, 3)),
    value=VALUES,
    dtype=st.sampled_from([np.float64, np.float32, np.int64, np.bool_, np.complex128]),
)
def test_tarp_coverage_of_any_array_is_finite_or_a_clear_error(dshape, tshape, rshape, value, dtype):
    with np.errstate(over="ignore"):  # 1e200 becomes inf in float32: a hostile value too
        draws = np.full(dshape, value if dtype in (np.float64, np.float32) else 1).astype(dtype)
    theta, refs = np.zeros(tshape), np.ones(rshape)
    try:
        result = tarp_coverage(draws, theta, refs, alpha=[0.1, 0.5])
    except CLEAR as e:
        assert any(n in str(e) for n in ("draws", "theta_true", "references"))
    else:
        assert np.isfinite(result.coverage).all() and ((result.coverage >= 0) & (result.coverage <= 1)).all()
        finite = np.isfinite(draws.astype(np.complex128)).all()  # the values actually passed (ints: 1)
        # compared in float64: a float32 maximum against 1e150 casts 1e150 to float32 (an overflow warning)
        assert draws.ndim == 3 and draws.size > 0 and finite and np.abs(draws).astype(np.float64).max() < 1e150


@pytest.mark.parametrize(
    "kw,names",
    [
        (dict(alpha=[0.0, 0.5]), "alpha"),
        (dict(alpha=[math.nan]), "alpha"),
        (dict(alpha=[[0.5]]), "alpha"),
        (dict(bootstrap=True), "bootstrap"),
        (dict(bootstrap=-1), "bootstrap"),
        (dict(band_level=1.0), "band_level"),
        (dict(rng_key=2**70, bootstrap=2), "rng_key"),
        (dict(theta_true=np.full((3, 2), 1e200)), "theta_true"),  # was: squared distances inf, coverage silently 0
        (dict(draws=np.full((3, 5, 2), 1e200)), "draws"),  # was: coverage silently 1
        (dict(draws={"w": np.zeros((3, 5, 2))}), "draws"),
    ],
)
def test_tarp_coverage_bad_settings(kw, names):
    kw = {**dict(draws=np.zeros((3, 5, 2)), theta_true=np.ones((3, 2)), references=np.zeros((3, 2))), **kw}
    raises_clear(lambda: tarp_coverage(**kw), names)


@FAST
@given(
    p=st.one_of(
        hnp.arrays(
            st.sampled_from([np.float64, np.float32]),
            st.integers(0, 6),
            elements=st.sampled_from([0.0, 0.3, 1.0, 1.5, -0.1, math.nan]),
        ),
        hnp.arrays(st.sampled_from([np.bool_, np.int64]), st.integers(0, 6)),
    ),
    y=hnp.arrays(np.float64, st.integers(0, 6), elements=st.sampled_from([0.0, 1.0, 0.5, 2.0, math.nan])),
    bins=st.one_of(st.integers(-1, 7), st.just(True), st.just(2.0)),
)
def test_calibration_curve_of_any_input_is_finite_or_a_clear_error(p, y, bins):
    try:
        result = calibration_curve(p, y, bins)
    except CLEAR as e:
        assert any(n in str(e) for n in ("probabilities", "outcomes", "bins"))
    else:
        assert np.isfinite(result.rmse) and np.isfinite(result.brier)
        assert p.size == y.size >= 1 and 1 <= bins <= p.size
