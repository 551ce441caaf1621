"""Mironov's snapping mechanism (privacy.snapping) and the samplers that read snapped releases.

Statistical checks use false-alarm rates near 1e-6 (as in test_secure.py) and each has a power twin:
the same check must reject a wrong law.
"""

import math

import numpy as np
import pytest
from scipy import stats

from dpposterior.baselines import expfam_gibbs as EF
from dpposterior.baselines import expfam_release as EFR
from dpposterior.baselines import regression_gibbs as RG
from dpposterior.baselines import regression_release as RGR
from dpposterior.privacy import snapping as SN

P_OK, P_POWER = 1e-6, 1e-8
KEY = np.array([0, 7], np.uint32)


def test_power_of_two_and_slack_bookkeeping():
    assert SN.power_of_two_at_least(16.0) == 16.0
    assert SN.power_of_two_at_least(16.000001) == 32.0
    assert SN.power_of_two_at_least(0.3) == 0.5
    assert SN.power_of_two_at_least(2.0**-40 * 3) == 2.0**-38
    with pytest.raises(ValueError, match="finite positive"):
        SN.power_of_two_at_least(0.0)
    # the noise epsilon plus the slack (at the noise epsilon) never exceeds the target
    for eps, hw, d in ((0.1, 5000.0, 1.0), (3.0, 1e9, 2.0), (1e-3, 1.0, 1.0)):
        e_noise = SN.noise_epsilon(eps, np.full(50, hw), d)
        spent = e_noise + 50 * SN.slack(SN.clamp_ratio(hw, d / e_noise))
        assert 0 < e_noise < eps and spent <= eps


def test_uniform_star_is_uniform_with_every_exponent():
    bits = SN._Bits(KEY)
    u, signs = SN._uniform_star(bits, 40_000)
    u = np.asarray(u)
    assert np.all((u > 0) & (u < 1))
    assert stats.kstest(u, "uniform").pvalue > P_OK
    assert stats.kstest(u**1.05, "uniform").pvalue < P_POWER  # power: a slightly wrong law is caught
    # small values carry full mantissas (unlike k 2^-53 uniforms): the law of log2(u) below 2^-10
    tiny = u[u < 2.0**-6]
    assert stats.kstest(tiny * 2.0**6, "uniform").pvalue > P_OK
    assert abs(np.mean(np.asarray(signs) > 0) - 0.5) < 6 * 0.5 / math.sqrt(len(signs))


def _rounded_laplace_pmf(k, lam, big_lam, offset):
    """P(round((offset + L) / Lam) = k) for L ~ Laplace(lam)."""
    cdf = stats.laplace(scale=lam).cdf
    return cdf((k + 0.5) * big_lam - offset) - cdf((k - 0.5) * big_lam - offset)


@pytest.mark.parametrize("epsilon", [0.1, 0.37])
def test_snapped_release_is_rounded_laplace_on_the_grid(epsilon):
    n, m = 5000, 20_000
    r = SN.snap(np.full(m, 1234.0), centre=0.5 * n, half_width=0.5 * n, sensitivity=1.0, epsilon=epsilon, raw_key=KEY)
    lam, big_lam = r.scale, r.grid
    assert lam > 1 / epsilon and lam == pytest.approx(1 / epsilon, rel=1e-6)
    assert big_lam == SN.power_of_two_at_least(lam)
    offset = 1234.0 - 0.5 * n
    k = (r.value - 0.5 * n) / big_lam
    np.testing.assert_array_equal(k, np.round(k))  # every output lies on the public grid (no low-order bits)
    ks, counts = np.unique(k, return_counts=True)

    def chi2_p(scale):
        edges = np.round(offset / big_lam) + np.arange(-8, 9)
        probs = _rounded_laplace_pmf(edges, scale, big_lam, offset)
        obs = np.array([np.sum(counts[ks == e]) for e in edges])
        probs = np.append(probs, 1 - probs.sum())
        obs = np.append(obs, m - obs.sum())
        return stats.chisquare(obs, m * probs).pvalue

    assert chi2_p(lam) > P_OK
    for wrong in (0.85, 1.15):
        assert chi2_p(wrong * lam) < P_POWER
    lo, hi = r.intervals()
    np.testing.assert_allclose(hi - lo, big_lam)
    assert np.all((lo <= r.value) & (r.value <= hi))


def test_clamping_and_the_intervals_at_the_ends():
    # a count range [0, 10] with lam = 10: B is raised to 2 lam = 20 (Mironov's theorem needs B > lam)
    r = SN.snap(np.full(4000, 10.0), centre=5.0, half_width=5.0, sensitivity=1.0, epsilon=0.1, raw_key=KEY)
    assert np.allclose(r.clamp, 2 * r.scale)
    assert np.max(r.value) == 5.0 + r.clamp[0] and np.min(r.value) == 5.0 - r.clamp[0]
    lo, hi = r.intervals()
    top = r.value == 5.0 + r.clamp[0]
    bottom = r.value == 5.0 - r.clamp[0]
    assert top.any() and bottom.any()
    assert np.all(np.isinf(hi[top])) and np.all(np.isfinite(lo[top]))
    assert np.all(np.isinf(lo[bottom])) and np.all(np.isfinite(hi[bottom]))
    # a pre-rounding value just inside the top interval snaps to the clamp: lo is the grid's half-step
    assert lo[top][0] - 5.0 == pytest.approx(r.grid * (math.ceil(r.clamp[0] / r.grid) - 0.5))


def test_refuses_a_range_too_wide_for_the_noise():
    with pytest.raises(ValueError, match="too wide"):
        SN.snap(np.zeros(1), centre=0.0, half_width=1e15, sensitivity=1.0, epsilon=1.0, raw_key=KEY)
    with pytest.raises(ValueError, match="half-widths"):
        SN.snap(np.zeros(1), centre=0.0, half_width=np.nan, sensitivity=1.0, epsilon=1.0, raw_key=KEY)


def test_the_floating_point_attack_on_plain_noise_and_its_repair():
    """Mironov's attack: a plain float32-noise release reveals which of two neighbouring sums it came
    from (z - s is a float32 only for the true s); snapped outputs share one grid for both."""
    x = np.array([0.3, 1.7, 2.2, 0.9] * 25)
    x_alt = x.copy()
    x_alt[0] = 0.3 + 1e-6  # a neighbouring data set (one record changed slightly)
    s, s_alt = x.sum(), x_alt.sum()
    told = 0
    for i in range(20):
        z = EFR.release_sufficient_statistics(
            "gamma-exponential", x, epsilon=1.0, bounds=(0.0, 5.0), rng_key=i, snapping=False
        ).noisy_statistic[0]
        # z - s is a float32 noise value up to the float64 rounding of z = s + noise (1e-14 here)
        on_true = abs(float(np.float32(z - s)) - (z - s)) < 1e-10
        on_alt = abs(float(np.float32(z - s_alt)) - (z - s_alt)) < 1e-10
        told += on_true and not on_alt
    assert told >= 19  # the attacker tells the data sets apart nearly always
    grids = set()
    for data in (x, x_alt):
        for i in range(20):
            r = EFR.release_sufficient_statistics(
                "gamma-exponential", data, epsilon=1.0, bounds=(0.0, 5.0), rng_key=i, snapping=True
            )
            k = (r.noisy_statistic[0] - r.snapped.centre[0]) / r.snapped.grid
            assert k == round(k) or abs(r.snapped.units[0]) == r.snapped.clamp[0] / r.snapped.sensitivity
            grids.add((r.snapped.grid, r.snapped.centre[0]))
    assert len(grids) == 1  # the same public lattice whatever the data


def test_snapping_is_the_default_and_plain_laplace_is_recorded_as_such():
    x = (np.arange(300) % 4 == 0).astype(int)
    default = EFR.release_sufficient_statistics("beta-bernoulli", x, epsilon=0.5, rng_key=1)
    assert default.snapped is not None and "snapping" in dict(default.privacy.details)
    reg = RGR.release_regression_statistics(
        np.zeros((5, 1)), np.zeros(5), epsilon=1.0, x_bound=1.0, y_bound=1.0, rng_key=1
    )
    assert reg.snapped is not None and "snapping" in dict(reg.privacy.details)
    plain = EFR.release_sufficient_statistics("beta-bernoulli", x, epsilon=0.5, rng_key=1, snapping=False)
    assert plain.snapped is None and plain.observation_interval() is None
    assert dict(plain.privacy.details)["floating_point_attack"].startswith("not mitigated")
    sec = EFR.release_sufficient_statistics("beta-bernoulli", x, epsilon=0.5, secure=True)
    assert sec.snapped is not None and dict(sec.privacy.details)["snapping_slack"] < 1e-9
    assert sec.privacy.epsilon == 0.5 and sec.privacy.seeded_by == "secure"
    a = EFR.release_sufficient_statistics("beta-bernoulli", x, epsilon=0.5, rng_key=1, snapping=True)
    b = EFR.release_sufficient_statistics("beta-bernoulli", x, epsilon=0.5, rng_key=1, snapping=True)
    assert a.noisy_statistic[0] == b.noisy_statistic[0]  # a key reproduces a snapped release
    with pytest.raises(TypeError, match="True or False"):
        EFR.release_sufficient_statistics("beta-bernoulli", x, epsilon=0.5, rng_key=1, snapping="yes")


def _exact_snapped_bb_posterior(z_interval, n, lam, prior=(1.0, 1.0)):
    """Posterior of logit(theta) given a snapped count: sum over s of Binomial(s) P(s + Laplace in I)."""
    lo, hi = z_interval
    theta = np.linspace(1e-4, 1 - 1e-4, 4001)
    s = np.arange(n + 1)
    lik_s = stats.laplace(loc=s, scale=lam).cdf(hi) - stats.laplace(loc=s, scale=lam).cdf(lo)
    logpmf = stats.binom.logpmf(s[None, :], n, theta[:, None])
    post = stats.beta(*prior).pdf(theta) * (np.exp(logpmf) @ lik_s)
    logit = np.log(theta / (1 - theta))
    jac = theta * (1 - theta)  # density of logit(theta) = density of theta times dtheta/dlogit
    w = post * jac
    w /= w.sum()
    mean = np.sum(w * logit)
    return mean, math.sqrt(np.sum(w * (logit - mean) ** 2))


def test_bernstein_sheldon_on_a_snapped_release_matches_the_exact_posterior():
    n = 2000
    x = (np.random.default_rng(3).random(n) < 0.35).astype(int)
    r = EFR.release_sufficient_statistics("beta-bernoulli", x, epsilon=0.09, rng_key=11, snapping=True)
    assert r.snapped.grid == 16.0  # lam = 11.1, Lam = 16: rounding is a sizeable part of the error
    lo, hi = (v[0] for v in r.observation_interval())
    mean, sd = _exact_snapped_bb_posterior((lo, hi), n, r.noise_scale, EF.DEFAULT_PRIORS["beta-bernoulli"])
    post = EF.bernstein_sheldon_gibbs(r, num_warmup=300, num_draws=8_000, thin=2, rng_key=0)
    d = np.asarray(post.draws)[:, 0]
    assert post.diagnostics["snapped"]
    assert abs(d.mean() - mean) < 0.1 * sd and abs(d.std() / sd - 1) < 0.06
    # power: treating the snapped z as a plain Laplace observation at the interval's end is caught
    off = _exact_snapped_bb_posterior((hi - 1e-9, hi), n, r.noise_scale, EF.DEFAULT_PRIORS["beta-bernoulli"])
    assert abs(d.mean() - off[0]) > 0.1 * sd


def test_gibbs_ss_noisy_reads_a_snapped_release():
    rng = np.random.default_rng(0)
    n, p = 3000, 3
    X = rng.normal(size=(n, p))
    y = X @ np.array([0.5, -0.3, 0.2]) + 0.1 + 0.3 * rng.normal(size=n)
    kw = dict(epsilon=20.0, x_bound=3.0, y_bound=5.0, rng_key=1)
    snapped = RGR.release_regression_statistics(X, y, snapping=True, **kw)
    lo, hi = snapped.observation_interval()
    z, _ = snapped.latent_observation()
    assert lo.shape == z.shape and np.all((lo <= z) & (z <= hi)) and np.all(hi > lo)
    a = RG.gibbs_ss_noisy(snapped, num_warmup=300, num_draws=1000, rng_key=0)
    assert a.diagnostics["snapped"]
    d = np.asarray(a.draws)
    # at a large epsilon the posterior sits on the truth (w, intercept) within a few posterior sd (the
    # unsnapped chain's arithmetic is unchanged: tests/baselines/test_regression.py)
    truth = np.array([0.5, -0.3, 0.2, 0.1])
    assert np.all(np.abs(d[:, 1:].mean(0) - truth) < 5 * d[:, 1:].std(0) + 0.02)


def test_snapped_cells_run_vectorised():
    from dpposterior.baselines import cells as BC

    rng = np.random.default_rng(5)
    x = (rng.random((4, 300)) < 0.4).astype(np.int32)
    out = BC.bernstein_sheldon_cell("beta-bernoulli", x, 0.5, 3, 200, num_warmup=50, thin=1, snapping=True)
    assert out.diagnostics["snapping"]
    assert out.draws.shape == (4, 200, 1) and np.all(np.isfinite(out.draws))
    # each replicate's posterior of logit p sits on its data's empirical logit within a few posterior sd
    emp = np.log(x.mean(1) / (1 - x.mean(1)))
    assert np.all(np.abs(out.draws[:, :, 0].mean(1) - emp) < 4 * out.draws[:, :, 0].std(1) + 0.05)
    # lam = 1 / 0.5 plus the slack, just above 2, so the grid is the next power of two (never over budget)
    assert dict(out.privacy.details)["snapping_grid"] == 4.0
