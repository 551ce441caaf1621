"""Entropy-SGLD / Entropy-SGD steps, the bounded loss, the prior's privacy record, the certificate."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

from dpposterior import pacbayes as pb
from dpposterior.pacbayes.bounds import dp_prior_kl_rhs, mc_risk_upper
from dpposterior.pacbayes.entropy_sgld import EntropySGLDParams, entropy_sgld_privacy
from dpposterior.pacbayes import entropy_sgld as es


def _toy_data(key, n=400, d=5):
    k1, k2 = jax.random.split(key)
    x = jax.random.normal(k1, (n, d))
    y = (x[:, 0] + 0.3 * jax.random.normal(k2, (n,)) > 0).astype(jnp.int32)
    return x, y


def test_bounded_cross_entropy_range_and_value():
    logits = jnp.array([[0.0, 50.0], [0.0, -50.0], [0.0, 0.0]])
    labels = jnp.array([1, 1, 1])
    loss = es.bounded_cross_entropy(logits, labels, loss_max=4.0)
    a = math.exp(-4.0)
    assert float(loss[0]) == pytest.approx(-math.log(1 - a), rel=1e-4)  # p_y = 1
    assert float(loss[1]) == pytest.approx(4.0, rel=1e-5)  # p_y = 0: exactly L_max
    assert float(loss[2]) == pytest.approx(-math.log(a + (1 - 2 * a) * 0.5), rel=1e-5)
    assert float(loss.max() - loss.min()) <= 4.0


def test_entropy_sgld_privacy_record_and_beta_inverse():
    m = 60_000
    params = es.EntropySGLDParams(tau=math.sqrt(m), gamma=1.0, eta=0.1, eta_inner=0.01, beta=1.0)
    rec = es.entropy_sgld_privacy(params, m, num_steps=10)
    assert round(rec.epsilon, 4) == 0.0327 and rec.delta == 0.0
    assert rec.neighbouring == "replace_one"
    assert "EXACT sample" in rec.detail("caveat") and "exact_sample_assumed" in rec.accountant
    beta = es.beta_for_epsilon(0.0327, 4.0, math.sqrt(m), m)
    assert beta == pytest.approx(0.0327 / (8 / math.sqrt(m)))
    sgd = es.entropy_sgld_privacy(params._replace(beta=None), m)
    assert not sgd.is_private


def test_step_is_pure_and_reproducible_and_sgd_is_deterministic_given_key():
    x, y = _toy_data(jax.random.PRNGKey(0))
    flat, unravel = ravel_pytree(es.init_mlp(jax.random.PRNGKey(1), (5, 8, 2)))
    loss = es.classifier_loss(es.mlp_apply, unravel)
    params = es.EntropySGLDParams(
        tau=20.0, gamma=0.5, eta=0.05, eta_inner=0.05, beta=10.0, batch_size=32, inner_steps=5
    )
    s0 = es.init(flat)

    def jitted(p):
        return jax.jit(es.kernel((x, y), p, loss).step)

    step = jitted(params)
    s1, info = step(jax.random.PRNGKey(2), s0)
    s1b, _ = step(jax.random.PRNGKey(2), s0)
    assert np.array_equal(s1.position, s1b.position) and int(s1.num_steps) == 1
    assert s1.position.shape == flat.shape and info.mu.shape == flat.shape
    # outer update: without noise (Entropy-SGD) w moves by exactly -(eta/2) tau gamma (w - mu)
    sgd = params._replace(beta=None)
    s2, info2 = jitted(sgd)(jax.random.PRNGKey(2), s0)
    expected = flat - 0.5 * sgd.eta * sgd.tau * sgd.gamma * (flat - info2.mu)
    np.testing.assert_allclose(s2.position, expected, rtol=1e-6, atol=1e-7)
    # Entropy-SGLD differs from it by the outer noise of scale sqrt(eta / beta) per coordinate
    diff = np.asarray(s1.position - s2.position)
    assert np.std(diff) == pytest.approx(math.sqrt(params.eta / params.beta), rel=0.35)


def test_entropy_sgd_reduces_training_loss():
    x, y = _toy_data(jax.random.PRNGKey(3))
    flat, unravel = ravel_pytree(es.init_mlp(jax.random.PRNGKey(4), (5, 16, 2)))
    loss = es.classifier_loss(es.mlp_apply, unravel)
    params = es.EntropySGLDParams(
        tau=100.0, gamma=0.03, eta=1.0, eta_inner=0.1, beta=None, batch_size=64, inner_steps=20
    )
    state, infos = es.run(jax.random.PRNGKey(5), es.init(flat), 60, data=(x, y), params=params, loss_fn=loss)
    before, after = float(loss(flat, x, y)), float(loss(state.position, x, y))
    assert after < 0.6 * before

    def err(w):
        return float(jnp.mean(es.zero_one_error(es.mlp_apply(unravel(w), x), y)))

    # the labels carry noise (Bayes error about 0.09): well below the initial error and near it
    assert err(state.position) < 0.16 and err(state.position) < err(flat) - 0.1


def test_invalid_params_raise():
    bad = es.EntropySGLDParams(tau=-1.0, gamma=1.0, eta=0.1, eta_inner=0.1)
    with pytest.raises(ValueError, match="tau"):
        es.kernel((jnp.zeros((2, 3)), jnp.zeros(2, jnp.int32)), bad, lambda w, a, b: jnp.sum(w))
    with pytest.raises(ValueError, match="1-d"):
        es.init(jnp.zeros((2, 2)))
    with pytest.raises(ValueError, match="epsilon"):
        es.beta_for_epsilon(0.0, 4.0, 10.0, 100)
    with pytest.raises(ValueError, match="underflows"):  # was beta = 0.0, which EntropySGLDParams refuses
        es.beta_for_epsilon(1e-300, 4.0, 1e300, 1)


# ------------------------------------------------------------------------------------------------
# The certificate


def test_certify_hand_computed_dp_prior():
    rec = entropy_sgld_privacy(EntropySGLDParams(tau=100.0, gamma=1.0, eta=0.1, eta_inner=0.1, beta=1.0), m=10_000)
    eps = rec.epsilon  # 2 * 1 * 4 * 100 / 1e4 = 0.08
    assert eps == pytest.approx(0.08)
    errs = np.full(500, 0.05)
    cert = pb.certify(errs, 100.0, 10_000, delta=0.05, delta_mc=0.01, prior_privacy=rec)
    m = 10_000
    assert cert.complexity_term == pytest.approx((100 + math.log(2 * 100)) / m)
    assert cert.confidence_term == pytest.approx(2 * math.log(60) / m)
    assert cert.privacy_term == pytest.approx((2 * max(math.log(60), m * eps**2) - 2 * math.log(60)) / m)
    assert cert.kl_rhs == pytest.approx(dp_prior_kl_rhs(100.0, m, 0.05, eps), rel=1e-12)
    assert cert.mc_term == pytest.approx(math.log(200) / 500)
    assert cert.empirical_error_upper == pytest.approx(mc_risk_upper(0.05, 500, 0.01), rel=1e-12)
    assert cert.bound == pytest.approx(pb.kl_inv_upper(cert.empirical_error_upper, cert.kl_rhs), rel=1e-12)
    assert cert.bound > cert.empirical_error_upper > 0.05
    assert "EXACT sample" in cert.caveat and cert.prior_privacy is rec
    assert cert.to_dict()["prior_privacy"]["epsilon"] == pytest.approx(eps)


def test_certify_data_independent_prior_is_seeger():
    cert = pb.certify(0.1, 50.0, 1000, delta=0.05)
    assert cert.bound == pytest.approx(pb.seeger_bound(0.1, 50.0, 1000, 0.05), rel=1e-12)
    assert cert.privacy_term == 0 and cert.n_samples == 0 and cert.epsilon is None


def test_certify_rejects_approximate_dp_and_bad_inputs():
    from dpposterior.privacy.spent import PrivacySpent

    approx = PrivacySpent(epsilon=1.0, delta=1e-5, neighbouring="add_remove", accountant="pld", mechanism="x")
    with pytest.raises(ValueError, match="pure epsilon-DP"):
        pb.certify(np.zeros(10), 1.0, 100, delta=0.05, delta_mc=0.01, prior_privacy=approx)
    with pytest.raises(ValueError, match="delta_mc"):
        pb.certify(np.zeros(10), 1.0, 100, delta=0.05)
    with pytest.raises(ValueError, match="empirical_errors"):
        pb.certify(np.array([0.1, 1.2]), 1.0, 100, delta=0.05, delta_mc=0.01)


def test_certify_refuses_per_record_errors_that_would_shrink_the_mc_term():
    # 20 hypotheses x 200 records of 0-1 losses: read as 4,000 hypotheses, the Monte Carlo term was
    # ln(2/delta_mc) / 4000 and the certificate about 0.17 instead of 0.51 (an invalid, over-optimistic bound)
    m = 200
    x = np.asarray(jax.random.normal(jax.random.PRNGKey(3), (m, 3)))
    y = (x[:, 0] > 0).astype(np.int32)

    def per_record(w, a, b):
        return ((a @ w > 0).astype(jnp.int32) != b).astype(jnp.float32)

    kw = dict(
        prior_mean=np.zeros(3),
        prior_var=1.0,
        posterior_mean=np.array([1.0, 0.0, 0.0]),
        posterior_var=0.01,
        data=(x, y),
        delta=0.05,
        delta_mc=0.01,
        n_samples=20,
    )
    with pytest.raises(ValueError, match="error_fn.*scalar"):
        pb.certify_gaussian(jax.random.PRNGKey(4), error_fn=per_record, **kw)
    with pytest.raises(ValueError, match=r"empirical_errors.*1-D.*\(20, 200\)"):
        pb.certify(np.zeros((20, m)), 5.0, m, delta=0.05, delta_mc=0.01)
    mean_fn = lambda w, a, b: jnp.mean(per_record(w, a, b))  # noqa: E731
    cert = pb.certify_gaussian(jax.random.PRNGKey(4), error_fn=mean_fn, **kw)
    assert cert.n_samples == 20 and cert.mc_term == pytest.approx(math.log(200) / 20)
    with pytest.raises(ValueError, match="posterior_var.*float32"):  # was a RuntimeWarning and NaN weights
        pb.certify_gaussian(jax.random.PRNGKey(4), error_fn=mean_fn, **{**kw, "posterior_var": 1e80, "prior_var": 1e80})


def test_certify_gaussian_small_network():
    x, y = _toy_data(jax.random.PRNGKey(7), n=300)
    flat, unravel = ravel_pytree(es.init_mlp(jax.random.PRNGKey(8), (5, 4, 2)))

    def error_fn(w, a, b):
        return jnp.mean(es.zero_one_error(es.mlp_apply(unravel(w), a), b))

    cert = pb.certify_gaussian(
        jax.random.PRNGKey(9),
        prior_mean=np.zeros(flat.size),
        prior_var=1.0,
        posterior_mean=np.asarray(flat),
        posterior_var=0.5,
        error_fn=error_fn,
        data=(x, y),
        delta=0.05,
        delta_mc=0.05,
        n_samples=40,
    )
    expected_kl = pb.gaussian_kl(flat, 0.5, np.zeros(flat.size), 1.0)
    assert cert.kl_divergence == pytest.approx(expected_kl)
    assert cert.n_samples == 40 and 0 <= cert.empirical_error <= 1
    assert cert.empirical_error <= cert.empirical_error_upper <= cert.bound <= 1


def test_secure_run_uses_os_keys_and_refuses_a_key():
    x, y = _toy_data(jax.random.PRNGKey(3))
    flat, unravel = ravel_pytree(es.init_mlp(jax.random.PRNGKey(4), (5, 4, 2)))
    loss = es.classifier_loss(es.mlp_apply, unravel)
    params = es.EntropySGLDParams(tau=100.0, gamma=0.03, eta=0.1, eta_inner=0.1, beta=1e4, batch_size=16, inner_steps=2)
    with pytest.raises(ValueError, match="secure=True"):
        es.run(jax.random.PRNGKey(0), es.init(flat), 3, data=(x, y), params=params, loss_fn=loss, secure=True)
    # no key and secure=False: seeded from the OS (DESIGN)
    c, _ = es.run(None, es.init(flat), 3, data=(x, y), params=params, loss_fn=loss)
    d, _ = es.run(None, es.init(flat), 3, data=(x, y), params=params, loss_fn=loss)
    assert not np.array_equal(np.asarray(c.position), np.asarray(d.position))
    with pytest.raises(TypeError, match="key must be a JAX PRNG key"):
        es.run(7, es.init(flat), 3, data=(x, y), params=params, loss_fn=loss)
    a, _ = es.run(None, es.init(flat), 3, data=(x, y), params=params, loss_fn=loss, secure=True)
    b, _ = es.run(None, es.init(flat), 3, data=(x, y), params=params, loss_fn=loss, secure=True)
    assert not np.array_equal(np.asarray(a.position), np.asarray(b.position))
    assert es.entropy_sgld_privacy(params, 200, num_steps=3, seeded_by="secure").seeded_by == "secure"


def test_secure_run_reads_its_noise_from_os_urandom(monkeypatch):
    import os

    from dpposterior.privacy import secure

    x, y = _toy_data(jax.random.PRNGKey(3))
    flat, unravel = ravel_pytree(es.init_mlp(jax.random.PRNGKey(4), (5, 4, 2)))
    loss = es.classifier_loss(es.mlp_apply, unravel)
    params = es.EntropySGLDParams(tau=100.0, gamma=0.03, eta=0.1, eta_inner=0.1, beta=1e4, batch_size=16, inner_steps=2)
    calls = []
    real = os.urandom
    monkeypatch.setattr(secure.os, "urandom", lambda n: calls.append(n) or real(n))
    es.run(None, es.init(flat), 3, data=(x, y), params=params, loss_fn=loss, secure=True)
    # per outer step: the inner minibatch indices and noise (2 inner steps x 2 draws) and the outer noise,
    # each a fresh OS read of at least 4 bytes per value
    n_params = flat.size
    assert len(calls) >= 3 * 5 and sum(calls) >= 3 * 4 * (3 * n_params)


def test_certify_with_a_huge_prior_epsilon_is_a_value_error():
    # eps**2 raised a bare OverflowError for a (pure, finite) prior epsilon of 1e200
    from dpposterior.privacy.spent import PrivacySpent

    rec = PrivacySpent(
        epsilon=1e200,
        delta=0.0,
        neighbouring="replace_one",
        accountant="exponential_mechanism",
        mechanism="test",
        noise_multiplier=None,
        sampling_rate=1.0,
        num_steps=1,
        seeded_by="os",
    )
    with pytest.raises(ValueError, match="overflows the float range"):
        pb.certify(np.full(10, 0.1), 1.0, 100, delta=0.05, delta_mc=0.01, prior_privacy=rec)
    with pytest.raises(ValueError, match="overflows the float range"):  # the same as the bound function says
        pb.dp_prior_pacbayes_bound(0.1, 1.0, 100, 0.05, 1e200)


def test_bounded_cross_entropy_stays_within_loss_max_where_its_floor_underflows():
    # e^-90 underflows to 0 in float32: log(0) = -inf made the loss -log p_y, 2000 for a logit gap of
    # 2000, against the range L_max = 90 that the privacy (epsilon = 2 beta L_max tau / m) is computed from
    logits = jnp.array([[1000.0, -1000.0], [0.0, 0.0], [-30.0, 30.0]])
    labels = jnp.array([1, 0, 0])
    for loss_max in (4.0, 80.0, 90.0, 100.0, 1e4):
        loss = np.asarray(es.bounded_cross_entropy(logits, labels, loss_max))
        assert np.all(np.isfinite(loss)) and loss.max() <= loss_max * (1 + 1e-6), (loss_max, loss)
        # log p_y = -2000: the loss is min(L_max, 2000) up to float32 rounding
        assert loss[0] == pytest.approx(min(loss_max, 2000.0), rel=1e-6)
    w0, unravel = ravel_pytree(es.init_mlp(jax.random.PRNGKey(0), (2, 2)))
    loss_fn = es.classifier_loss(es.mlp_apply, unravel, loss_max=90.0)
    big = jnp.array([[1e4, 0.0]])  # a far-off record: logits of size 1e4
    assert float(loss_fn(w0 * 0 + 1.0, big, jnp.array([0]))) <= 90.0 * (1 + 1e-6)


@pytest.mark.parametrize("loss_max", [0.1, 0.5, math.log(2.0), 1e39])
def test_bounded_cross_entropy_refuses_a_loss_max_it_cannot_bound(loss_max):
    # below ln 2 the loss was NaN (1 - 2 e^-L < 0), at ln 2 the constant ln 2, silently; beyond float32 unbounded
    logits = jnp.array([[0.0, 1.0]])
    with pytest.raises(ValueError, match=r"loss_max .* must lie in \(ln 2"):
        es.bounded_cross_entropy(logits, jnp.array([0]), loss_max)
    w0, unravel = ravel_pytree(es.init_mlp(jax.random.PRNGKey(0), (2, 2)))
    with pytest.raises(ValueError, match=r"loss_max .* must lie in \(ln 2"):
        es.classifier_loss(es.mlp_apply, unravel, loss_max=loss_max)
    assert float(es.bounded_cross_entropy(logits, jnp.array([0]), 0.7)[0]) <= 0.7  # just above ln 2: fine


def test_step_refuses_no_key_and_init_refuses_non_finite_weights():
    # step(None, ...) was JAX's "unexpected PRNG key type <class 'NoneType'>" from inside the step; a NaN
    # start ran and released NaN weights silently
    x, y = _toy_data(jax.random.PRNGKey(0), n=16, d=2)
    w0, unravel = ravel_pytree(es.init_mlp(jax.random.PRNGKey(1), (2, 2)))
    params = es.EntropySGLDParams(tau=4.0, gamma=1.0, eta=0.01, eta_inner=0.01, beta=1.0, inner_steps=2, batch_size=4)
    loss = es.classifier_loss(es.mlp_apply, unravel)
    sampler = es.kernel((x, y), params, loss)
    with pytest.raises(TypeError, match=r"key must be a JAX PRNG key.*run\(None"):
        sampler.step(None, sampler.init(w0))
    with pytest.raises(TypeError, match="key must be a JAX PRNG key"):
        sampler.step(3, sampler.init(w0))
    with pytest.raises(ValueError, match="position must be finite, got 1 NaN or inf weights"):
        es.init(w0.at[2].set(jnp.nan))
    state, _ = jax.jit(sampler.step)(jax.random.PRNGKey(2), sampler.init(w0))  # a traced key and state pass
    assert bool(jnp.all(jnp.isfinite(state.position)))


def test_kernel_is_init_and_step_closed_over_data_and_run_scans_its_step():
    # the BlackJAX shape: kernel(data, params, loss_fn) -> (init(position), step(key, state)); run scans that
    # same step, one key per step from jax.random.split(key, T)
    x, y = _toy_data(jax.random.PRNGKey(0), n=16, d=2)
    w0, unravel = ravel_pytree(es.init_mlp(jax.random.PRNGKey(1), (2, 2)))
    params = es.EntropySGLDParams(tau=4.0, gamma=1.0, eta=0.01, eta_inner=0.01, beta=1.0, inner_steps=2, batch_size=4)
    loss = es.classifier_loss(es.mlp_apply, unravel)
    sampler = es.kernel((x, y), params, loss)
    assert isinstance(sampler, es.EntropySGLDKernel) and sampler._fields == ("init", "step")
    state = sampler.init(w0)
    step = jax.jit(sampler.step)
    for k in jax.random.split(jax.random.PRNGKey(3), 3):
        state, _ = step(k, state)
    ran, _ = es.run(jax.random.PRNGKey(3), es.init(w0), 3, data=(x, y), params=params, loss_fn=loss)
    assert int(state.num_steps) == int(ran.num_steps) == 3
    np.testing.assert_allclose(np.asarray(state.position), np.asarray(ran.position), rtol=1e-5, atol=1e-6)
