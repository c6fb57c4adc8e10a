"""Tests of attnbook.signal.reverser (chapter "Unequal gradients, temperature and adaptive optimisers")."""

from __future__ import annotations

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
    batch = rv.batches(SIZE)(0)
    ratios = []
    for tau in (1.0, 0.25):
        torch.manual_seed(0)
        ratios.append(rv.qv_ratio(rv.Reverser(SIZE, True, tau), batch))
    assert ratios[1] > 1.5 * ratios[0], "dividing the logits by tau scales the W_Q gradient up"


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


def test_shipped_sweep_loads_and_gives_seed_accuracies_at_the_best_learning_rate():
    sweep = rv.load_sweep("quick")
    arm = sweep["by_name"]["sgd, alpha=1/sqrt(L), tau=1"]
    assert len(rv.seed_accuracies(arm)) == len(sweep["seeds"])
    best = max(sweep["learning_rates"]["sgd"], key=lambda lr: sum(rv.seed_accuracies(arm, lr)))
    assert arm["best_lr"] == best
    with pytest.raises(ValueError, match="no runs"):
        rv.seed_accuracies(arm, lr=123.0)
    missing = rv.load_sweep("paper")  # not shipped at paper: a Missing that names the command
    assert not missing and missing.command == "python scripts/run.py optimiser_sweep --preset paper"


def test_learnable_residual_scales_start_at_alpha_and_move():
    x_eval = torch.randint(0, 5, (32, 4), generator=torch.Generator().manual_seed(2))
    r = rv.train_run(SIZE, optimizer="adam", scaled=True, temperature=1.0, lr=1e-2, seed=0, steps=20,
                     x_eval=x_eval, log_every=10, learnable_alpha=True)
    alphas = r["log"][-1]["alphas"]
    assert len(alphas) == SIZE.depth
    assert any(abs(a - 3 ** -0.5) > 1e-3 for a in alphas), "trained scales must move from 1/sqrt(L)"
    fixed = rv.Reverser(SIZE, True, 1.0)
    assert not any("alpha" in n for n, _ in fixed.named_parameters())


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
