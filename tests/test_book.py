"""Tests of the book itself: table of contents, Colab cells, committed execution, and the -W build."""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
sys.path.insert(0, str(ROOT / "scripts"))
from execute_notebooks import toc_files, toc_notebooks  # noqa: E402

NOTEBOOKS = sorted((ROOT / "book").rglob("*.ipynb"))
NOTEBOOKS = [p for p in NOTEBOOKS if ".ipynb_checkpoints" not in p.parts]


def colab_cell_source() -> str:
    """The first cell every notebook must have: install attnbook from the repository when missing."""
    url = CONFIG["repository"]["url"]
    return (
        "# Colab set-up: install the book's library when it is not importable (hidden in the book).\n"
        "try:\n"
        "    import attnbook\n"
        "except ImportError:\n"
        f'    %pip install --quiet "attnbook @ git+{url}"'
    )


def test_every_toc_entry_exists():
    for f in toc_files():
        assert any((ROOT / f"{f}{ext}").exists() for ext in (".md", ".ipynb")), f"_toc.yml lists missing {f}"


def test_every_notebook_is_in_toc():
    listed = set(toc_files())
    for nb in NOTEBOOKS:
        key = str(nb.relative_to(ROOT).with_suffix(""))
        assert key in listed, f"{key} is not in _toc.yml"
    assert len(toc_notebooks()) == len(NOTEBOOKS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_colab_cell_matches_config(path):
    nb = nbformat.read(path, as_version=4)
    first = nb.cells[0]
    assert first.cell_type == "code"
    assert first.source.strip() == colab_cell_source(), f"{path.name}: Colab cell out of step with _config.yml"
    assert "remove-cell" in first.metadata.get("tags", []), f"{path.name}: Colab cell must be tagged remove-cell"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_committed_executed(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    counts = [c.execution_count for c in code]
    assert counts == list(range(1, len(code) + 1)), f"{path.name}: execution counts {counts}"
    for c in code:
        for out in c.outputs:
            assert out.output_type != "error", f"{path.name}: committed with an error output"
        assert set(c.metadata) <= {"tags"}, f"{path.name}: stray cell metadata {set(c.metadata)}"
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_reads_a_preset_and_checks_claims(path):
    nb = nbformat.read(path, as_version=4)
    source = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "attnbook.setup(" in source, f"{path.name}: must start with attnbook.setup(seed)"
    assert "check(" in source, f"{path.name}: a chapter states its results as checked claims"


@pytest.mark.slow
def test_book_builds_without_warnings(built_book):
    """Render the committed notebooks (nbval re-executes them separately) with -W: zero warnings.

    The build is shared with tests/test_browser.py (the ``built_book`` fixture in tests/conftest.py)."""
    assert built_book.returncode == 0, built_book.log[-12000:]
    assert (built_book.html / "book" / "intro.html").exists()
