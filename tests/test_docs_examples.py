"""Every ```python example in README.md and docs/ runs (DESIGN.md: the docs stay true to the code)."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def _examples():
    for path in DOCS:
        for i, m in enumerate(BLOCK.finditer(path.read_text())):
            yield pytest.param(m.group(1), id=f"{path.relative_to(ROOT)}#{i}")


@pytest.mark.parametrize("code", list(_examples()))
def test_doc_example_runs(code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "<doc example>", "exec"), {"__name__": "__doc_example__"})


def test_there_are_examples():
    assert len(list(_examples())) >= 2


def test_subpackages_the_docs_use_as_attributes_are_imported_by_the_package():
    """``import dpposterior as dpp; dpp.baselines...`` works in a fresh interpreter (inside the test run,
    another test has usually imported the subpackage already, which hid its absence)."""
    import subprocess
    import sys

    used = sorted({m for path in DOCS for m in re.findall(r"\bdpp\.([a-z_]+)\.", path.read_text())})
    assert "baselines" in used
    code = f"import dpposterior as dpp; print([m for m in {used!r} if not hasattr(dpp, m)])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"


@pytest.mark.slow  # runs the example's 400-step chain (about 11 s)
def test_doc_examples_score_the_dp_sgld_predictive_on_held_out_records(monkeypatch):
    """DESIGN: accuracy on the training data is not shown unless privatised or labelled non-private. The
    user guide's DP-SGLD example printed ``predictive_scores`` on X[:500], records the chain was run on."""
    import numpy as np

    from dpposterior.mcmc import dp_sgld

    seen = {"train": [], "scored": []}
    real_run, real_scores = dp_sgld.run, dp_sgld.predictive_scores

    def run(model, data, **kw):
        seen["train"].append(np.asarray(data[0]))
        return real_run(model, data, **kw)

    def predictive_scores(model, samples, x, y, **kw):
        seen["scored"].append(np.asarray(x))
        return real_scores(model, samples, x, y, **kw)

    monkeypatch.setattr(dp_sgld, "run", run)
    monkeypatch.setattr(dp_sgld, "predictive_scores", predictive_scores)
    codes = [m.group(1) for path in DOCS for m in BLOCK.finditer(path.read_text()) if "predictive_scores" in m.group(1)]
    assert codes
    for code in codes:
        exec(compile(code, "<doc example>", "exec"), {"__name__": "__doc_example__"})
    assert seen["train"] and seen["scored"]
    train = {row.tobytes() for x in seen["train"] for row in x}
    for x in seen["scored"]:
        assert not any(row.tobytes() in train for row in x), "a doc example scores the records it trained on"


def _anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_user_guide_lists_every_section_in_its_contents():
    text = (ROOT / "docs" / "user-guide.md").read_text()
    outside_code = re.sub(r"```.*?```", "", text, flags=re.S)
    headings = [(len(m[1]), m[2]) for m in re.finditer(r"^(##+) (.+)$", outside_code, flags=re.M) if m[2] != "Contents"]
    contents = outside_code.split("## Contents", 1)[1].split("\n## ", 1)[0]
    listed = [
        (len(m[1]) // 2 + 2, m[2], m[3]) for m in re.finditer(r"^( *)- \[(.+)\]\(#([^)]+)\)$", contents, flags=re.M)
    ]
    assert listed == [(level, title, _anchor(title)) for level, title in headings]


def test_the_readme_leads_to_the_getting_started_page():
    assert (ROOT / "docs" / "getting-started.md").is_file()
    assert "docs/getting-started.md" in (ROOT / "README.md").read_text()
    assert "docs/getting-started.md" in (ROOT / "docs" / "user-guide.md").read_text()
