"""Rank collapse under attention masks (chapter "What came after": Wu et al. 2024, "On the role of attention masks
and LayerNorm in transformers").

Decoder-only language models attend causally, and many attend within a sliding window. :func:`attention_mask` builds
the four masks of the chapter (``full``, ``causal``, ``window``: keys within ``window`` positions on either side,
``causal window``: the ``window`` previous positions and itself); :func:`residual_curves` runs pure self-attention
networks (no skip, MLP or LayerNorm, the book's Gaussian initialisation) under one of them and returns the relative
residual of every layer (eq. ``rel-res`` of chapter "Pure attention loses rank"); :func:`distance_to_first_token`
measures how far the tokens are from the first token, onto whose trajectory a causal mask makes them collapse;
:func:`layers_to_reach` counts the layers a sliding window needs before the last token can see the first.
"""

from __future__ import annotations

import math
from typing import Optional

import torch

from attnbook.core.attention import SelfAttentionNetwork, gaussian_init_
from attnbook.core.norms import relative_residual

MASKS = ("full", "causal", "window", "causal window")


def attention_mask(kind: str, n_tokens: int, window: int = 2, device=None) -> torch.Tensor:
    """The ``(n, n)`` boolean mask of ``kind`` (True: query ``i`` may attend to key ``j``): ``full`` (every key),
    ``causal`` (``j <= i``), ``window`` (``|i - j| <= window``), ``causal window`` (``0 <= i - j <= window``).
    Every query may attend to itself, so no row is empty."""
    if kind not in MASKS:
        raise ValueError(f"kind must be one of {', '.join(MASKS)}, got {kind!r}")
    if n_tokens < 1 or window < 1:
        raise ValueError(f"need n_tokens >= 1 and window >= 1, got {n_tokens} and {window}")
    i = torch.arange(n_tokens, device=device)[:, None]
    j = torch.arange(n_tokens, device=device)[None, :]
    return {"full": torch.ones(n_tokens, n_tokens, dtype=torch.bool, device=device),
            "causal": j <= i,
            "window": (i - j).abs() <= window,
            "causal window": (i - j >= 0) & (i - j <= window)}[kind]


@torch.no_grad()
def masked_hidden(net: SelfAttentionNetwork, X: torch.Tensor, mask: Optional[torch.Tensor]) -> list[torch.Tensor]:
    """The input and every layer's output of ``net`` on ``X`` ``(batch, n, d)`` with every attention restricted by
    ``mask`` ``(n, n)`` (None: full attention)."""
    hidden = [X]
    for block in net.blocks:
        X, _ = block(X, attn_mask=mask)
        hidden.append(X)
    return hidden


def pure_san(depth: int, d_model: int, n_heads: int, *, device=None, dtype=torch.float64) -> SelfAttentionNetwork:
    """A pure self-attention network (no skip, MLP or LayerNorm) at the book's Gaussian initialisation
    (:func:`attnbook.core.attention.gaussian_init_`), drawn from torch's global generator."""
    with torch.device(device) if device is not None else torch.device("cpu"):
        net = SelfAttentionNetwork(depth, d_model, n_heads, skip=False, mlp=False, layernorm=None)
    return gaussian_init_(net.to(dtype))


def residual_curves(kind: str, *, n_tokens: int, d_model: int, n_heads: int, depth: int, n_nets: int,
                    n_inputs: int, window: int = 2, seed: int = 0, device=None) -> torch.Tensor:
    """The relative residual of the input and of every layer of ``n_nets`` pure SANs under the mask ``kind``, on
    ``n_inputs`` Gaussian inputs each: ``(n_nets * n_inputs, depth + 1)``, float64, on the CPU. Net ``k`` is drawn
    after ``torch.manual_seed(seed + k)`` and its inputs from a CPU generator seeded likewise, so every mask sees
    the same networks and inputs (paired comparisons)."""
    curves = []
    for k in range(n_nets):
        torch.manual_seed(seed + k)
        net = pure_san(depth, d_model, n_heads, device=device)
        X = torch.randn(n_inputs, n_tokens, d_model, generator=torch.Generator().manual_seed(seed + k),
                        dtype=torch.float64).to(device)
        mask = attention_mask(kind, n_tokens, window, device=X.device)
        curves.append(torch.stack([relative_residual(h) for h in masked_hidden(net, X, mask)], dim=1).cpu())
    return torch.cat(curves)


def distance_to_first_token(hidden: list[torch.Tensor]) -> torch.Tensor:
    """For each hidden state ``(batch, n, d)``: the largest over tokens ``i > 1`` of ``||x_i - x_1|| / ||x_1||``,
    averaged over the batch (``(layers + 1,)``, on the CPU): 0 when every token has become the first."""
    out = []
    for h in hidden:
        gap = (h[:, 1:] - h[:, :1]).norm(dim=-1).amax(dim=1) / h[:, 0].norm(dim=-1)
        out.append(gap.mean())
    return torch.stack(out).cpu()


def decay_per_layer(curve: torch.Tensor, lo: float = 1e-12, hi: float = 0.5) -> float:
    """The geometric factor by which a residual curve ``(layers + 1,)`` shrinks per layer, from the least-squares
    slope of ``log r_l`` against ``l`` over the layers with ``lo < r_l < hi`` (chapter "What came after": an
    exponential collapse has a constant factor; a doubly exponential one does not fit a line, chapter "Pure
    attention loses rank")."""
    c = torch.as_tensor(curve, dtype=torch.float64)
    layers = torch.arange(len(c), dtype=torch.float64)
    ok = (c > lo) & (c < hi)
    if int(ok.sum()) < 3:
        raise ValueError(f"only {int(ok.sum())} layers with residuals in ({lo:g}, {hi:g}); need 3")
    x, y = layers[ok], c[ok].log()
    slope = float(((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum())
    return math.exp(slope)


def layers_to_reach(n_tokens: int, window: int) -> int:
    """Under a causal sliding window of ``window`` previous positions, the number of layers after which the last of
    ``n_tokens`` tokens depends on the first: each layer lets information move ``window`` positions forward."""
    if n_tokens < 1 or window < 1:
        raise ValueError(f"need n_tokens >= 1 and window >= 1, got {n_tokens} and {window}")
    return math.ceil((n_tokens - 1) / window)
