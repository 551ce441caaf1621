"""Command lines of ``dpposterior fit`` / ``compare`` on the tiny table, and a guard that no release is made."""

from __future__ import annotations


def table_argv(tmp, command, *extra, csv="d.csv", out="out", epsilon="1"):
    """The argv of ``command`` on ``tmp/csv`` with the schema ``tmp/s.toml`` and target ``y``."""
    return [
        command,
        tmp / csv,
        "--target",
        "y",
        "--bounds",
        tmp / "s.toml",
        "--epsilon",
        epsilon,
        "--delta",
        "1e-5",
        "--no-progress",
        "--out",
        tmp / out,
        *extra,
    ]


def no_release(monkeypatch):
    """Makes any DP release fail loudly: the checks under test must come first."""

    def boom(*a, **k):
        raise AssertionError("a release was computed before the check")

    monkeypatch.setattr("dpposterior.vi.dpvi", boom)
    monkeypatch.setattr("dpposterior.vi._dpvim.dpvim", boom)
    monkeypatch.setattr("dpposterior.tabular.fit.dp_fast_mh_logistic", boom)
