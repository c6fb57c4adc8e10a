"""How a claim is shown (Intro, "How to read"): one line of text and a small HTML table, the same in a
notebook, on the rendered page and on the reproduction page."""

from __future__ import annotations

from html import escape
from typing import Optional, Sequence


def fmt_number(x: Optional[float]) -> str:
    """A claim's number as the tables show it (``n/a`` for none)."""
    return "n/a" if x is None else f"{x:g}"


_MARK = {"holds": "&#10003;", "fails": "&#10007;", "reproduces": "&#10003;", "differs": "&#8800;",
         "undecided": "?", "passes": "&#10003;"}


def html_table(claims: Sequence) -> str:
    """The claims as a small HTML table (how a notebook and the rendered book show them)."""
    rows = []
    for c in claims:
        value = f"<b>{fmt_number(c.value)}</b>"
        if c.interval is not None:
            value += f" <small>[{fmt_number(c.interval[0])}, {fmt_number(c.interval[1])}]</small>"
        paper = fmt_number(c.paper) if c.paper is not None else ""
        if c.paper_note:
            paper += f" <small>({escape(c.paper_note)})</small>"
        verdict = f"{_MARK.get(c.verdict, '')} {c.verdict}"
        if c.verdict in ("differs", "undecided", "fails") and c.reason:
            verdict += f"<br><small>{escape(c.reason)}</small>"
        name = escape(c.name)
        if c.precomputed:
            name += f"<br><small>precomputed: <code>{escape(c.precomputed)}</code></small>"
        rows.append(
            f"<tr><td>{c.kind}</td><td>{name}</td><td>{value}</td><td>{escape(c.condition)}</td>"
            f"<td>{paper}</td><td>{verdict}</td></tr>"
        )
    return (
        '<table class="attnbook-claims"><thead><tr><th>kind</th><th>claim</th><th>this book</th>'
        "<th>condition or agreement rule</th><th>paper</th><th>verdict</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )

