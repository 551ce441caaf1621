"""The progress tables of ``dpposterior reproduce``: aligned columns, nothing cut, no Python dicts."""

from __future__ import annotations

import pytest

from dpposterior.reproduce.console import Column, RowPrinter, format_rows
from dpposterior.reproduce.dp_dropout import PROGRESS_COLUMNS as DROPOUT
from dpposterior.reproduce.dp_fast_mh import GMM_COLUMNS, MNIST_COLUMNS
from dpposterior.reproduce.pacbayes import PROGRESS_COLUMNS as PACBAYES

COLUMNS = (
    Column("method", "method", "s", 8),
    Column("epsilon", "epsilon", "g", 7),
    Column("accuracy", "accuracy", ".4f", 8),
)


def test_rows_are_aligned_under_their_header_and_a_missing_value_is_a_dash():
    lines = []
    show = RowPrinter(COLUMNS, write=lines.append, title="runs:")
    show({"method": "DPD-PLD", "epsilon": 1.0, "accuracy": 0.91234, "other": [1, 2]})
    show({"method": "naive", "epsilon": None, "accuracy": 0.5})
    head, rule, first, second = lines[1].splitlines() + lines[2:]
    assert lines[0] == "runs:"
    assert head == "method    epsilon  accuracy" and rule == "--------  -------  --------"
    assert first == "DPD-PLD         1    0.9123"
    assert second == "naive           -    0.5000"
    assert len(first) == len(second) == len(rule)


def test_a_value_wider_than_its_column_widens_its_row_and_is_not_cut():
    text = format_rows([{"method": "a-very-long-method-name", "epsilon": 0.3, "accuracy": 1.0}], COLUMNS)
    assert "a-very-long-method-name" in text.splitlines()[2]
    assert (
        format_rows([{"method": "x", "epsilon": float("inf"), "accuracy": "n/a"}], COLUMNS).splitlines()[2]
        == "x             inf       n/a"
    )


def test_an_empty_table_is_refused():
    with pytest.raises(ValueError, match="at least one column"):
        RowPrinter(())


@pytest.mark.parametrize(
    "columns",
    [DROPOUT, PACBAYES, GMM_COLUMNS, MNIST_COLUMNS],
    ids=["dp-dropout", "pacbayes", "dp-fast-mh gmm", "dp-fast-mh mnist"],
)
def test_every_reproduction_names_each_column_once(columns):
    assert len({c.key for c in columns}) == len(columns) and all(c.header for c in columns)


def test_the_dp_dropout_table_shows_a_row_of_the_run():
    row = dict(
        dataset="adult",
        n_train=10,
        n_test=5,
        epsilon=0.3,
        method="DPD-zCDP",
        seed=1,
        sigma=12.3456,
        epsilon_spent=0.29999,
        accuracy=0.8,
        log_likelihood=-0.43219,
        seconds=12.34,
    )
    line = format_rows([row], DROPOUT).splitlines()[2]
    assert line.split() == ["adult", "0.3", "DPD-zCDP", "1", "12.35", "0.3", "0.8000", "-0.4322", "12.3"]
