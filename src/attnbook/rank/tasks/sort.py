"""Sorting (chapter "Path effectiveness"; Dong et al. 2021, Sec. 5.2): the input is ``length`` digits
drawn uniformly from ``0..vocab-1`` with repetition; the label of position ``i`` is the ``i``-th smallest
digit, so a model must output the sorted sequence token by token. Chance accuracy is ``1 / vocab``.
"""

from __future__ import annotations

from typing import Optional

import torch


def sort_batch(
    batch: int, length: int = 8, vocab: int = 10, generator: Optional[torch.Generator] = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw ``batch`` sequences and their sorted versions: two (batch, length) long tensors."""
    if batch < 1 or length < 2 or vocab < 2:
        raise ValueError(f"need batch >= 1, length >= 2, vocab >= 2; got {batch}, {length}, {vocab}")
    x = torch.randint(0, vocab, (batch, length), generator=generator)
    return x, x.sort(dim=-1).values
