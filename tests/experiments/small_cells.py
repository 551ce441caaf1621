"""Settings of a small cell and a finished cell's record, for tests that configure cells or write reports
without computing one."""

from __future__ import annotations

import numpy as np

from dpposterior.experiments import CellConfig

#: a cell's size, small enough that nothing needs computing to check its configuration
SMALL = dict(replicates=4, repeats=2, num_steps=20, num_records=20, num_draws=50)


def cell_record(num_records, rmse, seed=0, method="grid"):
    """The record of a finished Beta-Bernoulli cell at epsilon 1 with perfect coverage and the given RMSE."""
    c = CellConfig("beta-bernoulli", 1.0, method, seed=seed, **dict(SMALL, num_records=num_records)).to_dict()
    alpha = np.linspace(0, 1, 5)
    return {
        "config": c,
        "alpha": alpha.tolist(),
        "coverage": (1 - alpha).tolist(),
        "coverage_sd": [0.0] * 5,
        "rmse": rmse,
        "single_draw_rmse_mean": rmse,
        "single_draw_rmse_sd": 0.0,
        "sharpness": 0.3,
        "num_replicates_used": 4,
    }
