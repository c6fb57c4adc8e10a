"""A small public-domain English text sample, shipped with the package (chapter "Rank collapse in
pretrained transformers", and chapter "Path effectiveness").

The sample is the World English Bible (public domain), one verse per line, produced from Debian's
``sword-text-web`` by ``scripts/make_english_sample.py``; ``src/attnbook/data/english/README.md`` gives its
provenance and licence. The book uses it wherever a chapter needs natural-language input and the paper's
own corpus (wiki_bio, RTE) cannot be shipped or downloaded.
"""

from __future__ import annotations

from functools import lru_cache

from attnbook.core.runs import DATA

#: the shipped sample: one verse per line, UTF-8 plain text
SAMPLE_PATH = DATA / "english" / "web_verses.txt"


@lru_cache(maxsize=1)
def _load() -> tuple[str, ...]:
    if not SAMPLE_PATH.exists():
        raise FileNotFoundError(
            f"{SAMPLE_PATH} is missing; regenerate it with `python scripts/make_english_sample.py`"
        )
    lines = SAMPLE_PATH.read_text(encoding="utf-8").splitlines()
    return tuple(line.strip() for line in lines if line.strip())


def english_sentences(n: int | None = None) -> list[str]:
    """English sentences (one Bible verse each, in canonical order) from the shipped public-domain sample.

    ``n``: how many to return, from the start (``None``: all 2,449 of them).
    Used by chapter "Rank collapse in pretrained transformers" (Dong et al. 2021, Fig. 2 inputs) and the
    memorization task of chapter "Path effectiveness".
    """
    lines = _load()
    if n is None:
        return list(lines)
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"n must be a positive int or None, got {n!r}")
    if n > len(lines):
        raise ValueError(f"n={n} is more than the {len(lines)} sentences in the shipped sample")
    return list(lines[:n])
