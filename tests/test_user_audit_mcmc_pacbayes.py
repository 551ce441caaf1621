"""A careful new user's mistakes with dpposterior.mcmc and dpposterior.pacbayes.

Each case was a silent wrong result (a truncated count, a string or bool taken as a number, an
ignored or out-of-range privacy parameter, NaN/inf), an internal traceback (ZeroDivisionError,
OverflowError, AttributeError, a JAX shape error), or a misleading message before it was fixed; the
fix makes it a ValueError/TypeError that names what was wrong and what is allowed. Tiny sizes: the
file runs in seconds.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

from dpposterior import mcmc
from dpposterior import pacbayes as pb
from dpposterior.mcmc import dp_sgld as sg
from dpposterior.pacbayes import entropy_sgld as es

X1 = np.linspace(-1, 1, 10).astype(np.float32)


def _raises(fn, exc, *words):
    with pytest.raises(exc) as info:
        fn()
    for w in words:
        assert w in str(info.value), (w, str(info.value))


def _energy(theta, record):
    return 0.5 * (record - theta[0]) ** 2


def _log_prior(theta):
    return -0.5 * jnp.sum(theta**2)


def _model(**kw):
    args = dict(log_prior_fn=_log_prior, bound_constants=np.abs(X1) + 2.0)
    args.update(kw)
    return mcmc.energy_model(_energy, X1, **args)


# ---------------------------------------------------------------------------------------------
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
def test_optimal_composition_delta_validates(args, exc, word):
    _raises(lambda: mcmc.optimal_composition_delta(*args), exc, word)


def test_barker_rdp_refuses_a_string_order():
    _raises(lambda: mcmc.barker_rdp("3", 100), TypeError, "alpha")  # was float("3")


def test_gaussian_chain_epsilon_no_silent_inf_and_checks_unused_delta():
    _raises(lambda: mcmc.gaussian_chain_epsilon(1e-300, 10, 1e-5, "exact"), ValueError, "noise_multiplier")
    _raises(
        lambda: mcmc.gaussian_chain_epsilon(5.0, 10, 1e-5, "pld", per_iteration_delta=7.0),
        ValueError,
        "per_iteration_delta",
    )


# ---------------------------------------------------------------------------------------------
# mcmc: model, proposal, kernels, chains


@pytest.mark.parametrize("scale,exc", [(True, TypeError), ("0.5", TypeError), ([], ValueError), (1e300, ValueError)])
def test_random_walk_scale_is_a_real_float32_number(scale, exc):
    _raises(lambda: mcmc.random_walk(scale), exc, "scale")


def test_random_walk_scale_length_must_match_the_position():
    kernel = mcmc.penalty_kernel(_model(), mcmc.random_walk([0.1, 0.1, 0.1]), epsilon=0.5, delta=1e-5)
    _raises(lambda: mcmc.run_chain(kernel, [0.0, 0.0], 2, rng_key=0), ValueError, "scale")  # was a JAX error


def test_energy_model_refuses_bool_bounds_string_box_and_float32_overflow():
    _raises(lambda: _model(bound_constants=np.ones(10, bool)), TypeError, "bound_constants")
    _raises(lambda: _model(box=("-2", "2")), TypeError, "box")
    _raises(lambda: _model(box=(False, True)), TypeError, "box")
    _raises(lambda: _model(box=(-1e39, 1.0)), ValueError, "float32")
    assert _model(box=(-np.inf, 1.0)).lower is not None  # an infinite bound stays allowed


def test_logistic_bound_constants_refuse_nan_features():
    _raises(lambda: mcmc.logistic_bound_constants(np.array([[np.nan, 1.0]])), ValueError, "finite")


def test_unused_privacy_parameters_with_private_false_are_refused():
    m, rw = _model(), mcmc.random_walk(0.1)
    _raises(
        lambda: mcmc.dp_fast_mh_kernel(m, rw, epsilon=5.0, delta=2.0, batch_cap=5, private=False),
        ValueError,
        "private=False",
        "epsilon",
    )
    _raises(lambda: mcmc.penalty_kernel(m, rw, noise_multiplier=1.0, private=False), ValueError, "noise_multiplier")
    _raises(lambda: mcmc.dp_barker_kernel(m, rw, private=False, normal_variance=5.0), ValueError, "normal_variance")


def test_run_chain_input_types_and_accounting_options():
    m, rw = _model(box=(-2.0, 2.0)), mcmc.random_walk(0.1)
    pk = mcmc.penalty_kernel(m, rw, epsilon=0.5, delta=1e-5)
    _raises(lambda: mcmc.run_chain(pk, ["0.5"], 2, rng_key=0), TypeError, "real numbers")
    _raises(lambda: mcmc.run_chain(pk, [True], 2, rng_key=0), TypeError, "real numbers")
    tk = mcmc.tuna_mh_kernel(m, rw)
    _raises(lambda: mcmc.run_chain(tk, [0.0], 2, rng_key=0, accountant="bogus"), ValueError, "accountant")
    _raises(lambda: mcmc.chain_privacy(tk, 2, total_delta=5.0), ValueError, "total_delta")
    _raises(lambda: mcmc.chain_privacy("kernel", 2), TypeError, "Kernel")  # was AttributeError
    _raises(lambda: mcmc.diagnostics("result"), TypeError, "ChainResult")  # was AttributeError


def test_dp_fast_mh_default_total_delta_says_why_it_is_invalid():
    fk = mcmc.dp_fast_mh_kernel(_model(), mcmc.random_walk(0.1), epsilon=0.5, delta=1e-3, batch_cap=5)
    _raises(lambda: mcmc.chain_privacy(fk, 1000), ValueError, "default total_delta", "per-iteration delta")


# ---------------------------------------------------------------------------------------------
# mcmc: DP-SGLD

_RNG = np.random.default_rng(0)
_X = _RNG.normal(size=(12, 2)).astype(np.float32)
_Y = (_X[:, 0] > 0).astype(np.float32)
_RUN = dict(num_steps=2, sampling_rate=0.5, clip=1.0, step_size=1e-3, delta=1e-5, noise_multiplier=1.0, rng_key=0)


@pytest.mark.parametrize(
    "data,word",
    [
        ((_X, 2 * _Y - 1), "labels 0 or 1"),  # -1/+1 labels: a silently wrong likelihood
        ((_X, np.full(12, 0.5, np.float32)), "labels 0 or 1"),
        ((_X[:, :1], _Y), "shape"),  # was a JAX dot_general error
        ((_X, _Y, _Y), "pair"),  # was "too many values to unpack"
    ],
)
def test_dp_sgld_builtin_models_check_their_records(data, word):
    _raises(lambda: sg.run(sg.logistic_regression(2), data, **_RUN), ValueError, word)


@pytest.mark.parametrize(
    "kw,word",
    [
        (dict(clip=1e300), "clip"),
        (dict(sampling_rate=1e-300), "sampling_rate"),
        (dict(step_size=1e300), "step_size"),
        (dict(noise_multiplier=1e300), "noise_multiplier"),
    ],
)
def test_dp_sgld_values_outside_float32_are_refused_up_front(kw, word):
    # were a RuntimeWarning and a "chain left the float32 range: lower step_size" error (or an overflow)
    _raises(lambda: sg.run(sg.logistic_regression(2), (_X, _Y), **{**_RUN, **kw}), ValueError, word, "float32")


def test_dp_sgld_initial_position_must_be_numeric():
    _raises(
        lambda: sg.run(sg.logistic_regression(2), (_X, _Y), initial_position=["0", "0"], **_RUN),
        TypeError,
        "initial_position",
    )


def test_dp_sgld_predictive_refuses_nan_wrong_shapes_and_empty_scores():
    lr = sg.logistic_regression(2)
    s = np.zeros((3, 2), np.float32)
    _raises(lambda: sg.posterior_predictive(lr, s, np.full((2, 2), np.nan)), ValueError, "finite")  # was NaN
    _raises(lambda: sg.posterior_predictive(lr, np.full((3, 2), np.nan), _X), ValueError, "finite")
    _raises(lambda: sg.posterior_predictive(lr, np.zeros((3, 3)), _X), ValueError, "samples")
    _raises(lambda: sg.posterior_predictive(lr, s, np.zeros((3, 3))), ValueError, "x")
    _raises(lambda: sg.predictive_scores(lr, s, np.zeros((0, 2)), np.zeros(0)), ValueError, "at least one")


# ---------------------------------------------------------------------------------------------
# pacbayes: bounds


@pytest.mark.parametrize(
    "call",
    [
        lambda: pb.kl(True, 0.5),
        lambda: pb.kl("0.5", 0.5),
        lambda: pb.kl_inv_upper(0.1, True),
        lambda: pb.kl_inv_upper(0.1, None),
    ],
)
def test_kl_refuses_bools_strings_and_none(call):
    _raises(call, TypeError, "real number")


def test_bounds_overflow_is_a_clear_error():
    _raises(lambda: pb.dp_prior_kl_rhs(1.0, 100, 0.05, 1e200), ValueError, "overflows")  # was OverflowError
    _raises(lambda: pb.seeger_kl_rhs(1.0, 10**400, 0.05), ValueError, "m ")  # was OverflowError
    _raises(lambda: pb.local_entropy_gibbs_epsilon(1e308, 4.0, 10.0, 1), ValueError, "overflows")  # was inf


def test_gaussian_kl_inputs():
    _raises(lambda: pb.gaussian_kl([], 1.0, [], 1.0), ValueError, "at least one")  # was 0.0
    _raises(lambda: pb.gaussian_kl([0.0, 0.0], [1.0, 1.0, 1.0], [0.0, 0.0], 1.0), ValueError, "var_q")
    _raises(lambda: pb.gaussian_kl([0.0], True, [0.0], 1.0), TypeError, "var_q")  # was 0.0
    _raises(lambda: pb.gaussian_kl([0.0], 1.0, [0.0], 1e-320), ValueError, "overflows")  # was inf
    # a variance ratio that underflows in float64 is still finite and accurate via the logs
    assert np.isclose(pb.gaussian_kl([0.0], 1e-300, [0.0], 1e300), 0.5 * (600 * np.log(10) - 1), rtol=1e-12)


def test_certify_inputs():
    _raises(
        lambda: pb.certify(np.array([True, False]), 1.0, 100, delta=0.05, delta_mc=0.01), TypeError, "empirical_errors"
    )
    _raises(lambda: pb.certify([0.1], 1.0, 100, delta=0.6, delta_mc=0.6), ValueError, "delta + delta_mc")


def test_sample_gaussian_errors_inputs():
    key = jax.random.key(0)

    def err(w, x, y):
        return jnp.mean((x @ w > 0) != y)

    data = (np.ones((5, 2), np.float32), np.ones(5, np.int32))
    _raises(
        lambda: pb.sample_gaussian_errors(key, np.zeros(2), 1.0, err, data, 3, chunk=0), ValueError, "chunk"
    )  # was ZeroDivisionError
    _raises(lambda: pb.sample_gaussian_errors(key, np.zeros(2), 1.0, err, data, True), TypeError, "n_samples")
    _raises(lambda: pb.sample_gaussian_errors(0, np.zeros(2), 1.0, err, data, 3), TypeError, "key")
    assert pb.sample_gaussian_errors(key, np.zeros(2), 1.0, err, data, np.int64(3)).shape == (3,)
    _raises(
        lambda: pb.certify_gaussian(
            key,
            prior_mean=np.zeros(2),
            prior_var=1.0,
            posterior_mean=np.zeros(2),
            posterior_var=1.0,
            error_fn=err,
            data=(data[0], data[1][:3]),
            delta=0.05,
            delta_mc=0.01,
            n_samples=4,
        ),
        ValueError,
        "records",
    )  # was a JAX error


# ---------------------------------------------------------------------------------------------
# pacbayes: Entropy-SGLD

_P = dict(tau=2.0, gamma=1.0, eta=0.1, eta_inner=0.01, beta=1.0, inner_steps=2, batch_size=4)


@pytest.mark.parametrize(
    "name,value,exc",
    [
        ("alpha", True, TypeError),
        ("inner_steps", True, TypeError),
        ("alpha", "0.5", TypeError),
        ("batch_size", 2.5, TypeError),
    ],
)
def test_entropy_sgld_params_refuse_bools_and_strings(name, value, exc):
    params = es.EntropySGLDParams(**{**_P, name: value})
    _raises(lambda: es.entropy_sgld_privacy(params, 100), exc, name)


def test_entropy_sgld_privacy_and_beta_inputs():
    params = es.EntropySGLDParams(**_P)
    _raises(lambda: es.entropy_sgld_privacy(params, 100, num_steps=2.7), TypeError, "num_steps")  # was 2
    _raises(lambda: es.entropy_sgld_privacy(dict(_P), 100), TypeError, "EntropySGLDParams")
    _raises(lambda: es.beta_for_epsilon(True, 4.0, 10.0, 100), TypeError, "epsilon")  # was 1.25
    _raises(lambda: es.init_mlp(jax.random.key(0), (2, True)), TypeError, "sizes")


@pytest.fixture(scope="module")
def tiny_net():
    w0, unravel = ravel_pytree(es.init_mlp(jax.random.key(0), (2, 3, 2)))
    x = np.random.default_rng(0).normal(size=(8, 2)).astype(np.float32)
    return w0, unravel, x, (x[:, 0] > 0).astype(np.int32)


def test_entropy_sgld_run_checks_data_steps_and_loss_range(tiny_net):
    w0, unravel, x, y = tiny_net
    params, key, state = es.EntropySGLDParams(**_P), jax.random.key(0), es.init(w0)
    loss = es.classifier_loss(es.mlp_apply, unravel)

    def run(**kw):
        args = dict(data=(x, y), params=params, loss_fn=loss)
        args.update(kw)
        return es.run(key, state, args.pop("num_steps", 1), **args)

    _raises(lambda: run(data=(x, y[:3])), ValueError, "first axis")  # JAX clamped the gather: silent
    _raises(lambda: run(data=(np.full_like(x, np.nan), y)), ValueError, "finite")  # was a NaN position
    _raises(lambda: run(data=(x[:0], y[:0])), ValueError, "at least one record")
    _raises(lambda: run(num_steps=True), TypeError, "num_steps")
    _raises(
        lambda: run(loss_fn=es.classifier_loss(es.mlp_apply, unravel, loss_max=8.0)), ValueError, "loss_max"
    )  # epsilon would be under-reported
    _raises(lambda: es.run(key, w0, 1, data=(x, y), params=params, loss_fn=loss), TypeError, "state")
    _raises(lambda: es.classifier_loss(es.mlp_apply, unravel, loss_max=-1.0), ValueError, "loss_max")


def test_entropy_sgld_step_takes_numpy_data(tiny_net):
    # was a TracerArrayConversionError: numpy data indexed by a traced minibatch
    w0, unravel, x, y = tiny_net
    sampler = es.kernel((x, y), es.EntropySGLDParams(**_P), es.classifier_loss(es.mlp_apply, unravel))
    new, _ = sampler.step(jax.random.key(0), sampler.init(w0))
    assert new.position.shape == w0.shape and bool(jnp.all(jnp.isfinite(new.position)))
