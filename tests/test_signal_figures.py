"""Smoke tests of the figures of chapters "Rank collapse at initialisation" (attnbook.signal.collapse_figures)
and "Unequal gradients" (attnbook.signal.reverser_figures.training_losses), drawn from small synthetic inputs."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import pytest
import torch

from attnbook.signal import collapse_figures, reverser_figures

CONFIGS = [(ln, s) for ln in ("pre", "post") for s in (False, True)]


def test_cosine_by_depth_draws_simulation_and_theory_per_panel():
    depths = [2, 4, 8]
    sim = {k: [0.1 * i, 0.2 * i, 0.3 * i] for i, k in enumerate(CONFIGS)}
    theory = {k: [v + 0.01 for v in sim[k]] for k in CONFIGS}
    fig = collapse_figures.cosine_by_depth(depths, sim, theory)
    pre, post = fig.axes
    assert [ax.get_title() for ax in (pre, post)] == ["pre-LN", "post-LN"]
    assert len(pre.lines) == len(post.lines) == 4
    # post-LN, scaled: simulation then theory of the last config
    assert list(post.lines[2].get_ydata()) == sim["post", True]
    assert list(post.lines[3].get_ydata()) == theory["post", True]
    assert post.lines[3].get_linestyle() == "--" and pre.get_xscale() == "log"
    assert len(fig.legends) == 1
    plt.close(fig)


def test_grad_norms_by_layer_draws_q_k_v_per_stack_kind():
    depth = 5
    grads = {k: {name: torch.full((depth,), 10.0 ** -(i + j)) for j, name in enumerate("qkv")}
             for i, k in enumerate(CONFIGS)}
    fig = collapse_figures.grad_norms_by_layer(grads)
    pre, post = fig.axes
    assert post.get_title() == "post-LN, depth 5" and pre.get_yscale() == "log"
    assert len(pre.lines) == 6
    assert list(post.lines[0].get_xdata()) == [1, 2, 3, 4, 5]
    assert post.lines[5].get_ydata()[0] == pytest.approx(10.0 ** -(3 + 2))  # post, scaled, W_V
    assert post.lines[3].get_label() == "$W_Q$, alpha=1/sqrt(L)"
    plt.close(fig)


def test_training_losses_smooth_each_run_over_ten_steps():
    results = {("sgd", False, 1.0): {"losses": [2.0] * 30},
               ("adam", True, 0.5): {"losses": [float(i) for i in range(1, 31)]}}
    fig = reverser_figures.training_losses(results, vocab=10, depth=4)
    ax = fig.axes[0]
    assert len(ax.lines) == 3  # two runs and the chance line
    sgd, adam, chance = ax.lines
    assert len(sgd.get_xdata()) == 21 and sgd.get_xdata()[0] == 10
    assert adam.get_ydata()[0] == pytest.approx(5.5) and adam.get_linestyle() == "--"
    assert adam.get_alpha() == 0.55 and sgd.get_alpha() == 1.0
    assert chance.get_ydata()[0] == pytest.approx(math.log(10))
    assert ax.get_title().startswith("Depth 4 post-LN")
    plt.close(fig)


def test_qk_v_ratio_by_layer_draws_measured_solid_and_predicted_dashed_per_stack_kind():
    depth = 4
    measured = {k: [0.5 / (i + 1)] * depth for i, k in enumerate(CONFIGS)}
    predicted = {k: [0.4 / (i + 1)] * depth for i, k in enumerate(CONFIGS)}
    fig = collapse_figures.qk_v_ratio_by_layer(measured, predicted)
    pre, post = fig.axes
    assert post.get_title() == "post-LN, depth 4" and pre.get_yscale() == "log" and len(pre.lines) == 4
    assert list(post.lines[2].get_ydata()) == measured["post", True] and post.lines[2].get_linestyle() == "-"
    assert list(post.lines[3].get_ydata()) == predicted["post", True] and post.lines[3].get_linestyle() == "--"
    assert list(post.lines[0].get_xdata()) == [1, 2, 3, 4]
    plt.close(fig)
