"""The intro's map of the book's argument (issue: the answer first): one figure, one panel per result, each
computed from the library as the chapters compute it, at sizes that draw in a few seconds on a CPU.

* Part I, rank collapse (chapter "Pure attention loses rank"): the relative residual of fresh float64 stacks,
  pure self-attention against self-attention with skip connections, layer by layer.
* Part II, signal propagation (chapter "Rank collapse at initialisation"): the output token cosine of fresh
  post-LN stacks against depth, with and without the residual scaled by 1/sqrt(L).
* Part III, heads (chapter "Pruning heads"): BLEU of the translation model against the encoder heads the
  hard-concrete gates keep (the shipped sweep), beside Voita et al.'s encoder-only curve.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import torch

from attnbook.core.attention import VARIANTS, SelfAttentionNetwork, gaussian_init_
from attnbook.core.norms import residual_by_layer
from attnbook.signal import propagation as prop


def collapse_curves(depth: int = 12, d_model: int = 32, n_heads: int = 4, n_tokens: int = 16,
                    seed: int = 0) -> dict[str, torch.Tensor]:
    """The relative residual of the input and of every layer of one fresh stack per variant, SAN and
    SAN+skip (float64, Gaussian initialisation), mean over four inputs: ``{variant: (depth + 1,)}``."""
    out = {}
    for name in ("SAN", "SAN+skip"):
        torch.manual_seed(seed)
        X = torch.randn(4, n_tokens, d_model, dtype=torch.float64)
        net = SelfAttentionNetwork(depth, d_model, n_heads, **VARIANTS[name]).double()
        gaussian_init_(net)
        out[name] = residual_by_layer(net, X).mean(0)
    return out


def cosine_curves(depths: Sequence[int] = (1, 2, 4, 8, 16, 32), d_model: int = 32, n_tokens: int = 16,
                  n_heads: int = 4, rho0: float = 0.3, seed: int = 0) -> dict[str, list[float]]:
    """The output token cosine of fresh post-LN stacks against depth (one stack per depth), unscaled and with
    the residual scaled by 1/sqrt(L), from tokens of cosine ``rho0``: ``{label: [cosine per depth]}``."""
    torch.manual_seed(seed)
    X = prop.tokens_with_cosine(n_tokens, d_model, rho0).float()[None]  # one input, float32 as the stacks
    sim, _ = prop.cosine_by_depth(X, depths, 1, n_heads, rho0, configs=[("post", False), ("post", True)])
    return {"alpha = 1": sim["post", False], "alpha = 1/sqrt(L)": sim["post", True]}


def argument_map(collapse: Mapping[str, torch.Tensor], cosine: Mapping[str, Sequence[float]],
                 depths: Sequence[int], pruning: Sequence[tuple[int, float]],
                 paper_pruning: Sequence[tuple[int, float]]) -> plt.Figure:
    """Three panels, one per part of the book: ``collapse`` (:func:`collapse_curves`), ``cosine``
    (:func:`cosine_curves` at ``depths``), and ``pruning``, ``paper_pruning``: (heads kept, BLEU change from
    the unpruned model) of the book's gate sweep and of the paper's curve."""
    fig, axes = plt.subplots(1, 3, figsize=(6.4, 2.6), layout="constrained")
    ax = axes[0]
    for (name, curve), style in zip(collapse.items(), ("o-", "s--")):
        ax.semilogy(range(len(curve)), curve.clamp_min(1e-16), style, ms=3, label=name)
    ax.set(title="I. Rank collapse", xlabel="layer", ylabel="relative residual")
    ax.legend(fontsize=8)
    ax = axes[1]
    for (name, values), style in zip(cosine.items(), ("o-", "s--")):
        ax.semilogx(depths, values, style, ms=3, label=name)
    ax.set(title="II. Signal propagation", xlabel="depth L", ylabel="token cosine at init", ylim=(0, 1.02))
    ax.legend(fontsize=8)
    ax = axes[2]
    for (label, pts), style in zip((("this book", pruning), ("paper", paper_pruning)), ("o-", "s--")):
        pts = sorted(pts)
        ax.plot([n for n, _ in pts], [b for _, b in pts], style, ms=3, label=label)
    ax.set(title="III. Heads", xlabel="encoder heads kept", ylabel="BLEU change")
    ax.legend(fontsize=8)
    return fig
