"""Tests of attnbook.signal.reverser (chapter "Unequal gradients, temperature and adaptive optimisers")."""

from __future__ import annotations

import math

import pytest
import torch

from attnbook.signal import reverser as rv

SIZE = rv.ReverserSize(vocab=5, seq_len=4, d_model=8, heads=2, depth=3, batch=16)


def test_batches_reverse_their_inputs_and_the_model_shapes():
    x, y = rv.batches(SIZE)(0)
    assert x.shape == (16, 4) and torch.equal(y, x.flip(1))
    model = rv.Reverser(SIZE, scaled=True, temperature=0.5)
    assert model(x).shape == (16, 4, 5)
    assert model.stack.blocks[0].alpha == pytest.approx(3 ** -0.5)


def test_accuracy_is_one_for_a_perfect_reverser():
    class Perfect(rv.Reverser):
        def forward(self, x):
            return torch.nn.functional.one_hot(x.flip(1), SIZE.vocab).float()

    x = torch.randint(0, 5, (10, 4))
    assert rv.accuracy(Perfect(SIZE, False, 1.0), x) == 1.0
    assert rv.accuracy(rv.Reverser(SIZE, False, 1.0), x) < 1.0


def test_a_lower_temperature_raises_the_query_value_gradient_ratio():
    """The batch is drawn from a seeded generator (unseeded, the ratio's gain ran from 1.2 to 2.5 over batches,
    and a bar of 1.5 failed about one process in six); a temperature that is ignored gives a gain of exactly 1."""
    torch.manual_seed(0)
    batch = rv.batches(SIZE)(0)
    ratios = []
    for tau in (1.0, 0.25):
        torch.manual_seed(0)
        ratios.append(rv.qv_ratio(rv.Reverser(SIZE, True, tau), batch))
    assert ratios[1] > 1.15 * ratios[0], "dividing the logits by tau scales the W_Q gradient up"


def test_qv_ratios_share_one_batch_and_the_balancing_temperature_is_the_closest_to_one():
    ratios = rv.qv_ratios(SIZE, True, (1.0, 0.25))
    torch.manual_seed(0)
    batch = rv.batches(SIZE)(0)
    torch.manual_seed(0)
    assert ratios[0.25] == pytest.approx(rv.qv_ratio(rv.Reverser(SIZE, True, 0.25), batch), rel=1e-12)
    assert ratios[0.25] > ratios[1.0]
    assert rv.closest_to_one({0.25: 3.0, 0.5: 0.9, 1.0: 0.5}) == 0.5
    assert rv.closest_to_one({0.25: 1.8, 0.5: 0.5}) == 0.25  # |log 1.8| < |log 0.5|
    assert rv.balancing_temperature(SIZE, True, grid=(1.0, 0.25)) == rv.closest_to_one(ratios)
    with pytest.raises(ValueError, match="positive"):
        rv.closest_to_one({1.0: 0.0})


def test_train_run_logs_gradients_and_cosine_and_learns_with_adam():
    x_eval = torch.randint(0, 5, (64, 4), generator=torch.Generator().manual_seed(1))
    r = rv.train_run(SIZE, optimizer="adam", scaled=True, temperature=1.0, lr=3e-3, seed=0, steps=60,
                     x_eval=x_eval, log_every=20)
    assert [e["step"] for e in r["log"]] == [20, 40, 60]
    assert all(e["qk_grad"] > 0 and e["v_grad"] > 0 and -1 <= e["cosine"] <= 1 for e in r["log"])
    assert r["log"][-1]["loss"] < r["log"][0]["loss"]
    with pytest.raises(ValueError, match="optimizer"):
        rv.train_run(SIZE, optimizer="lbfgs", scaled=True, temperature=1.0, lr=1.0, seed=0, steps=1,
                     x_eval=x_eval)


def test_shipped_sweep_loads_and_judges_other_seeds_than_those_that_chose_the_learning_rate():
    sweep = rv.load_sweep("quick")
    arm = sweep["by_name"]["sgd, alpha=1/sqrt(L), tau=1"]
    assert len(rv.seed_accuracies(arm)) == len(sweep["seeds"])
    means = {lr: sum(rv.selection_accuracies(arm, lr)) / 3 for lr in sweep["learning_rates"]["sgd"]}
    assert means[arm["best_lr"]] == pytest.approx(max(means.values()))  # ties go to the lower loss
    assert {r["seed"] for r in arm["runs"] if r["role"] == "judged"}.isdisjoint(sweep["selection_seeds"])
    with pytest.raises(ValueError, match="no runs"):
        rv.selection_accuracies(arm, lr=123.0)
    missing = rv.load_sweep("paper")  # not shipped at paper: a Missing that names the command
    assert not missing and missing.command == "python scripts/run.py optimiser_sweep --preset paper"


def _arm(losses_by_seed, lr=0.1):
    """A sweep arm with judged runs whose logs hold ``losses`` at steps 10, 20, ..., 100, and two selection runs."""
    runs = [{"role": "judged", "lr": lr, "seed": seed, "acc": 0.5 + seed / 10,
             "log": [{"step": 10 * (i + 1), "loss": loss, "qk_update": 0.1 * (i + 1), "v_update": 1.0}
                     for i, loss in enumerate(losses)]} for seed, losses in enumerate(losses_by_seed)]
    runs += [{"role": "selection", "lr": lr, "seed": 10 + k, "acc": 0.9} for k in range(2)]
    return {"name": "toy", "best_lr": lr, "runs": runs}


def test_late_loss_drop_and_update_ratio_read_the_judged_logs():
    flat = [2.0] * 10
    falling = [2.0 - 0.1 * i for i in range(10)]  # 1.3 at step 80, 1.1 at step 100
    arm = _arm([flat, falling])
    assert rv.seed_accuracies(arm) == [0.5, 0.6] and rv.selection_accuracies(arm, 0.1) == [0.9, 0.9]
    # windows of one log entry each: (70, 80] and (90, 100]: the falling run dropped 0.2, the flat one 0
    assert rv.late_loss_drop(arm) == pytest.approx(0.1)
    assert rv.late_loss_drop(_arm([flat])) == 0.0
    assert rv.update_ratio(arm) == pytest.approx(0.1) and rv.update_ratio(arm, step=30) == pytest.approx(0.3)
    assert rv.first_step_below(arm, 1.75) == math.inf  # the flat seed never gets there
    assert rv.first_step_below(_arm([falling, falling]), 1.75) == 40  # 1.7 at step 40
    assert rv.steps_below(arm, 1.75) == [math.inf, 40]  # per seed, in the judged seeds' order
    with pytest.raises(ValueError, match="step 35"):
        rv.update_ratio(arm, step=35)
    with pytest.raises(ValueError, match="judged"):
        rv.seed_accuracies({"name": "empty", "best_lr": 0.1, "runs": []})


def test_the_plateau_gate_fails_while_an_arm_s_loss_still_falls():
    flat = [2.0] * 10
    falling = [2.0 - 0.1 * i for i in range(10)]
    drops = {"flat": rv.late_loss_drop(_arm([flat])), "falling": rv.late_loss_drop(_arm([falling]))}
    gate = rv.plateau_gate(drops, what="two arms", guards="their comparison", precomputed="cmd")
    assert gate.verdict == "fails" and gate.value == pytest.approx(0.2) and gate.precomputed == "cmd"
    assert "two arms" in gate.name and "their comparison" in gate.reason
    assert rv.plateau_gate({"flat": drops["flat"]}, what="one arm", guards="it").holds
    assert rv.plateau_gate({"edge": rv.MAX_LATE_DROP}, what="one arm", guards="it").holds
    with pytest.raises(ValueError, match="at least one arm"):
        rv.plateau_gate({}, what="no arm", guards="nothing")


def test_learnable_residual_scales_start_at_alpha_and_move():
    x_eval = torch.randint(0, 5, (32, 4), generator=torch.Generator().manual_seed(2))
    r = rv.train_run(SIZE, optimizer="adam", scaled=True, temperature=1.0, lr=1e-2, seed=0, steps=20,
                     x_eval=x_eval, log_every=10, learnable_alpha=True)
    alphas = r["log"][-1]["alphas"]
    assert len(alphas) == SIZE.depth
    assert any(abs(a - 3 ** -0.5) > 1e-3 for a in alphas), "trained scales must move from 1/sqrt(L)"
    fixed = rv.Reverser(SIZE, True, 1.0)
    assert not any("alpha" in n for n, _ in fixed.named_parameters())


def test_a_larger_learning_rate_for_the_scales_alone_moves_them_further():
    """Adam moves a weight by about its learning rate per step: ten times the scales' rate moves them about ten
    times as far, while the other weights' rate stays (the first logged step's update of W_Q, W_K is the same)."""
    x_eval = torch.randint(0, 5, (32, 4), generator=torch.Generator().manual_seed(2))
    kw = dict(optimizer="adam", scaled=False, temperature=1.0, lr=1e-3, seed=0, steps=5, x_eval=x_eval,
              log_every=1, learnable_alpha=True)
    moved = {k: max(abs(a - 1.0) for a in rv.train_run(SIZE, alpha_lr_scale=k, **kw)["log"][-1]["alphas"])
             for k in (1.0, 10.0)}
    assert 6 < moved[10.0] / moved[1.0] < 14
    first = {k: rv.train_run(SIZE, alpha_lr_scale=k, **kw)["log"][1]["qk_update"] for k in (1.0, 10.0)}
    assert first[10.0] == pytest.approx(first[1.0], rel=1e-2)  # not all weights sped up
    with pytest.raises(ValueError, match="learnable_alpha"):
        rv.train_run(SIZE, alpha_lr_scale=10.0, **{**kw, "learnable_alpha": False})


def test_the_chapter_s_figures_draw_from_runs():
    import matplotlib

    matplotlib.use("Agg")
    from attnbook.signal import reverser_figures

    sweep = rv.load_sweep()
    fig = reverser_figures.optimiser_sweep(sweep)
    assert len(fig.axes) == 4 and len(fig.legends) == 1
    assert len(fig.axes[0].containers) == sum(a["optimizer"] == "sgd" for a in sweep["arms"])
    x_eval = torch.randint(0, 5, (16, 4), generator=torch.Generator().manual_seed(3))
    runs, learned = rv.by_depth(SIZE, (2, 3), lr=1e-3, steps=4, x_eval=x_eval, learnable_depth=3)
    assert set(runs) == {(2, False), (2, True), (3, False), (3, True)} and set(learned) == {False, True}
    fig = reverser_figures.cosine_during_training(runs, learned)
    assert len(fig.axes[0].lines) == 4 and len(fig.axes[1].lines) == 2 * 3
