"""DP-SGLD checks its records, settings, models and positions before the run, and accounts with the
accountant the user chose.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from dpposterior.mcmc import dp_sgld as sg
from input_checks import raises_with as _raises

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
