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
# # Path decomposition
#
# {cite:t}`dong2021attention` do not study a self-attention network (SAN) layer by layer. They first
# rewrite it as a **sum of paths**: an $L$-layer network with $H$ heads per layer is a sum of $H^L$ simple
# networks, each a single chain of attention heads, one per layer. Each chain multiplies the input on the left
# by a product of attention matrices, and such products quickly become rank one. This chapter derives the
# decomposition, checks it to float64 precision on the library's own networks, counts the paths once skip
# connections are added, and watches products of attention matrices along long paths lose rank.
#
# **In this chapter you will**
#
# * derive, layer by layer, that a SAN is $\sum_{\text{paths}} P_{\text{path}} X W_{\text{path}} + \mathbf{1} b^\top$
#   with row-stochastic $P_{\text{path}}$, and prove that products of row-stochastic matrices are row-stochastic;
# * check the decomposition numerically (relative error below $10^{-10}$) with `attnbook.rank.paths`, which
#   enumerates all paths in one batched computation;
# * count paths of each length when skip connections are present, $\binom{L}{k} H^k$, and plot the path-length
#   distribution of BERT-base and of a 6-layer model;
# * measure how far products of attention matrices along sampled paths are from rank one, as paths grow longer.

# %% [markdown]
# :::{admonition} The result, as this run computed it
# :class: tip
# ```{glue:md} ch02_result
# :format: myst
# ```
# Every line is a claim of this page, with its rule, numbers and reason in the tables below and on the [reproduction page](../reproduction.ipynb).
# :::

# %%
import matplotlib.pyplot as plt
import torch

import attnbook
from attnbook.claims import papers
from attnbook.core.attention import SelfAttentionNetwork, gaussian_init_
from attnbook.rank import collapse_figures
from attnbook.rank.paths import (SKIP, all_paths, path_decomposition,
                                 path_length_counts, path_length_fractions,
                                 path_products, rank1_distance, sample_paths,
                                 san_parameters, value_products)

dev = attnbook.setup(seed=0)
sizes = attnbook.preset("path_decomposition")
# the decomposition is checked to 1e-10: float64 throughout
torch.set_default_dtype(torch.float64)
print(dict(sizes))

# %% [markdown]
# ## One layer: fold the output projection into the values
#
# The library's multi-head layer ([chapter 1](01_pure_attention_loses_rank.ipynb)) computes, for each head $h$, $P_h (X W_{V,h} + \mathbf{1} b_{V,h}^\top)$,
# concatenates the heads and applies the output projection $W_O$ with bias $b_O$. Splitting $W_O$ into the
# row blocks $W_{O,h}$ that act on head $h$'s slice,
#
# $$
# \begin{aligned}
# \operatorname{SA}(X) &= \sum_{h=1}^H P_h X \underbrace{W_{V,h} W_{O,h}}_{=: W_h}
#  + \sum_{h=1}^H P_h \mathbf{1} b_{V,h}^\top W_{O,h} + \mathbf{1} b_O^\top \\
#  &= \sum_{h=1}^H P_h X W_h + \mathbf{1} c^\top,
# \qquad c^\top = \sum_h b_{V,h}^\top W_{O,h} + b_O^\top .
# \end{aligned}
# $$ (eq-fold)
#
# The last step uses $P_h \mathbf{1} = \mathbf{1}$: every row of an attention matrix sums to one, so a bias
# row that every token shares stays shared after attention. `san_parameters` reads $P_h$, $W_h$ and $c$ off a
# `SelfAttentionNetwork` (with the residual-branch scale $\alpha$ folded in as well).

# %% [markdown]
# ## Products of row-stochastic matrices
#
# ```{prf:lemma} Products of row-stochastic matrices
# :label: lem-row-stochastic
#
# If $P$ and $Q$ are $n \times n$ matrices with non-negative entries and $P\mathbf{1} = Q\mathbf{1} = \mathbf{1}$,
# then $PQ$ has non-negative entries and $PQ\mathbf{1} = \mathbf{1}$. By induction, any product
# $P^L \cdots P^1$ of row-stochastic matrices is row-stochastic.
# ```
#
# ```{prf:proof}
# Each entry $(PQ)_{ij} = \sum_k P_{ik} Q_{kj}$ is a sum of products of non-negative numbers, so it is
# non-negative. And $(PQ)\mathbf{1} = P (Q \mathbf{1}) = P \mathbf{1} = \mathbf{1}$. The general case follows
# by induction on the number of factors, since $P^L \cdots P^1 = P^L (P^{L-1} \cdots P^1)$.
# ```
#
# Check it on the attention matrices of a random 4-layer, 3-head network, multiplied along every one of its
# $3^4 = 81$ paths:

# %%
torch.manual_seed(0)
n, d = sizes["n_tokens"], sizes["d_model"]
small = SelfAttentionNetwork(4, d, 3, skip=False, mlp=False, layernorm=None)
X0 = torch.randn(n, d)
attn = san_parameters(small, X0)[0]  # (L, H, n, n)
# (81, n, n): P^4_{h4} P^3_{h3} P^2_{h2} P^1_{h1}
P_all = path_products(attn, all_paths(4, 3))
row_sum_error = (P_all.sum(-1) - 1).abs().max().item()
print(f"{P_all.shape[0]} path products; smallest entry {P_all.min():.2e}; largest |row "
      f"sum - 1| {row_sum_error:.1e}")

# %% tags=["nbval-check-output", "hide-input"]
[
    attnbook.check("path products with a negative entry",
                   int((P_all < 0).any(-1).any(-1).sum()), close_to=0, tol=0),
    attnbook.check("path products with a row sum off 1 by more than 1e-12",
                   int(((P_all.sum(-1) - 1).abs() > 1e-12).any(-1).sum()),
                   close_to=0, tol=0),
]


# %% [markdown]
# ## Layer by layer: a sum over paths
#
# Write layer $l$ of a SAN (no skip connections) with {eq}`eq-fold` as
# $X^l = \sum_{h} P^l_h X^{l-1} W^l_h + \mathbf{1} c^{l\top}$, where $P^l_h$ is computed from $X^{l-1}$. Two
# layers:
#
# $$
# \begin{aligned}
# X^2 &= \sum_{h_2} P^2_{h_2}\Big(\sum_{h_1} P^1_{h_1} X W^1_{h_1} + \mathbf{1} c^{1\top}\Big) W^2_{h_2} + \mathbf{1} c^{2\top} \\
# &= \sum_{h_1, h_2} P^2_{h_2} P^1_{h_1} X W^1_{h_1} W^2_{h_2}
#  + \mathbf{1}\Big(c^{1\top} \sum_{h_2} W^2_{h_2} + c^{2\top}\Big),
# \end{aligned}
# $$
#
# again because $P^2_{h_2} \mathbf{1} = \mathbf{1}$. Repeating the step $L$ times gives the theorem.
#
# ```{prf:theorem} Path decomposition
# :label: thm-path-decomposition
#
# (Theorem 2.1 of {cite:t}`dong2021attention`.) An $L$-layer SAN with $H$ heads per layer and no skip connections satisfies
#
# $$
# \begin{gathered}
# \operatorname{SAN}(X) = \sum_{(h_1,\dots,h_L) \in [H]^L} P_{\text{path}}\, X\, W_{\text{path}} + \mathbf{1} b^\top, \\
# P_{\text{path}} = P^L_{h_L} \cdots P^1_{h_1}, \quad W_{\text{path}} = W^1_{h_1} \cdots W^L_{h_L},
# \end{gathered}
# $$ (eq-path-sum)
#
# with $b^\top = \sum_{l=1}^{L} c^{l\top} M^{l+1} \cdots M^{L}$, $M^m = \sum_h W^m_h$. Every $P_{\text{path}}$ is
# row-stochastic. The matrices $P^l_h$ depend on the input (through $X^{l-1}$), so this is an identity for each
# input, not a linearisation.
# ```
#
# ```{prf:proof}
# By induction on $L$. For $L = 1$ it is {eq}`eq-fold`. Assume
# $X^{L-1} = \sum_{(h_1..h_{L-1})} P^{L-1}_{h_{L-1}}\cdots P^1_{h_1} X W^1_{h_1}\cdots W^{L-1}_{h_{L-1}} + \mathbf{1} b_{L-1}^\top$.
# Then $X^L = \sum_{h_L} P^L_{h_L} X^{L-1} W^L_{h_L} + \mathbf{1} c^{L\top}$; distributing the sum, each term of
# $X^{L-1}$ gains one factor $P^L_{h_L}$ on the left and $W^L_{h_L}$ on the right, giving all $H^L$ paths, and
# $P^L_{h_L} \mathbf{1} b_{L-1}^\top W^L_{h_L} = \mathbf{1} b_{L-1}^\top W^L_{h_L}$, so the bias becomes
# $b_L^\top = b_{L-1}^\top M^L + c^{L\top}$, which unrolls to the stated $b$. Row-stochasticity of
# $P_{\text{path}}$ is {prf:ref}`lem-row-stochastic`.
# ```
#
# `path_decomposition` computes all $H^L$ terms $P_{\text{path}} X W_{\text{path}}$ at once: it starts from
# $X$ and at each layer extends every partial path by every head in **one batched matrix product** (shape
# `(H, paths, n, d)`), so there are $L$ products, not $H^L$, and it is faster than a Python loop over paths
# (`python scripts/bench_paths.py` measures by how much on your machine).
# Check the theorem on networks of several depths and widths, biases included:

# %%
def decomposition_error(L, H, skip, seed):
    torch.manual_seed(seed)
    net = SelfAttentionNetwork(L, d, H, skip=skip, mlp=False, layernorm=None)
    with torch.no_grad():
        for p in net.parameters():
            # non-zero biases everywhere, so the bias term is tested too
            p.normal_(0.0, 0.3)
    X = torch.randn(n, d)
    attn, values, biases, _, out = san_parameters(net, X)
    dec = path_decomposition(attn, values, X, biases, skip=skip)
    # each term really is P_path X W_path for the path in the same row
    P, W = path_products(attn, dec.paths), value_products(values, dec.paths)
    term_error = ((P @ X @ W - dec.terms).norm() / dec.terms.norm()).item()
    error = ((dec.total() - out).norm() / out.norm()).item()
    return dec.terms.shape[0], error, term_error


def path_sum_errors(skip):
    errors = {}
    for L, H in sizes["configs"]:
        n_paths, err, term_err = decomposition_error(L, H, skip, seed=L * 10 + H)
        errors[(L, H)] = err
        print(f"L={L} H={H}: {n_paths:5d} paths, relative error of the path sum "
              f"{err:.1e} (terms {term_err:.1e})")
    return errors


no_skip = path_sum_errors(skip=False)

# %% tags=["nbval-check-output", "hide-input"]
attnbook.check(
    "networks (no skips) whose path sum is off by a relative error above 1e-10",
    sum(e > 1e-10 for e in no_skip.values()), close_to=0, tol=0)

# %% [markdown]
# ## Skip connections: paths may skip layers
#
# With a skip connection each layer is $X^l = X^{l-1} + \sum_h P^l_h X^{l-1} W^l_h + \mathbf{1} c^{l\top}$: the
# identity is one more "head", with $P = I$ and $W = I$. Expanding as before, a path now chooses at every layer
# either one of the $H$ heads or the identity, so there are $(H+1)^L$ paths, and the bias row becomes
# $b^\top = \sum_l c^{l\top} (I + M^{l+1}) \cdots (I + M^L)$. The **length** of a path is the number of layers in
# which it goes through a head. A path of length $k$ chooses its $k$ layers and a head in each, so
#
# $$
# \#\{\text{paths of length } k\} = \binom{L}{k} H^k, \qquad \sum_{k=0}^{L} \binom{L}{k} H^k = (H+1)^L .
# $$ (eq-path-count)
#
# {numref}`fig-ch02-paths` draws two of the $(2+1)^3 = 27$ paths of a 3-layer, 2-head network.
#

# %% tags=["hide-input"]
collapse_figures.path_diagram(
    3,
    2,
    {
        "through a head at every layer": (1, 0, 1),
        "one head, two skips": (SKIP, 0, SKIP),
    },
)
plt.show()

# %% [markdown]
# `path_decomposition(..., skip=True)` enumerates these paths (a skipped layer is marked `SKIP` $=-1$); check
# the sum and the count ({numref}`fig-ch02-1`):

# %%
with_skip = path_sum_errors(skip=True)

count_mismatch = 0
for L, H in sizes["configs"]:
    lengths = (all_paths(L, H, skip=True) != SKIP).sum(1)
    histogram = torch.bincount(lengths, minlength=L + 1).tolist()
    count_mismatch += int(histogram != path_length_counts(L, H))
n_configs = len(sizes["configs"])
print("enumerated lengths match C(L,k) H^k in", n_configs - count_mismatch,
      "of", n_configs, "networks")

# %% tags=["nbval-check-output", "hide-input"]
[
    attnbook.check(
        "networks (with skips) whose path sum is off by a relative error above 1e-10",
        sum(e > 1e-10 for e in with_skip.values()), close_to=0, tol=0),
    attnbook.check("networks whose path-length histogram differs from C(L,k) H^k",
                   count_mismatch, close_to=0, tol=0),
]

# %% tags=["hide-input"]
collapse_figures.path_sum_errors(no_skip, with_skip)
plt.show()

# %% [markdown]
# ### How long are the paths of BERT-base?
#
# BERT-base has $L = 12$ layers of $H = 12$ heads: $13^{12} \approx 2.3 \times 10^{13}$ paths. By
# {eq}`eq-path-count` the count grows with $k$ as long as
# $\binom{L}{k+1}H^{k+1} / \binom{L}{k}H^k = H(L-k)/(k+1) > 1$, that is for $k < (HL - 1)/(H + 1)$; for BERT-base
# the counts rise up to $k = 11$, and lengths 11 and 12 tie exactly ($12 \cdot 12^{11} = 12^{12}$). The length of a
# uniformly drawn path is binomial, $\operatorname{Bin}(L, H/(H+1))$, with mean $LH/(H+1)$. Most paths are
# long; {cite:t}`dong2021attention` show it as a histogram peaking at lengths 11 and 12. The comparison's rule,
# stated before the table: the book's most common length (the smaller of ties) reproduces the paper's peak if it
# lies within one layer of it. A 6-layer model with 12
# heads (the shape of the MiniLM model used in [chapter 5](05_pretrained_transformers.ipynb)) and a 6-layer, 2-head model shift the mass to shorter
# lengths ({numref}`fig-ch02-2`):

# %% tags=["hide-input"]
models = {"BERT-base (L=12, H=12)": (12, 12), "MiniLM (L=6, H=12)": (6, 12),
          "small (L=6, H=2)": (6, 2)}
fractions = {name: path_length_fractions(L, H) for name, (L, H) in models.items()}
for name, (L, H) in models.items():
    fr = fractions[name]
    mean = sum(k * f for k, f in enumerate(fr))
    print(f"{name}: {(H + 1) ** L:.3g} paths, mean length {mean:.3f} (L H/(H+1) = "
          f"{L * H / (H + 1):.3f}), "
          f"most common lengths {[k for k, f in enumerate(fr) if f == max(fr)]}")

# %% tags=["hide-input"]
PEAK = papers.number("dong2021", "bert_path_length_peak")
collapse_figures.path_length_shares(fractions, PEAK.value)
plt.show()

# %% tags=["nbval-check-output", "hide-input"]
bert = fractions["BERT-base (L=12, H=12)"]
bert_mode = max(range(13), key=lambda k: (bert[k], -k))  # smallest k among ties
[
    attnbook.compare("BERT-base: most common path length (smallest of ties)", bert_mode,
                     paper=PEAK.value[0], tol=1, source=PEAK.where),
    attnbook.check("BERT-base: fraction of paths of length 11 or 12",
                   bert[11] + bert[12], at_least=0.7),
    attnbook.check("BERT-base: fraction of paths of length at most 6", sum(bert[:7]),
                   at_most=0.01),
]

# %% [markdown]
# ## Long paths are (almost) rank one
#
# A single path maps $X \mapsto P_{\text{path}} X W_{\text{path}}$. If $P_{\text{path}}$ were exactly
# $\mathbf{1}\pi^\top$ for some probability vector $\pi$, the path's output would be
# $\mathbf{1}(\pi^\top X W_{\text{path}})$: every token the same. Products of many row-stochastic matrices
# with positive entries approach such a matrix (the same mechanism as a Markov chain forgetting its start);
# the next chapter shows that in self-attention this happens much faster than for fixed matrices. Here we
# measure it, as {cite:t}`dong2021attention` do for real models, with the relative distance to the best rank-one
# approximation from the SVD $M = \sum_i s_i u_i v_i^\top$:
#
# $$
# \operatorname{dist}_1(M) = \frac{\|M - s_1 u_1 v_1^\top\|_F}{\|M\|_F} = \sqrt{\frac{\sum_{i \ge 2} s_i^2}{\sum_i s_i^2}}
# $$ (eq-rank1-distance)
#
# (`rank1_distance`). We take the attention matrices of a randomly initialised Transformer with BERT-base's
# depth and heads ($L = H = 12$) and width {glue:text}`ch02_rank1_width` (skips, MLPs and LayerNorm keep its deep layers' attention matrices from degenerating; the
# next chapter is about why that matters) and sample paths like the paper: for each layer draw a head
# uniformly, then choose the $L - k$ layers to skip (`sample_paths`; {numref}`fig-ch02-3`).

# %% tags=["hide-input"]
L, H = sizes["rank1_depth"], sizes["rank1_heads"]
block = dict(skip=True, mlp=True, layernorm="post")
d_big = sizes["rank1_d_model"]
net = gaussian_init_(SelfAttentionNetwork(L, d_big, H, **block)).to(dev)
with torch.no_grad():
    X = torch.randn(1, sizes["rank1_tokens"], d_big).to(dev)
    _, _, attns = net(X, return_attention=True)
attn_big = torch.stack([a[0] for a in attns])  # (L, H, n, n)
gen = torch.Generator().manual_seed(0)
distances = {}
for k in range(1, L + 1):
    paths = sample_paths(L, H, k, sizes["n_sampled_paths"], gen)
    # products and SVDs on dev
    distances[k] = rank1_distance(path_products(attn_big, paths)).cpu()
medians = torch.stack([distances[k].median() for k in distances])
print("median distance to rank one by path length:",
      " ".join(f"{m:.1e}" for m in medians.tolist()))

# %% tags=["hide-input"]
collapse_figures.rank1_by_length(distances, heads=H)
plt.show()

# %% tags=["nbval-check-output", "hide-input"]
[
    attnbook.check("median rank-1 distance: length 1 / length 5",
                   (medians[0] / medians[4]).item(), at_least=1e3),
    attnbook.check("fraction of length-12 path products within 1e-12 of rank one",
                   (distances[L] <= 1e-12).double().mean().item(), close_to=1.0, tol=0),
    attnbook.check(
        "lengths (above round-off, median > 1e-13) where the median rank-1 distance "
        "does not fall",
        int(((medians[1:] >= medians[:-1]) & (medians[:-1] > 1e-13)).sum()),
        close_to=0, tol=0),
]

# %% tags=["remove-input"]
from attnbook.claims.prose import glue
from attnbook.rank import deep_bound

# the fall per extra layer while both medians are above round-off, and where it ends
falls = medians[:-1] / medians[1:]
above = medians[1:] > 1e-13
glue("ch02_fall_lo", float(falls[above].min()))
glue("ch02_fall_hi", float(falls[above].max()))
# the first path length whose median is below 1e-13 (lengths count from 1)
glue("ch02_floor_length", deep_bound.first_layer_below(medians, 1e-13) + 1)
glue("ch02_one_matrix", float(medians[0]))
glue("ch02_rank1_width", d_big)
glue("ch02_bert_long", float(bert[11] + bert[12]));

# %% [markdown]
# On this random network the median distance falls by a factor of {glue:text}`ch02_fall_lo:.0f` to {glue:text}`ch02_fall_hi:.0f` per extra layer until
# it falls below $10^{-13}$, at length {glue:text}`ch02_floor_length:d`, near float64's round-off. {cite:t}`dong2021attention`'s companion figure shows the
# same downward trend for the attention matrices of pretrained models; random attention matrices at
# initialisation are close to uniform (a single one is already only {glue:text}`ch02_one_matrix:.2f` from rank one here, in the distance above), so
# their products collapse faster than trained, sharper attention would. [Chapter 5](05_pretrained_transformers.ipynb) looks at real pretrained
# attention.
#
# ## Summary
#
# * A SAN is exactly a sum over $H^L$ paths of $P_{\text{path}} X W_{\text{path}}$ plus a shared bias row
#   ({prf:ref}`thm-path-decomposition`); the bias stays shared because attention matrices are row-stochastic,
#   and so are their products ({prf:ref}`lem-row-stochastic`). `attnbook.rank.paths` reproduces the network from its
#   paths to about $10^{-16}$ relative error, with and without skip connections.
# * With skip connections there are $\binom{L}{k}H^k$ paths of length $k$; for BERT-base
#   {glue:text}`ch02_bert_long:.0%` of the paths are 11 or 12 layers long, and fewer than 1% are 6 layers or shorter.
# * Products of attention matrices along long paths are nearly rank one: each path on its own sends every
#   token to (almost) the same output. Whether the *sum* of paths still does is the question of the next two
#   chapters: without skips every path is long, with skips short paths survive.
#
# ## Exercises
#
# 1. Show that the number of paths of length $k$ is largest at $k^\star = \lceil (HL - 1)/(H + 1) \rceil$ (ties
#    possible) and check it with `path_length_counts` for several $(L, H)$.
# 2. Use `path_decomposition(..., skip=True)` to split the output of a random SAN with skips into the
#    contributions of paths of each length. Which lengths carry most of the output's norm? Does the answer
#    change with the weight scale of `gaussian_init_`?
# 3. Prove that if every $P^l_h$ has all entries at least $\epsilon > 0$, then every column of $P_{\text{path}}$
#    of a path of length $k$ varies by at most $(1 - n\epsilon)^{k}$ between its rows (Dobrushin's ergodicity
#    coefficient). Compare this exponential rate with the boxes above.

# %% [markdown]
# ### A checked exercise
#
# Exercise 1 with numbers: in a stack of $L = 12$ layers with $H = 12$ heads and skip connections, which path length has the most paths? Put your number in `answer` and run the cell; `exercises.check` says whether it is right and gives a hint if not. A worked solution is in the hidden cell below it.

# %%
from attnbook.booktools import exercises

answer = None  # a path length k between 0 and 12
exercises.check("ch02-commonest-length", answer)

# %% tags=["hide-cell"]
# worked solution: C(L, k) H^k paths of length k; the largest count
import math

counts = [math.comb(12, k) * 12**k for k in range(13)]
solution = counts.index(max(counts))
print(f"most common length {solution} ({counts[solution]:.3g} paths); "
      f"(HL - 1) / (H + 1) = {(12 * 12 - 1) / 13:.2f}")
exercises.solved("ch02-commonest-length", solution)

# %% tags=["remove-cell"]
# the box at the top of the page: this run's claims, summarised (attnbook.claims.render)
from attnbook.claims.prose import glue_result

_ = glue_result("ch02_result")
