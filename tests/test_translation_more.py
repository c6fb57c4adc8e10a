"""Tests of the small counts chapter "A translation model" reads from attnbook.heads.translation (beyond
tests/test_translation.py): verses shared with train, the late gain of the training record, looping outputs."""

from __future__ import annotations

import pytest

from attnbook.core import runs
from attnbook.heads import translation as tr


def test_shared_text_count_matches_either_side():
    train = [("In the beginning", "En el principio"), ("And God said", "Y dijo Dios")]
    pairs = [("In the beginning", "otra cosa"),  # English seen
             ("something new", "Y dijo Dios"),  # Spanish seen
             ("Y dijo Dios", "nothing"),  # a Spanish text of train on the English side: seen too
             ("fresh", "nuevo")]
    assert tr.shared_text_count(pairs, train) == 3
    assert tr.shared_text_count(pairs[3:], train) == 0


def test_shipped_dev_and_test_share_nothing_with_train():
    train = tr.load_pairs("train")
    assert tr.shared_text_count(tr.load_pairs("dev") + tr.load_pairs("test"), train) == 0


def test_late_gain_reads_the_last_fifth():
    evals = [dict(step=s, dev_bleu=b) for s, b in [(0, 0.0), (500, 20.0), (800, 30.0), (900, 30.4), (1000, 30.1)]]
    tail, gain = tr.late_gain(evals)
    assert tail == [30.0, 30.4, 30.1]  # steps 800 and later
    assert gain == pytest.approx(0.4)  # the largest minus the first, not the last minus the first
    assert tr.late_gain(evals, start=0.5) == ([20.0, 30.0, 30.4, 30.1], pytest.approx(10.4))


def test_count_looping():
    texts = ["te te te te", "y dijo y dijo y dijo", "una frase normal", "a b a b"]
    assert tr.count_looping(texts) == 2
    assert tr.count_looping([]) == 0


def test_learned_task_gates_switch_off_the_encoder_and_count_loops():
    model, _ = tr.load_translation_model()
    pairs = tr.load_pairs("test")[:24]
    src, refs = [e for e, _ in pairs], [s for _, s in pairs]
    out = tr.learned_task_gates(model, src, refs, max_len=96)
    assert out["bleu"] == pytest.approx(tr.bleu(tr.translate(model, src, max_len=96), refs))
    assert out["drop"] == pytest.approx(out["bleu"] - out["bleu_without_encoder"]) and out["drop"] > 3
    assert 0 <= out["looping_share"] <= 1
    with pytest.raises(ValueError, match="as many references"):
        tr.learned_task_gates(model, src, refs[:-1])


def test_chapter_model_falls_back_to_quick_with_a_notice_that_names_the_command():
    own = tr.chapter_model(preset="quick")
    assert own.notice == "" and own.meta["meta"]["preset"] == "quick"
    if runs.find("translation_model", "paper"):
        pytest.skip("a paper model is shipped: the fallback is not taken")
    paper = tr.chapter_model(preset="paper")
    assert paper.meta["meta"]["preset"] == "quick"
    assert "Not the `paper` model" in paper.notice
    assert "python scripts/run.py translation_model --preset paper" in paper.notice
    variant = tr.chapter_model("translation_model_h4", preset="paper")  # defined at quick only
    assert "not defined at preset `paper`" in variant.notice and variant.model.cfg.n_heads == 4


def test_training_pairs_are_nested_fixed_subsets_of_the_training_verses():
    every = tr.load_pairs("train")
    assert tr.training_pairs() == every and tr.training_pairs(1.0) == every
    quarter, half = tr.training_pairs(0.25), tr.training_pairs(0.5)
    assert len(quarter) == round(0.25 * len(every)) and len(half) == round(0.5 * len(every))
    assert set(quarter) <= set(half) <= set(every)  # nested: a smaller share is part of a larger one
    assert tr.training_pairs(0.25) == quarter  # fixed, whatever the seed of the training
    assert quarter != every[: len(quarter)]  # a random share, not the first verses (Genesis)
    for bad in (0, -0.5, 1.5, 1e-9):  # 1e-9 keeps no verse
        with pytest.raises(ValueError, match="fraction"):
            tr.training_pairs(bad)
