"""Sphinx extension of the book's HTML (chapter pages as readers see them; tests/test_browser.py checks it).

* Every script of a page is written once: Jupyter Book 1.0 with sphinx-thebe 0.3 and sphinx-togglebutton
  registers their inline configuration twice, so the second ``const THEBE_JS_URL`` threw on every page.
* The sidebar and page-contents buttons work on desktop and phone: sphinx-book-theme 1.3 puts a second
  ``.primary-toggle`` / ``.secondary-toggle`` button in the article header, while both themes bind their
  handlers to the first one, which is hidden; ``attnbook-toggles.js`` forwards clicks to it.
* The colour mode starts as "light" (pydata-sphinx-theme logs a console error for an empty default mode).
* ``attnbook-tables.js``: the reproduction page's claim table can be filtered and sorted, its header sticky.
* The reproduction page shows this build's values: the executed-notebook folder goes to the kernels'
  environment (``attnbook.booktools.reproduction.EXECUTED_ENV``), and the page is read after every chapter, and
  again whenever a chapter is, so it reads the chapters as this build executed them.
* ``attnbook.css``: display equations that are wider than a phone scroll inside their own box instead of
  being cut; wide printed tables scroll.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

STATIC = Path(__file__).resolve().parent / "static"
#: the reproduction page (its docname) and the environment variables it reads (attnbook.booktools.reproduction)
REPRODUCTION_PAGE = "book/reproduction"
EXECUTED_ENV = "ATTNBOOK_EXECUTED_NOTEBOOKS"

_SCRIPT = re.compile(r"<script[^>]*>.*?</script>\s*", re.S)


def dedupe_scripts(html: str) -> str:
    """``html`` with every repeated identical ``<script>`` element of its head removed (first kept)."""
    head_end = html.find("</head>")
    if head_end < 0:
        return html
    seen: set[str] = set()

    def keep_first(m: re.Match) -> str:
        tag = m.group(0).strip()
        if tag in seen:
            return ""
        seen.add(tag)
        return m.group(0)

    return _SCRIPT.sub(keep_first, html[:head_end]) + html[head_end:]


def _dedupe_pages(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    for page in Path(app.outdir).rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        fixed = dedupe_scripts(text)
        if fixed != text:
            page.write_text(fixed, encoding="utf-8")


def _light_mode(app, config) -> None:
    context = dict(config.html_context or {})  # a template variable of pydata-sphinx-theme's layout
    context.setdefault("default_mode", "light")
    config.html_context = context


def _add_static(app) -> None:
    app.config.html_static_path.append(str(STATIC))


def _name_the_executed_notebooks(app) -> None:
    """Tell the kernels this build starts where myst-nb writes the executed notebooks (``jupyter_execute``
    beside the output folder)."""
    os.environ[EXECUTED_ENV] = str(Path(app.outdir).parent / "jupyter_execute")


def read_reproduction_last(docnames: list[str], found: set[str]) -> None:
    """Order ``docnames`` (the pages this build reads, in place) so that the reproduction page comes after
    every chapter, and is read whenever a chapter is (its table holds their claims)."""
    if REPRODUCTION_PAGE in docnames:
        docnames.remove(REPRODUCTION_PAGE)
        docnames.append(REPRODUCTION_PAGE)
    elif docnames and REPRODUCTION_PAGE in found:
        docnames.append(REPRODUCTION_PAGE)


def _read_reproduction_last(app, env, docnames) -> None:
    read_reproduction_last(docnames, env.found_docs)


def setup(app):
    app.connect("builder-inited", _add_static)
    app.connect("builder-inited", _name_the_executed_notebooks)
    app.connect("env-before-read-docs", _read_reproduction_last)
    app.connect("config-inited", _light_mode)
    app.connect("build-finished", _dedupe_pages)
    app.add_js_file("attnbook-toggles.js", defer="defer")
    app.add_js_file("attnbook-tables.js", defer="defer")
    app.add_css_file("attnbook.css")
    return {"parallel_read_safe": False, "parallel_write_safe": True}
