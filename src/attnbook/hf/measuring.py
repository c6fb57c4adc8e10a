"""Layer outputs, attention matrices and head statistics of a Hugging Face encoder (chapters "Rank
collapse in pretrained transformers" and "A translation model").

:func:`layer_outputs` records, with forward hooks of its own (so it does not depend on
how a transformers version assembles ``output_hidden_states``), the input of the first layer (the
embeddings, after ALBERT's projection to width 768) and the output of every layer.
:func:`residual_by_layer` turns them into the paper's measure ``||h - 1 mean(h)^T||_{1,inf} /
||h||_{1,inf}`` (:func:`attnbook.core.norms.relative_residual`, token mean as in the official code).
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

import numpy as np
import torch
from torch import nn

from attnbook.rank import deep_bound
from attnbook.heads import roles
from attnbook.heads.roles import word_attention
from attnbook.core.norms import norm_1_inf, relative_residual, res
from attnbook.hf.surgery import VARIANTS, _blocks, _first, _layers, architecture, variant

# --------------------------------------------------------------------------------------------- measuring


def _check_batch(batch) -> dict:
    if not isinstance(batch, Mapping) or "input_ids" not in batch:
        raise ValueError("batch must be a mapping with 'input_ids' (and optionally 'attention_mask')")
    ids = batch["input_ids"]
    if not isinstance(ids, torch.Tensor) or ids.ndim != 2:
        raise ValueError(f"batch['input_ids'] must have shape (n_sequences, n_tokens), got {getattr(ids, 'shape', ids)}")
    return {k: v for k, v in batch.items() if k in ("input_ids", "attention_mask")}


@torch.no_grad()
def layer_outputs(model: nn.Module, batch: Mapping[str, torch.Tensor]) -> list[torch.Tensor]:
    """Run ``model`` on ``batch`` and return ``[h_0, h_1, ..., h_L]``, each (n_sequences, n_tokens, d):
    ``h_0`` is the input of the first layer (the embeddings; for ALBERT after its projection to the hidden
    width), ``h_l`` the output of layer ``l`` (chapter "Rank collapse in pretrained transformers").

    Recorded with forward hooks on the layer modules, so it sees any surgery applied by :func:`variant`
    and does not depend on how a transformers version builds ``output_hidden_states``.
    """
    kind = architecture(model)
    batch = _check_batch(batch)
    dev = next(model.parameters()).device
    batch = {k: v.to(dev) for k, v in batch.items()}
    seq_first = kind == "xlnet"  # XLNet's layers work on (n_tokens, batch, d)
    record: list[torch.Tensor] = []

    def as_batch_first(h):
        h = _first(h)
        return h.transpose(0, 1) if seq_first else h

    def pre(module, args, kwargs):
        if not record:
            h = args[0] if args else kwargs.get("hidden_states", kwargs.get("output_h"))
            record.append(as_batch_first(h).detach())

    def post(module, args, output):
        record.append(as_batch_first(output).detach())

    blocks = _blocks(model)
    handles = [blocks[0].register_forward_pre_hook(pre, with_kwargs=True)]
    handles += [b.register_forward_hook(post) for b in blocks]
    try:
        model(**batch)
    finally:
        for h in handles:
            h.remove()
    return record


def residual_by_layer(model: nn.Module, batch: Mapping[str, torch.Tensor]) -> np.ndarray:
    """The paper's Fig. 2 measure per layer and input: ``||h_l - 1 mean(h_l)^T||_{1,inf} / ||h_l||_{1,inf}``
    (chapter "Rank collapse in pretrained transformers", eq. rel-res with the token mean as in the official
    code), for ``l = 0`` (embeddings) to ``L``. Returns an array of shape (L + 1, n_sequences)."""
    hs = layer_outputs(model, batch)
    return torch.stack([relative_residual(h.float().cpu()) for h in hs]).numpy()


def head_matrices(model: nn.Module) -> list[tuple[torch.Tensor, torch.Tensor, int]]:
    """The per-head fold ``W_QK,h = W_Q,h W_K,h^T``, ``W_h = W_V,h W_O,h`` (chapter "Path decomposition") of
    every layer of a BERT-family model (BERT, MiniLM, ALBERT, whose layers share one set of weights), in
    float64: a list over layers of ``(W_qk, W_vo, d_head)``, the matrices ``(heads, d, d)`` (chapter "Rank
    collapse in pretrained transformers": the bound's constants for real weights). XLNet's relative
    attention has no such fold and is refused."""
    kind = architecture(model)
    if kind == "xlnet":
        raise ValueError("head_matrices: XLNet's attention (relative positions) has no W_Q W_K^T fold")
    out = []
    for layer in _layers(model):
        att = layer.attention
        qkv, o = (att.self, att.output.dense) if kind == "bert" else (att, att.dense)
        H = model.config.num_attention_heads
        dm = o.weight.shape[0]
        dh = qkv.query.weight.shape[0] // H

        def split(lin):
            return lin.weight.detach().double().T.reshape(dm, H, dh).permute(1, 0, 2)

        W_qk = split(qkv.query) @ split(qkv.key).transpose(-1, -2)
        W_vo = split(qkv.value) @ o.weight.detach().double().T.reshape(H, dh, dm)
        out.append((W_qk, W_vo, dh))
    if kind == "albert":
        out = out * (model.config.num_hidden_layers // len(out))
    return out


def residual_curves(
    model: nn.Module,
    batch: Mapping[str, torch.Tensor],
    variants: Sequence[str] = VARIANTS,
    albert_as_paper: bool = False,
) -> dict[str, np.ndarray]:
    """:func:`residual_by_layer` for each of ``variants`` of ``model`` (chapter "Rank collapse in pretrained
    transformers", Fig. 2): ``{variant: (L + 1, n_sequences) array}``. The model is restored afterwards.
    ``albert_as_paper`` is passed to :func:`variant`."""
    if isinstance(variants, str):
        raise ValueError(f"variants must be a sequence of names from {VARIANTS}, got the string {variants!r}")
    out = {}
    for name in variants:
        with variant(model, name, albert_as_paper=albert_as_paper):
            out[name] = residual_by_layer(model, batch)
    return out


@torch.no_grad()
def attention_matrices(model: nn.Module, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """The attention matrices of a BERT or ALBERT model on ``batch``, as one tensor of shape
    (n_sequences, L, H, n_tokens, n_tokens) (chapter "Rank collapse in pretrained transformers", companion figure:
    products along paths). Needs eager attention (:func:`load_pretrained` and :func:`init_model` set it)."""
    kind = architecture(model)
    if kind == "xlnet":
        raise ValueError("attention_matrices supports BERT and ALBERT (XLNet's relative attention is laid out differently)")
    batch = _check_batch(batch)
    dev = next(model.parameters()).device
    out = model(**{k: v.to(dev) for k, v in batch.items()}, output_attentions=True)
    if not out.attentions or out.attentions[0] is None:
        raise RuntimeError("the model returned no attention matrices; load it with attn_implementation='eager'")
    return torch.stack([a.detach().float().cpu() for a in out.attentions], dim=1)


def word_of_token(text: str, words: Sequence[str], offsets: Sequence[tuple[int, int]]) -> list[int]:
    """The word (index into ``words``, the parser's tokens of ``text`` in order) of each subword token,
    from the tokenizer's character ``offsets``; -1 for special tokens (offsets ``(0, 0)``) (chapter "A translation
    model", MiniLM's syntactic heads)."""
    spans, pos = [], 0
    for w in words:
        i = text.find(w, pos)
        if i < 0:
            raise ValueError(f"word {w!r} not found in {text[:60]!r} after position {pos}")
        spans.append((i, i + len(w)))
        pos = i + len(w)
    out = []
    for start, end in offsets:
        if end <= start:
            out.append(-1)
            continue
        out.append(next((j for j, (a, b) in enumerate(spans) if a <= start < b), -1))
    return out


def token_counts(tokenizer, texts: Sequence[str]) -> torch.Tensor:
    """How often each token id of ``tokenizer``'s vocabulary occurs in ``texts`` (special tokens not
    added): the training-set frequencies that rank tokens for the rare-token statistic (chapter "A
    translation model", Voita et al. sec. 5.3)."""
    if isinstance(texts, str) or not len(texts):
        raise ValueError("expected a non-empty list of texts")
    ids = [i for row in tokenizer(list(texts), add_special_tokens=False)["input_ids"] for i in row]
    return torch.bincount(torch.tensor(ids, dtype=torch.long), minlength=len(tokenizer))


@torch.no_grad()
def encoder_head_roles(model: nn.Module, tokenizer, sentences: Sequence[str],
                       parses: Optional[Sequence[Mapping]] = None, batch_size: int = 32,
                       max_length: int = 128, token_counts: Optional[torch.Tensor] = None,
                       rare_outside_top: int = 500) -> dict:
    """Voita et al.'s head statistics for a pretrained BERT-style encoder (chapter "A translation model", MiniLM beside
    the translation model; Clark et al. 2019 for BERT). Special tokens ([CLS], [SEP]) are neither queries
    nor content keys. Returns ``{statistic: (layers, heads) tensor}``: ``confidence`` (largest weight on
    a content key), ``sink`` (share of queries whose largest weight over all keys is on [CLS] or [SEP]),
    ``prev`` / ``next`` (share whose largest content weight is on the neighbouring token), the scalar
    ``chance`` (mean 1/n), with ``parses`` the word-level maps ``word_maps`` for
    :func:`attnbook.heads.roles.dependency_accuracy`, and with ``token_counts`` (a count per token id) the
    rare-token share ``rare`` on the sentences whose rarest content token is outside the
    ``rare_outside_top`` most frequent, with ``rare_chance`` and ``rare_sentences``
    (:func:`attnbook.heads.roles.rare_token_statistics`).
    """
    if parses is not None and len(parses) != len(sentences):
        raise ValueError(f"need one parse per sentence, got {len(parses)} for {len(sentences)}")
    dev = next(model.parameters()).device
    special = set(tokenizer.all_special_ids)
    means = roles.WeightedMeans(totals=["rare_sentences"])
    word_maps = []
    ranks = None if token_counts is None else roles.frequency_ranks(token_counts)
    for b in range(0, len(sentences), batch_size):
        chunk = list(sentences[b: b + batch_size])
        enc = tokenizer(chunk, padding=True, truncation=True, max_length=max_length, return_tensors="pt",
                        return_offsets_mapping=True)
        offsets = enc.pop("offset_mapping")
        out = model(**{k: v.to(dev) for k, v in enc.items()}, output_attentions=True)
        a = torch.stack([x.float() for x in out.attentions])  # (L, B, H, n, n)
        real = enc["attention_mask"].bool().to(dev)
        is_special = torch.zeros_like(real)
        for s in special:
            is_special |= enc["input_ids"].to(dev) == s
        content = real & ~is_special
        nq = float(content.sum())
        # sink: the largest weight over all real keys on [CLS] or [SEP]; positions among content tokens
        for stat, value in roles.batch_role_shares(a, content, content, is_special, real, content).items():
            means.add(stat, value, nq)
        means.add("chance", float(((1.0 / content.sum(-1).clamp(min=1).float())[:, None] * content).sum()) / max(nq, 1.0),
                  nq)
        found = None if ranks is None else roles.rare_token_statistics(
            a, enc["input_ids"].to(dev), token_counts, ranks, content, content, rare_outside_top)
        if found is not None:
            share, rare_chance, rare_nq, n_sentences = found
            means.add("rare", share, rare_nq)
            means.add("rare_chance", rare_chance, rare_nq)
            means.add("rare_sentences", n_sentences, 1.0)
        if parses is not None:
            for i, text in enumerate(chunk):
                p = parses[b + i]
                n = int(real[i].sum())
                wot = word_of_token(text, p["words"], offsets[i, :n].tolist())
                word_maps.append(word_attention(a[:, i, :, :n, :n].cpu(), wot, len(p["words"])))
    result = means.means()
    result["chance"] = float(result["chance"])
    if ranks is not None:
        result.update(rare=result.get("rare", 0.0), rare_chance=float(result.get("rare_chance", 0.0)),
                      rare_sentences=result.get("rare_sentences", 0.0))
    if parses is not None:
        result["word_maps"] = word_maps
    return result


def contraction_thresholds(model: nn.Module) -> list[float]:
    """For every layer of a BERT-family model, the largest input residual ``||res(X)||_{1,inf}`` at which the
    one-layer step of the doubly exponential bound contracts, from the layer's own weights
    (:func:`attnbook.rank.deep_bound.contraction_threshold` of :func:`head_matrices`; chapter "Rank collapse in
    pretrained transformers": where the theorem applies to real weights)."""
    return [deep_bound.contraction_threshold(deep_bound.layer_constants(W_qk, W_vo, d_head))
            for W_qk, W_vo, d_head in head_matrices(model)]


def where_the_bound_applies(model: nn.Module, batch: Mapping[str, torch.Tensor]) -> dict[str, np.ndarray]:
    """Where the doubly exponential bound says anything about a real model (chapter "Rank collapse in
    pretrained transformers"): for each layer of the pure-SAN variant, the contraction threshold of its
    weights (:func:`contraction_thresholds`), the median residual ``||res(h_{l-1})||_{1,inf}`` of its input
    over the batch's sequences and the mean relative residual of that input; ``applies`` where the input
    residual is below the threshold (the layer's step is then a contraction by the bound)."""
    thresholds = np.array(contraction_thresholds(model))
    with variant(model, "SAN"):
        hs = [h.double().cpu() for h in layer_outputs(model, batch)][:-1]
    absolute = np.array([float(norm_1_inf(res(h)).median()) for h in hs])
    relative = np.array([float(relative_residual(h).mean()) for h in hs])
    return {"threshold": thresholds, "input_residual": absolute, "input_relative": relative,
            "applies": absolute < thresholds}


def first_layer_below(curves: np.ndarray, level: float) -> int:
    """The first layer ``l`` at which the mean over inputs of ``curves`` (an (L + 1, n_sequences) array of
    :func:`residual_by_layer`) is below ``level`` (chapter "Rank collapse in pretrained transformers": the
    layer where the tokens have collapsed). Raises ValueError when no layer is below ``level``."""
    mean = torch.as_tensor(np.asarray(curves).mean(1))
    layer = deep_bound.first_layer_below(mean, level)
    if layer == len(mean):
        raise ValueError(f"no layer has a mean relative residual below {level}")
    return layer


def bound_margins(cases: Mapping[str, Mapping[str, np.ndarray]]) -> tuple[float, float]:
    """Two numbers that say where the theorem applies over several models (chapter "Rank collapse in
    pretrained transformers"), from ``name -> where_the_bound_applies(...)``: the first layer's input
    residual over its contraction threshold, smallest over the models, and the largest relative residual
    of an input at which the step contracts (over the layers where it does; NaN if it does nowhere)."""
    if not cases:
        raise ValueError("no case given")
    excess = min(float(w["input_residual"][0] / w["threshold"][0]) for w in cases.values())
    applies = [float(w["input_relative"][w["applies"]].max()) for w in cases.values() if w["applies"].any()]
    return excess, max(applies) if applies else float("nan")
