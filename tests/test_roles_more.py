"""Tests of the analyses chapter "A translation model" reads from attnbook.heads.roles (beyond tests/test_heads.py):
the confidence summary, leave-one-out relevance on two halves, relevance against the roles, the largest
syntactic gain, the best head over training and the checkpoint comparison, on cases with a known answer."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnbook.heads import roles as hd
from attnbook.heads.seq2seq import Seq2SeqConfig, Seq2SeqTransformer


def test_confidence_summary_counts_confident_and_sink_heads():
    roles = {"enc_self": dict(confidence=torch.tensor([[0.05, 0.2], [0.11, 0.6]]), chance=0.02,
                              sink=torch.tensor([[0.0, 0.7], [0.5, 0.9]]))}
    s = hd.confidence_summary(roles, kinds=["enc_self"])["enc_self"]
    # above 5 x 0.02 = 0.1: 0.2, 0.11, 0.6; sink above 0.5 (strictly): 0.7, 0.9
    assert s == dict(chance=0.02, heads=4, confident=3, most=pytest.approx(0.6), sinks=2)


def _model():
    torch.manual_seed(0)
    return Seq2SeqTransformer(Seq2SeqConfig(vocab_size=12, d_model=16, n_heads=2, enc_layers=2, dec_layers=2,
                                            d_ff=16, dropout=0.0, max_len=8)).double().eval()


SRC = [[4, 5, 6, 2], [7, 8, 2], [9, 4, 5, 6, 2], [3, 2]]
TGT = [[1, 7, 8, 2], [1, 9, 2], [1, 5, 2], [1, 6, 7, 8, 2]]


def test_ablation_split_half_is_ablation_relevance_on_each_half():
    """Each half's relevance is :func:`ablation_relevance` on that half padded with the whole set; the
    relevance is their mean; a reference equal to the mean correlates perfectly with it."""
    from scipy.stats import spearmanr

    from attnbook.heads.translation import pad

    model = _model()
    src, tgt_in = pad(SRC), pad(TGT)[:, :-1]
    want = [hd.ablation_relevance(model, src[s], tgt_in[s], normalise=False) for s in (slice(0, 2), slice(2, 4))]
    got = hd.ablation_split_half(model, SRC, TGT)
    assert "against" not in got
    for k in ("enc_self", "dec_self", "dec_cross"):
        for h in range(2):
            torch.testing.assert_close(got["halves"][h][k], want[h][k])
        torch.testing.assert_close(got["relevance"][k], (want[0][k] + want[1][k]) / 2)
        rho = spearmanr(want[0][k].flatten(), want[1][k].flatten())[0]
        assert got["split"][k] == pytest.approx(rho)
    again = hd.ablation_split_half(model, SRC, TGT, reference=got["relevance"])
    assert again["against"] == pytest.approx({k: 1.0 for k in got["relevance"]})
    minus = hd.ablation_split_half(model, SRC, TGT, reference={k: -v for k, v in got["relevance"].items()})
    assert minus["against"] == pytest.approx({k: -1.0 for k in got["relevance"]})
    with pytest.raises(ValueError):
        hd.ablation_split_half(model, SRC[:1], TGT[:1])


def test_relevance_against_roles_known_answer():
    confidence = torch.tensor([[0.1, 0.5, 0.3], [0.2, 0.4, 0.6]])
    relevance = torch.tensor([[0.2, 0.1, 0.7], [0.5, 0.3, 0.25]])  # top 3: flat 2, 3, 4; layer 1: head 2
    prev = torch.tensor([[0.0, 0.1, 0.9], [0.1, 0.0, 0.0]])
    nxt = torch.tensor([[0.0, 0.0, 0.0], [0.8, 0.2, 0.3]])  # neighbour top 3: flat 2, 3, 5
    out = hd.relevance_against_roles(confidence, relevance, prev, nxt)
    assert out["top_relevant"] == [2, 3, 4] and out["both"] == [2, 3]
    assert out["top_layer1"] == 2 and out["less_confident"] == 1  # only head 1 (0.5) beats 0.3
    # one of the layer's 2 other heads is more confident; rank test: P(at least 1 of 3 heads above) = 2/3
    assert out["less_confident_share"] == pytest.approx(0.5) and out["less_confident_p"] == pytest.approx(2 / 3)
    # turned the other way: P(at most 1 of 3 heads above) = 2/3
    assert out["less_confident_p_below"] == pytest.approx(2 / 3)
    # overlap 2 of top 3 among 6: P(overlap <= 2) = 1 - P(3) = 1 - 1/20; rho's two tails sum to 1
    assert out["both_p_below"] == pytest.approx(1 - 1 / 20)
    assert out["rho_p"] + out["rho_p_below"] == pytest.approx(1.0)
    assert out["tests"]["both"] == (out["both_chance"], out["both_p"], out["both_p_below"]) == pytest.approx((1.5, 0.5, 0.95))
    assert out["tests"]["less_confident"] == pytest.approx((0.5, 2 / 3, 2 / 3)) and out["tests"]["rho"][0] == 0.0
    torch.testing.assert_close(out["neighbour"], torch.maximum(prev, nxt))
    # ranks of confidence 1 5 3 2 4 6 against relevance 2 1 6 5 4 3
    assert out["rho"] == pytest.approx(1 - 6 * (1 + 16 + 9 + 9 + 0 + 9) / (6 * 35))


def test_less_confident_p_is_a_valid_one_sided_test_under_no_link():
    """Relevance drawn independently of confidence: the test rejects at level alpha no more often than alpha
    (exactly alpha where alpha is a multiple of 1/h), and a relevant head that is the least confident of its
    layer gets the smallest p, 1/h."""
    gen = torch.Generator().manual_seed(0)
    n, h = 4000, 8
    ps = []
    for _ in range(n):
        conf, rel = torch.rand(2, h, generator=gen), torch.rand(2, h, generator=gen)
        z = torch.zeros(2, h)
        ps.append(hd.relevance_against_roles(conf, rel, z, z)["less_confident_p"])
    ps = torch.tensor(ps)
    for alpha in (0.125, 0.25, 0.5):
        share = float((ps <= alpha + 1e-9).float().mean())
        assert abs(share - alpha) < 3 * (alpha * (1 - alpha) / n) ** 0.5, (alpha, share)
    conf = torch.tensor([[0.9, 0.8, 0.1, 0.7], [0.0] * 4])
    rel = torch.tensor([[0.1, 0.2, 0.9, 0.3], [0.0] * 4])
    out = hd.relevance_against_roles(conf, rel, torch.zeros(2, 4), torch.zeros(2, 4))
    assert out["less_confident"] == 3 and out["less_confident_p"] == pytest.approx(1 / 4)
    assert out["less_confident_p_below"] == pytest.approx(1.0)  # the most extreme on the paper's side
    # the least confident head is the best the test can see: its p is the smallest possible
    assert out["less_confident_smallest_p"] == pytest.approx(out["less_confident_p"])


def test_largest_syntactic_gain_is_in_points():
    table = [dict(best=0.30, base=0.25), dict(best=0.5, base=0.52), dict(best=0.61, base=0.4)]
    assert hd.largest_syntactic_gain(table) == pytest.approx(21.0)
    with pytest.raises(ValueError):
        hd.largest_syntactic_gain([])


def test_best_over_training_takes_the_best_head_and_the_larger_statistic():
    trace = [dict(step=0, enc_self=dict(prev=[[0.1, 0.2]], next=[[0.3, 0.0]])),
             dict(step=50, enc_self=dict(prev=[[0.6, 0.2]], next=[[0.1, 0.4]]))]
    steps, best = hd.best_over_training(trace, "enc_self", ("prev", "next"))
    np.testing.assert_array_equal(steps, [0, 50])
    np.testing.assert_allclose(best, [0.3, 0.6])
    np.testing.assert_allclose(hd.best_over_training(trace, "enc_self", ("next",))[1], [0.3, 0.4])


def test_late_trend_reads_only_the_last_snapshots():
    trace = [dict(step=s, enc_self=dict(prev=[[v, 0.0]], next=[[0.0, 0.0]]))
             for s, v in [(0, 0.0), (500, 0.9), (7000, 0.50), (8000, 0.55), (9000, 0.60), (10000, 0.65)]]
    out = hd.late_trend(trace, "enc_self", ("prev", "next"), 10000)
    assert out["n"] == 4 and out["steps"][0] == 7000 and out["from_step"] == 7000
    assert out["change"] == pytest.approx(0.15) and out["slope"] == pytest.approx(0.05)
    assert out["slope_low"] == pytest.approx(0.05) == out["slope_high"]  # on a line: no noise
    noisy = [dict(step=s, enc_self=dict(prev=[[v, 0.0]], next=[[0.0, 0.0]]))
             for s, v in [(7000, 0.50), (8000, 0.57), (9000, 0.58), (10000, 0.65)]]
    wiggly = hd.late_trend(noisy, "enc_self", ("prev",), 10000)
    from scipy.stats import linregress
    from scipy.stats import t as student_t
    fit = linregress([7, 8, 9, 10], [0.50, 0.57, 0.58, 0.65])
    half = student_t.ppf(0.975, 2) * fit.stderr  # two degrees of freedom: four snapshots, a line
    assert (wiggly["slope_low"], wiggly["slope_high"]) == pytest.approx((fit.slope - half, fit.slope + half))
    few = hd.late_trend(trace, "enc_self", ("prev",), 10000, late_fraction=0.05)
    assert few["n"] == 1 and np.isnan(few["slope"]) and np.isnan(few["slope_low"])
    with pytest.raises(ValueError, match="late_fraction"):
        hd.late_trend(trace, "enc_self", ("prev",), 10000, late_fraction=1.0)


def test_rise_step_is_the_first_step_past_the_share_of_the_rise():
    trace = [dict(step=s, enc_self=dict(prev=[[v, 0.0]], next=[[0.0, 0.0]]))
             for s, v in [(0, 0.1), (10, 0.2), (30, 0.5), (90, 0.9), (200, 0.7)]]
    # rise 0.1 -> 0.9 (the peak, not the last value): half is 0.5, first reached at step 30
    assert hd.rise_step(trace, "enc_self", ("prev",)) == 30
    assert hd.rise_step(trace, "enc_self", ("prev",), share=0.2) == 30  # 0.26: step 10's 0.2 is short
    assert hd.rise_step(trace, "enc_self", ("prev",), share=0.1) == 10  # 0.18: step 10's 0.2 is past
    assert hd.rise_step(trace, "enc_self", ("prev",), share=1.0) == 90
    assert hd.rise_step(trace, "enc_self", ("prev",), share=0.6) == 90  # 0.58 of the peak's rise, not the end's
    falling = [dict(step=s, enc_self=dict(prev=[[v]], next=[[0.0]])) for s, v in ((0, 0.5), (10, 0.2))]
    with pytest.raises(ValueError, match="never rises"):
        hd.rise_step(falling, "enc_self", ("prev",))
    flat = [dict(step=s, enc_self=dict(prev=[[0.3]], next=[[0.0]])) for s in (0, 10)]
    with pytest.raises(ValueError, match="never rises"):
        hd.rise_step(flat, "enc_self", ("prev",))
    with pytest.raises(ValueError, match="share"):
        hd.rise_step(trace, "enc_self", ("prev",), share=0.0)


def test_checkpoint_comparison_rows():
    def ckpt(bleus, test, prev, nxt, seconds, threads, rare=None):
        meta = dict(evals=[dict(dev_bleu=b) for b in bleus], test_bleu_greedy=test, train_wall_seconds=seconds,
                    threads=threads)
        enc = dict(prev=torch.tensor(prev), next=torch.tensor(nxt))
        if rare is not None:
            enc.update(rare=torch.tensor(rare), rare_chance=0.05)
        return meta, {"enc_self": enc}

    a = ckpt([10.0, 31.5, 30.0], 29.0, [[0.2, 0.5]], [[0.1, 0.0]], 7290, 1, rare=[[0.1, 0.2]])
    b = ckpt([12.0, 33.0], 31.0, [[0.6, 0.1]], [[0.4, 0.3]], 60, 2, rare=[[0.3, 0.05]])
    rows = hd.checkpoint_comparison({"a": a, "b": b})
    assert [label for label, _ in rows] == ["dev BLEU (greedy, best evaluation)", "test BLEU (greedy)",
                                            "best previous-token share", "best next-token share",
                                            "best rare-token share / chance", "training (minutes)", "threads"]
    values = dict(rows)
    assert values["dev BLEU (greedy, best evaluation)"] == [31.5, 33.0]
    assert values["test BLEU (greedy)"] == [29.0, 31.0]
    assert values["best previous-token share"] == pytest.approx([0.5, 0.6])
    assert values["best next-token share"] == pytest.approx([0.1, 0.4])
    assert values["best rare-token share / chance"] == pytest.approx([4.0, 6.0])
    assert values["training (minutes)"] == [122, 1] and values["threads"] == [1, 2]
    without_rare = ckpt([1.0], 1.0, [[0.1]], [[0.1]], 60, 1)
    assert "best rare-token share / chance" not in dict(hd.checkpoint_comparison({"a": a, "c": without_rare}))


def test_checkpoint_comparison_gives_the_largest_syntactic_gain_with_arcs():
    # two verses with an arc of every relation at different offsets (so the positional baseline is 50%), and
    # head (1, 1) following every arc from dependent to head
    arcs = [[[1, 0, "nsubj"], [2, 0, "dobj"], [3, 2, "amod"], [4, 0, "advmod"]],
            [[0, 2, "nsubj"], [5, 1, "dobj"], [1, 3, "amod"], [2, 5, "advmod"]]]
    maps = [torch.full((1, 2, n, n), 0.1) for n in (5, 6)]  # (layers, heads, words, words) per verse
    for m, verse in zip(maps, arcs):
        for dep, head, _ in verse:
            m[0, 0, dep, head] = 1.0
    meta = dict(evals=[dict(dev_bleu=1.0)], test_bleu_greedy=1.0, train_wall_seconds=60, threads=1)
    roles_ = {"enc_self": dict(prev=torch.zeros(1, 2), next=torch.zeros(1, 2)), "word_maps": maps}
    rows = dict(hd.checkpoint_comparison({"m": (meta, roles_)}, arcs=arcs))
    gain = rows["largest syntactic gain over the positional baseline (points)"]
    assert gain == [pytest.approx(50.0)]  # every dep->head arc found (100%) against the offset baseline's 50%


def test_best_neighbour_share_is_the_largest_previous_or_next_token_share():
    enc = {"prev": torch.tensor([[0.2, 0.5], [0.1, 0.3]]), "next": torch.tensor([[0.6, 0.1], [0.0, 0.4]])}
    assert hd.best_neighbour_share(enc) == pytest.approx(0.6)  # a next-token head, not the best previous one
    assert hd.best_neighbour_share({**enc, "next": torch.zeros(2, 2)}) == pytest.approx(0.5)


def test_late_trend_slope_interval_covers_the_true_slope_at_its_level():
    """Seven snapshots of a line with independent noise: the 95% interval of the slope covers the true slope
    about 95% of the time (a normal interval, or a wrong count of degrees of freedom, covers too little)."""
    rng = np.random.default_rng(0)
    steps = np.linspace(7000, 10000, 7)
    covered = []
    for _ in range(2000):
        values = 0.4 + 0.02 * steps / 1000 + rng.normal(0, 0.01, steps.size)
        trace = [dict(step=int(s), enc_self=dict(prev=[[float(v)]])) for s, v in zip(steps, values)]
        t = hd.late_trend(trace, "enc_self", ("prev",), 10000)
        covered.append(t["slope_low"] <= 0.02 <= t["slope_high"])
    assert np.mean(covered) == pytest.approx(0.95, abs=0.015)
