"""DP-SGLD / DP dropout (issue 8): the step against a hand-written SGLD step, SGLD on a conjugate
Gaussian model against its exact posterior (with power twins), accounting, predictive, errors."""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpposterior.dpsgd import poisson_sample_indices
from dpposterior.mcmc import dp_sgld as S
from dpposterior.mcmc.dp_sgld import predictive
from dpposterior.privacy import calibrate_dpd_noise_multiplier, dpd_epsilon
from dpposterior.privacy.noise import standard_normal

# ------------------------------------------------------------------------------------------------
# a small logistic-regression data set


def _logistic_data(n=40, p=3, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, p)).astype(np.float32) * 2.0
    y = (rng.random(n) < 0.5).astype(np.int32)
    return x, y


def _hand_sgld_step(key, theta, x, y, *, q, clip, eta, sigma, prior_scale, langevin, capacity):
    """SGLD written out by hand: Poisson batch, clipped per-example gradients, noise 2 C sigma."""
    k_samp, _, k_noise, k_lang = jax.random.split(key, 4)
    idx = poisson_sample_indices(k_samp, x.shape[0], q, capacity) if q < 1 else np.arange(x.shape[0])
    th = np.asarray(theta, np.float64)
    total = np.zeros_like(th)
    for i in idx:
        z = x[i] @ th
        g = (y[i] - 1.0 / (1.0 + math.exp(-z))) * x[i]  # d/dtheta log p(y_i | x_i, theta)
        total += g * min(1.0, clip / np.linalg.norm(g))
    total += 2.0 * clip * sigma * np.asarray(standard_normal(k_noise, th.shape), np.float64)
    prior_grad = -th / prior_scale**2
    v_dp = (eta * clip * sigma / q) ** 2
    v = eta if langevin == "add" else max(eta - v_dp, 0.0)
    zeta = np.asarray(jax.random.normal(k_lang, th.shape, jnp.float32), np.float64)
    return th + 0.5 * eta * (prior_grad + total / q) + math.sqrt(v) * zeta, v_dp, v


STEP_MODEL = S.logistic_regression(3, prior_scale=2.0)


@functools.cache
def _compiled_step(q, clip, langevin, eta):
    """The jitted step with sigma traced: the parametrised cases below share compilations."""
    x, y = _logistic_data()
    cfg = S.config(num_records=40, sampling_rate=q, clip=clip, noise_multiplier=0.0, step_size=eta, langevin=langevin)
    fn = jax.jit(lambda k, s, sig: S.kernel((x, y), STEP_MODEL, cfg._replace(noise_multiplier=sig)).step(k, s))
    return fn, cfg


@pytest.mark.parametrize(
    "q, clip, sigma, langevin",
    [
        (1.0, 1e6, 0.0, "add"),  # sigma = 0, full batch, no clipping: plain SGLD
        (0.3, 0.5, 0.0, "top_up"),  # sigma = 0, Poisson minibatch, clipping active: SGLD on clipped grads
        (0.3, 0.5, 12.0, "top_up"),  # privacy noise larger than eta: no Langevin top-up
    ],
)
def test_step_equals_hand_written_sgld(q, clip, sigma, langevin):
    x, y = _logistic_data()
    eta = 0.01
    step, cfg = _compiled_step(q, clip, langevin, eta)
    theta0 = jnp.array([0.3, -0.2, 0.1], jnp.float32)
    key = jax.random.key(7)
    new, info = step(key, S.init(theta0), jnp.float32(sigma))
    hand = dict(q=q, clip=clip, eta=eta, prior_scale=2.0, langevin=langevin, capacity=cfg.capacity)
    want, v_dp, v = _hand_sgld_step(key, theta0, x, y, sigma=sigma, **hand)
    np.testing.assert_allclose(np.asarray(new.position), want, rtol=2e-5, atol=2e-6)
    assert int(new.step) == 1
    assert float(info.dp_noise_variance) == pytest.approx(v_dp, rel=1e-5)
    assert float(info.langevin_variance) == pytest.approx(v, rel=1e-5, abs=1e-12)
    np.testing.assert_allclose(np.asarray(info.dropout_alpha), (v_dp + v) / np.asarray(theta0) ** 2, rtol=1e-5)
    if sigma > 0:
        assert v_dp > eta and float(info.langevin_variance) == 0.0  # the privacy noise is the Langevin noise
        # power twin: privacy noise of std C sigma (sensitivity C, not 2C) does not match the step
        wrong, _, _ = _hand_sgld_step(key, theta0, x, y, sigma=sigma / 2, **hand)
        assert not np.allclose(np.asarray(new.position), wrong, rtol=2e-5, atol=2e-6)
    # the "add" mode's Langevin noise is eta on top of the privacy noise
    if langevin == "add":
        assert float(info.langevin_variance) == pytest.approx(eta)


def test_polynomial_step_size_schedule():
    s = S.polynomial_step_size(0.1, 10.0, 0.55)
    t = np.arange(5)
    np.testing.assert_allclose(np.asarray(s(t)), 0.1 * (10.0 + t) ** -0.55, rtol=1e-6)
    assert float(S.constant_step_size(0.02)(123)) == pytest.approx(0.02)


# ------------------------------------------------------------------------------------------------
# SGLD on a conjugate Gaussian model: the exact posterior mean and variance

N_CONJ, TAU, CHAINS, STEPS = 50, 0.5, 2000, 200


def _conjugate():
    rng = np.random.default_rng(3)
    x = (0.7 + rng.normal(size=N_CONJ)).astype(np.float32)
    precision = N_CONJ + 1.0 / TAU**2
    mean, var = float(np.sum(x, dtype=np.float64)) / precision, 1.0 / precision

    def log_lik(theta, record):
        (xi,) = record
        return -0.5 * (xi - theta[0]) ** 2

    model = S.DPSGLDModel(
        log_likelihood=log_lik,
        log_prior=lambda th: -0.5 * jnp.sum(th**2) / TAU**2,
        logit=lambda th, xx: xx[:, 0] * th[0],
        init=lambda k: jnp.zeros(1),
        num_params=1,
        needs_key=False,
        name="gaussian mean",
    )
    return model, (x,), mean, var, precision


@pytest.fixture(scope="module")
def conjugate_draws():
    """Final states of CHAINS independent SGLD chains (sigma = 0, full batch, no clipping, constant
    eta = 0.02 / precision) started from exact posterior draws: independent draws from the chain's
    stationary law if SGLD targets the posterior."""
    model, data, mean, var, precision = _conjugate()
    eta = 0.02 / precision
    cfg = S.config(num_records=N_CONJ, sampling_rate=1.0, clip=1e6, noise_multiplier=0.0, step_size=eta)
    run = S.make_run(model, cfg, STEPS)
    k0, k1 = jax.random.split(jax.random.key(11))
    starts = mean + math.sqrt(var) * jax.random.normal(k0, (CHAINS, 1))
    samples, _ = jax.jit(jax.vmap(lambda k, p: run(k, p, data, 0.0)))(jax.random.split(k1, CHAINS), starts)
    return np.asarray(samples[:, -1, 0], np.float64), mean, var, eta * precision


def _moments_agree(draws, mean, var, eta_p):
    """Mean and variance of n independent draws against (mean, var), with 4-standard-error
    tolerances from n plus the known O(eta) bias of the discretised chain: its stationary variance
    is var / (1 - eta P / 4) for the Gaussian target (an AR(1) with coefficient 1 - eta P / 2)."""
    n = draws.size
    tol_mean = 4.0 * math.sqrt(var / n)
    bias_var = var * (1.0 / (1.0 - eta_p / 4.0) - 1.0)
    tol_var = 4.0 * var * math.sqrt(2.0 / (n - 1)) + bias_var
    return abs(draws.mean() - mean) <= tol_mean and abs(draws.var(ddof=1) - var) <= tol_var


def test_sgld_conjugate_gaussian_exact_posterior(conjugate_draws):
    draws, mean, var, eta_p = conjugate_draws
    assert _moments_agree(draws, mean, var, eta_p)


def test_sgld_conjugate_power_twins(conjugate_draws):
    draws, mean, var, eta_p = conjugate_draws
    assert not _moments_agree(draws, mean, 1.3 * var, eta_p)  # a variance 30% too large
    assert not _moments_agree(draws, mean, 0.75 * var, eta_p)  # and 25% too small
    no_prior_mean = mean * (N_CONJ + 1.0 / TAU**2) / N_CONJ  # the prior dropped
    assert not _moments_agree(draws, no_prior_mean, 1.0 / N_CONJ, eta_p)
    assert not _moments_agree(draws, mean + 0.2 * math.sqrt(var), var, eta_p)  # the mean 0.2 sd off


# ------------------------------------------------------------------------------------------------
# accounting of a run (the runs below share one model and one configuration: one compilation)

MODEL = S.logistic_regression(3)
SCHEDULE = S.polynomial_step_size(0.01, 10.0, 0.55)
RUN = dict(num_steps=20, sampling_rate=0.5, clip=1.0, step_size=SCHEDULE, delta=1e-5)


def test_run_accounting_and_calibration():
    x, y = _logistic_data()
    r = S.run(MODEL, (x, y), noise_multiplier=10.0, accountant="zcdp", rng_key=0, **RUN)
    # DPD-zCDP by hand: rho = T / (2 sigma^2) = 20 / 200 = 0.1; eps = 0.1 + 2 sqrt(0.1 ln 1e5) = 2.2459...
    assert r.privacy.epsilon == pytest.approx(0.1 + 2 * math.sqrt(0.1 * math.log(1e5)), rel=1e-12)
    assert (r.privacy.neighbouring, r.privacy.mechanism, r.privacy.seeded_by) == ("replace_one", "dp_sgld", "user")
    assert r.privacy.noise_multiplier == 10.0 and r.privacy.sampling_rate == 0.5 and r.privacy.num_steps == 20
    eps = dict(r.privacy.detail("epsilon_by_accountant"))
    assert eps["pld"] <= eps["ac"] and eps["pld"] <= eps["zcdp"]
    assert eps["ac"] == dpd_epsilon(10.0, 1e-5, 0.5, 20, "ac").epsilon
    assert r.samples.shape == (20, 3) and r.info.dropout_alpha.shape == (20, 3)
    # the chain used eta_t = a (b + t)^-gamma at step t
    np.testing.assert_allclose(r.info.step_size, 0.01 * (10.0 + np.arange(20)) ** -0.55, rtol=1e-6)
    # a total (epsilon, delta) -> sigma under each accountant, conservative
    for acc in ("ac", "zcdp", "pld"):
        sigma = S.noise_multiplier_for(3.0, 1e-5, 0.5, 20, acc)
        assert sigma == calibrate_dpd_noise_multiplier(3.0, 1e-5, 0.5, 20, acc)
        r = S.run(MODEL, (x, y), epsilon=3.0, accountant=acc, **RUN)
        assert r.noise_multiplier == sigma and r.privacy.epsilon <= 3.0
        assert r.privacy.seeded_by == "os"


def test_run_sigma_zero_is_not_private_and_keys_reproduce():
    x, y = _logistic_data()
    assert not S.run(MODEL, (x, y), noise_multiplier=0.0, rng_key=0, **RUN).privacy.is_private
    a = S.run(MODEL, (x, y), noise_multiplier=1.0, rng_key=5, **RUN).samples
    assert np.array_equal(a, S.run(MODEL, (x, y), noise_multiplier=1.0, rng_key=5, **RUN).samples)
    fresh = [S.run(MODEL, (x, y), noise_multiplier=1.0, **RUN).samples for _ in range(2)]
    assert not np.array_equal(*fresh)


def test_secure_mode_draws_from_the_os():
    x, y = _logistic_data()
    kw = dict(RUN, noise_multiplier=1.0)
    a, b = S.run(MODEL, (x, y), secure=True, **kw), S.run(MODEL, (x, y), secure=True, **kw)
    assert a.privacy.seeded_by == "secure" and not np.array_equal(a.samples, b.samples)
    with pytest.raises(ValueError, match="rng_key must be None when secure=True"):
        S.run(MODEL, (x, y), secure=True, rng_key=1, **kw)


def _bernoulli_loglik(z, y):
    return y * z - jnp.logaddexp(0.0, z)


def test_mlp_with_gaussian_dropout_runs_and_uses_its_key():
    x, y = _logistic_data()
    model = S.mlp(3, hidden=4, dropout_alpha=0.5)
    assert model.needs_key and model.num_params == 3 * 4 + 4 + 4 + 1 and not S.mlp(3, 4).needs_key
    theta = model.init(jax.random.key(1))
    rec = (x[0], y[0])
    # the dropout noise (one key per step) moves the likelihood; alpha = 0 is the plain network
    l1, l2 = (float(model.log_likelihood(theta, rec, jax.random.key(k))) for k in (2, 3))
    plain = float(S.mlp(3, hidden=4).log_likelihood(theta, rec))
    assert l1 != l2
    assert plain == pytest.approx(float(_bernoulli_loglik(model.logit(theta, x[:1])[0], y[0])), rel=1e-6)
    cfg = S.config(num_records=40, sampling_rate=1.0, clip=1e6, noise_multiplier=0.0, step_size=0.01)
    sampler = S.kernel((x, y), model, cfg)
    new, _ = jax.jit(sampler.step)(jax.random.key(2), sampler.init(theta))
    assert np.all(np.isfinite(np.asarray(new.position)))
    assert not np.allclose(np.asarray(new.position), np.asarray(theta))


# ------------------------------------------------------------------------------------------------
# posterior predictive


def test_posterior_predictive_averages_kept_samples():
    x, y = _logistic_data()
    model = S.logistic_regression(3)
    rng = np.random.default_rng(0)
    samples = rng.normal(size=(10, 3)).astype(np.float32)
    p = S.posterior_predictive(model, samples, x, burn_in=4, thin=3)  # samples 4 and 7
    kept = samples[[4, 7]].astype(np.float64)
    want = np.mean(1.0 / (1.0 + np.exp(-(x.astype(np.float64) @ kept.T))), axis=1)
    np.testing.assert_allclose(p, want, rtol=1e-5)
    sc = S.predictive_scores(model, samples, x, y, burn_in=4, thin=3)
    assert sc["num_samples"] == 2
    assert sc["log_likelihood"] == pytest.approx(np.mean(np.log(np.where(y == 1, want, 1 - want))), rel=1e-5)
    assert sc["accuracy"] == pytest.approx(np.mean((want > 0.5) == (y == 1)))


def test_config_refuses_a_capacity_above_the_records():
    # capacity 1e9 for 50 records was accepted, and the first step tried to allocate 32 GB (JAX's
    # RESOURCE_EXHAUSTED); the DP-SGD engine refuses capacity > N too
    kw = dict(num_records=50, sampling_rate=0.3, clip=1.0, noise_multiplier=1.0, step_size=1e-3)
    with pytest.raises(ValueError, match=r"capacity must be at most max\(N, 16\) = 50 \(N=50 records.*got 1000000000"):
        S.config(capacity=10**9, **kw)
    with pytest.raises(ValueError, match=r"capacity must be at most max\(N, 16\) = 50 .*got 51"):
        S.config(capacity=51, **kw)
    assert S.config(capacity=50, **kw).capacity == 50
    # a small N keeps DPSGLDConfig's own default of 16 (a hand-built config is re-checked by step)
    assert S.config(**{**kw, "num_records": 5}, capacity=16).capacity == 16
    with pytest.raises(ValueError, match=r"at most max\(N, 16\) = 16"):
        S.config(**{**kw, "num_records": 5}, capacity=17)


def test_predictive_of_many_inputs_is_computed_in_bounded_blocks(monkeypatch):
    # the logits of all kept samples (up to 256 at a time) for ALL inputs were held at once: 1e6 inputs took
    # 6.3 GB at peak (0.73 GB now) and a few million would not fit; now blocks of at most 256 x 65,536 logits,
    # each row's value unchanged (its sum over the samples does not depend on the block)
    model = S.logistic_regression(3)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(150_000, 3)).astype(np.float32)
    y = (rng.random(150_000) < 0.5).astype(np.int32)
    samples = rng.normal(size=(3, 3)).astype(np.float32)
    shapes = []
    real = predictive._logits_fn(model)

    def spy(m):
        def f(th, xb):
            shapes.append((th.shape[0], xb.shape[0]))
            return real(th, xb)

        return f

    monkeypatch.setattr(predictive, "_logits_fn", spy)
    p = S.posterior_predictive(model, samples, x)
    assert p.shape == (150_000,) and max(r for _, r in shapes) <= 65_536 and len(shapes) == 3
    z = x.astype(np.float64) @ samples.T.astype(np.float64)
    np.testing.assert_allclose(p, np.mean(1.0 / (1.0 + np.exp(-z)), axis=1), rtol=1e-5)
    sc = S.predictive_scores(model, samples, x, y)
    assert sc["accuracy"] == pytest.approx(np.mean((p > 0.5) == (y == 1)))


def test_mlp_refuses_a_dropout_alpha_float32_cannot_hold():
    # dropout_alpha 1e80 or 1e300 was accepted: u = 1 + sqrt(alpha) xi overflowed in float32, every record's
    # gradient was non-finite and counted as zero, so the chain sampled the prior (200 steps, 200 records:
    # every noisy gradient sum exactly 0) and was released as the posterior, without a word
    for alpha in (2.0**48, 1e80, 1e300):
        with pytest.raises(ValueError, match=r"dropout_alpha must be below 2\*\*48 = 2.815e\+14 .*got "):
            S.mlp(3, hidden=2, dropout_alpha=alpha)
    m = S.mlp(3, hidden=2, dropout_alpha=1e14)  # a dropout rate of 1 - 1e-14 is still a model
    assert m.needs_key


def test_run_counts_the_whole_trace_against_the_memory_limit(monkeypatch):
    # run checked T x d float32 values (the samples) against half the machine's memory, but it also keeps the
    # noisy gradient sums and dropout alphas (T x d each) and three scalars per step: 3 d + 3 values. With a
    # machine of 2 MB (limit 1 MB), 30,000 steps of d = 3 hold 0.36 MB of samples, which passed, but 1.44 MB in
    # all; now the run is refused before the accountant, naming the largest T that fits (20,833)
    import dpposterior._checks as checks

    x, y = _logistic_data()
    monkeypatch.setattr(checks, "machine_memory_bytes", lambda: 2_000_000)
    kw = dict(sampling_rate=0.5, clip=1.0, step_size=1e-3, delta=1e-5, noise_multiplier=1.0, rng_key=0)
    with pytest.raises(
        ValueError,
        match=r"num_steps=30000 is too large for this machine: the chain and its info .* "
        r"30000 x 12 float32 values.*use at most 20833 steps",
    ):
        S.run(S.logistic_regression(3), (x, y), num_steps=30_000, **kw)


def test_custom_models_with_scalar_or_image_inputs_have_a_predictive():
    # run samples a custom model whose records are a scalar feature, or a 4 x 4 image (records (N,) or
    # (N, 4, 4) with y (N,): run accepts them and samples); the predictive used
    # to refuse their inputs ("x must have shape (n, num_features), got (5,)" / "(100, 4, 4)"), so such a
    # chain could be released but never used
    rng = np.random.default_rng(0)
    prior = lambda th: -0.5 * jnp.sum(th**2)  # noqa: E731

    def ll_scalar(th, rec):
        xi, yi = rec
        z = th[0] * xi + th[1]
        return yi * z - jax.nn.softplus(z)

    def ll_image(th, rec):
        xi, yi = rec
        z = jnp.sum(xi * th[:16].reshape(4, 4)) + th[16]
        return yi * z - jax.nn.softplus(z)

    scalar = S.DPSGLDModel(
        log_likelihood=ll_scalar,
        log_prior=prior,
        logit=lambda th, xb: th[0] * xb + th[1],
        init=lambda k: jnp.zeros(2),
        num_params=2,
        needs_key=False,
        name="scalar",
    )
    image = S.DPSGLDModel(
        log_likelihood=ll_image,
        log_prior=prior,
        logit=lambda th, xb: jnp.sum(xb * th[:16].reshape(4, 4), axis=(1, 2)) + th[16],
        init=lambda k: jnp.zeros(17),
        num_params=17,
        needs_key=False,
        name="image",
    )
    for model, x in (
        (scalar, rng.normal(size=6).astype(np.float32)),
        (image, rng.random((6, 4, 4)).astype(np.float32)),
    ):
        y = (rng.random(6) < 0.5).astype(np.int32)
        samples = rng.normal(size=(5, model.num_params)).astype(np.float32)
        p = S.posterior_predictive(model, samples, x)
        z = np.stack([np.asarray(model.logit(jnp.asarray(s), jnp.asarray(x)), np.float64) for s in samples])
        np.testing.assert_allclose(p, np.mean(1.0 / (1.0 + np.exp(-z)), axis=0), rtol=1e-5)
        assert S.predictive_scores(model, samples, x, y)["num_samples"] == 5
        with pytest.raises(ValueError, match="x must hold the n inputs on a leading axis"):
            S.posterior_predictive(model, samples, x[0] if x.ndim == 1 else x[0, 0, 0])
    # the built-in models still check the width
    with pytest.raises(ValueError, match=r"x must have shape \(n, 3\), got \(6,\)"):
        S.posterior_predictive(S.logistic_regression(3), np.zeros((2, 3), np.float32), np.zeros(6, np.float32))


# ------------------------------------------------------------------------------------------------
# errors say what was wrong and what is allowed


def test_errors():
    x, y = _logistic_data()
    model = S.logistic_regression(3)
    kw = dict(num_steps=5, sampling_rate=0.5, clip=1.0, step_size=0.01, delta=1e-5)
    with pytest.raises(ValueError, match="give exactly one of noise_multiplier"):
        S.run(model, (x, y), **kw)
    with pytest.raises(ValueError, match="give exactly one of noise_multiplier"):
        S.run(model, (x, y), noise_multiplier=1.0, epsilon=1.0, **kw)
    with pytest.raises(ValueError, match=r"langevin must be one of \('top_up', 'add'\)"):
        S.run(model, (x, y), noise_multiplier=1.0, langevin="none", **kw)
    with pytest.raises(ValueError, match=r"accountant must be one of \('ac', 'zcdp', 'pld', 'rdp'\)"):
        S.run(model, (x, y), noise_multiplier=1.0, accountant="prv", **kw)
    with pytest.raises(ValueError, match="no replace-one analysis of Poisson subsampling"):
        S.run(model, (x, y), noise_multiplier=1.0, accountant="rdp", **kw)
    with pytest.raises(ValueError, match="noise_multiplier must be a finite number >= 0"):
        S.run(model, (x, y), noise_multiplier=-1.0, **kw)
    with pytest.raises(ValueError, match="must not contain NaN or inf"):
        S.run(model, (np.full((4, 3), np.nan, np.float32), y[:4]), noise_multiplier=1.0, **kw)
    with pytest.raises(ValueError, match="share their first axis"):
        S.run(model, (x, y[:5]), noise_multiplier=1.0, **kw)
    with pytest.raises(ValueError, match="at least one record"):
        S.run(model, (x[:0], y[:0]), noise_multiplier=1.0, **kw)
    with pytest.raises(TypeError, match=r"data must be a tuple of arrays"):
        S.run(model, x, noise_multiplier=1.0, **kw)
    with pytest.raises(TypeError, match="model must be a DPSGLDModel"):
        S.run(lambda th: th, (x, y), noise_multiplier=1.0, **kw)
    with pytest.raises(ValueError, match=r"initial_position must have shape \(3,\)"):
        S.run(model, (x, y), noise_multiplier=1.0, initial_position=np.zeros(2), **kw)
    with pytest.raises(ValueError, match=r"sampling_rate must lie in \(0, 1\]"):
        S.run(model, (x, y), noise_multiplier=1.0, **{**kw, "sampling_rate": 0.0})
    with pytest.raises(ValueError, match="clip must be a finite number > 0"):
        S.run(model, (x, y), noise_multiplier=1.0, **{**kw, "clip": 0.0})
    with pytest.raises(ValueError, match=r"gamma must lie in \[0, 1\]"):
        S.polynomial_step_size(0.1, 1.0, 1.5)
    with pytest.raises(ValueError, match="a must be a finite number > 0"):
        S.run(model, (x, y), noise_multiplier=1.0, **{**kw, "step_size": S.StepSize(-1.0, 1.0, 0.5)})
    with pytest.raises(ValueError, match="neighbouring must be one of"):
        S.run(model, (x, y), noise_multiplier=0.0, neighbouring="swap", **kw)
    with pytest.raises(ValueError, match="b must be a finite number >= 1"):
        S.polynomial_step_size(0.1, 0.5)
    with pytest.raises(ValueError, match="step_size must be a finite number > 0"):
        S.run(model, (x, y), noise_multiplier=1.0, **{**kw, "step_size": -0.1})
    with pytest.raises(TypeError, match="step_size must be a number > 0 or a StepSize"):
        S.run(model, (x, y), noise_multiplier=1.0, **{**kw, "step_size": "0.1"})
    with pytest.raises(ValueError, match="burn_in must be smaller than the number of samples 10"):
        S.posterior_predictive(model, np.zeros((10, 3)), x, burn_in=10)
    with pytest.raises(TypeError, match="thin must be an integer >= 1"):
        S.posterior_predictive(model, np.zeros((10, 3)), x, thin=0.5)
    with pytest.raises(ValueError, match=r"y must have shape \(40,\)"):
        S.predictive_scores(model, np.zeros((10, 3)), x, y[:3])
    with pytest.raises(ValueError, match="dropout_alpha must be a finite number >= 0"):
        S.mlp(3, dropout_alpha=-0.1)
    with pytest.raises(ValueError, match=r"position must be a 1-D parameter vector"):
        S.init(np.zeros((2, 3)))


# ------------------------------------------------------------------------------------------------
# a constrained parameter: a Poisson rate used directly as theta


def _rate_model(log_prior):
    def log_lik(theta, record):
        (xi,) = record
        return xi * jnp.log(theta[0]) - theta[0]  # NaN for a rate < 0, but its gradient x / rate - 1 is finite

    return S.DPSGLDModel(
        log_likelihood=log_lik,
        log_prior=log_prior,
        logit=lambda th, xx: xx[:, 0] * th[0],
        init=lambda k: jnp.full((1,), 0.5),
        num_params=1,
        needs_key=False,
        name="poisson rate",
    )


def _log_rate_model():
    """The same model in theta = log rate: an Exponential(1) prior on the rate plus the log-Jacobian theta."""

    def log_lik(theta, record):
        (xi,) = record
        return xi * theta[0] - jnp.exp(theta[0])

    return S.DPSGLDModel(
        log_likelihood=log_lik,
        log_prior=lambda th: jnp.sum(th - jnp.exp(th)),
        logit=lambda th, xx: xx[:, 0] * th[0],
        init=lambda k: jnp.zeros((1,)),
        num_params=1,
        needs_key=False,
        name="poisson log rate",
    )


def test_run_refuses_a_chain_that_leaves_the_prior_support():
    """Old behaviour: the rate walked below 0 (every sample about -75: the log density NaN, its gradient
    finite) and all 300 samples were released as a posterior. Now an error naming model.log_prior; the
    reparametrised model runs (power twin)."""
    counts = np.random.default_rng(0).poisson(0.05, size=100).astype(np.float32)
    kw = dict(num_steps=300, sampling_rate=0.5, clip=5.0, step_size=0.01, delta=1e-5, noise_multiplier=1.0, rng_key=0)
    exponential_prior = lambda th: jnp.sum(jnp.where(th >= 0, -th, -jnp.inf))  # noqa: E731
    with pytest.raises(
        ValueError,
        match=r"model.log_prior is not finite at \d+ of the 300 samples .* left the "
        r"prior's support.*theta = log rate.*nothing was released; the run still "
        r"spent epsilon=\d+\.\d+, delta=[0-9.e+-]+ \(pld, replace_one\)",
    ):
        S.run(_rate_model(exponential_prior), (counts,), **kw)
    with pytest.raises(ValueError, match="model.log_prior is not finite at initial_position"):
        S.run(_rate_model(exponential_prior), (counts,), initial_position=np.array([-1.0]), **kw)
    r = S.run(_log_rate_model(), (counts,), **kw)
    assert np.all(np.isfinite(r.samples)) and r.privacy.epsilon > 0


# ------------------------------------------------------------------------------------------------
# DP-SGLD with privacy noise and Poisson minibatches against the chain's exact stationary moments

N_PRIV = 100


def _chain_moments(x, eta, q, clip, sigma, langevin, precision):
    """Exact stationary mean and variance of the step on the conjugate Gaussian model when no gradient is
    clipped: theta' = a theta + c + e with a = 1 - (eta / 2)(1/tau^2 + |B| / q), c = (eta / 2q) sum_B x_i, B
    Poisson(q), e ~ N(0, v_dp + v_lang) independent; so m = sum x / P (no bias in the mean) and
    V (1 - E a^2) = E[a^2] m^2 + 2 E[ac] m + E[c^2] + v_e - m^2."""
    xs = np.asarray(x, np.float64)
    m = xs.sum() / precision
    k2 = (eta / (2 * q)) ** 2 * q * (1 - q)
    ea, ec = 1 - eta * precision / 2, eta / 2 * xs.sum()
    ea2, eac, ec2 = k2 * xs.size + ea**2, -k2 * xs.sum() + ea * ec, k2 * (xs**2).sum() + ec**2
    v_dp = (eta * clip * sigma / q) ** 2
    v_e = v_dp + (eta if langevin == "add" else max(eta - v_dp, 0.0))
    return m, (ea2 * m * m + 2 * eac * m + ec2 + v_e - m * m) / (1 - ea2), v_dp / eta


@pytest.mark.parametrize(
    "q, sigma, langevin, eta_p",
    [
        (0.25, 1.0, "top_up", 0.2),  # the privacy noise is 77% of SGLD's: the Langevin noise tops it up
        (0.25, 4.0, "top_up", 0.2),  # 12.3 times SGLD's: a tempered chain (variance 13 times the posterior's)
        (0.25, 1.0, "add", 0.2),  # Langevin noise on top of the privacy noise
        (1.0, 0.5, "top_up", 0.05),  # full batch: only the step-size bias remains
    ],
)
def test_private_minibatch_chain_has_its_exact_stationary_moments(q, sigma, langevin, eta_p):
    """2000 chains of 100 steps from the exact stationary law (N = 100 records within 3.5 of the mean,
    clip 5: no gradient is clipped). Mean and variance within 4 standard errors. Power: the posterior's
    own variance (ignoring the minibatch and privacy noise) and the other Langevin mode are refused."""
    x = np.clip(0.7 + np.random.default_rng(1).normal(size=N_PRIV), -2.5, 3.5).astype(np.float32)
    precision = N_PRIV + 1.0 / TAU**2
    model = _conjugate()[0]
    eta, clip = eta_p / precision, 5.0
    m, v, dp_share = _chain_moments(x, eta, q, clip, sigma, langevin, precision)
    cfg = S.config(
        num_records=N_PRIV, sampling_rate=q, clip=clip, noise_multiplier=0.0, step_size=eta, langevin=langevin
    )
    run = S.make_run(model, cfg, 100)
    k0, k1 = jax.random.split(jax.random.key(7))
    starts = m + math.sqrt(v) * jax.random.normal(k0, (2000, 1))
    s, _ = jax.jit(jax.vmap(lambda k, p: run(k, p, (x,), sigma)))(jax.random.split(k1, 2000), starts)
    d = np.asarray(s[:, -1, 0], np.float64)

    def agrees(mean, var):
        return abs(d.mean() - mean) <= 4 * math.sqrt(var / d.size) and abs(d.var(ddof=1) - var) <= 4 * var * math.sqrt(
            2 / (d.size - 1)
        )

    assert agrees(m, v)
    other = "add" if langevin == "top_up" else "top_up"
    if min(dp_share, 1.0) / max(dp_share, 1.0) > 0.3:  # injected variance max(eta, v_dp) vs eta + v_dp
        assert not agrees(m, _chain_moments(x, eta, q, clip, sigma, other, precision)[1])
    if q < 1:
        assert not agrees(m, 1.0 / precision)


def test_binding_clip_targets_the_huber_posterior_as_documented():
    """C = 0.5 binds for most of the 100 records (|x_i - theta| ~ 1): the chain (q 1, sigma 0) samples
    exp(-sum_i huber_C(x_i - theta) - theta^2 / (2 tau^2)), computed here by quadrature: mean 0.646 against the
    posterior's 0.602 (0.44 posterior sd), variance 2.0 times the posterior's, as the module docstring says.
    Tolerances: 4 standard errors of 2000 independent final states, plus the step-size bias eta P / 4 on the
    variance. Power: the exact posterior is refused."""
    x = np.clip(0.7 + np.random.default_rng(1).normal(size=N_PRIV), -2.5, 3.5).astype(np.float32)
    xs, clip = x.astype(np.float64), 0.5
    precision = N_PRIV + 1.0 / TAU**2
    grid = np.linspace(-1.0, 2.5, 20001)
    r = xs[None, :] - grid[:, None]
    huber = np.where(np.abs(r) <= clip, 0.5 * r * r, clip * np.abs(r) - 0.5 * clip * clip).sum(1)
    w = np.exp(-(huber + 0.5 * grid**2 / TAU**2) + (huber + 0.5 * grid**2 / TAU**2).min())
    w /= w.sum()
    m = float((w * grid).sum())
    v = float((w * (grid - m) ** 2).sum())
    eta_p = 0.05
    cfg = S.config(num_records=N_PRIV, sampling_rate=1.0, clip=clip, noise_multiplier=0.0, step_size=eta_p / precision)
    run = S.make_run(_conjugate()[0], cfg, 100)
    starts = np.interp(np.random.default_rng(5).random(2000), np.cumsum(w), grid)[:, None].astype(np.float32)
    s, _ = jax.jit(jax.vmap(lambda k, p: run(k, p, (x,), 0.0)))(
        jax.random.split(jax.random.key(3), 2000), jnp.asarray(starts)
    )
    d = np.asarray(s[:, -1, 0], np.float64)

    def agrees(mean, var):
        return (
            abs(d.mean() - mean) <= 4 * math.sqrt(var / d.size)
            and abs(d.var(ddof=1) - var) <= 4 * var * math.sqrt(2 / (d.size - 1)) + var * eta_p / 4
        )

    assert agrees(m, v)
    assert (m - xs.sum() / precision) * math.sqrt(precision) > 0.4 and v * precision > 1.9  # the documented numbers
    assert not agrees(xs.sum() / precision, 1.0 / precision)


@pytest.mark.parametrize(
    "make_cfg, state, exc, words",
    [
        # old: "'float' object is not callable" from inside the step
        (
            lambda c: S.DPSGLDConfig(40, 0.5, 1.0, 1.0, 0.01),
            S.init(np.zeros(3)),
            TypeError,
            "cfg.step_size must be a StepSize",
        ),
        # old: accepted silently (the noise std 2 C sigma used with a negative sigma)
        (
            lambda c: c._replace(noise_multiplier=-1.0),
            S.init(np.zeros(3)),
            ValueError,
            "cfg.noise_multiplier must be a finite",
        ),
        (lambda c: c._replace(noise_multiplier=float("nan")), S.init(np.zeros(3)), ValueError, "cfg.noise_multiplier"),
        # old: accepted, the step used q = 1.5 and divided the gradient sum by it
        (lambda c: c._replace(sampling_rate=1.5), S.init(np.zeros(3)), ValueError, "sampling_rate must lie in (0, 1]"),
        (lambda c: c._replace(clip=-1.0), S.init(np.zeros(3)), ValueError, "clip must be a finite number > 0"),
        # old: accepted, and run as "top_up"
        (lambda c: c._replace(langevin="none"), S.init(np.zeros(3)), ValueError, "langevin must be one of"),
        # old: AttributeError "'dict' object has no attribute 'num_records'"
        (lambda c: dict(c._asdict()), S.init(np.zeros(3)), TypeError, "cfg must be a DPSGLDConfig"),
        # old: a JAX shape error from inside the step ("dot_general requires contracting dimensions ..." or, for
        # a custom model, "while_loop body function carry input and carry output must have equal types")
        (lambda c: c, S.init(np.zeros(2)), ValueError, "state.position must have shape (3,) for this model"),
        (lambda c: c, (np.zeros(3), 0), TypeError, "state must be a DPSGLDState"),
    ],
)
def test_kernel_checks_its_static_arguments(make_cfg, state, exc, words):
    x, y = _logistic_data()
    cfg = S.config(num_records=40, sampling_rate=0.5, clip=1.0, noise_multiplier=1.0, step_size=0.01)
    with pytest.raises(exc) as info:
        S.kernel((x, y), STEP_MODEL, make_cfg(cfg)).step(jax.random.key(0), state)
    assert words in str(info.value)
    # under jit the same checks hold (shapes and settings are static); a traced sigma is not checked
    with pytest.raises(exc):
        jax.jit(lambda k, sig: S.kernel((x, y), STEP_MODEL, make_cfg(cfg)).step(k, state))(jax.random.key(0), 1.0)


@pytest.mark.parametrize(
    "key, exc, words",
    [
        # old: JAX's "split accepts a single key, but was given a key array of shape (3,)" from inside the run
        (lambda: jax.random.split(jax.random.key(0), 3), ValueError, "rng_key must be a single JAX key"),
        # old: JAX's "invalid PRNG key data: expected key_data.shape to end with (2,); got shape=(4,)"
        (lambda: jax.random.key(0, impl="rbg"), ValueError, "default implementation 'threefry2x32'"),
        # old: "rng_key must be None ..., got ArrayImpl" (the key was a key, only of the wrong shape or dtype)
        (
            lambda: jax.random.split(jax.random.PRNGKey(0), 3),
            TypeError,
            "uint32 array of shape (2,), got dtype uint32 and shape (3, 2)",
        ),
        (lambda: np.array([0, 1]), TypeError, "uint32 array of shape (2,), got dtype int64"),
    ],
)
def test_run_names_what_is_wrong_with_a_user_key(key, exc, words):
    """The shared `privacy.randomness.resolve_key` (every mechanism's rng_key): a key array, a key of another JAX
    implementation, a raw key of the wrong shape or dtype. Twins: the valid forms run and reproduce."""
    from dpposterior.privacy.randomness import resolve_key

    with pytest.raises(exc) as info:
        resolve_key(key())
    assert words in str(info.value)
    x, y = _logistic_data()
    with pytest.raises(exc):
        S.run(MODEL, (x, y), noise_multiplier=1.0, rng_key=key(), **RUN)
    assert resolve_key(jax.random.key(3))[1] == "user"
    assert np.array_equal(resolve_key(jax.random.key(3))[0], resolve_key(jax.random.PRNGKey(3))[0])
    assert np.array_equal(resolve_key(np.asarray(jax.random.PRNGKey(3)))[0], resolve_key(3)[0])


def test_kernel_is_init_and_step_closed_over_data_and_its_steps_are_make_runs_chain():
    # the BlackJAX shape: kernel(data, model, cfg) -> (init(position), step(key, state)); make_run and run
    # scan that same step, one key per step from jax.random.split(key, T)
    x, y = _logistic_data()
    cfg = S.config(num_records=40, sampling_rate=0.5, clip=1.0, noise_multiplier=1.0, step_size=0.01)
    sampler = S.kernel((x, y), STEP_MODEL, cfg)
    assert isinstance(sampler, S.DPSGLDKernel) and sampler._fields == ("init", "step")
    state = sampler.init(np.zeros(3))
    assert isinstance(state, S.DPSGLDState) and int(state.step) == 0
    step = jax.jit(sampler.step)
    positions = []
    for k in jax.random.split(jax.random.key(4), 5):
        state, info = step(k, state)
        positions.append(np.asarray(state.position))
    assert isinstance(info, S.DPSGLDInfo) and int(state.step) == 5
    samples, _ = jax.jit(S.make_run(STEP_MODEL, cfg, 5))(jax.random.key(4), jnp.zeros(3), (x, y), 1.0)
    np.testing.assert_allclose(np.asarray(samples), np.stack(positions), rtol=1e-6, atol=1e-7)
    # init knows the model: a position of the wrong length is refused before any step
    with pytest.raises(ValueError, match=r"state.position must have shape \(3,\)"):
        sampler.init(np.zeros(2))
