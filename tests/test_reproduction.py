"""Tests of attnbook.booktools.reproduction: claim records are collected from notebooks in book order, failing
records are reported as failing, recorded paper runs are merged, and the committed reproduction page is in
step with the chapters."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from attnbook import claims
from attnbook.booktools import reproduction
from attnbook.claims import MIMETYPE, Claim

ROOT = Path(__file__).resolve().parents[1]


def claim_output(claim: Claim, kind: str = "execute_result") -> nbformat.NotebookNode:
    """An output as IPython writes it for a displayed claim."""
    bundle = claim._repr_mimebundle_()
    if kind == "execute_result":
        return new_output("execute_result", data=bundle, execution_count=1)
    return new_output("display_data", data=bundle)


def fake_book(tmp_path: Path, chapters: dict[str, list], page: bool = True) -> Path:
    """A tiny book: _toc.yml listing intro, the given chapters (name -> outputs), and the page."""
    (tmp_path / "book" / "part").mkdir(parents=True)
    (tmp_path / "book" / "intro.md").write_text("# Intro\n")
    entries = "\n".join(f"      - file: book/part/{n}" for n in chapters)
    page_line = "      - file: book/reproduction\n" if page else ""
    (tmp_path / "_toc.yml").write_text(
        "format: jb-book\nroot: book/intro\nparts:\n  - caption: Part\n    chapters:\n"
        f"{entries}\n  - caption: Back matter\n    chapters:\n{page_line}"
    )
    for name, outputs in chapters.items():
        nb = new_notebook(cells=[
            new_markdown_cell(f"# Chapter {name}\n\nText."),
            new_code_cell("x = 1", outputs=[new_output("stream", name="stdout", text="hello\n")]),
            new_code_cell("attnbook.check(...)", outputs=outputs),
        ])
        nbformat.write(nb, tmp_path / "book" / "part" / f"{name}.ipynb")
    if page:
        own = Claim(name="page's own claim", value=1.0, condition=">= 1")
        nb = new_notebook(cells=[new_markdown_cell("# Reproduction"),
                                 new_code_cell("", outputs=[claim_output(own)])])
        nbformat.write(nb, tmp_path / "book" / "reproduction.ipynb")
    return tmp_path


def test_claim_output_is_collected(tmp_path):
    c = claims.compare("rank of X", 3.0, paper=3.0, tol=0.5, source="Fig. 1")
    root = fake_book(tmp_path, {"01_a": [claim_output(c)]})
    rows = reproduction.collect(root)
    assert len(rows) == 1, "the page's own claim must not be listed as a chapter's"
    r = rows[0]
    assert (r.chapter, r.name, r.value, r.paper, r.holds) == ("1. Chapter 01_a", "rank of X", 3.0, 3.0, True)
    assert (r.kind, r.verdict) == ("comparison", "reproduces")
    assert r.condition == "within 0.5 of the paper's value" and r.status == "reproduces" and r.paper_run is None
    table = reproduction.markdown_table(rows)
    assert ("| **1. Chapter 01_a** | comparison | rank of X | 3 | within 0.5 of the paper's value | 3 (Fig. 1) "
            "| ✓ reproduces | – |") in table


def test_every_row_names_its_chapter_the_first_in_bold(tmp_path):
    a, b = claims.check("first", 1.0, at_most=2), claims.check("second", 1.0, at_most=2)
    table = reproduction.markdown_table(reproduction.collect(fake_book(tmp_path, {"01_a": [claim_output(a),
                                                                                             claim_output(b)]})))
    assert "| **1. Chapter 01_a** | check | first |" in table and "| 1. Chapter 01_a | check | second |" in table


def test_book_order_display_data_and_string_records(tmp_path):
    a = claims.check("first", 1.0, at_most=2)
    b = claims.compare("second", 2.0, paper=2.5, tol=1, source="read off Fig. 1")
    as_string = new_output("display_data", data={"text/plain": b.line(), MIMETYPE: json.dumps(b.record())})
    c = claims.check("third", 5.0, close_to=5, tol=0.1)
    d = claims.check("fourth", 6.0, at_least=5)
    # a list of claims as a cell's last expression carries a list of records
    as_list = new_output("execute_result", execution_count=2,
                         data={"text/plain": "[...]", MIMETYPE: [c.record(), d.record()]})
    # _toc.yml order (02 before 01) decides the order, not the file names
    root = fake_book(tmp_path, {"02_b": [as_list], "01_a": [claim_output(a, "display_data"), as_string]})
    rows = reproduction.collect(root)
    assert [r.name for r in rows] == ["third", "fourth", "first", "second"]
    assert rows[3].paper_note == "read off Fig. 1"
    assert "2.5 (read off Fig. 1)" in reproduction.markdown_table(rows)


def test_a_finding_shows_its_interval_mark_and_why_it_is_undecided(tmp_path):
    up = claims.finding("wider minus narrower", 0.2, interval=(0.1, 0.3), test="t test (2 dof)")
    flat = claims.finding("half minus quarter", 0.1, interval=(-0.2, 0.4), test="t test (2 dof)")
    down = claims.finding("cost of pruning", -0.5, interval=(-0.9, -0.1), test="paired bootstrap")
    one = claims.finding("one seed each", 0.3, interval=None, test="t test (0 dof)")
    root = fake_book(tmp_path, {"01_a": [claim_output(c) for c in (up, flat, down, one)]})
    table = reproduction.markdown_table(reproduction.collect(root)).splitlines()[2:]
    assert "| finding | wider minus narrower | 0.2 [0.1, 0.3] |" in table[0] and "| ↑ higher |" in table[0]
    assert "| 0.1 [-0.2, 0.4] |" in table[1] and "| ○ not shown |" in table[1]
    assert "| ↓ lower |" in table[2]
    assert "| 0.3 |" in table[3] and "? undecided: the test gives no interval (one seed per arm)" in table[3]


def test_failing_record_is_reported_as_failing(tmp_path):
    bad = Claim(name="too big", value=10.0, condition="<= 1", holds=False, verdict="fails")
    good = claims.check("fine", 0.5, at_most=1)
    root = fake_book(tmp_path, {"01_a": [claim_output(good), claim_output(bad)]})
    rows = reproduction.collect(root)
    assert [r.holds for r in rows] == [True, False]
    assert rows[1].status == "fails" and not rows[1].all_hold
    assert "| 1. Chapter 01_a | check | too big | 10 | <= 1 |  | ✗ fails | – |" in reproduction.markdown_table(rows)
    assert "**2** must-hold checks, **1** of which hold" in reproduction.summary(rows, root)


def test_a_claim_not_available_is_counted_apart_from_checks_and_gates(tmp_path):
    from attnbook.core import runs
    good = claims.check("fine", 0.5, at_most=1)
    missing = claims.not_available("gate: something", runs.Missing("run_x", "quick", "not made", "python x.py"))
    root = fake_book(tmp_path, {"01_a": [claim_output(good), claim_output(missing)]})
    rows = reproduction.collect(root)
    checks, *_ = reproduction.by_kind(rows)
    assert [r.name for r in checks] == ["fine"] and [r.name for r in reproduction.not_available(rows)] == [
        "gate: something"]
    text = reproduction.summary(rows, root)
    assert "**1** must-hold check, **1** of which hold" in text and "**1** claim not available at `quick`" in text
    assert "**0** claims are read from shipped files" in text  # the missing file is not counted
    table = reproduction.markdown_table(rows)
    assert "… not available" in table and "✗ not available" not in table


def test_results_file_is_merged(tmp_path):
    c1 = claims.check("rank", 3.0, at_least=2)
    c2 = claims.check("residual", 0.01, at_most=0.1)
    root = fake_book(tmp_path, {"01_a": [claim_output(c1), claim_output(c2)], "02_b": []})
    assert "No GPU run is recorded" in reproduction.summary(reproduction.collect(root), root)
    results = root / "results" / "paper"
    results.mkdir(parents=True)
    paper_rank = claims.check("rank", 7.0, at_least=2).record()
    paper_res = dict(c2.record(), value=0.5, holds=False, verdict="fails")
    (results / "01_a.json").write_text(json.dumps(
        {"gpu": "NVIDIA H200", "seconds": 600.0, "preset": "paper", "claims": [paper_rank, paper_res]}))
    rows = reproduction.collect(root)
    assert rows[0].paper_run["value"] == 7.0 and rows[0].gpu == "NVIDIA H200"
    assert rows[0].status == "quick holds, paper holds"
    assert rows[1].status == "quick holds, paper fails" and not rows[1].all_hold
    table = reproduction.markdown_table(rows)
    assert "| 7, holds (NVIDIA H200) |" in table
    assert "| 0.5, fails (NVIDIA H200) ⚠ **the verdict flips between presets** |" in table
    summary = reproduction.summary(rows, root)
    assert "No GPU run" not in summary and "`01_a` on NVIDIA H200 (10 min)" in summary


def test_claim_missing_from_a_recorded_run(tmp_path):
    c = claims.check("rank", 3.0, at_least=2)
    root = fake_book(tmp_path, {"01_a": [claim_output(c)]})
    (root / "results" / "paper").mkdir(parents=True)
    (root / "results" / "paper" / "01_a.json").write_text(json.dumps({"gpu": "T4", "seconds": 1, "claims": []}))
    assert "not in the T4 run" in reproduction.markdown_table(reproduction.collect(root))


def test_claim_not_reached_by_a_partial_run(tmp_path):
    c = claims.check("rank", 3.0, at_least=2)
    root = fake_book(tmp_path, {"01_a": [claim_output(c)]})
    (root / "results" / "paper").mkdir(parents=True)
    (root / "results" / "paper" / "01_a.json").write_text(
        json.dumps({"gpu": "T4", "seconds": 400, "complete": False, "claims": []}))
    rows = reproduction.collect(root)
    assert "not reached: the T4 run stopped early or hit an error" in reproduction.markdown_table(rows)
    assert "`01_a` on T4 (7 min, stopped early: partial)" in reproduction.summary(rows, root)


def test_run_on_the_cpu_of_a_gpu_machine_is_labelled(tmp_path):
    c = claims.check("rank", 3.0, at_least=2)
    root = fake_book(tmp_path, {"01_a": [claim_output(c)]})
    (root / "results" / "paper").mkdir(parents=True)
    (root / "results" / "paper" / "01_a.json").write_text(json.dumps(
        {"gpu": "H200", "seconds": 60, "cuda_used": False, "claims": [c.record()]}))
    rows = reproduction.collect(root)
    assert "| 3, holds (H200 machine, CPU only) |" in reproduction.markdown_table(rows)
    assert "`01_a` on H200 machine, CPU only (1 min)" in reproduction.summary(rows, root)


def test_bad_input(tmp_path):
    with pytest.raises(ValueError, match="_toc.yml"):
        reproduction.find_root(tmp_path)
    with pytest.raises(ValueError, match="does not exist"):
        reproduction.claims_in_notebook(tmp_path / "missing.ipynb")
    with pytest.raises(ValueError, match="nbformat notebook"):
        reproduction.claims_in_notebook(42)
    for bad in ([1], 3, {"value": 1}):
        nb = new_notebook(cells=[new_code_cell("", outputs=[new_output("display_data", data={MIMETYPE: bad})])])
        with pytest.raises(ValueError, match="JSON object"):
            reproduction.claims_in_notebook(nb)
    root = fake_book(tmp_path, {"01_a": []})
    (root / "results" / "paper").mkdir(parents=True)
    (root / "results" / "paper" / "01_a.json").write_text("{not json")
    with pytest.raises(ValueError, match="01_a.json"):
        reproduction.collect(root)
    (root / "results" / "paper" / "01_a.json").write_text(json.dumps({"gpu": "T4"}))
    with pytest.raises(ValueError, match="claims"):
        reproduction.collect(root)


def test_find_root_from_a_subfolder(tmp_path):
    root = fake_book(tmp_path, {"01_a": []})
    assert reproduction.find_root(root / "book" / "part") == root.resolve()


def test_record_paper_run_parses_failed_claims():
    """scripts/record_paper_run.py turns a ClaimFailed error output into a failing record."""
    import sys

    sys.path.insert(0, str(ROOT / "scripts"))
    from record_paper_run import failed_claims

    with pytest.raises(claims.ClaimFailed) as err:
        claims.check("residual of SAN", 0.25, at_most=0.01)
    nb = new_notebook(cells=[new_code_cell("", outputs=[
        new_output("error", ename="ClaimFailed", evalue=str(err.value), traceback=[]),
        new_output("error", ename="RuntimeError", evalue="CUDA out of memory", traceback=[]),
    ])])
    failed, errors = failed_claims(nb)
    assert failed == [dict(name="residual of SAN", value=0.25, condition="<= 0.01", kind="check", verdict="fails",
                           holds=False)]
    assert errors == ["RuntimeError: CUDA out of memory"]


PAGE = ROOT / "book" / "reproduction.ipynb"


@pytest.mark.skipif(not PAGE.exists(), reason="the reproduction page is not written yet")
def test_every_committed_comparison_that_differs_says_why_measured():
    """At ``quick`` (the committed outputs CI checks), a *differs* carries a measured reason: ``compare`` no longer
    raises without one (a ``paper`` run on a GPU must finish), so this test is where a missing reason fails."""
    rows = [r for r in reproduction.collect(ROOT) if r.kind in (claims.COMPARISON, claims.ANALOGUE)]
    assert rows, "no comparison found in the committed chapters"
    failed_gates = [r for r in reproduction.collect(ROOT) if r.kind == claims.GATE and not r.holds]
    assert all(r.reason.startswith("failed: ") and len(r.reason) > 20 for r in failed_gates), \
        "a failed gate must say what it means for the analyses it guards"
    unexplained = [f"{r.chapter}: {r.name}" for r in rows if r.verdict == claims.DIFFERS
                   and r.reason in ("", claims.NOT_MEASURED)]
    assert not unexplained, f"comparisons that differ without a measured reason: {unexplained}"


def test_the_reason_test_catches_an_unexplained_difference(tmp_path):
    c = claims.compare("hull accuracy", 0.99, paper=0.9, tol=0.05, source="Table 1")
    root = fake_book(tmp_path, {"07_a": [claim_output(c)]})
    row = reproduction.collect(root)[0]
    assert (row.verdict, row.reason) == (claims.DIFFERS, claims.NOT_MEASURED)


def test_committed_page_lists_every_claim_of_the_book():
    """The page's committed table is what the chapters' committed outputs give now: re-execute the page
    (`python scripts/execute_notebooks.py book/reproduction.ipynb`) after any chapter changes."""
    nb = nbformat.read(PAGE, as_version=4)
    shown = [
        out["data"]["text/markdown"]
        for cell in nb.cells if cell.cell_type == "code"
        for out in cell.outputs if "text/markdown" in out.get("data", {})
    ]
    expected = reproduction.markdown_table(reproduction.collect(ROOT))
    assert expected in shown, (
        "book/reproduction.ipynb is out of step with the chapters' claims; re-execute it with "
        "`.venv/bin/python scripts/execute_notebooks.py book/reproduction.ipynb`"
    )


def test_kinds_verdicts_reasons_and_precomputed_are_shown(tmp_path):
    """The page shows each claim's kind and verdict, a differing comparison's reason, and marks claims read
    from shipped files as precomputed; the summary counts each kind and verdict."""
    same = claims.compare("slope", 3.0, paper=3.0, tol=0.1, source="Sec. 1")
    off = claims.compare("share", 0.1, paper=0.9, tol=0.1, source="Sec. 5", reason="the model is undertrained")
    unknown = claims.compare("rate", 0.2, paper=0.9, tol=0.1, source="Sec. 6",
                             reason=f"0.2 over 3 seeds; why: {claims.NOT_MEASURED}")
    shipped = claims.check("BLEU", 14.0, at_least=10, precomputed="python scripts/train.py")
    root = fake_book(tmp_path, {"01_a": [claim_output(c) for c in (same, off, unknown, shipped)]})
    rows = reproduction.collect(root)
    assert [(r.kind, r.verdict) for r in rows] == [
        ("comparison", "reproduces"), ("comparison", "differs"), ("comparison", "differs"), ("check", "holds")]
    assert [r.name for r in reproduction.reason_not_measured(rows)] == ["rate"]
    table = reproduction.markdown_table(rows)
    assert "| ≠ differs: the model is undertrained |" in table
    assert "| BLEU *(precomputed: `python scripts/train.py`)* |" in table
    summary = reproduction.summary(rows, root)
    assert "**1** must-hold check, **1** of which hold" in summary
    assert ("**3** comparisons with a paper, of which **1** reproduce, **2** differ (**1** with a measured "
            "reason, **1** whose reason is not measured) and **0** are undecided") in summary
    assert "**1** claims are read from shipped files" in summary


def test_record_paper_run_clears_outputs_and_lists_claims_not_reached():
    """A paper run must never record a committed quick value: outputs are cleared before executing, and the
    committed claims of cells that did not run are listed as not reached."""
    import sys

    sys.path.insert(0, str(ROOT / "scripts"))
    from record_paper_run import _only, clear_outputs

    c = claims.check("rank", 3.0, at_least=2)
    nb = new_notebook(cells=[new_markdown_cell("# A"), new_code_cell("x", outputs=[claim_output(c)],
                                                                     execution_count=1)])
    assert reproduction.claims_in_notebook(_only(nb, 1))[0]["name"] == "rank"
    assert reproduction.claims_in_notebook(_only(nb, 0)) == []
    clear_outputs(nb)
    assert nb.cells[1].outputs == [] and nb.cells[1].execution_count is None
    assert reproduction.claims_in_notebook(nb) == []


def test_record_paper_run_records_the_claims_of_a_cell_that_raised_as_errored(tmp_path):
    """Issue 35: a cell that raises before its second claim once hid that claim (neither recorded nor listed) under
    ``complete: true``. Executed for real, on the CPU at quick."""
    import sys

    sys.path.insert(0, str(ROOT / "scripts"))
    from record_paper_run import record

    first = claims.check("first", 1.0, at_most=2)
    second = claims.check("second", 1.0, at_most=2)
    code = ('import attnbook\nfrom IPython.display import display\n'
            'display(attnbook.check("first", 1.0, at_most=2))\n'
            'raise ValueError("boom")\n'
            'attnbook.check("second", 1.0, at_most=2)')
    nb = new_notebook(cells=[new_markdown_cell("# A"), new_code_cell(
        code, outputs=[claim_output(first), claim_output(second)], execution_count=1)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / "01_a.ipynb"
    nbformat.write(nb, path)
    run = record(path, tmp_path / "out", "quick", 120, "")
    by_name = {c["name"]: c for c in run["claims"]}
    assert by_name["first"]["holds"] and by_name["first"]["verdict"] == "holds"
    assert by_name["second"]["verdict"] == "errored" and not by_name["second"]["holds"]
    assert "ValueError: boom" in by_name["second"]["error"]
    assert run["errored"] == ["second"] and run["complete"] is False
    assert run["commit"] == "" or len(run["commit"].split("+")[0]) == 40


def test_per_paper_summary_counts_verdicts_by_paper():
    from attnbook.booktools.reproduction import Row, per_paper_summary

    def row(n, kind, verdict, holds=True):
        return Row(chapter=str(n), notebook=f"book/x/{n:02d}_c.ipynb", name=f"c{n}{verdict}", paper=None,
                   paper_note="", value=1.0, condition="", holds=holds, kind=kind, verdict=verdict)

    rows = [row(1, "check", "holds"), row(1, "comparison", "reproduces"), row(2, "comparison", "differs"),
            row(3, "comparison", "undecided"), row(5, "analogue", "reproduces"), row(5, "analogue", "differs"),
            row(8, "check", "fails", holds=False), row(10, "finding", "higher"), row(10, "finding", "not shown")]
    lines = per_paper_summary(rows).splitlines()
    dong, noci, voita = lines[2], lines[3], lines[4]
    # an analogue is neither a check nor a comparison: chapter 5 has no comparison
    assert "| 1 (1) | 1 | 1 | 1 | 2 (1) | 0 (0) | 4, 5, 6, 7 |" in dong
    assert "| 1 (0) | 0 | 0 | 0 | 0 (0) | 0 (0) | 8, 9 |" in noci
    # a finding is neither a check nor a comparison with a paper
    assert "| 0 (0) | 0 | 0 | 0 | 0 (0) | 2 (1) | 10, 11 |" in voita


def test_an_analogue_is_counted_apart_from_the_reproductions(tmp_path):
    """A result on another model than the paper's agrees or not by the same rule, but the summary does not count
    it among the comparisons that reproduce."""
    same = claims.compare("slope", 3.0, paper=3.0, tol=0.1, source="Sec. 1")
    other = claims.compare("slope on MiniLM", 3.0, paper=3.0, tol=0.1, source="Sec. 1", analogue="MiniLM")
    assert (other.kind, other.verdict) == ("analogue", "reproduces")
    assert other.paper_note.startswith("analogue on MiniLM, not the paper's model or experiment")
    root = fake_book(tmp_path, {"01_a": [claim_output(same), claim_output(other)]})
    summary = reproduction.summary(reproduction.collect(root), root)
    assert "**0** must-hold checks" in summary
    assert "**1** comparison with a paper, of which **1** reproduce" in summary
    assert "**1** analogue (the same rule on another model or experiment than the paper's: **1** agree" in summary
    assert "**0** findings of the book's own experiments" in summary
    found = claims.finding("wider minus narrower", 0.2, interval=(0.1, 0.3), test="t test")
    root = fake_book(tmp_path / "b", {"01_a": [claim_output(same), claim_output(found)]})
    summary = reproduction.summary(reproduction.collect(root), root)
    assert "**0** must-hold checks" in summary and "**1** finding of the book's own experiments" in summary
    assert "of which **1** show a difference" in summary


def build_folder(root: Path, tmp_path: Path, value: float) -> Path:
    """A build's executed copies of the fake book's chapters, each with a claim of ``value``."""
    folder = tmp_path / "jupyter_execute"
    for path in reproduction.chapter_notebooks(root):
        nb = nbformat.read(path, as_version=4)
        nb.cells[-1].outputs = [claim_output(Claim(name="rank", value=value, condition="> 0"))]
        out = folder / path.relative_to(root)
        out.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, out)
    return folder


def test_the_quick_column_is_the_build_s_when_a_build_names_its_notebooks(tmp_path):
    root = fake_book(tmp_path / "repo", {"01_a": [claim_output(Claim(name="rank", value=1.0,
                                                                      condition="> 0"))]})
    folder, said = reproduction.quick_source(root, environ={})
    assert folder is None and "committed" in said
    assert reproduction.collect(root, executed=folder)[0].value == 1.0

    built = build_folder(root, tmp_path, value=2.0)
    folder, said = reproduction.quick_source(root, environ={reproduction.EXECUTED_ENV: str(built)})
    assert folder == built and "this build" in said
    assert reproduction.collect(root, executed=folder)[0].value == 2.0, "the build's value, not the committed"


def test_a_missing_or_stale_build_copy_is_refused(tmp_path):
    import os

    root = fake_book(tmp_path / "repo", {"01_a": [], "02_b": []})
    built = build_folder(root, tmp_path, value=2.0)
    env = {reproduction.EXECUTED_ENV: str(built)}
    stale = built / "book" / "part" / "01_a.ipynb"
    source = root / "book" / "part" / "01_a.ipynb"
    os.utime(stale, (source.stat().st_mtime - 10,) * 2)
    with pytest.raises(ValueError, match="earlier version"):
        reproduction.quick_source(root, environ=env)
    (built / "book" / "part" / "02_b.ipynb").unlink()
    os.utime(stale, (source.stat().st_mtime + 10,) * 2)
    with pytest.raises(ValueError, match="has not executed book/part/02_b"):
        reproduction.quick_source(root, environ=env)


def test_gates_are_counted_apart_and_a_failed_one_shows_what_it_guards(tmp_path):
    passed = claims.gate("trained enough", 0.2, at_most=0.5, guards="the analyses below")
    failed = claims.gate("converged", 0.9, at_most=0.5, guards="the role analyses")
    held = claims.check("BLEU", 14.0, at_least=10)
    root = fake_book(tmp_path, {"01_a": [claim_output(passed), claim_output(failed), claim_output(held)]})
    rows = reproduction.collect(root)
    summary = reproduction.summary(rows, root)
    assert "**1** must-hold check, **1** of which hold" in summary
    assert "**2** gates (the evidence an analysis needs, recorded even when it fails), **1** of which fail" in summary
    assert "| ✗ fails: failed: the role analyses |" in reproduction.markdown_table(rows)


def test_glance_table_gives_each_headline_its_verdict_reason_and_chapter_tally():
    from attnbook.booktools.reproduction import Row, glance_table

    def row(n, name, kind, verdict, reason=""):
        return Row(chapter=str(n), notebook=f"book/part/{n:02d}_c.ipynb", name=name, paper=2.0, paper_note="",
                   value=1.5, condition="", holds=verdict != "fails", kind=kind, verdict=verdict, reason=reason)

    rows = [row(1, "a", "comparison", "reproduces"), row(1, "b", "comparison", "differs", "too short"),
            row(1, "c", "comparison", "differs", "other"), row(2, "d", "check", "holds")]
    lines = glance_table(rows, {1: ("b", "a"), 2: ("d",)}).splitlines()
    assert len(lines) == 2 + 3
    assert lines[2] == ("| ≠ differs: too short | [1](part/01_c.html) | b | 1.5 | 2 | "
                        "3 comparisons: 1 reproduces, 2 differ |")
    assert lines[3].startswith("| ✓ reproduces |  | a |") and lines[3].endswith("|  |")  # one link a chapter
    assert lines[4].endswith("| 1 of 1 checks hold |")
    with pytest.raises(ValueError, match="'z' is not a claim of chapter 2"):
        glance_table(rows, {2: ("z",)})


def test_every_headline_of_the_intro_is_a_claim_of_its_committed_chapter():
    rows = reproduction.collect(reproduction.find_root())
    table = reproduction.glance_table(rows)  # raises on a renamed or dropped headline
    assert len(table.splitlines()) == 2 + sum(len(names) for names in reproduction.HEADLINES.values())
    assert set(reproduction.HEADLINES) == set(range(1, 13))  # every chapter has a headline


def test_an_intro_notebook_is_not_a_chapter(tmp_path):
    """The intro (the toc's root) shows the chapters' claims; when it is a notebook it is still not a chapter."""
    root = fake_book(tmp_path, {"01_a": []})
    nbformat.write(new_notebook(cells=[new_markdown_cell("# Intro")]), tmp_path / "book" / "intro.ipynb")
    assert [p.name for p in reproduction.chapter_notebooks(root)] == ["01_a.ipynb"]


def test_only_the_back_matter_s_pages_are_not_chapters(tmp_path):
    """A notebook in the back matter is not a chapter whatever its name; one in a part of the book is, even
    one named like a back-matter page."""
    root = fake_book(tmp_path, {"01_a": [], "reproduction": []})
    toc = (root / "_toc.yml").read_text() + "      - file: book/part/01_b\n"  # appended to the back matter
    (root / "_toc.yml").write_text(toc)
    nbformat.write(new_notebook(cells=[new_markdown_cell("# B")]), root / "book" / "part" / "01_b.ipynb")
    assert reproduction.back_matter_entries(root) == ["book/reproduction", "book/part/01_b"]
    assert [p.relative_to(root).as_posix() for p in reproduction.chapter_notebooks(root)] == [
        "book/part/01_a.ipynb", "book/part/reproduction.ipynb"]


def test_the_page_is_never_its_own_chapter_even_outside_the_back_matter(tmp_path):
    root = fake_book(tmp_path, {"01_a": []})
    toc = (root / "_toc.yml").read_text().replace("  - caption: Back matter\n    chapters:\n", "")
    (root / "_toc.yml").write_text(toc)  # the page now sits in the chapters' part
    assert "book/reproduction" in reproduction.toc_entries(root)
    assert [p.name for p in reproduction.chapter_notebooks(root)] == ["01_a.ipynb"]


def test_a_page_split_off_a_recorded_chapter_finds_its_claims_in_the_chapter_s_run(tmp_path):
    c1 = claims.check("rank", 3.0, at_least=2)
    c2 = claims.check("residual", 0.01, at_most=0.1)
    root = fake_book(tmp_path, {"01_a": [claim_output(c1)], "01_b": [claim_output(c2)], "02_c": []})
    results = root / "results" / "paper"
    results.mkdir(parents=True)
    recorded = [claims.check("rank", 7.0, at_least=2).record(), dict(c2.record(), value=0.02)]
    (results / "01_a.json").write_text(json.dumps({"gpu": "NVIDIA H200", "seconds": 60.0, "claims": recorded}))
    rows = {r.name: r for r in reproduction.collect(root)}
    assert rows["rank"].paper_run["value"] == 7.0
    assert rows["residual"].paper_run["value"] == 0.02 and rows["residual"].gpu == "NVIDIA H200"
    # a chapter whose two pages each have a recorded run: a third page finds its claim in either
    c3 = claims.check("cosine", 0.5, at_most=1)
    root = fake_book(tmp_path / "two", {"01_a": [claim_output(c1)], "01_b": [claim_output(c2)],
                                        "01_c": [claim_output(c3)]})
    results = root / "results" / "paper"
    results.mkdir(parents=True)
    (results / "01_a.json").write_text(json.dumps({"gpu": "H200", "seconds": 1.0, "claims": recorded[:1]}))
    (results / "01_b.json").write_text(json.dumps({"gpu": "H200", "seconds": 1.0,
                                                   "claims": [dict(c3.record(), value=0.7)]}))
    rows = {r.name: r for r in reproduction.collect(root)}
    assert rows["cosine"].paper_run["value"] == 0.7 and rows["rank"].paper_run["value"] == 7.0


def test_a_coded_paper_value_is_shown_as_qualitative():
    from attnbook.booktools.reproduction import paper_cell

    assert paper_cell(1.0, "Fig. 3, one run per panel (1 = yes)") == "qualitative (Fig. 3, one run per panel (1 = yes))"
    assert paper_cell(1.0, "Fig. 4: 20 paths beat 5 paths (a direction: +1)").startswith("qualitative (")
    assert paper_cell(1.0, "Fig. 2, read off the authors' figure files") == "1 (Fig. 2, read off the authors' figure files)"
    assert paper_cell(0.8, "Sec. 4, coded 1") == "0.8 (Sec. 4, coded 1)"  # a real number stays a number
    assert paper_cell(None, "") == ""
