"""Checked claims: every sentence of the book that states a result is backed by one (Intro, "How to read").

A claim has a name, this book's value, the paper's value where one exists, and a condition: a target with
a tolerance, a bound, or a predicate with a description. :func:`check` evaluates it in the reader's run:
a claim that holds is displayed (and recorded); a claim that fails raises :class:`ClaimFailed` with
everything in the message, so nbval fails.

Each displayed claim carries a JSON record under the mimetype :data:`MIMETYPE`, so the reproduction page
can list every claim of the book from the executed notebooks, with nothing typed in by hand. Values are
rounded to ``digits`` significant digits for display, so outputs that nbval compares do not depend on the
CPU's instruction set; the condition is checked on the unrounded value.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from html import escape
from typing import Callable, Optional

MIMETYPE = "application/vnd.attnbook.claim+json"

#: the claims checked so far in this process, in order
REGISTRY: list["Claim"] = []


class ClaimFailed(AssertionError):
    """A checked claim does not hold in this run."""


def _round(x: Optional[float], digits: int) -> Optional[float]:
    if x is None:
        return None
    x = float(x)
    if x == 0 or not math.isfinite(x):
        return x
    return round(x, digits - 1 - int(math.floor(math.log10(abs(x)))))


def _fmt(x: Optional[float]) -> str:
    return "n/a" if x is None else f"{x:g}"


@dataclass(frozen=True)
class Claim:
    """One checked claim. ``value`` and ``paper`` are rounded to ``digits`` significant digits."""

    name: str
    value: float
    condition: str
    paper: Optional[float] = None
    paper_note: str = ""
    chapter: str = ""
    holds: bool = True
    digits: int = 3

    def line(self) -> str:
        mark = "holds" if self.holds else "FAILS"
        paper = f"; paper {_fmt(self.paper)}" if self.paper is not None else ""
        note = f" ({self.paper_note})" if self.paper_note else ""
        return f"claim {mark}: {self.name}: book {_fmt(self.value)} [{self.condition}]{paper}{note}"

    def __repr__(self) -> str:  # what a notebook shows, and what nbval compares
        return self.line()

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"text/plain": self.line(), "text/html": html_table([self]), MIMETYPE: asdict(self)}


def html_table(claims: list[Claim]) -> str:
    """The claims as a small HTML table (how a notebook and the rendered book show them)."""
    rows = "".join(
        "<tr>"
        f"<td>{'&#10003;' if c.holds else '&#10007;'}</td><td>{escape(c.name)}</td>"
        f"<td><b>{_fmt(c.value)}</b></td><td>{escape(c.condition)}</td>"
        f"<td>{_fmt(c.paper) if c.paper is not None else ''}"
        f"{(' <small>(' + escape(c.paper_note) + ')</small>') if c.paper_note else ''}</td>"
        "</tr>"
        for c in claims
    )
    return (
        '<table class="attnbook-claims"><thead><tr><th></th><th>checked claim</th><th>this book</th>'
        f"<th>condition</th><th>paper</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def _register_list_formatter() -> None:
    """In an IPython kernel, give a list of claims (the last expression of a cell) the JSON records too.

    A single :class:`Claim` carries its record through ``_repr_mimebundle_``; a list of claims would only
    show its text, so a formatter for :data:`MIMETYPE` turns it into the list of records.
    """
    try:
        from IPython import get_ipython
        from IPython.core.formatters import BaseFormatter
    except ImportError:  # pragma: no cover - IPython is always there in a notebook
        return
    ip = get_ipython()
    if ip is None or MIMETYPE in ip.display_formatter.formatters:
        return

    class ClaimListFormatter(BaseFormatter):
        format_type = MIMETYPE
        print_method = "_repr_claim_json_"
        _return_type = (dict, list)

    def records(obj):
        if obj and all(isinstance(c, Claim) for c in obj):
            return [asdict(c) for c in obj]
        return None

    def html(obj):
        if obj and all(isinstance(c, Claim) for c in obj):
            return html_table(list(obj))
        return None

    formatter = ClaimListFormatter(parent=ip.display_formatter)
    html_formatter = ip.display_formatter.formatters["text/html"]
    for kind in (list, tuple):
        formatter.for_type(kind, records)
        html_formatter.for_type(kind, html)
    ip.display_formatter.formatters[MIMETYPE] = formatter


_register_list_formatter()


def check(
    name: str,
    value: float,
    *,
    paper: Optional[float] = None,
    paper_note: str = "",
    close_to: Optional[float] = None,
    tol: Optional[float] = None,
    at_least: Optional[float] = None,
    at_most: Optional[float] = None,
    predicate: Optional[Callable[[float], bool]] = None,
    description: Optional[str] = None,
    chapter: str = "",
    digits: int = 3,
) -> Claim:
    """Check that ``value`` satisfies the stated condition, and return the :class:`Claim`.

    Conditions (at least one, all must hold): ``close_to`` with ``tol`` (absolute), ``at_least``,
    ``at_most``, or ``predicate`` with a ``description`` saying what it tests. ``paper`` is the paper's
    value for the same quantity, shown beside the book's (it is a reference, not a target, unless it is
    also passed as ``close_to``).

    Raises :class:`ClaimFailed` when the condition does not hold, and ``ValueError`` when the claim itself
    is malformed (no condition, a target without a tolerance, a non-finite value).
    """
    if not name:
        raise ValueError("a claim needs a name")
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"claim {name!r}: value must be a number, got {value!r}") from None
    if close_to is not None and tol is None:
        raise ValueError(f"claim {name!r}: close_to={close_to} needs a tolerance tol")
    if tol is not None and (close_to is None or tol < 0):
        raise ValueError(f"claim {name!r}: tol must be non-negative and go with close_to")
    if predicate is not None and not description:
        raise ValueError(f"claim {name!r}: a predicate needs a description of what it tests")
    if close_to is None and at_least is None and at_most is None and predicate is None:
        raise ValueError(
            f"claim {name!r}: give a condition (close_to+tol, at_least, at_most or predicate)"
        )
    parts, holds = [], math.isfinite(value)
    if close_to is not None:
        parts.append(f"within {tol:g} of {close_to:g}")
        holds &= abs(value - close_to) <= tol
    if at_least is not None:
        parts.append(f">= {at_least:g}")
        holds &= value >= at_least
    if at_most is not None:
        parts.append(f"<= {at_most:g}")
        holds &= value <= at_most
    if predicate is not None:
        parts.append(description)
        holds &= bool(predicate(value))
    claim = Claim(
        name=name,
        value=_round(value, digits),
        condition=", ".join(parts),
        paper=_round(paper, digits),
        paper_note=paper_note,
        chapter=chapter,
        holds=bool(holds),
        digits=digits,
    )
    if not claim.holds:
        raise ClaimFailed(
            f"{claim.line()}\n  unrounded book value: {value!r}; condition: {claim.condition}"
            + (f"; paper's value: {paper!r}" if paper is not None else "")
        )
    REGISTRY.append(claim)
    return claim
