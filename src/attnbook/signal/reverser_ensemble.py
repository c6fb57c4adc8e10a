"""The seeds of one reversal-task run trained as one batched model (chapter "Unequal gradients, temperature and
adaptive optimisers"; issue: the optimiser sweep trains many tiny models one after another, which a GPU runs
slower per step than one CPU thread).

:func:`train_seeds` makes the runs :func:`attnbook.signal.reverser.train_run` makes, one per seed, *together*:
their parameters are stacked along a leading model axis (``torch.func.stack_module_state``) and one forward pass
runs them all (``torch.func.vmap`` over ``functional_call``). Everything that is per seed stays per seed: the
initialisation (each model is built after ``torch.manual_seed(seed)``, as ``train_run`` builds it), the batches
(one generator per seed, the draws ``train_run`` makes from the re-seeded global generator), the loss (summed over
models, so each model's gradient is its own), the log (each model's own gradient norms and output cosine) and the
optimiser (SGD with momentum and Adam update elementwise, so a stacked parameter moves as the separate ones would).
The numbers agree with ``train_run``'s to float rounding (a batched matrix product sums in another order), which a
test checks.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, vmap

from attnbook.core.ensembles import batches_models_on, check_seeds, stack_models
from attnbook.core.presets import device as default_device
from attnbook.core.train import lr_factor, make_optimizer
from attnbook.signal import propagation as prop
from attnbook.signal.reverser import Reverser, ReverserSize, layer_geometric_mean, log_entry, train_run


class _Method(nn.Module):
    """``model.<method>(x)`` as a module's forward, so that ``functional_call`` can run a method other than
    ``forward`` (the read-out's input, :meth:`Reverser.hidden`)."""

    def __init__(self, model: nn.Module, method: str) -> None:
        super().__init__()
        self.model, self.method = model, method

    def forward(self, x):
        return getattr(self.model, self.method)(x)


def train_seeds(size: ReverserSize, *, optimizer: str, scaled: bool, temperature: float, lr: float,
                seeds: Sequence[int], steps: int, x_eval: torch.Tensor, log_every: int = 25, device=None,
                learnable_alpha: bool = False, warmup: int = 0) -> list[dict]:
    """:func:`attnbook.signal.reverser.train_run` for every seed of ``seeds``, trained as one batched model on
    ``device`` (default: the book's device): one record per seed, in order, with ``train_run``'s keys (``loss``,
    ``acc``, ``log``, ``losses``, ``steps``)."""
    seeds = check_seeds(seeds)
    return train_arms(size, [(scaled, temperature, seed) for seed in seeds], optimizer=optimizer, lr=lr,
                      steps=steps, x_eval=x_eval, log_every=log_every, device=device,
                      learnable_alpha=learnable_alpha, warmup=warmup)


def train_arms(size: ReverserSize, arms: Sequence[tuple[bool, float, int]], *, optimizer: str, lr: float,
               steps: int, x_eval: torch.Tensor, log_every: int = 25, device=None,
               learnable_alpha: bool = False, warmup: int = 0) -> list[dict]:
    """:func:`attnbook.signal.reverser.train_run` for every ``(scaled, temperature, seed)`` of ``arms``, trained
    as one batched model on ``device`` with one ``optimizer`` and learning rate: one record per arm, in order.
    Each model keeps its own residual scale and softmax temperature (as per-model buffers, which the batched
    forward reads like the other weights), so chapter "Unequal gradients"'s arms with and without
    ``alpha = 1/sqrt(L)`` and the temperature ``tau_*`` train together."""
    if optimizer not in ("sgd", "adam"):
        raise ValueError(f"optimizer must be 'sgd' or 'adam', got {optimizer!r}")
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive int, got {steps!r}")
    if not arms or any(len(arm) != 3 for arm in arms):
        raise ValueError(f"arms must be a non-empty list of (scaled, temperature, seed), got {arms!r}")
    dev = torch.device(device) if device is not None else default_device()
    models, generators = [], []
    for scaled, temperature, seed in arms:
        torch.manual_seed(seed)
        models.append(_constants_as_buffers(Reverser(size, scaled, temperature, learnable_alpha)))
        generators.append(torch.Generator().manual_seed(seed))  # train() re-seeds before its first batch
    params, buffers, template = stack_models(models, dev)
    hidden_of = _Method(template, "hidden")
    prefixed = lambda p: {f"model.{k}": v for k, v in p.items()}  # noqa: E731

    def one_loss(p, b, x):
        logits = functional_call(template, (p, b), (x,))
        return F.cross_entropy(logits.reshape(-1, size.vocab), x.flip(-1).reshape(-1))

    losses_of = vmap(one_loss)
    hidden = vmap(lambda p, b, x: functional_call(hidden_of, (prefixed(p), prefixed(b)), (x,)),
                  in_dims=(0, 0, None))
    logits_of = vmap(lambda p, b, x: functional_call(template, (p, b), (x,)), in_dims=(0, 0, None))
    holder = nn.ParameterList(params.values())  # make_optimizer's settings (SGD's momentum 0.9), stacked
    opt = make_optimizer(holder, optimizer, lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(s, steps, warmup, "constant"))
    x_eval = x_eval.to(dev)
    blocks = range(size.depth)
    logs: list[list] = [[] for _ in arms]
    per_step = []
    for step in range(1, steps + 1):
        x = torch.stack([torch.randint(0, size.vocab, (size.batch, size.seq_len), generator=g)
                         for g in generators]).to(dev)
        losses = losses_of(params, buffers, x)
        opt.zero_grad(set_to_none=True)
        losses.sum().backward()
        logged = step % log_every == 0 or step == steps
        before = {k: params[k].detach().clone() for k in _attention_weight_names(blocks)} if logged else None
        opt.step()
        sched.step()
        per_step.append(losses.detach())  # on the device: read at the logged steps, not at every step
        if logged:
            _log(logs, step, losses, params, blocks, learnable_alpha,
                 lambda: hidden(params, buffers, x_eval), before)
    losses_by_seed = torch.stack(per_step).T.cpu().tolist()
    with torch.no_grad():
        hits = (logits_of(params, buffers, x_eval).argmax(-1) == x_eval.flip(-1)).float().mean((1, 2)).cpu()
    return [{"loss": run[-1] if math.isfinite(run[-1]) else float("nan"), "acc": float(hits[i]), "log": logs[i],
             "losses": run, "steps": steps} for i, run in enumerate(losses_by_seed)]


def train_runs(size: ReverserSize, runs: Sequence[tuple[str, bool, float]], *, lr: dict, seed: int, steps: int,
               x_eval: torch.Tensor, device=None) -> dict:
    """Chapter "Unequal gradients"'s live runs: :func:`attnbook.signal.reverser.train_run` for every
    ``(optimizer, scaled, temperature)`` of ``runs`` from one ``seed``, with the learning rate ``lr[optimizer]``.
    On a CUDA GPU the runs of one optimiser train as one batched model (:func:`train_arms`); elsewhere one after
    another (:func:`attnbook.core.ensembles.batches_models_on` says why). Returns ``{run: record}``."""
    runs = [tuple(run) for run in runs]
    if len(set(runs)) != len(runs) or not runs:
        raise ValueError(f"runs must be distinct (optimizer, scaled, temperature) and at least one, got {runs}")
    dev = torch.device(device) if device is not None else default_device()
    kw = dict(steps=steps, x_eval=x_eval, device=dev)
    if not batches_models_on(dev):
        return {run: train_run(size, optimizer=run[0], scaled=run[1], temperature=run[2], lr=lr[run[0]],
                               seed=seed, **kw) for run in runs}
    out = {}
    for opt in dict.fromkeys(run[0] for run in runs):
        mine = [run for run in runs if run[0] == opt]
        records = train_arms(size, [(scaled, tau, seed) for _, scaled, tau in mine], optimizer=opt, lr=lr[opt],
                             **kw)
        out.update(zip(mine, records))
    return {run: out[run] for run in runs}


def _constants_as_buffers(model: Reverser) -> Reverser:
    """``model`` with each block's residual scale ``alpha`` (unless it is learned) and each attention's
    temperature held as 0-dim buffers instead of Python floats, so that models with different values stack
    (:func:`attnbook.core.ensembles.stack_models`). The temperature is kept in float64, so that the attention
    scale ``1 / (tau sqrt(d_head))`` is computed in float64 as from the float, and rounds to the same float32."""
    for block in model.stack.blocks:
        if not isinstance(block.alpha, nn.Parameter):
            alpha = block.alpha
            del block.alpha
            block.register_buffer("alpha", torch.tensor(alpha))
        temperature = block.attn.temperature
        del block.attn.temperature
        block.attn.register_buffer("temperature", torch.tensor(temperature, dtype=torch.float64))
    return model


def _attention_weight_names(blocks) -> list[str]:
    return [f"stack.blocks.{b}.attn.{key}.weight" for b in blocks for key in "qkv"]


def _log(logs, step, losses, params, blocks, learnable_alpha, hidden_fn, before) -> None:
    """Each seed's log entry at ``step``: :func:`attnbook.signal.reverser.train_run`'s, from the stacked
    gradients and the step from ``before`` (each model's own rows) and each model's output tokens on the
    evaluation digits."""
    def norm(name):  # (models,) gradient norms of one stacked weight
        return params[name].grad.flatten(1).norm(dim=1)

    def moved(name):  # (models,) norms of the step of one stacked weight
        return (params[name].detach() - before[name]).flatten(1).norm(dim=1)

    def qk_and_v(size_of):  # geometric means over layers, per model
        qk = torch.stack([(size_of(f"stack.blocks.{b}.attn.q.weight") ** 2
                           + size_of(f"stack.blocks.{b}.attn.k.weight") ** 2).sqrt() for b in blocks])
        v = torch.stack([size_of(f"stack.blocks.{b}.attn.v.weight") for b in blocks])
        return (layer_geometric_mean(t).cpu().tolist() for t in (qk, v))

    qk, v = qk_and_v(norm)
    qk_step, v_step = qk_and_v(moved)
    with torch.no_grad():
        cosine = prop.token_cosine(hidden_fn()).mean(-1).cpu().tolist()
    alphas = (torch.stack([params[f"stack.blocks.{b}.alpha"].detach() for b in blocks], 1).cpu().tolist()
              if learnable_alpha else [None] * len(logs))
    for i, (loss, cos) in enumerate(zip(losses.detach().cpu().tolist(), cosine)):
        logs[i].append(log_entry(step, loss, qk[i], v[i], cos, alphas[i], qk_step[i], v_step[i]))
