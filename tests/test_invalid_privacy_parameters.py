"""Every public function that takes a privacy parameter (epsilon, delta, sampling rate, steps, noise
multiplier, clip) refuses a bad one with a ValueError or TypeError that names it and, for a number, the
allowed range. Property-based: the arguments are validated before any JAX program is compiled.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from input_checks import FAST, raises_clear
from public_calls import CALLS

# strategies
NOT_A_NUMBER = st.one_of(
    st.booleans(),
    st.text(max_size=3),
    st.complex_numbers(allow_nan=False),
    st.none(),
    st.lists(st.floats(0.1, 1.0), min_size=1, max_size=2),
    st.just(np.bool_(True)),
    st.just(np.array([0.5])),
    st.just({"x": 1.0}),
)
NON_FINITE = st.sampled_from([math.nan, math.inf, -math.inf])


def bad_epsilon():
    return st.one_of(NOT_A_NUMBER, NON_FINITE, st.floats(max_value=0.0, allow_nan=False))


def bad_delta():
    return st.one_of(
        NOT_A_NUMBER, NON_FINITE, st.floats(max_value=0.0, allow_nan=False), st.floats(min_value=1.0, allow_nan=False)
    )


def bad_sampling_rate():
    return st.one_of(
        NOT_A_NUMBER,
        NON_FINITE,
        st.floats(max_value=0.0, allow_nan=False),
        st.floats(min_value=1.0, exclude_min=True, allow_nan=False),
    )


def bad_steps():
    return st.one_of(
        NOT_A_NUMBER, NON_FINITE, st.integers(max_value=0), st.floats(allow_nan=False, allow_infinity=False)
    )


# which functions take which privacy argument (dpsgd takes a noise multiplier, not an epsilon)
TAKES = {
    "epsilon": [
        "calibrate_noise_multiplier",
        "gaussian_sigma",
        "analytic_gaussian_sigma",
        "dpvi",
        "dpvim",
        "release_sufficient_statistics",
        "release_regression_statistics",
    ],
    "delta": [
        "calibrate_noise_multiplier",
        "dpsgd_epsilon",
        "gaussian_sigma",
        "analytic_gaussian_sigma",
        "dpvi",
        "dpvim",
        "dpsgd",
    ],
    "sampling_rate": ["calibrate_noise_multiplier", "dpsgd_epsilon", "dpvi", "dpvim", "dpsgd"],
    "num_steps": ["calibrate_noise_multiplier", "dpsgd_epsilon", "dpvi", "dpvim", "dpsgd"],
}


@pytest.mark.parametrize("fn", TAKES["epsilon"])
@FAST
@given(value=bad_epsilon())
def test_invalid_epsilon_is_refused_by_name(fn, value):
    raises_clear(lambda: CALLS[fn](epsilon=value), "epsilon")


@pytest.mark.parametrize("fn", TAKES["delta"])
@FAST
@given(value=bad_delta())
def test_invalid_delta_is_refused_by_name(fn, value):
    msg = raises_clear(lambda: CALLS[fn](delta=value), "delta")
    if isinstance(value, float) and not isinstance(value, bool):
        assert "(0, 1)" in msg  # the allowed range is stated


@pytest.mark.parametrize("fn", TAKES["sampling_rate"])
@FAST
@given(value=bad_sampling_rate())
def test_invalid_sampling_rate_is_refused_by_name(fn, value):
    msg = raises_clear(lambda: CALLS[fn](sampling_rate=value), "sampling_rate")
    if isinstance(value, float) and not isinstance(value, bool):
        assert "(0, 1]" in msg


@pytest.mark.parametrize("fn", TAKES["num_steps"])
@FAST
@given(value=bad_steps())
def test_invalid_num_steps_is_refused_by_name(fn, value):
    raises_clear(lambda: CALLS[fn](num_steps=value), "num_steps")


@FAST
@given(value=st.one_of(NOT_A_NUMBER, NON_FINITE, st.floats(max_value=0.0, exclude_max=True, allow_nan=False)))
def test_invalid_noise_multiplier_and_clip_are_refused_by_name(value):
    raises_clear(lambda: CALLS["dpsgd"](noise_multiplier=value), "noise_multiplier")
    raises_clear(lambda: CALLS["dpsgd_epsilon"](noise_multiplier=value), "noise_multiplier")
    raises_clear(lambda: CALLS["dpsgd"](clip=value), "clip")
    raises_clear(lambda: CALLS["dpvi"](clip=value), "clip")
