"""Smoke tests of attnbook.rank.collapse_figures (the figures of chapters "Pure attention loses rank" and
"Path decomposition"), drawn from small synthetic inputs."""

from __future__ import annotations

import math

import pytest
import torch

from attnbook.core.plotting import variant_color
from attnbook.rank import collapse_figures as cf



def _curves(runs=3, depth=5, rate=0.1):
    # geometric decay r_l = rate^l, run i scaled by (i + 1)
    layers = torch.arange(depth + 1, dtype=torch.float64)
    return torch.stack([(i + 1) * rate**layers for i in range(runs)]).clamp_max(1.0)


def test_residual_by_variant_draws_median_band_and_precision_line():
    curves = {"SAN": torch.cat([_curves(), torch.zeros(1, 6)]), "SAN+skip": _curves(rate=0.9)}
    fig = cf.residual_by_variant(curves)
    ax = fig.axes[0]
    lines = [ln for ln in ax.get_lines() if ln.get_label() in curves]
    assert [ln.get_label() for ln in lines] == ["SAN", "SAN+skip"]
    assert lines[0].get_color() == variant_color("SAN")
    # median over 4 runs of the SAN at layer 0 is 1 (three runs at 1, one at 0 -> floor)
    assert lines[0].get_ydata()[0] == pytest.approx(1.0)
    assert len(ax.collections) == 2  # one band per variant
    assert ax.get_yscale() == "log" and ax.get_ylim() == pytest.approx((1e-17, 3))
    assert any(ln.get_label() == "float64 precision" for ln in ax.get_lines())


def test_agreeing_digits_one_line_per_run_and_the_cubic_slope():
    san = _curves(runs=4, depth=8, rate=1e-2)
    fig = cf.agreeing_digits(san, shown=6)
    lines = fig.axes[0].get_lines()
    runs = [ln for ln in lines if len(ln.get_xdata()) == 7]
    assert len(runs) == 4
    paper = next(ln for ln in lines if ln.get_label().startswith("paper"))
    y = paper.get_ydata()
    assert list(paper.get_xdata()) == [1, 2, 3]
    assert y[1] - y[0] == pytest.approx(math.log10(3))
    # starts at log10(-log10(median r_1)); r_1 of the runs: 0.01, 0.02, 0.03, 0.04, and torch's median
    # of an even count is the lower middle value, 0.02
    assert y[0] == pytest.approx(math.log10(-math.log10(0.02)), rel=1e-6)


def test_explorer_panel_titles_the_number_of_inputs():
    fig = cf.explorer_panel(_curves(runs=4), _curves(runs=4, rate=0.5))
    ax = fig.axes[0]
    assert "4 inputs" in ax.get_title()
    assert [ln.get_label() for ln in ax.get_lines()] == ["pure SAN", "your network"]


def test_weight_scale_grid_one_panel_per_architecture_one_line_per_scale():
    names, gains = ("SAN", "SAN+LN", "SAN+skip", "Transformer"), (0.5, 1.0, 2.0)
    grid = {(n, g): _curves(rate=0.1 * g) for n in names for g in gains}
    fig = cf.weight_scale_grid(grid)
    assert [ax.get_title() for ax in fig.axes] == list(names)
    assert all(len(ax.get_lines()) == 3 for ax in fig.axes)
    assert [ln.get_label() for ln in fig.axes[0].get_lines()] == ["scale 0.5", "scale 1", "scale 2"]


def test_path_sum_errors_bars_per_network_and_floor():
    no_skip = {(1, 4): 1e-16, (2, 3): 0.0}
    with_skip = {(1, 4): 2e-16, (2, 3): 3e-16}
    fig = cf.path_sum_errors(no_skip, with_skip)
    ax = fig.axes[0]
    assert len(ax.patches) == 4
    heights = sorted(p.get_height() for p in ax.patches)
    assert heights[0] == pytest.approx(1e-17)  # the exact zero is drawn at the floor
    assert [t.get_text() for t in ax.get_xticklabels()] == ["L=1, H=4", "L=2, H=3"]


def test_path_length_shares_bars_per_model_and_the_paper_peak():
    fractions = {"a": [0.25, 0.75], "b": [0.5, 0.5], "c": [0.1, 0.9]}
    fig = cf.path_length_shares(fractions, (11, 12))
    ax = fig.axes[0]
    assert len(ax.patches) == 6
    paper = next(ln for ln in ax.get_lines() if ln.get_label().startswith("paper"))
    assert paper.get_xdata()[0] == pytest.approx(11.5)
    assert "11-12" in paper.get_label()


def test_rank1_by_length_one_box_per_length_and_title_from_the_data():
    distances = {k: torch.full((5,), 10.0**-k, dtype=torch.float64) for k in range(1, 4)}
    fig = cf.rank1_by_length(distances, heads=2)
    ax = fig.axes[0]
    title = ax.get_title()
    assert "3-layer, 2-head" in title and "5 paths per length" in title
    assert ax.get_yscale() == "log"
    # every box is flat at its length's value: its median line lies at 10^-k, centred on position k
    flat = {round(float(ln.get_xdata().mean())): float(ln.get_ydata()[0]) for ln in ax.get_lines()
            if len(ln.get_xdata()) == 2 and ln.get_ydata()[0] == ln.get_ydata()[1] and ln.get_xdata()[0] != 0}
    assert all(flat[k] == pytest.approx(10.0**-k) for k in distances)


def test_path_diagram_draws_each_path_through_its_heads_and_the_identity():
    from attnbook.rank.paths import SKIP

    fig = cf.path_diagram(3, 2, {"a": (1, SKIP, 0), "b": (SKIP, SKIP, SKIP)})
    ax = fig.axes[0]
    a, b = ax.lines
    assert list(a.get_xdata()) == [0, 1, 2, 3, 4]
    ys = a.get_ydata()
    assert ys[1] > 0.5 and ys[2] < -0.5 and abs(ys[3]) < 0.2  # head 2, the identity, head 1
    assert list(b.get_ydata()[1:4]) == pytest.approx([-0.96] * 3)  # the identity at every layer (offset)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["a (length 2)", "b (length 0)"]
    with pytest.raises(ValueError, match="one head"):
        cf.path_diagram(3, 2, {"bad": (2, 0, 0)})
