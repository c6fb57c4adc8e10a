"""How readable a page's prose is (issue: a tutorial first): words of prose, sentences over 40 words, and the
most numbers in one paragraph, measured on a chapter notebook's Markdown cells. ``tests/test_readability.py``
holds every page to the targets, with a list of pages still over them that may only shrink.

What counts as prose: Markdown cells, without display mathematics, code fences and directives; a glued value
(``{glue:text}`name```) counts as one number, inline mathematics as one word, a link as its text.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Union

#: the targets of issue "A tutorial first": words of prose per page, share of sentences over
#: :data:`LONG_SENTENCE` words, and numbers in one paragraph
TARGETS = {"words": 2500, "long_share": 0.15, "numbers_per_paragraph": 12}
LONG_SENTENCE = 40

_DISPLAY_MATH = re.compile(r"\$\$.*?\$\$(\s*\([^)]*\))?", re.S)
_FENCE = re.compile(r"(```|:::).*?(\1)", re.S)
_GLUE = re.compile(r"\{glue(?::text)?\}`[^`]*`")
_ROLE = re.compile(r"\{[a-z:]+\}`[^`]*`")
_INLINE_MATH = re.compile(r"\$[^$]+\$")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d[\d,]*(?:\.\d+)?%?")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z*(\[])")


def prose(markdown: str) -> str:
    """A Markdown cell's prose: display mathematics, fences and directives removed; a glued value written as
    the number 0, other roles and inline mathematics as one word, links as their text."""
    text = _FENCE.sub(" ", _DISPLAY_MATH.sub(" ", markdown))
    text = _GLUE.sub(" 0 ", text)
    text = _ROLE.sub("X", _INLINE_MATH.sub("x", text))
    return _LINK.sub(r"\1", text)


def metrics(notebook: Union[str, Path]) -> dict:
    """A page's ``words`` of prose, its ``sentences``, the ``long`` ones (more than :data:`LONG_SENTENCE`
    words), ``long_share`` and ``numbers_per_paragraph``, the most numbers in one paragraph."""
    cells = json.loads(Path(notebook).read_text())["cells"]
    texts = [prose("".join(c["source"])) for c in cells if c["cell_type"] == "markdown"]
    paragraphs = [p for t in texts for p in re.split(r"\n\s*\n", t) if p.strip()]
    sentences = [s for p in paragraphs for s in _SENTENCE_END.split(" ".join(p.split())) if s.strip()]
    long = sum(len(s.split()) > LONG_SENTENCE for s in sentences)
    return {"words": sum(len(p.split()) for p in paragraphs), "sentences": len(sentences), "long": long,
            "long_share": long / max(1, len(sentences)),
            "numbers_per_paragraph": max((len(_NUMBER.findall(p)) for p in paragraphs), default=0)}
