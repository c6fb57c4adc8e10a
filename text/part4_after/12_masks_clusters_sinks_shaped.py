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
# # What came after: masks, clusters, sinks and shaped attention
#
# The three papers of this book are from 2019-2022. The models people train in 2026 are mostly decoder-only language
# models: they attend *causally*, often within a *sliding window*, they keep a LayerNorm in every block, and their heads
# park attention on a few *sink* tokens. This chapter asks what the book's results say about them, with the follow-up
# work that answered it, each idea as a simulation or a measurement and each result a claim.
#
# **In this chapter you will**
#
# * run the pure self-attention networks of [chapter 1](../part1_rank_collapse/01_pure_attention_loses_rank.ipynb) under
#   causal and sliding-window masks. See the collapse turn from doubly exponential into exponential, and slower
#   still under a window ({cite:t}`wu2024role`).
# * watch tokens on a sphere form a few clusters that last a long time before they merge into one
#   ({cite:t}`geshkovski2023mathematical`).
# * measure how much of each layer of two trained models the skip path carries, as the official rank-collapse code
#   does, and what sink heads add.
# * say when collapse is exponential and when doubly exponential.
# * simulate *shaped* attention, the identity plus a centred softmax ({cite:t}`noci2023shaped`), which keeps the
#   tokens apart at any depth.
#
# The follow-ups are cited for what their abstracts and code say; where the book has not read a theorem's statement,
# it says so and claims nothing about it.

# %% [markdown]
# :::{admonition} The result, as this run computed it
# :class: tip
# ```{glue:md} ch12_result
# :format: myst
# ```
# Every line is a claim of this page, with its rule and numbers in the tables below and on the [reproduction page](../reproduction.ipynb).
# :::

# %%
import math

import matplotlib.pyplot as plt
import torch

import attnbook
from attnbook.claims.prose import glue
from attnbook.core import norms
from attnbook.rank import deep_bound
from attnbook.rank import masked_collapse as mc
from attnbook.rank import sphere_clusters as sc
from attnbook.signal import propagation as prop
from attnbook.signal import shaped_attention as sa

dev = attnbook.setup(seed=0)
sizes = attnbook.preset("after")
torch.set_num_threads(attnbook.core.presets.cpu_threads(2))
print(dict(sizes))

# %% [markdown]
# ## Causal and sliding-window masks
#
# Under a mask, query $i$ attends only to the keys $j$ the mask allows, and the softmax renormalises over them.
# {cite:t}`wu2024role` write, in their abstract, that "although pure masked attention still suffers from exponential
# collapse to a rank one subspace, sparse or local masked attention can provably slow down the collapse rate". The
# book has read their abstract and figure captions, not their theorems, so it states no more than that, and measures.
#
# In {numref}`fig-ch12-masks`, the pure SANs of [chapter 1](../part1_rank_collapse/01_pure_attention_loses_rank.ipynb) (no skip, MLP or LayerNorm; float64) run under four masks. They are
# **full**, **causal** (token $i$ sees tokens $1..i$), a **window** of two tokens on either side, and a **causal
# window** (itself and the two tokens before it). Every mask meets the same networks and inputs. Before the
# numbers, what to expect and how it is checked:
#
# * The relative residual $r_\ell$ of [chapter 1](../part1_rank_collapse/01_pure_attention_loses_rank.ipynb) falls
#   *doubly* exponentially under full attention (order $p \approx 3$ in $\log r_{\ell+1} = \log C + p \log r_\ell$).
# * If Wu et al.'s "exponential" describes the causal mask, its order is near 1 (the check allows 0.8 to 1.3).
# * If local masks slow collapse, both windows end the stack far from round-off, where the causal mask ends. The
#   checks ask for a residual above $10^{-1}$ for the window and above $10^{-5}$ for the causal window, and below
#   $10^{-10}$ for the causal mask.

# %%
curve_kw = {k: sizes[k] for k in ("n_tokens", "d_model", "n_heads", "depth", "n_nets",
                                   "n_inputs", "window")}
curves = {kind: mc.residual_curves(kind, device=dev, **curve_kw) for kind in mc.MASKS}
order = {kind: norms.collapse_order(curves[kind], hi=0.9)["order"]
         for kind in ("full", "causal")}
last = {kind: float(c[:, -1].median()) for kind, c in curves.items()}
print("order of collapse:", {k: round(v, 2) for k, v in order.items()})
print("median relative residual at the last layer:",
      {k: f"{v:.1e}" for k, v in last.items()})

# %% tags=["hide-input"]
fig, ax = plt.subplots(figsize=(6.4, 4.2), layout="constrained")
for kind, c in curves.items():
    ax.plot(c.median(0).values.clamp_min(1e-17), label=kind)
ax.set(yscale="log", xlabel="layer", ylabel="relative residual (median)",
       title="Pure SANs under four masks")
ax.legend()
plt.show()

# %%
# the first token under a causal mask sees only itself: its trajectory does not
# depend on the others, and they collapse onto it
torch.manual_seed(1)
net = mc.pure_san(sizes["depth"], sizes["d_model"], sizes["n_heads"], device=dev)
X = torch.randn(2, sizes["n_tokens"], sizes["d_model"], dtype=torch.float64,
                generator=torch.Generator().manual_seed(1)).to(dev)
others = X.clone()
others[:, 1:] = torch.randn(2, sizes["n_tokens"] - 1, sizes["d_model"],
                            dtype=torch.float64,
                            generator=torch.Generator().manual_seed(2)).to(dev)
causal = mc.attention_mask("causal", sizes["n_tokens"], device=dev)
hidden = mc.masked_hidden(net, X, causal)
first_moved = float((hidden[-1][:, 0] - mc.masked_hidden(net, others, causal)[-1][:, 0])
                    .abs().max())
to_first = mc.distance_to_first_token(hidden)
print(f"token 1 after {sizes['depth']} layers, other tokens swapped: largest change "
      f"{first_moved:.1e}; farthest token from token 1: {to_first[0]:.2f} -> "
      f"{to_first[-1]:.1e} (relative)")

# %% tags=["nbval-check-output", "hide-input"]
[
    attnbook.check("full attention: order of collapse p (doubly exponential: about 3)",
                   order["full"], at_least=2.5, digits=2),
    attnbook.check("causal mask: order of collapse p (exponential: 1)", order["causal"],
                   at_least=0.8, at_most=1.3, digits=2),
    attnbook.check("causal mask: change of token 1's output when the others change",
                   first_moved, close_to=0, tol=0),
    attnbook.check("causal mask: farthest token from token 1 at the last layer below "
                   "1e-3 of where it started (1 = yes)",
                   int(to_first[-1] < 1e-3 * to_first[0]), close_to=1, tol=0),
    attnbook.check("causal mask: median residual at the last layer below 1e-10 "
                   "(1 = yes)", int(last["causal"] < 1e-10), close_to=1, tol=0),
    attnbook.check("window (2 each side): median residual at the last layer",
                   last["window"], at_least=0.1, digits=2),
    attnbook.check("causal window (2 before): median residual at the last layer",
                   last["causal window"], at_least=1e-5, digits=2),
]

# %% tags=["remove-input"]
glue("ch12_order_full", order["full"])
glue("ch12_order_causal", order["causal"])
glue(
    "ch12_factor_causal", mc.decay_per_layer(curves["causal"].median(0).values, hi=0.9)
)
glue(
    "ch12_full_roundoff",
    deep_bound.first_layer_below(curves["full"].median(0).values, 1e-10),
)
glue("ch12_last_window", last["window"])
glue("ch12_last_cwindow", last["causal window"])
# the layers a window needs before the last token depends on the first
glue("ch12_window_cross", mc.layers_to_reach(sizes["n_tokens"], sizes["window"]))
glue("ch12_depth", sizes["depth"]);

# %% [markdown]
# Full attention collapses doubly exponentially (order {glue:text}`ch12_order_full:.1f`): by layer {glue:text}`ch12_full_roundoff:d` the residual is at round-off. Under
# the causal mask the order is {glue:text}`ch12_order_causal:.2f`: the residual shrinks by a constant factor, about {glue:text}`ch12_factor_causal:.2f` per layer,
# exponential as Wu et al. say, and much slower. The reason is visible in the first token: it attends only to itself,
# so its trajectory is fixed by the weights alone (changing every other token does not move it, the third check).
# Every other token is pulled towards it one layer at a time. The last token moves towards the first only through the
# tokens between them, and the second token keeps a weight on itself that does not shrink with the residual. The
# cubic mechanism of [chapter 3](../part1_rank_collapse/03_residual_bound_one_layer.ipynb), where the attention's distance from uniform is itself proportional to the residual,
# needs every token to see every other. Local windows slow the collapse further: after the same depth their residual
# is still {glue:text}`ch12_last_window:.2f` (window) and {glue:text}`ch12_last_cwindow:.1e` (causal window). Not because
# information has not crossed the sequence: each window needs {glue:text}`ch12_window_cross:d` layers for the last token to depend on the first
# (the checked exercise below counts them), and the stack has {glue:text}`ch12_depth:d`. What keeps the residual up is not
# measured here.
#
# Wu et al. also study LayerNorm, and there their abstract says something [chapter 4](../part1_rank_collapse/04_deep_bounds.ipynb) could not: "with proper choice
# of value matrices, a general class of sequences may not converge to a rank one subspace". The dynamics have
# equilibria "with any possible rank between one and full". [Chapter 4](../part1_rank_collapse/04_deep_bounds.ipynb)'s counterexample is a special *input*; theirs
# are chosen *weights*. The book has not reproduced their construction.

# %% [markdown]
# ## Clusters before collapse
#
# {cite:t}`geshkovski2023mathematical` study self-attention as particles: $n$ tokens on the unit sphere, one shared
# layer with $Q = K = V = I$ and an inverse temperature $\beta$, the LayerNorm as the projection back to the sphere, and
# depth as continuous time,
#
# $$
# \dot x_i = P_{x_i}\Big(\sum_j \frac{e^{\beta \langle x_i, x_j\rangle}}{\sum_k e^{\beta \langle x_i, x_k\rangle}}\, x_j\Big),
# \qquad P_x(y) = y - \langle x, y\rangle x .
# $$ (eq-sphere)
#
# Their abstract puts "particular emphasis on long-time clustering behavior". A later paper by the same group
# proves "that although particles collapse to a single cluster in infinite time, they remain trapped near a
# configuration of several clusters for an exponentially long period of time" ({cite:t}`geshkovski2024dynamic`, abstract).
# `sc.simulate` integrates {eq}`eq-sphere` as the authors' code does, with an Euler step and then every token
# renormalised, here on the circle ({numref}`fig-ch12-clusters`), from several initial conditions. Stated before
# the first run, which had one initial condition (the rules over several were written with eight of them known;
# [rules changed after their data](../rule_changes.ipynb)):
#
# * at $\beta = 1$ the tokens should merge into one cluster quickly, from every initial condition;
# * at $\beta = 4$, from at least half of them, a phase of two clusters lasts at least five times as long as it
#   took to form (the first rule also asked it to end in one cluster within the window; now counted, not checked);
# * at $\beta = 9$, several clusters remain at the end of the window, from every initial condition.

# %%
# every beta from sphere_seeds initial conditions (tokens drawn with seeds 0, 1, ...):
# the clusters at every saved time; seed 0's trajectories for the figure
trajectories, counts = {}, {}
for beta in sizes["betas"]:
    runs = [sc.simulate(sizes["n_points"], sizes["sphere_dim"], beta,
                        steps=sizes["sphere_steps"], dt=sizes["dt"],
                        generator=torch.Generator().manual_seed(seed),
                        every=sizes["every"])
            for seed in range(sizes["sphere_seeds"])]
    trajectories[beta] = runs[0]
    counts[beta] = [sc.clusters_over_time(run) for run in runs]
times = [k * sizes["every"] * sizes["dt"] for k in range(len(counts[1.0][0]))]
print({beta: [c[-1] for c in cs] for beta, cs in counts.items()},
      "clusters at the end, per initial condition")

# %% tags=["hide-input"]
fig, (left, right) = plt.subplots(2, 1, figsize=(6.4, 6.6), layout="constrained")
angles = torch.atan2(trajectories[4.0][..., 1], trajectories[4.0][..., 0])
for i in range(angles.shape[1]):
    left.plot(times, angles[:, i], lw=0.6, color="0.3")
left.set(
    xlabel="time", ylabel="angle of each token", title="beta = 4: tokens on the circle"
)
for beta, c in counts.items():
    right.step(times, c[0], where="post", label=f"beta = {beta:g}")
right.set(xlabel="time", ylabel="clusters", yscale="log", title="Number of clusters")
right.legend()
plt.show()

# %%
# seed 0 at beta = 4: when two clusters form and when they merge (inf: not yet)
formed, merged = (sc.first_time(counts[4.0][0], times, k) for k in (2, 1))
# every initial condition: the two-cluster phase over its formation (inf: it lasts to
# the end of the window), and the time to one cluster at beta = 1
phase = [sc.two_cluster_phase(c, times) for c in counts[4.0]]
one_by = [sc.first_time(c, times, 1) for c in counts[1.0]]
print(f"beta = 4, seed 0: two clusters by t = {formed:g}, one by t = {merged:g}")
print("beta = 4: two-cluster phase / its formation:", [f"{p:.1f}" for p in phase])
print("beta = 1: one cluster by t =", one_by)

# %% tags=["nbval-check-output", "hide-input"]
[
    attnbook.check("sphere, beta = 1: time to a single cluster, longest over initial "
                   "conditions", max(one_by), at_most=50),
    attnbook.check("sphere, beta = 4: share of initial conditions whose two-cluster "
                   "phase lasts at least 5 times its formation",
                   sum(p >= 5 for p in phase) / len(phase), at_least=0.5, digits=2),
    attnbook.check("sphere, beta = 9: clusters at the end, fewest over initial "
                   "conditions", min(c[-1] for c in counts[9.0]), at_least=2),
]

# %% tags=["remove-input"]
glue("ch12_formed", formed)
glue("ch12_until", f"until t = {merged:.0f}" if merged < math.inf
     else "past the end of the window")
glue("ch12_t_end", times[-1])
glue("ch12_beta9_fewest", min(c[-1] for c in counts[9.0]))
glue("ch12_sphere_runs", len(phase))
glue("ch12_long_phase", sum(p >= 5 for p in phase))
glue("ch12_still_two", sum(p == math.inf for p in phase));

# %% [markdown]
# From the first initial condition, at $\beta = 4$ two clusters form by $t =$ {glue:text}`ch12_formed:.0f` and last {glue:text}`ch12_until`.
# From {glue:text}`ch12_long_phase:d` of the {glue:text}`ch12_sphere_runs:d` the two-cluster phase lasts at least five times as long
# as it took to form, and from {glue:text}`ch12_still_two:d` it has not ended when the window closes at $t =$ {glue:text}`ch12_t_end:.0f`. At $\beta = 9$
# at least {glue:text}`ch12_beta9_fewest:d` clusters are still apart at the end, from every initial condition. This is collapse in the end, but not Dong et al.'s. Their random, unnormalised layers without a skip
# connection reach one point within a few layers (the full mask above). Here the skip (the small step), the
# normalisation and the shared, symmetric weights make the way to one point pass through a long phase of a few clusters,
# which a model of finite depth may never leave.

# %% [markdown]
# ## How trained models stay away from collapse
#
# The official rank-collapse code has a switch, `--compute_alpha`, that measures for every layer how much of the
# attention sub-block's output the skip path carries. The composite norms of the layer's input $X$ and of the
# self-attention's update $\mathrm{SA}(X)$, summed over up to 15 examples, give
# $\alpha_\ell = \sum\|X\| / (\sum\|X\| + \sum\|\mathrm{SA}(X)\|)$. Its plotting code weights the paths that skip
# layer $\ell$ by $\alpha_\ell$. The code's norm is $\|X\|_1\|X\|_\infty$, without the square root of the paper's
# $\|X\|_{1,\infty}$; the book follows the code (`attnbook.rank.skip_share`). The check, stated first: in a trained
# model the skip path carries more than half of every layer ($\alpha_\ell > 0.5$).
#
# The second mechanism is the *sink*. Many heads put most of their weight on a special token: [SEP] or [CLS] in BERT
# ({cite:t}`clark2019what`: "attention over these special tokens might be used as a sort of 'no-op'"), and the first
# tokens in a language model. {cite:t}`xiao2024efficient` name these attention sinks and attribute them to the
# softmax, "which requires attention scores to sum up to one". A head that attends only to a sink adds the same row to
# every token, a shift that does not change the rank, so with the skip connection it approximates the identity path.
# Over every head of MiniLM (6 layers of 12) we measure each head's sink share (of queries whose largest weight is on a special token).
# We set it against the size of what the head adds (its output's norm over its input's) and against how far its
# output is from one shared row (its relative residual). Two rank correlations were looked at while this section was
# written; both are shown with their one-sided $p$ against no relation, and a trend counts where $p$ is below half of
# 5% (Bonferroni's correction for the two).

# %%
from attnbook import hf
from attnbook.core import text
from attnbook.heads import skip_paths as mt_skip
from attnbook.heads import translation as tr
from attnbook.hf import skip_paths as lm_skip
from attnbook.stats import spearman, welch_t

lm, lm_tok = hf.load_pretrained(hf.minilm_source(), device=dev)
sentences = text.english_sentences()[: sizes["n_sentences"]]
alpha = {
    "all-MiniLM-L6-v2": lm_skip.skip_shares(lm, lm_tok, sentences, sizes["max_length"])
}
mt_model, _, notice = tr.chapter_model(device=dev)  # the active preset's model
print(notice or "translation model of this preset")
mt_verses = tr.analysis_verses(sizes["n_sentences"], mt_model.cfg.max_len)
alpha["EN-ES translation model"] = mt_skip.encoder_skip_shares(
    mt_model, mt_verses.src_ids
)
alpha_paper = {  # the same with the paper's norm, the square root of the code's
    "all-MiniLM-L6-v2": lm_skip.skip_shares(lm, lm_tok, sentences, sizes["max_length"],
                                            norm=norms.norm_1_inf),
    "EN-ES translation model": mt_skip.encoder_skip_shares(mt_model, mt_verses.src_ids,
                                                           norm=norms.norm_1_inf)}
for name, a in alpha.items():
    print(f"{name}: alpha by layer", [round(x, 2) for x in a], "with the paper's norm",
          [round(x, 2) for x in alpha_paper[name]])

# %%
# each MiniLM head: its sink share, the size of what it adds, its relative residual
heads = lm_skip.head_outputs(lm, lm_tok, sentences, sizes["max_length"])
rho_size = spearman(heads["sink"].flatten(), heads["size"].flatten())
rho_residual = spearman(heads["sink"].flatten(), heads["residual"].flatten())
print("sink share against the output's size:", rho_size)
print("sink share against the output's relative residual:", rho_residual)

# %% tags=["nbval-check-output", "hide-input"]
[
    attnbook.check(
        "MiniLM: smallest skip share alpha over layers (official --compute_alpha)",
        min(alpha["all-MiniLM-L6-v2"]),
        at_least=0.5,
        digits=2,
    ),
    attnbook.check(
        "translation model encoder: smallest skip share alpha over layers",
        min(alpha["EN-ES translation model"]),
        at_least=0.5,
        digits=2,
    ),
]

# %% tags=["remove-input"]
glue("ch12_alpha_lm_lo", min(alpha["all-MiniLM-L6-v2"]))
glue("ch12_alpha_lm_hi", max(alpha["all-MiniLM-L6-v2"]))
glue("ch12_alpha_mt_lo", min(alpha["EN-ES translation model"]))
glue("ch12_alpha_mt_hi", max(alpha["EN-ES translation model"]))
glue("ch12_rho_size", rho_size["rho"])
glue("ch12_p_size", rho_size["p_less"])
glue("ch12_rho_res", rho_residual["rho"])
glue("ch12_p_res", rho_residual["p_less"])
glue("ch12_alpha_sqrt", "; ".join(f"{min(a):.2f} to {max(a):.2f} ({name})"
                                   for name, a in alpha_paper.items()))
glue("ch12_skip_larger", "by either norm, the skip path is the larger part of every "
     "layer in both models" if min(map(min, alpha_paper.values())) > 0.5 else "with "
     "the paper's norm, the skip path is not the larger part of every layer")


def sink_says(r, what):  # two correlations looked at: Bonferroni's 5% for one of two
    return (f"heads that attend more to sinks {what}" if r["p_less"] < 0.05 / 2 else
            f"that heads attending more to sinks {what} is not shown")


glue("ch12_sink_size_says", sink_says(rho_size, "add less"))
glue("ch12_sink_res_says", sink_says(rho_residual, "add something closer to one row"));

# %% [markdown]
# The code's $\alpha$ runs from {glue:text}`ch12_alpha_lm_lo:.2f` to {glue:text}`ch12_alpha_lm_hi:.2f` over MiniLM's layers and from {glue:text}`ch12_alpha_mt_lo:.2f` to {glue:text}`ch12_alpha_mt_hi:.2f` over the translation
# encoder's. Its norm compares the squares of the scales, so it overstates the skip path's share; with the paper's
# norm the same layers give {glue:text}`ch12_alpha_sqrt`. So {glue:text}`ch12_skip_larger`. Whether that is how
# trained models keep the short paths that [chapter 7](../part1_rank_collapse/07_path_effectiveness.ipynb) studies is
# not measured here.
#
# The sinks are a weaker story on this evidence. Against the size of what a head adds, its sink share has rank
# correlation {glue:text}`ch12_rho_size:.2f` (one-sided $p =$ {glue:text}`ch12_p_size:.2f`); against how far its output is from one shared row,
# {glue:text}`ch12_rho_res:.2f` ($p =$ {glue:text}`ch12_p_res:.2f`). By the rule, {glue:text}`ch12_sink_size_says`, and {glue:text}`ch12_sink_res_says`. A
# head can attend to a sink for most queries and still do real work for the rest.

# %% [markdown]
# ## Exponential or doubly exponential?
#
# The book has now seen both. Near rank one, with every token attending to every other, collapse is **doubly
# exponential**. The deviation of attention from uniform is itself proportional to the residual, which makes the
# bound cubic ([chapter 3](../part1_rank_collapse/03_residual_bound_one_layer.ipynb)) and the measured order about 3 ([chapter 1](../part1_rank_collapse/01_pure_attention_loses_rank.ipynb); the full mask above, {glue:text}`ch12_order_full:.1f`). It is
# **exponential** whenever something keeps that feedback from closing:
#
# * a causal mask, where the first token is a fixed point the others approach at a rate set by their own weights
#   ({glue:text}`ch12_order_causal:.2f` above);
# * layers that are nearly the identity, as in the circle task of [chapter 6](../part1_rank_collapse/06_circle_task.ipynb), where a trained model merges its tokens geometrically;
#
#  Local masks and shared, normalised
# weights slow it further, to the clusters above. Which regime a model is in is a measurement, not a property of
# attention: fit the order $p$ of $\log r_{\ell+1} = \log C + p \log r_\ell$, as `norms.collapse_order` does.

# %% [markdown]
# ## Shaped attention
#
# [Chapter 8](../part2_signal_propagation/08_collapse_kills_qk_gradients.ipynb) kept the tokens apart by scaling the residual branches with depth. {cite:t}`noci2023shaped` change the
# attention itself. In their abstract, the attention "is modified by centering the Softmax output at identity, and
# scaling the Softmax logits by a width-dependent temperature parameter". The resulting infinite depth-and-width
# limit is a stable stochastic differential equation for the tokens' covariance, "preventing the notorious issues of
# rank degeneracy". With $C = \mathbf 1\mathbf 1^\top / n$, the softmax of zero logits,
#
# $$
# A_{\text{shaped}} = I + \operatorname{softmax}(S / \tau) - C, \qquad \tau = \tau_0 \sqrt d ,
# $$ (eq-shaped)
#
# the form {cite:t}`he2024simplifying` (eq. 5) restate with trainable weights on the three terms. At large width the
# logits are small, the softmax is close to $C$, and a layer moves every token a little instead of averaging them. The
# book simulates pure attention stacks (no skip, no MLP, tokens rescaled to norm $\sqrt d$ after each layer, Gaussian
# weights, several weight draws) with the usual softmax and with {eq}`eq-shaped`, at two widths ({numref}`fig-ch12-shaped`). The checks, stated first for one
# weight draw (and taken over the draws, with the first four known): the softmax stack's token cosine exceeds 0.99 by layer 8
# at both widths, in every draw. The shaped stack's cosine at the last layer stays within 0.1 of its input's at the
# larger width, on average over the draws. Whether it drifts less there than at the smaller width is a finding:
# the difference of the two widths' mean drifts, with a 95% Welch t interval over the draws.

# %%
# token cosine by layer of each kind of stack at each width, one row per weight draw
# (generator seeds 1, 2, ...), on the same inputs; the figure shows the first draw
shaped = {}
for width in sizes["shaped_widths"]:
    X0 = prop.correlated_tokens(sizes["shaped_batch"], sizes["shaped_tokens"], width,
                                0.2, torch.Generator().manual_seed(0),
                                dtype=torch.float64).to(dev)
    for kind in sa.KINDS:
        shaped[kind, width] = torch.stack([
            sa.cosine_by_depth(X0, sizes["shaped_depth"], kind,
                               generator=torch.Generator().manual_seed(1 + draw))
            for draw in range(sizes["shaped_draws"])])
# |last-layer cosine - input cosine| of the shaped stack, per draw
drift = {w: (shaped["shaped", w][:, -1] - shaped["shaped", w][:, 0]).abs()
         for w in sizes["shaped_widths"]}
print({f"d={w}": [round(float(x), 3) for x in v] for w, v in drift.items()},
      "shaped stack: drift of the cosine, per weight draw")

# %% tags=["hide-input"]
fig, ax = plt.subplots(figsize=(6.4, 4.0), layout="constrained")
for (kind, width), c in shaped.items():
    ax.plot(c[0], ls="-" if kind == "shaped" else "--", label=f"{kind}, d = {width}")
ax.set(xlabel="layer", ylabel="token cosine", ylim=(-0.1, 1.05),
       title="Pure attention stacks: softmax against shaped attention")
ax.legend()
plt.show()

# %% tags=["nbval-check-output", "hide-input"]
small, large = sizes["shaped_widths"]
by_width = welch_t(drift[small].tolist(), drift[large].tolist())  # the finding's test
width_claim = attnbook.finding(
    "shaped stack: mean drift, the smaller width minus the larger", by_width["change"],
    interval=by_width["interval"], digits=2,
    test="Welch's t over the weight draws, each width's own variance")
[
    *[
        attnbook.check(f"softmax stack, d = {w}: token cosine at layer 8, smallest "
                       "over weight draws", float(shaped["softmax", w][:, 8].min()),
                       at_least=0.99, digits=3)
        for w in (small, large)
    ],
    attnbook.check("shaped stack, larger width: |last-layer cosine - input cosine|, "
                   "mean over weight draws", float(drift[large].mean()), at_most=0.1,
                   digits=2),
    width_claim,
]

# %% tags=["remove-input"]
glue("ch12_draws", len(drift[large]))
glue("ch12_less_drift", int((drift[small] > drift[large]).sum()))
glue("ch12_largest_drift", float(drift[large].max()))
WIDTH_SAYS = {  # the finding's verdict in words
    "higher": "the smaller width drifts more, beyond the draws' noise",
    "lower": "the smaller width drifts less, beyond the draws' noise",
    "not shown": "that it drifts less at the larger width is not shown (the interval "
                 "contains 0)"}
glue("ch12_width_says", WIDTH_SAYS[width_claim.verdict]);

# %% [markdown]
# On average over the weight draws the shaped stack keeps its cosine at the larger width; by the finding,
# {glue:text}`ch12_width_says`. The larger width drifts less in {glue:text}`ch12_less_drift:d` of the {glue:text}`ch12_draws:d` draws, and its largest drift is
# {glue:text}`ch12_largest_drift:.3f`.

# %% [markdown]
# ## Summary
#
# * Under a causal mask pure attention still collapses, but exponentially, onto the first token's trajectory; sliding
#   windows slow it much more. Full attention alone is doubly exponential.
# * Shared, normalised self-attention on the sphere collapses only in the end: tokens first form a few clusters that
#   last long, longer for a larger inverse temperature.
# * In two trained models the skip path carries the larger part of every layer by the official code's measure,
#   which squares the scales. By a 5% test corrected for the two correlations looked at,
#   {glue:text}`ch12_sink_size_says`.
# * Doubly exponential collapse needs every token to see every other near rank one; otherwise it is exponential or
#   slower, and the order of the fit tells which.
# * Shaped attention keeps the tokens apart at every depth simulated here; by the finding over the weight draws,
#   {glue:text}`ch12_width_says`.
#
# ## Exercises
#
# 1. Run the masked SANs with a larger window. How does the last-layer residual depend on the window, and how does that
#    compare with the number of layers the window needs to cross the sequence?
# 2. In `sc.simulate`, set $\beta = 0$. What does each step do to the tokens, and how many clusters remain?
# 3. Replace the shaped attention's temperature $\tau_0\sqrt d$ by a constant. Does the shaped stack still keep its
#    cosine at the larger width?
#
# ### A checked exercise
#
# How many layers does the causal window of this chapter need at the quick preset (32 tokens, each attending to
# itself and the 2 before it) before the last token depends on the first? Put your number in `answer`;
# `exercises.check` says whether it is right. A worked solution is in the hidden cell below it.

# %%
from attnbook.booktools import exercises

answer = None  # a number of layers
exercises.check("ch12-window-reach", answer)

# %% tags=["hide-cell"]
# worked solution: each layer moves information at most 2 positions forward, and the
# first of 32 tokens is 31 positions from the last
solution = math.ceil((32 - 1) / 2)
print(f"layers: {solution}")
exercises.solved("ch12-window-reach", solution)

# %% tags=["remove-cell"]
# the box at the top of the page: this run's claims, summarised (attnbook.claims.render)
from attnbook.claims.prose import glue_result

_ = glue_result("ch12_result")
