"""Entropy-SGLD's parameters, data, step counts and loss range are checked by name, and a step takes NumPy data."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

from dpposterior.pacbayes import entropy_sgld as es
from input_checks import raises_with as _raises

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


def test_entropy_sgld_privacy_and_beta_refuse_bad_arguments():
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
