"""``run_coverage`` and ``compute_group`` check their output folder and batch size before computing anything."""

from __future__ import annotations

import pytest
from small_cells import SMALL

from dpposterior.experiments import CellConfig


# run_coverage (Python) with an ``out`` that is a file, or whose cells/<model> is a file: the cells were
# computed, then lost when the first save failed (NotADirectoryError / FileExistsError); the command line
# checks --out first, the Python entry point did not.
def test_run_coverage_checks_its_folder_before_computing(tmp_path, monkeypatch):
    import dpposterior.experiments.runner as runner
    from dpposterior.experiments import run_coverage

    def must_not_run(*a, **k):
        raise AssertionError("a cell was computed before the output folder was checked")

    monkeypatch.setattr(runner, "compute_group", must_not_run)
    cfg = CellConfig("beta-bernoulli", 1.0, "naive", **SMALL)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="is a file, not a folder"):
        run_coverage([cfg], tmp_path / "file", progress=False)
    (tmp_path / "out" / "cells").mkdir(parents=True)
    (tmp_path / "out" / "cells" / "beta-bernoulli").write_text("x")
    with pytest.raises(ValueError, match="beta-bernoulli"):
        run_coverage([cfg], tmp_path / "out", progress=False)


# run_coverage / compute_group from Python: batch_size=0 or -5 was silently replaced by the device count,
# 2.5 truncated to 2, "a" failed inside min() after the set-up (the command line checks --batch-size).
@pytest.mark.parametrize("batch_size, exc", [(0, ValueError), (-5, ValueError), (2.5, TypeError), ("a", TypeError)])
def test_batch_size_is_checked_before_computing(batch_size, exc, tmp_path, monkeypatch):
    import dpposterior.experiments.replicates as replicates
    from dpposterior.experiments import run_coverage
    from dpposterior.experiments.runner import compute_group

    def must_not_run(*a, **k):
        raise AssertionError("the group was set up before batch_size was checked")

    monkeypatch.setattr(replicates, "dpvi_setup", must_not_run)
    cfg = CellConfig("beta-bernoulli", 1.0, "naive", **SMALL)
    with pytest.raises(exc, match="batch_size"):
        run_coverage([cfg], tmp_path, batch_size=batch_size, progress=False)
    with pytest.raises(exc, match="batch_size"):
        compute_group([cfg], batch_size=batch_size)
    with pytest.raises(exc, match="batch_size"):
        replicates.run_replicates(cfg, batch_size=batch_size)
