"""Tests of attnbook.core.runs and scripts/run.py: every shipped file is a named run that knows its preset, and
no reader compares with a file of another preset or other settings."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from attnbook.core import runs

ROOT = Path(__file__).resolve().parents[1]


def test_every_shipped_file_is_a_runs_output_or_source_data():
    made = runs.shipped_files()
    for path in runs.DATA.rglob("*"):
        rel = path.relative_to(runs.DATA).as_posix()
        if path.is_dir() or path.name == "README.md" or rel.startswith("papers/"):
            continue  # the papers' printed numbers are read from the papers, not run
        assert rel in made, f"data/{rel} is made by no run of attnbook.core.runs.RUNS and is no source file"


SHIPPED = sorted(n for n, r in runs.RUNS.items() if not r.pending)
PENDING = sorted(n for n, r in runs.RUNS.items() if r.pending)


@pytest.mark.parametrize("name", SHIPPED)
def test_each_run_is_shipped_at_quick_with_its_run_preset_and_settings(name):
    payload = runs.load(name, "quick")
    meta = payload["meta"]
    assert (meta["run"], meta["preset"]) == (name, "quick")
    assert meta["settings"] == runs.settings(name, "quick")
    assert meta["command"].startswith("python scripts/")
    for also in runs.run(name).also:
        assert (runs.DATA / also.format(preset="quick")).is_file()


@pytest.mark.parametrize("name", PENDING)
def test_a_pending_run_ships_no_file_and_answers_missing_with_its_command(name):
    """A run marked pending (a role-grid cell that needs a GPU, or a training not yet made) ships no file: once
    its file exists the mark must go; until then its loader answers Missing with the command that makes it."""
    r = runs.run(name)
    assert not r.path("quick").exists(), f"{name} is shipped: remove its pending mark"
    missing = runs.find(name, "quick")
    assert isinstance(missing, runs.Missing) and missing.command == f"python scripts/run.py {name}"


def test_the_role_grid_names_its_cells_not_yet_run():
    """Issue "Part III at the paper's width": every cell of the role grid is a named run, shipped or pending,
    two seeds each (width on a GPU, data and head count on this CPU)."""
    cells = {n for n in runs.RUNS if n.startswith("translation_model_")}
    for variant in ("data25", "data50", "h4", "d256", "d512"):
        assert {f"translation_model_{variant}", f"translation_model_{variant}_seed1"} <= cells, variant
    assert all("GPU" in runs.run(f"translation_model_{v}").pending for v in ("d256", "d512"))


@pytest.mark.parametrize("name", sorted(runs.RUNS))
def test_each_run_names_a_script_that_runs_it(name):
    r = runs.run(name)
    text = (ROOT / r.script).read_text()
    if r.part:
        assert f'"{r.part}": ' in text, f"{r.script} has no part {r.part!r}"
    assert runs.command(name) == f"python scripts/run.py {name}"
    assert runs.command(name, "paper") == f"python scripts/run.py {name} --preset paper"
    assert "{preset}" in r.output


def copy_data(tmp_path, monkeypatch, name, to_preset):
    """The quick file of run ``name`` copied as the file of ``to_preset`` into a scratch data folder."""
    monkeypatch.setattr(runs, "DATA", tmp_path)
    src = ROOT / "src" / "attnbook" / "data" / runs.run(name).output.format(preset="quick")
    dst = runs.output_path(name, to_preset)
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(src, dst)
    return dst


def test_a_file_of_another_preset_or_settings_is_refused(tmp_path, monkeypatch):
    copy_data(tmp_path, monkeypatch, "circle_control", "paper")
    with pytest.raises(runs.StaleRun, match="made at preset 'quick', not 'paper'.*--preset paper"):
        runs.load("circle_control", "paper")
    with pytest.raises(runs.StaleRun):  # find does not hide a stale file
        runs.find("circle_control", "paper")
    path = copy_data(tmp_path, monkeypatch, "circle_control", "quick")
    payload = json.loads(path.read_text())
    payload["meta"]["settings"]["steps"] += 1
    path.write_text(json.dumps(payload))
    with pytest.raises(runs.StaleRun, match="other settings"):
        runs.load("circle_control", "quick")


def test_expect_refuses_a_file_made_for_another_comparison():
    evaluation = runs.load("translation_eval", "quick", expect={"n_bleu": 200})
    assert evaluation["greedy_first_n"]["n"] == 200
    with pytest.raises(runs.StaleRun, match="n_bleu=200.*needs n_bleu=988"):
        runs.load("translation_eval", "quick", expect={"n_bleu": 988})
    with pytest.raises(ValueError, match="no setting 'verses'"):
        runs.load("translation_eval", "quick", expect={"verses": 1})


def test_every_loader_answers_a_preset_without_its_file():
    """At ``paper`` no file is shipped: each loader gives a Missing that names the command, or raises
    NotAtPreset, never the quick file."""
    from attnbook.heads import lrp, sweeps
    from attnbook.heads import translation as tr
    from attnbook.rank.tasks import circle
    from attnbook.signal import reverser as rv

    missing = [circle.load_runs("control", "paper"), circle.load_runs("seeds16", "paper"), rv.load_sweep("paper"),
               lrp.load_relevance("lrp_relevance", "paper"), lrp.load_relevance("lrp_relevance_minilm", "paper"),
               tr.converged_evaluation("paper")]
    for m in missing:
        assert isinstance(m, runs.Missing) and not m and m.preset == "paper"
    assert missing[0].command == "python scripts/run.py circle_control --preset paper"
    assert missing[1].command == ""  # circle_seeds16 is defined at quick only
    assert circle.load_runs("control_seeds16", "quick")["meta"]["run"] == "circle_control_seeds16"
    with pytest.raises(ValueError, match="expected run one of"):
        circle.load_runs("seeds32", "quick")  # not a circle run of the run table
    with pytest.raises(runs.NotAtPreset, match="translation_model --preset paper`, or run this chapter at a "
                       "preset that ships it \\(ATTNBOOK_PRESET=quick\\)"):
        tr.load_translation_model(preset="paper")
    with pytest.raises(runs.NotAtPreset, match="defined at quick only"):
        sweeps.load("encoder_gates_converged", preset="paper")
    with pytest.raises(ValueError, match="unknown preset"):
        runs.load("circle_control", "huge")
    with pytest.raises(ValueError, match="unknown run"):
        runs.load("no_such_run", "quick")


def test_the_active_preset_is_the_default(monkeypatch):
    monkeypatch.setenv("ATTNBOOK_PRESET", "paper")
    assert not runs.find("circle_control")
    monkeypatch.setenv("ATTNBOOK_PRESET", "quick")
    assert runs.find("circle_control")["meta"]["preset"] == "quick"


def test_settings_are_copies():
    s = runs.settings("minilm_gates", "quick")
    s["steps"] = -1
    assert runs.settings("minilm_gates", "quick")["steps"] != -1


# scripts that write no file under src/attnbook/data (benchmarks, the book's own tooling)
WRITES_NOTHING_SHIPPED = {"bench_attention.py", "bench_paths.py", "bench_seq2seq.py", "execute_notebooks.py",
                          "notebook_text.py", "record_paper_run.py", "colab_check.sh"}


def test_the_readme_s_commands_do_not_overwrite_a_shipped_file_with_other_settings():
    """Every command the README gives either makes a file through its run (scripts/run.py NAME) or writes
    nothing under src/attnbook/data."""
    readme = (ROOT / "README.md").read_text()
    commands = re.findall(r"^(?:\.venv/bin/python|python|bash) (scripts/\S+)(.*)$", readme, flags=re.M)
    assert commands
    for script, rest in commands:
        name = Path(script).name
        if name == "run.py":
            run_name = rest.split("#")[0].split()[0]
            assert run_name in runs.RUNS or run_name == "--list", rest
        else:
            assert name in WRITES_NOTHING_SHIPPED, f"README runs {script}{rest}: use scripts/run.py <run>"


def test_bench_recipes_refuses_to_replace_the_shipped_file_with_other_settings():
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_recipes.py"), "--cap", "1"],
                         capture_output=True, text=True)
    assert out.returncode != 0 and "differ from the shipped run" in out.stderr


#: what a rerun may change: how long it took, where and with what
VOLATILE = {"seconds", "machine", "processor", "torch", "threads", "date", "command", "note", "ran_as"}


#: how far a rerun's float may be from the file's: one unit of the 4-digit rounding the files use (on an AMD
#: EPYC, minilm_gates' rerun put two of its Xeon file's gate probabilities one unit apart: 0.475 and 0.4749)
LAST_DIGIT = 1.5e-4


def without_volatile(x, approx: bool = False):
    """``x`` without what a rerun may change; with ``approx``, each float as a value a rerun must match to
    :data:`LAST_DIGIT` (for the expected side of a comparison)."""
    if isinstance(x, dict):
        return {k: without_volatile(v, approx) for k, v in x.items() if k not in VOLATILE}
    if isinstance(x, list):
        return [without_volatile(v, approx) for v in x]
    if approx and isinstance(x, float):
        return pytest.approx(x, abs=LAST_DIGIT, rel=0)
    return x


CHEAP = sorted(n for n, r in runs.RUNS.items() if r.cheap and r.portable and "quick" in r.settings)


def test_at_least_two_runs_are_cheap_and_portable():
    """Two runs that evaluate without training (the circle control trains, and rerun on an AMD EPYC it differs
    from its file made on a Xeon, so it is not marked portable)."""
    assert len(CHEAP) >= 2, CHEAP


@pytest.mark.slow
def test_the_cheap_runs_reproduce_their_shipped_files_exactly(tmp_path):
    """Each cheap portable run, rerun by its command (side by side, one thread each), writes the file that is
    shipped: every result equal, only how long it took, where and with what may differ."""
    outs = {name: tmp_path / runs.output_path(name, "quick").name for name in CHEAP}
    logs = {name: open(tmp_path / f"{name}.log", "w") for name in CHEAP}
    procs = {name: subprocess.Popen([sys.executable, str(ROOT / "scripts" / "run.py"), name, "--out", str(out)],
                                    stdout=logs[name], stderr=subprocess.STDOUT)
             for name, out in outs.items()}
    for name, proc in procs.items():
        proc.wait(timeout=900)
        logs[name].close()
        assert proc.returncode == 0, f"{name}: {(tmp_path / f'{name}.log').read_text()[-3000:]}"
    for name, out in outs.items():
        rerun = json.loads(out.read_text())
        assert rerun["meta"]["command"] == f"python scripts/run.py {name} --out {out}"
        assert without_volatile(rerun) == without_volatile(runs.load(name, "quick"), approx=True), name
