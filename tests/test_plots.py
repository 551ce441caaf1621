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
    fig = _figure_of(
        monkeypatch,
        lambda: plots.interval_plot(rows, ["noise-aware"], tmp_path / "i.png", xlabel="coefficient (rescaled)"),
    )
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


def test_trace_plot_draws_every_coordinate_and_names_them(tmp_path, monkeypatch):
    import jax
    import numpy as np

    from dpposterior.noise_aware.simulate import simulate_trace

    trace = simulate_trace(
        jax.random.PRNGKey(0),
        np.zeros(6),
        np.full(6, 50.0),
        num_steps=40,
        noise_multiplier=1.0,
        learning_rate=np.full(6, 1e-2),
    )
    fig = _figure_of(monkeypatch, lambda: plots.trace_plot(trace, tmp_path / "t.png", names=["age", "income", "b"]))
    mu = fig.axes[0]
    assert len([ln for ln in mu.get_lines() if len(ln.get_xdata()) == 40]) == 3
    assert [t.get_text() for t in mu.get_legend().get_texts()] == ["age", "income", "b"]
    with pytest.raises(ValueError, match="one label per latent coordinate"):
        plots.trace_plot(trace, tmp_path / "t.png", names=["age"])
    wide = simulate_trace(
        jax.random.PRNGKey(0),
        np.zeros(40),
        np.full(40, 50.0),
        num_steps=40,
        noise_multiplier=1.0,
        learning_rate=np.full(40, 1e-2),
    )
    fig = _figure_of(monkeypatch, lambda: plots.trace_plot(wide, tmp_path / "w.png"))
    assert len([ln for ln in fig.axes[0].get_lines() if len(ln.get_xdata()) == 40]) == 20
    assert fig.axes[0].get_legend() is None and "all 20 coordinates" in fig.axes[0].get_title()
