"""A fresh user's mistakes with DP-SGLD / DP dropout, the DP Barker kernel, the NumPyro energy models,
logistic_bound_constants and calibrate_chain.

Each case was a silent wrong result (a privacy analysis whose assumption a run could break, an
energy scaled by N, a string taken as a number, a setting silently ignored), an internal traceback
(a JAX error about a user's function), or a valid request refused because of an accountant the user
did not choose, before it was fixed; the fix makes it a correct result or a ValueError/TypeError
that names what was wrong and what is allowed. Tiny sizes: the file runs in seconds.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpposterior import mcmc
from dpposterior.mcmc import barker


def _raises(fn, exc, *words):
    with pytest.raises(exc) as info:
        fn()
    for w in words:
        assert w in str(info.value), (w, str(info.value))


# ---------------------------------------------------------------------------------------------
# DP Barker


@functools.lru_cache(maxsize=1)
def _barker_b15_chains():
    """One private DP Barker kernel (b = 15 of N = 400, U_i = 1e3 r_i theta + 0 log(r_i + 1.5)), compiled
    once (make_chain_run) and run for 40 steps on two data sets: records alternating +1 / -1 (every
    log ratio clipped, half at +B, half at -B), and records all -2 (every energy NaN: log(-0.5))."""
    n = 400
    x = np.where(np.arange(n) % 2 == 0, 1.0, -1.0).astype(np.float32)
    model = mcmc.energy_model(
        lambda th, r: 1e3 * r * th[0] + 0.0 * jnp.log(r + 1.5),
        x,
        log_prior_fn=lambda th: -0.5 * jnp.sum(th**2),
        bound_constants=np.full(n, 1e3),
    )
    kernel = mcmc.dp_barker_kernel(model, mcmc.random_walk(1.0), batch_size=15)
    run = jax.jit(mcmc.make_chain_run(kernel, 40))
    state = kernel.init(np.array([0.0]))
    key = jax.random.key(0)
    clipped = run(key, state, model.data, model.bound_constants)[1]
    nan = run(key, state, jnp.full(n, -2.0, jnp.float32), model.bound_constants)[1]
    return jax.tree.map(np.asarray, clipped), jax.tree.map(np.asarray, nan)


def test_private_barker_noise_variance_stays_in_the_range_of_its_privacy_analysis():
    # The unbiased sample variance of a batch of 15 clipped ratios is up to 15/14 of the clip's bound, so
    # s2 reached 1.006 and the Gaussian variance C - s2 fell to 0.994, below the [C - 1, C] the RDP bound
    # assumes (and the [C - 0.98, C] the docstring said).
    var = _barker_b15_chains()[0].noise_std.astype(np.float64) ** 2
    c = mcmc.accounting.BARKER_NORMAL_VARIANCE
    assert var.min() >= c - barker.CLIP_FACTOR**2 - 1e-5, var.min()
    assert np.any(var < c - 0.9), var.min()  # the clip binds: the cap is what holds the bound here


def test_private_barker_records_with_a_nan_energy_do_not_decide_the_test():
    # A NaN log ratio passed through the clip, so the private test rejected every proposal (acceptance 0,
    # noise std NaN) whenever such a record was in the batch: the outcome decided by one record, an
    # unbounded privacy loss. Now a NaN ratio counts as 0 (in [-B, B], like an absent record's).
    info = _barker_b15_chains()[1]
    assert np.all(np.isfinite(info.noise_std)) and info.accepted.mean() > 0.2, info.accepted.mean()


def test_a_nan_energy_counts_as_a_bound_violation():
    # bound_violations (where the user's bound |U_i(theta') - U_i(theta)| <= c_i M fails) missed NaN: it
    # said 0 (also for a penalty chain that never moved because its log ratio was NaN)
    assert _barker_b15_chains()[1].bound_violations.tolist() == [15] * 40


# ---------------------------------------------------------------------------------------------
# numpyro_energy_model

_XN = np.linspace(-1.0, 1.0, 6).astype(np.float32)
_YN = (_XN > 0).astype(np.float32)
_CN = np.abs(_XN) + 0.1


def _logistic(x, y=None, plate_size=None):
    import numpyro
    import numpyro.distributions as dist

    w = numpyro.sample("w", dist.Normal(0.0, 1.0))
    with numpyro.plate("data", x.shape[0] if plate_size is None else plate_size):
        numpyro.sample("y", dist.Bernoulli(logits=w * x), obs=y)


def test_numpyro_energy_model_refuses_a_record_plate_fixed_at_n():
    # numpyro.plate("data", N) instead of x.shape[0]: each energy was N times the record's own (6x here)
    _raises(
        lambda: mcmc.numpyro_energy_model(_logistic, _XN, _YN, bound_constants=_CN, model_kwargs={"plate_size": 6}),
        ValueError,
        "plate",
        "from the data",
    )
    assert mcmc.numpyro_energy_model(_logistic, _XN, _YN, bound_constants=_CN).num_records == 6


def test_numpyro_energy_model_refuses_observations_passed_outside_the_positional_data():
    # y in model_kwargs: each record's energy was the sum over all N labels with that record's x
    _raises(
        lambda: mcmc.numpyro_energy_model(_logistic, _XN, bound_constants=_CN, model_kwargs={"y": _YN}),
        ValueError,
        "observed site 'y'",
        "positional",
    )


# ---------------------------------------------------------------------------------------------
# DP-SGLD: custom models

_RNG = np.random.default_rng(0)
_X = _RNG.normal(size=(12, 2)).astype(np.float32)
_Y = (_X[:, 0] > 0).astype(np.float32)
_RUN = dict(num_steps=2, sampling_rate=0.5, clip=1.0, step_size=1e-3, delta=1e-5, noise_multiplier=1.0, rng_key=0)


def _custom(**kw):
    from dpposterior.mcmc import dp_sgld as sg

    return sg.logistic_regression(2)._replace(num_features=None, name="custom", **kw)


@pytest.mark.parametrize(
    "kw,exc,words",
    [
        # forgot the sum: was JAX's "Gradient only defined for scalar-output functions" from inside the chain
        (dict(log_prior=lambda th: -0.5 * th**2), ValueError, ("model.log_prior", "scalar", "(2,)")),
        # a per-record log-likelihood of shape (d,): was "loss must return a scalar" (the engine's word)
        (
            dict(log_likelihood=lambda th, r: r[1] * r[0] * th - jnp.logaddexp(0.0, r[0] * th)),
            ValueError,
            ("model.log_likelihood", "scalar"),
        ),
        (
            dict(log_likelihood=lambda th, r: jnp.dot(r[0], th) + jnp.dot(r[0], jnp.ones(3))),
            ValueError,
            ("model.log_likelihood", "failed"),
        ),
        # was "initial_position must have shape (True,)"
        (dict(num_params=True), TypeError, ("model.num_params",)),
        # was a TypeError from calling log_likelihood with a key it does not take
        (dict(needs_key="no"), TypeError, ("model.needs_key",)),
        (dict(log_prior=None), TypeError, ("model.log_prior", "callable")),
    ],
)
def test_dp_sgld_custom_model_mistakes_are_named_before_the_run(kw, exc, words):
    from dpposterior.mcmc import dp_sgld as sg

    _raises(lambda: sg.run(_custom(**kw), (_X, _Y), **_RUN), exc, *words)


# ---------------------------------------------------------------------------------------------
# DP-SGLD: the accountant the user chose decides


@pytest.mark.parametrize(
    "accountant,sigma,delta",
    [
        ("zcdp", 1.0, 1e-16),  # below PLD's delta resolution
        ("zcdp", 1e-3, 1e-5),
    ],
)  # below PLD's noise range
def test_dp_sgld_run_is_not_refused_by_an_accountant_it_only_reports(accountant, sigma, delta):
    # was the PLD accountant's ValueError (from the details' epsilon_by_accountant), for a run accounted by zCDP
    from dpposterior.mcmc import dp_sgld as sg
    from dpposterior.privacy import dpd_epsilon

    r = sg.run(
        sg.logistic_regression(2),
        (_X, _Y),
        **{**_RUN, "noise_multiplier": sigma, "delta": delta, "accountant": accountant},
    )
    assert r.privacy.epsilon == dpd_epsilon(sigma, delta, 0.5, 2, accountant).epsilon
    by = dict(dict(r.privacy.details)["epsilon_by_accountant"])
    assert by["zcdp"] == r.privacy.epsilon and by["pld"] is None
    _raises(lambda: sg.epsilons_for(1.0, 1e-5, 0.5, 0), ValueError, "num_steps")  # bad input still refused


# ---------------------------------------------------------------------------------------------
# logistic_bound_constants


@pytest.mark.parametrize(
    "features,kw,exc,words",
    [
        ([["1.5", "2"]], {}, TypeError, ("features", "real numbers")),  # was silently [2.5]
        (np.ones((2, 2), complex), {}, TypeError, ("features", "real numbers")),  # was a ComplexWarning, imag dropped
        (np.full((2, 2), 1e200), {}, ValueError, ("features", "float32")),  # was inf with an overflow warning
        (np.ones((2, 2)), dict(temperature=1e-320), ValueError, ("temperature", "float32")),  # was inf
    ],
)
def test_logistic_bound_constants_refuse_strings_complex_and_overflow(features, kw, exc, words):
    _raises(lambda: mcmc.logistic_bound_constants(features, **kw), exc, *words)
    assert mcmc.logistic_bound_constants([[3.0, 4.0]], temperature=2.0) == pytest.approx([2.5])


def test_masked_arrays_are_refused_naming_the_argument():
    # logistic_bound_constants used the value under the mask (c = 5 here); energy_model and
    # numpyro_energy_model failed in JAX ("numpy masked arrays are not supported") without naming the data
    x = np.ma.masked_array([[1.0, 2.0], [3.0, 4.0]], mask=[[0, 0], [0, 1]])
    _raises(lambda: mcmc.logistic_bound_constants(x), ValueError, "features", "1 masked")
    _raises(
        lambda: mcmc.energy_model(
            lambda th, r: r[0] * th[0], x, log_prior_fn=lambda th: -jnp.sum(th**2), bound_constants=np.ones(2)
        ),
        ValueError,
        "data",
        "masked",
    )
    _raises(
        lambda: mcmc.numpyro_energy_model(_logistic, x[:, 1], _YN[:2], bound_constants=np.ones(2)),
        ValueError,
        "data",
        "masked",
    )


# ---------------------------------------------------------------------------------------------
# calibrate_chain


@pytest.mark.parametrize(
    "method,kw,word",
    [
        ("penalty", dict(delta_fraction=0.1), "delta_fraction"),  # was ignored: the same sigma as 0.5
        ("dp_barker", dict(delta_fraction=0.1, num_records=1000), "delta_fraction"),
        ("dp_fast_mh", dict(num_records=1000), "num_records"),  # was ignored
        ("penalty", dict(num_records=1000), "num_records"),
    ],
)
def test_calibrate_chain_refuses_settings_its_method_ignores(method, kw, word):
    _raises(lambda: mcmc.calibrate_chain(method, 1.0, 1e-5, 10, **kw), ValueError, word, "only")
    assert mcmc.calibrate_chain("dp_fast_mh", 1.0, 1e-5, 10, delta_fraction=0.2).delta == pytest.approx(2e-7)


def test_barker_kernel_refuses_settings_its_test_ignores():
    n = 20
    x = np.linspace(-1.0, 1.0, n).astype(np.float32)
    model = mcmc.energy_model(
        lambda th, r: 0.5 * (r - th[0]) ** 2,
        x,
        log_prior_fn=lambda th: -0.5 * jnp.sum(th**2),
        bound_constants=np.full(n, 3.0),
    )
    rw = mcmc.random_walk(0.1)
    # was stored and never used (a non-private chain is not accounted)
    _raises(lambda: mcmc.dp_barker_kernel(model, rw, private=False, delta=1e-7), ValueError, "delta", "ignored")
    # the exact test draws Logistic(0, 1): C = 1.0 changed nothing
    _raises(
        lambda: mcmc.dp_barker_kernel(model, rw, private=False, normal_variance=1.0),
        ValueError,
        "normal_variance",
        "ignored",
    )
    assert (
        mcmc.dp_barker_kernel(model, rw, private=False, batch_size=10, normal_variance=1.0).config.normal_variance
        == 1.0
    )
    assert mcmc.dp_barker_kernel(model, rw).config.delta == 1e-5
    # the default batch is all N = 10 records: the message said "got 10" for a batch_size never given
    small = mcmc.energy_model(
        lambda th, r: 0.5 * (r - th[0]) ** 2,
        x[:10],
        log_prior_fn=lambda th: -0.5 * jnp.sum(th**2),
        bound_constants=np.full(10, 3.0),
    )
    _raises(lambda: mcmc.dp_barker_kernel(small, rw), ValueError, "defaults to N", "N = 10")


@pytest.mark.parametrize("kw", [dict(span=1e7), dict(spacing=1e-7)])
def test_barker_correction_refuses_a_grid_too_fine_to_fit(kw):
    # was numpy's MemoryError ("Unable to allocate 895. GiB") from the linear programme's matrix
    _raises(lambda: mcmc.barker_correction(2.0, **kw), ValueError, "span / spacing", "2000")


def test_numpyro_energy_model_refuses_a_prior_that_reads_the_data():
    # w ~ N(mean(x), 1): the log prior is evaluated on the first record, so it was silently centred at x[0]
    # (-1.419 instead of -0.919 at w = 0), with that record's value outside any privacy guarantee
    import numpyro
    import numpyro.distributions as dist

    def empirical_bayes(x, y):
        w = numpyro.sample("w", dist.Normal(jnp.mean(x), 1.0))
        with numpyro.plate("data", x.shape[0]):
            numpyro.sample("y", dist.Bernoulli(logits=w * x), obs=y)

    _raises(
        lambda: mcmc.numpyro_energy_model(empirical_bayes, _XN, _YN, bound_constants=_CN),
        ValueError,
        "latent site 'w'",
        "must not read the records",
    )


@pytest.mark.parametrize("eps,delta,steps", [(0.1, 1e-3, 7), (0.5, 1e-5, 10), (2.0, 1e-6, 300)])
def test_calibrate_chain_exact_penalty_never_exceeds_its_target(eps, delta, steps):
    # the chain's epsilon (the accountant run_chain uses) was 0.10000000000002274 for a target of 0.1
    per = mcmc.calibrate_chain("penalty", eps, delta, steps, accountant="exact")
    assert mcmc.gaussian_chain_epsilon(per.noise_multiplier, steps, delta, "exact") <= eps


@pytest.mark.parametrize(
    "position,exc,word",
    [
        ([True, False], TypeError, "real numbers"),  # was [1., 0.]
        (["0.1"], TypeError, "real numbers"),  # was [0.1]
        ([np.nan, 0.0], ValueError, "finite"),  # was a NaN state
        ([1e39], ValueError, "float32"),
    ],
)  # was inf
def test_dp_sgld_init_checks_the_position(position, exc, word):
    from dpposterior.mcmc import dp_sgld as sg

    _raises(lambda: sg.init(position), exc, "position", word)


def test_numpyro_energy_model_accepts_a_feature_plate_as_large_as_n():
    # a plate over p = N = 6 features was taken for the plate over records, and its global weights refused as
    # "local latent variables"; now only a plate that follows the data to one record is over the records
    import numpyro
    import numpyro.distributions as dist

    def six_weights(x, y):
        with numpyro.plate("features", 6):
            w = numpyro.sample("w", dist.Normal(0.0, 1.0))
        with numpyro.plate("data", x.shape[0]):
            numpyro.sample("y", dist.Bernoulli(logits=jnp.sum(w) * x), obs=y)

    assert mcmc.numpyro_energy_model(six_weights, _XN, _YN, bound_constants=_CN).num_records == 6


# ---------------------------------------------------------------------------------------------
# the DP dropout reproduction's settings


@pytest.mark.parametrize(
    "kw,exc,word",
    [
        (dict(kept_samples=0), ValueError, "kept_samples"),  # was a ZeroDivisionError in run_dp_dropout
        (dict(epsilons=()), TypeError, "epsilons"),  # was min() of an empty sequence in the report
        (dict(seeds=(0, 0)), ValueError, "seeds"),  # was one run averaged as two seeds (sd 0)
        (dict(epsilons=(-1.0,)), ValueError, "epsilon"),
        (dict(batch_size=600), ValueError, "batch_size"),  # q = 600 / 500 > 1: was "sampling_rate" at run time
        (dict(datasets=("mnist",)), ValueError, "datasets"),
        (dict(seeds=(True,)), TypeError, "seeds"),
    ],
)
def test_dp_dropout_settings_are_checked_when_made(kw, exc, word):
    import dataclasses

    from dpposterior.reproduce.dp_dropout import QUICK

    _raises(lambda: dataclasses.replace(QUICK, **kw), exc, word)


def test_numpyro_energy_model_box_must_lie_inside_a_constrained_support():
    # w ~ HalfNormal with box (-1, 5): was accepted, and the chain then evaluated the model at w < 0, outside
    # the support (NumPyro does not check it inside the compiled chain); a box of the wrong length failed
    # only when a chain ran
    import numpyro
    import numpyro.distributions as dist

    def positive_weight(x, y):
        w = numpyro.sample("w", dist.HalfNormal(1.0))
        with numpyro.plate("data", x.shape[0]):
            numpyro.sample("y", dist.Bernoulli(logits=w * x), obs=y)

    _raises(
        lambda: mcmc.numpyro_energy_model(positive_weight, _XN, _YN, bound_constants=_CN, box=(-1.0, 5.0)),
        ValueError,
        "inside the support",
        "'w'",
    )
    _raises(
        lambda: mcmc.numpyro_energy_model(positive_weight, _XN, _YN, bound_constants=_CN, box=([0.1, 0.1], [1.0, 1.0])),
        ValueError,
        "one entry per coordinate",
    )
    assert mcmc.numpyro_energy_model(positive_weight, _XN, _YN, bound_constants=_CN, box=(0.0, 5.0)).lower is not None


@pytest.mark.parametrize("scale", [1e-20, 1e25])
def test_dp_sgld_builtin_prior_scale_must_give_a_float32_precision(scale):
    # 1e-20: the precision 1e40 is inf in float32 and the chain NaN (inf * 0 at theta = 0); 1e25: the
    # precision 1e-50 is 0 in float32, a flat prior instead of the N(0, 1e50) asked for
    from dpposterior.mcmc import dp_sgld as sg

    _raises(lambda: sg.logistic_regression(2, prior_scale=scale), ValueError, "prior_scale", "float32")
    _raises(lambda: sg.mlp(2, prior_scale=scale), ValueError, "prior_scale", "float32")


@pytest.mark.parametrize(
    "logit",
    [
        lambda th, x: (x @ th)[:, None],  # was a (n, 1) "predictive"
        lambda th, x: jnp.sum(x @ th),  # was one number for all rows
        lambda th, x: x[:, 0] * th[0] > 0,
    ],
)  # was 0/1 taken as logits
def test_dp_sgld_predictive_checks_a_custom_logit(logit):
    from dpposterior.mcmc import dp_sgld as sg

    model = _custom(logit=logit)
    s = np.zeros((3, 2), np.float32)
    _raises(lambda: sg.posterior_predictive(model, s, _X), ValueError, "model.logit", "(12,)")
    _raises(lambda: sg.predictive_scores(model, s, _X, _Y), ValueError, "model.logit")


# the non-private minibatch Barker test (private=False, b < N) set s2 = C whenever its variance estimate
# exceeded C (the test is invalid there) and said nothing: the chain ran on, silently approximate
def test_non_private_minibatch_barker_says_when_its_test_was_invalid():
    n = 400
    x = np.where(np.arange(n) % 2 == 0, 1.0, -1.0).astype(np.float32)
    model = mcmc.energy_model(
        lambda th, r: 50.0 * r * th[0],
        x,
        log_prior_fn=lambda th: -0.5 * jnp.sum(th**2),
        bound_constants=np.full(n, 50.0),
    )
    kernel = mcmc.dp_barker_kernel(model, mcmc.random_walk(1.0), batch_size=20, private=False)
    with pytest.warns(RuntimeWarning, match=r"of 30 minibatch Barker tests \(private=False\) had a variance"):
        res = mcmc.run_chain(kernel, [0.0], 30, rng_key=0)
    frac = mcmc.diagnostics(res).nonprivate_invalid_test_fraction
    assert 0 < frac <= 1
    # a step small enough for s2 < C: no warning, nothing counted
    calm = mcmc.dp_barker_kernel(model, mcmc.random_walk(1e-4), batch_size=20, private=False)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        res = mcmc.run_chain(calm, [0.0], 30, rng_key=0)
    assert mcmc.diagnostics(res).nonprivate_invalid_test_fraction == 0.0
