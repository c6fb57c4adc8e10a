"""Tests of attnbook.claims.prose: a glued number is stored for the Markdown (myst-nb) and returned."""

from __future__ import annotations

import pytest

from attnbook.claims.prose import glue, listing, sides, sides_in_words, verdicts_at


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


def test_listing_joins_with_and_and_names_an_empty_list():
    assert listing([3]) == "3"
    assert listing([3, 8]) == "3 and 8"
    assert listing([3, 8, 22]) == "3, 8 and 22"
    assert listing([], none="no shape") == "no shape"
    assert listing([]) == "none"


def test_sides_puts_each_interval_above_below_or_across_the_level():
    ivs = {3: (0.2, 1.0), 8: (-0.5, 0.4), 22: (-1.0, -0.1), 48: (0.0, 0.3)}
    assert sides(ivs) == {"above": [3], "below": [22], "across": [8, 48]}  # touching 0 reaches it
    assert sides(ivs, level=0.3) == {"above": [], "below": [22], "across": [3, 8, 48]}
    with pytest.raises(ValueError, match="low end"):
        sides({3: (1.0, 0.0)})


def test_sides_in_words_names_each_side_once_with_its_unit():
    ivs = {3: (0.2, 1.0), 8: (0.1, 0.4), 22: (-0.3, 0.2)}
    assert sides_in_words(ivs, unit="heads") == "lies above 0 at 3 and 8 heads; reaches across 0 at 22 heads"
    assert sides_in_words({3: (-2.0, -1.0)}, level=-0.5) == "lies below -0.5 at 3"
    assert sides_in_words({8: (-0.2, 0.1), 3: (-2.0, -1.0)}) == "lies below 0 at 3; reaches across 0 at 8"


def test_verdicts_at_groups_labels_by_verdict_in_order():
    class C:
        def __init__(self, verdict):
            self.verdict = verdict

    claims = [C("undecided"), C("reproduces"), C("undecided")]
    assert verdicts_at(claims, [3, 8, 22], "heads") == "undecided at 3 and 22 heads; reproduces at 8 heads"
    with pytest.raises(ValueError, match="one label per claim"):
        verdicts_at(claims, [3, 8])
