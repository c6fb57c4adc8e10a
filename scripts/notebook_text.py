"""Write every chapter's code and prose as a plain-text script, so that diffs, linters and duplicate-code
checks reach the notebooks (the Annotated Transformer keeps its source the same way).

    python scripts/notebook_text.py          # rewrite text/<part>/<chapter>.py from book/<part>/<chapter>.ipynb
    python scripts/notebook_text.py --check  # fail if a text copy is missing or out of step

The copies are jupytext "percent" scripts without outputs: ``# %%`` starts a code cell, ``# %% [markdown]``
a prose cell. The notebooks stay the source of truth (they hold the outputs nbval checks); the copies are
regenerated from them, and ``tests/test_notebook_text.py`` fails when one is stale. ``make test`` lints
the copies with ruff.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import jupytext

ROOT = Path(__file__).resolve().parents[1]
BOOK, TEXT = ROOT / "book", ROOT / "text"


def notebooks() -> list[Path]:
    return sorted(p for p in BOOK.rglob("*.ipynb") if "_build" not in p.parts and ".ipynb_checkpoints" not in p.parts)


def text_path(notebook: Path) -> Path:
    return TEXT / notebook.relative_to(BOOK).with_suffix(".py")


def as_text(notebook: Path) -> str:
    nb = jupytext.read(notebook)
    # no kernel or jupytext header: it would only add noise to the diffs
    nb.metadata = {"jupytext": {"notebook_metadata_filter": "-all", "cell_metadata_filter": "tags"}}
    for cell in nb.cells:
        cell.metadata = {k: v for k, v in cell.metadata.items() if k == "tags"}
    return jupytext.writes(nb, fmt="py:percent")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only check that the text copies are in step")
    args = parser.parse_args()
    stale = []
    wanted = {text_path(nb): as_text(nb) for nb in notebooks()}
    for path, text in wanted.items():
        if not path.exists() or path.read_text() != text:
            stale.append(path)
            if not args.check:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
    extra = [p for p in TEXT.rglob("*.py") if p not in wanted] if TEXT.exists() else []
    for p in extra:
        stale.append(p)
        if not args.check:
            p.unlink()
    if args.check and stale:
        print("out of step with the notebooks (run python scripts/notebook_text.py):", *map(str, stale), sep="\n  ")
        return 1
    if not args.check:
        print(f"{len(stale)} text copies written or removed, {len(wanted)} notebooks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
