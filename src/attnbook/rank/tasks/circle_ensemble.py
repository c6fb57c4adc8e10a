"""The circle task's seed and variant ensembles trained as one batched model (chapter "The circle task"; issue:
the chapter's sweep trains many tiny models one after another, which a GPU runs slower per step than one CPU
thread, since each step is a few dozen kernel launches of a few thousand numbers).

:func:`fit_ensemble` trains the models :func:`attnbook.rank.tasks.circle.fit` trains, one per seed, *together*:
their parameters are stacked along a leading model axis (``torch.func.stack_module_state``) and one forward pass
runs them all (``torch.func.vmap`` over ``functional_call``). Everything that is per model stays per model: the
initialisation (each model is built after ``seed_everything(seed)``, as ``fit`` builds it), the batches (one
generator per seed, the same draws as ``fit``), the loss (summed over models, so each model's gradient is its own),
the gradient clipping (each model's own global norm, as ``clip_grad_norm_`` computes it) and AdamW (elementwise,
so a stacked parameter is updated as the separate ones would be). The learning-rate schedule is
:func:`attnbook.core.train.lr_factor`, as ``train`` uses it. The numbers agree with ``fit``'s to float rounding
(a batched matrix product sums in another order), which a test checks.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import torch
from torch.func import functional_call, vmap

from attnbook.core.ensembles import check_seeds, stack_models
from attnbook.core.presets import device as default_device
from attnbook.core.presets import seed_everything
from attnbook.core.train import lr_factor
from attnbook.rank.tasks.circle import CircleNet, circle_dataset, summarise_run


def fit_ensemble(d_model: int, seeds: Sequence[int], *, steps: int, lr: float, batch: int, n_points: int = 1000,
                 n_heads: int = 2, warmup: float = 0.05, clip: float = 1.0, device=None,
                 **variant) -> tuple[list[CircleNet], dict]:
    """One :class:`CircleNet` per seed in ``seeds``, trained as :func:`~attnbook.rank.tasks.circle.fit` trains
    each (AdamW, warm-up ``warmup`` then cosine decay, clipping at ``clip``), all in one batched model on
    ``device`` (default: the book's device). Returns the trained models (on the CPU, in eval mode) and the history:
    ``loss``, a list per step of each model's loss."""
    seeds = check_seeds(seeds)
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive int, got {steps!r}")
    dev = torch.device(device) if device is not None else default_device()
    X, Y = circle_dataset(n_points)
    models, generators = [], []
    for seed in seeds:
        seed_everything(seed)
        models.append(CircleNet(d_model, n_heads, **variant))
        generators.append(torch.Generator().manual_seed(seed))
    params, buffers, template = stack_models(models, dev)

    def one_loss(p, b, x, y):
        return ((functional_call(template, (p, b), (x,)) - y) ** 2).sum(-1).mean()

    losses_of = vmap(one_loss)
    opt = torch.optim.AdamW(list(params.values()), lr=lr, weight_decay=0.0)
    warmup_steps = int(round(warmup * steps)) if warmup < 1 else int(warmup)
    history: dict = {}
    per_step = []
    X, Y = X.to(dev), Y.to(dev)
    for step in range(steps):
        for group in opt.param_groups:
            group["lr"] = lr * lr_factor(step, steps, warmup_steps)
        idx = torch.stack([torch.randint(0, len(X), (batch,), generator=g) for g in generators]).to(dev)
        losses = losses_of(params, buffers, X[idx], Y[idx])
        opt.zero_grad(set_to_none=True)
        losses.sum().backward()
        grads = [p.grad for p in params.values()]
        norms = torch.stack([g.pow(2).flatten(1).sum(1) for g in grads]).sum(0).sqrt()  # each model's own
        scale = (clip / (norms + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(scale.view(-1, *[1] * (g.ndim - 1)))
        opt.step()
        per_step.append(losses.detach())  # kept on the device: one copy to the CPU at the end, not one per step
    history["loss"] = torch.stack(per_step).cpu().tolist()
    trained = []
    for i, model in enumerate(models):
        model.load_state_dict({k: v[i].detach().cpu() for k, v in params.items()}, strict=False)
        trained.append(model.eval())
    return trained, history


def ensemble_sweep(widths: Sequence[int], variants: Mapping[str, Mapping], n_seeds: int, X: torch.Tensor,
                   Y: torch.Tensor, rollout_steps: int, keep_trajectory: bool = True, **fit_kw) -> dict:
    """Chapter "The circle task"'s sweep with one batched ensemble per width and variant: the records
    :func:`~attnbook.rank.tasks.circle.seed_sweep` returns for ``fit(d, variant, seed)`` = ``circle.fit``, as
    ``{(d, variant name): [record per seed 0 .. n_seeds - 1]}`` (:func:`~attnbook.rank.tasks.circle.summarise_run`
    of each model on ``X, Y``). ``variants``: name -> ``CircleNet`` options; ``fit_kw``: :func:`fit_ensemble`'s
    training settings (``steps``, ``lr``, ``batch``, ``n_points``, ``n_heads``, ``device``)."""
    if n_seeds < 1:
        raise ValueError(f"n_seeds must be at least 1, got {n_seeds}")
    return {(d, name): [summarise_run(m, X, Y, rollout_steps, keep_trajectory=keep_trajectory)
                        for m in fit_ensemble(d, range(n_seeds), **fit_kw, **variant)[0]]
            for d in widths for name, variant in variants.items()}
