"""Tests of attnbook.claims.prose: a glued number is stored for the Markdown (myst-nb) and returned."""

from __future__ import annotations

import pytest

from attnbook.claims.prose import glue


def test_glue_returns_the_value_and_refuses_a_bad_name():
    assert glue("late_slope", 0.25) == 0.25
    with pytest.raises(ValueError, match="glue name"):
        glue("late slope", 1.0)
    with pytest.raises(ValueError, match="glue name"):
        glue(3, 1.0)


def test_glue_hands_the_value_to_myst_nb(monkeypatch):
    myst_nb = pytest.importorskip("myst_nb")
    seen = []
    monkeypatch.setattr(myst_nb, "glue", lambda name, value, display=True: seen.append((name, value, display)))
    glue("bleu", 31.5)
    assert seen == [("bleu", 31.5, False)]
