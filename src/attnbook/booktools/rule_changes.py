"""The page "Rules changed after their data" (Back matter): which agreement rules were written or changed with
their data known, each with the commit that changed it.

The page names commits in backticks. :func:`cited_commits` reads them from the page, and
:func:`missing_commits` looks each up in the repository's history, so a mistyped or rewritten commit fails the
page's check instead of sending a reader to nothing.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Iterable, Optional, Union

import nbformat

#: the page's toc entry
PAGE = "book/rule_changes"
#: a commit named in prose: 7 to 40 lower-case hex digits in backticks
_CITED = re.compile(r"`([0-9a-f]{7,40})`")

PathLike = Union[str, Path]


def cited_commits(notebook: PathLike) -> list[str]:
    """The commits the Markdown cells of ``notebook`` name in backticks, in order of first mention: every run
    of 7 to 40 lower-case hex digits in backticks (a short or a full hash; one made of digits only counts
    too, as git abbreviates some hashes so)."""
    cells = nbformat.read(str(notebook), as_version=4).cells
    text = "\n".join(c.source for c in cells if c.cell_type == "markdown")
    return list(dict.fromkeys(_CITED.findall(text)))


def missing_commits(root: PathLike, commits: Iterable[str]) -> Optional[list[str]]:
    """The commits among ``commits`` that are not in the history of ``root``'s checked-out commit (an ancestor
    of ``HEAD`` or ``HEAD`` itself), in the order given. A commit whose object is still stored but that a
    rewritten history dropped counts as missing.

    ``None`` when the history cannot say: git is not installed, ``root`` is not the top of a git repository
    (a copy inside another repository would be checked against that one), or the clone is shallow (its
    history stops early, so an old commit would look missing)."""
    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)

    try:
        top = git("rev-parse", "--show-toplevel", "--is-shallow-repository")
    except FileNotFoundError:  # no git on this machine
        return None
    said = top.stdout.splitlines()
    if top.returncode != 0 or len(said) != 2 or Path(said[0]).resolve() != Path(root).resolve() or said[1] != "false":
        return None
    return [c for c in commits if git("merge-base", "--is-ancestor", c, "HEAD").returncode != 0]
