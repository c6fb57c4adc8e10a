"""Signal propagation at initialisation (Part II: chapters "Rank collapse at initialisation" and "Unequal gradients",
after Noci et al. 2022).

chapter "Rank collapse at initialisation":

* :func:`token_cosine`: the mean cosine similarity between distinct tokens (eq. ``cos-sim``), the
  measure of rank collapse used in Part II;
* :func:`correlated_tokens`: inputs whose tokens have a chosen pairwise cosine ``rho_0``;
* :func:`build_stack`: a stack of the library's :class:`attnbook.core.attention.Block` at the Gaussian
  initialisation (:func:`attnbook.core.attention.gaussian_init_`);
* :func:`cosine_by_layer`: the token cosine of every hidden state of a stack;
* :func:`meanfield_cosine`: the book's mean-field recursion for the cosine ``rho_l`` under uniform
  attention (eqs. ``mf-pre`` and ``mf-post``), with :func:`relu_kernel` for the MLP (eq. ``relu-kernel``);
* :func:`qkv_grad_norms`: the per-layer Frobenius norms of the gradients of ``W_Q``, ``W_K``, ``W_V``;
* :func:`cosine_by_depth` and :func:`grad_norms_by_config`: the chapter's sweeps over depth and stack kind.

chapter "Unequal gradients":

* :func:`single_head`: ``S(X) = softmax(X W_Q W_K^T X^T / (tau sqrt(d_k))) X W_V`` (eq. ``head``);
* :func:`jacobian_sq_norms`: the squared Frobenius norms of the Jacobians ``dS/dW_Q``, ``dS/dW_K``,
  ``dS/dW_V``, exactly, by automatic differentiation;
* :func:`uniform_attention_sq_norms`: the book's closed forms of the same under uniform attention
  (eqs. ``jv`` and ``jq``);
* :func:`mean_jacobian_sq_norms`: their Monte-Carlo mean over Gaussian weight draws;
* :func:`balancing_temperature`: the temperature at which the two closed forms are equal (eq. ``tau-star``);
* :func:`jacobian_scaling_sweeps`: those Monte-Carlo norms against the input scale, the width and the length;
* :func:`log_crossing` and :func:`log_log_slope`: where a measured ratio crosses 1, and measured powers.
"""

from __future__ import annotations

import contextlib
import math
from typing import Mapping, Optional, Sequence

import torch
from torch.func import jacrev

from attnbook.core.attention import SelfAttentionNetwork, gaussian_init_


def _check_tokens(X: torch.Tensor, name: str = "X") -> torch.Tensor:
    if not isinstance(X, torch.Tensor) or X.ndim < 2:
        shape = tuple(X.shape) if isinstance(X, torch.Tensor) else type(X).__name__
        raise ValueError(f"{name} must be a tensor of shape (..., n_tokens, d), got {shape}")
    if X.shape[-2] < 2 or X.shape[-1] < 1:
        raise ValueError(f"{name} needs at least 2 tokens and 1 feature, got shape {tuple(X.shape)}")
    return X


def token_cosine(X: torch.Tensor) -> torch.Tensor:
    """Mean cosine similarity between distinct tokens of ``X`` (..., n, d) (chapter "Rank collapse at initialisation",
    eq. ``cos-sim``).

    ``(1 / (n (n - 1))) sum_{i != j} <x_i, x_j> / (||x_i|| ||x_j||)``, batched over leading dims.
    It is 1 exactly when all tokens point the same way (rank collapse, ``X = 1 x^T`` for ``x != 0``).
    """
    X = _check_tokens(X)
    U = X / X.norm(dim=-1, keepdim=True).clamp_min(torch.finfo(X.dtype).tiny)
    G = U @ U.transpose(-2, -1)
    n = X.shape[-2]
    return (G.sum(dim=(-2, -1)) - G.diagonal(dim1=-2, dim2=-1).sum(-1)) / (n * (n - 1))


def correlated_tokens(
    batch: int, n_tokens: int, d: int, rho: float, generator: Optional[torch.Generator] = None,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """Random inputs (batch, n, d) whose tokens have pairwise cosine ``rho`` in expectation (chapter "Rank collapse at
    initialisation").

    ``x_i = sqrt(rho) z + sqrt(1 - rho) e_i`` with ``z, e_i ~ N(0, I_d)``: every coordinate has variance
    1, so ``||x_i||^2 ~ d`` and ``<x_i, x_j> / d ~ rho``.
    """
    if not 0.0 <= rho <= 1.0:
        raise ValueError(f"rho must lie in [0, 1], got {rho}")
    if batch < 1 or n_tokens < 2 or d < 1:
        raise ValueError(f"need batch >= 1, n_tokens >= 2, d >= 1; got {batch}, {n_tokens}, {d}")
    z = torch.randn(batch, 1, d, generator=generator, dtype=dtype)
    e = torch.randn(batch, n_tokens, d, generator=generator, dtype=dtype)
    return math.sqrt(rho) * z + math.sqrt(1.0 - rho) * e


def tokens_with_cosine(
    n_tokens: int, d: int, rho: float, generator: Optional[torch.Generator] = None,
    dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    """Tokens (n, d) with ``||x_i||^2 = d`` and every pairwise cosine exactly ``rho`` (chapter "Unequal gradients",
    eq. ``ch09-normalised``): ``x_i = sqrt(d) (sqrt(rho) e_0 + sqrt(1 - rho) e_i)`` for random
    orthonormal ``e_0, ..., e_n``; needs ``d > n``."""
    if not 0.0 <= rho <= 1.0:
        raise ValueError(f"rho must lie in [0, 1], got {rho}")
    if n_tokens < 2 or d <= n_tokens:
        raise ValueError(f"need n_tokens >= 2 and d > n_tokens, got n_tokens={n_tokens}, d={d}")
    G = torch.randn(d, n_tokens + 1, generator=generator, dtype=dtype)
    E = torch.linalg.qr(G).Q.T  # (n + 1, d), orthonormal rows
    return math.sqrt(d) * (math.sqrt(rho) * E[:1] + math.sqrt(1.0 - rho) * E[1:])


def build_stack(
    depth: int, d_model: int, n_heads: int, *, layernorm: Optional[str] = "pre", scaled: bool = False,
    mlp: bool = True, temperature: float = 1.0, gain: float = 1.0, dtype: torch.dtype = torch.float32,
    device: Optional[torch.device | str] = None, learnable_alpha: bool = False,
) -> SelfAttentionNetwork:
    """A ``depth``-layer stack of :class:`attnbook.core.attention.Block` at Gaussian initialisation (chapter "Rank collapse
    at initialisation").

    ``scaled=True`` sets the residual scale ``alpha = 1 / sqrt(depth)`` (Noci et al. 2022); otherwise
    ``alpha = 1``; ``learnable_alpha=True`` makes each block's ``alpha`` a parameter starting there.
    Skip connections are on; ``layernorm`` is ``"pre"`` or ``"post"``.
    ``device``: build and initialise the weights there, drawing from that device's random generator
    (``None`` or the CPU: the CPU generator, as before). Deep, wide stacks are much faster to initialise
    on a GPU, but a GPU draws different weights than the CPU for the same seed.
    """
    if layernorm not in ("pre", "post"):
        raise ValueError(f"layernorm must be 'pre' or 'post' for a transformer stack, got {layernorm!r}")
    if depth < 1:
        raise ValueError(f"depth must be at least 1, got {depth}")
    alpha = 1.0 / math.sqrt(depth) if scaled else 1.0
    with torch.device(device) if device is not None else contextlib.nullcontext():
        net = SelfAttentionNetwork(
            depth, d_model, n_heads, skip=True, mlp=mlp, layernorm=layernorm, alpha=alpha,
            temperature=temperature, learnable_alpha=learnable_alpha,
        )
    return gaussian_init_(net.to(dtype), gain=gain)


@torch.no_grad()
def cosine_by_layer(net: SelfAttentionNetwork, X: torch.Tensor) -> torch.Tensor:
    """Token cosine of the input and of every layer's output, averaged over the batch (chapter "Rank collapse at
    initialisation").

    Returns a tensor of shape ``(depth + 1,)``: entry ``l`` is :func:`token_cosine` of ``X_l``.
    """
    X = _check_tokens(X)
    if X.ndim != 3:
        raise ValueError(f"X must have shape (batch, n_tokens, d), got {tuple(X.shape)}")
    _, hidden, _ = net(X)
    return torch.stack([token_cosine(h).mean() for h in hidden])


def relu_kernel(rho: torch.Tensor | float) -> torch.Tensor:
    """``E[relu(u) relu(v)]`` for standard Gaussians with correlation ``rho`` (chapter "Rank collapse at
    initialisation", eq. ``relu-kernel``).

    ``kappa(rho) = (sqrt(1 - rho^2) + (pi - arccos rho) rho) / (2 pi)``; ``kappa(1) = 1/2``.
    """
    rho = torch.as_tensor(rho, dtype=torch.float64)
    if (rho.abs() > 1 + 1e-12).any():
        raise ValueError("rho must lie in [-1, 1]")
    rho = rho.clamp(-1.0, 1.0)
    return (torch.sqrt(1 - rho**2) + (math.pi - torch.arccos(rho)) * rho) / (2 * math.pi)


def meanfield_cosine(
    depth: int, rho0: float, n_tokens: int, *, alpha: float = 1.0, layernorm: str = "pre",
    mlp: bool = True,
) -> torch.Tensor:
    """The book's mean-field recursion for the token cosine ``rho_l``, l = 0..depth (chapter "Rank collapse at
    initialisation").

    Assumptions: uniform attention ``A = 11^T / n``; Gaussian weights that preserve norms in expectation
    (``gaussian_init_``, gain 1); LayerNorm acts as ``x -> sqrt(d) x / ||x||`` (its centring and its
    affine part, 1 and 0 at initialisation, are ignored); width large enough that inner products equal
    their expectations. ``q`` is the mean squared norm per coordinate, ``c`` the mean inner product of two
    distinct tokens per coordinate, ``rho = c / q``. A residual branch with input cosine ``r`` adds

    * attention: ``alpha^2 mu(r)`` to both ``q`` and ``c``, ``mu(r) = (1 + (n - 1) r) / n`` (eq. ``mf-attn``);
    * MLP: ``alpha^2 / 2`` to ``q`` and ``alpha^2 kappa(r)`` to ``c`` (eq. ``relu-kernel``).

    Pre-LN keeps adding to the stream (eq. ``mf-pre``); post-LN renormalises after every branch, so
    ``q = 1`` again (eq. ``mf-post``).
    """
    if layernorm not in ("pre", "post"):
        raise ValueError(f"layernorm must be 'pre' or 'post', got {layernorm!r}")
    if depth < 0 or n_tokens < 2 or not 0.0 <= rho0 <= 1.0 or alpha <= 0:
        raise ValueError(
            f"need depth >= 0, n_tokens >= 2, rho0 in [0, 1], alpha > 0; got {depth}, {n_tokens}, "
            f"{rho0}, {alpha}"
        )
    a2 = alpha**2
    q, c = 1.0, float(rho0)
    out = [c / q]

    def branch(q, c, kind):
        r = c / q
        if kind == "attn":
            m = (1 + (n_tokens - 1) * r) / n_tokens
            q, c = q + a2 * m, c + a2 * m
        else:
            q, c = q + a2 * 0.5, c + a2 * float(relu_kernel(r))
        if layernorm == "post":
            q, c = 1.0, c / q
        return q, c

    for _ in range(depth):
        q, c = branch(q, c, "attn")
        if mlp:
            q, c = branch(q, c, "mlp")
        out.append(c / q)
    return torch.tensor(out, dtype=torch.float64)


def qkv_grad_norms(
    net: SelfAttentionNetwork, X: torch.Tensor, readout: Optional[torch.Tensor] = None,
    generator: Optional[torch.Generator] = None,
) -> dict[str, torch.Tensor]:
    """Per-layer Frobenius norms of the gradients of ``W_Q``, ``W_K``, ``W_V`` at ``X`` (chapter "Rank collapse at
    initialisation").

    The loss is ``<R, Y>`` summed over the batch, with ``Y`` the network's output and ``R`` a fixed
    readout with i.i.d. standard Gaussian entries (drawn on the CPU from ``generator`` when not given,
    then moved to ``X``'s device; a given readout is moved there too). Since
    ``E_R ||grad_W <R, Y>||^2`` is the squared Frobenius norm of the Jacobian ``dY/dW``, these are
    Monte-Carlo estimates of the Jacobian norms of chapter "Unequal gradients". Returns ``{"q", "k", "v"}``, each of
    shape ``(depth,)`` (all heads of a layer together).
    """
    X = _check_tokens(X)
    if X.ndim != 3:
        raise ValueError(f"X must have shape (batch, n_tokens, d), got {tuple(X.shape)}")
    if readout is None:
        readout = torch.randn(X.shape, generator=generator, dtype=X.dtype)
    if readout.shape != X.shape:
        raise ValueError(f"readout must have the shape of X {tuple(X.shape)}, got {tuple(readout.shape)}")
    readout = readout.to(X.device)
    net.zero_grad(set_to_none=True)
    Y, _, _ = net(X)
    (Y * readout).sum().backward()
    out = {}
    for name in ("q", "k", "v"):
        out[name] = torch.stack(
            [getattr(b.attn, name).weight.grad.detach().norm() for b in net.blocks]
        )
    net.zero_grad(set_to_none=True)
    return out


def single_head(
    X: torch.Tensor, W_Q: torch.Tensor, W_K: torch.Tensor, W_V: torch.Tensor, temperature: float = 1.0
) -> torch.Tensor:
    """One attention head without biases (chapter "Unequal gradients", eq. ``head``).

    ``S = A X W_V``, ``A = softmax(X W_Q W_K^T X^T / (tau sqrt(d_k)))``; ``X`` is (n, d), ``W_Q`` and
    ``W_K`` are (d, d_k), ``W_V`` is (d, d_v).
    """
    X = _check_tokens(X)
    if X.ndim != 2:
        raise ValueError(f"X must have shape (n_tokens, d), got {tuple(X.shape)}")
    d = X.shape[1]
    if W_Q.shape != W_K.shape or W_Q.ndim != 2 or W_Q.shape[0] != d or W_V.ndim != 2 or W_V.shape[0] != d:
        raise ValueError(
            f"expected W_Q, W_K of shape ({d}, d_k) and W_V of shape ({d}, d_v); got "
            f"{tuple(W_Q.shape)}, {tuple(W_K.shape)}, {tuple(W_V.shape)}"
        )
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    scores = (X @ W_Q) @ (X @ W_K).T / (temperature * math.sqrt(W_Q.shape[1]))
    return scores.softmax(dim=-1) @ X @ W_V


def jacobian_sq_norms(
    X: torch.Tensor, W_Q: torch.Tensor, W_K: torch.Tensor, W_V: torch.Tensor, temperature: float = 1.0
) -> dict[str, float]:
    """Squared Frobenius norms ``||dS/dW||_F^2`` of the Jacobians of :func:`single_head` (chapter "Unequal gradients").

    ``dS/dW`` is the Jacobian of the (n, d_v) output with respect to the weight matrix, a tensor of
    shape (n, d_v, d, d_k); its squared Frobenius norm is the sum of the squares of all its entries,
    computed exactly with ``torch.func.jacrev``. Returns ``{"q", "k", "v"}``.
    """

    def f(wq, wk, wv):
        return single_head(X, wq, wk, wv, temperature)

    J = jacrev(f, argnums=(0, 1, 2))(W_Q, W_K, W_V)
    return {name: float((j**2).sum()) for name, j in zip("qkv", J)}


def mean_jacobian_sq_norms(X: torch.Tensor, n_draws: int, *, d_k: int, d_v: int, sigma: float,
                           temperature: float = 1.0, uniform: bool = True, seed: int = 0,
                           device=None) -> dict[str, float]:
    """The mean of :func:`jacobian_sq_norms` over ``n_draws`` Gaussian draws of ``W_Q``, ``W_K``, ``W_V``
    (entries ``N(0, sigma^2)``) (chapter "Unequal gradients": the Monte-Carlo side of eqs. ``jv`` and ``jq``).

    ``uniform=True`` evaluates the ``W_Q`` Jacobian at ``W_Q = 0`` and the ``W_K`` one at ``W_K = 0``, where
    attention is exactly uniform (eq. ``jq``'s assumption); ``uniform=False`` at the drawn weights. The
    weights are drawn on a CPU generator seeded with ``seed`` (the same seed gives the same draws, so
    scales and temperatures are compared on common random numbers) and moved to ``device``.
    """
    if n_draws < 1:
        raise ValueError(f"n_draws must be >= 1, got {n_draws}")
    wgen = torch.Generator().manual_seed(seed)
    X = X.to(device)
    total = {"q": 0.0, "k": 0.0, "v": 0.0}
    for _ in range(n_draws):
        W_Q, W_K, W_V = ((sigma * torch.randn(X.shape[1], m, generator=wgen, dtype=X.dtype)).to(device)
                         for m in (d_k, d_k, d_v))
        if uniform:
            total["q"] += jacobian_sq_norms(X, 0 * W_Q, W_K, W_V, temperature)["q"]
            total["k"] += jacobian_sq_norms(X, W_Q, 0 * W_K, W_V, temperature)["k"]
            total["v"] += jacobian_sq_norms(X, 0 * W_Q, W_K, W_V, temperature)["v"]
        else:
            for key, value in jacobian_sq_norms(X, W_Q, W_K, W_V, temperature).items():
                total[key] += value
    return {key: value / n_draws for key, value in total.items()}


def uniform_attention_sq_norms(
    X: torch.Tensor, sigma_q: float, sigma_k: float, sigma_v: float, d_v: int, temperature: float = 1.0
) -> dict[str, float]:
    """The book's closed forms of :func:`jacobian_sq_norms` under uniform attention (chapter "Unequal gradients").

    With ``A = 11^T / n``, ``xbar`` the token mean, ``Pi = I - 11^T / n`` and ``C = X^T Pi X``:

    * eq. ``jv``: ``||dS/dW_V||_F^2 = n d_v ||xbar||^2`` (exact, no expectation);
    * eq. ``jq``: ``E ||dS/dW_Q||_F^2 = sigma_k^2 sigma_v^2 d_v ||X||_F^2 ||C||_F^2 / (n^2 tau^2)``,
      the expectation over ``W_K ~ N(0, sigma_k^2)`` and ``W_V ~ N(0, sigma_v^2)`` entries; the key's
      is the same with ``sigma_q`` in place of ``sigma_k``.

    Returns ``{"q", "k", "v"}``.
    """
    X = _check_tokens(X)
    if X.ndim != 2:
        raise ValueError(f"X must have shape (n_tokens, d), got {tuple(X.shape)}")
    if min(sigma_q, sigma_k, sigma_v) < 0 or d_v < 1 or temperature <= 0:
        raise ValueError("need sigmas >= 0, d_v >= 1 and temperature > 0")
    n = X.shape[0]
    Xc = X - X.mean(dim=0, keepdim=True)
    C = Xc.T @ Xc
    common = sigma_v**2 * d_v * float(X.pow(2).sum()) * float(C.pow(2).sum()) / (n**2 * temperature**2)
    return {
        "q": sigma_k**2 * common,
        "k": sigma_q**2 * common,
        "v": n * d_v * float(X.mean(dim=0).pow(2).sum()),
    }


def balancing_temperature(
    X: torch.Tensor, sigma_k: float, sigma_v: float
) -> float:
    """The temperature at which the closed forms ``jq`` and ``jv`` are equal (chapter "Unequal gradients", eq.
    ``tau-star``).

    ``tau*^2 = sigma_k^2 sigma_v^2 ||X||_F^2 ||X^T Pi X||_F^2 / (n^3 ||xbar||^2)``; ``d_v`` cancels.
    """
    norms = uniform_attention_sq_norms(X, sigma_k, sigma_k, sigma_v, d_v=1, temperature=1.0)
    if norms["v"] <= 0:
        raise ValueError("the token mean of X is zero: the value Jacobian vanishes, no balance exists")
    return math.sqrt(norms["q"] / norms["v"])


def xavier_uniform_std(fan_in: int, fan_out: int, gain: float = 1.0) -> float:
    """The standard deviation of ``torch.nn.init.xavier_uniform_`` weights, ``gain sqrt(2 / (fan_in +
    fan_out))`` (chapter "Unequal gradients": fairseq initialises the query, key and value projections with
    ``gain = 1/sqrt(2)``, so ``sigma^2 = 1/(2d)`` for a ``d x d`` projection)."""
    if fan_in <= 0 or fan_out <= 0 or gain <= 0:
        raise ValueError(f"expected positive fan_in, fan_out and gain, got {fan_in}, {fan_out}, {gain}")
    return gain * math.sqrt(2.0 / (fan_in + fan_out))


def log_crossing(x: Sequence[float], y: Sequence[float], level: float = 1.0) -> float:
    """Where ``y`` first falls through ``level`` as ``x`` increases, by linear interpolation of ``log y``
    against ``log x`` between the two grid points around it (chapter "Unequal gradients": the simulated
    balancing temperature, where the query/value ratio crosses 1)."""
    if len(x) != len(y) or len(x) < 2 or min(x) <= 0 or min(y) <= 0 or level <= 0:
        raise ValueError("x and y must be positive sequences of the same length >= 2, level positive")
    ly = [math.log(v / level) for v in y]
    for j in range(len(x) - 1):
        if ly[j] >= 0 > ly[j + 1]:
            t = ly[j] / (ly[j] - ly[j + 1])
            return math.exp(math.log(x[j]) + t * (math.log(x[j + 1]) - math.log(x[j])))
    raise ValueError(f"y does not fall through {level} on this grid")


def log_log_slope(x: Sequence[float], y: Sequence[float]) -> float:
    """Least-squares slope of ``log y`` against ``log x`` (chapter "Unequal gradients": measured powers of a scaling
    law)."""
    x = torch.as_tensor(x, dtype=torch.float64)
    y = torch.as_tensor(y, dtype=torch.float64)
    if x.shape != y.shape or x.ndim != 1 or len(x) < 2:
        raise ValueError("x and y must be 1-d sequences of the same length >= 2")
    if (x <= 0).any() or (y <= 0).any():
        raise ValueError("x and y must be positive for a log-log slope")
    lx, ly = x.log(), y.log()
    lx = lx - lx.mean()
    return float((lx * (ly - ly.mean())).sum() / (lx**2).sum())


def cosine_by_depth(
    X: torch.Tensor, depths: Sequence[int], n_nets: int, n_heads: int, rho0: float, *,
    configs: Sequence[tuple[str, bool]], device=None,
) -> tuple[dict, dict]:
    """The token cosine at the output of fresh stacks against depth (chapter "Rank collapse at initialisation"):
    for every ``(layernorm, scaled)`` of ``configs`` and depth ``L`` of ``depths``, the mean over ``n_nets``
    stacks (attention + MLP, ``n_heads`` heads; stack ``s`` drawn after ``torch.manual_seed(1000 L + s)``)
    of the output cosine of ``X`` (batch, n, d), and the mean-field recursion's value from ``rho0``.
    Returns ``(sim, theory)``, each ``{(layernorm, scaled): [value per depth]}``."""
    X = _check_tokens(X)
    if n_nets < 1:
        raise ValueError(f"n_nets must be >= 1, got {n_nets}")
    n, d = X.shape[-2], X.shape[-1]
    sim, theory = {}, {}
    for ln, scaled in configs:
        sim[ln, scaled], theory[ln, scaled] = [], []
        for L in depths:
            vals = []
            for s in range(n_nets):
                torch.manual_seed(1000 * L + s)
                net = build_stack(L, d, n_heads, layernorm=ln, scaled=scaled, device=device)
                vals.append(cosine_by_layer(net, X)[-1].item())
            sim[ln, scaled].append(sum(vals) / len(vals))
            alpha = 1 / math.sqrt(L) if scaled else 1.0
            theory[ln, scaled].append(meanfield_cosine(L, rho0, n, alpha=alpha, layernorm=ln)[-1].item())
    return sim, theory


def grad_norms_by_config(
    X: torch.Tensor, depth: int, n_heads: int, configs: Sequence[tuple[str, bool]], *, seed: int = 7,
    readout_seed: int = 3, device=None,
) -> dict:
    """:func:`qkv_grad_norms` of one ``depth``-layer stack per ``(layernorm, scaled)`` of ``configs`` (each
    drawn after ``torch.manual_seed(seed)``, its readout from a CPU generator seeded with ``readout_seed``),
    on the CPU (chapter "Rank collapse at initialisation": the per-layer gradient norms at initialisation).
    Returns ``{(layernorm, scaled): {"q", "k", "v"}}``."""
    X = _check_tokens(X)
    out = {}
    for ln, scaled in configs:
        torch.manual_seed(seed)
        net = build_stack(depth, X.shape[-1], n_heads, layernorm=ln, scaled=scaled, device=device)
        raw = qkv_grad_norms(net, X, generator=torch.Generator().manual_seed(readout_seed))
        out[ln, scaled] = {name: v.cpu() for name, v in raw.items()}
    return out


def uniform_qk_v_ratio(rho: float, n_tokens: int) -> float:
    """The query (or key) to value gradient-norm ratio of one attention layer under uniform attention, at
    Gaussian initialisation (``sigma^2 = 1 / d`` for every weight), for ``n_tokens`` tokens of norm ``sqrt(d)``
    whose pairwise cosines all equal ``rho`` (chapter "Rank collapse at initialisation", from chapter "Unequal
    gradients"'s eqs. ``jq`` and ``jv``, :func:`uniform_attention_sq_norms`): with ``||X||_F^2 = n d``,
    ``||xbar||^2 = d (1 + (n - 1) rho) / n`` and ``||C||_F^2 = d^2 (1 - rho)^2 (n - 1)``,

        ``sqrt(E ||dS/dW_Q||^2 / ||dS/dW_V||^2) = (1 - rho) sqrt((n - 1) / (n (1 + (n - 1) rho)))``,

    independent of the width and of the head size; 0 at collapse (``rho = 1``)."""
    if not 0.0 <= rho <= 1.0 or n_tokens < 2:
        raise ValueError(f"need rho in [0, 1] and n_tokens >= 2, got {rho} and {n_tokens}")
    return (1.0 - rho) * math.sqrt((n_tokens - 1) / (n_tokens * (1.0 + (n_tokens - 1) * rho)))


def predicted_qk_v_ratios(depth: int, rho0: float, n_tokens: int, *, layernorm: str, scaled: bool) -> torch.Tensor:
    """The per-layer query/key-to-value gradient ratio of a ``depth``-layer stack at initialisation, predicted
    without running it (chapter "Rank collapse at initialisation"): :func:`uniform_qk_v_ratio` at the cosine the
    mean-field recursion (:func:`meanfield_cosine`, ``alpha = 1/sqrt(depth)`` when ``scaled``) gives each
    layer's input. Shape ``(depth,)``, float64. Assumes, as both do, uniform attention and LayerNorm as a
    rescaling; the gradient reaching a layer from above multiplies both norms alike."""
    alpha = 1.0 / math.sqrt(depth) if scaled else 1.0
    rho = meanfield_cosine(depth, rho0, n_tokens, alpha=alpha, layernorm=layernorm)[:-1].clamp(0.0, 1.0)
    return torch.tensor([uniform_qk_v_ratio(float(r), n_tokens) for r in rho], dtype=torch.float64)


def pooled_qk_v_ratios(grads_by_stack: Sequence[Mapping], key) -> torch.Tensor:
    """The per-layer query/key-to-value gradient ratio pooled over stacks drawn alike (chapter "Rank collapse
    at initialisation"): ``sqrt(mean(|grad W_Q|^2, |grad W_K|^2) / mean |grad W_V|^2)``, the means over the
    stacks (and over ``W_Q`` and ``W_K``), which is what :func:`predicted_qk_v_ratios` predicts, a ratio of
    expected squared norms over the weights. ``grads_by_stack``: :func:`grad_norms_by_config`'s results, one
    per stack; ``key``: a ``(layernorm, scaled)`` of them. Shape ``(depth,)``, float64, on the CPU."""
    if not grads_by_stack:
        raise ValueError("need the gradient norms of at least one stack")
    g = [{name: stack[key][name].detach().cpu().double() for name in ("q", "k", "v")} for stack in grads_by_stack]
    qk = torch.stack([(x["q"] ** 2 + x["k"] ** 2) / 2 for x in g]).mean(0)
    v = torch.stack([x["v"] ** 2 for x in g]).mean(0)
    return (qk / v).sqrt()


def jacobian_scaling_sweeps(
    X: torch.Tensor, n_draws: int, *, d_k: int, d_v: int, sigma: float, rho: float,
    generator: Optional[torch.Generator] = None, device=None,
    scales: Sequence[float] = (0.1, 0.14, 0.2, 0.28, 0.4),
    large_scales: Sequence[float] = (0.4, 0.56, 0.8, 1.0, 1.4, 2.0, 2.8, 4.0),
    width_factors: Sequence[int] = (2, 4, 8, 16), lengths: Sequence[int] = (2, 4, 8, 16, 32),
) -> dict:
    """The Monte-Carlo Jacobian norms (:func:`mean_jacobian_sq_norms`, ``n_draws`` draws, seed 0) of chapter
    "Unequal gradients"'s scaling laws, as the keyword arguments of
    :func:`attnbook.signal.jacobian_figures.scaling_laws`:

    * ``by_scale[mode]``: at ``s X`` for every ``s`` of ``scales``, ``mode`` ``"uniform"`` (at ``W_Q = 0``) or
      ``"random"`` (real random ``W_Q``); ``by_large_scale``: random ``W_Q`` at ``large_scales``;
    * ``by_width``: ``(simulation, formula)`` for tokens of every width ``f n`` (``f`` in ``width_factors``)
      with every cosine exactly ``rho`` (:func:`tokens_with_cosine`), at the fixed ``sigma``;
    * ``by_length``: the same for random tokens of cosine ``rho`` (:func:`correlated_tokens`) of every length.

    The tokens of the width and length sweeps are drawn from ``generator``, in that order."""
    X = _check_tokens(X)
    if X.ndim != 2:
        raise ValueError(f"X must have shape (n_tokens, d), got {tuple(X.shape)}")
    n, d = X.shape

    def draws(Z, **kw):
        return mean_jacobian_sq_norms(Z, n_draws, d_k=d_k, d_v=d_v, sigma=sigma, device=device, **kw)

    def with_formula(Z):
        return draws(Z), uniform_attention_sq_norms(Z, sigma, sigma, sigma, d_v)

    by_scale = {mode: [draws(s * X, uniform=(mode == "uniform")) for s in scales]
                for mode in ("uniform", "random")}
    by_large_scale = [draws(s * X, uniform=False) for s in large_scales]
    widths = [f * n for f in width_factors]
    by_width = [with_formula(tokens_with_cosine(n, w, rho, generator)) for w in widths]
    by_length = [with_formula(correlated_tokens(1, m, d, rho, generator, dtype=X.dtype)[0]) for m in lengths]
    return dict(scales=list(scales), by_scale=by_scale, large_scales=list(large_scales),
                by_large_scale=by_large_scale, widths=widths, by_width=by_width, lengths=list(lengths),
                by_length=by_length)
