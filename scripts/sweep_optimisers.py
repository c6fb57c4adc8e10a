#!/usr/bin/env python
"""The optimiser sweep of chapter 9 (Noci et al. 2022: adaptive optimisers train what SGD cannot), shipped:

    .venv/bin/python scripts/sweep_optimisers.py            # about 30 minutes on one CPU thread at quick
    .venv/bin/python scripts/sweep_optimisers.py --preset paper --device cuda

Trains the reversal task's deep post-LN model (``attnbook.signal.reverser``) for every arm (SGD or Adam;
residual scaling alpha = 1 or 1/sqrt(L); temperature 1 or the one that balances the query and value
gradients of that very model at initialisation). Each arm's learning rate is chosen out of five on three
*selection* seeds (highest mean final accuracy, ties broken by the lowest mean final loss), and the arm is then judged on three *other* seeds at that rate,
so that the seeds a verdict rests on did not pick its learning rate. Adam is warmed up linearly over the first
tenth of training, as fairseq warms up Adam on post-LN Transformers; SGD (momentum 0.9) is not. On a GPU the
seeds of an arm and learning rate train as one batched model (``attnbook.signal.reverser_ensemble``); on the
CPU, where batching gains little, one after another. Writes the final accuracy and loss of every run (``role``:
``selection`` or ``judged``) and the training logs of the judged runs (loss, query/key and value gradient norms
and update sizes, output token cosine) to ``src/attnbook/data/signal/optimiser_sweep_<preset>.json``, with the
command, time, threads and machine.
"""

from __future__ import annotations

import argparse
import json
import math
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
from attnbook.core.ensembles import batches_models_on  # noqa: E402
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


def seed_runs(size: rv.ReverserSize, arm: dict, lr: float, seeds, steps: int, x_eval, device,
              warmup: int) -> list[dict]:
    """The runs of one arm at one learning rate, a record per seed. Batched only on a real CUDA GPU (the library's
    rule, ``core.ensembles.batches_models_on``); elsewhere one after another
    (``reverser.train_run``): batching the three seeds there takes 4.7 s where the loop takes 5.2 s (60 steps at
    quick, one thread), and the shipped quick sweep was made this way; on a GPU, where a tiny model's step is
    bound by kernel launches, as one batched model (``reverser_ensemble.train_seeds``), equal to float rounding."""
    warmup = warmup if arm["optimizer"] == "adam" else 0
    if not batches_models_on(device):
        return [rv.train_run(size, **arm, lr=lr, seed=seed, steps=steps, x_eval=x_eval, warmup=warmup)
                for seed in seeds]
    return train_seeds(size, **arm, lr=lr, seeds=seeds, steps=steps, x_eval=x_eval, device=device,
                       warmup=warmup)


def choose_learning_rate(runs: list[dict], learning_rates) -> float:
    """The learning rate of the highest mean final accuracy over the selection seeds; among rates tied on it (for
    example several at full accuracy), the one of the lowest mean final loss (a diverged run's loss counts as
    infinite). The tie-break was added after the first run of this sweep, whose ties went to the first rate
    listed, the slowest."""
    def mean(key, lr):
        vals = [r[key] if math.isfinite(r[key]) else math.inf for r in runs if r["lr"] == lr]
        return sum(vals) / len(vals)

    return max(learning_rates, key=lambda lr: (round(mean("acc", lr), 4), -mean("loss", lr)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", choices=attnbook.core.presets.PRESET_NAMES, default="quick")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--resume", action="store_true",
                    help="keep the arms finished by an interrupted run of the same settings (<out>.partial.json)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    p = run_table.settings("optimiser_sweep", args.preset)  # the run table's settings (attnbook.core.runs)
    LEARNING_RATES, SEEDS, PICKERS = p["learning_rates"], p["seeds"], p["selection_seeds"]
    size = rv.ReverserSize.from_preset(p)
    x_eval = torch.randint(0, size.vocab, (p["n_eval"], size.seq_len),
                           generator=torch.Generator().manual_seed(p["eval_seed"]))
    t0 = time.time()
    results = []

    def run_seeds(arm, lr, seeds, role):
        out = []
        for seed, r in zip(seeds, seed_runs(size, arm, lr, seeds, p["steps"], x_eval, args.device,
                                            p["adam_warmup"])):
            out.append({"role": role, "lr": lr, "seed": seed, "acc": round(r["acc"], 4),
                        "loss": round(r["loss"], 4), **({"log": r["log"]} if role == "judged" else {})})
            print(f"{arm_name(arm)} lr={lr:g} seed={seed} ({role}): acc {r['acc']:.3f} "
                  f"({time.time() - t0:.0f} s)", flush=True)
        return out

    out = args.out or run_table.output_path("optimiser_sweep", args.preset)
    partial = out.with_name(out.stem + ".partial.json")
    done = {}
    if args.resume and partial.exists():
        saved = json.loads(partial.read_text())
        if saved["settings"] == p and saved["device"] == str(args.device):
            done = {a["name"]: a for a in saved["arms"]}
            print(f"resuming: {len(done)} arm(s) done", flush=True)
    for arm in arms(size):
        if arm_name(arm) in done:
            results.append(done[arm_name(arm)])
            continue
        picked = [r for lr in LEARNING_RATES[arm["optimizer"]] for r in run_seeds(arm, lr, PICKERS, "selection")]
        best = choose_learning_rate(picked, LEARNING_RATES[arm["optimizer"]])
        results.append({**arm, "name": arm_name(arm), "best_lr": best,
                        "runs": picked + run_seeds(arm, best, SEEDS, "judged")})
        partial.write_text(json.dumps({"settings": p, "device": str(args.device), "arms": results}))
    record = {
        "what": "reversal task, post-LN depth-L stack: final accuracy of every (arm, learning rate, selection "
                "seed) and of the judged seeds at each arm's chosen learning rate, with their training logs",
        "preset": args.preset,
        "size": size.__dict__,
        "steps": p["steps"],
        "learning_rates": LEARNING_RATES,
        "seeds": list(SEEDS),
        "selection_seeds": list(PICKERS),
        "adam_warmup": p["adam_warmup"],
        "arms": results,
        "seconds": round(time.time() - t0, 1),
        "threads": args.threads,
        "device": str(args.device),
        "machine": f"{cpu_name()}, {os.cpu_count()} cores, {platform.machine()}",
        "torch": torch.__version__,
        "meta": run_table.record("optimiser_sweep", args.preset, sys.argv),
    }
    run_table.write_json(out, record)
    partial.unlink(missing_ok=True)
    print(f"wrote {out} in {record['seconds']:.0f} s")


if __name__ == "__main__":
    main()
