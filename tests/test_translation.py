"""Head gates in greedy decoding, in ``translate`` and in the training recipe of chapter 10's translation
model (attnbook.seq2seq, attnbook.heads.translation; chapter 11 prunes heads through these gates).

Decoding uses the shipped quick checkpoint in float64, so that a batched and an unbatched forward pass agree
to ~1e-13 and an arg-max can only flip on a tie far below anything a real bug produces."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from attnbook.heads.seq2seq import Seq2SeqConfig, Seq2SeqTransformer
from attnbook import stats
from attnbook.heads import translation as tr


@pytest.fixture(scope="module")
def shipped():
    model, _ = tr.load_translation_model()
    return model.double().eval()


@pytest.fixture(scope="module")
def sentences():
    return [en for en, _ in tr.load_pairs("dev")[:3]]


def brute_force_greedy(model, src_ids, gates, max_new):
    """Greedy decoding written out: run the whole model on (src, prefix) and append the arg-max, until EOS."""
    src = torch.tensor([src_ids])
    out = [tr.BOS]
    with torch.no_grad():
        for _ in range(max_new):
            logits, _ = model(src, torch.tensor([out]), head_gates=gates)
            token = int(logits[0, -1].argmax())
            if token in (tr.EOS, tr.PAD):
                break
            out.append(token)
    return out[1:]


def gates(kind, layer, heads):
    cfg = tr.load_translation_model()[0].cfg
    g = torch.ones(cfg.layers(kind), cfg.n_heads)
    g[layer, heads] = 0.0
    return {kind: g}


@pytest.mark.parametrize("kind", ["enc_self", "dec_self", "dec_cross"])
def test_greedy_decode_applies_the_gates_of_every_kind(shipped, sentences, kind):
    """Encoder gates act in ``encode``, decoder gates in every ``decode`` step."""
    src_ids = tr.encode(sentences[:1])[0]
    g = gates(kind, slice(None), list(range(8)))  # every head of this kind
    got = shipped.greedy_decode(torch.tensor([src_ids]), max_new_tokens=40, head_gates=g)[0]
    assert got == brute_force_greedy(shipped, src_ids, g, 40)
    assert got != shipped.greedy_decode(torch.tensor([src_ids]), max_new_tokens=40)[0]  # the gates matter


def test_greedy_decode_of_a_padded_batch_equals_one_by_one(shipped, sentences):
    """Rows finish at different steps (pad after EOS) and sources are padded: each row is its own decode."""
    ids = tr.encode(sentences)
    g = gates("dec_cross", 1, [2])
    batch = shipped.greedy_decode(tr.pad(ids), max_new_tokens=40, head_gates=g)
    assert batch == [brute_force_greedy(shipped, s, g, 40) for s in ids]
    assert len({len(row) for row in batch}) > 1  # rows of different lengths


def test_translate_keeps_the_input_order_and_applies_the_gates(shipped, sentences):
    """``translate`` sorts by length into batches and decodes with ``head_gates``; each output is the greedy
    translation of its own sentence (``translate`` allows 1.6 x the source length + 10 new tokens)."""
    order = [sentences[1], sentences[0], sentences[2]]  # not sorted by length
    g = gates("enc_self", 0, list(range(8)))
    expected = []
    for s in order:
        src_ids = tr.encode([s])[0]
        expected.append(tr.decode([brute_force_greedy(shipped, src_ids, g, int(1.6 * len(src_ids)) + 10)])[0])
    assert tr.translate(shipped, order, batch_size=2, head_gates=g) == expected
    assert tr.translate(shipped, order, batch_size=2) != expected  # the gates matter


def _tiny_translation_model():
    torch.manual_seed(0)
    return Seq2SeqTransformer(Seq2SeqConfig(vocab_size=20, d_model=16, n_heads=2, enc_layers=2, dec_layers=1,
                                            d_ff=32, dropout=0.0, max_len=16))


def test_train_model_uses_label_smoothing_and_keeps_masked_heads_out():
    """Chapter 10's recipe: the first recorded loss is the label-smoothed loss of the initial gated model, and
    a head masked for the whole training gets no gradient: its query, key and value rows and its columns of
    the output projection do not move (AdamW without weight decay moves a parameter only through its gradient)."""
    model = _tiny_translation_model()
    src = torch.tensor([[5, 6, 7, 2], [8, 9, 2, 0]])
    tgt = torch.tensor([[1, 10, 11, 12, 2], [1, 13, 2, 0, 0]])
    mask = {"enc_self": torch.tensor([[1.0, 0.0], [1.0, 1.0]])}  # head 1 of encoder layer 0 is off
    with torch.no_grad():
        first = float(model.loss(src, tgt, head_gates=mask, label_smoothing=0.2))
    before = copy.deepcopy(model.encoder[0].self_attn)
    hist = tr.train_model(model, lambda step: (src, tgt), steps=5, lr=1e-2, weight_decay=0.0, warmup=0.0,
                          label_smoothing=0.2, seed=0, head_gates=mask, device="cpu", progress=False)
    assert hist["loss"][0] == pytest.approx(first, rel=1e-6)
    with torch.no_grad():
        plain = float(_tiny_translation_model().loss(src, tgt, head_gates=mask))
    assert abs(plain - first) > 1e-3  # the smoothing term is not negligible here
    after = model.encoder[0].self_attn
    off, on = slice(8, 16), slice(0, 8)  # d_model 16, two heads of 8
    for name in ("q", "k", "v"):
        torch.testing.assert_close(getattr(after, name).weight[off], getattr(before, name).weight[off],
                                   atol=1e-9, rtol=0)
        torch.testing.assert_close(getattr(after, name).bias[off], getattr(before, name).bias[off],
                                   atol=1e-9, rtol=0)
        assert (getattr(after, name).weight[on] - getattr(before, name).weight[on]).abs().max() > 1e-3
    torch.testing.assert_close(after.out.weight[:, off], before.out.weight[:, off], atol=1e-9, rtol=0)


def test_loops_and_bleu_interval():
    from attnbook.heads import translation as tr

    assert tr.repeats_a_phrase("y dijo te te te a")
    assert tr.repeats_a_phrase("y dijo y dijo y dijo")
    assert not tr.repeats_a_phrase("y dijo el señor a Moisés y dijo")
    assert not tr.repeats_a_phrase("te te")
    refs = ["y dijo Dios sea la luz", "y fue la luz", "y vió Dios que la luz era buena"] * 10
    perfect = stats.bleu_interval(refs, refs, n_bootstrap=200)
    assert perfect["bleu"] == pytest.approx(100.0) and perfect["low"] == pytest.approx(100.0)
    hyps = ["y dijo Dios la luz", "y fue luz", "y vió Dios que era buena"] * 10
    r = stats.bleu_interval(hyps, refs, n_bootstrap=200)
    assert r["low"] < r["bleu"] < r["high"] and r["bleu"] == pytest.approx(stats.bleu(hyps, refs))
    assert (r["low"] + r["high"]) / 2 == pytest.approx(r["mean"])  # sacreBLEU's mean +- ci, symmetric


def _tiny_preset(**kw):
    p = dict(d_model=16, n_heads=2, enc_layers=2, dec_layers=1, d_ff=32, dropout=0.0, attention_dropout=0.0,
             max_len=24, max_tokens=300, batch_size=8, lr=1e-2, warmup=0, weight_decay=0.0,
             label_smoothing=0.1, train_steps=6, eval_every=2, n_eval_bleu=3, average_last=2, patience=10,
             seed=0)
    return {**p, **kw}


def test_average_state_is_the_elementwise_mean():
    a, b = {"w": torch.tensor([1.0, 2.0])}, {"w": torch.tensor([3.0, 6.0])}
    torch.testing.assert_close(tr.average_state([a, b])["w"], torch.tensor([2.0, 4.0]))
    with pytest.raises(ValueError, match="at least one"):
        tr.average_state([])


def test_train_to_convergence_masks_heads_averages_and_stops():
    """The converged model's recipe (chapters "A translation model" and "Pruning heads"): a head masked for the
    whole training never moves, the model ends as the average of the kept evaluations' weights when that is
    no worse on dev, early stopping ends training after ``patience`` evaluations without a better BLEU, and
    a time limit leaves it unfinished."""
    p = _tiny_preset()
    torch.manual_seed(0)
    model = tr.model_from_preset(p)
    assert model.cfg.vocab_size == tr.load_tokenizer().get_vocab_size()
    mask = {"enc_self": torch.tensor([[1.0, 0.0], [1.0, 1.0]])}
    before = copy.deepcopy(model.encoder[0].self_attn)
    run = tr.train_to_convergence(model, p, head_gates=mask, log=lambda line: None)
    assert run["finished"] and run["hist"]["steps_done"] == 6 and len(run["extra"]["snapshots"]) == 2
    if run["averaged"]:
        avg = tr.average_state(run["extra"]["snapshots"])
        torch.testing.assert_close(model.state_dict()["encoder.0.self_attn.q.weight"],
                                   avg["encoder.0.self_attn.q.weight"])
    after, off = model.encoder[0].self_attn, slice(8, 16)
    for name in ("q", "k", "v"):
        torch.testing.assert_close(getattr(after, name).weight[off], getattr(before, name).weight[off],
                                   atol=1e-7, rtol=0)
    assert (after.q.weight[:8] - before.q.weight[:8]).abs().max() > 1e-3
    stopped = tr.train_to_convergence(tr.model_from_preset(p), {**p, "patience": 1}, log=lambda line: None)
    assert stopped["hist"]["steps_done"] < 6 and stopped["hist"]["stopped"] != "steps"
    timed = tr.train_to_convergence(tr.model_from_preset(p), p, time_limit=1e-6, log=lambda line: None)
    assert not timed["finished"]


def test_paired_bleu_difference_is_the_corpus_difference_with_a_paired_interval():
    refs = ["y dijo Dios sea la luz", "y fue la luz", "y vió Dios que la luz era buena",
            "en el principio crió Dios los cielos"] * 8
    worse = ["y dijo Dios la luz", "y fue luz", "y vió Dios que era buena", "en principio Dios cielos"] * 8
    better = ["y dijo Dios sea luz", "y fue la luz", "y vió Dios que la luz era", "en el principio Dios"] * 8
    d = stats.paired_bleu_difference(worse, better, refs, n_bootstrap=300)
    assert d["delta"] == pytest.approx(stats.bleu(better, refs) - stats.bleu(worse, refs), abs=1e-9)
    assert 0 < d["low"] < d["delta"] < d["high"] and d["p_not_better"] < 0.05
    # the 95% percentile interval of the paired resamples (Koehn 2004), resample for resample
    st = [stats.sentence_statistics(h, refs) for h in (worse, better)]
    rng = np.random.default_rng(12345)
    draws = [rng.integers(0, len(refs), len(refs)) for _ in range(300)]
    samples = [stats.bleu_from_statistics(st[1][i].sum(0)) - stats.bleu_from_statistics(st[0][i].sum(0))
               for i in draws]
    assert (d["low"], d["high"]) == pytest.approx(tuple(np.percentile(samples, [2.5, 97.5])))
    same = stats.paired_bleu_difference(worse, worse, refs, n_bootstrap=50)
    assert same["delta"] == same["low"] == same["high"] == 0.0 and same["p_not_better"] == 1.0
    flipped = stats.paired_bleu_difference(better, worse, refs, n_bootstrap=300)
    assert flipped["delta"] == pytest.approx(-d["delta"]) and flipped["p_not_better"] > 0.95
    with pytest.raises(ValueError, match="equally many"):
        stats.paired_bleu_difference(worse, better[:-1], refs)


def _two_systems(rng, n, precisions):
    """Sentence statistics of systems on ``n`` shared test sentences: each sentence has a length (the reference's
    and each hypothesis's) and a difficulty every system shares; system k matches each g-gram with probability
    difficulty * precisions[k][g]. Corpus BLEU in the limit of many sentences is 100 E[difficulty] times the
    geometric mean of the precisions (no brevity penalty)."""
    length, difficulty = rng.integers(10, 31, n), rng.beta(4, 2, n)
    totals = np.stack([length - g for g in range(4)], 1)
    return [np.column_stack([length, length, rng.binomial(totals, difficulty[:, None] * np.asarray(p)), totals])
            for p in precisions]


def test_the_paired_bootstrap_covers_a_known_bleu_difference_at_its_level():
    """Koehn's paired bootstrap over simulated test sets whose population BLEU difference is known: its 95%
    interval covers it about 95% of the time. Resampling each system's sentences apart (unpaired) would cover
    it nearly always here, since the systems share each sentence's difficulty; too narrow an interval, less."""
    precisions = [(0.8, 0.6, 0.45, 0.35), (0.82, 0.63, 0.48, 0.38)]
    truth = 100 * (4 / 6) * (np.prod(precisions[1]) ** 0.25 - np.prod(precisions[0]) ** 0.25)
    rng = np.random.default_rng(0)
    covered = []
    for i in range(400):
        a, b = _two_systems(rng, 300, precisions)
        r = stats.paired_bootstrap_contrast([a, b], [-1.0, 1.0], n_bootstrap=300, seed=i)
        covered.append(r["low"] <= truth <= r["high"])
    assert np.mean(covered) == pytest.approx(0.95, abs=0.03)
    with pytest.raises(ValueError, match="sentence statistics"):
        stats.paired_bootstrap_contrast([a, b[:-1]], [-1.0, 1.0])


def test_paired_bleu_contrast_is_a_difference_of_gains_with_its_own_interval():
    refs = ["y dijo Dios sea la luz", "y fue la luz", "y vió Dios que la luz era buena",
            "en el principio crió Dios los cielos"] * 8
    worse = ["y dijo Dios la luz", "y fue luz", "y vió Dios que era buena", "en principio Dios cielos"] * 8
    better = ["y dijo Dios sea luz", "y fue la luz", "y vió Dios que la luz era", "en el principio Dios"] * 8
    small = worse[:16] + better[16:]  # a gain on half the sentences only
    gain_a = stats.paired_bleu_difference(worse, better, refs, n_bootstrap=300)
    gain_b = stats.paired_bleu_difference(worse, small, refs, n_bootstrap=300)
    c = stats.paired_bleu_contrast([worse, better, worse, small], [-1, 1, 1, -1], refs, n_bootstrap=300)
    assert c["delta"] == pytest.approx(gain_a["delta"] - gain_b["delta"], abs=1e-9) and c["delta"] > 0
    assert c["low"] <= c["delta"] <= c["high"] and c["high"] - c["low"] > 0
    # each weight counts: a zero weight on the fourth system leaves the first gain plus the third's BLEU
    assert stats.paired_bleu_contrast([worse, better, worse, small], [-1, 1, 1, 0], refs)["delta"] == pytest.approx(
        gain_a["delta"] + stats.bleu(worse, refs), abs=1e-9)
    # the pair form is the contrast (-1, +1), resample for resample
    assert stats.paired_bleu_contrast([worse, better], [-1, 1], refs, n_bootstrap=300) == gain_a
    null = stats.paired_bleu_contrast([worse, better, worse, better], [-1, 1, 1, -1], refs, n_bootstrap=50)
    assert null["low"] == pytest.approx(0.0, abs=1e-9) and null["high"] == pytest.approx(0.0, abs=1e-9)
    with pytest.raises(ValueError, match="one weight per system"):
        stats.paired_bleu_contrast([worse, better], [1], refs)
    with pytest.raises(ValueError, match="equally many"):
        stats.paired_bleu_contrast([worse, better[:-1]], [-1, 1], refs)


def test_analysis_verses_leave_out_what_does_not_fit():
    all_ = tr.analysis_verses(30, 128)
    short = tr.analysis_verses(30, 24)
    assert len(all_.src_ids) == len(all_.tgt_ids) == len(all_.parses) == len(all_.english) == 30
    assert 0 < len(short.src_ids) < 30 and all(len(s) < 24 for s in short.src_ids)
    kept = [all_.english.index(e) for e in short.english]
    assert [all_.parses[i] for i in kept] == short.parses  # the parse stays with its verse
    with pytest.raises(ValueError):
        tr.analysis_verses(0, 24)
