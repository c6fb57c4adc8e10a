"""Searching for the worst case of an inequality (chapters "The one-layer residual bound" and "Deep bounds").

A proof step ``left <= right`` is checked numerically by the ratio ``left / right`` on random instances and
on instances found by Adam *ascent* on ``log(ratio)`` over every input and weight from several random
starts: the step holds numerically if no ratio exceeds 1. :func:`worst_ratio` does both.
"""

from __future__ import annotations

from typing import Callable, Mapping

import torch

Sampler = Callable[[int, torch.Generator], Mapping[str, torch.Tensor]]


def worst_ratio(ratio_fn: Callable[..., torch.Tensor], sample_fn: Sampler, *, n_random: int, n_starts: int,
                steps: int, lr: float, seed: int) -> dict:
    """The largest ``ratio_fn(**instances)`` on ``n_random`` random instances and along an Adam ascent of
    ``log(ratio)`` from ``n_starts`` more (chapter "The one-layer residual bound", its step checks).

    ``sample_fn(batch, generator)`` returns a batch of instances as keyword tensors (leading dim ``batch``);
    ``ratio_fn`` returns one ratio per instance. NaNs (0/0) count as 0. Both draws come from one generator
    seeded with ``seed``, the random instances first. Returns ``{"random", "adversarial", "found"}``:
    the two maxima and the instances where the ascent ended (detached)."""
    if min(n_random, n_starts, steps) < 1 or lr <= 0:
        raise ValueError("need n_random, n_starts, steps >= 1 and lr > 0")
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        random_worst = ratio_fn(**sample_fn(n_random, gen)).nan_to_num(0.0).max().item()
    params = {k: v.clone().requires_grad_(True) for k, v in sample_fn(n_starts, gen).items()}
    opt = torch.optim.Adam(list(params.values()), lr=lr)
    adversarial = 0.0
    for _ in range(steps):
        ratio = ratio_fn(**params)
        adversarial = max(adversarial, ratio.detach().nan_to_num(0.0).max().item())
        opt.zero_grad()
        (-ratio.clamp_min(1e-300).log().nan_to_num(0.0).sum()).backward()
        opt.step()
    return {"random": random_worst, "adversarial": adversarial,
            "found": {k: v.detach() for k, v in params.items()}}
