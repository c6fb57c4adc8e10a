"""The figure of chapter "Unequal gradients, temperature and adaptive optimisers" that reads the Monte-Carlo
Jacobian norms (:func:`attnbook.signal.propagation.mean_jacobian_sq_norms`): how the query and value norms scale
with the input scale, the width and the sequence length, and how the temperature moves their balance."""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import torch

from attnbook.core import plotting


def scaling_laws(scales: Sequence[float], by_scale: Mapping[str, Sequence[dict]], large_scales: Sequence[float],
                 by_large_scale: Sequence[dict], widths: Sequence[int], by_width: Sequence[tuple],
                 lengths: Sequence[int], by_length: Sequence[tuple]) -> plt.Figure:
    """Three panels: the squared W_Q and W_V Jacobian norms against the input scale (``by_scale[mode]`` for
    ``"uniform"`` and ``"random"`` W_Q at ``scales``, then real random W_Q at ``large_scales``, dotted, with
    LayerNorm scale marked); against the width and the length (``(simulation, formula)`` pairs), with
    the formulas as lines."""
    fig, axes = plt.subplots(3, 1, figsize=(6.4, 13.5), layout="constrained")
    for mode, ls in (("uniform", "o-"), ("random", "s--")):
        for key, color in (("q", "#d62728"), ("v", "#1f77b4")):
            axes[0].plot(
                scales,
                [r[key] for r in by_scale[mode]],
                ls,
                color=color,
                label=f"$W_{key.upper()}$, "
                + ("$W_Q = 0$ (uniform)" if mode == "uniform" else "random $W_Q$"),
            )
    for key, color in (("q", "#d62728"), ("v", "#1f77b4")):
        axes[0].plot(
            large_scales,
            [r[key] for r in by_large_scale],
            "s:",
            color=color,
            alpha=0.55,
            label=f"$W_{key.upper()}$, random $W_Q$, larger s",
        )
    axes[0].axvline(1.0, color="0.45", lw=1, ls="-.", label="LayerNorm scale (s = 1)")
    axes[0].set(
        xscale="log",
        yscale="log",
        xlabel="input scale s",
        ylabel="squared Jacobian norm",
        title="$W_Q$ grows like $s^6$, $W_V$ like $s^2$,\nuntil attention sharpens past s = 1",
    )
    plotting.plain_log_ticks(axes[0], [0.1, 0.2, 0.4, 1.0, 2.0, 4.0])
    # width and length panels: simulation (dots) and formula (line); the length panel's labels are plain text
    for ax, xs, pairs, name in ((axes[1], widths, by_width, "$W_{}$"), (axes[2], lengths, by_length, "W_{}")):
        for key, color in (("q", "#d62728"), ("v", "#1f77b4")):
            label = name.format(key.upper())
            ax.plot(xs, [mc_[key] for mc_, _ in pairs], "o", color=color, label=f"{label} simulation")
            ax.plot(xs, [f_[key] for _, f_ in pairs], "-", color=color, lw=1.2, label=f"{label} formula")
    axes[1].set(
        xscale="log",
        yscale="log",
        xlabel="width d (sigma fixed)",
        title="$W_Q \\sim d^3$, $W_V \\sim d$",
    )
    axes[2].set(
        xscale="log",
        yscale="log",
        xlabel="sequence length n",
        title="Against n the formula follows the simulation",
    )
    plotting.plain_log_ticks(axes[1], widths)
    plotting.plain_log_ticks(axes[2], lengths)
    for ax in axes:
        ax.set_ylabel("squared Jacobian norm")
        ax.legend(ncol=2)
    # the top panel's legend goes below its x-axis label, off the data
    axes[0].legend(ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.2))
    return fig


def temperature_balance(taus: Sequence[float], ratios: Sequence[float], tau_formula: float,
                        quoted_tau: float) -> plt.Figure:
    """The simulated query/value norm ratio against the temperature, the uniform-attention formula
    ``(tau*/tau)^2`` through the formula's balancing temperature ``tau_formula``, and the temperature
    ``quoted_tau`` that a summary of the paper quotes (not a number printed in the paper) read both ways
    (dividing the logits, and multiplying them: ``1/quoted_tau``)."""
    fig, ax = plt.subplots(figsize=(6.4, 6.0), layout="constrained")
    ax.plot(taus, ratios, "o-", color="#d62728", label="simulation (random $W_Q$)")
    grid = torch.logspace(math.log10(0.15), math.log10(10), 50)
    ax.plot(grid, (tau_formula / grid) ** 2, "-", color="0.2", lw=1.2, label="formula, uniform attention")
    ax.axhline(1.0, color="0.6", lw=1)
    ax.axvline(quoted_tau, color="0.35", ls="--", lw=1.3,
               label=f"quoted tau = {quoted_tau:g} (a summary of the paper, not the paper)")
    ax.axvline(1 / quoted_tau, color="0.35", ls=":", lw=1.3,
               label=f"1/{quoted_tau:g} (the quoted tau as a logit multiplier)")
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="temperature tau (logits divided by tau)",
        ylabel=r"$\|\partial S/\partial W_Q\|^2 / \|\partial S/\partial W_V\|^2$",
        title="The temperature moves the Q/V balance like $1/\\tau^2$",
    )
    fig.legend(loc="outside lower center", ncol=1)
    return fig
