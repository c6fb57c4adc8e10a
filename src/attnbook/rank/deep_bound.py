"""The doubly exponential bound's constants for given weights (chapters "Deep bounds" and "Rank collapse in
pretrained transformers").

One SAN layer with per-head matrices ``W_QK,h = W_Q,h W_K,h^T`` and ``W_h = W_V,h W_O,h`` maps an input of
residual ``r = ||res(X)||_{1,inf}`` to one of residual at most ``a(r) r^3`` (chapter "Deep bounds", eq.
``deep-bound``, one layer), with ``a(r) = 4 gamma(r) beta H / sqrt(d_qk)``,
``beta = sqrt(max_h ||W_QK,h||_1 ||W_h||_1 * max_h ||W_QK,h||_inf ||W_h||_inf)`` and
``log(4 gamma) = 2 mu + log(1 + e^mu)``, ``mu = max_h ||W_QK,h||_{1,inf} r^2 / sqrt(d_qk)`` (chapter "The
one-layer residual bound"). The step says something only where it contracts, ``a(r) r^2 < 1``:
:func:`contraction_threshold` is the largest such ``r``.

Chapter "Deep bounds" also reads its simulations from here: random SANs against the bound layer by layer
(:func:`simulate_against_bound`, with the residual followed below float64's round-off by
:func:`tracked_log10_residuals`), residual curves of several random networks (:func:`random_net_curves`), the MLP lemma's instances (:func:`mlp_instances`, :func:`mlp`), SAN+MLP
residual curves by MLP weight scale (:func:`mlp_gain_curves`, :func:`first_layer_below`) and LayerNorm's
effect on the relative residual (:func:`layernorm_residual_ratios`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from attnbook.core.attention import SelfAttentionNetwork, gaussian_init_
from attnbook.core.norms import norm_1, norm_1_inf, norm_inf, relative_residual, residual_by_layer


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


#: below this ``log(s^2)`` (the residual scores' scale) the softmax's reaction is linear in them to float64
#: precision: the neglected terms are ``1e-150`` of the kept ones
_LINEAR_BELOW = math.log(1e-150)


def tracked_log10_residuals(net, X: torch.Tensor) -> torch.Tensor:
    """``log10 ||res(X^l)||_{1,inf}`` (token-mean residual) of the input and of every layer of a pure SAN, computed
    without the round-off floor of a forward pass (chapter "Deep bounds", ``thm-deep-bound`` at every layer).

    A forward pass stores ``X^l = 1 x^T + R`` in one matrix, so once ``R`` is ``1e-16`` of the shared row it is
    lost to round-off. Here the two are carried apart, as in the proof of chapter "The one-layer residual
    bound": with ``R = s U`` (``||U||_{1,inf} = 1``, the scale ``s`` in log space), each head's scores split into
    ``1 r^T + E`` (``r = R W_K q / sqrt(d_head)`` per column, ``E = R W_Q (R W_K)^T / sqrt(d_head)``, eq.
    ``eq-scores``), ``Delta = P - 1 p^T`` is computed as ``p_j expm1(E_ij - log Z_i)`` with
    ``log Z_i = log1p(sum_k p_k expm1(E_ik))`` (steps 5 and 6), or, once ``s^2`` is below ``1e-150``, as its
    linear part ``p_j (E_ij - (E p)_i)``, and the next residual is ``sum_h Delta_h R W_V,h W_O,h`` (eq.
    ``eq-output-split``), re-centred on its token mean; the shared row takes the rest. Every step keeps float64's
    relative precision, so the residual can be followed to ``1e-10000`` and beyond.

    ``net``: a :class:`SelfAttentionNetwork` without skips, MLPs or LayerNorm (head gates are not followed: the
    network as it runs without them); ``X``: one input ``(n, d)`` or ``(1, n, d)``; both are read in float64.
    Returns ``(depth + 1,)`` on the CPU, entry 0 the input's; raises ``ValueError`` where it cannot follow."""
    X = X[0] if X.ndim == 3 and X.shape[0] == 1 else X
    X = X.double()  # float64 whatever the net's dtype: the scale s^2 must not underflow early
    if X.ndim != 2 or X.shape[-1] != net.d_model:
        raise ValueError(f"expected one input of shape (n_tokens, {net.d_model}), got {tuple(X.shape)}")
    for block in net.blocks:
        if block.skip or block.mlp is not None or block.layernorm is not None:
            raise ValueError("tracked_log10_residuals follows a pure SAN: every block needs skip=False, mlp=False, "
                             "layernorm=None")
    x = X.mean(0, keepdim=True)  # (1, d): the shared row
    U = X - x
    nrm = float(norm_1_inf(U))
    if not nrm > 0:
        raise ValueError("the input has rank one already (zero residual): nothing to track")
    U, log_s, logs = U / nrm, math.log(nrm), [math.log(nrm)]
    with torch.no_grad():
        for block in net.blocks:
            attn, alpha = block.attn, abs(float(block.alpha))
            (Wq, bq), (Wk, bk), (Wv, bv), (Wo, bo) = (
                tuple(t.double() for t in attn.head_projection(w)) for w in ("q", "k", "v", "out"))
            s = math.exp(log_s)  # 0.0 once it underflows: then r = 0 and p is uniform, as it is to float precision
            q = x @ Wq + bq  # (H, 1, d_head): the shared row's queries
            UQ, UK = U @ Wq, U @ Wk  # (H, n, d_head)
            r = s * attn.scale * (UK @ q.transpose(-1, -2)).transpose(-1, -2)  # (H, 1, n)
            p = r.softmax(-1)
            E_unit = attn.scale * UQ @ UK.transpose(-1, -2)  # E / s^2
            if 2 * log_s > _LINEAR_BELOW:
                E = s * s * E_unit
                if float(E.abs().max()) < 1.0:  # expm1 and log1p keep the digits of a small E
                    log_Z = torch.log1p((p * torch.expm1(E)).sum(-1, keepdim=True))
                    Delta_unit = p * torch.expm1(E - log_Z) / (s * s)
                else:  # large scores: P itself, where expm1 would overflow (and p may underflow)
                    Delta_unit = ((r + E).softmax(-1) - p) / (s * s)
            else:
                Delta_unit = p * (E_unit - (E_unit * p).sum(-1, keepdim=True))
            D = (Delta_unit @ U @ Wv @ Wo).sum(0)  # the next residual over s^3
            shared = ((x @ Wv + bv + s * (p @ U @ Wv)) @ Wo).sum(0) + bo
            D_mean = D.mean(0, keepdim=True)
            D = D - D_mean
            nrm = float(norm_1_inf(D))
            if not (math.isfinite(nrm) and nrm > 0):
                raise ValueError(f"the tracked residual became {nrm} at layer {len(logs)}: the layer maps the "
                                 "tokens to one row exactly, or its scores are not finite")
            log_s = 3 * log_s + math.log(alpha) + math.log(nrm)
            x = alpha * (shared + s**3 * D_mean)  # the residual's mean joins the shared row
            U = D / nrm
            logs.append(log_s)
    return torch.tensor(logs, dtype=torch.float64) / math.log(10)


def simulate_against_bound(n_nets: int, n: int, d: int, n_heads: int, depth: int, scale: float = 0.01,
                           seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random SANs against the doubly exponential bound, layer by layer (chapter "Deep bounds", figure
    ``fig-ch04-1``): net ``i`` is a Gaussian-initialised :class:`SelfAttentionNetwork` without skips, MLPs or
    LayerNorm drawn after ``torch.manual_seed(i)``, on an input ``x^T + scale * R0`` of ``n`` tokens (drawn
    from a generator seeded ``seed``). Returns ``(observed, log10_tracked, log10_bound)``, each
    ``(n_nets, depth + 1)``: the token-mean residual ``||res(X^l)||_{1,inf}`` of a forward pass (which stops at
    float64's round-off), the log10 of the same residual followed without round-off
    (:func:`tracked_log10_residuals`) and the log10 of :func:`log_bound_by_layer`'s bound ``2 b_l`` from the
    input residual. Tensors take the default dtype (the chapter runs in float64)."""
    gen = torch.Generator().manual_seed(seed)
    observed, tracked, bounds = [], [], []
    for i in range(n_nets):
        net = random_net(depth, d, n_heads, i, skip=False, mlp=False, layernorm=None)
        X = torch.randn(1, 1, d, generator=gen) + scale * torch.randn(1, n, d, generator=gen)
        obs = residual_by_layer(net, X, relative=False)[0]
        observed.append(obs)
        tracked.append(tracked_log10_residuals(net, X).to(obs.dtype))
        bounds.append(torch.tensor(log_bound_by_layer(net, obs[0].item())) / math.log(10))
    return torch.stack(observed), torch.stack(tracked), torch.stack(bounds)


def random_net_curves(X: torch.Tensor, depth: int, n_heads: int, n_nets: int, seed: int = 1,
                      relative: bool = True, device="cpu", **block_kwargs) -> torch.Tensor:
    """Residual by layer of ``n_nets`` random networks on one input ``X`` (chapter "Deep bounds": SAN, SAN+skip
    and SAN+LN over several networks): net ``i`` is a Gaussian-initialised :class:`SelfAttentionNetwork` with
    the :class:`attnbook.core.attention.Block` switches ``block_kwargs``, drawn after
    ``torch.manual_seed(seed + i)`` and run on ``device``. Returns ``(n_nets, depth + 1)`` on the CPU: the
    relative residual, or with ``relative=False`` the residual norm ``||res(X^l)||_{1,inf}``."""
    if n_nets < 1:
        raise ValueError(f"n_nets must be at least 1, got {n_nets}")
    rows = []
    for i in range(n_nets):
        net = random_net(depth, X.shape[-1], n_heads, seed + i, **block_kwargs).to(device)
        rows.append(residual_by_layer(net, X.to(device), relative=relative)[0])
    return torch.stack(rows)


def random_net(depth: int, d_model: int, n_heads: int, seed: int, **block_kwargs) -> SelfAttentionNetwork:
    """A Gaussian-initialised :class:`SelfAttentionNetwork` with the :class:`attnbook.core.attention.Block`
    switches ``block_kwargs``, drawn on the CPU after ``torch.manual_seed(seed)`` (chapter "Deep bounds": the
    networks of :func:`random_net_curves`, :func:`mlp_gain_curves` and :func:`simulate_against_bound`)."""
    torch.manual_seed(seed)
    return gaussian_init_(SelfAttentionNetwork(depth, d_model, n_heads, **block_kwargs))


def mlp_instances(batch: int, gen: torch.Generator, *, n: int, d: int) -> dict:
    """A batch of random instances of the MLP lemma (chapter "Deep bounds", ``lem-mlp``): inputs
    ``X = 1 x^T + s R0`` of ``n`` tokens of width ``d`` and a token-wise MLP of width ``4 d`` with weights of
    scale ``w``, ``s`` in ``[1e-2, 10]`` and ``w`` in ``[0.1, 10]`` log-uniform, random biases. Keys
    ``X, W1, W2, b1, b2`` (the arguments of :func:`mlp`), leading dimension ``batch``, drawn from ``gen``."""
    def randn(*shape):
        return torch.randn(batch, *shape, generator=gen)

    s = 10 ** (torch.rand(batch, 1, 1, generator=gen) * 3 - 2)
    w = 10 ** (torch.rand(batch, 1, 1, generator=gen) * 2 - 1)
    return dict(X=randn(1, d) + s * randn(n, d), W1=w * randn(d, 4 * d) / d**0.5,
                W2=w * randn(4 * d, d) / d**0.5, b1=randn(1, 4 * d), b2=randn(1, d))


def mlp(X: torch.Tensor, W1: torch.Tensor, b1: torch.Tensor, W2: torch.Tensor, b2: torch.Tensor) -> torch.Tensor:
    """The token-wise MLP ``f(X) = relu(X W1 + b1) W2 + b2`` of chapter "Deep bounds" (``lem-mlp``)."""
    return torch.relu(X @ W1 + b1) @ W2 + b2


def mlp_gain_curves(X: torch.Tensor, depth: int, n_heads: int, gains, seed: int = 3,
                    device="cpu") -> tuple[dict, dict]:
    """SAN+MLP residual curves by MLP weight scale (chapter "Deep bounds", figure ``fig-ch04-3``): for each
    ``gain``, a Gaussian-initialised :class:`SelfAttentionNetwork` without skips or LayerNorm, with MLPs,
    drawn after ``torch.manual_seed(seed)``, whose MLP weights are multiplied by ``gain``. Returns
    ``(curves, lambdas)`` keyed by gain: the relative residual of every layer on ``X`` (moved to ``device``
    with the net) and the largest MLP Lipschitz constant ``lambda = ||W1||_{1,inf} ||W2||_{1,inf}`` of the
    layers (``W1``, ``W2`` as right multiplications, eq. ``eq-mlp-lipschitz``)."""
    curves, lambdas = {}, {}
    for gain in gains:
        net = random_net(depth, X.shape[-1], n_heads, seed, skip=False, mlp=True, layernorm=None)
        with torch.no_grad():
            for block in net.blocks:
                for lin in (block.mlp[0], block.mlp[2]):
                    lin.weight.mul_(gain)
        net.to(device)
        lambdas[gain] = max((norm_1_inf(b.mlp[0].weight.T) * norm_1_inf(b.mlp[2].weight.T)).item()
                            for b in net.blocks)
        curves[gain] = residual_by_layer(net, X.to(device))[0]
    return curves, lambdas


def first_layer_below(curve: torch.Tensor, level: float) -> int:
    """The first layer (index into ``curve``, the input being 0) whose residual is below ``level``, or
    ``len(curve)`` when none is (chapter "Deep bounds": how many layers collapse takes)."""
    below = curve < level
    return int(below.nonzero()[0]) if below.any() else len(curve)


def layernorm_residual_ratios(ln: torch.nn.LayerNorm, gen: torch.Generator, n: int, scales,
                              device="cpu") -> list[float]:
    """Relative residual after LayerNorm ``ln`` over relative residual before (chapter "Deep bounds", LayerNorm
    section), one random input ``x^T + s R0`` of ``n`` tokens per residual scale ``s`` in ``scales``, drawn
    from ``gen`` in turn on the CPU and run on ``device``."""
    d = ln.normalized_shape[-1]
    ratios = []
    with torch.no_grad():
        for s in scales:
            Xs = (torch.randn(1, d, generator=gen) + s * torch.randn(n, d, generator=gen)).to(device)
            ratios.append((relative_residual(ln(Xs)) / relative_residual(Xs)).item())
    return ratios
