"""Surgery that turns a BERT, ALBERT or XLNet model into the pure-attention variants of Dong et al.
(2021, Sec. 5.1 and Fig. 2) (chapter "Rank collapse in pretrained transformers").

:func:`variant` is a context manager that turns a BERT, ALBERT or XLNet model into one of
:data:`VARIANTS` and restores it on exit. It follows the paper's code (``paper-plotting/surgery.py`` and
``walking_casual_transformers.ipynb`` in github.com/twistedcubic/attention-rank-collapse):

- *no skip* removes the skip connection around self-attention only. The LayerNorm that followed the
  addition stays: BERT computes ``LN(dense(SA(x)))`` instead of ``LN(dense(SA(x)) + x)``, ALBERT the
  same, XLNet calls its ``post_attention(..., residual=False)`` (the paper's own switch).
- *no MLP* removes the whole feed-forward sub-block, its own skip connection and LayerNorm included:
  the layer's output is the attention sub-block's output.
- ALBERT shares one layer across its 12 applications, so patching that one layer patches every layer.

Where the book differs from the paper's code: for ALBERT the paper replaced the two linear maps of the
feed-forward block by identities, which left ``LN(GELU(a) + a)`` (``a``: the attention sub-block's
output) in every layer; the book removes the block entirely, as the paper did for BERT and XLNet, so
that "SAN" means the same thing in all three models. Both are token-wise maps, so neither can undo a
collapse (a matrix with identical rows stays one).

The surgery uses forward hooks and module replacement on sub-modules whose names and call signatures
are the same in transformers 4.5x and 5.x (``attention.output``, ``intermediate``, ``output`` for BERT;
``attention.output_dropout``, ``attention.LayerNorm``, ``ffn``, ``ffn_output`` for ALBERT;
``rel_attn.post_attention``, ``ff`` for XLNet).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from typing import Iterator

import torch
from torch import nn

#: the four architectures of Dong et al. (2021, Fig. 2), in the paper's order
VARIANTS = ("SAN", "SAN+MLP", "SAN+skip", "Transformer")
#: variant -> (keep the skip connection around attention, keep the feed-forward block)
VARIANT_SWITCHES = {
    "SAN": (False, False),
    "SAN+MLP": (False, True),
    "SAN+skip": (True, False),
    "Transformer": (True, True),
}
ARCHITECTURES = ("bert", "albert", "xlnet")


# ----------------------------------------------------------------------------------------------- surgery


def architecture(model: nn.Module) -> str:
    """``"bert"``, ``"albert"`` or ``"xlnet"``: the model family the surgery knows (by ``config.model_type``)."""
    config = getattr(model, "config", None)
    kind = getattr(config, "model_type", None)
    if kind not in ARCHITECTURES:
        raise ValueError(
            f"expected a transformers BERT, ALBERT or XLNet model (config.model_type one of "
            f"{', '.join(ARCHITECTURES)}), got {type(model).__name__} with model_type={kind!r}"
        )
    return kind


def _base(model: nn.Module) -> nn.Module:
    return getattr(model, "base_model", model)


def _layers(model: nn.Module) -> list[nn.Module]:
    """The distinct layer modules to patch (ALBERT: its shared layer(s))."""
    kind, base = architecture(model), _base(model)
    if kind == "bert":
        return list(base.encoder.layer)
    if kind == "albert":
        return [layer for group in base.encoder.albert_layer_groups for layer in group.albert_layers]
    return list(base.layer)


def _blocks(model: nn.Module) -> list[nn.Module]:
    """The modules whose successive calls are the layers, in order (ALBERT: the shared group, called
    ``num_hidden_layers`` times)."""
    kind, base = architecture(model), _base(model)
    if kind == "albert":
        return list(base.encoder.albert_layer_groups)
    return _layers(model)


def _first(x):
    return x[0] if isinstance(x, (tuple, list)) else x


class _ReturnInputTensor(nn.Module):
    """Stands in for BERT's ``BertOutput`` (the feed-forward block's second linear map, skip and
    LayerNorm): returns its second argument, the attention sub-block's output, unchanged."""

    def forward(self, hidden_states, input_tensor=None, *args, **kwargs):
        return hidden_states if input_tensor is None else input_tensor


def _zero_skip_input(module, args, kwargs):
    """Forward pre-hook on BERT's ``BertSelfOutput``:
    ``LN(dense(h) + input)`` becomes ``LN(dense(h))``."""
    if len(args) >= 2:  # called as output(h, input): zero the skip input
        return (args[0], torch.zeros_like(args[1]), *args[2:]), kwargs
    if "input_tensor" in kwargs:
        skip = torch.zeros_like(kwargs["input_tensor"])
        return args, {**kwargs, "input_tensor": skip}
    raise RuntimeError("BertSelfOutput was called without its skip input")


def _replace(parent: nn.Module, name: str, new: nn.Module, undo: list) -> None:
    old = getattr(parent, name)
    setattr(parent, name, new)
    undo.append(lambda: setattr(parent, name, old))


def _remove_skip(model: nn.Module, undo: list) -> None:
    kind = architecture(model)
    for layer in _layers(model):
        if kind == "bert":
            handle = layer.attention.output.register_forward_pre_hook(_zero_skip_input, with_kwargs=True)
            undo.append(handle.remove)
        elif kind == "albert":
            att, store = layer.attention, {}

            def keep(module, args, output, store=store):
                store["branch"] = output

            def reroute(module, args, store=store):  # LN(h + branch) -> LN(branch)
                return (store.pop("branch"), *args[1:])

            undo.append(att.output_dropout.register_forward_hook(keep).remove)
            undo.append(att.LayerNorm.register_forward_pre_hook(reroute).remove)
        else:  # xlnet: the paper's own switch
            rel_attn = layer.rel_attn
            if "residual" not in inspect.signature(rel_attn.post_attention).parameters:
                raise RuntimeError("XLNet's post_attention has no `residual` switch in this transformers version")
            rel_attn.post_attention = functools.partial(rel_attn.post_attention, residual=False)
            undo.append(lambda r=rel_attn: delattr(r, "post_attention"))


def _remove_mlp(model: nn.Module, undo: list, albert_as_paper: bool = False) -> None:
    kind = architecture(model)
    for layer in _layers(model):
        if kind == "albert" and albert_as_paper:  # the paper's code: LN(GELU(a) + a) is left
            _replace(layer, "ffn", nn.Identity(), undo)
            _replace(layer, "ffn_output", nn.Identity(), undo)
        elif kind == "bert":
            _replace(layer, "intermediate", nn.Identity(), undo)
            _replace(layer, "output", _ReturnInputTensor(), undo)
        elif kind == "albert":
            store = {}

            def keep(module, args, output, store=store):
                store["attention"] = _first(output)

            def attention_only(module, args, output, store=store):
                a = store.pop("attention")
                return (a, *output[1:]) if isinstance(output, tuple) else a

            _replace(layer, "ffn", nn.Identity(), undo)  # skip the work; the output is replaced below
            _replace(layer, "ffn_output", nn.Identity(), undo)
            undo.append(layer.attention.register_forward_hook(keep).remove)
            undo.append(layer.register_forward_hook(attention_only).remove)
        else:  # xlnet: the paper's own choice
            _replace(layer, "ff", nn.Identity(), undo)


@contextlib.contextmanager
def variant(model: nn.Module, name: str, albert_as_paper: bool = False) -> Iterator[nn.Module]:
    """Turn ``model`` (BERT, ALBERT or XLNet, pretrained or not) into one of :data:`VARIANTS` inside a
    ``with`` block, and restore it on exit (chapter "Rank collapse in pretrained transformers", Fig. 2 set-up):

    * ``"SAN"``: no skip around attention, no feed-forward block (the attention LayerNorm stays);
    * ``"SAN+MLP"``: no skip around attention, the feed-forward block kept (with its own skip);
    * ``"SAN+skip"``: attention with its skip, no feed-forward block;
    * ``"Transformer"``: the model unchanged.

    The model is changed in place (no copy of the weights); see the module docstring for the exact
    surgery per architecture and where it differs from the paper's code. ``albert_as_paper=True``
    removes ALBERT's feed-forward block as the paper's code did (its two linear maps become identities,
    ``LN(GELU(a) + a)`` stays), so the chapter can show what that difference does.
    """
    if name not in VARIANT_SWITCHES:
        raise ValueError(f"unknown variant {name!r}; expected one of {', '.join(VARIANTS)}")
    architecture(model)
    keep_skip, keep_mlp = VARIANT_SWITCHES[name]
    undo: list = []
    try:
        if not keep_skip:
            _remove_skip(model, undo)
        if not keep_mlp:
            _remove_mlp(model, undo, albert_as_paper=albert_as_paper)
        yield model
    finally:
        for step in reversed(undo):
            step()


