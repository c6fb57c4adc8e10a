"""The reproduction page (Back matter, "Reproduction"): every checked claim of the book, in book order.

Nothing on that page is typed in by hand. Each claim a chapter displays carries a JSON record under the
mimetype :data:`attnbook.claims.MIMETYPE` in its cell's outputs; :func:`collect` reads every chapter
notebook listed in ``_toc.yml`` (its committed ``quick`` outputs) and gathers those records, then merges
the records of recorded ``paper``-preset runs from ``results/paper/<notebook-stem>.json``, which
``scripts/record_paper_run.py`` writes after executing a chapter on a GPU::

    {"gpu": "NVIDIA H200", "seconds": 812.4, "preset": "paper", "claims": [<claim records>]}

A paper-run record is matched to a quick record by claim name within the same chapter.

The ``quick`` column of a built book is the values of that build: the book's Sphinx extension
(``book/_ext/attnbook_html.py``) names the folder where the build writes each executed chapter in
:data:`EXECUTED_ENV` and reads this page after every chapter, so :func:`quick_source` finds every chapter
as this build executed it. Elsewhere (nbval, Colab, a kernel of
one's own) the page reads the committed notebooks and says so.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Optional, Union

import nbformat
import yaml

from attnbook.claims import ANALOGUE, CHECK, COMPARISON, FINDING, GATE, HIGHER, LOWER, MIMETYPE
from attnbook.claims.api import NOT_AVAILABLE, NOT_MEASURED

#: the toc entry of the reproduction page itself; its own claims are about the book, not a chapter's
PAGE = "book/reproduction"
#: where recorded paper-preset runs live, relative to the repository root
PAPER_RESULTS = Path("results") / "paper"
#: environment variable set by the book's build: the folder of its executed notebooks
EXECUTED_ENV = "ATTNBOOK_EXECUTED_NOTEBOOKS"
#: output types that can carry a claim record
_OUTPUT_TYPES = ("display_data", "execute_result")

PathLike = Union[str, Path]


@dataclass(frozen=True)
class Row:
    """One row of the reproduction table: a claim as this book's quick run checked it, and as a
    recorded paper-preset run checked it (``paper_run`` is ``None`` when no run is recorded)."""

    chapter: str
    notebook: str
    name: str
    paper: Optional[float]
    paper_note: str
    value: Optional[float]
    condition: str
    holds: bool
    paper_run: Optional[dict] = None
    #: the GPU of the chapter's recorded paper run ("" when the chapter has none)
    gpu: str = ""
    #: whether that run executed the whole chapter (``False``: it stopped at its time limit or on an error)
    paper_complete: bool = True
    #: ``"check"`` (must hold), ``"comparison"`` (with a paper), ``"analogue"``, ``"gate"`` or ``"finding"``
    #: (see :mod:`attnbook.claims`)
    kind: str = CHECK
    #: ``holds``/``fails`` for a check, ``reproduces``/``differs``/``undecided`` for a comparison,
    #: ``higher``/``lower``/``not shown``/``undecided`` for a finding
    verdict: str = "holds"
    #: why a comparison differs, measured
    reason: str = ""
    #: the claim's interval (lo, hi), or None; a finding's table cell shows it beside the value
    interval: Optional[tuple] = None
    #: the command that made the shipped file the value is read from ("" when computed in the reader's run)
    precomputed: str = ""

    @property
    def status(self) -> str:
        """The quick run's verdict, with the paper run's when one exists."""
        if self.paper_run is None:
            return self.verdict
        return f"quick {self.verdict}, paper {_verdict(self.paper_run)}"

    @property
    def flips(self) -> bool:
        """Whether a recorded paper run reached another verdict than the quick run (flagged on the page)."""
        return self.paper_run is not None and _verdict(self.paper_run) != self.verdict

    @property
    def all_hold(self) -> bool:
        """Whether the claim held (a check) or was evaluated (a comparison) in every run recorded for it."""
        return self.holds and (self.paper_run is None or bool(self.paper_run.get("holds", False)))


def _verdict(rec: dict) -> str:
    """A record's verdict; records written before claims had kinds carry only ``holds``."""
    if rec.get("verdict"):
        return str(rec["verdict"])
    return "holds" if rec.get("holds", False) else "fails"


def find_root(start: Optional[PathLike] = None) -> Path:
    """The repository root: the nearest folder at or above ``start`` (default: the working directory)
    that holds ``_toc.yml``. Raises ``ValueError`` when there is none (e.g. on Colab without a clone)."""
    here = Path.cwd() if start is None else Path(start)
    here = here.resolve()
    for folder in (here, *here.parents):
        if (folder / "_toc.yml").is_file():
            return folder
    raise ValueError(
        f"no _toc.yml at or above {here}: the reproduction page reads the book's notebooks, so run it "
        "from a clone of the repository"
    )


def toc_entries(root: PathLike) -> list[str]:
    """Every entry of ``root/_toc.yml`` in book order (root page first), without suffix."""
    path = Path(root) / "_toc.yml"
    if not path.is_file():
        raise ValueError(f"expected a table of contents at {path}")
    toc = yaml.safe_load(path.read_text()) or {}
    files = [toc["root"]] if "root" in toc else []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if "file" in node:
                files.append(str(node["file"]))
            for key in ("parts", "chapters", "sections"):
                walk(node.get(key, []))
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(toc)
    return files


#: the caption of the part of ``_toc.yml`` that holds pages about the book (this page, the rules changed after
#: their data, the references) rather than chapters with results
BACK_MATTER = "Back matter"


def back_matter_entries(root: PathLike) -> list[str]:
    """The entries of ``root/_toc.yml``'s part captioned :data:`BACK_MATTER`, in book order (none if it has
    no such part)."""
    toc = yaml.safe_load((Path(root) / "_toc.yml").read_text()) or {}
    parts = [p for p in toc.get("parts", []) if isinstance(p, dict) and p.get("caption") == BACK_MATTER]
    return [str(c["file"]) for p in parts for c in p.get("chapters", []) if isinstance(c, dict) and "file" in c]


def chapter_notebooks(root: PathLike) -> list[Path]:
    """The notebooks listed in ``_toc.yml`` in book order, without the root page (the intro, which only shows the
    chapters' claims), this page wherever the table puts it (its own claims are about the book) and the back
    matter's pages (:data:`BACK_MATTER`: the page of rules changed after their data, whose one check is about
    the book's history, and the references)."""
    root = Path(root)
    entries = toc_entries(root)
    skip = {entries[0], PAGE, *back_matter_entries(root)} if entries else set()  # this page, wherever it is
    return [root / f"{e}.ipynb" for e in entries if e not in skip and (root / f"{e}.ipynb").is_file()]


def _records(data: Any) -> list[dict]:
    """The claim records in an output's ``data``: one record (a displayed claim) or a list of records (a
    list of claims as a cell's last expression). nbformat keeps JSON mimetypes as parsed JSON; a string is
    parsed too, for notebooks written by other tools."""
    if not isinstance(data, dict) or MIMETYPE not in data:
        return []
    rec = data[MIMETYPE]
    if isinstance(rec, str):
        rec = json.loads(rec)
    recs = rec if isinstance(rec, list) else [rec]
    for r in recs:
        if not isinstance(r, dict) or "name" not in r:
            raise ValueError(
                f"a {MIMETYPE} output must be a JSON object with a 'name' or a list of them, got {rec!r}"
            )
    return [dict(r) for r in recs]


def claims_in_notebook(nb: Any) -> list[dict]:
    """The claim records in a notebook's outputs, in cell order.

    ``nb`` is a path to an ``.ipynb`` file or an ``nbformat`` notebook node.
    """
    if isinstance(nb, (str, Path)):
        path = Path(nb)
        if not path.is_file():
            raise ValueError(f"expected a notebook file, {path} does not exist")
        nb = nbformat.read(path, as_version=4)
    if not hasattr(nb, "cells"):
        raise ValueError(f"expected a notebook path or an nbformat notebook, got {type(nb).__name__}")
    records = []
    for cell in nb.cells:
        if cell.get("cell_type") != "code":
            continue
        for out in cell.get("outputs", []):
            if out.get("output_type") in _OUTPUT_TYPES:
                records += _records(out.get("data"))
    return records


def chapter_title(nb: Any, fallback: str = "") -> str:
    """The text of the notebook's first ``# `` heading (``fallback`` when it has none)."""
    for cell in nb.cells:
        if cell.get("cell_type") == "markdown":
            for line in cell.source.splitlines():
                m = re.match(r"^#\s+(.+?)\s*#*\s*$", line)
                if m:
                    return m.group(1)
    return fallback


def load_paper_runs(root: PathLike) -> dict[str, dict]:
    """Recorded paper-preset runs, ``{notebook stem: run}``, from ``root/results/paper/*.json``.

    Each file must hold ``gpu`` (str), ``seconds`` (number) and ``claims`` (a list of claim records);
    a malformed file raises ``ValueError`` naming it.
    """
    folder = Path(root) / PAPER_RESULTS
    runs = {}
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            run = json.loads(path.read_text())
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}: not valid JSON ({err})") from None
        if not isinstance(run, dict) or not isinstance(run.get("claims"), list) or "gpu" not in run:
            raise ValueError(f"{path}: expected {{'gpu': ..., 'seconds': ..., 'claims': [...]}}")
        runs[path.stem] = run
    return runs


def quick_source(root: PathLike, environ: Optional[dict] = None) -> tuple[Optional[Path], str]:
    """Where the ``quick`` values come from: ``(folder of this build's executed notebooks, sentence)``, or
    ``(None, sentence)`` for the committed notebooks when no build named one in ``environ`` (default
    ``os.environ``).

    A build's folder must hold every chapter of ``root/_toc.yml``, each executed after its notebook was
    last changed; otherwise this raises ``ValueError`` naming the chapter (the page would show values
    of another version of it).
    """
    environ = os.environ if environ is None else environ
    folder = environ.get(EXECUTED_ENV)
    if not folder:
        return None, ("the committed `quick` run (no book build is running: this page was executed on "
                      "its own, as nbval and Colab execute it)")
    folder = Path(folder)
    newest = 0.0
    for path in chapter_notebooks(root):
        built = folder / path.relative_to(root)
        if not built.is_file():
            raise ValueError(f"this build has not executed {path.relative_to(root)} (no {built}); the "
                             "reproduction page must be read after every chapter")
        if built.stat().st_mtime < path.stat().st_mtime:
            raise ValueError(f"{built} is older than {path.relative_to(root)}: an execution of an earlier "
                             "version of the chapter")
        newest = max(newest, built.stat().st_mtime)
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(newest))
    return folder, f"this build of the book (every chapter executed by the build, the last at {when})"


def collect(root: Optional[PathLike] = None, executed: Optional[PathLike] = None) -> list[Row]:
    """Every claim of the book as :class:`Row`s, in book order, with recorded paper runs merged in.

    The claims are read from the committed notebooks, or from ``executed`` (a folder holding the executed
    notebooks at the same relative paths, as :func:`quick_source` returns for a build)."""
    root = find_root() if root is None else Path(root)
    runs = load_paper_runs(root)
    rows = []
    for path in chapter_notebooks(root):
        source = path if executed is None else Path(executed) / path.relative_to(root)
        if not source.is_file():
            raise ValueError(f"expected an executed copy of {path.relative_to(root)} at {source}")
        nb = nbformat.read(source, as_version=4)
        title = chapter_title(nb, fallback=path.stem)
        number = re.match(r"^(\d+)_", path.stem)
        if number:
            title = f"{int(number.group(1))}. {title}"
        run = runs.get(path.stem) or _chapter_run(runs, number)
        by_name = {r["name"]: r for r in run["claims"]} if run else {}
        for rec in claims_in_notebook(nb):
            paper_rec = by_name.get(rec["name"])
            rows.append(
                Row(
                    chapter=title,
                    notebook=str(path.relative_to(root)),
                    name=str(rec["name"]),
                    paper=rec.get("paper"),
                    paper_note=str(rec.get("paper_note") or ""),
                    value=rec.get("value"),
                    condition=str(rec.get("condition", "")),
                    holds=bool(rec.get("holds", False)),
                    paper_run=paper_rec,
                    gpu=_machine(run) if run else "",
                    paper_complete=bool(run.get("complete", True)) and not run.get("errors") if run else True,
                    kind=str(rec.get("kind") or CHECK),
                    verdict=_verdict(rec),
                    reason=str(rec.get("reason") or ""),
                    interval=tuple(rec["interval"]) if rec.get("interval") else None,
                    precomputed=str(rec.get("precomputed") or ""),
                )
            )
    return rows


def _chapter_run(runs: dict[str, dict], number) -> Optional[dict]:
    """The recorded run of a page split off a chapter after its runs were recorded: the runs of the chapter's
    other pages (the same number prefix), their claims merged by name (the first run's record where two hold
    the same name), with the first run's machine and status; None when the page has no number or its chapter
    has no run."""
    if not number:
        return None
    same = [runs[stem] for stem in sorted(runs)
            if re.match(r"^(\d+)_", stem) and int(stem.split("_")[0]) == int(number.group(1))]
    if not same:
        return None
    merged: dict = {}
    for run in same:
        for rec in run["claims"]:
            merged.setdefault(rec["name"], rec)
    return {**same[0], "claims": list(merged.values())}


def _machine(run: dict) -> str:
    """Where a recorded run computed: the GPU's name, or "<GPU> machine, CPU only" for a run recorded on a GPU
    machine whose chapter kept its tensors on the CPU (``"cuda_used": false`` in its record)."""
    gpu = str(run.get("gpu", ""))
    return gpu if run.get("cuda_used", True) else f"{gpu} machine, CPU only"


def _num(x: Optional[float]) -> str:
    if x is None:
        return "–"
    x = float(x)
    return f"{x:g}" if math.isfinite(x) else str(x)


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


#: how a claim's note marks a paper "value" that codes a statement without a number (1: the effect exists,
#: +1: a direction), as :func:`attnbook.claims.compare` asks such claims to say
_CODED = re.compile(r"coded 1|1 = yes|direction|qualitative statement|\(\+1\)")


def paper_cell(paper: Optional[float], note: str) -> str:
    """The paper's value as the reproduction table shows it: the number with where it was read, or, where the
    number only codes a statement the paper makes without one (its note says so), "qualitative" with the
    note, so that a coded 1 is never read as a number the paper printed."""
    if paper is not None and paper in (1, -1) and _CODED.search(note or ""):
        return f"qualitative ({note})"
    cell = _num(paper) if paper is not None else ""
    return cell + (f" ({note})" if note else "")


def markdown_table(rows: Iterable[Row]) -> str:
    """The rows as a Markdown (GFM) table: chapter, kind, claim, this book's quick value, the condition (a check)
    or agreement rule (a comparison), the paper's value, the verdict (with the reason when a comparison differs),
    and this book's paper-preset value (with the machine). The chapter is named on its first row; a claim read
    from a shipped file is marked *precomputed* with the command that made the file.
    """
    out = [
        "| chapter | kind | claim | this book, `quick` | condition or agreement rule | the paper's value "
        "| verdict | this book, `paper` |",
        "|---|---|---|---|---|---|---|---|",
    ]
    previous = None
    for r in rows:
        paper = paper_cell(r.paper, r.paper_note)
        if r.paper_run is not None:
            run = f"{_num(r.paper_run.get('value'))}, {_verdict(r.paper_run)} ({r.gpu})"
            if r.flips:
                run += " ⚠ **the verdict flips between presets**"
        elif r.gpu and not r.paper_complete:
            run = f"not reached: the {r.gpu} run stopped early or hit an error"
        elif r.gpu:
            run = f"not in the {r.gpu} run"
        else:
            run = "–"
        # every row names its chapter (so that filtering and sorting keep it), the first of a group in bold
        chapter = f"**{r.chapter}**" if r.notebook != previous else r.chapter
        previous = r.notebook
        mark = _MARKS.get(r.verdict, "✗")
        explained = r.verdict in ("differs", "undecided") or (r.kind == GATE and r.verdict == "fails")
        verdict = f"{mark} {r.verdict}" + (f": {r.reason}" if explained and r.reason else "")
        name = r.name + (f" *(precomputed: `{r.precomputed}`)*" if r.precomputed else "")
        value = _num(r.value)
        if r.kind == FINDING and r.interval is not None:  # a finding is its interval
            value += f" [{_num(r.interval[0])}, {_num(r.interval[1])}]"
        out.append(
            "| " + " | ".join(
                _cell(c) for c in (chapter, r.kind, name, value, r.condition, paper, verdict, run)
            ) + " |"
        )
    return "\n".join(out)


def not_available(rows: Iterable[Row]) -> list[Row]:
    """The claims this run could not make: their file is not made yet at this preset (verdict *not
    available*, each naming the command that makes it). They are neither checks that hold nor gates that
    fail, and :func:`by_kind` leaves them out."""
    return [r for r in rows if r.verdict == NOT_AVAILABLE]


def by_kind(rows: Iterable[Row]) -> tuple[list[Row], list[Row], list[Row], list[Row], list[Row]]:
    """``rows`` split by kind: must-hold checks, comparisons with a paper, analogues (the rule on another model),
    gates and findings (differences between two arms of the book's own experiment), in that order; the claims
    that are not available (:func:`not_available`) are in none of them."""
    rows = [r for r in rows if r.verdict != NOT_AVAILABLE]
    return ([r for r in rows if r.kind not in (COMPARISON, ANALOGUE, GATE, FINDING)],
            [r for r in rows if r.kind == COMPARISON], [r for r in rows if r.kind == ANALOGUE],
            [r for r in rows if r.kind == GATE], [r for r in rows if r.kind == FINDING])


def _showing(findings: list[Row]) -> int:
    """How many findings show a difference (*higher* or *lower*)."""
    return sum(r.verdict in (HIGHER, LOWER) for r in findings)


def reason_not_measured(rows: Iterable[Row]) -> list[Row]:
    """The comparisons that differ and say :data:`attnbook.claims.NOT_MEASURED` (their reason restates what was
    measured but not why it differs): counted apart in :func:`summary`, so that "differs" is never read as
    "differs, and the book knows why"."""
    return [r for r in rows if r.kind == COMPARISON and r.verdict == "differs" and NOT_MEASURED in r.reason]


def summary(rows: list[Row], root: Optional[PathLike] = None) -> str:
    """One Markdown paragraph: how many claims, in how many chapters, how many hold, which GPU runs exist."""
    chapters = {r.notebook for r in rows}
    def n(k: int, word: str) -> str:
        return f"**{k}** {word}" + ("" if k == 1 else "s")

    checks, comparisons, analogues, gates, findings = by_kind(rows)
    reproduce = sum(r.verdict == "reproduces" for r in comparisons)
    undecided = sum(r.verdict == "undecided" for r in comparisons)
    differ = len(comparisons) - reproduce - undecided
    unmeasured = len(reason_not_measured(comparisons))
    precomputed = sum(bool(r.precomputed) for r in rows if r.verdict != NOT_AVAILABLE)  # files that exist
    flips = sum(r.flips for r in rows)
    absent = not_available(rows)
    missing = (f"{n(len(absent), 'claim')} not available at `quick` (the file it reads is not made yet; each "
               "names the command that makes it). " if absent else "")
    text = (
        f"{n(len(rows), 'claim')} in {n(len(chapters), 'chapter')}: {n(len(checks), 'must-hold check')}, "
        f"**{sum(r.all_hold for r in checks)}** of which hold in every recorded run; {n(len(gates), 'gate')} "
        f"(the evidence an analysis needs, recorded even when it fails), **{sum(not r.holds for r in gates)}** "
        "of which fail at `quick` (their chapters say what that means for the analyses they guard); and "
        f"{n(len(comparisons), 'comparison')} with a paper, of which **{reproduce}** reproduce, "
        f"**{differ}** differ (**{differ - unmeasured}** with a measured reason, **{unmeasured}** whose reason "
        f"is not measured) and **{undecided}** are "
        "undecided (the book's interval straddles the rule's threshold, its test does not reach p < 0.05, or "
        "its data cannot decide); "
        f"{n(len(analogues), 'analogue')} (the same rule on another model or experiment than the paper's: "
        f"**{sum(r.verdict == 'reproduces' for r in analogues)}** agree with the paper, not counted as reproductions); "
        f"{n(len(findings), 'finding')} of the book's own experiments (a difference between two of its arms, decided "
        f"by a stated test), of which **{_showing(findings)}** show a "
        "difference. "
        f"{missing}"
        f"**{precomputed}** claims are read from shipped files (*precomputed*, with the command that made them)."
    )
    runs = load_paper_runs(find_root() if root is None else root)
    if not runs:
        text += (
            " **No GPU run is recorded yet**: the `paper` column is empty. To record one, run "
            "`python scripts/record_paper_run.py --all` on a machine with a GPU and commit "
            "`results/paper/`."
        )
    else:
        parts = [f"`{stem}` on {_machine(run)} ({float(run.get('seconds', 0)) / 60:.0f} min"
                 + ("" if run.get("complete", True) else ", stopped early: partial")
                 + (f"; {run['note']}" if run.get("note") else "")
                 + (f", {len(run['errors'])} errors" if run.get("complete", True) and run.get("errors") else "") + ")"
                 for stem, run in runs.items()]
        text += " Recorded `paper`-preset runs: " + ", ".join(parts) + "."
        text += (f" **{flips}** claims reach another verdict at `paper` than at `quick` (marked ⚠ below)."
                 if flips else " No claim reaches another verdict at `paper` than at `quick`.")
    return text


#: which paper each chapter reproduces (chapter number -> paper), for the per-paper summary
PAPERS = {"Dong, Cordonnier, Loukas 2021 (rank collapse)": range(1, 8),
          "Noci et al. 2022 (signal propagation)": range(8, 10),
          "Voita et al. 2019 and Michel et al. 2019 (heads)": range(10, 12),
          "Follow-ups: Wu et al. 2024, Geshkovski et al. 2023, Noci et al. 2023, sinks": range(12, 13)}


def _chapter_number(row: Row) -> Optional[int]:
    m = re.match(r"^(\d+)_", Path(row.notebook).stem)
    return int(m.group(1)) if m else None


def per_paper_summary(rows: Iterable[Row]) -> str:
    """A Markdown table with one row per paper: its chapters, must-hold checks (holding), and comparisons
    that reproduce, differ, or the chapters with no comparison at all (not tested)."""
    rows = list(rows)
    out = ["| paper | chapters | must-hold checks (hold) | comparisons: reproduce | differ | undecided | analogues "
           "(agree) | findings (show a difference) | chapters with no comparison |",
           "|---|---|---|---|---|---|---|---|---|"]
    for paper, numbers in PAPERS.items():
        checks, comps, analogues, _, findings = by_kind(r for r in rows if _chapter_number(r) in numbers)
        untested = [n for n in numbers if not any(_chapter_number(r) == n for r in comps)]
        out.append(f"| {paper} | {numbers.start}-{numbers.stop - 1} | {len(checks)} "
                   f"({sum(r.all_hold for r in checks)}) | {sum(r.verdict == 'reproduces' for r in comps)} | "
                   f"{sum(r.verdict == 'differs' for r in comps)} | {sum(r.verdict == 'undecided' for r in comps)} | "
                   f"{len(analogues)} ({sum(r.verdict == 'reproduces' for r in analogues)}) | "
                   f"{len(findings)} ({_showing(findings)}) | "
                   f"{', '.join(map(str, untested)) if untested else 'none'} |")
    return "\n".join(out)


#: the headline claim of each chapter (chapter number -> claim names), for the intro's results at a glance; a
#: test checks that every name is a claim of its chapter, so renaming a claim cannot silently drop a row
HEADLINES = {
    1: ("pure SAN: order of collapse p in log r(l+1) = log C + p log r(l)",),
    2: ("BERT-base: most common path length (smallest of ties)",),
    3: ("log-log slope of observed residual, median (cubic regime)",),
    4: ("deep bound: (layer, net) pairs, every layer, where the tracked residual exceeds the bound",),
    5: ("BERT-base at init, SAN+skip: mean r_12",),
    6: ("circle, 16 seeds: delay of collapse from width, d=128 minus d=32 pure SAN (steps)",),
    7: ("paths over training seeds: sort, length-1 paths minus chance (90% t over seeds)",),
    8: ("post-LN, alpha=1: |grad W_Q,K| / |grad W_V| at the last layer (floored at 1e-5), largest over "
        "stacks",),
    9: ("SGD: alpha = 1/sqrt(L) minus alpha = 1, accuracy at each one's best learning rate",
        "unscaled model: Adam minus SGD, accuracy at each one's best learning rate"),
    10: ("most confident encoder self-attention head", "best positional share of an encoder head (-1 or +1)"),
    11: ("encoder-only, like with like: BLEU change with 10 of 48 encoder heads, pruned and unpruned both trained on "
         "(beam 4)", "Michel importance: share of heads pruned before BLEU drops by 0.5 (no fine-tuning)"),
    12: ("causal mask: order of collapse p (exponential: 1)",),
}

#: a verdict's mark in the tables (a finding's: the direction its test shows, or none shown)
_MARKS = {"holds": "✓", "passes": "✓", "reproduces": "✓", "differs": "≠", "undecided": "?",
          "higher": "↑", "lower": "↓", "not shown": "○", NOT_AVAILABLE: "…"}


def _tally(rows: list[Row]) -> str:
    """A chapter's claims in a few words: its comparisons by verdict, else its checks."""
    checks, comps, *_ = by_kind(rows)
    if not comps:
        return f"{sum(r.holds for r in checks)} of {len(checks)} checks hold"
    counts = {v: sum(r.verdict == v for r in comps) for v in ("reproduces", "differs", "undecided")}
    plural = {"reproduces": "reproduce", "differs": "differ", "undecided": "undecided"}
    said = ", ".join(f"{k} {v if k == 1 else plural[v]}" for v, k in counts.items() if k)
    return f"{len(comps)} comparison{'' if len(comps) == 1 else 's'}: {said}"


def glance_table(rows: Iterable[Row], headlines: Optional[dict] = None, link_from: str = "book") -> str:
    """The intro's results at a glance (issue: the answer first): one row per headline claim of each chapter
    (:data:`HEADLINES`), as this run's claims state it: the chapter (a link to its rendered page, relative to
    ``link_from``), the claim,
    the book's value and the paper's, the verdict with its reason when it differs or is undecided, and all of the
    chapter's comparisons by verdict. Raises if a headline is not among ``rows``."""
    rows = list(rows)
    headlines = HEADLINES if headlines is None else headlines
    out = ["| verdict | chapter | result | this book | paper | all of the chapter's claims |", "|---|---|---|---|---|---|"]
    for number, names in headlines.items():
        mine = [r for r in rows if _chapter_number(r) == number]
        for i, name in enumerate(names):
            found = [r for r in mine if r.name == name]
            if not found:
                raise ValueError(f"headline {name!r} is not a claim of chapter {number}")
            r = found[0]
            # the rendered page (a link in a cell's output is not rewritten from .ipynb to .html by the build)
            link = Path(r.notebook).relative_to(link_from) if r.notebook.startswith(link_from) else Path(r.notebook)
            link = link.with_suffix(".html").as_posix()
            verdict = f"{_MARKS.get(r.verdict, '✗')} {r.verdict}"
            if r.verdict in ("differs", "undecided") and r.reason:
                verdict += f": {r.reason}"
            chapter = f"[{number}]({link})" if i == 0 else ""
            paper = "" if r.paper is None else _num(r.paper)
            out.append("| " + " | ".join(_cell(c) for c in (verdict, chapter, r.name, _num(r.value), paper,
                                                           _tally(mine) if i == 0 else "")) + " |")
    return "\n".join(out)
