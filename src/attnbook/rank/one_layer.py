"""The one-layer residual bound, written once (chapter "The one-layer residual bound", Lemma ``lem-one-layer``,
eq. ``eq-one-layer``).

One head of self-attention maps an input with residual ``R = res(X)`` to an output whose residual is at most

    ||res(SA(X))||_{1,inf} <= c * gamma * beta / sqrt(d_qk) * ||R||_{1,inf}^3,

with ``beta = ||W_QK||_{1,inf} ||W_V||_{1,inf}``, ``mu = ||W_QK||_{1,inf} ||R||_{1,inf}^2 / sqrt(d_qk)``,
``gamma = e^{2 mu} (1 + e^mu) / 4``, and ``c = 4`` with the paper's argmin residual on both sides, ``c = 8`` with
the token-mean residual. The chapter checks every step of the proof; this module gives the bound itself to the
cells that compare it with observed residuals, so that it is typed in one place.
"""

from __future__ import annotations

import math

import torch

from attnbook.core.norms import norm_1_inf

#: the lemma's constant c for each centring of the residual
CONSTANT = {"argmin": 4.0, "mean": 8.0}


def gamma(mu: torch.Tensor) -> torch.Tensor:
    """``gamma = e^{2 mu} (1 + e^mu) / 4`` (chapter "The one-layer residual bound": Lemma ``lem-one-layer``);
    ``gamma -> 1/2`` as the residual, and with it ``mu``, goes to 0."""
    return 0.25 * (2 * mu).exp() * (1 + mu.exp())


def lemma_bound(W_qk: torch.Tensor, W_v: torch.Tensor, R: torch.Tensor, d_qk: int,
                center: str = "mean") -> torch.Tensor:
    """The bound of eq. ``eq-one-layer`` on ``||res(SA(X))||_{1,inf}`` for a head with ``W_QK = W_Q W_K^T``
    (``W_qk``) and value matrix ``W_v`` on an input with residual ``R`` (all batched over leading dimensions, the
    last two of each a matrix), for the ``center`` used on both sides (``"mean"`` or ``"argmin"``)."""
    if center not in CONSTANT:
        raise ValueError(f"center must be one of {sorted(CONSTANT)}, got {center!r}")
    if d_qk < 1:
        raise ValueError(f"d_qk must be a positive integer, got {d_qk}")
    sq = math.sqrt(d_qk)
    r = norm_1_inf(R)
    mu = norm_1_inf(W_qk) * r**2 / sq
    beta = norm_1_inf(W_qk) * norm_1_inf(W_v)
    return CONSTANT[center] * gamma(mu) * beta / sq * r**3


def loglog_slope(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The least-squares slope of ``log y`` against ``log x`` along the last dimension (chapter "The one-layer
    residual bound": the order of the output residual in the input residual; 3 is cubic)."""
    if x.shape != y.shape or x.shape[-1] < 2:
        raise ValueError(f"need x and y of one shape with at least two points, got {tuple(x.shape)}, {tuple(y.shape)}")
    if not ((x > 0).all() and (y > 0).all()):
        raise ValueError("log-log slopes need positive values")
    lx, ly = x.log(), y.log()
    dx = lx - lx.mean(-1, keepdim=True)
    return (dx * (ly - ly.mean(-1, keepdim=True))).sum(-1) / (dx**2).sum(-1)
