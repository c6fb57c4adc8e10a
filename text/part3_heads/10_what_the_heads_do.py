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
# # What the heads do: positional, syntactic and rare-token heads
#
# [The first page of chapter 10](10_translation_model_and_head_roles.ipynb) trained an English-Spanish
# translation model, checked that it has learned its task, and measured each head's confidence and relevance.
# This page asks {cite:t}`voita2019analyzing`'s second question of the same model: do its heads have the
# roles the paper found? Those are heads that attend to the neighbouring token (*positional*), follow a
# dependency relation (*syntactic*), or point to the rarest word of the sentence (*rare-token*). The same detectors then
# run on a real pretrained encoder, all-MiniLM-L6-v2 {cite:p}`wang2020minilm`, which shows what they find when
# a model has the roles.
#
# **In this chapter you will**
#
# * find positional, syntactic and rare-token heads, in the translation model and in MiniLM.
# * ask whether wider heads, or more training, would reach the paper's 90% positional criterion.
# * watch the roles emerge during training, with the learning rate on the same axis.
# * collect what reproduces and what does not.

# %% [markdown]
# :::{admonition} The result, as this run computed it
# :class: tip
# ```{glue:md} ch10b_result
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
from attnbook.heads import role_figures as rf
from attnbook.heads import roles as hd
from attnbook.heads import sweeps
from attnbook.heads import translation as tr

dev = attnbook.setup(seed=0)
sizes = attnbook.preset("translation")
# two threads, or one where OMP_NUM_THREADS asks for one (two chapters side by side)
torch.set_num_threads(attnbook.core.presets.cpu_threads(2))
VOITA = papers.numbers("voita2019")  # the paper's numbers, each with where it was read

# %%
# the model, its dev verses and every head's statistics, as on the first page
train_pairs, test_pairs = tr.load_pairs("train"), tr.load_pairs("test")
tok = tr.load_tokenizer()
model, meta, notice = tr.chapter_model(device=dev)  # the active preset's model
if notice:  # none shipped at this preset: the page says which model it analyses
    display(Markdown(notice))
cfg = model.cfg
verses = tr.analysis_verses(sizes["n_analysis"], cfg.max_len)  # those that fit
roles = hd.head_roles(model, verses.src_ids, verses.tgt_ids,
                      token_counts=tr.source_token_counts(), parses=verses.parses)
evaluation = tr.converged_evaluation()  # precomputed, the whole test split
glue("ch10_train_pairs", len(train_pairs))
glue("ch10_enc_chance", float(roles["enc_self"]["chance"]))
print(f"{meta['train_steps']} steps; {len(verses.src_ids)} dev verses analysed")

# %%
# the first page's gate 1 (has training converged?) and LRP relevance, carried here
more = sweeps.continuation_gain(sweeps.load_continuation(meta),
                                [s for _, s in test_pairs])
converged = sweeps.converged(more)  # the gate's rule (the first page states it)
UNCONVERGED = sweeps.not_converged_note(more)
from attnbook.heads import lrp

shipped_lrp = lrp.load_relevance("lrp_relevance")
relevance = shipped_lrp["relevance"]  # precomputed: every target token of the dev split
enc_conf = roles["enc_self"]["confidence"]
prev_share, next_share = roles["enc_self"]["prev"], roles["enc_self"]["next"]
against = hd.relevance_against_roles(enc_conf, relevance["enc_self"], prev_share,
                                     next_share)
rho_enc, top_layer1 = against["rho"], against["top_layer1"]
print(f"gate 1 {'passes' if converged else 'fails'}: trained on, beam BLEU "
      f"{more['delta']:+.2f} [{more['low']:+.2f}, {more['high']:+.2f}]")

# %% [markdown]
# ## Positional heads
#
# A head is **positional** if its largest weight falls on the same relative position, the previous or the
# next token, for at least 90% of the tokens {cite:p}`voita2019analyzing` ({numref}`fig-ch10-4`).

# %% tags=["hide-input"]
rf.neighbour_shares(prev_share, next_share)
plt.show()

# %%
best_prev, best_next = float(prev_share.max()), float(next_share.max())
# the best neighbour share over training, and its trend over the last 30% (both seeds)
role_steps, trace_pos = hd.best_over_training(meta["roles"], "enc_self",
                                             ("prev", "next"))
model_s1, meta_s1 = tr.load_translation_model(  # a variant of the quick recipe
    "translation_model_seed1", "quick", device=dev)
late = {seed: hd.late_trend(m["roles"], "enc_self", ("prev", "next"), m["train_steps"])
        for seed, m in ((0, meta), (1, meta_s1))}  # precomputed training records
RISING = 0.01  # per 1000 steps: the rule, stated before the seed-1 run (data README)


def trend(t):  # the late trend in words
    return (f"{t['change']:+.2f} over its {t['n']} snapshots from step "
            f"{t['from_step']:.0f}, slope {t['slope']:+.3f} per 1000 steps: "
            + ("still rising" if t["slope"] > RISING else "it has stopped rising"))


POSITIONAL, CRITERION = (VOITA["positional_head_criterion"].where,
                         VOITA["positional_head_criterion"].value)
n_positional = int(((prev_share >= CRITERION) | (next_share >= CRITERION)).sum())
print(f"best previous-token share {best_prev:.2f}, best next-token share "
      f"{best_next:.2f}; positional heads (>= {CRITERION:.0%}): {n_positional}")
for seed, t in late.items():
    print(f"seed {seed}, last 30% of training: {trend(t)}")

# %% tags=["nbval-check-output", "hide-input"]
attnbook.compare(
    "best positional share of an encoder head (-1 or +1)", max(best_prev, best_next),
    paper=CRITERION, same_side_of=CRITERION - 1e-9, digits=2, band=0.03,
    source=POSITIONAL,
    reason=f"the best neighbour share rose from {trace_pos[0]:.2f} at initialisation "
    f"to {trace_pos[-1]:.2f}; over the last 30% of training, seed 1 {trend(late[1])}; "
    f"seed 0 {trend(late[0])}" + UNCONVERGED,
)

# %% [markdown]
# Are the relevant heads the positional ones? The paper's central observation is that the heads LRP ranks
# highest are the heads with a recognisable role. Here the encoder has no head over the 90% line. So we ask
# the weaker question the data can answer: are the most relevant encoder heads the ones with the largest
# neighbour share? "The relevant heads are the ones with roles" is a statement without a number, so the book tests it
# against chance. The rule, stated before the result: the three most relevant encoder heads (LRP) and the
# three with the largest previous- or next-token share overlap more than random top-3 sets would, with a
# hypergeometric p below 0.05. Random sets share $3 \cdot 3/48 \approx 0.2$ heads on average; one shared head
# happens about one time in six, two about one time in a hundred.

# %% tags=["nbval-check-output"]
neighbour, top_relevant = against["neighbour"].flatten(), against["top_relevant"]
both, both_p = against["both"], against["both_p"]
print("three most relevant encoder heads (layer, head):",
      [(h // cfg.n_heads + 1, h % cfg.n_heads + 1) for h in top_relevant])
print("their neighbour shares:", [round(float(neighbour[h]), 2) for h in top_relevant])
roles_claim = attnbook.compare(
    "of the 3 most relevant encoder heads (LRP), how many are among the 3 most "
    "positional (hypergeometric test)", len(both),
    paper=VOITA["relevant_heads_have_roles"].value, digits=1,
    above_chance=(against["both_chance"], both_p),
    source=VOITA["relevant_heads_have_roles"].where,
    reason=f"only {len(both)} of the 3 most relevant heads are among the 3 most "
           "positional",
    precomputed=shipped_lrp["meta"]["command"],
)
glue("ch10_both", len(both))
glue("ch10_both_p", both_p)
glue("ch10_both_says", roles_claim.in_words)
roles_claim

# %% [markdown]
# ### Would wider heads, or another seed, reach 90%?
#
# The paper's heads are 64 wide, the book's 16 (width 128 over 8 heads). One more run of the same recipe has
# 4 heads per layer of width 32 (`python scripts/run.py translation_model_h4`). It asks whether the width of the
# heads is what keeps the book's neighbour heads below the paper's line. A second training of the shipped recipe with seed 1
# (`python scripts/run.py translation_model_seed1`) shows how much of a head's share the seed decides. The rule,
# stated before the result: a model reaches the paper's criterion if one of its encoder heads puts its largest
# weight on the previous or the next token for at least 90% of the tokens. All models are measured on the same
# dev verses. Both extra
# models first pass the first page's gates 2 and 3 (encoder attention matters, outputs do not loop).

# %%
model_h4, meta_h4 = tr.load_translation_model(
    "translation_model_h4", "quick", device=dev
)  # precomputed: trained by the command in its record
roles_h4 = hd.head_roles(model_h4, verses.src_ids, verses.tgt_ids)
roles_s1 = hd.head_roles(model_s1, verses.src_ids, verses.tgt_ids)
h4_enc, s1_enc = roles_h4["enc_self"], roles_s1["enc_self"]
best_h4 = float(torch.maximum(h4_enc["prev"], h4_enc["next"]).max())
best_s1 = float(torch.maximum(s1_enc["prev"], s1_enc["next"]).max())
checkpoints = {"8 heads of width 16 (shipped, seed 0)": (meta, roles),
               "the same, seed 1": (meta_s1, roles_s1),
               "4 heads of width 32": (meta_h4, roles_h4)}
comparison = hd.checkpoint_comparison(checkpoints)  # rows: (what, one value per model)
display(Markdown(rf.checkpoint_table(list(checkpoints), comparison)))

# %% tags=["nbval-check-output", "hide-input"]
# gates 2 and 3 of the first page for the two other models, on 500 test verses
gate_pairs = test_pairs[:500]
gate_src, gate_ref = [e for e, _ in gate_pairs], [s for _, s in gate_pairs]
others = {"seed 1": model_s1, "4 heads of width 32": model_h4}
learned = {name: tr.learned_task_gates(m, gate_src, gate_ref, max_len=cfg.max_len)
           for name, m in others.items()}
command = {"seed 1": meta_s1["command"], "4 heads of width 32": meta_h4["command"]}
[claim for name, g in learned.items() for claim in (
    attnbook.check(f"{name}, gate: BLEU lost when all encoder self-attention heads are "
                   f"off (first {len(gate_src)} test verses)", g["drop"], at_least=5,
                   digits=2, band=1.0, precomputed=command[name]),
    attnbook.check(f"{name}, gate: share of greedy outputs that loop (first "
                   f"{len(gate_src)} test verses)", g["looping_share"], at_most=0.05,
                   digits=2, band=0.01, precomputed=command[name]))]

# %% tags=["nbval-check-output", "hide-input"]
[
    attnbook.compare(
        "best positional share of an encoder head (-1 or +1), 4 heads of width 32",
        best_h4, paper=CRITERION, same_side_of=CRITERION - 1e-9, digits=2, band=0.03,
        source=POSITIONAL,
        reason=f"heads twice as wide give a best neighbour share of {best_h4:.2f} "
        f"(8 heads of width 16: {max(best_prev, best_next):.2f}); this run has no "
        "continuation run, so its convergence is not gated",
        precomputed=meta_h4["command"]),
    attnbook.compare(
        "best positional share of an encoder head (-1 or +1), seed 1", best_s1,
        paper=CRITERION, same_side_of=CRITERION - 1e-9, digits=2, band=0.03,
        source=POSITIONAL,
        reason=f"a second training of the same recipe gives {best_s1:.2f} (seed 0: "
        f"{max(best_prev, best_next):.2f}); over its last 30%, {trend(late[1])}",
        precomputed=meta_s1["command"]),
]

# %% tags=["remove-input"]
glue("ch10_best_prev", best_prev)
glue("ch10_best_s1", best_s1)
seed_gap = abs(max(best_prev, best_next) - best_s1)  # what the seed moves
width_gap = best_h4 - max(best_prev, best_next)  # what twice the head width moves
glue("ch10_seed_gap", seed_gap)
glue("ch10_width_gap", width_gap)
glue("ch10_seed_vs_width", "more" if seed_gap > abs(width_gap) else "less")
for seed, t in late.items():  # the best neighbour share over the last 30% of training
    glue(f"ch10_late_change_{seed}", t["change"])
    glue(f"ch10_late_slope_{seed}", t["slope"])
    glue(f"ch10_late_n_{seed}", t["n"])
glue("ch10_late_from", late[1]["from_step"])
glue("ch10_late_says", "still rising" if late[1]["slope"] > RISING
     else "has stopped rising")
glue("ch10_h4_prev", float(h4_enc["prev"].max()))
glue("ch10_h4_next", float(h4_enc["next"].max()))
glue("ch10_h4_bleu_gain",
     float(meta_h4["test_bleu_greedy"] - meta["test_bleu_greedy"]))

# %% [markdown]
# Heads twice as wide translate better ({glue:text}`ch10_h4_bleu_gain:+.1f` BLEU, greedy, on the test split) and have stronger
# neighbour heads: the best previous-token head rises from {glue:text}`ch10_best_prev:.2f` to {glue:text}`ch10_h4_prev:.2f` of the tokens and the
# best next-token head reaches {glue:text}`ch10_h4_next:.2f`. The second seed of the shipped recipe ends with a best neighbour
# share of {glue:text}`ch10_best_s1:.2f`. The seed alone moves the strongest head's share by {glue:text}`ch10_seed_gap:.2f`,
# {glue:text}`ch10_seed_vs_width` than doubling the head width does ({glue:text}`ch10_width_gap:+.2f`). So one run per setting cannot
# say which setting helps. None reaches 90%. The
# other differences from the paper's set-up, far less data ({glue:text}`ch10_train_pairs:,d` verse pairs against millions of
# sentences) and a narrower model (width 128 against 512), are not tested here.

# %% [markdown]
# The best encoder head points at the previous token for {glue:text}`ch10_best_prev:.0%` of the tokens. That is a strong
# neighbour head, in a model where a uniform head would do so for about {glue:text}`ch10_enc_chance:.0%`. But it is short of the paper's 90%
# criterion, so by the paper's definition this model has no positional head. Would more training take it
# there? The rule, stated before seed 1's run finished: the share is still rising when training ends if its
# least-squares slope over the snapshots of the last 30% of training exceeds 0.01 per 1000 steps. Seed 1,
# with {glue:text}`ch10_late_n_1:d` snapshots from step {glue:text}`ch10_late_from:.0f` on, moved by {glue:text}`ch10_late_change_1:+.2f`
# (slope {glue:text}`ch10_late_slope_1:+.3f`): it {glue:text}`ch10_late_says`. Seed 0 has only {glue:text}`ch10_late_n_0:d` snapshots there,
# {glue:text}`ch10_late_change_0:+.2f` apart. Either way the share moves by hundredths while the learning rate
# decays to zero ({numref}`fig-ch10-late`, below), far from the 90% line. Gate 1 says more training still
# improves the translations; whether it would grow this head is a different question. MiniLM has {glue:text}`ch10_lm_positional:d` heads over the line, the best at
# {glue:text}`ch10_lm_pos:.2f`.

# %% [markdown]
# ## Syntactic heads
#
# A head is **syntactic** for a dependency relation if, at the word level, its largest weight points from
# one word of the relation to the other clearly more often than a trivial baseline. The baseline says "the
# answer is at the most frequent relative position", and the paper asks for 10 points more. We use spaCy's silver parses of
# the English dev verses; a word's attention is the sum over its subwords as keys and the mean over its
# subwords as queries.

# %%
PAPER_SYNTAX = VOITA["syntactic_heads_wmt"].value  # reading: (accuracy, baseline), %
arcs = [p["arcs"] for p in verses.parses]
mt_syntax = hd.syntactic_head_table(roles["word_maps"], arcs)
display(Markdown(rf.syntax_table(mt_syntax, "translation encoder", PAPER_SYNTAX)))

# %% tags=["nbval-check-output"]
mt_gain = hd.largest_syntactic_gain(mt_syntax)  # points, the best relation's
SYNTAX, POINTS = (VOITA["syntactic_head_criterion_points"].where,
                  VOITA["syntactic_head_criterion_points"].value)
attnbook.compare(
    "translation encoder: largest gain of a best head over the positional baseline "
    "(points)", mt_gain, paper=POINTS, same_side_of=POINTS - 1e-9, digits=2, band=1.0,
    source=SYNTAX,
    reason="for no relation does the best head beat the most-frequent-offset baseline "
    f"by {POINTS} points (largest gain {mt_gain:+.1f}); MiniLM's heads do, on the same "
    "verses and parses" + UNCONVERGED,
)

# %% [markdown]
# For no relation does the translation encoder's best head beat the baseline "the answer is at the most
# frequent offset" by the paper's 10 points; for most it is well below it. MiniLM's heads, on the same
# verses and parses, clear it for object -> verb and adverb -> head (table below).

# %% [markdown]
# ## Rare-token heads
#
# A **rare-token** head points to the rarest token of the sentence, whatever the query. The paper reports
# it for the most relevant head of the first layer, on sentences whose rarest token is outside the 500 most
# frequent (in its section on rare tokens): it points there for 66% of the tokens (OpenSubtitles). We rank the source tokens by
# their frequency in the training data and keep the verses that meet the paper's condition. Then we count how
# often each head's largest weight falls on the rarest token; chance is $1/n$ for a verse of $n$ tokens.

# %% tags=["nbval-check-output"]
rare, chance = roles["enc_self"]["rare"], roles["enc_self"]["rare_chance"]
print(f"{roles['enc_self']['rare_sentences']:.0f} verses whose rarest token is outside "
      f"the top 500; chance {chance:.3f}")
print(f"best rare-token share: {float(rare.max()):.2f} (layer "
      f"{int(rare.argmax()) // cfg.n_heads + 1}); "
      f"most relevant layer-1 head: {float(rare[0, top_layer1]):.2f}")
[
    attnbook.check("best rare-token share / chance", float(rare.max()) / chance,
        at_least=2.0, digits=2, band=0.5),
    attnbook.compare("rare-token share of the most relevant layer-1 encoder head",
        float(rare[0, top_layer1]), paper=VOITA["rare_token_head_share"].value,
        tol=0.15, digits=2, band=0.03, source=VOITA["rare_token_head_share"].where,
        reason=f"the most relevant layer-1 head points at the rarest token for "
        f"{float(rare[0, top_layer1]):.0%} of tokens; the best head anywhere for "
        f"{float(rare.max()):.0%} ({float(rare.max()) / chance:.1f} times chance)"
        + UNCONVERGED),
]

# %% tags=["remove-input"]
glue("ch10_rare_best", float(rare.max()))
glue("ch10_rare_times", float(rare.max()) / float(chance))
glue("ch10_rare_layer1", float(rare[0, top_layer1]))

# %% [markdown]
# The rarest token of a verse attracts attention: the best head points at it for {glue:text}`ch10_rare_best:.0%` of the
# tokens, {glue:text}`ch10_rare_times:.1f` times chance. But the most relevant first-layer head is not a rare-token
# head ({glue:text}`ch10_rare_layer1:.0%` of the tokens), so the paper's 66% is not reproduced.
#

# %% [markdown]
# ## When the roles appear
#
# The training script recorded every head's statistics on 100 fixed dev verses at log-spaced steps, from
# initialisation to the end (seed 1 also at every evaluation of the last 30%). For each role we plot the best
# head's value against the step, beside dev BLEU and the learning rate as a share of its peak, and seed 1's
# best neighbour share dashed.
# No published analysis shows this for these roles. {cite:t}`voita2021language` describe NMT training as
# target-side language modelling first, then word-by-word translation, then reordering, with the encoder's
# use of context coming late. {numref}`fig-ch10-5` lets the reader test that picture on the encoder's heads.

# %% tags=["hide-input"]
from attnbook.core.train import lr_factor

recipe = meta["recipe"]  # the learning rate of the recipe, as a share of its peak
lr_steps = list(range(0, recipe["train_steps"] + 1, 50))
lr_share = [lr_factor(s, recipe["train_steps"], recipe["warmup"]) for s in lr_steps]
rf.role_emergence(meta["roles"], meta["evals"], CRITERION,
                  learning_rate=(lr_steps, lr_share),
                  other_seed=("seed 1", meta_s1["roles"]))
plt.show()

# %% tags=["hide-input"]
rf.late_training({"seed 0 (shipped)": meta["roles"], "seed 1": meta_s1["roles"]},
                 (lr_steps, lr_share), from_step=late[1]["from_step"])
plt.show()

# %% tags=["nbval-check-output"]
role_steps, prev_trace = hd.best_over_training(meta["roles"], "enc_self", ("prev",))
half_step = int(role_steps[(prev_trace >= 0.5 * prev_trace[-1]).argmax()])
print(f"best previous-token share at initialisation {prev_trace[0]:.2f}, at the end "
      f"{prev_trace[-1]:.2f}; half of its final value first reached at step "
      f"{half_step}")
attnbook.check("best previous-token share, end of training minus initialisation",
               prev_trace[-1] - prev_trace[0], at_least=0.2, digits=2, band=0.01,
               precomputed="training record in converged_quick.json")

# %% [markdown]
# The roles appear in an order. First, within about a hundred steps, encoder heads park their weight on EOS
# (the sink share peaks near step 130, while BLEU is still zero). Then the encoder heads become confident
# (around step 200) and the encoder-decoder attention follows (around step 400), as dev BLEU starts to rise.
# The previous-token head comes last. It grows over steps 1000-5000 while BLEU climbs from about 15 to 30, and
# it levels off with BLEU. This matches the picture of {cite:t}`voita2021language`, in which the encoder's use
# of context comes late in training.
#

# %% [markdown]
# ## The same detectors on a pretrained encoder: all-MiniLM-L6-v2
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

# %% tags=["nbval-check-output"]
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
# relevance is conserved down to the token embeddings, and that a head that writes nothing receives none
# (`tests/test_hf_relevance.py`). The relevance of the verses of the role table is precomputed
# (`python scripts/run.py lrp_relevance_minilm`, about 23 minutes on one thread); the chapter recomputes
# the first two verses live. For the rare-token statistic, MiniLM's word pieces are ranked by their frequency
# in the English side of the training verses ({numref}`fig-ch10-6`).

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
print(f"rare tokens: {lm_roles['rare_sentences']:.0f} verses; most relevant layer-1 "
      f"head {lm_top1 + 1}: share {float(lm_roles['rare'][0, lm_top1]):.2f} "
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

# %% tags=["nbval-check-output"]
LM = dict(precomputed=shipped_lm["meta"]["command"], analogue=MINILM)
lm_claims = [
    attnbook.compare("MiniLM: rank correlation of confidence and LRP relevance",
        lm_rho, paper=VOITA["confidence_tracks_relevance"].value,
        above_chance=(0.0, lm_vs["rho_p"]), digits=2, band=0.02,
        source=VOITA["confidence_tracks_relevance"].where,
        reason=f"rank correlation {lm_rho:.2f}", **LM),
    attnbook.compare(
        "MiniLM: of the 3 most relevant heads, how many are among the 3 most "
        "positional (hypergeometric test)", len(lm_both),
        paper=VOITA["relevant_heads_have_roles"].value, digits=1,
        above_chance=(lm_vs["both_chance"], lm_vs["both_p"]),
        source=VOITA["relevant_heads_have_roles"].where,
        reason=f"{len(lm_both)} of the 3 most relevant heads are among the 3 most "
        "positional", **LM),
    attnbook.compare(
        "MiniLM: the most relevant layer-1 head is less confident than half its layer "
        "(1 = yes)", float(lm_less >= lm_h // 2),
        paper=VOITA["relevant_first_layer_head_not_confident"].value, same_side_of=0.5,
        digits=1, source=VOITA["relevant_first_layer_head_not_confident"].where,
        reason=f"it is more confident than {lm_h - 1 - lm_less} of the layer's other "
        f"{lm_h - 1} heads", **LM),
    attnbook.compare("MiniLM: rare-token share of the most relevant layer-1 head",
        float(lm_roles["rare"][0, lm_top1]), paper=VOITA["rare_token_head_share"].value,
        tol=0.15, digits=2, band=0.03, source=VOITA["rare_token_head_share"].where,
        reason=f"it points at the rarest token for "
        f"{float(lm_roles['rare'][0, lm_top1]):.0%} of tokens", **LM),
]
lm_claims

# %% tags=["remove-input"]
glue("ch10_lm_split", float(lm_split))
glue("ch10_lm_rho", lm_rho)
glue("ch10_lm_rho_p", lm_vs["rho_p"])
glue("ch10_lm_rho_says", lm_claims[0].in_words)
glue("ch10_lm_rho_cmp", "weaker" if lm_rho < rho_enc else "stronger")
glue("ch10_lm_heads", lm_rel.numel())
glue("ch10_lm_sinks", int(lm_sink.sum()))
glue("ch10_lm_sink_rel", float(lm_rel[lm_sink].mean()))
glue("ch10_lm_other_rel", float(lm_rel[~lm_sink].mean()))
glue("ch10_lm_pair_share", float(lm_vs["neighbour"].flatten()[lm_both].min()))
glue("ch10_lm_layer1_more", lm_h - 1 - lm_less)
glue("ch10_lm_layer1_others", lm_h - 1)
glue("ch10_lm_rare_layer1", float(lm_roles["rare"][0, lm_top1]))
glue("ch10_lm_rare_chance", float(lm_roles["rare_chance"]))
glue("ch10_lm_rare_best", float(lm_roles["rare"].max()))
glue("ch10_lm_rare_times",
     float(lm_roles["rare"].max()) / float(lm_roles["rare_chance"]))
glue("ch10_lm_pos", lm_pos)
glue("ch10_lm_positional", int(marks["P"].sum()))

# %% [markdown]
# MiniLM's relevance ranking is as reliable as the translation model's (split-half rank correlation
# {glue:text}`ch10_lm_split:.2f`), and what it ranks first is what the paper describes. The two most relevant heads of
# the whole encoder are its two clean positional heads, whose largest weight falls on a neighbour for at least
# {glue:text}`ch10_lm_pair_share:.0%` of tokens ({numref}`fig-ch10-6`). Across the {glue:text}`ch10_lm_heads:d` heads, the paper's "more
# confident, more relevant" {glue:text}`ch10_lm_rho_says` against chance (rank correlation {glue:text}`ch10_lm_rho:.2f`, p =
# {glue:text}`ch10_lm_rho_p:.2g`, {glue:text}`ch10_lm_rho_cmp` than in the translation encoder; on another model, an analogue).
#
# The sink heads, {glue:text}`ch10_lm_sinks:d` of the {glue:text}`ch10_lm_heads:d`, take on average {glue:text}`ch10_lm_sink_rel:.3f` of their
# layer's relevance, the others {glue:text}`ch10_lm_other_rel:.3f`. Parking attention on [CLS] or [SEP] is close to a
# no-op, as {cite:t}`clark2019what` argued for BERT, although LRP still routes some relevance through them.
#
# The paper's two first-layer observations do not carry over. MiniLM's most relevant first-layer head is more
# confident than {glue:text}`ch10_lm_layer1_more:d` of the other {glue:text}`ch10_lm_layer1_others:d` heads of its layer. It does not
# point at the rarest token ({glue:text}`ch10_lm_rare_layer1:.0%` of tokens, chance {glue:text}`ch10_lm_rare_chance:.1%`). The best
# rare-token head anywhere does so for {glue:text}`ch10_lm_rare_best:.0%` of tokens, {glue:text}`ch10_lm_rare_times:.1f` times chance
# but far from the paper's 66%.
#

# %% [markdown]
# ## What reproduces, and what does not
#
# The table collects the chapter's findings beside the paper's. Every row is a comparison claim above, with
# its verdict; what differs is said with its measured reason.

# %%
display(Markdown(rf.reproduction_table(
    VOITA, train_pairs=len(train_pairs), cfg=cfg, beam_bleu=evaluation["beam4"]["bleu"],
    positional=(max(best_prev, best_next), lm_pos), gain=(mt_gain, lm_gain),
    rare=(float(rare[0, top_layer1]), float(lm_roles["rare"][0, lm_top1])),
    rho=(rho_enc, lm_rho), both=(len(both), len(lm_both)),
)))

# %% [markdown]
# ## Summary
#
# * The shipped model develops in its encoder a strong previous-token head ({glue:text}`ch10_best_prev:.2f` of
#   tokens), short of the paper's 90% positional criterion. It has no syntactic head by the paper's 10-point
#   rule and no rare-token head. Heads twice as wide raise the shares ({glue:text}`ch10_h4_prev:.2f` previous,
#   {glue:text}`ch10_h4_next:.2f` next), still short of 90%. A second seed moves the share
#   {glue:text}`ch10_seed_vs_width` than the head width does.
# * The roles appear during training in an order: sinks, confident heads, then the previous-token head. Over
#   the last 30% of training the best neighbour share moves by hundredths: by the rule stated before the run,
#   it {glue:text}`ch10_late_says` (seed 1).
# * MiniLM, trained on far more text, has clean positional heads ({glue:text}`ch10_lm_pos:.2f`) and a syntactic head
#   by the paper's rule: the detectors find what the paper describes when a model has it. Its two most relevant
#   heads are its two positional heads.
#

# %% [markdown]
# ## Exercises
#
# 1. Switch off the best positional head alone and measure the BLEU it costs; compare with the most relevant head.

# %% [markdown]
# ### A checked exercise
#
# Find a head's role by hand. One head's attention over five tokens is `exercises.ATTENTION_EXAMPLE` (rows are queries). What share of its queries put their largest weight on the previous token (the statistic behind a positional head)? Put your number in `answer` and run the cell; `exercises.check` says whether it is right and gives a hint if not. A worked solution is in the hidden cell below it.

# %%
from attnbook.booktools import exercises

print(torch.tensor(exercises.ATTENTION_EXAMPLE))
answer = None  # a share between 0 and 1
exercises.check("ch10-previous-token", answer)

# %% tags=["hide-cell"]
# worked solution: each query's most attended key, compared with the token before it
A_ex = torch.tensor(exercises.ATTENTION_EXAMPLE)
top_key = A_ex.argmax(dim=-1)
previous = torch.arange(len(A_ex)) - 1  # query 0 has none: -1 never matches
solution = (top_key == previous).double().mean().item()
print(f"most attended key of each query: {top_key.tolist()}; share on the previous "
      f"token {solution:.2f}")
exercises.solved("ch10-previous-token", solution)

# %% tags=["remove-cell"]
# the box at the top of the page: this run's claims, summarised (attnbook.claims.render)
from attnbook.claims.prose import glue_result

_ = glue_result("ch10b_result")
