#!/usr/bin/env python
"""Precomputed runs of chapter 6 (the circle task), shipped; one named run per command:

    .venv/bin/python scripts/circle_runs.py control   # the two controls, every seed, both widths (~2 minutes)
    .venv/bin/python scripts/circle_runs.py seeds16   # SAN, SAN+skip, SAN+MLP with 16 seeds (~6 minutes)
    .venv/bin/python scripts/circle_runs.py control_seeds16   # each token attending to itself, 16 seeds

Every model is trained with the book's recipe (the chapter's own training, sizes of the ``circle`` preset): the
seeds of one width and variant as one batched model (``circle_ensemble.ensemble_sweep``, the models ``circle.fit``
trains, to float rounding), on one CPU thread or with ``--device cuda``, and summarised as the chapter reads
it (``circle.summarise_run``: the one-step error over staying put, the collapse step, the final token gap and
the spread of the rollout).
``control`` holds two controls of the circle model: attention removed (``CircleNet(attention=False)``: every head
gated to zero, a token-wise map with the same parameters) and each token attending only to itself
(``CircleNet(attention="self")``: token-wise, the value and output maps kept); ``seeds16`` repeats the chapter's own sweep over 16
seeds, enough to tell the collapse fractions apart. Each writes
``src/attnbook/data/circle/<run>_<preset>.json`` with its settings, command, time, threads and machine; the
chapter recomputes part of each live and checks it against the file.
"""

from __future__ import annotations

import argparse
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
from attnbook.core import runs  # noqa: E402
from attnbook.rank.tasks import circle  # noqa: E402
from attnbook.rank.tasks.circle_ensemble import ensemble_sweep  # noqa: E402
from train_translation import cpu_name  # noqa: E402



def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", choices=("control", "seeds16", "control_seeds16"))
    ap.add_argument("--preset", choices=attnbook.core.presets.PRESET_NAMES, default="quick")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--device", default="cpu", help="where the ensembles train (cuda on a GPU machine)")
    args = ap.parse_args()
    torch.set_num_threads(1)  # as the chapter: small models, one thread
    run_name = f"circle_{args.run}"
    cfg = runs.settings(run_name, args.preset)  # the run table's settings (attnbook.core.runs)
    variants, n_seeds = cfg["variants"], cfg["n_seeds"]
    X, Y = circle.circle_dataset(cfg["n_points"])
    results, t0 = [], time.time()
    sweep = ensemble_sweep(cfg["widths"], variants, n_seeds, X, Y, cfg["rollout"], keep_trajectory=False,
                           steps=cfg["steps"], lr=cfg["lr"], batch=cfg["batch"], n_points=cfg["n_points"],
                           n_heads=cfg["n_heads"], device=args.device)
    for (d, name), records in sweep.items():
        for seed, summary in enumerate(records):
            run = {"d_model": d, "variant": name, "seed": seed, **summary}
            results.append(run)
            print(run, flush=True)
    record = {
        "what": runs.run(run_name).what,
        "recipe": cfg,
        "runs": results,
        "seconds": round(time.time() - t0, 1),
        "threads": 1,
        "device": args.device,
        "machine": f"{cpu_name()}, {os.cpu_count()} cores, {platform.machine()}",
        "torch": torch.__version__,
        "meta": runs.record(run_name, args.preset, sys.argv),
    }
    out = args.out or runs.output_path(run_name, args.preset)
    runs.write_json(out, record)
    print(f"wrote {out} in {record['seconds']:.0f} s")


if __name__ == "__main__":
    main()
