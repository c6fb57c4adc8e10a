"""Smoke tests of attnbook.rank.tasks.circle_figures (chapter "The circle task"): each figure draws from small
synthetic runs and puts its lines where they belong."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from attnbook.rank.tasks import circle, circle_figures

VARIANTS = ["SAN", "SAN+skip", "SAN+MLP"]


def _record(final_gap: float) -> dict:
    traj = torch.zeros(6, 2, 2)
    traj[:, 0, 0], traj[:, 1, 0] = 0.3, -0.3
    traj[-1, 1, 0] = 5.0  # off the plot: clamped to the panel
    return {"traj": traj, "final_gap": final_gap}


def test_task_draws_both_arcs():
    X, _ = circle.circle_dataset(20)
    fig = circle_figures.task(X)
    ax = fig.axes[0]
    assert [line.get_label() for line in ax.lines] == ["token 1 (inputs)", "token 2 (inputs)"]
    assert np.allclose(ax.lines[1].get_ydata(), X[:, 1, 1].numpy())
    plt.close(fig)


def test_trajectories_have_a_panel_per_variant_and_width():
    runs = {(d, v): [_record(0.25 * i)] for i, (d, v) in enumerate((d, v) for d in (32, 128) for v in VARIANTS)}
    fig = circle_figures.trajectories(runs, [32, 128], VARIANTS, n_points=20)
    assert len(fig.axes) == 6
    # a row per variant, a column per width: row 2 (SAN+MLP), column 1 (d=128) is the sixth record
    assert fig.axes[2 * 2 + 1].get_title() == "d=128, SAN+MLP\ngap 1.25"
    ax = fig.axes[0]
    assert len(ax.lines) == 1 + 2 * 3  # the data circle, then per token: path, start, end
    assert float(ax.lines[4].get_xdata()[-1]) == pytest.approx(0.6)  # token 2 runs off: clamped
    plt.close(fig)


def test_merged_by_step_counts_the_seeds_merged_by_each_step():
    steps = {(32, "SAN"): [2, None, 4, None], (128, "SAN+skip"): [None, None, None, None]}
    fig = circle_figures.merged_by_step(steps, rollout_steps=5)
    ax = fig.axes[0]
    assert len(ax.lines) == 2
    assert list(ax.lines[0].get_ydata()) == [0, 0, 0.25, 0.25, 0.5, 0.5]
    assert list(ax.lines[1].get_ydata()) == [0] * 6 and ax.lines[1].get_linestyle() == "--"
    assert len(fig.legends) == 1
    plt.close(fig)
