"""Shared fixtures: the book is built once per test session, for the -W build test (tests/test_book.py)
and the real-browser test (tests/test_browser.py).

``pytest -m "not slow"`` is the unit layer (well under a minute on a 2-core CPU). Every test that uses the
``built_book`` fixture is marked ``slow`` here, whether or not its module says so, so that no book build
can slip into the unit layer."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import matplotlib
import pytest
import yaml

matplotlib.use("Agg")  # the figure tests draw without a display

import matplotlib.pyplot as plt  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class BuiltBook:
    """The result of ``jupyter-book build -W -n --keep-going`` with execution off."""

    returncode: int
    log: str
    html: Path  # the folder with index.html


def build_book(out: Path, timeout: int = 900) -> BuiltBook:
    """Render the committed notebooks (nbval re-executes them separately) into ``out``, execution off."""
    if not (ROOT / ".assets" / "html").is_dir():
        pytest.fail("the offline MathJax/widget assets are missing: run `make assets` (make test does)")
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    config["execute"] = dict(config["execute"], execute_notebooks="off")
    local = config["sphinx"].get("local_extensions") or {}  # relative to the config file: make absolute
    config["sphinx"]["local_extensions"] = {name: str(ROOT / path) for name, path in local.items()}
    out.mkdir(parents=True, exist_ok=True)
    cfg = out / "_config.yml"
    cfg.write_text(yaml.safe_dump(config, sort_keys=False))  # keep nb_ipywidgets_js order
    jb = shutil.which("jupyter-book") or str(Path(sys.executable).parent / "jupyter-book")
    proc = subprocess.run(
        [jb, "build", str(ROOT), "--config", str(cfg), "--path-output", str(out), "-W", "-n", "--keep-going"],
        capture_output=True, text=True, timeout=timeout,
    )
    return BuiltBook(proc.returncode, proc.stdout + proc.stderr, out / "_build" / "html")


@pytest.fixture(scope="session")
def built_book(tmp_path_factory) -> BuiltBook:
    """The book rendered once per session (a few minutes). ``ATTNBOOK_BUILT_BOOK=<folder>`` reuses a
    build made by :func:`build_book` into that folder (for working on the browser test)."""
    reuse = os.environ.get("ATTNBOOK_BUILT_BOOK")
    if reuse:
        return BuiltBook(0, "reused " + reuse, Path(reuse) / "_build" / "html")
    return build_book(tmp_path_factory.mktemp("book"))


def pytest_collection_modifyitems(config, items):
    """Mark every test that needs the rendered book (the ``built_book`` fixture, directly or through
    another fixture) as ``slow``."""
    for item in items:
        if "built_book" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _close_figures():
    """Every test's figures are closed after it (the figure modules' smoke tests draw many)."""
    yield
    plt.close("all")
