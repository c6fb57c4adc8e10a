"""Seed sweeps trained model by model against one batched ensemble, side by side on one device (issue: ensembles
as one batched model, so that the paper preset fits a GPU):

- ``circle``: chapter "The circle task"'s sweep (circle.fit per seed against circle_ensemble.fit_ensemble per width
  and variant);
- ``reverser``: chapter "Unequal gradients"'s optimiser sweep, one arm and learning rate (reverser.train_run per seed
  against reverser_ensemble.train_seeds);
- ``paths``: chapter "Path effectiveness"'s sampled paths (paths.path_forward path by path against the paths of a
  layer's head batched, ``by_head=True``), on the probes' training sequences, every length and repeat.

    python scripts/bench_ensembles.py                      # the quick preset's sweep sizes, on the CPU, 1 thread
    python scripts/bench_ensembles.py --preset paper --device cuda
    python scripts/bench_ensembles.py --steps 100          # a shorter run (the ratio is per step)
    python scripts/bench_ensembles.py --what reverser --steps 60
    python scripts/bench_ensembles.py --what paths --preset paper --device cuda

Prints seconds per training step of the whole sweep both ways, the speed-up, and the largest difference between
the two ways' final losses (float rounding: a batched product sums in another order).
"""

from __future__ import annotations

import argparse
import time

import torch

import attnbook
from attnbook.rank import paths, tasks
from attnbook.rank.tasks import circle
from attnbook.core import runs as run_table
from attnbook.rank.tasks.circle_ensemble import fit_ensemble
from attnbook.signal import reverser as rv
from attnbook.signal.reverser_ensemble import train_seeds

VARIANTS = {"SAN": {}, "SAN+MLP": {"mlp": True}, "SAN+skip": {"skip": True}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="quick", choices=attnbook.core.presets.PRESET_NAMES)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=None, help="training steps (default: the preset's)")
    ap.add_argument("--what", choices=("circle", "reverser", "paths"), default="circle")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.what == "reverser":
        return bench_reverser(args)
    if args.what == "paths":
        return bench_paths(args)
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


def bench_reverser(args) -> None:
    """The optimiser sweep's seeds of one arm (Adam, alpha = 1/sqrt(L), tau = 1, lr 1e-3) one by one and batched."""
    p = run_table.settings("optimiser_sweep", args.preset)
    size, steps = rv.ReverserSize.from_preset(p), args.steps or p["steps"]
    x_eval = torch.randint(0, size.vocab, (p["n_eval"], size.seq_len), generator=torch.Generator().manual_seed(1))
    kw = dict(optimizer="adam", scaled=True, temperature=1.0, lr=1e-3, steps=steps, x_eval=x_eval,
              device=args.device)
    t0 = time.perf_counter()
    alone = [rv.train_run(size, seed=seed, **kw) for seed in p["seeds"]]
    loop = time.perf_counter() - t0
    t0 = time.perf_counter()
    together = train_seeds(size, seeds=p["seeds"], **kw)
    ens = time.perf_counter() - t0
    gap = max(abs(a["loss"] - b["loss"]) for a, b in zip(alone, together))
    print(f"preset {args.preset}, {args.device}, {args.threads} thread(s), {len(alone)} seeds x {steps} steps: "
          f"model by model {loop:.1f} s, batched {ens:.1f} s: {loop / ens:.1f}x faster; largest final-loss gap "
          f"{gap:.2e}")


def bench_paths(args) -> None:
    """Chapter "Path effectiveness"'s path outputs on the probes' training sequences (every task, length and
    repeat, 20 paths; untrained models: the cost does not depend on the weights), path by path and batched by
    head."""
    cfg = attnbook.preset("path_effectiveness", args.preset)
    dev = torch.device(args.device)
    took = {False: 0.0, True: 0.0}
    gap = 0.0
    for name in ("sort", "hull", "memorization"):
        t = tasks.path_task(name, cfg[name], torch.Generator().manual_seed(0))
        model = t["model"].to(dev).eval()
        x, _, mask = t["train_set"]
        x, mask = x[:cfg["probe_train"]].to(dev), None if mask is None else mask[:cfg["probe_train"]].to(dev)
        g = torch.Generator().manual_seed(2)
        draws = [paths.sample_paths(model.depth, model.n_heads, k, 20, g)
                 for k in range(model.depth + 1) for _ in range(cfg["repeats"])]
        with torch.no_grad():
            h = model.embed_inputs(x)
            out = {}
            for by_head in (False, True):
                _sync(dev)
                t0 = time.perf_counter()
                out[by_head] = [paths.path_forward(model.blocks, h, p, mask, by_head=by_head) for p in draws]
                _sync(dev)
                took[by_head] += time.perf_counter() - t0
        gap = max(gap, max(float((a - b).abs().max()) for a, b in zip(out[False], out[True])))
        print(f"{name}: {len(draws)} draws of 20 paths on {len(x)} sequences; path by path "
              f"{took[False]:.1f} s, by head {took[True]:.1f} s so far", flush=True)
    print(f"preset {args.preset}, {args.device}, {args.threads} thread(s): path by path {took[False]:.1f} s, "
          f"batched by head {took[True]:.1f} s: {took[False] / took[True]:.2f}x; largest output gap {gap:.2e}")


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


if __name__ == "__main__":
    main()
