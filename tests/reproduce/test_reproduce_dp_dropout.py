"""``dpposterior reproduce dp-dropout --quick`` (issue 8): the pipeline at toy sizes, and the report's
tables from rows whose numbers are known."""

from __future__ import annotations

import json

import pytest

from dpposterior.cli import main
from dpposterior.reproduce.dp_dropout import METHODS, format_tables
from input_checks import raises_with as _raises


def test_quick_cli_writes_the_report_under_the_working_directory_and_prints_a_table(tmp_path, capsys, monkeypatch):
    # the report went to docs/results (the source tree) by default, and the progress lines were Python dicts
    monkeypatch.chdir(tmp_path)
    assert main(["reproduce", "dp-dropout", "--quick"]) == 0
    out = tmp_path / "dpposterior-results" / "dp-dropout"
    md = (out / "dp-dropout-quick.md").read_text()
    assert (out / "dp-dropout-quick.png").stat().st_size > 1000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dpposterior-results"]
    assert "Command: `dpposterior reproduce dp-dropout --quick --out dpposterior-results/dp-dropout`" in md
    data = json.loads((out / "dp-dropout-quick.json").read_text())  # the machine-readable rows
    printed = capsys.readouterr().out
    assert "{'" not in printed and "': " not in printed, printed  # no dict
    lines = printed.splitlines()
    head = next(i for i, line in enumerate(lines) if line.split()[:3] == ["dataset", "epsilon", "method"])
    table = lines[head : head + 2 + len(data["rows"])]
    assert set(table[1]) <= {"-", " "}
    assert len({len(line) for line in table[2:]}) == 1  # aligned: every row as long as the others
    for line, row in zip(table[2:], data["rows"]):
        assert line.split()[:4] == [row["dataset"], f"{row['epsilon']:g}", row["method"], str(row["seed"])]
        assert f"{row['accuracy']:.4f}" in line
    assert (
        lines[-1] == f"wrote {out.relative_to(tmp_path) / 'dp-dropout-quick.md'} and dp-dropout-quick.json "
        "(every row, machine-readable)"
    )
    assert "wall time" in md and "NOT results" in md
    for m in METHODS:
        assert f"| adult | 2 | {m} |" in md or f"| 2 | {m} |" in md
    # the least-noise row names the PLD accountant (it is never looser than AC or zCDP)
    row = next(
        line for line in md.splitlines() if line.startswith("| adult | 2 |") and "DPD-" in line and line.count("|") == 9
    )
    assert row.split("|")[6].strip() == "DPD-PLD"


def _rows():
    rows, sigma_rows = [], []
    sig = {"DPD-AC": 20.0, "DPD-zCDP": 50.0, "DPD-PLD": 2.0, "DP-SGD": 2.0}
    acc = {"DPD-AC": 0.7, "DPD-zCDP": 0.6, "DPD-PLD": 0.8, "DP-SGD": 0.75}
    for seed, bump in ((0, 0.0), (1, 0.02)):
        for m in METHODS:
            rows.append(
                dict(
                    dataset="adult",
                    n_train=10,
                    n_test=5,
                    epsilon=1.0,
                    method=m,
                    seed=seed,
                    sigma=sig[m],
                    epsilon_spent=1.0,
                    accuracy=acc[m] + bump,
                    log_likelihood=-0.5,
                    seconds=1.0,
                )
            )
    for m in ("DPD-AC", "DPD-zCDP", "DPD-PLD"):
        sigma_rows.append(
            dict(
                dataset="adult",
                epsilon=1.0,
                method=m,
                sigma=sig[m],
                certified={"ac": None if m == "DPD-PLD" else 1.0, "zcdp": 3.0, "pld": 0.1},
            )
        )
    return rows, sigma_rows


def test_tables_pick_the_least_noise_and_average_seeds():
    text = format_tables(*_rows())
    assert "| adult | 1 | 20 | 50 | 2 | DPD-PLD | 0.7100 / 0.6100 / **0.8100** | 0.7600 |" in text
    assert "| adult | 1 | DPD-PLD | 2 | no bound (eps_iter >= 1) | 3 | 0.1 |" in text
    assert "needs 10.0 to 10.0 times the PLD sigma" in text and "zCDP accountant" in text and "25.0 to 25.0" in text
    assert "in 1 of 1 (data set, epsilon) cells" in text
    assert "adult accuracy +0.0500 to +0.0500" in text
    assert "| 1 | DPD-AC | 20 | 1 | 0.7100 (0.0141) | -0.5000 (0.0000) | 2 |" in text


def _settings(**kw):
    from dpposterior.reproduce.dp_dropout import DPDropoutSettings

    base = dict(
        epsilons=(2.0,),
        datasets=("mnist79",),
        num_steps=4,
        batch_size=20,
        train_size=100,
        test_size=50,
        kept_samples=2,
        hidden=2,
        pca_dims=5,
    )
    return DPDropoutSettings(**{**base, **kw})


def test_pca_dims_beyond_the_public_rank_is_refused_before_the_records_are_read(monkeypatch):
    # The public digits' covariance has rank 625 (139 pixels are constant): whitening by eigenvalues that are
    # zero up to rounding gave NaN features for pca_dims > 675 (the run then failed with "data[0] must not
    # contain NaN or inf: found 2600 non-finite values") and, for 626 to 675, features up to 2.8e6 (630) or 5.7e8
    # (650) along directions of rounding noise (run silently).
    import numpy as np
    import pytest

    import dpposterior.datasets as ds
    from dpposterior.reproduce.dp_dropout import run_dp_dropout
    from dpposterior.reproduce.pacbayes import public_pca_features, public_pca_rank

    assert public_pca_rank() == 625
    centre, proj = public_pca_features(625)
    assert proj.shape == (784, 625) and np.all(np.isfinite(proj))
    for dims in (626, 630, 700, 784, True):
        with pytest.raises(ValueError, match=r"dims must be an integer in \[1, 625\]"):
            public_pca_features(dims)

    def no_records(split="train"):
        raise AssertionError("the sensitive records were read before the settings were checked")

    monkeypatch.setattr(ds, "load_mnist79", no_records)
    for dims in (630, 700):
        with pytest.raises(ValueError, match=r"^pca_dims must be an integer in \[1, 625\].*got " + str(dims)):
            run_dp_dropout(settings=_settings(pca_dims=dims))


def test_train_test_or_batch_size_beyond_the_split_names_the_setting():
    # was NumPy's "Cannot take a larger sample than population when 'replace' is False"
    import pytest

    from dpposterior.reproduce.dp_dropout import run_dp_dropout

    with pytest.raises(
        ValueError,
        match=r"^train_size must be at most the 12214 records of mnist79's training split"
        r".*got 50000$",
    ):
        run_dp_dropout(settings=_settings(train_size=50000))
    with pytest.raises(ValueError, match=r"^test_size must be at most the 2037 records of mnist79's test split"):
        run_dp_dropout(settings=_settings(test_size=50000))
    # the whole split (train_size None) and a batch above it: was "sampling_rate must lie in (0, 1], got 1.637"
    with pytest.raises(
        ValueError,
        match=r"^batch_size must be at most the 12214 training records of mnist79 used"
        r".*got 20000$",
    ):
        run_dp_dropout(settings=_settings(train_size=None, batch_size=20000))


# the DP dropout reproduction's settings
@pytest.mark.parametrize(
    "kw,exc,word",
    [
        (dict(kept_samples=0), ValueError, "kept_samples"),  # was a ZeroDivisionError in run_dp_dropout
        (dict(epsilons=()), TypeError, "epsilons"),  # was min() of an empty sequence in the report
        (dict(seeds=(0, 0)), ValueError, "seeds"),  # was one run averaged as two seeds (sd 0)
        (dict(epsilons=(-1.0,)), ValueError, "epsilon"),
        (dict(batch_size=600), ValueError, "batch_size"),  # q = 600 / 500 > 1: was "sampling_rate" at run time
        (dict(datasets=("mnist",)), ValueError, "datasets"),
        (dict(seeds=(True,)), TypeError, "seeds"),
    ],
)
def test_dp_dropout_settings_are_checked_when_made(kw, exc, word):
    import dataclasses

    from dpposterior.reproduce.dp_dropout import QUICK

    _raises(lambda: dataclasses.replace(QUICK, **kw), exc, word)
