#!/usr/bin/env python
"""Evaluate chapter 10's converged translation model on the whole test split and ship the figures:

    .venv/bin/python scripts/evaluate_translation.py            # about 10 minutes on 2 CPU threads

Writes ``src/attnbook/data/translation/converged_<preset>_eval.json``: sacreBLEU (95% bootstrap interval)
of greedy decoding and of beam search (beam 4, length penalty 0.6, as the official code of Voita et al.
decodes), greedy BLEU with every encoder self-attention head switched off, the number of looping
outputs, and the same greedy BLEU on the first ``n_bleu`` test verses that chapter 10 recomputes live (its
live-versus-precomputed check). Records the command, time, threads and machine.
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
from attnbook import stats  # noqa: E402
from attnbook.heads import translation as tr  # noqa: E402
from train_translation import cpu_name  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", choices=attnbook.core.presets.PRESET_NAMES, default="quick")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None, help="write here instead of the shipped file")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cfg = runs.settings("translation_eval", args.preset)
    model, meta = tr.load_translation_model(cfg["model"], preset=args.preset)
    test = tr.load_pairs("test")
    src, refs = [e for e, _ in test], [s for _, s in test]
    weights, = runs.run(cfg["model"]).also_paths(args.preset)
    out: dict = {"checkpoint": weights.name, "test_sentences": len(test)}
    t0 = time.time()
    for name, kw in (("greedy", dict(beam=1)), ("beam4", dict(beam=cfg["beam"], length_penalty=cfg["length_penalty"])),
                     ("greedy_no_enc_self", dict(beam=1, head_gates={
                         "enc_self": torch.zeros(model.cfg.enc_layers, model.cfg.n_heads)}))):
        t = time.time()
        hyps = tr.translate(model, src, max_len=model.cfg.max_len, **kw)
        out[name] = {k: round(v, 2) for k, v in stats.bleu_interval(hyps, refs).items()}
        out[name]["looping_outputs"] = sum(tr.repeats_a_phrase(h) for h in hyps)
        out[name]["seconds"] = round(time.time() - t, 1)
        if name == "greedy":
            n = cfg["n_bleu"]
            out["greedy_first_n"] = {"n": n, "bleu": round(stats.bleu(hyps[:n], refs[:n]), 2)}
        print(name, out[name], flush=True)
    out.update(seconds=round(time.time() - t0, 1), threads=args.threads,
               machine=f"{cpu_name()}, {os.cpu_count()} cores, {platform.machine()}", torch=torch.__version__,
               meta=runs.record("translation_eval", args.preset, sys.argv))
    target = args.out or runs.output_path("translation_eval", args.preset)
    runs.write_json(target, out)
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
