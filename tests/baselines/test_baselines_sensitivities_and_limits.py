"""The baselines' privacy and sampler limits, checked independently: sensitivities by brute force, the budget
split's exact sum, the release's cost at many features, and the huge-epsilon limits of the samplers."""

import itertools
import tracemalloc
from fractions import Fraction

import numpy as np
import pytest

from dpposterior import baselines as B
from dpposterior.baselines import expfam_release as EFR
from dpposterior.baselines import regression_release as RR


@pytest.mark.parametrize(
    "family, grid, kw",
    [
        ("beta-bernoulli", [0, 1], {}),
        ("dirichlet-categorical", [0, 1, 2, 3], {"num_categories": 4}),
        ("gamma-exponential", np.linspace(0.0, 7.0, 29), {"bounds": (0.5, 5.0)}),  # also records outside [lo, hi]
    ],
)
def test_expfam_sensitivity_equals_brute_force(family, grid, kw):
    def t(v):
        return np.asarray(
            EFR.statistic(family, np.array([v]), bounds=kw.get("bounds"), num_categories=kw.get("num_categories")),
            np.float64,
        )

    add_remove = max(np.abs(t(v)).sum() for v in grid)
    replace_one = max(np.abs(t(v) - t(u)).sum() for v in grid for u in grid)
    bounds = kw.get("bounds")
    assert EFR.sensitivity(family, bounds=bounds) == pytest.approx(add_remove, rel=1e-6)
    assert EFR.sensitivity(family, bounds=bounds, neighbouring="replace_one") == pytest.approx(replace_one, rel=1e-6)


def test_expfam_sensitivity_refuses_bounds_of_another_family():
    # was: bounds silently ignored (the release refuses them)
    for fam in ("beta-bernoulli", "dirichlet-categorical"):
        with pytest.raises(ValueError, match="bounds apply only to gamma-exponential"):
            EFR.sensitivity(fam, bounds=(0.0, 5.0))
        assert EFR.sensitivity(fam) >= 1.0


@pytest.mark.parametrize("neighbouring", ["add_remove", "replace_one"])
def test_regression_sensitivity_bounds_brute_force(neighbouring):
    bx, by = np.array([1.5, 0.7]), 2.0
    grid = [np.linspace(-b, b, 7) for b in bx] + [np.linspace(-by, by, 7)]
    recs = np.array(list(itertools.product(*grid)))
    sens = RR._sensitivities(bx, by, neighbouring, True)
    for part in ("xx", "xy", "yy", "x4"):
        t = np.array([RR._statistics(r[None, :2], r[2:], True)[part] for r in recs])
        if neighbouring == "add_remove":  # tight: attained at a corner
            assert sens[part] == pytest.approx(np.abs(t).sum(1).max(), rel=1e-9)
        else:  # a valid upper bound (documented: not always tight)
            assert sens[part] >= np.abs(t[:, None] - t[None]).sum(2).max() - 1e-9


def test_budget_parts_sum_exactly_to_at_most_epsilon():
    # was: epsilon * share products whose exact sum exceeded epsilon by 1 ulp (half of the two-decimal
    # splits tried; e.g. this one), so the composed release spent more than PrivacySpent records
    x, y = np.zeros((5, 1)), np.zeros(5)
    for eps, split in (
        (4.1, {"xx": 0.53, "xy": 0.22, "yy": 0.25}),
        (1.2, {"xx": 0.3, "xy": 0.04, "yy": 0.66}),
        (0.7, None),
    ):
        rel = B.release_regression_statistics(
            x, y, epsilon=eps, x_bound=1.0, y_bound=1.0, budget_split=split, rng_key=0, snapping=False
        )
        assert sum(Fraction(v) for v in rel.epsilon_parts.values()) <= Fraction(eps)
        assert rel.privacy.epsilon == eps
        shares = split or dict.fromkeys(RR.PARTS, 1 / 3)
        for k, v in rel.epsilon_parts.items():
            assert v == pytest.approx(shares[k] * eps, rel=1e-14)
            assert rel.noise_scales[k] == pytest.approx(rel.sensitivities[k] / v, rel=1e-14)


def test_release_at_many_features_builds_no_sampler_tables():
    # was: the release built the sampler's (P, P, n_u + 1) one-hot table and all O(p^4) degree-3/4
    # monomials even without the x4 part (p = 60: ~70 MB; p = 200: several GB before any noise was drawn)
    p = 60
    x = np.random.default_rng(0).normal(size=(20, p))
    RR.index_tables.cache_clear()
    tracemalloc.start()
    try:
        rel = B.release_regression_statistics(
            x, x[:, 0], epsilon=1.0, x_bound=3.0, y_bound=3.0, secure=True, snapping=False
        )
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert rel.noisy["xx"].shape == (p * (p + 1) // 2 + p,)
    assert peak < 8e6, peak


def test_fourth_moment_part_unchanged_by_lazy_monomials():
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, size=(30, 3))
    stats = RR._statistics(x, x[:, 0], True)
    monos = list(itertools.combinations_with_replacement(range(3), 3)) + list(
        itertools.combinations_with_replacement(range(3), 4)
    )
    assert np.allclose(stats["x4"], [np.prod(x[:, list(m)], axis=1).sum() for m in monos])


def test_gibbs_ss_noisy_one_feature_huge_epsilon_is_the_conjugate_posterior():
    rng = np.random.default_rng(0)
    n = 300
    x = np.clip(rng.normal(size=(n, 1)), -3, 3)
    y = np.clip(-0.4 * x[:, 0] + 0.3 + 0.5 * rng.normal(size=n), -6, 6)
    rel = B.release_regression_statistics(x, y, epsilon=1e6, x_bound=3.0, y_bound=6.0, rng_key=1)
    post = B.gibbs_ss_noisy(rel, num_warmup=200, num_draws=1500, rng_key=2)
    # our own normal-inverse-gamma update (prior: w | s2 ~ N(0, 4 s2 I), s2 ~ InvGamma(20, 0.5))
    xt = np.c_[x, np.ones(n)]
    lam = np.eye(2) / 4 + xt.T @ xt
    mu = np.linalg.solve(lam, xt.T @ y)
    a_n, b_n = 20 + n / 2, 0.5 + 0.5 * (y @ y - mu @ (xt.T @ y))
    s2 = b_n / (a_n - 1)
    w_sd = np.sqrt(np.diag(s2 * np.linalg.inv(lam)))
    d = post.layout.constrain(post.draws)
    w, sig2 = np.asarray(d["w"]), np.asarray(d["sigma2"])
    # 1,500 correlated draws: allow 0.25 posterior sd for the means, 20% for the sds
    assert np.all(np.abs(w.mean(0) - mu) < 0.25 * w_sd)
    assert np.allclose(w.std(0), w_sd, rtol=0.2)
    assert abs(sig2.mean() - s2) < 0.25 * s2 / np.sqrt(a_n - 2)
    # twin: a wrong reference (the slope's sign flipped) is far off
    assert not np.all(np.abs(w.mean(0) - mu * np.array([-1, 1])) < 0.25 * w_sd)


def test_dirichlet_two_categories_huge_epsilon_is_the_beta_posterior():
    x = np.random.default_rng(2).integers(0, 2, size=300)
    rel = B.release_sufficient_statistics("dirichlet-categorical", x, epsilon=1e4, num_categories=2, rng_key=0)
    assert rel.privacy.epsilon == 1e4 and rel.privacy.delta == 0 and rel.privacy.neighbouring == "add_remove"
    post = B.bernstein_sheldon_gibbs(rel, num_warmup=200, num_draws=2000, rng_key=1, prior=(5, 5))
    th = np.asarray(post.layout.constrain(post.draws)["theta"])
    a = 5 + np.bincount(x, minlength=2)
    sd = np.sqrt(a[0] * a[1] / a.sum() ** 2 / (a.sum() + 1))
    assert abs(th[:, 0].mean() - a[0] / a.sum()) < 0.2 * sd
    assert th[:, 0].std() == pytest.approx(sd, rel=0.15)
