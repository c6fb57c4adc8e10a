"""Tests of the reliability and live-check helpers chapter "A translation model" reads from attnbook.heads.lrp
(beyond tests/test_lrp.py)."""

from __future__ import annotations

import pytest
import torch

from attnbook.heads import lrp
from attnbook.heads.seq2seq import Seq2SeqConfig, Seq2SeqTransformer
from model_helpers import trained_looking_


def test_split_half_reliability_is_the_rank_correlation_of_the_halves():
    a = torch.tensor([[0.1, 0.4], [0.3, 0.2]])
    halves = {"same": [a, a * 2], "reversed": [a, -a], "kind": [a, torch.tensor([[0.4, 0.1], [0.2, 0.3]])]}
    rho = lrp.split_half_reliability(halves)
    assert rho["same"] == pytest.approx(1.0) and rho["reversed"] == pytest.approx(-1.0)
    # ranks 1 4 3 2 against 4 1 2 3: d^2 = 9 + 9 + 1 + 1
    assert rho["kind"] == pytest.approx(1 - 6 * 20 / (4 * 15))


def _model():
    torch.manual_seed(0)
    cfg = Seq2SeqConfig(vocab_size=23, d_model=16, n_heads=2, enc_layers=2, dec_layers=2, d_ff=32,
                        dropout=0.0, attention_dropout=0.0, max_len=16)
    return trained_looking_(Seq2SeqTransformer(cfg).double().eval())


SRC = [[5, 9, 7, 11, 2], [4, 6, 2]]
TGT = [[1, 8, 6, 14, 2], [1, 3, 2]]


def test_live_gap_is_zero_for_the_models_own_relevance_and_sees_a_change():
    model = _model()
    shipped = [{k: lrp.layer_shares(v).mean(0) for k, v in lrp.sentence_head_relevance(model, s, t).items()}
               for s, t in zip(SRC, TGT)]
    assert lrp.live_gap(model, SRC, TGT, shipped) < 1e-12
    shipped[1]["dec_cross"] = shipped[1]["dec_cross"].clone()
    shipped[1]["dec_cross"][1, 0] += 0.25
    assert lrp.live_gap(model, SRC, TGT, shipped) == pytest.approx(0.25)
    assert lrp.live_gap(model, SRC, TGT, shipped[:1]) < 1e-12  # only the shipped verses are compared
    with pytest.raises(ValueError):
        lrp.live_gap(model, SRC[:1], TGT[:1], shipped)
