"""Sentence embeddings of all-MiniLM-L6-v2 and the task losses chapter "Pruning heads" prunes it with:
mean pooling as sentence-transformers does, the in-batch contrastive loss it was trained with, and the
word-dropout positives of that loss.
"""

from __future__ import annotations

import random
from typing import Sequence

import torch


def mean_pooled(model, tokenizer, sentences: Sequence[str], *, max_length: int = 32) -> torch.Tensor:
    """Sentence embeddings by mean pooling over real tokens, as sentence-transformers does for
    all-MiniLM-L6-v2 (chapter "Pruning heads", "Pruning a pretrained model"). Returns ``(len(sentences), hidden)``;
    gradients flow (wrap in ``torch.no_grad()`` when not needed)."""
    if isinstance(sentences, str) or not sentences or not all(isinstance(s, str) for s in sentences):
        raise ValueError("sentences must be a non-empty list of strings")
    if max_length < 2:
        raise ValueError(f"max_length must be at least 2, got {max_length}")
    enc = tokenizer(list(sentences), padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    enc = {k: v.to(next(model.parameters()).device) for k, v in enc.items()}
    hidden = model(**enc).last_hidden_state
    mask = enc["attention_mask"][..., None].to(hidden.dtype)
    return (hidden * mask).sum(1) / mask.sum(1)


def drop_words(sentences: Sequence[str], p: float, seed: int = 0) -> list[str]:
    """Each sentence with every word dropped independently with probability ``p`` (at least one word
    kept): the positives of the contrastive task loss used for Michel importance on MiniLM (chapter "Pruning heads")."""
    if not 0 <= p < 1:
        raise ValueError(f"p must be in [0, 1), got {p}")
    rng = random.Random(seed)
    out = []
    for s in sentences:
        words = s.split()
        kept = [w for w in words if rng.random() >= p] or words[:1]
        out.append(" ".join(kept))
    return out


def contrastive_loss(anchors: torch.Tensor, positives: torch.Tensor, scale: float = 20.0) -> torch.Tensor:
    """In-batch contrastive loss of sentence-transformers' ``MultipleNegativesRankingLoss`` (the loss
    all-MiniLM-L6-v2 was trained with): cross-entropy of ``scale * cos(a_i, p_j)`` with target ``j = i``
    (chapter "Pruning heads", the task loss ``L`` of Michel importance on MiniLM)."""
    if anchors.ndim != 2 or anchors.shape != positives.shape or anchors.shape[0] < 2:
        raise ValueError(
            f"anchors and positives must both be (batch >= 2, dim), got {tuple(anchors.shape)} and {tuple(positives.shape)}"
        )
    sims = torch.nn.functional.normalize(anchors, dim=-1) @ torch.nn.functional.normalize(positives, dim=-1).T
    return torch.nn.functional.cross_entropy(scale * sims, torch.arange(anchors.shape[0], device=anchors.device))


def embedding_similarity(pruned: torch.Tensor, full: torch.Tensor) -> float:
    """Mean cosine similarity between pruned and unpruned sentence embeddings (1 = unchanged) (chapter "Pruning
    heads")."""
    if pruned.shape != full.shape or pruned.ndim != 2:
        raise ValueError(f"expected two (n, dim) tensors of the same shape, got {tuple(pruned.shape)} and {tuple(full.shape)}")
    return float(torch.nn.functional.cosine_similarity(pruned, full, dim=-1).mean())
