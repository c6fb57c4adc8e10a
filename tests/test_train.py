"""Tests of attnbook.train: the training loop, schedules, and checkpoints."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from attnbook import train as T


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
    hist = T.train(
        model, lambda step: (x, y), _loss, steps=60, lr=0.05, optimizer=opt, progress=False, seed=0,
        device="cpu",
    )
    assert len(hist["loss"]) == 60 and hist["steps_done"] == 60
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
    x, y = _regression()
    losses = []
    for _ in range(2):
        torch.manual_seed(123)
        model = nn.Linear(4, 1)
        hist = T.train(
            model, lambda s: (lambda i: (x[i], y[i]))(torch.randint(0, 64, (8,))), _loss,
            steps=5, seed=7, progress=False, device="cpu",
        )
        losses.append(hist["loss"])
    assert losses[0] == losses[1]


def test_lr_schedule_shape():
    f = [T.lr_factor(s, 100, 10) for s in range(100)]
    assert f[0] == pytest.approx(0.1) and f[9] == pytest.approx(1.0)
    assert f[10] == pytest.approx(1.0) and f[-1] < 0.01
    assert all(a >= b for a, b in zip(f[10:], f[11:]))
    assert T.lr_factor(50, 100, 0, "constant") == 1.0


def test_time_limit():
    x, y = _regression()
    hist = T.train(nn.Linear(4, 1), lambda s: (x, y), _loss, steps=10**6, time_limit=0.05, progress=False)
    assert hist["stopped"] == "time_limit" and hist["steps_done"] < 10**6


@pytest.mark.parametrize("suffix", [".safetensors", ".pt"])
def test_checkpoint_round_trip(tmp_path, suffix):
    model = nn.Sequential(nn.Linear(3, 5), nn.LayerNorm(5), nn.Linear(5, 2))
    path = T.save_checkpoint(model, tmp_path / f"m{suffix}", {"task": "sort", "steps": 3, "acc": 0.5})
    other = nn.Sequential(nn.Linear(3, 5), nn.LayerNorm(5), nn.Linear(5, 2))
    meta = T.load_checkpoint(other, path)
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
        T.save_checkpoint(m, "/tmp/x.pt", {"bad": object()})
    with pytest.raises(ValueError, match="no checkpoint"):
        T.load_checkpoint(m, "/nonexistent/ckpt.safetensors")
