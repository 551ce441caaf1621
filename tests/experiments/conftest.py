"""Fixtures of the coverage-engine tests: tiny cells that compile once and run in seconds.

Every test uses the same small sizes (so the compiled replicate program and the method programs are
shared across tests of the session): Beta-Bernoulli, N = 200 records, T = 60 DP-SGD steps, K = 6
replicates, M = 400 posterior draws, R = 4 reference draws. NUTS runs with 100 warm-up and 200 draws.
"""

from __future__ import annotations

import pytest

from dpposterior.experiments import CellConfig

TINY = dict(replicates=6, repeats=4, num_steps=60, num_records=200, num_draws=400)
NUTS_FAST = (("num_warmup", 100), ("num_samples", 200))


def tiny_config(method: str = "grid", epsilon: float = 0.5, **overrides) -> CellConfig:
    """A tiny Beta-Bernoulli cell (overrides replace any field)."""
    fields = dict(TINY)
    if method == "nuts":
        fields["method_options"] = NUTS_FAST
    fields.update(overrides)
    return CellConfig("beta-bernoulli", epsilon, method, **fields)


@pytest.fixture
def tiny():
    """The factory :func:`tiny_config`."""
    return tiny_config


@pytest.fixture
def grid_cells():
    """Four cells in two groups: epsilon 0.5 and 2.0, methods naive and grid."""
    return [tiny_config(m, e) for e in (0.5, 2.0) for m in ("naive", "grid")]


@pytest.fixture
def tiny_cli_args():
    """Command-line options of the tiny cells (no progress bars)."""
    return [
        "--replicates",
        str(TINY["replicates"]),
        "--repeats",
        str(TINY["repeats"]),
        "--num-steps",
        str(TINY["num_steps"]),
        "--num-records",
        str(TINY["num_records"]),
        "--num-draws",
        str(TINY["num_draws"]),
        "--no-progress",
    ]
