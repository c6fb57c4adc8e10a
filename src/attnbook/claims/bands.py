"""How nbval compares a re-executed claim with the committed one (``book/conftest.py``): kind, name, condition,
paper value and verdict exactly, the value within the claim's band, so that committed outputs do not depend on
the CPU's instruction set or thread count."""

from __future__ import annotations

import copy
from typing import Optional

from attnbook.claims.api import MIMETYPE

#: record fields compared within the band; every other field must match exactly
_BANDED = ("value", "interval")


def records_agree(committed: dict, live: dict) -> bool:
    """Whether a re-executed claim ``live`` agrees with the ``committed`` record (what nbval checks).

    Kind, name, condition, verdict, paper value and every other field must be equal; ``value`` (and the
    ends of ``interval``) must lie within the committed record's ``band`` of the committed values. A record
    without a ``band`` (written before bands existed) must match exactly.
    """
    if not isinstance(committed, dict) or not isinstance(live, dict):
        raise ValueError("records_agree expects two claim records (dicts)")
    if set(committed) != set(live):
        return False
    band = float(committed.get("band") or 0.0)
    for key in committed:
        a, b = committed[key], live[key]
        if key not in _BANDED:
            if a != b:
                return False
            continue
        a_vals = a if isinstance(a, (list, tuple)) else [a]
        b_vals = b if isinstance(b, (list, tuple)) else [b]
        if len(a_vals) != len(b_vals):
            return False
        for x, y in zip(a_vals, b_vals):
            if x is None or y is None:
                if x is not y:
                    return False
            elif not (abs(float(x) - float(y)) <= band or float(x) == float(y)):
                return False
    return True


def _output_records(output) -> Optional[list]:
    data = output.get("data") if hasattr(output, "get") else None
    if not data or MIMETYPE not in data:
        return None
    rec = data[MIMETYPE]
    return rec if isinstance(rec, list) else [rec]


def accept_claims_within_band(live: list, committed: list) -> list:
    """The ``live`` outputs of a cell, each claim output replaced by its ``committed`` twin where the
    records agree (:func:`records_agree`); how ``book/conftest.py`` makes nbval compare claims within bands.

    Claim outputs are paired in order (the i-th claim output of the live cell with the i-th of the committed
    cell); outputs without claims, and claim outputs that do not agree, are returned unchanged, so nbval
    reports them.
    """
    refs = [out for out in committed if _output_records(out) is not None]
    positions = [i for i, out in enumerate(live) if _output_records(out) is not None]
    out = list(live)
    for i, ref in zip(positions, refs):
        now, then = _output_records(live[i]), _output_records(ref)
        if len(now) == len(then) and all(records_agree(r, t) for r, t in zip(then, now)):
            replaced = copy.deepcopy(live[i])
            replaced["data"] = copy.deepcopy(ref["data"])
            out[i] = replaced
    return out

