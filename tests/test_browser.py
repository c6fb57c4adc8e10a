"""The rendered book in a real browser: every page of _toc.yml is loaded in headless Chromium (Debian's
`chromium`, driven by Playwright without a browser download) from a localhost HTTP server, and checked
from the rendered DOM:

* no request leaves localhost (MathJax, RequireJS and the widget manager are served from the book,
  `make assets`), no local request fails, no uncaught JavaScript error;
* math is typeset: every math element holds MathJax output, and no TeX error is shown;
* every image loads (naturalWidth > 0); every page shows as many figures as its notebook produced, none of
  them blank, and none whose smallest text is displayed below 9 CSS pixels (the figure's smallest font, its
  PNG resolution and its displayed-to-natural width), on a desktop (1280 px) and a phone (390 px) viewport;
* the sidebar and page-contents buttons open or close their panels, on both viewports;
* on the desktop viewport no display equation and no code cell is wider than the column;
* the console shows no error;
* no cell output is an error or a traceback;
* stored widgets render;
* every internal link resolves to a file of the build, and its #anchor to an id in that file.

A full-page screenshot of each page goes to _build/screenshots/. The book is built once per session
(tests/conftest.py, shared with the -W build test of tests/test_book.py).
"""

from __future__ import annotations

import functools
import html as html_lib
import json
import os
import re
import shutil
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urldefrag, urlparse

import pytest

from attnbook.booktools.reproduction import toc_entries

# builds the book and drives a browser (minutes): not part of the unit layer, `pytest -m "not slow"`
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
SCREENSHOTS = ROOT / "_build" / "screenshots"
CHROMIUM = os.environ.get("ATTNBOOK_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage",
    # belt and braces besides the request routing below: no host name but localhost resolves
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost",
]
PAGES = toc_entries(ROOT)
VIEWPORTS = {"desktop": {"width": 1280, "height": 900}, "phone": {"width": 390, "height": 844}}
MIN_TEXT_PX = 9.0
#: a chapter page is read in a sitting: at most this many desktop screens (1280 x 900) of rendered page
MAX_SCREENS = 25
#: chapter pages still longer, with the screens they may reach (measured 2026-12-05); lower them as the pages
#: shrink: an allowance more than one screen looser than its page fails
SCREEN_ALLOWANCES: dict[str, float] = {}

# What a page reports about itself once loaded and typeset (run in the page).
INSPECT_JS = """async () => {
  const out = {};
  const FAR_PAST = 1.15;  // code may scroll a little; a line 15% wider than the column hides too much
  const math = Array.from(document.querySelectorAll('.math, div.math, span.math'));
  out.math = math.length;
  out.mathjax = typeof window.MathJax === 'object' && !!(window.MathJax.startup && window.MathJax.startup.promise);
  if (out.mathjax) { try { await window.MathJax.startup.promise; } catch (e) { out.mathjax_error = String(e); } }
  out.untypeset = math.filter(m => !m.querySelector('mjx-container') && m.tagName !== 'MJX-CONTAINER')
                      .map(m => m.textContent.trim().slice(0, 80));
  out.typeset = document.querySelectorAll('mjx-container').length;
  // TeX syntax errors (merror), and undefined macros, which MathJax's noundefined package shows in red
  out.tex_errors = Array.from(document.querySelectorAll('mjx-container')).flatMap(c =>
      Array.from(c.querySelectorAll('mjx-merror')).map(e => e.getAttribute('data-mjx-error') || 'TeX error')
      .concat(Array.from(c.querySelectorAll('mjx-assistive-mml mtext[mathcolor="red"]'))
              .map(e => 'undefined ' + e.textContent))
      .concat(c.querySelector('mjx-assistive-mml') ? [] :
              Array.from(c.querySelectorAll('[style*="color: red"]')).map(e => 'red (undefined?) symbol'))
  ).map(s => String(s).slice(0, 80));
  const imgs = Array.from(document.images);
  await Promise.all(imgs.map(i => i.complete ? null : new Promise(r => { i.onload = i.onerror = r; })));
  out.images = imgs.length;
  const blank = (img) => {  // a figure whose pixels are (almost) all the background colour
    const c = document.createElement('canvas');
    const w = c.width = Math.min(img.naturalWidth, 400), h = c.height = Math.min(img.naturalHeight, 300);
    if (!w || !h) return true;
    const g = c.getContext('2d'); g.drawImage(img, 0, 0, w, h);
    const d = g.getImageData(0, 0, w, h).data; let ink = 0;
    for (let i = 0; i < d.length; i += 4)
      if (Math.abs(d[i] - d[0]) + Math.abs(d[i+1] - d[1]) + Math.abs(d[i+2] - d[2]) > 60) ink++;
    return ink < 0.002 * w * h;
  };
  out.figures = Array.from(document.querySelectorAll('.cell_output img'))
      .filter(i => !i.closest('.jupyter-widgets, .widget-output, .lm-Widget'))
      .map(i => ({src: i.getAttribute('src'), shown: i.getBoundingClientRect().width,
                  natural: i.naturalWidth, blank: i.naturalWidth > 0 && blank(i)}));
  out.math_overflow = Array.from(document.querySelectorAll('mjx-container[display="true"]'))
      .filter(c => c.scrollWidth > c.clientWidth + 2)
      .map(c => (c.querySelector('mjx-assistive-mml') || c).textContent.trim().slice(0, 60));
  // a dollar sign left in the prose's own text: mathematics whose delimiters MyST did not pair
  out.stray_dollars = Array.from(document.querySelectorAll('main p, main li'))
      .filter(e => !e.closest('.cell_output, .cell_input, pre'))
      .flatMap(e => { const t = Array.from(e.childNodes).filter(n => n.nodeType === 3).map(n => n.textContent).join('');
                      return t.includes('$') ? [t.trim().slice(0, 60)] : []; });
  // an equation that continues past its box must show it (the scroll shadow of attnbook.css)
  out.math_unmarked = Array.from(document.querySelectorAll('mjx-container[display="true"]'))
      .filter(c => c.scrollWidth > c.clientWidth + 2 && !/gradient/.test(getComputedStyle(c).backgroundImage))
      .map(c => (c.querySelector('mjx-assistive-mml') || c).textContent.trim().slice(0, 60));
  out.code_overflow = Array.from(document.querySelectorAll('.cell_input pre, .cell_output pre'))
      .filter(p => p.offsetParent !== null && p.scrollWidth > FAR_PAST * p.clientWidth)
      .map(p => p.textContent.split('\\n').reduce((a, b) => a.length >= b.length ? a : b).slice(0, 70));
  out.broken_images = imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute('src'));
  out.error_outputs = Array.from(document.querySelectorAll(
      '.cell_output .traceback, .cell_output .output.error, .cell_output .output.traceback'))
      .map(e => e.textContent.trim().slice(0, 200));
  out.traceback_text = Array.from(document.querySelectorAll('.cell_output'))
      .filter(e => /Traceback \\(most recent call last\\)|ClaimFailed/.test(e.textContent))
      .map(e => e.textContent.trim().slice(0, 200));
  out.widget_views = document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]').length;
  out.widgets = document.querySelectorAll('.jupyter-widgets, .widget-output, .lm-Widget').length;
  out.links = Array.from(document.querySelectorAll('a[href]')).map(a => a.href);
  out.height = document.documentElement.scrollHeight;
  // every verdict in view without scrolling sideways: a table's "verdict" cell (a column at 1280 px, a line of
  // a card on a phone) ends inside the page and inside any box that scrolls or clips it
  const vw = document.documentElement.clientWidth;
  const edge = (el) => {
    let right = vw;
    for (let p = el.parentElement; p; p = p.parentElement)
      if (/(auto|scroll|hidden|clip)/.test(getComputedStyle(p).overflowX)) right = Math.min(right, p.getBoundingClientRect().right);
    return right;
  };
  out.verdicts_out_of_view = Array.from(document.querySelectorAll('table')).flatMap(t => {
    const col = Array.from(t.querySelectorAll('thead th')).findIndex(th => th.textContent.trim().toLowerCase() === 'verdict');
    if (col < 0) return [];
    return Array.from(t.querySelectorAll('tbody tr')).map(tr => tr.children[col])
        .filter(td => td && td.offsetParent !== null && td.getBoundingClientRect().right > edge(td) + 2)
        .map(td => td.textContent.trim().slice(0, 40));
  });
  return out;
}"""


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest's output clean
        pass


@pytest.fixture(scope="module")
def site(built_book):
    """The built HTML served on 127.0.0.1 (file:// breaks some loaders); yields (base URL, html folder)."""
    html = built_book.html
    assert (html / "index.html").exists(), "the book did not build:\n" + built_book.log[-6000:]
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(html)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/", html
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser():
    """Headless Debian chromium through Playwright (no browser download)."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} not found: install Debian's chromium (apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
                              chromium_sandbox=False)
        yield b
        b.close()


_ID_CACHE: dict[Path, set[str]] = {}


def _ids(path: Path) -> set[str]:
    if path not in _ID_CACHE:
        text = path.read_text(errors="replace")
        _ID_CACHE[path] = {html_lib.unescape(m) for m in re.findall(r'\bid="([^"]+)"', text)}
    return _ID_CACHE[path]


def broken_links(links: list[str], base: str, html: Path) -> list[str]:
    """Internal links (same origin as ``base``) whose file or #anchor does not exist in the build."""
    bad = []
    for link in sorted(set(links)):
        if not link.startswith(base):
            continue  # external links (GitHub, Colab) are not followed: no network
        url, frag = urldefrag(link)
        rel = unquote(urlparse(url).path).lstrip("/")
        target = html / rel
        if target.is_dir():
            target = target / "index.html"
        if not target.is_file():
            bad.append(f"{link} (no file {rel})")
        elif frag and target.suffix == ".html" and unquote(frag) not in _ids(target):
            bad.append(f"{link} (no id {frag!r} in {rel})")
    return bad


TOGGLE_JS = """async (cls) => {
  const visible = Array.from(document.querySelectorAll(cls)).filter(b => b.offsetParent !== null);
  const panel = document.querySelector(cls === '.primary-toggle' ? '#pst-primary-sidebar' : '#pst-secondary-sidebar');
  if (!visible.length)  // fine where the panel is shown anyway (the page contents on a wide screen)
    return !panel || panel.getBoundingClientRect().width > 0 ? '' : 'no visible ' + cls + ' button';
  const state = () => Array.from(document.querySelectorAll('#pst-primary-sidebar, #pst-secondary-sidebar'))
      .map(e => e.className + ':' + e.getBoundingClientRect().width).join('|') + '|'
      + document.querySelectorAll('dialog[open]').length;
  const before = state();
  visible[0].click();
  await new Promise(r => setTimeout(r, 300));
  const after = state();
  document.querySelectorAll('dialog[open]').forEach(d => d.close());
  return before === after ? cls + ' button does nothing' : '';
}"""


def smallest_font_pt(notebook: Path) -> float:
    """The smallest font size a notebook's figures use: the book's style, or a smaller ``fontsize=N``
    written in its code."""
    from attnbook.core.plotting import STYLE

    sizes = [float(v) for k, v in STYLE.items() if k.endswith("size") and not isinstance(v, (tuple, str))]
    nb = json.loads(notebook.read_text())
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    sizes += [float(x) for x in re.findall(r"fontsize\s*=\s*([0-9.]+)", code)]
    return min(sizes)


def notebook_figures(notebook: Path) -> int:
    """How many figures (image/png outputs) the committed notebook holds."""
    nb = json.loads(notebook.read_text())
    return sum("image/png" in o.get("data", {}) for c in nb["cells"] if c["cell_type"] == "code"
               for o in c.get("outputs", []))


def png_dpi(path: Path) -> float:
    from PIL import Image

    with Image.open(path) as im:
        return float(im.info.get("dpi", (72.0, 72.0))[0])


def figure_problems(figures: list[dict], page_file: Path, min_pt: float, expected: int | None) -> list[str]:
    """Missing, blank or illegible figures (see the module docstring)."""
    problems = []
    if expected is not None and len(figures) != expected:
        problems.append(f"{len(figures)} figures shown, the notebook has {expected}")
    for f in figures:
        name = Path(unquote(f["src"] or "")).name
        if f["blank"]:
            problems.append(f"blank figure: {name}")
        target = (page_file.parent / unquote(f["src"] or "")).resolve()
        if not f["natural"] or not target.is_file():
            continue
        px = min_pt * png_dpi(target) / 72.0 * f["shown"] / f["natural"]
        if px < MIN_TEXT_PX:
            problems.append(f"figure text {px:.1f} px < {MIN_TEXT_PX:g} px: {name} "
                            f"({f['natural']} px shown at {f['shown']:.0f})")
    return problems


def inspect(browser, base: str, html: Path, page_path: str, screenshot: Path | None = None,
            viewport: str = "desktop", notebook: Path | None = None) -> list[str]:
    """Load ``page_path`` (relative to the build) at ``viewport`` and return every problem found on it;
    ``notebook``: the page's source, whose figures the page must show."""
    problems: list[str] = []
    context = browser.new_context(viewport=VIEWPORTS[viewport])
    outside: list[str] = []

    def route(r):
        if r.request.url.startswith(base) or r.request.url.startswith("data:"):
            r.continue_()
        else:
            outside.append(r.request.url)
            r.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.on("pageerror", lambda e: problems.append(f"JavaScript error: {e}"))
    page.on("console", lambda m: m.type == "error" and problems.append(f"console error: {m.text[:200]}"))
    page.on("requestfailed", lambda r: r.url.startswith(base)
            and problems.append(f"request failed: {r.url} ({r.failure})"))
    page.on("response", lambda r: r.status >= 400 and problems.append(f"HTTP {r.status}: {r.url}"))
    try:
        response = page.goto(base + page_path, wait_until="load", timeout=120_000)
        if response is None or response.status != 200:
            problems.append(f"page did not load: {response.status if response else 'no response'}")
        info = page.evaluate(INSPECT_JS)
        if info["widget_views"]:
            try:  # the embed manager renders stored widgets after the page's load event
                page.wait_for_function(
                    "n => document.querySelectorAll('.jupyter-widgets, .widget-output, .lm-Widget').length >= n",
                    arg=1, timeout=60_000)
            except Exception:
                pass
            info = page.evaluate(INSPECT_JS)
        if screenshot is not None:
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(screenshot), full_page=True, timeout=120_000)
        toggles = [page.evaluate(TOGGLE_JS, cls) for cls in (".primary-toggle", ".secondary-toggle")]
    finally:
        context.close()
    if info["math"] and not info["mathjax"]:
        problems.append(f"{info['math']} math elements but MathJax did not load")
    if info.get("mathjax_error"):
        problems.append(f"MathJax failed: {info['mathjax_error']}")
    if info["untypeset"]:
        problems.append(f"math not typeset: {info['untypeset'][:5]}")
    if info["tex_errors"]:
        problems.append(f"TeX errors: {info['tex_errors'][:5]}")
    if info["broken_images"]:
        problems.append(f"images that do not load: {info['broken_images']}")
    if info["error_outputs"] or info["traceback_text"]:
        problems.append(f"error outputs: {(info['error_outputs'] + info['traceback_text'])[:3]}")
    if info["widget_views"] and not info["widgets"]:
        problems.append(f"{info['widget_views']} stored widget views but no widget rendered")
    if outside:
        problems.append(f"requests outside localhost (blocked): {sorted(set(outside))[:5]}")
    problems += [f"broken link: {b}" for b in broken_links(info["links"], base, html)]
    problems += [t for t in toggles if t]
    problems += [f"verdict out of view (scroll sideways to see it): {v}" for v in info["verdicts_out_of_view"]]
    problems += [f"equation continues past its box with no sign of it: {m}" for m in info["math_unmarked"]]
    problems += [f"a stray $ in the prose (unpaired math delimiters?): {t}" for t in info["stray_dollars"]]
    if viewport == "desktop" and page_path.startswith("book/part"):
        problems += screen_problems(page_path.removesuffix(".html"), info["height"] / VIEWPORTS["desktop"]["height"])
    if viewport == "desktop":
        problems += [f"equation wider than the column: {m}" for m in info["math_overflow"]]
        problems += [f"code wider than the column: {c}" for c in info["code_overflow"]]
    if notebook is not None or info["figures"]:
        min_pt = smallest_font_pt(notebook) if notebook is not None and notebook.suffix == ".ipynb" else 10.0
        expected = notebook_figures(notebook) if notebook is not None and notebook.suffix == ".ipynb" else None
        problems += figure_problems(info["figures"], html / page_path, min_pt, expected)
    return problems


def screen_problems(entry: str, screens: float) -> list[str]:
    """A chapter page longer than :data:`MAX_SCREENS` desktop screens (or its allowance), or an allowance more
    than one screen looser than the page."""
    limit = SCREEN_ALLOWANCES.get(entry.rsplit("/", 1)[-1], MAX_SCREENS)
    if screens > limit:
        return [f"page is {screens:.1f} screens long at 1280 x 900 (at most {limit:g}): split it or shorten it"]
    if entry.rsplit("/", 1)[-1] in SCREEN_ALLOWANCES and limit - screens > 1:
        return [f"page is {screens:.1f} screens long: lower its allowance of {limit:g} screens"]
    return []


def test_screen_problems_holds_a_page_to_its_length():
    assert screen_problems("book/part1_x/01_a", 24.0) == []
    assert "26.0 screens" in screen_problems("book/part1_x/01_a", 26.0)[0]
    SCREEN_ALLOWANCES["01_a"] = 28
    try:
        assert screen_problems("book/part1_x/01_a", 27.5) == []
        assert "lower its allowance" in screen_problems("book/part1_x/01_a", 25.5)[0]
    finally:
        del SCREEN_ALLOWANCES["01_a"]


def _source(entry: str) -> Path | None:
    return next((ROOT / f"{entry}{ext}" for ext in (".ipynb", ".md") if (ROOT / f"{entry}{ext}").exists()), None)


@pytest.mark.parametrize("viewport", list(VIEWPORTS))
@pytest.mark.parametrize("entry", PAGES)
def test_page_renders_in_a_browser(entry, viewport, site, browser):
    base, html = site
    if not (html / f"{entry}.html").exists():
        pytest.fail(f"{entry}.html was not built")
    shot = SCREENSHOTS / viewport / (entry.replace("/", "__") + ".png")
    problems = inspect(browser, base, html, f"{entry}.html", screenshot=shot, viewport=viewport,
                       notebook=_source(entry))
    assert not problems, f"{entry}.html ({viewport}):\n  " + "\n  ".join(problems)


def test_a_broken_page_is_caught(site, browser):
    """The checks are not vacuous: a page made from a real rendered chapter, with an error output, a
    missing image, a blank and a shrunk figure, one figure more than its notebook, TeX errors, untypeset
    math, an equation wider than the column, dead links, a CDN script, a console error and dead sidebar
    buttons, is reported on every count."""
    import base64
    import io

    from PIL import Image

    base, html = site
    entry = next(e for e in PAGES[1:] if (html / f"{e}.html").exists() and notebook_figures(_source(e) or ROOT))
    source = html / f"{entry}.html"
    text = source.read_text()
    first_fig = re.search(r'<img[^>]*src="([^"]*_images/[^"]+\.png)"', text).group(1)
    white = io.BytesIO()
    Image.new("RGB", (300, 200), "white").save(white, format="PNG", dpi=(100, 100))
    blank_src = "data:image/png;base64," + base64.b64encode(white.getvalue()).decode()
    wide = " + ".join(f"x_{{{i}}}" for i in range(200))
    text = text.replace('id="pst-primary-sidebar"', 'id="no-sidebar"')  # the buttons find no sidebar
    text = text.replace('attnbook-toggles.js', 'no-toggles.js')
    broken = (
        '<div class="cell_output docutils container"><div class="output traceback highlight-ipythontb '
        'notranslate"><pre>Traceback (most recent call last):\nValueError: boom</pre></div></div>'
        '<img src="no_such_figure.png" alt="missing">'
        '<p><span class="math notranslate nohighlight">\\(\\frac{1}{\\undefinedmacro}\\)</span></p>'
        '<p><span class="math notranslate nohighlight">\\(\\frac{1}\\)</span></p>'
        '<p><span class="math notranslate nohighlight">\\(x^{2\\)</span></p>'
        '<a href="no_such_page.html">dead</a><a href="#no-such-anchor">dead anchor</a>'
        '<script src="https://cdn.jsdelivr.net/npm/some-package/dist/index.js"></script>'
        f'<div class="cell_output docutils container"><img src="{blank_src}" alt="blank"></div>'
        f'<div class="cell_output docutils container"><img src="{first_fig}" style="width:60px" alt="tiny"></div>'
        f'<div class="math notranslate nohighlight">\\[{wide}\\]</div>'
        '<style>#unmarked mjx-container { background: none !important; }</style>'
        '<p>The recursion is $ X_{t+1} = f(X_t) $.</p>'
        f'<div id="unmarked" class="math notranslate nohighlight">\\[{wide} + y\\]</div>'
        '<table class="attnbook-claims" style="table-layout: auto; width: 3000px"><thead><tr><th>claim</th>'
        '<th>verdict</th></tr></thead><tbody><tr><td>a claim</td><td>deliberately off-screen</td></tr></tbody></table>'
        '<div style="overflow-x: auto; width: 300px"><table style="width: 900px"><thead><tr><th>claim</th>'
        '<th>verdict</th></tr></thead><tbody><tr><td>b claim</td><td>scrolled out of its box</td></tr></tbody>'
        '</table></div>'
        '<script>console.error("deliberate console error")</script>'
    )
    text = text.replace("</main>", broken + "</main>", 1) if "</main>" in text else text + broken
    target = source.with_name("zz_deliberately_broken.html")
    target.write_text(text)
    _ID_CACHE.pop(target, None)
    try:
        problems = inspect(browser, base, html, str(target.relative_to(html)), notebook=_source(entry))
    finally:
        target.unlink()
    report = "\n".join(problems)
    assert "blank figure" in report and "figure text" in report and "figures shown, the notebook has" in report, report
    assert "equation wider than the column" in report, report
    assert "equation continues past its box with no sign of it" in report, report
    assert "a stray $ in the prose" in report, report
    assert "deliberate console error" in report, report
    assert "verdict out of view" in report and "deliberately off-screen" in report, report
    assert "scrolled out of its box" in report, report
    assert "button does nothing" in report, report
    assert "error outputs" in report, report
    assert "images that do not load" in report and "no_such_figure.png" in report, report
    assert "TeX errors" in report and "undefinedmacro" in report and "Missing argument for" in report, report
    assert "math not typeset" in report, report
    assert "no_such_page.html" in report and "no-such-anchor" in report, report
    assert "HTTP 404" in report, report
    assert "requests outside localhost (blocked): ['https://cdn.jsdelivr.net/npm/some-package" in report, report
