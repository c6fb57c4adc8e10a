#!/usr/bin/env python
"""Make any shipped file by the name of its run (the table ``attnbook.core.runs.RUNS``):

    .venv/bin/python scripts/run.py --list                        # every run: chapter, presets, minutes, file
    .venv/bin/python scripts/run.py circle_control                # regenerate one file at quick
    .venv/bin/python scripts/run.py translation_eval --preset paper
    .venv/bin/python scripts/run.py scratch_converged --time-limit 120   # further options go to the script

It runs the run's script with the run's arguments (and ``--preset``), then records in the file's ``meta`` the
run's name, preset and settings and this exact command. Runs marked portable are run on the CPU code path that
every x86 CPU computes alike (one thread, ``ATEN_CPU_CAPABILITY=default``, ``MKL_CBWR=COMPATIBLE``), so that
their files reproduce exactly anywhere (``tests/test_runs.py`` reruns the cheap ones). ``--out PATH`` writes
somewhere else instead of the shipped file (a file for most runs; a folder for the pruning runs). The source
data keep their own commands (``--list`` names them).
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "scripts"))

#: the environment of a portable run: one thread on the code path every x86 CPU computes alike
PORTABLE = {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE", "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1"}


def list_runs(runs) -> None:
    print(f"{'run':28s} {'chapter':22s} {'presets':12s} {'minutes':>7s}  file (at quick)")
    for r in runs.RUNS.values():
        minutes = "" if r.minutes is None else f"{r.minutes:g}"
        mark = " (cheap, portable)" if r.cheap and r.portable else ""
        mark += f" (pending: {r.pending})" if r.pending else ""
        print(f"{r.name:28s} {r.chapter:22s} {','.join(r.settings):12s} {minutes:>7s}  "
              f"{r.output.format(preset='quick')}{mark}")
    print("\nsource data (their own commands):")
    for name, (cmd, files) in runs.SOURCES.items():
        print(f"  {name}: {cmd}\n    {', '.join(files)}")


def script_argv(run, preset: str, out, rest: list[str]) -> list[str]:
    """The script's command line for ``run`` at ``preset``."""
    argv = [str(ROOT / run.script), *run.args]
    if run.takes_preset:
        argv += ["--preset", preset]
    if out is not None:
        argv += ["--out", str(Path(out).parent if run.part else out)]
    return argv + rest


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("name", nargs="?", help="the run (see --list)")
    ap.add_argument("--preset", default="quick")
    ap.add_argument("--list", action="store_true", help="list every run and the source data")
    ap.add_argument("--out", type=Path, default=None, help="write here instead of the shipped file")
    args, rest = ap.parse_known_args(argv)

    from attnbook.core import runs

    if args.list:
        list_runs(runs)
        return
    if not args.name:
        ap.error("name a run (see --list)")
    try:
        run = runs.run(args.name)
        runs.settings(args.name, args.preset)  # NotAtPreset where the run is not defined there
    except (ValueError, runs.NotAtPreset) as e:
        ap.error(str(e))
    if run.portable and any(os.environ.get(k) != v for k, v in PORTABLE.items()):
        # the code path is chosen when torch loads: start again in the portable environment
        os.execve(sys.executable, [sys.executable, __file__, *argv], {**os.environ, **PORTABLE})
    target = args.out or runs.output_path(args.name, args.preset)
    if args.out is not None and run.part:
        target = Path(args.out).parent / runs.output_path(args.name, args.preset).name
    command = shlex.join(["python", "scripts/run.py", *argv])
    print(f"{command}: {run.script} -> {target}", flush=True)

    sys.argv = script_argv(run, args.preset, args.out, rest)
    runpy.run_path(str(ROOT / run.script), run_name="__main__")

    payload = json.loads(Path(target).read_text())
    payload["meta"] = {**payload.get("meta", {}), **runs.record(args.name, args.preset), "command": command}
    if "command" in payload:  # the script's own record of how it was called
        payload["command"] = command
    runs.write_json(Path(target), payload)
    print(f"recorded run {args.name} at preset {args.preset} in {target}")


if __name__ == "__main__":
    main()
