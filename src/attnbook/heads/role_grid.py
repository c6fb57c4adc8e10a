"""What it takes to grow Voita et al.'s head roles (chapter "A translation model", its role table).

The role table compares the shipped translation model with variants of its recipe, one setting changed at a
time (another seed, wider heads, a quarter of the training verses). Two pieces of that comparison live here:

* :func:`early_stopping_gate`, the training gate of a data cell: with few verses, training must end because
  dev BLEU stopped improving for ``patience`` evaluations, not because the steps ran out, so that more steps
  would not have helped on dev (the rule in ``data/translation/README.md``, written before the run);
* :func:`setting_effect`, the rule that turns a role statistic measured in two cells of the grid (seeds at
  each setting) into *raises*, *lowers* or *within seed noise*: the change of the cell means against the seed
  spread, the largest difference between two seeds of one cell;
* :func:`grid_runs`, every model of the grid as a named run of :mod:`attnbook.core.runs`, shipped or not yet
  (a GPU cell, or a CPU training not yet made), with what it changes and its command.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

from attnbook.claims import Claim, gate
from attnbook.core import runs

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


def setting_effect(at_reference: Sequence[float], at_setting: Sequence[float]) -> dict:
    """The rule of the role table's data axis (``data/translation/README.md``): ``at_reference`` holds a role
    statistic for each seed of the reference cell (all the verses), ``at_setting`` for each seed of the changed
    cell. Returns ``change`` (reference mean minus setting mean), ``spread`` (the largest difference between two
    seeds of one cell; NaN when no cell has two seeds) and ``says``: ``"raises"`` when the change is positive
    and larger than the spread, ``"lowers"`` when negative and larger in size, ``"within seed noise"``
    otherwise, and ``"undecided"`` without a spread to compare with."""
    cells = [list(map(float, c)) for c in (at_reference, at_setting)]
    if not all(cells):
        raise ValueError(f"each cell needs at least one seed's value, got {len(cells[0])} and {len(cells[1])}")
    if not all(math.isfinite(v) for c in cells for v in c):
        raise ValueError(f"role statistics must be finite, got {cells}")
    change = sum(cells[0]) / len(cells[0]) - sum(cells[1]) / len(cells[1])
    spreads = [max(c) - min(c) for c in cells if len(c) > 1]
    spread = max(spreads) if spreads else math.nan
    if not spreads:
        says = "undecided"
    elif abs(change) > spread:
        says = "raises" if change > 0 else "lowers"
    else:
        says = "within seed noise"
    return {"change": change, "spread": spread, "says": says,
            "n_seeds": (len(cells[0]), len(cells[1]))}


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
