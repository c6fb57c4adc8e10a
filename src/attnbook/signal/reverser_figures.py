"""The figures of chapter "Unequal gradients, temperature and adaptive optimisers" that read the reversal task's
runs (:mod:`attnbook.signal.reverser`): the training losses of single runs, the optimiser sweep, and the token
cosine during training by depth."""

from __future__ import annotations

import math
from typing import Mapping

import matplotlib.pyplot as plt
import torch

from attnbook.signal import reverser as rv

SGD_RED, ADAM_BLUE = "#d62728", "#1f77b4"


def training_losses(results: Mapping[tuple, dict], vocab: int, depth: int) -> plt.Figure:
    """The training loss (10-step running mean, log scale) of every ``(optimizer, scaled, tau) -> run`` of
    ``results``: SGD red, Adam blue, ``alpha = 1/sqrt(L)`` dashed, ``tau != 1`` faint; chance ``log(vocab)``
    as a grey line."""
    fig, ax = plt.subplots(figsize=(6.4, 6.2), layout="constrained")
    colors = {"sgd": SGD_RED, "adam": ADAM_BLUE}
    for (opt, scaled, tau), hist in results.items():
        loss = torch.tensor(hist["losses"])
        smooth = torch.nn.functional.avg_pool1d(loss[None, None], 10, 1).flatten()
        ax.plot(range(10, len(loss) + 1), smooth, color=colors[opt], ls="--" if scaled else "-",
                alpha=1.0 if tau == 1.0 else 0.55,
                label=f"{opt.upper()}, alpha={'1/sqrt(L)' if scaled else '1'}, tau={tau:.2f}")
    ax.axhline(math.log(vocab), color="0.6", lw=1, label="chance (log V)")
    ax.set(xlabel="step", ylabel="training loss (10-step mean)", yscale="log",
           title=f"Depth {depth} post-LN, one seed: SGD needs alpha = 1/sqrt(L);\n"
                 "Adam trains this seed either way")
    fig.legend(loc="outside lower center", ncol=1)
    return fig


def optimiser_sweep(sweep: dict) -> plt.Figure:
    """Accuracy against the learning rate (mean and range over the selection seeds) per arm, SGD and Adam side
    by side; below, each arm's query/key to value update-size ratio and output token cosine in its judged run
    (seed 0) at the chosen learning rate."""
    fig, axes = plt.subplots(2, 2, figsize=(6.4, 6.6), layout="constrained")
    for name, a in sweep["by_name"].items():
        style = dict(color=SGD_RED if a["optimizer"] == "sgd" else ADAM_BLUE,
                     ls="--" if a["scaled"] else "-", alpha=1.0 if a["temperature"] == 1 else 0.5)
        lrs = sweep["learning_rates"][a["optimizer"]]
        accs = [rv.selection_accuracies(a, lr) for lr in lrs]
        mean = [sum(s) / len(s) for s in accs]
        # clamped at 0: the mean of equal accuracies can round a hair above their maximum
        spread = [[max(0.0, m - min(s)) for m, s in zip(mean, accs)], [max(0.0, max(s) - m) for m, s in zip(mean, accs)]]
        ax = axes[0, 0] if a["optimizer"] == "sgd" else axes[0, 1]
        ax.errorbar(lrs, mean, yerr=spread, marker="o", ms=4, capsize=2, label=name, **style)
        log = rv.best_log(a)
        steps = [e["step"] for e in log]
        axes[1, 0].plot(steps, [e["qk_update"] / e["v_update"] for e in log], **style)
        axes[1, 1].plot(steps, [e["cosine"] for e in log], **style)
    for ax, title in zip(axes[0], ("SGD", "Adam")):
        ax.set(xscale="log", xlabel="learning rate", ylabel="accuracy", title=title, ylim=(0, 1.05))
    axes[1, 0].set(yscale="log", xlabel="step", ylabel="|step of W_QK| / |step of W_V|",
                   title="chosen learning rate, seed 0")
    axes[1, 1].set(xlabel="step", ylabel="output token cosine", title="chosen learning rate, seed 0",
                   ylim=(-0.05, 1.05))
    handles, labels = zip(*(hl for ax in axes[0] for hl in zip(*ax.get_legend_handles_labels())))
    fig.legend(handles, labels, loc="outside lower center", ncol=1)
    return fig


def cosine_during_training(by_depth: dict, learned: dict) -> plt.Figure:
    """Top: output token cosine during training for each ``(depth, scaled)`` run; bottom: every learnable
    residual scale of the ``learned`` runs (``scaled -> run``) during training."""
    fig, axes = plt.subplots(2, 1, figsize=(6.4, 7.0), layout="constrained")
    shades = {4: "0.7", 8: "C0", 16: "0.1"}
    for (depth, scaled), r in by_depth.items():
        axes[0].plot([e["step"] for e in r["log"]], [e["cosine"] for e in r["log"]],
                     color=shades.get(depth, "C1"), ls="--" if scaled else "-",
                     label=f"L={depth}, alpha={'1/sqrt(L)' if scaled else '1'}")
    axes[0].set(xlabel="step", ylabel="output token cosine", ylim=(-0.05, 1.05),
                title="Adam, post-LN: deep unscaled stacks stay collapsed longer")
    for scaled, r in learned.items():
        steps = [e["step"] for e in r["log"]]
        alphas = torch.tensor([e["alphas"] for e in r["log"]])
        for j in range(alphas.shape[1]):
            axes[1].plot(steps, alphas[:, j], color="C3" if scaled else "C2", lw=0.8, alpha=0.7,
                         label=(f"from {'1/sqrt(L)' if scaled else '1'}" if j == 0 else None))
    depth = len(next(iter(learned.values()))["log"][0]["alphas"])
    axes[1].set(xlabel="step", ylabel="residual scale alpha", title=f"Learnable scales, depth {depth}")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncol=2)
    axes[1].legend(loc="center right")
    return fig
