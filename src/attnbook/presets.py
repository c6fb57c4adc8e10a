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
