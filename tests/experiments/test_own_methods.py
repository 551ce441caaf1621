"""A method of the user's own (``register_method``) in a cell: its diagnostics stored as they read back, its
output shapes and privacy checked against the cell, and a finished cell file that lacks what the reports
read refused. The method is the test's own mechanism on tiny synthetic data: no DP-SGD runs.
"""

from __future__ import annotations

import numpy as np
import pytest
from small_cells import SMALL

from dpposterior.experiments import CellConfig
from release_fakes import own_privacy


@pytest.fixture(scope="module")
def own_method_cell():
    """Evaluates cells of a method of the test's own (its own mechanism: no DP-SGD) on a fake group
    setup; ``run(**returned)`` overrides what the method returns."""
    from dpposterior.baselines.expfam_gibbs import family_layout
    from dpposterior.experiments import CellData, MethodOutput, register_method
    from dpposterior.experiments.replicates import ReplicateSummaries
    from dpposterior.experiments.cell import evaluate_cell
    from dpposterior.experiments.methods import METHODS
    from dpposterior.experiments.replicates import DPVISetup
    from dpposterior.models.registry import get_model

    returned: dict = {}

    def own(releases, settings, data):
        k = data.num_replicates
        rng = np.random.default_rng(0)
        draws = rng.normal(size=(k, settings.num_draws, 1)).astype(np.float32)
        out = dict(
            draws=draws,
            posterior_sd=draws.std(axis=1).astype(np.float64),
            diagnostics={"ok": 1},
            privacy=own_privacy(data.epsilon),
        )
        out.update(returned)
        return MethodOutput(**out)

    register_method("test-own-method", own, needs_data=True, description="test: a user's own mechanism")
    cfg = CellConfig("beta-bernoulli", 1.0, "test-own-method", **SMALL)
    k, n = cfg.replicates, cfg.num_records
    setup = DPVISetup(
        spec=get_model("beta-bernoulli"),
        layout=family_layout("beta-bernoulli"),
        num_latent=1,
        phi0=np.zeros(2, np.float32),
        beta=np.ones(2, np.float32),
        learning_rate=np.ones(2, np.float32),
        noise_multiplier=1.0,
        clip=2.0,
        data_shapes=(),
    )
    rng = np.random.default_rng(1)
    summaries = ReplicateSummaries(theta=rng.normal(size=(k, 1)), final_phi=None, stats=None)
    data = CellData(
        "beta-bernoulli",
        (rng.integers(0, 2, (k, n)).astype(np.int32),),
        1.0,
        cfg.delta,
        cfg.num_steps,
        cfg.sampling_rate,
        n,
        "pld",
        2.0,
    )

    def run(**override):
        returned.clear()
        returned.update(override)
        return evaluate_cell(cfg, setup, summaries, data=data)

    yield cfg, run
    METHODS.pop("test-own-method", None)


def test_own_method_diagnostics_are_stored_as_they_read_back(own_method_cell, tmp_path):
    from dpposterior.experiments.store import ResultStore

    cfg, run = own_method_cell
    diag = {
        "spread": np.float32(1.5),
        "counts": np.array([1, 2]),
        "pair": (1, 2.5),
        "bad": float("nan"),
        "worst": -np.inf,
        "flag": np.bool_(True),
        3: "int key",
    }
    rec = run(diagnostics=diag)
    store = ResultStore(tmp_path)
    store.save(rec)  # was: TypeError / ValueError from json, the cell lost
    back = store.load(cfg)
    assert back == rec  # the fresh record is the one a resumed run reads back
    assert (
        back["diagnostics"]
        == rec["diagnostics"]
        == {
            "spread": 1.5,
            "counts": [1, 2],
            "pair": [1, 2.5],
            "bad": "nan",
            "worst": "-inf",
            "flag": True,
            "3": "int key",
        }
    )
    with pytest.raises(TypeError, match=r"test-own-method.*diagnostics\.obj is a object"):
        run(diagnostics={"obj": object()})


def test_own_method_output_shapes_and_budget_are_checked(own_method_cell):
    cfg, run = own_method_cell
    sd = np.ones((1, 1))
    with pytest.raises(ValueError, match=r"posterior_sd of shape \(1, 1\), expected \(4, 1\)"):
        run(posterior_sd=sd)
    with pytest.raises(ValueError, match=r"posterior_sd of shape \(4,\)"):
        run(posterior_sd=np.ones(4))
    with pytest.raises(ValueError, match=r"epsilon=2.*more than the cell's budget \(epsilon=1"):
        run(privacy=own_privacy(2.0))
    with pytest.raises(ValueError, match="more than the cell's budget"):
        run(privacy=own_privacy(1.0, delta=1e-3))
    assert run(privacy=own_privacy(0.5))["privacy"]["epsilon"] == 0.5  # less than the budget is fine


# A cell file (hand-edited, or written by another tool) with a valid configuration but without the
# fields the reports read, or with text where numbers belong, was trusted as finished: the run then
# ended in a raw KeyError / TypeError while writing the reports (after computing the other cells).
@pytest.mark.parametrize(
    "edit",
    [
        lambda r: r.pop("single_draw_rmse_mean"),
        lambda r: r.pop("coverage_sd"),
        lambda r: r.__setitem__("rmse", "0.1"),
        lambda r: r.__setitem__("coverage", r["coverage"][:-1]),
        lambda r: r.__setitem__("num_replicates_used", "4"),
    ],
)
def test_a_finished_cell_file_must_hold_what_the_reports_read(edit, own_method_cell, tmp_path):
    import json

    from dpposterior.experiments import CorruptResultError
    from dpposterior.experiments.store import ResultStore

    cfg, run = own_method_cell
    rec = run()
    edit(rec)
    store = ResultStore(tmp_path)
    path = store.path(cfg)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(rec))
    with pytest.raises(CorruptResultError, match="delete it to recompute the cell"):
        store.load(cfg)
