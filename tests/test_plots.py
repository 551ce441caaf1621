"""dpposterior.plots: what each figure tells its reader (labels, reference lines)."""

from __future__ import annotations

import pytest

from dpposterior import plots


def _figure_of(monkeypatch, call):
    seen = {}

    def keep(fig, path):
        seen["fig"] = fig
        return path

    monkeypatch.setattr(plots, "_save", keep)
    call()
    return seen["fig"]


def test_interval_plot_labels_its_axis_and_draws_the_zero_line(tmp_path, monkeypatch):
    rows = [{"age": (-0.9, -0.7, -0.5), "income": (-0.2, 0.1, 0.4)}]
    fig = _figure_of(monkeypatch, lambda: plots.interval_plot(rows, ["noise-aware"], tmp_path / "i.png",
                                                               xlabel="coefficient (rescaled)"))
    ax = fig.axes[0]
    assert ax.get_xlabel() == "coefficient (rescaled)"
    vertical = [ln for ln in ax.get_lines() if list(ln.get_xdata()) == [0, 0]]
    assert len(vertical) == 1 and vertical[0].get_linestyle() == "--"


def test_interval_plot_reference_line_can_move_or_go(tmp_path, monkeypatch):
    rows = [{"odds ratio": (0.5, 0.8, 1.2)}]
    fig = _figure_of(monkeypatch, lambda: plots.interval_plot(rows, ["a"], tmp_path / "i.png", reference=1.0))
    assert any(list(ln.get_xdata()) == [1.0, 1.0] for ln in fig.axes[0].get_lines())
    assert fig.axes[0].get_xlabel()  # a default label: never an unlabelled axis
    fig = _figure_of(monkeypatch, lambda: plots.interval_plot(rows, ["a"], tmp_path / "j.png", reference=None))
    assert not any(len(set(ln.get_xdata())) == 1 and len(ln.get_xdata()) == 2 for ln in fig.axes[0].get_lines())
    with pytest.raises(TypeError, match="reference"):
        plots.interval_plot(rows, ["a"], tmp_path / "k.png", reference="zero")
