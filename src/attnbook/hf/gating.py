"""Head gates for Hugging Face BERT-like encoders (chapter "Pruning heads"): a forward pre-hook on each
layer's attention output projection multiplies each head's slice of its input, which works in transformers
4.x and 5.x (5.x ignores ``head_mask``) and passes gradients to the gates.
"""

from __future__ import annotations

import contextlib
from typing import Callable, Iterable, Iterator, Optional, Sequence

import torch
from torch import nn


def output_projections(model: nn.Module) -> list[nn.Linear]:
    """The attention output projection of every layer of a Hugging Face BERT-like encoder (chapter "Pruning heads").

    Supported: models with ``encoder.layer[i].attention.output.dense`` (BERT, RoBERTa, MiniLM, ELECTRA,
    ...) and DistilBERT (``transformer.layer[i].attention.out_lin``), bare or inside a task model.
    Raises ``ValueError`` for anything else: pass the list of projections to :func:`attach_head_gates`
    yourself.
    """
    if not isinstance(model, nn.Module):
        raise ValueError(f"expected a torch.nn.Module, got {type(model).__name__}")
    base = getattr(model, getattr(model, "base_model_prefix", ""), model)
    for root in (base, model):
        enc = getattr(root, "encoder", None)
        if enc is not None and hasattr(enc, "layer"):
            try:
                return [layer.attention.output.dense for layer in enc.layer]
            except AttributeError:
                pass
        tr = getattr(root, "transformer", None)
        if tr is not None and hasattr(tr, "layer"):
            try:
                return [layer.attention.out_lin for layer in tr.layer]
            except AttributeError:
                pass
    raise ValueError(
        f"{type(model).__name__} is not a BERT-like model this function knows (expected "
        "encoder.layer[i].attention.output.dense or transformer.layer[i].attention.out_lin); "
        "pass the output projections explicitly"
    )


class GateHooks:
    """Forward pre-hooks that multiply each head's slice of the attention output projection's input
    (chapter "Pruning heads", "Gating a pretrained model").

    Gates reach the hooks only through :meth:`gating`: ``with hooks.gating(g): model(...)``, with ``g``
    of shape ``(n_layers, n_heads)`` or ``(batch, n_layers, n_heads, tokens)`` (one gate per sentence
    and token, for Michel et al.'s per-token importance); gradients flow into ``g``. Outside the block
    the model runs ungated. :meth:`remove` (or ``with attach_head_gates(model) as hooks:``) detaches
    the hooks.
    """

    def __init__(self, projections: Sequence[nn.Linear], n_heads: int) -> None:
        if not projections:
            raise ValueError("no output projections given")
        if n_heads < 1:
            raise ValueError(f"n_heads must be positive, got {n_heads}")
        for p in projections:
            if not isinstance(p, nn.Linear) or p.in_features % n_heads:
                raise ValueError(
                    f"each projection must be an nn.Linear whose in_features is divisible by n_heads={n_heads}, "
                    f"got {p!r}"
                )
        self.n_layers, self.n_heads = len(projections), int(n_heads)
        self._gates: Optional[torch.Tensor] = None
        self._handles = [p.register_forward_pre_hook(self._make_hook(i)) for i, p in enumerate(projections)]

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n_layers, self.n_heads)

    @contextlib.contextmanager
    def gating(self, gates: Optional[torch.Tensor]) -> Iterator[None]:
        """Run the model with ``gates`` inside the block (``None``: ungated); the previous gates are
        restored on exit, also after an error."""
        if gates is not None:
            if not isinstance(gates, torch.Tensor) or not (
                tuple(gates.shape) == self.shape or (gates.ndim == 4 and tuple(gates.shape[1:3]) == self.shape)
            ):
                raise ValueError(
                    f"gates must be a tensor of shape {self.shape} or (batch, {self.n_layers}, {self.n_heads}, "
                    f"tokens), got {getattr(gates, 'shape', gates)}"
                )
        if not self._handles:
            raise ValueError("these hooks were removed; attach new ones with attach_head_gates")
        previous, self._gates = self._gates, gates
        try:
            yield
        finally:
            self._gates = previous

    def _make_hook(self, layer: int) -> Callable:
        def hook(module, args):
            g = self._gates
            if g is None:
                return None
            x = args[0]  # (batch, tokens, n_heads * d_head)
            d_head = x.shape[-1] // self.n_heads
            heads = x.unflatten(-1, (self.n_heads, d_head))
            if g.ndim == 2:
                scale = g[layer].to(x.device, x.dtype)[:, None]
            else:  # (batch, layers, heads, tokens) -> (batch, tokens, heads, 1)
                scale = g[:, layer].to(x.device, x.dtype).transpose(1, 2)[..., None]
            return ((heads * scale).flatten(-2), *args[1:])

        return hook

    def remove(self) -> None:
        """Detach every hook (the model is unchanged afterwards)."""
        for h in self._handles:
            h.remove()
        self._handles = []

    def __enter__(self) -> "GateHooks":
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


def attach_head_gates(
    model: nn.Module, n_heads: Optional[int] = None, projections: Optional[Iterable[nn.Linear]] = None
) -> GateHooks:
    """Attach head gates to a Hugging Face BERT-like model (chapter "Pruning heads", "Gating a pretrained model").

    Returns a :class:`GateHooks`; run the model inside ``with hooks.gating(g):`` with ``g`` of shape
    ``(n_layers, n_heads)``. ``n_heads`` defaults to ``model.config.num_attention_heads`` (or
    ``n_heads`` for DistilBERT). ``projections`` defaults to :func:`output_projections`.
    """
    if n_heads is None:
        cfg = getattr(model, "config", None)
        n_heads = getattr(cfg, "num_attention_heads", None) or getattr(cfg, "n_heads", None)
        if n_heads is None:
            raise ValueError("could not read the number of heads from model.config; pass n_heads")
    projs = list(projections) if projections is not None else output_projections(model)
    return GateHooks(projs, int(n_heads))
