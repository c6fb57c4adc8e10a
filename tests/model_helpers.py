"""Helpers shared by the LRP tests (tests/test_lrp.py, tests/test_hf_relevance.py)."""

from __future__ import annotations

import torch


def trained_looking_(model: torch.nn.Module) -> torch.nn.Module:
    """Give ``model`` trained-looking LayerNorms and biases in place (weights in [0.5, 1.5], biases N(0, 0.1)),
    not the initialisation's ones and zeros, under which some relevance rules cannot be told apart."""
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, (torch.nn.LayerNorm, torch.nn.Linear)) and mod.bias is not None:
                mod.bias.normal_(0, 0.1)
            if isinstance(mod, torch.nn.LayerNorm):
                mod.weight.uniform_(0.5, 1.5)
    return model
