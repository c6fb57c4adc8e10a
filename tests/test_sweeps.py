"""Tests of attnbook.heads.sweeps: summaries of the shipped pruning sweeps."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnbook.core import runs
import attnbook.claims
from attnbook import stats
from attnbook.heads import sweeps

#: three verses: their references, a worse translation, and one with the first verse right and the others worse
#: (the costs of pruning below pair them)
_REFS = ["el señor dijo a moisés", "y fue la tarde y la mañana", "en el principio crió dios los cielos"]
_WORSE = ["el dijo", "y fue la tarde", "en el principio dios"]
_THREE_SYSTEMS = (_REFS, _WORSE, [_REFS[0], _WORSE[1], _WORSE[2]])


def test_kept_masks_are_binary_and_read_gates_or_masks():
    run = {"gates": {"enc_self": [[0.0, 0.6], [1.0, 0.0]]}}
    assert sweeps.kept_masks(run)["enc_self"].tolist() == [[0.0, 1.0], [1.0, 0.0]]
    assert sweeps.kept_masks({"masks": {"": [[1.0, 0.0]]}})[""].tolist() == [[1.0, 0.0]]
    assert sweeps.kept_masks({"gates": [[0.3, 0.0]]})[""].tolist() == [[1.0, 0.0]]
    with pytest.raises(ValueError):
        sweeps.kept_masks({"lam": 0.1})


def test_gate_drift_measures_the_last_window_only():
    snaps = [{"step": s, "p_open": {"k": [[p, 0.5]]}} for s, p in [(0, 0.9), (20, 0.3), (40, 0.1), (60, 0.08)]]
    assert sweeps.gate_drift(snaps, window=20) == pytest.approx(0.02)
    assert sweeps.gate_drift(snaps, window=40) == pytest.approx(0.22)
    with pytest.raises(ValueError):
        sweeps.gate_drift(snaps, window=100)


def test_jaccard_of_kept_heads():
    a = {"k": torch.tensor([[1.0, 1.0, 0.0]])}
    b = {"k": torch.tensor([[1.0, 0.0, 1.0]])}
    assert sweeps.jaccard(a, b) == pytest.approx(1 / 3)
    assert sweeps.jaccard(a, a) == 1.0
    assert sweeps.jaccard({"k": torch.zeros(1, 3)}, {"k": torch.zeros(1, 3)}) == 1.0
    with pytest.raises(ValueError):
        sweeps.jaccard(a, {"j": torch.ones(1, 3)})


def test_layer_pattern_slope_sign():
    assert sweeps.kept_per_layer({"d": torch.tensor([[1.0, 1.0], [1.0, 0.0], [0.0, 0.0]])}) == {"d": [2, 1, 0]}
    assert sweeps.layer_slope([2, 1, 0]) == pytest.approx(-1.0)  # upper layers lose heads
    assert sweeps.layer_slope([0, 4, 8]) == pytest.approx(4.0)  # lower layers lose heads
    # a batch of layer lists (leading axes) gives each one's slope
    batch = sweeps.layer_slope([[[2, 1, 0], [0, 4, 8]], [[1, 1, 1], [3, 1, 2]]])
    assert batch.shape == (2, 2) and batch.ravel() == pytest.approx([-1.0, 4.0, 0.0, -0.5])
    with pytest.raises(ValueError, match="two layers"):
        sweeps.layer_slope([[3], [4]])


def _kind_runs(keep):  # runs of an all-kinds sweep from each kind's kept masks, one list per run
    return [{"gates": {k: m for k, m in run.items()}} for run in keep]


def test_kind_order_p_finds_an_order_that_heads_make_and_not_one_they_do_not():
    ref = ["enc_self", "dec_self", "dec_cross"]
    # enc_self kept least, dec_cross most, in every run: most head pairs in the paper's order
    ordered = _kind_runs([{"enc_self": [[0, 0, 0, 1]] * 4, "dec_self": [[0, 1, 1, 0]] * 2,
                           "dec_cross": [[1, 1, 1, 1]] * 2}] * 3)
    t = sweeps.kind_order_p(ordered, ref, n_draws=2000)
    pairs = 16 * 8 + 16 * 8 + 8 * 8
    assert t["pairs"] == pairs and t["chance"] == 0.5
    # enc heads 4 kept (score 1), 12 not; dec_self 4 and 4; dec_cross all 8: count the ordered pairs
    below = lambda a, b: (a < b) + 0.5 * (a == b)  # noqa: E731
    enc, dsf, dcr = [1] * 4 + [0] * 12, [0, 1, 1, 0] * 2, [1] * 8
    expect = sum(below(a, b) for x, y in ((enc, dsf), (enc, dcr), (dsf, dcr)) for a in x for b in y) / pairs
    assert t["value"] == pytest.approx(expect)
    assert t["value"] > 0.5 and t["p"] < 0.01  # far beyond what random kinds give
    # the reverse order: the same heads, judged against the other order, do not pass
    reverse = sweeps.kind_order_p(ordered, ref[::-1], n_draws=2000)
    assert reverse["p"] > 0.9 and reverse["p_below"] < 0.01  # and the test turned the other way finds it
    assert t["p_below"] > 0.9
    # kinds kept alike: no order, p far from 0
    alike = _kind_runs([{"enc_self": [[0, 1, 0, 1]] * 4, "dec_self": [[0, 1, 0, 1]] * 2,
                         "dec_cross": [[1, 0, 1, 0]] * 2}])
    assert sweeps.kind_order_p(alike, ref, n_draws=2000)["p"] > 0.2
    with pytest.raises(ValueError, match="exactly the kinds"):
        sweeps.kind_order_p(_kind_runs([{"enc_self": [[1]]}]), ref)



def test_bleu_at_and_prunable_share():
    curve = [(48, 30.0), (43, 29.9), (38, 29.8), (33, 29.0), (28, 29.7)]
    assert sweeps.bleu_at(40.5, curve) == pytest.approx(29.85)
    with pytest.raises(ValueError):
        sweeps.bleu_at(50, curve)
    # stops at the first drop beyond 0.5 (33 heads), even though 28 heads recover
    assert sweeps.prunable_share(curve, 30.0, 48, 0.5) == pytest.approx(10 / 48)
    assert sweeps.prunable_share(curve, 30.0, 48, 0.0) == 0.0


def test_load_checks_the_run(tmp_path, monkeypatch):
    monkeypatch.setattr(runs, "DATA", tmp_path)
    (tmp_path / "pruning").mkdir()
    with pytest.raises(runs.NotAtPreset, match="scripts/run.py minilm_gates"):
        sweeps.load("minilm_gates")
    (tmp_path / "pruning" / "minilm_gates_quick.json").write_text('{"meta": {"run": "other"}}')
    with pytest.raises(runs.StaleRun, match="not made by run"):
        sweeps.load("minilm_gates")
    with pytest.raises(runs.NotAtPreset, match="defined at quick only"):
        sweeps.load("minilm_gates", preset="paper")


def test_kept_from_p_open_inverts_the_closed_form():
    """A snapshot's P(g != 0) gives back the evaluation decision: the threshold is the log_alpha where the
    evaluation gate 1.2 sigmoid(log_alpha) - 0.1 reaches 0, i.e. log_alpha = -log 11."""
    from attnbook.heads import gates

    log_alpha = torch.tensor([[-3.0, -2.5, -2.3, 0.0, 2.0]])
    p = gates.prob_nonzero(log_alpha)
    kept = sweeps.kept_from_p_open({"k": p.tolist()})["k"]
    assert kept.tolist() == [[0.0, 0.0, 1.0, 1.0, 1.0]]
    assert torch.equal(kept, (gates.deterministic_gates(log_alpha) > 0).float())


def test_settling_reports_drift_and_decision_overlap():
    from attnbook.heads import gates

    def snap(step, las):
        return {"step": step, "p_open": {"k": gates.prob_nonzero(torch.tensor([las])).tolist()}}

    snaps = [snap(0, [0.0, 0.0]), snap(50, [1.0, -3.0]), snap(100, [1.1, -3.1])]
    out = sweeps.settling(snaps, window=50)
    assert out["overlap"] == 1.0 and out["max_dp"] < 0.05
    moving = [snap(0, [0.0, 0.0]), snap(50, [1.0, 1.0]), snap(100, [1.0, -3.0])]
    assert sweeps.settling(moving, window=50)["overlap"] == 0.5


def test_gaps_to_curve_compares_at_the_same_number_of_heads():
    curve = [(10, 20.0), (20, 28.0), (30, 30.0)]
    points = [(15, 25.0), (25, 29.5), (30, 30.0), (5, 0.0)]  # 30: the full model; 5: outside the range
    gaps = sweeps.gaps_to_curve(points, curve)
    assert gaps == {15: pytest.approx(1.0), 25: pytest.approx(0.5)}  # 25 - 24 = 1, 29.5 - 29 = 0.5
    assert min(gaps.values()) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        sweeps.gaps_to_curve([(40, 1.0)], curve)


def test_scratch_versus_pruned_pairs_each_seed_with_its_shapes_pruned_model():
    refs = ["el señor dijo a moisés", "y fue la tarde y la mañana", "en el principio crió dios los cielos"]
    worse = ["el dijo", "y fue la tarde", "en el principio dios"]
    mask = {"enc_self": [[1.0, 0.0]]}
    record = {"n_eval": 3, "runs": [
        {"arm": "scratch", "lam": 0.1, "seed": 1, "kept": 1, "masks": mask, "bleu_beam": {"bleu": 100.0},
         "hypotheses_beam": refs},
        {"arm": "scratch", "lam": 0.1, "seed": 0, "kept": 1, "masks": mask, "bleu_beam": {"bleu": 20.0},
         "hypotheses_beam": worse},
        {"arm": "pruned", "lam": 0.1, "seed": None, "kept": 1, "masks": mask, "matches_sweep": True,
         "bleu_beam": {"bleu": 20.0}, "hypotheses_beam": worse},
        {"arm": "scratch", "lam": 0.05, "seed": 0, "kept": 2, "masks": mask, "bleu_beam": {"bleu": 1.0},
         "hypotheses_beam": worse},  # no pruned arm yet: no row
    ]}
    rows = sweeps.scratch_versus_pruned(record, refs + ["unused"], n_bootstrap=50)
    assert [r["lam"] for r in rows] == [0.1] and [s["seed"] for s in rows[0]["scratch"]] == [0, 1]
    assert rows[0]["n_eval"] == 3
    same, better = rows[0]["scratch"]
    assert same["delta"] == 0 and same["low"] == same["high"] == 0
    assert better["delta"] > 50 and better["p_not_better"] == 0
    both = rows[0]["across_seeds"]
    assert both["n_seeds"] == 2 and both["delta"] == pytest.approx(better["delta"] / 2)
    assert (both["low"], both["high"]) == (0, better["high"]) and both["spread"] == better["delta"]
    record["runs"][0]["masks"] = {"enc_self": [[0.0, 1.0]]}
    with pytest.raises(ValueError, match="another shape"):
        sweeps.scratch_versus_pruned(record, refs)
    with pytest.raises(ValueError, match="evaluated on 3"):
        sweeps.scratch_versus_pruned(record, refs[:2])


def test_scratch_versus_pruned_takes_the_trained_on_pruned_arm_when_given():
    refs = ["el señor dijo a moisés", "y fue la tarde y la mañana"]
    worse = ["el dijo", "y fue la tarde"]
    mask = {"enc_self": [[1.0, 0.0]]}
    run = {"lam": 0.1, "kept": 1, "masks": mask}
    record = {"n_eval": 2, "runs": [
        {**run, "arm": "scratch", "seed": 0, "bleu_beam": {"bleu": 20.0}, "hypotheses_beam": worse},
        {**run, "arm": "pruned", "seed": None, "bleu_beam": {"bleu": 20.0}, "hypotheses_beam": worse},
    ]}
    trained_on = {"n_eval": 2, "meta": {"settings": {"seeds": [0]}}, "runs": [
        {**run, "arm": "pruned_trained", "seed": 0, "bleu_beam": {"bleu": 100.0}, "hypotheses_beam": refs},
    ]}
    assert sweeps.scratch_versus_pruned(record, refs, n_bootstrap=20)[0]["scratch"][0]["delta"] == 0
    row, = sweeps.scratch_versus_pruned(record, refs, n_bootstrap=20, pruned_arm=trained_on)
    assert row["pruned_beam"] == 100.0 and row["scratch"][0]["delta"] < -50
    # a trained-on shape with no from-scratch twin: a row with no seeds
    lone = {**run, "lam": 0.2, "kept": 0, "arm": "pruned_trained", "seed": 0, "bleu_beam": {"bleu": 1.0},
            "hypotheses_beam": worse}
    rows = sweeps.scratch_versus_pruned(record, refs, n_bootstrap=20,
                                        pruned_arm={**trained_on, "runs": trained_on["runs"] + [lone]})
    assert [(r["lam"], r["scratch"], r["across_seeds"]) for r in rows[:1]] == [(0.2, [], None)]
    assert rows[1]["across_seeds"]["n_seeds"] == 1
    with pytest.raises(ValueError, match="pruned arm was evaluated on 3"):
        sweeps.scratch_versus_pruned(record, refs, pruned_arm={**trained_on, "n_eval": 3})
    # further seeds of the trained-on arm: listed, the first seed's model stays the paired one
    more = {**run, "arm": "pruned_trained", "bleu_beam": {"bleu": 40.0}, "hypotheses_beam": worse}
    seeded = {**trained_on, "runs": [{**more, "seed": 2}] + trained_on["runs"] + [{**more, "seed": 1}]}
    row, = sweeps.scratch_versus_pruned(record, refs, n_bootstrap=20, pruned_arm=seeded)
    assert row["pruned_beam"] == 100.0 and row["scratch"][0]["delta"] < -50
    assert row["pruned_seeds"] == [{"seed": 0, "bleu_beam": 100.0}, {"seed": 1, "bleu_beam": 40.0},
                                   {"seed": 2, "bleu_beam": 40.0}]
    other = {**seeded, "runs": seeded["runs"] + [{**more, "seed": 3, "masks": {"enc_self": [[0.0, 1.0]]}}]}
    with pytest.raises(ValueError, match="keep different heads"):
        sweeps.scratch_versus_pruned(record, refs, n_bootstrap=20, pruned_arm=other)
    # the further seeds' file alone (seed 0 missing): refused, never paired with seed 1 instead
    without_first = {**seeded, "runs": [r for r in seeded["runs"] if r["seed"] != 0]}
    with pytest.raises(ValueError, match="no run of its first seed 0"):
        sweeps.scratch_versus_pruned(record, refs, n_bootstrap=20, pruned_arm=without_first)
    # the verdict's difference: paired mean with one pruned model, the arms' means with seeds
    assert sweeps.arm_difference(row) == pytest.approx(20.0 - 60.0)
    one, = sweeps.scratch_versus_pruned(record, refs, n_bootstrap=20, pruned_arm=trained_on)
    assert sweeps.arm_difference(one) == one["across_seeds"]["delta"]


def test_merged_adds_a_further_seed_s_runs_and_refuses_what_does_not_pair():
    refs = ["el señor dijo a moisés", "y fue la tarde y la mañana"]
    worse = ["el dijo", "y fue la tarde"]
    mask = {"enc_self": [[1.0, 0.0]]}
    run = {"lam": 0.1, "kept": 1, "masks": mask}

    def record(seeds, runs, complete=True, n_eval=2, recipe="encoder_gates_converged", beam=4):
        return {"n_eval": n_eval, "complete": complete, "runs": runs,
                "meta": {"run": "r", "settings": {"seeds": seeds, "gate_recipe": recipe, "beam": beam,
                                                  "lambdas": [0.1], "arms": ["scratch"]}}}

    base = record([0, 1], [
        {**run, "arm": "scratch", "seed": 0, "bleu_beam": {"bleu": 20.0}, "hypotheses_beam": worse},
        {**run, "arm": "scratch", "seed": 1, "bleu_beam": {"bleu": 20.0}, "hypotheses_beam": worse},
        {**run, "arm": "pruned", "seed": None, "bleu_beam": {"bleu": 20.0}, "hypotheses_beam": worse}])
    third = record([2], [{**run, "arm": "scratch", "seed": 2, "bleu_beam": {"bleu": 100.0},
                          "hypotheses_beam": refs}], complete=False)
    assert sweeps.merged(base, runs.Missing("x", "quick", "not shipped")) == {
        **base, "seeds": [0, 1], "added": []}
    merged = sweeps.merged(base, third)
    assert merged["seeds"] == [0, 1, 2] and not merged["complete"] and len(base["runs"]) == 3
    assert [r["seed"] for r in merged["added"]] == [2]
    row, = sweeps.scratch_versus_pruned(merged, refs, n_bootstrap=20)
    assert [s["seed"] for s in row["scratch"]] == [0, 1, 2] and row["across_seeds"]["n_seeds"] == 3
    with pytest.raises(ValueError, match="evaluated on 3 verses"):
        sweeps.merged(base, {**third, "n_eval": 3})
    with pytest.raises(ValueError, match="all_kinds"):
        sweeps.merged(base, record([2], third["runs"], recipe="all_kinds_gates_converged"))
    with pytest.raises(ValueError, match="repeats"):
        sweeps.merged(base, record([1], base["runs"][1:2]))
    with pytest.raises(ValueError, match="'beam': 1"):  # decoded otherwise: the runs would not pair
        sweeps.merged(base, record([2], third["runs"], beam=1))
    by_rule = record([2], third["runs"])  # another rule for the gate seed a seed starts from still pairs
    by_rule["meta"]["settings"]["gate_seeds"] = "same_heads"
    assert [r["seed"] for r in sweeps.merged(base, by_rule)["added"]] == [2]
    # another arm's record (the control's seeds into the trained-on arm) is refused
    on = record([0], [{**run, "arm": "pruned_trained", "seed": 0}])
    on["meta"]["settings"]["arms"] = ["pruned_trained"]
    ctrl = record([1], [{**run, "arm": "unpruned_trained", "seed": 1}])
    ctrl["meta"]["settings"]["arms"] = ["unpruned_trained"]
    with pytest.raises(ValueError, match="another arm"):
        sweeps.merged(on, ctrl)
    assert len(sweeps.merged(base, third)["runs"]) == 4  # a subset of the record's arms (scratch) merges


def test_across_seeds_envelopes_the_seeds_intervals():
    seeds = [{"delta": 1.0, "low": 0.4, "high": 1.5}, {"delta": -0.5, "low": -1.2, "high": 0.1}]
    assert stats.across_seeds(seeds) == {"n_seeds": 2, "delta": 0.25, "low": -1.2, "high": 1.5, "spread": 1.5}
    assert stats.across_seeds(seeds[:1])["spread"] == 0
    with pytest.raises(ValueError, match="at least one seed"):
        stats.across_seeds([])


def test_trained_on_gains_pairs_each_shape_with_its_short_fine_tuning_and_the_control():
    refs, worse, half = _THREE_SYSTEMS
    common = {"train_steps": 10, "epochs": 1.0, "stopped": "steps", "train_wall_seconds": 120.0, "threads": 1,
              "averaged": False}
    scratch = {"n_eval": 3, "runs": [
        {"arm": "pruned", "lam": 0.1, "kept": 1, "bleu_beam": {"bleu": 1.0}, "hypotheses_beam": worse},
        {"arm": "pruned", "lam": 0.05, "kept": 2, "bleu_beam": {"bleu": 1.0}, "hypotheses_beam": worse},
        {"arm": "scratch", "lam": 0.1, "kept": 1, "bleu_beam": {"bleu": 9.0}, "hypotheses_beam": refs}]}
    seed0 = {"meta": {"settings": {"seeds": [0]}}}
    trained_on = {**seed0, "n_eval": 3, "runs": [  # the 2-head model reaches the references, the 1-head one half
        {**common, "seed": 0, "lam": 0.05, "kept": 2, "bleu_beam": {"bleu": 100.0}, "hypotheses_beam": refs},
        {**common, "seed": 0, "lam": 0.1, "kept": 1, "bleu_beam": {"bleu": 50.0}, "hypotheses_beam": half},
        # a further seed (merged from its own file): the seed-level rule's, not paired here
        {**common, "seed": 1, "lam": 0.1, "kept": 1, "bleu_beam": {"bleu": 1.0}, "hypotheses_beam": worse}]}
    control = {**seed0, "n_eval": 3, "runs": [
        {**common, "seed": 0, "bleu_beam": {"bleu": 50.0}, "hypotheses_beam": half, "lam": None,
         "before": {"bleu_beam": {"bleu": 1.0}, "hypotheses_beam": worse}}]}
    control["runs"].insert(0, {**control["runs"][0], "seed": 1, "hypotheses_beam": refs})  # a further seed
    rows = sweeps.trained_on_gains(trained_on, control, scratch, refs, n_bootstrap=50)
    assert [r["label"] for r in rows] == ["1", "2", "48 (unpruned control)"]
    one, two, ctrl = rows
    assert ctrl["gain"]["delta"] > 0 and one["gain"]["delta"] == pytest.approx(ctrl["gain"]["delta"])  # same gain
    assert one["beyond_control"]["delta"] == pytest.approx(0, abs=1e-9) and one["cost"]["delta"] == 0
    assert two["beyond_control"]["delta"] == pytest.approx(two["gain"]["delta"] - ctrl["gain"]["delta"])
    assert two["cost"]["delta"] == pytest.approx(stats.bleu(refs, refs) - stats.bleu(half, refs))
    assert ctrl["beyond_control"] is None and ctrl["cost"] is None and one["minutes"] == 2.0
    with pytest.raises(ValueError, match="evaluated on 3 and 2"):
        sweeps.trained_on_gains(trained_on, {**control, "n_eval": 2}, scratch, refs)
    # a trained-on shape with no 300-step model in the scratch record: its cost, no gain
    lone = {**common, "seed": 0, "lam": 0.2, "kept": 3, "bleu_beam": {"bleu": 100.0}, "hypotheses_beam": refs}
    rows = sweeps.trained_on_gains({**trained_on, "runs": trained_on["runs"] + [lone]}, control, scratch, refs,
                                   n_bootstrap=50)
    three = rows[2]
    assert three["label"] == "3" and three["before"] is None and three["after"] == 100.0
    assert three["gain"] is None and three["beyond_control"] is None
    assert three["cost"]["delta"] == pytest.approx(two["cost"]["delta"])


def test_kind_shares_orders_the_kinds_from_the_most_pruned():
    sweep = {"shapes": {"enc_self": [2, 2], "dec_self": [1, 2], "dec_cross": [1, 2]}, "runs": [
        {"spec": {"lam": 0.5}, "kept": {"enc_self": 1, "dec_self": 2, "dec_cross": 0}},
        {"spec": {"lam": 0.1}, "kept": {"enc_self": 3, "dec_self": 2, "dec_cross": 1}}]}
    out = sweeps.kind_shares(sweep)
    assert [r["spec"]["lam"] for r in out["runs"]] == [0.1, 0.5]
    assert out["n_heads"] == {"enc_self": 4, "dec_self": 2, "dec_cross": 2}
    assert out["share"]["enc_self"] == [0.75, 0.25] and out["order"] == ["dec_cross", "enc_self", "dec_self"]


def test_layer_slopes_reads_the_run_nearest_half_of_a_kind():
    def run(lam, gates):
        return {"spec": {"lam": lam}, "gates": {"dec_self": gates},
                "kept": {"dec_self": int(sum(g != 0 for row in gates for g in row))}}
    runs_ = [run(0.1, [[1, 1], [1, 1], [1, 0]]), run(0.2, [[1, 1], [1, 0], [0, 0]]), run(0.5, [[1, 0], [0, 0], [0, 0]])]
    per_run = [sweeps.kept_per_layer(sweeps.kept_masks(r)) for r in runs_]
    out = sweeps.layer_slopes(runs_, per_run, {"dec_self": 6}, ["dec_self"])["dec_self"]
    assert (out["lam"], out["per_layer"]) == (0.2, [2, 1, 0]) and out["slope"] == pytest.approx(-1.0)
    assert [lam for lam, _ in out["every"]] == [0.1, 0.2, 0.5] and out["every"][0][1] == pytest.approx(-0.5)
    with pytest.raises(ValueError, match="every run"):
        sweeps.layer_slopes(runs_, per_run[:2], {"dec_self": 6}, ["dec_self"])


def test_layer_slope_p_is_small_for_a_steep_pattern_and_valid_for_random_ones():
    steep = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0], [0, 0, 0, 0]])  # lower layers keep more: slope -2
    p_down = sweeps.layer_slope_p(steep, -1, n_draws=4000)
    assert p_down < 0.02 and sweeps.layer_slope_p(steep, +1, n_draws=4000) > 0.95
    # turned the other way: the slope lies below chance in direction +1, not in direction -1
    assert sweeps.layer_slope_p(steep, +1, n_draws=4000, below=True) < 0.02
    assert sweeps.layer_slope_p(steep, -1, n_draws=4000, below=True) > 0.95
    # against every kept set of the same size, enumerated: the share whose slope is at most the observed one
    import itertools
    for mask in (steep, torch.tensor([[1, 1, 0, 0], [1, 0, 1, 0], [0, 1, 1, 0]])):  # slopes -2 and 0
        observed = sweeps.layer_slope(mask.sum(1).tolist())
        slopes = [sweeps.layer_slope(np.bincount([h // 4 for h in heads], minlength=3).tolist())
                  for heads in itertools.combinations(range(12), int(mask.sum()))]
        exact = np.mean([sl <= observed + 1e-9 for sl in slopes])
        assert sweeps.layer_slope_p(mask, -1, n_draws=20000) == pytest.approx(exact, abs=0.012)
    with pytest.raises(ValueError, match="direction"):
        sweeps.layer_slope_p(steep, 0)
    with pytest.raises(ValueError, match="some heads kept"):
        sweeps.layer_slope_p(torch.ones(3, 4), 1)
    # under no pattern the p-value is uniform: about 10% of random kept sets give p <= 0.1
    gen = torch.Generator().manual_seed(2)
    ps = []
    for i in range(300):
        kept = torch.zeros(24, dtype=torch.bool)
        kept[torch.randperm(24, generator=gen)[:12]] = True
        ps.append(sweeps.layer_slope_p(kept.reshape(3, 8), -1, n_draws=400, seed=i))
    for level in (0.05, 0.1, 0.2):  # valid: the slope takes few values, so it may be conservative, never liberal
        assert np.mean([p <= level for p in ps]) <= level + 3 * (level * (1 - level) / 300) ** 0.5


def test_role_gap_p_is_small_for_the_strongest_heads_and_valid_for_random_ones():
    strength = torch.arange(48, dtype=torch.float).reshape(6, 8) / 48
    top = torch.zeros(48, dtype=torch.bool)
    top[-4:] = True  # the 4 strongest of 48: chance 1 / C(48, 4), so only the observed draw counts
    assert sweeps.role_gap_p(strength, top.reshape(6, 8), n_draws=2000) == pytest.approx(1 / 2001)
    bottom = torch.zeros(48, dtype=torch.bool)
    bottom[:4] = True
    assert sweeps.role_gap_p(strength, bottom.reshape(6, 8), n_draws=2000) == pytest.approx(1.0)
    # turned the other way: the 4 weakest heads lie below chance, the 4 strongest do not
    assert sweeps.role_gap_p(strength, bottom.reshape(6, 8), n_draws=2000, below=True) == pytest.approx(1 / 2001)
    assert sweeps.role_gap_p(strength, top.reshape(6, 8), n_draws=2000, below=True) == pytest.approx(1.0)
    # under no link the p-value is uniform: about 10% of random kept sets give p <= 0.1
    gen = torch.Generator().manual_seed(1)
    ps = []
    for i in range(300):
        kept = torch.zeros(48, dtype=torch.bool)
        kept[torch.randperm(48, generator=gen)[:6]] = True
        ps.append(sweeps.role_gap_p(torch.rand(6, 8, generator=gen), kept.reshape(6, 8), n_draws=400, seed=i))
    share = sum(p <= 0.1 for p in ps) / len(ps)
    assert 0.1 - 3 * (0.09 / 300) ** 0.5 < share < 0.1 + 3 * (0.09 / 300) ** 0.5


def test_role_gap_is_kept_minus_pruned():
    strength = torch.tensor([[0.9, 0.1], [0.5, 0.3]])
    assert sweeps.role_gap(strength, torch.tensor([[1, 0], [1, 0]])) == pytest.approx(0.7 - 0.2)
    with pytest.raises(ValueError, match="kept and pruned"):
        sweeps.role_gap(strength, torch.ones(2, 2))


def test_main_runs_settling_rows_and_nesting():
    defaults = {"lr": 1.0, "steps": 2}

    def run(lam, gates, **spec):
        snaps = [{"step": 0, "p_open": {"enc_self": [[0.9] * 3]}}, {"step": 2, "p_open": {"enc_self": [[0.9] * 3]}}]
        return {"spec": {**defaults, "lam": lam, **spec}, "gates": {"enc_self": [gates]}, "n_kept": sum(gates),
                "snapshots": snaps}
    sweep = {"runs": [run(0.1, [1, 1, 0]), run(0.5, [1, 0, 0]), run(0.1, [1, 0, 0], steps=4)]}
    main = sweeps.main_runs(sweep, defaults)
    assert sorted(main) == [0.1, 0.5] and main[0.1]["n_kept"] == 2
    rows = sweeps.settling_rows(sweep, main, window=2)
    assert [r["same_as_main"] for r in rows] == [1.0, 1.0, 0.5] and rows[0]["max_dp"] == 0
    assert sweeps.not_nested(main) == 0
    main[0.5] = run(0.5, [0, 0, 1])  # kept at the larger lambda, pruned at the smaller one
    assert sweeps.not_nested(main) == 1


def test_gate_seed_agreement_compares_each_seed_with_the_main_run():
    defaults = {"lr": 1.0, "steps": 2}

    def run(lam, gates, moved=0.0, **spec):  # P(g != 0) moves by ``moved`` over the last 2 steps
        snaps = [{"step": 0, "p_open": {"enc_self": [[0.9 - moved] * 4]}},
                 {"step": 2, "p_open": {"enc_self": [[0.9] * 4]}}]
        return {"spec": {**defaults, "lam": lam, **spec}, "gates": {"enc_self": [gates]}, "n_kept": sum(gates),
                "snapshots": snaps}
    sweep = {"meta": {"settings": {"seed": 0}},
             "runs": [run(0.1, [1, 1, 0, 0]), run(0.1, [1, 0, 0, 0], 0.3, seed=2), run(0.1, [1, 1, 1, 0], seed=1),
                      run(0.1, [0, 0, 0, 1], steps=4), run(0.5, [1, 0, 0, 0], seed=1),
                      run(0.3, [1, 0, 0, 0])]}
    out = sweeps.gate_seed_agreement(sweep, defaults, 0.1, window=2)
    assert out["seeds"] == [0, 1, 2] and out["kept"] == [2, 3, 1]
    assert out["overlaps"] == pytest.approx([2 / 3, 1 / 2]) and out["mean"] == pytest.approx(7 / 12)
    assert out["always"] == 1  # head 0 only; the steps=4 run is not a gate seed
    # the least settled run over the last 2 steps: seed 2's P(g != 0) moved by 0.3
    assert out["settling"]["max_dp"] == pytest.approx(0.3) and out["settling"]["overlap"] == 1.0
    unsettled = sweeps.settling_gates(out["settling"], "lambda=0.1, gate seeds 0-2", 2, guards="the seeds' overlap")
    assert [g.holds for g in unsettled] == [False, True] and unsettled[0].reason == "failed: the seeds' overlap"
    with pytest.raises(ValueError, match="no main run"):
        sweeps.gate_seed_agreement(sweep, defaults, 0.5)  # no main run at 0.5
    with pytest.raises(ValueError, match="no other gate seed"):
        sweeps.gate_seed_agreement(sweep, defaults, 0.3)  # a main run alone at 0.3
    # the gate: a mean overlap of 7/12 < 0.6 fails it; seeds that keep the main run's heads pass
    failed = sweeps.seed_overlap_gate(out, 0.1, precomputed="cmd")
    assert failed.verdict == "fails" and not failed.holds and failed.precomputed == "cmd"
    assert failed.name == "lambda=0.1: mean overlap of gate seeds 1 and 2's kept heads with seed 0's"
    agree = {**out, "mean": sweeps.MIN_KEPT_OVERLAP}
    assert sweeps.seed_overlap_gate(agree, 0.1).holds


def test_changes_at_paper_shapes_interpolates_the_book_never_the_paper():
    runs_ = [{"n_kept": 40, "bleu_beam": 29.0}, {"n_kept": 20, "bleu_beam": 25.0}, {"n_kept": 80, "bleu_beam": 30.0}]
    paper = [(60, 0.1), (30, -0.4), (12, -0.9), (144, 0.0)]  # of 120 heads: shares 0.5, 0.25, 0.1, 1.2
    out = sweeps.changes_at_paper_shapes(runs_, 80, 30.0, paper, 120)
    assert sorted(out) == [30, 60]  # 0.1 is below the book's smallest share (0.25), 1.2 above its largest
    assert out[60]["book"] == pytest.approx(-1.0) and out[60]["between"] == (40, 40)  # at the 40-head run
    assert out[30]["share"] == 0.25 and out[30]["book"] == pytest.approx(-5.0) and out[30]["paper"] == -0.4
    mid = sweeps.changes_at_paper_shapes(runs_, 80, 30.0, [(45, 0.0)], 120)[45]  # share 0.375: 30 heads
    assert mid["book"] == pytest.approx(-3.0) and mid["between"] == (20, 40)  # halfway between -5 and -1
    assert mid["nearest"]["n_kept"] in (20, 40)
    with pytest.raises(ValueError, match="no runs"):
        sweeps.changes_at_paper_shapes([], 80, 30.0, paper, 120)


def test_settling_and_initialisation_gates_fail_on_runs_still_moving_or_elsewhere():
    from attnbook.heads import gates

    def snap(step, las):
        return {"step": step, "p_open": {"k": gates.prob_nonzero(torch.tensor([las])).tolist()}}

    settled = sweeps.settling([snap(0, [0.0, 0.0]), snap(50, [1.0, -3.0]), snap(100, [1.1, -3.1])], window=50)
    moving = sweeps.settling([snap(0, [0.0, 0.0]), snap(50, [1.0, 1.0]), snap(100, [1.0, -3.0])], window=50)
    ok = sweeps.settling_gates(settled, "gates started open", 50)
    assert [g.holds for g in ok] == [True, True]
    assert ok[0].name == "gates started open: largest change of P(g != 0) over the last 50 steps"
    still = sweeps.settling_gates(moving, "gates started open", 50)
    assert [g.verdict for g in still] == ["fails", "fails"]  # P moved by > 0.1 and one decision changed
    assert sweeps.init_overlap_gate(0.5, 0.1, "gates started open").verdict == "fails"
    assert sweeps.init_overlap_gate(0.6, 0.1, "gates started open").holds


def test_recovered_shares():
    shares = sweeps.recovered_shares({3: 29.0, 8: 30.0}, [(3, 26.0), (8, 28.0)], full_bleu=30.0)
    assert shares == pytest.approx([0.75, 1.0])
    with pytest.raises(ValueError, match="costs nothing"):
        sweeps.recovered_shares({3: 29.0}, [(3, 30.0)], full_bleu=30.0)


def test_changes_at_paper_shares_interpolates_the_paper_at_each_run_s_share():
    paper = [(1.0, 0.0), (0.5, -1.0), (0.25, -3.0)]
    runs_ = [{"n_kept": 75, "bleu_beam": 29.0}, {"n_kept": 50, "bleu_beam": 28.0}, {"n_kept": 10, "bleu_beam": 1.0}]
    out = sweeps.changes_at_paper_shares(runs_, 100, 30.0, paper)
    assert sorted(out) == [50, 75]  # 10 of 100 lies below the paper's smallest share
    assert out[75][1:] == (pytest.approx(-1.0), pytest.approx(-0.5)) and out[50][2] == pytest.approx(-1.0)
    assert out[75][0] is runs_[0]


def test_continuation_gain_is_after_minus_before_on_the_control():
    refs = ["el señor dijo a moisés", "y fue la tarde y la mañana", "en el principio crió dios los cielos"]
    worse = ["el dijo", "y fue la tarde", "en el principio dios"]
    control = {"n_eval": 3, "runs": [{"train_steps": 10, "epochs": 1.0, "hypotheses_beam": refs,
                                      "before": {"hypotheses_beam": worse}}]}
    gain = sweeps.continuation_gain({**control, "meta": {"run": "unpruned_converged_h4"}}, refs, n_bootstrap=50)
    assert gain["delta"] == pytest.approx(stats.bleu(refs, refs) - stats.bleu(worse, refs))
    # the gate names the command of the control run it read, unless told another
    assert sweeps.convergence_gate(gain).precomputed == "python scripts/run.py unpruned_converged_h4"
    assert gain["low"] <= gain["delta"] <= gain["high"] and gain["train_steps"] == 10
    with pytest.raises(ValueError, match="evaluated on 3"):
        sweeps.continuation_gain(control, refs[:2])


def test_convergence_gate_fails_when_training_on_can_still_gain_more_than_the_margin():
    still_gaining = {"delta": 0.78, "low": 0.39, "high": 1.15}
    flat = {"delta": 0.1, "low": -0.3, "high": 0.45}
    assert not sweeps.converged(still_gaining) and sweeps.converged(flat)
    failed = sweeps.convergence_gate(still_gaining, precomputed="cmd", model="h4")
    assert failed.verdict == "fails" and failed.kind == "gate" and failed.name.startswith("h4, gate:")
    assert sweeps.convergence_gate(flat, precomputed="cmd").verdict == "passes"
    at_margin = {"delta": 0.0, "low": -0.5, "high": sweeps.CONVERGED_GAIN}
    assert sweeps.converged(at_margin)  # the margin itself passes ("at most")
    note = sweeps.not_converged_note(still_gaining)
    assert sweeps.not_converged_note(flat) == "" and "+0.78" in note and "+1.15" in note


def test_load_continuation_names_the_control_run_of_the_model_and_refuses_others():
    made = {"run": "translation_model", "preset": "quick"}
    control = sweeps.load_continuation({"meta": made})
    assert control["meta"]["run"] == "unpruned_converged"
    with pytest.raises(ValueError, match="no continuation run"):
        sweeps.load_continuation({"meta": {**made, "run": "translation_model_without_a_control"}})
    at_paper = sweeps.load_continuation({"meta": {**made, "preset": "paper"}})
    assert not at_paper and at_paper.preset == "paper" and "does not define" in at_paper.why


def test_a_missing_control_run_makes_gate_1_not_available_never_passed(monkeypatch):
    """A model whose control run has no file (a paper model, or a run not made yet): the gain is NaN, the gate
    is *not available* with the command, converged() is false and the reasons say convergence is not gated."""
    monkeypatch.setitem(sweeps.CONTINUATIONS, "translation_model_seed9", "unpruned_converged_seed9")
    monkeypatch.setattr(runs, "find", lambda name, preset: runs.Missing(
        name, preset, "no file", f"python scripts/run.py {name}"))
    control = sweeps.load_continuation({"meta": {"run": "translation_model_seed9", "preset": "quick"}})
    gain = sweeps.continuation_gain(control, ["a reference"])
    assert not sweeps.converged(gain)
    claim = sweeps.convergence_gate(gain, precomputed="unused", model="seed 9")
    assert claim.verdict == attnbook.claims.NOT_AVAILABLE and claim.name.startswith("seed 9, gate:")
    assert claim.precomputed == "python scripts/run.py unpruned_converged_seed9"
    note = sweeps.not_converged_note(gain)
    assert "not gated" in note and "python scripts/run.py unpruned_converged_seed9" in note


def test_cost_at_interpolates_the_like_with_like_costs_in_one_paired_bootstrap():
    refs, worse, half = _THREE_SYSTEMS
    seed0 = {"meta": {"settings": {"seeds": [0]}}}
    trained_on = {**seed0, "n_eval": 3, "runs": [
        {"seed": 0, "lam": 0.1, "kept": 2, "hypotheses_beam": worse},
        {"seed": 2, "lam": 0.1, "kept": 2, "hypotheses_beam": refs},  # a further seed: not paired here
        {"seed": 0, "lam": 0.05, "kept": 6, "hypotheses_beam": half}]}
    control = {**seed0, "n_eval": 3, "runs": [{"seed": 1, "lam": None, "hypotheses_beam": worse},
                                              {"seed": 0, "lam": None, "hypotheses_beam": refs}]}
    cost = {k: stats.bleu(h, refs) - stats.bleu(refs, refs) for k, h in ((2, worse), (6, half))}
    at_run = sweeps.cost_at(6, trained_on, control, refs, n_bootstrap=50)
    assert at_run["delta"] == pytest.approx(cost[6]) and at_run["between"] == (6, 6)
    between = sweeps.cost_at(3, trained_on, control, refs, n_bootstrap=200)
    assert between["weight"] == 0.75 and between["between"] == (2, 6)  # 3 heads: a quarter of the way to 6
    assert between["delta"] == pytest.approx(0.75 * cost[2] + 0.25 * cost[6])
    assert between["low"] <= between["delta"] <= between["high"]
    with pytest.raises(ValueError, match="outside the pruned shapes"):
        sweeps.cost_at(1, trained_on, control, refs)
    twice = {**trained_on, "runs": trained_on["runs"] + [{"seed": 0, "lam": 0.1, "kept": 2}]}
    with pytest.raises(ValueError, match="more than one run of a shape"):
        sweeps.cost_at(2, twice, control, refs)


def test_gate_cost_at_pairs_the_300_step_pruned_models_with_the_converged_model():
    refs, worse, half = _THREE_SYSTEMS
    scratch = {"n_eval": 3, "runs": [{"arm": "pruned", "kept": 2, "hypotheses_beam": worse},
                                     {"arm": "scratch", "kept": 2, "seed": 0, "hypotheses_beam": refs},
                                     {"arm": "pruned", "kept": 6, "hypotheses_beam": half}]}
    control = {"meta": {"settings": {"seeds": [0]}}, "n_eval": 3, "runs": [
        {"seed": 0, "lam": None, "hypotheses_beam": worse, "before": {"hypotheses_beam": refs}}]}  # after: unused
    cost = {k: stats.bleu(h, refs) - stats.bleu(refs, refs) for k, h in ((2, worse), (6, half))}
    got = sweeps.gate_cost_at(3, scratch, control, refs, n_bootstrap=100)
    assert got["between"] == (2, 6) and got["weight"] == 0.75
    assert got["delta"] == pytest.approx(0.75 * cost[2] + 0.25 * cost[6])  # the arm "pruned", against "before"
    assert got["low"] <= got["delta"] <= got["high"]
    with pytest.raises(ValueError, match="outside the pruned shapes"):
        sweeps.gate_cost_at(8, scratch, control, refs)


def test_seed_cost_at_uses_every_arms_seeds_and_the_verses_noise():
    refs, worse, half = _THREE_SYSTEMS

    def run(seed, kept, hyps, bleu):
        return {"seed": seed, "lam": None if kept is None else 1 / kept, "kept": kept,
                "hypotheses_beam": hyps, "bleu_beam": {"bleu": bleu}}

    seed0 = {"meta": {"settings": {"seeds": [0]}}, "n_eval": 3}
    trained_on = {**seed0, "runs": [run(0, 2, worse, 20.0), run(1, 2, half, 22.0), run(2, 2, worse, 21.0),
                                    run(0, 6, half, 30.0), run(1, 6, refs, 31.0)]}
    control = {**seed0, "runs": [run(0, None, refs, 33.0), run(1, None, half, 34.0), run(2, None, refs, 32.0)]}
    got = sweeps.seed_cost_at(3, trained_on, control, refs, n_bootstrap=200)
    assert got["between"] == (2, 6) and got["weight"] == 0.75 and got["n_seeds"] == [3, 3, 2]
    assert got["delta"] == pytest.approx(0.75 * 21.0 + 0.25 * 30.5 - 33.0)  # the seeds' means, not seed 0's
    # the verses' noise every seed of an arm shares: the bootstrap variance of the contrast of seed means over
    # every model's translations (weights w_i / n_i), less each model's own (half the variance of two seeds'
    # difference in one arm, w^2 / n each), which the seeds' spread holds already
    def boot_var(hyps, ws):
        b = stats.paired_bleu_contrast(hyps, ws, refs, 200)
        return ((b["high"] - b["low"]) / 3.92) ** 2
    arms = [[refs, half, refs], [worse, half, worse], [half, refs]]
    contrast = boot_var([h for arm in arms for h in arm], [-1 / 3] * 3 + [0.75 / 3] * 3 + [0.25 / 2] * 2)
    own = [np.mean([boot_var([a, b], [1, -1]) / 2 for i, a in enumerate(arm) for b in arm[i + 1:]]) for arm in arms]
    own_var = own[0] / 3 + 0.75 ** 2 * own[1] / 3 + 0.25 ** 2 * own[2] / 2
    assert got["own_se"] == pytest.approx(np.sqrt(own_var)) and got["own_se"] > 0
    assert got["verse_se"] == pytest.approx(np.sqrt(max(0.0, contrast - own_var)))
    seed_var = 1.0 / 3 + 0.75 ** 2 * 1.0 / 3 + 0.25 ** 2 * 0.5 / 2
    assert got["seed_se"] == pytest.approx(np.sqrt(seed_var))
    assert got["se"] == pytest.approx(np.sqrt(seed_var + got["verse_se"] ** 2))
    assert got["low"] < got["delta"] < got["high"]
    at_shape = sweeps.seed_cost_at(6, trained_on, control, refs, n_bootstrap=50)
    assert at_shape["n_seeds"] == [3, 2] and at_shape["delta"] == pytest.approx(30.5 - 33.0)
    one_seed = {**trained_on, "runs": trained_on["runs"][:4]}  # 6 heads: seed 0 alone
    with pytest.raises(ValueError, match="two seeds per arm"):
        sweeps.seed_cost_at(3, one_seed, control, refs)


def test_same_heads_replicates_and_the_gate_noise_finding():
    defaults = {"lr": 1.0, "steps": 2}

    def run(gates, bleu, **spec):
        return {"spec": {**defaults, "lam": 0.1, **spec}, "gates": {"enc_self": [gates]}, "n_kept": sum(gates),
                "bleu_beam": bleu}
    sweep = {"meta": {"settings": {"seed": 0}}, "n_eval": 40,
             "runs": [run([1, 1, 0, 0], 30.0), run([1, 1, 0, 0], 29.8, seed=1), run([1, 0, 1, 0], 31.0, seed=2),
                      run([1, 1, 0, 0], 35.0, steps=4)]}
    rep = sweeps.same_heads_replicates(sweep, defaults, 0.1)
    # seed 2 keeps other heads (another architecture) and the steps=4 run is no gate seed: both left out
    assert rep == {"seeds": [0, 1], "bleu_beam": [30.0, 29.8], "kept": 2, "n_eval": 40}
    row = {"kept": 2, "n_eval": 40, "scratch": [{"bleu_beam": 31.0}, {"bleu_beam": 30.4}, {"bleu_beam": 30.7}]}
    c = sweeps.gate_noise_finding(row, rep, precomputed="cmd")
    t = stats.welch_t([31.0, 30.4, 30.7], [30.0, 29.8])
    assert c.value == pytest.approx(0.8) and c.interval == pytest.approx(t["interval"], abs=0.01)
    assert c.verdict == "higher" and "gate seeds 0 and 1" in c.condition and "Welch" in c.condition
    assert f"{t['dof']:.1f} degrees of freedom" in c.condition
    with pytest.raises(ValueError, match="heads"):
        sweeps.gate_noise_finding({**row, "kept": 3}, rep)
    with pytest.raises(ValueError, match="same verses"):
        sweeps.gate_noise_finding({**row, "n_eval": 200}, rep)


def test_main_settings_are_the_recorded_settings_the_variants_change():
    settings = {"lr": 2e-4, "gate_lr": 0.05, "init_log_alpha": "glorot", "steps": 300, "seed": 0, "beam": 4}
    assert sweeps.main_settings({"meta": {"settings": settings}}) == {
        "lr": 2e-4, "gate_lr": 0.05, "init_log_alpha": "glorot", "steps": 300}
    with pytest.raises(ValueError, match="lack"):
        sweeps.main_settings({"meta": {"settings": {"lr": 1.0}}})


def test_seed_cost_finding_needs_two_seeds_per_arm_and_uses_welch():
    def runs_of(kept, bleus):
        return [{"kept": kept, "seed": i, "bleu_beam": {"bleu": b}} for i, b in enumerate(bleus)]
    trained_on = {"n_eval": 5, "runs": runs_of(3, [31.6, 31.2, 31.9]) + runs_of(8, [31.8])}
    control = {"n_eval": 5, "runs": runs_of(48, [32.3])}
    assert sweeps.seed_cost_finding(3, trained_on, control) is None  # one control seed: not made
    control["runs"] += runs_of(48, [32.3, 32.6])[1:]  # seed 1
    assert sweeps.seed_cost_finding(8, trained_on, control) is None  # one trained-on seed at 8 heads
    c = sweeps.seed_cost_finding(3, trained_on, control, precomputed="cmd")
    t = stats.welch_t([31.6, 31.2, 31.9], [32.3, 32.6])
    assert c.value == pytest.approx(t["change"], abs=0.005) and c.interval == pytest.approx(t["interval"], abs=0.05)
    assert "3 trained-on pruned, 2 control" in c.condition and c.precomputed == "cmd"
    with pytest.raises(ValueError, match="scored on 5 and 4"):
        sweeps.seed_cost_finding(3, trained_on, {**control, "n_eval": 4})


def test_each_gate_1_continuation_trains_its_own_model_on_its_own_verses():
    """A continuation (sweeps.CONTINUATIONS) names its model, keeps the model's data fraction (a data-axis model
    never gains from more data than it had) and its head layout; the shipped model's own control reads the gate
    sweep's checkpoint."""
    for model, cont in sweeps.CONTINUATIONS.items():
        s, m = runs.settings(cont, "quick"), runs.settings(model, "quick")
        assert s.get("model", "translation_model") == model
        assert s.get("recipe", {}).get("data_fraction", 1.0) == m.get("data_fraction", 1.0), (cont, model)
        assert s["arms"] == ["unpruned_trained"] and s["continue_training"]["warmup"] == 0


def test_run_scratch_trains_a_continuation_with_its_model_s_recipe(tmp_path, monkeypatch):
    """scripts/sweep_gates.py gives the training settings of a continuation the recipe of its run (here the
    quarter-data model's data fraction), not the full preset's."""
    import importlib.util
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root / "scripts"))
    spec = importlib.util.spec_from_file_location("script_sweep_gates_q", root / "scripts" / "sweep_gates.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    seen = {}

    class Stop(Exception):
        pass

    def fake_train(model, q, **kw):
        seen.update(q)
        raise Stop
    monkeypatch.setattr(mod.tr, "train_to_convergence", fake_train)
    monkeypatch.setattr(mod.tr, "translate", lambda model, srcs, **kw: ["x"] * len(srcs))
    with pytest.raises(Stop):
        mod.run_scratch("unpruned_converged_data25", out_dir=tmp_path, smoke=True)
    assert seen["data_fraction"] == 0.25 and seen["lr"] == runs.settings("unpruned_converged_data25", "quick")[
        "continue_training"]["lr"]


def test_trained_on_gate_seed_keeps_one_architecture_per_shape_under_same_heads():
    """Rule "same_heads" (pruned_converged_seeds_8_22): a trained-on seed rebuilds from its own gate seed only
    where that gate seed keeps the main run's heads; elsewhere, and at a lambda with no gate seeds, from the main
    run. Rule "seed" (pruned_converged_seeds) always uses the seed itself."""
    defaults = {"lr": 2e-4, "gate_lr": 0.05, "init_log_alpha": "glorot", "steps": 300}

    def run(lam, gates, **spec):
        return {"spec": {**defaults, "lam": lam, **spec}, "gates": {"enc_self": [gates]}, "n_kept": sum(gates),
                "bleu_beam": 30.0}
    sweep = {"meta": {"settings": {**defaults, "seed": 5}}, "n_eval": 40,  # the main run's gate seed: 5
             "runs": [run(0.1, [1, 1, 0, 0]), run(0.1, [1, 1, 0, 0], seed=1), run(0.1, [1, 0, 1, 0], seed=2),
                      run(0.05, [1, 1, 1, 0])]}
    assert sweeps.trained_on_gate_seed(sweep, 0.1, 1, "same_heads") == 1  # keeps the main run's heads
    assert sweeps.trained_on_gate_seed(sweep, 0.1, 2, "same_heads") == 5  # another architecture: the main run
    assert sweeps.trained_on_gate_seed(sweep, 0.05, 2, "same_heads") == 5  # no gate seeds at this lambda
    assert sweeps.trained_on_gate_seed(sweep, 0.1, 2, "seed") == 2
    assert sweeps.trained_on_gate_seed(sweep, 0.1, 5, "same_heads") == 5
    with pytest.raises(ValueError, match="lack"):  # a sweep without its main settings is an error, not "no seeds"
        sweeps.trained_on_gate_seed({**sweep, "meta": {"settings": {"seed": 5}}}, 0.1, 1, "same_heads")
    with pytest.raises(ValueError, match="same_heads"):
        sweeps.trained_on_gate_seed(sweep, 0.1, 1, "heads")
    with pytest.raises(ValueError, match="no main run"):  # no pruned model to rebuild, not "no gate seeds"
        sweeps.trained_on_gate_seed(sweep, 0.2, 1, "same_heads")


def test_the_named_run_for_8_and_22_heads_starts_every_seed_from_the_main_gate_run():
    """The run pruned_converged_seeds_8_22 as its script reads it (settings "gate_seeds") on the shipped sweep:
    every seed at 8 and 22 heads rebuilds from the main run (gate seed 0), whose heads the from-scratch arm
    trains; a misspelt setting would fall back to rule "seed" and rebuild other architectures."""
    settings = runs.settings("pruned_converged_seeds_8_22", "quick")
    sweep = sweeps.load(settings["gate_recipe"])
    assert settings["gate_seeds"] == "same_heads"
    chosen = {(lam, s): sweeps.trained_on_gate_seed(sweep, lam, s, settings.get("gate_seeds", "seed"))
              for lam in settings["lambdas"] for s in settings["seeds"]}
    assert chosen == {(lam, s): 0 for lam in (0.05, 0.02) for s in (1, 2)}
    main = sweeps.main_runs(sweep, sweeps.main_settings(sweep))
    assert {lam: main[lam]["n_kept"] for lam in settings["lambdas"]} == {0.05: 8, 0.02: 22}


def test_with_gate_seeds_adds_the_gate_seeds_that_keep_a_shape_to_its_pruned_arm():
    """Chapter 11's 300-step pruned arm with the gate noise: at lambda 0.1 gate seed 1 keeps the main run's heads
    and joins the pruned arm, gate seed 2 keeps others and does not; at 0.05 no other gate seed ran."""
    defaults = {"lr": 2e-4, "gate_lr": 0.05, "init_log_alpha": "glorot", "steps": 300}

    def run(lam, gates, bleu, **spec):
        return {"spec": {**defaults, "lam": lam, **spec}, "gates": {"enc_self": [gates]}, "n_kept": sum(gates),
                "bleu_beam": bleu}
    sweep = {"meta": {"settings": {**defaults, "seed": 5}}, "n_eval": 40,
             "runs": [run(0.1, [1, 1, 0, 0], 30.0), run(0.1, [1, 1, 0, 0], 29.6, seed=1),
                      run(0.1, [1, 0, 1, 0], 31.0, seed=2), run(0.05, [1, 1, 1, 0], 30.5)]}

    def row(lam, kept, beam):
        return {"lam": lam, "kept": kept, "n_eval": 40, "pruned_beam": beam,
                "pruned_seeds": [{"seed": None, "bleu_beam": beam}], "scratch": []}
    rows = sweeps.with_gate_seeds([row(0.1, 2, 30.0), row(0.05, 3, 30.5)], sweep)
    assert rows[0]["pruned_seeds"] == [{"seed": 5, "bleu_beam": 30.0}, {"seed": 1, "bleu_beam": 29.6}]
    assert rows[1]["pruned_seeds"] == [{"seed": None, "bleu_beam": 30.5}]  # no other gate seed: one model
    # a rebuilt model scoring a little off the sweep's matters only where the sweep's seeds join it
    assert sweeps.with_gate_seeds([row(0.05, 3, 30.52)], sweep)[0]["pruned_seeds"][0]["bleu_beam"] == 30.52
    assert sweeps.arm_difference({**rows[0], "scratch": [{"bleu_beam": 31.0}, {"bleu_beam": 30.6}]}) == \
        pytest.approx(30.8 - 29.8)  # the arms' means once the pruned arm has seeds
    with pytest.raises(ValueError, match="not the same model"):
        sweeps.with_gate_seeds([row(0.1, 2, 30.4)], sweep)
    with pytest.raises(ValueError, match="test verses"):
        sweeps.with_gate_seeds([{**row(0.1, 2, 30.0), "n_eval": 200}], sweep)
    with pytest.raises(ValueError, match="no main run"):
        sweeps.with_gate_seeds([row(0.2, 2, 30.0)], sweep)


def test_trained_on_and_control_merges_every_further_run_shipped():
    # the runs of chapter 11's two arms, written out here so that a name dropped from the tuples fails
    assert sweeps.TRAINED_ON_RUNS == ("pruned_converged", "pruned_converged_2heads", "pruned_converged_seeds",
                                      "pruned_converged_seeds_8_22")
    assert sweeps.CONTROL_RUNS == ("unpruned_converged", "unpruned_converged_seeds")
    on, control = sweeps.trained_on_and_control()
    assert {(r["kept"], r["seed"]) for r in on["runs"]} >= {(k, s) for k in (3, 8, 22) for s in (0, 1, 2)}
    shipped = {n: runs.find(n, "quick") for n in sweeps.TRAINED_ON_RUNS + sweeps.CONTROL_RUNS}
    assert all(shipped[n] for n in (sweeps.TRAINED_ON_RUNS[0], sweeps.CONTROL_RUNS[0]))
    for arm, names in ((on, sweeps.TRAINED_ON_RUNS), (control, sweeps.CONTROL_RUNS)):
        expected = [r for n in names if shipped[n] for r in shipped[n]["runs"]]
        assert arm["runs"] == expected  # every shipped run, in the order of the names


def _simulated_seed_costs(monkeypatch, arm_sd: float, reps: int = 400, n: int = 60, seed: int = 0) -> dict:
    """sweeps.seed_cost_at on simulated trained-on and control models, 3 seeds each, the cost at 4 heads
    between shapes 2 and 7 (w = 0.6). Every model scores the same test sentences (a length and a difficulty
    each); each arm has its own quality on each sentence, shared by its seeds (log-normal, sd ``arm_sd``:
    the verse noise the seeds' spread cannot show), and each model its own binomial n-gram matches (the verse
    noise a seed's BLEU carries). The population cost is known: 100 E[difficulty] E[quality] times the
    contrast of the precisions' geometric means. Returns the estimates' spread and the mean of each part of
    the standard error, and the interval's coverage."""
    monkeypatch.setattr(sweeps, "paired_bleu_contrast",  # the models' sentence statistics stand for their text
                        lambda hyps, ws, refs, n_boot: stats.paired_bootstrap_contrast(hyps, ws, n_boot))
    precisions = {"control": (0.8, 0.6, 0.45, 0.35), 2: (0.78, 0.57, 0.42, 0.32), 7: (0.795, 0.59, 0.44, 0.34)}
    mean_of = {k: np.prod(p) ** 0.25 for k, p in precisions.items()}
    truth = 100 * (4 / 6) * np.exp(arm_sd ** 2 / 2) * (0.6 * mean_of[2] + 0.4 * mean_of[7] - mean_of["control"])
    rng, got = np.random.default_rng(seed), []
    for _ in range(reps):
        length, difficulty = rng.integers(10, 31, n), rng.beta(4, 2, n)
        totals = np.stack([length - g for g in range(4)], 1)
        quality = {k: np.exp(rng.normal(0, arm_sd, n)) for k in precisions}

        def model(seed, kept):
            arm = "control" if kept is None else kept
            p = np.clip((difficulty * quality[arm])[:, None] * np.asarray(precisions[arm]), 0, 1)
            st = np.column_stack([length, length, rng.binomial(totals, p), totals])
            return {"seed": seed, "kept": kept, "lam": None if kept is None else 1 / kept,
                    "hypotheses_beam": st, "bleu_beam": {"bleu": stats.bleu_from_statistics(st.sum(0))}}
        meta = {"meta": {"settings": {"seeds": [0]}}, "n_eval": n}
        trained_on = {**meta, "runs": [model(s, k) for k in (2, 7) for s in range(3)]}
        control = {**meta, "runs": [model(s, None) for s in range(3)]}
        got.append(sweeps.seed_cost_at(4, trained_on, control, ["x"] * n, n_bootstrap=60))
    mean = {k: float(np.mean([g[k] for g in got])) for k in ("se", "seed_se", "verse_se", "own_se")}
    twice = float(np.mean([np.sqrt(g["seed_se"] ** 2 + g["verse_se"] ** 2 + g["own_se"] ** 2) for g in got]))
    return {"spread": float(np.std([g["delta"] for g in got])), **mean, "own_twice": twice,
            "coverage": float(np.mean([g["low"] <= truth <= g["high"] for g in got]))}


def test_seed_cost_at_counts_each_model_s_own_verse_noise_once(monkeypatch):
    """No verse noise shared within an arm: the seeds' spread holds all the verse noise. The standard error
    matches the estimates' spread; adding the whole bootstrap to the seeds' spread (each model's own verse
    noise counted twice, the first version) made it about 1.5 times too large. (The shared term, clipped at
    0, keeps a little of the bootstrap's noise: with nothing shared the interval is somewhat conservative.)"""
    r = _simulated_seed_costs(monkeypatch, arm_sd=0.0)
    assert r["se"] / r["spread"] == pytest.approx(1.0, abs=0.2)
    assert r["own_twice"] / r["spread"] > 1.3
    assert 0.92 <= r["coverage"] <= 0.995


def test_seed_cost_at_keeps_the_verse_noise_an_arm_s_seeds_share(monkeypatch):
    """Each arm has its own quality on each verse, shared by its seeds, as large as a model's own noise or
    larger: the seeds' spread alone misses it (standard error far too small); the shared term puts it in."""
    r = _simulated_seed_costs(monkeypatch, arm_sd=0.12)
    assert r["verse_se"] > r["own_se"]
    assert r["se"] / r["spread"] == pytest.approx(1.0, abs=0.15)
    assert r["seed_se"] / r["spread"] < 0.75
    assert 0.92 <= r["coverage"] <= 0.99
