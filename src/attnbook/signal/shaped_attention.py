"""Shaped attention (chapter "What came after": Noci, Li, Li, He, Hofmann, Maddison and Roy 2023, "The shaped
transformer: attention models in the infinite depth-and-width limit").

Their abstract: the attention mechanism "is modified by centering the Softmax output at identity, and scaling the
Softmax logits by a width-dependent temperature parameter". With ``C = 1 1^T / n`` (the softmax of zero logits),
the shaped attention matrix is

    A_shaped = I + softmax(S / tau) - C,   tau = tau_0 sqrt(d),

so at large width it is the identity plus a small, centred perturbation, and a layer moves every token a little
instead of averaging them (He and Hofmann 2023, eq. 5, restate it as ``alpha I + beta A - gamma C``).

:func:`cosine_by_depth` runs pure attention stacks (one head, Gaussian value maps ``N(0, 1/d)``, every token
rescaled to norm ``sqrt(d)`` after each layer, no skip connection and no MLP) with standard or shaped attention
and returns the mean cosine between tokens at every depth (eq. ``cos-sim`` of chapter "Rank collapse at
initialisation").
"""

from __future__ import annotations

import math

import torch

from attnbook.signal.propagation import token_cosine

KINDS = ("softmax", "shaped")


def attention_matrix(X: torch.Tensor, W_Q: torch.Tensor, W_K: torch.Tensor, kind: str,
                     tau0: float = 1.0) -> torch.Tensor:
    """The ``(batch, n, n)`` attention of tokens ``X`` ``(batch, n, d)``: ``softmax(X W_Q (X W_K)^T / sqrt(d_k))``
    (``kind="softmax"``), or shaped: ``I + softmax(S / tau) - 1 1^T / n`` with ``tau = tau0 sqrt(d)``."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    n, d = X.shape[-2], X.shape[-1]
    S = (X @ W_Q) @ (X @ W_K).transpose(-1, -2) / math.sqrt(W_Q.shape[1])
    if kind == "softmax":
        return S.softmax(-1)
    eye = torch.eye(n, dtype=X.dtype, device=X.device)
    return eye + (S / (tau0 * math.sqrt(d))).softmax(-1) - 1.0 / n


@torch.no_grad()
def cosine_by_depth(X: torch.Tensor, depth: int, kind: str, *, generator: torch.Generator,
                    tau0: float = 1.0) -> torch.Tensor:
    """The mean token cosine of ``X`` ``(batch, n, d)`` and of every layer's output of a ``depth``-layer pure
    attention stack of ``kind`` (weights ``N(0, 1/d)`` drawn from ``generator`` on the CPU, one layer after
    another; tokens rescaled to norm ``sqrt(d)`` after each layer): ``(depth + 1,)`` on the CPU."""
    if depth < 1:
        raise ValueError(f"depth must be at least 1, got {depth}")
    d = X.shape[-1]
    out = [token_cosine(X).mean()]
    for _ in range(depth):
        W_Q, W_K, W_V = (torch.randn(d, d, generator=generator, dtype=X.dtype).to(X.device) / math.sqrt(d)
                         for _ in range(3))
        X = attention_matrix(X, W_Q, W_K, kind, tau0) @ X @ W_V
        X = X * math.sqrt(d) / X.norm(dim=-1, keepdim=True)
        out.append(token_cosine(X).mean())
    return torch.stack(out).cpu()
