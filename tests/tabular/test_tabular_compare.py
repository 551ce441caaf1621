"""``dpposterior compare``: several methods, one budget, one report."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpposterior.cli import main
from dpposterior.privacy import Ledger
from dpposterior.tabular import example
from dpposterior.tabular.fit import compare_table, resolve_model


@pytest.fixture(scope="module")
def loans(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("compare")
    return example.write_example(tmp, n=1500, seed=3)


@pytest.mark.slow  # long: Gibbs-SS-Noisy and DPVI compile
def test_compare_split_budget_linear(loans, tmp_path, capsys):
    csv, toml = loans
    out = tmp_path / "cmp"
    r = compare_table(
        csv,
        toml,
        "income",
        model="linear",
        features=["age", "region"],
        methods=["na-dpvi", "naive", "gibbs-ss-noisy"],
        epsilon=1.0,
        delta=1e-5,
        num_steps=500,
        out=out,
        seed=2,
        progress=False,
    )
    assert set(r["posteriors"]) == {"na-dpvi", "naive", "gibbs-ss-noisy"}
    # two releases (naive shares na-dpvi's), each with half the budget; together within (1, 1e-5)
    eps = [e.privacy.epsilon for e in r["ledger"].entries]
    assert len(eps) == 2 and eps[0] <= 0.5 + 1e-9 and eps[1] == pytest.approx(0.5)
    assert r["total"].epsilon <= 1.0
    again = Ledger()
    for e in r["ledger"].entries:
        again.add(e.privacy)
    assert again.total(1e-5).epsilon == pytest.approx(r["total"].epsilon, rel=1e-9)
    # each release was written as it was made, with the ledger of both
    assert sorted(p.name for p in (out / "releases").iterdir()) == ["gibbs-ss-noisy.npz", "na-dpvi.npz"]
    assert [e.privacy for e in Ledger.load(out / "ledger.json").entries] == [e.privacy for e in r["ledger"].entries]
    md = (out / "summary.md").read_text()
    assert "| parameter | na-dpvi | naive | gibbs-ss-noisy |" in md
    assert "each release is saved in releases/" in md
    assert "each of the 2 releases got (epsilon, delta) = (0.5, 5e-06)" in md
    assert "'naive' is the last iterate of the na-dpvi release" in md
    assert (out / "summary.html").read_text().count("data:image/png;base64,") == 1
    # the three posteriors describe the same parameters (sigma2 and the weights), in the same order
    names = [[row["parameter"] for row in r["summaries"][m]] for m in r["summaries"]]
    assert names[0] == names[1] == names[2] and names[0][0].startswith("sigma2")
    # each posterior's InferenceData, its weights named by the design's columns, its release's privacy
    for m, idata in r["inference_data"].items():
        assert idata.posterior["w"].dims[-1] == "feature", m
        columns = [c for c in r["design"].feature_names if c != "(intercept)"] + ["(intercept)"]
        assert list(idata.posterior["feature"].values) == columns
        assert idata.attrs["privacy_epsilon"] == r["posteriors"][m].privacy.epsilon
    out_text = capsys.readouterr().out
    assert "[1/4] reading" in out_text and "[4/4] writing the report" in out_text


@pytest.mark.slow  # long: kept out of the default run, which must stay short
def test_compare_each_budget_cli(tmp_path):
    """The README example (N = 4000, T = 2000: the fit test's compiled DPVI program is reused)."""
    csv, toml = example.write_example(tmp_path)
    out = tmp_path / "each"
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
            "dpvim",
            "--budget",
            "each",
            "--seed",
            "1",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    assert rc == 0
    md = (out / "summary.md").read_text()
    assert "budget 'each': each of the 2 releases got the full (1, 1e-05)" in md
    total = float(md.split("composed total of everything released (PLD, privacy.Ledger): epsilon = ")[1].split()[0])
    assert 1.0 < total < 2.0  # two full-budget releases: more than one, less than basic composition
    rows = [line for line in md.splitlines() if line.startswith("| age |")]
    assert len(rows) == 1 and rows[0].count("[") == 2  # both methods report an interval for age


def test_custom_model_is_resolved_from_module_and_function():
    from tabular_models import student_t_logistic

    fn, kind, intercept, label = resolve_model("tabular_models:student_t_logistic")
    assert fn is student_t_logistic and kind == "" and intercept and label == "tabular_models:student_t_logistic"
    with pytest.raises(ValueError, match="module 'tabular_models' has no callable 'nope'"):
        resolve_model("tabular_models:nope")
    path = Path(__file__).with_name("tabular_models.py")
    fn, *_ = resolve_model(f"{path}:student_t_logistic")  # a file path works too
    assert fn.__name__ == "student_t_logistic"
    with pytest.raises(ValueError, match="cannot import module 'no/such.py'"):
        resolve_model("no/such.py:f")


@pytest.mark.slow  # about 40 s: two compiles of a new model
def test_compare_custom_model(loans, tmp_path):
    csv, toml = loans
    out = tmp_path / "custom"
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
            "naive",
            "dpvim",
            "--steps",
            "400",
            "--seed",
            "1",
            "--out",
            str(out),
            "--model",
            "tabular_models:student_t_logistic",
            "--no-progress",
        ]
    )
    assert rc == 0
    md = (out / "summary.md").read_text()
    assert "dpposterior compare: tabular_models:student_t_logistic of 'default' on loans.csv" in md
    assert "| parameter | na-dpvi | naive | dpvim |" in md and "| region=east |" in md


@pytest.mark.slow  # about 40 s: a DPVI release and a DP-Fast MH chain
def test_compare_with_dp_fast_mh(loans, tmp_path):
    csv, toml = loans
    r = compare_table(
        csv,
        toml,
        "default",
        methods=["na-dpvi", "dp-fast-mh"],
        epsilon=1.0,
        delta=1e-5,
        num_steps=1000,
        out=tmp_path / "mh",
        seed=4,
        progress=False,
    )
    chain = r["posteriors"]["dp-fast-mh"]
    assert chain.privacy.mechanism == "dp_fast_mh" and chain.privacy.neighbouring == "replace_one"
    assert chain.privacy.epsilon <= 0.5 + 1e-6 and chain.num_draws == 500
    assert r["total"].neighbouring == "replace_one"  # mixed relations: composed under replace-one
    assert r["total"].epsilon > max(e.privacy.epsilon for e in r["ledger"].entries)
    md = (tmp_path / "mh" / "summary.md").read_text()
    assert "dp-fast-mh: over 1000 iterations the chain's mean step was" in md
    assert "| parameter | na-dpvi | dp-fast-mh |" in md


def test_compare_says_gibbs_ss_noisy_cost_before_any_release(loans, tmp_path, monkeypatch):
    """The slow-chain note depends on public sizes only and comes before the first release, so a user
    can stop before spending budget on a chain of hours (here every chain counts as slow)."""
    import dpposterior.baselines as baselines
    from dpposterior.baselines import regression_gibbs as RG

    monkeypatch.setattr(RG, "SLOW_SAMPLER_SECONDS", -1.0)

    def no_release(*a, **k):
        raise RuntimeError("release reached")

    monkeypatch.setattr(baselines, "release_regression_statistics", no_release)
    csv, toml = loans
    lines: list[str] = []
    with pytest.raises(RuntimeError, match="release reached"):
        compare_table(
            csv,
            toml,
            "income",
            model="linear",
            features=["age", "region"],
            methods=["gibbs-ss-noisy"],
            epsilon=1.0,
            delta=1e-5,
            out=tmp_path / "cmp",
            seed=2,
            progress=False,
            log=lines.append,
        )
    note = [s for s in lines if "note: Gibbs-SS-Noisy with p = " in s]
    assert len(note) == 1 and "2500 sweeps" in note[0]
    assert not (tmp_path / "cmp" / "releases" / "gibbs-ss-noisy.npz").exists()


def test_compare_secure_reaches_every_release_and_refuses_a_seed(loans, tmp_path, monkeypatch, capsys):
    """``compare --secure`` hands secure=True to the release (stopped there: no chain is sampled), and
    cannot be combined with --seed (a seed would make the noise reproducible)."""
    import dpposterior.baselines as baselines

    seen = {}

    def record(*a, **k):
        seen.update(k)
        raise RuntimeError("release reached")

    monkeypatch.setattr(baselines, "release_regression_statistics", record)
    csv, toml = loans
    with pytest.raises(RuntimeError, match="release reached"):
        compare_table(
            csv,
            toml,
            "income",
            model="linear",
            features=["age"],
            methods=["gibbs-ss-noisy"],
            epsilon=1.0,
            delta=1e-5,
            out=tmp_path / "cmp",
            progress=False,
            log=lambda s: None,
            secure=True,
        )
    assert seen["secure"] is True and seen["rng_key"] is None
    rc = main(
        [
            "compare",
            str(csv),
            "--target",
            "income",
            "--model",
            "linear",
            "--methods",
            "gibbs-ss-noisy",
            "--epsilon",
            "1",
            "--delta",
            "1e-5",
            "--bounds",
            str(toml),
            "--out",
            str(tmp_path / "c2"),
            "--secure",
            "--seed",
            "3",
        ]
    )
    assert rc == 2 and "--seed cannot be combined with --secure" in capsys.readouterr().err
