"""Chapter "The circle task"'s seed sweep trained model by model (circle.fit) against one batched ensemble per
width and variant (circle_ensemble.fit_ensemble), side by side on one device (issue: ensembles as one batched
model, so that the paper preset fits a GPU):

    python scripts/bench_ensembles.py                      # the quick preset's sweep sizes, on the CPU, 1 thread
    python scripts/bench_ensembles.py --preset paper --device cuda
    python scripts/bench_ensembles.py --steps 100          # a shorter run (the ratio is per step)

Prints seconds per training step of the whole sweep both ways, the speed-up, and the largest difference between
the two ways' final losses (float rounding: a batched product sums in another order).
"""

from __future__ import annotations

import argparse
import time

import torch

import attnbook
from attnbook.rank.tasks import circle
from attnbook.rank.tasks.circle_ensemble import fit_ensemble

VARIANTS = {"SAN": {}, "SAN+MLP": {"mlp": True}, "SAN+skip": {"skip": True}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="quick", choices=attnbook.core.presets.PRESET_NAMES)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=None, help="training steps (default: the preset's)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    s = attnbook.preset("circle", args.preset)
    steps = args.steps or s["steps"]
    kw = dict(steps=steps, lr=s["lr"], batch=s["batch"], n_points=s["n_points"], n_heads=s["n_heads"],
              device=args.device)
    seeds = list(range(s["n_seeds"]))
    loop = ens = 0.0
    gap = 0.0
    for d in s["widths"]:
        for name, variant in VARIANTS.items():
            t0 = time.perf_counter()
            alone = [circle.fit(d, seed, **kw, **variant)[1]["loss"][-1] for seed in seeds]
            loop += time.perf_counter() - t0
            t0 = time.perf_counter()
            _, hist = fit_ensemble(d, seeds, **kw, **variant)
            ens += time.perf_counter() - t0
            gap = max(gap, max(abs(a - b) for a, b in zip(alone, hist["loss"][-1])))
            print(f"d={d} {name}: {len(seeds)} models; loop {loop:.1f} s, ensemble {ens:.1f} s so far", flush=True)
    n_models = len(seeds) * len(s["widths"]) * len(VARIANTS)
    print(f"preset {args.preset}, {args.device}, {args.threads} thread(s), {n_models} models x {steps} steps: "
          f"model by model {loop:.1f} s ({1e3 * loop / steps:.1f} ms per sweep step), batched {ens:.1f} s "
          f"({1e3 * ens / steps:.1f} ms per sweep step): {loop / ens:.1f}x faster; largest final-loss gap "
          f"{gap:.2e}")


if __name__ == "__main__":
    main()
