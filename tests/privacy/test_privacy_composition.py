"""Advanced composition, amplification by Poisson subsampling, zCDP: hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.rdp import rdp_privacy_accountant

from dpposterior.privacy import (
    advanced_composition,
    amplify_by_poisson_subsampling,
    gaussian_zcdp_rho,
    zcdp_compose,
    zcdp_to_dp,
)


# ---------------------------------------------------------------- advanced composition


def test_advanced_composition_hand_values():
    # eps 0.1, delta 1e-6, k 10, delta' 1e-5:
    # sqrt(2 * 10 * ln 1e5) * 0.1 = sqrt(230.2585) * 0.1 = 1.5174271
    # 10 * 0.1 * (e^0.1 - 1)      = 0.1051709
    eps, delta = advanced_composition(0.1, 1e-6, 10, 1e-5)
    assert eps == pytest.approx(1.6225980474607942, rel=1e-12)
    assert delta == pytest.approx(2e-5, rel=1e-12)
    # eps 0.5, pure DP, k 4, delta' 0.01: sqrt(8 ln 100) * 0.5 + 4 * 0.5 * (e^0.5 - 1)
    eps, delta = advanced_composition(0.5, 0.0, 4, 0.01)
    assert eps == pytest.approx(4.33229680017055, rel=1e-12)
    assert delta == pytest.approx(0.01, rel=1e-12)


def test_advanced_composition_power_check():
    # the first-order form sqrt(2k ln(1/delta')) eps + k eps^2 (the paper's Taylor expansion) is
    # 1.6174271 here, 0.3% off: the hand-value check above rejects it
    first_order = math.sqrt(2 * 10 * math.log(1e5)) * 0.1 + 10 * 0.1**2
    assert first_order != pytest.approx(advanced_composition(0.1, 1e-6, 10, 1e-5)[0], rel=1e-4)


def test_advanced_composition_large_epsilon_is_inf_not_nan():
    eps, _ = advanced_composition(800.0, 1e-6, 3, 1e-5)
    assert eps == math.inf


def test_advanced_composition_errors():
    with pytest.raises(ValueError, match="epsilon must be a finite number > 0"):
        advanced_composition(0.0, 1e-6, 10, 1e-5)
    with pytest.raises(ValueError, match="epsilon must be a finite number > 0"):
        advanced_composition(math.inf, 1e-6, 10, 1e-5)
    with pytest.raises(ValueError, match=r"delta must lie in \[0, 1\)"):
        advanced_composition(0.1, 1.0, 10, 1e-5)
    with pytest.raises(ValueError, match=r"delta_prime must lie in \(0, 1\)"):
        advanced_composition(0.1, 1e-6, 10, 0.0)
    with pytest.raises(ValueError, match="num_steps must be an integer >= 1"):
        advanced_composition(0.1, 1e-6, 0, 1e-5)
    with pytest.raises(TypeError, match="num_steps must be an integer >= 1"):
        advanced_composition(0.1, 1e-6, 10.0, 1e-5)
    with pytest.raises(ValueError, match="the guarantee is vacuous"):
        advanced_composition(0.1, 0.01, 100, 1e-5)


# ---------------------------------------------------------------- amplification


def test_amplification_hand_values():
    # ln(1 + 0.01 (e - 1)) = ln(1.0171828) = 0.0170369
    eps, delta = amplify_by_poisson_subsampling(1.0, 1e-5, 0.01)
    assert eps == pytest.approx(0.01703686323617644, rel=1e-12)
    assert delta == pytest.approx(1e-7, rel=1e-12)
    # ln(1 + 0.5 (e^2 - 1)) = ln(4.1945280) = 1.4337808
    assert amplify_by_poisson_subsampling(2.0, 0.0, 0.5)[0] == pytest.approx(1.4337808304830273, rel=1e-12)
    # q = 1: no amplification
    assert amplify_by_poisson_subsampling(3.0, 1e-5, 1.0) == pytest.approx((3.0, 1e-5), rel=1e-12)
    # power check: dropping the logarithm, q (e^eps - 1) = 0.0171828, is caught
    assert 0.01 * math.expm1(1.0) != pytest.approx(0.01703686323617644, rel=1e-3)


@pytest.mark.parametrize("eps, q", [(1e-9, 0.01), (1e-300, 1e-4), (1000.0, 0.01), (1e5, 1e-4)])
def test_amplification_extreme_epsilon(eps, q):
    out, _ = amplify_by_poisson_subsampling(eps, 1e-5, q)
    assert math.isfinite(out) and 0 < out <= eps
    if eps > 100:
        assert out == pytest.approx(eps + math.log(q), rel=1e-12)


def test_amplification_replace_one_refused():
    with pytest.raises(ValueError, match="supports neighbouring='add_remove' only"):
        amplify_by_poisson_subsampling(1.0, 1e-5, 0.01, neighbouring="replace_one")
    with pytest.raises(ValueError, match="neighbouring must be one of"):
        amplify_by_poisson_subsampling(1.0, 1e-5, 0.01, neighbouring="swap")


@pytest.mark.parametrize("bad", [0.0, -0.5, 1.5, math.nan])
def test_amplification_bad_sampling_rate(bad):
    with pytest.raises(ValueError, match=r"sampling_rate must lie in \(0, 1\]"):
        amplify_by_poisson_subsampling(1.0, 1e-5, bad)


# ---------------------------------------------------------------- zCDP


def test_zcdp_hand_values():
    assert gaussian_zcdp_rho(2.0) == 0.125  # 1 / (2 * 4)
    assert zcdp_compose([0.125] * 8) == 1.0
    assert zcdp_compose(np.array([0.1, 0.2, 0.3])) == pytest.approx(0.6, rel=1e-15)
    # 1 + 2 sqrt(ln 1e5) = 1 + 2 * 3.3930702
    assert zcdp_to_dp(1.0, 1e-5) == pytest.approx(7.786140424415112, rel=1e-12)
    assert zcdp_to_dp(0.0, 1e-5) == 0.0
    # power check: the missing factor 2, or ln(1.25/delta), is caught at this tolerance
    assert 1 + math.sqrt(math.log(1e5)) != pytest.approx(zcdp_to_dp(1.0, 1e-5), rel=1e-3)
    assert 1 + 2 * math.sqrt(math.log(1.25e5)) != pytest.approx(zcdp_to_dp(1.0, 1e-5), rel=1e-3)


@pytest.mark.parametrize("rho", [1e-6, 1e-3, 0.125, 1.0, 30.0, 1000.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-5, 1e-9])
def test_zcdp_tight_below_classic_and_matches_dp_accounting(rho, delta):
    tight = zcdp_to_dp(rho, delta, method="tight")
    classic = zcdp_to_dp(rho, delta)
    assert 0 <= tight <= classic
    # dp-accounting's RDP accountant converts the same RDP curve alpha * rho (a Gaussian with
    # sigma = 1 / sqrt(2 rho)) by the same formula, on a finite grid of orders: we may only be
    # slightly lower (a finer optimum), never higher
    acc = rdp_privacy_accountant.RdpAccountant()
    acc.compose(dp_event.GaussianDpEvent(1.0 / math.sqrt(2.0 * rho)))
    ref = acc.get_epsilon(delta)
    assert tight <= ref + 1e-12
    if rho >= 0.1:  # below, the best order lies beyond 63, where dp-accounting's orders thin out
        assert tight == pytest.approx(ref, rel=0.02, abs=1e-4)


def test_zcdp_tight_known_value():
    # rho = 0.5 (sigma 1), delta 1e-5: the order-by-order minimum is 4.7284 (dp-accounting 4.7285)
    assert zcdp_to_dp(0.5, 1e-5, method="tight") == pytest.approx(4.728387, rel=1e-6)


def test_zcdp_small_rho_positive():
    assert 0 < zcdp_to_dp(1e-12, 1e-5) < 1e-4


def test_zcdp_errors():
    with pytest.raises(ValueError, match="noise_multiplier must be a finite number > 0"):
        gaussian_zcdp_rho(0.0)
    with pytest.raises(ValueError, match="rho must be a finite number >= 0"):
        zcdp_compose([0.1, -0.1])
    with pytest.raises(ValueError, match="rho must be a finite number >= 0"):
        zcdp_compose([0.1, math.nan])
    with pytest.raises(ValueError, match="at least one rho"):
        zcdp_compose([])
    with pytest.raises(TypeError, match="rho must be a real number"):
        zcdp_compose(["0.1"])
    with pytest.raises(ValueError, match="rho must be a finite number >= 0"):
        zcdp_to_dp(math.inf, 1e-5)
    with pytest.raises(ValueError, match=r"delta must lie in \(0, 1\)"):
        zcdp_to_dp(1.0, 0.0)
    with pytest.raises(ValueError, match="method must be 'classic' or 'tight'"):
        zcdp_to_dp(1.0, 1e-5, method="exact")
