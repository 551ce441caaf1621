"""dpposterior.demo: the Adult demo's printed table (whole names, aligned columns, warnings shown)."""

from __future__ import annotations

import re

import pytest

from dpposterior import datasets
from dpposterior.demo import run_demo
from input_checks import raises_with as _raises


@pytest.fixture(scope="module")
def printed(tmp_path_factory):
    lines: list[str] = []
    run_demo(num_steps=60, seed=0, progress=False, log=lines.append, out=tmp_path_factory.mktemp("demo"))
    return lines


def test_demo_table_keeps_whole_names_and_aligns_its_columns(printed):
    start = next(i for i, line in enumerate(printed) if line.startswith("coefficient"))
    header, rows = printed[start], []
    for line in printed[start + 1 :]:
        if not line or line.startswith("warning:"):
            break
        rows.append(line)
    longest = max(datasets.adult_design("test")[2], key=len)
    assert len(longest) > 31 and any(r.startswith(longest + " ") for r in rows)  # whole, not cut at 31
    assert "non-private" in header and "NOT PRIVATE" in printed[start - 1]
    ends = [m.end() for m in re.finditer(r"interval|ratio", header)]
    for r in rows:  # every right-aligned column ends where its header does
        assert [m.end() for m in re.finditer(r"\]|\S$", r)][-3:] == ends, (header, r)


def test_demo_prints_what_the_post_processing_warned_about(printed):
    # 60 steps leave most coefficients unidentified: the terminal says so under the table
    assert any(line.startswith("warning: the release does not identify latents") for line in printed)


def test_non_private_map_is_the_mode_of_the_model():
    import numpy as np

    from dpposterior.demo import non_private_map

    rng = np.random.default_rng(0)
    X = np.c_[rng.normal(size=(4000, 2)), np.ones(4000)]
    w_true = np.array([1.0, -0.5, 0.3])
    y = (rng.random(4000) < 1 / (1 + np.exp(-X @ w_true))).astype(float)
    w = non_private_map(X, y)
    p = 1 / (1 + np.exp(-X @ w))
    assert np.allclose(X.T @ (y - p) - w, 0, atol=1e-8)  # the gradient of the log posterior vanishes
    assert np.allclose(w, w_true, atol=0.12)


# the demo: settings checked before anything is printed or written
@pytest.mark.parametrize(
    "kw,word",
    [
        (dict(epsilon=0.0), "epsilon"),
        (dict(delta=1.0), "delta"),
        (dict(num_steps=0), "num_steps"),
        (dict(sampling_rate=2.0), "sampling_rate"),
        (dict(clip=float("nan")), "clip"),
        (dict(method="mcmc"), "method"),
    ],
)
def test_demo_refuses_bad_settings_before_printing_a_target_or_making_the_folder(tmp_path, kw, word):
    from dpposterior.demo import run_demo

    lines = []
    _raises(lambda: run_demo(out=tmp_path / "out", log=lines.append, progress=False, **kw), ValueError, word)
    assert lines == [] and not (tmp_path / "out").exists()
