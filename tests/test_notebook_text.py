"""The notebooks as reviewable text and their scaffold (the README's chapter layout), checked rather than kept
by convention: every chapter has objectives, a summary and exercises; every cell that shows claims is
tagged for nbval and hides its code; the plain-text copies under text/ are in step; no new code cell grows
past 30 lines; no paper number is typed into a chapter (they are read from ``attnbook/data/papers``)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from attnbook.claims import MIMETYPE

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "book").glob("part*/*.ipynb"))
MAX_LINES = 30

#: code cells longer than MAX_LINES (chapter, first line) allowed for teaching code the reader is meant to read
#: in one piece (none today). Analysis goes to the library instead; a new long cell fails, and a cell that
#: leaves this list must be removed from it (test below).
LONG_CELLS: set = set()


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def _text(cell: dict) -> str:
    return "".join(cell["source"])


def test_chapters_were_found():
    assert len(CHAPTERS) >= 11


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_has_objectives_summary_and_exercises(path):
    prose = [_text(c) for c in _cells(path) if c["cell_type"] == "markdown"]
    lines = [line for t in prose for line in t.splitlines()]
    assert any("**In this chapter you will**" in t for t in prose[:4]), "objectives missing near the top"
    assert "## Summary" in lines, "no '## Summary' section"
    assert "## Exercises" in lines, "no '## Exercises' section"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_cells_that_show_claims_are_checked_by_nbval(path):
    for i, cell in enumerate(_cells(path)):
        if cell["cell_type"] != "code":
            continue
        shows = any(MIMETYPE in out.get("data", {}) for out in cell.get("outputs", []))
        tagged = "nbval-check-output" in cell.get("metadata", {}).get("tags", [])
        assert shows == tagged, f"cell {i}: shows claims={shows} but nbval-check-output tag={tagged}"
        hidden = {"hide-input", "remove-input"} & set(cell.get("metadata", {}).get("tags", []))
        assert not tagged or hidden, (
            f"cell {i} shows claims with its code: tag it hide-input (its table says the same); the few "
            "lines of the idea go in a visible cell before it")


def test_no_new_long_code_cells_and_the_allow_list_only_shrinks():
    long_now = set()
    for path in CHAPTERS:
        for cell in _cells(path):
            lines = _text(cell).rstrip("\n").split("\n")
            if cell["cell_type"] == "code" and len(lines) > MAX_LINES:
                long_now.add((path.name, lines[0]))
    assert not long_now - LONG_CELLS, f"code cells over {MAX_LINES} lines: {sorted(long_now - LONG_CELLS)}"
    assert not LONG_CELLS - long_now, f"remove from LONG_CELLS (no longer long): {sorted(LONG_CELLS - long_now)}"


def test_text_copies_are_in_step_with_the_notebooks():
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "notebook_text.py"), "--check"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


#: ``paper=`` followed by a number: a comparison whose paper value is typed in rather than read with
#: ``attnbook.claims.papers``. Zero is allowed: a difference the paper's statement makes zero (a path that
#: "falls to chance", no pair "in the other order") is not a number read from the paper.
TYPED_PAPER_NUMBER = re.compile(r"\bpaper\s*=\s*\(?[-+]?(?!0(?:\.0*)?(?![\d.]))\.?\d")


@pytest.mark.parametrize("path", CHAPTERS + [ROOT / "book" / "reproduction.ipynb"], ids=lambda p: p.stem)
def test_no_paper_number_is_typed_into_a_chapter(path):
    typed = [m.group() for cell in _cells(path) if cell["cell_type"] == "code"
             for m in TYPED_PAPER_NUMBER.finditer(_text(cell))]
    assert not typed, f"{path.name}: paper numbers typed in ({typed}); read them with attnbook.claims.papers"


def test_the_typed_paper_number_pattern():
    assert TYPED_PAPER_NUMBER.search("x, paper=0.8, tol=1") and TYPED_PAPER_NUMBER.search("paper=-1,")
    assert TYPED_PAPER_NUMBER.search("paper=10,") and TYPED_PAPER_NUMBER.search("paper=(0.65 - 0.54)")
    assert TYPED_PAPER_NUMBER.search("paper=0.05)") and TYPED_PAPER_NUMBER.search("paper=0.07")
    assert not TYPED_PAPER_NUMBER.search("paper=0.0, tol") and not TYPED_PAPER_NUMBER.search("paper=0,")
    assert TYPED_PAPER_NUMBER.search("paper = 0.5") and TYPED_PAPER_NUMBER.search("paper=.5")
    assert TYPED_PAPER_NUMBER.search("paper=+1") and not TYPED_PAPER_NUMBER.search("paper=0.)")
    assert not TYPED_PAPER_NUMBER.search("paper=PAPER_FULL[name]")


#: a decimal in running text (not part of a longer number, a word or a version string)
DECIMAL = re.compile(r"(?<![\w.])\d+\.\d+(?![\w.])")

#: chapters whose prose still types numbers the chapter prints, with how many (issue 35: every such number comes
#: from the run through attnbook.claims.prose.glue). The list may only shrink; a chapter leaves it at zero.
TYPED_OUTPUTS = {
}


def prose_decimals(markdown: str) -> list[str]:
    """The decimals typed in a Markdown cell's running text (code, math, glue roles and link targets left out:
    a worked example's arithmetic is the same at every preset)."""
    text = re.sub(r"```.*?```", " ", markdown, flags=re.S)
    text = re.sub(r"\$\$.*?\$\$|\$[^$]*\$", " ", text, flags=re.S)
    text = re.sub(r"\{glue:[a-z]+\}`[^`]*`", " ", text)
    text = re.sub(r"`[^`]*`", " ", text)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    return DECIMAL.findall(text)


def printed_decimals(cells: list[dict]) -> set[str]:
    """The decimals a chapter's outputs show, less the papers' numbers and the rules' constants (a claim's
    ``paper`` and ``condition``), which the prose may name."""
    shown, constants = set(), set()
    for cell in cells:
        for out in cell.get("outputs", []) if cell["cell_type"] == "code" else []:
            texts = ["".join(out.get("text", ""))]
            for kind, data in out.get("data", {}).items():
                if kind == MIMETYPE:
                    records = json.loads(data) if isinstance(data, str) else data
                    for rec in records if isinstance(records, list) else [records]:
                        constants.update(DECIMAL.findall(f"{rec.get('paper')} {rec.get('condition', '')}"))
                elif kind.startswith("text/"):
                    texts.append("".join(data))
            for t in texts:
                shown.update(DECIMAL.findall(t))
    return shown - constants


def typed_outputs(path: Path) -> list[str]:
    cells = _cells(path)
    printed = printed_decimals(cells)
    return [d for cell in cells if cell["cell_type"] == "markdown" for d in prose_decimals(_text(cell))
            if d in printed]


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_prose_does_not_type_a_number_the_chapter_prints(path):
    """A number the chapter computes reaches the prose through glue, so that a paper run's page says the paper
    run's numbers (issue 35); the allow-list TYPED_OUTPUTS only shrinks."""
    typed = typed_outputs(path)
    allowed = TYPED_OUTPUTS.get(path.stem, 0)
    assert len(typed) <= allowed, (f"{path.name}: {len(typed)} decimals typed in the prose equal printed ones "
                                   f"(allowed {allowed}): {typed}; cite them with attnbook.claims.prose.glue")
    assert len(typed) >= allowed, f"lower TYPED_OUTPUTS[{path.stem!r}] to {len(typed)}"


def test_the_typed_output_detector():
    md = ("The slope is 0.25 ({glue:text}`s:.2f`), see `x = 0.75` and [a](http://x.org/1.5), version 2.13.0, "
          "$\\sqrt{42} \\approx 6.48$.")
    assert prose_decimals(md) == ["0.25"]
    cells = [{"cell_type": "code", "source": "", "outputs": [
        {"output_type": "stream", "text": "slope 0.25, 3.5\n"},
        {"output_type": "display_data", "data": {MIMETYPE: {"paper": 3.5, "condition": "within 0.5"}}}]},
        {"cell_type": "markdown", "source": md + " The paper has 3.5."}]
    assert printed_decimals(cells) == {"0.25"}


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_figure_has_alt_text(path):
    """A screen reader reads a figure's alt text, which is otherwise its file path: every cell that shows an image
    gives one (``mystnb.image.alt``, written from its caption), and it is not the caption's markup."""
    missing = []
    for i, cell in enumerate(_cells(path)):
        if cell["cell_type"] != "code" or not any("image/png" in o.get("data", {}) for o in cell.get("outputs", [])):
            continue
        alt = cell.get("metadata", {}).get("mystnb", {}).get("image", {}).get("alt", "")
        if len(alt) < 20 or "`" in alt or "$" in alt:
            missing.append(i)
    assert not missing, f"{path.name}: figure cells without alt text: {missing}"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_no_code_line_is_wider_than_the_column(path):
    """The rendered column holds 88 characters of code (black's width; book/_ext/static/attnbook.css): a longer
    line scrolls sideways on a desktop, which the browser test reports only after a whole build."""
    wide = [(i, len(line)) for i, cell in enumerate(_cells(path))
            if cell["cell_type"] == "code" and "remove-cell" not in cell.get("metadata", {}).get("tags", [])
            for line in "".join(cell["source"]).splitlines() if len(line) > 88]
    assert not wide, f"{path.name}: (cell, characters) of code lines over 88 characters: {wide}"


@pytest.mark.parametrize("path", CHAPTERS + [ROOT / "book" / "intro.ipynb"], ids=lambda p: p.stem)
def test_cells_whose_code_is_removed_print_nothing_stray(path):
    """A cell whose code the book removes (``remove-input``: glue, tables built for the prose) must not leave a
    bare value under the prose: its last expression ends with ``;``, so its only outputs are the glued values
    and what it displays on purpose (a ``display`` call)."""
    stray = [i for i, cell in enumerate(_cells(path)) if cell["cell_type"] == "code"
             and "remove-input" in cell.get("metadata", {}).get("tags", [])
             for out in cell.get("outputs", []) if out.get("output_type") in ("execute_result", "stream")]
    assert not stray, f"{path.name}: cells with removed code that print a stray value: {stray}"


#: words of the project's workshop, not of the book (a reader has no issue tracker, sessions or reviews to refer to)
WORKSHOP_WORDS = re.compile(r"\b(the issue|issue \d+|this session|sessions?|the review|reviewers?|closing note|"
                            r"project's notes|was lent|the two cores|this book started from)\b", re.I)


@pytest.mark.parametrize("path", CHAPTERS + [ROOT / "book" / "intro.ipynb", ROOT / "book" / "reproduction.ipynb"],
                         ids=lambda p: p.stem)
def test_no_workshop_words_in_the_prose(path):
    found = [(i, m.group(0)) for i, cell in enumerate(_cells(path)) if cell["cell_type"] == "markdown"
             for m in WORKSHOP_WORDS.finditer(_text(cell))]
    assert not found, f"{path.name}: (cell, words) that belong to the project's workshop, not the book: {found}"


def test_the_workshop_words_pattern():
    assert WORKSHOP_WORDS.search("the issue's design where a GPU is lent; none was")
    assert WORKSHOP_WORDS.search("slowed by a test run that shared the two cores")
    assert WORKSHOP_WORDS.search("chapter 9 cites the review on 13 lines")
    assert WORKSHOP_WORDS.search("the Korean-language review this book started from")
    assert not WORKSHOP_WORDS.search("the paper reviews the literature on pruning")
