"""Tests of attnbook.rank.tasks.recipes: which change of the paper's recipe matters (every seed reaches the
target with it, none without it), and the reason worded from the ablation's rows."""

import pytest

from attnbook.claims import NOT_MEASURED
from attnbook.rank.tasks import recipes


def rows(reached: dict, target=0.98) -> list[dict]:
    """Ablation rows: change -> list of steps to target per seed (None: not reached)."""
    return [{"change": c, "seed": s, "reached": step is not None, "steps_to_target": step, "target": target,
             "final_acc": 0.99 if step is not None else 0.5} for c, steps in reached.items()
            for s, step in enumerate(steps)]


def test_a_change_matters_only_when_every_seed_reaches_with_it_and_none_without():
    r = rows({"none": [None] * 3, "lr": [300, 400, 350], "fresh_data": [None, 900, None],
              "epochs_x10": [None] * 3})
    assert recipes.changes_that_matter(r) == ["lr"]  # one seed of three is not enough
    reason = recipes.ablation_reason(r)
    assert "the book's learning rate alone matters: it lets every seed reach it" in reason
    assert "3 of 3 seeds reach 0.98 (median step 350), ending at 0.990, 0.990, 0.990" in reason
    assert "1 of 3 seeds" in reason
    assert NOT_MEASURED not in reason


def test_no_change_matters_where_the_recipe_as_it_is_reaches_or_none_helps():
    reaches = rows({"none": [None, 500, None], "lr": [300, 400, 350]})
    assert recipes.changes_that_matter(reaches) == []
    nothing = rows({"none": [None] * 2, "lr": [None, 300]})
    assert recipes.changes_that_matter(nothing) == []
    assert recipes.ablation_reason(nothing).endswith(f"why: {NOT_MEASURED}")


def test_the_rows_must_hold_the_recipe_as_it_is_and_the_same_seeds():
    with pytest.raises(ValueError, match="'none'"):
        recipes.changes_that_matter(rows({"lr": [300]}))
    with pytest.raises(ValueError, match="seeds"):
        recipes.changes_that_matter(rows({"none": [None, None], "lr": [300]}))


def test_task_rows_keeps_one_task_and_is_empty_without_the_run():
    record = {"rows": [dict(r, task=t) for t in ("hull", "sort") for r in rows({"none": [None], "lr": [5]})]}
    assert [(r["task"], r["change"]) for r in recipes.task_rows(record, "sort")] == [("sort", "none"),
                                                                                    ("sort", "lr")]
    assert recipes.task_rows(record, "memorise") == []
    assert recipes.task_rows(None, "sort") == []
