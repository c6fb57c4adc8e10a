"""Tests of attnbook.heads.lrp (chapter "A translation model"): the official alpha-beta rule on cases with a known
answer, the analytic Jacobians against autograd, conservation through the whole model, and a head that
provably carries nothing."""

from __future__ import annotations

import pytest
import torch
from torch.func import jacrev

from attnbook.heads import lrp
from model_helpers import trained_looking_, use_dense_lrp_jacobians
from attnbook.heads.seq2seq import Seq2SeqConfig, Seq2SeqTransformer


def small_model(seed: int = 0) -> Seq2SeqTransformer:
    torch.manual_seed(seed)
    cfg = Seq2SeqConfig(vocab_size=23, d_model=16, n_heads=2, enc_layers=2, dec_layers=2, d_ff=32,
                        dropout=0.0, attention_dropout=0.0, max_len=16)
    return trained_looking_(Seq2SeqTransformer(cfg).double().eval())


SRC, TGT = [5, 9, 7, 11, 2], [1, 8, 6, 14, 2]


def test_positive_linear_layer_gives_the_z_rule():
    """With positive inputs and weights and no bias every impact is positive, and alpha-beta plus the
    rescaling is the plain z-rule R_i = sum_j R_j w_ji x_i / sum_i w_ji x_i."""
    torch.manual_seed(1)
    w, x = torch.rand(3, 4, dtype=torch.double), torch.rand(4, dtype=torch.double)
    R = torch.tensor([[1.0, 2.0, 0.5]], dtype=torch.double)
    got = lrp.relprop_jacobian(R, x, w, torch.zeros(3, dtype=torch.double))
    z = w * x
    expected = (R[0][:, None] * z / z.sum(1, keepdim=True)).sum(0)
    assert torch.allclose(got[0], expected, atol=1e-4)


def test_alpha_beta_splits_positive_and_negative_impacts_half_and_half():
    impact = torch.tensor([[3.0, 1.0, -2.0]])
    t = lrp.transition(impact)
    assert torch.allclose(t, torch.tensor([[0.375, 0.125, 0.5]]), atol=1e-5)


def test_residual_sum_splits_by_the_terms():
    a = torch.tensor([[1.0, 3.0]], dtype=torch.double)
    b = torch.tensor([[3.0, 1.0]], dtype=torch.double)
    Ra, Rb = lrp.relprop_add(torch.ones(1, 1, 2, dtype=torch.double), a, b)
    assert torch.allclose(Ra, torch.tensor([[[0.25, 0.75]]], dtype=torch.double), atol=1e-4)
    assert torch.allclose(Ra + Rb, torch.ones(1, 1, 2, dtype=torch.double), atol=1e-4)


def test_layer_norm_jacobian_is_autograd_s():
    torch.manual_seed(2)
    norm = torch.nn.LayerNorm(6).double()
    with torch.no_grad():
        norm.weight.uniform_(0.5, 2.0)
    x = torch.randn(3, 6, dtype=torch.double)
    auto = torch.stack([jacrev(norm)(row) for row in x])
    assert torch.allclose(lrp.layer_norm_jacobian(x, norm), auto, atol=1e-10)


def test_attention_rule_without_the_dense_jacobian_is_the_dense_rule():
    torch.manual_seed(3)
    n, m, d = 4, 6, 3
    q, k, v = (torch.randn(s, d, dtype=torch.double) for s in (n, m, m))
    mask = torch.ones(n, m, dtype=torch.bool).tril(1)
    R = torch.randn(2, n, d, dtype=torch.double)
    fast = lrp.relprop_attention(R, q, k, v, 0.7, mask)
    jq, jk, jv = jacrev(lambda a, b, c: lrp.attention_core(a, b, c, 0.7, mask), argnums=(0, 1, 2))(q, k, v)
    jac = torch.cat([jq.reshape(n * d, n * d), jk.reshape(n * d, m * d), jv.reshape(n * d, m * d)], 1)
    x = torch.cat([q.flatten(), k.flatten(), v.flatten()])
    dense = lrp.relprop_jacobian(R.reshape(2, -1), x, jac, torch.zeros(n * d, dtype=torch.double))
    for got, want in zip(fast, dense.split([n * d, m * d, m * d], 1)):
        assert torch.allclose(got.reshape(2, -1), want, atol=1e-12)


def test_relevance_is_conserved_through_the_whole_model():
    src_rel, tgt_rel = lrp.token_relevance(small_model(), SRC, TGT)
    assert src_rel.shape == (len(TGT) - 1, len(SRC)) and tgt_rel.shape == (len(TGT) - 1, len(TGT) - 1)
    total = src_rel.sum(1) + tgt_rel.sum(1)
    assert torch.allclose(total, torch.ones_like(total), atol=1e-3)
    assert (tgt_rel.triu(1).abs() < 1e-6).all(), "a target token's logit cannot depend on later tokens"


def test_a_head_that_carries_nothing_has_no_relevance():
    """Head 1 of the encoder's first layer writes zeros (value weights and bias zero) and the output
    projection has no bias to share out: its relevance is exactly zero, while the other head's is not."""
    model = small_model()
    attn = model.encoder[0].self_attn
    with torch.no_grad():
        attn.v.weight[8:].zero_()
        attn.v.bias[8:].zero_()
        attn.out.bias.zero_()
    rel = lrp.sentence_head_relevance(model, SRC, TGT)
    assert rel["enc_self"].shape == (len(TGT) - 1, 2, 2)
    assert rel["enc_self"][:, 0, 1].abs().max() == 0
    assert rel["enc_self"][:, 0, 0].abs().min() > 1e-4


def test_head_relevance_is_a_share_of_each_layer():
    model = small_model()
    shares = lrp.head_relevance(model, [SRC, SRC[1:]], [TGT, TGT])
    assert set(shares) == {"enc_self", "dec_self", "dec_cross"}
    assert shares["dec_cross"].shape == (2, 2)
    per_token = lrp.layer_shares(lrp.sentence_head_relevance(model, SRC, TGT)["enc_self"])
    assert torch.allclose(per_token.abs().sum(-1), torch.ones(len(TGT) - 1, 2, dtype=per_token.dtype),
                          atol=1e-3)


def test_bad_input_is_refused():
    model = small_model()
    with pytest.raises(ValueError, match="unpadded"):
        lrp.sentence_head_relevance(model, [5, 0, 2], TGT)
    with pytest.raises(ValueError, match="bos and eos"):
        lrp.sentence_head_relevance(model, SRC, [1])
    with pytest.raises(ValueError, match="as many sources"):
        lrp.head_relevance(model, [SRC], [])


def test_shipped_relevance_file_loads():
    rec = lrp.load_relevance("lrp_relevance", "quick")
    assert rec["relevance"]["enc_self"].shape == (6, 8) and len(rec["halves"]["dec_cross"]) == 2
    assert rec["meta"]["run"] == "lrp_relevance" and rec["meta"]["preset"] == "quick"
    assert not lrp.load_relevance("lrp_relevance", "paper")
    with pytest.raises(ValueError, match="expected run"):
        lrp.load_relevance("lrp_relevance_quick.json")
    with pytest.raises(ValueError, match="not a head-relevance file"):
        lrp.relevance_tables({"relevance": {}})



def test_when_one_head_routes_everything_it_takes_its_whole_layer():
    """A model with a known ranking: in every attention of every kind, head 2 writes zeros and the output
    projections have no bias, so head 1 routes all of each layer's attention output; its share of every layer is
    then 1 and head 2's 0 (a rule that spread relevance evenly, or mixed up the heads' slices, fails)."""
    model = small_model(1)
    attentions = [layer.self_attn for layer in model.encoder] + [
        a for layer in model.decoder for a in (layer.self_attn, layer.cross_attn)]
    with torch.no_grad():
        for attn in attentions:
            attn.v.weight[8:].zero_()
            attn.v.bias[8:].zero_()
            attn.out.bias.zero_()
    shares = lrp.head_relevance(model, [SRC, SRC[1:]], [TGT, TGT])
    for kind, share in shares.items():
        torch.testing.assert_close(share[:, 0].abs(), torch.ones(2, dtype=share.dtype), atol=1e-3, rtol=0,
                                   msg=kind)
        assert share[:, 1].abs().max() == 0, kind


def test_the_whole_model_s_relevance_is_that_of_the_rule_with_autograd_s_dense_jacobians(monkeypatch):
    """The slow path: every closed form of the propagation (the attention Jacobian, LayerNorm's, a linear
    layer's weights) replaced by the dense Jacobian autograd computes, fed to the rule one relevance row and
    one sample at a time (lrp.relprop_jacobian, or relprop_tokenwise without a Jacobian). On a 1+1-layer
    model the heads' relevance, of every kind, is the same."""
    torch.manual_seed(5)
    cfg = Seq2SeqConfig(vocab_size=19, d_model=8, n_heads=2, enc_layers=1, dec_layers=1, d_ff=16,
                        dropout=0.0, attention_dropout=0.0, max_len=12)
    model = trained_looking_(Seq2SeqTransformer(cfg).double().eval())
    src, tgt = [4, 9, 7, 2], [1, 8, 6, 2]
    fast = lrp.sentence_head_relevance(model, src, tgt)

    use_dense_lrp_jacobians(monkeypatch)
    slow = lrp.sentence_head_relevance(model, src, tgt)
    assert set(slow) == set(fast) == {"enc_self", "dec_self", "dec_cross"}
    for kind in fast:
        assert fast[kind].abs().max() > 1e-3
        torch.testing.assert_close(slow[kind], fast[kind], atol=1e-9, rtol=1e-7, msg=kind)


def test_a_head_that_writes_a_tenth_as_much_gets_less_relevance_but_some():
    """A graded known ranking, both heads carrying signal: in every attention, head 2's value rows are scaled
    by 0.1, so it writes a tenth of what it did; in every layer head 1 gets the larger share and head 2 a
    share above zero (a rule that mixed up the heads' slices, or gave a head its share by whether it is
    zero, fails)."""
    model = small_model(1)
    attentions = [layer.self_attn for layer in model.encoder] + [
        a for layer in model.decoder for a in (layer.self_attn, layer.cross_attn)]
    with torch.no_grad():
        for attn in attentions:
            attn.v.weight[8:] *= 0.1
            attn.v.bias[8:] *= 0.1
    shares = lrp.head_relevance(model, [SRC, SRC[1:]], [TGT, TGT])
    for kind, share in shares.items():
        assert (share[:, 0].abs() > share[:, 1].abs()).all(), kind
        assert (share[:, 1].abs() > 1e-3).all(), kind
