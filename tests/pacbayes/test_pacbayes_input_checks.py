"""The PAC-Bayes bounds, KL divergences and certificates refuse bools, strings and values that overflow, by name."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpposterior import pacbayes as pb
from dpposterior.pacbayes.bounds import dp_prior_kl_rhs, seeger_kl_rhs
from dpposterior.pacbayes.certificate import sample_gaussian_errors
from input_checks import raises_with as _raises


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
    _raises(lambda: dp_prior_kl_rhs(1.0, 100, 0.05, 1e200), ValueError, "overflows")  # was OverflowError
    _raises(lambda: seeger_kl_rhs(1.0, 10**400, 0.05), ValueError, "m ")  # was OverflowError
    _raises(lambda: pb.local_entropy_gibbs_epsilon(1e308, 4.0, 10.0, 1), ValueError, "overflows")  # was inf


def test_gaussian_kl_checks_its_inputs_and_stays_finite():
    _raises(lambda: pb.gaussian_kl([], 1.0, [], 1.0), ValueError, "at least one")  # was 0.0
    _raises(lambda: pb.gaussian_kl([0.0, 0.0], [1.0, 1.0, 1.0], [0.0, 0.0], 1.0), ValueError, "var_q")
    _raises(lambda: pb.gaussian_kl([0.0], True, [0.0], 1.0), TypeError, "var_q")  # was 0.0
    _raises(lambda: pb.gaussian_kl([0.0], 1.0, [0.0], 1e-320), ValueError, "overflows")  # was inf
    # a variance ratio that underflows in float64 is still finite and accurate via the logs
    assert np.isclose(pb.gaussian_kl([0.0], 1e-300, [0.0], 1e300), 0.5 * (600 * np.log(10) - 1), rtol=1e-12)


def test_certify_refuses_bool_errors_and_too_large_deltas():
    _raises(
        lambda: pb.certify(np.array([True, False]), 1.0, 100, delta=0.05, delta_mc=0.01), TypeError, "empirical_errors"
    )
    _raises(lambda: pb.certify([0.1], 1.0, 100, delta=0.6, delta_mc=0.6), ValueError, "delta + delta_mc")


def test_sample_gaussian_errors_checks_chunk_count_key_and_records():
    key = jax.random.key(0)

    def err(w, x, y):
        return jnp.mean((x @ w > 0) != y)

    data = (np.ones((5, 2), np.float32), np.ones(5, np.int32))
    _raises(
        lambda: sample_gaussian_errors(key, np.zeros(2), 1.0, err, data, 3, chunk=0), ValueError, "chunk"
    )  # was ZeroDivisionError
    _raises(lambda: sample_gaussian_errors(key, np.zeros(2), 1.0, err, data, True), TypeError, "n_samples")
    _raises(lambda: sample_gaussian_errors(0, np.zeros(2), 1.0, err, data, 3), TypeError, "key")
    assert sample_gaussian_errors(key, np.zeros(2), 1.0, err, data, np.int64(3)).shape == (3,)
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
