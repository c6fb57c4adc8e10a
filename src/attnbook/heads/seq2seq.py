"""An encoder-decoder Transformer for translation whose attention is the book's
:class:`attnbook.core.attention.MultiHeadSelfAttention` (chapter "A translation model"; chapter "Pruning heads"
prunes its heads). Its layers are its own pre-LN encoder and decoder layers, not
:class:`attnbook.core.attention.Block`, which has no causal mask, cross-attention or dropout.

The model is the Transformer of Vaswani et al. (2017) with pre-LayerNorm sublayers: an encoder of
``enc_layers`` self-attention layers, a decoder of ``dec_layers`` layers with masked (causal)
self-attention and encoder-decoder ("cross") attention, sinusoidal positions and one embedding matrix
shared by the source, the target and the output softmax (the vocabulary is a joint BPE).

Every attention is an :class:`attnbook.core.attention.MultiHeadSelfAttention`; the three kinds are named as in
Voita et al. (2019): ``"enc_self"``, ``"dec_self"`` and ``"dec_cross"``. ``forward`` takes per-layer head
gates for each kind, ``head_gates={"enc_self": g}`` with ``g`` of shape ``(layers, heads)`` or
``(batch, layers, heads)`` (multipliers of each head's output, e.g. the hard-concrete gates of
chapter "Pruning heads"), and returns the attention matrices on request.
"""

from __future__ import annotations

import copy
import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Mapping, Optional

import torch
import torch.nn.functional as F
from safetensors import safe_open
from torch import nn

from attnbook.core.attention import MultiHeadSelfAttention
from attnbook.core.checkpoints import META_KEY, load_checkpoint, save_checkpoint
from attnbook.heads.masks import ATTENTION_KINDS


@dataclass
class Seq2SeqConfig:
    """Sizes of :class:`Seq2SeqTransformer` (chapter "A translation model"). Token ids: ``pad_id``, ``bos_id``,
    ``eos_id``."""

    vocab_size: int
    d_model: int = 256
    n_heads: int = 4
    enc_layers: int = 3
    dec_layers: int = 3
    d_ff: int = 1024
    dropout: float = 0.1
    attention_dropout: float = 0.0
    max_len: int = 256
    pad_id: int = 0
    bos_id: int = 1
    eos_id: int = 2

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "n_heads", "enc_layers", "dec_layers", "d_ff", "max_len"):
            if int(getattr(self, name)) <= 0:
                raise ValueError(f"{name} must be a positive int, got {getattr(self, name)!r}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        for name in ("dropout", "attention_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {getattr(self, name)}")

    def layers(self, kind: str) -> int:
        """Number of layers that have attention of ``kind`` (one of ``ATTENTION_KINDS``)."""
        if kind not in ATTENTION_KINDS:
            raise ValueError(f"unknown attention kind {kind!r}; expected one of {ATTENTION_KINDS}")
        return self.enc_layers if kind == "enc_self" else self.dec_layers


def sinusoidal_positions(n: int, d_model: int) -> torch.Tensor:
    """The ``(n, d_model)`` sinusoidal position encodings of Vaswani et al. (2017, sec. 3.5) (chapter "A translation
    model")."""
    if n <= 0 or d_model <= 0 or d_model % 2:
        raise ValueError(f"expected positive n and positive even d_model, got n={n}, d_model={d_model}")
    pos = torch.arange(n, dtype=torch.float32)[:, None]
    freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    pe = torch.zeros(n, d_model)
    pe[:, 0::2] = torch.sin(pos * freq)
    pe[:, 1::2] = torch.cos(pos * freq)
    return pe


def causal_mask(n: int, device=None) -> torch.Tensor:
    """Boolean ``(n, n)`` mask, True where query ``i`` may attend to key ``j <= i`` (chapter "A translation model")."""
    if n <= 0:
        raise ValueError(f"n must be positive, got {n}")
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()


class _FeedForward(nn.Sequential):
    def __init__(self, d_model: int, d_ff: int, dropout: float) -> None:
        super().__init__(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Dropout(dropout), nn.Linear(d_ff, d_model))


class EncoderLayer(nn.Module):
    """Pre-LN encoder layer: ``x + SA(LN x)``, then ``x + FF(LN x)`` (chapter "A translation model")."""

    def __init__(self, cfg: Seq2SeqConfig) -> None:
        super().__init__()
        self.self_attn = MultiHeadSelfAttention(cfg.d_model, cfg.n_heads, dropout=cfg.attention_dropout)
        self.ff = _FeedForward(cfg.d_model, cfg.d_ff, cfg.dropout)
        self.norm1, self.norm2 = nn.LayerNorm(cfg.d_model), nn.LayerNorm(cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x, mask, gates=None, return_attention=False):
        a, p = self.self_attn(self.norm1(x), return_attention=return_attention, head_gates=gates, attn_mask=mask)
        x = x + self.drop(a)
        return x + self.drop(self.ff(self.norm2(x))), p


class DecoderLayer(nn.Module):
    """Pre-LN decoder layer: causal self-attention, encoder-decoder attention, feed-forward (chapter "A translation
    model")."""

    def __init__(self, cfg: Seq2SeqConfig) -> None:
        super().__init__()
        self.self_attn = MultiHeadSelfAttention(cfg.d_model, cfg.n_heads, dropout=cfg.attention_dropout)
        self.cross_attn = MultiHeadSelfAttention(cfg.d_model, cfg.n_heads, dropout=cfg.attention_dropout)
        self.ff = _FeedForward(cfg.d_model, cfg.d_ff, cfg.dropout)
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(cfg.d_model) for _ in range(3))
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, y, memory, self_mask, cross_mask, self_gates=None, cross_gates=None,
                return_attention=False):
        a, p_self = self.self_attn(
            self.norm1(y), return_attention=return_attention, head_gates=self_gates, attn_mask=self_mask
        )
        y = y + self.drop(a)
        a, p_cross = self.cross_attn(
            self.norm2(y), return_attention=return_attention, head_gates=cross_gates, attn_mask=cross_mask,
            context=memory,
        )
        y = y + self.drop(a)
        return y + self.drop(self.ff(self.norm3(y))), p_self, p_cross


class Seq2SeqTransformer(nn.Module):
    """Encoder-decoder Transformer with head gates and attention read-out (chapter "A translation model", Voita et al.
    2019).

    ``forward(src, tgt_in, head_gates=None, return_attention=False)`` takes token ids ``src`` (batch, n)
    and the decoder input ``tgt_in`` (batch, m) (``bos`` + target without its last token) and returns
    ``(logits, attentions)``: logits ``(batch, m, vocab)`` and, when asked, a dict ``kind -> list over
    layers of (batch, heads, queries, keys)`` attention matrices (else ``None``).
    """

    def __init__(self, cfg: Seq2SeqConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model, padding_idx=cfg.pad_id)
        nn.init.normal_(self.embed.weight, 0.0, cfg.d_model**-0.5)
        with torch.no_grad():
            self.embed.weight[cfg.pad_id].zero_()
        self.register_buffer("pos", sinusoidal_positions(cfg.max_len, cfg.d_model), persistent=False)
        self.encoder = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.enc_layers))
        self.decoder = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.dec_layers))
        self.enc_norm, self.dec_norm = nn.LayerNorm(cfg.d_model), nn.LayerNorm(cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)

    # ----------------------------------------------------------------------------------------------
    def _check_ids(self, ids: torch.Tensor, name: str) -> None:
        if not isinstance(ids, torch.Tensor) or ids.ndim != 2 or ids.dtype not in (torch.long, torch.int):
            shape = tuple(ids.shape) if isinstance(ids, torch.Tensor) else type(ids).__name__
            raise ValueError(f"{name} must be an integer tensor of shape (batch, length), got {shape}")
        if ids.shape[1] > self.cfg.max_len:
            raise ValueError(f"{name} has length {ids.shape[1]} > max_len={self.cfg.max_len}")

    def _gates(self, head_gates: Optional[Mapping[str, torch.Tensor]], kind: str, batch: int):
        """Per-layer gate rows for ``kind`` (a list with one entry per layer, entries may be None)."""
        n_layers = self.cfg.layers(kind)
        if head_gates is None or head_gates.get(kind) is None:
            return [None] * n_layers
        g = torch.as_tensor(head_gates[kind]).to(self.embed.weight.device)
        ok = (n_layers, self.cfg.n_heads)
        if g.shape == ok:
            return [g[i] for i in range(n_layers)]
        if g.shape == (batch, *ok) or (g.ndim == 4 and g.shape[:3] == (batch, *ok)):
            return [g[:, i] for i in range(n_layers)]  # per sentence, or per sentence and query position
        raise ValueError(f"head_gates[{kind!r}] must have shape {ok}, ({batch}, {ok[0]}, {ok[1]}) or "
                         f"({batch}, {ok[0]}, {ok[1]}, queries), got {tuple(g.shape)}")

    def _embed(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids) * math.sqrt(self.cfg.d_model) + self.pos[: ids.shape[1]]
        return self.drop(x)

    def encode(self, src, head_gates=None, return_attention=False):
        """Encoder states ``(batch, n, d_model)``, the source key mask and the encoder attentions."""
        self._check_ids(src, "src")
        if head_gates is not None and not isinstance(head_gates, Mapping):
            raise ValueError("head_gates must be a dict kind -> tensor, kinds " + ", ".join(ATTENTION_KINDS))
        if head_gates is not None and set(head_gates) - set(ATTENTION_KINDS):
            raise ValueError(f"unknown kinds in head_gates: {sorted(set(head_gates) - set(ATTENTION_KINDS))}; "
                             f"expected a subset of {ATTENTION_KINDS}")
        src_mask = (src != self.cfg.pad_id)[:, None, None, :]  # (b, 1, 1, n): attend to real tokens
        x, attns = self._embed(src), []
        for layer, g in zip(self.encoder, self._gates(head_gates, "enc_self", src.shape[0])):
            x, p = layer(x, src_mask, g, return_attention)
            attns.append(p)
        return self.enc_norm(x), src_mask, attns

    def decode(self, tgt_in, memory, src_mask, head_gates=None, return_attention=False):
        """Decoder logits ``(batch, m, vocab)`` and the decoder self- and cross-attentions."""
        self._check_ids(tgt_in, "tgt_in")
        b, m = tgt_in.shape
        self_mask = causal_mask(m, tgt_in.device)[None, None] & (tgt_in != self.cfg.pad_id)[:, None, None, :]
        y, p_self, p_cross = self._embed(tgt_in), [], []
        gs = self._gates(head_gates, "dec_self", b)
        gc = self._gates(head_gates, "dec_cross", b)
        for layer, g1, g2 in zip(self.decoder, gs, gc):
            y, a1, a2 = layer(y, memory, self_mask, src_mask, g1, g2, return_attention)
            p_self.append(a1)
            p_cross.append(a2)
        logits = self.dec_norm(y) @ self.embed.weight.T
        return logits, p_self, p_cross

    def forward(self, src, tgt_in, head_gates=None, return_attention=False):
        memory, src_mask, enc = self.encode(src, head_gates, return_attention)
        logits, dec_self, dec_cross = self.decode(tgt_in, memory, src_mask, head_gates, return_attention)
        attns = dict(enc_self=enc, dec_self=dec_self, dec_cross=dec_cross) if return_attention else None
        return logits, attns

    def loss(self, src, tgt, head_gates=None, label_smoothing: float = 0.0) -> torch.Tensor:
        """Mean token cross-entropy of the target ``tgt`` (``bos ... eos``, padded) (chapter "A translation model")."""
        self._check_ids(tgt, "tgt")
        logits, _ = self(src, tgt[:, :-1], head_gates)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt[:, 1:].reshape(-1),
                               ignore_index=self.cfg.pad_id, label_smoothing=label_smoothing)

    # ---------------------------------------------------------------------- incremental decoding
    def _start_cache(self, memory: torch.Tensor) -> list[dict]:
        """Per decoder layer: the encoder-decoder keys and values (computed once) and empty self-attention
        keys/values, to which each decoding step appends its own (a key-value cache)."""
        cache = []
        for layer in self.decoder:
            ca = layer.cross_attn
            cache.append({"ck": ca._split(ca.k(memory)), "cv": ca._split(ca.v(memory)), "k": None, "v": None,
                          "keep": None})
        return cache

    @staticmethod
    def _attend(attn, q, k, v, mask, gates):
        heads = attn.gate_heads(F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=attn.scale), gates)
        b = heads.shape[0]
        return attn.out(heads.transpose(1, 2).reshape(b, 1, attn.n_heads * attn.d_head))

    def _decode_step(self, token: torch.Tensor, t: int, src_mask, cache: list[dict], head_gates=None):
        """Logits ``(batch, vocab)`` for the next token after ``token`` (batch,), the decoder input at
        position ``t``, reusing and extending ``cache``: the same numbers as :meth:`decode` on the whole
        prefix (eval mode), at a fraction of the cost."""
        b = token.shape[0]
        y = self.embed(token)[:, None] * math.sqrt(self.cfg.d_model) + self.pos[t]
        keep = (token != self.cfg.pad_id)[:, None]
        gs = self._gates(head_gates, "dec_self", b)
        gc = self._gates(head_gates, "dec_cross", b)
        cross_mask = src_mask  # (b, 1, 1, n)
        for layer, c, g1, g2 in zip(self.decoder, cache, gs, gc):
            sa, h = layer.self_attn, layer.norm1(y)
            k, v = sa._split(sa.k(h)), sa._split(sa.v(h))
            c["k"] = k if c["k"] is None else torch.cat([c["k"], k], 2)
            c["v"] = v if c["v"] is None else torch.cat([c["v"], v], 2)
            c["keep"] = keep if c["keep"] is None else torch.cat([c["keep"], keep], 1)
            y = y + self._attend(sa, sa._split(sa.q(h)), c["k"], c["v"], c["keep"][:, None, None, :], g1)
            ca, h = layer.cross_attn, layer.norm2(y)
            y = y + self._attend(ca, ca._split(ca.q(h)), c["ck"], c["cv"], cross_mask, g2)
            y = y + layer.ff(layer.norm3(y))
        return (self.dec_norm(y) @ self.embed.weight.T)[:, 0]

    @staticmethod
    def _reorder_cache(cache: list[dict], rows: torch.Tensor) -> None:
        for c in cache:
            for key in ("k", "v", "keep", "ck", "cv"):
                if c[key] is not None:
                    c[key] = c[key][rows]

    @torch.no_grad()
    def greedy_decode(self, src, max_new_tokens: int = 100, head_gates=None) -> list[list[int]]:
        """Greedy decoding (argmax at each step) of a batch; returns token ids without bos/eos (chapter "A translation
        model")."""
        if max_new_tokens <= 0:
            raise ValueError(f"max_new_tokens must be positive, got {max_new_tokens}")
        memory, src_mask, _ = self.encode(src, head_gates)
        b = src.shape[0]
        out = torch.full((b, 1), self.cfg.bos_id, dtype=torch.long, device=src.device)
        done = torch.zeros(b, dtype=torch.bool, device=src.device)
        cache = self._start_cache(memory)
        for t in range(min(max_new_tokens, self.cfg.max_len - 1)):
            nxt = self._decode_step(out[:, -1], t, src_mask, cache, head_gates).argmax(-1)
            nxt = torch.where(done, torch.full_like(nxt, self.cfg.pad_id), nxt)
            out = torch.cat([out, nxt[:, None]], 1)
            done |= nxt == self.cfg.eos_id
            if done.all():
                break
        result = []
        for row in out[:, 1:].tolist():
            ids = []
            for t in row:
                if t in (self.cfg.eos_id, self.cfg.pad_id):
                    break
                ids.append(t)
            result.append(ids)
        return result

    @torch.no_grad()
    def beam_decode(self, src, beam: int = 4, length_penalty: float = 0.6, max_new_tokens: int = 100,
                    head_gates=None) -> list[list[int]]:
        """Beam search (chapter "A translation model"; the official code of Voita et al. decodes with beam 4 and length
        penalty 0.6). A finished hypothesis ``y`` scores ``log p(y) / lp(|y|)`` with the GNMT length penalty
        ``lp(m) = ((5 + m) / 6) ** length_penalty`` (Wu et al. 2016), ``|y|`` counting EOS; a sentence stops
        when ``beam`` hypotheses have finished (fairseq's early stopping), or at ``max_new_tokens``, when its
        live hypotheses are scored as if finished. ``beam=1`` is greedy decoding. Returns the best token ids of
        each sentence without BOS/EOS. ``head_gates`` must be per-layer ``(layers, heads)`` masks here.
        """
        if beam < 1 or max_new_tokens <= 0:
            raise ValueError(f"need beam >= 1 and max_new_tokens > 0, got {beam}, {max_new_tokens}")
        if length_penalty < 0:
            raise ValueError(f"length_penalty must be >= 0, got {length_penalty}")
        for kind, g in (head_gates or {}).items():
            if g is not None and torch.as_tensor(g).ndim != 2:
                raise ValueError(f"beam_decode takes (layers, heads) head gates, got {kind} of shape "
                                 f"{tuple(torch.as_tensor(g).shape)}")
        memory, src_mask, _ = self.encode(src, head_gates)
        b, dev = src.shape[0], src.device
        memory, src_mask = memory.repeat_interleave(beam, 0), src_mask.repeat_interleave(beam, 0)
        seqs = torch.full((b * beam, 1), self.cfg.bos_id, dtype=torch.long, device=dev)
        scores = torch.full((b, beam), float("-inf"), device=dev)
        scores[:, 0] = 0.0  # one live hypothesis to start with
        finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(b)]
        done = [False] * b

        def lp(m: int) -> float:
            return ((5.0 + m) / 6.0) ** length_penalty

        steps = min(max_new_tokens, self.cfg.max_len - 1)
        cache = self._start_cache(memory)
        for t in range(steps):
            logits = self._decode_step(seqs[:, -1], t, src_mask, cache, head_gates)
            logp = logits.float().log_softmax(-1).view(b, beam, -1)
            vocab = logp.shape[-1]
            cand = (scores[:, :, None] + logp).view(b, -1)
            top_scores, top_idx = cand.topk(2 * beam, dim=-1)
            new_rows, new_scores = [], []
            for i in range(b):
                rows, kept = [], []
                for sc, idx in zip(top_scores[i].tolist(), top_idx[i].tolist()):
                    origin, token = divmod(idx, vocab)
                    if sc == float("-inf"):
                        break
                    if token == self.cfg.eos_id:
                        if not done[i] and len(rows) < beam:  # an EOS among the best `beam` candidates
                            finished[i].append((sc / lp(t + 1), seqs[i * beam + origin, 1:].tolist()))
                        continue
                    if len(rows) < beam:
                        rows.append((i * beam + origin, token))
                        kept.append(sc)
                if len(finished[i]) >= beam:
                    done[i] = True
                while len(rows) < beam:  # pad with dead hypotheses
                    rows.append((i * beam, self.cfg.pad_id))
                    kept.append(float("-inf"))
                if done[i]:
                    kept = [float("-inf")] * beam
                new_rows += rows
                new_scores.append(kept)
            origin = torch.tensor([r for r, _ in new_rows], device=dev)
            token = torch.tensor([k for _, k in new_rows], device=dev)
            seqs = torch.cat([seqs[origin], token[:, None]], 1)
            self._reorder_cache(cache, origin)
            scores = torch.tensor(new_scores, device=dev)
            if all(done):
                break
        out = []
        for i in range(b):
            hyps = list(finished[i])
            if not done[i]:  # ran out of steps: live hypotheses count as finished
                for j in range(beam):
                    if scores[i, j] > float("-inf"):
                        hyps.append((float(scores[i, j]) / lp(seqs.shape[1] - 1), seqs[i * beam + j, 1:].tolist()))
            out.append(max(hyps, key=lambda h: h[0])[1] if hyps else [])
        return out

    def n_heads_total(self) -> dict[str, int]:
        """Number of heads of each attention kind (chapter "Pruning heads" counts what pruning leaves)."""
        return {k: self.cfg.layers(k) * self.cfg.n_heads for k in ATTENTION_KINDS}


def save_model(model: Seq2SeqTransformer, path, meta: Optional[dict] = None, half: bool = True) -> Path:
    """Write ``model`` with :func:`attnbook.core.checkpoints.save_checkpoint` (safetensors; weights in fp16 when
    ``half``), its config stored in the meta beside ``meta`` (training time, BLEU, ...) (chapter "A translation model").
    A readable copy of the meta is written next to it as ``<path>.json``."""
    path = Path(path)
    if path.suffix != ".safetensors":
        raise ValueError(f"expected a .safetensors path, got {path}")
    if meta and "config" in meta:
        raise ValueError("meta must not hold 'config': save_model stores the model's own config there")
    full_meta = {"config": asdict(model.cfg), **(meta or {})}
    to_save = copy.deepcopy(model).cpu()
    if half:
        to_save = to_save.half()
    save_checkpoint(to_save, path, full_meta)
    path.with_suffix(".json").write_text(json.dumps(full_meta, indent=1) + "\n")
    return path


def load_model(path, device=None) -> tuple[Seq2SeqTransformer, dict]:
    """Load a :func:`save_model` checkpoint: ``(model in eval mode, float32, meta)`` (chapter "A translation model")."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"no checkpoint at {path}; run scripts/train_translation.py to create it")
    with safe_open(str(path), framework="pt") as f:
        meta = json.loads((f.metadata() or {}).get(META_KEY, "{}"))
    if "config" not in meta:
        raise ValueError(f"{path} has no model config in its meta; was it written by save_model?")
    model = Seq2SeqTransformer(Seq2SeqConfig(**meta["config"]))
    load_checkpoint(model, path)  # copies fp16 tensors into the float32 parameters
    model.eval()
    if device is not None:
        model.to(device)
    return model, meta
