"""Models of one architecture trained together as one batched model (the seed sweeps of chapters "The circle task"
and "Unequal gradients"; issue: tiny models one after another leave a GPU idle).

:func:`stack_models` stacks the parameters and buffers of several models along a leading model axis
(``torch.func.stack_module_state``) on one device, with a parameter-free copy of the architecture to run them
through ``torch.func.functional_call`` under ``vmap``. Each caller builds its models (each after seeding with its
own seed) and trains the stacked parameters with an elementwise optimiser, so that every model moves as it would
alone.
"""

from __future__ import annotations

import copy
from typing import Sequence

import torch
from torch import nn
from torch.func import stack_module_state


def check_seeds(seeds: Sequence[int]) -> list[int]:
    """``seeds`` as a list, refused unless there is at least one and they are distinct (two models of one seed
    would be one model trained twice)."""
    seeds = list(seeds)
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct and at least one, got {seeds}")
    return seeds


def stack_models(models: Sequence[nn.Module], device) -> tuple[dict, dict, nn.Module]:
    """The ``models``' parameters stacked along a leading model axis as trainable ``nn.Parameter`` s on
    ``device``, their buffers stacked likewise, and a copy of the first model on the meta device (its
    architecture, no data) to pass to ``functional_call``."""
    stacked, buffers = stack_module_state(list(models))
    params = {k: nn.Parameter(v.detach().to(device)) for k, v in stacked.items()}
    return params, {k: v.to(device) for k, v in buffers.items()}, copy.deepcopy(models[0]).to("meta")


def batches_models_on(device) -> bool:
    """Whether a sweep trains its models as one batched model on ``device``: on a CUDA GPU that exists, where
    each of a tiny model's kernels costs a launch (chapter "Unequal gradients"'s live runs). On the CPU a loop is
    as fast, and it keeps the committed numbers (a batched product rounds differently, and the reversal task's
    training is chaotic enough to turn that into other accuracies). The tests' virtual CUDA device computes on
    the CPU, and ``vmap`` drops its tag, so it counts as the CPU."""
    return torch.device(device).type == "cuda" and torch.cuda.is_available()
