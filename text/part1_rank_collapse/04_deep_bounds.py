# %% tags=["remove-cell"]
# Colab set-up: install the book's library when it is not importable (hidden in the book).
try:
    import attnbook
except ImportError:
    # %pip install --quiet "attnbook @ git+https://github.com/attnbook/attnbook"
    try:
        import attnbook
    except ImportError:
        raise RuntimeError("attnbook could not be installed from https://github.com/attnbook/attnbook: the repository must be "
                           "published there (README, 'Running the chapters on Colab'), or upload "
                           "the project folder and run %pip install <folder>") from None

# %% [markdown]
# # Deep bounds and what breaks collapse
#
# [Chapter 3](03_residual_bound_one_layer.ipynb) proved that one head of one layer cubes the residual. This chapter stacks the bound over $H$ heads
# and $L$ layers into the doubly exponential bound of {cite:t}`dong2021attention`, compares it with simulated
# networks, and then looks at the three components a Transformer adds: skip connections (which can stop
# collapse entirely), MLPs (whose Lipschitz constant enters the bound; larger MLP weights slow collapse) and
# LayerNorm (which does not stop it).
#
# **In this chapter you will**
#
# * derive $\|\operatorname{res}(\operatorname{SAN}(X))\| \le c\,(4\gamma\beta H/\sqrt{d_{qk}})^{(3^L-1)/2}\|\operatorname{res}(X)\|^{3^L}$
#   ($c = 2$ for the token-mean residual the experiments use)
#   and watch real residuals stay below it, layer by layer;
# * build a network with skip connections whose residual never shrinks, at any depth;
# * measure an MLP's Lipschitz constant $\lambda$ in the sense the proof needs and see larger MLP weights slow
#   collapse;
# * write LayerNorm as matrix multiplications and see that it does not prevent collapse.

# %% [markdown]
# :::{admonition} The result, as this run computed it
# :class: tip
# ```{glue:md} ch04_result
# :format: myst
# ```
# Every line is a claim of this page, with its rule, numbers and reason in the tables below and on the [reproduction page](../reproduction.ipynb).
# :::

# %%
import functools

import matplotlib.pyplot as plt
import torch

import attnbook
from attnbook.rank import bound_figures, bound_search, deep_bound
from attnbook.core.attention import SelfAttentionNetwork, gaussian_init_
from attnbook.core.norms import norm_1_inf, relative_residual, res, residual_by_layer

dev = attnbook.setup(seed=0)
sizes = attnbook.preset("deep_bounds")
torch.set_default_dtype(torch.float64)  # residuals fall to 1e-15: float64 throughout
print(dict(sizes))

# %% [markdown]
# ## $H$ heads, $L$ layers
#
# With $H$ heads, {eq}`eq-output-split` of [chapter 3](03_residual_bound_one_layer.ipynb) holds head by head, so
# $\operatorname{SA}(X) = \mathbf{1}z^\top + \sum_h \Delta_h R W_h$ (with $W_h = W_{V,h}W_{O,h}$). The composite norm
# has no triangle inequality, so we bound $\|\cdot\|_1$ and $\|\cdot\|_\infty$ of the sum separately: by the
# steps of [chapter 3](03_residual_bound_one_layer.ipynb), $\|\Delta_h RW_h\|_1 \le 4\gamma_h \|W_{QK,h}\|_1\|W_h\|_1 \|R\|_1^2\|R\|_\infty/\sqrt{d_{qk}}$, and
# the same with the roles of $1$ and $\infty$ exchanged.
#
# ```{prf:theorem} Doubly exponential collapse (this book's constants)
# :label: thm-deep-bound
#
# (After {cite:t}`dong2021attention`.) Let $\beta_1 = \max_{l,h}\|W^l_{QK,h}\|_1\|W^l_h\|_1$, $\beta_\infty = \max_{l,h}\|W^l_{QK,h}\|_\infty\|W^l_h\|_\infty$,
# $\beta = \sqrt{\beta_1\beta_\infty}$, and $\gamma = \max_{l,h}\gamma^l_h$ with the $\gamma$ of [chapter 3](03_residual_bound_one_layer.ipynb) evaluated at
# layer $l$'s input. For an $L$-layer SAN with $H$ heads per layer and any centring of the input,
#
# $$
# \|\operatorname{res}(\operatorname{SAN}(X))\|_{1,\infty} \le c\,\Big(\frac{4\gamma\beta H}{\sqrt{d_{qk}}}\Big)^{\frac{3^L-1}{2}}
# \|\operatorname{res}(X)\|_{1,\infty}^{3^L},
# $$ (eq-deep-bound)
#
# with $c = 1$ for the $\arg\min$ residual and $c = 2$ for the token-mean residual of the output.
# ```
#
# ```{prf:proof}
# One layer: summing over heads, $\|\sum_h\Delta_hRW_h\|_1 \le H\cdot 4\gamma\beta_1\|R\|_1^2\|R\|_\infty/\sqrt{d_{qk}}$ and
# $\|\cdot\|_\infty \le H\cdot4\gamma\beta_\infty\|R\|_1\|R\|_\infty^2/\sqrt{d_{qk}}$; the product's square root is
# $a\|R\|_{1,\infty}^3$ with $a = 4\gamma\beta H/\sqrt{d_{qk}}$. The next layer's input is
# $\mathbf{1}z^\top + D$ with $D = \sum_h \Delta_hRW_h$, so $D$ is a valid residual (centring $z$) and
# $r_l \le a\,r_{l-1}^3$. Unrolling, $r_L \le a^{1 + 3 + \dots + 3^{L-1}} r_0^{3^L} = a^{(3^L-1)/2}r_0^{3^L}$. The last step
# to the $\arg\min$ or mean residual is step 3 of [chapter 3](03_residual_bound_one_layer.ipynb).
# ```
#
# The bound only says something when $a\,r_0^2 < 1$; for inputs far from rank one it is vacuous (it exceeds
# $r_0$). Simulate random SANs on inputs with a small residual and compare, layer by layer, with the recursion
# $b_l = a_l b_{l-1}^3$ (each layer's own $\beta$ and $\gamma$, computed in log space, since $b_l$ underflows).
#
# A forward pass cannot follow the residual far: it stores $X^l = \mathbf{1}x^\top + R$ in one matrix, and once
# $R$ is $10^{-16}$ of the shared row it is lost to round-off, after two layers here. So we also follow it the
# way the proof does, with the two kept apart (`deep_bound.tracked_log10_residuals`): each head's scores split
# into $\mathbf{1}r^\top + E$ ({eq}`eq-scores`), $\Delta$ is computed from $E$ with `expm1` and `log1p` (steps 5
# and 6 of [chapter 3](03_residual_bound_one_layer.ipynb)), and the next residual is $\sum_h \Delta_h R W_h$
# ({eq}`eq-output-split`), its scale carried in log space. Every step keeps float64's relative precision, so
# the residual can be followed to $10^{-500}$ and beyond (solid, "tracked", in {numref}`fig-ch04-1`); where a
# forward pass (dotted) can still see it, the two agree.

# %% tags=["hide-input"]
n, d, H, L = sizes["n_tokens"], sizes["d_model"], sizes["n_heads"], sizes["depth"]
# n_nets random SANs on inputs of residual scale 0.01: observed residual by layer and
# log10 of the bound 2 b_l, each layer its own beta and gamma (attnbook.rank.deep_bound)
# and log10 of the same residual followed without round-off (tracked_log10_residuals)
observed, tracked, bounds = deep_bound.simulate_against_bound(
    sizes["n_nets"], n, d, H, L)
floor = 1e-13  # below this, float64 round-off of O(1) entries dominates the residual
# where a forward pass still sees the residual with digits to spare
seen = observed > 1e-9
agreement = (tracked[seen] - observed[seen].log10()).abs().max().item()
violations = int((tracked > bounds + 1e-9).sum())
order_last = tracked[:, -1] / tracked[:, -2]  # log r_L / log r_(L-1): 3 if cubic
print("log10 residual, net 0, forward pass:",
      [f"{v:.1f}" for v in observed[0].log10().tolist()])
print("log10 residual, net 0, tracked:     ", [f"{v:.0f}" for v in tracked[0].tolist()])
print("log10 bound,    net 0:              ", [f"{v:.0f}" for v in bounds[0].tolist()])

# %% tags=["hide-input"]
bound_figures.deep_bound_by_layer(observed, tracked, bounds, floor)
plt.show()

# %% tags=["nbval-check-output", "hide-input"]
[
    attnbook.check(
        "deep bound: (layer, net) pairs, every layer, where the tracked residual "
        "exceeds the bound", violations, close_to=0, tol=0,
    ),
    attnbook.check("tracked residual vs forward pass where it exceeds 1e-9: largest "
                   "|difference of log10|", agreement, at_most=1e-6, digits=2,
                   band=1e-6),
    attnbook.check("order at the last layer, log r_L / log r_(L-1), farthest from 3 "
                   "over nets", (order_last - 3).abs().max().item(), at_most=0.1,
                   digits=2, band=0.5),
    attnbook.check("deep bound: observed log10 residual after one layer, largest",
                   observed[:, 1].log10().max().item(), at_most=-4.0, digits=2),
]

# %% [markdown]
# The bound holds at every layer of every network, and, like the one-layer bound, it is loose: the
# residual a forward pass sees reaches float64 round-off after two layers, and followed further it falls
# far below the bound (printed above). Its digits triple per layer: by the last layer
# $\log r_L / \log r_{L-1}$ is 3 to within the check's margin, the cubic order of the bound, reached as
# soon as $E$ is small enough for $\Delta$ to be linear in it. That is the order
# [chapter 1](01_pure_attention_loses_rank.ipynb) could estimate only from the two layer pairs above round-off.
#
# ## Skip connections: collapse can be avoided at any depth
#
# With skips, $X^l = X^{l-1} + \operatorname{SA}(X^{l-1})$: the path that skips every layer ([chapter 2](02_path_decomposition.ipynb)) carries the input
# through unchanged, so a bound of the form {eq}`eq-deep-bound` cannot hold. A concrete parameterisation:
# set $W_Q = W_K = 0$ and $b_Q = b_K = 0$. Every attention matrix is then uniform, $P = \tfrac1n\mathbf{1}\mathbf{1}^\top$, so
# $\operatorname{SA}(X) = \mathbf{1}(\bar x^\top W + c^\top)$ has identical rows and
#
# $$
# \operatorname{res}_{\text{mean}}(X^l) = \operatorname{res}_{\text{mean}}(X^{l-1} + \mathbf{1}(\cdot)^\top) = \operatorname{res}_{\text{mean}}(X^{l-1})
# $$
#
# for every layer and any value weights: the residual is preserved exactly, while the shared row drifts ({numref}`fig-ch04-2`).

# %% tags=["hide-input"]
nc, dc = sizes["collapse_tokens"], sizes["collapse_d_model"]
Lc, nets = sizes["collapse_depth"], sizes["n_collapse_nets"]
gen = torch.Generator().manual_seed(1)
X = torch.randn(1, nc, dc, generator=gen).to(dev)  # drawn on the CPU, run on dev
# residual by layer of `nets` random SANs with and without skips (net i drawn after
# torch.manual_seed(1 + i)): relative residual, and the residual norm itself
relative, absolute = (
    {name: deep_bound.random_net_curves(X, Lc, H, nets, seed=1, relative=rel,
                                        device=dev, mlp=False, layernorm=None,
                                        skip=skip)
     for name, skip in {"SAN": False, "SAN+skip": True}.items()}
    for rel in (True, False)
)
curves = {"SAN (random)": absolute["SAN"][0],
          "SAN+skip (random)": absolute["SAN+skip"][0],
          "SAN+skip (random), relative": relative["SAN+skip"][0]}

# %% tags=["hide-input"]
# the construction: W_Q = W_K = 0 (uniform attention) with skips
construction = gaussian_init_(
    SelfAttentionNetwork(Lc, dc, H, skip=True, mlp=False, layernorm=None)
)
with torch.no_grad():
    for block in construction.blocks:
        for lin in (block.attn.q, block.attn.k):
            lin.weight.zero_()
            lin.bias.zero_()
        block.attn.v.bias.normal_()  # non-zero value bias: the shared row drifts
    out = construction.to(dev)(X)[0]
zero_qk = residual_by_layer(construction, X, relative=False)[0]
curves["SAN+skip (W_Q = W_K = 0)"] = zero_qk
preserved = (zero_qk / zero_qk[0] - 1).abs().max().item()
drift = (out[0].mean(0) - X[0].mean(0)).norm().item()
print(f"construction: largest relative change of ||res(X^l)|| over {Lc} layers "
      f"{preserved:.1e}; the shared row moved by {drift:.1f}")

# %% tags=["hide-input"]
bound_figures.skip_curves(curves)
plt.show()

# %% tags=["nbval-check-output", "hide-input"]
[
    attnbook.check(
        "skip construction: residual preserved to 1e-10 relative at every layer (1 = "
        "yes)", int(preserved <= 1e-10), close_to=1, tol=0,
    ),
    attnbook.check(
        "random SANs: relative residual after the last layer / the input's, largest "
        "over nets", (relative["SAN"][:, -1] / relative["SAN"][:, 0]).max().item(),
        at_most=1e-12, digits=2, band=1.0,
    ),
    attnbook.check(
        "random SAN+skip: relative residual per layer (geometric mean over the stack), "
        "smallest over nets",
        ((relative["SAN+skip"][:, -1] / relative["SAN+skip"][:, 0]) ** (1 / Lc)).min()
        .item(), at_least=0.5, digits=2,
    ),
    attnbook.check(
        "random SAN+skip: smallest one-layer ratio of the relative residual (at most "
        "a geometric drift)",
        (relative["SAN+skip"][:, 1:] / relative["SAN+skip"][:, :-1]).min().item(),
        at_least=0.45, digits=2,
    ),
]

# %% [markdown]
# With random weights a skip network does not keep its *relative* residual (dotted): the shared row grows
# faster than the residual, and the relative residual drifts down, by at most about half per layer (the last
# two checks), a geometric drift and not a doubly exponential one, while the residual itself grows. Part II is about
# that drift. Skip connections are one way out, not the only one: {cite:t}`he2023deep` train deep transformers *without*
# shortcuts by shaping the attention and the value initialisation so that the signal propagates faithfully, which
# avoids the collapse these bounds describe without any skip.

# %% [markdown]
# ## MLPs: collapse slowed by the Lipschitz constant
#
# A token-wise MLP $f(u) = \operatorname{relu}(uW_1 + b_1)W_2 + b_2$ acts on every row. What the proof needs is how
# much $f$ can enlarge a residual.
#
# ```{prf:lemma} MLP Lipschitz constant for the residual
# :label: lem-mlp
#
# For any centring $x$ with $R = X - \mathbf{1}x^\top$, $F = f(X) - \mathbf{1}f(x)^\top$ satisfies
# $|F| \le |R|\,|W_1|\,|W_2|$ entrywise, so $\|F\|_1 \le \|W_1\|_1\|W_2\|_1\|R\|_1$, $\|F\|_\infty \le \|W_1\|_\infty\|W_2\|_\infty\|R\|_\infty$ and
#
# $$
# \|\operatorname{res}(f(X))\|_{1,\infty} \le c\,\lambda\,\|R\|_{1,\infty}, \qquad \lambda = \|W_1\|_{1,\infty}\|W_2\|_{1,\infty},
# $$ (eq-mlp-lipschitz)
#
# with $c = 1$ for the $\arg\min$ residual of $f(X)$ and $c = 2$ for its token-mean residual, as in {eq}`eq-deep-bound`.
# ```
#
# ```{prf:proof}
# Row $i$ of $F$ is $(\operatorname{relu}(x_i^\top W_1 + b_1^\top) - \operatorname{relu}(x^\top W_1 + b_1^\top))W_2$, and
# $\operatorname{relu}$ is 1-Lipschitz entrywise, so $|F_{ij}| \le \sum_k |(RW_1)_{ik}||(W_2)_{kj}| \le (|R||W_1||W_2|)_{ij}$.
# The entrywise absolute value does not change $\|\cdot\|_1$ or $\|\cdot\|_\infty$; use submultiplicativity.
# $F$ is one centring of $f(X)$, so its $\arg\min$ residual is at most $\|F\|_{1,\infty}$, and its token-mean residual at
# most $2\|F\|_{1,\infty}$ (step 3 of [chapter 3](03_residual_bound_one_layer.ipynb)).
# ```
#
# So an MLP after each attention layer replaces $\beta$ by $\lambda\beta$ in {eq}`eq-deep-bound`. Check the lemma as
# [chapter 3](03_residual_bound_one_layer.ipynb) checks its steps, on random instances and by Adam ascent on the log of the ratio
# over the input and all weights (`attnbook.rank.bound_search`): at the lemma's common centre ($x$ the token mean of $X$,
# $F$ centred at $f(x)$); with the $\arg\min$ residual of the paper on both sides; and with each side centred on its own
# token mean, the measure of the official code and of this book's experiments, with $c = 1$. Then measure $\lambda$ of
# MLPs with growing weight scale and watch collapse slow down ({numref}`fig-ch04-3`).

# %%
# mlp_sample(batch, gen): X = 1 x^T + s R0 and MLP weights of scale w, s and w
# log-uniform (as in chapter 3); mlp(X, W1, b1, W2, b2) = relu(X W1 + b1) W2 + b2
mlp_sample = functools.partial(deep_bound.mlp_instances, n=n, d=d)
mlp = deep_bound.mlp


def lemma_ratio(X, W1, b1, W2, b2, centre="common"):
    # ||F|| / (lambda ||R||), R = X - 1 x^T with x the token mean of X; F centred at
    # f(x) (the lemma's common centre) or at its own token mean ("mean")
    x = X.mean(-2, keepdim=True)
    Y = mlp(X, W1, b1, W2, b2)
    F = Y - mlp(x, W1, b1, W2, b2) if centre == "common" else res(Y, centre)
    return norm_1_inf(F) / (norm_1_inf(W1) * norm_1_inf(W2) * norm_1_inf(X - x))


# %%
search = {
    centre: bound_search.worst_ratio(
        functools.partial(lemma_ratio, centre=centre), mlp_sample,
        n_random=sizes["mlp_random"], n_starts=sizes["mlp_starts"],
        steps=sizes["mlp_ascent_steps"], lr=0.03, seed=2,
    )
    for centre in ("common", "mean")
}
# the paper's residual (exact argmin centring, both sides) where the mean search ended
found = search["mean"]["found"]
lam_found = norm_1_inf(found["W1"]) * norm_1_inf(found["W2"])
argmin_worst = (
    norm_1_inf(res(mlp(**found), "argmin"))
    / (lam_found * norm_1_inf(res(found["X"], "argmin")))
).max().item()
# the ascent's end points move a little between CPU code paths: the checks show them
print("worst ratio on random instances:",
      {centre: round(r["random"], 3) for centre, r in search.items()})

# %% tags=["nbval-check-output", "hide-input"]
[
    attnbook.check("MLP lemma (common centre): worst ratio found, random or "
                   "adversarial",
                   max(search["common"]["random"], search["common"]["adversarial"]),
                   at_most=1.0, digits=3),
    attnbook.check("MLP lemma, paper's argmin residual: worst ratio at those instances",
                   argmin_worst, at_most=1.0, digits=3),
    attnbook.check("token-mean residual on both sides: worst ratio found (exceeds 1: "
                   "not covered by the lemma)", search["mean"]["adversarial"],
                   at_least=1.0, digits=3),
]

# %% [markdown]
# The lemma holds at its common centre, and with the paper's $\arg\min$ residual on both sides even where the
# search pushed hardest against the other version. Centred on their own token means, the two sides are not covered with
# $c = 1$: the mean of $f(X)$ is not $f$ of the mean of $X$, and the ascent finds MLPs and inputs whose mean residual
# grows by more than $\lambda$ (the last check, above 1). So some factor above 1 is needed for the token-mean
# residual; $c = 2$ of {eq}`eq-mlp-lipschitz` suffices, and the search gets nowhere near it.

# %% tags=["hide-input"]
# per net i (torch.manual_seed(3 + i)): SAN+MLP with MLP weights x1 and x2, relative
# residual by layer and the largest MLP Lipschitz constant lambda; and the SAN of
# that seed
per_net = [
    deep_bound.mlp_gain_curves(X, Lc, H, gains=(1.0, 2.0), seed=3 + i, device=dev)
    for i in range(nets)
]
san_curves = deep_bound.random_net_curves(
    X, Lc, H, nets, seed=3, device=dev, skip=False, mlp=False, layernorm=None)
mlp_curves, lambdas = per_net[0]  # the figure shows net 0
san_curve = san_curves[0]

# %% tags=["hide-input"]
# the first layer with relative residual < 1e-8, per net: SAN+MLP at x1 and x2, and SAN
below = torch.tensor([[deep_bound.first_layer_below(c[g], 1e-8) for g in (1.0, 2.0)]
                      for c, _ in per_net])
below_san = torch.tensor([deep_bound.first_layer_below(c, 1e-8) for c in san_curves])
print("lambda per MLP weight scale, net 0:",
      {g: round(v, 1) for g, v in lambdas.items()})
print("first layer with relative residual < 1e-8 per net: SAN", below_san.tolist(),
      "| SAN+MLP x1", below[:, 0].tolist(), "| x2", below[:, 1].tolist())
bound_figures.mlp_collapse(san_curve, mlp_curves, lambdas)
plt.show()

# %% tags=["nbval-check-output", "hide-input"]
[
    attnbook.check(
        "SAN+MLP: extra layers to relative residual < 1e-8, lambda x4 vs lambda x1, "
        "fewest over nets", (below[:, 1] - below[:, 0]).min(), at_least=1,
    ),
    attnbook.check(
        "SAN+MLP (larger lambda): layers to relative residual < 1e-8 minus SAN's, "
        "fewest over nets", (below[:, 1] - below_san).min(), at_least=1,
    ),
]

# %% tags=["remove-input"]
from attnbook.claims.prose import glue

# the MLP Lipschitz constants over nets and weight scales, and the layers collapse gains
all_lambdas = [lam for _, lams in per_net for lam in lams.values()]
extra = below[:, 1] - below[:, 0]
glue("ch04_lambda_lo", min(all_lambdas))
glue("ch04_lambda_hi", max(all_lambdas))
glue("ch04_extra_lo", int(extra.min()))
glue("ch04_extra_hi", int(extra.max()));

# %% [markdown]
# ## LayerNorm: matrix multiplications that do not stop collapse
#
# LayerNorm acts on each token (row) $x_i$: $\operatorname{LN}(x_i) = \frac{x_i - \bar x_i\mathbf{1}}{\sigma_i} \odot g + b$
# with $\sigma_i = \sqrt{\operatorname{var}(x_i) + \epsilon}$. As matrices:
#
# $$
# \operatorname{LN}(X) = \operatorname{diag}(\sigma)^{-1}\, X\, C\, \operatorname{diag}(g) + \mathbf{1}b^\top, \qquad C = I - \tfrac1d\mathbf{1}\mathbf{1}^\top .
# $$ (eq-layernorm)
#
# The centring $C$ and the gain are fixed **right** multiplications; the input-dependent diagonal
# $\operatorname{diag}(\sigma)^{-1}$ multiplies from the **left**, one scale per token. (The paper describes
# LayerNorm as right multiplication by an input-dependent diagonal; that reads normalisation per feature.
# With the per-token normalisation of real LayerNorm the argument needs more care.) What holds in general:
# identical rows stay identical, since every token gets the same $\sigma_i$ and the right factors are fixed.
# For a nearly collapsed $X = \mathbf{1}x^\top + R$ all tokens have nearly the same $\sigma_i$, so the left factor
# is nearly a scalar; but the centring $C$ acts on the shared row and the residual differently. To first order
# in $R$ the relative residual is multiplied by about $\frac{\|x\|}{\|Cx\|}\cdot\frac{\|RC\|}{\|R\|}$, which stays
# near one when the shared row is far from the all-ones direction and is unbounded when $x$ is close to a
# multiple of $\mathbf 1$: centring then removes most of the shared row and keeps the residual. For generic
# weights the shared row is not of that kind, and a SAN with LayerNorm still collapses ({numref}`fig-ch04-4`).

# %% tags=["hide-input"]
ln = torch.nn.LayerNorm(dc)
with torch.no_grad():
    ln.weight.normal_(1.0, 0.2)
    ln.bias.normal_()
    ln.to(dev)
    Xl = X[0]
    sigma = (Xl.var(-1, unbiased=False) + ln.eps).sqrt()
    C = torch.eye(dc, device=dev) - torch.ones(dc, dc, device=dev) / dc
    by_matrices = torch.diag(1 / sigma) @ Xl @ C @ torch.diag(ln.weight) + ln.bias
    ln_error = (ln(Xl) - by_matrices).abs().max().item()
# relative residual after LN / before, for inputs at several distances from rank one
ratios = deep_bound.layernorm_residual_ratios(
    ln, gen, nc, scales=torch.logspace(-6, 0, 7), device=dev
)
print(f"largest |LN(X) - diag(1/sigma) X C diag(g) - 1 b^T| = {ln_error:.1e}")
print("relative residual after LN / before, residual scale 1e-6 .. 1:",
      [f"{r:.2f}" for r in ratios])

# `nets` SANs with post-LN (net i after torch.manual_seed(4 + i)); figure: net 0
ln_curves = deep_bound.random_net_curves(X, Lc, H, nets, seed=4, device=dev, skip=False,
                                         mlp=False, layernorm="post")
ln_curve = ln_curves[0]

# %% tags=["hide-input"]
bound_figures.layernorm_collapse(san_curve, ln_curve)
plt.show()

# %% tags=["nbval-check-output", "hide-input"]
[
    attnbook.check("LayerNorm as matrix products: instances off by more than 1e-12",
                   int(ln_error > 1e-12), close_to=0, tol=0),
    attnbook.check("relative residual after LN / before, largest over scales 1e-6..1",
                   max(ratios), at_most=3.0, digits=2),
    attnbook.check("SAN+LN: relative residual at the last layer, largest over nets",
                   ln_curves[:, -1].max().item(), at_most=1e-10, digits=2, band=1.0),
]

# %% [markdown]
# ### When LayerNorm undoes collapse
#
# The exception is real. It is the book's own small construction, and it is not how
# {cite:t}`wu2024role` show that self-attention with LayerNorm need not collapse. They keep the LayerNorm and
# choose the *value matrices*: "with proper choice of value matrices, a general class of sequences may not
# converge to a rank one subspace", and the dynamics then have equilibria "with any possible rank between one
# and full"; for other classes of value matrices they show that collapse still happens exponentially (both
# from their abstract; the book has not reproduced their construction). The book's counterexample keeps the
# weights out of it and chooses the *input* instead. In numbers: $n = 16$ tokens of width $d = 32$ whose shared
# row is $x = \mathbf 1 + 10^{-7} u$ (almost a multiple of the all-ones vector) and whose residual is
# $10^{-12}$ times a Gaussian matrix, in float64, through a LayerNorm with unit gain and zero bias.

# %%
g_ce = torch.Generator().manual_seed(7)
n_ce, d_ce = 16, 32
shared = 1 + 1e-7 * torch.randn(d_ce, generator=g_ce, dtype=torch.float64)
X_ce = shared + 1e-12 * torch.randn(n_ce, d_ce, generator=g_ce, dtype=torch.float64)
ln_ce = torch.nn.LayerNorm(d_ce, dtype=torch.float64)  # gain 1, bias 0
with torch.no_grad():
    before = float(relative_residual(X_ce))
    after = float(relative_residual(ln_ce(X_ce)))
growth = after / before
centre = torch.eye(d_ce, dtype=torch.float64) - 1 / d_ce
first_order = float(shared.norm() / (centre @ shared).norm())
print(f"relative residual before LN {before:.1e}, after {after:.1e}: multiplied by "
      f"{growth:.1e}; ||x|| / ||Cx|| = {first_order:.1e}")

# %% tags=["nbval-check-output", "hide-input"]
[
    attnbook.check("LayerNorm counterexample: relative residual after / before",
                   growth, at_least=1e5, digits=2, band=0.3),
    attnbook.check("counterexample: growth / first-order factor ||x|| / ||Cx||",
                   growth / first_order, at_least=0.5, at_most=2.0, digits=2, band=0.1),
]

# %% [markdown]
# ## Summary
#
# * Over $L$ layers of $H$ heads the one-layer cubic bound compounds into the doubly exponential
#   {prf:ref}`thm-deep-bound`; simulated SANs stay below it at every layer (followed below round-off by keeping
#   the residual apart from the shared row, as the proof does), and collapse even faster, with the bound's
#   cubic order.
#   The bound is informative only for inputs already close to rank one ($a\,r_0^2 < 1$).
# * Skip connections break the argument: the identity path survives, and with $W_Q = W_K = 0$ the residual is
#   preserved exactly at every depth.
# * An MLP multiplies the per-layer constant by its Lipschitz constant $\lambda = \|W_1\|_{1,\infty}\|W_2\|_{1,\infty}$
#   ({prf:ref}`lem-mlp`). The measured $\lambda$ is large ({glue:text}`ch04_lambda_lo:.0f` to {glue:text}`ch04_lambda_hi:.0f`). Doubling the MLP
#   weights (four times the $\lambda$) delays collapse below $10^{-8}$ by {glue:text}`ch04_extra_lo:d` to {glue:text}`ch04_extra_hi:d` layers, but it
#   still collapses. The book does not compute the slow-down the bound would allow, so how loose it is here
#   is not measured.
# * LayerNorm is a per-token rescaling on the left and fixed matrices on the right; identical rows stay
#   identical, and with generic weights a SAN with LayerNorm still collapses. It is not a general law: when the
#   shared row is close to a multiple of the all-ones vector, centring removes it and the relative residual can
#   grow by orders of magnitude (the book's construction above). {cite:t}`wu2024role` go further by choosing
#   the value matrices: with LayerNorm, a general class of inputs then need not collapse to rank one.
#
# ## Exercises
#
# 1. Use the recursion $b_l = a_l b_{l-1}^3$ to find, for one random SAN, the largest input residual $r_0$ for which
#    the bound after $L = 5$ layers is below $r_0$.
# 2. Show that with skips, $W_V = 0$ and zero value and output biases the network is the identity (with
#    non-zero biases it shifts every token by the same row, so the residual is unchanged), and find a parameterisation with non-zero
#    $W_Q$, $W_K$, $W_V$ whose residual still never shrinks. (Hint: make $W_V$ map the residual to itself.)
# 3. Replace the post-LN SAN by a pre-LN SAN with skips and compare its residual with the SAN+skip curve above.

# %% [markdown]
# ### A checked exercise
#
# Evaluate one step of the deep bound by hand: for the one-head layer and input residual in `exercises.BOUND_EXAMPLE`, what does the one-layer bound allow for the residual of the layer's output? Put your number in `answer` and run the cell; `exercises.check` says whether it is right and gives a hint if not. A worked solution is in the hidden cell below it.

# %%
from attnbook.booktools import exercises

print(exercises.BOUND_EXAMPLE)
answer = None  # the bound on the output residual
exercises.check("ch04-one-layer-bound", answer)

# %% tags=["hide-cell"]
# worked solution: mu, then gamma, then 4 gamma beta H / sqrt(d_head) r^3
import math

ex = exercises.BOUND_EXAMPLE
r, root_d = ex["residual"], math.sqrt(ex["d_head"])
mu = ex["qk_norm"] * r**2 / root_d
four_gamma = math.exp(2 * mu) * (1 + math.exp(mu))
solution = four_gamma * ex["beta"] * ex["n_heads"] / root_d * r**3
print(f"mu = {mu:.4f}, 4 gamma = {four_gamma:.4f}: "
      f"output residual at most {solution:.3e}")
exercises.solved("ch04-one-layer-bound", solution)

# %% tags=["remove-cell"]
# the box at the top of the page: this run's claims, summarised (attnbook.claims.render)
from attnbook.claims.prose import glue_result

_ = glue_result("ch04_result")
