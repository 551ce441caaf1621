"""``dpsgd``, ``dpvi`` and ``dpvim`` refuse records they cannot release (NaN, inf, values beyond float32 or
int32, wrong types, shapes and lengths) and traces too large for the machine, before any compilation,
without quoting a value of the data in the message.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import dpposterior as dpp
from dpposterior.baselines.expfam_release import release_sufficient_statistics
from dpposterior.dpsgd import dpsgd
from dpposterior.models import logistic_regression
from dpposterior.vi._dpvim import dpvim
from input_checks import FAST, finishes_within, raises_clear
from public_calls import CALLS, DPSGD_KW, VI_KW, X20, Y20, dot_loss, xy

# hostile data: dpsgd, dpvi, dpvim (validated before any compilation)
DATA_FNS = {
    "dpsgd": lambda X, y: dpsgd(dot_loss, np.zeros(2, np.float32), (X, y), **DPSGD_KW),
    "dpvi": lambda X, y: dpp.dpvi(logistic_regression, X, y, **VI_KW),
    "dpvim": lambda X, y: dpvim(logistic_regression, X, y, **VI_KW),
}


@pytest.mark.parametrize("fn", list(DATA_FNS))
@FAST
@given(
    n=st.integers(1, 30),
    bad=st.sampled_from([math.nan, math.inf, -math.inf, 1e39, -1e300]),
    where=st.integers(0, 10**6),
    dtype=st.sampled_from([np.float32, np.float64]),
)
def test_non_finite_or_float32_overflowing_data_is_refused(fn, n, bad, where, dtype):
    X, y = xy(n)
    X = X.astype(np.float64)
    X.flat[where % X.size] = bad
    if dtype is np.float32:
        with np.errstate(over="ignore"):
            X = X.astype(np.float32)  # 1e39 becomes inf here: the caller's own cast
    msg = raises_clear(lambda: DATA_FNS[fn](X, y), "data")
    assert "NaN" in msg or "float32" in msg


@pytest.mark.parametrize("fn", list(DATA_FNS))
@pytest.mark.parametrize(
    "case", ["strings", "object", "complex", "datetime", "empty", "scalar", "lengths", "ragged", "int64 overflow"]
)
def test_wrong_data_types_shapes_and_lengths(fn, case):
    X, y = xy()
    if case == "strings":
        X = X.astype(str)
    elif case == "object":
        X = X.astype(object)
    elif case == "complex":
        X = X.astype(complex)
    elif case == "datetime":
        X = np.zeros(X.shape, "datetime64[s]")
    elif case == "empty":
        X, y = X[:0], y[:0]
    elif case == "scalar":
        X = np.float32(1.0)
    elif case == "lengths":
        y = y[:-1]
    elif case == "ragged":
        X = [[1.0, 2.0], [3.0]] * 10
    elif case == "int64 overflow":
        y = y.astype(np.int64) + 2**40
    raises_clear(lambda: DATA_FNS[fn](X, y), "data", "records")


# a num_steps whose released trace cannot fit in memory: the accountant searched for minutes (PLD at
# 1e8 steps) and then the run failed to allocate, or took the machine's memory
@pytest.mark.parametrize("fn", ["dpvi", "dpvim", "dpsgd", "dp_sgld"])
def test_a_trace_too_large_for_the_machine_is_refused_before_any_work(fn):
    from dpposterior.mcmc import dp_sgld

    calls = {
        **CALLS,
        "dp_sgld": lambda **k: dp_sgld.run(
            dp_sgld.logistic_regression(2),
            (X20, Y20),
            sampling_rate=0.5,
            clip=1.0,
            step_size=1e-3,
            delta=1e-5,
            noise_multiplier=1.0,
            rng_key=0,
            **k,
        ),
    }
    with (
        finishes_within(30),
        pytest.raises(
            ValueError,
            match=r"num_steps=1000000000000 is too large for this machine: "
            r"the (trace|chain) .* use at most \d+ steps",
        ),
    ):
        calls[fn](num_steps=10**12)
    if fn == "dpvi":  # likewise the K counts of a Dirichlet-Categorical release (1e9 were allocated)
        with (
            finishes_within(10),
            pytest.raises(
                ValueError,
                match=r"num_categories=1000000000000 is too large .* "
                r"use at most \d+ categories",
            ),
        ):
            release_sufficient_statistics(
                "dirichlet-categorical", np.array([0, 1]), epsilon=1.0, num_categories=10**12, rng_key=0
            )


# an error about the records quoted a value of the data ("got 1.234e+39", "got values in [lo, hi]"):
# not a release, but a number from the private data on its way to a log; now the values are counted
@pytest.mark.parametrize("fn", ["dpvi", "dpsgd"])
def test_errors_about_the_records_do_not_quote_their_values(fn):
    x = np.asarray(X20, np.float64)
    x[3, 1] = 1.234e39
    call = {
        "dpvi": lambda: dpp.dpvi(logistic_regression, x, Y20, **VI_KW),
        "dpsgd": lambda: dpsgd(dot_loss, np.zeros(2, np.float32), x, **DPSGD_KW),
    }[fn]
    with pytest.raises(ValueError, match=r"float32 range .* 1 value\(s\) lie beyond it") as e:
        call()
    assert "1.234e+39" not in str(e.value) and "e+39" not in str(e.value)
    big = np.asarray(Y20, np.int64) + 2**40
    with pytest.raises(ValueError, match=r"32-bit integer range .* 20 value\(s\) lie outside it") as e:
        dpp.dpvi(logistic_regression, X20, big, **VI_KW) if fn == "dpvi" else dpsgd(
            dot_loss, np.zeros(2, np.float32), np.c_[X20, big].astype(np.int64), **DPSGD_KW
        )
    assert str(2**40) not in str(e.value)
    # a setting (not data) is still quoted, so the user sees what was wrong
    with pytest.raises(ValueError, match=r"got np.float64\(1e\+300\)"):
        dpsgd(dot_loss, np.zeros(2, np.float32), X20, **{**DPSGD_KW, "learning_rate": np.float64(1e300)})
