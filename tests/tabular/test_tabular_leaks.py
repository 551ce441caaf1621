"""Every output of ``dpposterior fit`` and ``compare`` on a table with canary values: no record's value
appears, and every number read from the data without noise (the record count N) is labelled as not
privatised where it is shown (the log line, the release file, the report); docs/reliability.md
lists the outputs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from dpposterior.tabular.fit import compare_table, fit_table, min_steps

N = 47  # distinctive: a standalone "47" in an output is N
CANARY_VALUE = "123456.789"  # one record's income
SCHEMA = """out_of_bounds = "clip"
[columns.age]
type = "numeric"
bounds = [0, 120]
[columns.income]
type = "numeric"
bounds = [0, 200000]
[columns.region]
type = "categorical"
categories = ["north", "south", "east"]
[columns.y]
type = "categorical"
categories = ["no", "yes"]
"""


def _table(folder: Path) -> tuple[Path, Path]:
    rng = np.random.default_rng(3)
    rows = ["age,income,region,y"]
    for i in range(N):
        income = CANARY_VALUE if i == 10 else f"{rng.uniform(1000, 90000):.2f}"
        age = "777" if i == 12 else str(rng.integers(18, 90))  # an outlier, clipped to the bounds
        rows.append(f"{age},{income},{['north', 'south', 'east'][i % 3]},{'yes' if rng.random() < 0.4 else 'no'}")
    (folder / "data.csv").write_text("\n".join(rows) + "\n")
    (folder / "schema.toml").write_text(SCHEMA)
    return folder / "data.csv", folder / "schema.toml"


def _texts(out: Path) -> dict[str, str]:
    """Every file of a report folder as text: JSON as is, a .npz's metadata, Markdown, HTML without its
    embedded images (base64), PNG text chunks."""
    texts = {}
    for f in sorted(out.rglob("*")):
        if f.suffix in (".json", ".md"):
            texts[str(f)] = f.read_text()
        elif f.suffix == ".html":
            texts[str(f)] = re.sub(r"base64,[A-Za-z0-9+/=]+", "base64,", f.read_text())
        elif f.suffix == ".npz":
            with np.load(f, allow_pickle=False) as z:
                texts[str(f)] = bytes(z["metadata"]).decode()
        elif f.suffix == ".png":
            texts[str(f)] = f.read_bytes().decode("latin-1").split("IDAT")[0]  # the chunks before the pixels
    return texts


def _standalone(number: int | str, text: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(str(number))}(?![\w.])", text) is not None


def _labelled_keys(doc: dict) -> set[str]:
    """The keys that a release's PrivacySpent labels ``"public"`` in its details."""
    return {k for k, v in doc.get("privacy", {}).get("details", []) if v == "public"}


def _check_outputs(texts: dict[str, str], log: str) -> None:
    for name, text in texts.items():
        # standalone numbers only: the noisy outputs of an OS-seeded run hold random digits
        assert not _standalone(CANARY_VALUE, text) and not _standalone(777, text), name
        if not _standalone(N, text):
            continue
        if name.endswith((".md", ".html")):
            assert f"NOT PRIVATISED, treated as public: the number of records N = {N}" in text, name
        elif name.endswith((".json", ".npz")) and not name.endswith("ledger.json"):
            doc = json.loads(text)
            counted = {k for k, v in doc.items() if isinstance(v, int) and not isinstance(v, bool) and v == N}
            assert counted and counted <= _labelled_keys(doc), (name, counted, _labelled_keys(doc))
        else:
            raise AssertionError(f"N = {N} in {name} without a label")
    for line in log.splitlines():
        assert not _standalone(CANARY_VALUE, line) and not _standalone(777, line), line
        if _standalone(N, line):
            assert "not privatised" in line, line


def test_fit_outputs_quote_no_record_and_label_n(tmp_path, capsys):
    data, schema = _table(tmp_path)
    lines = []
    r = fit_table(
        data,
        schema,
        "y",
        epsilon=1.0,
        delta=1e-5,
        num_steps=min_steps("na-dpvi"),
        clip=2.0,  # 47 records are too few for clip="auto" (refused: tests/vi/test_auto_clip.py)
        out=tmp_path / "out",
        ledger=tmp_path / "out" / "ledger.json",
        clip_check=1.0,
        progress=False,
        log=lines.append,
    )
    err = capsys.readouterr()
    log = "\n".join(lines) + err.out + err.err
    assert any(f"N={N} (not privatised" in line for line in lines)
    texts = _texts(tmp_path / "out")
    assert {Path(n).name for n in texts} >= {
        "trace.npz",
        "clip_check.json",
        "summary.md",
        "summary.html",
        "ledger.json",
        "trace.png",
    }
    _check_outputs(texts, log)
    assert ("dataset_size", "public") in r["trace"].privacy.details
    # no --seed: the noise is OS-seeded, and no output holds a key or seed
    assert r["trace"].privacy.seeded_by == "os" and "seeded by | os" in texts[str(tmp_path / "out" / "summary.md")]
    with np.load(tmp_path / "out" / "trace.npz") as z:
        assert not any("key" in k or "seed" in k for k in z.files)


def test_compare_outputs_quote_no_record_and_label_n(tmp_path, capsys):
    data, schema = _table(tmp_path)
    lines = []
    r = compare_table(
        data,
        schema,
        "y",
        methods=["dpvim", "dp-fast-mh"],
        epsilon=1.0,
        delta=1e-5,
        num_steps=min_steps("dpvim"),
        clip=2.0,  # 47 records are too few for clip="auto"
        out=tmp_path / "out",
        progress=False,
        log=lines.append,
        seed=5,
    )
    err = capsys.readouterr()
    texts = _texts(tmp_path / "out")
    assert {Path(n).name for n in texts} >= {"dpvim.npz", "dp-fast-mh.npz", "ledger.json", "summary.md"}
    _check_outputs(texts, "\n".join(lines) + err.out + err.err)
    chain = json.loads(texts[str(tmp_path / "out" / "releases" / "dp-fast-mh.npz")])
    # its total_bound_C and batch_cap are sqrt(p) N and proportional to N: labelled with N as not privatised
    assert {"num_records", "bound_constants"} <= _labelled_keys(chain)
    ledger = json.loads(texts[str(tmp_path / "out" / "ledger.json")])
    assert all(
        ["num_records", "public"] in e["privacy"]["details"]
        for e in ledger["entries"]
        if e["privacy"]["mechanism"] == "dp_fast_mh"
    )
    # --seed: every release and the report say so
    assert {e.privacy.seeded_by for e in r["ledger"].entries} == {"user"}
    assert "WARNING: the privacy noise was seeded with --seed" in texts[str(tmp_path / "out" / "summary.md")]


@pytest.mark.parametrize("fitter", ["dpvi", "dpvim"])
def test_dp_sgd_trace_labels_its_dataset_size_public(fitter):
    import numpyro
    import numpyro.distributions as dist

    from dpposterior.vi import dpvi
    from dpposterior.vi._dpvim import dpvim

    def model(x):
        mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
        with numpyro.plate("records", x.shape[0]):
            numpyro.sample("x", dist.Normal(mu, 1.0), obs=x)

    x = np.linspace(-1, 1, 9).astype(np.float32)
    fn = dpvi if fitter == "dpvi" else dpvim
    trace = fn(model, x, epsilon=1.0, delta=1e-5, num_steps=40, clip=1.0, rng_key=0)
    assert ("dataset_size", "public") in trace.privacy.details and trace.dataset_size == 9
    given = fn(model, x, epsilon=1.0, delta=1e-5, num_steps=40, clip=1.0, rng_key=0, dataset_size=100)
    assert ("dataset_size", "public") in given.privacy.details and given.dataset_size == 100


def test_gibbs_ss_noisy_warning_labels_n_as_not_privatised(monkeypatch):
    """compare's gibbs-ss-noisy post-processing warns on stderr when its chain barely moves, naming N."""
    import jax.numpy as jnp

    from dpposterior.baselines import regression_gibbs as RG
    from dpposterior.baselines import regression_release as RGR

    rng = np.random.default_rng(0)
    rel = RGR.release_regression_statistics(
        rng.uniform(-1, 1, (N, 2)), rng.uniform(-1, 1, N), epsilon=1.0, x_bound=1.0, y_bound=1.0, rng_key=0
    )
    monkeypatch.setattr(RG, "sample_chain", lambda *a, **k: (jnp.zeros((4, 3)), jnp.ones(4), jnp.float32(0.0)))
    with pytest.warns(RuntimeWarning, match="barely moves") as caught:
        RG.gibbs_ss_noisy(rel, num_warmup=1, num_draws=4, rng_key=0)
    text = " ".join(str(w.message) for w in caught)
    assert f"N = {N} for 2 features; N is public, not privatised" in text


def test_seeded_clip_check_shares_no_key_with_the_dp_sgd_run(tmp_path, monkeypatch):
    """--seed with --clip-check: the histogram's key is none of the seeded DPVI run's step keys (it was
    step 1's: threefry's split is prefix-stable, so its two keys were that step's sampling and ELBO keys)."""
    import jax

    import dpposterior.vi as vi
    from dpposterior.dpsgd.sampling import step_keys

    data, schema = _table(tmp_path)
    seen = []

    def capture(*args, rng_key=None, **kwargs):
        seen.append(rng_key)
        raise ValueError("captured")

    monkeypatch.setattr(vi, "gradient_norm_histogram", capture)
    steps = min_steps("na-dpvi")
    with pytest.raises(ValueError, match="captured"):
        fit_table(
            data,
            schema,
            "y",
            epsilon=1.0,
            delta=1e-5,
            num_steps=steps,
            clip=2.0,  # 47 records are too few for clip="auto"
            out=tmp_path / "out",
            seed=7,
            clip_check=1.0,
            progress=False,
            log=lambda m: None,
        )
    raw = np.asarray(seen[0], np.uint32)
    ours = {np.asarray(jax.random.key_data(k)).tobytes() for k in jax.random.split(jax.random.wrap_key_data(raw))}
    run = {
        np.asarray(jax.random.key_data(k)).tobytes() for t in range(steps) for k in step_keys(jax.random.PRNGKey(7), t)
    }
    assert not ours & run
