"""Experiment sizes, seeding and device choice: one knob from a 2-core CPU to one GPU.

Every chapter reads its sizes with :func:`preset` (Intro, "Presets"). The active preset comes from the
``ATTNBOOK_PRESET`` environment variable; without it, ``paper`` when CUDA is available, else ``quick``.

* ``quick``: the whole book executes in at most 15 minutes on a 2-core CPU and every claim holds.
  CI runs exactly this, so readers and CI see the same numbers.
* ``paper``: the papers' own model sizes, data sizes and training lengths, for one GPU.

The table below is the only place where experiment sizes are written. Each experiment has a ``quick``
and a ``paper`` entry with the same keys, side by side.
"""

from __future__ import annotations

import os
import random
from types import MappingProxyType
from typing import Any, Mapping

import numpy as np
import torch

PRESET_NAMES = ("quick", "paper")
ENV_VAR = "ATTNBOOK_PRESET"

#: experiment -> preset -> sizes. Keep the two entries of an experiment side by side with the same keys.
TABLE: dict[str, dict[str, dict[str, Any]]] = {
    # Chapter 1, "Pure attention loses rank": relative residual vs depth for SAN and its variants.
    "pure_attention": {
        "quick": dict(n_tokens=32, d_model=64, n_heads=4, depth=24, n_inputs=8, n_nets=3),
        "paper": dict(n_tokens=128, d_model=768, n_heads=12, depth=48, n_inputs=32, n_nets=5),
    },
    # Chapter 2, "Path decomposition": exact checks of the path sum (same sizes at both presets: they are
    # float64 identities), then products of attention matrices along sampled paths of a random network.
    "path_decomposition": {
        "quick": dict(n_tokens=8, d_model=24, configs=((1, 4), (2, 3), (3, 4), (4, 2), (6, 2)),
                      rank1_depth=12, rank1_heads=12, rank1_tokens=32, rank1_d_model=96, n_sampled_paths=100),
        "paper": dict(n_tokens=8, d_model=24, configs=((1, 4), (2, 3), (3, 4), (4, 2), (6, 2)),
                      rank1_depth=12, rank1_heads=12, rank1_tokens=128, rank1_d_model=768, n_sampled_paths=500),
    },
    # Chapter 3, "The one-layer residual bound": random and adversarial (gradient-ascent) instances per step.
    "residual_bound_one_layer": {
        "quick": dict(n_tokens=6, d_model=8, d_qk=4, n_random=2000, n_starts=4, ascent_steps=120,
                      n_argmin=12, sweep_points=13, n_sweep_nets=4),
        "paper": dict(n_tokens=6, d_model=8, d_qk=4, n_random=50000, n_starts=32, ascent_steps=600,
                      n_argmin=100, sweep_points=25, n_sweep_nets=16),
    },
    # Chapter 4, "Deep bounds and what breaks collapse": the doubly exponential bound over depth, skips,
    # MLP Lipschitz constants, LayerNorm.
    "deep_bounds": {
        "quick": dict(n_tokens=6, d_model=8, n_heads=2, depth=5, n_nets=8, collapse_tokens=16,
                      collapse_d_model=32, collapse_depth=24, n_collapse_nets=4),
        "paper": dict(n_tokens=6, d_model=8, n_heads=2, depth=5, n_nets=64, collapse_tokens=128,
                      collapse_d_model=768, collapse_depth=48, n_collapse_nets=8),
    },
    # Chapter 5, "Rank collapse in pretrained transformers" (Dong et al. Fig. 2): pretrained models on
    # n_sequences x n_tokens real tokens (the paper: 32 x 128); BERT/ALBERT/XLNet-base at initialisation
    # (the paper's sizes) on init_sequences x init_tokens; n_paths sampled paths per depth, attention
    # matrices of path_sequences inputs, for the companion figure.
    "pretrained_rank_collapse": {
        "quick": dict(n_sequences=32, n_tokens=128, init_sequences=8, init_tokens=128, n_paths=100,
                      path_sequences=8),
        "paper": dict(n_sequences=32, n_tokens=128, init_sequences=32, init_tokens=128, n_paths=100,
                      path_sequences=32),
    },
}


def active_preset() -> str:
    """Name of the active preset (Intro, "Presets"): ``ATTNBOOK_PRESET`` or the CUDA-based default."""
    name = os.environ.get(ENV_VAR, "").strip()
    if not name:
        return "paper" if torch.cuda.is_available() else "quick"
    if name not in PRESET_NAMES:
        raise ValueError(
            f"{ENV_VAR}={name!r} is not a preset; expected one of {', '.join(PRESET_NAMES)}"
        )
    return name


def preset(experiment: str, name: str | None = None) -> Mapping[str, Any]:
    """Sizes of ``experiment`` at the active preset (or at ``name``), as a read-only mapping.

    The mapping also holds ``preset``, the name of the preset it came from, so a chapter can print it.

    >>> preset("pure_attention", "quick")["depth"]
    24
    """
    if experiment not in TABLE:
        raise ValueError(
            f"unknown experiment {experiment!r}; expected one of {', '.join(sorted(TABLE))}"
        )
    chosen = active_preset() if name is None else name
    if chosen not in PRESET_NAMES:
        raise ValueError(f"unknown preset {chosen!r}; expected one of {', '.join(PRESET_NAMES)}")
    return MappingProxyType({**TABLE[experiment][chosen], "preset": chosen})


def seed_everything(seed: int) -> torch.Generator:
    """Seed Python, NumPy and PyTorch (CPU and CUDA); return a ``torch.Generator`` seeded the same.

    Every chapter calls this (through :func:`setup`) before it draws any random number.
    """
    if not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    return torch.Generator().manual_seed(seed)


def device() -> torch.device:
    """The device experiments run on: CUDA when available, else the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def setup(seed: int = 0) -> torch.device:
    """Start a chapter: seed everything, apply the book's figure style, print the preset and device.

    Returns the device the chapter should use.
    """
    from . import plotting  # local import: plotting pulls in matplotlib

    seed_everything(seed)
    plotting.use_style()
    dev = device()
    print(f"attnbook: preset={active_preset()} device={dev.type} seed={seed}")
    return dev
