"""``compare --budget split`` keeps its promise when the releases' neighbouring relations differ: DP-Fast
MH (replace-one) beside NA-DPVI (add/remove-one) compose to at most the budget for replace-one
neighbours, the relation the total is stated for."""

from __future__ import annotations

import math

import pytest

import fake_mechanisms
from dpposterior.tabular import example, fit


@pytest.fixture(scope="module")
def loans(tmp_path_factory):
    return example.write_example(tmp_path_factory.mktemp("loans"), n=200, seed=3)


def test_split_with_dp_fast_mh_and_na_dpvi_stays_within_the_budget(loans, tmp_path, monkeypatch):
    calls = fake_mechanisms.install(monkeypatch)
    csv, toml = loans
    r = fit.compare_table(
        csv,
        toml,
        "default",
        methods=["na-dpvi", "dp-fast-mh"],
        epsilon=1.0,
        delta=1e-5,
        budget="split",
        num_steps=40,
        out=tmp_path / "cmp",
        progress=False,
        log=lambda line: None,
    )
    total = r["ledger"].total(1e-5)
    assert total.neighbouring == "replace_one"
    assert total.epsilon <= 1.0  # was 1.52: each release got (0.5, 5e-6)
    given = {m: (e, d) for m, e, d in calls}
    assert given["dp-fast-mh"] == pytest.approx((0.5, 5e-6))
    assert given["na-dpvi"] == pytest.approx((0.25, 5e-6 / (1 + math.exp(0.25))))


def test_split_shares_compose_to_the_budget_under_the_stated_relation():
    same = fit.split_budget(["na-dpvi", "dpvim"], 1.0, 1e-5)
    assert same == {"na-dpvi": (0.5, 5e-6), "dpvim": (0.5, 5e-6)}
    mixed = fit.split_budget(["na-dpvi", "dpvim", "dp-fast-mh"], 1.0, 1e-5)
    # replace-one cost of each share: (2e, (1 + e^e) d) for add/remove, (e, d) for replace-one
    cost = [
        (2 * e, (1 + math.exp(e)) * d) if fit.RELATIONS[m] == "add_remove" else (e, d) for m, (e, d) in mixed.items()
    ]
    assert sum(c[0] for c in cost) == pytest.approx(1.0) and sum(c[1] for c in cost) == pytest.approx(1e-5)
    assert fit.split_budget(["na-dpvi", "dp-fast-mh"], 1.0, 1e-5, "each") == {
        "na-dpvi": (1.0, 1e-5),
        "dp-fast-mh": (1.0, 1e-5),
    }
