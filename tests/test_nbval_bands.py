"""nbval with claim bands (book/conftest.py) still fails when it should: on copies of a committed chapter,
a committed claim value moved beyond its band fails, one moved within its band passes, and a check that no
longer holds fails. Slow: each case executes chapter 2 in a fresh kernel (a few seconds)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from attnbook.claims import MIMETYPE

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = ROOT / "book" / "part1_rank_collapse" / "02_path_decomposition.ipynb"
NAME = "BERT-base: fraction of paths of length 11 or 12"


def _copy(tmp_path: Path, edit) -> Path:
    """The chapter and book/conftest.py copied into ``tmp_path``, with ``edit(nb)`` applied to the copy."""
    shutil.copy(ROOT / "book" / "conftest.py", tmp_path / "conftest.py")
    nb = json.loads(CHAPTER.read_text())
    edit(nb)
    path = tmp_path / CHAPTER.name
    path.write_text(json.dumps(nb, indent=1))
    return path


def _claim_output(nb: dict) -> dict:
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            recs = out.get("data", {}).get(MIMETYPE)
            if isinstance(recs, list) and any(r["name"] == NAME for r in recs):
                return out
    raise AssertionError(f"no committed output carries the claim {NAME!r}")


def _move_committed_value(by: float):
    def edit(nb):
        out = _claim_output(nb)
        for rec in out["data"][MIMETYPE]:
            if rec["name"] == NAME:
                rec["value"] = round(rec["value"] + by, 6)
    return edit


def _nbval(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax", "--nbval-current-env",
         "--nbval-cell-timeout=300", "--rootdir", str(path.parent), str(path)],
        capture_output=True, text=True, timeout=600, cwd=path.parent,
    )


def test_committed_value_within_its_band_passes(tmp_path):
    band = next(r for r in _claim_output(json.loads(CHAPTER.read_text()))["data"][MIMETYPE] if r["name"] == NAME)["band"]
    proc = _nbval(_copy(tmp_path, _move_committed_value(band / 2)))
    assert proc.returncode == 0, proc.stdout[-3000:]


def test_committed_value_beyond_its_band_fails(tmp_path):
    proc = _nbval(_copy(tmp_path, _move_committed_value(0.05)))
    assert proc.returncode != 0 and "Cell outputs differ" in proc.stdout, proc.stdout[-3000:]


def test_check_that_no_longer_holds_fails(tmp_path):
    def edit(nb):
        for cell in nb["cells"]:
            src = "".join(cell["source"])
            if NAME in src:
                cell["source"] = src.replace("at_least=0.7", "at_least=0.9")
                return
        raise AssertionError("the claim's cell was not found")

    proc = _nbval(_copy(tmp_path, edit))
    assert proc.returncode != 0 and "ClaimFailed" in proc.stdout, proc.stdout[-3000:]
