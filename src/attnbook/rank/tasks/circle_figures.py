"""The figures of chapter "The circle task" (:mod:`attnbook.rank.tasks.circle`): the task's two arcs, the
recursive predictions of the trained models (the book's version of Dong et al.'s Figure 3), and the fraction of
seeds whose tokens have merged by each recursion step."""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch

from attnbook.core import plotting
from attnbook.rank.tasks import circle


def task(X: torch.Tensor) -> plt.Figure:
    """The inputs of the circle task (items, 2 tokens, xy): token 1's and token 2's points, one arc each."""
    fig, ax = plt.subplots(figsize=(5.2, 5.2))
    ax.plot(X[:, 0, 0], X[:, 0, 1], ".", ms=2, label="token 1 (inputs)")
    ax.plot(X[:, 1, 0], X[:, 1, 1], ".", ms=2, label="token 2 (inputs)")
    ax.set(aspect="equal", xlabel="x", ylabel="y", title="Two arcs: each token walks\nits own half circle")
    ax.legend(loc="center")
    return fig


def trajectories(runs: Mapping[tuple, Sequence[Mapping]], widths: Sequence[int], variants: Sequence[str],
                 n_points: int = 1000) -> plt.Figure:
    """The rollout of seed 0 of every ``(width, variant)`` of ``runs`` (records with ``traj`` and
    ``final_gap``, :func:`attnbook.rank.tasks.circle.seed_sweep`): a row per variant, a column per width,
    token 1 in blue and token 2 in orange (o: start, x: end) over the data circle in grey."""
    fig, axes = plt.subplots(len(variants), len(widths), figsize=(6.4, 9.6), sharex=True, sharey=True,
                             layout="constrained", squeeze=False)
    ring = circle.circle_points(n_points)
    for col, d in enumerate(widths):
        for row, variant in enumerate(variants):
            ax, r = axes[row, col], runs[d, variant][0]
            tr = r["traj"].clamp(-0.6, 0.6)
            ax.plot(ring[:, 0], ring[:, 1], color="0.85", lw=4, zorder=0)
            for k, c in enumerate(["tab:blue", "tab:orange"]):
                ax.plot(tr[:, k, 0], tr[:, k, 1], "-", color=c, lw=1, alpha=0.8)
                ax.plot(tr[0, k, 0], tr[0, k, 1], "o", color=c, ms=6)
                ax.plot(tr[-1, k, 0], tr[-1, k, 1], "x", color="k", ms=7)
            ax.set(aspect="equal", xlim=(-0.6, 0.6), ylim=(-0.6, 0.6),
                   title=f"d={d}, {variant}\ngap {r['final_gap']:.2f}")
    for ax in axes[-1]:
        ax.set_xlabel("x")
    for ax in axes[:, 0]:
        ax.set_ylabel("y")
    fig.suptitle("Recursive predictions, 300 steps\n(o: start, x: end; seed 0)")
    return fig


def merged_by_step(steps: Mapping[tuple, Sequence[Optional[int]]], rollout_steps: int) -> plt.Figure:
    """The fraction of seeds whose tokens have merged by each recursion step ``t`` (collapse step at most ``t``),
    one line per ``(width, variant)`` of ``steps`` (solid: d=32, dashed: d=128)."""
    fig, ax = plt.subplots(figsize=(6.4, 5.0), layout="constrained")
    t = np.arange(rollout_steps + 1)
    styles = {32: "-", 128: "--"}
    for (d, variant), s in steps.items():
        frac = np.mean([(t >= step) if step is not None else 0 * t for step in s], axis=0)
        ax.plot(t, frac, styles.get(d, ":"), color=plotting.variant_color(variant), label=f"d={d} {variant}")
    ax.set(xlabel="recursion step t", ylabel="fraction of seeds collapsed",
           title="Without the outer skip some runs collapse;\nwith it, none do")
    fig.legend(loc="outside lower center", ncol=2)
    return fig
