"""Path decomposition of self-attention networks (chapter "Path decomposition", Dong et al. 2021, Thm 2.1).

An ``L``-layer, ``H``-head self-attention network (SAN) without skip connections is

    SAN(X) = sum_{path in [H]^L} P_path X W_path + 1 b^T,                       (eq. path-sum)

with ``P_path = P^L_{h_L} ... P^1_{h_1}`` (row-stochastic) and ``W_path = W^1_{h_1} ... W^L_{h_L}``, where
``W^l_h = W^l_{V,h} W^l_{O,h}`` is head ``h``'s value matrix with its slice of the output projection
folded in (eq. fold). With skip connections a layer may also be skipped (identity ``P`` and ``W``), so
there are ``(H + 1)^L`` paths, ``C(L, k) H^k`` of them of length ``k`` (eq. path-count).

Conventions used throughout this module:

* ``attn``: attention matrices of shape ``(L, H, n, n)`` (one input sequence), ``attn[l, h] = P^{l+1}_h``.
* ``values``: folded value matrices of shape ``(L, H, d, d)``, ``values[l, h] = W^{l+1}_h`` (row-vector
  convention: the head's output is ``P X W``).
* ``biases``: per-layer bias rows of shape ``(L, d)``, ``biases[l] = c^{l+1}``, so that layer ``l`` adds
  ``1 c^T`` (value biases pushed through the output projection, plus the output projection's bias).
* ``paths``: integer tensor of shape ``(n_paths, L)``; entry ``paths[p, l]`` is the head that path ``p``
  takes in layer ``l`` (0-based), or :data:`SKIP` (``-1``) when the path skips layer ``l`` (only with
  skip connections). The *length* of a path is the number of layers it does not skip.
"""

from __future__ import annotations

import math
from typing import NamedTuple, Optional

import torch

from attnbook.core.attention import SelfAttentionNetwork

#: the head index meaning "this path skips the layer" (identity attention and identity value map)
SKIP = -1


class PathDecomposition(NamedTuple):
    """Result of :func:`path_decomposition`: ``terms.sum(0) + bias`` (broadcast over rows) is the output."""

    paths: torch.Tensor  #: (n_paths, L) head per layer, SKIP for a skipped layer
    terms: torch.Tensor  #: (n_paths, n, d): P_path X W_path
    bias: torch.Tensor  #: (d,): the bias row b, the output's bias term is 1 b^T

    def total(self) -> torch.Tensor:
        """``sum_path P_path X W_path + 1 b^T``: the network's output (eq. path-sum)."""
        return self.terms.sum(0) + self.bias


def _check_attn(attn: torch.Tensor) -> torch.Tensor:
    if not isinstance(attn, torch.Tensor) or attn.ndim != 4 or attn.shape[-1] != attn.shape[-2]:
        shape = tuple(attn.shape) if isinstance(attn, torch.Tensor) else type(attn).__name__
        raise ValueError(f"attn must have shape (L, H, n, n), got {shape}")
    return attn


def _check_paths(paths: torch.Tensor, L: int, H: int) -> torch.Tensor:
    paths = torch.as_tensor(paths)
    if paths.ndim != 2 or paths.shape[1] != L or paths.dtype.is_floating_point:
        raise ValueError(f"paths must be an integer tensor of shape (n_paths, {L}), got {tuple(paths.shape)}")
    if paths.numel() and (paths.min() < SKIP or paths.max() >= H):
        raise ValueError(f"path entries must be head indices in 0..{H - 1} or SKIP={SKIP}")
    return paths.long()


def _gather_with_identity(mats: torch.Tensor, paths: torch.Tensor, l: int) -> torch.Tensor:
    """``mats[l, paths[:, l]]`` with the identity where the path skips layer ``l``: (n_paths, k, k)."""
    idx = paths[:, l]
    picked = mats[l, idx.clamp(min=0)]
    eye = torch.eye(mats.shape[-1], dtype=mats.dtype, device=mats.device)
    return torch.where((idx == SKIP)[:, None, None], eye, picked)


def path_products(attn: torch.Tensor, paths: torch.Tensor) -> torch.Tensor:
    """Products of attention matrices along paths, ``P_path = P^L_{h_L} ... P^1_{h_1}`` (chapter "Path
    decomposition", eq. P-path), batched over paths: one batched matmul per layer, no loop over paths.

    ``attn``: (L, H, n, n). ``paths``: (n_paths, L) head indices, ``SKIP`` (-1) = skip the layer (identity).
    Returns (n_paths, n, n).
    """
    attn = _check_attn(attn)
    L, H, n, _ = attn.shape
    paths = _check_paths(paths, L, H).to(attn.device)
    out = torch.eye(n, dtype=attn.dtype, device=attn.device).expand(paths.shape[0], n, n)
    for l in range(L):  # later layers multiply from the left
        out = _gather_with_identity(attn, paths, l) @ out
    return out


def value_products(values: torch.Tensor, paths: torch.Tensor) -> torch.Tensor:
    """Products of folded value matrices along paths, ``W_path = W^1_{h_1} ... W^L_{h_L}`` (chapter "Path
    decomposition", eq. W-path). ``values``: (L, H, d, d); returns (n_paths, d, d)."""
    if not isinstance(values, torch.Tensor) or values.ndim != 4 or values.shape[-1] != values.shape[-2]:
        shape = tuple(values.shape) if isinstance(values, torch.Tensor) else type(values).__name__
        raise ValueError(f"values must have shape (L, H, d, d), got {shape}")
    L, H, d, _ = values.shape
    paths = _check_paths(paths, L, H).to(values.device)
    out = torch.eye(d, dtype=values.dtype, device=values.device).expand(paths.shape[0], d, d)
    for l in range(L):  # later layers multiply from the right
        out = out @ _gather_with_identity(values, paths, l)
    return out


def all_paths(L: int, H: int, skip: bool = False) -> torch.Tensor:
    """Every path of an ``L``-layer, ``H``-head SAN as an (n_paths, L) tensor (chapter "Path
    decomposition"): ``H^L`` paths without skips, ``(H+1)^L`` with skips (``SKIP`` = -1 marks a skip).
    Ordered lexicographically with layer 1 the most significant digit."""
    if not (isinstance(L, int) and isinstance(H, int)) or L < 1 or H < 1:
        raise ValueError(f"L and H must be positive ints, got L={L!r}, H={H!r}")
    choices = torch.arange(SKIP if skip else 0, H)
    return torch.cartesian_prod(*([choices] * L)).reshape(-1, L)


def path_length_counts(L: int, H: int) -> list[int]:
    """Number of paths of each length ``k = 0..L`` with skip connections, ``C(L, k) H^k`` (chapter "Path
    decomposition", eq. path-count). Exact Python ints; they sum to ``(H + 1)^L``."""
    if not (isinstance(L, int) and isinstance(H, int)) or L < 1 or H < 1:
        raise ValueError(f"L and H must be positive ints, got L={L!r}, H={H!r}")
    return [math.comb(L, k) * H**k for k in range(L + 1)]


def path_length_fractions(L: int, H: int) -> list[float]:
    """Share of the ``(H + 1)^L`` paths (with skip connections) that have length ``k = 0..L``,
    ``C(L, k) H^k / (H + 1)^L`` (chapter "Path decomposition", eq. path-count), each exact count divided
    once so that equal counts give equal shares. They sum to 1; their mean is ``L H / (H + 1)``."""
    total = (H + 1) ** L
    return [c / total for c in path_length_counts(L, H)]


def path_decomposition(
    attn: torch.Tensor,
    values: torch.Tensor,
    X: torch.Tensor,
    biases: Optional[torch.Tensor] = None,
    skip: bool = False,
) -> PathDecomposition:
    """Enumerate every path and return its term ``P_path X W_path`` and the bias row ``b`` (chapter "Path
    decomposition", Thm path-decomposition, eq. path-sum).

    Without skips the network is ``X^l = sum_h P^l_h X^{l-1} W^l_h + 1 c^{l T}``; with skips
    ``X^l = X^{l-1} + sum_h P^l_h X^{l-1} W^l_h + 1 c^{l T}``. Since every ``P`` is row-stochastic,
    ``P 1 = 1``, so each layer's bias row is only multiplied on the right by the later layers' summed
    value maps: ``b^T = sum_l c^{l T} M^{l+1} ... M^L`` with ``M^m = sum_h W^m_h`` (``+ I`` with skips).

    All ``H^L`` (or ``(H+1)^L``) paths are computed together: each layer extends every partial path by
    every choice in one batched matmul, so the work is ``L`` batched matmuls, not a loop over paths.
    Memory grows as ``n_paths (n^2 + n d)``: keep ``H^L`` in the tens of thousands.

    Shapes: ``attn`` (L, H, n, n), ``values`` (L, H, d, d), ``X`` (n, d), ``biases`` (L, d) or None.
    """
    attn = _check_attn(attn)
    L, H, n, _ = attn.shape
    if not isinstance(values, torch.Tensor) or values.shape[:2] != (L, H) or values.ndim != 4:
        raise ValueError(f"values must have shape ({L}, {H}, d, d), got {tuple(getattr(values, 'shape', ()))}")
    d = values.shape[-1]
    if values.shape[-2] != d:
        raise ValueError(f"values must be square per head (L, H, d, d), got {tuple(values.shape)}")
    if not isinstance(X, torch.Tensor) or X.shape != (n, d):
        raise ValueError(f"X must have shape ({n}, {d}), got {tuple(getattr(X, 'shape', ()))}")
    if biases is not None and (not isinstance(biases, torch.Tensor) or biases.shape != (L, d)):
        raise ValueError(f"biases must have shape ({L}, {d}) or be None, got {tuple(getattr(biases, 'shape', ()))}")
    n_choices = H + 1 if skip else H
    eye_n = torch.eye(n, dtype=attn.dtype, device=attn.device)
    eye_d = torch.eye(d, dtype=values.dtype, device=values.device)
    if skip:  # choice 0 = skip (identity), choices 1..H = heads 0..H-1
        P_all = torch.cat([eye_n.expand(L, 1, n, n), attn], dim=1)
        W_all = torch.cat([eye_d.expand(L, 1, d, d), values], dim=1)
    else:
        P_all, W_all = attn, values
    # terms[p] = P_path X W_path for the partial paths through layers 1..l; start with X itself.
    terms = X.unsqueeze(0)
    for l in range(L):
        # (C, 1, n, n) @ (1, p, n, d) @ (C, 1, d, d) -> (C, p, n, d): the new choice is the most significant
        # digit, so after L layers the order is lexicographic in (h_L, ..., h_1); reorder below.
        terms = (P_all[l][:, None] @ terms[None] @ W_all[l][:, None]).reshape(-1, n, d)
    # index p = sum_l c_l * C^l (layer l's choice c_l is digit l, least significant = layer 1)
    digits = torch.cartesian_prod(*([torch.arange(n_choices)] * L)).reshape(-1, L)  # layer 1 most significant
    weights = torch.tensor([n_choices**l for l in range(L)])
    order = (digits * weights).sum(1)
    terms = terms[order.to(terms.device)]
    paths = digits - 1 if skip else digits
    bias = torch.zeros(d, dtype=values.dtype, device=values.device)
    if biases is not None:
        for l in range(L):
            bias = bias @ W_all[l].sum(0) + biases[l]
    return PathDecomposition(paths=paths, terms=terms, bias=bias)


def san_parameters(model, X: torch.Tensor):
    """Read off a :class:`attnbook.core.attention.SelfAttentionNetwork` what :func:`path_decomposition` needs
    (chapter "Path decomposition", eq. fold): run it on ``X`` (n, d) or (1, n, d) and return
    ``(attn, values, biases, skip, output)`` with ``attn`` (L, H, n, n), ``values[l, h] = alpha W_{V,h} W_{O,h}``
    (L, H, d, d), ``biases[l] = alpha (sum_h b_{V,h} W_{O,h} + b_O)`` (L, d), and the network's output (n, d).

    The network must be a SAN in the sense of the theorem: no MLP and no LayerNorm (skips are allowed).
    """
    if not isinstance(model, SelfAttentionNetwork):
        raise ValueError(f"model must be an attnbook.core.attention.SelfAttentionNetwork, got {type(model).__name__}")
    if X.ndim == 2:
        X = X.unsqueeze(0)
    if X.ndim != 3 or X.shape[0] != 1:
        raise ValueError(f"X must have shape (n, d) or (1, n, d), got {tuple(X.shape)}")
    skips = {b.skip for b in model.blocks}
    if any(b.mlp is not None or b.layernorm is not None for b in model.blocks) or len(skips) != 1:
        raise ValueError("the path decomposition needs blocks without MLP and LayerNorm, all with the same skip")
    with torch.no_grad():
        out, _, attns = model(X, return_attention=True)
        vals, bs = [], []
        for block in model.blocks:
            (Wv, bv), (Wo, bo) = (block.attn.head_projection(w) for w in ("v", "out"))
            vals.append(block.alpha * (Wv @ Wo))  # (H, d, d)
            bs.append(block.alpha * ((bv @ Wo).sum(0)[0] + bo))  # the value and output biases
    attn = torch.stack([p[0] for p in attns])
    return attn, torch.stack(vals), torch.stack(bs), skips.pop(), out[0]


def sample_paths(
    L: int, H: int, length: int, n_paths: int, generator: Optional[torch.Generator] = None
) -> torch.Tensor:
    """Sample ``n_paths`` paths of the given ``length`` like Dong et al. (2021, Sec. 5.2; chapter "Path
    decomposition"): for each layer draw a head uniformly, then choose ``L - length`` layers uniformly
    without replacement and mark them ``SKIP``. Returns an (n_paths, L) long tensor."""
    if not (isinstance(L, int) and isinstance(H, int)) or L < 1 or H < 1:
        raise ValueError(f"L and H must be positive ints, got L={L!r}, H={H!r}")
    if not isinstance(length, int) or not 0 <= length <= L:
        raise ValueError(f"length must be an int in 0..{L}, got {length!r}")
    if not isinstance(n_paths, int) or n_paths < 1:
        raise ValueError(f"n_paths must be a positive int, got {n_paths!r}")
    heads = torch.randint(0, H, (n_paths, L), generator=generator)
    order = torch.rand(n_paths, L, generator=generator).argsort(dim=1)
    skipped = torch.zeros(n_paths, L, dtype=torch.bool)
    skipped.scatter_(1, order[:, : L - length], True)
    return torch.where(skipped, torch.full_like(heads, SKIP), heads)


def rank1_distance(M: torch.Tensor, norm: str = "fro") -> torch.Tensor:
    """Relative distance of ``M`` to its best rank-one approximation, by SVD, batched over leading dims
    (chapter "Path decomposition", eq. rank1-distance): ``||M - M_1|| / ||M||`` with ``M_1 = s_1 u_1 v_1^T``.

    ``norm="fro"``: ``sqrt(sum_{i>=2} s_i^2 / sum_i s_i^2)``; ``norm="spectral"``: ``s_2 / s_1``.

    The singular values of CUDA matrices larger than 32 x 32 are computed on the CPU and the distances returned
    on ``M``'s device: CUDA's batched SVD solves such matrices one solver call at a time (pytorch/pytorch
    #41306, #86234), which made chapter "Path decomposition"'s 6000 products of 128 x 128 take 148 s on an H200;
    LAPACK on the CPU takes a few seconds.
    """
    if not isinstance(M, torch.Tensor) or M.ndim < 2:
        raise ValueError(f"M must be a tensor of shape (..., m, n), got {getattr(M, 'shape', type(M).__name__)}")
    if M.is_cuda and min(M.shape[-2:]) > 32:
        s = torch.linalg.svdvals(M.cpu()).to(M.device)
    else:
        s = torch.linalg.svdvals(M)
    if norm == "fro":
        return torch.sqrt((s[..., 1:] ** 2).sum(-1) / (s**2).sum(-1))
    if norm == "spectral":
        return (s[..., 1] if s.shape[-1] > 1 else torch.zeros_like(s[..., 0])) / s[..., 0]
    raise ValueError(f"norm must be 'fro' or 'spectral', got {norm!r}")


def rank1_distance_by_length(
    attn: torch.Tensor, n_paths: int, generator: Optional[torch.Generator] = None
) -> dict[int, torch.Tensor]:
    """Distance to rank one of products of real attention matrices along sampled paths, by path length
    (chapter "Rank collapse in pretrained transformers", after the path experiments of Dong et al. 2021).

    ``attn``: (sequences, L, H, n, n) attention of ``S`` sequences. For each length ``k = 1..L``,
    ``n_paths`` paths are drawn with :func:`sample_paths`, each on a sequence drawn uniformly; returns
    ``{k: (n_paths,) rank1_distance of each path's product}`` (Frobenius norm), grouped by sequence."""
    if not isinstance(attn, torch.Tensor) or attn.ndim != 5:
        raise ValueError(f"attn must be (sequences, L, H, n, n), got {getattr(attn, 'shape', type(attn).__name__)}")
    S, L, H = attn.shape[:3]
    out = {}
    for k in range(1, L + 1):
        paths = sample_paths(L, H, k, n_paths, generator=generator)
        seqs = torch.randint(0, S, (n_paths,), generator=generator)
        P = torch.cat([path_products(attn[s], paths[seqs == s]) for s in range(S)])
        out[k] = rank1_distance(P)
    return out


# --- Path-restricted forward (chapter "Path effectiveness"), owned by the path-effectiveness chapter ---


def head_output(
    attn, x: torch.Tensor, head: int, key_mask: Optional[torch.Tensor] = None
) -> torch.Tensor:
    """One head of a :class:`attnbook.core.attention.MultiHeadSelfAttention`, through its slice of the output
    projection: ``P_h X W_{V,h} W_{O,h} + 1 b^T`` (chapter "Path effectiveness", eq. path-step; ``b``
    collects the value bias pushed through ``W_{O,h}`` and the output bias).

    ``x``: (batch, n, d_model); ``key_mask``: optional (batch, n) bool, True for real tokens.
    """
    H, dh = attn.n_heads, attn.d_head
    if not isinstance(head, int) or not 0 <= head < H:
        raise ValueError(f"head must be an int in 0..{H - 1}, got {head!r}")
    if not isinstance(x, torch.Tensor) or x.ndim != 3 or x.shape[-1] != attn.d_model:
        raise ValueError(f"x must have shape (batch, n, {attn.d_model}), got {getattr(x, 'shape', x)}")
    sl = slice(head * dh, (head + 1) * dh)

    def proj(lin):
        b = lin.bias[sl] if lin.bias is not None else None
        return torch.nn.functional.linear(x, lin.weight[sl], b)

    q, k, v = proj(attn.q), proj(attn.k), proj(attn.v)
    scores = (q @ k.transpose(-2, -1)) * attn.scale
    if key_mask is not None:
        scores = scores.masked_fill(~key_mask[:, None, :], float("-inf"))
    heads = scores.softmax(-1) @ v
    return torch.nn.functional.linear(heads, attn.out.weight[:, sl], attn.out.bias)


def path_forward(
    blocks, x: torch.Tensor, paths: torch.Tensor, key_mask: Optional[torch.Tensor] = None, *,
    by_head: Optional[bool] = None, max_elements: int = 2**26,
) -> torch.Tensor:
    """Run ``x`` through sampled paths only and sum them (chapter "Path effectiveness", eq. path-forward).

    Like the official code of Dong et al. (2021, Sec. 5.2): each path starts from the embedding ``x``; on a
    layer it takes, it applies that layer's head (:func:`head_output`) and a LayerNorm without affine
    parameters, and no skip connection; on a layer it skips, the identity. The paths' outputs are summed
    and normalised by a LayerNorm without affine parameters. ``blocks``: the model's
    :class:`attnbook.core.attention.Block` layers; ``paths``: (n_paths, L) as from :func:`sample_paths`.
    Returns (batch, n, d).

    ``by_head`` (default: when ``x`` is on a GPU): the paths that take the same head of a layer go through
    it as one batch, so a layer costs one call per head rather than one per path (20 paths: ``L H`` calls
    instead of about ``20 L``, and a GPU pays for each call's launches). Paths are taken ``max_elements //
    x.numel()`` at a time to bound memory and summed in their order. The CPU runs paths one by one: there
    the batches' copies cost more than the calls (chapter "Path effectiveness"'s quick paths and probes:
    1.24x slower batched, measured with ``farm-bench``). Both give the same output to float rounding.
    """
    L = len(blocks)
    if L < 1:
        raise ValueError("blocks must hold at least one layer")
    H = blocks[0].attn.n_heads
    paths = _check_paths(torch.as_tensor(paths), L, H).cpu()
    d = x.shape[-1]
    total = torch.zeros_like(x)
    if by_head is None:
        by_head = x.device.type == "cuda"
    if not by_head:
        for path in paths.tolist():
            h = x
            for layer, head in enumerate(path):
                if head != SKIP:
                    h = torch.nn.functional.layer_norm(head_output(blocks[layer].attn, h, head, key_mask), (d,))
            total = total + h
        return torch.nn.functional.layer_norm(total, (d,))
    chunk = max(1, max_elements // max(x.numel(), 1))
    for start in range(0, len(paths), chunk):
        part = paths[start:start + chunk]
        h = x.expand(len(part), *x.shape).clone()  # (paths, batch, n, d)
        for layer in range(L):
            for head in range(H):
                rows = (part[:, layer] == head).nonzero().flatten()
                if len(rows) == 0:
                    continue
                mask = None if key_mask is None else key_mask.repeat(len(rows), 1)
                out = head_output(blocks[layer].attn, h[rows].flatten(0, 1), head, mask)
                h[rows] = torch.nn.functional.layer_norm(out, (d,)).view(len(rows), *x.shape)
        for one in h:
            total = total + one
    return torch.nn.functional.layer_norm(total, (d,))
