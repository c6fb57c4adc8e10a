"""The doubly exponential bound's constants for given weights (chapters "Deep bounds" and "Rank collapse in
pretrained transformers").

One SAN layer with per-head matrices ``W_QK,h = W_Q,h W_K,h^T`` and ``W_h = W_V,h W_O,h`` maps an input of
residual ``r = ||res(X)||_{1,inf}`` to one of residual at most ``a(r) r^3`` (chapter "Deep bounds", eq.
``deep-bound``, one layer), with ``a(r) = 4 gamma(r) beta H / sqrt(d_qk)``,
``beta = sqrt(max_h ||W_QK,h||_1 ||W_h||_1 * max_h ||W_QK,h||_inf ||W_h||_inf)`` and
``log(4 gamma) = 2 mu + log(1 + e^mu)``, ``mu = max_h ||W_QK,h||_{1,inf} r^2 / sqrt(d_qk)`` (chapter "The
one-layer residual bound"). The step says something only where it contracts, ``a(r) r^2 < 1``:
:func:`contraction_threshold` is the largest such ``r``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from attnbook.core.norms import norm_1, norm_1_inf, norm_inf


class LayerConstants(NamedTuple):
    """``beta`` and ``qk_norm = max_h ||W_QK,h||_{1,inf}`` of one layer, with its ``n_heads`` and ``d_head``."""

    beta: float
    qk_norm: float
    n_heads: int
    d_head: int


def layer_constants(W_qk: torch.Tensor, W_vo: torch.Tensor, d_head: int) -> LayerConstants:
    """The weight constants of one layer from its per-head matrices ``W_qk``, ``W_vo`` of shape
    ``(heads, d, d)`` (chapter "Deep bounds")."""
    if W_qk.ndim != 3 or W_qk.shape != W_vo.shape or d_head < 1:
        raise ValueError(f"expected per-head (heads, d, d) matrices of one shape and d_head >= 1, got "
                         f"{tuple(W_qk.shape)}, {tuple(W_vo.shape)}, {d_head}")
    beta = math.sqrt(float((norm_1(W_qk) * norm_1(W_vo)).max() * (norm_inf(W_qk) * norm_inf(W_vo)).max()))
    return LayerConstants(beta, float(norm_1_inf(W_qk).max()), W_qk.shape[0], d_head)


def log_one_layer_bound(log_r: float, c: LayerConstants) -> float:
    """``log(a(r) r^3)``: the natural log of the one-layer bound on the output residual for an input of
    residual ``r = exp(log_r)`` (chapter "Deep bounds"), in log space because it under- and overflows;
    overflowing terms are capped (the bound is then astronomically vacuous anyway)."""
    mu = c.qk_norm * math.exp(min(2 * log_r, 600)) / math.sqrt(c.d_head)
    log_4gamma = min(2 * mu, 1e300) + math.log1p(math.exp(min(mu, 700)))
    return log_4gamma + math.log(c.beta * c.n_heads / math.sqrt(c.d_head)) + 3 * log_r


def contraction_threshold(c: LayerConstants) -> float:
    """The largest input residual ``r`` at which the one-layer bound contracts, ``a(r) r^2 < 1`` (chapter
    "Rank collapse in pretrained transformers": where the theorem applies to given weights). ``a(r) r^2``
    grows with ``r``, so the threshold is found by bisection on ``log r``."""
    def contracts(log_r):
        return log_one_layer_bound(log_r, c) - log_r < 0

    lo, hi = -700.0, 50.0
    if not contracts(lo):
        return 0.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if contracts(mid) else (lo, mid)
    return math.exp(lo)


def log_bound_by_layer(net, r0: float, c: float = 2.0) -> list[float]:
    """The natural log of the bound ``c b_l`` on the residual after each layer ``l = 0..L`` of a
    :class:`attnbook.core.attention.SelfAttentionNetwork` from an input of residual ``r0``: ``b_0 = r0``,
    ``b_l = a_l(b_{l-1}) b_{l-1}^3`` with each layer's own constants (chapter "Deep bounds", eq.
    ``deep-bound`` layer by layer); ``c = 2`` for the token-mean residual of the output, 1 for the argmin."""
    if not r0 > 0:
        raise ValueError(f"r0 must be positive, got {r0}")
    b, logs = math.log(r0), [math.log(r0)]
    for block in net.blocks:
        W_qk, W_vo = block.attn.head_matrices()
        b = log_one_layer_bound(b, layer_constants(W_qk, W_vo, block.attn.d_head))
        logs.append(b)
    return [x + math.log(c) for x in logs]
