"""What it takes to grow Voita et al.'s head roles (chapter "A translation model", its role table).

The role table compares the shipped translation model with variants of its recipe, one setting changed at a
time (another seed, wider heads, a quarter of the training verses). Two pieces of that comparison live here:

* :func:`early_stopping_gate`, the training gate of a data cell: with few verses, training must end because
  dev BLEU stopped improving for ``patience`` evaluations, not because the steps ran out, so that more steps
  would not have helped on dev (the rule in ``data/translation/README.md``, written before the run);
* :func:`task_gates`, gates 2 and 3 of the chapter's first page for a model of the grid (its encoder
  attention matters, its outputs do not loop), recorded pass or fail; :func:`encoder_use_check` and
  :func:`looping_check`, the same two gates as must-hold checks on the model Part III analyses;
* :func:`setting_effect`, the rule that turns a role statistic measured in two cells of the grid (seeds at
  each setting) into *raises*, *lowers* or *within seed noise*: a two-sample t test over the seeds, its
  variance pooled over both cells;
* :func:`setting_claim`, one such conclusion as a claim of the page (a finding, with its interval);
* :func:`data_axis`, that rule applied along the data axis (all, half and a quarter of the verses): every
  pair of amounts with analysed models, and whether a statistic grows with data (every step between
  neighbouring amounts *raises*);
* :func:`grid_runs`, every model of the grid as a named run of :mod:`attnbook.core.runs`, shipped or not yet
  (a GPU cell, or a CPU training not yet made), with what it changes and its command.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from attnbook.claims import Claim, check, finding, gate
from attnbook.core import runs
from attnbook.stats import two_sample_t

#: the shipped model's run, the reference every cell of the grid changes one setting of
REFERENCE = "translation_model"


def evaluations_since_best(evals: Sequence[Mapping]) -> int:
    """How many dev evaluations of a training record (a model record's ``evals``, each with ``dev_bleu``) came
    after the best dev BLEU (the first best, as early stopping counts); 0 when the last one is the best."""
    if not evals:
        raise ValueError("the training record has no dev evaluations")
    scores = [float(e["dev_bleu"]) for e in evals]
    return len(scores) - 1 - scores.index(max(scores))


def early_stopping_gate(meta: Mapping, *, model: str) -> Claim:
    """The data cell's training gate as a claim: the evaluations after the best dev BLEU in the model's record
    ``meta`` (:func:`attnbook.heads.translation.load_translation_model`) are at least the recipe's
    ``patience``; precomputed by the record's command. It fails for a model still improving on dev when its
    steps ran out (the shipped model's record ends one evaluation after its best)."""
    patience = int(meta["recipe"]["patience"])
    return gate(f"{model}, gate: dev evaluations after the best dev BLEU (early stopping needs {patience})",
                evaluations_since_best(meta["evals"]), at_least=patience, digits=2, band=0,
                guards="the model might still improve on dev with more steps; its roles describe a model "
                "stopped by the step budget",
                precomputed=meta["command"])


#: gate 2: the BLEU a model must lose with every encoder self-attention head off (it uses its encoder heads)
MIN_ENCODER_DROP = 5.0
#: gate 3: the largest share of greedy outputs that may loop
MAX_LOOPING_SHARE = 0.05


def task_gates(evidence: Mapping, *, model: str, n_verses: int, guards: str, precomputed: str) -> list[Claim]:
    """Gates 2 and 3 of chapter "A translation model" for a model of the role grid, from
    :func:`attnbook.heads.translation.learned_task_gates`'s ``evidence`` on ``n_verses`` test verses: its BLEU
    drop with every encoder self-attention head off is at least :data:`MIN_ENCODER_DROP` (the heads whose
    roles the grid measures are used), and the share of its greedy outputs that loop is at most
    :data:`MAX_LOOPING_SHARE`. Recorded whether they pass or fail (``guards``: what a failure withholds);
    the page analyses a model only if both pass."""
    what = f"{model}, gate: {{}} (first {n_verses} test verses)"
    return [gate(what.format("BLEU lost with every encoder self-attention head off"), evidence["drop"],
                 at_least=MIN_ENCODER_DROP, digits=2, band=1.0, guards=guards, precomputed=precomputed),
            gate(what.format("share of greedy outputs that loop"), evidence["looping_share"],
                 at_most=MAX_LOOPING_SHARE, digits=2, band=0.01, guards=guards, precomputed=precomputed)]


def encoder_use_check(drop: float, *, removed: str, digits: int = 3, band: float | None = None,
                      precomputed: str = "") -> Claim:
    """Gate 2 as a must-hold check on the model Part III analyses (chapters "A translation model" and "Pruning
    heads"): the BLEU it loses with every encoder self-attention head ``removed`` (how: "off", "removed (test,
    greedy)") is at least :data:`MIN_ENCODER_DROP`. Raises :class:`attnbook.claims.ClaimFailed` otherwise: the
    pages read that model's heads, so they stop."""
    return check(f"gate: BLEU lost when all encoder self-attention heads are {removed}", drop,
                 at_least=MIN_ENCODER_DROP, digits=digits, band=band, precomputed=precomputed)


def looping_check(share: float, *, outputs: str, digits: int = 2, precomputed: str = "") -> Claim:
    """Gate 3 as a must-hold check on the model Part III analyses (chapter "A translation model"): the share of
    its ``outputs`` (which: "the whole test split's greedy outputs") that loop is at most
    :data:`MAX_LOOPING_SHARE`. Raises :class:`attnbook.claims.ClaimFailed` otherwise."""
    return check(f"gate: share of {outputs} that loop", share, at_most=MAX_LOOPING_SHARE, digits=digits,
                 precomputed=precomputed)


def setting_effect(at_reference: Sequence[float], at_setting: Sequence[float], level: float = 0.05) -> dict:
    """The rule of the role table's data axis (``data/translation/README.md``): ``at_reference`` holds a role
    statistic for each seed of the reference cell (all the verses), ``at_setting`` for each seed of the changed
    cell. Returns ``change`` (reference mean minus setting mean), ``spread`` (the largest difference between two
    seeds of one cell, for the reader; NaN when no cell has two seeds), ``p`` (two-sided, Student's two-sample
    t test with the seed variance pooled over both cells, ``n_ref + n_setting - 2`` degrees of freedom) and
    ``says``: ``"raises"`` or ``"lowers"`` when ``p < level`` (the change's sign), ``"within seed noise"``
    otherwise, and ``"undecided"`` without a seed variance to test against (one seed per cell). With normal
    seed noise and no effect it says *raises* or *lowers* ``level`` of the time, whatever the seeds per cell
    (the rule first committed, "the change exceeds the largest seed spread", did so 22% to 45% of the time).
    ``interval``: the ``1 - level`` confidence interval of ``change`` that the test inverts (it excludes 0
    exactly when ``p < level``; None with one seed per cell), at the confidence ``level`` it returns (``1 -
    level``); ``dof``: the test's degrees of freedom."""
    cells = [np.asarray(list(map(float, c))) for c in (at_reference, at_setting)]
    if not all(c.size for c in cells):
        raise ValueError(f"each cell needs at least one seed's value, got {cells[0].size} and {cells[1].size}")
    if not all(np.isfinite(c).all() for c in cells):
        raise ValueError(f"role statistics must be finite, got {[c.tolist() for c in cells]}")
    test = two_sample_t(*cells, level=1 - level)  # the interval it inverts: p < level iff 0 is out
    spreads = [float(c.max() - c.min()) for c in cells if c.size > 1]
    says = ("undecided" if test["interval"] is None else ("raises" if test["change"] > 0 else "lowers")
            if test["p"] < level else "within seed noise")
    return {"change": test["change"], "spread": max(spreads) if spreads else math.nan, "p": test["p"],
            "says": says, "n_seeds": test["n"], "dof": test["dof"], "interval": test["interval"],
            "level": 1 - level}


#: the test behind :func:`setting_claim`, as its claims state it
SETTING_TEST = "Student's two-sample t test over seeds, variance pooled over both cells"


def setting_claim(name: str, effect: Mapping, *, band: float, precomputed: str = "") -> Claim:
    """One conclusion of the role grid as a claim (:func:`attnbook.claims.finding`): ``effect`` is what
    :func:`setting_effect` returned for the two cells that ``name`` says it subtracts ("best neighbour share,
    all the verses minus half"). Its interval (95% at the rule's level) decides *higher*, *lower* or *not
    shown* as the rule's t test does (with one seed per cell: *undecided*); the test's seeds and degrees of
    freedom are in its rule.
    ``band``: how far a re-execution's difference may move (in the statistic's unit)."""
    n_ref, n_setting = effect["n_seeds"]
    test = f"{SETTING_TEST} ({n_ref} against {n_setting} seeds, {effect['dof']} degree(s) of freedom)"
    return finding(name, effect["change"], interval=effect["interval"], test=test, level=effect["level"],
                   band=band, precomputed=precomputed)


def data_axis(levels: Mapping[str, Sequence[float]], level: float = 0.05) -> dict:
    """The role grid's data axis by the rules of ``data/translation/README.md``: ``levels`` maps each amount
    of training data, most first (``{"all": [...], "50%": [...], "25%": [...]}``), to a role statistic for
    each of its *analysed* seeds (empty where no model of that amount passed its gates). Returns ``steps``:
    for each pair of amounts that both have analysed seeds, the more-data amount minus the other
    (:func:`setting_effect`), keyed ``"all - 50%"``, in the order of ``levels``; and ``grows``: with three or
    more amounts analysed, True when every step between neighbouring amounts *raises* and False when every
    such step is decided (*raises*, *lowers* or *within seed noise*) and one does not raise; None with
    fewer amounts or an *undecided* step (one seed per amount): the rule then says nothing about growth."""
    names = list(levels)
    if len(names) < 2:
        raise ValueError(f"the data axis needs at least two amounts of data, got {names}")
    kept = [k for k in names if len(levels[k])]
    steps = {f"{a} - {b}": setting_effect(levels[a], levels[b], level)
             for i, a in enumerate(kept) for b in kept[i + 1:]}
    grows = None
    neighbours = [steps[f"{a} - {b}"]["says"] for a, b in zip(kept, kept[1:])]
    if len(kept) >= 3 and "undecided" not in neighbours:
        grows = all(says == "raises" for says in neighbours)
    return {"steps": steps, "grows": grows}


def grid_runs(preset: str = "quick") -> list[dict]:
    """Every variant of the shipped model's recipe in the run table (runs named ``translation_model_*`` at
    ``preset``), in the table's order: ``run``, ``changes`` (the settings that differ from
    :data:`REFERENCE`'s, name -> value), ``shipped`` (its file exists), ``pending`` (why not, from the run
    table) and ``command``."""
    reference = runs.settings(REFERENCE, preset)
    out = []
    for name, r in runs.RUNS.items():
        if not name.startswith(REFERENCE + "_") or preset not in r.settings:
            continue
        settings = runs.settings(name, preset)
        out.append({"run": name, "changes": {k: v for k, v in settings.items() if reference.get(k) != v},
                    "shipped": r.path(preset).is_file(), "pending": r.pending,
                    "command": runs.command(name, preset)})
    return out
