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



#: the claims the result box names per verdict (the rest are counted: the box stays one screen)
SHOWN = 3


def result_summary(claims: Sequence) -> str:
    """A chapter's result in a few lines of Markdown, from the claims it made (the "Result" box at the top of
    each chapter, glued there by :func:`attnbook.claims.prose.glue_result`): each comparison with a paper and
    its verdict, how many analogues agree, the book's own findings by verdict, how many must-hold checks hold,
    which gates fail, and what a preset without a shipped file could not say. A claim made twice (a cell run again) counts once, as last made."""
    latest = {c.name: c for c in claims}
    by_kind: dict[str, list] = {}
    for c in latest.values():
        by_kind.setdefault("not available" if c.verdict == "not available" else c.kind, []).append(c)
    comps = by_kind.get("comparison", [])
    lines = []
    if comps:
        counts = {v: sum(c.verdict == v for c in comps) for v in ("reproduces", "differs", "undecided")}
        def verb(n: int, one: str, many: str) -> str:
            return f"{n} {one if n == 1 else many}"

        lines.append(f"**Against the paper**: of {len(comps)} comparisons, "
                     f"{verb(counts['reproduces'], 'reproduces', 'reproduce')}, "
                     f"{verb(counts['differs'], 'differs', 'differ')} and "
                     f"{verb(counts['undecided'], 'is undecided', 'are undecided')}.")
        lines.append("")
        for verdict in ("reproduces", "undecided", "differs"):  # a line per verdict, at most SHOWN names each
            names = [c.name for c in comps if c.verdict == verdict]
            if names:
                more = f"; and {len(names) - SHOWN} more" if len(names) > SHOWN else ""
                lines.append(f"- *{verdict}* ({len(names)}): " + "; ".join(names[:SHOWN]) + more)
        lines.append("")
    elif by_kind.get("analogue"):  # the paper's numbers set beside another model's, but none on its own
        lines.append("**Against the paper**: no comparison on the paper's own model or experiment; the "
                     "analogues below set the paper's numbers beside another model's.")
        lines.append("")
    else:
        lines.append("**Against the paper**: this chapter compares no number with a paper's; it derives and "
                     "checks.")
        lines.append("")
    tail = []
    analogues = by_kind.get("analogue", [])
    if analogues:
        agree = sum(c.verdict == "reproduces" for c in analogues)
        tail.append(f"**On another model or experiment** (analogues): {agree} of {len(analogues)} agree with the paper.")
    findings = by_kind.get("finding", [])
    if findings:
        said = {v: sum(c.verdict == v for c in findings) for v in ("higher", "lower", "not shown", "undecided")}
        tail.append(f"**Findings of the book's own experiments** (a difference between two of its arms, by a stated "
                    f"test): of {len(findings)}, " + ", ".join(f"{n} {v}" for v, n in said.items() if n) + "."
                    + (" *Not shown*: the interval contains 0, a difference the noise cannot tell from none."
                       if said["not shown"] else ""))
    checks = by_kind.get("check", [])
    if checks:
        tail.append(f"**Must-hold checks**: {sum(c.holds for c in checks)} of {len(checks)} hold.")
    failed = [c.name for c in by_kind.get("gate", []) if not c.holds]
    if failed:
        tail.append("**Gates that fail** (the analyses they guard say what that means): " + "; ".join(failed) + ".")
    missing = by_kind.get("not available", [])
    if missing:
        tail.append(f"**Not available at this preset** (no shipped file): {len(missing)} group(s) of claims.")
    return "\n".join(lines + [" ".join(tail)]).strip() + "\n"
