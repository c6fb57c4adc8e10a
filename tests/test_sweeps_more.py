"""Tests of the analysis and tables chapter "Pruning heads" reads from the library: the random-order baseline,
the gaps between pruning curves and the recomputed masks (attnbook.heads.importance), the live scores of gate
runs, the per-kind comparison with the paper, the reasons and the from-scratch comparisons
(attnbook.heads.sweeps), and the markdown tables (attnbook.heads.pruning_tables)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from attnbook import stats
from attnbook.core import runs
from attnbook.heads import importance, pruning_tables, sweeps


def test_random_order_scores_prune_nested_sets_in_one_seeded_order():
    seen = []

    def score(masks):
        seen.append(masks[""].clone())
        return float(masks[""].sum())

    scores = importance.random_order_scores(score, (2, 3), [6, 4, 1], seed=0)
    assert scores == [6.0, 4.0, 1.0]
    assert all((b <= a).all() for a, b in zip(seen, seen[1:]))  # the kept sets are nested
    order = torch.randperm(6, generator=torch.Generator().manual_seed(0))
    assert seen[1].flatten()[order[:2]].tolist() == [0.0, 0.0]  # the first two of the order go first
    again = []
    importance.random_order_scores(lambda m: again.append(m[""].clone()) or 0.0, (2, 3), [6, 4, 1], seed=0)
    assert all(torch.equal(a, b) for a, b in zip(seen, again))
    with pytest.raises(ValueError):
        importance.random_order_scores(score, (2, 3), [7])


def test_pruning_curve_gaps():
    records = [{"n_kept": 72, "score": 1.0}, {"n_kept": 48, "score": 0.8}, {"n_kept": 24, "score": 0.6}]
    random = [1.0, 0.7, 0.4]
    gaps = importance.pruning_curve_gaps(records, random, [(60, 0.95), (72, 1.0), (0, 0.5), (36, 0.9)],
                                         n_total=72, up_to=48)
    assert gaps["over_random"] == pytest.approx((0.1 + 0.2) / 2)  # the steps at 48 and 24 heads
    assert gaps["at"] == pytest.approx(0.8)
    assert gaps["points_over"] == pytest.approx([0.95 - 0.9, 0.9 - 0.7])  # 72 and 0 heads left out
    with pytest.raises(ValueError):
        importance.pruning_curve_gaps(records, random[:2], [], 72, 48)
    with pytest.raises(ValueError):
        importance.pruning_curve_gaps(records, random, [], 72, 10)


def test_masks_from_importance_match_recomputes_the_least_important_heads():
    imp = {"enc_self": torch.tensor([[0.5, 0.1], [0.3, 0.9]])}
    rows = [{"n_kept": 2, "masks": {"enc_self": [[1.0, 0.0], [0.0, 1.0]]}},
            {"n_kept": 3, "masks": {"enc_self": [[1.0, 1.0], [0.0, 1.0]]}},  # the wrong head pruned
            {"n_kept": 4, "masks": {"enc_self": [[1.0, 1.0], [1.0, 1.0]]}}]
    assert importance.masks_from_importance_match(imp, rows) == [True, False, True]


def test_gate_points_score_trained_gates_and_their_binary_masks():
    sweep = {"runs": [{"lam": 0.1, "gates": [[0.5, 0.0], [1.0, 0.25]], "similarity": 0.9}]}
    point, = sweeps.gate_points(sweep, lambda m: float(m[""].sum()))
    assert point == {"lam": 0.1, "n_kept": 3, "gates": 1.75, "binary": 3.0, "script": 0.9}


def test_training_minutes_by_threads():
    runs = [{"threads": 2, "train_wall_seconds": 600}, {"threads": 1, "train_wall_seconds": 120},
            {"threads": 2, "train_wall_seconds": 60}]
    assert sweeps.training_minutes(runs) == {1: (2.0, 2.0), 2: (1.0, 10.0)}
    assert list(sweeps.training_minutes(runs)) == [1, 2]


def test_heads_per_kind_and_the_comparison_at_the_paper_s_share():
    paper_n = sweeps.heads_per_kind({"heads": 8, "layers": [6, 6]})
    assert paper_n == {"enc_self": 48, "dec_self": 48, "dec_cross": 48}
    runs = [{"n_kept": 64, "kept": {"enc_self": 16, "dec_self": 24, "dec_cross": 24}},
            {"n_kept": 40, "kept": {"enc_self": 4, "dec_self": 12, "dec_cross": 24}}]
    by_kind = {"runs": runs, "n_heads": {"enc_self": 48, "dec_self": 24, "dec_cross": 24}}
    paper = {"kinds": ["enc_self", "dec_cross", "dec_self"], "kept": [[24, 36, 12], [6, 12, 6]]}
    out = sweeps.kind_share_comparison(by_kind, paper, paper_n)  # the paper keeps 72 of 144: half
    assert out["run"] is runs[1] and out["paper_kept"] == 72  # 40 of 96 is nearer half than 64
    assert out["book"] == pytest.approx({"enc_self": 4 / 48, "dec_self": 0.5, "dec_cross": 1.0})
    assert out["paper"] == pytest.approx({"enc_self": 0.5, "dec_self": 0.25, "dec_cross": 0.75})


def _main(n_kept, bleu, overlap_changes=False):
    p_end = [[0.9, 0.9, 0.1, 0.1]]
    p_before = [[0.9, 0.1, 0.1, 0.1]] if overlap_changes else p_end
    snaps = [{"step": 240, "p_open": {"enc_self": p_before}}, {"step": 300, "p_open": {"enc_self": p_end}}]
    return {"n_kept": n_kept, "bleu_greedy": bleu, "spec": {"steps": 300}, "snapshots": snaps}


def test_encoder_reason_states_the_cost_the_recovery_and_the_settling():
    main = {0.05: _main(8, 29.0, overlap_changes=True), 0.1: _main(3, 28.5)}
    long_run = {"n_kept": 8, "bleu_greedy": 29.5, "spec": {"steps": 600}}
    reason = sweeps.encoder_reason(8, main, 30.0, [(8, 28.0), (3, 27.0)], long_run)
    assert reason == ("with 8 heads the masks cost 2.0 BLEU (greedy) without fine-tuning and 300 steps of "
                      "fine-tuning win back 1.0; over the last 60 steps 50% of the kept set still "
                      "changed; the paper fine-tunes until the gates stop; head width (64 dimensions in "
                      "the paper, 16 here): reason not measured; 600 steps instead of 300 give -0.50 (greedy) "
                      "with the same heads")
    assert sweeps.encoder_reason(8, main, 30.0, [(8, 28.0)], None).endswith("reason not measured")
    assert sweeps.encoder_reason(3, main, 30.0, [(8, 28.0), (3, 27.0)], long_run).endswith(
        "reason not measured")
    like = {"heads": 10, "delta": -0.61, "low": -1.02, "high": -0.2}
    assert sweeps.encoder_reason(3, main, 30.0, [(8, 28.0), (3, 27.0)], long_run, trained_on=like).endswith(
        "reason not measured; trained on to convergence alike (beam 4, over seeds), pruning to 10 heads changes "
        "BLEU by "
        "-0.61 [-1.02, -0.20]")


def test_all_kinds_reason():
    run = {"kept": {"enc_self": 3}, "bleu_greedy": 28.0, "spec": {"steps": 300}}
    assert sweeps.all_kinds_reason(run, 26.5, 30.0, 144, 96) == (
        "kept per kind {'enc_self': 3}; the masks alone cost 3.5 BLEU (greedy) and 300 steps of "
        "fine-tuning win back 1.5; the paper fine-tunes until the gates stop; head width (144 heads of 64 "
        "dimensions in the paper, 96 of 16 here): reason not measured")


def _row(kept, delta, low, high, seeds=(0, 1), spread=0.5, deltas=None):
    deltas = deltas or [delta] * len(seeds)
    scratch = [{"seed": s, "bleu_beam": 30.0, "delta": d, "low": low, "high": high} for s, d in zip(seeds, deltas)]
    return {"kept": kept, "pruned_beam": 29.5, "scratch": scratch,
            "across_seeds": {"delta": delta, "low": low, "high": high, "n_seeds": len(seeds), "spread": spread}}


def test_scratch_claims_verdict_by_the_seeds_pooled_t_interval():
    # seed sd pooled over the shapes: squared deviations 0.0625 * 2 and 0.01 * 2, 2 degrees of freedom
    rows = [_row(3, 2.0, 0.2, 1.4, deltas=[1.75, 2.25]), _row(8, -0.6, -1.0, -0.1, seeds=(0,)),
            _row(22, 0.1, -0.3, 0.5, deltas=[0.0, 0.2]), {"kept": 40, "scratch": [], "across_seeds": None}]
    claims = sweeps.scratch_claims(rows, "pruned", "2 of 2 done", -0.5, "Table 2", "python run.py x")
    assert len(claims) == 3  # the shape without runs from scratch has no claim
    first, second, third = (dataclasses.asdict(c) for c in claims)
    sd = (0.145 / 2) ** 0.5
    assert first["name"] == "scratch minus pruned, 3 encoder heads, mean over its seeds (BLEU, beam 4)"
    assert first["verdict"] == "differs" and first["reason"] == (
        f"+2.00 BLEU over 2 seed(s), spread 0.50; the seeds' 95% t interval (seed sd {sd:.2f} pooled over 3 "
        f"shapes, 2 degrees of freedom) runs from {2.0 - 4.3027 * sd / 2 ** 0.5:+.2f} to "
        f"{2.0 + 4.3027 * sd / 2 ** 0.5:+.2f}: from scratch is the better beyond the seeds' noise; 2 of 2 done; "
        "why: reason not measured")
    # one seed: the pooled sd over a single seed's mean, wide enough here to reach 0
    assert second["verdict"] == "undecided" and "the interval reaches 0" in second["reason"]
    assert third["verdict"] == "undecided" and "the interval reaches 0" in third["reason"]
    assert first["precomputed"] == "python run.py x" and first["paper"] == -0.5
    # the rule's power at the paper's effect: higher for a shape with two seeds than for one with one
    power = [float(c.condition.split("power: ")[1].split(" ")[0]) for c in claims]
    assert 0 < power[1] < power[0] < 1
    pruned_better, = sweeps.scratch_claims(rows[1:2], "pruned", "done", 0.5, "Table 2", "")
    assert "power" not in pruned_better.condition  # one seed: the seeds' noise is not measured
    assert pruned_better.verdict == "differs"
    assert pruned_better.reason == ("-0.60 BLEU over 1 seed(s); one seed: its paired 95% interval over verses "
                                    "runs from -1.00 to -0.10: the pruned model is the better beyond the seeds' "
                                    "noise; done; why: reason not measured")
    assert first["kind"] == "comparison"
    said, = sweeps.scratch_claims(rows[1:2], "pruned", "done", 0.5, "Table 2", "", why="short fine-tuning")
    assert said.reason.endswith("; done; why: short fine-tuning")
    other, = sweeps.scratch_claims(rows[1:2], "pruned", "done", 0.5, "Table 2", "", analogue="encoder-only shapes")
    assert (other.kind, other.verdict) == ("analogue", "differs")  # another experiment: same verdict, counted apart
    assert other.paper_note.startswith("analogue on encoder-only shapes") and other.paper_note.endswith("Table 2")


def test_scratch_claims_put_the_pruned_arm_s_seeds_in_when_it_has_them():
    def row(kept, scratch, pruned):
        seeds = [{"seed": i, "bleu_beam": b, "delta": b - pruned[0], "low": -9.0, "high": 9.0}
                 for i, b in enumerate(scratch)]
        return {"kept": kept, "pruned_beam": pruned[0], "scratch": seeds,
                "pruned_seeds": [{"seed": i, "bleu_beam": b} for i, b in enumerate(pruned)],
                "across_seeds": stats.across_seeds(seeds)}
    rows = [row(3, [30.0, 31.0, 30.5], [31.5, 31.0, 31.2]), row(8, [30.2, 30.8], [31.4])]
    claims = sweeps.scratch_claims(rows, "trained-on pruned", "done", -0.5, "Table 2", "cmd")
    expect = stats.two_arm_seed_intervals([[30.0, 31.0, 30.5], [30.2, 30.8]], [[31.5, 31.0, 31.2], [31.4]])
    for c, e in zip(claims, expect):
        assert c.value == pytest.approx(e["mean"], abs=0.005)  # compare() rounds to its digits
        assert c.interval == pytest.approx((e["low"], e["high"]), abs=0.05)  # to 2 significant digits
    assert claims[0].value == pytest.approx(30.5 - (31.5 + 31.0 + 31.2) / 3, abs=0.005)  # the arms' means
    assert "3 trained-on pruned seed(s)" in claims[0].reason and "1 trained-on pruned seed(s)" in claims[1].reason
    # scratch's spread from both shapes (3 and 2 seeds), the pruned arm's from the 3-head shape alone
    assert "from scratch, pooled over 2 shapes, and" in claims[0].reason
    assert "trained-on pruned, pooled over 1 shape;" in claims[0].reason
    power = float(claims[0].condition.split("power: ")[1].split(" ")[0])
    assert power == pytest.approx(stats.two_arm_rule_power(-0.5, expect[0]["sd_a"], expect[0]["sd_b"], [3, 2],
                                                           [3, 1])["reproduces"], abs=0.01)
    # the second shape's power simulates that shape: its seeds first
    power1 = float(claims[1].condition.split("power: ")[1].split(" ")[0])
    assert power1 == pytest.approx(stats.two_arm_rule_power(-0.5, expect[1]["sd_a"], expect[1]["sd_b"], [2, 3],
                                                            [1, 3])["reproduces"], abs=0.01)
    assert power1 < power  # one trained-on seed and two from scratch: less power than at 3 heads
    # one pruned seed everywhere: the pruned arm is held fixed (the pooled rule), as before
    fixed = sweeps.scratch_claims([row(3, [30.0, 31.0, 30.5], [31.5])], "pruned", "done", -0.5, "Table 2", "")
    assert "seed sd" in fixed[0].reason and "pooled over 1 shape;" not in fixed[0].reason


def test_michel_fine_tuned_table():
    rows = [{"n_kept": 3, "bleu_not_fine_tuned": {"bleu": 26.449, "low": 25.41, "high": 27.44},
             "bleu_fine_tuned": {"bleu": 28.05, "low": 26.9, "high": 29.1}, "gate_bleu_greedy": 28.6}]
    table = pruning_tables.michel_fine_tuned_table(rows, {3: 27.4})
    lines = table.split("\n")
    assert len(lines) == 3 and lines[1] == "|---|---|---|---|---|"
    assert lines[2] == "| 3 | 26.45 [25.4, 27.4] | 27.40 | 28.05 [26.9, 29.1] | 28.60 |"
    with pytest.raises(KeyError):
        pruning_tables.michel_fine_tuned_table(rows, {8: 27.4})


def test_scratch_table_one_line_per_shape_and_seed():
    rows = [_row(3, 1.38, 0.83, 1.96), _row(22, -0.1, -0.66, 0.49, seeds=(1,))]
    table = pruning_tables.scratch_table(rows, "trained on")
    lines = table.split("\n")
    assert lines[0] == ("| encoder heads | trained on (beam 4) | seed | from scratch (beam 4) | "
                        "scratch - trained on [95% interval] |")
    assert len(lines) == 2 + 3
    assert lines[2] == "| 3 | 29.50 | 0 | 30.00 | +1.38 [+0.83, +1.96] |"
    assert lines[4] == "| 22 | 29.50 | 1 | 30.00 | -0.10 [-0.66, +0.49] |"


def test_trained_on_gains_table_marks_the_control_s_missing_contrasts():
    d = {"delta": 1.48, "low": 1.03, "high": 1.91}
    base = {"before": 30.1, "after": 31.59, "gain": d, "train_steps": 4200, "epochs": 8.66,
            "stopped": "stop_when", "minutes": 59.4, "threads": 2}
    gains = [{**base, "label": "3", "beyond_control": d, "cost": {"delta": -0.74, "low": -1.21, "high": -0.26}},
             {**base, "label": "48 (unpruned control)", "beyond_control": None, "cost": None}]
    lines = pruning_tables.trained_on_gains_table(gains).split("\n")
    assert len(lines) == 4 and lines[1].count("---") == 9
    assert lines[2] == ("| 3 | 30.10 | 31.59 | +1.48 [+1.03, +1.91] | +1.48 [+1.03, +1.91] "
                        "| -0.74 [-1.21, -0.26] | 4200 (8.7) | stop_when | 59 (2) |")
    assert "| – | – |" in lines[3]
    no_before = {**gains[0], "label": "2", "before": None, "gain": None, "beyond_control": None}
    row = pruning_tables.trained_on_gains_table([no_before]).split("\n")[2]
    assert row.startswith("| 2 | – | 31.59 | – | – | -0.74 [-1.21, -0.26] |")
    assert pruning_tables.paired_interval(None) == "–"


def test_a_recipe_without_arms_runs_the_default_arms_and_one_with_arms_its_own():
    """The from-scratch recipes name no arms (scratch and the 300-step pruned model); the trained-on ones do."""
    assert sweeps.recipe_arms({}) == ["scratch", "pruned"]
    assert sweeps.recipe_arms({"arms": ["pruned_trained"]}) == ["pruned_trained"]
    assert sweeps.recipe_arms(runs.settings("pruned_converged")) == ["pruned_trained"]
    assert sweeps.recipe_arms(runs.settings("scratch_converged")) == ["scratch", "pruned"]
