"""LRP relevance of every head of a BERT-style encoder to its sentence embedding (chapter "A translation
model", all-MiniLM-L6-v2 beside the translation model; Voita et al. 2019, Sec. 4.2).

The rule is :mod:`attnbook.heads.lrp`'s (the official alpha-beta rule, alpha = beta = 0.5), applied to BERT's
post-LN layers (:func:`attnbook.heads.lrp.residual_post_ln`). What is explained differs from the paper, because
a sentence encoder predicts no token: the book explains the sentence embedding ``e`` (the mean of the last
layer's token states, as sentence-transformers pools all-MiniLM-L6-v2) by its score against its own
direction, ``s = e . e/|e| = |e|``, the quantity every cosine similarity of the model is built from. The
impacts of ``e``'s coordinates on ``s`` are ``e_d^2 / |e|`` and those of the token states on ``e_d`` are
``h_td / n``; from there the relevance goes back layer by layer to every head's output neurons, and a
head's relevance is their sum, as a share of its layer (:func:`attnbook.heads.lrp.layer_shares`;
``scripts/head_relevance.py --model minilm`` averages the shares over verses, as for the translation model).
"""

from __future__ import annotations

from types import SimpleNamespace

import torch
from torch import nn

from attnbook.heads import lrp


def _bert_layers(model: nn.Module) -> list[nn.Module]:
    base = getattr(model, "base_model", model)
    layers = getattr(getattr(base, "encoder", None), "layer", None)
    if layers is None or not hasattr(layers[0], "attention") or not hasattr(layers[0].attention, "self"):
        raise ValueError("expected a BERT-style encoder (encoder.layer[i].attention.self / .output, "
                         f"intermediate, output), got {type(model).__name__}")
    return list(layers)


def _attention_view(layer: nn.Module) -> SimpleNamespace:
    """BERT's self-attention with the names :func:`attnbook.heads.lrp.relprop_mha` reads."""
    att = layer.attention.self
    return SimpleNamespace(n_heads=att.num_attention_heads, d_head=att.attention_head_size,
                           q=att.query, k=att.key, v=att.value, scale=att.attention_head_size ** -0.5,
                           out=layer.attention.output.dense)


@torch.no_grad()
def forward_states(model: nn.Module, input_ids: torch.Tensor) -> tuple[torch.Tensor, list]:
    """The activations of one unpadded sentence (1-d ids) that the backward pass needs: the embedding
    output and, per layer, ``(x, attention update, x1, hidden, feed-forward update, output)``, recomputed
    from the layers' own modules (eval mode; tested against the model's ``hidden_states``)."""
    x = model.embeddings(input_ids=input_ids[None])[0]
    first, states = x, []
    for layer in _bert_layers(model):
        view = _attention_view(layer)
        q, k, v = view.q(x), view.k(x), view.v(x)
        dh = view.d_head
        heads = [lrp.attention_core(q[:, h * dh:(h + 1) * dh], k[:, h * dh:(h + 1) * dh],
                                    v[:, h * dh:(h + 1) * dh], view.scale, None)
                 for h in range(view.n_heads)]
        a = view.out(torch.cat(heads, dim=1))
        x1 = layer.attention.output.LayerNorm(x + a)
        hidden = layer.intermediate(x1)
        f = layer.output.dense(hidden)
        out = layer.output.LayerNorm(x1 + f)
        states.append((x, a, x1, hidden, f, out))
        x = out
    return first, states


def embedding_relevance(h: torch.Tensor) -> torch.Tensor:
    """The relevance ``(1, n, d)`` of the last layer's token states ``h`` ``(n, d)`` for the score
    ``s = e . e/|e|`` of their mean ``e``: the alpha-beta rule through the score (impacts ``e_d^2/|e|``)
    and through the mean (impacts ``h_td / n`` on ``e_d``), the mean taken as one layer and rescaled over
    the whole sentence to total 1, as :func:`attnbook.heads.lrp.relprop_jacobian` rescales a layer (so a
    coordinate whose token states have mixed signs keeps more than its ``e_d^2/|e|^2``)."""
    e = h.mean(0)
    R_e = lrp.transition((e * e / e.norm())[None, :])[0]  # (d,)
    R_e = R_e / (R_e.abs().sum() + lrp.EPS)
    R = R_e[None, :] * lrp.transition((h / h.shape[0]).T).T  # (n, d)
    return lrp.rescale(torch.ones(1, 1, 1, dtype=h.dtype, device=h.device), R[None], dims=2)


def sentence_head_relevance(model: nn.Module, input_ids) -> tuple[torch.Tensor, torch.Tensor]:
    """LRP relevance of every head ``(layers, heads)`` to the sentence embedding of one unpadded sentence
    (1-d ids, special tokens included, as the tokenizer writes them), and the relevance ``(n,)`` that
    reaches the token embeddings (its absolute values sum to 1: relevance is conserved). Eval mode, the
    model's mode restored. Computes on the model's device; returns CPU tensors."""
    ids = torch.as_tensor(input_ids, dtype=torch.long)
    if ids.ndim != 1 or len(ids) < 2:
        raise ValueError(f"expected one sentence as a 1-d id sequence of at least 2 tokens, got shape "
                         f"{tuple(ids.shape)}")
    layers = _bert_layers(model)
    was_training = model.training
    model.eval()
    try:
        first, states = forward_states(model, ids.to(next(model.parameters()).device))
        with torch.no_grad():
            R = embedding_relevance(states[-1][-1])
            per_layer = []
            for layer, (x, a, x1, hidden, f, _) in zip(reversed(layers), reversed(states)):
                R = lrp.residual_post_ln(R, x1, f, layer.output.LayerNorm, lambda r: lrp.relprop_feed_forward(
                    r, x1, hidden, layer.intermediate.dense, layer.output.dense))
                heads: list = []
                R = lrp.residual_post_ln(R, x, a, layer.attention.output.LayerNorm, lambda r: lrp.relprop_mha(
                    r, _attention_view(layer), x, None, None, heads)[0])
                per_layer.insert(0, heads[0][0])
    finally:
        model.train(was_training)
    return torch.stack(per_layer).float().cpu(), R[0].abs().sum(-1).float().cpu()


def live_gap(model: nn.Module, tokenizer, texts, first_verses, max_length: int = 128) -> float:
    """The largest absolute difference between the shipped per-verse relevance ``first_verses`` (the
    ``enc_self`` layer shares of :func:`attnbook.heads.lrp.load_relevance` for ``lrp_relevance_minilm``) and the
    same verses' relevance recomputed now from ``texts`` (the same verses first, tokenised as the shipping
    script did): chapter "A translation model"'s live-against-precomputed check for MiniLM."""
    if len(texts) < len(first_verses):
        raise ValueError(f"need the {len(first_verses)} shipped verses, got {len(texts)} texts")
    gaps = []
    for text, want in zip(texts, first_verses):
        ids = tokenizer(text, truncation=True, max_length=max_length)["input_ids"]
        got = lrp.layer_shares(sentence_head_relevance(model, ids)[0])
        gaps.append(float((got - want["enc_self"]).abs().max()))
    return max(gaps)
