"""Make the small public-domain English sample shipped in src/attnbook/data/english/ (one command).

    apt-get install -y sword-text-web libsword-utils     # Debian: the World English Bible + mod2imp
    python scripts/make_english_sample.py                # writes src/attnbook/data/english/web_verses.txt

Reads the World English Bible (public domain; SWORD module engWEB2015eb from Debian's sword-text-web)
with ``mod2imp``, keeps the verse text of the books in BOOKS (footnotes, cross-references and OSIS markup
removed, whitespace collapsed), and writes one verse per line, in canonical order. Only the standard
library is used. The output is deterministic: running it twice gives the same file.
"""

from __future__ import annotations

import argparse
import html
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "src" / "attnbook" / "data" / "english" / "web_verses.txt"
MODULE = "engWEB2015eb"
#: narrative and letter books, about 280 KB of plain text together
BOOKS = ("Genesis", "Ruth", "Jonah", "Mark", "James")
MIN_WORDS = 4  # drop fragments such as "Amen."

HEADER = re.compile(r"^\$\$\$(?P<book>.+?) (?P<chapter>\d+):(?P<verse>\d+)\s*$")
NOTE = re.compile(r"<(note|title)\b.*?</\1>", re.S)  # footnotes, cross-references, headings
WORD_TAG = re.compile(r"</?w\b[^>]*>")  # Strong's-number word wrappers: inline, removed without a space
TAG = re.compile(r"<[^>]+>")  # any other markup (paragraphs, poetry lines, milestones)
SPACE = re.compile(r"\s+")


def read_module(module: str) -> str:
    """The whole module as imp text (``$$$Book C:V`` headers, each followed by the verse's OSIS text)."""
    try:
        return subprocess.run(["mod2imp", module], check=True, capture_output=True, text=True).stdout
    except FileNotFoundError:
        sys.exit("mod2imp not found: apt-get install -y libsword-utils sword-text-web")


def clean(osis: str) -> str:
    """Verse text without footnotes and markup, whitespace collapsed."""
    text = TAG.sub(" ", WORD_TAG.sub("", NOTE.sub(" ", osis)))
    text = html.unescape(text)
    return SPACE.sub(" ", text).strip()


def verses(imp: str, books: tuple[str, ...]) -> list[str]:
    out: dict[str, list[str]] = {b: [] for b in books}
    book = body = None
    lines = imp.splitlines() + ["$$$End 0:0"]
    for line in lines:
        m = HEADER.match(line)
        if m or line.startswith("$$$"):
            if book in out and body is not None:
                text = clean(" ".join(body))
                if len(text.split()) >= MIN_WORDS:
                    out[book].append(text)
            if m and int(m["chapter"]) > 0 and int(m["verse"]) > 0:
                book, body = m["book"], []
            else:
                book, body = None, None
        elif body is not None:
            body.append(line)
    missing = [b for b in books if not out[b]]
    if missing:
        sys.exit(f"no verses found for {missing}; is {MODULE} installed?")
    return [v for b in books for v in out[b]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    lines = verses(read_module(MODULE), BOOKS)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {len(lines)} verses, {args.out.stat().st_size / 1024:.0f} KB, to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
