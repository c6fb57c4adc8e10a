"""Tests of the sweep readers and run summaries of attnbook.signal.reverser (chapter "Unequal gradients, temperature
and adaptive optimisers")."""

from __future__ import annotations

import pytest
import torch

from attnbook.signal import reverser as rv


def _arm(name, optimizer, temperature, accs, judged):
    """accs: {lr: [acc per selection seed]}, which choose the best learning rate (highest mean); judged: the
    accuracies of the judged seeds at it, whose runs carry logs."""
    runs = [{"role": "selection", "lr": lr, "seed": 10 + s, "acc": a}
            for lr, seeds in accs.items() for s, a in enumerate(seeds)]
    best = max(accs, key=lambda lr: sum(accs[lr]))
    runs += [{"role": "judged", "lr": best, "seed": s, "acc": a, "log": [{"step": 10 * s, "cosine": a}]}
             for s, a in enumerate(judged)]
    return {"name": name, "optimizer": optimizer, "temperature": temperature, "runs": runs, "best_lr": best}


SWEEP = {"learning_rates": {"sgd": [0.1, 1.0], "adam": [0.01]},
         "by_name": {a["name"]: a for a in (
             _arm("sgd, tau=1", "sgd", 1.0, {0.1: [0.2, 0.3], 1.0: [0.1, 0.1]}, [0.2, 0.3]),
             _arm("sgd, tau=0.25", "sgd", 0.25, {0.1: [0.1, 0.1], 1.0: [0.1, 0.2]}, [0.1, 0.3]),
             _arm("adam, tau=1", "adam", 1.0, {0.01: [1.0, 0.8]}, [0.9, 0.9]))}}


def test_sweep_run_and_best_log():
    arm = SWEEP["by_name"]["sgd, tau=1"]
    assert rv.sweep_run(arm, 1.0, seed=11)["acc"] == 0.1  # a selection run
    assert rv.best_log(arm, seed=1) == [{"step": 10, "cosine": 0.3}]  # the judged run at the best lr, 0.1
    with pytest.raises(ValueError, match="no run"):
        rv.sweep_run(arm, 0.5)


def test_sweep_table_marks_each_arm_s_best_learning_rate():
    lines = rv.sweep_table(SWEEP).splitlines()
    assert lines[0].startswith("| arm |") and lines[1] == "|---|---|---|" and len(lines) == 5
    assert lines[2] == "| sgd, tau=1 | **0.1: 0.25 (0.20-0.30)**; 1: 0.10 (0.10-0.10) | 0.20, 0.30 |"
    assert lines[4] == "| adam, tau=1 | **0.01: 0.90 (0.80-1.00)** | 0.90, 0.90 |"


def test_arm_difference_and_the_temperature_arm():
    r = rv.arm_difference(SWEEP, "adam, tau=1", "sgd, tau=1")  # on the judged seeds
    assert r["value"] == pytest.approx(0.9 - 0.25)
    from attnbook.stats import welch_t
    assert r["interval"] == pytest.approx(welch_t([0.9, 0.9], [0.2, 0.3], level=0.9)["interval"])
    assert r["cannot_decide"] == ""  # sgd's seeds are below the ceiling
    full = {"by_name": {**SWEEP["by_name"], "sgd, tau=1": {
        **SWEEP["by_name"]["sgd, tau=1"],
        "runs": [{**run, "acc": 1.0} for run in SWEEP["by_name"]["sgd, tau=1"]["runs"]]}}}
    # only sgd at the ceiling: adam's loss can show (its interval decides), no "cannot decide"
    assert rv.arm_difference(full, "adam, tau=1", "sgd, tau=1")["cannot_decide"] == ""
    assert rv.arm_difference(full, "sgd, tau=1", "adam, tau=1")["cannot_decide"] == ""
    both = {"by_name": {**full["by_name"], "adam, tau=1": {
        **SWEEP["by_name"]["adam, tau=1"],
        "runs": [{**run, "acc": 1.0} for run in SWEEP["by_name"]["adam, tau=1"]["runs"]]}}}
    tie = rv.arm_difference(both, "adam, tau=1", "sgd, tau=1")  # a tie at the ceiling
    assert "ceiling" in tie["cannot_decide"] and tie["interval"] == (0.0, 0.0)
    assert rv.temperature_arm(SWEEP) == "sgd, tau=0.25"
    with pytest.raises(ValueError, match="one SGD arm"):
        rv.temperature_arm({"by_name": {"a": {"optimizer": "sgd", "temperature": 1.0}}})


def test_depth_report_mean_cosine_and_largest_scale_move():
    by_depth = {(4, False): {"acc": 0.21, "log": [{"cosine": 1.0}, {"cosine": 0.5}]},
                (4, True): {"acc": 1.0, "log": [{"cosine": 0.2}]}}
    learned = {False: {"acc": 0.2, "log": [{"alphas": [1.0, 1.0]}, {"alphas": [0.97, 1.02]}]},
               True: {"acc": 1.0, "log": [{"alphas": [0.5, 0.5]}, {"alphas": [0.3, 0.45]}]}}
    assert rv.depth_report(by_depth, learned).splitlines() == [
        "depth  4, alpha=1        : accuracy 0.21, token cosine 1.00 0.50",
        "depth  4, alpha=1/sqrt(L): accuracy 1.00, token cosine 0.20",
        "learnable alpha from 1: accuracy 0.20, scales after training 0.97 to 1.02",
        "learnable alpha from 1/sqrt(L): accuracy 1.00, scales after training 0.30 to 0.45"]
    assert rv.mean_cosine(by_depth[4, False]) == 0.75
    assert rv.largest_scale_move(learned) == pytest.approx(0.2)
    with pytest.raises(ValueError, match="empty"):
        rv.mean_cosine({"log": []})


def test_collapsed_accuracy_is_the_share_of_the_most_frequent_digit():
    """Known answers: two binary digits agree half the time (max count 2) and differ otherwise (1): 3/4; one
    digit: 1; and for 8 digits of 10 a simulation of 'predict each sequence's most frequent digit everywhere'."""
    assert rv.collapsed_accuracy(2, 2) == pytest.approx(0.75)
    assert rv.collapsed_accuracy(7, 1) == 1.0
    assert rv.collapsed_accuracy(3, 3) == pytest.approx((3 * 3 + 18 * 2 + 6 * 1) / 27 / 3)  # 3, 2 or 1 alike
    x = torch.randint(0, 10, (200_000, 8), generator=torch.Generator().manual_seed(0))
    counts = torch.nn.functional.one_hot(x, 10).sum(1)
    simulated = counts.max(1).values.double().mean().item() / 8
    assert rv.collapsed_accuracy(10, 8) == pytest.approx(simulated, abs=0.003)
    with pytest.raises(ValueError):
        rv.collapsed_accuracy(0, 8)


def test_the_log_measures_each_step_s_update_and_adam_warms_up():
    """SGD's first step is ``lr`` times the gradient (the momentum buffer starts at the gradient); Adam's first
    moves every weight by about its learning rate, which a linear warm-up over 10 steps divides by 10."""
    size = rv.ReverserSize(vocab=6, seq_len=5, d_model=16, heads=2, depth=3, batch=8)
    x_eval = torch.randint(0, 6, (8, 5), generator=torch.Generator().manual_seed(2))
    kw = dict(scaled=True, temperature=1.0, seed=0, steps=3, x_eval=x_eval, log_every=1, device="cpu")
    sgd = rv.train_run(size, optimizer="sgd", lr=0.05, **kw)["log"]
    assert [e["step"] for e in sgd] == [1, 2, 3]
    assert sgd[0]["qk_update"] == pytest.approx(0.05 * sgd[0]["qk_grad"], rel=1e-5)
    assert sgd[0]["v_update"] == pytest.approx(0.05 * sgd[0]["v_grad"], rel=1e-5)
    assert sgd[1]["v_update"] != pytest.approx(0.05 * sgd[1]["v_grad"], rel=1e-3)  # momentum from step 2
    adam = rv.train_run(size, optimizer="adam", lr=1e-2, warmup=10, **kw)["log"]
    assert adam[0]["v_update"] == pytest.approx(1e-3 * 16, rel=1e-2)  # lr / 10 times sqrt(16 x 16 weights)
    assert adam[1]["v_update"] > 1.4 * adam[0]["v_update"]  # the warm-up doubles the rate at step 2


def test_unscaled_cosine_gap_is_unscaled_minus_scaled_per_seed_with_the_warm_up():
    """Each seed's gap is the unscaled run's mean cosine minus the scaled run's, both trained at the given depth
    with the warm-up (a swapped sign, a seed not passed on, or the warm-up dropped fails)."""
    import dataclasses

    size = rv.ReverserSize(vocab=6, seq_len=5, d_model=16, heads=2, depth=3, batch=8)
    x_eval = torch.randint(0, 6, (16, 5), generator=torch.Generator().manual_seed(0))
    kw = dict(lr=1e-3, steps=6, warmup=3, x_eval=x_eval)
    gaps = rv.unscaled_cosine_gap(size, 4, (0, 1), **kw)
    deep = dataclasses.replace(size, depth=4)
    run_kw = dict(optimizer="adam", temperature=1.0, lr=1e-3, steps=6, warmup=3, x_eval=x_eval, log_every=25)
    for seed, gap in zip((0, 1), gaps):
        want = (rv.mean_cosine(rv.train_run(deep, scaled=False, seed=seed, **run_kw))
                - rv.mean_cosine(rv.train_run(deep, scaled=True, seed=seed, **run_kw)))
        assert gap == pytest.approx(want, abs=1e-12)
    no_warm = rv.unscaled_cosine_gap(size, 4, (0,), **{**kw, "warmup": 0})
    assert no_warm[0] != pytest.approx(gaps[0], abs=1e-9)
