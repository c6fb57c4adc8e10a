"""Smoke tests of attnbook.rank.bound_figures (the figures of chapters "The one-layer residual bound" and "Deep
bounds"), drawn from small synthetic inputs."""

from __future__ import annotations

import math

import pytest
import torch

from attnbook.core.plotting import variant_color
from attnbook.rank import bound_figures as bf



def test_step_ratios_pairs_of_bars_nan_as_zero_and_the_limit_at_one():
    report = {"3 (mean)": (0.5, 0.6), "3 (argmin)": (0.9, float("nan")), "8": (0.4, 1.0)}
    fig = bf.step_ratios(report)
    ax = fig.axes[0]
    heights = [p.get_height() for p in ax.patches]
    assert heights == pytest.approx([0.5, 0.9, 0.4, 0.6, 0.0, 1.0])  # random bars, then adversarial
    xs = [p.get_x() + p.get_width() / 2 for p in ax.patches]
    assert xs == pytest.approx([-0.2, 0.8, 1.8, 0.2, 1.2, 2.2])
    assert [t.get_text() for t in ax.get_xticklabels()] == list(report)
    limit = [ln for ln in ax.get_lines() if ln.get_label().startswith("ratio 1")]
    assert len(limit) == 1 and list(limit[0].get_ydata()) == [1.0, 1.0]


def _sweep(weights=(0.5, 2.0), nets=2, points=5):
    r = torch.logspace(-3, -1, points, dtype=torch.float64).repeat(nets, 1)
    return {w: (r, w * r**3, 100 * w * r**3) for w in weights}


def test_bound_vs_reality_one_solid_and_one_dashed_line_per_head_and_the_cubic_reference():
    sweep = _sweep()
    fig = bf.bound_vs_reality(sweep)
    ax = fig.axes[0]
    lines = ax.get_lines()
    assert len(lines) == 2 * 2 * 2 + 1
    solid = [ln for ln in lines if ln.get_linestyle() == "-"]
    dashed = [ln for ln in lines if ln.get_linestyle() == "--"]
    assert len(solid) == 4 and len(dashed) == 5  # the paper's reference is dashed too
    assert solid[0].get_ydata() == pytest.approx(sweep[0.5][1][0].numpy())
    assert solid[2].get_color() == "C1" and solid[2].get_label() == "observed, scale 2.0"
    ref = [ln for ln in lines if ln.get_label().startswith("paper")][0]
    x, y = ref.get_xdata(), ref.get_ydata()
    assert math.log(y[-1] / y[0]) / math.log(x[-1] / x[0]) == pytest.approx(3.0)
    assert ax.get_xscale() == ax.get_yscale() == "log" and ax.get_ylim() == pytest.approx((1e-14, 1e4))


def test_deep_bound_by_layer_tracked_solid_forward_pass_dotted_bound_dashed_and_the_floor():
    observed = torch.tensor([[1e-2, 1e-6, 1e-20], [2e-2, 1e-7, 1e-15]], dtype=torch.float64)
    tracked = torch.tensor([[-2.0, -6.0, -19.0], [-1.7, -7.0, -22.0]], dtype=torch.float64)
    bounds = torch.tensor([[-1.7, -4.0, -12.0], [-1.4, -3.0, -10.0]], dtype=torch.float64)
    fig = bf.deep_bound_by_layer(observed, tracked, bounds, floor=1e-13)
    ax = fig.axes[0]
    lines = ax.get_lines()
    assert len(lines) == 2 * 3 + 1
    assert list(lines[0].get_xdata()) == [0, 1, 2]
    assert lines[0].get_ydata() == pytest.approx([-2.0, -6.0, -19.0]) and lines[0].get_linestyle() == "-"
    assert lines[1].get_ydata() == pytest.approx([-2.0, -6.0, -17.0])  # clamped at 1e-17
    assert lines[1].get_linestyle() == ":" and lines[2].get_linestyle() == "--"
    assert lines[0].get_color() == variant_color("SAN")
    assert lines[5].get_ydata() == pytest.approx(bounds[1].numpy())
    assert lines[-1].get_ydata()[0] == pytest.approx(-13.0)
    assert ax.get_ylim()[0] <= -22.0  # the deepest tracked value is shown


def test_skip_curves_are_relative_to_the_input_and_the_construction_is_black_dashed():
    curves = {"SAN (random)": torch.tensor([2.0, 0.2, 2e-3]), "SAN+skip (random)": torch.tensor([2.0, 1.5, 1.0]),
              "SAN+skip (W_Q = W_K = 0)": torch.tensor([4.0, 4.0, 4.0]),
              "SAN+skip (random), relative": torch.tensor([0.5, 0.25, 0.05])}
    fig = bf.skip_curves(curves)
    lines = fig.axes[0].get_lines()
    assert [ln.get_label() for ln in lines] == list(curves)
    assert lines[0].get_ydata() == pytest.approx([1.0, 0.1, 1e-3])
    assert lines[1].get_color() == variant_color("SAN+skip") and lines[1].get_linestyle() == "-"
    assert lines[2].get_color() == "black" and lines[2].get_linestyle() == "--"
    assert list(lines[2].get_ydata()) == [1.0, 1.0, 1.0]
    assert lines[3].get_color() == variant_color("SAN+skip") and lines[3].get_linestyle() == ":"
    assert lines[3].get_ydata() == pytest.approx([1.0, 0.5, 0.1])


def test_mlp_collapse_labels_each_gain_with_its_measured_lambda():
    san = torch.tensor([0.5, 1e-4, 1e-12])
    curves = {1.0: torch.tensor([0.5, 1e-2, 1e-9]), 2.0: torch.tensor([0.5, 1e-1, 1e-6])}
    fig = bf.mlp_collapse(san, curves, {1.0: 30.2, 2.0: 121.0})
    lines = fig.axes[0].get_lines()
    assert [ln.get_label() for ln in lines] == ["SAN", "SAN+MLP, measured $\\lambda$ = 30",
                                                "SAN+MLP, measured $\\lambda$ = 121"]
    assert lines[2].get_ydata() == pytest.approx(curves[2.0].numpy())
    assert lines[1].get_alpha() < lines[2].get_alpha()


def test_layernorm_collapse_two_curves_in_the_variant_colours():
    fig = bf.layernorm_collapse(torch.tensor([0.5, 1e-20]), torch.tensor([0.5, 1e-9]))
    lines = fig.axes[0].get_lines()
    assert [ln.get_color() for ln in lines] == [variant_color("SAN"), variant_color("SAN+LN")]
    assert lines[0].get_ydata()[1] == pytest.approx(1e-17)  # clamped
    assert fig.axes[0].get_yscale() == "log"
