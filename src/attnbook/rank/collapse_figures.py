"""The figures of chapters "Pure attention loses rank" and "Path decomposition": relative residual curves by
layer (by architecture, as agreeing digits, for the explorer and over weight scales), the error of the path
sum, the share of paths of each length, and the distance to rank one of attention products by path length.

Residual curves are tensors of shape ``(runs, depth + 1)`` (column 0 the input), as
:func:`attnbook.core.norms.residual_by_layer` returns them; exact zeros are drawn at :data:`FLOOR`."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import torch

from attnbook.core.plotting import PAPER_STYLE, paper_line, variant_color

#: plotted in place of exact zeros on log axes
FLOOR = 1e-17
EPS64 = torch.finfo(torch.float64).eps


def residual_by_variant(curves: dict) -> plt.Figure:
    """Relative residual by layer for each architecture of ``curves`` (``name -> (runs, depth + 1)``): the
    median line and the min-max band over runs in the variant's colour, with float64 precision dotted."""
    fig, ax = plt.subplots(figsize=(6.4, 5.2), layout="constrained")
    for name, c in curves.items():
        c = c.clamp_min(FLOOR)
        layers = torch.arange(c.shape[1])
        ax.plot(layers, c.median(0).values, label=name, color=variant_color(name))
        ax.fill_between(layers, c.min(0).values, c.max(0).values, color=variant_color(name), alpha=0.15)
    ax.axhline(EPS64, color="0.5", lw=1, ls=":", label="float64 precision")
    ax.set(yscale="log", ylim=(1e-17, 3), xlabel="layer", ylabel="relative residual ||res(X)|| / ||X||",
           title="Pure attention collapses to rank one in a few layers;\nskip connections keep the tokens apart")
    fig.legend(loc="outside lower center", ncol=2)
    return fig


def agreeing_digits(san: torch.Tensor, shown: int = 6) -> plt.Figure:
    """``log10(-log10 r)`` (the log of the number of agreeing digits) of each run of a pure SAN over its first
    ``shown`` layers, beside the paper's cubic rate (slope ``log10 3`` from the median at layer 1, layers 1
    to 3) and the 16 digits where float64 runs out."""
    fig, ax = plt.subplots(figsize=(6.4, 4.6), layout="constrained")
    for i, c in enumerate(san[:, : shown + 1].clamp_min(FLOOR)):
        ax.plot(range(shown + 1), (-c.log10()).log10(), color=variant_color("SAN"), alpha=0.35, lw=1,
                label="pure SAN (each network and input)" if i == 0 else None)
    l0 = torch.arange(1, 4)
    start = math.log10(-math.log10(san[:, 1].median()))
    ax.plot(l0, start + (l0 - 1) * math.log10(3), **PAPER_STYLE, label="paper: cubic rate (slope log10 3)")
    ax.axhline(math.log10(16), color="0.5", lw=1, ls=":", label="float64 runs out (16 digits)")
    ax.set(xlabel="layer", ylabel="log10(-log10 r)\n(log of agreeing digits)",
           title="Agreeing digits grow about threefold per layer")
    fig.legend(loc="outside lower center", ncol=1)
    return fig


def explorer_panel(pure: torch.Tensor, chosen: torch.Tensor) -> plt.Figure:
    """The explorer's figure: median relative residual of the pure SAN (grey) and of the chosen network
    (blue, with its min-max band over inputs), both ``(inputs, depth + 1)``."""
    pure, chosen = pure.clamp_min(FLOOR), chosen.clamp_min(FLOOR)
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    x = range(chosen.shape[1])
    ax.plot(x, pure.median(0).values, color="0.6", label="pure SAN")
    ax.plot(x, chosen.median(0).values, color="C0", label="your network")
    ax.fill_between(x, chosen.min(0).values, chosen.max(0).values, color="C0", alpha=0.2)
    ax.set(yscale="log", ylim=(1e-17, 3), xlabel="layer", ylabel="relative residual",
           title=f"Median and range over {chosen.shape[0]} inputs")
    ax.legend(loc="lower left")
    return fig


def weight_scale_grid(grid: dict) -> plt.Figure:
    """One panel per architecture of ``grid`` (``(name, gain) -> (runs, depth + 1)``), in first-seen order
    on a 2 x 2 grid, with the median relative residual for each weight scale (light to dark, in order)."""
    names = list(dict.fromkeys(name for name, _ in grid))
    fig, axes = plt.subplots(2, 2, figsize=(6.4, 6.4), sharex=True, sharey=True, layout="constrained")
    for ax, name in zip(axes.flat, names):
        gains = [g for n, g in grid if n == name]
        for gain, shade in zip(gains, ("0.65", "C0", "0.1")):
            ax.plot(grid[name, gain].clamp_min(FLOOR).median(0).values, color=shade, label=f"scale {gain:g}")
        ax.set(yscale="log", ylim=(1e-17, 3), title=name)
    for ax in axes[1]:
        ax.set_xlabel("layer")
    for ax in axes[:, 0]:
        ax.set_ylabel("relative residual")
    fig.legend(*axes[0, 0].get_legend_handles_labels(), loc="outside lower center", ncol=3)
    return fig


def path_sum_errors(no_skip: dict, with_skip: dict) -> plt.Figure:
    """Bars of the relative error of the path sum per network ``(L, H) -> error``, without and with skips
    side by side (errors below ``1e-17`` drawn at ``1e-17``), against the required ``1e-10`` and float64
    machine epsilon."""
    fig, ax = plt.subplots(figsize=(6.4, 4.4), layout="constrained")
    labels = [f"L={L}, H={H}" for L, H in no_skip]
    xs = torch.arange(len(labels)).double()
    ax.bar(xs - 0.2, [max(v, 1e-17) for v in no_skip.values()], 0.4, label="no skips: $H^L$ paths")
    ax.bar(xs + 0.2, [max(v, 1e-17) for v in with_skip.values()], 0.4, label="with skips: $(H+1)^L$ paths")
    ax.axhline(1e-10, color="black", lw=1, label="required: $10^{-10}$")
    ax.axhline(EPS64, color="0.5", lw=1, ls=":", label="float64 machine epsilon")
    ax.set_yscale("log")
    ax.set_xticks(xs.tolist(), labels)
    ax.set(ylim=(1e-17, 1e-8), ylabel="relative error of the path sum",
           title="The path sum reproduces the network\nto machine precision")
    fig.legend(loc="outside lower center", ncol=2)
    return fig


def path_length_shares(fractions: dict, peak: tuple) -> plt.Figure:
    """Grouped bars of the fraction of paths of each length ``k`` per model (``name -> [fraction of length
    k for k = 0..L]``, up to three models), with the paper's BERT-base peak ``(lo, hi)`` as a dashed line
    at its middle."""
    fig, ax = plt.subplots(figsize=(6.4, 4.8), layout="constrained")
    for i, (name, fr) in enumerate(fractions.items()):
        ax.bar([k + (i - 1) * 0.27 for k in range(len(fr))], fr, 0.27, label=name)
    ax.set(xlabel="path length $k$ (layers not skipped)", ylabel="fraction of all paths")
    paper_line(ax, sum(peak) / 2, f"BERT-base histogram peaks at lengths {peak[0]}-{peak[1]}", horizontal=False)
    ax.set_xticks(range(0, 13, 2))
    ax.set_title("With skip connections, most paths\nof BERT-base are 11-12 layers long")
    fig.legend(loc="outside lower center", ncol=1)
    return fig


def rank1_by_length(distances: dict, heads: int) -> plt.Figure:
    """Box plots of the relative distance to the best rank-one approximation of attention products along
    sampled paths, per path length (``k -> (n_paths,)``, values below ``1e-17`` drawn at ``1e-17``), of a
    random ``max(k)``-layer, ``heads``-head Transformer, with float64 machine epsilon dotted."""
    fig, ax = plt.subplots(figsize=(6.4, 4.8), layout="constrained")
    ax.boxplot([distances[k].clamp(min=1e-17).numpy() for k in distances], positions=list(distances),
               widths=0.6)
    ax.axhline(EPS64, color="0.5", lw=1, ls=":", label="float64 machine epsilon")
    ax.set(yscale="log", xlabel="path length $k$", ylabel="relative distance to best rank-1 approximation")
    ax.set_title(f"Longer paths: attention products closer to rank one\n"
                 f"(random {max(distances)}-layer, {heads}-head Transformer at init.,\n"
                 f"{len(next(iter(distances.values())))} paths per length)")
    fig.legend(loc="outside lower center", ncol=2)
    return fig


def path_diagram(n_layers: int, n_heads: int, paths: dict) -> plt.Figure:
    """A picture of paths through an ``n_layers``-layer network with ``n_heads`` heads per layer and skip
    connections (chapter "Path decomposition", eq. ``path-count``): each layer is a column of heads with the
    identity (the skip connection) below them; each path of ``paths`` (label -> a sequence of head indices from
    0, or :data:`attnbook.rank.paths.SKIP`, one per layer) is a line from the input through the head or the
    identity it takes at every layer, its length (the heads it goes through) in the legend."""
    from attnbook.rank.paths import SKIP

    fig, ax = plt.subplots(figsize=(6.4, 3.4), layout="constrained")
    skip_row = -1.0  # the identity lane, under the heads
    for layer in range(1, n_layers + 1):
        for h in range(n_heads):
            ax.add_patch(plt.Rectangle((layer - 0.22, h - 0.3), 0.44, 0.6, fill=False, lw=1, color="0.4"))
            ax.text(layer, h, f"head {h + 1}", ha="center", va="center", fontsize=7, color="0.3")
        ax.text(layer, skip_row, "identity", ha="center", va="center", fontsize=7, color="0.3",
                bbox=dict(boxstyle="round,pad=0.2", fc="white", ec="0.6", lw=0.8, ls="--"))
        ax.text(layer, n_heads - 0.35, f"layer {layer}", ha="center", va="bottom", fontsize=8)
    mid = (n_heads - 1) / 2
    ax.text(0, mid, "X", ha="center", va="center", fontsize=12)
    ax.text(n_layers + 1, mid, "output", ha="center", va="center", fontsize=10)
    for k, (label, path) in enumerate(paths.items()):
        if len(path) != n_layers or any(h != SKIP and not 0 <= h < n_heads for h in path):
            raise ValueError(f"path {label!r} must give one head in 0..{n_heads - 1} or SKIP per layer, got {path}")
        offset = 0.08 * (k - (len(paths) - 1) / 2)  # side by side where two paths share a box
        ys = [mid] + [(skip_row if h == SKIP else h) + offset for h in path] + [mid]
        length = sum(h != SKIP for h in path)
        ax.plot(range(n_layers + 2), ys, marker="o", ms=4, lw=2, color=f"C{k}",
                label=f"{label} (length {length})")
    ax.set(xlim=(-0.5, n_layers + 1.6), ylim=(skip_row - 0.6, n_heads + 0.1))
    ax.axis("off")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.02), ncol=len(paths), fontsize=8, frameon=False)
    return fig
