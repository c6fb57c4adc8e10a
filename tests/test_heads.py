"""Tests of attnbook.heads.roles (chapter 10: head confidence, relevance and roles) and the translation task."""

import pytest
import torch
from torch.testing import assert_close

from attnbook import stats
from attnbook.heads import roles as hd
from attnbook.claims import papers
from attnbook.heads.seq2seq import Seq2SeqConfig, Seq2SeqTransformer


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
    assert_close(hd.head_confidence(a, m_all, m_all), torch.tensor([[0.6]]), atol=1e-6, rtol=0)
    assert_close(hd.head_confidence(a, m_no_eos, m_no_eos), torch.tensor([[0.2]]), atol=1e-6, rtol=0)
    with pytest.raises(ValueError):
        hd.head_confidence(a, torch.ones(1, 4, dtype=torch.bool), m_all)
    with pytest.raises(ValueError):
        hd.head_confidence(torch.ones(3, 3), m_all, m_all)


def test_confidence_averages_the_row_maxima_of_real_queries():
    """Voita et al. sec. 4.1: mean over the real queries of max_k P[q, k] over real keys. Row maxima 0.5, 0.9 and
    (EOS query) 1.0: with the EOS query masked the confidence is (0.5 + 0.9) / 2; with key 0 masked too the
    first row's maximum over keys 1, 2 is 0.3."""
    a = torch.tensor([[0.5, 0.3, 0.2], [0.05, 0.9, 0.05], [0.0, 0.0, 1.0]]).reshape(1, 1, 1, 3, 3)
    queries = torch.tensor([[True, True, False]])
    keys = torch.ones(1, 3, dtype=torch.bool)
    assert hd.head_confidence(a, queries, keys).item() == pytest.approx(0.7, abs=1e-6)
    assert hd.head_confidence(a, queries, torch.tensor([[False, True, True]])).item() == pytest.approx(0.6, abs=1e-6)


def test_positional_share_counts_real_queries_and_real_keys_only():
    """Queries 0..2 attend to +1, query 3 (masked) to -1; a masked key never wins the arg-max."""
    n = 4
    a = onehot_attn([1, 2, 3, 2], n)
    queries = torch.tensor([[True, True, True, False]])
    keys = torch.ones(1, n, dtype=torch.bool)
    assert_close(hd.relative_position_share(a, queries, keys)[0, 0], torch.tensor([0.0, 1.0]), atol=1e-6, rtol=0)
    # mask key 3: query 2's maximum (weight 1 on key 3) is gone, its arg-max falls back to the largest real key
    b = a.clone()
    b[0, 0, 0, 2] = torch.tensor([0.1, 0.3, 0.0, 0.6])  # real keys 0, 1: the maximum is key 1, offset -1
    share = hd.relative_position_share(b, queries, torch.tensor([[True, True, True, False]]))[0, 0]
    assert_close(share, torch.tensor([1 / 3, 2 / 3]), atol=1e-6, rtol=0)  # queries 0, 1 still at +1


def test_positional_share_and_heads():
    n = 5
    prev = onehot_attn([0, 0, 1, 2, 3], n)  # previous token (first token attends to itself)
    m = torch.ones(1, n, dtype=torch.bool)
    s = hd.relative_position_share(prev, m, m)
    assert s.shape == (1, 1, 2)
    assert_close(s[0, 0], torch.tensor([0.8, 0.0]), atol=1e-6, rtol=0)
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
    assert_close(w, torch.tensor([[0.0, 1.0], [0.5, 0.0]]), atol=1e-6, rtol=0)
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
    assert off == 1 and base == pytest.approx(0.75, abs=1e-12)
    with pytest.raises(ValueError):
        hd.dependency_accuracy([wa], arcs, "amod", "dep->head")
    with pytest.raises(ValueError):
        hd.positional_baseline(arcs, "nsubj", "sideways")


def test_syntactic_head_table():
    wa = torch.zeros(2, 2, 3, 3)  # (layers, heads, W, W)
    wa[1, 0, 0, 1] = 1  # layer 2 head 1: subject -> verb
    wa[0, 1, 1, 2] = 1  # layer 1 head 2: verb -> object
    arcs = [[[0, 1, "nsubj"], [2, 1, "dobj"]], [[2, 0, "nsubj"]]]
    wa2 = torch.zeros(2, 2, 3, 3)
    wa2[:, :, 2, 1] = 1  # in the second sentence every head misses the subject's verb
    rows = hd.syntactic_head_table([wa, wa2], arcs,
                                   [("nsubj", "dep->head", "s->v"), ("dobj", "head->dep", "v->o")])
    assert [r["reading"] for r in rows] == ["s->v", "v->o"]
    assert rows[0]["head"] == (2, 1) and rows[1]["head"] == (1, 2)
    assert rows[0]["best"] == 0.5 and rows[0]["n"] == 2 and rows[1]["best"] == 1.0
    # nsubj offsets head - dep: +1 and -2, so the most frequent offset is the first seen, +1, for half the arcs
    assert (rows[0]["base"], rows[0]["offset"]) == (0.5, 1) and (rows[1]["base"], rows[1]["offset"]) == (1.0, 1)
    assert len(hd.DEPENDENCY_RELATIONS) == 8


def test_the_papers_syntactic_heads_are_relations_the_book_tests():
    readings = {reading for _, _, reading in hd.DEPENDENCY_RELATIONS}
    assert set(papers.number("voita2019", "syntactic_heads_wmt").value) <= readings


def test_rare_token_share():
    n = 4
    a = onehot_attn([2, 2, 2, 0], n)
    ids = torch.tensor([[5, 6, 7, 8]])
    counts = torch.zeros(10, dtype=torch.long) + 100
    counts[7] = 1  # token at position 2 is the rarest
    m = torch.ones(1, n, dtype=torch.bool)
    share, chance = hd.rare_token_share(a, ids, counts, m, m)
    assert share.item() == pytest.approx(0.75, abs=1e-6) and chance == pytest.approx(0.25, abs=1e-6)
    # a padding key is never "the rarest token": with key 2 masked, the rarest real key is key 0 (count 50)
    counts[5] = 50
    keys = torch.tensor([[True, True, False, True]])
    queries = torch.tensor([[True, True, True, False]])
    a2 = onehot_attn([0, 0, 2, 0], n)  # query 2's only weight is on the masked key: its arg-max is key 0
    share, chance = hd.rare_token_share(a2, ids, counts, queries, keys)
    assert share.item() == pytest.approx(1.0, abs=1e-6) and chance == pytest.approx(1 / 3, abs=1e-6)
    with pytest.raises(ValueError):
        hd.rare_token_share(a, ids[:, :3], counts, m, m)


def test_rare_token_statistics_keep_only_sentences_with_a_rare_token():
    """Sec. 5.3's condition: the second sentence's rarest token is among the most frequent, so only the
    first is counted; ranks are 0 for the most frequent token."""
    counts = torch.tensor([0, 0, 0, 0, 0, 90, 80, 1, 70, 60])
    ranks = hd.frequency_ranks(counts)
    assert ranks[5] == 0 and ranks[7] == 4 and ranks[9] == 3
    ids = torch.tensor([[5, 6, 7, 8], [5, 6, 8, 9]])
    a = torch.cat([onehot_attn([2, 2, 2, 0], 4), onehot_attn([3, 3, 3, 3], 4)], dim=1)
    m = torch.ones(2, 4, dtype=torch.bool)
    share, chance, queries, sentences = hd.rare_token_statistics(a, ids, counts, ranks, m, m, outside_top=4)
    assert share.item() == pytest.approx(0.75, abs=1e-6) and (queries, sentences) == (4.0, 1.0)
    assert chance == pytest.approx(0.25, abs=1e-6)
    assert hd.rare_token_statistics(a, ids, counts, ranks, m, m, outside_top=5) is None


def _relevance_model():
    torch.manual_seed(0)
    return Seq2SeqTransformer(Seq2SeqConfig(vocab_size=12, d_model=16, n_heads=2, enc_layers=2, dec_layers=2,
                                            d_ff=16, dropout=0.0, max_len=8)).double()


def _attention_module(model, kind, layer):
    if kind == "enc_self":
        return model.encoder[layer].self_attn
    return model.decoder[layer].self_attn if kind == "dec_self" else model.decoder[layer].cross_attn


def test_ablation_relevance_is_the_drop_of_the_top_logit_when_a_head_is_removed():
    """Chapter 10's occlusion relevance, brute force: remove head (l, h) by zeroing its columns of the output
    projection (no gates involved) and average the drop of the full model's top-1 logit over the real target
    tokens (the second sentence has one pad position)."""
    import copy

    model = _relevance_model().eval()
    src = torch.tensor([[4, 5, 6, 2], [7, 8, 2, 0]])
    tgt_in = torch.tensor([[1, 7, 8], [1, 9, 0]])
    real = tgt_in != 0
    with torch.no_grad():
        logits, _ = model(src, tgt_in)
        top = logits.argmax(-1, keepdim=True)
        base = logits.gather(-1, top)[..., 0]
    raw = hd.ablation_relevance(model, src, tgt_in, normalise=False)
    assert set(raw) == {"enc_self", "dec_self", "dec_cross"}
    for kind, rel in raw.items():
        assert rel.shape == (2, 2)
        for layer in range(2):
            for h in range(2):
                pruned = copy.deepcopy(model)
                with torch.no_grad():
                    _attention_module(pruned, kind, layer).out.weight[:, 8 * h: 8 * (h + 1)] = 0.0
                    drop = base - pruned(src, tgt_in)[0].gather(-1, top)[..., 0]
                expected = drop[real].mean()
                assert rel[layer, h].item() == pytest.approx(expected.item(), rel=1e-6, abs=1e-9), (kind, layer, h)
        assert rel.abs().max() > 1e-3, kind  # removing a head moves the logit
    # normalised: the non-negative parts of each layer, divided by their sum
    normed = hd.ablation_relevance(model, src, tgt_in)
    for kind, rel in raw.items():
        pos = rel.clamp(min=0)
        torch.testing.assert_close(normed[kind], pos / pos.sum(-1, keepdim=True).clamp(min=1e-12),
                                   atol=1e-6, rtol=0, msg=kind)
    only = hd.ablation_relevance(model, src, tgt_in, kinds=["dec_cross"], normalise=False)
    assert set(only) == {"dec_cross"}
    torch.testing.assert_close(only["dec_cross"], raw["dec_cross"], atol=1e-9, rtol=0)


def test_translation_task_data():
    from attnbook.heads import translation as tr

    dev = tr.load_pairs("dev")
    assert len(dev) == 985 and all(isinstance(x, str) for x in dev[0])  # 1000 less 15 also in train
    ids = tr.encode([dev[0][0]])
    assert ids[0][-1] == tr.EOS
    batch = tr.pad(tr.encode([d[0] for d in dev[:3]]))
    assert batch.shape[0] == 3
    assert tr.decode([tr.load_tokenizer().encode(dev[0][1]).ids])[0] == dev[0][1]
    parses = tr.load_dev_parses()
    assert len(parses) == len(dev)
    p = parses[0]
    assert len(p["word_of_token"]) == len(ids[0]) - 1 and max(p["word_of_token"]) < len(p["words"])
    stream = tr.BatchStream(dev[:10], batch_size=4)
    sizes = [stream(i)[0].shape[0] for i in range(stream.batches_per_epoch)]
    assert sorted(sizes) == [2, 4, 4] and torch.all(stream(0)[1][:, 0] == tr.BOS)
    assert torch.equal(stream(3)[0], tr.BatchStream(dev[:10], batch_size=4)(3)[0])  # deterministic
    assert tr.source_token_counts().shape == (8000,)
    assert stats.bleu(["a b c d"], ["a b c d"]) == pytest.approx(100.0, abs=1e-9)
    with pytest.raises(ValueError):
        tr.load_pairs("valid")
    with pytest.raises(ValueError):
        tr.encode("a string")
    with pytest.raises(ValueError):
        stats.bleu(["a"], [])


def test_dev_and_test_share_no_verse_with_train():
    from attnbook.heads import translation as tr

    train = tr.load_pairs("train")
    en, es = {e for e, _ in train}, {s for _, s in train}
    for split in ("dev", "test"):
        pairs = tr.load_pairs(split)
        assert pairs and not any(e in en or s in es for e, s in pairs)
    # the parses stay aligned with the filtered dev verses: each parse's words spell its sentence
    for (e, _), p in list(zip(tr.load_pairs("dev"), tr.load_dev_parses()))[::97]:
        assert "".join(p["words"]).replace(" ", "") == e.replace(" ", "")


def test_token_batches_fill_a_token_budget():
    from attnbook.heads import translation as tr

    pairs = tr.load_pairs("dev")[:300]
    stream = tr.BatchStream(pairs, max_len=96, max_tokens=400, seed=1)
    seen = []
    for i in range(stream.batches_per_epoch):
        src, tgt = stream(i)
        assert src.shape[0] * max(src.shape[1], tgt.shape[1]) <= 400 or src.shape[0] == 1
        seen.append(src.shape[0])
    assert sum(seen) == 300 and len(set(seen)) > 1  # every pair once; short verses in bigger batches
    assert stream.epochs(stream.batches_per_epoch) == 1.0
    assert torch.equal(stream(stream.batches_per_epoch + 2)[0],
                       tr.BatchStream(pairs, max_len=96, max_tokens=400, seed=1)(stream.batches_per_epoch + 2)[0])
    with pytest.raises(ValueError):
        tr.BatchStream(pairs, max_len=96, max_tokens=50)


def test_role_statistics_find_planted_heads():
    """A model whose encoder attention is replaced by a planted previous-token pattern (head 0) and an
    EOS-sink pattern (head 1) is read back exactly."""
    from attnbook.heads.seq2seq import Seq2SeqConfig, Seq2SeqTransformer

    torch.manual_seed(0)
    model = Seq2SeqTransformer(Seq2SeqConfig(vocab_size=50, d_model=8, n_heads=2, enc_layers=1, dec_layers=1,
                                             d_ff=16))
    src = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 11, 2, 0]])
    tgt = torch.tensor([[1, 5, 6, 2], [1, 7, 2, 0]])
    lens = (src != 0).sum(1)

    def planted(x, return_attention=False, head_gates=None, attn_mask=None, context=None):
        b, n, _ = x.shape
        p = torch.zeros(b, 2, n, n)
        for i in range(b):
            L = int(lens[i])
            for q in range(n):
                p[i, 0, q, max(q - 1, 0)] = 1.0  # previous token (query 0 on itself)
                p[i, 1, q, L - 1] = 1.0  # the EOS
        return torch.zeros_like(x), p

    model.encoder[0].self_attn.forward = planted
    stats = hd.role_statistics(model, src, tgt)["enc_self"]
    # queries counted: real tokens except EOS (4 + 3); the previous token for all but each first token
    assert stats["prev"][0][0] == pytest.approx(5 / 7, abs=1e-4)
    assert stats["sink"][0][1] == pytest.approx(1.0) and stats["sink"][0][0] == 0.0
    assert stats["next"][0][0] == 0.0
    # confidence excludes EOS as a key: the sink head's mass is all on EOS, so its confidence is 0
    assert stats["confidence"][0][1] == pytest.approx(0.0) and stats["confidence"][0][0] == pytest.approx(1.0)


def test_head_roles_reads_planted_heads_and_chance_levels():
    """head_roles pools batches by query counts and reads a planted previous-token head and EOS-sink
    head; chance is 1/n for the encoder and the mean of 1/t for causal attention."""
    from attnbook.heads.seq2seq import Seq2SeqConfig, Seq2SeqTransformer

    torch.manual_seed(0)
    model = Seq2SeqTransformer(Seq2SeqConfig(vocab_size=50, d_model=8, n_heads=2, enc_layers=1, dec_layers=1,
                                             d_ff=16))
    src_ids = [[5, 6, 7, 8, 2], [9, 10, 11, 2], [12, 13, 2]]
    tgt_ids = [[1, 5, 6, 2], [1, 7, 2], [1, 8, 9, 10, 2]]

    def planted(x, return_attention=False, head_gates=None, attn_mask=None, context=None):
        b, n, _ = x.shape
        lens = attn_mask[:, 0, 0, :].sum(-1)  # real keys per verse
        p = torch.zeros(b, 2, n, n)
        for i in range(b):
            for q in range(n):
                p[i, 0, q, max(q - 1, 0)] = 1.0
                p[i, 1, q, int(lens[i]) - 1] = 1.0
        return torch.zeros_like(x), p

    model.encoder[0].self_attn.forward = planted
    counts = torch.arange(50, 0, -1)  # token t is rarer than t - 1: the rarest of a verse is its largest id
    roles = hd.head_roles(model, src_ids, tgt_ids, token_counts=counts, rare_outside_top=0, batch_size=2)
    enc = roles["enc_self"]
    # queries: 4 + 3 + 2 content tokens; previous token for all but the first of each verse: 6 / 9
    assert enc["prev"][0, 0] == pytest.approx(6 / 9, abs=1e-6)
    assert enc["sink"][0, 1] == pytest.approx(1.0) and enc["confidence"][0, 1] == pytest.approx(0.0)
    assert enc["chance"] == pytest.approx((4 * 1 / 4 + 3 * 1 / 3 + 2 * 1 / 2) / 9)
    # the rarest token (largest id) is the last content token; only the EOS query (not counted) has it
    # as its previous token
    assert enc["rare"][0, 0] == pytest.approx(0.0) and enc["rare_sentences"] == 3
    # decoder queries after BOS see 1, 2, ... content keys: (1 + 1/2) + 1 + (1 + 1/2 + 1/3) over 6 queries
    assert roles["dec_self"]["chance"] == pytest.approx((1 + 1 / 2 + 1 + 1 + 1 / 2 + 1 / 3) / 6)
    assert hd.causal_chance(torch.ones(1, 3, dtype=torch.bool), torch.ones(1, 3, dtype=torch.bool)) == \
        pytest.approx((1 + 1 / 2 + 1 / 3) / 3)
    with pytest.raises(ValueError):
        hd.head_roles(model, src_ids, tgt_ids[:2])


def test_strongest_role_is_the_largest_share():
    roles = {"prev": torch.tensor([[0.9, 0.1]]), "next": torch.tensor([[0.2, 0.3]]), "rare": torch.tensor([[0.0, 0.4]])}
    assert hd.strongest_role(roles).tolist() == [[0.8999999761581421, 0.4000000059604645]]
    with pytest.raises(ValueError, match="rare"):
        hd.strongest_role({"prev": roles["prev"], "next": roles["next"]})


def test_top_head_counts_layers_and_heads_from_one():
    v = torch.zeros(3, 4)
    v[2, 1] = 1.0
    assert hd.top_head(v) == (3, 2)
    with pytest.raises(ValueError, match="layers, heads"):
        hd.top_head(torch.zeros(4))
