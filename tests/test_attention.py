import math

import pytest
import torch
import torch.nn.functional as F

from attnbook.attention import Block, MultiHeadSelfAttention, SelfAttentionNetwork, gaussian_init_


def test_attention_matrices_are_row_stochastic_and_match_fused_kernel():
    torch.manual_seed(0)
    mha = MultiHeadSelfAttention(16, 4).double()
    x = torch.randn(2, 7, 16, dtype=torch.float64)
    out, attn = mha(x, return_attention=True)
    assert attn.shape == (2, 4, 7, 7)
    assert torch.allclose(attn.sum(-1), torch.ones(2, 4, 7, dtype=torch.float64))
    fused, none = mha(x)
    assert none is None and torch.allclose(out, fused, atol=1e-12)


def test_one_head_by_hand():
    torch.manual_seed(1)
    mha = MultiHeadSelfAttention(3, 1, temperature=2.0).double()
    x = torch.randn(1, 4, 3, dtype=torch.float64)
    q, k, v = mha.q(x), mha.k(x), mha.v(x)
    P = torch.softmax(q @ k.transpose(-1, -2) / (2.0 * math.sqrt(3)), dim=-1)
    out, attn = mha(x, return_attention=True)
    assert torch.allclose(attn[:, 0], P)
    assert torch.allclose(out, mha.out(P @ v))


def test_head_gates_zero_a_head():
    torch.manual_seed(2)
    mha = MultiHeadSelfAttention(8, 2, bias=False)
    x = torch.randn(1, 5, 8)
    full, _ = mha(x)
    zero, _ = mha(x, head_gates=torch.zeros(2))
    assert torch.allclose(zero, torch.zeros_like(zero))
    half, _ = mha(x, head_gates=torch.tensor([1.0, 0.0]))
    other, _ = mha(x, head_gates=torch.tensor([0.0, 1.0]))
    assert torch.allclose(half + other, full, atol=1e-6)
    with pytest.raises(ValueError, match="head_gates must have shape"):
        mha(x, head_gates=torch.ones(3))


def test_pure_san_block_is_just_attention():
    torch.manual_seed(3)
    block = Block(8, 2, skip=False, mlp=False, layernorm=None)
    x = torch.randn(2, 5, 8)
    y, _ = block(x)
    assert torch.allclose(y, block.attn(x)[0])


def test_block_variants_run_and_keep_shape():
    x = torch.randn(2, 5, 8)
    for ln in (None, "pre", "post"):
        for skip in (True, False):
            for mlp in (True, False):
                y, attn = Block(8, 2, skip=skip, mlp=mlp, layernorm=ln, alpha=0.5)(x, return_attention=True)
                assert y.shape == x.shape and attn.shape == (2, 2, 5, 5)


def test_network_returns_hidden_states():
    net = SelfAttentionNetwork(3, 8, 2, skip=False, mlp=False, layernorm=None)
    out, hidden, attns = net(torch.randn(1, 4, 8), return_attention=True)
    assert len(hidden) == 4 and torch.equal(hidden[-1], out) and len(attns) == 3


def test_gaussian_init_variance():
    torch.manual_seed(4)
    lin = torch.nn.Linear(400, 300)
    gaussian_init_(lin, gain=2.0)
    assert abs(lin.weight.std().item() - 2.0 / 20.0) < 0.005 and lin.bias.abs().max() == 0


def test_bad_input():
    with pytest.raises(ValueError, match="not divisible"):
        MultiHeadSelfAttention(10, 3)
    with pytest.raises(ValueError, match=r"\(batch, n_tokens, 8\)"):
        MultiHeadSelfAttention(8, 2)(torch.randn(5, 8))
    with pytest.raises(ValueError, match="layernorm must be one of"):
        Block(8, 2, layernorm="middle")
    with pytest.raises(ValueError, match="temperature must be positive"):
        MultiHeadSelfAttention(8, 2, temperature=0)
    with pytest.raises(ValueError, match="depth"):
        SelfAttentionNetwork(0, 8, 2)
