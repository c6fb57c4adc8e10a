"""Tests of attnbook.signal.reverser_ensemble: the seeds of a reversal-task run trained as one batched model
give the runs of reverser.train_run, seed by seed (chapter "Unequal gradients", the optimiser sweep)."""

from __future__ import annotations

import pytest
import torch

from attnbook.signal import reverser as rv
from attnbook.signal import reverser_ensemble
from attnbook.signal.reverser_ensemble import train_arms, train_runs, train_seeds

SIZE = rv.ReverserSize(vocab=6, seq_len=5, d_model=16, heads=2, depth=3, batch=8)
X_EVAL = torch.randint(0, 6, (12, 5), generator=torch.Generator().manual_seed(9))


def _close_runs(batched, alone):
    assert batched["steps"] == alone["steps"]
    assert batched["losses"] == pytest.approx(alone["losses"], rel=2e-4, abs=1e-6)
    assert batched["acc"] == pytest.approx(alone["acc"], abs=1 / 60 + 1e-9)  # a tied logit may fall either way
    assert [e["step"] for e in batched["log"]] == [e["step"] for e in alone["log"]]
    for b, a in zip(batched["log"], alone["log"]):
        assert b["loss"] == pytest.approx(a["loss"], abs=2e-4)
        assert b["cosine"] == pytest.approx(a["cosine"], abs=2e-4)
        assert b["qk_grad"] == pytest.approx(a["qk_grad"], rel=1e-3)
        assert b["v_grad"] == pytest.approx(a["v_grad"], rel=1e-3)
        assert b["qk_update"] == pytest.approx(a["qk_update"], rel=1e-3)
        assert b["v_update"] == pytest.approx(a["v_update"], rel=1e-3)
        assert b.get("alphas") == pytest.approx(a.get("alphas"), abs=2e-4) if "alphas" in a else "alphas" not in b


@pytest.mark.parametrize("optimizer,scaled,temperature,lr,learnable,warmup", [
    ("sgd", False, 1.0, 0.05, False, 0), ("adam", True, 0.5, 1e-3, False, 15), ("adam", True, 1.0, 1e-3, True, 0)])
def test_batched_seeds_give_each_seed_s_run(optimizer, scaled, temperature, lr, learnable, warmup):
    kw = dict(optimizer=optimizer, scaled=scaled, temperature=temperature, lr=lr, steps=23, x_eval=X_EVAL,
              log_every=10, device="cpu", learnable_alpha=learnable, warmup=warmup)
    seeds = [4, 1, 7]  # not in order: a record must follow its seed
    batched = train_seeds(SIZE, seeds=seeds, **kw)
    assert len(batched) == 3
    for seed, run in zip(seeds, batched):
        _close_runs(run, rv.train_run(SIZE, seed=seed, **kw))
    assert batched[0]["losses"] != pytest.approx(batched[1]["losses"], rel=1e-3)


def test_arms_of_other_residual_scales_and_temperatures_train_together():
    """Chapter "Unequal gradients"'s live runs: each arm keeps its own alpha and temperature in the batch."""
    arms = [(False, 1.0, 0), (True, 0.5, 0), (True, 1.0, 2)]
    kw = dict(optimizer="sgd", lr=0.05, steps=17, x_eval=X_EVAL, log_every=8, device="cpu")
    batched = train_arms(SIZE, arms, **kw)
    for (scaled, tau, seed), run in zip(arms, batched):
        _close_runs(run, rv.train_run(SIZE, scaled=scaled, temperature=tau, seed=seed, **kw))
    assert batched[0]["losses"] != pytest.approx(batched[1]["losses"], rel=1e-3)  # same seed, other arm


def test_train_runs_batches_each_optimiser_on_a_gpu_and_loops_elsewhere(monkeypatch):
    runs = [("sgd", False, 1.0), ("adam", True, 1.0), ("sgd", True, 0.5)]
    kw = dict(lr={"sgd": 0.05, "adam": 1e-3}, seed=1, steps=9, x_eval=X_EVAL, device="cpu")
    looped = train_runs(SIZE, runs, **kw)
    assert list(looped) == runs
    for (opt, scaled, tau), run in looped.items():
        assert run == rv.train_run(SIZE, optimizer=opt, scaled=scaled, temperature=tau, lr=kw["lr"][opt],
                                   seed=1, steps=9, x_eval=X_EVAL, device="cpu")
    batches = []
    real = reverser_ensemble.train_arms
    monkeypatch.setattr(reverser_ensemble, "batches_models_on", lambda dev: True)
    monkeypatch.setattr(reverser_ensemble, "train_arms",
                        lambda size, arms, **k: batches.append((k["optimizer"], arms)) or real(size, arms, **k))
    together = train_runs(SIZE, runs, **kw)
    assert batches == [("sgd", [(False, 1.0, 1), (True, 0.5, 1)]), ("adam", [(True, 1.0, 1)])]
    assert list(together) == runs
    for run in runs:
        _close_runs(together[run], looped[run])
    with pytest.raises(ValueError, match="distinct"):
        train_runs(SIZE, runs + runs[:1], **kw)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (vmap drops the virtual device's tag)")
def test_train_seeds_on_a_gpu_gives_the_cpu_records():
    kw = dict(optimizer="sgd", scaled=True, temperature=1.0, lr=0.05, seeds=[0, 1], steps=6, x_eval=X_EVAL,
              log_every=3)
    for gpu, cpu in zip(train_seeds(SIZE, device="cuda", **kw), train_seeds(SIZE, device="cpu", **kw)):
        _close_runs(gpu, cpu)


def test_bad_input():
    kw = dict(scaled=False, temperature=1.0, lr=0.1, steps=2, x_eval=X_EVAL, device="cpu")
    with pytest.raises(ValueError, match="distinct"):
        train_seeds(SIZE, optimizer="sgd", seeds=[1, 1], **kw)
    with pytest.raises(ValueError, match="optimizer"):
        train_seeds(SIZE, optimizer="lbfgs", seeds=[1], **kw)
