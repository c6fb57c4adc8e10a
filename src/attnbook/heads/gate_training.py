"""Voita et al.'s gate fine-tuning recipe (chapter "Pruning heads", eq. ``gate-objective``): a model and its
hard-concrete gates (:class:`attnbook.heads.gates.HeadGates`) trained together on ``L_task + lambda L_C`` with the
book's one training loop, recording the gates as they move.
"""

from __future__ import annotations

import copy
import math
from typing import Any, Callable, Optional, Sequence

import torch
from torch import nn

from attnbook.heads.gates import REDUCTIONS, HeadGates
from attnbook.heads.masks import as_head_mask
from attnbook.core.train import train


class Gated(nn.Module):
    """A model and its :class:`HeadGates` in one module, so that :func:`attnbook.core.train.train` optimises
    both (chapter "Pruning heads"). Freeze parts of ``model`` with ``requires_grad_(False)`` before training."""

    def __init__(self, model: nn.Module, gates: HeadGates) -> None:
        super().__init__()
        if not isinstance(gates, HeadGates):
            raise ValueError(f"gates must be a HeadGates, got {type(gates).__name__}")
        self.model, self.gates = model, gates


def train_gates(
    model: nn.Module,
    gates: HeadGates,
    task_loss: Callable[[nn.Module, Any, dict], torch.Tensor],
    data,
    *,
    lam: float,
    steps: int,
    lr: float = 1e-4,
    gate_lr: float = 0.05,
    reduction: str = "layer_mean",
    record_every: int = 10,
    **train_kwargs,
) -> dict:
    """Fine-tune ``model`` with hard-concrete head gates: minimise ``L_task + lam * L_C`` (chapter "Pruning heads",
    eq. ``gate-objective``), with :func:`attnbook.core.train.train`.

    ``task_loss(model, batch, head_gates)`` runs the model with the gates (a dict from
    :meth:`HeadGates.forward`) and returns the task loss (cross-entropy for translation). The model's
    trainable parameters learn at ``lr``, the gates' ``log_alpha`` at ``gate_lr`` (Adam-type optimisers
    move a parameter by about its learning rate per step, and a gate must travel from +3 to below -2.4 to
    close). ``reduction``: see :func:`l0_penalty`. Every ``record_every`` steps the evaluation gates and
    ``P(g != 0)`` are stored. Extra keyword arguments go to :func:`attnbook.core.train.train` (e.g. ``seed``,
    ``progress``, ``clip``, ``schedule``, ``warmup``).

    Returns the training history with, in addition, ``"task_loss"`` and ``"penalty"`` per step and
    ``"snapshots"``: a list of ``{"step", "gates": {type: (L, H)}, "p_open": {type: (L, H)}}``.
    """
    if not (isinstance(lam, (int, float)) and lam >= 0 and math.isfinite(lam)):
        raise ValueError(f"lam must be a finite number >= 0, got {lam!r}")
    if not gate_lr > 0:
        raise ValueError(f"gate_lr must be positive, got {gate_lr}")
    if not isinstance(record_every, int) or record_every < 1:
        raise ValueError(f"record_every must be a positive int, got {record_every!r}")
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
    wrapped = Gated(model, gates)
    task_losses: list[float] = []
    penalties: list[float] = []
    snapshots: list[dict] = []

    def snapshot(step: int) -> None:
        was = gates.training
        gates.eval()
        with torch.no_grad():
            g = {n: t.detach().cpu() for n, t in gates().items()}
        gates.train(was)
        p_open = {n: t.detach().cpu() for n, t in gates.expected_open().items()}
        snapshots.append({"step": step, "gates": g, "p_open": p_open})  # records on the CPU

    snapshot(0)

    def loss_fn(m: Gated, batch) -> torch.Tensor:
        task = task_loss(m.model, batch, m.gates())
        pen = m.gates.penalty(reduction)
        task_losses.append(float(task.detach()))
        penalties.append(float(pen.detach()))
        if len(task_losses) % record_every == 0:  # the gates before this step's update
            snapshot(len(task_losses) - 1)
        return task + lam * pen

    history = train(wrapped, data, loss_fn, steps=steps, lr=lr, lr_scale={"gates.": gate_lr / lr}, **train_kwargs)
    if snapshots[-1]["step"] != len(task_losses):
        snapshot(len(task_losses))
    history.update(task_loss=task_losses, penalty=penalties, snapshots=snapshots)
    gates.eval()
    return history


def _trainable_copy(model: nn.Module, kinds: Sequence[str]) -> nn.Module:
    """A copy of a translation model; with only ``"enc_self"`` pruned, only its encoder trains."""
    model = copy.deepcopy(model)
    if list(kinds) == ["enc_self"]:
        model.requires_grad_(False)
        model.encoder.requires_grad_(True)
        model.enc_norm.requires_grad_(True)
    return model


def gate_translation_model(
    model: nn.Module,
    batches,
    *,
    kinds: Sequence[str],
    lam: float,
    steps: int,
    lr: float,
    gate_lr: float,
    init_log_alpha: Any,
    label_smoothing: float,
    record_every: int,
    clip: Optional[float],
    seed: int,
    device=None,
    progress: bool = False,
    desc: str = "gates",
) -> tuple[nn.Module, HeadGates, dict]:
    """Voita et al.'s recipe on a copy of a converged :class:`attnbook.seq2seq.Seq2SeqTransformer` (chapter
    "Pruning heads"): gates on the attention ``kinds``, fine-tuned with :func:`train_gates` on the model's
    label-smoothed loss at constant learning rates, dropout on. With only ``"enc_self"`` gated, the decoder,
    the shared embeddings and the output layer are frozen and the encoder trains. Returns the fine-tuned
    copy, its gates and the training history; ``model`` is left unchanged."""
    model = _trainable_copy(model, kinds)
    shapes = {k: (model.cfg.layers(k), model.cfg.n_heads) for k in kinds}
    gates = HeadGates(shapes, init_log_alpha=init_log_alpha, seed=seed)

    def task_loss(m, batch, head_gates):
        src, tgt = batch
        return m.loss(src, tgt, head_gates=head_gates, label_smoothing=label_smoothing)

    history = train_gates(model, gates, task_loss, batches, lam=lam, steps=steps, lr=lr, gate_lr=gate_lr,
                          record_every=record_every, schedule="constant", warmup=0, clip=clip, seed=seed,
                          progress=progress, device=device, desc=desc)
    return model, gates, history


def fine_tune_with_masks(
    model: nn.Module,
    batches,
    masks,
    *,
    kinds: Sequence[str],
    steps: int,
    lr: float,
    label_smoothing: float,
    clip: Optional[float],
    seed: int,
    device=None,
    progress: bool = False,
    desc: str = "masks",
) -> tuple[nn.Module, dict]:
    """:func:`gate_translation_model`'s fine-tuning with the heads fixed by binary ``masks`` instead of
    learned gates (chapter "Pruning heads": Michel et al.'s masks given the same fine-tuning as the gates):
    the same trainable parameters, optimiser, constant learning rate, loss, dropout, clipping and batches,
    no penalty. Returns the fine-tuned copy and the training history; ``model`` is left unchanged."""
    masks = as_head_mask(masks)
    model = _trainable_copy(model, kinds)

    def loss(m, batch):
        src, tgt = batch
        return m.loss(src, tgt, head_gates=masks, label_smoothing=label_smoothing)

    history = train(model, batches, loss, steps=steps, lr=lr, schedule="constant", warmup=0, clip=clip,
                    seed=seed, progress=progress, device=device, desc=desc)
    return model, history
