"""The default Gaussian noise: its support, its distribution, its delta, and the audits that check them.

The audits of dpposterior.privacy.float_audit are run with positive controls: the float32
``jax.random.normal`` sampler the engine used before (bounded support at 5.42 sd) and plain
floating-point Laplace noise (Mironov's attack) must fail them; every Gaussian and Laplace release
the package makes by default must pass.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dpposterior.baselines import expfam_release as EFR
from dpposterior.baselines import regression_release as RGR
from dpposterior.dpsgd import dpsgd
from dpposterior.privacy import float_audit as FA
from dpposterior.privacy import gaussian_mechanism
from dpposterior.privacy import noise as N
from dpposterior.privacy.secure import secure_normal


def test_the_transform_reaches_past_eleven_sd_and_no_further():
    zeros = np.zeros((N.WORDS_PER_PAIR, 1), np.uint32)
    assert N.normals_from_words_np(zeros, 1)[0] == pytest.approx(N.MAX_ABS, rel=1e-12)
    assert N.MAX_ABS > 11.5
    ones = np.full((N.WORDS_PER_PAIR, 1), 0xFFFFFFFF, np.uint32)
    assert abs(N.normals_from_words_np(ones, 1)[0]) < 1e-6  # u1 -> 1: radius 0
    # the JAX and NumPy transforms agree on random words
    w = np.asarray(N.normal_words(jax.random.key(3), 101))
    np.testing.assert_allclose(
        np.asarray(N.normals_from_words(jnp.asarray(w), 101)), N.normals_from_words_np(w, 101), rtol=1e-12, atol=1e-12
    )


def test_draws_are_standard_normal():
    z = np.asarray(N.standard_normal(jax.random.key(0), (400_000,)), np.float64)
    assert z.dtype == np.float64
    assert stats.kstest(z, "norm").pvalue > 1e-3
    assert abs(z.mean()) < 5 / math.sqrt(z.size) and abs(z.std() - 1) < 5 / math.sqrt(2 * z.size)
    # power: a scale off by 2% is rejected at this size
    assert stats.kstest(z, stats.norm(scale=1.02).cdf).pvalue < 1e-3
    s = secure_normal((100_000,))
    assert stats.kstest(s, "norm").pvalue > 1e-4


def test_tail_delta_and_the_record():
    assert N.tail_delta(0, 1.0) == 0.0
    assert N.tail_delta(1e10, 1.0) == pytest.approx((1 + math.e) * 1e10 * 2.0**-96)
    assert N.tail_delta(1, math.inf) == math.inf
    x = np.zeros((50, 3), np.float32)
    tr = dpsgd(
        lambda w, r: jnp.sum(w * r),
        np.zeros(3, np.float32),
        x,
        noise_multiplier=1.0,
        clip=1.0,
        sampling_rate=0.2,
        num_steps=20,
        learning_rate=0.1,
        delta=1e-5,
        rng_key=0,
    )
    extra = tr.privacy.detail("noise_tail_delta")
    assert extra == pytest.approx(N.tail_delta(20 * 3, tr.privacy.epsilon)) and extra > 0
    assert tr.privacy.delta == 1e-5 + extra
    g = gaussian_mechanism(np.ones(4), epsilon=1.0, delta=1e-6, sensitivity=1.0, rng_key=1)
    assert g.privacy.detail("noise_tail_delta") == pytest.approx(N.tail_delta(4, 1.0))


def test_a_budget_the_sampler_cannot_certify_is_refused_before_any_noise():
    """The tail term grows as e^epsilon: at epsilon 50 it would add 2.8 times the asked delta over 421
    normals. dpvi and dpvim refuse such a budget before drawing noise, naming the largest epsilon the
    sampler certifies; a record made from a given noise multiplier states the term in its delta."""
    N.check_noise_tail(44.0, 1e-5, 421, "x")  # 0.66% of delta: allowed
    with pytest.raises(ValueError, match=r"x: epsilon=50 at delta=1e-05 is beyond .* certifies here is 44\.4"):
        N.check_noise_tail(50.0, 1e-5, 421, "x")
    N.check_noise_tail(1e3, 0.0, 421, "x")  # no delta to share
    import numpyro
    import numpyro.distributions as dist

    from dpposterior import dpvi
    from dpposterior.vi import dpvim

    def model(x):
        mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
        with numpyro.plate("r", x.shape[0]):
            numpyro.sample("x", dist.Normal(mu, 1.0), obs=x)

    x = np.zeros(200, np.float32)
    for fit in (dpvi, dpvim):
        with pytest.raises(ValueError, match=f"{fit.__name__}: epsilon=60 at delta=1e-05 is beyond what the noise"):
            fit(model, x, epsilon=60.0, delta=1e-5, num_steps=200)


def test_a_budgeted_release_never_states_more_than_the_delta_asked_for():
    """Near the limit the tail term is a visible share of delta (0.09% at epsilon 42 over 421 normals):
    the budgeted mechanisms are calibrated at delta less that term, so their records state at most the
    delta asked for and not much less."""
    from dpposterior import dpvi
    from dpposterior.privacy import gaussian_mechanism

    d = N.mechanism_delta(42.0, 1e-5, 421, "x")
    assert d + N.tail_delta(421, 42.0) <= 1e-5 and d < 1e-5 * (1 - 5e-4)
    assert N.mechanism_delta(1.0, 1e-5, 421, "x") == 1e-5  # a term below delta's last bit changes nothing
    with pytest.raises(ValueError, match="beyond what the noise sampler certifies"):
        N.mechanism_delta(50.0, 1e-5, 421, "x")
    release = gaussian_mechanism(np.zeros(400), epsilon=42.0, delta=1e-5, sensitivity=1.0, rng_key=0)
    assert 1e-5 * (1 - 1e-9) <= release.privacy.delta <= 1e-5
    assert dict(release.privacy.details)["noise_tail_delta"] > 5e-4 * 1e-5
    import numpyro
    import numpyro.distributions as dist

    def model(x):
        mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
        with numpyro.plate("r", x.shape[0]):
            numpyro.sample("x", dist.Normal(mu, 1.0), obs=x)

    trace = dpvi(model, np.zeros(200, np.float32), epsilon=38.0, delta=1e-5, num_steps=200, rng_key=0)
    assert trace.privacy.delta <= 1e-5 and trace.privacy.epsilon <= 38.0
    assert dict(trace.privacy.details)["noise_tail_delta"] > 1e-5 * 1e-5


def test_noise_std_is_never_rounded_below_the_accounted_one():
    for sigma in (1.0, 0.1, 1 / 3, 2.7182818284, 16.7):
        f = float(N.float32_at_least(sigma))
        assert f >= sigma and np.float32(f) == f and (f - sigma) <= 1.2e-7 * sigma


@pytest.mark.parametrize("num_draws", [1e6, 1e9])
def test_support_audit_fails_the_old_sampler_and_passes_the_default(num_draws):
    old = FA.gaussian_support_audit(lambda k, s: jax.random.normal(k, s, jnp.float32), num_draws=num_draws)
    assert 5.2 < old.extent < 5.5 and not old.passed  # positive control: bounded support caught
    allowance = N.tail_delta(num_draws, 1.0)
    new = FA.gaussian_support_audit(N.standard_normal, num_draws=num_draws, allowance=allowance)
    assert new.extent == pytest.approx(N.MAX_ABS) and new.passed


def test_the_engine_step_uses_the_audited_sampler():
    # with sigma C = 1 and a zero gradient, the step's g~ is the sampler's normal, rounded to float32
    from dpposterior.dpsgd.sampling import step_keys

    x = np.zeros((10, 2), np.float32)
    tr = dpsgd(
        lambda w, r: jnp.sum(w * r),
        np.zeros(2, np.float32),
        x,
        noise_multiplier=1.0,
        clip=1.0,
        sampling_rate=0.5,
        num_steps=4,
        learning_rate=0.0,
        delta=1e-5,
        rng_key=9,
    )
    from dpposterior.privacy.randomness import resolve_key

    raw, _ = resolve_key(9)
    for t in range(4):
        z = np.asarray(N.standard_normal(step_keys(jnp.asarray(raw), t)[2], (2,)), np.float64)
        np.testing.assert_array_equal(tr.grads[t], z.astype(np.float32))


def _expfam_release(snapping):
    x = np.array([0.3, 1.7, 2.2, 0.9] * 25)
    x_alt = x.copy()
    x_alt[0] = 0.3 + 1e-6

    def release(value, i):
        data = x if value == x.sum() else x_alt
        return EFR.release_sufficient_statistics(
            "gamma-exponential", data, epsilon=1.0, bounds=(0.0, 5.0), rng_key=i, snapping=snapping
        ).noisy_statistic[0]

    return release, x.sum(), x_alt.sum()


def _regression_release(snapping):
    rng = np.random.default_rng(0)
    X, y = rng.uniform(-1, 1, (40, 1)), rng.uniform(-1, 1, 40)
    y_alt = y.copy()
    y_alt[0] += 1e-6

    def release(value, i):
        yy = y if value == float(y.sum()) else y_alt
        return RGR.release_regression_statistics(
            X, yy, epsilon=1.0, x_bound=1.0, y_bound=1.0, rng_key=i, snapping=snapping
        ).noisy["xy"][-1]  # the part holding sum y

    return release, float(y.sum()), float(y_alt.sum())


@pytest.mark.parametrize("make", [_expfam_release, _regression_release], ids=["expfam", "regression"])
def test_float_attack_catches_plain_laplace_and_not_the_default(make):
    bound = math.e / (1 + math.e)  # the best success rate epsilon = 1 allows
    plain = FA.float_attack(*[make(False)[0]], *make(False)[1:], num_runs=20)
    assert plain > 0.95  # positive control: the attack works on plain noise
    default = FA.float_attack(*[make(None)[0]], *make(None)[1:], num_runs=20)
    assert default <= bound  # snapped by default: nothing to read in the low bits
