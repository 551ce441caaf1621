"""A cell's configuration is checked when it is made: solver options, the steps a method needs, learning
rates, and the options and models of a registered method; nothing is computed.
"""

from __future__ import annotations

import numpy as np
import pytest
from small_cells import SMALL

from dpposterior.experiments import CellConfig


# NA-DPVI solver options of a cell: only "priors" was checked. A float num_points was truncated (the
# file said 64.5, the grid used 64), and a string, a negative count or target_accept_prob = 2 failed
# (or ran) only after the group's DP-SGD replicates; duplicated (name, value) pairs kept one silently;
# a NaN option made the finished cell unsavable (the JSON writer refuses NaN).
@pytest.mark.parametrize(
    "method, options, exc, words",
    [
        ("grid", {"num_points": 64.5}, TypeError, ("grid option num_points", "integer >= 2")),
        ("grid", {"num_points": "x"}, TypeError, ("grid option num_points",)),
        ("grid", {"num_stages": 0}, ValueError, ("grid option num_stages", ">= 1")),
        ("grid", {"tail": 0.7}, ValueError, ("tail", "(0, 0.5)")),
        ("grid", {"num_phi_draws": 0}, ValueError, ("num_phi_draws", ">= 1")),
        ("laplace", {"tol": -1.0}, ValueError, ("laplace option tol",)),
        ("laplace", {"num_iterations": 0}, ValueError, ("laplace option num_iterations",)),
        ("nuts", {"num_warmup": -1}, ValueError, ("nuts option num_warmup", ">= 0")),
        ("nuts", {"num_samples": 0}, ValueError, ("nuts option num_samples", ">= 1")),
        ("nuts", {"target_accept_prob": 2.0}, ValueError, ("target_accept_prob", "(0, 1)")),
        ("grid", {"num_points": float("nan")}, ValueError, ("finite", "num_points")),
        ("grid", (("num_points", 32), ("num_points", 64)), ValueError, ("'num_points' more than once",)),
    ],
)
def test_solver_options_are_checked_when_the_cell_is_configured(method, options, exc, words):
    with pytest.raises(exc) as info:
        CellConfig("beta-bernoulli", 1.0, method, method_options=options, **SMALL)
    for w in words:
        assert w in str(info.value), (w, str(info.value))


def test_valid_solver_options_still_pass_and_numpy_numbers_are_numbers():
    c = CellConfig("beta-bernoulli", 1.0, "grid", method_options={"num_points": np.int64(64), "tail": 1e-6}, **SMALL)
    assert dict(c.method_options) == {"num_points": 64, "tail": 1e-6}
    assert (
        c.digest()
        == CellConfig("beta-bernoulli", 1.0, "grid", method_options={"num_points": 64, "tail": 1e-6}, **SMALL).digest()
    )
    CellConfig("beta-bernoulli", 1.0, "nuts", method_options={"num_warmup": 0, "target_accept_prob": 0.9}, **SMALL)
    CellConfig("beta-bernoulli", 1.0, "grid", burn_in=np.float64(0.25), **SMALL)


# DPVIm in a cell with T < 40 steps (the cell's minimum is 10) passed the configuration, then failed
# only after the group's DP-SGD replicates and cheaper cells, with "the trace of 20 steps is too short
# for 20 windows"; dpvim_cell itself took learning_rate=-1 (a negative step), a learning rate of three
# values failed in NumPy's broadcasting, natural_gradient="no" was taken as True.
def test_dpvim_steps_and_learning_rates_are_checked_first():
    from dpposterior.baselines import dpvim_cell

    with pytest.raises(ValueError, match=r"method 'dpvim' needs num_steps >= 40 DP-SGD steps, got 20"):
        CellConfig("beta-bernoulli", 1.0, "dpvim", **SMALL)
    CellConfig("beta-bernoulli", 1.0, "dpvim", **dict(SMALL, num_steps=40))
    data = (np.zeros((2, 20), np.int32),)
    kw = dict(num_steps=40, sampling_rate=0.2)
    for lr in (-1.0, [1.0, 2.0, 3.0], "a", (0.1, float("nan"))):
        with pytest.raises(ValueError, match="learning_rate must be None, a finite number > 0 or a pair"):
            dpvim_cell("beta-bernoulli", data, 1.0, 0, 10, learning_rate=lr, **kw)
    with pytest.raises(TypeError, match="natural_gradient must be True or False"):
        dpvim_cell("beta-bernoulli", data, 1.0, 0, 10, natural_gradient="no", **kw)
    with pytest.raises(ValueError, match="num_steps must be an integer >= 40"):
        dpvim_cell("beta-bernoulli", data, 1.0, 0, 10, num_steps=20, sampling_rate=0.2)


# register_method(options="alpha") registered the options "a", "l", "p", "h", "a" (a string is a tuple of
# its letters), so the method's own option "alpha" was then refused as unknown; a misspelt model name in
# models= made the method unusable with every model, found only when a cell was configured.
def test_register_method_checks_its_options_and_models():
    from dpposterior.experiments import register_method
    from dpposterior.experiments.methods import METHODS

    def fn(releases, settings):
        raise AssertionError("not run")

    try:
        with pytest.raises(TypeError, match="options must be a tuple of option names"):
            register_method("test-method-options", fn, options="alpha")
        with pytest.raises(ValueError, match=r"unknown model\(s\) \['beta-bernouli'\]"):
            register_method("test-method-options", fn, models=("beta-bernouli",))
        assert "test-method-options" not in METHODS
        register_method("test-method-options", fn, options=("alpha",), models=("beta-bernoulli",))
        assert CellConfig(
            "beta-bernoulli", 1.0, "test-method-options", method_options={"alpha": 0.5}, **SMALL
        ).method_options == (("alpha", 0.5),)
    finally:
        METHODS.pop("test-method-options", None)
