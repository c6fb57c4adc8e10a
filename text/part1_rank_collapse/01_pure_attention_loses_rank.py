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
# # Pure attention loses rank
#
# A Transformer layer is self-attention plus a skip connection, an MLP and LayerNorm. What if we keep only
# the attention? {cite:t}`dong2021attention` proved that a network made of self-attention alone, a
# *self-attention network* (SAN), loses rank **doubly exponentially** with depth: its output converges,
# "with a cubic rate", to a rank-one matrix whose rows are all the same, whatever the input tokens were.
# This chapter sets up the objects the whole of Part I works with and shows the phenomenon in a few lines of
# code.
#
# **In this chapter you will**
#
# * write a multi-head self-attention layer that returns its attention matrices, and see why they are
#   row-stochastic;
# * measure how far a matrix is from "all rows equal" with the residual $\operatorname{res}(X)$ and the
#   composite $(1,\infty)$ norm of the paper, and prove how the paper's and the official code's versions
#   of the residual relate;
# * watch a pure SAN collapse to machine precision within a handful of layers, each layer multiplying the
#   number of digits to which the tokens agree, while skip connections keep it alive;
# * explore depth, heads, width, weight scale and components with an interactive explorer.

# %% [markdown]
# :::{admonition} The result, as this run computed it
# :class: tip
# ```{glue:md} ch01_result
# :format: myst
# ```
# Every line is a claim of this page, with its rule, numbers and reason in the tables below and on the [reproduction page](../reproduction.ipynb).
# :::

# %%
import math

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch

import attnbook
from attnbook.core.attention import (VARIANTS, MultiHeadSelfAttention,
                                     SelfAttentionNetwork, gaussian_init_)
from attnbook.core import norms
from attnbook.claims import papers
from attnbook.core.norms import norm_1, norm_1_inf, norm_inf, res, residual_by_layer
from attnbook.rank import collapse_figures, deep_bound

dev = attnbook.setup(seed=0)
sizes = attnbook.preset("pure_attention")
# collapse reaches 1e-15: float32 would hide it below 1e-7
torch.set_default_dtype(torch.float64)
print(dict(sizes))

# %% [markdown]
# ## Self-attention networks
#
# A self-attention head maps $n$ tokens $X \in \mathbb{R}^{n \times d}$ to
#
# $$
# \operatorname{SA}_h(X) = P_h X W_{V,h} + \mathbf{1} b_{V,h}^\top,
# $$ (eq-head)
#
# $$
# P_h = \operatorname{softmax}\!\Big(\tfrac{1}{\sqrt{d_{qk}}}\,(X W_{Q,h} + \mathbf{1} b_{Q,h}^\top)
# (X W_{K,h} + \mathbf{1} b_{K,h}^\top)^\top\Big),
# $$ (eq-attn)
#
# with the softmax taken row by row, and a multi-head layer sums its heads,
# $\operatorname{SA}(X) = \sum_h \operatorname{SA}_h(X)$ (the output projection is folded into $W_{V,h}$). A
# SAN of depth $L$ composes $L$ such layers and nothing else.
#
# The fact everything in Part I rests on: every row of $P_h$ is a softmax, so its entries are positive and
# sum to one. $P_h$ is **row-stochastic**, and $P_h X$ replaces every token by a weighted *average* of the
# tokens. Averaging is what makes rows alike. Let us check it on a tiny layer, and check that the library's
# layer computes exactly {eq}`eq-head` and {eq}`eq-attn`.

# %%
layer = MultiHeadSelfAttention(d_model=6, n_heads=2)
X = torch.randn(1, 4, 6)  # one sequence of 4 tokens of width 6
out, P = layer(X, return_attention=True)
print("attention matrices:", tuple(P.shape), "(batch, heads, n, n)")
print("row sums of every P_h:", P.sum(-1).round(decimals=12).unique().tolist())
print("all entries positive:", bool((P > 0).all()))

# by hand, head 0: softmax(Q K^T / sqrt(d_qk)) V, then the output projection
q, k, v = layer.q(X)[..., :3], layer.k(X)[..., :3], layer.v(X)[..., :3]
P0 = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(3), dim=-1)
print("library P_0 equals the formula:", torch.allclose(P[:, 0], P0))

# %% [markdown]
# ## How far from rank one? The residual and the composite norm
#
# A matrix whose rows are all equal is $\mathbf{1} x^\top$ for some $x \in \mathbb{R}^d$. The paper measures
# what is left after removing the best such matrix,
#
# $$
# \operatorname{res}(X) = X - \mathbf{1} x^\top, \qquad x = \arg\min_{x} \|X - \mathbf{1} x^\top\|_{1,\infty},
# $$ (eq-res)
#
# in the composite norm $\|X\|_{1,\infty} = \sqrt{\|X\|_1 \, \|X\|_\infty}$, the geometric mean of the
# largest absolute column sum $\|X\|_1$ and the largest absolute row sum $\|X\|_\infty$. (It is not a norm
# in general: the triangle inequality can fail. The proofs in [chapter 3](03_residual_bound_one_layer.ipynb) only use $\|\cdot\|_1$ and
# $\|\cdot\|_\infty$, which are norms.) Check the two sums by hand on a $2\times 2$ example: columns sum to
# 4 and 6, rows to 3 and 7, so $\|X\|_{1,\infty} = \sqrt{6 \cdot 7}$, which the cell below prints.

# %%
A = torch.tensor([[1.0, -2.0], [3.0, 4.0]])
print(f"||A||_1 = {norm_1(A):.0f}, ||A||_inf = {norm_inf(A):.0f}, "
      f"||A||_(1,inf) = {norm_1_inf(A):.2f}")


# %% [markdown]
# **Which centring vector?** The paper's $x$ is the minimiser in {eq}`eq-res`; the official experiment code
# subtracts the *token mean* $\bar x = \tfrac1n X^\top \mathbf{1}$ instead, and so does this book in every
# experiment (`res(X)` with `center="mean"`; `center="argmin"` solves {eq}`eq-res` by linear programming).
# The two never disagree about collapse, because they are within a factor of two of each other:

# %% [markdown]
# ```{prf:lemma} Mean centring is at most twice the optimal residual
# :label: lem-mean-vs-argmin
#
# For every $X \in \mathbb{R}^{n\times d}$, with $x^\star$ the minimiser in {eq}`eq-res` and $\bar x$ the token mean,
#
# $$
# \|X - \mathbf{1} x^{\star\top}\|_{1,\infty} \;\le\; \|X - \mathbf{1}\bar x^\top\|_{1,\infty} \;\le\; 2\,\|X - \mathbf{1} x^{\star\top}\|_{1,\infty}.
# $$
# ```
#
# ```{prf:proof}
# The left inequality is the definition of $x^\star$. For the right one, let $R = X - \mathbf{1}x^{\star\top}$
# and $m = \tfrac1n R^\top \mathbf{1}$, so that $X - \mathbf{1}\bar x^\top = R - \mathbf{1} m^\top$. Then
# $\|\mathbf{1}m^\top\|_1 = n \max_j |m_j| \le \max_j \sum_i |R_{ij}| = \|R\|_1$ and
# $\|\mathbf{1}m^\top\|_\infty = \sum_j |m_j| \le \tfrac1n \sum_i \sum_j |R_{ij}| \le \|R\|_\infty$.
# By the triangle inequality for the norms $\|\cdot\|_1$ and $\|\cdot\|_\infty$,
# $\|R - \mathbf{1}m^\top\|_p \le 2 \|R\|_p$ for $p \in \{1, \infty\}$; multiply and take the square root.
# ```
#
# The check below computes the ratio $\|X - \mathbf{1}\bar x^\top\|_{1,\infty} / \|X - \mathbf{1}x^{\star\top}\|_{1,\infty}$
# on Gaussian matrices, on heavy-tailed ones (cubed Gaussians), and on a matrix with one outlying token,
# which pulls the mean away from the best centre.

# %%
def centring_ratio(X):
    mean_centred = norm_1_inf(res(X, "mean"))
    optimal = norm_1_inf(res(X, "argmin"))
    return (mean_centred / optimal).item()


g = torch.Generator().manual_seed(1)
outlier = torch.cat([10 * torch.ones(1, 5), torch.zeros(7, 5)])
cases = {
    "Gaussian": [torch.randn(8, 5, generator=g) for _ in range(6)],
    "heavy-tailed": [torch.randn(8, 5, generator=g) ** 3 for _ in range(6)],
    "one outlying token": [outlier + 0.01 * torch.randn(8, 5, generator=g)],
}
ratios = {name: [centring_ratio(X) for X in mats] for name, mats in cases.items()}
for name, r in ratios.items():
    print(f"{name:>20}: ratio from {min(r):.3f} to {max(r):.3f}")
all_ratios = [x for r in ratios.values() for x in r]

# %% tags=["nbval-check-output", "hide-input"]
[
    attnbook.check("mean-centred / optimal residual, smallest ratio", min(all_ratios),
                   at_least=1 - 1e-9),
    attnbook.check("mean-centred / optimal residual, largest ratio", max(all_ratios),
                   at_most=2.0),
]


# %% [markdown]
# The relative residual $\|\operatorname{res}(X)\|_{1,\infty} / \|X\|_{1,\infty}$ is then a scale-free
# measure of how far the tokens are from being all the same: $0$ means collapsed to rank one. It is the
# quantity of the paper's Figure 2 and of this chapter's figures. Strictly, a zero residual means *identical rows*,
# which is more than rank one: $X = u x^\top$ with unequal entries of $u$ has rank one and a non-zero residual. The
# paper's "rank collapse" is the identical-rows kind; later work follows tokens that gather into a few clusters
# rather than one point {cite:p}`geshkovski2023emergence`.
#
# ## A pure SAN collapses, and fast
#
# Take random Gaussian tokens and random networks of depth $L$, with weights drawn from
# $\mathcal N(0, g^2/d_\text{in})$ (the *weight scale* $g = 1$ keeps the size of a vector through a linear
# map), and follow the relative residual layer by layer. Besides the pure SAN, build the variants the paper
# compares, by switching components of the library's block on:
#
# | variant | block |
# |---|---|
# | SAN | $X \mapsto \operatorname{SA}(X)$ |
# | SAN+MLP | $Z = \operatorname{SA}(X)$, $X \mapsto \operatorname{MLP}(Z)$ (the theory's variant of [chapter 4](04_deep_bounds.ipynb); the paper's experiments keep the MLP's own skip and LayerNorm) |
# | SAN+LN | $X \mapsto \operatorname{LN}(\operatorname{SA}(X))$ |
# | SAN+skip | $X \mapsto X + \operatorname{SA}(X)$ |
# | Transformer | $Z = \operatorname{LN}(X + \operatorname{SA}(X))$, $X \mapsto \operatorname{LN}(Z + \operatorname{MLP}(Z))$ (post-LN, like BERT) |
#
# We compute in float64, because the pure SAN reaches the limit of float32 (about $10^{-7}$) within a few
# layers ({numref}`fig-ch01-1`).

# %%
def residual_curves(variant, depth, n_heads, d_model, gain=1.0, n_nets=1, n_inputs=4,
                    n_tokens=32, seed=0):
    # relative residual (mean-centred) of the input and of every layer,
    # shape (n_nets * n_inputs, depth + 1)
    attnbook.seed_everything(seed)
    X = torch.randn(n_inputs, n_tokens, d_model).to(dev)  # drawn on the CPU, run on dev
    curves = []
    for _ in range(n_nets):
        with torch.device(dev):  # built where it runs: fast on a GPU at paper width
            net = SelfAttentionNetwork(depth, d_model, n_heads, **variant)
        gaussian_init_(net, gain)
        curves.append(residual_by_layer(net, X))
    return torch.cat(curves)


keys = ("depth", "n_heads", "d_model", "n_nets", "n_inputs", "n_tokens")
kw = {key: sizes[key] for key in keys}
curves = {name: residual_curves(variant, **kw) for name, variant in VARIANTS.items()}
print({name: tuple(c.shape) for name, c in curves.items()})

# %% tags=["hide-input"]
collapse_figures.residual_by_variant(curves)
plt.show()

# %% [markdown]
# The figure shows the median over all networks and inputs, and the shaded band spans the smallest to the
# largest. The pure SAN, and the SAN with an MLP or a LayerNorm, hit float64 precision within a few layers:
# their outputs are, to every digit the computer keeps, one token repeated $n$ times. The variants with a
# skip connection lose residual too, but slowly, at most geometrically; a post-LN Transformer at
# initialisation also drifts down (Part II is about exactly that drift).
#
# **How fast?** If $r_\ell$ is the relative residual after layer $\ell$, a geometric (exponential) decay
# $r_\ell \approx c\,q^\ell$ adds a fixed number of correct digits per layer, so
# $\log r_{\ell+1} / \log r_\ell \to 1$. The paper's bound (chapters 3 and 4) says the residual contracts
# *cubically*, $r_{\ell+1} \lesssim C r_\ell^3$: the number of digits (at least) triples per layer, and
# $\log r_{\ell+1} / \log r_\ell \to 3$. One ratio per pair of layers mixes the order with the constant
# ($\log r_{\ell+1} = \log C + 3 \log r_\ell$), so we estimate the order $p$ as the slope of the
# least-squares line of $\log r_{\ell+1}$ on $\log r_\ell$ over every pair of consecutive layers whose
# residuals lie between round-off ($10^{-13}$) and $0.9$, pooled over networks and inputs
# (`norms.collapse_order`; the first layer, which starts near 1, is left out). Plotting $\log_{10}(-\log_{10} r_\ell)$ makes the difference
# visible: a doubly exponential decay is a straight line with slope $\log_{10} 3$ ({numref}`fig-ch01-2`).

# %% tags=["hide-input"]
san = curves["SAN"]
fitted = ("SAN", "SAN+MLP", "SAN+LN")
order = {k: norms.collapse_order(curves[k], hi=0.9) for k in fitted}
for k, fit in order.items():
    print(f"{k}: log r(l+1) = {fit['log_C']:.2f} + {fit['order']:.2f} log r(l) "
          f"over {fit['pairs']} layer pairs")
# the first layer below 1e-12 per curve (the depth + 1 where a curve never gets there)
depth_to_floor = torch.tensor([deep_bound.first_layer_below(c, 1e-12) for c in san])
print("first layer with relative residual < 1e-12:",
      sorted(set(depth_to_floor.tolist())))

# %% tags=["hide-input"]
collapse_figures.agreeing_digits(san, shown=6)
plt.show()

# %% [markdown]
# Each vermillion line is one network and input; the dotted line is where the digits run out (float64 keeps
# about 16). Before that, the digits to which all tokens agree grow at least as fast as the dashed segment,
# which has the slope of the paper's cubic rate; faster here, because the fitted constant $C$ is below 1 and
# adds digits at every layer. The fitted line (printed above) separates the order from the
# constant: its slope $p$ is close to 3, for the pure SAN and for the SAN with an MLP or a LayerNorm, while a
# quadratic contraction would give 2 and a geometric one 1. The fit has only a few layers per network to
# work with (a few pairs per curve lie between order one and round-off), so it pools the pairs of all networks and
# inputs; the claims below compare its slope with the paper's exponent under a one-sided rule: the bound
# says the residual contracts *at least* cubically, so an order of 2.5 or more reproduces it (which still tells
# 3 from 2) and a faster collapse would not contradict it. [Chapter 4](04_deep_bounds.ipynb) follows the
# residual below round-off, where its digits keep tripling layer after layer.

# %%
last = sizes["depth"]


def above_round_off(c):
    # networks and inputs whose relative residual at the last layer is still above 1e-12
    return int((c[:, last] > 1e-12).sum())


def slowest_layer_ratio(c):
    # smallest r_{l+1} / r_l over layers, networks and inputs: a geometric decay has a
    # floor q > 0
    return float((c[:, 1:] / c[:, :-1]).min())


# %% tags=["nbval-check-output", "hide-input"]
CUBIC = papers.number("dong2021", "collapse_order")
[
    attnbook.compare("pure SAN: order of collapse p in log r(l+1) = log C + p log r(l)",
        order["SAN"]["order"], paper=CUBIC.value, source=CUBIC.where, reaches=0.5,
        digits=2, band=0.05),
    attnbook.check(
        "SAN+MLP and SAN+LN: order of collapse, the smaller of the two (observed in "
        "these seeded networks; no bound here covers LayerNorm)",
        min(order["SAN+MLP"]["order"], order["SAN+LN"]["order"]), at_least=2.5,
        digits=2, band=0.05),
    attnbook.check("pure SAN: layers until relative residual < 1e-12, worst",
        depth_to_floor.max(), at_most=5),
    attnbook.check("SAN+MLP: networks and inputs above 1e-12 at the last layer",
        above_round_off(curves["SAN+MLP"]), close_to=0, tol=0),
    attnbook.check("SAN+LN: networks and inputs above 1e-12 at the last layer",
        above_round_off(curves["SAN+LN"]), close_to=0, tol=0),
    attnbook.check("SAN+skip: relative residual at layer 8, smallest",
        curves["SAN+skip"][:, 8].min(), at_least=0.1),
    attnbook.check(
        "SAN+skip: smallest one-layer ratio r(l+1)/r(l) (a slow, at most geometric "
        "drift)",
        slowest_layer_ratio(curves["SAN+skip"]), at_least=0.45, digits=2),
    attnbook.check("Transformer: relative residual at layer 8, smallest",
        curves["Transformer"][:, 8].min(), at_least=0.05),
]

# %% [markdown]
# The first table mixes the two kinds of claim the book uses. *Checks* must hold: here, that with MLPs or
# LayerNorm the fitted order stays at least 2.5 in these seeded networks (an observation: [chapter
# 4](04_deep_bounds.ipynb) bounds the MLP's case, and no bound covers LayerNorm's), and that a
# skip connection only lets the residual drift down by a bounded factor per layer (here never more than about
# halving it); a check that fails stops the
# build. The *comparison* sets this book's fitted order beside the paper's exponent 3 under a rule stated in
# advance (at least 2.5, which separates a cubic from a quadratic rate), and says whether it reproduces.
#
# ## Explore
#
# The explorer below redraws the relative residual for any architecture. Try: a larger weight scale (the
# attention becomes peakier, closer to a permutation, and collapse can be delayed, not always (see the
# precomputed grid below): the paper's bound only bites
# when $\beta$, the size of the weights, is small enough relative to the residual); more heads or width; a
# skip connection with and without LayerNorm. The grey curve is always the pure SAN with the same sizes. The
# controls need a running kernel: in the rendered book they show the figure for the default settings only,
# so launch the chapter on Colab or locally to move them. For a reader without a kernel,
# {numref}`fig-ch01-3` below the explorer shows a precomputed grid of its settings: three weight scales for
# each of four architectures.

# %%
controls = dict(
    depth=widgets.IntSlider(value=12, min=1, max=48, description="depth"),
    n_heads=widgets.IntSlider(value=4, min=1, max=8, description="heads"),
    width=widgets.IntSlider(value=64, min=16, max=256, step=16, description="width"),
    gain=widgets.FloatLogSlider(value=1.0, base=2, min=-2, max=2, step=0.25,
                                description="weight scale"),
    skip=widgets.Checkbox(value=False, description="skip connection"),
    mlp=widgets.Checkbox(value=False, description="MLP"),
    layernorm=widgets.Dropdown(options=["none", "post", "pre"], value="none",
                               description="LayerNorm"),
)


def explore(depth, n_heads, width, gain, skip, mlp, layernorm):
    if width % n_heads:
        print(f"width {width} is not divisible by {n_heads} heads: choose another pair")
        return
    here = dict(depth=depth, n_heads=n_heads, d_model=width, gain=gain)
    norm = None if layernorm == "none" else layernorm
    variant = dict(skip=skip, mlp=mlp, layernorm=norm)
    chosen = residual_curves(variant, **here)
    pure = residual_curves(VARIANTS["SAN"], **here)
    collapse_figures.explorer_panel(pure, chosen)
    plt.show()


output = widgets.interactive_output(explore, controls)
sliders, switches = list(controls.values())[:4], list(controls.values())[4:]
widgets.VBox([widgets.HBox([widgets.VBox(sliders), widgets.VBox(switches)]), output])

# %% tags=["hide-input"]
explorer_sizes = dict(depth=12, n_heads=4, d_model=64)
grid = {
    (name, gain): residual_curves(VARIANTS[name], gain=gain, **explorer_sizes)
    for name in ("SAN", "SAN+LN", "SAN+skip", "Transformer")
    for gain in (0.5, 1.0, 2.0)
}
collapse_figures.weight_scale_grid(grid)
plt.show()

# %% [markdown]
# ## Summary
#
# * A self-attention layer multiplies the tokens by row-stochastic matrices: it averages them.
# * The residual $\operatorname{res}(X)$ measures the distance to "all rows equal"; the token-mean centring
#   used in experiments is within a factor 2 of the paper's optimal centring ({prf:ref}`lem-mean-vs-argmin`).
# * A pure SAN collapses to rank one doubly exponentially: in a random network the fitted order of
#   collapse is about 3 (the number of agreeing digits at least triples per layer) until float64 runs out, within a
#   handful of layers. MLPs and LayerNorm do not
#   stop it; skip connections turn it into a slow, at most geometric drift ([chapter 4](04_deep_bounds.ipynb) shows that they can stop it).
#
# The next chapters explain why: the path decomposition ([chapter 2](02_path_decomposition.ipynb)), the one-layer cubic bound proved step by
# step ([chapter 3](03_residual_bound_one_layer.ipynb)), and the deep bound with what skip connections, MLPs and LayerNorm change ([chapter 4](04_deep_bounds.ipynb)).
#
# ## Exercises
#
# 1. Show that a product of row-stochastic matrices is row-stochastic. What does that say about $L$ layers
#    of single-head attention without value matrices?
# 2. With the explorer, find the weight scale at which a 12-layer pure SAN no longer reaches float64
#    precision. Why does a larger scale help? (Hint: what does the softmax of large scores look like?)
# 3. Find a matrix for which the ratio in {prf:ref}`lem-mean-vs-argmin` is as large as you can make it. Is
#    the factor 2 attained?
# 4. Rerun the collapse experiment in float32. At which relative residual do the curves stop, and why?

# %% [markdown]
# ### A checked exercise
#
# Compute the measure of this chapter by hand: the relative residual of the three tokens in `exercises.RESIDUAL_EXAMPLE` (one token per row), centred on their mean. Put your number in `answer` and run the cell; `exercises.check` says whether it is right and gives a hint if not. A worked solution is in the hidden cell below it.

# %%
from attnbook.booktools import exercises

print(torch.tensor(exercises.RESIDUAL_EXAMPLE))
answer = None  # ||res(X)||_(1,inf) / ||X||_(1,inf)
exercises.check("ch01-residual", answer)

# %% tags=["hide-cell"]
# worked solution: centre on the mean token, then the (1, inf) norm of each matrix:
# the square root of (largest absolute column sum) x (largest absolute row sum)
X_ex = torch.tensor(exercises.RESIDUAL_EXAMPLE, dtype=torch.float64)
centred = X_ex - X_ex.mean(dim=0)


def one_inf(A):
    return math.sqrt(A.abs().sum(0).max() * A.abs().sum(1).max())


solution = one_inf(centred) / one_inf(X_ex)
print(f"relative residual {solution:.4f}")
exercises.solved("ch01-residual", solution)

# %% tags=["remove-cell"]
# the box at the top of the page: this run's claims, summarised (attnbook.claims.render)
from attnbook.claims.prose import glue_result

_ = glue_result("ch01_result")
