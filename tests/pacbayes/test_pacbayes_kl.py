"""The binary kl and its inverses against an independent high-precision bisection (mpmath)."""

import math

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpposterior.pacbayes.kl import kl, kl_inv_lower, kl_inv_upper

mpmath.mp.dps = 60


def _kl_mp(q, p):
    q, p = mpmath.mpf(q), mpmath.mpf(p)
    out = mpmath.mpf(0)
    if q > 0:
        out += q * mpmath.log(q / p) if p > 0 else mpmath.inf
    if q < 1:
        out += (1 - q) * mpmath.log((1 - q) / (1 - p)) if p < 1 else mpmath.inf
    return out


def _ref_inverse(q, c, upper):
    """Plain bisection at 60 digits: the largest (smallest) p on [q, 1] ([0, q]) with kl <= c."""
    c = mpmath.mpf(c)
    lo, hi = (mpmath.mpf(q), mpmath.mpf(1)) if upper else (mpmath.mpf(0), mpmath.mpf(q))
    if upper and _kl_mp(q, hi) <= c:
        return 1.0
    if not upper and _kl_mp(q, lo) <= c:
        return 0.0
    for _ in range(80):
        mid = (lo + hi) / 2
        inside = _kl_mp(q, mid) <= c
        if upper:
            lo, hi = (mid, hi) if inside else (lo, mid)
        else:
            lo, hi = (lo, mid) if inside else (mid, hi)
    return float((lo + hi) / 2)


Q_GRID = [0.0, 1e-12, 1e-6, 0.001, 0.02, 0.1, 0.3, 0.5, 0.77, 0.99, 1 - 1e-9, 1.0]
C_GRID = [0.0, 1e-300, 1e-20, 1e-9, 1e-4, 0.01, 0.1, 0.5, 2.0, 10.0, 50.0, 1e3]


def test_inverses_match_bisection_reference_over_grid_with_edges():
    qs, cs = np.meshgrid(Q_GRID, C_GRID, indexing="ij")
    up = kl_inv_upper(qs, cs)
    lo = kl_inv_lower(qs, cs)
    for i, q in enumerate(Q_GRID):
        for j, c in enumerate(C_GRID):
            assert up[i, j] == pytest.approx(_ref_inverse(q, c, True), abs=1e-9), (q, c)
            assert lo[i, j] == pytest.approx(_ref_inverse(q, c, False), abs=1e-9), (q, c)


def test_reference_would_catch_a_wrong_inverse():
    # power check: the reference tells the two inverses apart and notices a small perturbation
    assert abs(kl_inv_upper(0.1, 0.05) + 1e-7 - _ref_inverse(0.1, 0.05, True)) > 1e-9
    assert abs(kl_inv_lower(0.1, 0.05) - _ref_inverse(0.1, 0.05, True)) > 0.1


def test_closed_forms_and_edges():
    assert kl_inv_upper(0.0, 1.0) == pytest.approx(1 - math.exp(-1.0), abs=1e-15)
    assert kl_inv_lower(1.0, 2.0) == pytest.approx(math.exp(-2.0), abs=1e-15)
    assert kl_inv_upper(0.3, 0.0) == 0.3 and kl_inv_lower(0.3, 0.0) == 0.3
    assert kl_inv_upper(1.0, 5.0) == 1.0 and kl_inv_lower(0.0, 5.0) == 0.0
    assert kl_inv_upper(0.3, math.inf) == 1.0 and kl_inv_lower(0.3, math.inf) == 0.0
    assert kl_inv_upper(0.5, 1e6) == 1.0  # 1 - exp(-2e6) rounds to 1
    assert kl(0.0, 0.0) == 0.0 and kl(1.0, 1.0) == 0.0
    assert kl(0.3, 0.0) == math.inf and kl(0.3, 1.0) == math.inf
    assert kl(0.0, 0.5) == pytest.approx(math.log(2)) and kl(1.0, 0.5) == pytest.approx(math.log(2))


def test_kl_accurate_near_the_diagonal():
    # kl(q||q+d) ~ d^2 / (2 q (1-q)); the textbook formula returns rounding noise here
    for q, d in [(0.3, 1e-9), (0.5, 1e-12), (0.01, -1e-10)]:
        assert kl(q, q + d) == pytest.approx(float(_kl_mp(q, q + d)), rel=1e-6)


def test_outward_rounding_and_vectorised_shapes():
    q = np.linspace(0.0, 1.0, 7)[:, None]
    c = np.array([0.0, 0.01, 1.0])[None, :]
    up, lo = kl_inv_upper(q, c), kl_inv_lower(q, c)
    assert up.shape == lo.shape == (7, 3)
    assert np.all(up >= q) and np.all(lo <= q)
    inner = (q > 0) & (q < 1) & (c > 0)
    qq, cc = np.broadcast_arrays(q, c)
    # the upper inverse is at or beyond the root: kl there >= c (up to the bracket width)
    assert np.all(kl(qq[inner], up[inner]) >= cc[inner] * (1 - 1e-6))
    assert isinstance(kl_inv_upper(0.2, 0.1), float)


@pytest.mark.parametrize("bad_q", [-0.1, 1.1, float("nan")])
def test_bad_q_is_rejected(bad_q):
    with pytest.raises(ValueError, match="q"):
        kl_inv_upper(bad_q, 0.1)
    with pytest.raises(ValueError, match="q"):
        kl_inv_lower(bad_q, 0.1)


@pytest.mark.parametrize("bad_c", [-1e-9, float("nan")])
def test_bad_c_is_rejected(bad_c):
    with pytest.raises(ValueError, match="c must"):
        kl_inv_upper(0.1, bad_c)


def test_bad_p_and_types_are_rejected():
    with pytest.raises(ValueError, match="p must"):
        kl(0.1, 1.5)
    with pytest.raises(TypeError):
        kl_inv_upper("abc", 0.1)


@settings(max_examples=100, deadline=None)
@given(st.floats(0, 1), st.floats(0, 20), st.floats(0, 20))
def test_monotone_in_c(q, c1, c2):
    a, b = sorted((c1, c2))
    assert kl_inv_upper(q, a) <= kl_inv_upper(q, b)
    assert kl_inv_lower(q, a) >= kl_inv_lower(q, b)


@settings(max_examples=100, deadline=None)
@given(st.floats(0, 1), st.floats(0, 1), st.floats(1e-8, 20))
def test_monotone_in_q(q1, q2, c):
    a, b = sorted((q1, q2))
    assert kl_inv_upper(a, c) <= kl_inv_upper(b, c) + 1e-11
    assert kl_inv_lower(a, c) <= kl_inv_lower(b, c) + 1e-11


def test_subnormal_q_is_not_nan():  # found by hypothesis: d / q overflowed for q = 5e-324
    assert kl_inv_upper(5e-324, 1.0) == pytest.approx(kl_inv_upper(0.0, 1.0), abs=1e-9)
    assert kl(5e-324, 0.5) == pytest.approx(np.log(2.0), rel=1e-12)


@pytest.mark.parametrize(
    "q, c, upper",
    [
        (1 / 7, 5.0, True),  # p = 0.998: (1 - p) / (1 - q) = 0.0021 formed as 1 + t
        (0.00019264452693665927, 21.99806004361246, True),  # p = 1 - 2.8e-10
        (0.9999999934504487, 26.67413081123428, False),  # p = 2.6e-12 against q = 1 - 6.5e-9
    ],
)
def test_inverses_stay_outside_where_the_kl_ratio_cancels(q, c, upper):
    # found by a random search against mpmath: the float kl at these p lost digits (5 left for the lower
    # case) forming the ratio as 1 + t, and the answers lay inside the exact inverse: upper 2e-17 below,
    # lower 2.7e-17 above (1e-5 of p); the exact kl at the answer must reach c
    p = kl_inv_upper(q, c) if upper else kl_inv_lower(q, c)
    assert _kl_mp(q, p) >= mpmath.mpf(c)
    ref = _ref_inverse(q, c, upper)
    assert (p >= ref if upper else p <= ref) and abs(p - ref) <= 2e-12
