"""Tests of attnbook.hf.embeddings (MiniLM's sentence embeddings and task losses), and of Michel importance
through the head-gate hooks of attnbook.hf.gating."""

from __future__ import annotations

import math

import pytest
import torch
from torch.testing import assert_close

from attnbook.heads import importance as P
from attnbook.hf import embeddings as E
from attnbook.hf.gating import attach_head_gates


@pytest.fixture(scope="module")
def tiny_bert_and_tokenizer(tmp_path_factory):
    transformers = pytest.importorskip("transformers")
    folder = tmp_path_factory.mktemp("vocab")
    words = "in the beginning god created heavens and earth was without form void".split()
    (folder / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n")
    tokenizer = transformers.BertTokenizer(vocab_file=str(folder / "vocab.txt"))
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=len(words) + 5, hidden_size=16, num_hidden_layers=2,
                                  num_attention_heads=2, intermediate_size=32, max_position_embeddings=32,
                                  attn_implementation="eager")
    return transformers.BertModel(cfg).double().eval(), tokenizer


def test_mean_pooled_averages_the_real_tokens_only(tiny_bert_and_tokenizer):
    """sentence-transformers' mean pooling: padding positions are left out of the mean, so a sentence padded in
    a batch gets the embedding it gets alone."""
    model, tok = tiny_bert_and_tokenizer
    short, long = "in the beginning", "in the beginning god created the heavens and the earth"
    with torch.no_grad():
        batch = E.mean_pooled(model, tok, [short, long])
        alone = E.mean_pooled(model, tok, [short])
        enc = tok([short], return_tensors="pt")
        by_hand = model(**enc).last_hidden_state[0].mean(0)  # no padding: the plain mean over tokens
    assert batch.shape == (2, 16)
    assert_close(batch[0], alone[0], atol=1e-10, rtol=0)
    assert_close(alone[0], by_hand, atol=1e-12, rtol=0)
    with torch.no_grad():  # max_length=5 keeps [CLS] in the beginning [SEP]: the short sentence
        truncated = E.mean_pooled(model, tok, [long], max_length=5)
    assert_close(truncated[0], alone[0], atol=1e-10, rtol=0)
    assert (batch[1] - alone[0]).abs().max() > 1e-3


def test_importance_through_hf_gate_hooks_matches_finite_differences(tiny_bert_and_tokenizer):
    """Chapter "Pruning heads" scores MiniLM's heads with Michel importance through GateHooks: |dL/dxi_h| by autograd equals
    the central finite difference of the loss in xi_h (float64 model, step 1e-5: truncation error ~1e-10,
    rounding ~1e-11)."""
    model, tok = tiny_bert_and_tokenizer
    sentences = ["in the beginning god created", "the heavens and the earth", "the earth was without form"]
    positives = E.drop_words(sentences, 0.3, seed=1)
    hooks = attach_head_gates(model)

    def loss_fn(batch, masks):
        with hooks.gating(masks[""].double()):
            a = E.mean_pooled(model, tok, batch)
            p = E.mean_pooled(model, tok, positives)
        return E.contrastive_loss(a, p)

    try:
        imp = P.head_importance(loss_fn, torch.ones(2, 2), [sentences], normalize=False)[""]
        eps, fd = 1e-5, torch.zeros(2, 2)
        with torch.no_grad():
            for layer in range(2):
                for h in range(2):
                    up, down = torch.ones(2, 2, dtype=torch.float64), torch.ones(2, 2, dtype=torch.float64)
                    up[layer, h] += eps
                    down[layer, h] -= eps
                    fd[layer, h] = (loss_fn(sentences, {"": up}) - loss_fn(sentences, {"": down})) / (2 * eps)
    finally:
        hooks.remove()
    assert_close(imp, fd.abs(), atol=1e-8, rtol=1e-4)  # values ~1e-4; float32 storage of the gradient: 1e-7
    assert imp.min() > 1e-6  # every head's gate reaches the loss


def test_contrastive_loss_by_hand():
    """MultipleNegativesRankingLoss: cross-entropy of scale * cos(a_i, p_j) with target j = i. Here the cosines
    are [[1, 1/sqrt 2], [0, 1/sqrt 2]], so with scale s the loss is
    (log(1 + e^{s/sqrt 2 - s}) + log(1 + e^{-s/sqrt 2})) / 2."""
    a = torch.tensor([[1.0, 0.0], [0.0, 3.0]], dtype=torch.float64)
    p = torch.tensor([[2.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
    for scale in (20.0, 1.0):
        r = scale / math.sqrt(2)
        expected = (math.log1p(math.exp(r - scale)) + math.log1p(math.exp(-r))) / 2
        assert E.contrastive_loss(a, p, scale=scale).item() == pytest.approx(expected, rel=1e-12)
    with pytest.raises(ValueError):
        E.contrastive_loss(a[:1], p[:1])


def test_embedding_similarity_by_hand():
    full = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    assert E.embedding_similarity(full, full) == pytest.approx(1.0, abs=1e-6)
    pruned = torch.tensor([[2.0, 0.0], [1.0, 1.0]])  # cosines 1 and 1/sqrt(2)
    assert E.embedding_similarity(pruned, full) == pytest.approx((1 + 2**-0.5) / 2, abs=1e-6)
    with pytest.raises(ValueError):
        E.embedding_similarity(full, full[:1])


def test_drop_words():
    s = ["in the beginning god created the heavens", "and the earth"]
    assert E.drop_words(s, 0.0) == s
    dropped = E.drop_words(s, 0.5, seed=3)
    assert dropped == E.drop_words(s, 0.5, seed=3)  # seeded
    for before, after in zip(s, dropped):
        words = after.split()
        assert 1 <= len(words) <= len(before.split())
        it = iter(before.split())
        assert all(w in it for w in words)  # an ordered subsequence of the original words
    assert sum(len(a.split()) for a in dropped) < sum(len(b.split()) for b in s)
    assert len(E.drop_words(["a b c d e f g h"], 0.99, seed=0)[0].split()) == 1  # at least one word is kept
    with pytest.raises(ValueError):
        E.drop_words(s, 1.0)
