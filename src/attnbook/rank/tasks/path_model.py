"""The token classifier the path-effectiveness tasks train (chapter "Path effectiveness", Dong et al. 2021,
Sec. 5.2), which can run its full stack or only chosen paths through it.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from attnbook.core.attention import Block
from attnbook.rank.paths import path_forward


class PathSAN(nn.Module):
    """The token classifier of the path-effectiveness experiments (chapter "Path effectiveness").

    Embedding (token ids through ``nn.Embedding`` when ``vocab_size`` is given, else a
    ``Linear(in_features, d)``, or with ``embed_mlp`` the official convex-hull embedding ``--ffn2``,
    ``Linear(in_features, d)``, GELU, ``Linear(d, d)``; plus learned positions when ``n_positions > 0``),
    a LayerNorm, ``depth``
    post-LN attention layers ``LN(X + SA(X))`` without MLP (:class:`attnbook.core.attention.Block`), and a linear
    classifier per token. ``forward(inputs, paths=None, key_mask=None)`` runs the full model, or only the
    given paths (:func:`path_forward`).
    """

    def __init__(
        self,
        n_classes: int,
        d_model: int,
        n_heads: int,
        depth: int,
        *,
        vocab_size: Optional[int] = None,
        in_features: Optional[int] = None,
        n_positions: int = 0,
        embed_mlp: bool = False,
    ) -> None:
        super().__init__()
        if (vocab_size is None) == (in_features is None):
            raise ValueError("give exactly one of vocab_size (token ids) or in_features (vectors)")
        if n_classes < 2 or depth < 1 or n_positions < 0:
            raise ValueError(
                f"need n_classes >= 2, depth >= 1, n_positions >= 0; got {n_classes}, {depth}, {n_positions}"
            )
        if embed_mlp and in_features is None:
            raise ValueError("embed_mlp embeds vectors (in_features), not token ids")
        if vocab_size:
            self.embed = nn.Embedding(vocab_size, d_model)
        elif embed_mlp:
            self.embed = nn.Sequential(nn.Linear(in_features, d_model), nn.GELU(), nn.Linear(d_model, d_model))
        else:
            self.embed = nn.Linear(in_features, d_model)
        self.pos = nn.Embedding(n_positions, d_model) if n_positions else None
        self.norm = nn.LayerNorm(d_model)
        self.blocks = nn.ModuleList(
            Block(d_model, n_heads, skip=True, mlp=False, layernorm="post") for _ in range(depth)
        )
        self.classifier = nn.Linear(d_model, n_classes)
        self.depth, self.n_heads = depth, n_heads

    def embed_inputs(self, inputs: torch.Tensor) -> torch.Tensor:
        """The layer-0 representation ``X``: embedding (+ positions), then LayerNorm."""
        x = self.embed(inputs)
        if self.pos is not None:
            n = x.shape[1]
            if n > self.pos.num_embeddings:
                raise ValueError(f"sequence length {n} exceeds n_positions={self.pos.num_embeddings}")
            x = x + self.pos.weight[:n]
        return self.norm(x)

    def forward(
        self,
        inputs: torch.Tensor,
        paths: Optional[torch.Tensor] = None,
        key_mask: Optional[torch.Tensor] = None,
    ) -> torch.Tensor:
        x = self.embed_inputs(inputs)
        if paths is not None:
            return self.classifier(path_forward(self.blocks, x, paths, key_mask))
        mask = None if key_mask is None else key_mask[:, None, None, :]
        for block in self.blocks:
            x, _ = block(x, attn_mask=mask)
        return self.classifier(x)
