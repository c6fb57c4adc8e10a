"""Tests of attnbook.core.train (the training loop, schedules) and attnbook.core.checkpoints."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from attnbook.core import checkpoints as C
from attnbook.core import train as T


def _regression():
    torch.manual_seed(0)
    w = torch.randn(4, 1)
    x = torch.randn(64, 4)
    return x, x @ w


def _loss(model, batch):
    x, y = batch
    return nn.functional.mse_loss(model(x), y)


@pytest.mark.parametrize("opt", T.OPTIMIZERS)
def test_train_reduces_loss_with_batch_fn(opt):
    x, y = _regression()
    model = nn.Linear(4, 1)
    with torch.no_grad():
        initial = float(_loss(model, (x, y)))
    hist = T.train(
        model, lambda step: (x, y), _loss, steps=60, lr=0.05, optimizer=opt, progress=False, seed=0,
        device="cpu",
    )
    assert len(hist["loss"]) == 60 and hist["steps_done"] == 60
    assert hist["loss"][0] == pytest.approx(initial, rel=1e-6)  # the loss before the first update
    assert hist["loss"][-1] < 0.5 * hist["loss"][0]
    assert hist["stopped"] == "steps"


def test_train_iterable_epochs_eval_and_stop():
    x, y = _regression()
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=16)
    model = nn.Linear(4, 1)
    calls = []

    def eval_fn(m):
        calls.append(m.training)
        return {"mse": float(_loss(m, (x, y)))}

    hist = T.train(
        model, loader, _loss, steps=400, lr=0.05, optimizer="adam", schedule="constant", warmup=0,
        clip=None, eval_fn=eval_fn, eval_every=10, stop_when=lambda m: m["mse"] < 0.05,
        progress=False, device="cpu",
    )
    assert hist["stopped"] == "stop_when"
    assert hist["evals"][-1]["mse"] < 0.05 and hist["steps_done"] < 400
    assert not any(calls), "eval_fn must run in eval mode"


def test_train_is_deterministic_with_seed():
    """``seed`` re-seeds everything before the first batch: two runs from the same weights draw the same
    batches even when the global generator was left in different states. Same process, same operations:
    the losses agree to rounding (they are in fact identical)."""
    x, y = _regression()
    torch.manual_seed(123)
    start = nn.Linear(4, 1).state_dict()
    losses = []
    for disturb in (1, 2):
        model = nn.Linear(4, 1)
        model.load_state_dict(start)
        torch.manual_seed(disturb)  # what ran before training must not matter
        hist = T.train(
            model, lambda s: (lambda i: (x[i], y[i]))(torch.randint(0, 64, (8,))), _loss,
            steps=5, seed=7, progress=False, device="cpu",
        )
        losses.append(torch.tensor(hist["loss"]))
    torch.testing.assert_close(losses[0], losses[1], atol=0, rtol=1e-6)


def _constant_gradient_run(**kw):
    """Train a single parameter w (start 0) on loss = 3 w, recording w before every step."""
    model = nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        model.weight.zero_()
    seen = []

    def loss_fn(m, batch):
        seen.append(float(m.weight.detach()))
        return 3.0 * m.weight.sum()

    T.train(model, lambda s: None, loss_fn, progress=False, device="cpu", **kw)
    seen.append(float(model.weight.detach()))
    return torch.tensor(seen, dtype=torch.float64)


def test_train_follows_the_learning_rate_schedule():
    """With a constant gradient Adam moves w by exactly the step's learning rate (|m_hat / sqrt(v_hat)| = 1, up
    to eps / 3 = 3e-9): the steps of w are lr * lr_factor(step), linear warm-up then cosine decay."""
    steps, warmup, lr = 8, 3, 0.1
    w = _constant_gradient_run(steps=steps, lr=lr, optimizer="adam", warmup=warmup, schedule="cosine", clip=None)
    expected = torch.tensor([lr * T.lr_factor(s, steps, warmup, "cosine") for s in range(steps)], dtype=torch.float64)
    torch.testing.assert_close(w[:-1] - w[1:], expected, atol=1e-7, rtol=0)
    # a warm-up given as a fraction of the steps: 0.25 * 8 = 2 steps
    w = _constant_gradient_run(steps=steps, lr=lr, optimizer="adam", warmup=0.25, schedule="constant", clip=None)
    torch.testing.assert_close(w[:-1] - w[1:], torch.tensor([0.05, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1],
                                                            dtype=torch.float64), atol=1e-7, rtol=0)


def test_train_clips_the_gradient_norm():
    """clip=c: plain SGD's first step is lr * g * min(1, c / ||g||). Gradient 3, so clip 0.5 gives a step of
    0.1 * 0.5 and no clipping a step of 0.1 * 3."""
    w = _constant_gradient_run(steps=1, lr=0.1, optimizer="sgd", warmup=0, schedule="constant", clip=0.5)
    assert w[0] - w[1] == pytest.approx(0.05, rel=1e-6)
    w = _constant_gradient_run(steps=1, lr=0.1, optimizer="sgd", warmup=0, schedule="constant", clip=None)
    assert w[0] - w[1] == pytest.approx(0.3, rel=1e-6)


def test_make_optimizer_scales_learning_rates_by_name_prefix():
    """Chapter 11 trains gates faster: parameters whose name starts with a prefix get lr * multiplier."""
    model = nn.ModuleDict({"body": nn.Linear(2, 2), "gates": nn.Linear(2, 1)})
    model["body"].bias.requires_grad_(False)  # frozen parameters are not optimised
    opt = T.make_optimizer(model, "adamw", lr=1e-3, weight_decay=0.3, lr_scale={"gates.": 50.0})
    lrs = {id(p): g["lr"] for g in opt.param_groups for p in g["params"]}
    assert lrs == {id(model["body"].weight): 1e-3, id(model["gates"].weight): pytest.approx(5e-2, rel=1e-12),
                   id(model["gates"].bias): pytest.approx(5e-2, rel=1e-12)}
    assert all(g["weight_decay"] == 0.3 for g in opt.param_groups)  # not AdamW's default 0.01
    sgd = T.make_optimizer(model, "sgd", lr=0.1)
    assert isinstance(sgd, torch.optim.SGD) and sgd.param_groups[0]["momentum"] == 0.9


def test_lr_schedule_shape():
    f = [T.lr_factor(s, 100, 10) for s in range(100)]
    assert f[0] == pytest.approx(0.1, rel=1e-12) and f[9] == pytest.approx(1.0, rel=1e-12)
    assert f[10] == pytest.approx(1.0, rel=1e-12) and f[-1] < 0.01
    # cosine decay after warm-up: half-way through the decay the factor is 1/2
    assert T.lr_factor(55, 100, 10) == pytest.approx(0.5, rel=1e-12)
    assert all(a >= b for a, b in zip(f[10:], f[11:]))
    assert T.lr_factor(50, 100, 0, "constant") == 1.0
    # MultiStepLR: gamma per milestone reached (the official hull recipe, milestones in steps here)
    steps = [T.lr_factor(s, 100, 0, "multistep", milestones=(15, 30), gamma=0.5) for s in (0, 14, 15, 29, 30, 99)]
    assert steps == [1.0, 1.0, 0.5, 0.5, 0.25, 0.25]


def test_time_limit():
    x, y = _regression()
    hist = T.train(nn.Linear(4, 1), lambda s: (x, y), _loss, steps=10**6, time_limit=0.05, progress=False)
    assert hist["stopped"] == "time_limit" and hist["steps_done"] < 10**6


@pytest.mark.parametrize("suffix", [".safetensors", ".pt"])
def test_checkpoint_round_trip(tmp_path, suffix):
    model = nn.Sequential(nn.Linear(3, 5), nn.LayerNorm(5), nn.Linear(5, 2))
    path = C.save_checkpoint(model, tmp_path / f"m{suffix}", {"task": "sort", "steps": 3, "acc": 0.5})
    other = nn.Sequential(nn.Linear(3, 5), nn.LayerNorm(5), nn.Linear(5, 2))
    meta = C.load_checkpoint(other, path)
    assert meta == {"task": "sort", "steps": 3, "acc": 0.5}
    for a, b in zip(model.state_dict().values(), other.state_dict().values()):
        assert torch.equal(a, b)


def test_bad_input():
    x, y = _regression()
    m = nn.Linear(4, 1)
    with pytest.raises(ValueError, match="steps"):
        T.train(m, lambda s: (x, y), _loss, steps=0)
    with pytest.raises(ValueError, match="optimizer"):
        T.train(m, lambda s: (x, y), _loss, steps=2, optimizer="rmsprop", progress=False)
    with pytest.raises(ValueError, match="schedule"):
        T.train(m, lambda s: (x, y), _loss, steps=2, schedule="linear", progress=False)
    with pytest.raises(ValueError, match="clip"):
        T.train(m, lambda s: (x, y), _loss, steps=2, clip=0.0, progress=False)
    with pytest.raises(ValueError, match="scalar"):
        T.train(m, lambda s: (x, y), lambda mm, b: (mm(b[0]) - b[1]) ** 2, steps=2, progress=False)
    with pytest.raises(ValueError, match="no batch"):
        T.train(m, [], _loss, steps=2, progress=False)
    with pytest.raises(ValueError, match="JSON"):
        C.save_checkpoint(m, "/tmp/x.pt", {"bad": object()})
    with pytest.raises(ValueError, match="no checkpoint"):
        C.load_checkpoint(m, "/nonexistent/ckpt.safetensors")


def test_resumed_training_matches_an_uninterrupted_run(tmp_path):
    """Stopping at step 7 and resuming from the saved state gives the losses and weights of one run of
    12 steps: the same batches (random draws from the global generator), the same dropout masks, the same
    optimiser moments and learning-rate schedule; ``extra_state`` comes back with the state."""
    x, y = _regression()

    def batch_fn(step):  # random batches, drawn from the restored generator
        i = torch.randint(0, 64, (8,))
        return x[i], y[i]

    def make():
        torch.manual_seed(3)
        return nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.3), nn.Linear(8, 1))

    kw = dict(steps=12, lr=0.01, warmup=3, seed=5, progress=False, device="cpu")
    full = T.train(make(), batch_fn, _loss, **kw)
    state = tmp_path / "state.pt"
    extra = {"note": 1}
    part = T.train(make(), batch_fn, _loss, state_path=state, state_every=2, extra_state=extra,
                   time_limit=1e-9, **kw)  # stops after the first step
    assert part["steps_done"] == 1 and part["stopped"] == "time_limit" and state.exists()
    extra.clear()
    model = make()
    rest = T.train(model, batch_fn, _loss, state_path=state, state_every=2, resume=True, extra_state=extra,
                   **kw)
    assert extra == {"note": 1} and rest["stopped"] == "steps" and rest["steps_done"] == 12
    # a resumed run's time limit counts its own seconds, not the first run's as well
    blob = torch.load(state, weights_only=False)
    blob["elapsed"], blob["step"] = 1e6, 1
    torch.save(blob, state)
    again = T.train(make(), batch_fn, _loss, state_path=state, resume=True, time_limit=60, **kw)
    assert again["stopped"] == "steps" and again["steps_done"] == 12
    torch.save(blob, state)
    brief = T.train(make(), batch_fn, _loss, state_path=state, resume=True, time_limit=1e-9, **kw)
    assert brief["stopped"] == "time_limit" and brief["steps_done"] == 2  # one step after the saved one
    torch.testing.assert_close(torch.tensor(rest["loss"]), torch.tensor(full["loss"]), atol=0, rtol=1e-6)
    with pytest.raises(ValueError, match="state_path"):
        T.train(make(), batch_fn, _loss, steps=2, state_every=1, progress=False)


def test_a_time_limited_run_is_evaluated_on_schedule_only(tmp_path):
    """A run stopped by its time limit is not evaluated at its last step: resumed, it evaluates at the steps
    an uninterrupted run does (an extra evaluation would be an extra checkpoint for stop_when's patience)."""
    x, y = _regression()

    def evals(m):
        return {"loss": float(_loss(m, (x, y)))}

    kw = dict(steps=12, lr=0.01, seed=5, progress=False, device="cpu", eval_fn=evals, eval_every=4)
    full = T.train(nn.Linear(4, 1), lambda s: (x, y), _loss, **kw)
    state = tmp_path / "state.pt"
    part = T.train(nn.Linear(4, 1), lambda s: (x, y), _loss, state_path=state, state_every=4,
                   time_limit=1e-9, **kw)
    assert part["stopped"] == "time_limit" and part["steps_done"] == 1 and part["evals"] == []
    rest = T.train(nn.Linear(4, 1), lambda s: (x, y), _loss, state_path=state, state_every=4, resume=True,
                   **kw)
    assert [e["step"] for e in rest["evals"]] == [e["step"] for e in full["evals"]] == [4, 8, 12]


def test_losses_read_back_in_blocks_are_every_step_s_loss():
    """The losses stay on the device and are read back every ``_READ_LOSSES_EVERY`` steps (one read per
    step waits for the GPU each time): the history still holds each step's loss, in order, on a run that
    does not end on a block, on the (virtual) GPU as on the CPU."""
    from attnbook.core.virtual_cuda import virtual_cuda

    x, y = _regression()
    steps = T._READ_LOSSES_EVERY * 2 + 7

    def run(device):
        torch.manual_seed(0)
        model = nn.Linear(4, 1)
        seen = []
        hist = T.train(model, lambda step: (x, y), lambda m, b: seen.append(float(_loss(m, b))) or _loss(m, b),
                       steps=steps, lr=0.01, optimizer="sgd", progress=False, seed=0, device=device)
        return hist["loss"], seen

    on_cpu, seen = run("cpu")
    assert len(on_cpu) == steps and on_cpu == pytest.approx(seen, rel=1e-6)
    assert all(isinstance(v, float) for v in on_cpu)
    with virtual_cuda() as dev:
        on_gpu, _ = run(dev)
    assert on_gpu == on_cpu
