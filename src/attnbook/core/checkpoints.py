"""Checkpoints: a model ``state_dict`` plus a JSON-able ``meta`` dict (chapters "The circle task", "Path
effectiveness", "A translation model"), stored as ``.safetensors`` (meta in the
file's metadata) or, for any other suffix, with ``torch.save``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping, Optional, Union

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from torch import nn

META_KEY = "attnbook_meta"


def save_checkpoint(model: nn.Module, path: Union[str, Path], meta: Optional[Mapping] = None) -> Path:
    """Save ``model.state_dict()`` and a JSON-able ``meta`` dict to ``path`` (chapters "The circle task", "Path
    effectiveness" and "A translation model").

    ``.safetensors``: tensors in safetensors format, meta as JSON in its metadata; any other suffix:
    ``torch.save({"state_dict", "meta"})``. Returns the path.
    """
    path = Path(path)
    meta = dict(meta or {})
    try:
        meta_json = json.dumps(meta)
    except TypeError as err:
        raise ValueError(f"meta must be JSON-serialisable: {err}") from None
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    if path.suffix == ".safetensors":
        # clone so that tied parameters (shared storage) are stored separately
        save_file({k: v.clone() for k, v in state.items()}, str(path), metadata={META_KEY: meta_json})
    else:
        torch.save({"state_dict": state, "meta": meta}, path)
    return path


def load_checkpoint(
    model: nn.Module, path: Union[str, Path], map_location: Union[str, torch.device] = "cpu"
) -> dict:
    """Load a checkpoint written by :func:`save_checkpoint` into ``model`` (strict); return its meta."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"no checkpoint at {path}")
    if path.suffix == ".safetensors":
        state = load_file(str(path), device=str(map_location))
        with safe_open(str(path), framework="pt") as f:
            meta = json.loads((f.metadata() or {}).get(META_KEY, "{}"))
    else:
        blob = torch.load(path, map_location=map_location, weights_only=True)
        if not isinstance(blob, dict) or "state_dict" not in blob:
            raise ValueError(f"{path} is not a checkpoint written by save_checkpoint")
        state, meta = blob["state_dict"], blob.get("meta", {})
    model.load_state_dict(state)
    return meta
