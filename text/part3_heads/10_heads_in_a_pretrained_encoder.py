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
# # The same detectors on a pretrained encoder
#
# [The second page of this chapter](10_what_the_heads_do.ipynb) looked for positional, syntactic and rare-token heads in
# [chapter 10](10_translation_model_and_head_roles.ipynb)'s translation model and found them weaker than
# {cite:t}`voita2019analyzing` did. Are the detectors at fault, or the model? This page runs the same detectors
# and the same LRP relevance on a real pretrained encoder, all-MiniLM-L6-v2 {cite:p}`wang2020minilm`, trained on
# far more text, and collects what reproduces and what does not.
#
# **In this chapter you will**
#
# * find MiniLM's positional, syntactic, rare-token and sink heads with the translation model's detectors.
# * rank MiniLM's heads by LRP relevance to its sentence embedding, and test the paper's observations on them.
# * set the translation model's and MiniLM's findings beside the paper's in one table.
#

# %% [markdown]
# :::{admonition} The result, as this run computed it
# :class: tip
# ```{glue:md} ch10lm_result
# :format: myst
# ```
# Every line is a claim of this page, with its rule, numbers and reason in the tables below and on the [reproduction page](../reproduction.ipynb).
# :::

# %%
import matplotlib.pyplot as plt
import torch
from IPython.display import Markdown, display

import attnbook
from attnbook import hf
from attnbook.claims import papers
from attnbook.claims.prose import glue
from attnbook.heads import lrp
from attnbook.heads import role_figures as rf
from attnbook.heads import roles as hd
from attnbook.heads import translation as tr

dev = attnbook.setup(seed=0)
sizes = attnbook.preset("translation")
# two threads, or one where OMP_NUM_THREADS asks for one (two chapters side by side)
torch.set_num_threads(attnbook.core.presets.cpu_threads(2))
VOITA = papers.numbers("voita2019")  # the paper's numbers, each with where it was read

# %%
# the translation model's statistics, as on the previous page, for the tables
train_pairs = tr.load_pairs("train")
model, meta, notice = tr.chapter_model(device=dev)  # the active preset's model
if notice:  # none shipped at this preset: the page says which model it analyses
    display(Markdown(notice))
cfg = model.cfg
verses = tr.analysis_verses(sizes["n_analysis"], cfg.max_len)  # those that fit
roles = hd.head_roles(model, verses.src_ids, verses.tgt_ids,
                      token_counts=tr.source_token_counts(), parses=verses.parses)
evaluation = tr.converged_evaluation()  # precomputed, the whole test split
enc = roles["enc_self"]
against = hd.relevance_against_roles(  # LRP relevance, precomputed
    enc["confidence"], lrp.load_relevance("lrp_relevance")["relevance"]["enc_self"],
    enc["prev"], enc["next"])
rho_enc, top_layer1, both = against["rho"], against["top_layer1"], against["both"]
arcs = [p["arcs"] for p in verses.parses]
mt_syntax = hd.syntactic_head_table(roles["word_maps"], arcs)
mt_gain, rare = hd.largest_syntactic_gain(mt_syntax), enc["rare"]
best_mt = hd.best_neighbour_share(enc)
POSITIONAL, CRITERION = (VOITA["positional_head_criterion"].where,
                         VOITA["positional_head_criterion"].value)
SYNTAX, POINTS = (VOITA["syntactic_head_criterion_points"].where,
                  VOITA["syntactic_head_criterion_points"].value)
PAPER_SYNTAX = VOITA["syntactic_heads_wmt"].value  # reading: (accuracy, baseline), %
print(f"{len(verses.src_ids)} dev verses; the translation encoder's best neighbour "
      f"share {best_mt:.2f}")

# %% [markdown]
# ## Roles in all-MiniLM-L6-v2
#
# A real pretrained model shows what the detectors find in an encoder trained on far more text. MiniLM is a
# 6-layer, 12-head BERT-style sentence encoder. We run it on the same English dev verses and exclude [CLS] and
# [SEP] as queries and content keys. Heads that park their weight on them are counted as sink heads, as
# {cite:t}`clark2019what` found many in BERT. Its word pieces are mapped to the parser's words by character
# offsets.

# %%
lm, lm_tok = hf.load_pretrained(hf.minilm_source(), device=dev)
n_lm = sizes["n_minilm"]
lm_counts = hf.token_counts(lm_tok, [e for e, _ in train_pairs])  # for rare tokens
lm_roles = hf.encoder_head_roles(lm, lm_tok, verses.english[:n_lm],
                                 parses=verses.parses[:n_lm], token_counts=lm_counts)
lm_syntax = hd.syntactic_head_table(lm_roles["word_maps"], arcs[:n_lm])
display(Markdown(rf.syntax_table(lm_syntax, "MiniLM", PAPER_SYNTAX)))

# %%
encoders = {"EN-ES translation model": (roles["enc_self"], mt_syntax),
            "all-MiniLM-L6-v2": (lm_roles, lm_syntax)}
display(Markdown(rf.encoder_role_table(encoders, CRITERION)))
lm_pos = max(float(lm_roles["prev"].max()), float(lm_roles["next"].max()))
lm_gain = hd.largest_syntactic_gain(lm_syntax)
CLARK = (
    "Clark et al. 2019 (BERT): heads that attend to the previous or next "
    "token for most tokens"
)

# %% tags=["nbval-check-output", "hide-input"]
MINILM = "pretrained all-MiniLM-L6-v2, an English encoder (the paper: its NMT encoders)"
[
    attnbook.compare("MiniLM: best positional share of a head", lm_pos, paper=CRITERION,
        same_side_of=CRITERION - 1e-9, digits=2, band=0.02,
        source=POSITIONAL + "; " + CLARK, analogue=MINILM,
        reason=f"MiniLM's best neighbour head reaches {lm_pos:.2f}"),
    attnbook.compare(
        "MiniLM: largest gain of a best head over the positional baseline (points)",
        lm_gain, paper=POINTS, same_side_of=POINTS - 1e-9, digits=2, band=1.0,
        source=SYNTAX, analogue=MINILM,
        reason=f"MiniLM's largest gain is {lm_gain:+.1f} points"),
]

# %% [markdown]
# ### Which of MiniLM's heads are relevant
#
# The paper's relevance explains a prediction, the top-1 logit of a translation. A sentence encoder predicts
# no token: what it outputs is the sentence embedding $e$, the mean of its last layer's token states, from
# which every cosine similarity the model is used for is built. So we explain the embedding by its score
# against its own direction, $s = e \cdot e / \lVert e \rVert$, so that the impacts of its coordinates are
# $e_d^2 / \lVert e \rVert$. Relevance goes through the mean to every token, and from there through the six
# layers with the same rule ({eq}`eq-lrp-alpha-beta`). Here the LayerNorm comes after each residual sum (BERT's
# post-LN layers) rather than before (`attnbook.hf.relevance`). The book departs from the paper in what is
# explained, not in the rule. The unit tests check that the recomputed layers are the model's own, that
# relevance is conserved down to the token embeddings, that a head that writes nothing receives none, that a head
# that routes everything takes its whole layer, and that the rule gives what its slow path with autograd's dense
# Jacobians gives (`tests/test_hf_relevance.py`). The relevance of the verses of the role table is precomputed
# (`python scripts/run.py lrp_relevance_minilm`, about 23 minutes on one thread); the chapter recomputes
# the first two verses live. For the rare-token statistic, MiniLM's word pieces are ranked by their frequency
# in the English side of the training verses.

# %%
from attnbook.hf import relevance as hf_relevance

shipped_lm = lrp.load_relevance("lrp_relevance_minilm")
lm_rel = shipped_lm["relevance"]["enc_self"]  # precomputed, the role table's verses
lm_split = lrp.split_half_reliability(shipped_lm["halves"])["enc_self"]
lm_first = shipped_lm["first_verses"]  # recomputed here, verse by verse
lm_live_gap = hf_relevance.live_gap(lm, lm_tok, verses.english, lm_first)
print(f"MiniLM LRP on {shipped_lm['verses']} verses (precomputed); live on the first "
      f"{len(lm_first)}: largest gap {lm_live_gap:.1e}")

# %%
lm_conf, lm_sink = lm_roles["confidence"], lm_roles["sink"] > 0.5
# as for the translation encoder: rank correlation, top-3 overlap, the layer-1 head
lm_vs = hd.relevance_against_roles(lm_conf, lm_rel, lm_roles["prev"], lm_roles["next"])
lm_rho, lm_both, lm_top1 = lm_vs["rho"], lm_vs["both"], lm_vs["top_layer1"]
lm_less, lm_h = lm_vs["less_confident"], lm_rel.shape[1]
print(f"split-half rank correlation {lm_split:.2f}; confidence against relevance "
      f"{lm_rho:.2f}")
print("three most relevant heads (layer, head):",
      [(h // lm_h + 1, h % lm_h + 1) for h in lm_vs["top_relevant"]],
      "neighbour shares:", [round(float(lm_vs["neighbour"].flatten()[h]), 2)
                            for h in lm_vs["top_relevant"]])
print(f"mean relevance of the {int(lm_sink.sum())} sink heads "
      f"{float(lm_rel[lm_sink].mean()):.3f}, of the others "
      f"{float(lm_rel[~lm_sink].mean()):.3f}")
lm_rare = float(lm_roles["rare"][0, lm_top1])  # the most relevant layer-1 head's
print(f"rare tokens: {lm_roles['rare_sentences']:.0f} verses; most relevant layer-1 "
      f"head {lm_top1 + 1}: share {lm_rare:.2f} "
      f"(chance {lm_roles['rare_chance']:.3f}, best head "
      f"{float(lm_roles['rare'].max()):.2f})")

# %% tags=["hide-input"]
marks = {"P": (lm_roles["prev"] >= CRITERION) | (lm_roles["next"] >= CRITERION),
         "S": lm_sink}  # positional heads, sink heads
rf.relevance_with_roles(lm_rel, marks,
                        "all-MiniLM-L6-v2: LRP relevance to the sentence embedding")
plt.show()

# %% tags=["nbval-check-output", "hide-input"]
[
    attnbook.check("MiniLM LRP recomputed live on the first verses: largest gap",
        lm_live_gap, at_most=2e-3, digits=3, band=1e-3,
        precomputed=shipped_lm["meta"]["command"]),
    attnbook.check("split-half reliability of MiniLM's LRP relevance (Spearman)",
        lm_split, at_least=0.8, digits=2, band=0.02,
        precomputed=shipped_lm["meta"]["command"]),
]

# %% tags=["nbval-check-output", "hide-input"]
LM = dict(precomputed=shipped_lm["meta"]["command"], analogue=MINILM)
lm_claims = [
    attnbook.compare("MiniLM: rank correlation of confidence and LRP relevance",
        lm_rho, paper=VOITA["confidence_tracks_relevance"].value,
        above_chance=lm_vs["tests"]["rho"], digits=2, band=0.02,
        source=VOITA["confidence_tracks_relevance"].where,
        reason=f"rank correlation {lm_rho:.2f}", **LM),
    attnbook.compare(
        "MiniLM: of the 3 most relevant heads, how many are among the 3 most "
        "positional (hypergeometric test)", len(lm_both),
        paper=VOITA["relevant_heads_have_roles"].value, digits=1,
        above_chance=lm_vs["tests"]["both"],
        source=VOITA["relevant_heads_have_roles"].where,
        reason=f"{len(lm_both)} of the 3 most relevant heads are among the 3 most "
        "positional", **LM),
    attnbook.compare(
        "MiniLM: the most relevant layer-1 head: share of its layer's other heads more "
        "confident than it (one-sided rank test against chance)",
        lm_vs["less_confident_share"], above_chance=lm_vs["tests"]["less_confident"],
        smallest_p=lm_vs["less_confident_smallest_p"],
        paper=VOITA["relevant_first_layer_head_not_confident"].value, digits=2,
        source=VOITA["relevant_first_layer_head_not_confident"].where,
        reason=f"more confident than {lm_h - 1 - lm_less} of {lm_h - 1}", **LM),
    attnbook.compare("MiniLM: rare-token share of the most relevant layer-1 head",
        lm_rare, paper=VOITA["rare_token_head_share"].value,
        reaches=0.15, digits=2, band=0.03, source=VOITA["rare_token_head_share"].where,
        reason=f"it points at the rarest token for {lm_rare:.0%} of tokens; why: "
        "reason not measured", **LM),
]
lm_claims

# %% tags=["remove-input"]
glue("ch10_lm_split", float(lm_split))
glue("ch10_lm_rho", lm_rho)
glue("ch10_lm_rho_p", lm_vs["rho_p"])
glue("ch10_lm_rho_says", lm_claims[0].in_words)
glue("ch10_lm_heads", lm_rel.numel())
glue("ch10_lm_sinks", int(lm_sink.sum()))
glue("ch10_lm_sink_rel", float(lm_rel[lm_sink].mean()))
glue("ch10_lm_other_rel", float(lm_rel[~lm_sink].mean()))
glue("ch10_lm_equal_rel", 1 / lm_h)  # an equal share of a layer's relevance
glue("ch10_lm_sink_of_equal", float(lm_rel[lm_sink].mean()) * lm_h)
glue("ch10_lm_pair_share", float(lm_vs["neighbour"].flatten()[lm_both].min()))
glue("ch10_lm_layer1_more", lm_h - 1 - lm_less)
glue("ch10_lm_layer1_others", lm_h - 1)
glue("ch10_lm_rare_layer1", float(lm_roles["rare"][0, lm_top1]))
glue("ch10_lm_rare_chance", float(lm_roles["rare_chance"]))
glue("ch10_lm_rare_best", float(lm_roles["rare"].max()))
glue("ch10_lm_rare_times",
     float(lm_roles["rare"].max()) / float(lm_roles["rare_chance"]))
glue("ch10_lm_pos", lm_pos)
glue("ch10_lm_positional", int(marks["P"].sum()));

# %% [markdown]
# MiniLM's relevance ranking is as reliable as the translation model's (split-half rank correlation
# {glue:text}`ch10_lm_split:.2f`), and what it ranks first is what the paper describes. The two most relevant heads of
# the whole encoder are its two clean positional heads, whose largest weight falls on a neighbour for at least
# {glue:text}`ch10_lm_pair_share:.0%` of tokens ({numref}`fig-ch10-6`). Across the {glue:text}`ch10_lm_heads:d` heads, the paper's "more
# confident, more relevant" {glue:text}`ch10_lm_rho_says` against chance (rank correlation {glue:text}`ch10_lm_rho:.2f`, p =
# {glue:text}`ch10_lm_rho_p:.2g`; on another model, an analogue. LRP explains another quantity here than in the
# translation model, so the two models' correlations are not compared).
#
# The sink heads, {glue:text}`ch10_lm_sinks:d` of the {glue:text}`ch10_lm_heads:d`, take on average {glue:text}`ch10_lm_sink_rel:.3f` of their
# layer's relevance, the others {glue:text}`ch10_lm_other_rel:.3f`, where an equal share would be
# {glue:text}`ch10_lm_equal_rel:.3f`. {cite:t}`clark2019what` argued that parking attention on [CLS] or [SEP] is close
# to a no-op in BERT. LRP does not find these heads idle here: they take {glue:text}`ch10_lm_sink_of_equal:.2f` of an
# equal share.
#
# The paper's two first-layer observations find no support in MiniLM. Its most relevant first-layer head is
# more confident than {glue:text}`ch10_lm_layer1_more:d` of the other {glue:text}`ch10_lm_layer1_others:d` heads of its layer; one head ranked among
# a layer's heads cannot reach p < 0.05 either way, so that comparison is undecided. It does not
# point at the rarest token ({glue:text}`ch10_lm_rare_layer1:.0%` of tokens, chance {glue:text}`ch10_lm_rare_chance:.1%`). The best
# rare-token head anywhere does so for {glue:text}`ch10_lm_rare_best:.0%` of tokens, {glue:text}`ch10_lm_rare_times:.1f` times chance
# but far from the paper's 66%.
#

# %% [markdown]
# ## What reproduces, and what does not
#
# The table collects the chapter's findings beside the paper's. The first three rows describe the two
# settings; each other row restates a comparison above, whose box gives its verdict and reason.

# %%
display(Markdown(rf.reproduction_table(
    VOITA, train_pairs=len(train_pairs), cfg=cfg, beam_bleu=evaluation["beam4"]["bleu"],
    positional=(best_mt, lm_pos), gain=(mt_gain, lm_gain),
    rare=(float(rare[0, top_layer1]), float(lm_roles["rare"][0, lm_top1])),
    rho=(rho_enc, lm_rho), both=(len(both), len(lm_both)),
)))

# %% [markdown]
# ## Summary
#
# * MiniLM, trained on far more text, has clean positional heads ({glue:text}`ch10_lm_pos:.2f`) and a syntactic head
#   by the paper's rule: the detectors find what the paper describes when a model has it.
# * By LRP relevance to its sentence embedding, MiniLM's two most relevant heads are its two positional heads.
#   Its most relevant first-layer head is more confident than {glue:text}`ch10_lm_layer1_more:d` of the other
#   {glue:text}`ch10_lm_layer1_others:d` heads of its layer (a rank the test cannot decide on) and is not a
#   rare-token head, as in the translation model.
# * The table above sets both models beside the paper; every row is a claim of the chapter.
# * [Chapter 11](11_pruning_heads.ipynb) prunes heads, in MiniLM and in the translation model.
#

# %% [markdown]
# ## Exercises
#
# 1. Run the detectors on MiniLM's verses with [CLS] and [SEP] kept as keys. How many of its heads become
#    confident, and which statistic changes most?
# 2. MiniLM's relevance explains the embedding's score against its own direction. Explain instead its
#    cosine with the embedding of another verse (`attnbook.hf.relevance`). Do the same heads come first?
#

# %% [markdown]
# ### A checked exercise
#
# A sink head by hand. In `exercises.ATTENTION_EXAMPLE`, take the first key to be a [CLS] token. What share of
# the queries put their largest weight on it, the head's sink share? Put your number in `answer` and run the
# cell; `exercises.check` says whether it is right and gives a hint if not. A worked solution is in the hidden
# cell below it.

# %%
from attnbook.booktools import exercises

print(torch.tensor(exercises.ATTENTION_EXAMPLE))
answer = None  # a share between 0 and 1
exercises.check("ch10-sink-share", answer)

# %% tags=["hide-cell"]
# worked solution: each query's most attended key, compared with key 0 ([CLS])
A_ex = torch.tensor(exercises.ATTENTION_EXAMPLE)
solution = (A_ex.argmax(dim=-1) == 0).double().mean().item()
print(f"most attended key of each query: {A_ex.argmax(dim=-1).tolist()}; share on "
      f"[CLS] {solution:.2f}")
exercises.solved("ch10-sink-share", solution)

# %% tags=["remove-cell"]
# the box at the top of the page: this run's claims, summarised (attnbook.claims.render)
from attnbook.claims.prose import glue_result

_ = glue_result("ch10lm_result")
