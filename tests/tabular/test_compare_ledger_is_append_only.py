"""``compare`` never drops a release from its ledger: a second run into the same folder, or with
``--ledger``, appends to the releases recorded before."""

from __future__ import annotations

import pytest

import fake_mechanisms
from dpposterior.cli import main
from dpposterior.privacy import Ledger, PrivacySpent
from dpposterior.tabular import example
from dpposterior.tabular.fit import compare_table

SETTINGS = dict(epsilon=1.0, delta=1e-5, num_steps=20, progress=False, log=lambda line: None)


@pytest.fixture(scope="module")
def loans(tmp_path_factory):
    return example.write_example(tmp_path_factory.mktemp("loans"), n=200, seed=3)


def test_a_second_run_into_the_same_folder_keeps_the_first_runs_releases(loans, tmp_path, monkeypatch):
    fake_mechanisms.install(monkeypatch)
    csv, toml = loans
    out = tmp_path / "cmp"
    for _ in range(2):
        compare_table(csv, toml, "default", methods=["na-dpvi"], out=out, **SETTINGS)
    entries = Ledger.load(out / "ledger.json").entries
    assert len(entries) == 2  # two releases were made; both are recorded
    assert entries[0].privacy == entries[1].privacy


def test_compare_ledger_option_appends_to_the_given_file(loans, tmp_path, monkeypatch):
    fake_mechanisms.install(monkeypatch)
    csv, toml = loans
    book = Ledger()
    book.add(
        PrivacySpent(epsilon=0.5, delta=0.0, neighbouring="add_remove", accountant="pure", mechanism="laplace"),
        "an earlier release",
    )
    path = book.save(tmp_path / "ledger.json")
    rc = main(
        [
            "compare",
            str(csv),
            "--target",
            "default",
            "--bounds",
            str(toml),
            "--epsilon",
            "1",
            "--delta",
            "1e-5",
            "--methods",
            "na-dpvi",
            "--steps",
            "20",
            "--out",
            str(tmp_path / "out"),
            "--ledger",
            str(path),
            "--no-progress",
        ]
    )
    assert rc == 0
    labels = [e.label for e in Ledger.load(path).entries]
    assert labels[0] == "an earlier release" and len(labels) == 2
    assert not (tmp_path / "out" / "ledger.json").exists()  # the releases are recorded in the given ledger
