"""Tests of attnbook.hf.relevance (chapter "A translation model", all-MiniLM-L6-v2's head relevance): the
recomputed BERT states against the model's own, conservation from the sentence embedding to the token
embeddings, a head that provably carries nothing, a head that provably carries everything, and the rule against
its dense-Jacobian slow path, on a tiny random BERT."""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")

from attnbook.hf import relevance  # noqa: E402
from model_helpers import trained_looking_, use_dense_lrp_jacobians  # noqa: E402

def tiny_bert(seed: int = 0):
    config = transformers.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=32, max_position_embeddings=32)
    torch.manual_seed(seed)
    return trained_looking_(transformers.BertModel(config, add_pooling_layer=False).double().eval())


IDS = [2, 17, 9, 33, 41, 5, 3]


def test_bert_states_are_the_models_own():
    model = tiny_bert()
    first, states = relevance.forward_states(model, torch.tensor(IDS))
    hidden = model(torch.tensor([IDS]), output_hidden_states=True).hidden_states
    assert torch.allclose(first, hidden[0][0], atol=1e-12)
    for (x, a, x1, h, f, out), want in zip(states, hidden[1:]):
        assert torch.allclose(out, want[0], atol=1e-10)


def test_embedding_relevance_is_conserved_and_all_tokens_share_it():
    h = torch.randn(5, 4, dtype=torch.double)
    R = relevance.embedding_relevance(h)
    assert R.shape == (1, 5, 4) and abs(float(R.abs().sum()) - 1) < 1e-4
    # a positive coordinate pooled from positive token states: the z-rule's split by size
    h = torch.tensor([[1.0, 0.0], [3.0, 0.0]], dtype=torch.double)
    assert torch.allclose(relevance.embedding_relevance(h)[0, :, 0], torch.tensor([0.25, 0.75],
                          dtype=torch.double), atol=1e-4)


def test_bert_relevance_is_conserved_to_the_token_embeddings():
    heads, tokens = relevance.sentence_head_relevance(tiny_bert(), IDS)
    assert heads.shape == (2, 2) and tokens.shape == (len(IDS),)
    assert abs(float(tokens.sum()) - 1) < 1e-3


def test_a_bert_head_that_carries_nothing_has_no_relevance():
    model = tiny_bert()
    att = model.encoder.layer[1].attention
    with torch.no_grad():
        att.self.value.weight[8:].zero_()
        att.self.value.bias[8:].zero_()
        att.output.dense.bias.zero_()
    heads, _ = relevance.sentence_head_relevance(model, IDS)
    assert heads[1, 1] == 0 and abs(float(heads[1, 0])) > 1e-4 and heads[0].abs().min() > 1e-4


def test_when_one_head_routes_everything_it_takes_its_whole_layer():
    """A model with a known ranking: in every layer head 2 writes zeros and the attention output has no bias, so
    head 1 routes all of the layer's attention output; its share of every layer is then 1 and head 2's 0."""
    from attnbook.heads import lrp

    model = tiny_bert(1)
    with torch.no_grad():
        for layer in model.encoder.layer:
            layer.attention.self.value.weight[8:].zero_()
            layer.attention.self.value.bias[8:].zero_()
            layer.attention.output.dense.bias.zero_()
    shares = lrp.layer_shares(relevance.sentence_head_relevance(model, IDS)[0])
    torch.testing.assert_close(shares[:, 0].abs(), torch.ones(2, dtype=shares.dtype), atol=1e-3, rtol=0)
    assert shares[:, 1].abs().max() == 0


def test_bert_relevance_is_that_of_the_rule_with_autograd_s_dense_jacobians(monkeypatch):
    """The slow path on a 1-layer BERT (post-LN: both LayerNorms, the feed-forward and every head): the heads'
    relevance and the tokens' are the fast path's."""
    config = transformers.BertConfig(vocab_size=50, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=16, max_position_embeddings=16)
    torch.manual_seed(3)
    model = trained_looking_(transformers.BertModel(config, add_pooling_layer=False).double().eval())
    ids = [2, 17, 9, 33, 3]
    fast_heads, fast_tokens = relevance.sentence_head_relevance(model, ids)
    use_dense_lrp_jacobians(monkeypatch)
    slow_heads, slow_tokens = relevance.sentence_head_relevance(model, ids)
    assert fast_heads.abs().min() > 1e-3
    torch.testing.assert_close(slow_heads, fast_heads, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(slow_tokens, fast_tokens, atol=1e-6, rtol=1e-5)


def test_a_batch_of_ids_is_refused():
    with pytest.raises(ValueError, match="1-d id sequence"):
        relevance.sentence_head_relevance(tiny_bert(), [[2, 3]])


def test_a_model_without_bert_layers_is_refused():
    with pytest.raises(ValueError, match="BERT-style encoder"):
        relevance.sentence_head_relevance(torch.nn.Linear(2, 2), IDS)
