"""Gibbs-SS-Noisy for linear regression: the release (mechanism) and the sampler (post-processing)."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
from scipy import stats

from dpposterior.baselines import DrawsPosterior, gibbs_ss_noisy, gibbs_ss_noisy_cell, release_regression_statistics
from dpposterior.baselines import regression_gibbs as RG
from dpposterior.baselines import regression_params as RGP
from dpposterior.baselines import regression_release as RGR


def _simulate(rng, k, n, p):
    """theta ~ the model's prior, x ~ N(0, I), y | x, theta: (unconstrained theta (k, 1 + P), X, y)."""
    s2 = 0.5 / rng.gamma(20.0, 1.0, k)
    w = rng.standard_normal((k, p + 1)) * np.sqrt(4.0 * s2)[:, None]
    X = rng.standard_normal((k, n, p))
    y = np.einsum("knj,kj->kn", X, w[:, :p]) + w[:, p:] + rng.standard_normal((k, n)) * np.sqrt(s2)[:, None]
    return np.concatenate([np.log(s2)[:, None], w], 1), X, y


def _t(x, y):
    """The released statistic of one record (xx, xy, yy parts) and the x4 part."""
    p = x.shape[0]
    xx = [x[j] * x[k] for j in range(p) for k in range(j, p)] + list(x)
    xy = list(x * y) + [y]
    x4 = [np.prod(x[list(m)]) for d in (3, 4) for m in itertools.combinations_with_replacement(range(p), d)]
    return np.array(xx), np.array(xy), np.array([y * y]), np.array(x4)


def test_sensitivities_match_brute_force():
    bx, by = np.array([1.5, 2.0]), 3.0
    add = RGR._sensitivities(bx, by, "add_remove", True)
    rep = RGR._sensitivities(bx, by, "replace_one", True)
    # add/remove: max ||t||_1 is attained at the corners of the box (every |monomial| maximal at once)
    pts = [(np.array(v[:2]) * bx, v[2] * by) for v in itertools.product((-1, 0, 1), repeat=3)]
    ts = [_t(x, y) for x, y in pts]
    rand = [
        (x, y)
        for x, y in zip(
            np.random.default_rng(0).uniform(-1, 1, (400, 2)) * bx, np.random.default_rng(1).uniform(-1, 1, 400) * by
        )
    ]
    ts_all = ts + [_t(x, y) for x, y in rand]
    for i, part in enumerate(("xx", "xy", "yy", "x4")):
        assert add[part] == pytest.approx(max(np.abs(t[i]).sum() for t in ts))
        assert add[part] >= max(np.abs(t[i]).sum() for t in ts_all) - 1e-9
        # replace-one: the sum of the coordinates' ranges, a valid (not always tight) upper bound
        worst = max(np.abs(a[i] - b[i]).sum() for a in ts_all for b in ts)
        assert worst - 1e-9 <= rep[part] <= 2 * add[part]


def test_release_parts_privacy_and_clipping(rng):
    _, X, y = _simulate(rng, 1, 200, 3)
    X, y = X[0], y[0]
    X[0, 0], y[1] = 50.0, -40.0  # outside the box: clipped
    rel = release_regression_statistics(X, y, epsilon=3e8, x_bound=2.0, y_bound=4.0, rng_key=0)
    xc, yc = np.clip(X, -2, 2), np.clip(y, -4, 4)
    iu = np.triu_indices(3)
    assert rel.noisy["xx"].shape == (3 * 4 // 2 + 3,)  # upper triangle once, then sum x
    np.testing.assert_allclose(rel.noisy["xx"], np.concatenate([(xc.T @ xc)[iu], xc.sum(0)]), atol=1e-3)
    np.testing.assert_allclose(rel.noisy["xy"], np.concatenate([xc.T @ yc, [yc.sum()]]), atol=1e-3)
    np.testing.assert_allclose(rel.noisy["yy"], [yc @ yc], atol=1e-3)
    p = rel.privacy
    assert (p.epsilon, p.delta, p.accountant, p.num_steps) == (3e8, 0.0, "pure", 3)
    assert sum(p.detail("epsilon_parts")) == pytest.approx(3e8)
    assert p.detail("records_outside_bounds") == "clipped" and p.neighbouring == "add_remove"
    rel4 = release_regression_statistics(
        X[:, :2],
        y,
        epsilon=1.0,
        x_bound=2.0,
        y_bound=4.0,
        fourth_moments="released",
        rng_key=1,
        budget_split={"xx": 0.4, "xy": 0.3, "yy": 0.2, "x4": 0.1},
    )
    assert rel4.noisy["x4"].shape == (4 + 5,) and rel4.privacy.num_steps == 4
    assert rel4.epsilon_parts["x4"] == pytest.approx(0.1)
    assert rel4.noise_scales["x4"] == pytest.approx(rel4.sensitivities["x4"] / 0.1)
    params = RGP.sampler_params(rel4)  # C_u from the noisy fourth moments, projected onto the PSD cone
    assert np.min(np.linalg.eigvalsh(np.asarray(params.cov_u, np.float64))) > 0


def test_laplace_scale_per_part(rng):
    _, X, y = _simulate(rng, 1, 30, 10)
    eps = 2.0
    noise, scale = [], None
    for i in range(20):
        rel = release_regression_statistics(
            X[0], y[0], epsilon=eps, x_bound=1.0, y_bound=1.0, rng_key=i, snapping=False
        )
        exact = release_regression_statistics(
            X[0], y[0], epsilon=1e12, x_bound=1.0, y_bound=1.0, rng_key=i, snapping=False
        )
        noise.append(rel.noisy["xx"] - exact.noisy["xx"])
        scale = rel.noise_scales["xx"]
    noise = np.concatenate(noise)
    assert scale == pytest.approx((55 + 10) / (eps / 3))  # Delta_xx = sum_{j<=k} B^2 + sum_j B
    assert stats.kstest(noise, stats.laplace(scale=scale).cdf).pvalue > 1e-3
    assert stats.kstest(noise, stats.laplace(scale=scale * 2 / 3).cdf).pvalue < 1e-4
    assert stats.kstest(noise, stats.laplace(scale=scale * 1.5).cdf).pvalue < 1e-4


def test_psd_projection_of_noisy_second_moments(rng):
    _, X, y = _simulate(rng, 1, 100, 4)
    rel = release_regression_statistics(X[0], y[0], epsilon=0.01, x_bound=3.0, y_bound=5.0, rng_key=3, snapping=False)
    raw = np.zeros((4, 4))
    raw[np.triu_indices(4)] = rel.noisy["xx"][:10] / 100
    assert np.min(np.linalg.eigvalsh(raw + np.triu(raw, 1).T)) < 0  # the noise breaks PSD ...
    m = rel.second_moment_matrix()
    np.testing.assert_allclose(m, m.T)
    assert np.min(np.linalg.eigvalsh(m)) > 0  # ... the projection restores it


@pytest.mark.parametrize(
    "kw, err",
    [
        ({"epsilon": 0.0}, ValueError),
        ({"epsilon": float("nan")}, ValueError),
        ({"x_bound": -1.0}, ValueError),
        ({"x_bound": [1.0, 2.0]}, ValueError),
        ({"y_bound": 0.0}, ValueError),
        ({"budget_split": {"xx": 0.5, "xy": 0.5}}, ValueError),
        ({"budget_split": {"xx": 0.5, "xy": 0.3, "yy": 0.3}}, ValueError),
        ({"budget_split": (0.3, 0.3, 0.4)}, TypeError),
        ({"fourth_moments": "exact"}, ValueError),
        ({"neighbouring": "any"}, ValueError),
        ({"X": np.full((5, 3), np.nan)}, ValueError),
        ({"X": np.zeros((4, 3))}, ValueError),
        ({"y": np.zeros((5, 1))}, ValueError),
    ],
)
def test_invalid_arguments_raise(kw, err):
    args = {"X": np.zeros((5, 3)), "y": np.zeros(5), "epsilon": 1.0, "x_bound": 1.0, "y_bound": 1.0}
    args.update(kw)
    X, y = args.pop("X"), args.pop("y")
    with pytest.raises(err):
        release_regression_statistics(X, y, **args)


K, N, P = 100, 1000, 3  # replicates, records, features of the sampler checks
CELL = {"x_bound": 3.0, "y_bound": 5.0, "num_warmup": 300, "thin": 3, "fourth_moments": (np.zeros(P), np.eye(P))}
M = 400


@pytest.fixture(scope="module")
def replicates():
    theta, X, y = _simulate(np.random.default_rng(99), K, N, P)
    return theta, X, y


@pytest.mark.slow  # long: kept out of the default run, which must stay short
def test_huge_epsilon_recovers_exact_nig_posterior(replicates, helpers):
    _, X, y = replicates
    out = gibbs_ss_noisy_cell((X, y), 1e9, 4, M, **CELL)
    d = out.draws.astype(np.float64)
    s2 = np.exp(d[..., 0])
    got_mean = np.concatenate([s2.mean(1)[:, None], d[..., 1:].mean(1)], 1)
    got_sd = np.concatenate([s2.std(1)[:, None], d[..., 1:].std(1)], 1)
    ess = helpers.ess(np.concatenate([s2[..., None], d[..., 1:]], -1).transpose(0, 2, 1))  # (K, P + 2)
    assert out.diagnostics["ess_min"] > 0 and out.diagnostics["ess_min"] <= out.diagnostics["ess_median"] <= M * 1.5
    want_mean, want_sd, wrong_mean = [], [], []
    for i in range(K):
        xc = np.concatenate([np.clip(X[i], -3, 3), np.ones((N, 1))], 1)
        yc = np.clip(y[i], -5, 5)
        ex = RGP.nig_posterior(xc.T @ xc, xc.T @ yc, yc @ yc, N)
        want_mean.append(np.concatenate([[ex["sigma2_mean"]], ex["w_mean"]]))
        want_sd.append(np.concatenate([[ex["sigma2_sd"]], ex["w_sd"]]))
        wrong_mean.append(RGP.nig_posterior(xc.T @ xc, xc.T @ yc, 1.01 * (yc @ yc), N)["sigma2_mean"])
    want_mean, want_sd = np.stack(want_mean), np.stack(want_sd)
    # standardised errors over K replicates and P + 2 coordinates: mean square ~ 1
    z = (got_mean - want_mean) / (want_sd / np.sqrt(ess))
    r = (got_sd / want_sd - 1) * np.sqrt(2 * ess)
    tol = 4.0 * math.sqrt(2.0 / z.size)
    assert abs(np.mean(z**2) - 1) < tol, np.mean(z**2, axis=0)
    assert abs(np.mean(r**2) - 1) < tol + 0.15, np.mean(r**2, axis=0)
    # power: the exact posterior with y'y off by 1% fails the check on sigma2
    zw = (got_mean[:, 0] - np.array(wrong_mean)) / (want_sd[:, 0] / np.sqrt(ess[:, 0]))
    assert np.mean(zw**2) > 1 + 10 * tol


def test_small_epsilon_coverage_is_calibrated(replicates, helpers):
    theta, X, y = replicates
    out = gibbs_ss_noisy_cell((X, y), 1.0, 5, M, **CELL)
    assert out.draws.shape == (K, M, P + 2) and out.privacy.epsilon == 1.0
    assert out.diagnostics["latent_acceptance_min"] > 0.5
    cov = helpers.central_coverage(out.draws, theta)
    tol = helpers.binomial_tolerance(K, z=3.5)
    assert np.all(np.abs(cov - 0.9) < tol), cov
    # power twin: the NIG posterior of the noisy (PSD-projected) statistics taken as exact
    k_rel = np.asarray(
        __import__("jax").random.split(__import__("jax").random.split(__import__("jax").random.PRNGKey(5))[0], K)
    )
    mean, sd = [], []
    for i in range(K):
        rel = release_regression_statistics(X[i], y[i], epsilon=1.0, x_bound=3.0, y_bound=5.0, rng_key=k_rel[i])
        ex = RGP.nig_posterior(rel.second_moment_matrix() * N, rel.noisy["xy"], rel.noisy["yy"][0], N)
        mean.append(np.concatenate([[np.log(ex["sigma2_mean"])], ex["w_mean"]]))
        sd.append(np.concatenate([[ex["sigma2_sd"] / ex["sigma2_mean"]], ex["w_sd"]]))
    naive_cov = np.mean(np.abs(theta - np.stack(mean)) <= 1.645 * np.stack(sd), axis=0)
    assert np.any(naive_cov < 0.9 - tol), naive_cov


@pytest.mark.slow
def test_public_sampler_and_noisy_fourth_moments(rng):
    _, X, y = _simulate(rng, 1, 300, 2)
    rel = release_regression_statistics(
        X[0], y[0], epsilon=1.0, x_bound=2.0, y_bound=4.0, fourth_moments="released", rng_key=1
    )
    post = gibbs_ss_noisy(rel, num_warmup=50, num_draws=100, rng_key=0)
    assert isinstance(post, DrawsPosterior) and post.privacy is rel.privacy
    assert post.draws.shape == (100, 4) and np.all(np.isfinite(np.asarray(post.draws)))
    assert set(post.sample(0, 5)) == {"sigma2", "w"}


@pytest.mark.parametrize("shape", [0.4, 1.0, 7.5, 2520.0])
def test_gamma_from_variates_is_exact(shape):
    """The sweep's Marsaglia-Tsang Gamma draw (two pre-drawn proposals, a keyed fallback loop, the
    boost below shape 1) against the Gamma CDF, with a twin at a 1% wrong shape that must fail."""
    import jax
    import jax.numpy as jnp

    from dpposterior.baselines import _sampling as S

    n = 40_000

    def one(k):
        k1, k2, k3 = jax.random.split(k, 3)
        return S.gamma_from_variates(
            k3, jnp.float32(shape), jax.random.normal(k1, (2,)), jax.random.uniform(k2, (3,), minval=1e-38, maxval=1.0)
        )

    x = np.asarray(jax.jit(jax.vmap(one))(jax.random.split(jax.random.PRNGKey(3), n)), np.float64)
    assert stats.kstest(x, stats.gamma(shape).cdf).pvalue > 1e-3
    # power: shape off by 1% (at shape 2520 that is 5 sd of the mean over n draws)
    wrong = shape * (1.01 if shape > 100 else 1.1)
    assert stats.kstest(x, stats.gamma(wrong).cdf).pvalue < 1e-6


def test_gamma_fallback_loop_is_exact():
    """All pre-drawn proposals rejected (u = 1 - tiny, t = -1 impossible): the keyed loop draws instead."""
    import jax
    import jax.numpy as jnp

    from dpposterior.baselines import _sampling as S

    def one(k):
        return S.gamma_from_variates(k, jnp.float32(3.0), jnp.full((2,), -10.0), jnp.full((3,), 0.999999))

    x = np.asarray(jax.jit(jax.vmap(one))(jax.random.split(jax.random.PRNGKey(4), 20_000)), np.float64)
    assert stats.kstest(x, stats.gamma(3.0).cdf).pvalue > 1e-3


def test_bulk_variate_forms_match_the_keyed_samplers():
    """laplace_mixture_variance and truncated_obs given their variates equal the keyed versions."""
    import jax
    import jax.numpy as jnp

    from dpposterior.baselines import _sampling as S

    key = jax.random.PRNGKey(7)
    r = jnp.linspace(-50.0, 50.0, 9)
    k1, k2 = jax.random.split(key)
    want = S.laplace_mixture_variance(key, r, 3.0)
    got = S.laplace_mixture_variance_from(jax.random.normal(k1, r.shape), jax.random.uniform(k2, r.shape), r, 3.0)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    lo, hi = r - 1.0, r + 2.0
    u = jax.random.uniform(key, r.shape, jnp.float32, minval=jnp.finfo(jnp.float32).tiny, maxval=1.0)
    np.testing.assert_array_equal(
        np.asarray(S.truncated_obs_from_uniform(u, r + 0.5, jnp.full(r.shape, 4.0), (lo, hi))),
        np.asarray(S.truncated_obs(key, r + 0.5, jnp.full(r.shape, 4.0), (lo, hi))),
    )


def test_expected_sampler_time_grows_as_m_cubed():
    # the reference the estimate is scaled from: p = 60 (m = 1,952) at 1.83 s a sweep
    assert RG.num_latent_stats(60) == 1952 and RG.num_latent_stats(10) == 77
    assert RG.expected_sampler_seconds(60, 1) == pytest.approx(1.83)
    assert RG.expected_sampler_seconds(60, 2500) == pytest.approx(2500 * 1.83)
    ratio = RG.expected_sampler_seconds(100, 1) / RG.expected_sampler_seconds(60, 1)
    assert ratio == pytest.approx((RG.num_latent_stats(100) / 1952) ** 3)
    # the papers' p = 10 chain is far below the warning; p = 60 with the default chain far above
    assert RG.slow_sampler_message(10, 5000) is None
    msg = RG.slow_sampler_message(60, 5000)
    assert msg is not None and "p = 60 features" in msg and "m = 1952" in msg and "hours" in msg


def test_slow_chain_is_warned_before_sampling(rng):
    # p = 45: about 0.3 s a sweep, so the default 1,000 + 4,000 sweeps would take about half an hour;
    # with the warning turned into an error nothing is sampled (the test takes a second)
    p = 45
    X = rng.uniform(-1, 1, size=(200, p))
    y = np.clip(X @ rng.normal(0, 0.1, p) + rng.normal(0, 0.2, 200), -1, 1)
    rel = release_regression_statistics(X, y, epsilon=1.0, x_bound=1.0, y_bound=1.0, rng_key=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(RuntimeWarning, match=r"p = 45 features .* about 0\.\d hours"):
            gibbs_ss_noisy(rel, rng_key=0)


def test_kernel_is_init_and_step_with_the_release_closed_over():
    """gibbs_ss_noisy_kernel gives BlackJAX's (init, step); sample_chain runs that kernel, so one sweep
    by hand from the same keys gives its first draw."""
    import jax

    from dpposterior.baselines import GibbsAlgorithm, RegressionGibbsInfo, RegressionGibbsState, gibbs_ss_noisy_kernel
    from dpposterior.baselines.regression_params import sampler_params

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 2))
    rel = release_regression_statistics(
        X, X @ [1.0, -0.5] + rng.normal(size=200), epsilon=2.0, x_bound=3.0, y_bound=5.0, rng_key=1
    )
    algorithm = gibbs_ss_noisy_kernel(rel)
    assert isinstance(algorithm, GibbsAlgorithm)
    key = jax.random.key(4)
    k0, k_run = jax.random.split(key)
    state, info = jax.jit(algorithm.step)(jax.random.fold_in(k_run, 0), jax.jit(algorithm.init)(k0))
    assert isinstance(state, RegressionGibbsState) and isinstance(info, RegressionGibbsInfo)
    dims = RG.RegressionDims(2, 200, rounded=True)
    ws, s2s, _ = RG.sample_chain(key, sampler_params(rel), dims=dims, num_warmup=0, num_draws=1)
    np.testing.assert_allclose(np.asarray(ws[0]), np.asarray(state.w), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(float(s2s[0]), float(state.sigma2), rtol=1e-4)
    with pytest.raises(TypeError, match="interweave"):
        gibbs_ss_noisy_kernel(rel, interweave=1)
