"""One training loop for every chapter that trains a model (chapters "The circle task", "Path effectiveness",
"A translation model").

:func:`train` runs ``steps`` optimiser steps of ``loss_fn(model, batch)`` on batches drawn from a
``batch_fn(step)`` callable or an iterable (re-iterated when exhausted, so a ``DataLoader`` gives epochs).
It offers the two recipes the book compares (chapter "How fast can it be trained?"):

* the papers' recipe: ``optimizer="adam", schedule="constant", warmup=0, clip=None`` and a fixed data set;
* the book's recipe: ``optimizer="adamw"``, a linear warm-up then a cosine decay, gradient clipping.

Checkpoints are written and read by :mod:`attnbook.core.checkpoints`.
"""

from __future__ import annotations

import itertools
import math
import random
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, Union

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from attnbook.core.presets import device as default_device
from attnbook.core.presets import seed_everything

OPTIMIZERS = ("adamw", "adam", "sgd")
SCHEDULES = ("cosine", "constant", "multistep")
#: steps between reads of the losses back from the device: one read per step would make the CPU wait for the
#: GPU at every step (tiny models on a GPU are bound by that wait, not by arithmetic)
_READ_LOSSES_EVERY = 100


def to_device(batch: Any, dev: torch.device) -> Any:
    """Move every tensor in a (nested) tuple / list / dict ``batch`` to ``dev``."""
    if isinstance(batch, torch.Tensor):
        return batch.to(dev)
    if isinstance(batch, Mapping):
        return {k: to_device(v, dev) for k, v in batch.items()}
    if isinstance(batch, (tuple, list)):
        return type(batch)(to_device(v, dev) for v in batch)
    return batch


def make_optimizer(
    model: nn.Module,
    name: str = "adamw",
    lr: float = 1e-3,
    weight_decay: float = 0.0,
    lr_scale: Optional[Mapping[str, float]] = None,
    **kwargs,
) -> torch.optim.Optimizer:
    """AdamW, Adam or SGD (momentum 0.9 unless given) over the model's trainable parameters.

    ``lr_scale``: optional ``{name prefix: multiplier}``; a parameter whose name (as in
    ``model.named_parameters()``) starts with a prefix gets learning rate ``lr * multiplier`` (chapter "Pruning heads"
    trains its head gates faster than the weights). The first matching prefix wins.
    """
    if name not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {name!r}")
    if not lr > 0:
        raise ValueError(f"lr must be positive, got {lr}")
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    if not named:
        raise ValueError("the model has no trainable parameters")
    if lr_scale:
        if any(not m > 0 for m in lr_scale.values()):
            raise ValueError(f"lr_scale multipliers must be positive, got {dict(lr_scale)}")
        groups: dict[float, list] = {}
        for n, p in named:
            mult = next((m for pre, m in lr_scale.items() if n.startswith(pre)), 1.0)
            groups.setdefault(float(mult), []).append(p)
        params = [{"params": ps, "lr": lr * m} for m, ps in groups.items()]
    else:
        params = [p for _, p in named]
    if name == "adamw":
        return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, **kwargs)
    if name == "adam":
        return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay, **kwargs)
    kwargs.setdefault("momentum", 0.9)
    return torch.optim.SGD(params, lr=lr, weight_decay=weight_decay, **kwargs)


def lr_factor(step: int, steps: int, warmup: int, schedule: str = "cosine", milestones: Sequence[int] = (),
              gamma: float = 1.0) -> float:
    """The learning-rate multiplier at ``step`` (0-based): linear warm-up over ``warmup`` steps, then
    constant, a cosine decay to 0 at ``steps``, or ``"multistep"``: ``gamma`` to the power of the number of
    ``milestones`` (steps) reached (``MultiStepLR``; the official convex-hull recipe of chapter "Path
    effectiveness" steps it once an epoch)."""
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    if schedule == "constant":
        return 1.0
    if schedule == "multistep":
        return gamma ** sum(step >= m for m in milestones)
    progress = (step - warmup) / max(1, steps - warmup)
    return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


def _batches(data: Union[Callable[[int], Any], Iterable]) -> Iterable:
    """Yield batches forever from ``batch_fn(step)`` or by re-iterating an iterable (one pass = one epoch)."""
    if callable(data) and not hasattr(data, "__iter__"):
        for step in itertools.count():
            yield data(step)
    else:
        while True:
            empty = True
            for batch in data:
                empty = False
                yield batch
            if empty:
                raise ValueError("the training data iterable yielded no batch")


def train(
    model: nn.Module,
    data: Union[Callable[[int], Any], Iterable],
    loss_fn: Callable[[nn.Module, Any], torch.Tensor],
    *,
    steps: int,
    lr: float = 1e-3,
    optimizer: str = "adamw",
    weight_decay: float = 0.0,
    warmup: Union[int, float] = 0.05,
    schedule: str = "cosine",
    milestones: Sequence[int] = (),
    gamma: float = 1.0,
    clip: Optional[float] = 1.0,
    device: Optional[Union[str, torch.device]] = None,
    eval_fn: Optional[Callable[[nn.Module], Mapping[str, float]]] = None,
    eval_every: int = 0,
    stop_when: Optional[Callable[[Mapping[str, float]], bool]] = None,
    time_limit: Optional[float] = None,
    seed: Optional[int] = None,
    progress: bool = True,
    desc: str = "train",
    lr_scale: Optional[Mapping[str, float]] = None,
    step_fn: Optional[Callable[[int, nn.Module], None]] = None,
    state_path: Optional[Union[str, Path]] = None,
    state_every: int = 0,
    resume: bool = False,
    extra_state: Optional[dict] = None,
) -> dict:
    """Train ``model`` for ``steps`` optimiser steps and return its history (chapters "The circle task", "Path
    effectiveness" and "A translation model").

    ``data``: ``batch_fn(step) -> batch`` or an iterable of batches (cycled). ``loss_fn(model, batch)``
    returns a scalar loss; batches are moved to the device first. ``warmup``: steps, or a fraction of
    ``steps`` when below 1. ``clip``: max gradient norm, or ``None``. ``eval_fn(model) -> {name: value}``
    runs every ``eval_every`` steps (0: only at the end) in ``eval()`` mode under ``no_grad``;
    ``stop_when(metrics)`` ends training early when true, as does ``time_limit`` (seconds of training in
    this call: a resumed run gets its own limit, not what is left of the first run's).
    ``seed`` re-seeds everything first (``attnbook.seed_everything``). ``progress=False`` hides tqdm.
    ``milestones``, ``gamma``: the ``"multistep"`` schedule (:func:`lr_factor`). ``lr_scale``: per-parameter-name learning-rate multipliers (see :func:`make_optimizer`).
    ``step_fn(step, model)`` runs after every optimiser step (chapter "A translation model"'s training script records
    head statistics with it; it must restore the model's mode if it changes it).

    Resumable training (chapter "A translation model"'s long run): with ``state_path`` and ``state_every > 0`` the full
    training state (model, optimiser, schedule, step, history, random-number states and the caller's
    ``extra_state`` dict) is written there every ``state_every`` steps and at the end; with ``resume`` an
    existing state file is loaded first (``extra_state`` is updated in place) and training continues
    from the step after it, drawing the same batches and dropout masks as an uninterrupted run, and
    evaluating at the same steps (a run stopped by ``time_limit`` is not evaluated at its last step).

    History: ``step``/``loss`` per step, ``evals`` (a list of ``{"step", "time", **metrics}``), ``time``
    (seconds), ``steps_done``, ``stopped`` (``"steps"``, ``"stop_when"`` or ``"time_limit"``).
    """
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive int, got {steps!r}")
    if eval_every < 0:
        raise ValueError(f"eval_every must be >= 0, got {eval_every}")
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0 (steps, or a fraction of steps below 1), got {warmup}")
    if clip is not None and not clip > 0:
        raise ValueError(f"clip must be positive or None, got {clip}")
    if time_limit is not None and not time_limit > 0:
        raise ValueError(f"time_limit must be positive or None, got {time_limit}")
    if seed is not None:
        seed_everything(seed)
    warmup_steps = int(round(warmup * steps)) if warmup < 1 else int(warmup)
    lr_factor(0, steps, warmup_steps, schedule)  # validates the schedule name
    dev = torch.device(device) if device is not None else default_device()
    model.to(dev)
    opt = make_optimizer(model, optimizer, lr, weight_decay, lr_scale=lr_scale)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: lr_factor(s, steps, warmup_steps, schedule, milestones, gamma)
    )
    history: dict = {"step": [], "loss": [], "evals": [], "stopped": "steps"}
    pending: list = []  # losses still on the device: read back in blocks, since reading one waits for the GPU

    def read_losses() -> None:
        if pending:
            history["loss"].extend(torch.stack(pending).cpu().tolist())
            pending.clear()
    elapsed = 0.0
    if state_every < 0 or (state_every and state_path is None):
        raise ValueError(f"state_every={state_every} needs a state_path and must be >= 0")
    start = 1
    if resume and state_path is not None and Path(state_path).exists():
        saved = _load_state(state_path)
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["optimizer"])
        sched.load_state_dict(saved["schedule"])
        history, elapsed, start = saved["history"], saved["elapsed"], saved["step"] + 1
        history["stopped"] = "steps"
        _set_rng_state(saved["rng"])
        if extra_state is not None:
            extra_state.clear()
            extra_state.update(saved["extra"])
    elapsed_before = elapsed

    def save_state(step: int) -> None:
        read_losses()
        blob = {"model": model.state_dict(), "optimizer": opt.state_dict(), "schedule": sched.state_dict(),
                "history": history, "elapsed": elapsed, "step": step, "rng": _rng_state(),
                "extra": extra_state if extra_state is not None else {}}
        tmp = Path(str(state_path) + ".tmp")
        torch.save(blob, tmp)
        tmp.replace(state_path)

    def evaluate(step: int) -> bool:
        was_training = model.training
        model.eval()
        with torch.no_grad():
            metrics = dict(eval_fn(model))
        model.train(was_training)
        history["evals"].append({"step": step, "time": elapsed, **metrics})
        return bool(stop_when(metrics)) if stop_when is not None else False

    model.train()
    bar = tqdm(total=steps, initial=start - 1, desc=desc, disable=not progress, leave=False)
    batches = _batches(data) if start == 1 else _batches_from(data, start - 1)
    step = start - 1
    for step in range(start, steps + 1):
        t0 = time.perf_counter()
        batch = to_device(next(batches), dev)
        loss = loss_fn(model, batch)
        if loss.ndim != 0:
            raise ValueError(f"loss_fn must return a scalar, got shape {tuple(loss.shape)}")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        sched.step()
        elapsed += time.perf_counter() - t0
        history["step"].append(step)
        pending.append(loss.detach())
        bar.update(1)
        if step_fn is not None:
            step_fn(step, model)
        if len(pending) == _READ_LOSSES_EVERY:
            read_losses()
        if progress and (step % 10 == 0 or step == steps):
            read_losses()
            bar.set_postfix(loss=f"{history['loss'][-1]:.4f}")
        if eval_fn is not None and eval_every and step % eval_every == 0:
            if evaluate(step):
                history["stopped"] = "stop_when"
                break
        if time_limit is not None and elapsed - elapsed_before >= time_limit:
            history["stopped"] = "time_limit"
            break
        if state_every and step % state_every == 0:
            save_state(step)
    bar.close()
    read_losses()
    # the last step is evaluated, unless a time limit stopped the run: it is unfinished, and an evaluation
    # here would be one that an uninterrupted run never makes (a checkpoint for stop_when's patience)
    if (eval_fn is not None and history["stopped"] != "time_limit"
            and (not history["evals"] or history["evals"][-1]["step"] != step)):
        if evaluate(step) and history["stopped"] == "steps":
            history["stopped"] = "stop_when"
    model.eval()
    history["time"] = elapsed
    history["steps_done"] = step
    if state_every:
        save_state(step)
    return history


def _batches_from(data, done: int) -> Iterable:
    """Batches after the first ``done`` ones: a ``batch_fn`` continues at step ``done``; an iterable
    is fast-forwarded (resumed training draws the batches an uninterrupted run would)."""
    if callable(data) and not hasattr(data, "__iter__"):
        return (data(step) for step in itertools.count(done))
    it = _batches(data)
    for _ in range(done):
        next(it)
    return it


def _rng_state() -> dict:
    return {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []}


def _set_rng_state(state: Mapping) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _load_state(path) -> dict:
    blob = torch.load(path, map_location="cpu", weights_only=False)
    if not isinstance(blob, dict) or not {"model", "optimizer", "step"} <= set(blob):
        raise ValueError(f"{path} is not a training state written by train(state_path=...)")
    return blob
