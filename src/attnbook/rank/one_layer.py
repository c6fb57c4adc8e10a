"""The one-layer residual bound, written once (chapter "The one-layer residual bound", Lemma ``lem-one-layer``,
eq. ``eq-one-layer``).

One head of self-attention maps an input with residual ``R = res(X)`` to an output whose residual is at most

    ||res(SA(X))||_{1,inf} <= c * gamma * beta / sqrt(d_qk) * ||R||_{1,inf}^3,

with ``beta = ||W_QK||_{1,inf} ||W_V||_{1,inf}``, ``mu = ||W_QK||_{1,inf} ||R||_{1,inf}^2 / sqrt(d_qk)``,
``gamma = e^{2 mu} (1 + e^mu) / 4``, and ``c = 4`` with the paper's argmin residual on both sides, ``c = 8`` with
the token-mean residual. The chapter checks every step of the proof; this module gives the bound itself to the
cells that compare it with observed residuals, so that it is typed in one place, the random instances the
steps are checked on (:func:`sample_instances`) and the sweep of the bound against observed residuals
(:func:`bound_sweep`, :func:`sweep_summary`).
"""

from __future__ import annotations

import math

import torch

from attnbook.core.norms import norm_1_inf, res

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


def sample_instances(batch: int, gen: torch.Generator, *, n: int, d: int, d_qk: int) -> dict:
    """A batch of random one-head instances (chapter "The one-layer residual bound", the instances every step
    is checked on): inputs ``X = 1 x^T + s R0`` with ``n`` tokens of width ``d`` and residual scale ``s``, and
    query, key and value weights of scale ``w``, both log-uniform (``s`` in ``[1e-2, 10^0.5]``, ``w`` in
    ``[0.1, 3]``), with random query and key biases. Keys ``X, Wq, Wk, bq, bk, Wv``, each with leading
    dimension ``batch``; everything is drawn from ``gen``."""
    s = 10 ** (torch.rand(batch, 1, 1, generator=gen) * 2.5 - 2)
    w = 10 ** (torch.rand(batch, 1, 1, generator=gen) * 1.5 - 1)
    X = torch.randn(batch, 1, d, generator=gen) + s * torch.randn(batch, n, d, generator=gen)
    return dict(
        X=X,
        Wq=w * torch.randn(batch, d, d_qk, generator=gen) / d**0.5,
        Wk=w * torch.randn(batch, d, d_qk, generator=gen) / d**0.5,
        bq=torch.randn(batch, 1, d_qk, generator=gen),
        bk=torch.randn(batch, 1, d_qk, generator=gen),
        Wv=w * torch.randn(batch, d, d, generator=gen) / d**0.5,
    )


def self_attention(X, Wq, Wk, bq, bk, Wv) -> torch.Tensor:
    """One head's output ``SA(X) = softmax((X W_Q + 1 b_Q^T)(X W_K + 1 b_K^T)^T / sqrt(d_qk)) X W_V`` (chapter
    "The one-layer residual bound", set-up; ``b_V = 0``), batched over leading dimensions."""
    sq = math.sqrt(Wq.shape[-1])
    P = ((X @ Wq + bq) @ (X @ Wk + bk).transpose(-1, -2) / sq).softmax(-1)
    return P @ X @ Wv


def bound_sweep(scales: torch.Tensor, weight_scales, n_nets: int, gen: torch.Generator, *, n: int, d: int,
                d_qk: int) -> dict:
    """The bound against reality (chapter "The one-layer residual bound", figure ``fig-ch03-2``): for each
    weight scale ``w`` and each of ``n_nets`` random heads (weights of scale ``w``, biases and shared row from
    :func:`sample_instances`), inputs ``X = 1 x^T + s R0`` with ``R0`` a fixed token-centred direction and ``s``
    over ``scales``. Returns ``{w: (r_in, observed, bound)}``, each ``(n_nets, len(scales))``: the input's
    token-mean residual ``||R||_{1,inf}``, the output's ``||res(SA(X))||_{1,inf}`` and :func:`lemma_bound`
    (token-mean centring on both sides)."""
    sweep = {}
    for w in weight_scales:
        obs, bnd, rin = [], [], []
        for _ in range(n_nets):
            base = sample_instances(1, gen, n=n, d=d, d_qk=d_qk)
            kw = {k: v.expand(len(scales), *v.shape[1:]).clone() for k, v in base.items()}
            for k in ("Wq", "Wk", "Wv"):  # new weights of scale w, shared by every s
                kw[k] = torch.randn(1, *kw[k].shape[1:], generator=gen).expand_as(kw[k]) * w / d**0.5
            R0 = torch.randn(1, n, d, generator=gen)
            kw["X"] = base["X"][:, :1, :] + scales[:, None, None] * (R0 - R0.mean(-2, keepdim=True))
            R = kw["X"] - kw["X"].mean(-2, keepdim=True)
            obs.append(norm_1_inf(res(self_attention(**kw))))
            bnd.append(lemma_bound(kw["Wq"] @ kw["Wk"].transpose(-1, -2), kw["Wv"], R, d_qk))
            rin.append(norm_1_inf(R))
        sweep[w] = (torch.stack(rin), torch.stack(obs), torch.stack(bnd))
    return sweep


def sweep_summary(sweep: dict, cubic: torch.Tensor) -> dict:
    """What chapter "The one-layer residual bound" reads off :func:`bound_sweep`: ``slopes``, the
    :func:`loglog_slope` of observed against input residual of every head over the points ``cubic`` (a mask
    over the scales: the cubic regime); ``gaps``, bound / observed at those points (flattened); ``worst``,
    the largest observed / bound over all points."""
    slopes, gaps, worst = [], [], 0.0
    for rin, obs, bnd in sweep.values():
        slopes.append(loglog_slope(rin[:, cubic], obs[:, cubic]))
        gaps.append((bnd[:, cubic] / obs[:, cubic]).flatten())
        worst = max(worst, (obs / bnd).max().item())
    return {"slopes": torch.cat(slopes), "gaps": torch.cat(gaps), "worst": worst}
