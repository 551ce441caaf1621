"""A release whose file cannot be written after it is made is saved in a temporary folder and recorded
in the ledger, and the error says where, in words rather than an errno."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

import fake_mechanisms
from dpposterior.privacy import Ledger
from dpposterior.tabular import example, fit, releases
from dpposterior.vi import DPVITrace

SETTINGS = dict(epsilon=1.0, delta=1e-5, num_steps=20, progress=False, log=lambda line: None)


@pytest.fixture(scope="module")
def loans(tmp_path_factory):
    return example.write_example(tmp_path_factory.mktemp("loans"), n=200, seed=3)


def _disk_full_in(folder: Path, original):
    """``original`` (a save function), failing as a full disk would for files under ``folder``."""

    def save(self_or_release, path, *rest):
        if Path(path).resolve().is_relative_to(folder.resolve()):
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return original(self_or_release, path, *rest)

    return save


def _spare_path(message: str) -> Path:
    return Path(message.split("it is saved in '")[1].split("'")[0])


def test_fit_saves_the_release_elsewhere_and_records_it(loans, tmp_path, monkeypatch):
    fake_mechanisms.install(monkeypatch)
    csv, toml = loans
    out = tmp_path / "fit"
    monkeypatch.setattr(DPVITrace, "save", _disk_full_in(out, DPVITrace.save))
    with pytest.raises(ValueError) as caught:  # a ReleaseWriteError
        fit.fit_table(csv, toml, "default", out=out, ledger=tmp_path / "ledger.json", **SETTINGS)
    message = str(caught.value)
    assert "No space left on device" in message and "Errno" not in message
    assert "the DPVI release could not be written to" in message and "recorded in the ledger" in message
    spare = _spare_path(message)
    assert DPVITrace.load(spare).privacy == Ledger.load(tmp_path / "ledger.json").entries[0].privacy


def test_compare_saves_the_release_elsewhere_and_records_it(loans, tmp_path, monkeypatch):
    calls = fake_mechanisms.install(monkeypatch)
    csv, toml = loans
    out = tmp_path / "cmp"
    full = _disk_full_in(out / "releases", lambda release, path: releases.save_release(release, path))
    monkeypatch.setattr(fit, "save_release", lambda release, path: full(release, path))
    with pytest.raises(ValueError, match="the na-dpvi release could not be written to") as caught:
        fit.compare_table(csv, toml, "default", methods=["na-dpvi", "dp-fast-mh"], out=out, **SETTINGS)
    message = str(caught.value)
    assert "No space left on device" in message and "Errno" not in message
    assert [c[0] for c in calls] == ["na-dpvi"]  # the run stopped: no further release was made
    assert DPVITrace.load(_spare_path(message)).privacy == Ledger.load(out / "ledger.json").entries[0].privacy
