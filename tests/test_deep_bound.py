"""Tests of attnbook.rank.deep_bound: the bound's constants for given weights, and where its step contracts."""

from __future__ import annotations

import math

import pytest
import torch

from attnbook.rank import deep_bound as DB
from attnbook.core.attention import MultiHeadSelfAttention


def _mats(scale=1.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (scale * torch.randn(3, 5, 5, generator=g, dtype=torch.float64),
            torch.randn(3, 5, 5, generator=g, dtype=torch.float64))


def test_layer_constants_by_hand():
    W_qk = torch.zeros(2, 2, 2, dtype=torch.float64)
    W_vo = torch.zeros(2, 2, 2, dtype=torch.float64)
    W_qk[0] = torch.tensor([[1.0, 2.0], [0.0, 1.0]])  # ||.||_1 = 3, ||.||_inf = 3
    W_vo[0] = torch.tensor([[1.0, 0.0], [1.0, 0.0]])  # ||.||_1 = 2, ||.||_inf = 1
    W_qk[1] = torch.eye(2, dtype=torch.float64) * 4  # 4, 4
    W_vo[1] = torch.eye(2, dtype=torch.float64)  # 1, 1
    c = DB.layer_constants(W_qk, W_vo, d_head=4)
    assert c.beta == pytest.approx(math.sqrt(max(3 * 2, 4 * 1) * max(3 * 1, 4 * 1)))
    assert c.qk_norm == pytest.approx(4.0) and (c.n_heads, c.d_head) == (2, 4)
    with pytest.raises(ValueError):
        DB.layer_constants(W_qk, W_vo[:1], d_head=4)


def test_one_layer_bound_is_a_r_cubed_and_the_threshold_is_where_it_stops_contracting():
    c = DB.layer_constants(*_mats(), d_head=4)
    r = 0.01
    mu = c.qk_norm * r**2 / 2
    a = math.exp(2 * mu) * (1 + math.exp(mu)) * c.beta * c.n_heads / 2
    assert DB.log_one_layer_bound(math.log(r), c) == pytest.approx(math.log(a * r**3), rel=1e-12)
    t = DB.contraction_threshold(c)
    assert DB.log_one_layer_bound(math.log(t), c) - math.log(t) == pytest.approx(0.0, abs=1e-9)
    assert DB.log_one_layer_bound(math.log(0.9 * t), c) < math.log(0.9 * t)
    assert DB.log_one_layer_bound(math.log(1.1 * t), c) > math.log(1.1 * t)
    bigger = DB.layer_constants(*_mats(scale=10.0), d_head=4)
    assert DB.contraction_threshold(bigger) < t  # larger query/key weights: the step contracts later


def test_attention_head_matrices_reproduce_the_scores_and_the_output():
    torch.manual_seed(0)
    att = MultiHeadSelfAttention(8, 2, bias=False).double()
    W_qk, W_vo = att.head_matrices()
    X = torch.randn(1, 4, 8, dtype=torch.float64)
    out, p = att(X, return_attention=True)
    scores = torch.stack([X[0] @ W_qk[h] @ X[0].T for h in range(2)]) / math.sqrt(att.d_head)
    torch.testing.assert_close(p[0], scores.softmax(-1))
    torch.testing.assert_close(out[0], sum(p[0, h] @ X[0] @ W_vo[h] for h in range(2)))


def test_log_bound_by_layer_composes_the_one_layer_bound():
    from attnbook.core.attention import SelfAttentionNetwork, gaussian_init_

    torch.manual_seed(0)
    net = gaussian_init_(SelfAttentionNetwork(3, 8, 2, skip=False, mlp=False, layernorm=None)).double()
    logs = DB.log_bound_by_layer(net, 0.01)
    assert len(logs) == 4 and logs[0] == pytest.approx(math.log(0.02))
    b = math.log(0.01)
    for layer, block in enumerate(net.blocks):
        b = DB.log_one_layer_bound(b, DB.layer_constants(*block.attn.head_matrices(), block.attn.d_head))
        assert logs[layer + 1] == pytest.approx(b + math.log(2), rel=1e-12)
    assert DB.log_bound_by_layer(net, 0.01, c=1.0)[2] == pytest.approx(logs[2] - math.log(2))
    with pytest.raises(ValueError):
        DB.log_bound_by_layer(net, 0.0)
