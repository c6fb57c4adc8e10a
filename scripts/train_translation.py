#!/usr/bin/env python
"""Train the English->Spanish translation model of chapter 10 to convergence and ship its checkpoint.

One command, one CPU thread, resumable (about two hours on the project's 2-core machine at ``quick``):

    .venv/bin/python scripts/train_translation.py --resume

It trains :class:`attnbook.seq2seq.Seq2SeqTransformer` at the sizes of ``attnbook.preset("translation")``
with the recipe of :func:`attnbook.heads.translation.train_model` (AdamW, linear warm-up then cosine decay,
gradient clipping 1.0, label-smoothed cross-entropy) on token-based batches, with dropout and attention
dropout. Every ``eval_every`` steps it measures dev cross-entropy and greedy dev BLEU and keeps the
weights; training stops early when dev BLEU has not improved for ``patience`` evaluations. The shipped
model is the average of the last ``average_last`` evaluated checkpoints (checkpoint averaging, as
fairseq's IWSLT recipe), kept when it is at least as good on dev as the last one.

At log-spaced steps, and at every evaluation in the last 30% of training, it records every head's role statistics on fixed dev verses
(:func:`attnbook.heads.roles.role_statistics`: confidence, attention-sink share, previous/next-token share), for
chapter 10's role-emergence figure. The full training state is saved every ``eval_every`` steps to
``--state`` (default ``runs/translation_<preset>/state.pt``); ``--resume`` continues from it exactly.

Writes ``src/attnbook/data/translation/model_<preset>.safetensors`` (fp16 weights) and a ``.json`` beside
it with the config, recipe, command, wall time, threads, machine, loss curve, evaluations, role
statistics and greedy test BLEU. ``--preset paper`` gives Transformer-base sizes (meant for a GPU).
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import torch  # noqa: E402

import attnbook  # noqa: E402
from attnbook.heads.roles import role_statistics  # noqa: E402
from attnbook.heads.seq2seq import save_model  # noqa: E402
from attnbook.core import runs as run_table  # noqa: E402
from attnbook import stats  # noqa: E402
from attnbook.heads import translation as tr  # noqa: E402


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def log_spaced_steps(last: int, n: int = 28) -> list[int]:
    """About ``n`` steps from 1 to ``last``, evenly spaced in log(step)."""
    return sorted({max(1, round(math.exp(i * math.log(last) / (n - 1)))) for i in range(n)})


def role_snapshot_steps(last: int, eval_every: int, late_fraction: float = 0.3) -> list[int]:
    """Steps at which training records role statistics: about 28 log-spaced steps, plus every evaluation
    step in the last ``late_fraction`` of training (five or more points there at the book's recipes, so
    that chapter 10 can tell whether a role is still growing when training ends)."""
    if not 0 < late_fraction < 1 or eval_every < 1:
        raise ValueError(f"expected 0 < late_fraction < 1 and eval_every >= 1, got {late_fraction}, {eval_every}")
    late = {s for s in range(eval_every, last + 1, eval_every) if s >= (1 - late_fraction) * last}
    return sorted(set(log_spaced_steps(last)) | late)  # log-spaced steps end at the last one


def parse_overrides(items: list[str], preset: dict) -> dict:
    """``["n_heads=4", "dropout=0.2"]`` -> ``{"n_heads": 4, "dropout": 0.2}``, keys checked against ``preset``."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or key not in preset:
            raise SystemExit(f"--set expects KEY=VALUE with KEY one of {sorted(preset)}, got {item!r}")
        kind = type(preset[key])
        try:
            out[key] = kind(value) if kind is not int else int(value)
        except ValueError:
            raise SystemExit(f"--set {key} expects a {kind.__name__}, got {value!r}") from None
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", choices=attnbook.core.presets.PRESET_NAMES, default="quick")
    ap.add_argument("--steps", type=int, default=None, help="override the preset's maximum training steps")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--resume", action="store_true", help="continue from --state when it exists")
    ap.add_argument("--state", type=Path, default=None, help="training-state file (default runs/...)")
    ap.add_argument("--time-limit", type=float, default=None, help="minutes of training before stopping")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--variant", default=None,
                    help="name of a variant of the recipe (with --set): its own state and output files")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="override one setting of the preset (an int or float), e.g. n_heads=4")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    p = dict(attnbook.preset("translation", args.preset))
    overrides = parse_overrides(args.overrides, p)
    if overrides and not args.variant:
        ap.error("--set changes the recipe: name the variant with --variant NAME")
    p.update(overrides)
    tag = args.preset if not args.variant else f"{args.preset}_{args.variant}"
    steps = args.steps or p["train_steps"]
    attnbook.seed_everything(p["seed"])
    model = tr.model_from_preset(p)
    cfg = model.cfg
    n_params = sum(t.numel() for t in model.parameters())
    print(f"preset={args.preset} params={n_params} steps={steps} config={cfg}", flush=True)

    dev_pairs = tr.load_pairs("dev")[: p["n_eval_bleu"]]
    dev_src = tr.pad(tr.encode([e for e, _ in dev_pairs], p["max_len"]))
    dev_tgt = tr.pad(tr.encode([s for _, s in dev_pairs], p["max_len"], bos=True))
    role_src, role_tgt = dev_src[: p["n_role_sentences"]], dev_tgt[: p["n_role_sentences"]]
    role_src, role_tgt = role_src[:, : int((role_src != 0).sum(1).max())], role_tgt[:, : int((role_tgt != 0).sum(1).max())]
    role_steps = set(role_snapshot_steps(steps, p["eval_every"]))

    state_path = args.state or ROOT / "runs" / f"translation_{tag}" / "state.pt"
    state_path.parent.mkdir(parents=True, exist_ok=True)
    roles: list = []
    if not (args.resume and state_path.exists()):
        roles.append({"step": 0, **role_statistics(model, role_src, role_tgt)})

    def record_roles(step, m, extra):
        if step in role_steps:
            extra["roles"].append({"step": step, **role_statistics(m, role_src, role_tgt)})

    run = tr.train_to_convergence(
        model, p, steps=steps, state_path=state_path, resume=args.resume,
        time_limit=None if args.time_limit is None else 60 * args.time_limit, step_fn=record_roles,
        start_extra={"roles": roles}, log=lambda line: print(line, flush=True))
    if not run["finished"]:
        print("time limit reached: run again with --resume to continue", flush=True)
        return
    hist, extra, stream = run["hist"], run["extra"], run["stream"]
    wall, avg_eval, last_eval, averaged = extra["wall"], run["avg_eval"], run["last_eval"], run["averaged"]

    t1 = time.time()
    test = tr.load_pairs("test")
    hyps = tr.translate(model, [e for e, _ in test], max_len=p["max_len"])
    test_bleu = stats.bleu(hyps, [s for _, s in test])
    print(f"test BLEU (greedy, {len(test)} sentences) = {test_bleu:.2f} in {time.time() - t1:.0f} s", flush=True)

    every = max(1, len(hist["loss"]) // 400)
    meta = {
        "preset": args.preset,
        "variant": args.variant,
        "overrides": overrides,
        "train_steps": hist["steps_done"],
        "epochs": round(stream.epochs(hist["steps_done"]), 3),
        "stopped": hist["stopped"],
        "train_seconds": round(hist["time"], 1),
        "train_wall_seconds": round(wall, 1),
        "threads": args.threads,
        "machine": f"{cpu_name()}, {os.cpu_count()} cores, {platform.machine()}",
        "params": n_params,
        "recipe": {k: p[k] for k in ("lr", "max_tokens", "warmup", "weight_decay", "label_smoothing",
                                     "dropout", "attention_dropout", "train_steps", "eval_every",
                                     "average_last", "patience", "seed", "data_fraction")},
        "train_pairs": len(tr.training_pairs(p["data_fraction"])),
        "averaged_checkpoints": len(extra["snapshots"]) if averaged else 0,
        "dev_bleu_averaged": avg_eval["dev_bleu"],
        "dev_bleu_last": last_eval["dev_bleu"],
        "test_bleu_greedy": round(test_bleu, 2),
        "test_bleu_sentences": len(test),
        "loss_curve": {"step": hist["step"][::every], "loss": [round(x, 4) for x in hist["loss"][::every]]},
        "evals": hist["evals"],
        "roles": extra["roles"],
        "role_sentences": int(role_src.shape[0]),
        "torch": torch.__version__,
        "command": "python scripts/train_translation.py --resume"
                   + ("" if args.preset == "quick" else f" --preset {args.preset}")
                   + (f" --variant {args.variant}" if args.variant else "")
                   + "".join(f" --set {k}={v}" for k, v in overrides.items()),
    }
    run_name = "translation_model" + (f"_{args.variant}" if args.variant else "")
    table = run_table.RUNS.get(run_name)
    if table and args.preset in table.settings and args.steps is None and all(
            p[k] == v for k, v in run_table.settings(run_name, args.preset).items()):  # the run table's run
        meta["meta"] = run_table.record(run_name, args.preset, sys.argv)
    out = args.out or tr.DATA_DIR / f"converged_{tag}.safetensors"
    save_model(model, out, meta)
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
