"""Tests of attnbook.seq2seq (chapter 10's encoder-decoder) and the cross-attention of attnbook.attention."""

import pytest
import torch

from attnbook.attention import MultiHeadSelfAttention
from attnbook.seq2seq import (ATTENTION_KINDS, Seq2SeqConfig, Seq2SeqTransformer, causal_mask, load_model,
                              save_model, sinusoidal_positions)
from attnbook.train import train


def tiny(**kw):
    torch.manual_seed(0)
    cfg = dict(vocab_size=20, d_model=16, n_heads=2, enc_layers=2, dec_layers=1, d_ff=32, dropout=0.0, max_len=16)
    cfg.update(kw)
    return Seq2SeqTransformer(Seq2SeqConfig(**cfg))


def batch():
    src = torch.tensor([[5, 6, 7, 2], [8, 9, 2, 0]])
    tgt = torch.tensor([[1, 10, 11, 12, 2], [1, 13, 2, 0, 0]])
    return src, tgt


def test_cross_attention_is_backward_compatible_and_uses_context():
    torch.manual_seed(0)
    a = MultiHeadSelfAttention(8, 2)
    x, c = torch.randn(2, 3, 8), torch.randn(2, 5, 8)
    y0, _ = a(x)
    y1, _ = a(x, context=x)
    assert torch.allclose(y0, y1, atol=1e-6)
    y, p = a(x, return_attention=True, context=c)
    assert y.shape == (2, 3, 8) and p.shape == (2, 2, 3, 5)
    assert torch.allclose(p.sum(-1), torch.ones(2, 2, 3))
    y2, _ = a(x, context=c)  # fused kernel gives the same
    assert torch.allclose(y, y2, atol=1e-5)
    with pytest.raises(ValueError):
        a(x, context=torch.randn(3, 5, 8))
    with pytest.raises(ValueError):
        a(x, context=torch.randn(2, 5, 7))


def test_forward_shapes_attention_and_causality():
    m = tiny().eval()
    src, tgt = batch()
    logits, attns = m(src, tgt[:, :-1], return_attention=True)
    assert logits.shape == (2, 4, 20)
    assert set(attns) == set(ATTENTION_KINDS)
    assert len(attns["enc_self"]) == 2 and len(attns["dec_self"]) == 1
    assert attns["dec_cross"][0].shape == (2, 2, 4, 4)
    # padding keys get no attention; decoder self-attention is causal
    assert attns["enc_self"][0][1, :, :, 3].abs().max() == 0
    assert torch.all(attns["dec_self"][0][0].triu(1) == 0)
    # changing a later target token does not change earlier logits
    t2 = tgt[:, :-1].clone()
    t2[0, 3] = 15
    l2, _ = m(src, t2)
    assert torch.allclose(logits[0, :3], l2[0, :3], atol=1e-5)
    no_attn, none = m(src, tgt[:, :-1])
    assert none is None and torch.allclose(no_attn, logits, atol=1e-5)


def test_head_gates_forward_backward():
    m = tiny()
    src, tgt = batch()
    gates = {k: torch.full((m.cfg.layers(k), 2), 0.5, requires_grad=True) for k in ATTENTION_KINDS}
    loss = m.loss(src, tgt, head_gates=gates)
    loss.backward()
    for k in ATTENTION_KINDS:
        assert gates[k].grad is not None and gates[k].grad.abs().sum() > 0
    assert m.embed.weight.grad is not None
    # all-ones gates change nothing; a zero gate changes the output; per-example (batch, L, H) gates work
    m.eval()
    base, _ = m(src, tgt[:, :-1])
    ones = {k: torch.ones(m.cfg.layers(k), 2) for k in ATTENTION_KINDS}
    assert torch.allclose(m(src, tgt[:, :-1], head_gates=ones)[0], base, atol=1e-6)
    g = torch.ones(2, 2)
    g[0, 1] = 0
    assert not torch.allclose(m(src, tgt[:, :-1], head_gates={"enc_self": g})[0], base)
    per_ex = torch.ones(2, 1, 2)
    assert m(src, tgt[:, :-1], head_gates={"dec_cross": per_ex})[0].shape == base.shape


def test_bad_input():
    m = tiny()
    src, tgt = batch()
    with pytest.raises(ValueError):
        m(src, tgt[:, :-1], head_gates={"enc_self": torch.ones(3, 2)})
    with pytest.raises(ValueError):
        m(src, tgt[:, :-1], head_gates={"encoder": torch.ones(2, 2)})
    with pytest.raises(ValueError):
        m(src.float(), tgt)
    with pytest.raises(ValueError):
        m(torch.zeros(1, 40, dtype=torch.long), tgt)
    with pytest.raises(ValueError):
        Seq2SeqConfig(vocab_size=10, d_model=10, n_heads=3)
    with pytest.raises(ValueError):
        Seq2SeqConfig(vocab_size=0)
    with pytest.raises(ValueError):
        causal_mask(0)
    with pytest.raises(ValueError):
        sinusoidal_positions(4, 3)
    with pytest.raises(ValueError):
        m.greedy_decode(src, max_new_tokens=0)


def test_training_steps_greedy_decode_and_checkpoint(tmp_path):
    m = tiny()
    src, tgt = batch()
    hist = train(m, lambda step: (src, tgt), lambda mod, b: mod.loss(*b), steps=30, lr=3e-3,
                 progress=False, device="cpu")
    assert hist["loss"][-1] < hist["loss"][0]
    out = m.greedy_decode(src, max_new_tokens=6)
    assert len(out) == 2 and all(isinstance(t, int) for row in out for t in row)
    path = save_model(m, tmp_path / "m.safetensors", {"note": "test"})
    m2, meta = load_model(path)
    assert meta["note"] == "test" and meta["config"]["d_model"] == 16
    a, _ = m.eval()(src, tgt[:, :-1])
    b, _ = m2(src, tgt[:, :-1])
    assert torch.allclose(a, b, atol=5e-2)  # fp16 weights
    with pytest.raises(ValueError):
        load_model(tmp_path / "missing.safetensors")
    with pytest.raises(ValueError):
        save_model(m, tmp_path / "m.pt")
