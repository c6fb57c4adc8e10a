#!/usr/bin/env python
"""Precomputed runs of chapter 6 (the circle task), shipped; one named run per command:

    .venv/bin/python scripts/circle_runs.py control   # attention removed, every seed, both widths (~1 minute)
    .venv/bin/python scripts/circle_runs.py seeds16   # SAN, SAN+skip, SAN+MLP with 16 seeds (~6 minutes)

Every model is trained with the book's recipe (``circle.fit``, the chapter's own training, sizes of the
``circle`` preset) on one CPU thread, and summarised as the chapter reads it (``circle.summarise_run``: the
one-step error over staying put, the collapse step, the final token gap and the spread of the rollout).
``control`` is the circle model with attention removed (``CircleNet(attention=False)``: every head gated
to zero, a token-wise map with the same parameters); ``seeds16`` repeats the chapter's own sweep over 16
seeds, enough to tell the collapse fractions apart. Each writes
``src/attnbook/data/circle/<run>_<preset>.json`` with its settings, command, time, threads and machine; the
chapter recomputes part of each live and checks it against the file.
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
from attnbook.rank.tasks import circle  # noqa: E402
from train_translation import cpu_name  # noqa: E402

#: run name -> (variants by name, number of seeds (None: the preset's), what it is)
RUNS = {
    "control": ({"SAN, no attention": {"attention": False}}, None,
                "the circle-task model with attention removed (CircleNet(attention=False)), the book's recipe"),
    "seeds16": ({"SAN": {}, "SAN+skip": {"skip": True}, "SAN+MLP": {"mlp": True}}, 16,
                "the chapter's sweep (SAN, SAN+skip, SAN+MLP at both widths) over 16 seeds, the book's recipe"),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", choices=sorted(RUNS))
    ap.add_argument("--preset", choices=attnbook.core.presets.PRESET_NAMES, default="quick")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    torch.set_num_threads(1)  # as the chapter: small models, one thread
    variants, n_seeds, what = RUNS[args.run]
    cfg = attnbook.preset("circle", args.preset)
    n_seeds = n_seeds or cfg["n_seeds"]
    recipe = {k: cfg[k] for k in ("n_points", "widths", "n_heads", "steps", "lr", "batch", "rollout")}
    X, Y = circle.circle_dataset(cfg["n_points"])
    runs, t0 = [], time.time()
    for d in cfg["widths"]:
        for name, variant in variants.items():
            for seed in range(n_seeds):
                model, _ = circle.fit(d, seed, steps=cfg["steps"], lr=cfg["lr"], batch=cfg["batch"],
                                      n_points=cfg["n_points"], n_heads=cfg["n_heads"], **variant)
                run = {"d_model": d, "variant": name, "seed": seed,
                       **circle.summarise_run(model, X, Y, cfg["rollout"])}
                runs.append(run)
                print(run, flush=True)
    record = {
        "what": what,
        "recipe": {**recipe, "n_seeds": n_seeds, "variants": variants},
        "runs": runs,
        "seconds": round(time.time() - t0, 1),
        "threads": 1,
        "machine": f"{cpu_name()}, {os.cpu_count()} cores, {platform.machine()}",
        "torch": torch.__version__,
        "command": f"python scripts/circle_runs.py {args.run}"
                   + ("" if args.preset == "quick" else f" --preset {args.preset}"),
    }
    out = args.out or circle.DATA / f"{args.run}_{args.preset}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {out} in {record['seconds']:.0f} s")


if __name__ == "__main__":
    main()
