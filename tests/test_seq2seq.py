"""Tests of attnbook.seq2seq (chapter 10's encoder-decoder) and the cross-attention of attnbook.core.attention."""

import copy

import pytest
import torch
from torch.testing import assert_close

from attnbook.core.attention import MultiHeadSelfAttention
from attnbook.heads.seq2seq import (
    ATTENTION_KINDS,
    Seq2SeqConfig,
    Seq2SeqTransformer,
    causal_mask,
    load_model,
    save_model,
    sinusoidal_positions,
)
from attnbook.core.train import train


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
    assert_close(y0, y1, atol=1e-6, rtol=0)
    y, p = a(x, return_attention=True, context=c)
    assert y.shape == (2, 3, 8) and p.shape == (2, 2, 3, 5)
    assert_close(p.sum(-1), torch.ones(2, 2, 3), atol=1e-6, rtol=0)
    y2, _ = a(x, context=c)  # fused kernel gives the same
    assert_close(y, y2, atol=1e-5, rtol=0)
    # the keys and values come from the context: P = softmax(q(x) k(c)^T / sqrt(d_head)), out = P v(c)
    q, k, v = (t.view(2, -1, 2, 4).transpose(1, 2) for t in (a.q(x), a.k(c), a.v(c)))
    P = torch.softmax(q @ k.transpose(-1, -2) / 2.0, dim=-1)
    assert_close(p, P, atol=1e-6, rtol=0)
    assert_close(y, a.out((P @ v).transpose(1, 2).reshape(2, 3, 8)), atol=1e-5, rtol=0)
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
    assert_close(logits[0, :3], l2[0, :3], atol=1e-5, rtol=0)
    assert (logits[0, 3] - l2[0, 3]).abs().max() > 1e-4
    no_attn, none = m(src, tgt[:, :-1])
    assert none is None
    assert_close(no_attn, logits, atol=1e-5, rtol=0)


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
    assert_close(m(src, tgt[:, :-1], head_gates=ones)[0], base, atol=1e-6, rtol=0)
    g = torch.ones(2, 2)
    g[0, 1] = 0
    assert (m(src, tgt[:, :-1], head_gates={"enc_self": g})[0] - base).abs().max() > 1e-4
    # per-example (batch, L, H) gates: example b is gated by its own row
    per_ex = torch.ones(2, 1, 2)
    per_ex[1, 0, 0] = 0.0
    out = m(src, tgt[:, :-1], head_gates={"dec_cross": per_ex})[0]
    assert_close(out[0], base[0], atol=1e-6, rtol=0)
    assert_close(out[1], m(src, tgt[:, :-1], head_gates={"dec_cross": per_ex[1]})[0][1], atol=1e-6, rtol=0)


def test_loss_is_label_smoothed_cross_entropy_of_the_gated_model():
    """Chapter 10's training loss, by hand in float64: the mean over non-pad target tokens of
    (1 - eps) (-log p_y) + eps mean_v (-log p_v), with p from the model run with the head gates."""
    m = tiny().double().eval()
    src, tgt = batch()
    g = {"enc_self": torch.tensor([[1.0, 0.0], [0.5, 1.0]]), "dec_cross": torch.tensor([[0.0, 1.0]])}
    logits, _ = m(src, tgt[:, :-1], head_gates=g)
    logp = logits.log_softmax(-1)
    terms = []
    for b in range(tgt.shape[0]):
        for t in range(tgt.shape[1] - 1):
            y = int(tgt[b, t + 1])
            if y != m.cfg.pad_id:
                terms.append(0.9 * -logp[b, t, y] + 0.1 * -logp[b, t].mean())
    expected = torch.stack(terms).mean()
    assert len(terms) == 6  # 4 + 2 real target tokens after bos
    assert_close(m.loss(src, tgt, head_gates=g, label_smoothing=0.1), expected, atol=1e-12, rtol=1e-10)
    assert (m.loss(src, tgt, label_smoothing=0.1) - expected).abs() > 1e-4  # the gates matter
    assert (m.loss(src, tgt, head_gates=g) - expected).abs() > 1e-4  # the smoothing matters


def test_every_kind_of_gate_reaches_its_attention():
    """A zero gate on head (l, h) of a kind equals zeroing that head's columns of the output projection."""
    m = tiny(dec_layers=2).double().eval()
    src, tgt = batch()
    for kind, module in (("enc_self", lambda mm: mm.encoder[1].self_attn),
                         ("dec_self", lambda mm: mm.decoder[1].self_attn),
                         ("dec_cross", lambda mm: mm.decoder[0].cross_attn)):
        layer = 1 if kind != "dec_cross" else 0
        g = torch.ones(m.cfg.layers(kind), 2)
        g[layer, 1] = 0.0
        gated, _ = m(src, tgt[:, :-1], head_gates={kind: g})
        surgery = copy.deepcopy(m)
        with torch.no_grad():
            module(surgery).out.weight[:, 8:16] = 0.0  # d_model 16, head 1 = columns 8..15
        assert_close(gated, surgery(src, tgt[:, :-1])[0], atol=1e-12, rtol=1e-10, msg=kind)
        assert (gated - m(src, tgt[:, :-1])[0]).abs().max() > 1e-4, kind


def test_sinusoidal_positions_and_causal_mask_by_hand():
    """Vaswani et al. sec. 3.5: PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i + 1] = cos(p / 10000^(2i/d))."""
    import math

    pe = sinusoidal_positions(5, 8)
    for p in range(5):
        for i in range(4):
            assert pe[p, 2 * i].item() == pytest.approx(math.sin(p / 10000 ** (2 * i / 8)), abs=1e-6)
            assert pe[p, 2 * i + 1].item() == pytest.approx(math.cos(p / 10000 ** (2 * i / 8)), abs=1e-6)
    assert causal_mask(3).tolist() == [[True, False, False], [True, True, False], [True, True, True]]


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
    hist = train(m, lambda step: (src, tgt), lambda mod, b: mod.loss(*b), steps=60, lr=1e-2,
                 progress=False, device="cpu")
    assert hist["loss"][-1] < 0.1 * hist["loss"][0]  # 6.0 -> 0.06 on this seed: the pairs are memorised
    out = m.greedy_decode(src, max_new_tokens=6)
    assert len(out) == 2 and all(isinstance(t, int) for row in out for t in row)
    assert out == [[10, 11, 12], [13]]  # the memorised targets, without bos and eos
    path = save_model(m, tmp_path / "m.safetensors", {"note": "test"})
    m2, meta = load_model(path)
    assert meta["note"] == "test" and meta["config"]["d_model"] == 16
    a, _ = m.eval()(src, tgt[:, :-1])
    b, _ = m2(src, tgt[:, :-1])
    assert_close(a, b, atol=5e-2, rtol=0)  # fp16 weights: relative error 1e-3 per weight
    with pytest.raises(ValueError):
        load_model(tmp_path / "missing.safetensors")
    with pytest.raises(ValueError):
        save_model(m, tmp_path / "m.pt")
    with pytest.raises(ValueError, match="config"):
        save_model(m, tmp_path / "m2.safetensors", {"config": {"d_model": 16}})


def test_beam_search_is_exact_when_the_beam_holds_every_prefix():
    """With a beam as large as the number of prefixes, beam search is exhaustive: it returns the sequence
    of highest length-normalised log-probability among all that end in EOS within the step limit."""
    import itertools

    from attnbook.heads.seq2seq import Seq2SeqConfig, Seq2SeqTransformer

    torch.manual_seed(4)
    cfg = Seq2SeqConfig(vocab_size=5, d_model=8, n_heads=2, enc_layers=1, dec_layers=1, d_ff=16, dropout=0.0)
    model = Seq2SeqTransformer(cfg).eval()
    with torch.no_grad():  # make EOS likely enough that short sequences compete
        model.embed.weight[cfg.eos_id] *= 3
    src = torch.tensor([[3, 4, 2]])
    alpha, steps = 0.6, 3

    def score(ids):  # log p(ids + EOS) / lp(len + 1)
        y = torch.tensor([[cfg.bos_id] + ids + [cfg.eos_id]])
        logp = model(src, y[:, :-1])[0].detach().log_softmax(-1)[0]
        return float(logp.gather(-1, y[0, 1:, None]).sum()) / ((5 + len(ids) + 1) / 6) ** alpha

    words = [t for t in range(cfg.vocab_size) if t != cfg.eos_id]  # the decoder may emit any of them
    best = max((list(c) for m in range(steps) for c in itertools.product(words, repeat=m)), key=score)
    got = model.beam_decode(src, beam=64, length_penalty=alpha, max_new_tokens=steps)[0]
    assert got == best and score(got) == pytest.approx(score(best), abs=1e-6)
    assert model.beam_decode(src, beam=1, max_new_tokens=5) == model.greedy_decode(src, max_new_tokens=5)
    with pytest.raises(ValueError):
        model.beam_decode(src, beam=0)


def test_cached_decoding_step_matches_the_full_decoder():
    """Each incremental step (key-value cache) gives the logits of the full decoder on the prefix, with
    padding in the prefix and head gates on both decoder kinds."""
    from attnbook.heads.seq2seq import Seq2SeqConfig, Seq2SeqTransformer

    torch.manual_seed(2)
    cfg = Seq2SeqConfig(vocab_size=30, d_model=16, n_heads=4, enc_layers=2, dec_layers=2, d_ff=32, dropout=0.0)
    model = Seq2SeqTransformer(cfg).eval()
    src = torch.tensor([[5, 6, 7, 2], [8, 9, 2, 0]])
    prefix = torch.tensor([[1, 11, 12, 13, 14], [1, 15, 2, 0, 0]])  # the second row ended: pad after EOS
    gates = {"dec_self": torch.rand(2, 4), "dec_cross": torch.rand(2, 4)}
    with torch.no_grad():
        memory, src_mask, _ = model.encode(src, gates)
        full, _, _ = model.decode(prefix, memory, src_mask, gates)
        cache = model._start_cache(memory)
        for t in range(prefix.shape[1]):
            step = model._decode_step(prefix[:, t], t, src_mask, cache, gates)
            real = prefix[:, t] != cfg.pad_id
            assert_close(step[real], full[real, t], atol=1e-5, rtol=1e-5)
