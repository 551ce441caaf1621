"""The certificate against an independent high-precision computation, the prior's neighbouring
relation, class labels, and losses outside [0, 1]."""

import itertools
import math

import jax
import jax.numpy as jnp
import mpmath as mp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree
from scipy.stats import binom

from dpposterior import pacbayes as pb
from dpposterior.pacbayes.entropy_sgld import classifier_error
from dpposterior.pacbayes import entropy_sgld as es
from dpposterior.privacy.spent import PrivacySpent

mp.mp.dps = 40


def _kl_mp(q, p):
    q, p = mp.mpf(q), mp.mpf(p)

    def term(a, b):
        if a == 0:
            return mp.mpf(0)
        return mp.inf if b == 0 else a * mp.log(a / b)

    return term(q, p) + term(1 - q, 1 - p)


def _kl_inv_upper_mp(q, c):
    """The largest p in [q, 1] with kl(q || p) <= c, by bisection in 40-digit arithmetic."""
    c = mp.mpf(c)
    if _kl_mp(q, 1) <= c:
        return mp.mpf(1)
    lo, hi = mp.mpf(q), mp.mpf(1)
    for _ in range(110):  # 2^-110 < 1e-33
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _kl_mp(q, mid) <= c else (lo, mid)
    return lo


def _pure(eps, neighbouring="replace_one"):
    return PrivacySpent(epsilon=eps, delta=0.0, neighbouring=neighbouring, accountant="pure", mechanism="test")


def test_certificate_is_never_below_the_exact_bound_computed_independently():
    # the DP-prior bound and Maurer/Seeger (no prior privacy), written out in mpmath, at empirical
    # risk 0 and 1, KL 0, m = 1, tiny and large delta; ours may exceed it by the bracket width only.
    # The closed form at empirical risk 0 must not come out 1 ulp BELOW the exact bound (e.g. m = 100, KL 0,
    # delta 0.05: 0.058155079116972264 < 0.05815507911697227).
    for m, q, kl_div, delta, eps in itertools.product(
        [1, 2, 100, 60_000], [0.0, 0.05, 0.5, 1.0], [0.0, 3.0, 800.0], [1e-6, 0.05], [None, 0.0, 0.3]
    ):
        cert = pb.certify(q, kl_div, m, delta=delta, prior_privacy=None if eps is None else _pure(eps))
        if eps is None:
            rhs = (mp.mpf(kl_div) + mp.log(2 * mp.sqrt(m) / mp.mpf(delta))) / m
        else:
            rhs = (
                mp.mpf(kl_div) + mp.log(2 * mp.sqrt(m)) + 2 * max(mp.log(3 / mp.mpf(delta)), m * mp.mpf(eps) ** 2)
            ) / m
        exact = _kl_inv_upper_mp(q, rhs)
        case = (m, q, kl_div, delta, eps, cert.bound, float(exact))
        assert math.isfinite(cert.bound) and mp.mpf(cert.bound) >= exact, case
        assert cert.bound - float(exact) <= 2e-12, case
        assert float(cert.kl_rhs) == pytest.approx(float(rhs), rel=1e-14), case


def test_sampled_certificate_adds_the_monte_carlo_step_safely():
    # R_S(Q) estimated from n hypotheses: bound = kl^-1(kl^-1(mean, ln(2/delta_mc)/n), rhs), both steps outward
    for errs, m, eps in [
        (np.zeros(5), 1, None),
        (np.zeros(50), 200, 0.05),
        (np.full(7, 1.0), 10, None),
        (np.linspace(0, 0.3, 40), 1000, 0.1),
    ]:
        cert = pb.certify(errs, 2.0, m, delta=0.05, delta_mc=0.01, prior_privacy=None if eps is None else _pure(eps))
        upper = _kl_inv_upper_mp(float(np.mean(errs)), mp.log(2 / mp.mpf(0.01)) / errs.size)
        if eps is None:
            rhs = (2 + mp.log(2 * mp.sqrt(m) / mp.mpf(0.05))) / m
        else:
            rhs = (2 + mp.log(2 * mp.sqrt(m)) + 2 * max(mp.log(3 / mp.mpf(0.05)), m * mp.mpf(eps) ** 2)) / m
        assert mp.mpf(cert.empirical_error_upper) >= upper
        exact = _kl_inv_upper_mp(float(upper), rhs)
        assert mp.mpf(cert.bound) >= exact and cert.bound - float(exact) <= 4e-12


@pytest.mark.parametrize("c", [1e-300, 1e-20, 1e-9, 0.01, 0.7, 3.0, 40.0])
def test_closed_form_inverses_are_rounded_outwards(c):
    # empirical risk 0 (upper inverse 1 - e^-c) and 1 (lower inverse e^-c) bypass the bracket: they were returned
    # as the float nearest to the exact value, sometimes on the unsafe side
    assert mp.mpf(pb.kl_inv_upper(0.0, c)) >= -mp.expm1(-mp.mpf(c))
    assert mp.mpf(pb.kl_inv_lower(1.0, c)) <= mp.exp(-mp.mpf(c))
    assert pb.kl_inv_upper(0.0, c) == pytest.approx(-math.expm1(-c), rel=3e-15)
    assert pb.kl_inv_lower(1.0, c) == pytest.approx(math.exp(-c), rel=3e-15)


def test_maurer_constant_2_sqrt_m_holds_down_to_m_1():
    # the ln(2 sqrt(m)) term needs sup_p E exp(m kl(R_S || p)) <= 2 sqrt(m); Maurer proves it for m >= 8, and the
    # certificate accepts m >= 1: check m = 1..12 by the exact binomial sum (m = 1 is an equality: 2)
    for m in range(1, 13):
        k = np.arange(m + 1)
        worst = max(
            float(np.sum(binom.pmf(k, m, p) * np.exp(m * pb.kl(k / m, p)))) for p in np.linspace(0.0005, 0.9995, 999)
        )
        assert worst <= 2 * math.sqrt(m) * (1 + 1e-12), (m, worst)


def test_an_add_remove_prior_is_used_with_twice_its_epsilon():
    # the theorem is for replace-one neighbours; a pure eps-DP prior under add/remove-one is 2 eps-DP for
    # replace-one. Using eps as it is would give bound 0.187 here instead of 0.270 (unsafe)
    args = dict(delta=0.05)
    add_remove = pb.certify(0.1, 5.0, 1000, prior_privacy=_pure(0.1, "add_remove"), **args)
    replace = pb.certify(0.1, 5.0, 1000, prior_privacy=_pure(0.2), **args)
    naive = pb.certify(0.1, 5.0, 1000, prior_privacy=_pure(0.1), **args)
    assert add_remove.bound == replace.bound == pb.dp_prior_pacbayes_bound(0.1, 5.0, 1000, 0.05, 0.2)
    assert add_remove.bound == pytest.approx(0.2701, abs=1e-4) and naive.bound == pytest.approx(0.1874, abs=1e-4)
    assert add_remove.epsilon == 0.2 and "add/remove" in add_remove.caveat
    assert add_remove.prior_privacy.epsilon == 0.1  # the record itself is kept as given
    assert replace.epsilon == 0.2 and "add/remove" not in replace.caveat


def _net(classes, d=6, seed=1):
    flat, unravel = ravel_pytree(es.init_mlp(jax.random.PRNGKey(seed), (d, 4, classes)))
    return flat, unravel


def _params():
    return es.EntropySGLDParams(tau=7.0, gamma=1.0, eta=0.01, eta_inner=0.05, beta=5.0, batch_size=8, inner_steps=2)


@pytest.mark.parametrize("labels", ["plus_minus_one", "three_classes", "fractional", "nan"])
def test_labels_a_two_class_network_cannot_index_are_refused(labels):
    # before: {-1, 1} trained every record as class 1 (-1 indexes the last logit); a label 2 gave a NaN loss with a
    # zero gradient (the record silently dropped); 0.5 was truncated to 0; 0-1 errors counted them all as errors
    x = jax.random.normal(jax.random.PRNGKey(0), (50, 6))
    y01 = np.asarray(x[:, 0] > 0, np.int32)
    y = {
        "plus_minus_one": 2 * y01 - 1,
        "three_classes": np.arange(50) % 3,
        "fractional": y01 * 0.5,
        "nan": np.where(y01 == 1, np.nan, 0.0),
    }[labels]
    flat, unravel = _net(2)
    loss = es.classifier_loss(es.mlp_apply, unravel)
    with pytest.raises(ValueError, match=r"class labels\) must be integers in \{0, \.\.\., 1\}") as info:
        es.run(jax.random.PRNGKey(2), es.init(flat), 2, data=(x, y), params=_params(), loss_fn=loss)
    assert not any(ch.isdigit() for ch in str(info.value).split("outputs;")[1].split("Map")[0])  # no count
    with pytest.raises(ValueError, match="class labels"):
        es.kernel((x, jnp.asarray(y)), _params(), loss).step(jax.random.PRNGKey(2), es.init(flat))
    with pytest.raises(ValueError, match="class labels"):
        pb.certify_gaussian(
            jax.random.PRNGKey(3),
            prior_mean=flat,
            prior_var=1.0,
            posterior_mean=flat,
            posterior_var=0.5,
            error_fn=classifier_error(es.mlp_apply, unravel),
            data=(x, y),
            delta=0.05,
            delta_mc=0.01,
            n_samples=8,
        )
    logits = es.mlp_apply(unravel(flat), x)
    for fn in (es.bounded_cross_entropy, es.zero_one_error):
        with pytest.raises(ValueError, match="class labels"):
            fn(logits, jnp.asarray(y))


def test_valid_label_sets_other_dimensions_and_one_record_are_accepted():
    # three classes on 7 features, integer-valued float labels, bool labels, and a data set of one record (m = 1)
    x = jax.random.normal(jax.random.PRNGKey(5), (30, 7))
    flat3, unravel3 = _net(3, d=7)
    loss3 = es.classifier_loss(es.mlp_apply, unravel3)
    y3 = np.arange(30) % 3
    state, _ = es.run(jax.random.PRNGKey(2), es.init(flat3), 2, data=(x, y3), params=_params(), loss_fn=loss3)
    assert np.all(np.isfinite(np.asarray(state.position)))
    flat2, unravel2 = _net(2, d=7)
    loss2 = es.classifier_loss(es.mlp_apply, unravel2)
    es.run(
        jax.random.PRNGKey(2),
        es.init(flat2),
        1,
        data=(x, (np.arange(30) % 2).astype(np.float32)),
        params=_params(),
        loss_fn=loss2,
    )
    es.check_labels(np.arange(30) % 2 == 1, 2)
    err = classifier_error(es.mlp_apply, unravel2)
    cert = pb.certify_gaussian(
        jax.random.PRNGKey(3),
        prior_mean=flat2,
        prior_var=1.0,
        posterior_mean=flat2,
        posterior_var=0.5,
        error_fn=err,
        data=(x[:1], np.array([1])),
        delta=0.05,
        delta_mc=0.01,
        n_samples=16,
    )
    assert cert.m == 1 and 0 <= cert.empirical_error <= cert.empirical_error_upper <= cert.bound <= 1
    expected = float(jnp.mean(es.zero_one_error(es.mlp_apply(unravel2(flat2), x), jnp.asarray(y3 % 2))))
    assert float(err(flat2, x, y3 % 2)) == expected


def test_a_loss_outside_0_1_is_refused_not_clipped():
    x = jax.random.normal(jax.random.PRNGKey(0), (40, 6))
    y = np.asarray(x[:, 0] > 0, np.int32)
    flat, unravel = _net(2)

    def surrogate(w, xb, yb):  # the bounded cross-entropy: values in [0.018, 4], not a 0-1 loss
        return jnp.mean(es.bounded_cross_entropy(es.mlp_apply(unravel(w), xb), yb))

    with pytest.raises(ValueError, match="error_fn must return the mean 0-1 error"):
        pb.certify_gaussian(
            jax.random.PRNGKey(3),
            prior_mean=flat,
            prior_var=1.0,
            posterior_mean=flat,
            posterior_var=0.5,
            error_fn=surrogate,
            data=(x, y),
            delta=0.05,
            delta_mc=0.01,
            n_samples=8,
        )
    with pytest.raises(ValueError, match=r"2 of 3 values NaN or outside \[0, 1\]"):
        pb.certify([0.5, 1.5, -0.1], 1.0, 40, delta=0.05, delta_mc=0.01)
    # a surrogate divided by its range is a loss in [0, 1], for which the kl bound also holds
    ok = pb.certify_gaussian(
        jax.random.PRNGKey(3),
        prior_mean=flat,
        prior_var=1.0,
        posterior_mean=flat,
        posterior_var=0.5,
        error_fn=lambda w, a, b: surrogate(w, a, b) / 4.0,
        data=(x, y),
        delta=0.05,
        delta_mc=0.01,
        n_samples=8,
    )
    assert 0 < ok.empirical_error < ok.bound <= 1
