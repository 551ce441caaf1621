"""privacy.Ledger: the total of several releases equals dp-accounting's composition of the same events."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.privacy_accountant import NeighboringRelation

import dpposterior as dpp
from dpposterior.privacy.spent import not_private
from dpposterior.privacy import Ledger, PrivacySpent, dpsgd_epsilon

DELTA = 1e-5
RUNS = [(1.2, 0.05, 500), (2.0, 0.1, 300)]  # (noise multiplier, sampling rate, steps)


def _dpsgd(sigma, q, t, neighbouring="add_remove"):
    return PrivacySpent(
        epsilon=dpsgd_epsilon(sigma, DELTA, q, t),
        delta=DELTA,
        neighbouring=neighbouring,
        accountant="pld",
        mechanism="poisson_subsampled_gaussian",
        noise_multiplier=sigma,
        sampling_rate=q,
        num_steps=t,
        details=(("clip", 1.0),),
    )


def _accountant(runs, dvi, relation=NeighboringRelation.ADD_OR_REMOVE_ONE):
    acc = pld_privacy_accountant.PLDAccountant(neighboring_relation=relation, value_discretization_interval=dvi)
    acc.compose(
        dp_event.ComposedDpEvent(
            [
                dp_event.SelfComposedDpEvent(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(s)), t)
                for s, q, t in runs
            ]
        )
    )
    return acc.get_epsilon(DELTA)


def test_two_dpsgd_runs_equal_the_accountants_composition():
    ledger = Ledger(value_discretization_interval=1e-3)
    for run in RUNS:
        ledger.add(_dpsgd(*run))
    total = ledger.total(DELTA)
    assert total.epsilon == pytest.approx(_accountant(RUNS, 1e-3), rel=1e-9)
    assert total.delta == DELTA and total.neighbouring == "add_remove" and total.accountant == "pld(ledger)"
    # power: the same ledger differs from the composition of other events (one run counted twice)
    assert abs(total.epsilon - _accountant([RUNS[0], RUNS[0]], 1e-3)) > 0.1


def test_refined_total_is_a_converged_upper_bound():
    ledger = Ledger()
    for run in RUNS:
        ledger.add(_dpsgd(*run))
    eps = ledger.total(DELTA).epsilon
    fine = _accountant(RUNS, 1e-4)
    assert fine * (1 - 1e-6) <= eps <= fine * (1 + 2e-3)
    singles = [_dpsgd(*r).epsilon for r in RUNS]
    assert max(singles) < eps < sum(singles)  # composition costs more than one run, less than the sum


def test_one_release_gives_its_own_epsilon():
    ledger = Ledger()
    ledger.add(_dpsgd(*RUNS[0]))
    assert ledger.total(DELTA).epsilon == pytest.approx(_dpsgd(*RUNS[0]).epsilon, rel=2e-3)


def test_releases_with_privacy_and_gaussian_mechanism_exact():
    ledger = Ledger(value_discretization_interval=1e-3)
    rel = dpp.privacy.gaussian_mechanism(np.zeros(3), epsilon=0.5, delta=1e-6, sensitivity=2.0)
    assert ledger.add(rel, "counts") is rel.privacy
    ledger.add(_dpsgd(*RUNS[1]))
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-3)
    acc.compose(
        dp_event.ComposedDpEvent(
            [
                dp_event.GaussianDpEvent(rel.privacy.noise_multiplier),
                dp_event.SelfComposedDpEvent(
                    dp_event.PoissonSampledDpEvent(RUNS[1][1], dp_event.GaussianDpEvent(RUNS[1][0])), RUNS[1][2]
                ),
            ]
        )
    )
    assert ledger.total(DELTA).epsilon == pytest.approx(acc.get_epsilon(DELTA), rel=1e-9)
    assert [e.label for e in ledger.entries] == ["counts", "poisson_subsampled_gaussian"]


def test_pure_releases_compose_no_worse_than_basic_composition():
    ledger = Ledger()
    for _ in range(3):
        ledger.add(
            PrivacySpent(
                epsilon=0.4,
                delta=0.0,
                neighbouring="add_remove",
                accountant="pure",
                mechanism="laplace_sufficient_statistics",
            )
        )
    eps = ledger.total(1e-6).epsilon
    assert 0.9 < eps <= 1.2 + 1e-9


def test_mixed_relations_give_replace_one():
    ledger = Ledger(value_discretization_interval=1e-3)
    ledger.add(_dpsgd(*RUNS[1]))
    ledger.add(
        PrivacySpent(epsilon=0.3, delta=1e-7, neighbouring="replace_one", accountant="optimal", mechanism="dp_fast_mh")
    )
    total = ledger.total(DELTA)
    assert total.neighbouring == "replace_one"
    alone = _accountant([RUNS[1]], 1e-3, NeighboringRelation.REPLACE_ONE)
    assert alone < total.epsilon < alone + 0.3 + 1e-9


def test_non_private_and_invalid():
    ledger = Ledger()
    with pytest.raises(ValueError, match="the ledger is empty"):
        ledger.total(DELTA)
    with pytest.raises(TypeError, match="Ledger.add takes a release with a .privacy record"):
        ledger.add(1.0)
    ledger.add(not_private("debug"))
    assert math.isinf(ledger.total(DELTA).epsilon)
    with pytest.raises(ValueError, match="delta"):
        Ledger().total(0.0)


def test_exported_names():
    assert dpp.Ledger is dpp.privacy.Ledger is Ledger


def test_save_and_load(tmp_path):
    ledger = Ledger()
    ledger.add(_dpsgd(*RUNS[0]), "first")
    ledger.add(
        PrivacySpent(
            epsilon=0.4,
            delta=0.0,
            neighbouring="add_remove",
            accountant="pure",
            mechanism="laplace_sufficient_statistics",
        ),
        "counts",
    )
    again = Ledger.load(ledger.save(tmp_path / "ledger.json"))
    assert again.entries == ledger.entries
    assert again.total(DELTA).epsilon == ledger.total(DELTA).epsilon
    (tmp_path / "bad.json").write_text('{"format": "something else"}')
    with pytest.raises(ValueError, match="is not a dpposterior ledger"):
        Ledger.load(tmp_path / "bad.json")
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(ValueError, match="cannot read ledger file"):
        Ledger.load(tmp_path / "broken.json")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        Ledger.load(tmp_path / "none.json")
    # saving to a folder was an IsADirectoryError about a hidden temporary file
    with pytest.raises(ValueError, match="is a folder, not a file"):
        ledger.save(tmp_path)
    with pytest.raises(ValueError, match="is a file, not a folder"):
        ledger.save(tmp_path / "ledger.json" / "inner.json")


# --- composition of (epsilon, delta) releases against hand computations ---


def _record(eps, delta, neighbouring="add_remove", mechanism="laplace_sufficient_statistics"):
    return PrivacySpent(epsilon=eps, delta=delta, neighbouring=neighbouring, accountant="pure", mechanism=mechanism)


def _optimal_composition_epsilon(pairs, total_delta):
    """Exact adaptive composition of (eps_i, delta_i)-DP mechanisms (their dominating pairs: loss +inf
    with probability delta_i, else +-eps_i), written independently of dp-accounting: the smallest
    epsilon with 1 - prod(1 - delta_i) + prod(1 - delta_i) E[(1 - e^(epsilon - L))_+] <= total_delta."""
    import itertools

    keep = math.prod(1.0 - d for _, d in pairs)
    losses, probs = [], []
    for signs in itertools.product((1, -1), repeat=len(pairs)):
        losses.append(sum(s * e for s, (e, _) in zip(signs, pairs)))
        probs.append(
            math.prod(
                math.exp(e) / (1 + math.exp(e)) if s > 0 else 1 / (1 + math.exp(e)) for s, (e, _) in zip(signs, pairs)
            )
        )
    losses, probs = np.array(losses), np.array(probs)

    def delta_at(eps):
        return 1.0 - keep + keep * float(np.sum(probs * np.clip(1.0 - np.exp(eps - losses), 0.0, None)))

    lo, hi = 0.0, float(losses.max())
    if delta_at(0.0) <= total_delta:
        return 0.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if delta_at(mid) <= total_delta else (mid, hi)
    return hi


@pytest.mark.parametrize(
    "pairs, total_delta",
    [
        ([(1.0, 0.0), (1.0, 0.0)], 1e-6),  # the same pure release twice
        ([(1.0, 1e-6), (0.5, 1e-5)], 2e-5),  # different deltas
        ([(1.0, 1e-6), (0.5, 1e-5)], 1.1e-5),  # total delta = the sum of theirs
        ([(0.0, 0.0), (1.0, 0.0)], 1e-6),  # an epsilon-0 release
        ([(0.7, 0.0), (0.2, 1e-4), (1.5, 1e-7)], 1e-3),  # pure mixed with approximate DP
    ],
)
def test_epsilon_delta_releases_between_optimal_and_basic_composition(pairs, total_delta):
    ledger = Ledger()
    for eps, d in pairs:
        ledger.add(_record(eps, d))
    got = ledger.total(total_delta).epsilon
    exact = _optimal_composition_epsilon(pairs, total_delta)
    assert got >= exact - 1e-9  # never below the true composition
    assert got <= exact + 2e-3 * max(exact, 1.0)  # and converged to it (PLD discretisation)
    if total_delta >= sum(d for _, d in pairs):
        assert got <= sum(e for e, _ in pairs) + 1e-9  # never above basic composition


def test_mixed_relations_convert_add_remove_by_group_privacy():
    # replace-one = one removal + one addition: an add/remove (eps, delta) release costs
    # (2 eps, (1 + e^eps) delta) in a replace-one total, by hand here.
    ledger = Ledger()
    ledger.add(_record(0.4, 1e-7, "add_remove"))
    ledger.add(_record(0.3, 0.0, "replace_one"))
    total = ledger.total(1e-5)
    assert total.neighbouring == "replace_one"
    exact = _optimal_composition_epsilon([(0.8, 1e-7 * (1 + math.exp(0.4))), (0.3, 0.0)], 1e-5)
    assert exact - 1e-9 <= total.epsilon <= 1.1 + 1e-9
    assert total.epsilon == pytest.approx(exact, abs=2e-3)


def test_mixed_relations_dpsgd_equals_replace_one_accountant():
    ledger = Ledger(value_discretization_interval=1e-3)
    ledger.add(_dpsgd(*RUNS[0]))
    ledger.add(_record(1e-9, 0.0, "replace_one"))
    assert ledger.total(DELTA).epsilon == pytest.approx(
        _accountant([RUNS[0]], 1e-3, NeighboringRelation.REPLACE_ONE), abs=1e-3
    )


def test_release_with_delta_one_as_composed_is_a_clear_error():
    # was a bare IndexError from inside dp-accounting's PLD composition
    ledger = Ledger()
    ledger.add(_record(3.0, 0.2, "add_remove"), "histogram")  # replace-one: (6, 4.2 -> 1)
    ledger.add(_record(0.5, 0.0, "replace_one"))
    with pytest.raises(ValueError, match=r"cannot compose release 'histogram'.*\(1 \+ e\^epsilon\) delta"):
        ledger.total(DELTA)
    ledger = Ledger()
    ledger.add(_record(1.0, 1.0), "vacuous")
    ledger.add(_record(1.0, 0.0))
    with pytest.raises(ValueError, match="cannot compose release 'vacuous': its delta is 1.0"):
        ledger.total(0.5)


def test_delta_used_counts_deltas_as_composed_under_mixed_relations():
    ledger = Ledger()
    ledger.add(_record(1.0, 1e-6, "add_remove"))
    ledger.add(_record(1.0, 0.0, "replace_one"))
    used = (1.0 + math.e) * 1e-6
    assert ledger.delta_used() == pytest.approx(used, rel=1e-12)  # was 1e-6
    with pytest.raises(ValueError, match=r"as composed under replace-one adjacency\) \(sum 3.72e-06\)"):
        ledger.total(2e-6)  # above the deltas given (1e-6), below those composed
    assert math.isfinite(ledger.total(2 * used).epsilon)  # a delta above delta_used() has a total
    same = Ledger()
    same.add(_record(1.0, 1e-6, "add_remove"))
    same.add(_record(1.0, 2e-6, "add_remove"))
    assert same.delta_used() == pytest.approx(3e-6, rel=1e-12)


def test_dp_sgld_runs_compose_exactly():
    # DP-SGLD / DP dropout records (mcmc.dp_sgld.run, dpd_epsilon) were composed from their (epsilon, delta)
    # alone: two runs of sigma 1, q 0.1, 50 steps, add/remove (1.914 each at delta 1e-6) totalled 3.83 at
    # delta 1e-5, against 2.34 for the 100 Poisson-sampled Gaussian steps they are; under replace-one with a
    # DPD-AC record (sigma 6, epsilon 6.81) beside a PLD one (3.33), 10.14. Now the PLD of the steps:
    # dp-accounting's noise multiplier is the noise std over C = 2 sigma (the record's is over the
    # sensitivity: 2C replace-one, so sigma; C add/remove, so 2 sigma).
    from dpposterior.privacy import dpd_epsilon

    for rel, relation in (
        ("add_remove", NeighboringRelation.ADD_OR_REMOVE_ONE),
        ("replace_one", NeighboringRelation.REPLACE_ONE),
    ):
        a = dpd_epsilon(1.0, 1e-6, 0.1, 50, "pld", neighbouring=rel)
        b = dpd_epsilon(6.0, 1e-6, 0.1, 50, "ac", neighbouring=rel)
        assert a.noise_multiplier == (2.0 if rel == "add_remove" else 1.0)
        ledger = Ledger(value_discretization_interval=1e-3)
        ledger.add(dataclasses.replace(a, mechanism="dp_sgld"))
        ledger.add(b)
        total = ledger.total(DELTA)
        assert total.epsilon == pytest.approx(_accountant([(2.0, 0.1, 50), (12.0, 0.1, 50)], 1e-3, relation), rel=1e-9)
        assert total.detail("composed_exactly") == 2 and total.neighbouring == rel
        assert total.epsilon < a.epsilon + 0.1 < a.epsilon + b.epsilon
    # mixed relations: an add/remove DP-SGLD run is re-accounted under replace-one (was group privacy)
    ledger = Ledger(value_discretization_interval=1e-3)
    ledger.add(dpd_epsilon(1.0, 1e-6, 0.1, 50, "pld", neighbouring="add_remove"))
    ledger.add(_record(1e-9, 0.0, "replace_one"))
    assert ledger.total(DELTA).epsilon == pytest.approx(
        _accountant([(2.0, 0.1, 50)], 1e-3, NeighboringRelation.REPLACE_ONE), abs=1e-3
    )
