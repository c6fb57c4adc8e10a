"""The figure and table of chapter "Path effectiveness" (Part I, chapter 7): the accuracy of sampled paths
by path length for each task, next to the full model, chance and the paper's reference lines (Dong et al.
2021, Fig. 4), and the table of the recipe benchmark (``scripts/bench_recipes.py``)."""

from __future__ import annotations

from typing import Mapping

import matplotlib.pyplot as plt
import numpy as np

from attnbook.core import plotting

N_PATHS_STYLE = (("tab:purple", -0.06), ("tab:green", 0.06))


def accuracy_by_length(acc: Mapping, probe: Mapping, full: Mapping, chance: Mapping, paper_full: Mapping,
                       paper_chance: Mapping) -> plt.Figure:
    """One panel per task (the keys of ``probe``): mean and sd over repeats of the accuracy of sampled paths
    by length for each number of paths (``acc[task, n_paths]``, ``(depth + 1, repeats)`` arrays; at most
    two numbers of paths, drawn side by side), the refitted probe with 20 paths (``probe[task]``), and
    horizontal lines for the book's full model and chance (``full``, ``chance``: task -> accuracy) and the
    paper's (``paper_full``, ``paper_chance``)."""
    names = list(probe)
    n_paths = sorted({n for _, n in acc})
    if len(n_paths) > len(N_PATHS_STYLE):
        raise ValueError(f"at most {len(N_PATHS_STYLE)} numbers of paths, got {n_paths}")
    fig, axes = plt.subplots(len(names), 1, figsize=(6.4, 3.5 * len(names)), squeeze=False,
                             layout="constrained")
    axes = axes[:, 0]
    for ax, name in zip(axes, names):
        ks = np.arange(len(probe[name]))
        for n, (color, shift) in zip(n_paths, N_PATHS_STYLE):
            a = acc[name, n]
            ax.errorbar(ks + shift, a.mean(1), yerr=a.std(1), fmt="o-", color=color, capsize=3,
                        label=f"{n} paths")
        ax.plot(ks, probe[name].mean(1), "s--", color="tab:orange", label="20 paths, probe refitted")
        ax.axhline(full[name], color="k", lw=1.2, label="this book: full model")
        ax.axhline(chance[name], color="tab:red", lw=1.2, label="this book: chance / majority")
        plotting.paper_line(ax, paper_full[name], "full model")
        plotting.paper_line(ax, paper_chance[name], "chance / majority")
        ax.set(xlabel="path length k", ylabel="token accuracy", title=name, ylim=(0, 1.05))
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncol=2)
    fig.suptitle("Accuracy of sampled paths by length\n(mean and sd over repeats; lines: full model, chance)")
    return fig


def bench_table(bench: Mapping) -> str:
    """The recipe benchmark as a text table (``bench``: the ``bench_recipes`` run file): where it came from,
    then per task and recipe the target accuracy, the CPU time (and steps) until the full model first
    reached it, or the time it ran without reaching it, and the final accuracy."""
    lines = [" | ".join(("produced by: " + bench["meta"]["command"], bench["machine"], bench["date"])),
             f"{'task':6s} {'recipe':6s} {'target':>6s} {'time to target':>16s} {'steps':>6s} "
             f"{'final acc':>9s}"]
    for r in bench["rows"]:
        when = (f"{r['cpu_seconds_to_target']:.0f} CPU s" if r["reached"]
                else f"not in {r['cpu_seconds']:.0f} CPU s")
        lines.append(f"{r['task']:6s} {r['recipe']:6s} {r['target']:6.2f} {when:>16s} "
                     f"{str(r['steps_to_target'] or r['steps_done']):>6s} {r['final_acc']:9.3f}")
    return "\n".join(lines)
