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
# # What attention alone cannot do
#
# This book teaches, and reproduces in code you can run, three results about attention:
#
# 1. **Rank collapse.** A network built only of self-attention layers loses rank *doubly exponentially*
#    with depth: its output converges to a matrix whose rows are all the same {cite:p}`dong2021attention`.
#    Skip connections can stop it; MLPs and LayerNorm only change how fast it happens.
# 2. **Signal propagation.** At initialisation, collapsed tokens make the gradients of the queries and keys
#    vanish; scaling the residual branches with depth prevents it, and queries/keys and values receive
#    gradients of very different sizes, which is why adaptive optimisers help {cite:p}`noci2022signal`.
# 3. **Heads.** A few specialised heads do the heavy lifting; the rest can be pruned with hard-concrete
#    gates {cite:p}`voita2019analyzing`, or by gradient importance {cite:p}`michel2019sixteen`.
#
# {numref}`fig-intro-map` is the map of the argument, one panel per result, each computed by the book's library
# as its chapters compute it (small sizes, so that the page draws it in seconds): without skip connections a
# stack of attention layers loses rank within a few layers, while with them it keeps it; at initialisation
# the tokens of an unscaled post-LN stack become the same token as depth grows, which is what starves the
# queries and keys of gradient, and scaling the residual by $1/\sqrt{L}$ keeps them apart; and most of a trained
# translation model's encoder heads can be pruned at a small cost in BLEU, as the paper found.

# %% tags=["hide-input"]
import matplotlib.pyplot as plt

import attnbook
from attnbook.booktools import overview
from attnbook.claims import papers
from attnbook.heads import sweeps

attnbook.setup(seed=0)
depths = (1, 2, 4, 8, 16, 32)
sweep = sweeps.load("encoder_gates_converged")  # chapter 11's shipped gate sweep
full = sweep["unpruned"]["bleu_beam"]
s = sweep["meta"]["settings"]  # its main runs: one per lambda, the recipe's settings
main = sweeps.main_runs(sweep, {k: s[k] for k in ("lr", "gate_lr", "init_log_alpha", "steps")})
pruned = [(48, 0.0)] + [(r["n_kept"], r["bleu_beam"] - full) for r in main.values()]
paper = papers.number("voita2019", "encoder_only_wmt").value
paper_pts = [(n, b - paper["bleu"][0]) for n, b in zip(paper["heads"], paper["bleu"])]
overview.argument_map(overview.collapse_curves(), overview.cosine_curves(depths), depths,
                      pruned, paper_pts)
plt.show()

# %% [markdown]
# ## Results at a glance
#
# The headline claim of every chapter, as the chapter's committed run states it (the
# [reproduction page](reproduction.ipynb) lists all of them, from the run that built this book). A check
# (✓ holds) is something that must be true; a comparison with a paper says *reproduces*, *differs* (≠, with
# the measured reason) or *undecided* (?, the book's interval straddles the rule's threshold, its test does
# not reach p < 0.05, or the data cannot decide).

# %% tags=["remove-input", "full-width"]
import attnbook.booktools.reproduction
from IPython.display import Markdown, display

rows = attnbook.booktools.reproduction.collect()  # every chapter's committed claims
display(Markdown(attnbook.booktools.reproduction.glance_table(rows)))

# %% [markdown]
# ## Before you start
#
# You need linear algebra (matrix products, norms, rank, singular values), the softmax and the self-attention
# layer as Transformers use it, and enough PyTorch to read a training loop. The proofs use nothing beyond
# calculus and the triangle inequality; each is spelled out step by step.
#
# **Reading paths.** The chapters build on each other, but three shorter routes work:
#
# * *The theory of collapse*: chapters 1-4 (the phenomenon, paths, the one-layer bound proved, the deep bounds).
# * *What it means for training*: chapters 1 and 8-9 (collapse at initialisation, vanishing query/key gradients,
#   residual scaling, temperature, Adam).
# * *What heads do*: chapters 10-11 (roles and relevance in a translation model, pruning heads), after
#   chapter 1 for the notation.
#
# Every chapter opens with a **result box**: the verdict of each of its comparisons with the paper, as the run
# that built the page computed it. Every chapter ends with exercises; those marked *checked* have a cell that
# tells you whether your answer is right, and a worked solution behind a toggle.
#
# ## How to read it
#
# Every chapter is a notebook: prose and mathematics, then the smallest code that shows the step, then a
# figure. Every result the prose states is a claim, shown in a small table under the code; the two main kinds:
#
# * a **must-hold check** (`attnbook.check`): an identity, a step of a proof, a control, or a gate saying that a
#   model is trained enough for the analysis that follows to mean anything. It raises if it does not hold in
#   *your* run;
# * a **comparison with a paper** (`attnbook.compare`): the book's value beside a number the paper printed, an
#   agreement rule stated with it (a tolerance, a level reached, a direction decided by an interval over
#   seeds, an interval within an equivalence margin, or a test against chance for a statement the paper makes
#   without a number), and the verdict, *reproduces*, *differs* (with the measured reason) or *undecided* (the
#   book's interval straddles the rule's threshold, its test does not reach p < 0.05, or the data cannot
#   decide). The same rule applied to another model or experiment than the paper's is an **analogue**, counted
#   apart.
#
# A **gate** (`attnbook.gate`) records whether a model meets the evidence an analysis needs even when it does
# not: the chapter then says what the failure means for the analyses that follow. A **finding**
# (`attnbook.finding`) is a conclusion of the book's own experiment that no paper printed (wider heads against
# narrower, all the verses against half): the difference between two arms with its interval from a stated
# test (over seeds, or over test verses), *higher* or *lower* when the interval excludes 0, *not shown* when it
# contains 0 (not evidence of no difference), *undecided* when the test gives no interval.
#
# Continuous integration executes every chapter, under two CPU code paths, and fails when a check fails, a
# verdict flips, or a value leaves the band around its committed value. A claim read from a file the project
# ships says so (*precomputed*) and names the command that made the file. Where the book's reduced `quick` run
# differs from the paper's set-up, the chapter says by how much and why.
#
# ## How to run it
#
# * **Locally.** `make book` sets up a virtual environment and renders the book into `_build/html`;
#   `make test` runs every test and executes every chapter. Python 3.11 and the package registries are all
#   it needs.
# * **On Colab.** Every chapter has a launch button (the rocket at the top of the page). The first cell
#   installs the book's library, `attnbook`, from the repository.
# * **Presets.** One environment variable, `ATTNBOOK_PRESET`, sizes every experiment: `quick` (the default
#   on a CPU) or `paper` (the default on a GPU; the papers' own model sizes, data sizes and training lengths). Each chapter prints the preset it runs.
#   The [reproduction page](reproduction.ipynb) lists every claim, its kind and its verdict at both presets, with the `paper`
#   runs recorded on a GPU so far.
#
# ## The library
#
# The shared library `attnbook` is thin: one module per concept (`norms`, `attention`, `paths`, `claims`,
# ...), each function naming in its docstring the chapter and equation it implements, so you can go from
# code to text and back.
#
# ## How long it takes
#
# Every page executes in under two minutes on a 2-core CPU at the `quick` preset, most in under one. The
# README's table gives the times measured for each page, with the command that measures them.
#
