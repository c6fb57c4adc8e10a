"""The papers' reference numbers, each with where it was read, from one data file per paper
(``attnbook/data/papers/<key>.json``). A chapter compares with :func:`number` and cites its ``where``;
no paper number is typed into a chapter or a script.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, NamedTuple

from attnbook.core.runs import DATA

FOLDER = DATA / "papers"


class PaperNumber(NamedTuple):
    value: Any
    where: str


@lru_cache(maxsize=None)
def _paper(key: str) -> dict:
    path = FOLDER / f"{key}.json"
    if not path.exists():
        known = sorted(p.stem for p in FOLDER.glob("*.json"))
        raise ValueError(f"no paper {key!r}; papers: {', '.join(known)}")
    return json.loads(path.read_text())


def number(paper: str, name: str) -> PaperNumber:
    """The value of ``name`` in ``paper`` (e.g. ``number("voita2019", "encoder_only_wmt")``) and where in the
    paper it was read."""
    numbers = _paper(paper)["numbers"]
    if name not in numbers:
        raise ValueError(f"{paper} has no number {name!r}; it has {', '.join(sorted(numbers))}")
    entry = numbers[name]
    return PaperNumber(entry["value"], entry["where"])


def numbers(paper: str) -> dict[str, PaperNumber]:
    """Every number of ``paper`` by name (a chapter that compares with many of them reads them once)."""
    return {name: number(paper, name) for name in _paper(paper)["numbers"]}
