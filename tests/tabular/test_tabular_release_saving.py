"""A release of ``fit`` / ``compare`` is saved, with its ledger entry, as soon as it is made: an error of the
post-processing or of a later release loses nothing, and the ledger's total is stated even where it has
no finite value at this run's delta. The releases are hand-made (no DP-SGD runs).
"""

from __future__ import annotations

import pytest
from table_cli import no_release, table_argv

from cli_errors import cli_error as _error


# an error of the post-processing after the DPVI release (a solver failure, a figure matplotlib
# cannot draw): the release was saved (trace.npz) and added to --ledger only at the end of the
# report, so the error lost it, and the ledger did not count the privacy it had spent
def _fake_release(T=20, d=6):
    import numpy as np

    from dpposterior.privacy import PrivacySpent, dpsgd_epsilon
    from dpposterior.releases.layout import ParamLayout
    from dpposterior.releases.trace import DPVITrace

    rng = np.random.default_rng(0)
    # a record that describes the trace (saving checks it): sigma 2 on gradients of noise std 2
    spent = PrivacySpent(
        epsilon=dpsgd_epsilon(2.0, 1e-5, 0.1, T),
        delta=1e-5,
        neighbouring="add_remove",
        accountant="pld",
        mechanism="poisson_subsampled_gaussian",
        noise_multiplier=2.0,
        sampling_rate=0.1,
        num_steps=T,
    )
    return DPVITrace(
        phi=rng.normal(size=(T, d)),
        grads=2.0 * rng.normal(size=(T, d)),
        final_phi=rng.normal(size=d),
        beta=np.ones(d),
        learning_rate=0.01,
        clip=1.0,
        noise_multiplier=2.0,
        sampling_rate=0.1,
        num_steps=T,
        dataset_size=3,
        num_mc=10,
        layout=ParamLayout.flat(d // 2),
        privacy=spent,
    )


def test_fit_saves_the_release_and_its_ledger_entry_before_the_post_processing(capsys, tiny_table, monkeypatch):
    from dpposterior.privacy import Ledger

    def failing_solver(*a, **k):
        raise ValueError("the solver failed")

    monkeypatch.setattr("dpposterior.vi.dpvi", lambda *a, **k: _fake_release())
    monkeypatch.setattr("dpposterior.noise_aware.noise_aware_posterior", failing_solver)
    ledger = tiny_table / "ledger.json"
    msg = _error(capsys, table_argv(tiny_table, "fit", "--steps", "20", "--ledger", ledger), "fit")
    assert msg.startswith(
        "the solver failed (this came after the DP release, which is saved in "
        f"{str(tiny_table / 'out' / 'trace.npz')!r} and recorded in the ledger"
    ), msg
    assert (tiny_table / "out" / "trace.npz").is_file() and len(Ledger.load(ledger)) == 1


# compare --budget each with dp-fast-mh and another method: the chain's (epsilon, delta) release
# uses all of delta itself, so the ledger has no finite total at delta, and ledger.total(delta)
# raised after every release had been computed; the report, and the releases, were lost
def test_compare_each_with_dp_fast_mh_states_a_total_instead_of_losing_the_releases(tiny_table, monkeypatch):
    import numpy as np

    from dpposterior.baselines import DrawsPosterior
    from dpposterior.privacy import PrivacySpent
    from dpposterior.tabular import compare_table

    release = _fake_release(T=20, d=6)
    chain = PrivacySpent(
        epsilon=1.0,
        delta=1e-5,
        neighbouring="replace_one",
        accountant="optimal",
        mechanism="dp_fast_mh",
        noise_multiplier=400.0,
        sampling_rate=1.0,
        num_steps=20,
    )

    def fake_chain(design, **kw):
        return DrawsPosterior(
            layout=release.layout,
            draws=np.zeros((10, 3), np.float32),
            privacy=chain,
            method="dp_fast_mh",
            diagnostics={"moved": 0.0, "mean_step": 0.0, "distance_from_start": 0.0},
        )

    def fake_figure(rows, labels, path, title):
        path.write_bytes(b"png")
        return path

    monkeypatch.setattr("dpposterior.vi.dpvi", lambda *a, **k: release)
    monkeypatch.setattr("dpposterior.noise_aware.noise_aware_posterior", lambda trace, **k: fake_chain(None))
    monkeypatch.setattr("dpposterior.tabular.fit.dp_fast_mh_logistic", fake_chain)
    monkeypatch.setattr("dpposterior.vi.model_inspect.inspect_model", lambda *a, **k: release.layout)
    monkeypatch.setattr("dpposterior.tabular.fit._figure_intervals", fake_figure)
    res = compare_table(
        tiny_table / "d.csv",
        tiny_table / "s.toml",
        "y",
        methods=["na-dpvi", "dp-fast-mh"],
        budget="each",
        epsilon=1.0,
        delta=1e-5,
        num_steps=20,
        out=tiny_table / "out",
        log=lambda line: None,
    )
    assert res["total"].delta == pytest.approx(2e-5) and 1.0 < res["total"].epsilon < 10.0
    md = res["report_md"].read_text()
    assert "at delta = 2e-05 (2 x delta: the releases' own deltas" in md


# compare: the releases were kept in memory until the report was written, so an error of a later
# release (or of any post-processing) lost the earlier ones, with the privacy they had spent
def test_compare_writes_each_release_and_the_ledger_as_soon_as_it_is_made(capsys, tiny_table, monkeypatch):
    from dpposterior.privacy import Ledger
    from dpposterior.releases.trace import DPVITrace

    def second_release_fails(*a, **k):
        raise ValueError("the second mechanism failed")

    monkeypatch.setattr("dpposterior.vi.dpvi", lambda *a, **k: _fake_release(T=60))
    monkeypatch.setattr("dpposterior.vi._dpvim.dpvim", second_release_fails)
    msg = _error(capsys, table_argv(tiny_table, "compare", "--steps", "60", "--methods", "na-dpvi", "dpvim"), "compare")
    out = tiny_table / "out"
    assert msg.startswith(
        "the second mechanism failed (this came after the DP releases, which are saved in "
        f"{str(out / 'releases')!r} and recorded in the ledger {str(out / 'ledger.json')!r})"
    ), msg
    saved = DPVITrace.load(out / "releases" / "na-dpvi.npz")
    assert saved.privacy == _fake_release(T=60).privacy
    assert [e.label for e in Ledger.load(out / "ledger.json").entries] == ["na-dpvi (DPVI release; naive shares it)"]


def test_every_kind_of_compare_release_is_written_with_its_privacy(tmp_path):
    import json

    import numpy as np

    from dpposterior.baselines import DrawsPosterior, release_regression_statistics
    from dpposterior.privacy import PrivacySpent
    from dpposterior.tabular.releases import save_release

    rng = np.random.default_rng(0)
    rel = release_regression_statistics(
        rng.uniform(-1, 1, (30, 2)), rng.uniform(-1, 1, 30), epsilon=1.0, x_bound=1.0, y_bound=1.0, rng_key=0
    )
    fake = _fake_release()
    chain = DrawsPosterior(
        layout=fake.layout,
        draws=np.zeros((5, 3), np.float32),
        privacy=fake.privacy,
        method="dp_fast_mh",
        diagnostics={"moved": 0.5},
    )
    for name, release, arrays in (
        ("gibbs", rel, {"noisy_xx", "noisy_xy", "noisy_yy", "x_bound"}),
        ("chain", chain, {"draws"}),
    ):
        with np.load(save_release(release, tmp_path / f"{name}.npz")) as z:
            meta = json.loads(z["metadata"].tobytes().decode())
            assert arrays | {"metadata", "checksum"} == set(z.files)
            assert (
                PrivacySpent.from_dict(meta["privacy"]) == release.privacy and meta["format"] == "dpposterior-release"
            )
            if name == "gibbs":
                np.testing.assert_array_equal(z["noisy_xy"], rel.noisy["xy"])
    with pytest.raises(TypeError, match="cannot save a release of type dict"):
        save_release({}, tmp_path / "x.npz")


# fit --ledger whose earlier release is composed from its (epsilon, delta) (a DP-Fast MH chain, a
# pure-DP statistic) with a delta at least this run's: ledger.total(delta) has no finite value, and it
# raised after the release, in the report
def test_fit_ledger_with_an_approximate_dp_release_states_the_total_at_a_larger_delta(tiny_table, monkeypatch):
    from dpposterior.privacy import Ledger, PrivacySpent
    from dpposterior.tabular import fit_table

    chain = PrivacySpent(
        epsilon=1.0,
        delta=1e-5,
        neighbouring="add_remove",
        accountant="optimal",
        mechanism="dp_fast_mh",
        noise_multiplier=400.0,
        sampling_rate=1.0,
        num_steps=20,
    )
    book = Ledger()
    book.add(chain, "an earlier chain")
    ledger = book.save(tiny_table / "ledger.json")
    assert book.delta_used() == 1e-5

    def fake_figure(rows, labels, path, title):
        path.write_bytes(b"png")
        return path

    monkeypatch.setattr("dpposterior.vi.dpvi", lambda *a, **k: _fake_release(T=60))
    monkeypatch.setattr("dpposterior.noise_aware.noise_aware_posterior", lambda t, **k: t.last_iterate_posterior())
    monkeypatch.setattr("dpposterior.tabular.fit._figure_intervals", fake_figure)
    monkeypatch.setattr("dpposterior.plots.trace_plot", lambda trace, path, **k: fake_figure(0, 0, path, 0))
    fit_table(
        tiny_table / "d.csv",
        tiny_table / "s.toml",
        "y",
        epsilon=1.0,
        delta=1e-5,
        num_steps=60,
        out=tiny_table / "out",
        ledger=ledger,
        progress=False,
        log=lambda line: None,
    )
    md = (tiny_table / "out" / "summary.md").read_text()
    assert "at delta = 2e-05 (add_remove neighbours); stated at this larger delta" in md, md
    assert len(Ledger.load(ledger)) == 2
    # a ledger whose releases leave no delta below 1 is refused before the release
    book.add(
        PrivacySpent(
            epsilon=1.0,
            delta=0.99999,
            neighbouring="add_remove",
            accountant="basic",
            mechanism="dp_fast_mh",
            noise_multiplier=1.0,
            sampling_rate=1.0,
            num_steps=1,
        ),
        "x",
    )
    book.save(ledger)
    no_release(monkeypatch)
    with pytest.raises(ValueError, match="already use a total delta of 1"):
        fit_table(
            tiny_table / "d.csv",
            tiny_table / "s.toml",
            "y",
            epsilon=1.0,
            delta=1e-5,
            num_steps=60,
            out=tiny_table / "out2",
            ledger=ledger,
            progress=False,
            log=lambda line: None,
        )
