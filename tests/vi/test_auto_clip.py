"""The private clip search and its composition with DP-SGD (vi.auto_clip)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.pld import pld_privacy_accountant

from dpposterior.privacy import Ledger, PrivacySpent, dpsgd_epsilon
from dpposterior.privacy.dpsgd_record import check_dpsgd_privacy
from dpposterior.vi import auto_clip

DELTA = 1e-5
SIGMA, Q, T = 1.5, 0.05, 400
EXTRA = 3.0  # the pre-releases' combined noise multiplier


def _direct(extra, dvi=1e-4):
    """dp-accounting's PLD accountant on the composed events, built here without the library's code."""
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=dvi)
    run = dp_event.SelfComposedDpEvent(dp_event.PoissonSampledDpEvent(Q, dp_event.GaussianDpEvent(SIGMA)), T)
    events = [run] if extra is None else [dp_event.GaussianDpEvent(extra), run]
    acc.compose(dp_event.ComposedDpEvent(events))
    return acc.get_epsilon(DELTA)


def test_composed_epsilon_is_dp_accountings_composition():
    alone = dpsgd_epsilon(SIGMA, DELTA, Q, T)
    both = dpsgd_epsilon(SIGMA, DELTA, Q, T, extra_gaussian=EXTRA)
    assert both == pytest.approx(_direct(EXTRA), rel=2e-3)
    assert alone == pytest.approx(_direct(None), rel=2e-3)
    assert both > alone * 1.05  # the pre-release costs something: the check can fail


def _record(extra):
    details = (("clip", 1.0), ("sampling", "poisson"))
    eps = dpsgd_epsilon(SIGMA, DELTA, Q, T, extra_gaussian=extra)
    if extra is not None:
        details += (("extra_gaussian", extra),)
    return PrivacySpent(
        epsilon=eps,
        delta=DELTA,
        neighbouring="add_remove",
        accountant="pld",
        mechanism="poisson_subsampled_gaussian",
        noise_multiplier=SIGMA,
        sampling_rate=Q,
        num_steps=T,
        details=details,
    )


def test_the_ledger_composes_the_pre_release():
    ledger = Ledger(value_discretization_interval=1e-4)
    ledger.add(_record(EXTRA))
    assert ledger.total(DELTA).epsilon == pytest.approx(_direct(EXTRA), rel=2e-3)


def test_the_record_check_recomputes_the_composed_epsilon():
    meta = {"noise_multiplier": SIGMA, "sampling_rate": Q, "num_steps": T, "clip": 1.0}
    check_dpsgd_privacy(_record(EXTRA), meta, T)
    # the composed epsilon without the extra detail claims less than the settings give: refused
    stripped = dataclasses.replace(_record(None), epsilon=_record(EXTRA).epsilon)
    with pytest.raises(ValueError, match="claims epsilon"):
        check_dpsgd_privacy(stripped, meta, T)
    bad = dataclasses.replace(_record(EXTRA), details=(("clip", 1.0), ("extra_gaussian", -1.0)))
    with pytest.raises(ValueError, match="extra_gaussian"):
        check_dpsgd_privacy(bad, meta, T)


def _search(norms, noise_multiplier, seed=0):
    z = np.random.default_rng(seed).standard_normal(auto_clip.NUM_QUERIES)
    return auto_clip.search_clip(norms, norms.size, noise_multiplier, z)


def test_with_little_noise_the_clip_leaves_about_one_percent_clipped():
    norms = np.abs(np.random.default_rng(1).standard_normal(20_000)) * 3.0
    choice = _search(norms, 1e-3)
    share = np.mean(norms >= choice.clip)
    assert 0.001 <= share <= 0.01, share
    assert not choice.tail_beyond_window


def test_a_heavy_tail_beyond_the_window_is_flagged():
    norms = np.concatenate([np.ones(9_000), np.full(1_000, 1e3)])  # 10% far beyond 16 x the median
    choice = _search(norms, 1e-3)
    assert choice.tail_beyond_window
    with pytest.warns(auto_clip.ClipBindsWarning, match="heavy tail"):
        auto_clip.warn_tail(choice, "dpvi")


def test_the_check_standard_error_is_its_spread():
    norms = np.abs(np.random.default_rng(2).standard_normal(5_000))
    sigma = auto_clip.clip_check_noise_multiplier(1.0, DELTA)
    z = np.random.default_rng(3).standard_normal(400)
    shares = [auto_clip.check_clip_share(norms, 1.5, norms.size, sigma, zi)["share"] for zi in z]
    se = auto_clip.check_clip_share(norms, 1.5, norms.size, sigma, 0.0)["se"]
    assert np.std(shares) == pytest.approx(se, rel=0.15)
    assert np.mean(shares) == pytest.approx(np.mean(norms >= 1.5), abs=4 * se / 20)
