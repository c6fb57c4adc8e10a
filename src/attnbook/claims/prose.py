"""Numbers in the prose that come from the run (Intro, "How to read"; README "How to add a chapter").

A sentence such as "the residual falls to 0.026" must say what *this* run computed, at ``quick`` in CI and at
``paper`` on a GPU. The chapter computes the number, hands it to the prose with :func:`glue`, and the Markdown
cites it with myst-nb's role, formatted where it is cited::

    glue("late_slope", slope)                      # a code cell (hidden in the book)
    The slope is {glue:text}`late_slope:.2f`.      # the Markdown

In the rendered book the role shows the value of the run that executed the page. Outside a Jupyter Book (a
Colab install without myst-nb) :func:`glue` still returns the value and displays nothing, and the role is left
as written. ``tests/test_notebook_text.py`` refuses a decimal typed in Markdown that equals one the chapter
prints (a copied output); a paper's number and a rule's constant may be typed.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence


def glue(name: str, value: Any) -> Any:
    """Make ``value`` citable in the chapter's Markdown as ``{glue:text}`name:<format>```; returns ``value``.

    ``name`` must be a Python identifier-like key, unique within the chapter. Nothing is displayed."""
    if not isinstance(name, str) or not name.replace("_", "a").replace("-", "a").isalnum():
        raise ValueError(f"a glue name is letters, digits, '_' or '-', got {name!r}")
    try:
        from myst_nb import glue as myst_glue
    except ImportError:  # a Colab install without the book's tooling: the value is still returned
        return value
    myst_glue(name, value, display=False)
    return value


def glue_result(name: str) -> str:
    """Glue the chapter's "Result" box under ``name``: :func:`attnbook.claims.render.result_summary` of the claims
    this run has made (the last cell of a chapter calls it; the box at the top cites it with the ``glue:md``
    directive, so that the page of a ``paper`` run shows the ``paper`` verdicts). Returns the Markdown."""
    from attnbook.claims.api import REGISTRY
    from attnbook.claims.render import result_summary

    text = result_summary(REGISTRY)
    try:
        from IPython.display import Markdown
    except ImportError:  # pragma: no cover - IPython is a dependency of every notebook run
        return text
    glue(name, Markdown(text))
    return text


def listing(items: Sequence[Any], none: str = "none") -> str:
    """The items as an English list for a sentence cited by :func:`glue` ("3", "3 and 8", "3, 8 and 22");
    ``none`` for an empty list."""
    words = [str(i) for i in items]
    if not words:
        return none
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def sides(intervals: Mapping[Any, Sequence[float]], level: float = 0.0) -> dict[str, list]:
    """Where each interval ``(low, high)`` lies against ``level``, for verdict words in the prose that the run
    decides ("beyond noise at 3 and 8 heads") rather than the author: ``{"above": [...], "below": [...],
    "across": [...]}``, each the keys of ``intervals`` in their order. An interval that touches ``level``
    reaches it (*across*). ``ValueError`` for an interval whose low end lies above its high end."""
    out: dict[str, list] = {"above": [], "below": [], "across": []}
    for key, (low, high) in intervals.items():
        if not low <= high:
            raise ValueError(f"an interval's low end must not exceed its high end, got {key}: ({low}, {high})")
        out["above" if low > level else "below" if high < level else "across"].append(key)
    return out


def sides_in_words(intervals: Mapping[Any, Sequence[float]], level: float = 0.0, unit: str = "") -> str:
    """:func:`sides` as a clause the run writes for the prose: "lies above 0 at 3 and 8 heads; reaches across
    0 at 22 heads" (``unit`` after each list, the level as given)."""
    where = sides(intervals, level)
    words = {"above": f"lies above {level:g}", "below": f"lies below {level:g}",
             "across": f"reaches across {level:g}"}
    return "; ".join(f"{words[k]} at {listing(where[k])}{' ' + unit if unit else ''}"
                     for k in ("above", "below", "across") if where[k])


def verdicts_at(claims: Sequence[Any], labels: Sequence[Any], unit: str = "") -> str:
    """The verdicts of ``claims`` (one per label, in order), grouped for the prose: "undecided at 3, 8 and
    22 heads" or "reproduces at 3 heads; undecided at 8 and 22 heads" (plain words: a glued text is not
    Markdown), in the order each verdict first appears. ``ValueError`` unless there is one label per claim."""
    if len(claims) != len(labels):
        raise ValueError(f"one label per claim, got {len(claims)} claims and {len(labels)} labels")
    grouped: dict[str, list] = {}
    for claim, label in zip(claims, labels):
        grouped.setdefault(claim.verdict, []).append(label)
    return "; ".join(f"{v} at {listing(ls)}{' ' + unit if unit else ''}" for v, ls in grouped.items())
