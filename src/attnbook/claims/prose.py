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

from typing import Any


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
