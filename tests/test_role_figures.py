"""Smoke tests of attnbook.heads.role_figures (chapter "A translation model"'s figures and tables), drawn from
small synthetic inputs: the panels, lines and labels each figure must have, and the rows each table must hold."""

from __future__ import annotations

from types import SimpleNamespace

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from attnbook.heads import role_figures as rf



EVALS = [dict(step=s, dev_loss=l, dev_bleu=b) for s, l, b in [(0, 7.0, 0.0), (100, 4.0, 10.0), (200, 3.0, 20.0)]]


def test_training_record_has_loss_and_bleu_panels():
    meta = dict(evals=EVALS, loss_curve=dict(step=[0, 50, 100, 150, 200], loss=[8, 6, 5, 4, 3.5]))
    fig = rf.training_record(meta, 123)
    loss, bleu = fig.axes
    assert len(loss.lines) == 2 and len(bleu.lines) == 1
    assert list(bleu.lines[0].get_ydata()) == [0.0, 10.0, 20.0]
    assert "123 verses" in bleu.get_ylabel()


def test_neighbour_shares_prints_the_large_values_where_they_are():
    prev = torch.tensor([[0.1, 0.75], [0.2, 0.3]])
    nxt = torch.tensor([[0.0, 0.1], [0.5, 0.05]])
    fig = rf.neighbour_shares(prev, nxt)
    top, bottom = fig.axes[:2]
    assert [(t.get_position(), t.get_text()) for t in top.texts] == [((1, 0), "0.75")]
    assert [(t.get_position(), t.get_text()) for t in bottom.texts] == [((0, 1), "0.50")]
    assert len(fig.axes) == 3  # two maps and the colour bar
    assert [t.get_text() for t in top.get_xticklabels()] == ["1", "2"]


def test_role_emergence_draws_every_role_the_criterion_and_bleu():
    trace = [dict(step=s, enc_self=dict(prev=[[p]], next=[[0.1]], confidence=[[0.3]], sink=[[0.2]]),
                  dec_cross=dict(confidence=[[0.4]])) for s, p in [(0, 0.05), (100, 0.3), (200, 0.6)]]
    fig = rf.role_emergence(trace, EVALS, 0.9)
    ax, ax2 = fig.axes
    assert len(ax.lines) == len(rf.EMERGENCE) + 1  # the roles and the criterion
    np.testing.assert_allclose(ax.lines[0].get_ydata(), [0.05, 0.3, 0.6])
    np.testing.assert_array_equal(ax.lines[0].get_xdata(), [1, 100, 200])  # step 0 drawn at 1 (log axis)
    assert ax.lines[-1].get_ydata()[0] == 0.9
    assert list(ax2.lines[0].get_ydata()) == [0.0, 10.0, 20.0] and ax.get_xscale() == "log"
    assert len(fig.legends[0].get_texts()) == len(rf.EMERGENCE) + 2


def test_role_emergence_draws_the_learning_rate_and_a_second_seed_on_the_roles_axis():
    trace = [dict(step=s, enc_self=dict(prev=[[p]], next=[[0.1]], confidence=[[0.3]], sink=[[0.2]]),
                  dec_cross=dict(confidence=[[0.4]])) for s, p in [(0, 0.05), (100, 0.3), (200, 0.6)]]
    other = [dict(step=s, enc_self=dict(prev=[[0.2]], next=[[p]])) for s, p in [(0, 0.1), (150, 0.7)]]
    fig = rf.role_emergence(trace, EVALS, 0.9, learning_rate=([0, 100, 200], [0.0, 1.0, 0.5]),
                            other_seed=("seed 1", other))
    ax, _ = fig.axes
    assert len(ax.lines) == len(rf.EMERGENCE) + 3
    seed_line, rate_line = ax.lines[len(rf.EMERGENCE)], ax.lines[len(rf.EMERGENCE) + 1]
    np.testing.assert_allclose(seed_line.get_ydata(), [0.2, 0.7])  # the larger of prev and next
    np.testing.assert_allclose(rate_line.get_ydata(), [0.0, 1.0, 0.5])
    assert "seed 1" in seed_line.get_label() and ax.lines[-1].get_ydata()[0] == 0.9


def test_late_training_draws_only_the_window_of_each_seed_and_the_rate():
    def trace(points):
        return [dict(step=s, enc_self=dict(prev=[[p]], next=[[0.0]])) for s, p in points]
    fig = rf.late_training({"seed 0": trace([(0, 0.0), (700, 0.5), (1000, 0.55)]),
                            "seed 1": trace([(100, 0.1), (800, 0.4), (900, 0.42), (1000, 0.43)])},
                           ([0, 500, 700, 1000], [0.0, 1.0, 0.3, 0.0]), from_step=700)
    ax, = fig.axes
    assert [list(line.get_xdata()) for line in ax.lines] == [[700, 1000], [800, 900, 1000], [700, 1000]]
    np.testing.assert_allclose(ax.lines[2].get_ydata(), [0.3, 0.0])


def test_role_grid_draws_each_seed_each_mean_and_the_criteria():
    values = {"best neighbour share": {"all": [0.58, 0.45], "quarter": [0.40]},
              "rare / chance": {"all": [1.5, 1.8], "quarter": [1.2]}}
    fig = rf.role_grid(values, {"best neighbour share": 0.9})
    left, right = fig.axes
    dots = [ln for ln in left.lines if ln.get_marker() == "o"]
    assert [list(ln.get_ydata()) for ln in dots] == [[0.58, 0.45], [0.40]]
    means = [ln for ln in left.lines if ln.get_marker() in ("None", "") and len(ln.get_xdata()) == 2
             and ln.get_linestyle() == "-"]
    assert [ln.get_ydata()[0] for ln in means] == pytest.approx([0.515, 0.40])
    assert any(ln.get_linestyle() == ":" and ln.get_ydata()[0] == 0.9 for ln in left.lines)
    assert fig.get_figwidth() <= 6.4  # the book's column on a phone
    assert not any(ln.get_linestyle() == ":" for ln in right.lines)  # no criterion for the rare share
    assert [t.get_text() for t in left.get_xticklabels()] == ["all", "quarter"]  # short: unwrapped
    plt.close(fig)


def test_role_grid_draws_models_that_fail_a_gate_hollow_and_leaves_them_out_of_the_mean():
    values = {"best neighbour share": {"all": [0.58, 0.45], "50%": [0.50], "25%": []}}
    failed = {"best neighbour share": {"25%": [0.24, 0.28], "50%": [0.30]}}
    fig = rf.role_grid(values, {}, not_analysed=failed)
    ax, = fig.axes
    assert [t.get_text() for t in ax.get_xticklabels()] == ["all", "50%", "25%"]
    hollow = [ln for ln in ax.lines if ln.get_marker() == "o" and ln.get_markerfacecolor() == "none"]
    assert [(list(ln.get_xdata()), list(ln.get_ydata())) for ln in hollow] == [([1], [0.30]), ([2, 2], [0.24, 0.28])]
    means = [ln.get_ydata()[0] for ln in ax.lines if ln.get_marker() in ("None", "")]
    assert means == pytest.approx([0.515, 0.50])  # no bar for the 25% column: no analysed model
    assert [t.get_text() for t in rf.role_grid({"s": {"all": [1.0], "50%": []}}, {}).axes[0].get_xticklabels()] \
        == ["all"]  # a setting with no model at all has no column
    plt.close("all")


def test_relevance_with_roles_marks_the_heads():
    rel = torch.tensor([[0.2, 0.8], [0.5, 0.5]])
    marks = {"P": torch.tensor([[True, False], [False, False]]), "S": torch.tensor([[True, False], [False, True]])}
    fig = rf.relevance_with_roles(rel, marks, "title")
    ax = fig.axes[0]
    labels = {t.get_position(): t.get_text() for t in ax.texts}
    assert labels == {(0, 0): "PS", (1, 0): "", (0, 1): "", (1, 1): "S"}
    assert ax.get_title() == "title" and len(fig.axes) == 2


def test_translations_table():
    table = rf.translations_table([("In the beginning", "En el principio"), ("a", "b")], ["En principio", "c"])
    lines = table.split("\n")
    assert len(lines) == 2 + 2 * 4
    assert lines[2:5] == ["| **EN** | In the beginning |", "| **reference** | En el principio |",
                          "| **model** | En principio |"]


def test_confidence_report_one_line_per_kind():
    summary = {"enc_self": dict(chance=0.028, heads=48, confident=47, most=0.6012, sinks=0),
               "dec_self": dict(chance=0.119, heads=24, confident=1, most=0.6, sinks=2)}
    lines = rf.confidence_report(summary).split("\n")
    assert lines[0] == ("encoder self-attention      chance 0.028; heads with confidence > 5x chance: 47 of 48; "
                        "most confident 0.60; sink heads (>50% of queries on EOS/BOS): 0")
    assert lines[1].startswith("decoder self-attention ") and lines[1].endswith("EOS/BOS): 2")


def test_syntax_table_sets_the_papers_numbers_beside_the_readings():
    rows = [dict(relation="nsubj", reading="subject -> verb", n=10, head=(1, 4), best=0.24, base=0.58, offset=1),
            dict(relation="nsubj", reading="verb -> subject", n=10, head=(2, 2), best=0.37, base=0.58, offset=-1)]
    lines = rf.syntax_table(rows, "toy", {"subject -> verb": (52, 35)}).split("\n")
    assert lines[0].startswith("| relation (toy) |")
    assert lines[2] == "| nsubj: subject -> verb | 10 | (1, 4) | 24 | 58 (+1) | 52 / 35 |"
    assert lines[3] == "| nsubj: verb -> subject | 10 | (2, 2) | 37 | 58 (-1) |  |"


def test_encoder_role_table_counts_positional_and_sink_heads():
    r = dict(prev=torch.tensor([[0.95, 0.2], [0.1, 0.3]]), next=torch.tensor([[0.0, 0.91], [0.4, 0.1]]),
             sink=torch.tensor([[0.6, 0.0], [0.51, 0.5]]))
    syntax = [dict(best=0.5, base=0.3), dict(best=0.2, base=0.25)]
    lines = rf.encoder_role_table({"toy": (r, syntax)}, 0.9).split("\n")
    assert "positional (>= 0.9)" in lines[0]
    assert lines[2] == "| toy | 4 | 0.95 | 0.91 | 2 | 2 | +20 |"


def test_checkpoint_table():
    rows = [("dev BLEU", [32.4567, 34.39]), ("minutes", [121, 125])]
    assert rf.checkpoint_table(["a", "b"], rows) == ("| | a | b |\n|---|---|---|\n| dev BLEU | 32.46 | 34.39 |\n"
                                                     "| minutes | 121 | 125 |")


def test_reproduction_table():
    def number(v):
        return SimpleNamespace(value=v)

    voita = dict(model=number(dict(layers=(6, 6), heads=8, d_model=512)), positional_head_criterion=number(0.9),
                 encoder_only_wmt=number(dict(bleu=(29.6,))), syntactic_head_criterion_points=number(10),
                 rare_token_head_share=number(0.66))
    cfg = SimpleNamespace(enc_layers=6, dec_layers=3, n_heads=8, d_model=128)
    table = rf.reproduction_table(voita, train_pairs=28923, cfg=cfg, beam_bleu=31.61, positional=(0.584, 0.97),
                                  gain=(1.8, 25.2), rare=(0.09, 0.027), rho=(0.41, 0.3), both=(3, 2))
    lines = table.split("\n")
    assert len(lines) == 2 + 8
    assert lines[2] == "| data | WMT / OpenSubtitles, English-Russian | 28,923 Bible verse pairs, English-Spanish |"
    assert lines[3] == ("| model | Transformer-base: 6+6 layers, 8 heads, d=512 | 6+3 layers, 8 heads, d=128 |")
    assert lines[5] == "| positional heads (encoder) | >= 90% | 0.58 (MiniLM 0.97) |"
    assert lines[6] == "| syntactic gain over baseline | >= 10 points | +2 (MiniLM +25) |"
    assert lines[9].endswith("| 3 (MiniLM 2) |")


def test_encoder_attention_maps_show_the_chosen_heads_rows_summing_to_one():
    import pytest

    from attnbook.heads.seq2seq import Seq2SeqConfig, Seq2SeqTransformer

    torch.manual_seed(0)
    model = Seq2SeqTransformer(Seq2SeqConfig(vocab_size=12, d_model=16, n_heads=2, enc_layers=2, dec_layers=1,
                                             d_ff=16, dropout=0.0, max_len=8))
    ids, labels = [5, 6, 7, 2], ["a", "b", "c", "</s>"]
    fig = rf.encoder_attention_maps(model, ids, labels, {"first": (1, 2), "second": (2, 1)})
    assert len(fig.axes) == 2 and fig.axes[0].get_title() == "first\nlayer 1, head 2"
    shown = fig.axes[1].images[0].get_array()
    _, _, attns = model.encode(torch.tensor([ids]), return_attention=True)
    assert np.allclose(shown, attns[1][0, 0].detach().numpy()) and np.allclose(shown.sum(1), 1)
    with pytest.raises(ValueError, match="outside 2 layers"):
        rf.encoder_attention_maps(model, ids, labels, {"x": (3, 1)})
    with pytest.raises(ValueError, match="one label per token"):
        rf.encoder_attention_maps(model, ids, labels[:2], {"x": (1, 1)})
