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
# # Pruning heads: hard-concrete gates and importance
#
# [Chapter 10](10_translation_model_and_head_roles.ipynb) found the paper's positional and syntactic heads in MiniLM (no rare-token head),
# and none by the paper's criteria in the book's translation model. {cite:t}`voita2019analyzing`
# asked the converse question: if we *remove* heads, which ones does the model keep? They give every head a
# learnable gate that can be exactly zero, fine-tune with a penalty on the number of open gates, and watch
# which heads survive. {cite:t}`michel2019sixteen` prune the same way in spirit but without training: they
# score each head by how much the loss reacts to it and remove the least important ones step by step.
#
# **In this chapter you will**
#
# * build the hard-concrete gate of {cite:t}`louizos2018learning`. Check its closed-form probabilities of
#   being exactly closed and exactly open against samples.
# * write the pruning objective $L = L_\text{xent} + \lambda L_C$ and see which normalisation the official code uses.
# * gate all-MiniLM-L6-v2's 72 heads through a hook on its attention output projection. Compare gates with
#   Michel et al.'s importance on how far the sentence embeddings move.
#
# The chapter goes on over three more pages: [the translation model's encoder](11_pruning_the_translation_encoder.ipynb), [every kind of attention and Michel et al.'s importance](11_pruning_kinds_and_importance.ipynb), and [pruned models against the same shapes trained from scratch](11_pruning_versus_scratch.ipynb).

# %% [markdown]
# :::{admonition} The result, as this run computed it
# :class: tip
# ```{glue:md} ch11_result
# :format: myst
# ```
# Every line is a claim of this page, with its rule, numbers and reason in the tables below and on the [reproduction page](../reproduction.ipynb).
# :::

# %%
import matplotlib.pyplot as plt
import numpy as np
import torch

import attnbook
from attnbook.heads import gates
from attnbook.heads import importance as pruning
from attnbook.heads import pruning_figures as figs
from attnbook import hf
from attnbook.claims.prose import glue

dev = attnbook.setup(seed=0)
sizes = attnbook.preset("pruning_heads")
# two threads, or one where OMP_NUM_THREADS asks for one (two chapters side by side)
torch.set_num_threads(attnbook.core.presets.cpu_threads(2))
print(dict(sizes))

# %% [markdown]
# ## A gate that can be exactly zero
#
# A head's output is multiplied by a gate $g_h \in [0, 1]$. To prune, we want $g_h = 0$ exactly, and we want
# to *learn* which gates to close with gradient descent. The binary choice has no gradient, so
# {cite:t}`louizos2018learning` relax it with the **hard-concrete** distribution: with a learned
# $\log\alpha_h$, a temperature $\beta$ and a stretch interval $(l, r)$ with $l < 0 < 1 < r$,
#
# $$
# \begin{gathered}
# u \sim \mathcal U(0,1), \\
# s = \sigma\!\Big(\frac{\log u - \log(1-u) + \log\alpha_h}{\beta}\Big), \\
# g_h = \min\big(1, \max(0,\; s\,(r-l) + l)\big).
# \end{gathered}
# $$ (eq-hard-concrete)
#
# The stretched $s(r-l)+l$ spills over $[0,1]$ on both sides, and clipping puts a point mass on exactly 0
# and exactly 1; in between, $g_h$ is a smooth function of $\log\alpha_h$, so the reparameterised sample
# passes gradients. The official code of {cite:t}`voita2019analyzing` uses $\beta = 0.33$ and
# $(l, r) = (-0.1, 1.1)$, and at evaluation the deterministic gate $\min(1, \max(0, 1.2\,\sigma(\log\alpha_h) - 0.1))$.
#
# Because $\log u - \log(1-u)$ is a standard logistic variable, the probability of a closed gate has a
# closed form: $g_h = 0$ exactly when $s \le -l/(r-l)$, that is
#
# $$
# \begin{gathered}
# P(g_h = 0) = \sigma\!\Big(\beta \log\frac{-l}{r} - \log\alpha_h\Big), \\
# P(g_h \ne 0) = \sigma\!\Big(\log\alpha_h - \beta\log\frac{-l}{r}\Big), \\
# P(g_h = 1) = \sigma\!\Big(\log\alpha_h - \beta\log\frac{1-l}{r-1}\Big).
# \end{gathered}
# $$ (eq-p-closed)
#
# Let us sample and compare ({numref}`fig-ch11-1`).

# %%
log_alphas = torch.tensor([-2.0, 0.0, 2.0])
n = sizes["n_gate_samples"]
g = gates.sample_gates(log_alphas[:, None].expand(-1, n).contiguous(),
                       generator=torch.Generator().manual_seed(0))
for la, row in zip(log_alphas, g):
    p0, p1 = float((row == 0).float().mean()), float((row == 1).float().mean())
    print(f"log_alpha={la:+.0f}: P(g=0) sampled {p0:.4f}, "
          f"closed form {float(gates.prob_zero(la)):.4f} | P(g=1) sampled "
          f"{p1:.4f}, closed form {float(gates.prob_one(la)):.4f}")

# %% tags=["hide-input"]
figs.hard_concrete_samples(log_alphas, g)
plt.show()


# %% [markdown]
# The sampled fractions of exactly-closed and exactly-open gates match {eq}`eq-p-closed` to Monte-Carlo
# precision (the largest gap over the three values of $\log\alpha$, in units of the binomial standard error,
# must stay below 5):

# %%
def z_score(frac, p, n):
    return abs(frac - p) / np.sqrt(p * (1 - p) / n)


zs = [z_score(float((row == v).float().mean()), float(f(la)), n)
      for la, row in zip(log_alphas, g)
      for v, f in ((0, gates.prob_zero), (1, gates.prob_one))]

# %% tags=["nbval-check-output", "hide-input"]
attnbook.check(
    "hard-concrete: max |sampled - closed-form P(g=0), P(g=1)| in standard errors",
    max(zs), at_most=5.0)

# %% [markdown]
# ## The pruning objective
#
# {cite:t}`voita2019analyzing` fine-tune a converged model with the gates and the expected number of open
# gates as a penalty,
#
# $$
# \begin{gathered}
# L(\theta, \log\alpha) = L_\text{xent}(\theta, g) + \lambda\, L_C(\log\alpha), \\
# L_C = \sum_h \big(1 - P(g_h = 0)\big) = \sum_h P(g_h \neq 0).
# \end{gathered}
# $$ (eq-gate-objective)
#
# The official code applies this per layer: it sums $P(g_h \ne 0)$ over the heads of each layer and then takes
# the **mean over layers** (and over attention types) before multiplying by $\lambda$. This book does the same
# (`gates.l0_penalty(..., reduction="layer_mean")`, the default), so a $\lambda$ here means what it means in
# the official code. `reduction="sum"` gives the plain sum of the formula, which is larger by a factor of the number of
# gated layers. Larger $\lambda$ closes more gates. `gates.HeadGates` starts open by default ($\log\alpha = 3$,
# $P(g \ne 0) =$ {glue:text}`ch11_default_open:.2f`). The official code instead draws $\log\alpha$ with its default glorot-uniform
# initialiser, $\mathcal U(-a, a)$ with $a = \sqrt{3/8} \approx$ {glue:text}`ch11_glorot_bound:.2f` for 8 heads
# ($P(g \ne 0)$ between {glue:text}`ch11_glorot_p_lo:.2f` and {glue:text}`ch11_glorot_p_hi:.2f`). `init_log_alpha="glorot"`
# reproduces it, and the translation sweeps below use it.

# %%
hg = gates.HeadGates({"enc_self": (3, 4), "dec_cross": (3, 4)})
with torch.no_grad():
    print("L_C (mean over 6 layers of each layer's sum):",
          round(float(hg.penalty()), 3), "| plain sum over 24 heads:",
          round(float(hg.penalty("sum")), 3))

# %% tags=["remove-input"]
bound = float(np.sqrt(3 / 8))  # glorot-uniform bound of a [1, 8, 1, 1] variable
glue("ch11_glorot_bound", bound)
glue("ch11_glorot_p_lo", float(gates.prob_nonzero(torch.tensor(-bound))))
glue("ch11_glorot_p_hi", float(gates.prob_nonzero(torch.tensor(bound))))
glue("ch11_default_open", float(gates.prob_nonzero(torch.tensor(3.0))));

# %% [markdown]
# ## Gates on a real pretrained model
#
# transformers 5.x ignores the `head_mask` argument and has no `prune_heads`. The gate of head $h$ multiplies
# that head's output, and in a BERT-like layer the outputs of all heads are concatenated and fed to one
# linear map, the attention *output projection* (`attention.output.dense`). So a forward **pre-hook** on that
# linear map that multiplies the $h$-th slice of its input by $g_h$ gates head $h$ exactly. It works in
# transformers 4.x and 5.x, and lets gradients reach the gates. `hf.attach_head_gates` does it, and the model sees gates only inside `with hooks.gating(g):`. We use
# all-MiniLM-L6-v2 {cite:p}`wang2020minilm,reimers2019sbert` (6 layers of 12 heads, shipped with the book's
# package), its sentence embeddings (mean pooling over tokens), and English Bible verses.
#
# A zero gate must be the same as cutting the head out of the weights. We check it on one head:

# %%
from attnbook.core import text

minilm, tok = hf.load_pretrained(hf.minilm_source(), device=dev)
minilm.requires_grad_(False)
L_heads = (minilm.config.num_hidden_layers, minilm.config.num_attention_heads)
sents = text.english_sentences()
eval_sents = sents[::10][: sizes["minilm_eval"]]  # held out, for the quality measure
train_sents = [s for i, s in enumerate(sents) if i % 10]  # the rest, for the importance
max_len = sizes["minilm_max_len"]


def embed(sentences):
    return hf.mean_pooled(minilm, tok, sentences, max_length=max_len)


hooks = hf.attach_head_gates(minilm)
with torch.no_grad():
    full = embed(eval_sents)  # outside hooks.gating: the unpruned model

# %%
one_off = torch.ones(L_heads)
one_off[2, 5] = 0.0
dense = minilm.encoder.layer[2].attention.output.dense
d_head = dense.in_features // L_heads[1]
with torch.no_grad():
    with hooks.gating(one_off):
        gated = embed(eval_sents)
    saved = dense.weight[:, 5 * d_head : 6 * d_head].clone()
    # surgery: remove layer 3's head 6 (0-based index [2, 5]) from W_O
    dense.weight[:, 5 * d_head : 6 * d_head] = 0.0
    surgery = embed(eval_sents)
    dense.weight[:, 5 * d_head : 6 * d_head] = saved
err = float((gated - surgery).abs().max())
print(f"{L_heads[0]} x {L_heads[1]} heads; max |gated - surgery| = {err:.1e}")

# %% tags=["nbval-check-output", "hide-input"]
attnbook.check("MiniLM: a zero gate equals removing the head from the output "
               "projection (max abs diff)", err, at_most=1e-5)

# %% [markdown]
# **Quality measure.** A sentence encoder has no single task loss, so we measure how far the pruned model's
# embeddings move: the mean cosine similarity between the pruned and the unpruned model's embeddings of
# the held-out sentences (1 = unchanged).
#
# ## Michel et al.'s importance, step by step
#
# {cite:t}`michel2019sixteen` multiply head $h$ by a mask variable $\xi_h$ (1 = kept) and score it by the
# expected sensitivity of the loss,
#
# $$
# I_h = \mathbb E_x \left| \frac{\partial L(x)}{\partial \xi_h} \right|,
# $$ (eq-michel-importance)
#
# normalised layer by layer with the $\ell_2$ norm; then they prune the least important heads. Their code
# takes the absolute value per example *and token* (the head's output at each position times the loss
# gradient there) and ranks the heads once; recomputing $I_h$ after each pruning step is its non-default
# `--exact_pruning`. On MiniLM we use the simpler estimator of HuggingFace's bertology example (the absolute
# value of a whole batch's gradient) and recompute at every step; the translation model below gets the
# authors' own estimator. The derivative needs a loss whose gradient is not zero at the unpruned
# model, so the distance to the unpruned embeddings will not do (it is at its minimum there). We use the loss
# all-MiniLM-L6-v2 was trained with, the in-batch contrastive loss of sentence-transformers
# (`hf.contrastive_loss`): each verse must retrieve a copy of itself with 30% of its words dropped
# among the other verses of the batch. The mask is the same hook.

# %%
B = sizes["minilm_batch"]
batches = [
    (train_sents[i : i + B], hf.drop_words(train_sents[i : i + B], 0.3, seed=i))
    for i in range(0, B * sizes["minilm_batches"], B)
]


def task_loss(batch, masks):
    with hooks.gating(masks[""]):
        anchors, positives = embed(batch[0]), embed(batch[1])
    return hf.contrastive_loss(anchors, positives)


def similarity(masks):
    with torch.no_grad(), hooks.gating(masks[""]):
        return hf.embedding_similarity(embed(eval_sents), full)


importance = pruning.head_importance(task_loss, torch.ones(L_heads), batches)[""]
print("importance (rows: layers, l2-normalised):")
print(np.array2string(importance.numpy(), precision=2, suppress_small=True))

# %%
step = sizes["minilm_prune_step"]
michel = pruning.prune_step_by_step(task_loss, similarity, torch.ones(L_heads), batches,
                                    n_per_step=step, min_heads=step,
                                    recompute=True)  # the --exact_pruning variant
# baseline: the same numbers of heads pruned in a random order (the table, the figure)
steps_kept = [r["n_kept"] for r in michel]
rand = pruning.random_order_scores(similarity, L_heads, steps_kept, seed=0)
# and seven more orders where the finding below compares (36 heads kept or fewer)
late = [r for r in michel if r["n_kept"] <= 36]
rands = [rand[-len(late):]] + [pruning.random_order_scores(
    similarity, L_heads, [r["n_kept"] for r in late], seed=s) for s in range(1, 8)]
for r, s in zip(michel, rand):
    print(f"{r['n_kept']:3d} heads kept: similarity importance {r['score']:.3f}, "
          f"random order {s:.3f}")

# %% tags=["remove-input"]
glue("ch11_minilm_n_batches", len(batches))
glue("ch11_minilm_batch", B);

# %% [markdown]
# ## Gates on MiniLM
#
# For gates we freeze MiniLM and train only the 72 $\log\alpha$. The task term is the distance to the unpruned
# embeddings, $1 - \cos(e_\text{gated}, e_\text{full})$, which now *does* have a useful gradient because the
# sampled gates move away from 1. The penalty is {eq}`eq-gate-objective`. Each $\lambda$ is one training
# run of 60 steps; a sweep does not fit this chapter's CPU budget, so it is **precomputed** by the recipe
# `minilm_gates` (one command: `python scripts/run.py minilm_gates`) and shipped in
# `attnbook/data/pruning/minilm_gates_<preset>.json`. Here we read it and evaluate the shipped gates on this
# chapter's held-out sentences ourselves. We evaluate them as trained (an evaluation gate between 0 and 1 also
# rescales its head) and as binary masks (every open gate set to 1), which is what pruning a head means.

# %%
from attnbook.core import runs
from attnbook.heads import sweeps

sweep = sweeps.load("minilm_gates")
MINILM_CMD = runs.command("minilm_gates")
print("precomputed by:", MINILM_CMD, "| settings:", sweep["meta"]["settings"])
gate_points = sweeps.gate_points(sweep, similarity)  # live: trained and binary gates
for p in gate_points:
    print(f"lambda={p['lam']}: {p['n_kept']} heads kept, similarity {p['gates']:.3f} "
          f"with the trained gates (script's own eval: {p['script']:.3f}), "
          f"{p['binary']:.3f} with binary masks")

# %% [markdown]
# How do the gates close during training? Each row below is one head (layer by layer), each column a
# training step, and the colour is $P(g_h \ne 0)$ from the shipped snapshots of the middle $\lambda$ ({numref}`fig-ch11-2`):

# %% tags=["hide-input"]
run = sweep["runs"][len(sweep["runs"]) // 2]
figs.gate_heatmap(run)
plt.show()
kept_per_layer = (np.array(run["gates"]) > 0).sum(1)
print("heads kept per layer:", kept_per_layer.tolist())

# %% [markdown]
# The gates do not prune evenly. At this $\lambda$ the heads they keep sit almost all in the last layers (the
# check below); why the gates keep those heads is not measured here.

# %% tags=["nbval-check-output", "hide-input"]
attnbook.check(
    f"MiniLM gates, lambda={run['lam']}: share of kept heads in the last two layers",
    kept_per_layer[-2:].sum() / max(1, kept_per_layer.sum()),
    at_least=0.9,
    precomputed=MINILM_CMD,
)

# %% tags=["hide-input"]
figs.minilm_pruning_curves(michel, rand, gate_points)
plt.show()

# %% [markdown]
# Two things stand out in {numref}`fig-ch11-3`. First, Michel et al.'s importance is set against eight random orders (the figure and the
# table above show the first, whose gap is larger than their mean): the finding below is the mean gap with
# 36 or fewer heads kept, with a Student t interval over the orders (one importance estimate, so the interval
# holds the orders' noise, not the estimate's): {glue:text}`ch11_vs_random_says`. Here it is HuggingFace's whole-batch estimator, re-scored after every step, on
# {glue:text}`ch11_minilm_n_batches:d` batch(es) of {glue:text}`ch11_minilm_batch:d` sentences. The estimate from a few batches is noisy, and it measures the
# sensitivity of the *contrastive* loss, not of the embedding distance we report. Second, the gates keep the
# embeddings much closer at the same number of heads. That comparison favours the gates: they are trained on
# the very quantity we measure, while importance pruning removes heads without any retraining. Their
# evaluation values are not only 0 or 1, but that does not help them: as binary masks (every open gate set to
# 1) they keep the embeddings at least as close.

# %% tags=["nbval-check-output", "hide-input"]
from attnbook import stats

points = [(p["n_kept"], p["gates"]) for p in gate_points]
gaps = pruning.pruning_curve_gaps(michel, rand, points, n_total=72, up_to=36)
over = [pruning.pruning_curve_gaps(late, r, points, n_total=72,
                                    up_to=36)["over_random"] for r in rands]
vs_random = stats.pooled_seed_intervals([over])[0]  # one-sample t over the orders
vs_random_claim = attnbook.finding(
    "MiniLM: importance minus random order, mean similarity gap with 36 or fewer "
    "heads kept (8 random orders)", vs_random["mean"], digits=2,
    interval=(vs_random["low"], vs_random["high"]),
    test="Student's t over the random orders, one importance estimate")
[
    vs_random_claim,
    attnbook.check(
        "MiniLM: similarity after importance pruning to 36 of 72 heads", gaps["at"],
        at_least=0.65, at_most=0.85),
    attnbook.check(
        "MiniLM: gates minus importance pruning, similarity at the same number of "
        "heads (smallest gap over lambdas)", min(gaps["points_over"]), at_least=0.05),
]

# %% tags=["remove-input"]
SAYS = {  # the finding's verdict in words
        "higher": "importance keeps the embeddings closer than random orders, "
                  "beyond the orders' noise",
        "lower": "importance does worse than random orders, beyond their noise",
        "not shown": "the gap is not shown: its interval contains 0"}
glue("ch11_vs_random_says", SAYS[vs_random_claim.verdict]);

# %% [markdown]
# ## Summary
#
# * The hard-concrete gate has real point masses at 0 and 1, with closed-form probabilities
#   ({eq}`eq-p-closed`); $P(g \ne 0)$ is the differentiable expected-L0 penalty of {eq}`eq-gate-objective`.
#   $\lambda$ values are comparable only with the official code's normalisation (the mean over layers).
# * On MiniLM, a pre-hook on the attention output projection gates heads exactly. Gates trained on the
#   embedding distance keep the embeddings much closer than importance pruning at the same number of heads.
# * [The next page](11_pruning_the_translation_encoder.ipynb) prunes the encoder heads of [chapter 10](10_translation_model_and_head_roles.ipynb)'s
#   translation model with the same gates.
#

# %% [markdown]
# ## Exercises
#
# Exercise 2 reruns one of the book's precomputed runs, whose script lives in the repository's `scripts/`
# folder, not in the installed library. Run it from a clone of the repository
# (`git clone https://github.com/attnbook/attnbook`, then the command from its top folder; on Colab, prefix
# it with `!` after `%cd attnbook`).
#
#
# 1. Derive $P(g = 1)$ in {eq}`eq-p-closed` from the logistic distribution of $\log u - \log(1-u)$ and check it
#    with `gates.sample_gates` for $\beta = 2/3$ (the value of {cite:t}`louizos2018learning`).
# 2. Replace the layer-mean in `gates.l0_penalty` by the plain sum and rerun the MiniLM sweep
#    (`python scripts/run.py minilm_gates`): which $\lambda$ gives the same number of heads?
# 3. Prune MiniLM by importance ranked once (`recompute=False`, the authors' default) instead of re-scored
#    after every step. How much worse is the curve?
#

# %% [markdown]
# ### A checked exercise
#
# A gate that is exactly closed. For a hard-concrete gate with $\log\alpha = 0$ and the book's temperature and stretch, what is the probability that a sample is exactly 0, so that the head is switched off for that batch? Put your number in `answer` and run the cell; `exercises.check` says whether it is right and gives a hint if not. A worked solution is in the hidden cell below it.

# %%
from attnbook.booktools import exercises

answer = None  # a probability
exercises.check("ch11-closed-gate", answer)

# %% tags=["hide-cell"]
# worked solution: the stretched sample s (r - l) + l is <= 0 when s <= -l / (r - l);
# s = sigmoid((logit u + log alpha) / beta) with u uniform, so
# P(g = 0) = P(logit u <= beta logit(-l / (r - l)) - log alpha)
#          = sigmoid(beta log(-l / r) - log alpha)
import math

from attnbook.heads import gates as hc

low, high = hc.STRETCH
solution = 1 / (1 + math.exp(-(hc.TEMPERATURE * math.log(-low / high) - 0.0)))
print(f"P(g = 0) at log alpha = 0: {solution:.4f}")
exercises.solved("ch11-closed-gate", solution)

# %% tags=["remove-cell"]
# the box at the top of the page: this run's claims, summarised (attnbook.claims.render)
from attnbook.claims.prose import glue_result

_ = glue_result("ch11_result")
