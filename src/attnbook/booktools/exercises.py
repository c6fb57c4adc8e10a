"""Checked exercises (every part of the book): a chapter's coding exercise is checked here, with a verdict and a hint (issue: a tutorial
whose exercises give feedback).

The reader writes an answer in the chapter and calls :func:`check`, which says whether it is right and, if not,
gives a hint. Each answer is compared with a reference the library computes (never a typed-in number), so the
exercise stays right when the library changes. The chapter's worked solution, hidden behind a toggle in the
rendered book, ends with :func:`solved`, which raises when the solution is wrong: since every chapter is executed
in CI, an exercise cannot rot.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch

from attnbook.rank import one_layer
from attnbook.signal import propagation as prop
from attnbook.signal import reverser as rv


@dataclass(frozen=True)
class Exercise:
    """One checked exercise: its ``name`` (``chNN-topic``), the question in a sentence, the reference answer (a
    function, so that it is computed by the library when checked), a hint, and the relative tolerance."""

    name: str
    question: str
    reference: Callable[[], float]
    hint: str
    rel_tol: float = 1e-6


EXERCISES: dict[str, Exercise] = {e.name: e for e in [
    Exercise(
        "ch03-gamma",
        "The lemma's constant gamma(mu) grows with mu = ||W_QK||_(1,inf) ||R||_(1,inf)^2 / sqrt(d_qk). What is its "
        "largest value for mu <= 1?",
        lambda: float(one_layer.gamma(torch.tensor(1.0, dtype=torch.float64))),
        "gamma = e^(2 mu) (1 + e^mu) / 4 increases with mu, so its largest value on [0, 1] is at mu = 1.",
    ),
    Exercise(
        "ch08-ratio",
        "Under uniform attention, 16 tokens of norm sqrt(d) with every pairwise cosine 0.5: predict the query to "
        "value gradient-norm ratio of one attention layer at initialisation.",
        lambda: prop.uniform_qk_v_ratio(0.5, 16),
        "Use the closed forms of the Jacobian norms for these tokens: ||X||_F^2 = n d, ||xbar||^2 = d (1 + (n-1) "
        "rho) / n, ||C||_F^2 = d^2 (1 - rho)^2 (n - 1), with sigma^2 = 1/d; the width d cancels.",
    ),
    Exercise(
        "ch09-collapsed",
        "A model whose output tokens are all alike gives one answer at every position. For 4 uniform digits of "
        "3 values, what is the best accuracy it can reach on the reversal task?",
        lambda: rv.collapsed_accuracy(3, 4),
        "Its best answer is the input's most frequent digit, which is right count/4 of the time: average the "
        "largest digit count over all 3^4 sequences (itertools.product) and divide by 4.",
    ),
]}


@dataclass(frozen=True)
class Feedback:
    """The verdict on an answer: ``right`` and a message, shown as one line in a notebook."""

    name: str
    right: bool
    message: str

    def __repr__(self) -> str:
        return f"{self.name}: {self.message}"

    def _repr_markdown_(self) -> str:
        return f"**{self.name}**: {'✅' if self.right else '✳️'} {self.message}"


def check(name: str, answer) -> Feedback:
    """Whether ``answer`` (a number) answers exercise ``name``: right within its tolerance, or a hint. ``None``
    (not answered yet) gets the question and the hint."""
    if name not in EXERCISES:
        raise ValueError(f"unknown exercise {name!r}; expected one of {', '.join(EXERCISES)}")
    ex = EXERCISES[name]
    if answer is None:
        return Feedback(name, False, f"not answered yet. {ex.question} Hint: {ex.hint}")
    try:
        if isinstance(answer, (str, bytes)):
            raise TypeError
        value = float(answer)  # a number, or a one-element tensor or array
    except (TypeError, ValueError):
        raise ValueError(f"exercise {name!r} expects a number, got {type(answer).__name__}") from None
    if math.isclose(value, ex.reference(), rel_tol=ex.rel_tol, abs_tol=1e-12):
        return Feedback(name, True, "right.")
    return Feedback(name, False, f"not yet ({value:.6g} is not the answer). Hint: {ex.hint}")


def solved(name: str, answer) -> Feedback:
    """:func:`check` for a chapter's worked solution: raises ``AssertionError`` when the solution does not pass
    its own exercise's check, so that running the chapter (CI) fails on an exercise that rotted."""
    feedback = check(name, answer)
    if not feedback.right:
        raise AssertionError(f"the worked solution of exercise {name!r} fails its check: {feedback.message}")
    return feedback
