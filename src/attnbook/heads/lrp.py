"""Layer-wise relevance propagation of the top-1 logit to every head (chapter "A translation model";
Voita et al. 2019, Sec. 4.2; Bach et al. 2015, Eq. 60).

The rule is the one of the official code (lena-voita/the-story-of-heads, ``lib/layers/lrp.py``,
``basic.py``, ``attn_lrp.py``, ``transformer_lrp.py``), written for the book's pre-LN
:class:`attnbook.seq2seq.Seq2SeqTransformer`. For a function ``y = f(x_1, ..., x_k)`` with Jacobian ``J``
and output relevance ``R_j``, the impact of input ``i`` on output ``j`` is

    z_{j<-i} = f(0)_j / N + J_{ji} x_i            (N: the number of inputs; f(0)/N shares the bias)

and the relevance of the inputs is the alpha-beta rule with alpha = beta = 0.5,

    R_i = sum_j R_j (alpha z+_{j<-i} / (sum_i z+_{j<-i} + eps) + beta z-_{j<-i} / (sum_i z-_{j<-i} - eps)),

after which the inputs' relevance is rescaled so that its total absolute value is that of the output
(:func:`rescale`: relevance is conserved by construction). The official code applies the rule per token
for linear layers and LayerNorm (:func:`relprop_tokenwise`), per sentence and head for the attention
core softmax(q k^T / sqrt(d)) v with its full Jacobian in q, k and v (:func:`relprop_attention`), per
token and neuron through a residual sum (:func:`relprop_add`), and rescales each residual block's
output relevance to the block's input relevance.

The relevance of a head is the sum of the relevance of its output neurons (after the attention's output
projection has been passed back), at every position; :func:`head_relevance` returns it per target token
for the top-1 logit of that token (teacher forcing), normalised over the heads of each layer by the
total absolute relevance of the layer's heads, and averaged over the target tokens, as the paper
averages relevance over its dev set.
"""

from __future__ import annotations

from typing import Callable

import torch
from scipy.stats import spearmanr
from torch.func import jacrev, vmap

from attnbook.core import runs
from attnbook.heads.masks import ATTENTION_KINDS

ALPHA = 0.5
BETA = 0.5
EPS = 1e-5


def transition(impact: torch.Tensor) -> torch.Tensor:
    """The alpha-beta transition ``(..., out, in)`` from impacts ``z_{j<-i}`` ``(..., out, in)``: positive and
    negative impacts are normalised separately over the inputs of each output and mixed with ``ALPHA``
    and ``BETA`` (``lib/layers/lrp.py``, ``use_alpha_beta=True``)."""
    pos, neg = impact.clamp_min(0), impact.clamp_max(0)
    return (ALPHA * pos / (pos.sum(-1, keepdim=True) + EPS)
            + BETA * neg / (neg.sum(-1, keepdim=True) - EPS))


def rescale(reference: torch.Tensor, relevance: torch.Tensor, dims: int) -> torch.Tensor:
    """``relevance`` scaled so that its absolute sum over its last ``dims`` dimensions equals that of
    ``reference`` over its last ``dims`` (``LRP.rescale``: relevance is conserved)."""
    axes = tuple(range(-dims, 0))
    ref = reference.abs().sum(axes, keepdim=True)
    return relevance * ref / (relevance.abs().sum(axes, keepdim=True) + EPS)


def relprop_jacobian(R: torch.Tensor, x: torch.Tensor, jac: torch.Tensor, f0: torch.Tensor) -> torch.Tensor:
    """The rule for one sample: ``R`` ``(Q, out)`` (one row per relevance to explain), input ``x`` ``(in,)``,
    Jacobian ``jac`` ``(out, in)``, reference output ``f0 = f(0)`` ``(out,)``. Returns ``(Q, in)``."""
    if jac.shape != (R.shape[-1], x.shape[-1]) or f0.shape != (R.shape[-1],):
        raise ValueError(f"expected jac {(R.shape[-1], x.shape[-1])} and f0 {(R.shape[-1],)}, got "
                         f"{tuple(jac.shape)} and {tuple(f0.shape)}")
    impact = f0[:, None] / x.shape[-1] + jac * x[None, :]
    return rescale(R, R @ transition(impact), dims=1)


def relprop_tokenwise(R: torch.Tensor, x: torch.Tensor, fn: Callable[[torch.Tensor], torch.Tensor],
                      jac: torch.Tensor | None = None) -> torch.Tensor:
    """The rule applied to each token of a token-wise map ``fn`` (a linear layer, LayerNorm): ``R``
    ``(Q, n, out)``, ``x`` ``(n, in)``; ``jac`` the Jacobian, shared ``(out, in)`` (a linear map) or per
    token ``(n, out, in)``, else computed per token by autograd. Per-token rescaling, then per relevance
    row (``Dense.relprop``)."""
    if R.ndim != 3 or x.ndim != 2 or R.shape[1] != x.shape[0]:
        raise ValueError(f"expected R (Q, n, out) and x (n, in), got {tuple(R.shape)} and {tuple(x.shape)}")
    with torch.no_grad():
        f0 = fn(torch.zeros_like(x[:1]))[0]
    if jac is None:
        jac = vmap(jacrev(fn))(x[:, None, :])[:, 0, :, 0, :]
    impact = f0[None, :, None] / x.shape[-1] + jac * x[:, None, :]  # (n, out, in)
    pos = impact.clamp_min(0)
    neg = impact - pos
    Rt = R.transpose(0, 1)  # (n, Q, out)
    wp = Rt * (ALPHA / (pos.sum(-1) + EPS))[:, None, :]
    wn = Rt * (BETA / (neg.sum(-1) - EPS))[:, None, :]
    R_in = (torch.bmm(wp, pos) + torch.bmm(wn, neg)).transpose(0, 1)  # (Q, n, in)
    R_in = rescale(R, R_in, dims=1)  # per token
    return rescale(R, R_in, dims=2)  # per relevance row, over the sentence


def relprop_linear(R: torch.Tensor, x: torch.Tensor, layer: torch.nn.Linear) -> torch.Tensor:
    """:func:`relprop_tokenwise` through ``layer`` (``Dense.relprop``: its weights are the Jacobian; a ReLU
    after it is passed through as the official FFN does)."""
    return relprop_tokenwise(R, x, layer, jac=layer.weight.detach()[None])


def layer_norm_jacobian(x: torch.Tensor, norm: torch.nn.LayerNorm) -> torch.Tensor:
    """The Jacobian ``(n, d, d)`` of ``norm`` at each token of ``x`` ``(n, d)``:
    ``g_a / sigma (delta_ab - 1/d - xhat_a xhat_b / d)``, ``sigma = sqrt(var + eps)`` (``LayerNorm._jacobian``)."""
    d = x.shape[-1]
    centred = x - x.mean(-1, keepdim=True)
    sigma = (centred.pow(2).mean(-1, keepdim=True) + norm.eps).sqrt()
    xhat = centred / sigma
    eye = torch.eye(d, dtype=x.dtype, device=x.device)
    jac = (eye - 1.0 / d)[None] - xhat[:, :, None] * xhat[:, None, :] / d
    return jac * (norm.weight.detach()[None, :, None] / sigma[:, :, None])


def relprop_norm(R: torch.Tensor, x: torch.Tensor, norm: torch.nn.LayerNorm) -> torch.Tensor:
    """:func:`relprop_tokenwise` through a LayerNorm, with its analytic Jacobian."""
    return relprop_tokenwise(R, x, norm, jac=layer_norm_jacobian(x, norm))


def relprop_add(R: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Relevance of the two terms of ``a + b`` (``relprop_add``): per token and neuron, the impacts are
    ``a_j`` and ``b_j``; ``R`` ``(Q, n, d)``, ``a``/``b`` ``(n, d)``; each token rescaled to its own total."""
    impact = torch.stack([a, b], dim=-1)  # (n, d, 2): output neuron j <- a_j, b_j
    t = transition(impact)
    Ra, Rb = R * t[..., 0], R * t[..., 1]
    scale = R.abs().sum(-1, keepdim=True) / (Ra.abs().sum(-1, keepdim=True) + Rb.abs().sum(-1, keepdim=True) + EPS)
    return Ra * scale, Rb * scale


def attention_core(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
                   mask: torch.Tensor | None) -> torch.Tensor:
    """softmax(scale q k^T + mask) v for one head: ``q`` ``(n, d)``, ``k``/``v`` ``(m, d)``, ``mask``
    ``(n, m)`` boolean (True = attend) or None."""
    scores = scale * q @ k.T
    if mask is not None:
        scores = scores.masked_fill(~mask, -1e9)
    return scores.softmax(-1) @ v


def attention_impacts(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
                      mask: torch.Tensor | None):
    """The impacts ``z = J x`` of one head's queries, keys and values on its outputs ``out[i, a]``, from the
    analytic Jacobian of :func:`attention_core` (``f(0) = 0``, so no bias share): ``(zq, zk, zv)`` of
    shapes ``(n, d, d)`` (``q[i, b]``), ``(n, d, m, d)`` (``k[j, b]``) and ``(n, d, m)`` (``v[j, a]``):
    every other input has no impact on ``out[i, a]``."""
    scores = scale * q @ k.T
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    P = scores.softmax(-1)  # (n, m)
    out = P @ v
    k_mean = P @ k
    # d out[i,a] / d q[i,b] = s sum_j P_ij v_j[a] (k_j[b] - kbar_i[b])
    jq = scale * (torch.einsum("ij,ja,jb->iab", P, v, k) - out[:, :, None] * k_mean[:, None, :])
    zq = jq * q[:, None, :]
    # d out[i,a] / d k[j,b] = s P_ij (v_j[a] - out_i[a]) q_i[b]
    zk = scale * (P[:, None, :] * (v.T[None] - out[:, :, None]))[..., None] * (q[:, None, None, :] * k[None, None])
    zv = P[:, None, :] * v.T[None]  # d out[i,a] / d v[j,a] = P_ij
    return zq, zk, zv


def relprop_attention(R: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
                      mask: torch.Tensor | None):
    """Relevance of one head's queries, keys and values: ``R`` ``(Q, n, d)`` at the head's output, with the
    full Jacobian of :func:`attention_core` (``attn_lrp.py``, ``consider_attn_constant=False``); one sample
    per head, rescaled over it. Returns ``(Rq, Rk, Rv)``; the same numbers as :func:`relprop_jacobian`
    with the dense Jacobian (tested), without forming it."""
    zq, zk, zv = attention_impacts(q, k, v, scale, mask)
    parts = [(z.clamp_min(0), z.clamp_max(0)) for z in (zq, zk, zv)]
    ps = sum(pz.flatten(2).sum(-1) for pz, _ in parts) + EPS  # (n, d): per output, over every input
    ns = sum(nz.flatten(2).sum(-1) for _, nz in parts) - EPS
    wp, wn = R * (ALPHA / ps), R * (BETA / ns)
    (pq, nq), (pk, nk), (pv, nv) = parts
    Rq = torch.einsum("qia,iab->qib", wp, pq) + torch.einsum("qia,iab->qib", wn, nq)
    Rk = torch.einsum("qia,iajb->qjb", wp, pk) + torch.einsum("qia,iajb->qjb", wn, nk)
    Rv = torch.einsum("qia,iaj->qja", wp, pv) + torch.einsum("qia,iaj->qja", wn, nv)
    total = Rq.abs().sum((1, 2)) + Rk.abs().sum((1, 2)) + Rv.abs().sum((1, 2))
    scale_back = (R.abs().sum((1, 2)) / (total + EPS))[:, None, None]
    return Rq * scale_back, Rk * scale_back, Rv * scale_back


def _concat_linear(*layers: torch.nn.Linear) -> torch.nn.Linear:
    """One linear layer whose outputs are those of ``layers`` side by side (the official combined q/k/v
    projection), with their weights."""
    w = torch.cat([lay.weight.detach() for lay in layers])
    b = torch.cat([lay.bias.detach() for lay in layers])
    out = torch.nn.Linear(w.shape[1], w.shape[0], device=w.device, dtype=w.dtype)
    with torch.no_grad():
        out.weight.copy_(w)
        out.bias.copy_(b)
    return out


def relprop_mha(R: torch.Tensor, attn, x: torch.Tensor, context: torch.Tensor | None,
                mask: torch.Tensor | None, heads_out: list) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Relevance through one :class:`attnbook.core.attention.MultiHeadSelfAttention` (``MultiHeadAttn.relprop``).

    ``R`` ``(Q, n, d_model)`` at its output, ``x`` ``(n, d_model)`` its query input, ``context`` the
    encoder states for encoder-decoder attention (None: self-attention). Appends the per-head relevance
    ``(Q, heads)`` (sum over the head's output neurons and positions) to ``heads_out``. Returns the relevance
    of ``x`` and of ``context`` (None for self-attention)."""
    H, dh = attn.n_heads, attn.d_head
    kv_in = x if context is None else context
    q, k, v = (lin(inp).detach() for lin, inp in ((attn.q, x), (attn.k, kv_in), (attn.v, kv_in)))
    merged = torch.cat([attention_core(q[:, h * dh:(h + 1) * dh], k[:, h * dh:(h + 1) * dh],
                                       v[:, h * dh:(h + 1) * dh], attn.scale, mask) for h in range(H)], dim=1)
    R_heads = relprop_linear(R, merged, attn.out)  # (Q, n, H*dh)
    heads_out.append(R_heads.reshape(*R_heads.shape[:2], H, dh).sum((1, 3)))
    Rq, Rk, Rv = [], [], []
    for h in range(H):
        s = slice(h * dh, (h + 1) * dh)
        rq, rk, rv = relprop_attention(R_heads[..., s], q[:, s], k[:, s], v[:, s], attn.scale, mask)
        Rq.append(rq)
        Rk.append(rk)
        Rv.append(rv)
    Rq, Rk, Rv = torch.cat(Rq, -1), torch.cat(Rk, -1), torch.cat(Rv, -1)
    if context is None:
        R_x = relprop_linear(torch.cat([Rq, Rk, Rv], -1), x, _concat_linear(attn.q, attn.k, attn.v))
        return R_x, None
    return relprop_linear(Rq, x, attn.q), relprop_linear(torch.cat([Rk, Rv], -1), context,
                                                         _concat_linear(attn.k, attn.v))


def merge_shares(R_a: torch.Tensor, R_b: torch.Tensor) -> torch.Tensor:
    """The two shares ``(Q, n, d)`` of one tensor's relevance (through a sublayer and through the skip)
    added and rescaled, per relevance row, to their total absolute value before adding
    (``ResidualLayerWrapper.relprop``)."""
    before = R_a.abs().sum((1, 2), keepdim=True) + R_b.abs().sum((1, 2), keepdim=True)
    merged = R_a + R_b
    return merged * before / (merged.abs().sum((1, 2), keepdim=True) + EPS)


def residual_post_ln(R: torch.Tensor, x: torch.Tensor, update: torch.Tensor, norm: torch.nn.LayerNorm,
                     sublayer: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """The post-LN block ``norm(x + update)``, ``update = sublayer(x)`` (BERT's layers; the official code
    is pre-LN, :func:`_residual`): the relevance ``R`` ``(Q, n, d)`` of the block's output goes back
    through the norm at ``x + update``, is split over the sum (:func:`relprop_add`), the update's share goes
    back through the sublayer (``sublayer(R) -> R at x``), and the two shares of ``x`` are merged
    (:func:`merge_shares`)."""
    R_skip, R_update = relprop_add(relprop_norm(R, x + update, norm), x, update)
    return merge_shares(sublayer(R_update), R_skip)


def _residual(R: torch.Tensor, x: torch.Tensor, update: torch.Tensor, norm,
              sublayer: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor | None]]):
    """``ResidualLayerWrapper.relprop`` for the pre-LN block ``x + update``, ``update = sublayer(norm(x))``:
    the relevance ``R`` ``(Q, n, d)`` of the block's output is split over the sum (:func:`relprop_add`),
    the update's share goes back through the sublayer (``sublayer(R) -> (R at norm(x), R of the
    encoder states or None)``) and the norm, the two shares of ``x`` are added and rescaled to their
    total before adding, and, with encoder states, both are rescaled to the block's output relevance."""
    original = R.abs().sum((1, 2), keepdim=True)
    R_skip, R_update = relprop_add(R, x, update)
    R_norm, R_context = sublayer(R_update)
    R_x = merge_shares(relprop_norm(R_norm, x, norm), R_skip)
    if R_context is None:
        return R_x, None
    total = R_x.abs().sum((1, 2), keepdim=True) + R_context.abs().sum((1, 2), keepdim=True)
    return R_x * original / (total + EPS), R_context * original / (total + EPS)


def relprop_feed_forward(R: torch.Tensor, x: torch.Tensor, hidden: torch.Tensor, first: torch.nn.Linear,
                         second: torch.nn.Linear) -> torch.Tensor:
    """A feed-forward sublayer ``second(act(first(x)))`` with ``hidden = act(first(x))``: the second, then
    the first linear layer; the token-wise activation passes relevance on unchanged (``FFN.relprop``)."""
    return relprop_linear(relprop_linear(R, hidden, second), x, first)


def _relprop_ff(ff, h: torch.Tensor):
    """The feed-forward sublayer ``Linear, ReLU, Dropout, Linear`` at input ``h``."""
    hidden = torch.relu(ff[0](h)).detach()

    def back(R):
        return relprop_feed_forward(R, h, hidden, ff[0], ff[3]), None
    return back


@torch.no_grad()
def _forward_sentence(model, src: torch.Tensor, tgt_in: torch.Tensor):
    """The activations of one sentence pair (1-d id tensors) that the backward pass needs."""
    enc, dec = [], []
    x = model._embed(src[None])[0]
    for layer in model.encoder:
        h1 = layer.norm1(x)
        a = layer.self_attn(h1[None])[0][0]
        x1 = x + a
        f = layer.ff(layer.norm2(x1)[None])[0]
        enc.append((x, a, x1, f))
        x = x1 + f
    memory = model.enc_norm(x)
    y = model._embed(tgt_in[None])[0]
    causal = torch.ones(len(tgt_in), len(tgt_in), dtype=torch.bool, device=tgt_in.device).tril()
    for layer in model.decoder:
        s = layer.self_attn(layer.norm1(y)[None], attn_mask=causal)[0][0]
        y1 = y + s
        c = layer.cross_attn(layer.norm2(y1)[None], context=memory[None])[0][0]
        y2 = y1 + c
        f = layer.ff(layer.norm3(y2)[None])[0]
        dec.append((y, s, y1, c, y2, f))
        y = y2 + f
    return enc, x, memory, dec, y, causal


def sentence_relevance(model, src_ids, tgt_ids):
    """Both lenses at once, one propagation: ``(heads, source, target)`` as :func:`sentence_head_relevance`
    and :func:`token_relevance` return them (eval mode, no autograd; the model's mode is restored). Computes on
    the model's device; returns CPU tensors."""
    dev = model.embed.weight.device
    src = torch.as_tensor(list(src_ids), dtype=torch.long, device=dev)
    tgt = torch.as_tensor(list(tgt_ids), dtype=torch.long, device=dev)
    if src.ndim != 1 or tgt.ndim != 1 or len(src) < 1 or len(tgt) < 2:
        raise ValueError("expected 1-d id sequences: a non-empty source and a target with bos and eos")
    if (src == model.cfg.pad_id).any() or (tgt == model.cfg.pad_id).any():
        raise ValueError("pass unpadded sentences (one sentence pair, no pad ids)")
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            return _sentence_head_relevance(model, src, tgt[:-1])
    finally:
        model.train(was_training)


def sentence_head_relevance(model, src_ids, tgt_ids) -> dict[str, torch.Tensor]:
    """LRP relevance of every head to the top-1 logit of each target token of one sentence pair (teacher
    forcing): ``kind -> (target tokens, layers, heads)``, the sum of each head's output relevance, with
    the top-1 logit's relevance set to 1.

    ``src_ids``: source ids (ending in EOS); ``tgt_ids``: ``bos ... eos``; the decoder reads all but the
    last token. Computes in the model's dtype and device, in eval mode."""
    return sentence_relevance(model, src_ids, tgt_ids)[0]


def token_relevance(model, src_ids, tgt_ids) -> tuple[torch.Tensor, torch.Tensor]:
    """The relevance that reaches the source and target token embeddings (their absolute relevance summed
    over dimensions) for the top-1 logit of each target token: ``(Q, n)`` and ``(Q, m)``; each row's two
    parts sum to 1 (relevance is conserved; Voita et al. 2021's source and target contributions)."""
    return sentence_relevance(model, src_ids, tgt_ids)[1:]


def _sentence_head_relevance(model, src, tgt_in):
    enc, x_top, memory, dec, y_top, causal = _forward_sentence(model, src, tgt_in)
    m = len(tgt_in)
    u = model.dec_norm(y_top).detach()
    emb = model.embed.weight.detach()
    top = (u @ emb.T).argmax(-1)
    t_out = transition((emb[top] * u)[:, None, :])[:, 0, :]  # (m, d): the top-1 logit has no bias
    like = dict(dtype=u.dtype, device=u.device)
    R = torch.zeros(m, m, u.shape[1], **like)
    diagonal = torch.arange(m, device=u.device)
    R[diagonal, diagonal] = t_out
    R = relprop_norm(rescale(torch.ones(m, 1, 1, **like), R, dims=2), y_top, model.dec_norm)
    out: dict[str, list] = {k: [] for k in ATTENTION_KINDS}
    R_enc = torch.zeros(m, *memory.shape, **like)
    enc_scale = torch.zeros(m, 1, 1, **like)
    for layer, (y, s, y1, c, y2, f) in zip(reversed(model.decoder), reversed(dec)):
        R, _ = _residual(R, y2, f, layer.norm3, _relprop_ff(layer.ff, layer.norm3(y2).detach()))
        cross: list = []
        R, R_mem = _residual(R, y1, c, layer.norm2,
                             lambda r: relprop_mha(r, layer.cross_attn, layer.norm2(y1).detach(), memory,
                                                   None, cross))
        R_enc = R_enc + R_mem
        enc_scale = enc_scale + R_mem.abs().sum((1, 2), keepdim=True)
        own: list = []
        R, _ = _residual(R, y, s, layer.norm1,
                         lambda r: (relprop_mha(r, layer.self_attn, layer.norm1(y).detach(), None, causal,
                                                own)[0], None))
        out["dec_cross"].insert(0, cross[0])
        out["dec_self"].insert(0, own[0])
    R_tgt_emb = R
    R = relprop_norm(R_enc * enc_scale / (R_enc.abs().sum((1, 2), keepdim=True) + EPS), x_top,
                     model.enc_norm)
    for layer, (x, a, x1, f) in zip(reversed(model.encoder), reversed(enc)):
        R, _ = _residual(R, x1, f, layer.norm2, _relprop_ff(layer.ff, layer.norm2(x1).detach()))
        own = []
        R, _ = _residual(R, x, a, layer.norm1,
                         lambda r: (relprop_mha(r, layer.self_attn, layer.norm1(x).detach(), None, None,
                                                own)[0], None))
        out["enc_self"].insert(0, own[0])
    heads = {k: torch.stack(v, dim=1).float().cpu() for k, v in out.items()}
    R_tgt = R_tgt_emb.abs().sum(-1).float().cpu()
    return heads, R.abs().sum(-1).float().cpu(), R_tgt


def layer_shares(relevance: torch.Tensor) -> torch.Tensor:
    """Relevance ``(..., layers, heads)`` normalised over the heads of each layer by their total absolute
    relevance (the paper normalises relevance over the heads of a layer)."""
    return relevance / (relevance.abs().sum(-1, keepdim=True) + EPS)


def head_relevance(model, src_ids, tgt_ids) -> dict[str, torch.Tensor]:
    """Voita et al.'s head relevance on many sentence pairs (lists of id lists): for every target token,
    each head's LRP relevance to the top-1 logit as a share of its layer (:func:`layer_shares`), averaged
    over all target tokens. Returns ``kind -> (layers, heads)``."""
    if len(src_ids) != len(tgt_ids) or not len(src_ids):
        raise ValueError(f"expected as many sources as targets (at least one), got {len(src_ids)}, "
                         f"{len(tgt_ids)}")
    sums, count = None, 0
    for s, t in zip(src_ids, tgt_ids):
        rel = sentence_head_relevance(model, s, t)
        part = {k: layer_shares(v).sum(0) for k, v in rel.items()}
        sums = part if sums is None else {k: sums[k] + part[k] for k in sums}
        count += len(t) - 1
    return {k: v / count for k, v in sums.items()}


def relevance_tables(rec: dict) -> dict:
    """A head-relevance file's tables as tensors: ``relevance`` (kind -> (layers, heads)), ``halves`` (kind ->
    [even verses, odd verses]) and ``first_verses`` (a list of kind -> (layers, heads)); the rest as recorded."""
    missing = {"relevance", "halves", "first_verses"} - set(rec)
    if missing:
        raise ValueError(f"not a head-relevance file (missing {sorted(missing)})")
    rec = dict(rec)
    rec["relevance"] = {k: torch.tensor(v) for k, v in rec["relevance"].items()}
    rec["halves"] = {k: [torch.tensor(h) for h in v] for k, v in rec["halves"].items()}
    rec["first_verses"] = [{k: torch.tensor(v) for k, v in d.items()} for d in rec["first_verses"]]
    return rec


def load_relevance(run: str = "lrp_relevance", preset: str | None = None) -> dict:
    """The shipped relevance of run ``run`` (``lrp_relevance``: the translation model; ``lrp_relevance_minilm``:
    all-MiniLM-L6-v2; ``scripts/head_relevance.py``) at ``preset`` (default: the active one), its tables as
    tensors (:func:`relevance_tables`), or a falsy :class:`attnbook.core.runs.Missing` where there is none
    (:func:`attnbook.core.runs.find`)."""
    if run not in ("lrp_relevance", "lrp_relevance_minilm"):
        raise ValueError(f"expected run 'lrp_relevance' or 'lrp_relevance_minilm', got {run!r}")
    rec = runs.find(run, preset)
    return relevance_tables(rec) if rec else rec


def split_half_reliability(halves: dict) -> dict[str, float]:
    """Split-half reliability of a head ranking (chapter "A translation model"): for each kind of a
    relevance file's ``halves`` (kind -> [even verses, odd verses], :func:`relevance_tables`), the Spearman
    rank correlation of the two halves' relevance."""
    return {k: float(spearmanr(a.flatten(), b.flatten())[0]) for k, (a, b) in halves.items()}


def live_gap(model, src_ids, tgt_ids, first_verses) -> float:
    """The largest absolute difference between the shipped per-verse relevance ``first_verses`` (a relevance
    file's, :func:`relevance_tables`) and the same verses' relevance recomputed now (unpadded id lists
    ``src_ids`` / ``tgt_ids``, the same verses first; :func:`sentence_head_relevance`, layer shares averaged
    over target tokens): chapter "A translation model"'s live-against-precomputed check."""
    if len(src_ids) < len(first_verses) or len(tgt_ids) < len(first_verses):
        raise ValueError(f"need the {len(first_verses)} shipped verses, got {len(src_ids)} sources and "
                         f"{len(tgt_ids)} targets")
    gaps = []
    for s, t, want in zip(src_ids, tgt_ids, first_verses):
        got = sentence_head_relevance(model, s, t)
        gaps += [float((layer_shares(got[k]).mean(0) - want[k]).abs().max()) for k in want]
    return max(gaps)
