"""Tests of attnbook.booktools.rule_changes: the commits a page names are read from its prose, and looked up in
a repository's history (a missing one is reported; a history that cannot say gives None)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from attnbook.booktools import reproduction, rule_changes

ROOT = Path(__file__).resolve().parents[1]
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def page(tmp_path: Path, *markdown: str, code: str = "") -> Path:
    path = tmp_path / "page.ipynb"
    cells = [new_markdown_cell(m) for m in markdown] + ([new_code_cell(code)] if code else [])
    nbformat.write(new_notebook(cells=cells), str(path))
    return path


def repository(tmp_path: Path) -> tuple[Path, str]:
    """A git repository with one commit; returns its folder and the commit's full hash."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "f").write_text("x")
    subprocess.run(git + ["add", "f"], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "one"], check=True)
    full = subprocess.run(git + ["rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    return repo, full


def test_cited_commits_reads_hashes_in_backticks_from_the_prose_only(tmp_path):
    path = page(tmp_path, "changed in `1b2ae7b`, then `46c4688` and `1b2ae7b` again;",
                "`0859761` (git abbreviates some hashes to digits), not `beads` (too short), not `ABCDEF0`,",
                "nor 9aef9dd bare", code="# `ef38431` in code is not prose")
    assert rule_changes.cited_commits(path) == ["1b2ae7b", "46c4688", "0859761"]


@needs_git
def test_missing_commits_names_the_commits_the_history_lacks(tmp_path):
    repo, full = repository(tmp_path)
    absent = "0" * 6 + "f"  # seven hex digits no history of one commit holds
    assert rule_changes.missing_commits(repo, [full[:7], absent, full]) == [absent]
    assert rule_changes.missing_commits(repo, [full[:7]]) == []
    # a commit still stored but dropped from the history (a rewritten history) is missing too
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    (repo / "f").write_text("changed")
    subprocess.run(git + ["commit", "-q", "-am", "two"], check=True)
    dropped = subprocess.run(git + ["rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    subprocess.run(git + ["reset", "-q", "--hard", full], check=True)
    assert rule_changes.missing_commits(repo, [full, dropped]) == [dropped]


@needs_git
def test_missing_commits_cannot_say_without_a_full_history(tmp_path):
    assert rule_changes.missing_commits(tmp_path, ["1b2ae7b"]) is None  # not a repository
    repo, _ = repository(tmp_path)
    (repo / "book").mkdir()
    assert rule_changes.missing_commits(repo / "book", ["1b2ae7b"]) is None  # inside another repository
    (repo / "g").write_text("y")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(git + ["add", "g"], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "two"], check=True)
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{repo}", str(shallow)], check=True)
    assert rule_changes.missing_commits(shallow, ["1b2ae7b"]) is None


def test_the_page_is_back_matter_not_a_chapter():
    entries = reproduction.toc_entries(ROOT)
    assert rule_changes.PAGE in entries
    assert ROOT / f"{rule_changes.PAGE}.ipynb" not in reproduction.chapter_notebooks(ROOT)
