"""What attention heads do (chapter "A translation model"; Voita et al. 2019).

Quantities per head, computed from attention matrices ``P`` of shape ``(batch, heads, queries, keys)``
(one tensor per layer, as :class:`attnbook.seq2seq.Seq2SeqTransformer` returns them) and boolean masks
of real (non-pad) queries and keys:

* confidence (Voita et al., sec. 4.1): the mean over query tokens of ``max_k P[q, k]``, excluding EOS
  (neither an EOS query nor an EOS key counts; attention to EOS is the "no-op" of a head),
* relevance: here leave-one-out (occlusion) relevance, the drop of the top-1 logit when one head is
  switched off, normalised over the heads of a layer (an LRP-like attribution to the top-1 logit that
  needs no backward pass; Voita et al. use layer-wise relevance propagation),
* positional heads (sec. 5.1): the share of queries whose maximum attention falls on relative
  position ``-1`` or ``+1``; positional when that share is at least 90%,
* syntactic heads (sec. 5.2): on word-level attention (subword attention summed over the key word's
  subwords and averaged over the query word's subwords), the accuracy with which the maximum points to
  a word's dependency head (or dependent), against the most-frequent-relative-position baseline,
* rare-token heads (sec. 5.3): the share of queries whose maximum falls on the rarest token of the
  sentence, against chance ``1/n``.
"""

from __future__ import annotations

from collections import Counter
from types import MappingProxyType
from typing import Mapping, Optional, Sequence

import numpy as np
import torch
from scipy.stats import spearmanr

from attnbook.heads.masks import ATTENTION_KINDS
from attnbook.heads.translation import pad
from attnbook.stats import top_overlap_p

DIRECTIONS = ("dep->head", "head->dep")


def _stack(attns) -> torch.Tensor:
    """Layers of ``(batch, heads, q, k)`` -> ``(layers, batch, heads, q, k)``."""
    if isinstance(attns, torch.Tensor):
        a = attns
    else:
        if not attns or any(not isinstance(x, torch.Tensor) for x in attns):
            raise ValueError("attns must be a non-empty list of (batch, heads, queries, keys) tensors")
        a = torch.stack(list(attns))
    if a.ndim != 5:
        raise ValueError(f"attns must be (layers, batch, heads, queries, keys), got shape {tuple(a.shape)}")
    return a


def _check_mask(mask: torch.Tensor, batch: int, n: int, name: str) -> torch.Tensor:
    if not isinstance(mask, torch.Tensor) or mask.shape != (batch, n) or mask.dtype != torch.bool:
        shape = tuple(mask.shape) if isinstance(mask, torch.Tensor) else type(mask).__name__
        raise ValueError(f"{name} must be a bool tensor of shape ({batch}, {n}), got {shape}")
    return mask


def head_confidence(attns, query_mask: torch.Tensor, key_mask: torch.Tensor) -> torch.Tensor:
    """Confidence of every head, ``(layers, heads)`` (chapter "A translation model", Voita et al. sec. 4.1): the mean
    over the queries in ``query_mask`` of the largest attention weight on a key in ``key_mask``.

    Pass masks that are False at padding and at EOS to exclude EOS as the paper does.
    """
    a = _stack(attns)
    L, B, H, Q, K = a.shape
    qm, km = _check_mask(query_mask, B, Q, "query_mask"), _check_mask(key_mask, B, K, "key_mask")
    top = a.masked_fill(~km[None, :, None, None, :], 0.0).amax(-1)  # (L, B, H, Q)
    w = qm[None, :, None, :].to(a.dtype)
    return (top * w).sum((1, 3)) / w.sum((1, 3)).clamp(min=1)


def _argmax_keys(a: torch.Tensor, key_mask: torch.Tensor) -> torch.Tensor:
    return a.masked_fill(~key_mask[None, :, None, None, :], -1.0).argmax(-1)  # (L, B, H, Q)


def relative_position_share(attns, query_mask: torch.Tensor, key_mask: torch.Tensor,
                            offsets: Sequence[int] = (-1, 1)) -> torch.Tensor:
    """Share of queries whose maximum attention lies at relative position ``offset`` (key - query),
    ``(layers, heads, len(offsets))`` (chapter "A translation model", Voita et al. sec. 5.1). Self-attention only."""
    a = _stack(attns)
    L, B, H, Q, K = a.shape
    if Q != K:
        raise ValueError(f"relative positions need self-attention (queries == keys), got {Q} x {K}")
    qm, km = _check_mask(query_mask, B, Q, "query_mask"), _check_mask(key_mask, B, K, "key_mask")
    rel = _argmax_keys(a, km) - torch.arange(Q, device=a.device)[None, None, None, :]
    w = qm[None, :, None, :]
    out = [((rel == o) & w).sum((1, 3)).float() / w.sum((1, 3)).clamp(min=1) for o in offsets]
    return torch.stack(out, -1)


def batch_role_shares(attns, query_mask: torch.Tensor, content_mask: torch.Tensor, sink_mask: torch.Tensor,
                      sink_keys: torch.Tensor, position_keys: Optional[torch.Tensor] = None,
                      offsets: Mapping[str, int] = MappingProxyType({"prev": -1, "next": 1})) -> dict:
    """One batch's role statistics of every head (chapter "A translation model"; Voita et al. secs. 4.1 and 5.1),
    each ``(layers, heads)``, a mean over the queries in ``query_mask``: ``confidence`` (the largest weight on a
    key in ``content_mask``), ``sink`` (the share of queries whose largest weight over the keys in ``sink_keys``
    falls on a key in ``sink_mask``: EOS, BOS, [CLS] or [SEP]) and, with ``position_keys`` (self-attention), one
    share per entry of ``offsets`` (none when it is empty): queries whose largest weight over the keys in
    ``position_keys`` lies at that relative position. The translation model's and the pretrained encoders' statistics both come from here
    (:func:`head_roles`, :func:`attnbook.hf.measuring.encoder_head_roles`); :class:`WeightedMeans` averages
    batches."""
    a = _stack(attns)
    L, B, H, Q, K = a.shape
    qm = _check_mask(query_mask, B, Q, "query_mask")
    for name, m in (("content_mask", content_mask), ("sink_mask", sink_mask), ("sink_keys", sink_keys)):
        _check_mask(m, B, K, name)
    top = _argmax_keys(a, sink_keys)
    out = {"confidence": head_confidence(a, qm, content_mask),
           "sink": _share(sink_mask[None, :, None, :].expand(*top.shape[:3], -1).gather(-1, top), qm)}
    if position_keys is not None and offsets:
        out.update({name: share for name, share in zip(offsets, relative_position_share(
            a, qm, _check_mask(position_keys, B, K, "position_keys"), tuple(offsets.values())).unbind(-1))})
    return out


class WeightedMeans:
    """Means of per-batch statistics weighted by their number of queries (chapter "A translation model": the role
    statistics of many batches): ``add(key, value, weight)``, then ``means()``; keys in ``totals`` are summed."""

    def __init__(self, totals: Sequence = ()) -> None:
        self.sums: dict = {}
        self.weights: dict = {}
        self.totals = set(totals)

    def add(self, key, value, weight: float) -> None:
        value = value.cpu() if isinstance(value, torch.Tensor) else value
        self.sums[key] = self.sums.get(key, 0) + (value if key in self.totals else value * weight)
        self.weights[key] = self.weights.get(key, 0) + weight

    def means(self) -> dict:
        return {k: (total if k in self.totals else total / self.weights[k]) for k, total in self.sums.items()}


def strongest_role(enc_roles: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """Each encoder head's strongest role share, ``(layers, heads)`` (chapter "Pruning heads": are the kept heads the
    specialised ones?): the largest of its previous-token, next-token and rare-token shares (:func:`head_roles`'s
    ``enc_self`` statistics with ``token_counts``)."""
    missing = {"prev", "next", "rare"} - set(enc_roles)
    if missing:
        raise ValueError(f"need the encoder's prev, next and rare shares (head_roles with token_counts); "
                         f"missing {sorted(missing)}")
    return torch.maximum(torch.maximum(enc_roles["prev"], enc_roles["next"]), enc_roles["rare"])


def best_neighbour_share(enc_roles: Mapping) -> float:
    """The best positional share of an encoder (chapter "A translation model", Voita et al. sec. 5.1): the largest
    previous- or next-token share of any head (:func:`head_roles`'s ``enc_self`` statistics), the number the
    paper's 90% criterion is read against."""
    return float(torch.maximum(enc_roles["prev"], enc_roles["next"]).max())


def top_head(values: torch.Tensor) -> tuple[int, int]:
    """The ``(layer, head)`` of the largest entry of a ``(layers, heads)`` statistic, both counted from 1 as
    Part III counts them (chapter "A translation model")."""
    values = torch.as_tensor(values)
    if values.ndim != 2 or values.numel() == 0:
        raise ValueError(f"expected a (layers, heads) tensor, got shape {tuple(values.shape)}")
    i = int(values.argmax())
    return i // values.shape[1] + 1, i % values.shape[1] + 1


def positional_heads(shares: torch.Tensor, threshold: float = 0.9) -> torch.Tensor:
    """Boolean ``(layers, heads)``: heads whose maximum is on one relative position in at least
    ``threshold`` of the queries (chapter "A translation model", Voita et al.'s positional heads, threshold 90%)."""
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    if not isinstance(shares, torch.Tensor) or shares.ndim != 3:
        raise ValueError("shares must be the (layers, heads, offsets) output of relative_position_share")
    return shares.amax(-1) >= threshold


def word_attention(attn: torch.Tensor, word_of_token: Sequence[int], n_words: int) -> torch.Tensor:
    """Word-to-word attention of one sentence (chapter "A translation model"): ``attn`` ``(..., tokens, tokens)``
    subword attention, ``word_of_token[t]`` the word of token ``t`` (-1: none, e.g. EOS or a bare word marker).
    Returns ``(..., n_words, n_words)``: sum over the key word's subwords, mean over the query word's."""
    w = torch.as_tensor(list(word_of_token), dtype=torch.long)
    T = attn.shape[-1]
    if attn.shape[-2] != T or len(w) > T:
        raise ValueError(f"attn must be (..., n, n) with n >= len(word_of_token), got {tuple(attn.shape)}")
    if n_words <= 0 or (len(w) and int(w.max()) >= n_words):
        raise ValueError(f"n_words={n_words} is too small for word_of_token")
    full = torch.full((T,), -1, dtype=torch.long)
    full[: len(w)] = w
    M = torch.zeros(T, n_words, dtype=attn.dtype)  # token -> word membership
    ok = full >= 0
    M[ok.nonzero()[:, 0], full[ok]] = 1.0
    M = M.to(attn.device)  # built on the CPU, used where attn lives
    keys = attn @ M  # (..., T, W)
    per_word = M.sum(0).clamp(min=1)
    return (M.T @ keys) / per_word[:, None]


def dependency_accuracy(word_attns: Sequence[torch.Tensor], arcs: Sequence[Sequence], relation: str,
                        direction: str) -> tuple[torch.Tensor, int]:
    """Accuracy of every head on one dependency relation, ``((layers, heads), number of arcs)``
    (chapter "A translation model", Voita et al. sec. 5.2). ``word_attns[i]``: ``(layers, heads, W, W)`` word attention
    of sentence ``i``; ``arcs[i]``: ``[dependent, head, label]`` triples. ``direction="dep->head"``: the
    query is the dependent and the head is the answer; ``"head->dep"`` the other way round."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    if len(word_attns) != len(arcs):
        raise ValueError(f"need one arc list per sentence, got {len(word_attns)} and {len(arcs)}")
    hits, n = None, 0
    for wa, sent_arcs in zip(word_attns, arcs):
        pred = wa.argmax(-1)  # (L, H, W)
        for dep, head, label in sent_arcs:
            if label != relation:
                continue
            q, target = (dep, head) if direction == "dep->head" else (head, dep)
            h = (pred[:, :, q] == target).float()
            hits = h if hits is None else hits + h
            n += 1
    if n == 0:
        raise ValueError(f"no {relation!r} arcs in the data")
    return hits / n, n


def positional_baseline(arcs: Sequence[Sequence], relation: str, direction: str) -> tuple[float, int]:
    """Most-frequent-relative-position baseline for a relation (chapter "A translation model", Voita et al. sec. 5.2):
    the share of arcs whose answer lies at the most common offset from the query, and that offset."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    offs = Counter()
    for sent_arcs in arcs:
        for dep, head, label in sent_arcs:
            if label == relation:
                offs[(head - dep) if direction == "dep->head" else (dep - head)] += 1
    if not offs:
        raise ValueError(f"no {relation!r} arcs in the data")
    off, c = offs.most_common(1)[0]
    return c / sum(offs.values()), off


# The dependency relations chapter "A translation model" tests, in both directions: (relation, direction,
# reading); the paper's Sec. 5.2 reports nsubj, dobj, amod and advmod.
DEPENDENCY_RELATIONS = (
    ("nsubj", "dep->head", "subject -> verb"),
    ("nsubj", "head->dep", "verb -> subject"),
    ("dobj", "head->dep", "verb -> object"),
    ("dobj", "dep->head", "object -> verb"),
    ("amod", "dep->head", "adjective -> noun"),
    ("amod", "head->dep", "noun -> adjective"),
    ("advmod", "dep->head", "adverb -> head"),
    ("advmod", "head->dep", "head -> adverb"),
)


def syntactic_head_table(word_attns: Sequence[torch.Tensor], arcs: Sequence[Sequence],
                         relations: Sequence[tuple[str, str, str]] = DEPENDENCY_RELATIONS) -> list[dict]:
    """The best head for each dependency relation against the positional baseline (chapter "A translation
    model", Voita et al. sec. 5.2): one row per ``(relation, direction, reading)`` with ``relation``,
    ``direction``, ``reading``, ``n`` (arcs), ``best`` (the best head's accuracy), ``head`` (its 1-based
    ``(layer, head)``), ``base`` and ``offset`` (:func:`positional_baseline`)."""
    rows = []
    for relation, direction, reading in relations:
        acc, n = dependency_accuracy(word_attns, arcs, relation, direction)
        base, offset = positional_baseline(arcs, relation, direction)
        layer, head = divmod(int(acc.argmax()), acc.shape[1])
        rows.append(dict(relation=relation, direction=direction, reading=reading, n=n, best=float(acc.max()),
                         head=(layer + 1, head + 1), base=base, offset=offset))
    return rows


def rare_token_share(attns, src_ids: torch.Tensor, token_counts: torch.Tensor, query_mask: torch.Tensor,
                     key_mask: torch.Tensor) -> tuple[torch.Tensor, float]:
    """Share of queries whose maximum attention falls on the rarest key token of the sentence (by
    ``token_counts``, training-set frequencies), ``(layers, heads)``, and the chance level, the mean of
    ``1 / (number of keys)`` over the queries (chapter "A translation model", Voita et al. sec. 5.3)."""
    a = _stack(attns)
    L, B, H, Q, K = a.shape
    qm, km = _check_mask(query_mask, B, Q, "query_mask"), _check_mask(key_mask, B, K, "key_mask")
    if src_ids.shape != (B, K):
        raise ValueError(f"src_ids must have shape ({B}, {K}), got {tuple(src_ids.shape)}")
    freq = token_counts.to(src_ids.device)[src_ids].float().masked_fill(~km, float("inf"))
    rarest = freq.argmin(-1)  # (B,)
    hit = _argmax_keys(a, km) == rarest[None, :, None, None]
    w = qm[None, :, None, :]
    share = (hit & w).sum((1, 3)).float() / w.sum((1, 3)).clamp(min=1)
    chance = float(((1.0 / km.sum(-1).clamp(min=1).float())[:, None] * qm).sum() / qm.sum().clamp(min=1))
    return share, chance


def frequency_ranks(token_counts: torch.Tensor) -> torch.Tensor:
    """The rank of every token id by its training-set count (0 = the most frequent)."""
    order = torch.argsort(token_counts, descending=True)
    ranks = torch.empty_like(order)
    ranks[order] = torch.arange(len(order))
    return ranks


def rare_token_statistics(a: torch.Tensor, ids: torch.Tensor, token_counts: torch.Tensor, ranks: torch.Tensor,
                          query_mask: torch.Tensor, key_mask: torch.Tensor, outside_top: int = 500):
    """:func:`rare_token_share` on the sentences of a batch whose rarest key token is outside the
    ``outside_top`` most frequent (the condition of Voita et al. sec. 5.3): ``(share, chance, queries,
    sentences)``, or None when no sentence of the batch qualifies. ``a`` ``(layers, batch, heads, q, k)``,
    ``ranks`` from :func:`frequency_ranks`."""
    rank = ranks.to(ids.device)[ids].masked_fill(~key_mask, -1)
    keep = rank.amax(-1) >= outside_top
    if not keep.any():
        return None
    share, chance = rare_token_share(a[:, keep], ids[keep], token_counts, query_mask[keep], key_mask[keep])
    return share, chance, float(query_mask[keep].sum()), float(keep.sum())


@torch.no_grad()
def ablation_relevance(model, src: torch.Tensor, tgt_in: torch.Tensor, kinds: Optional[Sequence[str]] = None,
                       normalise: bool = True) -> Mapping[str, torch.Tensor]:
    """Leave-one-out relevance of every head to the top-1 logit (chapter "A translation model"; an occlusion stand-in
    for Voita et al.'s LRP relevance): for each head, the mean over target tokens of the drop of the
    full model's top-1 logit when that head's gate is 0. With ``normalise`` each layer's non-negative
    parts sum to 1, as the paper normalises relevance over the heads of a layer. Returns ``kind -> (L, H)``.
    """
    kinds = list(kinds or ATTENTION_KINDS)
    cfg = model.cfg
    model.eval()
    mask = tgt_in != cfg.pad_id
    logits, _ = model(src, tgt_in)
    top = logits.argmax(-1, keepdim=True)
    base = logits.gather(-1, top)[..., 0]
    out = {}
    for kind in kinds:
        L = cfg.layers(kind)
        rel = torch.zeros(L, cfg.n_heads)
        for layer in range(L):
            for h in range(cfg.n_heads):
                g = torch.ones(L, cfg.n_heads)
                g[layer, h] = 0.0
                lg, _ = model(src, tgt_in, head_gates={kind: g})
                drop = base - lg.gather(-1, top)[..., 0]
                rel[layer, h] = ((drop * mask).sum() / mask.sum()).to(rel.device)
        if normalise:
            pos = rel.clamp(min=0)
            rel = pos / pos.sum(-1, keepdim=True).clamp(min=1e-12)
        out[kind] = rel
    return out


def _share(hit: torch.Tensor, qm: torch.Tensor) -> torch.Tensor:
    """``hit`` (L, B, H, Q) bool, ``qm`` (B, Q) -> share of counted queries per head, (L, H)."""
    w = qm[None, :, None, :]
    return (hit & w).sum((1, 3)).float() / w.sum((1, 3)).clamp(min=1)


@torch.no_grad()
def role_statistics(model, src: torch.Tensor, tgt: torch.Tensor) -> dict:
    """The per-head role statistics of a :class:`attnbook.seq2seq.Seq2SeqTransformer` on one batch
    (chapter "A translation model"; recorded during training by ``scripts/train_translation.py`` for the role-emergence
    figure). ``src``: padded source ids ending in EOS; ``tgt``: padded ``BOS ... EOS`` targets.

    Returns ``kind -> {statistic: (layers, heads) list}`` with, for every attention kind,
    ``confidence`` (mean max weight over queries, EOS/BOS excluded as keys and queries, Voita et al.
    sec. 4.1) and ``sink`` (share of queries whose largest weight is on EOS, or BOS in decoder
    self-attention); for the two self-attentions ``prev`` (and ``next`` for the encoder): the share of
    queries whose largest weight over all real keys is on the neighbouring token (sec. 5.1).
    """
    pad = model.cfg.pad_id
    rows = [[t for t in row if t != pad] for row in src.tolist()]
    targets = [[t for t in row if t != pad] for row in tgt.tolist()]
    roles = head_roles(model, rows, targets, batch_size=len(rows))  # one batch, the same statistics
    keep = ("confidence", "sink", "prev", "next")
    return {kind: {k: [[round(float(x), 4) for x in row] for row in v] for k, v in stats.items() if k in keep}
            for kind, stats in roles.items()}


def causal_chance(query_mask: torch.Tensor, key_mask: torch.Tensor) -> float:
    """Confidence of uniform causal attention (chapter "A translation model"): query ``t`` sees the counted keys up to
    itself, so a head that spreads its weight evenly has confidence ``1 / (keys seen)``; the mean over queries is
    the mean of ``1/t``, not ``1/n``."""
    seen = key_mask.long().cumsum(-1).clamp(min=1).float()
    return float(((1.0 / seen) * query_mask).sum() / query_mask.sum().clamp(min=1))


@torch.no_grad()
def head_roles(model, src_ids: Sequence[Sequence[int]], tgt_ids: Sequence[Sequence[int]],
               token_counts: Optional[torch.Tensor] = None, parses: Optional[Sequence[Mapping]] = None,
               rare_outside_top: int = 500, batch_size: int = 32) -> dict:
    """Every head's roles in a :class:`attnbook.seq2seq.Seq2SeqTransformer`, from teacher-forced attention
    on verses (chapter "A translation model"; Voita et al. 2019 secs. 4-5), in the style of TransformerLens's head
    detectors.

    ``src_ids`` / ``tgt_ids``: unpadded id lists (source ending in EOS; target ``BOS ... EOS``).
    Returns ``kind -> {statistic: (layers, heads) tensor}`` plus scalars:

    * ``confidence``: mean over queries of the largest weight on a content key (EOS and BOS excluded as
      keys and queries); ``chance``: the same for uniform attention (``1/n``; the mean of ``1/t`` for the
      causal decoder self-attention);
    * ``sink``: share of queries whose largest weight is on EOS (BOS in decoder self-attention);
    * ``prev`` / ``next`` (self-attention): share of queries whose largest weight over all real keys is on
      the previous / next token;
    * encoder only, with ``token_counts``: ``rare``, the share of queries pointing at the verse's rarest
      source token, on verses whose rarest token is outside the ``rare_outside_top`` most frequent (the
      condition of sec. 5.3), with ``rare_chance`` (mean ``1/n``) and ``rare_sentences``;
    * with ``parses`` (aligned with ``src_ids``): ``word_maps``, the encoder's word-level attention of each
      verse, ``(layers, heads, words, words)``, for :func:`dependency_accuracy`.
    """
    if len(src_ids) != len(tgt_ids) or not src_ids:
        raise ValueError(f"need as many targets as sources, got {len(src_ids)} and {len(tgt_ids)}")
    if parses is not None and len(parses) != len(src_ids):
        raise ValueError(f"need one parse per verse, got {len(parses)} for {len(src_ids)}")
    cfg = model.cfg
    was_training = model.training
    model.eval()
    dev = next(model.parameters()).device
    means = WeightedMeans(totals=[("enc_self", "rare_sentences")])
    word_maps = []
    rare_rank = None if token_counts is None else frequency_ranks(token_counts)
    positions = {"enc_self": {"prev": -1, "next": 1}, "dec_self": {"prev": -1}, "dec_cross": {}}

    for b in range(0, len(src_ids), batch_size):
        src, tgt = pad(src_ids[b: b + batch_size]).to(dev), pad(tgt_ids[b: b + batch_size]).to(dev)
        tgt_in = tgt[:, :-1]
        _, att = model(src, tgt_in, return_attention=True)
        # a shorter target's EOS is part of the padded decoder input: not a real query or key
        src_real, tgt_real = src != cfg.pad_id, (tgt_in != cfg.pad_id) & (tgt_in != cfg.eos_id)
        src_eos, tgt_bos = src == cfg.eos_id, tgt_in == cfg.bos_id
        masks = {"enc_self": (src_real & ~src_eos, src_real & ~src_eos, src_real, src_eos),
                 "dec_self": (tgt_real & ~tgt_bos, tgt_real & ~tgt_bos, tgt_real, tgt_bos),
                 "dec_cross": (tgt_real & ~tgt_bos, src_real & ~src_eos, src_real, src_eos)}
        for kind, (qm, content, real, sink_keys) in masks.items():
            nq = float(qm.sum())
            shares = batch_role_shares(att[kind], qm, content, sink_keys, real, real, offsets=positions[kind])
            for stat, value in shares.items():
                means.add((kind, stat), value, nq)
            if kind == "dec_self":
                means.add((kind, "chance"), causal_chance(qm, content), nq)
            else:
                per_query = (1.0 / content.sum(-1).clamp(min=1).float())[:, None] * qm
                means.add((kind, "chance"), float(per_query.sum()) / max(nq, 1.0), nq)
        if rare_rank is not None:
            qm, content = masks["enc_self"][0], masks["enc_self"][1]
            found = rare_token_statistics(_stack(att["enc_self"]), src, token_counts, rare_rank, qm, content,
                                          rare_outside_top)
            if found is not None:
                share, chance, nq, n_sentences = found
                means.add(("enc_self", "rare"), share, nq)
                means.add(("enc_self", "rare_chance"), chance, nq)
                means.add(("enc_self", "rare_sentences"), n_sentences, 1.0)
        if parses is not None:
            enc = _stack(att["enc_self"])
            for i in range(src.shape[0]):
                p = parses[b + i]
                n = len(src_ids[b + i])
                word_maps.append(word_attention(enc[:, i, :, :n, :n], p["word_of_token"], len(p["words"])).cpu())
    model.train(was_training)
    out: dict = {}
    for (kind, stat), value in means.means().items():
        out.setdefault(kind, {})[stat] = value if isinstance(value, torch.Tensor) else float(value)
    if parses is not None:
        out["word_maps"] = word_maps
    return out


def confidence_summary(roles: Mapping, kinds: Sequence[str] = ATTENTION_KINDS, factor: float = 5.0,
                       sink_share: float = 0.5) -> dict:
    """Per attention kind of :func:`head_roles`'s output (chapter "A translation model"): ``chance``, ``heads``,
    ``confident`` (heads whose confidence is above ``factor`` times chance), ``most`` (the largest confidence)
    and ``sinks`` (heads that put more than ``sink_share`` of their queries on EOS/BOS)."""
    out = {}
    for k in kinds:
        c, chance = roles[k]["confidence"], roles[k]["chance"]
        out[k] = dict(chance=chance, heads=c.numel(), confident=int((c > factor * chance).sum()),
                      most=float(c.max()), sinks=int((roles[k]["sink"] > sink_share).sum()))
    return out


@torch.no_grad()
def ablation_split_half(model, src_ids: Sequence[Sequence[int]], tgt_ids: Sequence[Sequence[int]],
                        reference: Optional[Mapping[str, torch.Tensor]] = None) -> dict:
    """Leave-one-out relevance (:func:`ablation_relevance`, raw logit drops) on the two halves of the verses
    (unpadded id lists; chapter "A translation model"'s second lens): ``halves`` (the two ``kind -> (L, H)``),
    ``relevance`` (their mean), ``split`` (kind -> Spearman correlation of the halves: split-half
    reliability) and, with a ``reference`` relevance (``kind -> (L, H)``, e.g. LRP's), ``against`` (kind ->
    Spearman correlation of the mean with it). The verses are padded together, then split."""
    n = len(src_ids)
    if n < 2 or len(tgt_ids) != n:
        raise ValueError(f"need at least two verses and one target per source, got {n} and {len(tgt_ids)}")
    dev = next(model.parameters()).device
    src, tgt_in = pad(src_ids).to(dev), pad(tgt_ids)[:, :-1].to(dev)
    half = n // 2
    halves = [ablation_relevance(model, src[s], tgt_in[s], normalise=False)
              for s in (slice(0, half), slice(half, n))]
    kinds = list(halves[0])
    out = dict(halves=halves, relevance={k: (halves[0][k] + halves[1][k]) / 2 for k in kinds},
               split={k: float(spearmanr(halves[0][k].flatten(), halves[1][k].flatten())[0]) for k in kinds})
    if reference is not None:
        out["against"] = {k: float(spearmanr(out["relevance"][k].flatten(), reference[k].flatten())[0])
                          for k in kinds}
    return out


def relevance_against_roles(confidence: torch.Tensor, relevance: torch.Tensor, prev: torch.Tensor,
                            next_: torch.Tensor, top: int = 3) -> dict:
    """How an encoder's head relevance ``(layers, heads)`` lines up with its roles (chapter "A translation
    model", Voita et al. sec. 4-5): ``rho`` (Spearman correlation of confidence and relevance),
    ``neighbour`` (each head's larger previous- or next-token share), ``top_relevant`` (flat indices of the
    ``top`` most relevant heads, sorted), ``both`` (those also among the ``top`` largest neighbour shares),
    ``top_layer1`` (the most relevant first-layer head), ``less_confident`` (how many first-layer heads
    are more confident than it) and ``less_confident_share`` (that count over the layer's other heads; 0.5 by
    chance). Against chance: ``rho_p``, Spearman's one-sided test of ``rho > 0``; ``both_p``, the chance of an
    overlap at least as large between random top sets (:func:`attnbook.stats.top_overlap_p`); each with its
    test turned the other way, ``rho_p_below``, ``both_p_below`` and ``less_confident_p_below`` (at most ``k``
    heads more confident: ``(k + 1) / h``), for a verdict that a statistic lies below chance; ``tests``: each
    statistic's ``(chance, p, p_below)`` by name (``rho``, ``both``, ``less_confident``), as
    :func:`attnbook.claims.compare`'s ``above_chance`` takes it;
    ``both_chance``, the overlap expected by chance; ``less_confident_p``, the one-sided rank test of "the
    relevant head is not confident": were relevance unrelated to confidence, the relevant head's rank in its
    layer of ``h`` heads would be uniform, and at least ``k`` heads would be more confident with probability
    ``(h - k) / h``, at best ``less_confident_smallest_p`` = ``1 / h`` (one head of a layer of 8 cannot reach
    p < 0.05 either way)."""
    neighbour = torch.maximum(prev, next_)
    top_relevant = set(relevance.flatten().topk(top).indices.tolist())
    both = top_relevant & set(neighbour.flatten().topk(top).indices.tolist())
    top_layer1 = int(relevance[0].argmax())
    rho = spearmanr(confidence.flatten(), relevance.flatten(), alternative="greater")
    rho_below = spearmanr(confidence.flatten(), relevance.flatten(), alternative="less")
    n, h = relevance.numel(), relevance.shape[1]
    less = int((confidence[0] > confidence[0, top_layer1]).sum())
    out = dict(rho=float(rho.statistic), rho_p=float(rho.pvalue), rho_p_below=float(rho_below.pvalue),
               neighbour=neighbour, top_relevant=sorted(top_relevant), both=sorted(both),
               both_p=top_overlap_p(n, top, len(both)), both_p_below=top_overlap_p(n, top, len(both), below=True),
               both_chance=top * top / n, top_layer1=top_layer1, less_confident=less,
               less_confident_share=less / (h - 1), less_confident_p=(h - less) / h,
               less_confident_p_below=(less + 1) / h, less_confident_smallest_p=1 / h)
    out["tests"] = {"rho": (0.0, out["rho_p"], out["rho_p_below"]),
                    "both": (out["both_chance"], out["both_p"], out["both_p_below"]),
                    "less_confident": (0.5, out["less_confident_p"], out["less_confident_p_below"])}
    return out


def largest_syntactic_gain(table: Sequence[Mapping]) -> float:
    """The largest gain, in points, of a relation's best head over its positional baseline in a
    :func:`syntactic_head_table` (chapter "A translation model"; the paper's rule asks for 10)."""
    if not table:
        raise ValueError("the syntactic head table is empty")
    return max(100 * (r["best"] - r["base"]) for r in table)


def best_over_training(trace: Sequence[Mapping], kind: str, stats: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """From the role statistics recorded during training (a model record's ``roles``: one
    :func:`role_statistics` per step, with its ``step``; chapter "A translation model"'s role emergence), the
    steps and, at each, the best head's value over the statistics ``stats`` of attention ``kind`` (e.g.
    ``("prev", "next")``: the best neighbour share)."""
    steps = np.array([r["step"] for r in trace])
    return steps, np.array([max(np.max(r[kind][s]) for s in stats) for r in trace])


def late_trend(trace: Sequence[Mapping], kind: str, stats: Sequence[str], last_step: int,
               late_fraction: float = 0.3, level: float = 0.95) -> dict:
    """Is a role still growing when training ends? (chapter "A translation model"): from the role statistics
    recorded during training, the best head's value (:func:`best_over_training`) at the snapshots in the last
    ``late_fraction`` of ``last_step`` training steps. Returns the window's first step, the ``steps`` and
    ``values`` in it, ``n`` snapshots, ``change`` (last minus first), ``slope`` (least squares, per 1000
    steps; NaN with fewer than two snapshots) and ``slope_low``, ``slope_high``: its ``level`` t interval with
    ``n - 2`` degrees of freedom (NaN with fewer than three snapshots; the snapshots are taken as independent
    noise around a line, which a training curve's wiggles need not be)."""
    if not 0 < late_fraction < 1 or last_step < 1:
        raise ValueError(f"expected 0 < late_fraction < 1 and last_step >= 1, got {late_fraction}, {last_step}")
    from scipy.stats import linregress
    from scipy.stats import t as student_t

    steps, best = best_over_training(trace, kind, stats)
    start = (1 - late_fraction) * last_step
    late = steps >= start
    s, v = steps[late].astype(float), best[late]
    fit = linregress(s / 1000, v) if s.size > 1 else None
    slope = float(fit.slope) if fit is not None else float("nan")
    low = high = float("nan")
    if s.size > 2:
        half = float(student_t.ppf(1 - (1 - level) / 2, s.size - 2)) * float(fit.stderr)
        low, high = slope - half, slope + half
    return {"from_step": start, "steps": s.tolist(), "values": v.tolist(), "n": int(s.size),
            "change": float(v[-1] - v[0]) if s.size else float("nan"), "slope": slope,
            "slope_low": low, "slope_high": high}


#: the roles whose emergence during training the book follows (chapter "A translation model": the order of the
#: roles and the role-emergence figure), each ``(attention kind, role statistic)`` of :func:`role_statistics`
EMERGING_ROLES = {
    "sink": ("enc_self", "sink"),
    "confident": ("enc_self", "confidence"),
    "enc-dec confident": ("dec_cross", "confidence"),
    "next": ("enc_self", "next"),
    "prev": ("enc_self", "prev"),
}


def rise_step(trace: Sequence[Mapping], kind: str, stats: Sequence[str], share: float = 0.5) -> int:
    """When does a role appear? (chapter "A translation model"'s order of the roles): the first recorded step
    at which the best head's value (:func:`best_over_training`) has covered ``share`` of its rise, from its
    value at the first snapshot to its largest value (a role that peaks and falls, like the EOS sink, counts
    from its peak's side of the rise; a role still rising when training ends is measured on its rise so far, so
    its step can only come earlier than with more training). Raises ``ValueError`` for a trace with no rise."""
    if not 0 < share <= 1:
        raise ValueError(f"expected 0 < share <= 1, got {share}")
    steps, best = best_over_training(trace, kind, stats)
    if steps.size == 0 or best.max() <= best[0]:
        raise ValueError(f"the best {kind} {stats} never rises above its first snapshot")
    level = best[0] + share * (best.max() - best[0])
    return int(steps[np.argmax(best >= level - 1e-12)])


def checkpoint_comparison(checkpoints: Mapping[str, tuple[Mapping, Mapping]],
                          arcs: Optional[Sequence[Sequence]] = None) -> list[tuple[str, list]]:
    """Translation checkpoints side by side, the role table of chapter "A translation model" (the shipped model
    against its variants: another seed, wider heads): ``checkpoints`` maps a column name to ``(meta, roles)``
    (the model's record from :func:`attnbook.heads.translation.load_translation_model` and its
    :func:`head_roles`); returns rows ``(label, [one value per checkpoint])``: best greedy dev BLEU during
    training, greedy test BLEU, the best previous- and next-token shares of an encoder head; with ``arcs`` (the
    verses' dependency arcs, roles computed with their parses) the largest gain of a relation's best head over
    its positional baseline in points (:func:`largest_syntactic_gain`); where every model's roles have them
    (``token_counts`` given) the best rare-token share over chance; and the training time in minutes and the
    threads it ran on."""
    cps = list(checkpoints.values())
    rows = [
        ("dev BLEU (greedy, best evaluation)", [max(e["dev_bleu"] for e in m["evals"]) for m, _ in cps]),
        ("test BLEU (greedy)", [m["test_bleu_greedy"] for m, _ in cps]),
        ("best previous-token share", [float(r["enc_self"]["prev"].max()) for _, r in cps]),
        ("best next-token share", [float(r["enc_self"]["next"].max()) for _, r in cps]),
    ]
    if arcs is not None:
        rows.append(("largest syntactic gain over the positional baseline (points)",
                     [largest_syntactic_gain(syntactic_head_table(r["word_maps"], arcs)) for _, r in cps]))
    if all("rare" in r["enc_self"] for _, r in cps):
        rows.append(("best rare-token share / chance",
                     [float(r["enc_self"]["rare"].max()) / float(r["enc_self"]["rare_chance"]) for _, r in cps]))
    rows += [("training (minutes)", [round(m["train_wall_seconds"] / 60) for m, _ in cps]),
             ("threads", [m["threads"] for m, _ in cps])]
    return rows
