"""English-Spanish Bible translation data for chapter 10 ("A translation model and what its heads do") and
chapter 11 (pruning heads): the shipped verse pairs, the joint BPE tokenizer, padded batches, the dev-set
dependency parses, source-token frequencies, greedy translation and BLEU.

Everything is read from ``attnbook/data/translation/``, written by ``scripts/make_translation_data.py``
(King James Version / Reina-Valera 1909, both public domain; see the README there).
"""

from __future__ import annotations

import gzip
import json
import random
from functools import lru_cache
from pathlib import Path
from typing import Iterator, Optional, Sequence

import torch

DATA_DIR = Path(__file__).resolve().parents[1] / "data" / "translation"
CHECKPOINT = DATA_DIR / "model_quick.safetensors"
SPLITS = ("train", "dev", "test")
PAD, BOS, EOS = 0, 1, 2


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")


@lru_cache(maxsize=None)
def _all_pairs() -> tuple:
    path = DATA_DIR / "pairs.tsv.gz"
    if not path.exists():
        raise ValueError(f"{path} is missing; run scripts/make_translation_data.py")
    rows = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        next(f)
        for line in f:
            split, key, en, es = line.rstrip("\n").split("\t")
            rows.append((split, key, en, es))
    return tuple(rows)


def load_pairs(split: str, with_keys: bool = False) -> list:
    """The ``(english, spanish)`` verse pairs of ``split`` (``"train"``, ``"dev"`` or ``"test"``), in the
    shipped order; ``with_keys=True`` gives ``(key, english, spanish)`` (chapter 10)."""
    _check_split(split)
    return [(k, en, es) if with_keys else (en, es) for s, k, en, es in _all_pairs() if s == split]


@lru_cache(maxsize=None)
def load_tokenizer():
    """The joint English-Spanish BPE tokenizer (``tokenizers.Tokenizer``, 8000 tokens; ids 0-3 are
    ``<pad> <s> </s> <unk>``) (chapter 10)."""
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(DATA_DIR / "tokenizer.json"))


def encode(sentences: Sequence[str], max_len: int = 128, bos: bool = False) -> list[list[int]]:
    """Token ids of each sentence, ending in ``</s>`` (and starting with ``<s>`` when ``bos``), cut to
    ``max_len`` tokens (chapter 10)."""
    if isinstance(sentences, str):
        raise ValueError("encode expects a list of sentences, got a single string")
    if max_len < 3:
        raise ValueError(f"max_len must be at least 3, got {max_len}")
    out = []
    for enc in load_tokenizer().encode_batch(list(sentences)):
        ids = enc.ids[: max_len - 1 - int(bos)]
        out.append(([BOS] if bos else []) + ids + [EOS])
    return out


def pad(seqs: Sequence[Sequence[int]]) -> torch.Tensor:
    """Right-pad id lists with ``<pad>`` (0) into a ``(batch, max length)`` long tensor (chapter 10)."""
    if not seqs:
        raise ValueError("pad needs at least one sequence")
    n = max(len(s) for s in seqs)
    out = torch.full((len(seqs), n), PAD, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.as_tensor(list(s), dtype=torch.long)
    return out


def decode(ids: Sequence[Sequence[int]]) -> list[str]:
    """Detokenised text of each id list (special tokens dropped) (chapter 10)."""
    return load_tokenizer().decode_batch([list(i) for i in ids])


class BatchStream:
    """Length-bucketed, shuffled training batches ``(src, tgt)`` of padded ids, epoch after epoch
    (chapter 10). ``stream(step)`` returns batch number ``step`` (so it is a ``batch_fn`` for
    :func:`attnbook.train.train`); the order depends only on ``seed``."""

    def __init__(self, pairs: Sequence[tuple[str, str]], batch_size: int = 64, max_len: int = 128,
                 seed: int = 0) -> None:
        if batch_size < 1 or not pairs:
            raise ValueError(f"need a positive batch_size and at least one pair, got {batch_size}, {len(pairs)}")
        self.src = encode([p[0] for p in pairs], max_len)
        self.tgt = encode([p[1] for p in pairs], max_len, bos=True)
        self.batch_size, self.seed = batch_size, seed
        self._epoch, self._batches = -1, []
        self.batches_per_epoch = (len(self.src) + batch_size - 1) // batch_size

    def _make_epoch(self, epoch: int) -> list[list[int]]:
        rng = random.Random(self.seed * 100003 + epoch)
        idx = list(range(len(self.src)))
        rng.shuffle(idx)
        chunk = self.batch_size * 50
        batches = []
        for c in range(0, len(idx), chunk):
            part = sorted(idx[c: c + chunk], key=lambda i: len(self.src[i]) + len(self.tgt[i]))
            batches += [part[b: b + self.batch_size] for b in range(0, len(part), self.batch_size)]
        rng.shuffle(batches)
        return batches

    def __call__(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        epoch, i = divmod(step, self.batches_per_epoch)
        if epoch != self._epoch:
            self._epoch, self._batches = epoch, self._make_epoch(epoch)
        b = self._batches[i]
        return pad([self.src[j] for j in b]), pad([self.tgt[j] for j in b])


@torch.no_grad()
def translate(model, sentences: Sequence[str], batch_size: int = 64, max_len: int = 128,
              head_gates=None) -> list[str]:
    """Greedy translations of English ``sentences`` by a :class:`attnbook.seq2seq.Seq2SeqTransformer`
    (chapter 10). Sentences are decoded in length-sorted batches; the output keeps the input order."""
    if isinstance(sentences, str):
        raise ValueError("translate expects a list of sentences, got a single string")
    model.eval()
    dev = next(model.parameters()).device
    src = encode(sentences, max_len)
    order = sorted(range(len(src)), key=lambda i: len(src[i]))
    out: list[Optional[str]] = [None] * len(src)
    for b in range(0, len(order), batch_size):
        idx = order[b: b + batch_size]
        x = pad([src[i] for i in idx]).to(dev)
        longest = max(len(src[i]) for i in idx)
        hyp = model.greedy_decode(x, max_new_tokens=int(1.6 * longest) + 10, head_gates=head_gates)
        for i, text in zip(idx, decode(hyp)):
            out[i] = text
    return out  # type: ignore[return-value]


def bleu(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """Corpus BLEU (sacrebleu, default 13a tokenisation, detokenised text) (chapter 10)."""
    import sacrebleu

    if len(hypotheses) != len(references) or not hypotheses:
        raise ValueError(f"need equally many hypotheses and references, got {len(hypotheses)}, {len(references)}")
    return float(sacrebleu.corpus_bleu(list(hypotheses), [list(references)]).score)


def load_dev_parses() -> list[dict]:
    """spaCy silver parses of the English dev sentences, in dev order (chapter 10): for each sentence
    ``words``, ``word_of_token`` (the word index of each source BPE token, -1 for a bare word-start
    marker) and ``arcs`` ``[dependent, head, label]`` (ClearNLP labels, e.g. nsubj, dobj, amod, advmod)."""
    with gzip.open(DATA_DIR / "dev_parses.json.gz", "rt", encoding="utf-8") as f:
        return json.load(f)


def source_token_counts() -> torch.Tensor:
    """How often each BPE token occurs on the English side of the training split, ``(vocab,)`` (chapter 10)."""
    counts = json.loads((DATA_DIR / "src_token_counts.json").read_text())
    return torch.tensor([counts[str(i)] for i in range(len(counts))], dtype=torch.long)


def load_translation_model(path=None, device=None):
    """The shipped quick model (``model_quick.safetensors``) or ``path``: ``(model, meta)`` (chapter 10)."""
    from ..seq2seq import load_model

    return load_model(CHECKPOINT if path is None else path, device)


def train_model(model, batches, *, steps: int, lr: float, weight_decay: float, warmup: float,
                label_smoothing: float, seed: int, head_gates=None, device=None, **train_kwargs) -> dict:
    """Train a translation model with the shipped checkpoint's recipe (chapter 10; chapter 11 trains pruned
    shapes from scratch with it): :func:`attnbook.train.train` with AdamW, linear warm-up then cosine decay,
    gradient clipping at 1.0, and label-smoothed cross-entropy. ``head_gates`` (``{kind: (layers, heads)}``)
    fixes head masks for the whole training. Other keyword arguments go to ``train`` (``eval_fn``,
    ``eval_every``, ``progress``, ``desc``). Returns its history."""
    from ..train import train

    def loss_fn(m, batch):
        src, tgt = batch
        return m.loss(src, tgt, head_gates=head_gates, label_smoothing=label_smoothing)

    return train(model, batches, loss_fn, steps=steps, lr=lr, optimizer="adamw", weight_decay=weight_decay,
                 warmup=warmup, schedule="cosine", clip=1.0, seed=seed, device=device, **train_kwargs)
