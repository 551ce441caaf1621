"""``dpposterior fit --clip-check EPSILON``: the gradient-norm histogram as a second release of the fit."""

from __future__ import annotations

import json

import pytest

import dpposterior as dpp
from dpposterior.cli import main
from dpposterior.tabular import example
from dpposterior.tabular.fit import fit_table


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    return example.write_example(tmp_path_factory.mktemp("clipcheck"))


def _fit(table, tmp_path, clip, **kw):
    csv, toml = table
    lines = []
    result = fit_table(csv, toml, "default", epsilon=1.0, delta=1e-5, num_steps=200, clip=clip, seed=3,
                       out=tmp_path / "report", progress=False, log=lines.append, **kw)
    return result, lines, (tmp_path / "report" / "summary.md").read_text()


def test_a_tiny_clip_is_reported_and_the_second_release_composed(table, tmp_path):
    result, lines, md = _fit(table, tmp_path, 0.05, clip_check=0.5, ledger=tmp_path / "ledger.json")
    hist = result["clip_check"]
    assert hist.clipped_fraction > 0.5 and hist.privacy.epsilon == 0.5 and hist.privacy.delta == 0.0
    saved = json.loads((tmp_path / "report" / "clip_check.json").read_text())
    assert saved["counts"] == [float(c) for c in hist.counts] and saved["privacy"]["epsilon"] == 0.5
    assert "## Clip check (a second DP release)" in md and "WARNING: about" in md
    assert "gradient-norm histogram (clip check): (epsilon=0.5, delta=0)" in md
    total = result["trace"].privacy.epsilon
    book = dpp.Ledger.load(tmp_path / "ledger.json")
    assert [e.privacy.mechanism for e in book.entries] == [result["trace"].privacy.mechanism, "laplace_histogram"]
    both = book.total(1e-5).epsilon
    assert total < both <= total + 0.5 + 1e-9
    assert f"all releases together (PLD composition, privacy.Ledger): epsilon = {both:.4g}" in md
    assert any(line.strip().startswith("clip check:") for line in lines)


def test_a_generous_clip_shows_no_clipping_and_no_warning(table, tmp_path):
    result, _, md = _fit(table, tmp_path, 50.0, clip_check=1.0)
    assert result["clip_check"].clipped_fraction < 0.01
    assert "## Clip check" in md and "WARNING: about" not in md
    result, _, md = _fit(table, tmp_path, 50.0)  # no --clip-check: no second release (the earlier file goes)
    assert result["clip_check"] is None and "Clip check" not in md
    assert not (tmp_path / "report" / "clip_check.json").exists()


def test_the_cli_flag_is_checked_before_any_release(table, tmp_path, capsys):
    csv, toml = table
    rc = main(["fit", str(csv), "--target", "default", "--bounds", str(toml), "--epsilon", "1", "--delta", "1e-5",
               "--clip-check", "0", "--out", str(tmp_path / "r")])
    assert rc != 0 and "clip_check" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
