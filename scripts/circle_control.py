#!/usr/bin/env python
"""The attention-removed control of chapter 6 (the circle task), shipped:

    .venv/bin/python scripts/circle_control.py            # about a minute on one CPU thread at quick

Trains the circle-task model with attention removed (``CircleNet(attention=False)``: every head gated to
zero, a token-wise map with the same parameters) with the book's recipe (``circle.fit``, the chapter's own
training), every seed of the preset at both widths, and writes each run's one-step error over staying put,
collapse step, final token gap and spread (``circle.summarise_run``) to
``src/attnbook/data/circle/control_<preset>.json`` with the recipe, command, time, threads and machine.
The chapter recomputes one run live and checks it against the file.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "scripts"))

import torch  # noqa: E402

import attnbook  # noqa: E402
from attnbook.tasks import circle  # noqa: E402
from train_translation import cpu_name  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", choices=attnbook.presets.PRESET_NAMES, default="quick")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    torch.set_num_threads(1)  # as the chapter: small models, one thread
    cfg = attnbook.preset("circle", args.preset)
    recipe = {k: cfg[k] for k in ("n_points", "widths", "n_heads", "steps", "lr", "batch", "n_seeds", "rollout")}
    X, Y = circle.circle_dataset(cfg["n_points"])
    runs, t0 = [], time.time()
    for d in cfg["widths"]:
        for seed in range(cfg["n_seeds"]):
            model, _ = circle.fit(d, seed, steps=cfg["steps"], lr=cfg["lr"], batch=cfg["batch"],
                                  n_points=cfg["n_points"], n_heads=cfg["n_heads"], attention=False)
            run = {"d_model": d, "seed": seed, **circle.summarise_run(model, X, Y, cfg["rollout"])}
            runs.append(run)
            print(run, flush=True)
    record = {
        "what": "the circle-task model with attention removed (CircleNet(attention=False)), the book's recipe",
        "recipe": recipe,
        "runs": runs,
        "seconds": round(time.time() - t0, 1),
        "threads": 1,
        "machine": f"{cpu_name()}, {os.cpu_count()} cores, {platform.machine()}",
        "torch": torch.__version__,
        "command": "python scripts/circle_control.py" + ("" if args.preset == "quick" else f" --preset {args.preset}"),
    }
    out = args.out or circle.CONTROL.with_name(f"control_{args.preset}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {out} in {record['seconds']:.0f} s")


if __name__ == "__main__":
    main()
