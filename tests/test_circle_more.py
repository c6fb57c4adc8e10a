"""Tests of the sweep and report helpers of attnbook.rank.tasks.circle (chapter "The circle task")."""

from __future__ import annotations

import math

import pytest
import numpy as np
import torch

from attnbook.rank.tasks import circle


def test_merged_fraction_and_mean_merge_step():
    assert circle.merged_fraction([84, 236, None, None, None, None]) == 2 / 6
    assert circle.merged_fraction([None, None]) == 0.0
    assert circle.mean_merge_step([84, 236, None]) == 160
    assert math.isnan(circle.mean_merge_step([None, None]))
    with pytest.raises(ValueError):
        circle.merged_fraction([])


def test_collapse_steps_and_the_reports():
    runs = {(32, "SAN"): [{"collapse_step": 84}, {"collapse_step": None}],
            (128, "SAN+skip"): [{"collapse_step": None}, {"collapse_step": None}]}
    steps = circle.collapse_steps(runs)
    assert steps == {(32, "SAN"): [84, None], (128, "SAN+skip"): [None, None]}
    assert circle.merge_report(steps).splitlines() == [
        "d= 32 SAN       collapsed: 1/2  collapse steps: [84, None]",
        "d=128 SAN+skip  collapsed: 0/2  collapse steps: [None, None]"]
    assert circle.merge_report(steps, "fraction").splitlines()[0] == (
        "d= 32 SAN       collapsed fraction 0.50   mean collapse step of those 84")
    assert circle.merge_report(steps, "fraction").endswith("of those nan")
    assert circle.merge_report(steps, "gated").splitlines()[0] == "d= 32 SAN       merged: 1/2 that pass the gate"
    with pytest.raises(ValueError, match="style"):
        circle.merge_report(steps, "table")


def test_control_report_counts_gated_and_merged_runs():
    every = {(32, "SAN, no attention"): [{"mse_over_stay_put": 2.694, "collapse_step": None}],
             (128, "SAN, no attention"): [{"mse_over_stay_put": 0.09, "collapse_step": 7},
                                          {"mse_over_stay_put": 0.391, "collapse_step": None}]}
    gated = {32: [], 128: every[128, "SAN, no attention"]}
    assert circle.control_report(every, gated).splitlines() == [
        "d= 32 SAN, no attention: one-step MSE / stay put [2.69]; 0 pass the gate, of which 0 merge",
        "d=128 SAN, no attention: one-step MSE / stay put [0.09, 0.39]; 2 pass the gate, of which 1 merge"]


class _Still(torch.nn.Module):
    """Predicts that the points stay put: one-step error equal to the stay-put baseline, never merges."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(()))

    def forward(self, x):
        return x + 0 * self.w


class _Merge(_Still):
    """Sends both tokens to the origin: merged from the first prediction on."""

    def forward(self, x):
        return 0 * x + 0 * self.w


def test_seed_sweep_summarises_every_variant_width_and_seed():
    X, Y = circle.circle_dataset(20)
    calls = []

    def fit(d, variant, seed):
        calls.append((d, variant, seed))
        return (_Merge() if variant == "merge" else _Still()), {}

    runs = circle.seed_sweep(fit, [4, 8], ["still", "merge"], 2, X, Y, rollout_steps=60)
    assert list(runs) == [(4, "still"), (4, "merge"), (8, "still"), (8, "merge")]
    assert calls[:2] == [(4, "still", 0), (4, "still", 1)]
    still, merge = runs[4, "still"][0], runs[4, "merge"][1]
    assert still["mse_over_stay_put"] == pytest.approx(1.0) and still["collapse_step"] is None
    assert merge["collapse_step"] == 1 and merge["final_gap"] == 0.0
    assert still["traj"].shape == (61, 2, 2)
    assert still["tracking_steps"] == 0 and merge["tracking_steps"] == 0  # neither follows the circle
    assert "traj" not in circle.summarise_run(_Still(), X, Y, 60)


def test_the_trained_gate_can_fail_and_counts_the_runs_it_fails():
    """Chapter 6's gate (issue 36: a gate that can fail): a run whose one-step error is above the gate's share of
    staying put's is kept among every run, left out of the gated ones, and counted."""
    from attnbook.rank.tasks import circle as C

    records = [dict(d_model=32, variant="SAN", mse_over_stay_put=0.1, tracking_steps=40),
               dict(d_model=32, variant="SAN", mse_over_stay_put=0.9, tracking_steps=40),
               dict(d_model=128, variant="SAN+MLP", mse_over_stay_put=C.GATE, tracking_steps=C.TRACKING),
               dict(d_model=128, variant="SAN", mse_over_stay_put=0.1, tracking_steps=C.TRACKING - 1)]
    every, gated, failed = C.gated_runs(records)
    assert failed == 2  # the one-step error of one, the tracking of another
    assert len(every[32, "SAN"]) == 2 and len(gated[32, "SAN"]) == 1
    assert len(gated[128, "SAN+MLP"]) == 1  # at both gates: passes (at most, at least)
    assert (128, "SAN") in every and (128, "SAN") not in gated
    assert C.gated_runs(records, gate=0.05)[2] == 4
    with pytest.raises(ValueError, match="tracking_steps"):
        C.gated_runs([dict(d_model=32, variant="SAN", mse_over_stay_put=0.1)])


def test_a_live_sweep_reads_as_a_shipped_file():
    """Chapter 6 at the paper preset reads its own 16-seed sweep as the 16-seed file: each record keeps its width,
    variant and seed (the seed is its place in its group), and loses its trajectory."""
    from attnbook.rank.tasks import circle as C

    live = {(32, "SAN"): [dict(mse_over_stay_put=0.1, tracking_steps=40, collapse_step=None, traj="t0"),
                          dict(mse_over_stay_put=0.9, tracking_steps=40, collapse_step=7, traj="t1")],
            (128, "SAN+MLP"): [dict(mse_over_stay_put=0.2, tracking_steps=3, collapse_step=None, traj="t2")]}
    records = C.sweep_records(live)
    assert [(r["d_model"], r["variant"], r["seed"]) for r in records] == [
        (32, "SAN", 0), (32, "SAN", 1), (128, "SAN+MLP", 0)]
    assert all("traj" not in r for r in records) and records[1]["collapse_step"] == 7
    every, gated, failed = C.gated_runs(records)
    assert failed == 2 and [r["seed"] for r in gated[32, "SAN"]] == [0]
    # the live runs checked against these records: one run that merges on one side only is one flip
    live_steps = C.collapse_steps(live)
    assert C.status_flips(live_steps, every) == 0
    live_steps[32, "SAN"][0] = 12
    assert C.status_flips(live_steps, every) == 1


def test_collapse_delay_counts_never_as_after_the_rollout():
    from attnbook.rank.tasks import circle as C

    assert C.censored_steps([3, None], rollout_steps=10) == [3, 11]
    d = C.collapse_delay([None, None, None], [1, 1, 1], rollout_steps=10)
    assert d["value"] == 10 and d["interval"] == (10, 10) and d["cannot_decide"] == ""


def test_a_delay_where_the_earlier_group_never_merges_is_undecided():
    from attnbook import claims
    from attnbook.rank.tasks import circle as C

    blind = C.collapse_delay([None, None], [None, None], rollout_steps=10)  # nothing merges: delay 0, no width
    assert blind["interval"] == (0, 0) and "no run of the earlier group merges" in blind["cannot_decide"]
    verdict = claims.compare("delay", **blind, paper=1, same_side_of=0, source="Fig. 3")
    assert verdict.verdict == "undecided" and "cannot decide" in verdict.condition
    # one earlier run merging is enough for the rule to decide: here it differs (a merges first)
    seen = C.collapse_delay([2, 2, 2, 2], [None, 5, None, 5], rollout_steps=10)
    assert seen["cannot_decide"] == ""
    assert claims.compare("delay", **seen, paper=1, same_side_of=0, source="Fig. 3").verdict == "differs"
    with pytest.raises(ValueError, match="two runs or more"):
        C.collapse_delay([1], [2, 3], rollout_steps=10)


def test_the_delay_s_interval_covers_the_true_delay_about_90_percent_of_the_time():
    """Chapter 6's rule on simulated sweeps with a known answer: 16 runs a group, each merging with probability
    0.2 (later group) or 0.6 (earlier) at a step uniform in 40..280, else never (counted as 301). The 90% interval
    covers the true difference of censored means about 90% of the time: a percentile bootstrap over 16 seeds
    covered 87% here (0.870 against 0.891), an interval of half the width about 60%."""
    from attnbook.rank.tasks import circle as C

    rng = np.random.default_rng(0)

    def runs(q):
        return [int(rng.uniform(40, 280)) if rng.random() < q else None for _ in range(16)]

    truth = (0.2 - 0.6) * (159.5 - 301)  # E[censored step] = q * 159.5 + (1 - q) * 301
    hits = 0
    for _ in range(1000):
        lo, hi = C.collapse_delay(runs(0.2), runs(0.6), rollout_steps=300)["interval"]
        hits += lo <= truth <= hi
    assert 0.875 <= hits / 1000 <= 0.93


def test_status_flips_counts_seeds_that_merge_on_one_side_only():
    from attnbook.rank.tasks import circle as C

    shipped = {(32, "SAN"): [{"collapse_step": 5}, {"collapse_step": None}]}
    assert C.status_flips({(32, "SAN"): [7, None]}, shipped) == 0
    assert C.status_flips({(32, "SAN"): [None, 4]}, shipped) == 2


def test_tracking_steps_counts_the_steps_before_the_rollout_leaves_the_circle():
    n = 1000
    p = circle.circle_points(n)
    t = torch.arange(31)
    truth = torch.stack([p[t], p[t + n // 2 - 1]], 1)
    assert circle.tracking_steps(truth, n) == 30  # the exact orbit: followed throughout
    off = truth.clone()
    off[12:, 1] += 0.05 * circle.RADIUS  # half the tolerance: still following
    assert circle.tracking_steps(off, n) == 30
    off[12:, 1] += 0.1 * circle.RADIUS  # now past it from step 12 on
    assert circle.tracking_steps(off, n) == 11
    stuck = truth[:1].expand(31, 2, 2)  # staying put leaves the orbit once a step moves far enough
    assert 0 < circle.tracking_steps(stuck, n) < 30
    diverged = truth.clone()
    diverged[5:] = float("nan")  # a rollout that blew up follows nothing
    assert circle.tracking_steps(diverged, n) == 4
    with pytest.raises(ValueError, match="shape"):
        circle.tracking_steps(truth[:, :1], n)


def test_the_live_sweep_leaves_out_and_counts_the_models_that_fail_a_gate():
    """Chapter 6's live sweep: a model above the error gate, or one whose rollout leaves the circle too soon, is
    left out of its group (which stays, empty if need be) and counted; models at both limits pass; the
    trajectories of the models kept are kept."""
    at_limits = dict(mse_over_stay_put=circle.GATE, tracking_steps=circle.TRACKING, traj="t0")
    runs = {(32, "SAN"): [at_limits, {**at_limits, "mse_over_stay_put": circle.GATE + 0.01}],
            (128, "SAN"): [{**at_limits, "tracking_steps": circle.TRACKING - 1}]}
    gated, failed = circle.gated_sweep(runs)
    assert failed == 2 and gated[32, "SAN"] == [at_limits] and gated[128, "SAN"] == []
    assert circle.gated_sweep({(32, "SAN"): [at_limits]}) == ({(32, "SAN"): [at_limits]}, 0)
    with pytest.raises(ValueError, match="tracking_steps"):
        circle.passes_gates(dict(mse_over_stay_put=0.1))


def test_the_tracking_gate_asks_more_than_standing_still():
    """Issue 36 (a gate that can fail): a rollout that stands still on the chapter's circle of 1000 points follows
    it for 15 steps, so the tracking gate, at one step more, fails it on its own."""
    X, _ = circle.circle_dataset(1000)
    standing = X[0].expand(301, 2, 2)
    assert circle.tracking_steps(standing, 1000) == circle.TRACKING - 1 == 15
    assert not circle.passes_gates(dict(mse_over_stay_put=0.0, tracking_steps=15))


class _Step(torch.nn.Module):
    """Moves each point ``by`` steps along a circle of 1000 points (1: the exact orbit; -1: backwards)."""

    def __init__(self, by: int = 1):
        super().__init__()
        self.by = by

    def forward(self, x):
        angle = torch.atan2(x[..., 1], x[..., 0]) + self.by * 2 * math.pi / 1000
        return circle.RADIUS * torch.stack([angle.cos(), angle.sin()], -1)


def test_the_tracking_gate_records_a_model_that_does_not_follow_the_circle_as_failing():
    """The paper-recipe model's gate in chapter 6: recorded, not raised. A model that sends its points to the
    origin fails it, and so does one that steps backwards (it leaves the orbit after 7 steps) and one that stands
    still (its points stay near the orbit for 15 steps, one fewer than the gate asks); one that steps along the
    circle exactly passes."""
    X, Y = circle.circle_dataset(1000)

    def tracking(model):
        return circle.tracking_gate(model, X[0], what="a model", guards="its panels", n_points=1000)

    merge = tracking(_Merge())
    assert merge.verdict == "fails" and merge.value == 0 and "its panels" in merge.reason
    backwards = tracking(_Step(-1))
    assert backwards.verdict == "fails" and backwards.value == 7
    exact, still = tracking(_Step(1)), tracking(_Still())
    assert exact.verdict != "fails" and exact.value == 50
    assert still.verdict == "fails" and still.value == 15


def test_gate_sensitivity_regates_the_runs_at_each_error_gate():
    """The delay is recomputed on the runs that pass each one-step error gate: here the early-merging narrow
    runs fit the step worst, so a strict gate leaves too few of them."""
    def run(d, step, error):
        return dict(d_model=d, variant="SAN", mse_over_stay_put=error, tracking_steps=circle.TRACKING,
                    collapse_step=step)

    records = ([run(32, s, e) for s, e in ((20, 0.4), (25, 0.3), (30, 0.08), (35, 0.06))]
               + [run(128, s, 0.01) for s in (150, 160, None, 170)])
    groups = {"width": ((128, "SAN"), (32, "SAN"))}
    rows = circle.gate_sensitivity(records, groups, rollout_steps=300, gates=(0.5, 0.1, 0.05))
    assert [r["gate"] for r in rows] == [0.5, 0.1, 0.05] and [r["failed"] for r in rows] == [0, 2, 4]
    first, second, third = (r["delays"]["width"] for r in rows)
    assert first["n"] == (4, 4) and first["says"] == "later"
    assert first["value"] == pytest.approx(circle.collapse_delay(
        [150, 160, None, 170], [20, 25, 30, 35], 300)["value"])
    assert second["n"] == (4, 2) and second["value"] == pytest.approx(np.mean([150, 160, 301, 170]) - 32.5)
    assert third == {"n": (4, 0), "says": "too few runs"}
