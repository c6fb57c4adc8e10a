"""Tests of the book itself: table of contents, Colab cells, committed execution, and the -W build."""

from __future__ import annotations

import re
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
        f'    %pip install --quiet "attnbook @ git+{url}"\n'
        "    try:\n"
        "        import attnbook\n"
        "    except ImportError:\n"
        f'        raise RuntimeError("attnbook could not be installed from {url}: the repository must be "\n'
        "                           \"published there (README, 'Running the chapters on Colab'), or upload \"\n"
        "                           \"the project folder and run %pip install <folder>\") from None"
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
        assert set(c.metadata) <= {"tags", "mystnb"}, f"{path.name}: stray cell metadata {set(c.metadata)}"
        if any("image/png" in o.get("data", {}) for o in c.outputs):
            figure = c.metadata.get("mystnb", {}).get("figure", {})
            assert figure.get("caption") and figure.get("name"), (
                f"{path.name}: a figure without a numbered caption (cell metadata mystnb.figure)")
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3"


GLUE_ROLE = re.compile(r"\{glue(?::\w+)?\}`([\w.-]+)")  # {glue:text}`key:.2f` and {glue}`key`
GLUE_DIRECTIVE = re.compile(r"^```\{glue(?::\w+)?\}\s+([\w.-]+)", re.MULTILINE)  # ```{glue:md} key


def glued_keys(nb) -> set:
    """The keys a committed notebook's outputs glue (myst-nb's scrapbook records)."""
    return {o.get("metadata", {}).get("scrapbook", {}).get("name") for c in nb.cells if c.cell_type == "code"
            for o in c.get("outputs", [])} - {None}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_glue_the_prose_names_is_in_the_committed_outputs(path):
    """A {glue} role whose key no cell glues renders as nothing (a sentence with a hole); the -W build catches
    it in minutes, this in a second."""
    nb = nbformat.read(path, as_version=4)
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    named = {k.split(":")[0] for k in GLUE_ROLE.findall(text)} | set(GLUE_DIRECTIVE.findall(text))
    missing = named - glued_keys(nb)
    assert not missing, f"{path.name}: the prose names glue keys that no cell glues: {sorted(missing)}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_glue_key_is_glued_twice(path):
    """A key glued twice renders whichever output the build meets last, so one of the two sentences that cite it
    shows the other's number (mystnb warns, which fails the -W build after half an hour; this takes a second)."""
    nb = nbformat.read(path, as_version=4)
    names = [o.get("metadata", {}).get("scrapbook", {}).get("name") for c in nb.cells if c.cell_type == "code"
             for o in c.get("outputs", [])]
    twice = sorted({n for n in names if n is not None and names.count(n) > 1})
    assert not twice, f"{path.name}: glue keys glued more than once: {twice}"


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if p.name != "intro.ipynb"], ids=lambda p: p.name)
def test_notebook_reads_a_preset_and_checks_claims(path):
    """Every chapter (and the reproduction page) starts with attnbook.setup and states claims; the intro only
    shows the chapters' claims."""
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


CHAPTER_MENTION = r"(?<![\[\w/])[Cc]hapter\s+(\d{1,2})(?![\d\]]|\s*[-–]\s*\d)"


def bare_chapter_mentions(markdown: str, own: int) -> list[str]:
    """Mentions of another chapter ("chapter 3") in ``markdown`` that are not links, outside headings,
    inline code, math and existing links."""
    import re

    found = []
    for line in markdown.split("\n"):
        if line.lstrip().startswith("#"):
            continue
        text = re.sub(r"`[^`]*`|\[[^\]]*\]\([^)]*\)|\$[^$]*\$", "", line)
        found += [m.group(0) for m in re.finditer(CHAPTER_MENTION, text) if int(m.group(1)) != own]
    return found


def test_bare_chapter_mentions_are_found():
    assert bare_chapter_mentions("as chapter 3 shows", own=5) == ["chapter 3"]
    assert bare_chapter_mentions("as [chapter 3](03_x.ipynb) shows; chapters 2-4; chapter 5", own=5) == []
    assert bare_chapter_mentions("## Chapter 3\n`chapter 3`", own=5) == []


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if p.name[:2].isdigit()], ids=lambda p: p.name)
def test_chapters_link_the_chapters_they_mention(path):
    nb = nbformat.read(path, as_version=4)
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert not bare_chapter_mentions(text, int(path.name[:2])), f"{path.name}: link these mentions"


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if p.name[:2].isdigit()], ids=lambda p: p.name)
def test_the_prose_refers_to_every_figure_by_its_number(path):
    nb = nbformat.read(path, as_version=4)
    names = [c.metadata.get("mystnb", {}).get("figure", {}).get("name") for c in nb.cells
             if c.cell_type == "code"]
    prose = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    missing = [n for n in names if n and "{numref}`" + n + "`" not in prose]
    assert not missing, f"{path.name}: no {{numref}} to {missing}"


def test_html_extension_writes_each_script_once():
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    from attnbook_html import dedupe_scripts

    page = ("<html><head><script>const A = 1;</script>\n<script src='x.js'></script>\n"
            "<script>const A = 1;</script>\n</head><body><script>const A = 1;</script></body></html>")
    out = dedupe_scripts(page)
    head, body = out.split("</head>")
    assert head.count("const A = 1;") == 1 and "x.js" in head and body.count("const A = 1;") == 1


def test_html_extension_reads_the_reproduction_page_after_every_chapter():
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    from attnbook_html import REPRODUCTION_PAGE, read_reproduction_last

    found = {"book/intro", "book/a", "book/b", REPRODUCTION_PAGE}
    order = ["book/intro", REPRODUCTION_PAGE, "book/a", "book/b"]
    read_reproduction_last(order, found)
    assert order == ["book/intro", "book/a", "book/b", REPRODUCTION_PAGE]
    order = ["book/b"]  # an incremental build that rereads one chapter rereads the page too
    read_reproduction_last(order, found)
    assert order == ["book/b", REPRODUCTION_PAGE]
    order = []
    read_reproduction_last(order, found)
    assert order == []


def test_the_notebook_kernel_draws_figures():
    """A chapter's kernel, started from this environment (make book / make test export theirs), emits
    its figures as PNG outputs: an exported MPLBACKEND=Agg once left the built book with none."""
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import matplotlib.pyplot as plt\nplt.plot([0, 1], [1, 0])\nplt.show()")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    assert any("image/png" in o.get("data", {}) for o in nb.cells[0].outputs), nb.cells[0].outputs


@pytest.mark.slow
def test_an_executing_build_shows_its_own_values_on_the_reproduction_page(tmp_path):
    """A two-page book (its chapter named to sort after the page) built with execution on, through the book's own extension: the reproduction page
    shows the value the build computed (2.0), not the one in the committed notebook (1.0)."""
    import shutil
    import subprocess

    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

    from attnbook.claims import Claim

    book = tmp_path / "repo"
    (book / "book").mkdir(parents=True)
    (book / "book" / "intro.md").write_text("# Intro\n")
    (book / "_toc.yml").write_text(
        "format: jb-book\nroot: book/intro\nchapters:\n  - file: book/z_chapter\n  - file: book/reproduction\n")
    committed = Claim(name="x", value=1.0, condition="> 0")._repr_mimebundle_()
    nbformat.write(new_notebook(cells=[
        new_markdown_cell("# A"),
        new_code_cell("import attnbook\nattnbook.check('x', 2.0, predicate=lambda v: v > 0, "
                      "description='> 0')", outputs=[new_output("display_data", data=committed)]),
    ], metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}),
        book / "book" / "z_chapter.ipynb")
    page = ("from attnbook.booktools import reproduction\nroot = reproduction.find_root()\n"
            "src, said = reproduction.quick_source(root)\n"
            "print('QUICK', [r.value for r in reproduction.collect(root, executed=src)], said)")
    nbformat.write(new_notebook(cells=[new_markdown_cell("# Reproduction"), new_code_cell(page)],
                                metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                         "language": "python"}}),
                   book / "book" / "reproduction.ipynb")
    (book / "_config.yml").write_text(yaml.safe_dump({
        "title": "t", "only_build_toc_files": True,
        "execute": {"execute_notebooks": "force", "timeout": 120},
        "sphinx": {"local_extensions": {"attnbook_html": str(ROOT / "book" / "_ext")}},
    }))
    jb = shutil.which("jupyter-book") or str(Path(sys.executable).parent / "jupyter-book")
    proc = subprocess.run([jb, "build", str(book)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    html = (book / "_build" / "html" / "book" / "reproduction.html").read_text()
    assert "QUICK [2.0] this build of the book" in html, html[-3000:]
