"""The Gaussian mechanism: classic and analytic calibration."""

from __future__ import annotations

import math

import pytest
from dp_accounting.pld import common, privacy_loss_mechanism

from dpposterior.privacy import analytic_gaussian_sigma, dpsgd_epsilon, gaussian_sigma
from dpposterior.privacy.gaussian import _analytic_gaussian_delta


def test_classic_hand_values():
    # sqrt(2 ln(1.25 / 1e-5)) / 0.5 = sqrt(2 * 11.7361) / 0.5 = 4.84481 / 0.5
    assert gaussian_sigma(0.5, 1e-5) == pytest.approx(9.689610525210778, rel=1e-12)
    # sensitivity scales sigma linearly: 3 * sqrt(2 ln(1.25e6)) / 0.9
    assert gaussian_sigma(0.9, 1e-6, sensitivity=3.0) == pytest.approx(17.66267508950158, rel=1e-12)
    # power check: the common slip ln(1/delta) instead of ln(1.25/delta) is caught at this tolerance
    assert math.sqrt(2 * math.log(1e5)) / 0.5 != pytest.approx(gaussian_sigma(0.5, 1e-5), rel=1e-3)


@pytest.mark.parametrize("eps", [1.0, 2.0, 10.0])
def test_classic_refuses_epsilon_at_least_one(eps):
    with pytest.raises(ValueError, match="holds only for epsilon < 1.*use analytic_gaussian_sigma"):
        gaussian_sigma(eps, 1e-5)


@pytest.mark.parametrize(
    "eps, delta", [(0.01, 1e-5), (0.5, 1e-5), (0.99, 1e-8), (1.0, 0.1), (5.0, 1e-5), (50.0, 1e-10)]
)
def test_analytic_matches_dp_accounting(eps, delta):
    ref = privacy_loss_mechanism.GaussianPrivacyLoss.from_privacy_guarantee(
        common.DifferentialPrivacyParameters(eps, delta)
    ).standard_deviation
    assert analytic_gaussian_sigma(eps, delta) == pytest.approx(ref, rel=1e-6)


@pytest.mark.parametrize("eps, delta", [(0.01, 1e-5), (0.5, 1e-5), (3.0, 1e-6), (20.0, 1e-9)])
def test_analytic_is_conservative_and_tight(eps, delta):
    s = analytic_gaussian_sigma(eps, delta)
    assert _analytic_gaussian_delta(s, eps) <= delta
    assert _analytic_gaussian_delta(s * (1 - 1e-9), eps) > delta * (1 - 1e-6)
    # power check: 1% less noise violates the guarantee
    assert _analytic_gaussian_delta(s * 0.99, eps) > delta


@pytest.mark.parametrize("eps, delta", [(0.1, 1e-5), (0.5, 1e-6), (0.9, 1e-3)])
def test_analytic_never_exceeds_classic(eps, delta):
    assert analytic_gaussian_sigma(eps, delta) <= gaussian_sigma(eps, delta)


def test_analytic_sensitivity_scaling_and_pld_cross_check():
    s = analytic_gaussian_sigma(1.0, 1e-5, sensitivity=2.0)
    assert s == pytest.approx(2.0 * analytic_gaussian_sigma(1.0, 1e-5), rel=1e-12)
    # one Gaussian step without subsampling has the same epsilon in the PLD accountant
    assert dpsgd_epsilon(s / 2.0, 1e-5, 1.0, 1) == pytest.approx(1.0, rel=2e-3)


@pytest.mark.parametrize("func", [gaussian_sigma, analytic_gaussian_sigma])
def test_errors(func):
    with pytest.raises(ValueError, match="epsilon must be a finite number > 0"):
        func(0.0, 1e-5)
    with pytest.raises(ValueError, match="epsilon must be a finite number > 0"):
        func(math.nan, 1e-5)
    with pytest.raises(ValueError, match=r"delta must lie in \(0, 1\)"):
        func(0.5, 1.0)
    with pytest.raises(ValueError, match=r"delta must lie in \(0, 1\)"):
        func(0.5, 0.0)
    with pytest.raises(ValueError, match="sensitivity must be a finite number > 0"):
        func(0.5, 1e-5, sensitivity=0.0)
    with pytest.raises(TypeError, match="epsilon must be a real number"):
        func("0.5", 1e-5)
