"""The privacy accounting, records, ledger, secure noise and audit functions: bad arguments refused by name,
extreme but valid parameters answered with a finite result or a clear error, promptly.
"""

from __future__ import annotations

import json
import math

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpposterior import privacy
from dpposterior.privacy.audit import clopper_pearson_lower, clopper_pearson_upper, epsilon_lower_bound_from_counts
from dpposterior.privacy.dp_dropout import dpd_zcdp_epsilon
from dpposterior.privacy.secure import secure_laplace, secure_normal
from dpposterior.privacy.spent import PrivacySpent
from input_checks import FAST, FEW, finishes_within, raises_clear
from input_checks import raises_with as _raises

RECORD = dict(
    epsilon=1.0,
    delta=1e-5,
    neighbouring="add_remove",
    accountant="pld",
    mechanism="poisson_subsampled_gaussian",
    noise_multiplier=1.0,
    sampling_rate=0.1,
    num_steps=10,
)


# zCDP
@pytest.mark.parametrize("sigma", [1e-200, 1e-160])
def test_zcdp_rho_overflow_is_a_clear_error(sigma):
    # 1e-200 was a ZeroDivisionError, 1e-160 a silent rho = inf
    _raises(lambda: privacy.gaussian_zcdp_rho(sigma), ValueError, "noise_multiplier")
    _raises(lambda: dpd_zcdp_epsilon(sigma, 1e-5, 0.1, 10), ValueError, "noise_multiplier")


@pytest.mark.parametrize("rhos", [0.5, None, "0.5", {0.1: 1}])
def test_zcdp_compose_wants_an_iterable_of_numbers(rhos):
    _raises(lambda: privacy.zcdp_compose(rhos), TypeError, "rhos", "iterable")


def test_zcdp_compose_overflow_is_a_clear_error():
    _raises(lambda: privacy.zcdp_compose([1e308, 1e308]), ValueError, "rho")  # was fsum's OverflowError


def test_tight_zcdp_conversion_of_extreme_rho_is_finite():
    # tiny rho was a silent NaN, huge rho a bare "math domain error"
    assert privacy.zcdp_to_dp(5e-324, 1e-5, "tight") == 0.0
    huge = privacy.zcdp_to_dp(1e300, 1e-5, "tight")
    assert math.isfinite(huge) and huge <= privacy.zcdp_to_dp(1e300, 1e-5, "classic")
    _raises(lambda: privacy.zcdp_to_dp(1.7e308, 1e-300), ValueError, "rho")  # was a silent inf


# DP-SGD accounting and calibration
def test_calibration_rtol_below_float_resolution_is_refused():
    # 1e-16 was a ZeroDivisionError (dpsgd) or a search that never ended (DP dropout)
    _raises(
        lambda: privacy.calibrate_noise_multiplier(1.0, 1e-5, 0.1, 10, "rdp", rtol=1e-16), ValueError, "rtol", "1e-12"
    )
    _raises(lambda: privacy.calibrate_dpd_noise_multiplier(1.0, 1e-5, 0.1, 10, "zcdp", rtol=1e-300), ValueError, "rtol")


def test_pld_noise_multiplier_below_its_floor_is_refused_at_once():
    # 1e-4 allocated 6 GB and was still running after a minute
    _raises(lambda: privacy.dpsgd_epsilon(1e-4, 1e-5, 0.1, 10), ValueError, "noise_multiplier", "rdp")


# PrivacySpent and the ledger
@pytest.mark.parametrize(
    "field,value,exc",
    [
        ("epsilon", True, TypeError),
        ("delta", "0.5", TypeError),  # was stored; summary() then crashed
        ("delta", None, TypeError),
        ("noise_multiplier", -1.0, ValueError),
        ("noise_multiplier", math.nan, ValueError),
        ("sampling_rate", 1.5, ValueError),  # Ledger.total then failed inside dp-accounting
        ("num_steps", 0, ValueError),
        ("num_steps", 2.5, TypeError),
        ("num_steps", True, TypeError),
        ("accountant", None, TypeError),
        ("details", [("clip", 1.0)], TypeError),
    ],
)
def test_privacy_record_fields_are_checked(field, value, exc):
    _raises(lambda: PrivacySpent(**{**RECORD, field: value}), exc, field)


def test_privacy_record_takes_numpy_numbers_as_plain_ones():
    p = PrivacySpent(**{**RECORD, "epsilon": np.float32(1.0), "num_steps": np.int64(10)})
    assert type(p.epsilon) is float and type(p.num_steps) is int


@pytest.mark.parametrize("change", [{"num_steps": 2.7}, {"epsilon": "abc"}, {"delta": True}])
def test_privacy_record_from_a_bad_file_is_refused_not_truncated(change):
    # num_steps 2.7 was silently read as 2
    _raises(lambda: PrivacySpent.from_dict({**RECORD, **change}), ValueError, "malformed privacy record")


def test_ledger_file_whose_entries_are_not_a_list(tmp_path):
    path = tmp_path / "ledger.json"
    path.write_text(json.dumps({"format": "dpposterior-ledger", "version": 1, "entries": 5}))
    _raises(lambda: privacy.Ledger.load(path), ValueError, "list of entries")


def test_ledger_release_with_huge_epsilon_is_a_clear_error():
    ledger = privacy.Ledger()
    ledger.add(
        PrivacySpent(epsilon=800.0, delta=0.0, neighbouring="add_remove", accountant="pure", mechanism="laplace"),
        "counts",
    )
    _raises(lambda: ledger.total(1e-5), ValueError, "'counts'", "epsilon")  # was OverflowError


# secure randomness, audits, the Gaussian mechanism
@pytest.mark.parametrize(
    "shape,exc", [((2.7,), TypeError), (True, TypeError), ("3", TypeError), (2.7, TypeError), ((-1,), ValueError)]
)
def test_secure_shapes_are_integers(shape, exc):
    # (2.7,) was silently 2 draws, True one draw, "3" three
    _raises(lambda: secure_normal(shape), exc, "shape")


@pytest.mark.parametrize("scale", [True, "2", None])
def test_secure_laplace_scale_is_a_number(scale):
    _raises(lambda: secure_laplace(2, scale), TypeError, "scale")


@pytest.mark.parametrize(
    "args,exc,word",
    [
        ((2.5, 10, 0.05), TypeError, "successes"),  # was truncated to 2
        ((True, 10, 0.05), TypeError, "successes"),
        (("3", 10, 0.05), TypeError, "successes"),
        ((3, 10, "0.05"), TypeError, "alpha"),  # was a bare comparison TypeError
        ((11, 10, 0.05), ValueError, "trials"),
    ],
)
def test_clopper_pearson_counts_are_integers(args, exc, word):
    _raises(lambda: clopper_pearson_upper(*args), exc, word)
    _raises(lambda: clopper_pearson_lower(*args), exc, word)


def test_audit_counts_are_integers():
    _raises(lambda: epsilon_lower_bound_from_counts(2.5, 100, 3, 100, delta=1e-5), TypeError, "false_positives")
    _raises(lambda: epsilon_lower_bound_from_counts(3, 100, 101, 100, delta=1e-5), ValueError, "false_negatives")


def test_audit_many_runs_key_is_checked():
    run = lambda key, include: jnp.float32(include)  # noqa: E731
    _raises(lambda: privacy.audit_many_runs(run, num_runs=4, delta=0.0, rng_key="a"), TypeError, "rng_key")
    _raises(lambda: privacy.audit_many_runs(run, num_runs=4, delta=0.0, rng_key=True), TypeError, "rng_key")


@pytest.mark.parametrize(
    "fn",
    [
        lambda: privacy.epsilon_lower_bound_from_scores([[1.0], [1.0, 2.0]], [1.0, 2.0], delta=1e-5),
        lambda: privacy.gaussian_mechanism([[1.0], [1.0, 2.0]], epsilon=1.0, delta=1e-5, sensitivity=1.0, rng_key=0),
    ],
)
def test_ragged_arrays_are_a_type_error(fn):
    _raises(fn, TypeError, "could not convert")


# PrivacySpent.from_dict(to_dict()) gave back the tuples of ``details`` as JSON lists: the record read
# from a ledger file was unequal to the one written and unhashable (a frozen record that cannot be hashed)
def test_privacy_record_round_trips_through_json_with_nested_details():
    import json

    from dpposterior.privacy import PrivacySpent

    p = PrivacySpent(
        epsilon=1.0,
        delta=0.0,
        neighbouring="add_remove",
        accountant="pure",
        mechanism="laplace",
        details=(("parts", ("xx", "xy")), ("scales", ((1.0, 2.0), (3.0,))), ("note", "n")),
    )
    q = PrivacySpent.from_dict(json.loads(json.dumps(p.to_dict())))
    assert q == p and hash(q) == hash(p)


# a subnormal epsilon target (1e-320 passes the finite-and-positive check) made the PLD search's
# bracketing step overflow: math.exp of about 740, an OverflowError traceback from the coverage command
def test_a_subnormal_epsilon_target_is_calibrated_without_overflow():
    from dpposterior.privacy import calibrate_noise_multiplier, dpsgd_epsilon

    sigma = calibrate_noise_multiplier(1e-320, 1e-5, 0.1, 100)
    assert dpsgd_epsilon(sigma, 1e-5, 0.1, 100) <= 1e-320


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
