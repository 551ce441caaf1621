"""Hostile and bad input at the public API (issue 6).

Every bad input must give a ValueError or TypeError whose message names the argument (and, for a
number, the allowed range), or a documented result; never an internal traceback from JAX or NumPy,
a hang, or a silent NaN/inf. Property-based (hypothesis) where the input space is large; the few
cases that compile a JAX program are tiny (N <= 50, T <= 20). docs/reliability.md lists the cases.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import signal

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import dpposterior as dpp
from dpposterior import privacy
from dpposterior.baselines.expfam_release import release_sufficient_statistics
from dpposterior.baselines.regression_release import release_regression_statistics
from dpposterior.dpsgd import dpsgd
from dpposterior.dpsgd.core import clipped_sum
from dpposterior.models import logistic_regression
from dpposterior.privacy.spent import PrivacySpent
from dpposterior.validation import calibration_curve, tarp_coverage
from dpposterior.vi import DPVITrace, ParamLayout
from dpposterior.vi.dpvim import dpvim
from dpposterior._io import array_digest as _digest

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FEW = settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CLEAR = (ValueError, TypeError)


@contextlib.contextmanager
def finishes_within(seconds: int):
    """Fails (instead of hanging) if the block runs longer than ``seconds``."""

    def on_alarm(signum, frame):
        raise AssertionError(f"did not finish within {seconds} s (a hang)")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def raises_clear(fn, *names):
    """Calls fn; asserts a ValueError/TypeError whose message names one of ``names``."""
    with pytest.raises(CLEAR) as info:
        fn()
    msg = str(info.value)
    assert any(n in msg for n in names), f"message does not name {names}: {msg}"
    return msg


# ---------------------------------------------------------------------------------------------
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


# ---------------------------------------------------------------------------------------------
# the functions, with everything but one argument valid (no JAX program is compiled: the
# arguments are validated before any work)


def _xy(n=20, p=2):
    rng = np.random.default_rng(0)
    return rng.normal(size=(n, p)).astype(np.float32), (rng.random(n) < 0.5).astype(np.int32)


def _linear(p, x):
    return jnp.dot(p, x)


X20, Y20 = _xy()
DPSGD_KW = dict(
    noise_multiplier=1.0, clip=1.0, sampling_rate=0.5, num_steps=5, learning_rate=0.1, delta=1e-5, rng_key=0
)
VI_KW = dict(epsilon=1.0, delta=1e-5, num_steps=5, sampling_rate=0.5, clip=1.0, rng_key=0)

CALLS = {
    "calibrate_noise_multiplier": lambda **k: privacy.calibrate_noise_multiplier(
        **{**dict(epsilon=1.0, delta=1e-5, sampling_rate=0.1, num_steps=10), **k}
    ),
    "dpsgd_epsilon": lambda **k: privacy.dpsgd_epsilon(
        **{**dict(noise_multiplier=1.0, delta=1e-5, sampling_rate=0.1, num_steps=10), **k}
    ),
    "gaussian_sigma": lambda **k: privacy.gaussian_sigma(**{**dict(epsilon=0.5, delta=1e-5), **k}),
    "analytic_gaussian_sigma": lambda **k: privacy.analytic_gaussian_sigma(**{**dict(epsilon=1.0, delta=1e-5), **k}),
    "dpvi": lambda **k: dpp.dpvi(logistic_regression, X20, Y20, **{**VI_KW, **k}),
    "dpvim": lambda **k: dpvim(logistic_regression, X20, Y20, **{**VI_KW, **k}),
    "dpsgd": lambda **k: dpsgd(_linear, np.zeros(2, np.float32), X20, **{**DPSGD_KW, **k}),
    "release_sufficient_statistics": lambda **k: release_sufficient_statistics(
        "beta-bernoulli", np.array([0, 1, 1]), **{**dict(epsilon=1.0, rng_key=0), **k}
    ),
    "release_regression_statistics": lambda **k: release_regression_statistics(
        X20, Y20.astype(np.float32), **{**dict(epsilon=1.0, x_bound=2.0, y_bound=1.0, rng_key=0), **k}
    ),
}
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


# ---------------------------------------------------------------------------------------------
# valid but extreme privacy parameters: a finite result or a clear error, promptly

TINY = st.floats(min_value=5e-324, max_value=1e-200)
POSITIVE = st.one_of(TINY, st.floats(min_value=1e-200, max_value=1e300), st.sampled_from([5e-324, 1e300]))
OPEN_UNIT = st.one_of(
    st.floats(min_value=5e-324, max_value=1.0, exclude_max=True), st.sampled_from([5e-324, 1e-300, 1 - 1e-16])
)


@FAST
@given(epsilon=POSITIVE, delta=OPEN_UNIT, sensitivity=POSITIVE)
def test_gaussian_calibration_is_finite_or_a_clear_error(epsilon, delta, sensitivity):
    for fn in (privacy.analytic_gaussian_sigma, privacy.gaussian_sigma):
        if fn is privacy.gaussian_sigma and epsilon >= 1:
            continue
        with finishes_within(10):
            try:
                sigma = fn(epsilon, delta, sensitivity)
            except ValueError as e:
                assert "epsilon" in str(e) and "delta" in str(e)
            else:
                assert math.isfinite(sigma) and sigma > 0


@pytest.mark.parametrize(
    "args,accountant",
    [
        ((1.0, 1e-15, 0.1, 10), "pld"),  # delta below PLD's truncated tail mass: was 80 s of refinement, then inf
        ((1.0, 5e-324, 0.1, 10), "pld"),
        ((1e-5, 1e-5, 0.1, 10), "pld"),  # was a MemoryError from dp-accounting (a 600 GB grid)
        ((1.0, 1e-5, 5e-324, 10), "pld"),  # was dp-accounting's "a must be greater than b"
    ],
)
def test_accountant_limits_are_clear_errors(args, accountant):
    with finishes_within(20):
        msg = raises_clear(lambda: privacy.dpsgd_epsilon(*args, accountant=accountant), "delta", "noise_multiplier")
    assert "accountant" in msg


@FEW
@given(
    sigma=st.floats(0.3, 1e6),
    delta=st.floats(1e-12, 0.5),
    q=st.one_of(st.floats(1e-300, 1.0), st.just(1.0)),
    steps=st.integers(1, 200),
)
def test_dpsgd_epsilon_is_finite_non_negative_or_a_clear_error(sigma, delta, q, steps):
    with finishes_within(30):
        try:
            eps = privacy.dpsgd_epsilon(sigma, delta, q, steps)
        except ValueError as e:
            assert "accountant" in str(e)
        else:
            assert math.isfinite(eps) and eps >= 0


def test_rdp_accountant_handles_tiny_delta_and_huge_step_counts():
    # documented way out of the PLD limits
    assert math.isfinite(privacy.dpsgd_epsilon(1.0, 1e-300, 0.1, 10, accountant="rdp"))
    assert math.isfinite(privacy.dpsgd_epsilon(1.0, 1e-5, 0.1, 10**12, accountant="rdp"))


# ---------------------------------------------------------------------------------------------
# hostile data: dpsgd, dpvi, dpvim (validated before any compilation)

DATA_FNS = {
    "dpsgd": lambda X, y: dpsgd(_linear, np.zeros(2, np.float32), (X, y), **DPSGD_KW),
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
    X, y = _xy(n)
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
    X, y = _xy()
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


# ---------------------------------------------------------------------------------------------
# dpsgd: other hostile arguments (validated before compilation) ...


@pytest.mark.parametrize(
    "kw,names",
    [
        (dict(params=np.full(2, 1e300)), "params"),  # was: inf parameters after float32 cast
        (dict(params=np.zeros(2, complex)), "params"),
        (dict(params="ab"), "params"),
        (dict(params=np.array([0.0, np.nan])), "params"),
        (dict(learning_rate=1e300), "learning_rate"),  # was: a NaN trace
        (dict(learning_rate=0.1 + 0j), "learning_rate"),
        (dict(learning_rate=np.array([0.1, np.nan])), "learning_rate"),
        (dict(beta=1e-300), "beta"),  # was: beta -> 0 in float32, a NaN trace
        (dict(beta=1e300), "beta"),
        (dict(beta=True), "beta"),
        (dict(clip=1e300), "clip"),  # was: a NaN trace
        (dict(noise_multiplier=1e30, clip=1e30), "noise_multiplier * clip"),
        (dict(capacity=10**12), "capacity"),  # was: a 32 TB allocation attempt
        (dict(capacity=True), "capacity"),
        (dict(rng_key=2**70), "rng_key"),  # was: OverflowError inside JAX
        (dict(rng_key=2**40), "rng_key"),  # was: silently the same key as 2**40 mod 2**32
        (dict(rng_key=-1), "rng_key"),  # was: silently the same key as 2**32 - 1
        (dict(rng_key="0"), "rng_key"),
        (dict(data=np.ma.masked_array(X20, mask=X20 > 1)), "masked"),  # was: the values under the mask used
        (dict(rng_key=1.5), "rng_key"),
        (dict(sampling="poisson"), "sampling"),
        (dict(accountant="gdp"), "accountant"),
        (dict(progress="yes"), "progress"),
        (dict(loss_needs_key=1), "loss_needs_key"),
    ],
)
def test_dpsgd_hostile_arguments(kw, names):
    kw = dict(kw)
    params = kw.pop("params", np.zeros(2, np.float32))
    data = kw.pop("data", X20)
    raises_clear(lambda: dpsgd(_linear, params, data, **{**DPSGD_KW, **kw}), names)


@pytest.mark.parametrize(
    "loss,names",
    [
        (lambda p, x: p - x, "scalar"),
        (lambda p, x: "x", "loss"),
        (lambda p, x: jnp.sum(p[:3] @ x[:3].T @ jnp.ones((5, 5))), "loss"),  # fails on these shapes
        (lambda p, x: 1 / 0, "ZeroDivisionError"),
        (lambda p, x: jnp.int32(1), "floating-point"),
        ("loss", "callable"),
    ],
)
def test_dpsgd_bad_losses_are_reported_before_the_run(loss, names):
    raises_clear(lambda: dpsgd(loss, np.zeros(2, np.float32), X20, **DPSGD_KW), names)


# ... and the few inputs that do run (tiny): documented results, never NaN


def _quadratic(p, x):
    return 0.5 * jnp.sum((p - x) ** 2)


def test_dpsgd_one_record_and_huge_float32_values_give_a_finite_trace():
    one = dpsgd(_quadratic, np.zeros(2, np.float32), X20[:1], **DPSGD_KW)
    assert one.num_records == 1 and np.isfinite(one.grads).all()
    # Values near the float32 limit: each gradient's squared norm overflows, so (documented) the
    # gradient is dropped (zero), and only the noise moves the parameters.
    huge = dpsgd(_quadratic, np.zeros(2, np.float32), X20 * np.float32(1e30), **DPSGD_KW)
    assert np.isfinite(huge.grads).all() and np.isfinite(huge.final_params).all()
    assert np.abs(huge.final_params).max() < 10


def test_dpsgd_that_overflows_is_an_error_not_a_nan_trace():
    with pytest.raises(ValueError, match="overflowed float32.*learning_rate"):
        dpsgd(_quadratic, np.zeros(2, np.float32), X20, **{**DPSGD_KW, "learning_rate": 3e38, "num_steps": 20})


# ---------------------------------------------------------------------------------------------
# non-finite per-example gradients: dropped (zero), and privacy holds for that rule


def _hostile_loss(p, r):
    # gradient x for a normal record (r[2] = 0); NaN when r[2] < 0 (sqrt of a negative number);
    # a gradient whose squared norm overflows float32 when r[2] is huge (1e20 * ones).
    x, z = r[:2], r[2]
    return jnp.dot(p, x) + jnp.sqrt(z) * jnp.sum(p)


def _released_sum(data, *, noise=0.0, clip=1.0):
    """grads[0] of one step with q = 1 and learning rate 0: the released (noisy) clipped sum."""
    tr = dpsgd(
        _hostile_loss,
        np.zeros(2, np.float32),
        data,
        noise_multiplier=noise,
        clip=clip,
        sampling_rate=1.0,
        num_steps=1,
        learning_rate=0.0,
        delta=1e-5,
        rng_key=3,
    )
    return tr.grads[0]


def test_records_with_non_finite_gradients_contribute_exactly_zero():
    rng = np.random.default_rng(1)
    normal = np.column_stack([rng.normal(size=(12, 2)), np.zeros(12)]).astype(np.float32)
    nan_record = np.array([[0.3, -0.2, -1.0]], np.float32)  # NaN gradient
    overflow_record = np.array([[0.3, -0.2, 3e38]], np.float32)  # finite gradient ~1.7e19, squared norm overflows
    base = _released_sum(normal)
    for hostile in (nan_record, overflow_record):
        with_it = _released_sum(np.concatenate([normal[:5], hostile, normal[5:]]))
        np.testing.assert_allclose(with_it, base, rtol=1e-6, atol=1e-6)
        # with noise and the same key the whole release is the same distribution: the same draw here
        np.testing.assert_allclose(
            _released_sum(np.concatenate([normal, hostile]), noise=2.0),
            _released_sum(normal, noise=2.0),
            rtol=1e-6,
            atol=1e-6,
        )
    # power: a finite large record is not dropped, it is clipped to norm C (and moves the sum by <= C)
    big = _released_sum(np.concatenate([normal, np.array([[50.0, 0.0, 0.0]], np.float32)]))
    assert 0.5 < np.linalg.norm(big - base) <= 1.0 + 1e-5


ROW = st.one_of(st.floats(-1e3, 1e3), st.sampled_from([math.nan, math.inf, -math.inf, 3e38, -3e38, 1e20, 1e-45]))
_clipped = jax.jit(clipped_sum, static_argnums=3)


@FAST
@given(g=hnp.arrays(np.float32, (6, 3), elements=ROW), drop=st.integers(0, 5), clip=st.sampled_from([0.1, 1.0, 7.0]))
def test_clipped_sum_sensitivity_is_at_most_clip_for_any_gradients(g, drop, clip):
    """Add/remove-one: removing any record (whatever its gradient) moves the sum by at most C."""
    mask = np.ones(6, bool)
    without = mask.copy()
    without[drop] = False
    for params_major, a in ((False, g), (True, g.T.copy())):
        full = np.asarray(_clipped(jnp.asarray(a), jnp.asarray(mask), jnp.float32(clip), params_major))
        less = np.asarray(_clipped(jnp.asarray(a), jnp.asarray(without), jnp.float32(clip), params_major))
        assert np.isfinite(full).all() and np.isfinite(less).all()
        assert np.linalg.norm(full.astype(np.float64) - less) <= clip * (1 + 1e-5)
        with np.errstate(over="ignore", invalid="ignore"):
            dropped_is_non_finite = not np.isfinite(np.sum(np.square(g[drop])))
        if dropped_is_non_finite:
            np.testing.assert_array_equal(full, less)  # a non-finite gradient contributes exactly 0


@pytest.mark.parametrize("fn", ["dpvi", "dpvim"])
@pytest.mark.parametrize(
    "kw,names",
    [
        (dict(clip=1e300), "clip"),  # was: a NaN trace (dpvim) / inf noise
        (dict(init_scale=1e300), "init_scale"),  # was: a NaN trace
        (dict(init_scale=1e-300), "init_scale"),  # was: rho = -inf, a NaN trace
        (dict(learning_rate="0.1"), "learning_rate"),  # was: silently 0.1
        (dict(learning_rate=True), "learning_rate"),  # was: silently 1.0
        (dict(learning_rate=[[1.0], [1.0, 2.0]]), "learning_rate"),
        (dict(learning_rate=1e300), "learning_rate"),
        (dict(dataset_size=True), "dataset_size"),
        (dict(dataset_size=0), "dataset_size"),
        (dict(model_name=3), "model_name"),
        (dict(accountant=None), "accountant"),
        (dict(lr_scale=-1.0), "lr_scale"),
    ],
)
def test_dpvi_and_dpvim_hostile_settings(fn, kw, names):
    raises_clear(lambda: CALLS[fn](**kw), names)


@pytest.mark.parametrize(
    "kw",
    [
        dict(beta=True),
        dict(beta="1"),
        dict(beta=1 + 1j),
        dict(beta=np.ones(5)),
        dict(beta=1e-300),
        dict(num_mc=0),
        dict(num_mc=2.0),
    ],
)
def test_dpvi_hostile_beta_and_num_mc(kw):
    raises_clear(lambda: CALLS["dpvi"](**kw), *kw)


def test_dpvim_run_that_overflows_is_an_error_not_a_nan_trace():
    with pytest.raises(ValueError, match="overflowed float32.*learning_rate"):
        CALLS["dpvim"](learning_rate=1e30)


# ---------------------------------------------------------------------------------------------
# dpvi on a model whose per-record gradient is NaN for some records (compiles: N = 20, T = 10)


def sqrt_model(x, y):
    w = numpyro.sample("w", dist.Normal(0.0, 1.0))
    with numpyro.plate("records", x.shape[0]):
        numpyro.sample("y", dist.Normal(w * jnp.sqrt(x), 1.0), obs=y)  # NaN likelihood for x < 0


def test_dpvi_with_nan_record_gradients_is_finite_and_ignores_them():
    rng = np.random.default_rng(2)
    x = rng.random(20).astype(np.float32) + 0.5
    y = (0.7 * np.sqrt(x) + rng.normal(size=20)).astype(np.float32)
    kw = dict(epsilon=2.0, delta=1e-5, num_steps=10, sampling_rate=1.0, clip=2.0, rng_key=5, dataset_size=20, num_mc=2)
    clean = dpp.dpvi(sqrt_model, x[:18], y[:18], **kw)
    hostile_x = x.copy()
    hostile_x[18:] = -1.0  # two records whose per-record ELBO gradient is NaN
    hostile = dpp.dpvi(sqrt_model, hostile_x, y, **kw)
    assert np.isfinite(hostile.phi).all() and np.isfinite(hostile.grads).all()
    np.testing.assert_allclose(hostile.phi, clean.phi, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------------------------
# noise_aware_posterior: hostile releases (validated before any solver runs)


def _spent(T):
    # the record of sigma 2, q 0.1, T steps at delta 1e-5 (DPVITrace.load checks that it describes the trace)
    return PrivacySpent(
        epsilon=privacy.dpsgd_epsilon(2.0, 1e-5, 0.1, T),
        delta=1e-5,
        neighbouring="add_remove",
        accountant="pld",
        noise_multiplier=2.0,
        mechanism="poisson_subsampled_gaussian",
        sampling_rate=0.1,
        num_steps=T,
        seeded_by="user",
    )


def _trace(T=40, phi=None, **kw):
    layout = ParamLayout.flat(2)
    rng = np.random.default_rng(0)
    fields = dict(
        phi=rng.normal(size=(T, 4)) if phi is None else phi,
        grads=2.0 * rng.normal(size=(T, 4)),
        final_phi=rng.normal(size=4),
        beta=np.ones(4),
        learning_rate=0.01,
        clip=1.0,
        noise_multiplier=2.0,
        sampling_rate=0.1,
        num_steps=T,
        dataset_size=100,
        num_mc=10,
        layout=layout,
        privacy=_spent(T),
        model_name="m",
    )
    fields.update(kw)
    return DPVITrace(**fields)


@pytest.mark.parametrize(
    "make,kw,names",
    [
        (lambda: {"phi": np.zeros((10, 4))}, {}, "trace"),
        (lambda: None, {}, "trace"),
        (lambda: _trace(), dict(method="mcmc"), "method"),
        (lambda: _trace(), dict(burn_in=1.0), "burn_in"),
        (lambda: _trace(), dict(burn_in=math.nan), "burn_in"),
        (lambda: _trace(), dict(burn_in=True), "burn_in"),
        (lambda: _trace(), dict(burn_in="0.2"), "burn_in"),
        (lambda: _trace(), dict(bogus_option=1), "bogus_option"),
        (lambda: _trace(phi=np.where(np.eye(40, 4) > 0, np.nan, 1.0)), {}, "phi"),
        (lambda: _trace(grads=np.full((40, 4), np.inf)), {}, "grads"),
        (lambda: _trace(T=2), {}, "too short"),
        (lambda: _trace(noise_multiplier=0.0), {}, "noise_multiplier"),
        (lambda: _trace(clip=math.nan), {}, "clip"),
        (lambda: _trace(sampling_rate=1.5), {}, "sampling_rate"),
        (lambda: _trace(beta=-np.ones(4)), {}, "beta"),
        (lambda: _trace(phi=np.ones((40, 4))), {}, "do not move"),
    ],
)
def test_noise_aware_posterior_refuses_hostile_releases(make, kw, names):
    raises_clear(lambda: dpp.noise_aware_posterior(make(), **kw), names)


# ---------------------------------------------------------------------------------------------
# baselines' releases

EXPFAM_X = st.one_of(
    hnp.arrays(np.float64, st.integers(1, 8), elements=st.sampled_from([0.0, 1.0, math.nan, math.inf, 0.5, -1.0])),
    hnp.arrays(st.sampled_from([np.complex128, np.dtype("U2"), np.dtype("O")]), st.integers(1, 4)),
    hnp.arrays(np.float64, st.tuples(st.integers(0, 3), st.integers(0, 3))),
    st.just(np.zeros(0)),
    st.just([[1.0], [0.0, 1.0]]),
    st.just(1.0),
)


@FAST
@given(x=EXPFAM_X, family=st.sampled_from(["beta-bernoulli", "dirichlet-categorical", "gamma-exponential"]))
def test_release_sufficient_statistics_bad_records(x, family):
    bounds = (0.0, 5.0) if family == "gamma-exponential" else None
    call = lambda: release_sufficient_statistics(family, x, epsilon=1.0, bounds=bounds, rng_key=0)  # noqa: E731
    arr = np.asarray(x, dtype=object)
    try:
        release = call()
    except CLEAR as e:
        assert "x" in str(e) or "records" in str(e)
    else:  # only valid records get through, and the release is finite
        assert arr.ndim == 1 and arr.size > 0
        assert np.isfinite(release.noisy_statistic).all()


@pytest.mark.parametrize(
    "kw,names",
    [
        (dict(epsilon=1e-300), "epsilon"),  # was: an inf release
        (dict(bounds=(0.0, 1e300)), "bounds"),  # was: an inf release
        (dict(bounds=(0.0, math.inf)), "bounds"),
        (dict(bounds=(5.0, 1.0)), "bounds"),
        (dict(bounds=("0", "1")), "bounds"),
        (dict(bounds=None), "bounds"),
        (dict(neighbouring="replace"), "neighbouring"),
        (dict(num_categories=3), "num_categories"),
    ],
)
def test_release_sufficient_statistics_bad_settings(kw, names):
    kw = {**dict(epsilon=1.0, bounds=(0.0, 5.0), rng_key=0), **kw}
    raises_clear(lambda: release_sufficient_statistics("gamma-exponential", np.array([1.0, 2.0]), **kw), names)


def test_release_sufficient_statistics_with_the_records_first_is_a_clear_error():
    # was numpy's "truth value of an array ... is ambiguous" from `family not in FAMILIES`
    x = np.array([0.0, 1.0, 1.0, 0.0])
    with pytest.raises(
        TypeError,
        match=r"family must be one of .* \(a string\), got a ndarray; the records come "
        "second",
    ) as info:
        release_sufficient_statistics(x, "beta-bernoulli", epsilon=1.0, rng_key=0)
    assert "[0." not in str(info.value)  # the records are not echoed


def test_release_sufficient_statistics_huge_records_are_clipped_as_documented():
    r = release_sufficient_statistics(
        "gamma-exponential", np.array([1e300, 1.0]), epsilon=1.0, bounds=(0.0, 5.0), rng_key=0
    )
    assert np.isfinite(r.noisy_statistic).all() and abs(r.noisy_statistic[0] - 6.0) < 100


@pytest.mark.parametrize(
    "kw,names",
    [
        (dict(x_bound=1e100), "x_bound"),  # was: an inf release (x'x sensitivity 1e200)
        (dict(x_bound=1e30), "noise scale"),  # was: an inf release (float32 noise)
        (dict(epsilon=1e-300), "epsilon"),  # was: an inf release
        (dict(x_bound=True), "x_bound"),  # was: silently 1.0
        (dict(x_bound="2.0"), "x_bound"),  # was: silently 2.0
        (dict(x_bound=[1.0, 2.0, 3.0]), "x_bound"),
        (dict(x_bound=-1.0), "x_bound"),
        (dict(y_bound=math.nan), "y_bound"),
        (dict(y_bound=False), "y_bound"),
        (dict(budget_split={"xx": 0.5, "xy": 0.5}), "budget_split"),
        (dict(fourth_moments="yes"), "fourth_moments"),
        (dict(X=X20[:, 0]), "X"),
        (dict(X=X20[:0], y=Y20[:0]), "records"),
        (dict(y=Y20[:5]), "same N"),
        (dict(X=np.where(X20 > 1, np.nan, X20)), "X"),
        (dict(X=X20.astype(complex)), "X"),
        (dict(y=Y20.astype(str)), "y"),
    ],
)
def test_release_regression_statistics_bad_input(kw, names):
    kw = {**dict(X=X20, y=Y20.astype(np.float32), epsilon=1.0, x_bound=2.0, y_bound=1.0, rng_key=0), **kw}
    raises_clear(lambda: release_regression_statistics(**kw), names)


def test_release_regression_statistics_one_record_and_huge_values():
    one = release_regression_statistics(X20[:1], Y20[:1], epsilon=1.0, x_bound=2.0, y_bound=1.0, rng_key=0)
    huge = release_regression_statistics(
        X20.astype(np.float64) * 1e300, Y20, epsilon=1.0, x_bound=2.0, y_bound=1.0, rng_key=0
    )
    for r in (one, huge):  # huge records are clipped into the box (documented)
        assert all(np.isfinite(v).all() for v in r.noisy.values())


# ---------------------------------------------------------------------------------------------
# validation functions

SHAPES = st.tuples(st.integers(0, 4), st.integers(0, 4), st.integers(0, 3))
VALUES = st.sampled_from([0.0, 1.0, -2.5, math.nan, math.inf, 1e200])


@FAST
@given(
    dshape=st.one_of(SHAPES, st.tuples(st.integers(1, 3), st.integers(1, 3))),
    tshape=st.tuples(st.integers(0, 4), st.integers(0, 3)),
    rshape=st.tuples(st.integers(0, 4), st.integers(0, 3)),
    value=VALUES,
    dtype=st.sampled_from([np.float64, np.float32, np.int64, np.bool_, np.complex128]),
)
def test_tarp_coverage_hostile_arrays(dshape, tshape, rshape, value, dtype):
    with np.errstate(over="ignore"):  # 1e200 becomes inf in float32: a hostile value too
        draws = np.full(dshape, value if dtype in (np.float64, np.float32) else 1).astype(dtype)
    theta, refs = np.zeros(tshape), np.ones(rshape)
    try:
        result = tarp_coverage(draws, theta, refs, alpha=[0.1, 0.5])
    except CLEAR as e:
        assert any(n in str(e) for n in ("draws", "theta_true", "references"))
    else:
        assert np.isfinite(result.coverage).all() and ((result.coverage >= 0) & (result.coverage <= 1)).all()
        finite = np.isfinite(draws.astype(np.complex128)).all()  # the values actually passed (ints: 1)
        # compared in float64: a float32 maximum against 1e150 casts 1e150 to float32 (an overflow warning)
        assert draws.ndim == 3 and draws.size > 0 and finite and np.abs(draws).astype(np.float64).max() < 1e150


@pytest.mark.parametrize(
    "kw,names",
    [
        (dict(alpha=[0.0, 0.5]), "alpha"),
        (dict(alpha=[math.nan]), "alpha"),
        (dict(alpha=[[0.5]]), "alpha"),
        (dict(bootstrap=True), "bootstrap"),
        (dict(bootstrap=-1), "bootstrap"),
        (dict(band_level=1.0), "band_level"),
        (dict(rng_key=2**70, bootstrap=2), "rng_key"),
        (dict(theta_true=np.full((3, 2), 1e200)), "theta_true"),  # was: squared distances inf, coverage silently 0
        (dict(draws=np.full((3, 5, 2), 1e200)), "draws"),  # was: coverage silently 1
        (dict(draws={"w": np.zeros((3, 5, 2))}), "draws"),
    ],
)
def test_tarp_coverage_bad_settings(kw, names):
    kw = {**dict(draws=np.zeros((3, 5, 2)), theta_true=np.ones((3, 2)), references=np.zeros((3, 2))), **kw}
    raises_clear(lambda: tarp_coverage(**kw), names)


@FAST
@given(
    p=st.one_of(
        hnp.arrays(
            st.sampled_from([np.float64, np.float32]),
            st.integers(0, 6),
            elements=st.sampled_from([0.0, 0.3, 1.0, 1.5, -0.1, math.nan]),
        ),
        hnp.arrays(st.sampled_from([np.bool_, np.int64]), st.integers(0, 6)),
    ),
    y=hnp.arrays(np.float64, st.integers(0, 6), elements=st.sampled_from([0.0, 1.0, 0.5, 2.0, math.nan])),
    bins=st.one_of(st.integers(-1, 7), st.just(True), st.just(2.0)),
)
def test_calibration_curve_hostile_inputs(p, y, bins):
    try:
        result = calibration_curve(p, y, bins)
    except CLEAR as e:
        assert any(n in str(e) for n in ("probabilities", "outcomes", "bins"))
    else:
        assert np.isfinite(result.rmse) and np.isfinite(result.brier)
        assert p.size == y.size >= 1 and 1 <= bins <= p.size


# ---------------------------------------------------------------------------------------------
# DPVITrace.load: truncated, tampered with, or another version (tests/vi covers the basic four)

ARRAYS = ("phi", "grads", "final_phi", "beta", "learning_rate")


def _saved(tmp_path):
    path = _trace(T=12).save(tmp_path / "t.npz")
    return path, path.read_bytes()


def _rewrite(path, contents, meta=None):
    """Writes ``contents`` back with a freshly computed checksum (a deliberate tamperer's file)."""
    contents = dict(contents)
    text = contents["metadata"].tobytes().decode() if meta is None else json.dumps(meta, sort_keys=True)
    contents["metadata"] = np.frombuffer(text.encode(), dtype=np.uint8)
    contents["checksum"] = np.frombuffer(_digest({k: contents[k] for k in ARRAYS}, text).encode(), dtype=np.uint8)
    np.savez_compressed(path, **contents)


def _contents(raw):
    with np.load(io.BytesIO(raw)) as z:
        return {k: z[k] for k in z.files}


@FAST
@given(position=st.integers(0, 10**6), flip=st.integers(1, 255))
def test_trace_load_with_a_flipped_byte_is_an_error_or_the_same_trace(tmp_path_factory, position, flip):
    path, raw = _saved(tmp_path_factory.mktemp("flip"))
    original = DPVITrace.load(path)
    data = bytearray(raw)
    data[position % len(data)] ^= flip
    path.write_bytes(bytes(data))
    try:
        back = DPVITrace.load(path)
    except ValueError as e:
        assert str(path) in str(e)
    else:  # the flip hit bytes that carry no content (e.g. a zip timestamp): nothing changed
        for k in ARRAYS:
            np.testing.assert_array_equal(getattr(back, k), getattr(original, k))
        assert back.privacy == original.privacy and back.layout == original.layout


@FAST
@given(keep=st.floats(0.0, 0.999))
def test_trace_load_truncated_anywhere_is_an_error(tmp_path_factory, keep):
    path, raw = _saved(tmp_path_factory.mktemp("trunc"))
    path.write_bytes(raw[: int(len(raw) * keep)])
    with pytest.raises(ValueError, match="t.npz"):
        DPVITrace.load(path)


@pytest.mark.parametrize(
    "change,match",
    [
        (lambda c, m: c.__setitem__("phi", np.full_like(c["phi"], np.nan)), "NaN or inf"),
        (lambda c, m: c.__setitem__("phi", c["phi"][:5]), "shape"),
        (lambda c, m: c.__setitem__("grads", c["grads"].astype(str)), "real numbers"),
        (lambda c, m: c.__setitem__("beta", np.ones(3)), "beta"),
        (lambda c, m: m.pop("clip"), "clip"),
        (lambda c, m: m.__setitem__("clip", "big"), "clip"),
        (lambda c, m: m.__setitem__("num_steps", 12.5), "num_steps"),
        (lambda c, m: m.__setitem__("num_steps", 99), "num_steps"),
        (lambda c, m: m.__setitem__("sampling_rate", 0.0), "sampling_rate"),
        (lambda c, m: m.__setitem__("privacy", {"epsilon": 1.0}), "privacy"),
        (lambda c, m: m.__setitem__("layout", {"sites": [{"name": "w"}]}), "layout"),
        (lambda c, m: m.__setitem__("version", "1"), "version"),
    ],
)
def test_trace_load_rewritten_with_a_valid_checksum_is_still_checked(tmp_path, change, match):
    path, raw = _saved(tmp_path)
    contents = _contents(raw)
    meta = json.loads(contents["metadata"].tobytes().decode())
    change(contents, meta)
    _rewrite(path, contents, meta)
    with pytest.raises(ValueError, match=match):
        DPVITrace.load(path)


def test_trace_load_metadata_that_is_not_a_json_object(tmp_path):
    path, raw = _saved(tmp_path)
    contents = _contents(raw)
    for text in ("[1, 2]", '"trace"', "null"):
        contents["metadata"] = np.frombuffer(text.encode(), dtype=np.uint8)
        contents["checksum"] = np.frombuffer(_digest({k: contents[k] for k in ARRAYS}, text).encode(), np.uint8)
        np.savez_compressed(path, **contents)
        with pytest.raises(ValueError, match="metadata"):
            DPVITrace.load(path)


def test_trace_load_rejects_a_pickled_object_array(tmp_path):
    path, raw = _saved(tmp_path)
    contents = _contents(raw)
    contents["phi"] = np.array([object()] * 3, dtype=object)
    np.savez(path, **contents)  # needs pickle to read: refused (allow_pickle=False)
    with pytest.raises(ValueError, match="not a readable DPVI trace"):
        DPVITrace.load(path)


def test_an_untouched_trace_file_loads(tmp_path):
    """Power check of the load tests above: the file they tamper with is valid to begin with, and
    the stricter load still reads a simulated trace (dataset_size = num_mc = 0, not private)."""
    path, _ = _saved(tmp_path)
    assert DPVITrace.load(path).num_params == 4
    from dpposterior.noise_aware.simulate import simulate_trace

    sim = simulate_trace(jax.random.key(0), np.zeros(4), 1.0, num_steps=20)
    back = DPVITrace.load(sim.save(tmp_path / "sim.npz"))
    np.testing.assert_array_equal(back.phi, sim.phi)
    assert back.privacy == sim.privacy


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
        "dpsgd": lambda: dpsgd(_linear, np.zeros(2, np.float32), x, **DPSGD_KW),
    }[fn]
    with pytest.raises(ValueError, match=r"float32 range .* 1 value\(s\) lie beyond it") as e:
        call()
    assert "1.234e+39" not in str(e.value) and "e+39" not in str(e.value)
    big = np.asarray(Y20, np.int64) + 2**40
    with pytest.raises(ValueError, match=r"32-bit integer range .* 20 value\(s\) lie outside it") as e:
        dpp.dpvi(logistic_regression, X20, big, **VI_KW) if fn == "dpvi" else dpsgd(
            _linear, np.zeros(2, np.float32), np.c_[X20, big].astype(np.int64), **DPSGD_KW
        )
    assert str(2**40) not in str(e.value)
    # a setting (not data) is still quoted, so the user sees what was wrong
    with pytest.raises(ValueError, match=r"got np.float64\(1e\+300\)"):
        dpsgd(_linear, np.zeros(2, np.float32), X20, **{**DPSGD_KW, "learning_rate": np.float64(1e300)})
