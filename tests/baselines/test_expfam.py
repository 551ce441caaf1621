"""Bernstein-Sheldon noise-aware Gibbs for the exponential families: the release (mechanism) and the
sampler (post-processing)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dpposterior.baselines import (
    DrawsPosterior,
    bernstein_sheldon_cell,
    bernstein_sheldon_gibbs,
    release_sufficient_statistics,
)
from dpposterior.baselines import expfam_gibbs as EF
from dpposterior.baselines import expfam_release as EFR
from dpposterior.baselines import _sampling as S


FAMILIES = EF.FAMILIES
K = 200  # replicates of the coverage and exactness checks
N = 1000  # records per replicate
M = 1000  # draws per replicate
# epsilon at which the noise is large next to the sampling spread of the statistic (N = 1000).
SMALL_EPS = {"beta-bernoulli": 0.05, "dirichlet-categorical": 0.05, "gamma-exponential": 0.5}
HUGE_EPS = 1e6


# ------------------------------------------------------------------------------ the mechanism


def test_privacy_record_and_sensitivities():
    x = np.array([0, 1, 1, 0, 1])
    rel = release_sufficient_statistics("beta-bernoulli", x, epsilon=0.5, rng_key=3, snapping=False)
    p = rel.privacy
    assert (p.epsilon, p.delta, p.accountant, p.neighbouring) == (0.5, 0.0, "pure", "add_remove")
    assert p.mechanism == "laplace_sufficient_statistics" and p.seeded_by == "user"
    assert p.detail("sensitivity_l1") == 1.0 and p.detail("noise_scale") == 2.0
    assert rel.noise_scale == 2.0 and rel.num_records == 5
    # add/remove: max ||t(x)||_1; replace-one: max ||t(x) - t(x')||_1.
    assert EFR.sensitivity("dirichlet-categorical") == 1.0
    assert EFR.sensitivity("dirichlet-categorical", neighbouring="replace_one") == 2.0
    assert EFR.sensitivity("gamma-exponential", bounds=(0.5, 4.0)) == 4.0
    assert EFR.sensitivity("gamma-exponential", bounds=(0.5, 4.0), neighbouring="replace_one") == 3.5
    rel2 = release_sufficient_statistics(
        "gamma-exponential", np.array([0.1, 9.0]), epsilon=2.0, bounds=(0.0, 4.0), neighbouring="replace_one", rng_key=1
    )
    # snapped by default: the scale carries the mechanism's slack (taken out of the budget)
    assert rel2.privacy.neighbouring == "replace_one" and rel2.noise_scale == pytest.approx(2.0, rel=1e-12)
    assert rel2.privacy.detail("records_outside_bounds") == "clipped"


def test_noise_seeded_from_os_unless_key_given():
    # 40 snapped counts: two OS-seeded releases agree on all of them with negligible probability
    x = np.arange(400) % 40

    def release(**kw):
        return release_sufficient_statistics("dirichlet-categorical", x, epsilon=1.0, num_categories=40, **kw)

    a, b = release(), release()
    assert a.privacy.seeded_by == "os" and not np.array_equal(a.noisy_statistic, b.noisy_statistic)
    c, d = release(rng_key=7), release(rng_key=7)
    assert c.privacy.seeded_by == "user" and np.array_equal(c.noisy_statistic, d.noisy_statistic)


def _ks_laplace(noise: np.ndarray, scale: float) -> float:
    return stats.kstest(noise, stats.laplace(scale=scale).cdf).pvalue


def test_laplace_scale_is_sensitivity_over_epsilon():
    # Categorical with 3000 categories: one release gives 3000 i.i.d. noise draws of scale 1/epsilon.
    k, eps = 3000, 0.7
    x = np.arange(k) % k
    rel = release_sufficient_statistics(
        "dirichlet-categorical", x, epsilon=eps, num_categories=k, rng_key=11, snapping=False
    )
    noise = rel.noisy_statistic - 1.0
    assert _ks_laplace(noise, 1.0 / eps) > 1e-3
    # power: the same test rejects 2/3 and 3/2 of the scale
    assert _ks_laplace(noise, (2 / 3) / eps) < 1e-4
    assert _ks_laplace(noise, 1.5 / eps) < 1e-4


def test_exponential_noise_scale_uses_upper_bound():
    # add/remove: Delta = hi (clipped records in [lo, hi]); 1000 releases with different keys.
    x = np.array([0.5, 2.0, 7.0])  # 7.0 is clipped to 4.0
    noise = (
        np.array(
            [
                release_sufficient_statistics(
                    "gamma-exponential", x, epsilon=2.0, bounds=(0.0, 4.0), rng_key=i, snapping=False
                ).noisy_statistic[0]
                for i in range(1000)
            ]
        )
        - 6.5
    )
    assert _ks_laplace(noise, 2.0) > 1e-3
    assert _ks_laplace(noise, 2.0 * 2 / 3) < 1e-3 and _ks_laplace(noise, 3.0) < 1e-3


def test_bounds_enforced_by_clipping():
    x = np.array([0.0, 0.2, 3.0, 100.0])
    rel = release_sufficient_statistics("gamma-exponential", x, epsilon=1e9, bounds=(0.1, 2.0), rng_key=0)
    assert rel.noisy_statistic[0] == pytest.approx(0.1 + 0.2 + 2.0 + 2.0, abs=1e-6)
    assert rel.bounds == (0.1, 2.0)


@pytest.mark.parametrize(
    "family, x, kw, err",
    [
        ("beta-bernoulli", [0, 1, 2], {}, ValueError),
        ("beta-bernoulli", [0.0, np.nan], {}, ValueError),
        ("beta-bernoulli", [[0, 1]], {}, ValueError),
        ("beta-bernoulli", [], {}, ValueError),
        ("beta-bernoulli", ["a", "b"], {}, TypeError),
        ("dirichlet-categorical", [0, 1, 3], {}, ValueError),
        ("dirichlet-categorical", [0, 1, 1.5], {}, ValueError),
        ("dirichlet-categorical", [0, 1, -1], {}, ValueError),
        ("gamma-exponential", [0.5, -0.1], {"bounds": (0.0, 5.0)}, ValueError),
        ("gamma-exponential", [0.5, np.inf], {"bounds": (0.0, 5.0)}, ValueError),
        ("gamma-exponential", [0.5], {}, ValueError),
        ("gamma-exponential", [0.5], {"bounds": (2.0, 1.0)}, ValueError),
        ("gamma-exponential", [0.5], {"bounds": (-1.0, 1.0)}, ValueError),
        ("gamma-exponential", [0.5], {"bounds": (0.0, np.inf)}, ValueError),
        ("beta-bernoulli", [0, 1], {"bounds": (0.0, 1.0)}, ValueError),
        ("beta-bernoulli", [0, 1], {"neighbouring": "swap"}, ValueError),
        ("poisson-gamma", [0, 1], {}, ValueError),
    ],
)
def test_invalid_records_and_settings_raise(family, x, kw, err):
    with pytest.raises(err):
        release_sufficient_statistics(family, np.asarray(x), epsilon=1.0, rng_key=0, **kw)


@pytest.mark.parametrize("eps", [0.0, -1.0, math.inf, math.nan])
def test_invalid_epsilon_raises(eps):
    with pytest.raises(ValueError, match="epsilon"):
        release_sufficient_statistics("beta-bernoulli", np.array([0, 1]), epsilon=eps)
    with pytest.raises(TypeError):
        release_sufficient_statistics("beta-bernoulli", np.array([0, 1]), epsilon=True)


# ------------------------------------------------------------------------------ numerical helpers


@jax.jit
def _helper_draws(key):
    k0, k1, k2, k3 = jax.random.split(key, 4)
    n = 20000
    far = S.truncated_normal(k0, jnp.zeros(n), jnp.ones(n), 20.0, 21.0)
    central = S.truncated_normal(k1, jnp.full(n, 1.0), jnp.full(n, 2.0), -1.0, 4.0)
    r = S.laplace_noise(k2, (n,), 1.7)
    om = S.laplace_mixture_variance(k3, r, 1.7)
    at_zero = S.laplace_mixture_variance(k3, jnp.zeros(5), 1.7)
    return far, central, r, om, at_zero


def test_truncated_normal_and_mixture_variance():
    far, central, r, om, at_zero = (np.asarray(v) for v in _helper_draws(jax.random.PRNGKey(0)))
    # interval far in the tail (20 sd): draws stay inside and pile up near the near end
    assert np.all((far >= 20.0) & (far <= 21.0)) and np.mean(far) == pytest.approx(20.0 + 1 / 20.05, abs=0.005)
    # central interval: matches scipy's truncated normal
    assert stats.kstest(central, stats.truncnorm(-1.0, 1.5, loc=1.0, scale=2.0).cdf).pvalue > 1e-3
    # omega | r for the Laplace scale mixture (omega ~ Exp(mean 2 b^2), r | omega ~ N(0, omega)) leaves
    # the joint invariant: r ~ Laplace(b), omega | r, then a fresh r | omega is again Laplace(b).
    r2 = np.sqrt(om) * np.random.default_rng(1).standard_normal(om.shape[0])
    assert _ks_laplace(r, 1.7) > 1e-3 and _ks_laplace(r2, 1.7) > 1e-3
    assert _ks_laplace(r2, 1.5 * 1.7) < 1e-4 and _ks_laplace(r2, 1.7 * 2 / 3) < 1e-4
    assert np.all(np.isfinite(at_zero) & (at_zero > 0))


# ------------------------------------------------------------------------------ the sampler


def _simulate(family: str, seed: int) -> tuple[np.ndarray, tuple[np.ndarray]]:
    """(unconstrained theta (K, n), (records (K, N),)) from the model's prior predictive, in numpy
    (the same distribution as the model's simulator, without compiling it)."""
    r = np.random.default_rng(seed)
    if family == "beta-bernoulli":
        th = r.beta(10.0, 10.0, K)
        return np.log(th / (1 - th))[:, None], ((r.random((K, N)) < th[:, None]).astype(np.int32),)
    if family == "gamma-exponential":
        th = r.gamma(8.0, 1.0 / 2.0, K)
        return np.log(np.expm1(th))[:, None], (r.exponential(1.0 / th[:, None], (K, N)).astype(np.float32),)
    th = r.dirichlet([5.0, 5.0, 5.0], K)
    x = np.stack([r.choice(3, N, p=row) for row in th]).astype(np.int32)
    return np.asarray(EF.to_unconstrained(family, jnp.asarray(th, jnp.float32))), (x,)


@pytest.fixture(scope="module", params=FAMILIES)
def cell(request):
    """(family, true unconstrained theta, data) for K replicates."""
    family = request.param
    theta, data = _simulate(family, 7 + FAMILIES.index(family))
    return family, theta, data


#: chain settings shared by the exactness and coverage checks (one compiled program per family).
CHAIN = {"num_warmup": 300, "thin": 2}


def _exact_params(family, data):
    (x,) = data
    if family == "dirichlet-categorical":
        s = np.stack([np.bincount(row, minlength=3) for row in x])
    elif family == "gamma-exponential":
        s = np.clip(x.astype(np.float64), *EF_BOUNDS).sum(1, keepdims=True)
    else:
        s = x.sum(1, keepdims=True).astype(np.float64)
    return np.stack([EF.conjugate_posterior_params(family, row, N) for row in s]), s


EF_BOUNDS = (0.0, 5.0)


def test_huge_epsilon_recovers_exact_conjugate_posterior(cell, helpers):
    family, _, data = cell
    out = bernstein_sheldon_cell(family, data, HUGE_EPS, 1, M, **CHAIN)
    params, s = _exact_params(family, data)
    mean, sd = helpers.exact_unconstrained_moments(family, params)
    g_mean, g_sd = out.draws.mean(1), out.draws.std(1)
    # with the statistic pinned by z, draws of theta are i.i.d. from the conjugate posterior
    # (ESS = M): standardised mean errors ~ N(0, 1), sd ratios ~ N(1, 1/(2M)), over K replicates.
    e_mean = (g_mean - mean) / (sd / math.sqrt(M))
    e_sd = (g_sd / sd - 1.0) / math.sqrt(1.0 / (2 * M))
    tol = 4.0 * math.sqrt(2.0 / e_mean.size)
    assert abs(np.mean(e_mean**2) - 1.0) < tol, np.mean(e_mean**2)
    assert abs(np.mean(e_sd**2) - 1.0) < tol + 0.1, np.mean(e_sd**2)
    # the cell's mixing diagnostics see i.i.d. chains
    assert out.diagnostics["ess_median"] > 0.5 * M and out.diagnostics["replicates_with_ess_below_100"] == 0
    # power: the posterior of the statistic off by two records (in the first coordinate) fails
    shift = np.zeros(s.shape[1])
    shift[0] = 2.0
    wrong = np.stack([EF.conjugate_posterior_params(family, row + shift, N) for row in s])
    w_mean, _ = helpers.exact_unconstrained_moments(family, wrong)
    assert np.mean(((g_mean - w_mean) / (sd / math.sqrt(M))) ** 2) > 1.0 + 3 * tol


def _naive_draws(family, z, rng):
    """Conjugate update on the noisy statistic as if it were exact (ignores the noise)."""
    zc = np.clip(z, 0.5, None)
    if family == "beta-bernoulli":
        zc = np.clip(z, 0.5, N - 0.5)
    params = np.stack([EF.conjugate_posterior_params(family, row, N) for row in zc])
    if family == "beta-bernoulli":
        p = rng.beta(params[:, :1], params[:, 1:], (len(params), M))
        return np.log(p / (1 - p))[..., None]
    if family == "gamma-exponential":
        return np.log(rng.gamma(params[:, :1], 1.0 / params[:, 1:], (len(params), M)))[..., None]
    th = np.stack([rng.dirichlet(a, M) for a in params])
    return np.asarray(EF.to_unconstrained(family, jnp.asarray(th, jnp.float32)))


def test_small_epsilon_coverage_is_calibrated(cell, rng, helpers):
    family, theta, data = cell
    eps = SMALL_EPS[family]
    out = bernstein_sheldon_cell(family, data, eps, 2, M, **CHAIN)
    cov = helpers.central_coverage(out.draws, theta)
    tol = helpers.binomial_tolerance(K, z=3.5)
    assert np.all(np.abs(cov - 0.9) < tol), cov
    assert out.privacy.epsilon == eps and out.privacy.delta == 0.0
    assert out.draws.shape == (K, M, theta.shape[1]) and out.posterior_sd.shape == (K, theta.shape[1])
    # power twin: the conjugate update on the noisy statistic as if it were exact is overconfident
    k_rel = jax.random.split(jax.random.PRNGKey(2))[0]
    rel_keys = np.asarray(jax.random.split(k_rel, K))
    bounds = EF_BOUNDS if family == "gamma-exponential" else None
    z = np.stack(
        [
            release_sufficient_statistics(
                family, data[0][i], epsilon=eps, bounds=bounds, rng_key=rel_keys[i]
            ).noisy_statistic
            for i in range(K)
        ]
    )
    naive = helpers.central_coverage(_naive_draws(family, z, rng), theta)
    assert np.any(naive < 0.9 - tol), naive


def test_draws_posterior_api():
    layout = EF.family_layout("dirichlet-categorical")
    th = np.random.default_rng(0).dirichlet([40.0, 60.0, 100.0], 500)
    draws = EF.to_unconstrained("dirichlet-categorical", jnp.asarray(th, jnp.float32))
    rel = release_sufficient_statistics("dirichlet-categorical", np.array([0, 1, 2]), epsilon=1.0, rng_key=0)
    post = DrawsPosterior(layout=layout, draws=draws, privacy=rel.privacy, method="test")
    assert post.privacy is rel.privacy and post.num_draws == 500 and post.num_latent == 2
    s = post.sample(jax.random.PRNGKey(0), 40)
    assert s["theta"].shape == (40, 3) and np.allclose(np.sum(np.asarray(s["theta"]), 1), 1.0, atol=1e-5)
    assert post.sample_unconstrained(1, 7).shape == (7, 2)
    np.testing.assert_allclose(post.mean()["theta"], th.mean(0), atol=2e-3)
    np.testing.assert_allclose(post.sd_unconstrained(), np.std(np.asarray(draws), 0), rtol=1e-5)
    rows = post.summary(prob=0.8)
    assert [r["parameter"] for r in rows] == ["theta[0]", "theta[1]", "theta[2]"]
    assert all(r["q0.1"] < r["mean"] < r["q0.9"] for r in rows)
    with pytest.raises(ValueError):
        DrawsPosterior(layout=layout, draws=np.zeros((5, 3)), privacy=rel.privacy, method="x")
    with pytest.raises(ValueError):
        DrawsPosterior(layout=layout, draws=np.full((5, 2), np.nan), privacy=rel.privacy, method="x")
    with pytest.raises(ValueError):
        post.sample(0, 0)


@pytest.mark.slow
def test_public_sampler_end_to_end():
    x = (np.random.default_rng(0).random(300) < 0.4).astype(np.int32)
    rel = release_sufficient_statistics("beta-bernoulli", x, epsilon=1.0, rng_key=5)
    post = bernstein_sheldon_gibbs(rel, num_warmup=100, num_draws=500, rng_key=1)
    assert isinstance(post, DrawsPosterior) and post.privacy is rel.privacy
    draws = post.sample(jax.random.PRNGKey(0), 50)
    assert draws["theta"].shape == (50,) and np.all((draws["theta"] > 0) & (draws["theta"] < 1))
    assert float(post.mean()["theta"]) == pytest.approx(0.4, abs=0.1)
    with pytest.raises(TypeError):
        bernstein_sheldon_gibbs("not a release")


def test_small_prior_concentrations_give_finite_exact_unconstrained_draws():
    # A Jeffreys prior Beta(0.5, 0.5) and 20 positive records: the posterior Beta(20.5, 0.5) puts about
    # 1e-3 of its mass within float32 rounding of theta = 1, whose logit was inf, so the sampler failed
    # with DrawsPosterior's "draws must be finite" (and the logit's tail was lost near the boundary).
    rel = release_sufficient_statistics("beta-bernoulli", np.ones(20), epsilon=1e3, rng_key=0)
    post = bernstein_sheldon_gibbs(rel, prior=(0.5, 0.5), num_warmup=100, num_draws=3000, rng_key=2)
    logits = np.asarray(post.draws)[:, 0]
    assert np.all(np.isfinite(logits))
    levels = [0.1, 0.5, 0.9]  # at epsilon 1e3 the posterior is the exact Beta(20.5, 0.5)
    q = stats.beta(20.5, 0.5).ppf(levels)
    exact = np.log(q) - np.log1p(-q)
    np.testing.assert_allclose(np.quantile(logits, levels), exact, atol=0.35)  # logit sd about 2.5
    # the Dirichlet's stick-breaking values from the log-Gamma variates: NumPyro's inverse where float32
    # resolves theta, finite where a component underflows to 0 (Dirichlet(0.01, ...) with unused categories)
    from numpyro.distributions.transforms import StickBreakingTransform

    lg = jnp.array([[0.3, -1.2, 2.0, 0.1], [4.0, -900.0, -2500.0, 1.0]], jnp.float32)
    unc = np.asarray(jax.vmap(EF._stick_breaking_from_log_gammas)(lg))
    np.testing.assert_allclose(unc[0], StickBreakingTransform().inv(jax.nn.softmax(lg[0])), rtol=1e-5)
    assert np.all(np.isfinite(unc[1])) and not np.all(np.isfinite(StickBreakingTransform().inv(jax.nn.softmax(lg[1]))))
    np.testing.assert_allclose(
        unc[1],
        [
            4.0 - np.logaddexp(np.logaddexp(-900.0, -2500.0), 1.0) + np.log(3),
            -900.0 - np.logaddexp(-2500.0, 1.0) + np.log(2),
            -2500.0 - 1.0,
        ],
        rtol=1e-6,
    )


def test_layouts_have_the_models_supports():
    import numpyro.distributions as dist

    from dpposterior.baselines.regression_gibbs import regression_layout
    from dpposterior.models import conjugate
    from dpposterior.releases.layout import support_to_spec

    assert EF.family_layout("beta-bernoulli").sites[0].support == support_to_spec(dist.Beta(10.0, 10.0).support)
    gamma_support = support_to_spec(conjugate.SoftplusGamma(8.0, 2.0).support)
    assert EF.family_layout("gamma-exponential").sites[0].support == gamma_support == {"kind": "softplus_positive"}
    simplex = EF.family_layout("dirichlet-categorical").sites[0]
    assert simplex.support == support_to_spec(dist.Dirichlet(jnp.ones(3)).support)
    assert (simplex.shape, simplex.unconstrained_shape) == ((3,), (2,))
    reg = regression_layout(10)
    assert reg.names == ("sigma2", "w") and reg.num_latent == 12


# not slow: it is the check that the baselines' maps are NA-DPVI's (a change of map once broke the
# Bernstein-Sheldon cells while every fast test passed)
def test_layouts_match_the_models():
    from dpposterior.baselines.regression_gibbs import regression_layout
    from dpposterior.models import conjugate, linear_regression
    from dpposterior.vi.model_inspect import inspect_model

    assert EF.family_layout("beta-bernoulli") == inspect_model(conjugate.beta_bernoulli, (jnp.zeros(3, jnp.int32),), {})
    assert EF.family_layout("gamma-exponential") == inspect_model(
        conjugate.gamma_exponential, (jnp.zeros(3, jnp.float32),), {}
    )
    assert EF.family_layout("dirichlet-categorical") == inspect_model(
        conjugate.dirichlet_categorical, (jnp.zeros(3, jnp.int32),), {}
    )
    assert regression_layout(10) == inspect_model(linear_regression, (jnp.zeros((3, 10)), jnp.zeros(3)), {})


@pytest.mark.slow  # long: kept out of the default run, which must stay short
def test_clipping_outside_the_bounds_is_reported_and_warned():
    # the conjugate step ignores clipping: with hi = 1 and rate 1, 37% of the records are clipped and
    # the posterior is biased; the sampler says so (warning + diagnostic) instead of staying silent
    x = np.random.default_rng(3).exponential(1.0, 2000)
    narrow = release_sufficient_statistics("gamma-exponential", x, epsilon=1e3, bounds=(0.0, 1.0), rng_key=1)
    with pytest.warns(UserWarning, match=r"outside the clipping bounds \(0.0, 1.0\).*biased"):
        post = bernstein_sheldon_gibbs(narrow, num_warmup=50, num_draws=200, rng_key=2)
    assert post.diagnostics["clipped_fraction_max"] > 0.1  # exp(-theta) at the biased theta (about 1.5)
    wide = release_sufficient_statistics("gamma-exponential", x, epsilon=1e3, bounds=(0.0, 40.0), rng_key=1)
    post = bernstein_sheldon_gibbs(wide, num_warmup=50, num_draws=200, rng_key=2)  # no warning (errors here)
    assert post.diagnostics["clipped_fraction_max"] < 1e-12
    # the coverage cell records it per replicate, without a warning per cell
    th = np.array([[0.5, 1.0], [10.0, 12.0], [8.0, 9.0]])
    d = EF.clipping_check(th, (0.0, 5.0), None)
    assert d["replicates_clipped_over_warn"] == 1 and d["clipped_fraction_max"] == pytest.approx(math.exp(-2.5))
    assert EF.clipping_check(th, None, "x") == {}


@pytest.mark.slow  # long: kept out of the default run, which must stay short
def test_epsilon_so_large_that_the_chain_underflows_is_a_clear_error():
    x = (np.random.default_rng(0).random(5000) < 0.4).astype(np.int32)
    rel = release_sufficient_statistics("beta-bernoulli", x, epsilon=1e30, rng_key=5)
    with pytest.raises(ValueError, match="too small for float32.*smaller epsilon"):
        bernstein_sheldon_gibbs(rel, num_warmup=10, num_draws=20, rng_key=1)


def test_non_finite_draws_are_a_clear_error_and_clipping_is_measured():
    # the default run's guard of the two checks (the chain-based tests above are slow)
    EF.check_finite_draws(np.ones((3, 2)), 0.5, "x")
    with pytest.raises(ValueError, match="x: the Gibbs chain produced non-finite draws.*smaller epsilon"):
        EF.check_finite_draws(np.array([[1.0], [np.nan]]), 1e-30, "x")
    d = EF.clipping_check(np.array([[0.5, 1.0], [10.0, 12.0]]), (0.0, 5.0), None)
    assert d["replicates_clipped_over_warn"] == 1 and d["clipped_fraction_max"] == pytest.approx(math.exp(-2.5))
    with pytest.warns(UserWarning, match="outside the clipping bounds"):
        EF.clipping_check(np.array([0.5]), (0.0, 5.0), "one release")


def test_kernel_is_init_and_step_with_the_release_closed_over():
    """bernstein_sheldon_kernel gives BlackJAX's (init, step); sample_chain runs that kernel, so one
    sweep by hand from the same keys gives its first draw."""
    from dpposterior.baselines import GibbsAlgorithm, bernstein_sheldon_kernel

    rel = release_sufficient_statistics("beta-bernoulli", np.r_[np.ones(30), np.zeros(20)], epsilon=1.0, rng_key=0)
    algorithm = bernstein_sheldon_kernel(rel)
    assert isinstance(algorithm, GibbsAlgorithm)
    key = jax.random.key(3)
    k0, k_run = jax.random.split(key)
    state, info = jax.jit(algorithm.step)(jax.random.fold_in(k_run, 0), jax.jit(algorithm.init)(k0))
    assert isinstance(state, EF.GibbsState) and isinstance(info, EF.GibbsInfo) and state.obs is not None
    interval = tuple(jnp.asarray(v, jnp.float32) for v in rel.observation_interval())
    draws = EF.sample_chain(
        key,
        jnp.asarray(rel.noisy_statistic, jnp.float32),
        jnp.float32(rel.noise_scale),
        model=rel.model(),
        num_warmup=0,
        num_draws=1,
        interval=interval,
    )
    np.testing.assert_allclose(np.asarray(draws[0]), np.asarray(state.theta), rtol=1e-5)
    with pytest.raises(TypeError, match="SufficientStatisticsRelease"):
        bernstein_sheldon_kernel(object())
