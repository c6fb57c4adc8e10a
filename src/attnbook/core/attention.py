"""Multi-head self-attention and the SAN / Transformer block with switches (chapter "Pure attention
loses rank"; used throughout the book).

A head is ``SA_h(X) = P_h X W_{V,h} W_{O,h}``, ``P_h = softmax((X W_{Q,h} + b_Q)(X W_{K,h} + b_K)^T /
(tau sqrt(d_head)))`` (Dong et al. 2021, eq. 1, with the output projection kept separate instead of being
folded into ``W_V``; ``tau`` is the softmax temperature of Noci et al. 2022). The block composes it with
the switches the book turns on and off:

* ``skip``: the skip connection ``X + alpha * SA(X)`` (off: ``alpha * SA(X)``),
* ``mlp``: a two-layer ReLU MLP after attention (with its own skip when ``skip`` is on),
* ``layernorm``: ``None``, ``"post"`` (BERT: ``LN(X + SA(X))``) or ``"pre"`` (``X + SA(LN(X))``),
* ``alpha``: the residual branch scale (Noci et al. propose ``1/sqrt(L)``),
* ``temperature``: the softmax temperature ``tau``,
* head gates: ``forward(..., head_gates=g)`` multiplies head ``h``'s output by ``g[h]`` (Part III).
"""

from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

LAYERNORM_PLACEMENTS = (None, "pre", "post")

#: the architecture variants the book compares (chapter "Pure attention loses rank"), as :class:`Block`
#: switches; colours in ``attnbook.core.plotting.VARIANT_COLORS``
VARIANTS = {
    "SAN": dict(skip=False, mlp=False, layernorm=None),
    "SAN+MLP": dict(skip=False, mlp=True, layernorm=None),
    "SAN+LN": dict(skip=False, mlp=False, layernorm="post"),
    "SAN+skip": dict(skip=True, mlp=False, layernorm=None),
    "Transformer": dict(skip=True, mlp=True, layernorm="post"),
}


def _check_input(x: torch.Tensor, d_model: int) -> None:
    if not isinstance(x, torch.Tensor) or x.ndim != 3 or x.shape[-1] != d_model:
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"expected input of shape (batch, n_tokens, {d_model}), got {shape}")


class MultiHeadSelfAttention(nn.Module):
    """Multi-head self-attention that can return its attention matrices ``P_h`` (chapter "Pure attention loses rank",
    eq. 1).

    ``forward(x)`` returns ``(out, attn)`` where ``attn`` has shape ``(batch, heads, n, n)`` when
    ``return_attention=True`` and is ``None`` otherwise (then the fused
    ``F.scaled_dot_product_attention`` kernel is used). ``dropout``: attention dropout (dropping
    attention weights while training, as fairseq's ``attention_dropout``; chapter "A translation model"'s translation
    recipe); the returned ``attn`` is the matrix before dropout.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_head: Optional[int] = None,
        bias: bool = True,
        temperature: float = 1.0,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        if d_model <= 0 or n_heads <= 0:
            raise ValueError(f"d_model and n_heads must be positive, got {d_model}, {n_heads}")
        if d_head is None:
            if d_model % n_heads:
                raise ValueError(
                    f"d_model={d_model} is not divisible by n_heads={n_heads}; pass d_head explicitly"
                )
            d_head = d_model // n_heads
        if temperature <= 0:
            raise ValueError(f"temperature must be positive, got {temperature}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"attention dropout must be in [0, 1), got {dropout}")
        self.dropout = float(dropout)
        self.d_model, self.n_heads, self.d_head = d_model, n_heads, d_head
        self.temperature = float(temperature)
        self.q = nn.Linear(d_model, n_heads * d_head, bias=bias)
        self.k = nn.Linear(d_model, n_heads * d_head, bias=bias)
        self.v = nn.Linear(d_model, n_heads * d_head, bias=bias)
        self.out = nn.Linear(n_heads * d_head, d_model, bias=bias)

    @property
    def scale(self) -> float:
        """The factor applied to ``Q K^T``: ``1 / (tau sqrt(d_head))``."""
        return 1.0 / (self.temperature * math.sqrt(self.d_head))

    def _split(self, t: torch.Tensor) -> torch.Tensor:
        b, n, _ = t.shape
        return t.view(b, n, self.n_heads, self.d_head).transpose(1, 2)  # (b, h, n, d_head)

    def head_projection(self, which: str) -> tuple[torch.Tensor, torch.Tensor]:
        """Projection ``which`` (``"q"``, ``"k"``, ``"v"`` or ``"out"``) as right multiplications per head,
        detached: ``W`` of shape ``(heads, d_model, d_head)`` and its bias ``(heads, 1, d_head)``, so that head
        ``h`` maps ``X`` to ``X W[h] + b[h]``; for ``"out"``, ``W`` of shape ``(heads, d_head, d_model)`` and the
        bias whole, ``(d_model,)``, since the heads' outputs are summed before it is added. A projection without
        bias gets zeros. Chapters "Path decomposition" (:meth:`head_matrices`) and "Deep bounds"
        (:func:`attnbook.rank.deep_bound.tracked_log10_residuals`)."""
        if which not in ("q", "k", "v", "out"):
            raise ValueError(f"which must be 'q', 'k', 'v' or 'out', got {which!r}")
        lin = getattr(self, which)
        W = lin.weight.detach()
        b = lin.bias.detach() if lin.bias is not None else W.new_zeros(W.shape[0])
        H, dh, dm = self.n_heads, self.d_head, self.d_model
        if which == "out":
            return W.T.reshape(H, dh, dm), b
        return W.T.reshape(dm, H, dh).permute(1, 0, 2), b.reshape(H, 1, dh)

    def head_matrices(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The per-head fold of chapter "Path decomposition": ``W_QK,h = W_Q,h W_K,h^T`` and
        ``W_h = W_V,h W_O,h``, each of shape ``(heads, d_model, d_model)``, detached (biases left out)."""
        (W_q, _), (W_k, _), (W_v, _), (W_o, _) = (self.head_projection(w) for w in ("q", "k", "v", "out"))
        return W_q @ W_k.transpose(-1, -2), W_v @ W_o

    def gate_heads(self, heads: torch.Tensor, head_gates: Optional[torch.Tensor]) -> torch.Tensor:
        """``heads`` (batch, heads, n, d_head) with head ``h`` multiplied by ``head_gates[h]`` (shape
        ``(n_heads,)``, ``(batch, n_heads)``, or ``(batch, n_heads, n)``: one gate per query position, for
        Michel et al.'s per-token importance); unchanged when ``head_gates`` is None (Part III)."""
        if head_gates is None:
            return heads
        g = torch.as_tensor(head_gates, dtype=heads.dtype, device=heads.device)
        b, h, n = heads.shape[:3]
        if g.shape not in ((h,), (b, h), (b, h, n)):
            raise ValueError(
                f"head_gates must have shape ({h},), ({b}, {h}) or ({b}, {h}, {n}), got {tuple(g.shape)}"
            )
        if g.ndim == 1:
            return heads * g.view(1, -1, 1, 1)
        return heads * (g[:, :, None, None] if g.ndim == 2 else g[..., None])

    def forward(
        self,
        x: torch.Tensor,
        return_attention: bool = False,
        head_gates: Optional[torch.Tensor] = None,
        attn_mask: Optional[torch.Tensor] = None,
        context: Optional[torch.Tensor] = None,
    ) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
        """Self-attention of ``x`` (batch, n, d_model), or cross-attention to ``context``.

        ``head_gates``: optional ``(n_heads,)`` or ``(batch, n_heads)`` multipliers of each head's output.
        ``attn_mask``: optional boolean mask broadcastable to ``(batch, heads, n, m)``, True = attend
        (``m = n`` for self-attention; e.g. a causal mask ``torch.ones(n, n).tril().bool()``).
        ``context``: optional ``(batch, m, d_model)`` states that give the keys and values while ``x``
        gives the queries: the encoder-decoder attention of chapter "A translation model" (default: ``context = x``).
        """
        _check_input(x, self.d_model)
        if context is None:
            context = x
        else:
            _check_input(context, self.d_model)
            if context.shape[0] != x.shape[0]:
                raise ValueError(
                    f"context batch size {context.shape[0]} does not match x batch size {x.shape[0]}"
                )
        q, k, v = self._split(self.q(x)), self._split(self.k(context)), self._split(self.v(context))
        attn = None
        # the explicit product also under torch.func.vmap (batched ensembles, attnbook.rank.tasks.circle_ensemble),
        # which has no batching rule for the fused kernel and would run it model by model
        if return_attention or torch._C._functorch.is_batchedtensor(q):
            scores = (q @ k.transpose(-2, -1)) * self.scale
            if attn_mask is not None:
                scores = scores.masked_fill(~attn_mask, float("-inf"))
            attn = scores.softmax(dim=-1)
            dropped = F.dropout(attn, self.dropout, self.training) if self.dropout else attn
            heads = dropped @ v
            attn = attn if return_attention else None
        else:
            heads = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, scale=self.scale,
                                                   dropout_p=self.dropout if self.training else 0.0)
        heads = self.gate_heads(heads, head_gates)
        b, _, n, _ = heads.shape
        merged = heads.transpose(1, 2).reshape(b, n, self.n_heads * self.d_head)
        return self.out(merged), attn


class Block(nn.Module):
    """One SAN / Transformer layer with switches (chapter "Pure attention loses rank"; Noci et al. 2022 for ``alpha``,
    ``tau``).

    With everything off (``skip=False, mlp=False, layernorm=None``) it is one layer of a pure
    self-attention network (SAN). ``forward`` returns ``(y, attn)``.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        *,
        skip: bool = True,
        mlp: bool = True,
        layernorm: Optional[str] = "post",
        alpha: float = 1.0,
        temperature: float = 1.0,
        d_ff: Optional[int] = None,
        bias: bool = True,
        learnable_alpha: bool = False,
    ) -> None:
        super().__init__()
        if layernorm not in LAYERNORM_PLACEMENTS:
            raise ValueError(f"layernorm must be one of {LAYERNORM_PLACEMENTS}, got {layernorm!r}")
        if alpha <= 0:
            raise ValueError(f"alpha must be positive, got {alpha}")
        self.skip, self.layernorm = skip, layernorm
        # learnable_alpha: one trainable residual scale per block, starting at alpha (chapter "Unequal
        # gradients": how the scales move in training)
        self.alpha = nn.Parameter(torch.tensor(float(alpha))) if learnable_alpha else float(alpha)
        self.attn = MultiHeadSelfAttention(d_model, n_heads, bias=bias, temperature=temperature)
        self.mlp = (
            nn.Sequential(
                nn.Linear(d_model, d_ff or 4 * d_model, bias=bias),
                nn.ReLU(),
                nn.Linear(d_ff or 4 * d_model, d_model, bias=bias),
            )
            if mlp
            else None
        )
        self.norm1 = nn.LayerNorm(d_model) if layernorm else None
        self.norm2 = nn.LayerNorm(d_model) if layernorm and mlp else None

    def _sublayer(self, x, fn, norm):
        """``x + alpha * fn(x)`` with the LayerNorm placement and skip switch applied."""
        if self.layernorm == "pre":
            branch = fn(norm(x))
        else:
            branch = fn(x)
        y = self.alpha * branch + (x if self.skip else 0.0)
        if self.layernorm == "post":
            y = norm(y)
        return y

    def forward(
        self,
        x: torch.Tensor,
        return_attention: bool = False,
        head_gates: Optional[torch.Tensor] = None,
        attn_mask: Optional[torch.Tensor] = None,
    ) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
        attn_store = {}

        def attend(h):
            out, attn_store["p"] = self.attn(h, return_attention, head_gates, attn_mask)
            return out

        y = self._sublayer(x, attend, self.norm1)
        if self.mlp is not None:
            y = self._sublayer(y, self.mlp, self.norm2)
        return y, attn_store["p"]


class SelfAttentionNetwork(nn.Module):
    """A stack of ``depth`` :class:`Block` layers (chapter "Pure attention loses rank"). ``forward`` returns the
    output, the hidden states ``[x, x_1, ..., x_L]`` and, when asked, each layer's attention matrices."""

    def __init__(self, depth: int, d_model: int, n_heads: int, **block_kwargs) -> None:
        super().__init__()
        if depth < 1:
            raise ValueError(f"depth must be at least 1, got {depth}")
        self.d_model = d_model
        self.blocks = nn.ModuleList(Block(d_model, n_heads, **block_kwargs) for _ in range(depth))

    def forward(self, x: torch.Tensor, return_attention: bool = False):
        _check_input(x, self.d_model)
        hidden, attns = [x], []
        for block in self.blocks:
            x, attn = block(x, return_attention)
            hidden.append(x)
            attns.append(attn)
        return x, hidden, (attns if return_attention else None)


def gaussian_init_(module: nn.Module, gain: float = 1.0) -> nn.Module:
    """Re-initialise every ``nn.Linear`` in ``module``: weights ``N(0, gain^2 / fan_in)``, biases 0.

    ``gain`` is the "weight scale" of chapter "Pure attention loses rank"'s explorer; ``gain=1`` keeps the variance of a
    vector through a linear map (the Gaussian initialisation of Noci et al. 2022). Returns ``module``.
    """
    if gain <= 0:
        raise ValueError(f"gain must be positive, got {gain}")
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, nn.Linear):
                m.weight.normal_(0.0, gain / math.sqrt(m.in_features))
                if m.bias is not None:
                    m.bias.zero_()
    return module
