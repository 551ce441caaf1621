"""``fit`` and ``compare`` check every output path and that the ledger composes with the planned
releases before any data is read or budget spent: an uncomposable ledger fails at once, clearly."""

from __future__ import annotations

import time

import pytest

import fake_mechanisms
from dpposterior.privacy import Ledger, PrivacySpent
from dpposterior.tabular import example, fit

SETTINGS = dict(epsilon=1.0, delta=1e-5, num_steps=20, progress=False, log=lambda line: None)


@pytest.fixture(scope="module")
def loans(tmp_path_factory):
    return example.write_example(tmp_path_factory.mktemp("loans"), n=200, seed=3)


@pytest.fixture
def untouched(monkeypatch):
    """The data must not be read and no mechanism run: each would fail the test."""

    def never(*args, **kwargs):
        raise AssertionError("the data was read (or a release made) before the checks")

    calls = fake_mechanisms.install(monkeypatch)
    monkeypatch.setattr(fit, "read_table", never)
    return calls


def _ledger(tmp_path, sigma, steps):
    book = Ledger()
    book.add(
        PrivacySpent(
            epsilon=1.0,
            delta=1e-6,
            neighbouring="add_remove",
            accountant="pld",
            mechanism="poisson_subsampled_gaussian",
            noise_multiplier=sigma,
            sampling_rate=0.01,
            num_steps=steps,
        ),
        "an earlier run",
    )
    return book.save(tmp_path / "ledger.json")


@pytest.mark.parametrize(
    "sigma,steps,match",
    [
        (1e-9, 10, "epsilon above 100"),  # was "Maximum allowed size exceeded", after the release
        (1.0, 10**12, "1000000000000 self-composed steps"),  # was a hang of minutes, after the release
    ],
)
def test_an_uncomposable_ledger_is_refused_at_once(loans, tmp_path, untouched, sigma, steps, match):
    csv, toml = loans
    path = _ledger(tmp_path, sigma, steps)
    for run in (
        lambda: fit.fit_table(csv, toml, "default", out=tmp_path / "fit", ledger=path, **SETTINGS),
        lambda: fit.compare_table(
            csv, toml, "default", methods=["na-dpvi"], out=tmp_path / "cmp", ledger=path, **SETTINGS
        ),
    ):
        start = time.perf_counter()
        with pytest.raises(
            ValueError,
            match=rf"cannot be composed with this run's release.*{match}.*nothing was "
            "released",
        ):
            run()
        assert time.perf_counter() - start < 30
    assert not untouched and len(Ledger.load(path)) == 1


def test_an_output_path_that_cannot_be_written_is_refused_before_the_release(loans, tmp_path, untouched):
    csv, toml = loans
    (tmp_path / "fit" / "trace.npz").mkdir(parents=True)  # a folder where the release file goes
    with pytest.raises(ValueError, match="trace.npz' is a folder"):
        fit.fit_table(csv, toml, "default", out=tmp_path / "fit", **SETTINGS)
    (tmp_path / "cmp").mkdir()
    (tmp_path / "cmp" / "releases").write_text("a file where the releases' folder goes")
    with pytest.raises(ValueError, match="releases"):
        fit.compare_table(csv, toml, "default", methods=["na-dpvi"], out=tmp_path / "cmp", **SETTINGS)
    assert not untouched
