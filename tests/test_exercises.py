"""Tests of attnbook.booktools.exercises: each check accepts the right answer (computed here another way), rejects a
plausible wrong one with a hint, and every exercise's worked solution is in a chapter, where CI runs it."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pytest
import torch

from attnbook.booktools import exercises
from attnbook.signal import propagation as prop

BOOK = Path(__file__).resolve().parents[1] / "book"


def test_the_ratio_exercise_accepts_the_jacobian_formulas_answer_and_not_its_square():
    X = prop.tokens_with_cosine(16, 48, 0.5, torch.Generator().manual_seed(2)).double()
    norms = prop.uniform_attention_sq_norms(X, 48 ** -0.5, 48 ** -0.5, 48 ** -0.5, d_v=6)
    assert exercises.check("ch08-ratio", math.sqrt(norms["q"] / norms["v"])).right
    wrong = exercises.check("ch08-ratio", norms["q"] / norms["v"])  # forgot the square root
    assert not wrong.right and "Hint" in wrong.message


def test_the_collapsed_exercise_accepts_the_enumeration_and_not_the_mean_count():
    counts = [max(seq.count(v) for v in range(3)) for seq in itertools.product(range(3), repeat=4)]
    assert exercises.check("ch09-collapsed", sum(counts) / len(counts) / 4).right
    assert not exercises.check("ch09-collapsed", 1 / 3).right  # a digit drawn at random


def test_feedback_for_no_answer_bad_answers_and_unknown_exercises():
    pending = exercises.check("ch08-ratio", None)
    assert not pending.right and pending.message.startswith("not answered yet")
    assert "ch08-ratio" in pending._repr_markdown_()
    with pytest.raises(ValueError, match="expects a number"):
        exercises.check("ch08-ratio", "0.3")
    with pytest.raises(ValueError, match="unknown exercise"):
        exercises.check("ch99-nothing", 1.0)
    with pytest.raises(AssertionError, match="worked solution"):
        exercises.solved("ch09-collapsed", 0.5)


def test_every_exercise_has_its_worked_solution_in_a_chapter():
    """A chapter cell calls exercises.solved(<name>, ...) for every exercise: running the chapters (nbval in
    make test) runs every solution through its check."""
    solved = set()
    for path in BOOK.glob("part*/*.ipynb"):
        for cell in json.loads(path.read_text())["cells"]:
            src = "".join(cell["source"])
            solved.update(name for name in exercises.EXERCISES if f'exercises.solved("{name}"' in src)
    assert solved == set(exercises.EXERCISES)


def test_the_gamma_exercise_accepts_the_value_at_one_and_not_at_zero():
    assert exercises.check("ch03-gamma", math.exp(2) * (1 + math.e) / 4).right
    assert not exercises.check("ch03-gamma", 0.5).right  # gamma at mu = 0
