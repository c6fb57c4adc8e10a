"""The figures of chapter "Rank collapse at initialisation kills query/key gradients"
(:mod:`attnbook.signal.propagation`): the output token cosine against depth, simulated and from the mean-field
recursion, and the per-layer gradient norms of ``W_Q``, ``W_K``, ``W_V`` at initialisation."""

from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt

SCALED_COLORS = {False: "#d62728", True: "#1f77b4"}
QKV_COLORS = {"q": "#d62728", "k": "#ff7f0e", "v": "#1f77b4"}


def cosine_by_depth(depths: Sequence[int], sim: Mapping[tuple, Sequence[float]],
                    theory: Mapping[tuple, Sequence[float]]) -> plt.Figure:
    """One panel per LayerNorm placement (pre, post): the output token cosine against depth, simulated (dots,
    ``sim[ln, scaled]``) and from the mean-field recursion (dashed, ``theory[ln, scaled]``), with
    ``alpha = 1`` (red) and ``alpha = 1/sqrt(L)`` (blue)."""
    fig, axes = plt.subplots(1, 2, figsize=(6.4, 5.4), sharey=True, layout="constrained")
    for ax, ln in zip(axes, ("pre", "post")):
        for scaled, color in SCALED_COLORS.items():
            lab = r"$\alpha = 1/\sqrt{L}$" if scaled else r"$\alpha = 1$"
            ax.plot(depths, sim[ln, scaled], "o-", color=color, label=f"simulation, {lab}")
            ax.plot(depths, theory[ln, scaled], "--", color=color, lw=1.3, label=f"mean field, {lab}")
        ax.set_xscale("log", base=2)
        ax.set(xlabel="depth L", title=f"{ln}-LN")
    axes[0].set_ylabel("token cosine at the output")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncol=2)
    fig.suptitle("Unscaled, the tokens align with depth;\nwith alpha = 1/sqrt(L) they stay apart")
    return fig


def grad_norms_by_layer(grads: Mapping[tuple, Mapping[str, Sequence[float]]]) -> plt.Figure:
    """One panel per LayerNorm placement (pre, post): the gradient norm of every layer's ``W_Q``, ``W_K`` and
    ``W_V`` at initialisation (``grads[ln, scaled][name]``), unscaled (solid) and with
    ``alpha = 1/sqrt(L)`` (dashed), on a log scale."""
    fig, axes = plt.subplots(1, 2, figsize=(6.4, 5.6), sharey=True, layout="constrained")
    depth = len(next(iter(grads.values()))["v"])
    layers = range(1, depth + 1)
    for ax, ln in zip(axes, ("pre", "post")):
        for scaled, ls in ((False, "-"), (True, "--")):
            tag = "1/sqrt(L)" if scaled else "1"
            for name, color in QKV_COLORS.items():
                ax.plot(layers, grads[ln, scaled][name], ls, color=color,
                        label=f"$W_{name.upper()}$, alpha={tag}")
        ax.set_yscale("log")
        ax.set(xlabel="layer", title=f"{ln}-LN, depth {depth}")
    axes[0].set_ylabel("gradient norm at initialisation")
    fig.legend(*axes[1].get_legend_handles_labels(), loc="outside lower center", ncol=2)
    fig.suptitle("Post-LN, unscaled: $W_Q$, $W_K$ gradients vanish with depth;\npre-LN and "
                 "1/sqrt(L) scaling keep them")
    return fig


def qk_v_ratio_by_layer(measured: Mapping[tuple, Sequence[float]],
                        predicted: Mapping[tuple, Sequence[float]]) -> plt.Figure:
    """One panel per LayerNorm placement (pre, post): every layer's query/key-to-value gradient ratio at
    initialisation, measured on the stack (solid, ``measured[ln, scaled]``) and predicted from the mean-field
    cosine and the uniform-attention formula (dashed, ``predicted[ln, scaled]``), with ``alpha = 1`` (red) and
    ``alpha = 1/sqrt(L)`` (blue), on a log scale."""
    fig, axes = plt.subplots(1, 2, figsize=(6.4, 5.4), sharey=True, layout="constrained")
    depth = len(next(iter(measured.values())))
    layers = range(1, depth + 1)
    for ax, ln in zip(axes, ("pre", "post")):
        for scaled, color in SCALED_COLORS.items():
            lab = r"$\alpha = 1/\sqrt{L}$" if scaled else r"$\alpha = 1$"
            ax.plot(layers, measured[ln, scaled], "-", color=color, label=f"measured, {lab}")
            ax.plot(layers, predicted[ln, scaled], "--", color=color, lw=1.3, label=f"predicted, {lab}")
        ax.set_yscale("log")
        ax.set(xlabel="layer", title=f"{ln}-LN, depth {depth}")
    axes[0].set_ylabel(r"$|\nabla W_{Q,K}|\,/\,|\nabla W_V|$ at initialisation")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncol=2)
    fig.suptitle("The ratio follows from the cosine each layer sees:\nmeasured (solid) and predicted (dashed)")
    return fig
