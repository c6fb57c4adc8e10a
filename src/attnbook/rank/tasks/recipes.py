"""Chapter "Path effectiveness", section "How fast can it be trained?": which setting of the paper's training
recipe keeps it short of the paper's accuracy, measured by the run ``recipe_ablation``
(``scripts/bench_recipes.py --ablation``): the paper's recipe trained to its end with one setting at a time
changed, at several seeds.

The rule, written before the run: a change *matters* when with it alone every seed reaches the paper's
accuracy by the end of the run while the recipe as it is (change ``none``) reaches it at no seed.
:func:`ablation_reason` words what each change did and which matter; where none does, the reason says so and
that the cause is not measured.
"""

from __future__ import annotations

from statistics import median
from typing import Mapping, Optional, Sequence

from attnbook.claims import NOT_MEASURED
from attnbook.claims.prose import listing

#: what each change of the ablation is, in words (the keys of ``scripts/bench_recipes.py``'s ``CHANGES``)
CHANGE_WORDS = {"lr": "the book's learning rate alone", "fresh_data": "fresh batches every step alone",
                "epochs_x10": "ten times the epochs"}


def task_rows(ablation: Optional[Mapping], task: str) -> list[dict]:
    """The rows of run ``recipe_ablation``'s record ``ablation`` for ``task``: empty where the run is not
    shipped at the preset (``None``) or did not train the task."""
    return [dict(r) for r in ablation["rows"] if r["task"] == task] if ablation else []


def _by_change(rows: Sequence[Mapping]) -> dict[str, list[Mapping]]:
    """The rows grouped by their change, in the order the rows first give each change."""
    out: dict[str, list[Mapping]] = {}
    for r in rows:
        out.setdefault(r["change"], []).append(r)
    return out


def changes_that_matter(rows: Sequence[Mapping]) -> list[str]:
    """The changes with which every seed reached the target while no seed of change ``none`` did (the
    module's rule), in the order the rows give them. ``ValueError`` when the rows lack change ``none`` or a
    change's seeds differ from ``none``'s."""
    by = {c: {r["seed"]: bool(r["reached"]) for r in mine} for c, mine in _by_change(rows).items()}
    if "none" not in by:
        raise ValueError(f"the ablation's rows need change 'none' (the recipe as it is), got {sorted(by)}")
    seeds = set(by["none"])
    odd = [c for c, s in by.items() if set(s) != seeds]
    if odd:
        raise ValueError(f"every change needs the seeds of 'none' {sorted(seeds)}; these differ: {odd}")
    if any(by["none"].values()):
        return []
    return [c for c, s in by.items() if c != "none" and all(s.values())]


def ablation_reason(rows: Sequence[Mapping]) -> str:
    """The measured reason of chapter 7's comparison of the paper's recipe with the paper's accuracy: for each
    change, how many seeds reached the target and at which step (median over those that did), or where the
    seeds ended; then which changes matter (:func:`changes_that_matter`), or that none alone does."""
    parts = []
    for c, mine in _by_change(rows).items():
        reached = sorted(r["steps_to_target"] for r in mine if r["reached"])
        what = "as it is" if c == "none" else CHANGE_WORDS.get(c, c)
        ends = ", ".join(f"{r['final_acc']:.3f}" for r in mine)
        said = (f"{len(reached)} of {len(mine)} seeds reach {mine[0]['target']:g}"
                + (f" (median step {median(reached):g})" if reached else "")
                + f", ending at {ends}")
        parts.append(f"{what}: {said}")
    matter = changes_that_matter(rows)
    verdict = (f"under the rule, {listing([CHANGE_WORDS.get(c, c) for c in matter])} matters: it lets every "
               "seed reach it" if matter else f"no single change lets every seed reach it; why: {NOT_MEASURED}")
    return "the paper's recipe, " + "; ".join(parts) + f"; {verdict}"
