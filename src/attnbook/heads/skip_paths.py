"""The skip path's share of each encoder layer of the translation model (chapter "What came after": the official
rank-collapse code's ``--compute_alpha``, :mod:`attnbook.rank.skip_share`, measured on chapter "A translation
model"'s pre-LN encoder: the layer's input ``x`` against the self-attention's update ``SA(LN(x))``)."""

from __future__ import annotations

from typing import Sequence

import torch

from attnbook.rank.skip_share import MAX_EXAMPLES, composite_norm, skip_share


@torch.no_grad()
def encoder_skip_shares(model, src_ids: Sequence[Sequence[int]], norm=composite_norm) -> list[float]:
    """``alpha_l`` of every encoder layer of a :class:`attnbook.heads.seq2seq.Seq2SeqTransformer` over the first
    :data:`attnbook.rank.skip_share.MAX_EXAMPLES` sentences of ``src_ids`` (each run alone: no padding);
    ``norm`` as in :func:`attnbook.rank.skip_share.skip_share`."""
    model.eval()
    device = next(model.parameters()).device
    inputs: list[list] = [[] for _ in model.encoder]
    updates: list[list] = [[] for _ in model.encoder]
    hooks = []
    for i, layer in enumerate(model.encoder):
        hooks.append(layer.register_forward_pre_hook(lambda m, args, i=i: inputs[i].append(args[0][0].cpu())))
        hooks.append(layer.self_attn.register_forward_hook(
            lambda m, args, out, i=i: updates[i].append(out[0][0].cpu())))
    try:
        for ids in list(src_ids)[:MAX_EXAMPLES]:
            model.encode(torch.tensor([list(ids)], device=device))
    finally:
        for h in hooks:
            h.remove()
    return [skip_share(x, a, norm) for x, a in zip(inputs, updates)]
