"""Tests of attnbook.heads.pruning_figures: chapter "Pruning heads"'s figures drawn from small synthetic inputs."""

from __future__ import annotations

import matplotlib.colors
import numpy as np
import pytest
import torch

from attnbook.heads import gates
from attnbook.heads import pruning_figures as figs



def test_hard_concrete_samples_bars_are_the_sampled_masses_and_markers_the_closed_form():
    log_alphas = torch.tensor([-1.0, 1.0])
    samples = torch.tensor([[0.0, 0.0, 0.5, 1.0], [1.0, 1.0, 1.0, 0.25]])
    fig = figs.hard_concrete_samples(log_alphas, samples)
    assert len(fig.axes) == 2 and len(fig.legends) == 1
    top, bottom = fig.axes
    bars = [p.get_height() for p in top.patches if p.get_facecolor()[:3] == matplotlib.colors.to_rgb("#d62728")]
    assert bars == pytest.approx([0.5, 0.25])  # two of four at 0, one at 1
    marker = top.lines[0]
    assert list(marker.get_ydata()) == pytest.approx([float(gates.prob_zero(log_alphas[0])),
                                                     float(gates.prob_one(log_alphas[0]))])
    assert bottom.get_title() == "log alpha = +1" and bottom.get_xlabel() == "gate value g"
    # the histogram counts only values strictly between 0 and 1, weighted by 1 / number of samples
    inside = sum(p.get_height() for p in bottom.patches if p.get_facecolor()[:3] != matplotlib.colors.to_rgb("#d62728"))
    assert inside == pytest.approx(0.25)


def test_gate_heatmap_has_one_row_per_head_and_one_column_per_snapshot():
    snaps = [{"step": s, "p_open": [[1.0, 0.5, 0.2], [0.9, 0.1, 0.0]]} for s in (0, 10, 20, 30)]
    run = {"lam": 0.2, "gates": [[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]], "snapshots": snaps}
    fig = figs.gate_heatmap(run)
    ax = fig.axes[0]
    image = ax.images[0].get_array()
    assert image.shape == (6, 4) and image[1, 2] == pytest.approx(0.5) and image[3, 0] == pytest.approx(0.9)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["layer 1", "layer 2"]
    assert len(ax.lines) == 1  # one separator between the two layers
    assert "lambda=0.2" in ax.get_title() and len(fig.axes) == 2  # with its colour bar


def test_minilm_pruning_curves_draw_the_two_curves_and_both_gate_markers():
    michel = [{"n_kept": 6, "score": 1.0}, {"n_kept": 3, "score": 0.7}]
    points = [{"n_kept": 4, "gates": 0.95, "binary": 0.9, "lam": 0.1},
              {"n_kept": 1, "gates": 0.8, "binary": 0.75, "lam": 0.5}]
    fig = figs.minilm_pruning_curves(michel, [1.0, 0.6], points)
    lines = fig.axes[0].lines
    assert len(lines) == 4 and len(fig.legends) == 1
    assert list(lines[1].get_ydata()) == [1.0, 0.6]
    assert list(lines[2].get_xdata()) == [4, 1] and list(lines[2].get_ydata()) == [0.95, 0.8]
    assert list(lines[3].get_ydata()) == [0.9, 0.75]


def test_encoder_bleu_curves_are_changes_from_the_unpruned_model():
    full = {"bleu_greedy": 30.0, "bleu_beam": 31.0}
    gate_curve, beam_curve = [(48, 30.0), (8, 29.0)], [(48, 31.0), (8, 30.5)]
    michel = {"a": [{"n_kept": 48, "bleu": 30.0}, {"n_kept": 24, "bleu": 28.0}]}
    fig = figs.encoder_bleu_curves(full, gate_curve, beam_curve, [(8, 27.0)], michel,
                                   [(48, 25.0), (24, 24.5)])
    ax = fig.axes[0]
    by_label = {line.get_label(): line for line in ax.lines}
    assert list(by_label["gates, fine-tuned (greedy)"].get_ydata()) == [-1.0, 0.0]  # sorted by heads
    assert list(by_label["gates, fine-tuned (beam 4)"].get_ydata()) == [-0.5, 0.0]
    assert list(by_label["Michel: a"].get_ydata()) == [-2.0, 0.0]
    assert list(by_label["paper: WMT EN-RU, encoder only"].get_ydata()) == [0.0, -0.5]


def test_role_heatmaps_mark_the_kept_heads():
    shares = torch.tensor([[0.1, 0.9], [0.3, 0.2]])
    circled = torch.tensor([[False, True], [True, False]])
    starred = torch.tensor([[False, True], [False, False]])
    fig = figs.role_heatmaps({"a": shares, "b": shares / 2}, (circled, "kept 1"), (starred, "kept 2"))
    axes = [ax for ax in fig.axes if ax.get_title() in ("a", "b")]
    assert len(axes) == 2 and len(fig.legends) == 1
    circles, stars = axes[0].collections
    assert sorted(map(tuple, circles.get_offsets().tolist())) == [(0.0, 1.0), (1.0, 0.0)]  # (head, layer)
    assert stars.get_offsets().tolist() == [[1.0, 0.0]]
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["kept 1", "kept 2"]


def _by_kind():
    runs = [{"spec": {"lam": 0.1}, "n_kept": 10, "kept": {"enc_self": 2, "dec_self": 4, "dec_cross": 4}},
            {"spec": {"lam": 0.5}, "n_kept": 5, "kept": {"enc_self": 0, "dec_self": 2, "dec_cross": 3}}]
    n_heads = {"enc_self": 4, "dec_self": 4, "dec_cross": 4}
    share = {k: [r["kept"][k] / n_heads[k] for r in runs] for k in n_heads}
    return {"runs": runs, "n_heads": n_heads, "share": share}


def test_kinds_and_layers_puts_book_and_paper_on_shares_of_all_heads():
    paper = {"kinds": ["enc_self", "dec_self", "dec_cross"], "kept": [[3, 6, 3]]}
    paper_n = {"enc_self": 6, "dec_self": 6, "dec_cross": 6}
    layers = [{"dec_self": [2, 1, 1], "dec_cross": [1, 1, 2]}, {"dec_self": [1, 1, 0], "dec_cross": [0, 1, 2]}]
    fig = figs.kinds_and_layers(_by_kind(), layers, paper, paper_n)
    top, bottom = fig.axes[:2]
    book_enc = next(line for line in top.lines if line.get_label() == "enc_self")
    assert list(book_enc.get_xdata()) == pytest.approx([10 / 12, 5 / 12])
    assert list(book_enc.get_ydata()) == pytest.approx([0.5, 0.0])
    paper_dec = top.lines[3]  # the paper's dec_self: 6 of 6 kept, at 12 of 18 heads
    assert list(paper_dec.get_xdata()) == pytest.approx([12 / 18]) and list(paper_dec.get_ydata()) == [1.0]
    assert len(bottom.lines) == 2 * len(layers) + 2
    assert list(bottom.lines[2].get_ydata()) == [1, 1, 0]


def test_all_kinds_curves_add_the_paper_s_changes_to_the_book_s_unpruned_bleu():
    michel = {"a": [{"n_kept": 96, "bleu": 30.0}, {"n_kept": 48, "bleu": 20.0}],
              "b": [{"n_kept": 96, "bleu": 30.0}, {"n_kept": 48, "bleu": 25.0}]}
    fig = figs.all_kinds_curves([(40, 28.0), (96, 30.0)], [(40, 25.0)], michel, [(1.0, 0.0), (0.5, -0.25)],
                                96, 30.0)
    ax = fig.axes[0]
    assert len(ax.lines) == 5 and ax.get_xlabel() == "heads kept (of 96)"
    paper = ax.lines[-1]
    assert list(paper.get_xdata()) == [48.0] and list(paper.get_ydata()) == [29.75]
    assert np.allclose(ax.lines[3].get_ydata(), [30.0, 25.0])
