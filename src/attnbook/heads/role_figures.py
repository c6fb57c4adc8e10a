"""The figures and tables of chapter "A translation model and what its heads do": the training record of the
shipped model, the neighbour shares of the encoder heads, the emergence of the roles during training, MiniLM's
relevance map with its roles marked, and the Markdown tables and printed summaries the chapter displays (the
numbers in them come from :mod:`attnbook.heads.roles`, :mod:`attnbook.heads.translation` and
:mod:`attnbook.heads.lrp`)."""

from __future__ import annotations

import textwrap
from typing import Mapping, Optional, Sequence

import matplotlib.patheffects as pe
import matplotlib.pyplot as plt
import numpy as np
import torch

from attnbook.core.plotting import MAX_WIDTH
from attnbook.heads import roles as hd

#: the chapter's names of the three kinds of attention (:data:`attnbook.heads.masks.ATTENTION_KINDS`)
KIND_NAMES = {
    "enc_self": "encoder self-attention",
    "dec_self": "decoder self-attention",
    "dec_cross": "encoder-decoder attention",
}


def training_record(meta: Mapping, n_eval_bleu: int) -> plt.Figure:
    """Top: the training loss curve and the dev cross-entropy at each evaluation of a translation model's
    record ``meta``; bottom: its greedy dev BLEU (on ``n_eval_bleu`` verses) at each evaluation."""
    ev = meta["evals"]
    steps = [e["step"] for e in ev]
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(6.4, 6.4), sharex=True, layout="constrained")
    curve = meta["loss_curve"]
    ax1.plot(curve["step"], curve["loss"], color="0.6", lw=1, label="training (label-smoothed)")
    ax1.plot(steps, [e["dev_loss"] for e in ev], "o-", label="dev cross-entropy")
    ax1.set(ylabel="loss (nats)", ylim=(1, 8), title="Training record: loss and dev BLEU (precomputed)")
    ax1.legend()
    ax2.plot(steps, [e["dev_bleu"] for e in ev], "o-", color="#2ca02c")
    ax2.set(xlabel="optimiser step", ylabel=f"dev BLEU (greedy, {n_eval_bleu} verses)")
    return fig


def neighbour_shares(prev, next_) -> plt.Figure:
    """Two heat maps of the encoder heads ``(layers, heads)``: the share of tokens whose largest weight is on
    the previous token (top) and on the next token (bottom), with the values of 0.5 and more printed."""
    fig, axes = plt.subplots(2, 1, figsize=(6.4, 6.8), layout="constrained")
    for ax, v, name in zip(axes, (prev, next_), ("previous token (-1)", "next token (+1)")):
        v = np.asarray(v)
        im = ax.imshow(v, vmin=0, vmax=1, cmap="viridis", aspect="auto")
        for (layer, h), x in np.ndenumerate(v):
            if x >= 0.5:
                ax.text(h, layer, f"{x:.2f}", ha="center", va="center", fontsize=12, color="black")
        ax.set(title=f"Share of tokens whose top key is the {name}", ylabel="layer",
               xticks=range(v.shape[1]), xticklabels=range(1, v.shape[1] + 1),
               yticks=range(v.shape[0]), yticklabels=range(1, v.shape[0] + 1))
        ax.grid(False)
    axes[-1].set_xlabel("encoder head")
    fig.colorbar(im, ax=axes, shrink=0.6)
    return fig


def encoder_attention_maps(model, src_ids: Sequence[int], tokens: Sequence[str],
                           heads: Mapping[str, tuple[int, int]]) -> plt.Figure:
    """The attention maps of chosen encoder heads on one source sentence (chapter "A translation model": what a
    confident, a previous-token and a next-token head look like). ``src_ids``: the sentence's ids (ending in
    EOS); ``tokens``: their labels; ``heads``: panel title -> ``(layer, head)``, counted from 1. Rows are
    queries, columns keys; each row sums to one."""
    if len(tokens) != len(src_ids):
        raise ValueError(f"need one label per token, got {len(tokens)} labels for {len(src_ids)} ids")
    device = next(model.parameters()).device
    with torch.no_grad():
        _, _, attns = model.encode(torch.tensor([list(src_ids)], device=device), return_attention=True)
    n_layers, n_heads = len(attns), attns[0].shape[1]
    # the book's column width: wider figures are shrunk on a phone until their text is unreadable
    fig, axes = plt.subplots(1, len(heads), figsize=(6.4, 3.0), layout="constrained", squeeze=False)
    for ax, (title, (layer, head)) in zip(axes[0], heads.items()):
        if not (1 <= layer <= n_layers and 1 <= head <= n_heads):
            raise ValueError(f"head ({layer}, {head}) is outside {n_layers} layers x {n_heads} heads (from 1)")
        a = attns[layer - 1][0, head - 1].cpu().numpy()
        ax.imshow(a, vmin=0, vmax=1, cmap="Greys")
        ax.set_xticks(range(len(tokens)), tokens, rotation=90, fontsize=6)
        ax.set_yticks(range(len(tokens)), tokens, fontsize=6)
        ax.set_title(f"{title}\nlayer {layer}, head {head}", fontsize=10)
        ax.set_xlabel("key", fontsize=10)
        ax.grid(False)
    axes[0, 0].set_ylabel("query", fontsize=10)
    return fig


#: the roles of the emergence figure: (kind, statistics, marker, label)
EMERGENCE = tuple((*hd.EMERGING_ROLES[role], marker, label) for role, marker, label in (
    ("prev", "o-", "encoder: best previous-token share"),
    ("next", "s-", "encoder: best next-token share"),
    ("confident", "^-", "encoder: best confidence"),
    ("sink", "v-", "encoder: best EOS-sink share"),
    ("enc-dec confident", "d-", "enc-dec: best confidence"),
))


def role_emergence(trace: Sequence[Mapping], evals: Sequence[Mapping], criterion: float,
                   learning_rate: Optional[tuple[Sequence[float], Sequence[float]]] = None,
                   other_seed: Optional[tuple[str, Sequence[Mapping]]] = None) -> plt.Figure:
    """The best head's value of each role of :data:`EMERGENCE` against the training step (log scale; step 0
    drawn at 1) from the role statistics recorded during training (``trace``,
    :func:`attnbook.heads.roles.best_over_training`), the positional ``criterion`` as a dotted line, and dev
    BLEU of the evaluations ``evals`` on a second axis. ``learning_rate``: ``(steps, rate / peak)``, drawn on
    the roles' axis (both run from 0 to 1), so that a role's late growth can be read against the rate;
    ``other_seed``: ``(label, trace)`` of a second training, its best neighbour share drawn dashed."""
    fig, ax = plt.subplots(figsize=(6.4, 5.6), layout="constrained")
    for kind, stat, marker, label in EMERGENCE:
        steps, best = hd.best_over_training(trace, kind, (stat,))
        ax.plot(np.maximum(steps, 1), best, marker, label=label)
    if other_seed is not None:
        label, other = other_seed
        steps, best = hd.best_over_training(other, "enc_self", ("prev", "next"))
        ax.plot(np.maximum(steps, 1), best, "--", color="0.45", lw=1.5, marker=".",
                label=f"{label}: best neighbour share")
    if learning_rate is not None:
        steps, rate = (np.asarray(x, dtype=float) for x in learning_rate)
        ax.plot(np.maximum(steps, 1), rate, color="0.6", lw=1, label="learning rate / peak")
    ax.axhline(criterion, color="0.5", ls=":", lw=1, label=f"positional criterion ({criterion})")
    ax2 = ax.twinx()
    ax2.plot([max(e["step"], 1) for e in evals], [e["dev_bleu"] for e in evals], color="0.3", lw=2,
             label="dev BLEU")
    ax2.set_ylabel("dev BLEU")
    ax2.grid(False)
    ax.set(xscale="log", xlabel="training step", ylabel="best head's value", ylim=(0, 1),
           title="Heads specialise while BLEU rises (precomputed)")
    handles = zip(ax.get_legend_handles_labels(), ax2.get_legend_handles_labels())
    fig.legend(*[a + b for a, b in handles], loc="outside lower center", ncol=1)
    return fig


def late_training(traces: Mapping[str, Sequence[Mapping]], learning_rate: tuple[Sequence[float], Sequence[float]],
                  from_step: float) -> plt.Figure:
    """The last part of training on a linear axis (chapter "A translation model": is the positional share still
    rising?): each training's best neighbour share (``traces``: label -> recorded role statistics,
    :func:`attnbook.heads.roles.best_over_training`) from ``from_step`` on, and the learning rate as a share of
    its peak (``(steps, rate / peak)``) on the same axis."""
    fig, ax = plt.subplots(figsize=(6.4, 3.0), layout="constrained")
    for (label, trace), marker in zip(traces.items(), ("o-", "s--", "^:")):
        steps, best = hd.best_over_training(trace, "enc_self", ("prev", "next"))
        late = steps >= from_step
        ax.plot(steps[late], best[late], marker, label=f"{label}: best neighbour share")
    steps, rate = (np.asarray(x, dtype=float) for x in learning_rate)
    late = steps >= from_step
    ax.plot(steps[late], rate[late], color="0.6", lw=1, label="learning rate / peak")
    ax.set(xlabel="training step", ylabel="share", ylim=(0, 1), title="The last 30% of training")
    ax.legend(loc="upper right", fontsize=9)
    return fig


def role_grid(values: Mapping[str, Mapping[str, Sequence[float]]], criteria: Mapping[str, float],
              not_analysed: Optional[Mapping[str, Mapping[str, Sequence[float]]]] = None) -> plt.Figure:
    """The role table's grid of settings as one figure (chapter "A translation model": what it takes to grow
    the roles): one panel per role statistic (``values``: statistic -> {setting -> one value per analysed
    seed}), each seed a dot, each setting's mean over its analysed seeds a short bar, the models that fail a
    gate (``not_analysed``, same shape; no bar) hollow dots, and the paper's criterion for the statistic
    (``criteria``, where it has one) a dotted line; the book's figure width and font sizes (short names
    wrap). A setting appears once it has a model, analysed or not."""
    fig, axes = plt.subplots(1, len(values), figsize=(MAX_WIDTH, 3.2), layout="constrained", squeeze=False)
    for ax, (stat, cells) in zip(axes[0], values.items()):
        hollow = (not_analysed or {}).get(stat, {})
        settings = [s for s in dict.fromkeys([*cells, *hollow]) if cells.get(s) or hollow.get(s)]
        for x, setting in enumerate(settings):
            seeds, out = list(cells.get(setting, [])), list(hollow.get(setting, []))
            if seeds:
                ax.plot([x] * len(seeds), seeds, "o", color="C0", alpha=0.8)
                ax.plot([x - 0.25, x + 0.25], [np.mean(seeds)] * 2, color="0.2", lw=2)
            if out:
                ax.plot([x] * len(out), out, "o", color="C0", mfc="none", mew=1.5)
        if stat in criteria:
            ax.axhline(criteria[stat], color="0.5", ls=":", lw=1.5)
        ax.set_xticks(range(len(settings)), [textwrap.fill(c, 7) for c in settings])
        ax.set_xlim(-0.5, len(settings) - 0.5)
        ax.set_title(stat)
    return fig


def relevance_with_roles(relevance, marks: Mapping[str, object], title: str) -> plt.Figure:
    """A heat map of each head's relevance ``(layers, heads)`` with letters on the heads of each role:
    ``marks`` maps a letter (``"P"``, ``"S"``) to a boolean ``(layers, heads)`` table of the heads that have it."""
    rel = np.asarray(relevance)
    fig, ax = plt.subplots(figsize=(6.4, 4.0), layout="constrained")
    im = ax.imshow(rel, cmap="viridis", aspect="auto")
    for (layer, h), _ in np.ndenumerate(rel):
        label = "".join(k for k, m in marks.items() if m[layer, h])
        ax.text(h, layer, label, ha="center", va="center", color="white", fontsize=12,
                path_effects=[pe.withStroke(linewidth=2, foreground="black")])
    ax.set(title=title, xlabel="head", ylabel="layer", xticks=range(rel.shape[1]),
           xticklabels=range(1, rel.shape[1] + 1), yticks=range(rel.shape[0]),
           yticklabels=range(1, rel.shape[0] + 1))
    ax.grid(False)
    fig.colorbar(im, ax=ax, label="share of the layer's relevance")
    return fig


def translations_table(pairs: Sequence[tuple[str, str]], hypotheses: Sequence[str]) -> str:
    """A Markdown table of translations: for each ``(English, reference)`` pair and the model's hypothesis,
    three rows (EN, reference, model) and an empty one."""
    rows = ["| | |", "|---|---|"]
    for (e, s), h in zip(pairs, hypotheses):
        rows += [f"| **EN** | {e} |", f"| **reference** | {s} |", f"| **model** | {h} |", "| | |"]
    return "\n".join(rows)


def confidence_report(summary: Mapping[str, Mapping], names: Mapping[str, str] = KIND_NAMES) -> str:
    """One line per attention kind of :func:`attnbook.heads.roles.confidence_summary`: chance, the heads above
    five times chance, the most confident head and the sink heads."""
    return "\n".join(
        f"{names[k]:27s} chance {s['chance']:.3f}; heads with confidence > 5x chance: "
        f"{s['confident']} of {s['heads']}; most confident {s['most']:.2f}; "
        f"sink heads (>50% of queries on EOS/BOS): {s['sinks']}"
        for k, s in summary.items())


def syntax_table(rows: Sequence[Mapping], who: str, paper: Mapping) -> str:
    """A Markdown table of :func:`attnbook.heads.roles.syntactic_head_table`'s rows for the model ``who``,
    beside the paper's accuracy and baseline per reading (``paper``: reading -> (accuracy, baseline), %)."""
    lines = [f"| relation ({who}) | arcs | best head | accuracy | baseline (offset) | paper acc / base |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        p = paper.get(r["reading"])
        p = f"{p[0]} / {p[1]}" if p else ""
        lines.append(f"| {r['relation']}: {r['reading']} | {r['n']} | {r['head']} | {100 * r['best']:.0f} | "
                     f"{100 * r['base']:.0f} ({r['offset']:+d}) | {p} |")
    return "\n".join(lines)


def encoder_role_table(encoders: Mapping[str, tuple[Mapping, Sequence[Mapping]]], criterion: float) -> str:
    """A Markdown table with one row per encoder (name -> (its encoder roles of
    :func:`attnbook.heads.roles.head_roles`, its syntactic head table)): heads, the best previous- and
    next-token shares, the positional heads (a share at least ``criterion``), the sink heads (more than half
    of the queries) and the largest syntactic gain in points."""
    lines = ["| encoder | heads | best prev | best next | "
             f"positional (>= {criterion}) | sink heads | best syntactic gain (points) |",
             "|---|---|---|---|---|---|---|"]
    for name, (r, syntax) in encoders.items():
        pos = (r["prev"] >= criterion) | (r["next"] >= criterion)
        lines.append(f"| {name} | {r['prev'].numel()} | {float(r['prev'].max()):.2f} | "
                     f"{float(r['next'].max()):.2f} | {int(pos.sum())} | {int((r['sink'] > 0.5).sum())} | "
                     f"{hd.largest_syntactic_gain(syntax):+.0f} |")
    return "\n".join(lines)


def checkpoint_table(columns: Sequence[str], rows: Sequence[tuple[str, Sequence[float]]]) -> str:
    """A Markdown table of :func:`attnbook.heads.roles.checkpoint_comparison`'s rows under the checkpoints'
    ``columns``, values to four significant digits."""
    lines = ["| | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    lines += [f"| {label} | " + " | ".join(f"{v:.4g}" for v in values) + " |" for label, values in rows]
    return "\n".join(lines)


def reproduction_table(voita: Mapping, *, train_pairs: int, cfg, beam_bleu: float, positional: tuple,
                       gain: tuple, rare: tuple, rho: tuple, both: tuple) -> str:
    """The chapter's closing Markdown table: the paper's set-up and findings (``voita``, the numbers of
    :func:`attnbook.claims.papers.numbers` for ``voita2019``) beside the chapter's; ``positional``,
    ``gain``, ``rare``, ``rho`` and ``both`` are pairs (translation model, MiniLM)."""
    model, criterion = voita["model"].value, voita["positional_head_criterion"].value
    rows = [
        ("data", "WMT / OpenSubtitles, English-Russian", f"{train_pairs:,} Bible verse pairs, English-Spanish"),
        ("model", f"Transformer-base: {model['layers'][0]}+{model['layers'][1]} layers, {model['heads']} heads, "
         f"d={model['d_model']}",
         f"{cfg.enc_layers}+{cfg.dec_layers} layers, {cfg.n_heads} heads, d={cfg.d_model}"),
        ("BLEU (test, beam 4)", f"{voita['encoder_only_wmt'].value['bleu'][0]} (WMT EN-RU)",
         f"{beam_bleu:.1f} (Bible EN-ES)"),
        ("positional heads (encoder)", f">= {criterion:.0%}",
         f"{positional[0]:.2f} (MiniLM {positional[1]:.2f})"),
        ("syntactic gain over baseline", f">= {voita['syntactic_head_criterion_points'].value} points",
         f"{gain[0]:+.0f} (MiniLM {gain[1]:+.0f})"),
        ("rare-token head (layer 1, most relevant)", f"{voita['rare_token_head_share'].value}",
         f"{rare[0]:.2f} (MiniLM {rare[1]:.2f})"),
        ("confidence vs LRP relevance (rank correlation)", "the confident heads are the relevant ones",
         f"{rho[0]:.2f} (MiniLM {rho[1]:.2f})"),
        ("of the 3 most relevant heads, among the 3 most positional", "the relevant heads have roles (no number)",
         f"{both[0]} (MiniLM {both[1]})"),
    ]
    return "\n".join(["| | paper | this chapter |", "|---|---|---|"] + [f"| {a} | {b} | {c} |" for a, b, c in rows])
