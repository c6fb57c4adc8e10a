"""Record a `paper`-preset run of chapters on a GPU for the reproduction page (book/reproduction.ipynb).

    python scripts/record_paper_run.py --all                       # every chapter in _toc.yml
    python scripts/record_paper_run.py book/part1_rank_collapse/01_pure_attention_loses_rank.ipynb

Each chapter is executed in a fresh kernel with ATTNBOOK_PRESET=paper (nbclient, per-cell timeout) on an
in-memory copy whose outputs and execution counts are cleared first: the committed notebook, which keeps its
`quick` outputs, is not touched, and no `quick` value can pass for a `paper` one. Only the claim records of
cells that ran (mimetype application/vnd.attnbook.claim+json) are written to
results/paper/<notebook-stem>.json as {"gpu", "seconds", "preset", "torch", "date", "complete", "cuda_used",
"claims", "not_reached", "errored", "errors", "commit", "threads"} ("cuda_used": whether the chapter allocated GPU memory,
from a probe cell run after it; "not_reached": the names of the committed claims whose cells did not run before
a stop; "errored": the committed claims of cells that raised another error than a failing check, also recorded
among "claims" with "verdict": "errored"). A claim that fails at the paper preset raises in the notebook; the
run goes on, and the claim is recorded with "holds": false. "complete" is true only when every cell ran without
an error. Commit results/paper/ to show the runs on the reproduction page.

    python scripts/record_paper_run.py --all --parallel 8       # chapters side by side (a GPU machine has 16 cores)

Without CUDA the script refuses to run unless --allow-cpu is given (for testing the script itself, e.g.
`--preset quick --allow-cpu --out /tmp/runs`).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import subprocess
from concurrent.futures import ThreadPoolExecutor
import json
import os
import re
import sys
import time
from pathlib import Path

import nbformat
import torch
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
from attnbook.claims import MIMETYPE  # noqa: E402
from attnbook.booktools.reproduction import PAPER_RESULTS, chapter_notebooks, claims_in_notebook  # noqa: E402

#: what attnbook.claims.Claim.line() prints for a failing check (inside the ClaimFailed message)
_FAILED = re.compile(r"check fails: (?P<name>.+?): book (?P<value>\S+) \[(?P<condition>.*?)\]")


def gpu_name() -> str:
    """The name of CUDA device 0, or "" when there is none."""
    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else ""


def failed_claims(nb: nbformat.NotebookNode) -> tuple[list[dict], list[str]]:
    """Claims that raised ClaimFailed (as records with holds=False), and the other errors' summaries."""
    failed, errors = [], []
    for cell in nb.cells:
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if out.get("output_type") != "error":
                continue
            m = _FAILED.search(out.get("evalue", ""))
            if out.get("ename") == "ClaimFailed" and m:
                try:
                    value = float(m.group("value"))
                except ValueError:
                    value = None
                failed.append(dict(name=m.group("name"), value=value, condition=m.group("condition"),
                                   kind="check", verdict="fails", holds=False))
            else:
                errors.append(f"{out.get('ename')}: {out.get('evalue', '')[:300]}")
    return failed, errors


#: appended to the chapter (in memory) to see whether it allocated GPU memory
_CUDA_PROBE = (
    "import torch as _t\n"
    "print('attnbook-cuda-bytes', _t.cuda.max_memory_allocated() if _t.cuda.is_available() else 0)"
)


def cuda_used(nb: nbformat.NotebookNode) -> bool | None:
    """Whether the executed chapter allocated GPU memory (from the probe cell); None if the probe did not run."""
    for out in nb.cells[-1].get("outputs", []):
        m = re.search(r"attnbook-cuda-bytes (\d+)", out.get("text", ""))
        if m:
            return int(m.group(1)) > 0
    return None


def clear_outputs(nb: nbformat.NotebookNode) -> None:
    """Remove every code cell's outputs and execution count, so that a cell that does not run shows nothing."""
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None


def _only(nb: nbformat.NotebookNode, index: int) -> nbformat.NotebookNode:
    """A notebook holding only cell ``index`` of ``nb`` (to read one cell's claim records)."""
    return nbformat.v4.new_notebook(cells=[nb.cells[index]])


def commit() -> str:
    """The commit the run executes (with ``+dirty`` when the working tree has changes), or "" outside git."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""
    return head + ("+dirty" if dirty else "")


def errored_claims(nb: nbformat.NotebookNode, committed: list[tuple[int, list[dict]]],
                   failed: list[dict]) -> list[dict]:
    """The committed claims of cells that ran and raised another error than a failing check (which is recorded
    by :func:`failed_claims`), and that the run did not display: records with ``verdict: errored``."""
    out, shown = [], {rec["name"] for rec in claims_in_notebook(nb)} | {f["name"] for f in failed}
    for i, recs in committed:
        if i >= len(nb.cells) or nb.cells[i].cell_type != "code":
            continue
        raised = [o for o in nb.cells[i].get("outputs", []) if o.get("output_type") == "error"]
        if not raised:
            continue
        error = f"{raised[0].get('ename')}: {raised[0].get('evalue', '')[:200]}"
        out += [dict(name=rec["name"], value=None, condition=rec.get("condition", ""), kind=rec.get("kind", "check"),
                     verdict="errored", holds=False, error=error) for rec in recs if rec["name"] not in shown]
    return out


def record(path: Path, out_dir: Path, preset: str, timeout: int, gpu: str, deadline: float | None = None) -> dict:
    """Execute ``path`` at ``preset`` and write its claim records to ``out_dir/<stem>.json``.

    ``timeout``: seconds per cell. ``deadline``: a ``time.time()`` after which the run stops; each cell
    then gets at most the time left. A run stopped by a timeout keeps the claims of the cells that ran and
    says where it stopped in ``errors``.
    """
    nb = nbformat.read(path, as_version=4)
    committed = [(i, claims_in_notebook(_only(nb, i))) for i in range(len(nb.cells))]
    clear_outputs(nb)  # only what this run computes may be recorded
    nb.cells.append(nbformat.v4.new_code_cell(_CUDA_PROBE))  # did the chapter put anything on the GPU?
    os.environ["ATTNBOOK_PRESET"] = preset  # the kernel inherits the environment

    def cell_timeout(cell) -> int:
        if deadline is None:
            return timeout
        return max(1, min(timeout, int(deadline - time.time())))

    start = time.perf_counter()
    stopped = None
    try:
        NotebookClient(
            nb, timeout=timeout, timeout_func=cell_timeout, kernel_name="python3", allow_errors=True,
            resources={"metadata": {"path": str(path.parent)}},
        ).execute()
    except Exception as exc:  # a cell timed out or the kernel died: keep what ran
        done = sum(1 for c in nb.cells if c.cell_type == "code" and c.get("execution_count"))
        stopped = f"stopped after {done} code cells: {type(exc).__name__}: {str(exc).strip().splitlines()[0][:200]}"
    seconds = time.perf_counter() - start
    claims = claims_in_notebook(nb)
    not_reached = [rec["name"] for i, recs in committed for rec in recs if not nb.cells[i].get("execution_count")]
    failed, errors = failed_claims(nb)
    errored = errored_claims(nb, committed, failed)
    if stopped:
        errors.append(stopped)
    run = dict(
        gpu=gpu or "CPU", seconds=round(seconds, 1), preset=preset, torch=torch.__version__,
        date=_dt.date.today().isoformat(), commit=commit(), threads=os.environ.get("OMP_NUM_THREADS", "all"),
        notebook=str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path),
        complete=stopped is None and not errors and not failed, cuda_used=cuda_used(nb),
        claims=claims + failed + errored, not_reached=not_reached, errored=[e["name"] for e in errored],
        errors=errors,
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{path.stem}.json").write_text(json.dumps(run, indent=1) + "\n")
    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--all", action="store_true", help="every chapter in _toc.yml")
    parser.add_argument("--preset", default="paper", help="preset to run at (default: paper)")
    parser.add_argument("--timeout", type=int, default=3600, help="seconds per cell")
    parser.add_argument("--time-limit", type=float, default=None,
                        help="seconds for the whole run; the chapter running then stops and keeps its claims so far")
    parser.add_argument("--out", type=Path, default=ROOT / PAPER_RESULTS, help="folder for the JSON files")
    parser.add_argument("--allow-cpu", action="store_true", help="run without CUDA (to test this script)")
    parser.add_argument("--parallel", type=int, default=1, help="chapters run side by side (default 1)")
    args = parser.parse_args()
    paths = chapter_notebooks(ROOT) if args.all else [p.resolve() for p in args.notebooks]
    if not paths:
        parser.error("give notebooks or --all")
    gpu = gpu_name()
    if not gpu and not args.allow_cpu:
        parser.error("no CUDA device: a paper run needs a GPU (use --allow-cpu only to test this script)")
    status = 0
    deadline = None if args.time_limit is None else time.time() + args.time_limit
    if args.parallel > 1 and "OMP_NUM_THREADS" not in os.environ:
        # chapters side by side share the cores: each kernel gets its part, not all of them (the 2026-12-04 run
        # had eleven kernels each using every core, and CPU-side cells ran several times slower)
        os.environ["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // args.parallel))
    with ThreadPoolExecutor(max_workers=max(1, args.parallel)) as pool:
        runs = list(pool.map(lambda p: record(p, args.out, args.preset, args.timeout, gpu, deadline), paths))
    for p, run in zip(paths, runs):
        # a gate may fail (recorded, its chapter says what that means); nothing else may
        n_fail = sum(not c.get("holds", False) for c in run["claims"] if c.get("kind") != "gate")
        print(f"{run['seconds']:8.1f} s  {p.relative_to(ROOT)}: {len(run['claims'])} claims, "
              f"{n_fail} failing, {len(run['errors'])} other errors", flush=True)
        for e in run["errors"]:
            print(f"          error: {e}")
        status |= bool(n_fail or run["errors"])
    print(f"claims recorded under {args.out} ({MIMETYPE})")
    return int(status)


if __name__ == "__main__":
    sys.exit(main())
