"""Results on disk: atomic cell files, clear errors for corrupted ones, and resumption after a crash."""

from __future__ import annotations

import json
import os

import pytest

import dpposterior.experiments.runner as runner
import dpposterior.experiments.store as store_mod
from dpposterior.experiments import CorruptResultError, run_coverage
from dpposterior.experiments.store import ResultStore
from dpposterior.experiments.cell import comparable
from dpposterior.experiments.report import table_csv


def _cell_files(root):
    return sorted((root / "cells").glob("*/*.json"))


def _stray_temporaries(root):
    return [p for p in root.rglob("*") if p.name.endswith(".tmp")]


def test_write_is_atomic(tmp_path, monkeypatch):
    """While a result is being written, its final path does not exist; a crash leaves nothing behind."""
    path = tmp_path / "cells" / "m" / "x.json"
    seen = []
    real_fsync = os.fsync

    def spy(fd):
        seen.append(path.exists())  # at fsync the temporary file is complete, the final name still absent
        real_fsync(fd)

    monkeypatch.setattr(store_mod.os, "fsync", spy)
    store_mod.write_json_atomic(path, {"a": 1})
    assert seen == [False]
    assert json.loads(path.read_text()) == {"a": 1}

    def crash(src, dst):
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(store_mod.os, "replace", crash)
    with pytest.raises(OSError, match="simulated"):
        store_mod.write_json_atomic(tmp_path / "cells" / "m" / "y.json", {"b": 2})
    assert not (tmp_path / "cells" / "m" / "y.json").exists()
    assert _stray_temporaries(tmp_path) == []
    assert json.loads(path.read_text()) == {"a": 1}  # the finished file is untouched


def test_resume_after_crash_keeps_finished_cells(grid_cells, tmp_path, monkeypatch):
    """A run that dies after its first cell resumes: finished cells kept (same mtime), none computed
    twice, and the final table equals that of an uninterrupted run."""
    full = run_coverage(grid_cells, tmp_path / "full", progress=False)
    assert len(full.computed) == 4 and full.skipped == []

    calls = []
    real = runner.evaluate_cell

    def dies_after_first(cfg, *a, **k):
        calls.append(cfg)
        if len(calls) == 2:
            raise KeyboardInterrupt("killed (simulated)")
        return real(cfg, *a, **k)

    monkeypatch.setattr(runner, "evaluate_cell", dies_after_first)
    out = tmp_path / "resumed"
    with pytest.raises(KeyboardInterrupt):
        run_coverage(grid_cells, out, progress=False)
    files = _cell_files(out)
    assert len(files) == 1 and _stray_temporaries(out) == []
    first = files[0]
    mtime = first.stat().st_mtime_ns
    content = first.read_bytes()

    calls.clear()
    monkeypatch.setattr(runner, "evaluate_cell", lambda cfg, *a, **k: calls.append(cfg) or real(cfg, *a, **k))
    resumed = run_coverage(grid_cells, out, progress=False)
    assert len(resumed.skipped) == 1 and len(resumed.computed) == 3
    assert sorted(c.label() for c in calls) == sorted(c.label() for c in resumed.computed)  # none twice
    assert resumed.skipped[0] not in calls
    assert first.stat().st_mtime_ns == mtime and first.read_bytes() == content
    assert table_csv(resumed.results) == table_csv(full.results)
    assert [comparable(r) for r in resumed.results] == [comparable(r) for r in full.results]

    calls.clear()
    again = run_coverage(grid_cells, out, progress=False)  # everything finished: nothing computed
    assert again.computed == [] and calls == []


def test_corrupted_results_file_is_a_clear_error(tiny, tmp_path):
    cfg = tiny("naive")
    run_coverage([cfg], tmp_path, progress=False)
    path = ResultStore(tmp_path).path(cfg)
    text = path.read_text()

    path.write_text(text[: len(text) // 2])  # truncated
    with pytest.raises(CorruptResultError, match=f"{path}.*corrupted.*delete it"):
        run_coverage([cfg], tmp_path, progress=False)

    rec = json.loads(text)
    rec["config"]["seed"] = 99  # edited configuration no longer matches its digest
    path.write_text(json.dumps(rec))
    with pytest.raises(CorruptResultError, match="does not match its digest"):
        run_coverage([cfg], tmp_path, progress=False)

    path.write_text(json.dumps({"format": "something else"}))
    with pytest.raises(CorruptResultError, match="not a coverage cell result"):
        ResultStore(tmp_path).load(cfg)

    rec = json.loads(text)
    rec["version"] = 99  # written by another version
    path.write_text(json.dumps(rec))
    with pytest.raises(CorruptResultError, match="version 99"):
        ResultStore(tmp_path).load(cfg)

    rec = json.loads(text)
    del rec["rmse"]
    path.write_text(json.dumps(rec))
    with pytest.raises(CorruptResultError, match="lacks the fields"):
        ResultStore(tmp_path).load(cfg)

    for bad in (["0.1"], [float("nan")], [0.1, 0.2], "0.1"):  # a marginal of the wrong type or length
        rec = json.loads(text)
        rec["marginal_rmse"] = bad
        path.write_text(json.dumps(rec))
        with pytest.raises(CorruptResultError, match="per-coordinate figures"):
            ResultStore(tmp_path).load(cfg)
    rec = json.loads(text)
    for key in ("marginal_rmse", "central_coverage", "central_coverage_se"):  # a file from before: read
        del rec[key]
    path.write_text(json.dumps(rec))
    assert "marginal_rmse" not in ResultStore(tmp_path).load(cfg)

    other = tiny("naive", seed=3)  # a valid result under another cell's name
    run_coverage([other], tmp_path / "o", progress=False)
    os.replace(ResultStore(tmp_path / "o").path(other), path)
    with pytest.raises(CorruptResultError, match="not the one its name promises"):
        ResultStore(tmp_path).load(cfg)


def test_a_result_computed_under_other_model_settings_is_recomputed(tiny, tmp_path, monkeypatch, capsys):
    """A cell's results depend on its model's clip, beta_rho, lr_scale and maps, which its configuration
    does not name: changing them makes the finished result stale, and a re-run recomputes it."""
    import dataclasses

    from dpposterior.experiments import replicates
    from dpposterior.models import registry

    cell = tiny("naive")
    spec = registry.MODELS["beta-bernoulli"]
    first = run_coverage([cell], tmp_path, progress=False)
    settings = first.results[0]["model_settings"]
    assert (settings["clip"], settings["beta_rho"], settings["lr_scale"]) == (spec.clip, spec.beta_rho, spec.lr_scale)
    assert settings["layout"]["sites"][0]["support"]  # the map is recorded
    again = run_coverage([cell], tmp_path, progress=False)
    assert again.skipped == [cell] and again.stale == [] and again.computed == []

    monkeypatch.setitem(registry.MODELS, "beta-bernoulli", dataclasses.replace(spec, clip=2 * spec.clip))
    replicates._model_structure.cache_clear()
    try:
        changed = run_coverage([cell], tmp_path, progress=False)
        assert changed.stale == [cell] and changed.computed == [cell] and changed.skipped == []
        assert changed.results[0]["clip"] == 2 * spec.clip
        assert "stale (model settings changed: clip)" in capsys.readouterr().err  # names only what changed
        # a record written before the settings were recorded: its clip and beta_rho are still checked
        old = json.loads(ResultStore(tmp_path).path(cell).read_text())
        del old["model_settings"]
        assert runner.stale_reason(old, cell) is None
        old["clip"] = spec.clip
        assert "clip/beta_rho changed" in runner.stale_reason(old, cell)
    finally:
        monkeypatch.undo()
        replicates._model_structure.cache_clear()
    assert runner.stale_reason(old, cell) is None  # back under the original settings


def test_a_cell_file_under_an_older_option_spelling_is_found(tiny, tmp_path):
    """A cell written before its options' spelling became canonical (so under another digest and file
    name) is found and reused, not computed twice; its file still passes its own digest check."""
    import numpy as np

    from dpposterior.experiments import register_method
    from dpposterior.experiments.methods import METHODS as REG, naive_method

    def widened(releases, settings):
        return naive_method(releases, settings)

    register_method("test-width", widened, options=("width",))
    try:
        written = tiny("test-width", method_options={"width": 2})
        first = run_coverage([written], tmp_path, progress=False)
        old_path = ResultStore(tmp_path).path(written)
        register_method(
            "test-width",
            widened,
            options=("width",),
            replace=True,
            canonical_options=lambda o: {k: float(v) for k, v in o.items()},
        )
        cfg = tiny("test-width", method_options={"width": np.int64(2)})  # now spelt {"width": 2.0}
        assert cfg.to_dict()["method_options"] == {"width": 2.0} and ResultStore(tmp_path).path(cfg) != old_path
        again = run_coverage([cfg], tmp_path, progress=False)
        assert again.computed == [] and again.skipped == [cfg]
        rec = again.results[0]
        assert rec["config"] == cfg.to_dict() and rec["config_digest"] == cfg.digest()
        assert rec["config_as_written"] == written.to_dict() and rec["rmse"] == first.results[0]["rmse"]
        assert ResultStore(tmp_path).load(cfg)["rmse"] == rec["rmse"]
        assert _cell_files(tmp_path) == [old_path]
        edited = json.loads(old_path.read_text())
        edited["config"]["seed"] = 5
        old_path.write_text(json.dumps(edited))
        with pytest.raises(CorruptResultError, match="does not match its digest"):
            store_mod.read_result(old_path)
    finally:
        REG.pop("test-width", None)


def test_resume_with_other_devices_or_batch_size_says_so(tiny, tmp_path, capsys):
    """Devices and batch size change a cell's numbers in the last bits of floating point only, so they are
    not part of its configuration (cells stay reusable on another machine); a run that reuses cells
    computed with other values records them in ``RunSummary.execution_differs`` and says so."""
    cell = tiny("naive")
    first = run_coverage([cell], tmp_path, progress=False)
    exe = first.results[0]["execution"]
    assert (exe["devices"], exe["batch_size"]) == (1, 6)
    capsys.readouterr()
    same = run_coverage([cell], tmp_path, progress=False, batch_size=6)  # the default's batches, named
    assert same.skipped == [cell] and same.execution_differs == []
    assert "computed with" not in capsys.readouterr().err
    other = run_coverage([cell], tmp_path, progress=False, batch_size=3)
    assert other.skipped == [cell] and other.computed == [] and other.execution_differs == [cell]
    err = capsys.readouterr().err
    assert "1 finished cell(s) reused from" in err and "computed with devices=1, batch_size=6" in err
    assert "this run: devices=1, batch_size=3" in err and "last bits" in err
    # a cell from a two-device run (as the tracked reproduction's): the devices differ
    path = ResultStore(tmp_path).path(cell)
    rec = json.loads(path.read_text())
    rec["execution"]["devices"] = 2
    path.write_text(json.dumps(rec))
    moved = run_coverage([cell], tmp_path, progress=False)
    assert moved.execution_differs == [cell] and "computed with devices=2, batch_size=6" in capsys.readouterr().err


def test_a_cell_that_cannot_be_measured_does_not_stop_the_others(tiny, tmp_path, capsys):
    """A cell with fewer than 2 finite replicates raised at once, so the run's other
    cells (of its group and of later groups) were never computed, and a re-run met it again. Now they
    are computed and saved, and the error names the failed cell at the end."""
    import numpy as np

    from dpposterior.experiments import CellsUnusableError, register_method
    from dpposterior.experiments.methods import METHODS as REG, naive_method

    def mostly_nan(releases, settings):
        out = naive_method(releases, settings)
        draws = np.array(out.draws, copy=True)
        draws[1:] = np.nan  # one finite replicate left
        return out._replace(draws=draws)

    register_method("test-mostly-nan", mostly_nan)
    try:
        bad = tiny("test-mostly-nan", 0.5)
        good = [tiny("naive", 0.5), tiny("naive", 2.0)]  # same group as bad, and another group
        with pytest.raises(
            CellsUnusableError,
            match=r"1 cell\(s\) could not be measured: .*test-mostly-nan.*"
            r"fewer than 2 replicates .*\(\d+ of \d+ excluded\).*other 2 computed cell\(s\) are saved",
        ) as err:
            run_coverage([bad] + good, tmp_path, progress=False)
        assert [c for c, _ in err.value.failed] == [bad] and err.value.computed == 2
        assert "not measured" in capsys.readouterr().err
        assert ResultStore(tmp_path).load(bad) is None
        assert all(ResultStore(tmp_path).load(c) is not None for c in good)
        again = run_coverage(good, tmp_path, progress=False)
        assert again.computed == [] and set(again.skipped) == set(good)
    finally:
        REG.pop("test-mostly-nan", None)


def test_cli_reports_the_other_cells_and_names_the_one_that_failed(tmp_path, capsys, tiny_cli_args):
    import numpy as np

    from dpposterior.cli import main
    from dpposterior.experiments import register_method
    from dpposterior.experiments.methods import METHODS as REG, naive_method

    def all_nan(releases, settings):
        out = naive_method(releases, settings)
        return out._replace(draws=np.full_like(np.asarray(out.draws), np.nan))

    register_method("test-all-nan", all_nan)
    try:
        args = [
            "coverage",
            "--model",
            "beta-bernoulli",
            "--epsilon",
            "0.5",
            "--method",
            "test-all-nan",
            "naive",
            "--out",
            str(tmp_path),
            *tiny_cli_args,
        ]
        assert main(args) == 1
        err = capsys.readouterr().err
        assert "error: 1 cell(s) could not be measured" in err and "test-all-nan" in err
        assert "cover its 1 finished cell(s)" in err
        table = (tmp_path / "coverage_table.md").read_text()
        assert "| naive |" in table and "test-all-nan" not in table
        assert [p.name.split("_")[1] for p in (tmp_path / "cells" / "beta-bernoulli").glob("*.json")] == ["naive"]
    finally:
        REG.pop("test-all-nan", None)
