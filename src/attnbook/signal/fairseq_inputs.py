"""What the attention layers of a fairseq IWSLT encoder see at initialisation, and the temperature that balances
their query and value gradients there (chapter "Unequal gradients", section "Can the formula tell which temperature
is 8.5?").

Eq. ``tau-star`` needs the tokens that enter attention. Noci et al. (2022) train fairseq's ``transformer_iwslt_de_en``
(post-LN, d = 512, 4 heads, a 1024-wide ReLU MLP, 6 encoder layers). At initialisation fairseq gives

* token embeddings ``N(0, 1/d)`` multiplied by ``sqrt(d)`` (``embed_scale``), so entries of variance 1 and a squared
  norm of about ``d``;
* sinusoidal positions (half sines, half cosines, positions counted from 2, after the padding index), a squared
  norm of exactly ``d / 2``; so the first layer's tokens have a squared norm of about ``1.5 d``, and they are
  correlated only through the positions;
* ``xavier_uniform`` projections, with gain ``1/sqrt(2)`` for the query, key and value maps, zero biases.

:func:`layer_inputs` builds that encoder at initialisation (from the book's :class:`attnbook.core.attention.Block`,
re-initialised as fairseq does) and returns the tokens each layer's attention receives. :func:`jacobian_sq_norms`
gives the squared Jacobian norms of one head for any attention (not only uniform) by formula, cheap enough for
d = 512; :func:`simulated_balance` finds, by weight draws, the temperature at which the query norm equals the value
norm: the balance "with real random queries".
"""

from __future__ import annotations

import math
from typing import Sequence

import torch
from torch import nn

from attnbook.core.attention import SelfAttentionNetwork
from attnbook.signal.propagation import balancing_temperature, log_crossing, token_cosine, xavier_uniform_std

# fairseq's transformer_iwslt_de_en encoder
IWSLT = dict(d_model=512, n_heads=4, d_ff=1024, depth=6)


def sinusoidal_positions(n_tokens: int, d_model: int, first: int = 2) -> torch.Tensor:
    """fairseq's sinusoidal position embeddings of positions ``first .. first + n_tokens - 1`` (``(n, d)``, float64):
    ``[sin(p w_k), cos(p w_k)]`` with ``w_k = 10000^(-k / (d/2 - 1))``, sines in the first half."""
    if n_tokens < 1 or d_model < 4 or d_model % 2:
        raise ValueError(f"need n_tokens >= 1 and an even d_model >= 4, got {n_tokens}, {d_model}")
    half = d_model // 2
    freqs = torch.exp(torch.arange(half, dtype=torch.float64) * -(math.log(10000.0) / (half - 1)))
    angles = torch.arange(first, first + n_tokens, dtype=torch.float64)[:, None] * freqs[None, :]
    return torch.cat([angles.sin(), angles.cos()], dim=1)


def _fairseq_init_(net: SelfAttentionNetwork) -> SelfAttentionNetwork:
    """fairseq's initialisation of the encoder's linear maps: ``xavier_uniform`` with gain ``1/sqrt(2)`` for the
    query, key and value maps and 1 for the others, zero biases (LayerNorms as built: weight 1, bias 0)."""
    for block in net.blocks:
        attn = block.attn
        for lin, gain in ((attn.q, 2**-0.5), (attn.k, 2**-0.5), (attn.v, 2**-0.5), (attn.out, 1.0),
                          *((m, 1.0) for m in block.mlp if isinstance(m, nn.Linear))):
            nn.init.xavier_uniform_(lin.weight, gain=gain)
            nn.init.zeros_(lin.bias)
    return net


@torch.no_grad()
def layer_inputs(n_tokens: int, generator: torch.Generator, *, vocab: int = 10_000, n_sentences: int = 1,
                 **sizes) -> torch.Tensor:
    """The tokens each attention layer of a fairseq IWSLT encoder (post-LN; :data:`IWSLT`, override with
    ``sizes``) receives at initialisation, for ``n_sentences`` sentences of ``n_tokens`` distinct random token ids
    out of ``vocab``: ``(depth, n_sentences, n_tokens, d)``, float64. Layer 1's are the scaled embeddings plus the
    positions; layer ``l > 1``'s are layer ``l - 1``'s output, after its LayerNorm. Weights, embeddings and ids are
    drawn from ``generator``, one encoder for all sentences."""
    s = {**IWSLT, **sizes}
    d = s["d_model"]
    if n_tokens > vocab:
        raise ValueError(f"need n_tokens <= vocab for distinct ids, got {n_tokens} > {vocab}")
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=generator))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        net = SelfAttentionNetwork(s["depth"], d, s["n_heads"], skip=True, mlp=True, layernorm="post",
                                   d_ff=s["d_ff"], bias=True)
        net = _fairseq_init_(net).double().eval()
    embeddings = torch.randn(vocab, d, generator=generator, dtype=torch.float64)  # N(0, 1/d) times sqrt(d)
    ids = torch.stack([torch.randperm(vocab, generator=generator)[:n_tokens] for _ in range(n_sentences)])
    x = embeddings[ids] + sinusoidal_positions(n_tokens, d)
    _, hidden, _ = net(x)
    return torch.stack(hidden[:-1])


def jacobian_sq_norms(X: torch.Tensor, W_Q: torch.Tensor, W_K: torch.Tensor, W_V: torch.Tensor,
                      temperature: float = 1.0) -> dict[str, float]:
    """The squared Frobenius norms of the Jacobians of one head ``S = A X W_V`` with respect to ``W_Q``, ``W_K``
    and ``W_V`` (chapter "Unequal gradients", eqs. ``head``; the same numbers as
    :func:`attnbook.signal.propagation.jacobian_sq_norms`, which differentiates, by formula).

    With ``c = 1 / (tau sqrt(d_k))``, ``P_i = diag(a_i) - a_i a_i^T`` (the softmax Jacobian of row ``i``) and
    ``V = X W_V``, row ``i`` of the output moves by ``dS_i = V^T P_i ds_i`` when its scores move by
    ``ds_i = c X (W_K dW_Q^T + dW_K W_Q^T) x_i``, which is linear in ``dW_Q`` and ``dW_K`` with norms


    * ``||dS/dW_Q||^2 = c^2 sum_i ||x_i||^2 ||V^T P_i X W_K||_F^2``,
    * ``||dS/dW_K||^2 = c^2 sum_i ||W_Q^T x_i||^2 ||V^T P_i X||_F^2``,
    * ``||dS/dW_V||^2 = d_v ||A X||_F^2``.
    """
    if X.ndim != 2 or W_Q.shape != W_K.shape or W_Q.shape[0] != X.shape[1] or W_V.shape[0] != X.shape[1]:
        raise ValueError(f"expected X (n, d), W_Q and W_K (d, d_k), W_V (d, d_v); got {tuple(X.shape)}, "
                         f"{tuple(W_Q.shape)}, {tuple(W_K.shape)}, {tuple(W_V.shape)}")
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    c = 1.0 / (temperature * math.sqrt(W_Q.shape[1]))
    A = ((X @ W_Q) @ (X @ W_K).T * c).softmax(-1)
    V = X @ W_V
    P = torch.diag_embed(A) - A[:, :, None] * A[:, None, :]  # (n, n, n)
    VP = V.T[None] @ P  # (n, d_v, n): V^T P_i
    XK = X @ W_K
    return {
        "q": c**2 * float((X.pow(2).sum(1) * (VP @ XK).pow(2).sum((1, 2))).sum()),
        # ||V^T P_i X||_F^2 = tr(V^T P_i X X^T P_i V)
        "k": c**2 * float(((X @ W_Q).pow(2).sum(1) * ((VP @ (X @ X.T)) * VP).sum((1, 2))).sum()),
        "v": W_V.shape[1] * float((A @ X).pow(2).sum()),
    }


def query_value_ratios(X: torch.Tensor, temperatures: Sequence[float], *, sigma: float, d_k: int, d_v: int,
                       n_draws: int, seed: int = 0) -> list[float]:
    """The ratio of the mean squared query and value Jacobian norms of one head on ``X`` (``(n, d)`` or a batch of
    sentences ``(s, n, d)``, averaged over them) at each temperature, over ``n_draws`` draws of ``N(0, sigma^2)``
    weights (the same draws at every temperature: common random numbers)."""
    if n_draws < 1:
        raise ValueError(f"n_draws must be >= 1, got {n_draws}")
    sentences = X if X.ndim == 3 else X[None]
    gen = torch.Generator().manual_seed(seed)
    draws = [tuple(sigma * torch.randn(X.shape[-1], m, generator=gen, dtype=X.dtype) for m in (d_k, d_k, d_v))
             for _ in range(n_draws)]
    ratios = []
    for tau in temperatures:
        q = v = 0.0
        for W in draws:
            for S in sentences:
                norms = jacobian_sq_norms(S, *W, temperature=tau)
                q, v = q + norms["q"], v + norms["v"]
        ratios.append(q / v)
    return ratios


def simulated_balance(X: torch.Tensor, *, sigma: float, d_k: int, d_v: int, n_draws: int, seed: int = 0,
                      temperatures: Sequence[float] = tuple(2.0 ** (k / 2) for k in range(-12, 3))) -> float:
    """The temperature at which the mean query and value Jacobian norms of one head on ``X`` are equal, with real
    random queries (:func:`query_value_ratios`, crossing found on a log grid by
    :func:`attnbook.signal.propagation.log_crossing`); its inverse is the balancing logit multiplier."""
    ratios = query_value_ratios(X, temperatures, sigma=sigma, d_k=d_k, d_v=d_v, n_draws=n_draws, seed=seed)
    return log_crossing(list(temperatures), ratios)


def balance_by_layer(inputs: torch.Tensor, *, n_draws: int, seed: int = 0) -> list[dict]:
    """For each layer's inputs (``(depth, sentences, n, d)`` from :func:`layer_inputs`), one row: its mean
    squared token norm over ``d`` (``sq_norm``), its mean token cosine (``cosine``), and the balancing logit
    multiplier ``1/tau_*`` of one head of fairseq's width (``d_k = d_v = d / 4``) by eq. ``tau-star``
    (``formula``: the mean over sentences) and with real random queries (``simulated``:
    :func:`simulated_balance`, draws seeded with ``seed + layer``)."""
    if inputs.ndim != 4:
        raise ValueError(f"inputs must be (depth, sentences, n, d), got {tuple(inputs.shape)}")
    d = inputs.shape[-1]
    kw = dict(sigma=xavier_uniform_std(d, d, gain=2**-0.5), d_k=d // IWSLT["n_heads"], d_v=d // IWSLT["n_heads"])
    rows = []
    for layer, X in enumerate(inputs, start=1):
        formula = sum(1 / balancing_temperature(S, kw["sigma"], kw["sigma"]) for S in X) / len(X)
        rows.append(dict(layer=layer, sq_norm=float(X.pow(2).sum(-1).mean()) / d,
                         cosine=float(token_cosine(X).mean()), formula=formula,
                         simulated=1 / simulated_balance(X, n_draws=n_draws, seed=seed + layer, **kw)))
    return rows


def where_in_layers(multipliers: Sequence[float], value: float) -> str:
    """Where ``value`` falls among per-layer balancing multipliers (layer 1 first), in words for the chapter's
    prose: "below every layer's", "above every layer's", "at layer k's" (within 5%) or "between layers k and
    m's" (the layers whose multipliers enclose it)."""
    if not multipliers:
        raise ValueError("need at least one layer's multiplier")
    for k, m in enumerate(multipliers, start=1):
        if abs(value / m - 1) <= 0.05:
            return f"at layer {k}'s"
    if value < min(multipliers):
        return "below every layer's"
    if value > max(multipliers):
        return "above every layer's"
    below = max((m, k) for k, m in enumerate(multipliers, start=1) if m < value)[1]
    above = min((m, k) for k, m in enumerate(multipliers, start=1) if m > value)[1]
    return f"between layers {min(below, above)} and {max(below, above)}'s"


def balance_table(rows: Sequence[dict]) -> str:
    """A Markdown table of :func:`balance_by_layer`'s rows (chapter "Unequal gradients")."""
    lines = ["| layer | squared norm / d | token cosine | 1/tau* by formula | 1/tau* simulated |", "|---" * 5 + "|"]
    lines += [f"| {r['layer']} | {r['sq_norm']:.2f} | {r['cosine']:.2f} | {r['formula']:.1f} | {r['simulated']:.1f} |"
              for r in rows]
    return "\n".join(lines)
