"""Tests of attnbook.hf.relevance.live_gap (chapter "A translation model": MiniLM's relevance recomputed live
against the shipped file), on a tiny random BERT with a stand-in tokenizer."""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")

from attnbook.heads import lrp  # noqa: E402
from attnbook.hf import relevance  # noqa: E402
from model_helpers import trained_looking_  # noqa: E402


def tiny_bert():
    config = transformers.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=32, max_position_embeddings=32)
    torch.manual_seed(0)
    return trained_looking_(transformers.BertModel(config, add_pooling_layer=False).double().eval())


def tokenizer(text, truncation=True, max_length=128):
    """Words to ids by length, between [CLS] = 2 and [SEP] = 3, cut at ``max_length``."""
    ids = [2] + [4 + len(w) for w in text.split()] + [3]
    return {"input_ids": ids[:max_length] if truncation else ids}


TEXTS = ["in the beginning", "and the earth was without form"]


def test_live_gap_is_zero_for_the_models_own_relevance_and_sees_a_change():
    model = tiny_bert()
    shipped = [{"enc_self": lrp.layer_shares(relevance.sentence_head_relevance(
        model, tokenizer(t)["input_ids"])[0])} for t in TEXTS]
    assert relevance.live_gap(model, tokenizer, TEXTS, shipped) < 1e-12
    shipped[0]["enc_self"] = shipped[0]["enc_self"] + torch.tensor([[0.0, 0.0], [0.0, 0.125]], dtype=torch.float)
    assert relevance.live_gap(model, tokenizer, TEXTS, shipped) == pytest.approx(0.125)
    # tokenised as the shipping script did: cut at max_length, the sentence is another one
    assert relevance.live_gap(model, tokenizer, TEXTS[1:], shipped[1:], max_length=4) > 1e-3
    with pytest.raises(ValueError):
        relevance.live_gap(model, tokenizer, TEXTS[:1], shipped)
