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
    """The commits the Markdown cells of ``notebook`` name in backticks, in order of first mention.

    A run of 7 to 40 lower-case hex digits in backticks counts (a short or a full hash); a pure number
    does not (no hash abbreviation git prints is all digits often enough to be worth the confusion)."""
    cells = nbformat.read(str(notebook), as_version=4).cells
    text = "\n".join(c.source for c in cells if c.cell_type == "markdown")
    seen: list[str] = []
    for commit in _CITED.findall(text):
        if not commit.isdigit() and commit not in seen:
            seen.append(commit)
    return seen


def missing_commits(root: PathLike, commits: Iterable[str]) -> Optional[list[str]]:
    """The commits among ``commits`` that the git history of ``root`` does not hold, in the order given.

    ``None`` when the history cannot say: ``root`` is not a git repository, git is not installed, or the
    clone is shallow (its history stops early, so an old commit would look missing)."""
    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)

    try:
        shallow = git("rev-parse", "--is-shallow-repository")
    except FileNotFoundError:  # no git on this machine
        return None
    if shallow.returncode != 0 or shallow.stdout.strip() != "false":
        return None
    return [c for c in commits if git("cat-file", "-e", f"{c}^{{commit}}").returncode != 0]
