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
# # The one-layer residual bound
#
# [Chapter 1](01_pure_attention_loses_rank.ipynb) showed a pure self-attention network (SAN) collapsing to rank one, and [chapter 2](02_path_decomposition.ipynb) wrote it as a sum
# of paths. This chapter proves the engine behind the doubly exponential collapse of
# {cite:t}`dong2021attention`: for a single head and a single layer, the residual of the output is bounded by
# the **cube** of the residual of the input,
#
# $$
# \|\operatorname{res}(\operatorname{SA}(X))\|_{1,\infty} \;\le\; \frac{4\gamma\beta}{\sqrt{d_{qk}}}\,
# \|\operatorname{res}(X)\|_{1,\infty}^3 .
# $$
#
# The paper leaves $\gamma$ unspecified ("a constant depending on the attention entries"); here we derive
# our own explicit $\gamma$ and $\beta$, prove the bound in eight small steps, and check **every inequality**
# numerically right below it, on thousands of random instances and on adversarial ones found by gradient
# ascent on the ratio left/right with `torch.autograd`.
#
# **In this chapter you will**
#
# * split the attention scores into a part that keeps rank one and a residual part $E$, quadratic in the input's residual;
# * bound the softmax perturbation that $E$ causes, entry by entry and in the $\|\cdot\|_1$ and $\|\cdot\|_\infty$ norms;
# * assemble the cubic bound with an explicit constant, and see which properties of the composite "norm" the proof
#   needs (not the triangle inequality, which fails);
# * compare the bound with reality over a sweep of residual sizes and weight scales: cubic, and loose by a
#   roughly constant factor.

# %% [markdown]
# :::{admonition} The result, as this run computed it
# :class: tip
# ```{glue:md} ch03_result
# :format: myst
# ```
# Every line is a claim of this page, with its rule, numbers and reason in the tables below and on the [reproduction page](../reproduction.ipynb).
# :::

# %%
import functools
import math

import matplotlib.pyplot as plt
import torch

import attnbook
from attnbook.rank import bound_figures, bound_search, one_layer
from attnbook.claims import papers
from attnbook.core.norms import norm_1, norm_1_inf, norm_inf, res

dev = attnbook.setup(seed=0)
sizes = attnbook.preset("residual_bound_one_layer")
# bounds are checked to ratios near 1: float64 throughout
torch.set_default_dtype(torch.float64)
n, d, d_qk = sizes["n_tokens"], sizes["d_model"], sizes["d_qk"]
print(dict(sizes))

# %% [markdown]
# ## Set-up and notation
#
# One head maps $X \in \mathbb{R}^{n\times d}$ to
# $\operatorname{SA}(X) = P X W_V + \mathbf{1} b_V^\top$ with
# $P = \operatorname{softmax}\big(d_{qk}^{-1/2}(XW_Q + \mathbf{1}b_Q^\top)(XW_K + \mathbf{1}b_K^\top)^\top\big)$, row by row
# ($W_V$ includes the output projection, [chapter 2](02_path_decomposition.ipynb)). Two matrix norms: $\|M\|_1$, the largest absolute
# column sum, and $\|M\|_\infty$, the largest absolute row sum. Both are *induced* norms
# ($\|M\|_1 = \max_{\|v\|_1 = 1}\|Mv\|_1$, $\|M\|_\infty = \max_{\|v\|_\infty=1}\|Mv\|_\infty$), so for any
# matrices of compatible shapes
#
# $$
# \begin{gathered}
# \|AB\|_1 \le \|A\|_1\|B\|_1, \qquad \|AB\|_\infty \le \|A\|_\infty\|B\|_\infty, \\
# \|M^\top\|_1 = \|M\|_\infty, \qquad \max_{ij}|M_{ij}| \le \min(\|M\|_1, \|M\|_\infty).
# \end{gathered}
# $$ (eq-norm-facts)
#
# The composite $\|M\|_{1,\infty} = \sqrt{\|M\|_1\|M\|_\infty}$ inherits submultiplicativity (multiply the two
# inequalities and take square roots). Write the input as $X = \mathbf{1}x^\top + R$ for **any** centring
# vector $x$: $R = \operatorname{res}(X)$ for the centring we choose. Everything below holds for every $x$;
# at the end we pick the paper's $\arg\min$ centring or the token mean.
#
# Every symbol of the proof, where it first appears:
#
# | symbol | what it is | first in |
# |---|---|---|
# | $n$, $d$, $d_{qk}$ | number of tokens, width, query/key width | set-up |
# | $X = \mathbf{1}x^\top + R$ | the input: a centring row $x$ repeated, plus the residual $R$ | set-up |
# | $W_Q, W_K, W_V$; $b_Q, b_K, b_V$ | the head's weights and biases ($W_V$ includes the output projection) | set-up |
# | $P$ | the attention matrix (each row sums to one) | set-up |
# | $q$, $k$; $W_{QK}$ | the query and key of the centring row; $W_Q W_K^\top$ | step 1 |
# | $r$ | the part of the scores that is the same in every row (a vector of $n$ scores, not a residual) | step 1 |
# | $E$ | the residual scores, quadratic in $R$ | step 1 |
# | $p$, $\Delta$ | $\operatorname{softmax}(r)$, the attention of the rank-one part; $P - \mathbf{1}p^\top$ | step 2 |
# | $D$ | $\Delta R W_V$, all of the output's residual | step 3 |
# | $m$, $\mu$ | the largest residual score $\max_{ij}\lvert E_{ij}\rvert$, and its bound | step 4 |
# | $Z_i$ | row $i$'s softmax normaliser, relative to $p$ | step 5 |
# | $\kappa$ | the largest $\lvert E_{ij} - \log Z_i\rvert$ | step 6 |
# | $\gamma$, $\beta$ | the lemma's constants | the lemma |
#
# The numerical checks draw random instances with residual scale $s\in[10^{-2}, 10^{0.5}]$ and weight scale
# $w\in[0.1, 3]$ (log-uniform), and then run Adam **ascent** on the log of the ratio left/right over the
# input *and* all weights from several random starts. A step holds numerically if no ratio exceeds 1.

# %%
# sample(batch, gen): X = 1 x^T + s R0 and weights of scale w (s, w log-uniform), with
# leading dimension batch, all drawn from gen
sample = functools.partial(one_layer.sample_instances, n=n, d=d, d_qk=d_qk)


def quantities(X, Wq, Wk, bq, bk, Wv, R=None):
    # every object of the proof, batched; R defaults to the mean-centred residual
    sq = math.sqrt(d_qk)
    P = ((X @ Wq + bq) @ (X @ Wk + bk).transpose(-1, -2) / sq).softmax(-1)
    if R is None:
        R = X - X.mean(-2, keepdim=True)
    ones_x = X - R  # 1 x^T (all rows equal)
    q = ones_x[..., :1, :] @ Wq + bq  # q^T = x^T W_Q + b_Q^T, shape (batch, 1, d_qk)
    # r^T = q^T W_K^T R^T / sqrt(d_qk)
    r = q @ Wk.transpose(-1, -2) @ R.transpose(-1, -2) / sq
    Wqk = Wq @ Wk.transpose(-1, -2)
    E = R @ Wqk @ R.transpose(-1, -2) / sq  # residual scores
    p = r.softmax(-1)  # (batch, 1, n): the row-independent attention
    Delta = P - p  # P - 1 p^T
    SA = P @ X @ Wv
    return dict(
        P=P, R=R, ones_x=ones_x, r=r, Wqk=Wqk, E=E, p=p, Delta=Delta, SA=SA, Wv=Wv
    )


# %%
report = {}  # step -> (worst random ratio, worst adversarial ratio)
ends = {}  # step -> the instances where its ascent ended


def search(step, ratio_fn, seed):
    # largest ratio on n_random random instances, and after Adam ascent on log(ratio)
    # from n_starts starts (attnbook.rank.bound_search); kept in report
    found = bound_search.worst_ratio(
        ratio_fn, sample, n_random=sizes["n_random"], n_starts=sizes["n_starts"],
        steps=sizes["ascent_steps"], lr=0.03, seed=seed,
    )
    report[step] = (found["random"], found["adversarial"])
    ends[step] = found["found"]
    print(step, "worst ratio random / adversarial:",
          [round(v, 3) for v in report[step]])  # 3 digits: the same on every CPU


def check_steps(*steps):
    # the steps hold numerically: no ratio found exceeds 1
    return [attnbook.check(f"step {k}: worst ratio found", max(report[k]), at_most=1.0,
                           digits=2) for k in steps]


# %% [markdown]
# ## Step 1: a rank-one-preserving part and a residual part of the scores
#
# ```{prf:lemma} Score decomposition
# :label: lem-scores
#
# Let $q = W_Q^\top x + b_Q$, $k = W_K^\top x + b_K$, $W_{QK} = W_Q W_K^\top$, and
#
# $$
# r = \tfrac{1}{\sqrt{d_{qk}}} R\, W_K\, q \in \mathbb{R}^n, \qquad E = \tfrac{1}{\sqrt{d_{qk}}} R\, W_{QK} R^\top \in \mathbb{R}^{n\times n}.
# $$ (eq-scores)
#
# Then $P = \operatorname{softmax}(\mathbf{1} r^\top + E)$ exactly.
# ```
#
# ```{prf:proof}
# Substituting $X = \mathbf{1}x^\top + R$: $XW_Q + \mathbf{1}b_Q^\top = \mathbf{1}q^\top + RW_Q$ and
# $XW_K + \mathbf{1}b_K^\top = \mathbf{1}k^\top + RW_K$, so the scaled scores are
#
# $$
# \tfrac{1}{\sqrt{d_{qk}}}\big[\mathbf{1}(q^\top k)\mathbf{1}^\top + (RW_Qk)\mathbf{1}^\top + \mathbf{1}q^\top W_K^\top R^\top + RW_QW_K^\top R^\top\big].
# $$
#
# The first two terms are constant along each row, and a row-wise softmax does not change when a constant is
# added to a row. What remains is $\mathbf{1}r^\top$, the *same* row added to every row (it keeps
# "all rows equal"), plus $E$, which is **quadratic** in the residual $R$.
# ```

# %%
Q = quantities(**sample(sizes["n_random"], torch.Generator().manual_seed(1)))
step1_error = (Q["P"] - (Q["r"] + Q["E"]).softmax(-1)).abs()
print(f"largest |P - softmax(1 r^T + E)| over {sizes['n_random']} random instances: "
      f"{step1_error.max():.1e}")

# %% tags=["nbval-check-output", "hide-input"]
attnbook.check("step 1: instances where |P - softmax(1 r^T + E)| exceeds 1e-12",
               int((step1_error.amax((-1, -2)) > 1e-12).sum()), close_to=0, tol=0)

# %% [markdown]
# ## Step 2: the output is rank one plus $\Delta R W_V$
#
# ```{prf:lemma} Output split
# :label: lem-output-split
#
# Let $p = \operatorname{softmax}(r)$ (a probability vector) and $\Delta = P - \mathbf{1}p^\top$. Then
#
# $$
# \operatorname{SA}(X) = \mathbf{1}\big(W_V^\top(x + R^\top p) + b_V\big)^\top + \Delta R W_V .
# $$ (eq-output-split)
# ```
#
# ```{prf:proof}
# $\operatorname{SA}(X) = P(\mathbf{1}x^\top + R)W_V + \mathbf{1}b_V^\top$. Since $P\mathbf{1} = \mathbf{1}$,
# $P\mathbf{1}x^\top W_V = \mathbf{1}x^\top W_V$; and $PRW_V = \mathbf{1}p^\top RW_V + \Delta R W_V$.
# ```
#
# If $E$ were zero, $P$ would be exactly $\mathbf{1}p^\top$, $\Delta = 0$, and the output would have identical
# rows: all the residual of the output is carried by $\Delta$, the softmax's reaction to $E$.
#
# The split itself is an identity for *any* vector $p$: its proof uses only $P\mathbf{1} = \mathbf{1}$, and the
# second check below confirms it with a wrong $p$. What singles out $p = \operatorname{softmax}(r)$ is that
# $\Delta$ vanishes with $E$: scaling $E$ by $t = 10^{-8}$ moves $P$ from $\mathbf{1}p^\top$ by at most
# $2t\max|E|$ (the bound of step 6 as $m \to 0$), and from the wrong $\mathbf{1}p^\top$ by orders of magnitude more.

# %%
z = (Q["ones_x"][..., :1, :] + Q["p"] @ Q["R"]) @ Q["Wv"]  # one row, the same for all
# b_V = 0 here; it only adds to z
split_error = (Q["SA"] - (z + Q["Delta"] @ Q["R"] @ Q["Wv"])).abs().amax((-1, -2))
# the split holds for any p (it uses only P 1 = 1): here with the uniform p instead
p_wrong = torch.full_like(Q["p"], 1 / n)
z_wrong = (Q["ones_x"][..., :1, :] + p_wrong @ Q["R"]) @ Q["Wv"]
split_wrong = (Q["SA"] - (z_wrong + (Q["P"] - p_wrong) @ Q["R"] @ Q["Wv"])).abs().max()
# what singles out p = softmax(r): Delta vanishes with E. Scale E by t: P moves from
# 1 p^T by at most 2 t max|E| (step 6 as m -> 0), from 1 p_wrong^T by much more
t = 1e-8
P_t = (Q["r"] + t * Q["E"]).softmax(-1)
E_max = t * Q["E"].abs().amax((-1, -2))
moved = ((P_t - Q["p"]).abs().amax((-1, -2)) / E_max).max().item()
moved_wrong = ((P_t - p_wrong).abs().amax((-1, -2)) / E_max).min().item()

# %% tags=["nbval-check-output", "hide-input"]
[
    attnbook.check("step 2: instances where the output split is off by more than 1e-12",
                   int((split_error > 1e-12).sum()), close_to=0, tol=0),
    attnbook.check("step 2 with a wrong p (uniform): largest gap of the split",
                   split_wrong.item(), at_most=1e-12, digits=2, band=1e-12),
    attnbook.check("E scaled by 1e-8: largest |P - 1 p^T| / max|E|, p = softmax(r)",
                   moved, at_most=2.0, digits=2),
    attnbook.check("the same with the wrong p, smallest (must be far above 2)",
                   moved_wrong, at_least=1e3, digits=2),
]

# %% [markdown]
# **A worked instance.** Three tokens in two dimensions, $W_Q = W_K = W_V = I$ and no biases, centred on the
# token mean: every object of steps 1 and 2, small enough to check by hand. The residual scores $E$ are the
# scaled inner products of the residual rows; $P$ equals $\operatorname{softmax}(\mathbf{1}r^\top + E)$ to
# round-off, and the output is the one row $z$ plus $\Delta R W_V$.

# %%
X3 = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])  # three tokens, d = d_qk = 2
x3 = X3.mean(0)  # the centring row: the token mean
R3 = X3 - x3  # the residual
r3 = R3 @ x3 / math.sqrt(2)  # r = R W_K q / sqrt(d_qk), with q = W_Q^T x = x
E3 = R3 @ R3.T / math.sqrt(2)  # E = R W_QK R^T / sqrt(d_qk)
P3 = (X3 @ X3.T / math.sqrt(2)).softmax(-1)
p3 = r3.softmax(-1)
Delta3 = P3 - p3  # P - 1 p^T
z3 = x3 + p3 @ R3  # the row every token shares (W_V = I)
for name, M in dict(R=R3, r=r3, E=E3, P=P3, p=p3, Delta=Delta3, z=z3).items():
    print(f"{name} =", (M.numpy().round(3) + 0.0).tolist())  # + 0.0: no -0.0
worked_gap = max(float((P3 - (r3 + E3).softmax(-1)).abs().max()),
                 float((P3 @ X3 - (z3 + Delta3 @ R3)).abs().max()))

# %% tags=["nbval-check-output", "hide-input"]
attnbook.check("worked instance: steps 1 and 2 hold to round-off (largest gap)",
               worked_gap, at_most=1e-12, digits=2)


# %% [markdown]
# ## Step 3: the residual of the output, for both centrings
#
# ```{prf:lemma} Residual of the output
# :label: lem-res-output
#
# With the paper's $\operatorname{res}_{\arg\min}(Y) = \min_y \|Y - \mathbf{1}y^\top\|_{1,\infty}$ (as a matrix, the
# minimiser's residual) and the token-mean $\operatorname{res}_{\text{mean}}(Y) = Y - \tfrac1n\mathbf{1}\mathbf{1}^\top Y$,
#
# $$
# \begin{gathered}
# \|\operatorname{res}_{\arg\min}(\operatorname{SA}(X))\|_{1,\infty} \le \|\Delta RW_V\|_{1,\infty}, \\
# \|\operatorname{res}_{\text{mean}}(\operatorname{SA}(X))\|_{1,\infty} \le 2\,\|\Delta RW_V\|_{1,\infty}.
# \end{gathered}
# $$ (eq-res-output)
# ```
#
# ```{prf:proof}
# By {eq}`eq-output-split`, $\operatorname{SA}(X) - \mathbf{1}z^\top = \Delta R W_V =: D$ for one particular
# $z$, and the $\arg\min$ is no larger than any particular choice. For the mean: the mean removes every
# $\mathbf{1}z^\top$, so $\operatorname{res}_{\text{mean}}(\operatorname{SA}(X)) = D - \mathbf{1}\bar d^\top$ with
# $\bar d = \tfrac1n D^\top\mathbf{1}$. Column $j$ of $\mathbf{1}\bar d^\top$ sums in absolute value to
# $|\sum_i D_{ij}| \le \|D\|_1$, and its rows sum to $\sum_j|\bar d_j| \le \tfrac1n\sum_{ij}|D_{ij}| \le \|D\|_\infty$.
# The triangle inequality **of each norm separately** gives $\|D - \mathbf{1}\bar d^\top\|_1 \le 2\|D\|_1$ and
# $\|D - \mathbf{1}\bar d^\top\|_\infty \le 2\|D\|_\infty$; multiply and take the square root.
# ```
#
# The mean version is differentiable, so it gets the adversarial treatment; the $\arg\min$ version needs a few
# linear programmes per matrix (`res(..., center="argmin")` minimises the product of the two norms exactly, with a
# certified lower bound), so it is checked on random instances and at the points where the mean version's ascent
# ended.

# %%
def ratio_step3(**kw):
    Q = quantities(**kw)
    return norm_1_inf(res(Q["SA"])) / (2 * norm_1_inf(Q["Delta"] @ Q["R"] @ Q["Wv"]))


search("3 (mean)", ratio_step3, seed=3)
# the argmin centring (linear programmes) on a few random instances and where the
# mean-centring ascent ended (pushed hardest against the neighbouring inequality)
few = sample(sizes["n_argmin"], torch.Generator().manual_seed(30))
Qa = quantities(**{k: torch.cat([v, ends["3 (mean)"][k]]) for k, v in few.items()})
D = Qa["Delta"] @ Qa["R"] @ Qa["Wv"]
argmin_ratio = (norm_1_inf(res(Qa["SA"], center="argmin")) / norm_1_inf(D)).max().item()
report["3 (argmin)"] = (argmin_ratio, float("nan"))
print(f"3 (argmin) worst ratio on {sizes['n_argmin']} random instances and "
      f"{sizes['n_starts']} ascent end points: {argmin_ratio:.3g}")

# %% tags=["nbval-check-output", "hide-input"]
[
    attnbook.check("step 3, mean centring: worst ratio found (random or adversarial)",
                   max(report["3 (mean)"]), at_most=1.0, digits=2),
    attnbook.check("step 3, argmin centring: worst ratio on random instances and the "
                   "ascent's end points", argmin_ratio, at_most=1.0 + 1e-6, digits=2),
    attnbook.check(
        "step 3, mean centring without the factor 2: worst ratio (must exceed 1)",
        2 * max(report["3 (mean)"]), at_least=1.05, digits=2,
    ),
]

# %% [markdown]
# ## Step 4: the residual scores are quadratic in the residual
#
# ```{prf:lemma} Size of $E$
# :label: lem-E
#
# $$
# \begin{aligned}
# \|E\|_1 &\le \tfrac{1}{\sqrt{d_{qk}}}\|R\|_1\|W_{QK}\|_1\|R\|_\infty, \\
# \|E\|_\infty &\le \tfrac{1}{\sqrt{d_{qk}}}\|R\|_\infty\|W_{QK}\|_\infty\|R\|_1,
# \end{aligned}
# $$ (eq-E-bound)
#
# hence $m := \max_{ij}|E_{ij}| \le \|E\|_{1,\infty} \le \mu := \|W_{QK}\|_{1,\infty}\|R\|_{1,\infty}^2/\sqrt{d_{qk}}$.
# ```
#
# ```{prf:proof}
# Submultiplicativity {eq}`eq-norm-facts` applied to $E = RW_{QK}R^\top/\sqrt{d_{qk}}$, with
# $\|R^\top\|_1 = \|R\|_\infty$ and $\|R^\top\|_\infty = \|R\|_1$. Multiplying the two bounds and taking square
# roots gives the composite one; the entry bound is the last fact of {eq}`eq-norm-facts`.
# ```

# %%
sq = math.sqrt(d_qk)


def ratio_step4_one(**kw):
    Q = quantities(**kw)
    return norm_1(Q["E"]) * sq / (norm_1(Q["R"]) * norm_1(Q["Wqk"]) * norm_inf(Q["R"]))


def ratio_step4_inf(**kw):
    Q = quantities(**kw)
    return (
        norm_inf(Q["E"]) * sq / (norm_inf(Q["R"]) * norm_inf(Q["Wqk"]) * norm_1(Q["R"]))
    )


def ratio_step4_mu(**kw):
    Q = quantities(**kw)
    E_max = Q["E"].abs().amax((-1, -2))
    return E_max * sq / (norm_1_inf(Q["Wqk"]) * norm_1_inf(Q["R"]) ** 2)


search("4 (||E||_1)", ratio_step4_one, seed=41)
search("4 (||E||_inf)", ratio_step4_inf, seed=42)
search("4 (m <= mu)", ratio_step4_mu, seed=43)

# %% tags=["nbval-check-output", "hide-input"]
check_steps("4 (||E||_1)", "4 (||E||_inf)", "4 (m <= mu)")


# %% [markdown]
# ## Step 5: the softmax normaliser
#
# Write $P$ relative to $p$: $P_{ij} = \dfrac{e^{r_j + E_{ij}}}{\sum_k e^{r_k + E_{ik}}} = \dfrac{p_j\, e^{E_{ij}}}{Z_i}$
# with $Z_i = \sum_k p_k e^{E_{ik}}$, a $p$-weighted average of $e^{E_{ik}}$.
#
# ```{prf:lemma} Normaliser
# :label: lem-normaliser
#
# $|\log Z_i| \le e^{m}\,(|E|p)_i$ for every row $i$, where $(|E|p)_i = \sum_k |E_{ik}|p_k$.
# ```
#
# ```{prf:proof}
# Lower side, Jensen ($\log$ is concave): $\log Z_i \ge \sum_k p_k E_{ik} \ge -(|E|p)_i$. Upper side,
# $\log y \le y - 1$ and $|e^t - 1| \le |t|e^{|t|}$: $\log Z_i \le \sum_k p_k(e^{E_{ik}} - 1) \le \sum_k p_k|E_{ik}|e^{m}$.
# ```

# %%
def ratio_step5(**kw):
    Q = quantities(**kw)
    E, p = Q["E"], Q["p"]
    logZ = (p * E.exp()).sum(-1).log()  # (batch, n)
    m = E.abs().amax((-1, -2), keepdim=True)[..., 0]
    right = m.exp() * (E.abs() * p).sum(-1)
    return (logZ.abs() / right).amax(-1)


search("5", ratio_step5, seed=5)

# %% tags=["nbval-check-output", "hide-input"]
attnbook.check("step 5: worst ratio found", max(report["5"]), at_most=1.0, digits=2)


# %% [markdown]
# ## Step 6: the softmax perturbation, entry by entry
#
# ```{prf:lemma} Entrywise perturbation
# :label: lem-entrywise
#
# Let $\kappa = \max_{ij}|E_{ij} - \log Z_i|$. Then $\kappa \le 2m$ and
#
# $$
# |\Delta_{ij}| \le e^{\kappa}\, p_j\big(|E_{ij}| + e^{m}(|E|p)_i\big).
# $$ (eq-entrywise)
# ```
#
# ```{prf:proof}
# $Z_i$ is an average of $e^{E_{ik}}$, so $\log Z_i \in [\min_k E_{ik}, \max_k E_{ik}]$ and
# $|E_{ij} - \log Z_i| \le 2m$. Then $\Delta_{ij} = P_{ij} - p_j = p_j(e^{E_{ij} - \log Z_i} - 1)$, and
# $|e^t - 1| \le |t|e^{|t|}$ with $|t| \le |E_{ij}| + |\log Z_i|$ and {prf:ref}`lem-normaliser`.
# ```

# %%
def parts6(kw):
    Q = quantities(**kw)
    E, p = Q["E"], Q["p"]
    logZ = (p * E.exp()).sum(-1, keepdim=True).log()
    m = E.abs().amax((-1, -2), keepdim=True)
    kappa = (E - logZ).abs().amax((-1, -2), keepdim=True)
    return Q, E, p, m, kappa


def ratio_step6(**kw):
    Q, E, p, m, kappa = parts6(kw)
    right = kappa.exp() * p * (E.abs() + m.exp() * (E.abs() * p).sum(-1, keepdim=True))
    return (Q["Delta"].abs() / right).amax((-1, -2))


def ratio_step6_kappa(**kw):
    Q, E, p, m, kappa = parts6(kw)
    return (kappa / (2 * m))[..., 0, 0]


search("6 (entrywise)", ratio_step6, seed=6)
search("6 (kappa <= 2m)", ratio_step6_kappa, seed=61)

# %% tags=["nbval-check-output", "hide-input"]
check_steps("6 (entrywise)", "6 (kappa <= 2m)")


# %% [markdown]
# ## Step 7: the perturbation in norm
#
# ```{prf:lemma} $\Delta$ is as small as $E$
# :label: lem-Delta
#
# $\|\Delta\|_1 \le e^{\kappa}(1 + e^{m})\|E\|_1$ and $\|\Delta\|_\infty \le e^{\kappa}(1 + e^{m})\|E\|_\infty$;
# hence $\|\Delta\|_{1,\infty} \le e^{2m}(1+e^{m})\,\|E\|_{1,\infty}$.
# ```
#
# ```{prf:proof}
# Rows: summing {eq}`eq-entrywise` over $j$ with $\sum_j p_j = 1$ gives
# $\sum_j|\Delta_{ij}| \le e^{\kappa}(1 + e^{m})(|E|p)_i \le e^{\kappa}(1+e^{m})\max_k|E_{ik}| \le e^\kappa(1+e^m)\|E\|_\infty$.
# Columns: summing over $i$ and using $p_j \le 1$,
# $\sum_i|\Delta_{ij}| \le e^{\kappa}\big(\sum_i|E_{ij}| + e^{m}\sum_k p_k\sum_i|E_{ik}|\big) \le e^{\kappa}(1+e^{m})\|E\|_1$.
# Finally $\kappa \le 2m$ ({prf:ref}`lem-entrywise`).
# ```
#
# Note what made the column bound work: the shift $\log Z_i$ was bounded by a $p$-average of row $i$ of $|E|$,
# not by its maximum. With the cruder $|\log Z_i| \le m$ the column sums would pick up a factor $n$.

# %%
def ratio_step7(norm):
    def ratio(**kw):
        Q, E, p, m, kappa = parts6(kw)
        c = (kappa.exp() * (1 + m.exp()))[..., 0, 0]
        return norm(Q["Delta"]) / (c * norm(E))

    return ratio


search("7 (||.||_1)", ratio_step7(norm_1), seed=71)
search("7 (||.||_inf)", ratio_step7(norm_inf), seed=72)

# %% tags=["nbval-check-output", "hide-input"]
check_steps("7 (||.||_1)", "7 (||.||_inf)")


# %% [markdown]
# ## Step 8: Hölder-type submultiplicativity of the composite norm
#
# ```{prf:lemma} Submultiplicativity
# :label: lem-submult
#
# $\|\Delta R W_V\|_{1,\infty} \le \|\Delta\|_{1,\infty}\,\|R\|_{1,\infty}\,\|W_V\|_{1,\infty}$.
# ```
#
# ```{prf:proof}
# $\|\Delta RW_V\|_1 \le \|\Delta\|_1\|R\|_1\|W_V\|_1$ and the same with $\infty$ {eq}`eq-norm-facts`; multiply
# and take the square root.
# ```

# %%
def ratio_step8(**kw):
    Q = quantities(**kw)
    return norm_1_inf(Q["Delta"] @ Q["R"] @ Q["Wv"]) / (
        norm_1_inf(Q["Delta"]) * norm_1_inf(Q["R"]) * norm_1_inf(Q["Wv"])
    )


search("8", ratio_step8, seed=8)

# %% tags=["nbval-check-output", "hide-input"]
attnbook.check("step 8: worst ratio found", max(report["8"]), at_most=1.0, digits=2)


# %% [markdown]
# ## The lemma
#
# Chaining steps 3, 8, 7 and 4 (and $m \le \mu$, with $t \mapsto e^{2t}(1+e^t)$ increasing):
#
# ```{prf:lemma} One layer, one head: cubic residual bound (this book's constants)
# :label: lem-one-layer
#
# Let $\beta = \|W_{QK}\|_{1,\infty}\|W_V\|_{1,\infty}$, $\mu = \|W_{QK}\|_{1,\infty}\|\operatorname{res}(X)\|_{1,\infty}^2/\sqrt{d_{qk}}$
# and $\gamma = \tfrac14 e^{2\mu}(1 + e^{\mu})$. With the paper's $\arg\min$ residual on both sides,
#
# $$
# \|\operatorname{res}(\operatorname{SA}(X))\|_{1,\infty} \le \frac{4\gamma\beta}{\sqrt{d_{qk}}}\,\|\operatorname{res}(X)\|_{1,\infty}^3 ,
# $$ (eq-one-layer)
#
# and with the token-mean residual on both sides the same holds with $8\gamma\beta$ in place of $4\gamma\beta$.
# As the residual shrinks, $\mu \to 0$ and $\gamma \to \tfrac12$: in the cubic regime the constant is $4\gamma \approx 2$.
# ```
#
# ```{prf:proof}
# Take $R = \operatorname{res}(X)$ for the chosen centring. Then
# $\|\operatorname{res}(\operatorname{SA}(X))\| \le c\,\|\Delta RW_V\|$ ({prf:ref}`lem-res-output`, $c = 1$ or $2$)
# $\le c\,\|\Delta\|\,\|R\|\,\|W_V\|$ ({prf:ref}`lem-submult`)
# $\le c\, e^{2m}(1 + e^m)\|E\|\,\|R\|\,\|W_V\|$ ({prf:ref}`lem-Delta`)
# $\le c\, e^{2\mu}(1+e^{\mu})\,\|W_{QK}\|\,\|R\|^3\,\|W_V\|/\sqrt{d_{qk}}$ ({prf:ref}`lem-E`), all norms $\|\cdot\|_{1,\infty}$.
# ```
#
# **Compared with the paper.** {cite:t}`dong2021attention` state the bound with
# $\|W_{QK}\|_1\|W_V\|_{1,\infty} \le \beta$ and an unspecified $\gamma$. Our $\beta$ uses
# $\|W_{QK}\|_{1,\infty}$ instead of $\|W_{QK}\|_1$, because the row-sum half of the argument
# ({eq}`eq-E-bound`, right) needs $\|W_{QK}\|_\infty$; and our $\gamma$ is explicit. The bias terms
# $b_Q, b_K, b_V$ do not enter at all: they only change $r$ and the shared row $z$. Check the whole lemma
# (mean centring, differentiable, so adversarially):

# %%
def ratio_lemma(**kw):
    # observed output residual over the lemma's bound (one_layer.lemma_bound:
    # 8 gamma beta / sqrt(d_qk) ||R||^3 with the token-mean residual)
    Q = quantities(**kw)
    bound = one_layer.lemma_bound(Q["Wqk"], Q["Wv"], Q["R"], d_qk, center="mean")
    return norm_1_inf(res(Q["SA"])) / bound


search("lemma (mean)", ratio_lemma, seed=9)
# the paper's argmin centring on both sides, on step 3's random instances and where the
# mean lemma's ascent ended
pool = {k: torch.cat([v, ends["lemma (mean)"][k]]) for k, v in few.items()}
R_arg = res(pool["X"], center="argmin")
Qa = quantities(**pool, R=R_arg)
bound_arg = one_layer.lemma_bound(Qa["Wqk"], Qa["Wv"], R_arg, d_qk, center="argmin")
lemma_argmin = (norm_1_inf(res(Qa["SA"], center="argmin")) / bound_arg).max().item()
report["lemma (argmin)"] = (lemma_argmin, float("nan"))
print(f"lemma (argmin) worst ratio on {sizes['n_argmin']} random instances and "
      f"{sizes['n_starts']} ascent end points: {lemma_argmin:.3g}")

# %% tags=["nbval-check-output", "hide-input"]
[
    attnbook.check("one-layer lemma, mean centring: worst ratio observed/bound",
                   max(report["lemma (mean)"]), at_most=1.0, digits=2),
    attnbook.check("one-layer lemma, argmin centring: worst ratio observed/bound",
                   lemma_argmin, at_most=1.0, digits=2),
]

# %% [markdown]
# Every step at a glance: the worst ratio left/right found on random instances and by gradient ascent
# (adversarial). A bar at 1 means the inequality is tight somewhere (for example step 8 is attained by
# rank-one-like matrices and step 4 by aligned vectors); none exceeds 1 ({numref}`fig-ch03-1`).

# %% tags=["hide-input"]
bound_figures.step_ratios(report)
plt.show()

# %% [markdown]
# ## The composite "norm" is not a norm
#
# The proof never used the triangle inequality for $\|\cdot\|_{1,\infty}$, only submultiplicativity and the
# triangle inequality of $\|\cdot\|_1$ and $\|\cdot\|_\infty$ separately. That matters, because the composite
# one fails it: for $A = \begin{pmatrix}1&1\\0&0\end{pmatrix}$ and $B = A^\top$, $\|A\|_{1,\infty} = \|B\|_{1,\infty} = \sqrt{2}$ but
# $\|A + B\|_{1,\infty} = 3 > 2\sqrt2$.

# %%
A = torch.tensor([[1.0, 1.0], [0.0, 0.0]])
B = A.T
lhs, rhs = norm_1_inf(A + B).item(), (norm_1_inf(A) + norm_1_inf(B)).item()
print(f"||A+B|| = {lhs:.4f} > ||A|| + ||B|| = {rhs:.4f}")

# %% tags=["nbval-check-output", "hide-input"]
attnbook.check(
    "triangle inequality of the composite norm: ||A+B|| / (||A|| + ||B||)",
    lhs / rhs,
    at_least=1.05,
)

# %% [markdown]
# (For $H$ heads, [chapter 4](04_deep_bounds.ipynb) therefore bounds $\|\cdot\|_1$ and $\|\cdot\|_\infty$ of the sum of heads separately
# and only then combines them.)
#
# ## Which residual where
#
# The paper defines $\operatorname{res}$ with the $\arg\min$ centring; the official code, and this book's
# experiments, subtract the token mean. [Chapter 1](01_pure_attention_loses_rank.ipynb) showed $\|\operatorname{res}_{\arg\min}\| \le
# \|\operatorname{res}_{\text{mean}}\| \le 2\|\operatorname{res}_{\arg\min}\|$. Because every step above holds for
# *any* centring $x$ of the input, the lemma holds with the $\arg\min$ residual on both sides (the paper's
# statement) and with the mean residual on both sides at the cost of the factor 2 of step 3. The proof
# would not go through without the 2: with it removed, step 3's worst ratio above exceeds 1.
#
# ## Bound versus reality
#
# How tight is {eq}`eq-one-layer`? Fix random weights, fix a direction $R_0$ and sweep $X = \mathbf{1}x^\top + sR_0$
# over $s$, for three weight scales (so three values of $\beta$). Observed: $\|\operatorname{res}_{\text{mean}}(\operatorname{SA}(X))\|$;
# bound: the mean-centred version ($8\gamma\beta/\sqrt{d_{qk}}$) ({numref}`fig-ch03-2`). The rules, stated
# before the sweep: the comparison with the paper's cubic rate is [chapter 1](01_pure_attention_loses_rank.ipynb)'s, one-sided (a log-log slope of at
# least 2.5 reproduces it; a steeper fall would not contradict a bound). The checks ask more of one layer: the
# leading term of the output's residual is exactly cubic in $s$, so in the cubic regime every slope lies
# within 0.05 of 3.

# %%
scales = torch.logspace(-3, 0.5, sizes["sweep_points"])
# per weight scale, n_sweep_nets random heads on X = 1 x^T + s R0 over the scales s:
# input residual, observed output residual and the lemma's bound (one_layer.lemma_bound)
sweep = one_layer.bound_sweep(scales, [0.5, 1.0, 2.0], sizes["n_sweep_nets"],
                              torch.Generator().manual_seed(11), n=n, d=d, d_qk=d_qk)
# cubic regime (s <= 1e-2): log-log slopes, bound / observed; worst observed / bound
summary = one_layer.sweep_summary(sweep, scales <= 1e-2)
slopes, gaps, worst = summary["slopes"], summary["gaps"], summary["worst"]
print(f"log-log slopes in the cubic regime: {slopes.min():.3f} .. {slopes.max():.3f}")
print(f"bound / observed in the cubic regime: median {gaps.median():.0f}, range "
      f"{gaps.min():.0f} .. {gaps.max():.0f}")

# %% tags=["hide-input"]
bound_figures.bound_vs_reality(sweep)
plt.show()

# %% tags=["nbval-check-output", "hide-input"]
CUBIC = papers.number("dong2021", "collapse_order")
[
    attnbook.check("log-log slope of observed residual, smallest (cubic regime)",
                   slopes.min().item(), at_least=2.95),
    attnbook.check("log-log slope of observed residual, largest (cubic regime)",
                   slopes.max().item(), at_most=3.05),
    attnbook.compare("log-log slope of observed residual, median (cubic regime)",
                     slopes.median().item(), paper=CUBIC.value, source=CUBIC.where,
                     reaches=0.5, digits=2, band=0.05),
    attnbook.check("sweep: worst observed / bound", worst, at_most=1.0, digits=2),
    attnbook.check("sweep: bound / observed in the cubic regime, smallest",
                   gaps.min().item(), at_least=1.0, digits=2),
]

# %% tags=["remove-input"]
from attnbook.claims.prose import glue

glue("ch03_gap_median", float(gaps.median()));

# %% [markdown]
# The observed residual follows slope 3 for small residuals, as the lemma predicts, and bends below it once
# the residual is of order one (the softmax saturates); the bound bends up there, because its $\gamma$ grows
# with the scores. The bound has the right slope but
# sits a roughly constant factor above the observation (in the cubic regime a factor of
# {glue:text}`ch03_gap_median:.0f` at the median): each of the eight steps loses a little, and norms of products are
# rarely products of norms for random matrices. The cubic *rate* is real; the constant is pessimistic.
#
# ## Summary
#
# * The scores split into a part that adds the same row to every row ($\mathbf{1}r^\top$, harmless for
#   rank one) and a residual part $E = RW_{QK}R^\top/\sqrt{d_{qk}}$, quadratic in the residual
#   ({prf:ref}`lem-scores`).
# * The softmax's reaction $\Delta = P - \mathbf{1}p^\top$ is at most $e^{2m}(1+e^m)$ times $E$ in both the
#   column-sum and row-sum norms ({prf:ref}`lem-Delta`), and the output's residual is $\Delta RW_V$
#   ({prf:ref}`lem-output-split`): one more factor of $R$, so cubic overall ({prf:ref}`lem-one-layer`), with
#   the explicit constant $4\gamma = e^{2\mu}(1+e^\mu) \to 2$.
# * Every inequality was checked on random and adversarial instances; none was violated, several are tight.
#   The composite norm is not a norm, and the proof never needs it to be.
#
# ## Exercises
#
# 1. Replace the bound $|\log Z_i| \le e^m(|E|p)_i$ in step 5 by the cruder $|\log Z_i| \le m$ and redo step 7.
#    Find (with `worst_ratio`) an instance where the resulting column-sum bound needs a factor growing with $n$.
# 2. Where does the bound lose most? Draw instances with `one_layer.sample_instances` (as the step checks above
#    do), print the ratio right/left of each step on them and find the step with the largest slack.
# 3. For $\mu \le 1$, show $\gamma \le \tfrac14 e^2(1+e)$, and compare with the paper's assumption that the
#    attention entries are bounded.

# %% [markdown]
# ### A checked exercise
#
# The lemma's constant $\gamma(\mu)$ grows with $\mu$. What is its largest value when $\mu \le 1$ (exercise 3
# above asks you to show a bound on it)? Put your number in `answer`; `exercises.check` says whether it is
# right and gives a hint if not. A worked solution is in the hidden cell below it.

# %%
from attnbook.booktools import exercises

answer = None  # the largest gamma for mu <= 1
exercises.check("ch03-gamma", answer)

# %% tags=["hide-cell"]
# worked solution: gamma(mu) = e^(2 mu) (1 + e^mu) / 4 increases with mu, so on [0, 1]
# its largest value is at mu = 1: e^2 (1 + e) / 4
solution = math.exp(2) * (1 + math.e) / 4
print(f"largest gamma for mu <= 1: {solution:.3f}")
exercises.solved("ch03-gamma", solution)

# %% tags=["remove-cell"]
# the box at the top of the page: this run's claims, summarised (attnbook.claims.render)
from attnbook.claims.prose import glue_result

_ = glue_result("ch03_result")
