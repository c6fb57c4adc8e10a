"""The figures of chapters "The one-layer residual bound" (``fig-ch03-1``, ``fig-ch03-2``) and "Deep bounds"
(``fig-ch04-1`` to ``fig-ch04-4``): each function draws one figure from the numbers the chapter computed
(:mod:`attnbook.rank.bound_search`, :mod:`attnbook.rank.one_layer`, :mod:`attnbook.rank.deep_bound`) and
returns it."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import torch

from attnbook.core.plotting import PAPER_STYLE, variant_color


def step_ratios(report: dict) -> plt.Figure:
    """The worst ratio left / right of each step of the one-layer proof (``report``: step name ->
    ``(random, adversarial)``; a NaN adversarial value, a step checked on random instances only, draws as
    0), as pairs of bars against the line at 1 (chapter "The one-layer residual bound", ``fig-ch03-1``)."""
    names = list(report)
    fig, ax = plt.subplots(figsize=(6.4, 5.2), layout="constrained")
    xs = torch.arange(len(names)).double()
    ax.bar(xs - 0.2, [report[k][0] for k in names], 0.4, label="random instances")
    ax.bar(xs + 0.2, [0 if math.isnan(report[k][1]) else report[k][1] for k in names], 0.4,
           label="adversarial (gradient ascent)")
    ax.axhline(1.0, color="black", lw=1, label="ratio 1: the inequality's limit")
    ax.set_xticks(xs.tolist(), names, rotation=35, ha="right")
    ax.set_ylabel("worst left / right")
    ax.set_title("No step of the proof is violated; several are tight")
    fig.legend(loc="outside lower center", ncol=1)
    return fig


def bound_vs_reality(sweep: dict) -> plt.Figure:
    """Observed output residual (solid) and the lemma's bound (dashed) against the input residual, log-log,
    one colour per weight scale, one line per head, with the paper's cubic rate as a reference slope (chapter
    "The one-layer residual bound", ``fig-ch03-2``; ``sweep`` from :func:`attnbook.rank.one_layer.bound_sweep`)."""
    fig, ax = plt.subplots(figsize=(6.4, 6.4), layout="constrained")
    for i, (w, (rin, obs, bnd)) in enumerate(sweep.items()):
        for j in range(rin.shape[0]):
            ax.loglog(rin[j], obs[j], color=f"C{i}", lw=1.5,
                      label=f"observed, scale {w}" if j == 0 else None)
            ax.loglog(rin[j], bnd[j], color=f"C{i}", lw=1, ls="--",
                      label=f"bound (8γβ/√d_qk)·r³, scale {w}" if j == 0 else None)
    r_ref = torch.logspace(-2.5, -1, 10)
    ax.loglog(r_ref, 1e-9 * (r_ref / r_ref[0]) ** 3, label="paper: cubic rate (slope 3)", **PAPER_STYLE)
    ax.set_ylim(1e-14, 1e4)
    ax.set_xlabel("input residual $\\|res(X)\\|_{1,\\infty}$")
    ax.set_ylabel("output residual $\\|res(SA(X))\\|_{1,\\infty}$")
    ax.set_title("The output residual is cubic in the input residual;\nthe bound has the right "
                 "slope, off by a constant")
    fig.legend(loc="outside lower center", ncol=1)
    return fig


def deep_bound_by_layer(observed: torch.Tensor, log10_tracked: torch.Tensor, log10_bound: torch.Tensor,
                        floor: float) -> plt.Figure:
    """log10 of the residual of each random SAN (rows, one column per layer) followed without round-off
    (``log10_tracked``, solid), as a forward pass sees it (``observed``, dotted, down to the round-off
    ``floor``, drawn grey) and its bound ``log10_bound`` (dashed) (chapter "Deep bounds", ``fig-ch04-1``; all from
    :func:`attnbook.rank.deep_bound.simulate_against_bound`)."""
    fig, ax = plt.subplots(figsize=(6.4, 4.8), layout="constrained")
    layers = torch.arange(observed.shape[1])
    for i in range(observed.shape[0]):
        first = i == 0
        ax.plot(layers, log10_tracked[i], color=variant_color("SAN"), lw=1, alpha=0.7,
                label="observed, tracked" if first else None)
        ax.plot(layers, observed[i].clamp(min=1e-17).log10(), color=variant_color("SAN"), lw=1, ls=":",
                alpha=0.7, label="observed, forward pass" if first else None)
        ax.plot(layers, log10_bound[i], color="black", lw=1, ls="--", alpha=0.7,
                label="bound $2 b_l$" if first else None)
    ax.axhline(math.log10(floor), color="0.5", ls=":", lw=1, label="round-off floor")
    low = float(min(log10_tracked.min(), log10_bound.min()))
    ax.set_ylim(1.05 * low - 1, 1)
    ax.set_xlabel("layer $l$")
    ax.set_ylabel("$\\log_{10}$ residual")
    ax.set_title("The residual stays below the bound at every layer\n"
                 "(a forward pass loses it to round-off after two)")
    fig.legend(loc="outside lower center", ncol=2)
    return fig


def skip_curves(curves: dict) -> plt.Figure:
    """Residual by layer over the input's, log scale, for each of ``curves`` (name -> residual by layer): random
    SAN and SAN+skip in their variant colours (a name containing "relative": the relative residual, dotted), the
    ``W_Q = W_K = 0`` construction (a name containing "W_Q") black and dashed (chapter "Deep bounds",
    ``fig-ch04-2``)."""
    fig, ax = plt.subplots(figsize=(6.4, 4.8), layout="constrained")
    for name, c in curves.items():
        construction = "W_Q" in name
        color = "black" if construction else variant_color(name.split(" ")[0])
        style = "--" if construction else ":" if "relative" in name else "-"
        ax.semilogy(c.clamp(min=1e-17) / c[0], color=color, ls=style, label=name)
    ax.set_xlabel("layer $l$")
    ax.set_ylabel("residual / the input's")
    ax.set_title("With skips the residual need not shrink at all\n"
                 "(random weights: the relative residual drifts down slowly)")
    fig.legend(loc="outside lower center", ncol=2)
    return fig


def mlp_collapse(san_curve: torch.Tensor, mlp_curves: dict, lambdas: dict) -> plt.Figure:
    """Relative residual by layer of a SAN and of SAN+MLP for each MLP weight scale (``mlp_curves`` and
    ``lambdas`` keyed by it, from :func:`attnbook.rank.deep_bound.mlp_gain_curves`), the legend giving each
    measured Lipschitz constant (chapter "Deep bounds", ``fig-ch04-3``)."""
    fig, ax = plt.subplots(figsize=(6.4, 4.8), layout="constrained")
    ax.semilogy(san_curve.clamp(min=1e-17), color=variant_color("SAN"), label="SAN")
    for i, (g, c) in enumerate(mlp_curves.items()):
        ax.semilogy(c.clamp(min=1e-17), color=variant_color("SAN+MLP"), alpha=0.4 + 0.3 * i,
                    label=f"SAN+MLP, measured $\\lambda$ = {lambdas[g]:.0f}")
    ax.set_xlabel("layer $l$")
    ax.set_ylabel("relative residual")
    ax.set_title("A larger MLP Lipschitz constant slows collapse,\nbut does not stop it")
    fig.legend(loc="outside lower center", ncol=2)
    return fig


def layernorm_collapse(san_curve: torch.Tensor, ln_curve: torch.Tensor) -> plt.Figure:
    """Relative residual by layer of a SAN and of a SAN with post-LayerNorm (chapter "Deep bounds",
    ``fig-ch04-4``)."""
    fig, ax = plt.subplots(figsize=(6.4, 4.8), layout="constrained")
    ax.semilogy(san_curve.clamp(min=1e-17), color=variant_color("SAN"), label="SAN")
    ax.semilogy(ln_curve.clamp(min=1e-17), color=variant_color("SAN+LN"), label="SAN+LN (post-LN)")
    ax.set_xlabel("layer $l$")
    ax.set_ylabel("relative residual")
    ax.set_title("LayerNorm does not prevent collapse")
    fig.legend(loc="outside lower center", ncol=2)
    return fig
