"""The DP PAC-Bayes report: table and figure from the experiment's rows (no training here)."""

from __future__ import annotations

from dpposterior.reproduce.pacbayes import write_pacbayes_report


def _row(labels, prior, eps, test, bound, h=None, c=None):
    return dict(
        labels=labels,
        prior=prior,
        epsilon=eps,
        m=100,
        num_params=10,
        train_error=test,
        test_error=test,
        stochastic_test_error=test,
        posterior_std=0.1,
        bound=bound,
        empirical_error=test,
        kl=1.0,
        h_bound=h,
        c_bound=c,
        certificate={},
        seconds=1.0,
    )


def test_report_has_the_table_the_figure_and_the_command(tmp_path):
    rows = [
        _row("true", "data-independent", None, 0.05, 0.4),
        _row("true", "dp", 0.1, 0.09, 0.19, 0.2, 0.24),
        _row("random", "data-independent", None, 0.5, 0.84),
        _row("random", "dp", 0.1, 0.47, 0.63, 0.6, 1.57),
    ]
    path = write_pacbayes_report(
        rows, tmp_path, quick=True, wall_seconds=3.0, command="dpposterior reproduce pacbayes --quick"
    )
    text = path.read_text()
    assert path.name == "pacbayes-quick.md" and (tmp_path / "pacbayes-quick.png").stat().st_size > 1000
    assert "`dpposterior reproduce pacbayes --quick`" in text and "NOT results" in text
    assert "| true | dp | 0.1 |" in text and "| random | data-independent | - |" in text
    assert "exact-sample assumption" in text
    # every row, machine-readable, beside the report (the terminal shows a table, not the rows)
    import json

    data = json.loads((tmp_path / "pacbayes-quick.json").read_text())
    assert data["rows"] == rows and data["settings"]["pca_dims"] > 0 and "`pacbayes-quick.json`" in text


def test_report_states_the_settings_the_rows_were_computed_with(tmp_path):
    # a report of a custom run (m = 400, 10 outer steps) stated FULL's settings ("m": null, 500 steps) beside its numbers
    import dataclasses

    from dpposterior.reproduce.pacbayes import FULL

    custom = dataclasses.asdict(dataclasses.replace(FULL, m=400, outer_steps=10))
    rows = [dict(_row("true", "dp", 0.1, 0.09, 0.19, 0.2, 0.24), settings=custom)]
    text = write_pacbayes_report(rows, tmp_path, quick=False, wall_seconds=3.0, command="run_pacbayes(...)").read_text()
    assert '"m": 400' in text and '"outer_steps": 10' in text and '"m": null' not in text
    text = write_pacbayes_report(
        [_row("true", "dp", 0.1, 0.09, 0.19)], tmp_path, quick=False, wall_seconds=3.0, command="c"
    ).read_text()
    assert '"m": null' in text and '"outer_steps": 500' in text  # rows without settings: FULL, as before
