"""Claims in an IPython kernel: a list of claims, the last expression of a cell, shows as one table and
carries every claim's JSON record under :data:`attnbook.claims.api.MIMETYPE` (what the reproduction page reads).
Imported by :mod:`attnbook.claims`; does nothing outside IPython."""

from __future__ import annotations

from attnbook.claims.api import MIMETYPE, Claim
from attnbook.claims.render import html_table


def register_list_formatter() -> None:
    """In an IPython kernel, give a list of claims (the last expression of a cell) the JSON records too.

    A single :class:`Claim` carries its record through ``_repr_mimebundle_``; a list of claims would only
    show its text, so a formatter for :data:`MIMETYPE` turns it into the list of records.
    """
    try:  # optional: the library also runs outside a notebook
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
            return [c.record() for c in obj]
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


register_list_formatter()
