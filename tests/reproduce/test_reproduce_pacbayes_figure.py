"""The PAC-Bayes reproduction's figure: its legend stands apart from the bars it names."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg", force=True)

from dpposterior import _io
from dpposterior.reproduce.pacbayes import pacbayes_figure


def _rows() -> list[dict]:
    rows = []
    for labels in ("true", "random"):
        for eps in (None, 1.0, 0.3):
            rows.append(
                {
                    "labels": labels,
                    "prior": "data-dependent" if eps else "data-independent",
                    "epsilon": eps,
                    # bars as tall as the figure allows: a legend inside an axes would cover one
                    "stochastic_test_error": 0.45 if labels == "random" else 0.02,
                    "bound": 1.3,
                    "h_bound": 0.95,
                    "c_bound": None,
                }
            )
    return rows


def test_the_legend_covers_no_bar(tmp_path, monkeypatch):
    figures = []
    save = _io.save_figure_atomic

    def keep(fig, path):
        fig.canvas.draw()
        figures.append((fig, fig.canvas.get_renderer()))  # before the figure is closed
        return save(fig, path)

    monkeypatch.setattr(_io, "save_figure_atomic", keep)
    path = pacbayes_figure(_rows(), tmp_path / "pacbayes.png")
    assert path.exists() and path.stat().st_size > 0
    ((fig, renderer),) = figures
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    assert len(legends) == 1
    box = legends[0].get_window_extent(renderer)
    assert [t.get_text() for t in legends[0].get_texts()] == [
        "test error of Q",
        "PAC-Bayes bound",
        "H-bound",
        "C-bound",
    ]
    for ax in fig.axes:
        assert not box.overlaps(ax.get_window_extent(renderer)), "the legend lies over a panel"
        bars = [p for p in ax.patches if p.get_height() == p.get_height()]  # drawn bars (not NaN)
        assert bars and not any(box.overlaps(b.get_window_extent(renderer)) for b in bars)
