"""Clear errors at the public boundary of dpposterior.mcmc."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from dpposterior import mcmc
from dpposterior.mcmc.accounting import dp_fast_mh_constants, optimal_composition_delta
from input_checks import raises_with as _raises

X = np.linspace(-1, 1, 10).astype(np.float32)


def energy(theta, record):
    return 0.5 * (record - theta[0]) ** 2


def log_prior(theta):
    return -0.5 * jnp.sum(theta**2)


def model(**kw):
    args = dict(log_prior_fn=log_prior, bound_constants=np.abs(X) + 2.0, box=(-2.0, 2.0))
    args.update(kw)
    data = args.pop("data", X)
    return mcmc.energy_model(energy, data, **args)


@pytest.mark.parametrize(
    "data,match",
    [
        (np.array([0.0, np.nan] + [0.0] * 8), "finite"),
        (np.array([0.0, np.inf] + [0.0] * 8), "finite"),
        (np.zeros(0), "at least one record"),
        ({"a": np.zeros(10), "b": np.zeros(9)}, "share their first axis"),
        (np.full(10, 1e300), "float32 range"),
    ],
)
def test_bad_data(data, match):
    with pytest.raises(ValueError, match=match):
        model(data=data)


@pytest.mark.parametrize(
    "c,match",
    [
        (-np.ones(10), ">= 0"),
        (np.zeros(10), "positive sum"),
        (np.ones(9), "shape"),
        (np.full(10, np.nan), "finite"),
    ],
)
def test_bad_bound_constants(c, match):
    with pytest.raises(ValueError, match=match):
        model(bound_constants=c)


@pytest.mark.parametrize(
    "box,match",
    [
        ((1.0, -1.0), "lower < upper"),
        ((1.0, 1.0), "lower < upper"),
        ((np.nan, 1.0), "NaN"),
        (([0.0, 0.0], [1.0]), "one shape"),
        ((0.0,), "pair"),
    ],
)
def test_bad_box(box, match):
    with pytest.raises(ValueError, match=match):
        model(box=box)


def test_non_callables_and_bad_proposals():
    with pytest.raises(TypeError, match="energy_fn"):
        mcmc.energy_model(3.0, X, log_prior_fn=log_prior, bound_constants=np.ones(10))
    for scale in (0.0, -1.0, np.nan, np.inf):
        with pytest.raises(ValueError, match="scale"):
            mcmc.random_walk(scale)
    with pytest.raises(TypeError, match="Proposal"):
        mcmc.tuna_mh_kernel(model(), lambda key, th: th)
    with pytest.raises(TypeError, match="EnergyModel"):
        mcmc.tuna_mh_kernel(X, mcmc.random_walk(0.1))


@pytest.mark.parametrize("epsilon", [0.0, -0.1, np.nan, np.inf, 1.0, 1.5])
def test_bad_per_iteration_epsilon(epsilon):
    with pytest.raises(ValueError, match="epsilon"):
        mcmc.dp_fast_mh_kernel(model(), mcmc.random_walk(0.1), epsilon=epsilon, delta=1e-5, batch_cap=10.0)
    with pytest.raises(ValueError, match="epsilon"):
        mcmc.penalty_kernel(model(), mcmc.random_walk(0.1), epsilon=epsilon, delta=1e-5)


@pytest.mark.parametrize("delta", [0.0, 1.0, -1e-5, np.nan])
def test_bad_per_iteration_delta(delta):
    with pytest.raises(ValueError, match="delta"):
        mcmc.dp_fast_mh_kernel(model(), mcmc.random_walk(0.1), epsilon=0.5, delta=delta, batch_cap=10.0)


def test_bad_kernel_settings():
    m, prop = model(), mcmc.random_walk(0.1)
    with pytest.raises(ValueError, match="required"):
        mcmc.dp_fast_mh_kernel(m, prop, epsilon=None, delta=None, batch_cap=10.0)
    with pytest.raises(ValueError, match="batch_cap"):
        mcmc.dp_fast_mh_kernel(m, prop, epsilon=0.5, delta=1e-5, batch_cap=0.0)
    with pytest.raises(ValueError, match="delta'"):  # delta C / (2 K c_max) >= 1
        mcmc.dp_fast_mh_kernel(m, prop, epsilon=0.5, delta=0.9, batch_cap=1.0)
    with pytest.raises(ValueError, match="not both"):
        mcmc.penalty_kernel(m, prop, epsilon=0.5, delta=1e-5, noise_multiplier=3.0)
    with pytest.raises(ValueError, match="noise_multiplier"):
        mcmc.penalty_kernel(m, prop)
    with pytest.raises(TypeError, match="private"):
        mcmc.penalty_kernel(m, prop, private="no")


def test_bad_initial_positions():
    kernel = mcmc.tuna_mh_kernel(model(), mcmc.random_walk(0.1))
    for pos, match in (
        (np.array([3.0]), "inside the box"),
        (np.array([np.nan]), "finite"),
        (np.zeros(2), "dimension"),
        (np.zeros((1, 1, 1)), "shape"),
    ):
        with pytest.raises(ValueError, match=match):
            mcmc.run_chain(kernel, pos, 5, rng_key=0)
    with pytest.raises(ValueError, match="inside the box"):
        kernel.init(np.array([2.5]))
    with pytest.raises(TypeError, match="num_steps"):
        mcmc.run_chain(kernel, np.zeros(1), 5.0, rng_key=0)
    with pytest.raises(ValueError, match="num_steps"):
        mcmc.run_chain(kernel, np.zeros(1), 0, rng_key=0)


def test_bad_accounting_arguments():
    with pytest.raises(ValueError, match="total_epsilon"):
        mcmc.calibrate_chain("dp_fast_mh", 0.0, 1e-5, 100)
    with pytest.raises(ValueError, match="total_delta"):
        mcmc.calibrate_chain("penalty", 1.0, 1.0, 100)
    with pytest.raises(ValueError, match="method"):
        mcmc.calibrate_chain("barker", 1.0, 1e-5, 100)
    with pytest.raises(ValueError, match=">= 1"):  # one iteration cannot use a per-iteration epsilon of 5
        mcmc.calibrate_chain("dp_fast_mh", 5.0, 1e-5, 1)
    with pytest.raises(ValueError, match="accountant"):
        mcmc.compose_iterations(0.1, 1e-6, 10, 1e-3, "moments")
    kernel = mcmc.penalty_kernel(model(), mcmc.random_walk(0.1), epsilon=0.5, delta=1e-5)
    with pytest.raises(ValueError, match="total_delta"):
        mcmc.run_chain(kernel, np.zeros(1), 5, rng_key=0, total_delta=1.5)
    with pytest.raises(ValueError, match="accountant"):
        mcmc.run_chain(kernel, np.zeros(1), 5, rng_key=0, accountant="optimal")


def test_non_scalar_energy_or_log_prior_is_refused():
    # a log prior of shape (dim,) used to accept each coordinate separately, and an energy of shape (1,)
    # broadcast a minibatch's records against each other (TunaMH): both ran silently
    for kw, match in (
        (dict(log_prior_fn=lambda th: -0.5 * th**2), "log_prior_fn must return a scalar"),
        (dict(energy_fn=lambda th, r: 0.5 * (r - th[:1]) ** 2), "energy_fn must return a scalar"),
    ):
        args = dict(energy_fn=energy, log_prior_fn=log_prior)
        args.update(kw)
        m = mcmc.energy_model(args["energy_fn"], X, log_prior_fn=args["log_prior_fn"], bound_constants=np.abs(X) + 2.0)
        kernel = mcmc.tuna_mh_kernel(m, mcmc.random_walk(0.1))
        with pytest.raises(ValueError, match=match + r".*shape \(2,\)"):
            mcmc.run_chain(kernel, np.zeros(2), 3, rng_key=0)
        with pytest.raises(ValueError, match=match):
            kernel.init(np.zeros(2))


@pytest.mark.parametrize(
    "epsilon,delta,match",
    [
        (5e-324, 1e-5, "overflows"),
        (0.5, 5e-324, "overflows"),  # were ZeroDivisionError / an inf sigma
        (1e-300, 1e-5, "sigma2"),
        (0.5, 1e-300, "delta"),  # beyond float32: inf or 0 in the step
    ],
)
def test_subnormal_or_tiny_privacy_parameters_are_refused(epsilon, delta, match):
    with pytest.raises(ValueError, match=match):
        dp_fast_mh_constants(epsilon, delta, total_bound=10.0, max_bound=1.0, batch_cap=100.0)
    with pytest.raises(ValueError, match=match if match == "overflows" else "float32"):
        mcmc.dp_fast_mh_kernel(model(), mcmc.random_walk(0.1), epsilon=epsilon, delta=delta, batch_cap=100.0)


def test_penalty_noise_beyond_float32_is_refused():
    # the penalty kernel computed in float32 with an inf noise multiplier (numpy overflow warning), and
    # a subnormal epsilon failed only at run_chain, blaming a noise_multiplier the user never gave
    with pytest.raises(ValueError, match="noise_multiplier.*float32"):
        mcmc.penalty_kernel(model(), mcmc.random_walk(0.1), noise_multiplier=1e40)
    with pytest.raises(ValueError, match="epsilon=5e-324"):
        mcmc.penalty_kernel(model(), mcmc.random_walk(0.1), epsilon=5e-324, delta=1e-5)


def test_float64_data_with_jax_x64_runs_every_kernel():
    # with jax_enable_x64, float64 data (or a float64 prior / proposal) made the energies float64 and TunaMH /
    # DP-Fast MH failed inside JAX ("while_loop body function carry input and carry output must have equal
    # types"); the chains now compute in float32 whatever the user's functions return
    import jax

    kernels = {
        "tuna_mh": lambda m: mcmc.tuna_mh_kernel(m, mcmc.random_walk(0.1)),
        "dp_fast_mh": lambda m: mcmc.dp_fast_mh_kernel(
            m, mcmc.random_walk(0.01), epsilon=0.9, delta=1e-4, batch_cap=20.0
        ),
        "penalty": lambda m: mcmc.penalty_kernel(m, mcmc.random_walk(0.05), epsilon=0.9, delta=1e-4),
        "dp_barker": lambda m: mcmc.dp_barker_kernel(m, mcmc.random_walk(0.05), private=False),
    }
    with jax.enable_x64(True):
        x64 = mcmc.energy_model(
            energy,
            X.astype(np.float64),
            bound_constants=np.abs(X) + 2.0,
            box=(-2.0, 2.0),
            log_prior_fn=lambda th: -0.5 * jnp.sum((th - np.zeros(1)) ** 2),
        )  # float64 prior
        for name, make in kernels.items():
            res = mcmc.run_chain(make(x64), np.zeros(1), 8, rng_key=3)
            # (the draws of jax.random differ under x64, so the chains are not compared value by value)
            assert res.samples.dtype == np.float32 and np.all(np.isfinite(res.samples)), name
            assert np.any(res.nonprivate_info.accepted), name


def unboxed_model(**kw):
    """:func:`model` without its box."""
    args = dict(log_prior_fn=log_prior, bound_constants=np.abs(X) + 2.0)
    args.update(kw)
    return mcmc.energy_model(energy, X, **args)


# mcmc: accounting
@pytest.mark.parametrize(
    "args,exc,word",
    [
        ((0.1, 1e-6, 2.7, 0.5), TypeError, "num_steps"),  # was silently T = 2.7 in the formula
        ((0.1, 1e-6, True, 0.5), TypeError, "num_steps"),
        ((0.1, 1e-6, 0, 0.5), ValueError, "num_steps"),  # was 0.0
        ((-1.0, 1e-6, 10, 0.5), ValueError, "epsilon"),  # was 0.85
        ((float("nan"), 1e-6, 10, 0.5), ValueError, "epsilon"),
        ((0.1, 2.0, 10, 0.5), ValueError, "delta"),  # was "math domain error"
        ((0.1, 1e-6, 10, -1.0), ValueError, "total_epsilon"),
    ],
)
def test_optimal_composition_delta_refuses_bad_arguments(args, exc, word):
    _raises(lambda: optimal_composition_delta(*args), exc, word)


def test_gaussian_chain_epsilon_no_silent_inf_and_checks_unused_delta():
    _raises(lambda: mcmc.gaussian_chain_epsilon(1e-300, 10, 1e-5, "exact"), ValueError, "noise_multiplier")
    _raises(
        lambda: mcmc.gaussian_chain_epsilon(5.0, 10, 1e-5, "pld", per_iteration_delta=7.0),
        ValueError,
        "per_iteration_delta",
    )


# mcmc: model, proposal, kernels, chains
@pytest.mark.parametrize("scale,exc", [(True, TypeError), ("0.5", TypeError), ([], ValueError), (1e300, ValueError)])
def test_random_walk_scale_is_a_real_float32_number(scale, exc):
    _raises(lambda: mcmc.random_walk(scale), exc, "scale")


def test_random_walk_scale_length_must_match_the_position():
    kernel = mcmc.penalty_kernel(unboxed_model(), mcmc.random_walk([0.1, 0.1, 0.1]), epsilon=0.5, delta=1e-5)
    _raises(lambda: mcmc.run_chain(kernel, [0.0, 0.0], 2, rng_key=0), ValueError, "scale")  # was a JAX error


def test_energy_model_refuses_bool_bounds_string_box_and_float32_overflow():
    _raises(lambda: unboxed_model(bound_constants=np.ones(10, bool)), TypeError, "bound_constants")
    _raises(lambda: unboxed_model(box=("-2", "2")), TypeError, "box")
    _raises(lambda: unboxed_model(box=(False, True)), TypeError, "box")
    _raises(lambda: unboxed_model(box=(-1e39, 1.0)), ValueError, "float32")
    assert unboxed_model(box=(-np.inf, 1.0)).lower is not None  # an infinite bound stays allowed


def test_logistic_bound_constants_refuse_nan_features():
    _raises(lambda: mcmc.logistic_bound_constants(np.array([[np.nan, 1.0]])), ValueError, "finite")


def test_unused_privacy_parameters_with_private_false_are_refused():
    m, rw = unboxed_model(), mcmc.random_walk(0.1)
    _raises(
        lambda: mcmc.dp_fast_mh_kernel(m, rw, epsilon=5.0, delta=2.0, batch_cap=5, private=False),
        ValueError,
        "private=False",
        "epsilon",
    )
    _raises(lambda: mcmc.penalty_kernel(m, rw, noise_multiplier=1.0, private=False), ValueError, "noise_multiplier")
    _raises(lambda: mcmc.dp_barker_kernel(m, rw, private=False, normal_variance=5.0), ValueError, "normal_variance")


def test_run_chain_input_types_and_accounting_options():
    m, rw = unboxed_model(box=(-2.0, 2.0)), mcmc.random_walk(0.1)
    pk = mcmc.penalty_kernel(m, rw, epsilon=0.5, delta=1e-5)
    _raises(lambda: mcmc.run_chain(pk, ["0.5"], 2, rng_key=0), TypeError, "real numbers")
    _raises(lambda: mcmc.run_chain(pk, [True], 2, rng_key=0), TypeError, "real numbers")
    tk = mcmc.tuna_mh_kernel(m, rw)
    _raises(lambda: mcmc.run_chain(tk, [0.0], 2, rng_key=0, accountant="bogus"), ValueError, "accountant")
    _raises(lambda: mcmc.chain_privacy(tk, 2, total_delta=5.0), ValueError, "total_delta")
    _raises(lambda: mcmc.chain_privacy("kernel", 2), TypeError, "Kernel")  # was AttributeError
    _raises(lambda: mcmc.diagnostics("result"), TypeError, "ChainResult")  # was AttributeError


def test_dp_fast_mh_default_total_delta_says_why_it_is_invalid():
    fk = mcmc.dp_fast_mh_kernel(unboxed_model(), mcmc.random_walk(0.1), epsilon=0.5, delta=1e-3, batch_cap=5)
    _raises(lambda: mcmc.chain_privacy(fk, 1000), ValueError, "default total_delta", "per-iteration delta")


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


@pytest.mark.parametrize("eps,delta,steps", [(0.1, 1e-3, 7), (0.5, 1e-5, 10), (2.0, 1e-6, 300)])
def test_calibrate_chain_exact_penalty_never_exceeds_its_target(eps, delta, steps):
    # the chain's epsilon (the accountant run_chain uses) was 0.10000000000002274 for a target of 0.1
    per = mcmc.calibrate_chain("penalty", eps, delta, steps, accountant="exact")
    assert mcmc.gaussian_chain_epsilon(per.noise_multiplier, steps, delta, "exact") <= eps
