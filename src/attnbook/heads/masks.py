"""Head masks: the one format in which Part III names a value per attention head.

A head mask is a dict ``{attention kind: (n_layers, n_heads) tensor}``: the head gates the library's
models take (``head_gates=``), the hard-concrete gates of :class:`attnbook.heads.gates.HeadGates`, Michel et al.'s
masks and importances (:mod:`attnbook.heads.importance`) and the per-head statistics of :mod:`attnbook.heads.roles`. The
translation model's kinds are named as in Voita et al. (2019) (chapter "A translation model and what its
heads do"); a model with a single kind (a pretrained encoder, chapter "Pruning heads") uses the name ``""``,
and a bare ``(n_layers, n_heads)`` tensor stands for ``{"": tensor}``.
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence, Union

import torch

#: the three kinds of attention of an encoder-decoder Transformer (Voita et al. 2019)
ATTENTION_KINDS = ("enc_self", "dec_self", "dec_cross")

HeadMask = dict[str, torch.Tensor]
Shape = Union[Sequence[int], torch.Size]


def as_head_mask(masks, *, kinds: Optional[Sequence[str]] = None, what: str = "masks") -> HeadMask:
    """``masks`` as a head mask (a new dict of the same tensors), after checking it: a tensor or a
    non-empty mapping of ``(n_layers, n_heads)`` tensors, whose kinds are among ``kinds`` when given.
    Raises ``ValueError`` saying what was expected; ``what`` names the argument in the message."""
    if isinstance(masks, torch.Tensor):
        masks = {"": masks}
    if not isinstance(masks, Mapping) or not masks:
        raise ValueError(f"{what} must be a (n_layers, n_heads) tensor or a non-empty dict kind -> tensor, "
                         f"got {type(masks).__name__}")
    if kinds is not None and set(masks) - set(kinds):
        raise ValueError(f"unknown kinds in {what}: {sorted(set(masks) - set(kinds))}; expected a subset of "
                         f"{tuple(kinds)}")
    for name, m in masks.items():
        if not isinstance(m, torch.Tensor) or m.ndim != 2:
            raise ValueError(f"{what}[{name!r}] must be a (n_layers, n_heads) tensor, got {getattr(m, 'shape', m)}")
    return dict(masks)


def check_shape(name: str, shape: Shape) -> tuple[int, int]:
    """``shape`` as ``(n_layers, n_heads)`` with positive sizes, or ``ValueError``."""
    shape = tuple(int(s) for s in shape)
    if len(shape) != 2 or min(shape) < 1:
        raise ValueError(f"shape of {name!r} must be (n_layers, n_heads) with positive sizes, got {shape}")
    return shape  # type: ignore[return-value]


def full_masks(shapes: Union[Shape, Mapping[str, Shape]]) -> HeadMask:
    """All-ones masks (every head kept) for ``{kind: (n_layers, n_heads)}`` or one ``(n_layers, n_heads)``."""
    items = shapes.items() if isinstance(shapes, Mapping) else [("", shapes)]
    return {name: torch.ones(check_shape(name, shape)) for name, shape in items}


def count_kept(masks) -> int:
    """Number of heads whose mask is non-zero, over all kinds."""
    return int(sum(int((m != 0).sum()) for m in as_head_mask(masks).values()))


def binary(gates) -> HeadMask:
    """1 where a gate is open (non-zero), 0 where it is closed: the masks pruned models are evaluated with
    (chapter "Pruning heads": an evaluation gate of 0.6 would rescale a head rather than keep it)."""
    return {k: (v.detach() != 0).float() for k, v in as_head_mask(gates, what="gates").items()}
