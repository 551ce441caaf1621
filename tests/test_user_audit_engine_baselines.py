"""A privacy researcher's first runs of the coverage engine (``dpposterior.experiments``, ``dpposterior
coverage``) and the baselines (``dpposterior.baselines``) with inputs and methods the examples do not use.

Bugs found by a bug hunt (2026-12-02): solver options that were stored in a cell's configuration but
truncated, ignored or crashed only after the DP-SGD replicates had run, a method of the user's own whose
results were lost after the computation, a report that mislabelled cells, and raw internal errors
where a clear one naming the argument was due. Each test was red before its fix. No test runs DP-SGD:
configurations are checked before anything runs, cells are evaluated with a method of the test's own
(its own mechanism on tiny synthetic data sets), and reports are written from small records, so the file
runs in seconds.
"""

from __future__ import annotations

import numpy as np
import pytest

from dpposterior.experiments import CellConfig

SMALL = dict(replicates=4, repeats=2, num_steps=20, num_records=20, num_draws=50)


# ---------------------------------------------------------------------------------------------
# NA-DPVI solver options of a cell: only "priors" was checked. A float num_points was truncated (the
# file said 64.5, the grid used 64), and a string, a negative count or target_accept_prob = 2 failed
# (or ran) only after the group's DP-SGD replicates; duplicated (name, value) pairs kept one silently;
# a NaN option made the finished cell unsavable (the JSON writer refuses NaN).

@pytest.mark.parametrize("method, options, exc, words", [
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
])
def test_solver_options_are_checked_when_the_cell_is_configured(method, options, exc, words):
    with pytest.raises(exc) as info:
        CellConfig("beta-bernoulli", 1.0, method, method_options=options, **SMALL)
    for w in words:
        assert w in str(info.value), (w, str(info.value))


def test_valid_solver_options_still_pass_and_numpy_numbers_are_numbers():
    c = CellConfig("beta-bernoulli", 1.0, "grid", method_options={"num_points": np.int64(64), "tail": 1e-6},
                   **SMALL)
    assert dict(c.method_options) == {"num_points": 64, "tail": 1e-6}
    assert c.digest() == CellConfig("beta-bernoulli", 1.0, "grid", method_options={"num_points": 64, "tail": 1e-6},
                                    **SMALL).digest()
    CellConfig("beta-bernoulli", 1.0, "nuts", method_options={"num_warmup": 0, "target_accept_prob": 0.9}, **SMALL)
    CellConfig("beta-bernoulli", 1.0, "grid", burn_in=np.float64(0.25), **SMALL)
