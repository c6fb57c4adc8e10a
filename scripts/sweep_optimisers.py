#!/usr/bin/env python
"""The optimiser sweep of chapter 9 (Noci et al. 2022: adaptive optimisers train what SGD cannot), shipped:

    .venv/bin/python scripts/sweep_optimisers.py            # about 5 minutes on one CPU thread at quick
    .venv/bin/python scripts/sweep_optimisers.py --preset paper --device cuda

Trains the reversal task's deep post-LN model (``attnbook.signal.reverser``) for every arm (SGD or Adam;
residual scaling alpha = 1 or 1/sqrt(L); temperature 1 or the one that balances the query and value
gradients of that very model at initialisation), five learning rates per optimiser and three seeds (on a GPU the
seeds of an arm and learning rate train as one batched model, ``attnbook.signal.reverser_ensemble``; on the CPU,
where batching gains little, one after another), and writes the final accuracy and loss of every run and the training log (loss, query/key and value gradient
norms, output token cosine) of the best learning rate of each arm to
``src/attnbook/data/signal/optimiser_sweep_<preset>.json``, with the command, time, threads and machine.
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
from attnbook.core import runs as run_table  # noqa: E402
from attnbook.signal import reverser as rv  # noqa: E402
from attnbook.signal.reverser_ensemble import train_seeds  # noqa: E402
from train_translation import cpu_name  # noqa: E402


def arms(size: rv.ReverserSize) -> list[dict]:
    """The arms: each optimiser with and without residual scaling at tau = 1, and SGD on the unscaled model
    at the temperature calibrated for it."""
    tau_unscaled = rv.balancing_temperature(size, scaled=False)
    out = [dict(optimizer=o, scaled=s, temperature=1.0) for o in ("sgd", "adam") for s in (False, True)]
    out.insert(1, dict(optimizer="sgd", scaled=False, temperature=tau_unscaled))
    return out


def arm_name(arm: dict) -> str:
    return (f"{arm['optimizer']}, alpha={'1/sqrt(L)' if arm['scaled'] else '1'}, "
            f"tau={arm['temperature']:g}")


def seed_runs(size: rv.ReverserSize, arm: dict, lr: float, seeds, steps: int, x_eval, device) -> list[dict]:
    """The runs of one arm at one learning rate, a record per seed. On the CPU one after another
    (``reverser.train_run``): batching the three seeds there takes 4.7 s where the loop takes 5.2 s (60 steps at
    quick, one thread), and the shipped quick sweep was made this way; on a GPU, where a tiny model's step is
    bound by kernel launches, as one batched model (``reverser_ensemble.train_seeds``), equal to float rounding."""
    if torch.device(device).type == "cpu":
        return [rv.train_run(size, **arm, lr=lr, seed=seed, steps=steps, x_eval=x_eval) for seed in seeds]
    return train_seeds(size, **arm, lr=lr, seeds=seeds, steps=steps, x_eval=x_eval, device=device)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", choices=attnbook.core.presets.PRESET_NAMES, default="quick")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    p = run_table.settings("optimiser_sweep", args.preset)  # the run table's settings (attnbook.core.runs)
    LEARNING_RATES, SEEDS = p["learning_rates"], p["seeds"]
    size = rv.ReverserSize.from_preset(p)
    x_eval = torch.randint(0, size.vocab, (p["n_eval"], size.seq_len),
                           generator=torch.Generator().manual_seed(p["eval_seed"]))
    t0 = time.time()
    results = []
    for arm in arms(size):
        runs = []
        for lr in LEARNING_RATES[arm["optimizer"]]:
            for seed, r in zip(SEEDS, seed_runs(size, arm, lr, SEEDS, p["steps"], x_eval, args.device)):
                runs.append({"lr": lr, "seed": seed, "acc": round(r["acc"], 4), "loss": round(r["loss"], 4),
                             "log": r["log"]})
                print(f"{arm_name(arm)} lr={lr:g} seed={seed}: acc {r['acc']:.3f} ({time.time() - t0:.0f} s)",
                      flush=True)
        mean_acc = {lr: sum(r["acc"] for r in runs if r["lr"] == lr) / len(SEEDS)
                    for lr in LEARNING_RATES[arm["optimizer"]]}
        best = max(mean_acc, key=mean_acc.get)
        results.append({**arm, "name": arm_name(arm), "best_lr": best,
                        "runs": [{k: v for k, v in r.items() if k != "log" or r["lr"] == best} for r in runs]})
    record = {
        "what": "reversal task, post-LN depth-L stack: final accuracy of every (arm, learning rate, seed); "
                "training logs of each arm's best learning rate",
        "preset": args.preset,
        "size": size.__dict__,
        "steps": p["steps"],
        "learning_rates": LEARNING_RATES,
        "seeds": list(SEEDS),
        "arms": results,
        "seconds": round(time.time() - t0, 1),
        "threads": args.threads,
        "device": str(args.device),
        "machine": f"{cpu_name()}, {os.cpu_count()} cores, {platform.machine()}",
        "torch": torch.__version__,
        "meta": run_table.record("optimiser_sweep", args.preset, sys.argv),
    }
    out = args.out or run_table.output_path("optimiser_sweep", args.preset)
    run_table.write_json(out, record)
    print(f"wrote {out} in {record['seconds']:.0f} s")


if __name__ == "__main__":
    main()
