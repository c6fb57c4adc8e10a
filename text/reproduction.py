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
# # Reproduction
#
# Every result this book states is a claim; the two main kinds:
#
# * a **must-hold check** (`attnbook.check`): an identity, a step of a proof, a control or baseline, or a live
#   recomputation that must agree with a shipped file. It raises when it does not hold, so CI fails.
# * a **comparison with a paper** (`attnbook.compare`): this book's value, a number the paper printed, and an
#   agreement rule stated with the claim. The rule is a tolerance, a level reached, a direction decided by an
#   interval over seeds, an interval within an equivalence margin, or a test against chance for a statement the
#   paper makes without a number. The verdict is *reproduces*, *differs* or *undecided* (the book's interval
#   straddles the rule's threshold, its test does not reach p < 0.05, or the data cannot decide). A comparison
#   that differs says why, measured. Nothing passes *because* it differs: CI compares every verdict with the
#   committed one, so a verdict that flips fails the build. The same rule on another model or experiment than
#   the paper's is an **analogue**, counted apart from the reproductions.
#
# A **gate** (`attnbook.gate`) is recorded whether or not it passes: a failed gate stays in the table with
# what it means for the analyses it guards. A **finding** (`attnbook.finding`) is a conclusion of the book's own
# experiment that no paper printed: a difference between two of its arms with its interval from a stated test
# (over seeds, or over test verses), *higher* or *lower* when the interval excludes 0, *not shown* when it
# contains 0 (not evidence of no difference), *undecided* when the test gives no interval; findings are counted
# apart from the comparisons.
#
# **Rules and their data.** The rules on this page were written by authors who had seen much of the data
# they judge. The page [Rules changed after their data](rule_changes.ipynb) lists, with its date and its commit
# where one is named, every rule changed after a first result, and the rules committed before the run that decided them.
#
# This page lists every claim of every chapter, in book order, beside the paper's value. Nothing on it is
# typed by hand: the code below reads each claim's machine-readable record from the chapters' executed
# notebooks.
#
# The columns:
#
# * **the paper's value**: the number the paper reports for the same quantity, with where it was read off;
#   "–" where the paper gives none, "qualitative" where it states an effect without a number. A value
#   only plotted counts where the authors' own figure files or code hold it (Dong et al.'s Figs. 2 and 4),
#   never from a reading of the plot (Voita et al.'s Fig. 7).
# * **this book, `quick`**: the value in this build's run of the `quick` preset on a CPU. Executed on its own, as nbval and Colab do, the page
#   reads the committed run, which CI re-executes and compares; the line under the next cell says which.
# * **this book, `paper` (GPU)**: the value in a recorded run of the `paper` preset (the papers' own sizes),
#   with the GPU it ran on, where one is recorded in `results/paper/` (written by
#   `scripts/record_paper_run.py`; its README says how each run went). The mark "machine, CPU only" is for a chapter
#   that kept its tensors on the CPU of the GPU machine in that run. The mark "not reached" is for a run that
#   stopped (time limit or error) before the claim, and "–" for a claim with no run recorded.
# * **kind**, **condition or agreement rule** and **verdict**: a check's condition and whether it holds, or a
#   comparison's rule and whether the book reproduces the paper under it, or a finding's test and the
#   direction its interval shows (↑ higher, ↓ lower, ○ not shown; a finding's value is followed by its
#   interval).
# * *precomputed*: the claim is read from a file the project ships, and the command that made that file is
#   given; every other claim is computed in the reader's run.
#
# This page reads the notebooks of a clone of the book's repository; on Colab, clone the repository first.

# %%
import attnbook
from attnbook.booktools import reproduction

dev = attnbook.setup(seed=0)
root = reproduction.find_root()
chapters = reproduction.chapter_notebooks(root)
quick_from, quick_said = reproduction.quick_source(root)
rows = reproduction.collect(root, executed=quick_from)
print(f"chapter notebooks in _toc.yml: {len(chapters)}; claims collected: {len(rows)}")
print(f"the quick column is {quick_said}")

# %% [markdown]
# ## Every claim of the book

# %% tags=["nbval-check-output", "hide-input", "full-width"]
from IPython.display import Markdown, display

display(Markdown(reproduction.summary(rows, root)))
display(Markdown(reproduction.per_paper_summary(rows)))
display(Markdown(reproduction.markdown_table(rows)))

# %% [markdown]
# ## The page checks itself
#
# The claims below check that every chapter in the table
# of contents states a checked claim, and that every claim holds in the `quick` run
# the page reads, or is recorded as *not available* with the command that makes its file. A claim that fails in a recorded `paper` run is not hidden: it stays in the table,
# marked ✗, and the count above says how many claims hold in every recorded run.

# %% tags=["nbval-check-output", "hide-input"]
with_claims = {r.notebook for r in rows}
# a gate may fail (it is recorded, and its chapter says what that means), and a claim
# whose file is not made yet is not available (with its command); nothing else fails
missing = reproduction.not_available(rows)
failing = [r.name for r in rows if not r.holds and r.kind != "gate" and r not in missing]
known = {("check", "holds"), ("gate", "passes"), ("gate", "fails"), ("check", "not available"),
         *[(kind, verdict) for kind in ("comparison", "analogue")
           for verdict in ("reproduces", "differs", "undecided")],
         *[("finding", v) for v in ("higher", "lower", "not shown", "undecided")]}
unknown = [r.name for r in rows if (r.kind, r.verdict) not in known]
[
    attnbook.check(
        "chapters with at least one claim",
        len(with_claims),
        predicate=lambda n: n == len(chapters),
        description=f"all {len(chapters)} chapters in _toc.yml",
    ),
    attnbook.check(
        "claims failing in the quick run read", len(failing), close_to=0, tol=0
    ),
    attnbook.check(
        "claims without a known kind and verdict", len(unknown), close_to=0, tol=0
    ),
]

# %% [markdown]
# ## Recording a `paper` run
#
# On a machine with a GPU, `python scripts/record_paper_run.py --all` executes every chapter at the `paper`
# preset, on a copy: the committed notebooks keep their `quick` outputs. It writes each chapter's claim
# records, the GPU's name and the time taken to `results/paper/<chapter>.json`. Commit those files and
# re-execute this page (`python scripts/execute_notebooks.py book/reproduction.ipynb`) to fill the
# `paper` column.
#
