"""The figures and tables of chapter "Rank collapse in pretrained transformers" (Part I, chapter 5): the
relative residual by depth of the surgical variants of pretrained and random models next to the values of
Dong et al. (2021, Fig. 2), the table of last-layer values, the table of where the doubly exponential bound
applies, and the distance to rank one of products of real attention matrices along paths.

The paper's values are read by :func:`fig2_reference` from ``papers.number("dong2021",
"fig2_relative_residual").value`` into ``{(model, state): {variant: [(layer, r_l), ...], "embeddings": r_0}}``;
the book's curves are ``{variant: (L + 1, n_sequences) array}`` as :func:`attnbook.hf.residual_curves`
returns them.
"""

from __future__ import annotations

from typing import Mapping

import matplotlib.pyplot as plt
import numpy as np

from attnbook.core.plotting import paper_marker, variant_color
from attnbook.hf.surgery import VARIANTS

MINILM = "all-MiniLM-L6-v2"
#: short model names for the tables
SHORT = {MINILM: "MiniLM-L6", "bert-base-cased": "BERT-base", "albert-base-v2": "ALBERT-base",
         "xlnet-base-cased": "XLNet-base"}
#: the depth of the paper's models (the x axis of its Fig. 2)
PAPER_DEPTH = 12


def fig2_reference(value: Mapping) -> dict:
    """The paper's Fig. 2 values (``model -> state -> {variant: [[layer, r], ...], "embeddings": r_0}``) as
    ``{(model, state): {variant: [(layer, r), ...], "embeddings": r_0}}``."""
    return {(model, state): {k: v if k == "embeddings" else [tuple(p) for p in v] for k, v in d.items()}
            for model, states in value.items() for state, d in states.items()}


def paper_key(name: str) -> str:
    """The paper's model that ``name`` is compared with: offline, MiniLM is compared with BERT-base."""
    return "bert-base-cased" if name == MINILM else name


def _panel(ax: plt.Axes, curves: Mapping, paper: Mapping, title: str) -> None:
    """One panel: the book's mean over inputs (line) and mean +- sd (band) per variant against ``l / L``,
    and the paper's points as hollow markers with a dot in the variant's colour (black: embeddings)."""
    for variant, r in curves.items():
        depth = np.arange(r.shape[0]) / (r.shape[0] - 1)
        mean, std = r.mean(1), r.std(1)
        color = variant_color(variant)
        ax.plot(depth, mean, color=color, label=variant)
        ax.fill_between(depth, mean - std, mean + std, color=color, alpha=0.2)
    for i, (variant, points) in enumerate(paper.items()):
        x, y = zip(*([(0, points)] if variant == "embeddings" else points))
        x = [layer / PAPER_DEPTH for layer in x]
        paper_marker(ax, x, y, label="Fig. 2 (dot: variant)" if i == 0 else None)
        ax.plot(x, y, "o", ms=3, color="black" if variant == "embeddings" else variant_color(variant))
    ax.set(title=title, xlabel="depth $l/L$ (0: embeddings)", ylim=(-0.02, 1.05), xticks=[0, 0.5, 1])


def _panels(curves_by_model: Mapping, reference: Mapping, state: str, titles: list, suptitle: str,
            height: float) -> plt.Figure:
    """Two panels a row, one per model; a spare panel holds the legend, otherwise the first panel does."""
    names = list(curves_by_model)
    n_rows = (len(names) + 1) // 2
    fig, axes = plt.subplots(n_rows, 2, figsize=(6.4, height * n_rows), squeeze=False,
                             layout="constrained")
    for ax, name, title in zip(axes.flat, names, titles):
        _panel(ax, curves_by_model[name], reference[(paper_key(name), state)], title)
    for ax in axes[:, 0]:
        ax.set_ylabel(r"$r_l$ (mean $\pm$ sd)")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
        ax.legend(handles, labels, loc="center")
    if len(names) % 2 == 0:
        axes[0, 0].legend(loc="upper right")
    fig.suptitle(suptitle)
    return fig


def pretrained_panels(curves_by_model: Mapping, reference: Mapping) -> plt.Figure:
    """The relative residual by relative depth of each pretrained model's four variants (``model ->
    curves``), with the paper's pretrained values as hollow markers (for MiniLM: BERT-base's)."""
    titles = [name + ("\n(markers: BERT-base)" if name == MINILM else "") for name in curves_by_model]
    return _panels(curves_by_model, reference, "pretrained", titles,
                   "Pretrained: without skips the tokens\nbecome identical within 4 layers", 3.4)


def init_panels(curves_by_model: Mapping, reference: Mapping) -> plt.Figure:
    """The same at initialisation (``model -> curves`` of the randomly initialised models)."""
    return _panels(curves_by_model, reference, "init", [f"{name} at init" for name in curves_by_model],
                   "At initialisation: SAN and SAN+MLP collapse\nafter one layer; skips keep the tokens apart",
                   3.3)


def _paper_at_last_layer(points) -> str:
    last = [y for x, y in points if x == PAPER_DEPTH]
    return f"{last[0]:.2f}" if last else "≈ 0"  # SAN: about 0 from early on


def last_layer_table(pretrained: Mapping, init: Mapping, reference: Mapping) -> str:
    """A markdown table of ``r_L`` at the last layer, mean +- sd over the inputs, per model (rows:
    ``pretrained`` then ``init``, each ``model -> curves``) and variant, above the paper's value at its
    layer 12 (for MiniLM: BERT-base's)."""
    rows = ["| model | " + " | ".join(VARIANTS) + " |", "|---" * (len(VARIANTS) + 1) + "|"]
    results = [(n, "pretrained", c) for n, c in pretrained.items()]
    results += [(n, "init", c) for n, c in init.items()]
    for name, state, curves in results:
        paper = reference[(paper_key(name), state)]
        cells = [f"{curves[v][-1].mean():.2f} ± {curves[v][-1].std():.2f}"
                 f"<br>*paper {_paper_at_last_layer(paper[v])}*" for v in VARIANTS]
        rows.append(f"| {SHORT.get(name, name)}<br>{state} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def bound_table(cases: Mapping, max_layers: int = 6) -> str:
    """A markdown table of where the theorem applies: for each case (``name ->``
    :func:`attnbook.hf.where_the_bound_applies`) and its first ``max_layers`` layers, the contraction
    threshold, the input residual, the input's relative residual and whether the step contracts."""
    rows = ["| model | layer | threshold r* | input residual | relative residual of the input | "
            "step contracts? |", "|---|---|---|---|---|---|"]
    for name, w in cases.items():
        for layer in range(min(len(w["threshold"]), max_layers)):
            rows.append(f"| {name} | {layer + 1} | {w['threshold'][layer]:.2g} | "
                        f"{w['input_residual'][layer]:.2g} | {w['input_relative'][layer]:.1e} | "
                        f"{'yes' if w['applies'][layer] else 'no'} |")
    return "\n".join(rows)


def rank1_boxplots(rank1: Mapping) -> plt.Figure:
    """Box plots of the distance to rank one of path products by path length, one panel per model
    (``name -> {length: distances}``, :func:`attnbook.rank.paths.rank1_distance_by_length`), on a log
    axis (values below 1e-8 are drawn at 1e-8); panels after the first are wider (deeper models)."""
    fig, axes = plt.subplots(1, len(rank1), figsize=(6.4, 4.2), sharey=True, squeeze=False,
                             gridspec_kw=dict(width_ratios=[1] + [1.6] * (len(rank1) - 1)), layout="constrained")
    axes = axes[0]
    for ax, (name, d) in zip(axes, rank1.items()):
        ax.boxplot([np.maximum(v, 1e-8) for v in d.values()], positions=list(d), widths=0.6,
                   showfliers=False)
        ax.set(yscale="log", title=name, xlabel="path length $k$")
    axes[0].set_ylabel(r"$\|P - P_1\|_F \,/\, \|P\|_F$")
    fig.suptitle("Products of real attention matrices approach\nrank one as paths get longer (sampled paths)")
    return fig
