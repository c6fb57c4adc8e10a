"""Tests of attnbook.heads (chapter 10: head confidence, relevance and roles) and the translation task."""

import pytest
import torch

from attnbook import heads as hd
from attnbook.seq2seq import Seq2SeqConfig, Seq2SeqTransformer


def onehot_attn(targets, n):
    """(1 layer, 1 batch, 1 head, n, n) attention with all weight on targets[q]."""
    a = torch.zeros(1, 1, 1, n, n)
    for q, k in enumerate(targets):
        a[0, 0, 0, q, k] = 1.0
    return a


def test_confidence_excludes_masked_keys_and_queries():
    a = torch.full((1, 1, 1, 3, 3), 1 / 3)
    a[0, 0, 0, :, 2] = 0.6  # heavy weight on the last key ("EOS")
    a[0, 0, 0, :, :2] = 0.2
    m_all = torch.ones(1, 3, dtype=torch.bool)
    m_no_eos = torch.tensor([[True, True, False]])
    assert torch.allclose(hd.head_confidence(a, m_all, m_all), torch.tensor([[0.6]]))
    assert torch.allclose(hd.head_confidence(a, m_no_eos, m_no_eos), torch.tensor([[0.2]]))
    with pytest.raises(ValueError):
        hd.head_confidence(a, torch.ones(1, 4, dtype=torch.bool), m_all)
    with pytest.raises(ValueError):
        hd.head_confidence(torch.ones(3, 3), m_all, m_all)


def test_positional_share_and_heads():
    n = 5
    prev = onehot_attn([0, 0, 1, 2, 3], n)  # previous token (first token attends to itself)
    m = torch.ones(1, n, dtype=torch.bool)
    s = hd.relative_position_share(prev, m, m)
    assert s.shape == (1, 1, 2)
    assert torch.allclose(s[0, 0], torch.tensor([0.8, 0.0]))
    assert hd.positional_heads(s, 0.8).item() and not hd.positional_heads(s, 0.9).item()
    with pytest.raises(ValueError):
        hd.positional_heads(s, 0.0)
    with pytest.raises(ValueError):
        hd.relative_position_share(torch.zeros(1, 1, 1, 3, 4), torch.ones(1, 3, dtype=torch.bool),
                                   torch.ones(1, 4, dtype=torch.bool))


def test_word_attention_aggregates_subwords():
    # tokens: [w0, w1a, w1b, EOS]; token 1 and 2 form word 1
    a = torch.tensor([[0.0, 0.5, 0.5, 0.0], [1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0], [0.25] * 4])
    w = hd.word_attention(a, [0, 1, 1], 2)
    assert torch.allclose(w, torch.tensor([[0.0, 1.0], [0.5, 0.0]]))
    with pytest.raises(ValueError):
        hd.word_attention(a, [0, 1, 2], 2)


def test_dependency_accuracy_and_baseline():
    # 3 words; arcs: word 0 is nsubj of word 1, word 2 is dobj of word 1
    wa = torch.zeros(1, 2, 3, 3)
    wa[0, 0, 0, 1] = 1  # head 0: subject -> verb
    wa[0, 1, 1, 2] = 1  # head 1: verb -> object
    arcs = [[[0, 1, "nsubj"], [2, 1, "dobj"]]]
    acc, n = hd.dependency_accuracy([wa], arcs, "nsubj", "dep->head")
    assert n == 1 and acc.tolist() == [[1.0, 0.0]]
    acc, _ = hd.dependency_accuracy([wa], arcs, "dobj", "head->dep")
    assert acc.tolist() == [[0.0, 1.0]]
    base, off = hd.positional_baseline(arcs * 3 + [[[2, 0, "nsubj"]]], "nsubj", "dep->head")
    assert off == 1 and base == pytest.approx(0.75)
    with pytest.raises(ValueError):
        hd.dependency_accuracy([wa], arcs, "amod", "dep->head")
    with pytest.raises(ValueError):
        hd.positional_baseline(arcs, "nsubj", "sideways")


def test_rare_token_share():
    n = 4
    a = onehot_attn([2, 2, 2, 0], n)
    ids = torch.tensor([[5, 6, 7, 8]])
    counts = torch.zeros(10, dtype=torch.long) + 100
    counts[7] = 1  # token at position 2 is the rarest
    m = torch.ones(1, n, dtype=torch.bool)
    share, chance = hd.rare_token_share(a, ids, counts, m, m)
    assert share.item() == pytest.approx(0.75) and chance == pytest.approx(0.25)
    with pytest.raises(ValueError):
        hd.rare_token_share(a, ids[:, :3], counts, m, m)


def test_ablation_relevance_normalised():
    torch.manual_seed(0)
    m = Seq2SeqTransformer(Seq2SeqConfig(vocab_size=12, d_model=16, n_heads=2, enc_layers=1, dec_layers=2,
                                         d_ff=16, dropout=0.0, max_len=8))
    src = torch.tensor([[4, 5, 6, 2]])
    tgt_in = torch.tensor([[1, 7, 8]])
    rel = hd.ablation_relevance(m, src, tgt_in)
    assert set(rel) == {"enc_self", "dec_self", "dec_cross"}
    assert rel["dec_cross"].shape == (2, 2)
    for v in rel.values():
        assert torch.all(v >= 0)
        s = v.sum(-1)
        assert torch.all((s - 1).abs() < 1e-5) or torch.all(s == 0)


def test_translation_task_data():
    from attnbook.tasks import translation as tr

    dev = tr.load_pairs("dev")
    assert len(dev) == 1000 and all(isinstance(x, str) for x in dev[0])
    ids = tr.encode([dev[0][0]])
    assert ids[0][-1] == tr.EOS
    batch = tr.pad(tr.encode([d[0] for d in dev[:3]]))
    assert batch.shape[0] == 3
    assert tr.decode([tr.load_tokenizer().encode(dev[0][1]).ids])[0] == dev[0][1]
    parses = tr.load_dev_parses()
    assert len(parses) == 1000
    p = parses[0]
    assert len(p["word_of_token"]) == len(ids[0]) - 1 and max(p["word_of_token"]) < len(p["words"])
    stream = tr.BatchStream(dev[:10], batch_size=4)
    sizes = [stream(i)[0].shape[0] for i in range(stream.batches_per_epoch)]
    assert sorted(sizes) == [2, 4, 4] and torch.all(stream(0)[1][:, 0] == tr.BOS)
    assert torch.equal(stream(3)[0], tr.BatchStream(dev[:10], batch_size=4)(3)[0])  # deterministic
    assert tr.source_token_counts().shape == (8000,)
    assert tr.bleu(["a b c d"], ["a b c d"]) == pytest.approx(100.0)
    with pytest.raises(ValueError):
        tr.load_pairs("valid")
    with pytest.raises(ValueError):
        tr.encode("a string")
    with pytest.raises(ValueError):
        tr.bleu(["a"], [])
