"""DP dropout accountants (NOTES section 5; issue 8): hand values, the modern accountant is never
looser, calibration is conservative, errors."""

from __future__ import annotations

import math

import pytest

from dpposterior.privacy import (
    PrivacySpent,
    advanced_composition,
    calibrate_dpd_noise_multiplier,
    calibrate_noise_multiplier,
    dpd_epsilon,
    dpsgd_epsilon,
    zcdp_to_dp,
)
from dpposterior.privacy.dp_dropout import dpd_ac_epsilon, dpd_zcdp_epsilon


# ---------------------------------------------------------------- hand-computed values


def test_dpd_ac_hand_values():
    # sigma 20, delta 1e-5, q 0.1, T 100, delta' = delta / 2 = 5e-6:
    # delta_iter = 5e-6 / (100 * 0.1) = 5e-7
    # eps_iter   = sqrt(2 ln(1.25 / 5e-7)) / 20 = sqrt(2 * 14.7318) / 20 = 5.428039 / 20 = 0.2714019
    # eps_step   = ln(1 + 0.1 (e^0.2714019 - 1)) = ln(1.0311795) = 0.0307040
    # eps        = sqrt(200 ln(2e5)) * 0.0307040 + 100 * 0.0307040 * (e^0.0307040 - 1)
    #            = 49.40864 * 0.0307040 + 0.0957...                 = 1.612778
    rec = dpd_ac_epsilon(20.0, 1e-5, 0.1, 100)
    assert isinstance(rec, PrivacySpent)
    assert rec.epsilon == pytest.approx(1.612778486060364, rel=1e-10)
    assert rec.delta == 1e-5
    assert rec.detail("delta_iter") == pytest.approx(5e-7, rel=1e-12)
    assert rec.detail("epsilon_iter") == pytest.approx(0.2714019278656512, rel=1e-12)
    assert rec.detail("epsilon_step") == pytest.approx(0.030703992310017122, rel=1e-12)
    # delta_total = T q delta_iter + delta' = delta
    assert 100 * rec.detail("delta_step") + rec.detail("delta_prime") == pytest.approx(1e-5, rel=1e-12)
    assert (rec.accountant, rec.neighbouring, rec.noise_multiplier) == ("dpd_ac", "replace_one", 20.0)
    # another split of delta: delta' = 2e-6 -> delta_iter 8e-7
    assert dpd_ac_epsilon(20.0, 1e-5, 0.1, 100, delta_prime=2e-6).epsilon == pytest.approx(
        1.6368490793446164, rel=1e-10
    )


def test_dpd_ac_hand_values_without_subsampling():
    # q = 1 (no amplification): sigma 10, delta 1e-5, T 4, delta' = 5e-6
    # delta_iter = 5e-6 / 4 = 1.25e-6; eps_iter = sqrt(2 ln(1.25 / 1.25e-6)) / 10 = sqrt(2 ln 1e6) / 10
    #            = 0.5256522; eps_step = ln(1 + 1 (e^eps_iter - 1)) = eps_iter
    # eps = sqrt(8 ln 2e5) 0.5256522 + 4 * 0.5256522 (e^0.5256522 - 1) = 9.881730 * 0.5256522 + 1.454084
    #     = 5.194353 + 1.454084 = 6.648436
    rec = dpd_ac_epsilon(10.0, 1e-5, 1.0, 4)
    assert rec.detail("epsilon_iter") == pytest.approx(0.5256522, rel=1e-6)
    assert rec.detail("epsilon_step") == pytest.approx(rec.detail("epsilon_iter"), rel=1e-12)
    assert rec.epsilon == pytest.approx(6.648436, rel=1e-6)


def test_dpd_ac_power_check():
    # a composition without the amplification by subsampling (eps_iter straight into advanced
    # composition) gives 13.6, and summing the amplified epsilons (basic composition) 3.07:
    # both fail the hand-value check
    eps_iter = 0.2714019278656512
    no_amp = math.sqrt(200 * math.log(2e5)) * eps_iter + 100 * eps_iter * math.expm1(eps_iter)
    basic = 100 * 0.030703992310017122
    for wrong in (no_amp, basic):
        assert wrong != pytest.approx(dpd_ac_epsilon(20.0, 1e-5, 0.1, 100).epsilon, rel=1e-3)


def test_dpd_zcdp_hand_values():
    # rho = T / (2 sigma^2) = 100 / 800 = 0.125; eps = 0.125 + 2 sqrt(0.125 ln 1e5) = 2.5242630
    rec = dpd_zcdp_epsilon(20.0, 1e-5, 0.1, 100)
    assert rec.epsilon == pytest.approx(2.5242629560940406, rel=1e-12)
    assert rec.detail("rho") == 0.125
    assert rec.accountant == "dpd_zcdp"
    # power check: using the per-iteration rho (forgetting the composition) is caught
    assert 1 / 800 + 2 * math.sqrt(math.log(1e5) / 800) != pytest.approx(rec.epsilon, rel=1e-3)


def test_records_state_the_relation_and_noise():
    rec = dpd_epsilon(10.0, 1e-5, 0.01, 1000, "pld")
    assert rec.neighbouring == "replace_one"
    assert rec.noise_multiplier == 10.0  # noise std / replace-one sensitivity 2C
    assert rec.detail("sensitivity") == "2 * clip"
    rec = dpd_epsilon(10.0, 1e-5, 0.01, 1000, "pld", neighbouring="add_remove", seeded_by="user")
    assert rec.neighbouring == "add_remove"
    assert rec.noise_multiplier == 20.0  # the same noise over the sensitivity C
    assert rec.seeded_by == "user"
    # under add/remove the modern accountants are exactly DP-SGD's with noise multiplier 2 sigma
    assert rec.epsilon == dpsgd_epsilon(20.0, 1e-5, 0.01, 1000)
    assert dpd_epsilon(10.0, 1e-5, 0.01, 1000, "rdp", neighbouring="add_remove").epsilon == dpsgd_epsilon(
        20.0, 1e-5, 0.01, 1000, "rdp"
    )


def test_replace_one_costs_more_than_add_remove():
    rep = dpd_epsilon(10.0, 1e-5, 0.01, 1000, "pld").epsilon
    add = dpd_epsilon(10.0, 1e-5, 0.01, 1000, "pld", neighbouring="add_remove").epsilon
    assert add < rep < 2.5 * add


# ---------------------------------------------------------------- the modern accountant is never looser

SETTINGS = [  # (sigma, delta, q, T): all with epsilon_iter < 1 so DPD-AC applies
    (10.0, 1e-5, 0.01, 10_000),
    (20.0, 1e-5, 0.1, 100),
    (8.0, 1e-6, 0.05, 1000),
    (50.0, 1e-5, 0.002, 50_000),
    (7.0, 1e-5, 1.0, 10),
]


@pytest.mark.parametrize("sigma, delta, q, steps", SETTINGS)
@pytest.mark.parametrize("neighbouring", ["replace_one", "add_remove"])
def test_pld_never_looser_than_dpd_ac_or_zcdp(sigma, delta, q, steps, neighbouring):
    kw = dict(neighbouring=neighbouring)
    pld = dpd_epsilon(sigma, delta, q, steps, "pld", **kw).epsilon
    ac = dpd_epsilon(sigma, delta, q, steps, "ac", **kw).epsilon
    zcdp = dpd_epsilon(sigma, delta, q, steps, "zcdp", **kw).epsilon
    assert 0 < pld <= ac
    assert pld <= zcdp


def test_least_noise_under_the_modern_accountant():
    args = (2.0, 1e-5, 0.01, 10_000)
    sigmas = {acc: calibrate_dpd_noise_multiplier(*args, acc) for acc in ("ac", "zcdp", "pld")}
    assert sigmas["pld"] < sigmas["ac"] < sigmas["zcdp"]
    # and it is a real difference, not a rounding one
    assert sigmas["pld"] < 0.5 * sigmas["ac"]


# ---------------------------------------------------------------- calibration


@pytest.mark.parametrize("accountant", ["ac", "zcdp", "pld"])
@pytest.mark.parametrize("target, q, steps", [(1.0, 0.01, 1000), (4.0, 0.1, 300)])
def test_calibration_conservative_and_tight(accountant, target, q, steps):
    sigma = calibrate_dpd_noise_multiplier(target, 1e-5, q, steps, accountant)
    assert dpd_epsilon(sigma, 1e-5, q, steps, accountant).epsilon <= target
    # 0.5% less noise misses the target
    assert dpd_epsilon(sigma * 0.995, 1e-5, q, steps, accountant).epsilon > target


def test_calibration_rdp_add_remove():
    sigma = calibrate_dpd_noise_multiplier(1.0, 1e-5, 0.01, 1000, "rdp", neighbouring="add_remove")
    assert dpd_epsilon(sigma, 1e-5, 0.01, 1000, "rdp", neighbouring="add_remove").epsilon <= 1.0
    # the same as DP-SGD's calibration, halved (noise multiplier 2 sigma)
    ref = 0.5 * calibrate_noise_multiplier(1.0, 1e-5, 0.01, 1000, "rdp")
    assert sigma == pytest.approx(ref, rel=1e-3)


def test_calibration_ac_stops_where_the_classic_bound_stops():
    # a generous target: DPD-AC cannot go below sigma = sqrt(2 ln(1.25 / delta_iter))
    delta_iter = 0.5e-5 / (1000 * 0.01)
    floor = math.sqrt(2 * math.log(1.25 / delta_iter))
    sigma = calibrate_dpd_noise_multiplier(100.0, 1e-5, 0.01, 1000, "ac")
    assert floor < sigma <= floor * (1 + 2e-4)
    assert dpd_ac_epsilon(sigma, 1e-5, 0.01, 1000).epsilon <= 100.0


# ---------------------------------------------------------------- errors


def test_dpd_ac_refuses_per_iteration_epsilon_at_least_one():
    with pytest.raises(ValueError, match=r"per-iteration epsilon .* >= 1 .*use noise_multiplier > 5.83"):
        dpd_ac_epsilon(3.0, 1e-5, 0.01, 10_000)


def test_dpd_ac_delta_iter_at_least_one():
    with pytest.raises(ValueError, match="delta_iter = .* >= 1"):
        dpd_ac_epsilon(10.0, 0.5, 1e-3, 10)
    with pytest.raises(ValueError, match="delta_iter = .* >= 1"):
        calibrate_dpd_noise_multiplier(1.0, 0.5, 1e-3, 10, "ac")


def test_errors():
    with pytest.raises(ValueError, match=r"accountant must be one of \('ac', 'zcdp', 'pld', 'rdp'\), got 'prv'"):
        dpd_epsilon(10.0, 1e-5, 0.01, 100, "prv")
    with pytest.raises(ValueError, match=r"accountant must be one of \('ac', 'zcdp', 'pld', 'rdp'\)"):
        calibrate_dpd_noise_multiplier(1.0, 1e-5, 0.01, 100, "prv")
    with pytest.raises(ValueError, match="no replace-one analysis of Poisson subsampling"):
        dpd_epsilon(10.0, 1e-5, 0.01, 100, "rdp")
    with pytest.raises(ValueError, match="no replace-one analysis of Poisson subsampling"):
        calibrate_dpd_noise_multiplier(1.0, 1e-5, 0.01, 100, "rdp")
    with pytest.raises(ValueError, match=r"delta_prime must lie in \(0, delta\)"):
        dpd_ac_epsilon(10.0, 1e-5, 0.01, 100, delta_prime=1e-5)
    with pytest.raises(ValueError, match="delta_prime applies to accountant 'ac' only"):
        dpd_epsilon(10.0, 1e-5, 0.01, 100, "zcdp", delta_prime=1e-6)
    with pytest.raises(ValueError, match="neighbouring must be one of"):
        dpd_zcdp_epsilon(10.0, 1e-5, 0.01, 100, neighbouring="swap")
    with pytest.raises(ValueError, match="epsilon must be a finite number > 0"):
        calibrate_dpd_noise_multiplier(math.nan, 1e-5, 0.01, 100)
    with pytest.raises(ValueError, match=r"delta must lie in \(0, 1\)"):
        dpd_zcdp_epsilon(10.0, 1.0, 0.01, 100)
    with pytest.raises(ValueError, match=r"sampling_rate must lie in \(0, 1\]"):
        dpd_ac_epsilon(10.0, 1e-5, 0.0, 100)
    with pytest.raises(TypeError, match="num_steps must be an integer >= 1"):
        dpd_ac_epsilon(10.0, 1e-5, 0.01, 100.0)
    with pytest.raises(ValueError, match="noise_multiplier must be a finite number > 0"):
        dpd_zcdp_epsilon(-1.0, 1e-5, 0.01, 100)
    with pytest.raises(ValueError, match="no noise multiplier <= max_noise_multiplier=100 reaches"):
        calibrate_dpd_noise_multiplier(0.01, 1e-5, 0.5, 10_000, "zcdp", max_noise_multiplier=100.0)


# ---------------------------------------------------------------- independent cross-checks


def _gaussian_delta(eps, mu):
    """delta(eps) of the Gaussian mechanism with sensitivity / std = mu (Balle & Wang 2018, Theorem 8)."""
    from scipy.stats import norm

    return norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)


def _gaussian_epsilon(mu, delta):
    from scipy.optimize import brentq

    return brentq(lambda e: _gaussian_delta(e, mu) - delta, 0.0, 500.0, xtol=1e-12)


@pytest.mark.parametrize("sigma, steps, delta", [(1.0, 1, 1e-5), (2.0, 10, 1e-5), (5.0, 100, 1e-6)])
def test_pld_without_subsampling_is_the_exact_gaussian_epsilon(sigma, steps, delta):
    """q = 1: T steps with noise std 2 C sigma are one Gaussian mechanism with mu = sqrt(T) * sensitivity
    / std: sqrt(T) / sigma under replace-one (sensitivity 2C), sqrt(T) / (2 sigma) under add/remove (C).
    dp-accounting's PLD is a pessimistic upper bound: at most 1e-3 above the exact value, never below.
    Power: the other relation's exact value is far away (a factor 2 in sensitivity)."""
    for rel, mu, other in [
        ("replace_one", math.sqrt(steps) / sigma, math.sqrt(steps) / (2 * sigma)),
        ("add_remove", math.sqrt(steps) / (2 * sigma), math.sqrt(steps) / sigma),
    ]:
        exact = _gaussian_epsilon(mu, delta)
        ours = dpd_epsilon(sigma, delta, 1.0, steps, "pld", neighbouring=rel).epsilon
        assert exact - 1e-9 <= ours <= exact + 1e-3
        assert abs(ours - _gaussian_epsilon(other, delta)) > 0.5


@pytest.mark.parametrize("sigma, q, steps", [(1.0, 0.1, 100), (0.8, 0.5, 20), (2.0, 0.01, 1000)])
def test_pld_with_subsampling_matches_dp_accounting_called_directly(sigma, q, steps):
    """The DP-SGLD / DP dropout mechanism as a dp-accounting event built here: T self-composed
    Poisson-sampled Gaussians of noise multiplier (noise std / C) = 2 sigma, under each relation (dp-accounting's
    REPLACE_ONE lets the record's clipped gradient move by 2C). Ours refines the discretisation further, so
    both are upper bounds within 1%. Power: the replace-one value is well above the add/remove one."""
    from dp_accounting import NeighboringRelation, dp_event
    from dp_accounting.pld import pld_privacy_accountant

    out = {}
    for rel, nr in [
        ("add_remove", NeighboringRelation.ADD_OR_REMOVE_ONE),
        ("replace_one", NeighboringRelation.REPLACE_ONE),
    ]:
        acc = pld_privacy_accountant.PLDAccountant(neighboring_relation=nr, value_discretization_interval=1e-3)
        acc.compose(
            dp_event.SelfComposedDpEvent(
                dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(2.0 * sigma)), steps
            )
        )
        direct = acc.get_epsilon(1e-5)
        out[rel] = dpd_epsilon(sigma, 1e-5, q, steps, "pld", neighbouring=rel).epsilon
        assert out[rel] == pytest.approx(direct, rel=0.015)
    assert out["replace_one"] > 1.6 * out["add_remove"]


def _ac_by_hand(sigma, delta, q, steps, delta_prime):
    """DPD-AC written out from the paper (NOTES.md section 5), independently of the library."""
    d_iter = (delta - delta_prime) / (steps * q)
    e_iter = math.sqrt(2 * math.log(1.25 / d_iter)) / sigma
    e = math.log(1 + q * (math.exp(e_iter) - 1))
    return math.sqrt(2 * steps * math.log(1 / delta_prime)) * e + steps * e * (math.exp(e) - 1)


@pytest.mark.parametrize(
    "sigma, delta, q, steps, delta_prime",
    [
        (20.0, 1e-5, 0.01, 1000, 5e-6),
        (50.0, 1e-6, 0.1, 3000, 1e-7),
        (8.0, 1e-5, 1.0, 5, 5e-6),
        (100.0, 1e-8, 0.004, 10_000, 5e-9),
    ],
)
def test_dpd_ac_and_zcdp_against_the_papers_formulas(sigma, delta, q, steps, delta_prime):
    ac = dpd_epsilon(sigma, delta, q, steps, "ac", delta_prime=delta_prime).epsilon
    assert ac == pytest.approx(_ac_by_hand(sigma, delta, q, steps, delta_prime), rel=1e-12)
    rho = steps / (2 * sigma**2)
    assert dpd_epsilon(sigma, delta, q, steps, "zcdp").epsilon == pytest.approx(
        rho + 2 * math.sqrt(rho * math.log(1 / delta)), rel=1e-12
    )
    # power: a wrong delta split (all of delta to delta_iter) gives another number
    assert ac != pytest.approx(_ac_by_hand(sigma, delta + delta_prime, q, steps, delta_prime), rel=1e-6)


@pytest.mark.parametrize(
    "accountant, sigma, q", [("pld", 1.0, 0.01), ("pld", 0.7, 1.0), ("zcdp", 3.0, 0.1), ("ac", 40.0, 0.05)]
)
@pytest.mark.parametrize("neighbouring", ["replace_one", "add_remove"])
def test_more_steps_never_cost_less(accountant, sigma, q, neighbouring):
    eps = [
        dpd_epsilon(sigma, 1e-5, q, t, accountant, neighbouring=neighbouring).epsilon
        for t in (1, 2, 3, 5, 8, 13, 34, 89, 233, 610)
    ]
    assert all(b >= a for a, b in zip(eps, eps[1:])) and eps[-1] > eps[0]


def test_dpd_ac_with_a_subnormal_delta_iter_is_finite():
    # delta 1e-310 (subnormal, inside (0, 1)): delta_iter = 5e-311 / (10 * 0.5) = 1e-311, and
    # 1.25 / 1e-311 overflows to inf. The bound needs only its log: sqrt(2 (ln 1.25 - ln 1e-311)) = 37.8.
    # It used to say "epsilon_iter = inf ... use noise_multiplier > inf", and the calibration said no sigma
    # up to 1e6 reaches the target.
    d_iter = 1e-311
    c = math.sqrt(2.0 * (math.log(1.25) - math.log(d_iter)))
    rec = dpd_ac_epsilon(50.0, 1e-310, 0.5, 10)
    assert rec.detail("epsilon_iter") == pytest.approx(c / 50.0, rel=1e-9)
    assert math.isfinite(rec.epsilon) and rec.epsilon > 0
    with pytest.raises(ValueError, match=rf"noise_multiplier > {c:.4g} "):
        dpd_ac_epsilon(5.0, 1e-310, 0.5, 10)
    sigma = calibrate_dpd_noise_multiplier(100.0, 1e-310, 0.5, 10, "ac")
    assert c <= sigma < 1.01 * c  # the floor where epsilon_iter reaches 1 (the target allows less noise)
    assert dpd_ac_epsilon(sigma, 1e-310, 0.5, 10).epsilon <= 100.0


def test_subnormal_deltas_give_the_finite_bounds_of_their_formulas():
    # ln(1/delta) for delta 1e-310 is 713.8, but 1 / 1e-310 overflows to inf: DPD-zCDP, zcdp_to_dp and
    # advanced composition were refused ("not representable as a finite float") or returned epsilon = inf
    log_inv = -math.log(1e-310)
    rho = 10 / (2 * 5.0**2)
    assert dpd_zcdp_epsilon(5.0, 1e-310, 0.1, 10).epsilon == pytest.approx(
        rho + 2 * math.sqrt(rho * log_inv), rel=1e-12
    )
    assert zcdp_to_dp(0.5, 1e-310) == pytest.approx(0.5 + 2 * math.sqrt(0.5 * log_inv), rel=1e-12)
    assert math.isfinite(zcdp_to_dp(0.5, 1e-310, method="tight"))
    eps, d = advanced_composition(0.1, 0.0, 10, 1e-310)
    assert eps == pytest.approx(math.sqrt(20 * log_inv) * 0.1 + 10 * 0.1 * math.expm1(0.1), rel=1e-12)
    assert d == 1e-310
    # the DPD-AC total uses ln(1/delta') too
    rec = dpd_ac_epsilon(50.0, 1e-310, 0.5, 10)
    e = rec.detail("epsilon_step")
    assert rec.epsilon == pytest.approx(math.sqrt(-20 * math.log(5e-311)) * e + 10 * e * math.expm1(e), rel=1e-12)
