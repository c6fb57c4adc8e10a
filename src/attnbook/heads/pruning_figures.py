"""The figures of chapter "Pruning heads": samples of hard-concrete gates (:mod:`attnbook.heads.gates`), MiniLM's
gates closing during training and its pruning curves, the translation model's encoder pruning curves, the role
shares of the encoder heads with the heads the gates keep, which kind of attention and which decoder layers the
all-kinds gates prune, and the all-kinds pruning curves. Each function draws from values the chapter has already
computed or loaded (:mod:`attnbook.heads.sweeps`, :mod:`attnbook.heads.importance`) and returns the figure."""

from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch

from attnbook.core.plotting import PAPER_MARKER, paper_marker
from attnbook.heads import gates


def hard_concrete_samples(log_alphas: torch.Tensor, samples: torch.Tensor) -> plt.Figure:
    """One panel per ``log_alpha``: the histogram of its ``samples`` (a row of gate values each) strictly
    between 0 and 1, the sampled masses at exactly 0 and 1 (red bars) and the closed forms
    :func:`~attnbook.heads.gates.prob_zero` and :func:`~attnbook.heads.gates.prob_one` (hollow markers)."""
    n = samples.shape[1]
    fig, axes = plt.subplots(len(log_alphas), 1, figsize=(6.4, 8.4), sharex=True, sharey=True,
                             layout="constrained", squeeze=False)
    axes = axes[:, 0]
    for ax, la, row in zip(axes, log_alphas, samples):
        inside = row[(row > 0) & (row < 1)]
        ax.hist(inside.numpy(), bins=40, range=(0, 1), density=False, weights=np.full(len(inside), 1 / n),
                color="#1f77b4", alpha=0.7, label="0 < g < 1 (histogram)")
        ax.bar([0, 1], [float((row == 0).float().mean()), float((row == 1).float().mean())],
               width=0.04, color="#d62728", label="sampled mass at 0 and 1")
        ax.plot([0, 1], [float(gates.prob_zero(la)), float(gates.prob_one(la))],
                label="closed form (eq. p-closed)", **PAPER_MARKER)
        ax.set_title(f"log alpha = {la:+.0f}")
        ax.set_ylabel("fraction of samples")
    axes[-1].set_xlabel("gate value g")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncol=1)
    fig.suptitle("Hard-concrete gates: point masses at 0 and 1,\npredicted by the closed form")
    return fig


def gate_heatmap(run: Mapping) -> plt.Figure:
    """``P(g != 0)`` of every head (rows, layer by layer) at each training snapshot (columns) of one run of a
    gate sweep on a single-kind model (``run["snapshots"]``, ``run["gates"]`` of shape ``(layers, heads)``),
    with white lines between layers."""
    n_layers, n_heads = np.array(run["gates"]).shape
    steps = [s["step"] for s in run["snapshots"]]
    p_open = np.stack([np.array(s["p_open"]).reshape(-1) for s in run["snapshots"]], axis=1)
    fig, ax = plt.subplots(figsize=(6.4, 5.6), layout="constrained")
    im = ax.imshow(p_open, aspect="auto", cmap="viridis", vmin=0, vmax=1, interpolation="nearest",
                   extent=(steps[0], steps[-1], p_open.shape[0] - 0.5, -0.5))
    ax.set_yticks([i * n_heads + n_heads / 2 - 0.5 for i in range(n_layers)],
                  [f"layer {i + 1}" for i in range(n_layers)])  # layers and heads counted from 1
    for i in range(1, n_layers):
        ax.axhline(i * n_heads - 0.5, color="white", linewidth=0.8)
    ax.set_xlabel("training step")
    ax.set_title(f"MiniLM, lambda={run['lam']}: most gates close\nwithin a few dozen steps (precomputed)")
    fig.colorbar(im, ax=ax, label="P(g != 0)")
    return fig


def minilm_pruning_curves(michel: Sequence[Mapping], random_scores: Sequence[float],
                          gate_points: Sequence[Mapping]) -> plt.Figure:
    """Similarity to the unpruned embeddings against heads kept: Michel et al.'s step-by-step pruning
    (``michel``: records of :func:`~attnbook.heads.importance.prune_step_by_step`), the same numbers of
    heads pruned in a random order (``random_scores``), and one red diamond per gate run
    (:func:`~attnbook.heads.sweeps.gate_points`: filled with the trained gates, hollow as binary masks)."""
    n_kept = [r["n_kept"] for r in michel]
    fig, ax = plt.subplots(figsize=(6.4, 6.0), layout="constrained")
    ax.plot(n_kept, [r["score"] for r in michel], "o-",
            label="Michel importance (whole batch, re-scored each step)")
    ax.plot(n_kept, random_scores, "s--", color="0.5", label="random order")
    x = [p["n_kept"] for p in gate_points]
    ax.plot(x, [p["gates"] for p in gate_points], "D", color="#d62728", markersize=9,
            label="gates as trained, one point per lambda (precomputed)")
    ax.plot(x, [p["binary"] for p in gate_points], "D", mfc="none", color="#d62728", markersize=9,
            label="the same gates as binary masks")
    ax.set_xlabel("heads kept (of 72)")
    ax.set_ylabel("mean cosine(pruned, unpruned)")
    ax.set_title("MiniLM: gates keep embeddings closer;\nimportance beats random modestly")
    fig.legend(loc="outside lower center", ncol=1)
    return fig


def encoder_bleu_curves(full: Mapping, gate_curve, beam_curve, no_ft, michel_curves: Mapping,
                        paper_curve) -> plt.Figure:
    """BLEU change from the unpruned model (``full``: its ``bleu_greedy`` and ``bleu_beam``) against encoder
    heads kept: the fine-tuned gates greedy (``gate_curve``) and beam (``beam_curve``, shifted to the greedy
    reference), their masks without fine-tuning (``no_ft``), each of Michel et al.'s ``michel_curves`` (name ->
    rows with ``n_kept`` and ``bleu``), all as ``(heads, BLEU)`` points, and the paper's curve as hollow markers
    (``paper_curve``: ``(heads, BLEU)`` from its unpruned model down, drawn as changes from its first point)."""
    ref, ref_beam = full["bleu_greedy"], full["bleu_beam"]
    curves = {
        "gates, fine-tuned (greedy)": (gate_curve, "D-"),
        "gates, fine-tuned (beam 4)": ([(n, b - ref_beam + ref) for n, b in beam_curve], "D:"),
        "gate masks, no fine-tuning": (no_ft, "s--"),
        **{f"Michel: {name}": ([(r["n_kept"], r["bleu"]) for r in rows], mk + "-")
           for (name, rows), mk in zip(michel_curves.items(), "o^v")},
    }
    fig, ax = plt.subplots(figsize=(6.4, 6.4), layout="constrained")
    for label, (pts, style) in curves.items():
        x, y = zip(*sorted(pts))
        ax.plot(x, np.array(y) - ref, style, label=label)
    heads, bleu = zip(*paper_curve)
    paper_marker(ax, heads, [b - bleu[0] for b in bleu], label="WMT EN-RU, encoder only")
    ax.axhline(0, color="0.6", linewidth=0.8)
    ax.set(xlabel="encoder heads kept (of 48)", ylabel="BLEU change from the unpruned model")
    ax.set_title("Encoder heads: a few do the work (precomputed)")
    fig.legend(loc="outside lower center", ncol=1)
    return fig


def role_heatmaps(panels: Mapping[str, torch.Tensor], circled: tuple[torch.Tensor, str],
                  starred: tuple[torch.Tensor, str]) -> plt.Figure:
    """One heat map per role share (``panels``: title -> ``(layers, heads)`` shares), with the heads of the
    mask ``circled[0]`` circled in red and those of ``starred[0]`` starred (the second items: legend labels)."""
    fig, axes = plt.subplots(len(panels), 1, figsize=(6.4, 8.4), layout="constrained", squeeze=False)
    marks = [(circled, dict(s=170, marker="o", facecolors="none")),
             (starred, dict(s=60, marker="*", facecolors="red"))]
    for i, (ax, (name, values)) in enumerate(zip(axes[:, 0], panels.items())):
        im = ax.imshow(values.numpy(), cmap="viridis", vmin=0, vmax=float(values.max()), aspect="auto")
        for (mask, label), style in marks:
            rows, cols = np.nonzero(mask.numpy())
            ax.scatter(cols, rows, edgecolors="red", linewidths=2, label=label if i == 0 else None, **style)
        ax.set(xlabel="head", ylabel="encoder layer", title=name)
        ax.grid(False)
        fig.colorbar(im, ax=ax)
    fig.legend(loc="outside lower center", ncol=2)
    fig.suptitle("The last encoder heads to go are the most specialised ones")
    return fig


def kinds_and_layers(by_kind: Mapping, layers_of_run: Sequence[Mapping], paper: Mapping,
                     paper_n: Mapping[str, int]) -> plt.Figure:
    """Top: each kind's share of heads kept against the share of all heads kept, per run of an all-kinds gate
    sweep (``by_kind``: :func:`~attnbook.heads.sweeps.kind_shares`; lambda on the top axis), with the paper's
    shapes (``paper``: ``kinds`` and ``kept`` per shape; ``paper_n``: its heads per kind) dotted and hollow.
    Bottom: decoder heads kept per layer at each run (``layers_of_run``), darker for a larger lambda."""
    sweep_runs, share = by_kind["runs"], by_kind["share"]
    book_total, paper_total = sum(by_kind["n_heads"].values()), sum(paper_n.values())
    fig, axes = plt.subplots(2, 1, figsize=(6.4, 8.4), layout="constrained")
    book_x = [r["n_kept"] / book_total for r in sweep_runs]
    paper_x = [sum(kept) / paper_total for kept in paper["kept"]]
    for j, (k, mk) in enumerate(zip(share, "osD")):
        axes[0].plot(book_x, share[k], mk + "-", color=f"C{j}", label=k)
        i = paper["kinds"].index(k)
        axes[0].plot(paper_x, [kept[i] / paper_n[k] for kept in paper["kept"]], mk + ":", color=f"C{j}",
                     mfc="none")
    axes[0].plot([], [], "o:", color="black", mfc="none", label="paper, Table 2 (hollow)")
    lam_axis = axes[0].secondary_xaxis("top")
    lam_axis.set_xticks(book_x, [f"{r['spec']['lam']:g}" for r in sweep_runs])
    lam_axis.set_xlabel("lambda (book)")
    axes[0].set(xlabel="share of all heads kept", ylabel="share of the kind's heads kept")
    axes[0].set_title("Which kind goes first (book: precomputed)")
    axes[0].legend(loc="upper left")
    for i, per in enumerate(layers_of_run):
        shade = dict(alpha=0.3 + 0.7 * i / max(1, len(sweep_runs) - 1))
        axes[1].plot(range(3), per["dec_self"], "s-", color="C1", **shade)
        axes[1].plot(range(3), per["dec_cross"], "D--", color="C2", **shade)
    axes[1].plot([], [], "s-", color="C1", label="dec_self")
    axes[1].plot([], [], "D--", color="C2", label="dec_cross")
    axes[1].set_xticks(range(3), ["layer 0", "layer 1", "layer 2"])
    axes[1].set(ylabel="heads kept (of 8)", title="Decoder layers, darker = larger lambda")
    axes[1].legend()
    return fig


def all_kinds_curves(gate_all, no_ft_all, michel_all: Mapping, paper_by_share, n_total: int,
                     full_bleu: float) -> plt.Figure:
    """Test BLEU against heads kept of ``n_total`` when all kinds are pruned: the fine-tuned gates
    (``gate_all``) and their masks without fine-tuning (``no_ft_all``), as ``(heads, BLEU)`` points, each of
    Michel et al.'s arms (``michel_all``: name -> rows with ``n_kept`` and ``bleu``), and the paper's BLEU changes
    at its shares of heads kept (``paper_by_share``: ``(share, change)`` from ``(1, 0)``) added to
    ``full_bleu`` (hollow markers)."""
    fig, ax = plt.subplots(figsize=(6.4, 6.4), layout="constrained")
    ax.plot(*zip(*gate_all), "D-", label="gates, fine-tuned")
    ax.plot(*zip(*no_ft_all), "s--", label="gate masks, no fine-tuning")
    for (name, rows), mk in zip(michel_all.items(), "o^v"):
        ax.plot([r["n_kept"] for r in rows], [r["bleu"] for r in rows], mk + "-", alpha=0.8,
                label=f"Michel: {name}")
    paper_marker(ax, [n_total * s for s, _ in paper_by_share[1:]],
                 [full_bleu + d for _, d in paper_by_share[1:]], label="Table 2, fine-tuned (BLEU change)")
    ax.set_xlabel(f"heads kept (of {n_total})")
    ax.set_ylabel("test BLEU (greedy)")
    ax.set_title("All kinds: selection and retraining (precomputed)")
    fig.legend(loc="outside lower center", ncol=1)
    return fig
