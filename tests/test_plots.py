"""dpposterior.plots: what each figure tells its reader (labels, reference lines)."""

from __future__ import annotations

import numpy as np
import pytest

from dpposterior import plots
from dpposterior.validation import calibration_curve


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


# plots: mismatched lengths, skewed posteriors, paths
ROW = {"a": (0.0, 1.0, 2.0), "b": (-1.0, 0.0, 1.0)}


@pytest.mark.parametrize("rows, labels", [([ROW, ROW], ["one"]), ([ROW], ["one", "two"])])
def test_interval_plot_refuses_rows_and_labels_of_different_lengths(tmp_path, rows, labels):
    # zip() silently dropped the extra method or label
    with pytest.raises(ValueError, match=f"got {len(rows)} row\\(s\\) and {len(labels)} label\\(s\\)"):
        plots.interval_plot(rows, labels, tmp_path / "i.png")


def test_interval_plot_draws_a_mean_outside_a_narrow_central_interval(tmp_path):
    # a skewed posterior's mean can lie outside a narrow interval (fit --prob 0.1): matplotlib's negative
    # xerr raised after the release, and the report was lost
    path = plots.interval_plot([{"sigma2": (0.1, 0.5, 0.2)}], ["noise-aware"], tmp_path / "i.png")
    assert path.stat().st_size > 0


def test_interval_plot_shows_every_parameter_of_every_row(tmp_path):
    # a parameter missing from the first row was a KeyError, one only in a later row silently dropped
    path = plots.interval_plot([{"a": (0, 1, 2)}, ROW], ["x", "y"], tmp_path / "i.png")
    assert path.exists()
    with pytest.raises(ValueError, match="three numbers"):
        plots.interval_plot([{"a": (0, 1)}], ["x"], tmp_path / "j.png")
    with pytest.raises(ValueError, match="rows is empty"):
        plots.interval_plot([], [], tmp_path / "k.png")


@pytest.mark.parametrize(
    "entry, error, match",
    [
        ((float("nan"), 0.0, 1.0), ValueError, r"rows\[0\]\['a'\] must be finite numbers \(lo, mean, hi\), got \(nan"),
        ((0.0, 1.0, float("inf")), ValueError, r"rows\[0\]\['a'\] must be finite numbers"),
        (("0", "1", "2"), TypeError, r"each entry of rows\[0\]\['a'\] \(lo, mean, hi\) must be a real number, got '0'"),
        ((False, True, True), TypeError, r"must be a real number, got False of type bool"),
        ((0j, 1.0, 2.0), TypeError, r"must be a real number, got 0j of type complex"),
    ],
)
def test_interval_plot_refuses_entries_that_are_not_finite_numbers(tmp_path, entry, error, match):
    """A NaN or infinite end was drawn as no interval without a word, strings and bools
    were converted silently ("0" -> 0.0, True -> 1.0), a complex number failed in float() with no name."""
    with pytest.raises(error, match=match):
        plots.interval_plot([{"a": entry}], ["x"], tmp_path / "i.png")
    assert not (tmp_path / "i.png").exists()
    assert plots.interval_plot([{"a": np.array([0, 1, 2])}], ["x"], tmp_path / "j.png").exists()  # numpy numbers


def test_plot_path_without_a_suffix_or_a_folder_is_refused(tmp_path):
    # matplotlib wrote PATH.png (or FOLDER.png) while the function returned PATH
    with pytest.raises(ValueError, match="must end in the suffix of an image format"):
        plots.interval_plot([ROW], ["x"], tmp_path / "figure")
    with pytest.raises(ValueError, match="is a folder"):
        plots.interval_plot([ROW], ["x"], tmp_path)
    assert not (tmp_path / "figure.png").exists() and not tmp_path.with_suffix(".png").exists()


def test_a_plot_into_a_missing_folder_creates_it_and_a_path_under_a_file_is_refused_before_drawing(
    tmp_path, monkeypatch
):
    """``calibration_plot(curves, "figures/c.png")`` without a ``figures`` folder drew
    the figure and then failed with matplotlib's bare ``FileNotFoundError`` (a path under a file: a
    ``NotADirectoryError``), though the package's other writers create the folder; now the folder is
    created and the file written atomically in its suffix's format, and a path that cannot be written is
    a ValueError before anything is drawn."""
    curve = calibration_curve(np.linspace(0.01, 0.99, 40), np.arange(40) % 2, bins=4)
    png = plots.calibration_plot({"m": curve}, tmp_path / "figures" / "new" / "c.png")
    assert png == tmp_path / "figures" / "new" / "c.png" and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pdf = plots.interval_plot([ROW], ["x"], tmp_path / "other" / "i.pdf")
    assert pdf.read_bytes()[:5] == b"%PDF-"
    assert sorted(p.name for p in (tmp_path / "other").iterdir()) == ["i.pdf"]  # no temporary file left
    (tmp_path / "table.csv").write_text("a\n")
    monkeypatch.setattr(plots, "_plt", lambda: pytest.fail("drew before checking the path"))
    with pytest.raises(ValueError, match="path .*table.csv/c.png' cannot be created: .*table.csv' is a file"):
        plots.calibration_plot({"m": curve}, tmp_path / "table.csv" / "c.png")


def test_calibration_plot_refuses_empty_or_wrong_curves(tmp_path):
    curve = calibration_curve(np.linspace(0.01, 0.99, 40), np.arange(40) % 2, bins=4)
    assert plots.calibration_plot({"m": curve}, tmp_path / "c.png").exists()
    with pytest.raises(ValueError, match="curves is empty"):
        plots.calibration_plot({}, tmp_path / "c.png")
    with pytest.raises(TypeError, match="must be a mapping"):
        plots.calibration_plot([curve], tmp_path / "c.png")


def test_trace_plot_refuses_settings_that_drew_an_empty_or_misplaced_figure(tmp_path):
    # max_coords=0 drew no line (and an empty legend); burn_in=1.5 put the cut past the trace's end
    from types import SimpleNamespace

    trace = SimpleNamespace(
        phi=np.zeros((10, 4)),
        layout=SimpleNamespace(coordinate_names=lambda: ["a", "b"]),
        privacy=SimpleNamespace(summary=lambda: "epsilon 1"),
    )
    assert plots.trace_plot(trace, tmp_path / "t.png").exists()
    with pytest.raises(ValueError, match="max_coords must be an integer >= 1"):
        plots.trace_plot(trace, tmp_path / "t.png", max_coords=0)
    with pytest.raises(ValueError, match=r"burn_in must be a share of the trace in \[0, 1\)"):
        plots.trace_plot(trace, tmp_path / "t.png", burn_in=1.5)
    with pytest.raises(TypeError, match="DP-SGD release"):
        plots.trace_plot(np.zeros((10, 4)), tmp_path / "t.png")
