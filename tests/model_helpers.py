"""Helpers shared by the LRP tests (tests/test_lrp.py, tests/test_hf_relevance.py)."""

from __future__ import annotations

import torch


def trained_looking_(model: torch.nn.Module) -> torch.nn.Module:
    """Give ``model`` trained-looking LayerNorms and biases in place (weights in [0.5, 1.5], biases N(0, 0.1)),
    not the initialisation's ones and zeros, under which some relevance rules cannot be told apart."""
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, (torch.nn.LayerNorm, torch.nn.Linear)) and mod.bias is not None:
                mod.bias.normal_(0, 0.1)
            if isinstance(mod, torch.nn.LayerNorm):
                mod.weight.uniform_(0.5, 1.5)
    return model


def use_dense_lrp_jacobians(monkeypatch) -> None:
    """The slow path of :mod:`attnbook.heads.lrp`: every closed form of the propagation (the attention Jacobian,
    LayerNorm's, a linear layer's weights) replaced by the dense Jacobian autograd computes, fed to the rule one
    relevance row and one sample at a time (``lrp.relprop_jacobian``, or ``relprop_tokenwise`` without a
    Jacobian). Whatever model the rule then runs on, its relevance must equal the fast path's."""
    from torch.func import jacrev

    from attnbook.heads import lrp

    def dense_attention(R, q, k, v, scale, mask):
        jq, jk, jv = jacrev(lambda a, b, c: lrp.attention_core(a, b, c, scale, mask), argnums=(0, 1, 2))(q, k, v)
        n, m, d = q.shape[0], k.shape[0], q.shape[1]
        jac = torch.cat([jq.reshape(n * d, n * d), jk.reshape(n * d, m * d), jv.reshape(n * d, m * d)], 1)
        x = torch.cat([q.flatten(), k.flatten(), v.flatten()])
        rows = lrp.relprop_jacobian(R.reshape(R.shape[0], -1), x, jac, torch.zeros(n * d, dtype=x.dtype))
        rq, rk, rv = rows.split([n * d, m * d, m * d], 1)
        return rq.reshape(-1, n, d), rk.reshape(-1, m, d), rv.reshape(-1, m, d)

    monkeypatch.setattr(lrp, "relprop_attention", dense_attention)
    monkeypatch.setattr(lrp, "relprop_norm", lambda R, x, norm: lrp.relprop_tokenwise(R, x, norm))
    monkeypatch.setattr(lrp, "relprop_linear", lambda R, x, layer: lrp.relprop_tokenwise(R, x, layer))
