"""``dpposterior fit --clip-check EPSILON`` and ``compare --clip-check EPSILON``: the gradient-norm histogram
as one more release of the run."""

from __future__ import annotations

import json

import pytest

import dpposterior as dpp
from dpposterior.cli import main
from dpposterior.tabular import example
from dpposterior.tabular.fit import compare_table, fit_table


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    return example.write_example(tmp_path_factory.mktemp("clipcheck"))


def _fit(table, tmp_path, clip, **kw):
    csv, toml = table
    lines = []
    result = fit_table(
        csv,
        toml,
        "default",
        epsilon=1.0,
        delta=1e-5,
        num_steps=200,
        clip=clip,
        seed=3,
        out=tmp_path / "report",
        progress=False,
        log=lines.append,
        **kw,
    )
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
    rc = main(
        [
            "fit",
            str(csv),
            "--target",
            "default",
            "--bounds",
            str(toml),
            "--epsilon",
            "1",
            "--delta",
            "1e-5",
            "--clip-check",
            "0",
            "--out",
            str(tmp_path / "r"),
        ]
    )
    assert rc != 0 and "clip_check" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


# ``dpposterior compare --clip-check EPSILON``: the histogram of each DP-SGD release, beyond the budget


def _compare(table, out, clip, num_steps=200, **kw):
    csv, toml = table
    lines = []
    result = compare_table(
        csv,
        toml,
        "default",
        epsilon=1.0,
        delta=1e-5,
        num_steps=num_steps,
        clip=clip,
        seed=3,
        out=out,
        progress=False,
        log=lines.append,
        **kw,
    )
    return result, lines, (out / "summary.md").read_text()


def test_compare_tiny_clip_is_reported_and_the_extra_release_composed(table, tmp_path):
    out = tmp_path / "cmp"
    result, lines, md = _compare(table, out, 0.05, methods=["na-dpvi", "naive"], clip_check=0.5)
    hist = result["clip_check"]
    assert hist.clipped_fraction > 0.5 and hist.privacy.epsilon == 0.5 and hist.privacy.delta == 0.0
    assert hist.clip == 0.05 and hist.num_records == result["design"].num_records
    saved = json.loads((out / "clip_check.json").read_text())
    assert saved["counts"] == [float(c) for c in hist.counts] and saved["privacy"]["epsilon"] == 0.5
    # the DPVI release got the whole budget (one release under "split"): the check is on top, not drawn from it
    entries = result["ledger"].entries
    assert [e.privacy.mechanism for e in entries] == [result["trace"].privacy.mechanism, "laplace_histogram"]
    eps_dpvi = entries[0].privacy.epsilon
    assert 0.99 < eps_dpvi <= 1.0 + 1e-9
    assert [e.privacy for e in dpp.Ledger.load(out / "ledger.json").entries] == [e.privacy for e in entries]
    total = result["total"].epsilon
    assert eps_dpvi < total <= eps_dpvi + 0.5 + 1e-9 and total > 1.0  # beyond the stated epsilon 1
    assert f"composed total of everything released (PLD, privacy.Ledger): epsilon = {total:.4g}" in md
    assert f"all releases together (PLD composition, privacy.Ledger): epsilon = {total:.4g}" in md
    assert "clip check (--clip-check 0.5): one more release, BEYOND this budget" in md
    assert "clip check of na-dpvi (gradient-norm histogram, beyond the budget): (epsilon=0.5, delta=0)" in md
    assert "## Clip check of the na-dpvi release (a DP release beyond the budget)" in md
    assert "| gradient norm | multiples of C | noisy count | share of N |" in md
    assert "WARNING: about" in md and "compare again with a larger --clip" in md
    assert "| clip check epsilon (beyond the budget) | 0.5 |" in md
    assert any(line.strip().startswith("clip check:") for line in lines)
    assert sorted(p.name for p in (out / "releases").iterdir()) == ["na-dpvi.npz"]


def test_compare_checks_the_dpvim_release_too_and_accounts_it(table, tmp_path):
    out = tmp_path / "cmp"
    result, lines, md = _compare(table, out, 0.05, methods=["na-dpvi", "dpvim"], clip_check=0.5)
    checks = result["clip_checks"]
    assert list(checks) == ["na-dpvi", "dpvim"] and result["clip_check"] is checks["na-dpvi"]
    hist = checks["dpvim"]
    assert hist.clipped_fraction > 0.5 and hist.clip == 0.05 and (hist.privacy.epsilon, hist.privacy.delta) == (0.5, 0)
    assert "loc gradient norms of DPVIm" in dict(hist.privacy.details)["statistic"]
    # its privacy: a ledger entry right after the dpvim release (in the report folder's ledger.json too)
    entries = result["ledger"].entries
    assert [e.label.split(" (")[0] for e in entries] == [
        "na-dpvi",
        "clip check of na-dpvi",
        "dpvim",
        "clip check of dpvim",
    ]
    assert entries[3].privacy == hist.privacy and entries[2].privacy.mechanism == "poisson_subsampled_gaussian"
    assert [e.privacy for e in dpp.Ledger.load(out / "ledger.json").entries] == [e.privacy for e in entries]
    # the total stated for the dpvim release includes its check: the release (0.5 of the split budget) + 0.5
    eps_dpvim, d_dpvim = entries[2].privacy.epsilon, entries[2].privacy.delta
    pair = dpp.Ledger()
    pair.add(entries[2].privacy, "dpvim")
    pair.add(hist, "check")
    both = pair.total(d_dpvim).epsilon
    assert eps_dpvim <= 0.5 + 1e-9 and eps_dpvim + 0.1 < both <= eps_dpvim + 0.5 + 1e-9
    saved = json.loads((out / "clip_check_dpvim.json").read_text())
    assert saved["counts"] == [float(c) for c in hist.counts] and saved["privacy"]["epsilon"] == 0.5
    assert saved["release"] == "dpvim" and saved["release_and_check"]["epsilon"] == pytest.approx(both, rel=1e-9)
    assert saved["release_and_check"]["delta"] == d_dpvim
    assert json.loads((out / "clip_check.json").read_text())["release"] == "na-dpvi"
    assert "## Clip check of the dpvim release (a DP release beyond the budget)" in md
    assert (
        "The dpvim release and its clip check together (PLD composition, privacy.Ledger): epsilon = "
        f"{both:.4g} at delta = {d_dpvim:.3g}"
    ) in md
    assert "clip check of dpvim (gradient-norm histogram, beyond the budget): (epsilon=0.5, delta=0)" in md
    assert "clip check (--clip-check 0.5): 2 more releases, one per DP-SGD release, BEYOND this budget" in md
    assert "| clip check epsilon (beyond the budget) | 0.5 each (na-dpvi, dpvim) |" in md
    assert "the clip check of na-dpvi in clip_check.json, of dpvim in clip_check_dpvim.json" in md
    total = result["total"].epsilon  # everything: both releases (1.0 together) and both checks
    assert total > 1.5 and total == pytest.approx(result["ledger"].total(1e-5).epsilon)
    assert f"composed total of everything released (PLD, privacy.Ledger): epsilon = {total:.4g}" in md
    assert md.count("WARNING: about") == 2
    assert any(line.strip().startswith("clip check of dpvim:") for line in lines)


def test_compare_cli_generous_clip_split_budget_and_no_stale_check(table, tmp_path):
    csv, toml = table
    out = tmp_path / "cmp"
    argv = [
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
        "naive",
        "dpvim",
        "--steps",
        "200",
        "--clip",
        "50",
        "--seed",
        "4",
        "--out",
        str(out),
        "--no-progress",
    ]
    assert main(argv + ["--clip-check", "1"]) == 0
    md = (out / "summary.md").read_text()
    assert "## Clip check of the na-dpvi release" in md and "## Clip check of the dpvim release" in md
    assert "WARNING: about" not in md
    for name in ("clip_check.json", "clip_check_dpvim.json"):
        saved = json.loads((out / name).read_text())
        assert saved["clipped_fraction"] < 0.01 and saved["privacy"]["epsilon"] == 1.0
    book = dpp.Ledger.load(out / "ledger.json")
    # "split" over the two method releases as without the checks (0.5 each); a check (1.0) of each comes on top
    eps = [e.privacy.epsilon for e in book.entries]
    mechs = [e.privacy.mechanism for e in book.entries]
    assert mechs.count("laplace_histogram") == 2 and len(eps) == 4
    assert sorted(eps)[-2:] == [1.0, 1.0] and all(e <= 0.5 + 1e-9 for e in sorted(eps)[:2])
    assert "each of the 2 releases got (epsilon, delta) = (0.5, 5e-06)" in md
    total = float(md.split("composed total of everything released (PLD, privacy.Ledger): epsilon = ")[1].split()[0])
    assert total > 2.0 and total == pytest.approx(book.total(1e-5).epsilon, rel=1e-3)
    assert main(argv) == 0  # again without --clip-check: no extra release, and the earlier files go
    md = (out / "summary.md").read_text()
    assert "Clip check" not in md and "clip check" not in md and not (out / "clip_check.json").exists()
    assert not (out / "clip_check_dpvim.json").exists()
    # the ledger is append-only: the first run's four releases stay, the second adds its two, no check
    mechs = [e.privacy.mechanism for e in dpp.Ledger.load(out / "ledger.json").entries]
    assert len(mechs) == 6 and mechs[:4] == [e.privacy.mechanism for e in book.entries]
    assert mechs[4:].count("laplace_histogram") == 0


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "1e-40"])
@pytest.mark.parametrize("command", ["fit", "compare"])
def test_a_bad_clip_check_epsilon_is_refused_before_any_release(table, tmp_path, capsys, command, value):
    csv, toml = table
    rc = main(
        [
            command,
            str(csv),
            "--target",
            "default",
            "--bounds",
            str(toml),
            "--epsilon",
            "1",
            "--delta",
            "1e-5",
            "--steps",
            "200",
            f"--clip-check={value}",
            "--out",
            str(tmp_path / "r"),
            "--no-progress",
        ]
    )
    err = capsys.readouterr().err
    assert rc != 0 and "--clip-check" in err and "Traceback" not in err
    assert not (tmp_path / "r").exists()  # nothing released, nothing written


@pytest.mark.parametrize(
    "methods, model, why",
    [
        (["gibbs-ss-noisy"], "linear", "gibbs-ss-noisy clip no per-record gradients"),
        (["dp-fast-mh"], "logistic", "dp-fast-mh clip no per-record gradients"),
    ],
)
def test_compare_clip_check_without_a_dp_sgd_release_is_refused(table, tmp_path, methods, model, why):
    csv, toml = table
    with pytest.raises(ValueError, match="--clip-check") as err:
        compare_table(
            csv,
            toml,
            "income" if model == "linear" else "default",
            model=model,
            methods=methods,
            epsilon=1.0,
            delta=1e-5,
            num_steps=200,
            out=tmp_path / "r",
            progress=False,
            clip_check=0.1,
            log=lambda _: None,
        )
    assert why in str(err.value) and "add na-dpvi, naive or dpvim" in str(err.value)
    assert not (tmp_path / "r").exists()


def test_compare_clip_check_of_dpvim_alone_was_refused_and_now_checks_it(table, tmp_path):
    out = tmp_path / "cmp"
    result, _, md = _compare(table, out, None, methods=["dpvim"], clip_check=0.5, num_steps=100)
    assert result["clip_check"] is None and list(result["clip_checks"]) == ["dpvim"]  # "clip_check": NA-DPVI's
    assert (out / "clip_check_dpvim.json").exists() and not (out / "clip_check.json").exists()
    labels = [e.label for e in result["ledger"].entries]
    assert labels == [
        "dpvim (its own DP-SGD release)",
        "clip check of dpvim (gradient-norm histogram, beyond the budget)",
    ]
    assert "clip check (--clip-check 0.5): one more release, BEYOND this budget" in md
    assert "the clip check in clip_check_dpvim.json" in md


def test_compare_cli_clip_check_without_dp_sgd_is_refused(table, tmp_path, capsys):
    csv, toml = table
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
            "dp-fast-mh",
            "--clip-check",
            "0.1",
            "--out",
            str(tmp_path / "r"),
        ]
    )
    err = capsys.readouterr().err
    assert rc != 0 and "--clip-check" in err and "no DP-SGD release" in err
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    "value, error", [(float("nan"), ValueError), (0.0, ValueError), ("0.1", TypeError), (True, TypeError)]
)
def test_compare_table_refuses_a_bad_clip_check_before_any_release(table, tmp_path, value, error):
    csv, toml = table
    with pytest.raises(error, match=r"clip_check \(--clip-check"):
        compare_table(
            csv,
            toml,
            "default",
            methods=["na-dpvi"],
            epsilon=1.0,
            delta=1e-5,
            num_steps=200,
            out=tmp_path / "r",
            progress=False,
            clip_check=value,
            log=lambda _: None,
        )
    assert not (tmp_path / "r").exists()


def test_compare_help_says_what_the_clip_check_covers(capsys):
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--clip-check EPSILON" in out and "Beyond the budget" in out
    assert "dpvim's (its loc gradients at its own clip; clip_check_dpvim.json)" in out
