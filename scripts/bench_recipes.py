"""Time to reach the paper's full-model accuracy: the paper's training recipe vs the book's (chapter 7).

    python scripts/bench_recipes.py                          # sort and hull, paper sizes, 120 s cap
    python scripts/bench_recipes.py --tasks sort --cap 60 --out /tmp/bench.json
    python scripts/bench_recipes.py --ablation                # run recipe_ablation: which setting matters

With ``--ablation`` (run ``recipe_ablation``) it trains the paper's recipe on its task with one setting at a time
changed to the book's (or lengthened), at each of its seeds, to the end: which setting keeps the paper's recipe
from the paper's accuracy where it ends short (chapter 7, the sort model)? The changes (:data:`CHANGES`):
``none`` (the recipe as it is), ``lr`` (the book's learning rate 2e-3, nothing else), ``fresh_data`` (a fresh
random batch of the same size every step, the same number of steps), ``epochs_x10`` (ten times the epochs).

Both recipes train the same model (the paper's sizes: sort L=6 H=2 d=48; hull L=6 H=3 d=84;
memorization L=6 H=2 d=250) side by side in one run, and evaluate the token accuracy every
``--eval-every`` steps on a held-out set (memorization: on its training set, as the paper does).
* paper: a fixed training set of the paper's size (sort 1,000; hull 10,000; memorization 500 sentences),
  Adam, lr 1e-5, batch 30, no clipping, epochs in a fixed order (the official ``shuffle=False``), for
  ``--epochs`` epochs (the paper trained 65-70); constant learning rate, except for the hull, which the
  official code trains with weight decay 1e-3 and a step schedule (``hull_training_recipe`` in
  ``data/papers/dong2021.json``). With ``--full`` it runs all its epochs (the time to the target is
  still recorded); otherwise it stops at the target or after ``--cap`` CPU seconds of training.
* book: fresh random batches every step (memorization: random batches of its 500 sentences), AdamW,
  lr 2e-3, batch 128, 5% warm-up then cosine decay over ``--steps``, gradient clipping 1.0.
Times are CPU seconds of training (process time, evaluation excluded) with ``--threads`` threads (default 1),
which depend much less than wall-clock time on other jobs sharing the machine.
"""

from __future__ import annotations

import argparse
import shlex
import json
import platform
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from attnbook.claims import papers  # noqa: E402
from attnbook.core import presets  # noqa: E402
from attnbook.core import runs as run_table  # noqa: E402
from attnbook.rank import tasks  # noqa: E402
from attnbook.rank.tasks import training_seeds  # noqa: E402
from attnbook.core.train import train  # noqa: E402

#: the full model's accuracy in the paper (the level a recipe must reach), and the paper's recipe
TARGETS = papers.number("dong2021", "path_effectiveness_full_model_accuracy").value
PAPER_RECIPE = papers.number("dong2021", "training_recipe").value
HULL_RECIPE = papers.number("dong2021", "hull_training_recipe").value


#: the book's learning rate (its recipe, below)
BOOK_LR = 2e-3
#: the ablation's changes to the paper's recipe, one at a time (module docstring)
CHANGES = ("none", "lr", "fresh_data", "epochs_x10")


def run(task: str, recipe: str, cap: float, steps: int, eval_every: int, seed: int, epochs: int,
        full: bool = False, change: str = "none") -> dict:
    if change not in CHANGES or (change != "none" and recipe != "paper") or (change == "epochs_x10" and task == "hull"):
        raise ValueError(f"change must be one of {CHANGES}, only the paper's recipe is changed, and not the hull's "
                         f"epochs (its step schedule is set in epochs); got {change!r} for {task}, recipe {recipe!r}")
    size = presets.preset("path_effectiveness", "paper")[task]
    t = training_seeds.build_path_task(task, size, seed)
    model, ev, target = t["model"], t["eval"], TARGETS[task]

    clock = {"start": time.process_time(), "eval": 0.0}

    def eval_fn(m):  # CPU seconds of training so far (evaluation excluded), and the accuracy
        t0 = time.process_time()
        acc = tasks.full_accuracy(m, ev)
        clock["eval"] += time.process_time() - t0
        return {"acc": acc, "cpu": time.process_time() - clock["start"] - clock["eval"]}

    def stop(metrics):
        return metrics["acc"] >= target or metrics["cpu"] >= cap

    if recipe == "paper":
        x, y, mask = t["train_set"]
        mask = mask if mask is not None else torch.ones_like(x if x.ndim == 2 else y, dtype=torch.bool)
        ds = torch.utils.data.TensorDataset(x, y, mask)
        dl = torch.utils.data.DataLoader(ds, batch_size=PAPER_RECIPE["batch_size"], shuffle=False)
        schedule = dict(schedule="constant")
        if task == "hull":  # epochs as milestones, in steps
            schedule = dict(schedule="multistep", weight_decay=HULL_RECIPE["weight_decay"],
                            milestones=[m * len(dl) for m in HULL_RECIPE["milestones_epochs"]],
                            gamma=HULL_RECIPE["gamma"])
        n_steps = epochs * len(dl) * (10 if change == "epochs_x10" else 1)
        batches = (lambda s: t["batch_fn"](PAPER_RECIPE["batch_size"])) if change == "fresh_data" else dl
        lr = BOOK_LR if change == "lr" else PAPER_RECIPE["lr"]
        hist = train(model, batches, t["loss_fn"], steps=n_steps, lr=lr, optimizer=PAPER_RECIPE["optimizer"], **schedule,
                     warmup=0, clip=None, eval_fn=eval_fn, eval_every=eval_every,
                     stop_when=None if full else stop, progress=False, device="cpu")
    else:
        hist = train(model, lambda s: t["batch_fn"](128), t["loss_fn"], steps=steps, lr=BOOK_LR,
                     optimizer="adamw", warmup=0.05, clip=1.0, eval_fn=eval_fn, eval_every=eval_every,
                     stop_when=stop, progress=False, device="cpu")
    reached = [e for e in hist["evals"] if e["acc"] >= target]
    return {
        "task": task, "recipe": recipe, "target": target,
        "reached": bool(reached),
        "cpu_seconds_to_target": round(reached[0]["cpu"], 1) if reached else None,
        "steps_to_target": reached[0]["step"] if reached else None,
        "final_acc": round(hist["evals"][-1]["acc"], 4), "steps_done": hist["steps_done"],
        "cpu_seconds": round(hist["evals"][-1]["cpu"], 1), "wall_seconds": round(hist["time"], 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    table = run_table.settings("bench_recipes", "quick")  # the shipped run's settings (attnbook.core.runs)
    ap.add_argument("--tasks", nargs="+", default=table["tasks"], choices=sorted(TARGETS))
    ap.add_argument("--cap", type=float, default=table["cap"], help="CPU seconds of training per run at most")
    ap.add_argument("--epochs", type=int, default=table["epochs"],
                    help="the paper recipe's epochs (it stops earlier at the cap)")
    ap.add_argument("--steps", type=int, default=table["steps"], help="length of the book's cosine schedule")
    ap.add_argument("--eval-every", type=int, default=table["eval_every"])
    ap.add_argument("--full", action=argparse.BooleanOptionalAction, default=table["full"],
                    help="run the paper recipe's epochs to the end")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=table["seed"])
    ap.add_argument("--out", type=Path, default=None,
                    help="where to write (required when the settings differ from the shipped run's)")
    ap.add_argument("--ablation", action="store_true",
                    help="run recipe_ablation (its settings from the run table) instead of the benchmark")
    args = ap.parse_args()
    if args.ablation:
        others = [a for a in ("tasks", "cap", "epochs", "steps", "eval_every", "full", "seed", "out")
                  if getattr(args, a) != ap.get_default(a)]
        if others:
            ap.error(f"--ablation runs recipe_ablation with the run table's settings; it takes --threads only, "
                     f"got --{', --'.join(o.replace('_', '-') for o in others)}")
        return ablation(args.threads)
    settings = dict(tasks=args.tasks, cap=args.cap, epochs=args.epochs, steps=args.steps, eval_every=args.eval_every,
                    full=args.full, seed=args.seed)
    shipped = settings == table
    if not shipped and args.out is None:
        ap.error("these settings differ from the shipped run bench_recipes's: give --out, so that the shipped file "
                 "is not replaced by another run")
    torch.set_num_threads(args.threads)
    rows = []
    for task in args.tasks:
        for recipe in ("paper", "book"):
            row = run(task, recipe, args.cap, args.steps, args.eval_every, args.seed, args.epochs,
                      full=args.full and recipe == "paper")
            print(json.dumps(row), flush=True)
            rows.append(row)
    out = {
        "command": shlex.join(["python", *sys.argv]),
        "settings": settings,
        "machine": machine(args.threads),
        "date": time.strftime("%Y-%m-%d"),
        "rows": rows,
    }
    if shipped:
        out["meta"] = run_table.record("bench_recipes", "quick", sys.argv)
    target = args.out or run_table.output_path("bench_recipes", "quick")
    run_table.write_json(target, out)
    print("wrote", target)


def machine(threads: int) -> str:
    """The machine line both files record: the processor, torch and the threads the times were taken on."""
    return (f"{platform.processor() or platform.machine()}, torch {torch.__version__}, {threads} thread(s); "
            "CPU seconds of training")


def ablation(threads: int) -> None:
    """Run ``recipe_ablation``: the paper's recipe on its task with each of its changes, at each of its seeds,
    to the end of its epochs (no CPU cap); one row per (change, seed), printed as it lands."""
    table = run_table.settings("recipe_ablation", "quick")
    torch.set_num_threads(threads)
    rows = []
    for change in table["changes"]:
        for seed in table["seeds"]:
            row = {"change": change, "seed": seed,
                   **run(table["task"], "paper", float("inf"), 0, table["eval_every"], seed, table["epochs"],
                         full=True, change=change)}
            print(json.dumps(row), flush=True)
            rows.append(row)
    out = {"machine": machine(threads),
           "date": time.strftime("%Y-%m-%d"), "rows": rows,
           "meta": run_table.record("recipe_ablation", "quick", sys.argv)}
    target = run_table.output_path("recipe_ablation", "quick")
    run_table.write_json(target, out)
    print("wrote", target)


if __name__ == "__main__":
    main()
