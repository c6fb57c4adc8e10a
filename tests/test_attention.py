"""Unit tests of attnbook.core.attention (chapter 1, "Pure attention loses rank", eq. 1 and the block switches).

Tolerances: float64 throughout where a formula is checked, so 1e-12 is many orders above rounding (~1e-15)
and many below any real error (a missing factor changes values by O(1)); float32 checks use 1e-5."""

import math

import pytest
import torch
from torch.testing import assert_close

from attnbook.core.attention import (
    Block,
    MultiHeadSelfAttention,
    SelfAttentionNetwork,
    gaussian_init_,
)

F64 = dict(atol=1e-12, rtol=0.0)


def test_attention_matrices_are_row_stochastic_and_match_fused_kernel():
    torch.manual_seed(0)
    mha = MultiHeadSelfAttention(16, 4).double()
    x = torch.randn(2, 7, 16, dtype=torch.float64)
    out, attn = mha(x, return_attention=True)
    assert attn.shape == (2, 4, 7, 7)
    assert_close(attn.sum(-1), torch.ones(2, 4, 7, dtype=torch.float64), **F64)
    fused, none = mha(x)
    assert none is None
    assert_close(out, fused, **F64)


def test_one_head_by_hand():
    """Eq. 1 with tau = 2: P = softmax((X W_Q + b_Q)(X W_K + b_K)^T / (tau sqrt(d_head)))."""
    torch.manual_seed(1)
    mha = MultiHeadSelfAttention(3, 1, temperature=2.0).double()
    x = torch.randn(1, 4, 3, dtype=torch.float64)
    q, k, v = mha.q(x), mha.k(x), mha.v(x)
    P = torch.softmax(q @ k.transpose(-1, -2) / (2.0 * math.sqrt(3)), dim=-1)
    out, attn = mha(x, return_attention=True)
    assert_close(attn[:, 0], P, **F64)
    assert_close(out, mha.out(P @ v), **F64)


def test_fused_kernel_applies_temperature_and_mask():
    """The fused path (no attention returned) uses the same 1 / (tau sqrt(d_head)) and mask as eq. 1."""
    torch.manual_seed(5)
    mha = MultiHeadSelfAttention(8, 2, temperature=3.0).double()
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    mask = torch.ones(5, 5, dtype=torch.bool).tril()
    explicit, attn = mha(x, return_attention=True, attn_mask=mask)
    fused, _ = mha(x, attn_mask=mask)
    assert_close(fused, explicit, **F64)
    assert torch.count_nonzero(attn.triu(1)) == 0  # no weight on masked keys
    mha1 = MultiHeadSelfAttention(8, 2, temperature=1.0).double()  # same weights, tau = 1: tau matters
    mha1.load_state_dict(mha.state_dict())
    assert (mha1(x, attn_mask=mask)[0] - fused).abs().max() > 1e-3


def test_head_gates_zero_a_head():
    """Part III: head_gates[h] multiplies head h's output, before the output projection."""
    torch.manual_seed(2)
    mha = MultiHeadSelfAttention(8, 2, bias=False).double()
    x = torch.randn(1, 5, 8, dtype=torch.float64)
    full, _ = mha(x)
    zero, _ = mha(x, head_gates=torch.zeros(2))
    assert_close(zero, torch.zeros_like(zero), **F64)
    half, _ = mha(x, head_gates=torch.tensor([1.0, 0.0]))
    other, _ = mha(x, head_gates=torch.tensor([0.0, 1.0]))
    assert_close(half + other, full, **F64)
    scaled, _ = mha(x, head_gates=torch.tensor([0.5, 3.0]))  # linear in each gate
    assert_close(scaled, 0.5 * half + 3.0 * other, **F64)
    with pytest.raises(ValueError, match="head_gates must have shape"):
        mha(x, head_gates=torch.ones(3))


def test_per_example_head_gates_act_row_by_row():
    """(batch, heads) gates: example b is gated by row b."""
    torch.manual_seed(7)
    mha = MultiHeadSelfAttention(8, 2).double()
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    g = torch.tensor([[1.0, 0.0], [0.3, 2.0]], dtype=torch.float64)
    out, _ = mha(x, head_gates=g)
    for b in range(2):
        assert_close(out[b], mha(x[b:b + 1], head_gates=g[b])[0][0], **F64)


def test_pure_san_block_is_just_attention():
    torch.manual_seed(3)
    block = Block(8, 2, skip=False, mlp=False, layernorm=None).double()
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    y, _ = block(x)
    assert_close(y, block.attn(x)[0], **F64)


@pytest.mark.parametrize("layernorm", [None, "pre", "post"])
@pytest.mark.parametrize("skip", [True, False])
@pytest.mark.parametrize("mlp", [True, False])
def test_block_composes_its_sublayers_by_hand(layernorm, skip, mlp):
    """Chapter 1's switches with Noci et al.'s residual scale: each sublayer is ``skip * h + alpha f(h)``
    (post-LN: ``LN(skip * h + alpha f(h))``, pre-LN: ``skip * h + alpha f(LN h)``), attention then MLP."""
    torch.manual_seed(6)
    alpha = 0.3
    block = Block(8, 2, skip=skip, mlp=mlp, layernorm=layernorm, alpha=alpha).double()
    with torch.no_grad():  # distinct affine LayerNorms, so that norm1 and norm2 cannot be swapped unseen
        for norm in (block.norm1, block.norm2):
            if norm is not None:
                norm.weight.normal_(1.0, 0.3)
                norm.bias.normal_(0.0, 0.3)
    x = torch.randn(2, 5, 8, dtype=torch.float64)

    def sublayer(h, fn, norm):
        keep = h if skip else torch.zeros_like(h)
        if layernorm == "pre":
            return keep + alpha * fn(norm(h))
        y = keep + alpha * fn(h)
        return norm(y) if layernorm == "post" else y

    expected = sublayer(x, lambda h: block.attn(h)[0], block.norm1)
    if mlp:
        expected = sublayer(expected, block.mlp, block.norm2)
    y, attn = block(x, return_attention=True)
    assert_close(y, expected, **F64)
    assert attn.shape == (2, 2, 5, 5)


def test_block_passes_head_gates_and_mask_to_its_attention():
    torch.manual_seed(8)
    block = Block(8, 2, skip=True, mlp=False, layernorm=None, alpha=0.5).double()
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    g = torch.tensor([0.0, 1.0], dtype=torch.float64)
    mask = torch.ones(5, 5, dtype=torch.bool).tril()
    y, p = block(x, return_attention=True, head_gates=g, attn_mask=mask)
    assert_close(y, x + 0.5 * block.attn(x, head_gates=g, attn_mask=mask)[0], **F64)
    assert torch.count_nonzero(p.triu(1)) == 0
    assert (y - block(x)[0]).abs().max() > 1e-3  # the gate and mask changed the output


def test_network_hidden_states_and_attention_are_per_layer():
    """hidden[l + 1] = block_l(hidden[l]) and attns[l] is block l's attention on hidden[l] (not on the input)."""
    torch.manual_seed(9)
    net = SelfAttentionNetwork(3, 8, 2, skip=True, mlp=True, layernorm="pre").double()
    x = torch.randn(2, 4, 8, dtype=torch.float64)
    out, hidden, attns = net(x, return_attention=True)
    assert len(hidden) == 4 and len(attns) == 3
    assert_close(hidden[0], x, **F64)
    assert out is hidden[-1]
    for layer, block in enumerate(net.blocks):
        y, p = block(hidden[layer], return_attention=True)
        assert_close(hidden[layer + 1], y, **F64)
        assert_close(attns[layer], p, **F64)
    assert (attns[2] - net.blocks[2](x, return_attention=True)[1]).abs().max() > 1e-6
    assert net(x)[2] is None


def test_gaussian_init_variance():
    """Weights N(0, gain^2 / fan_in): std 2/20 = 0.1, estimated from 120,000 draws (s.e. 2e-4)."""
    torch.manual_seed(4)
    lin = torch.nn.Linear(400, 300)
    gaussian_init_(lin, gain=2.0)
    assert abs(lin.weight.std().item() - 2.0 / 20.0) < 0.005
    assert abs(lin.weight.mean().item()) < 0.002
    assert torch.count_nonzero(lin.bias) == 0


def test_bad_input():
    with pytest.raises(ValueError, match="not divisible"):
        MultiHeadSelfAttention(10, 3)
    with pytest.raises(ValueError, match=r"\(batch, n_tokens, 8\)"):
        MultiHeadSelfAttention(8, 2)(torch.randn(5, 8))
    with pytest.raises(ValueError, match="layernorm must be one of"):
        Block(8, 2, layernorm="middle")
    with pytest.raises(ValueError, match="temperature must be positive"):
        MultiHeadSelfAttention(8, 2, temperature=0)
    with pytest.raises(ValueError, match="alpha must be positive"):
        Block(8, 2, alpha=0.0)
    with pytest.raises(ValueError, match="depth"):
        SelfAttentionNetwork(0, 8, 2)


def test_attention_dropout_acts_only_while_training():
    """Attention dropout (chapter 10's recipe) drops attention weights in training mode only; the
    returned matrix is the one before dropout, on both code paths (fused kernel and explicit)."""
    import torch

    from attnbook.core.attention import MultiHeadSelfAttention

    torch.manual_seed(0)
    plain = MultiHeadSelfAttention(16, 4)
    dropped = MultiHeadSelfAttention(16, 4, dropout=0.5)
    dropped.load_state_dict(plain.state_dict())
    x = torch.randn(2, 6, 16)
    plain.eval(), dropped.eval()
    torch.testing.assert_close(dropped(x)[0], plain(x)[0])
    dropped.train()
    for ret in (False, True):
        out, attn = dropped(x, return_attention=ret)
        assert not torch.allclose(out, plain(x)[0])
        if ret:
            torch.testing.assert_close(attn.sum(-1), torch.ones(2, 4, 6))
    import pytest

    with pytest.raises(ValueError, match="dropout"):
        MultiHeadSelfAttention(16, 4, dropout=1.0)


def test_per_position_gates_scale_one_head_at_one_query_only():
    """Gates of shape (batch, heads, n) (Michel et al.'s per-token importance) scale head h's output at query
    position t alone: zeroing one entry changes that position's output and no other."""
    torch.manual_seed(0)
    attn = MultiHeadSelfAttention(8, 2)
    x = torch.randn(1, 4, 8)
    g = torch.ones(1, 2, 4)
    full, _ = attn(x, head_gates=g)
    g[0, 1, 2] = 0.0
    cut, _ = attn(x, head_gates=g)
    changed = (full - cut).abs().amax(dim=-1)[0]
    assert changed[2] > 1e-4 and torch.all(changed[[0, 1, 3]] == 0)
    with pytest.raises(ValueError, match="head_gates"):
        attn(x, head_gates=torch.ones(1, 2, 3))


def test_head_projection_is_each_heads_share_of_the_projections():
    """Head h's query, key and value are ``X W[h] + b[h]``, the model's own split of its projections, and the
    output projection is the sum over heads of ``head_h W_out[h]`` plus the whole bias."""
    torch.manual_seed(0)
    att = MultiHeadSelfAttention(12, 3)
    X = torch.randn(2, 5, 12)
    for which in ("q", "k", "v"):
        W, b = att.head_projection(which)
        assert W.shape == (3, 12, 4) and b.shape == (3, 1, 4)
        expected = att._split(getattr(att, which)(X))  # (batch, heads, n, d_head)
        torch.testing.assert_close(X[:, None] @ W + b, expected)
    heads = torch.randn(2, 3, 5, 4)
    W_o, b_o = att.head_projection("out")
    assert W_o.shape == (3, 4, 12) and b_o.shape == (12,)
    torch.testing.assert_close((heads @ W_o).sum(1) + b_o, att.out(heads.transpose(1, 2).reshape(2, 5, 12)))
    no_bias = MultiHeadSelfAttention(12, 3, bias=False)
    assert not no_bias.head_projection("q")[1].any()
    with pytest.raises(ValueError, match="which"):
        att.head_projection("o")
