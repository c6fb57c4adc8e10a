"""How a trained BERT-style encoder keeps away from rank collapse (chapter "What came after"): the skip path's share
of each layer (the official code's ``--compute_alpha``, :mod:`attnbook.rank.skip_share`) and what its sink heads
add to the tokens.

A head that puts its weight on [CLS] or [SEP] (a *sink*, Clark et al. 2019's "no-op"; Xiao et al. 2023's attention
sinks) adds nearly the same row to every token: its output ``P_h X W_h`` is close to rank one, so with the skip
connection the layer is close to the identity plus a shift. :func:`head_outputs` measures both per head: the share
of queries whose largest weight is on a special token, and the relative residual (eq. ``rel-res``) of the head's
output. The activations are recomputed from the layers' own modules (eval mode), as
:func:`attnbook.hf.relevance.forward_states` does.
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

from attnbook.core.norms import relative_residual
from attnbook.hf.relevance import _attention_view, _bert_layers, forward_states
from attnbook.rank.skip_share import MAX_EXAMPLES, composite_norm, skip_share


def _ids(tokenizer, sentences: Sequence[str], max_length: int, device) -> list[torch.Tensor]:
    return [torch.tensor(tokenizer(s, truncation=True, max_length=max_length)["input_ids"], device=device)
            for s in sentences]


@torch.no_grad()
def skip_shares(model: nn.Module, tokenizer, sentences: Sequence[str], max_length: int = 64,
                norm=composite_norm) -> list[float]:
    """The skip path's share ``alpha_l`` of every layer of ``model`` over the first :data:`MAX_EXAMPLES`
    ``sentences`` (each unpadded): the layer's input against its attention update (after the output projection,
    before the residual LayerNorm), as the official code measures them; ``norm`` as in
    :func:`attnbook.rank.skip_share.skip_share`."""
    model.eval()
    device = next(model.parameters()).device
    per_layer: list[tuple[list, list]] = []
    for ids in _ids(tokenizer, sentences[:MAX_EXAMPLES], max_length, device):
        _, states = forward_states(model, ids)
        if not per_layer:
            per_layer = [([], []) for _ in states]
        for (xs, updates), (x, a, *_rest) in zip(per_layer, states):
            xs.append(x.cpu())
            updates.append(a.cpu())
    return [skip_share(xs, updates, norm) for xs, updates in per_layer]


@torch.no_grad()
def head_outputs(model: nn.Module, tokenizer, sentences: Sequence[str], max_length: int = 64) -> dict:
    """Per head ``(layers, heads)``, averaged over ``sentences`` (each unpadded): ``sink``, the share of queries whose
    largest weight is on a special token ([CLS], [SEP]); ``residual``, the relative residual of the head's output
    ``P_h X W_{V,h} W_{O,h}`` (mean-centred: 0 when the head adds one row to every token); ``size``, the
    Frobenius norm of that output over the layer input's (how much the head adds)."""
    model.eval()
    device = next(model.parameters()).device
    special = set(tokenizer.all_special_ids)
    layers = _bert_layers(model)
    sink = torch.zeros(len(layers), _attention_view(layers[0]).n_heads, dtype=torch.float64)
    residual, size = torch.zeros_like(sink), torch.zeros_like(sink)
    all_ids = _ids(tokenizer, sentences, max_length, device)
    for ids in all_ids:
        is_special = torch.tensor([int(t) in special for t in ids.tolist()], device=device)
        _, states = forward_states(model, ids)
        for layer, (view, (x, *_rest)) in enumerate(zip(map(_attention_view, layers), states)):
            q, k, v, dh = view.q(x), view.k(x), view.v(x), view.d_head
            for h in range(view.n_heads):
                cols = slice(h * dh, (h + 1) * dh)
                P = (view.scale * q[:, cols] @ k[:, cols].T).softmax(-1)
                out = P @ v[:, cols] @ view.out.weight[:, cols].T
                sink[layer, h] += float(is_special[P.argmax(-1)].double().mean())
                residual[layer, h] += float(relative_residual(out.double()))
                size[layer, h] += float(out.norm() / x.norm())
    n = len(all_ids)
    return {"sink": sink / n, "residual": residual / n, "size": size / n}
