"""Execute chapters in place at a preset and commit-ready: execution counts 1..n, no stray metadata.

    python scripts/execute_notebooks.py book/part1_rank_collapse/01_pure_attention_loses_rank.ipynb
    python scripts/execute_notebooks.py --all            # every notebook listed in _toc.yml
    python scripts/execute_notebooks.py --all --timings _build/timings.md   # also write seconds per chapter
                                          # and check the quick budgets (exit 1 when one is exceeded)

The preset is ATTNBOOK_PRESET (default: quick without CUDA). Each notebook runs in a fresh kernel with a
per-cell timeout; an error stops with the failing cell. Widget state is stored so the rendered book can
show widgets.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from attnbook.core.presets import active_preset
from attnbook.booktools.reproduction import toc_entries

ROOT = Path(__file__).resolve().parents[1]
KEEP_CELL_METADATA = ("tags", "mystnb")  # mystnb: figure captions and names
#: BOOK.md "Performance budgets" at the quick preset on 2 cores, checked by --timings
CHAPTER_BUDGET_S = 180
BOOK_BUDGET_S = 900


def toc_files() -> list[str]:
    """Every entry of _toc.yml (root first), as paths relative to the repository without suffix."""
    return toc_entries(ROOT)


def toc_notebooks() -> list[Path]:
    """Notebooks listed in _toc.yml, in book order."""
    return [ROOT / f"{f}.ipynb" for f in toc_files() if (ROOT / f"{f}.ipynb").exists()]


def normalise(nb: nbformat.NotebookNode) -> None:
    """Drop per-run metadata so that a re-execution only changes outputs."""
    for cell in nb.cells:
        cell.metadata = {k: v for k, v in cell.metadata.items() if k in KEEP_CELL_METADATA}
        cell.pop("id", None)
    nb.metadata.pop("papermill", None)
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nb.metadata["language_info"] = {"name": "python"}
    nb.nbformat_minor = 4


def execute(path: Path, timeout: int = 600) -> float:
    """Execute ``path`` in place in a fresh kernel; return the seconds it took."""
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(
        nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}},
        store_widget_state=True,
    ).execute()
    seconds = time.perf_counter() - start
    normalise(nb)
    nbformat.write(nb, path)
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--all", action="store_true", help="every notebook in _toc.yml")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    parser.add_argument("--timings", type=Path, help="write a Markdown table of seconds per chapter here")
    args = parser.parse_args()
    paths = toc_notebooks() if args.all else args.notebooks
    if not paths:
        parser.error("give notebooks or --all")
    rows = []
    for p in paths:
        seconds = execute(p.resolve(), args.timeout)
        rows.append((p.resolve().relative_to(ROOT), seconds))
        print(f"{seconds:7.1f} s  {rows[-1][0]}", flush=True)
    if args.timings:
        preset = active_preset()
        total = sum(s for _, s in rows)
        # BOOK.md's budgets hold for the quick preset on 2 cores: each chapter < 180 s, the book < 900 s.
        budget = preset == "quick"
        verdict = lambda ok: ("pass" if ok else "**FAIL**") if budget else "–"  # noqa: E731
        lines = [f"| chapter ({preset}) | seconds | budget ({CHAPTER_BUDGET_S} s) |", "|---|---|---|"]
        lines += [f"| {p} | {s:.0f} | {verdict(s < CHAPTER_BUDGET_S)} |" for p, s in rows]
        lines.append(f"| **total** | **{total:.0f}** | {verdict(total < BOOK_BUDGET_S)} ({BOOK_BUDGET_S} s) |")
        args.timings.parent.mkdir(parents=True, exist_ok=True)
        args.timings.write_text("\n".join(lines) + "\n")
        print("\n".join(lines))
        if budget:
            over = [f"{p} ({s:.0f} s)" for p, s in rows if s >= CHAPTER_BUDGET_S]
            ok = not over and total < BOOK_BUDGET_S
            print(f"budgets (quick, each chapter < {CHAPTER_BUDGET_S} s, total < {BOOK_BUDGET_S} s): "
                  + ("PASS" if ok else "FAIL") + (f"; over: {', '.join(over)}" if over else "")
                  + f"; total {total:.0f} s")
            return 0 if ok else 1
        print(f"budgets are for the quick preset; not checked at {preset}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
