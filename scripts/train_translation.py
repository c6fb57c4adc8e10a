#!/usr/bin/env python
"""Train the English->Spanish translation model of chapter 10 and ship its checkpoint.

One command (2 CPU threads, about 30 minutes on the project's busy 2-core machine at ``quick``):

    .venv/bin/python scripts/train_translation.py

It trains :class:`attnbook.seq2seq.Seq2SeqTransformer` at the sizes of ``attnbook.preset("translation")``
with the book's training loop (:func:`attnbook.tasks.translation.train_model`: AdamW, linear warm-up then cosine decay,
gradient clipping 1.0; label smoothing 0.1), then measures greedy-decoding BLEU (sacrebleu) on the test
split and writes ``src/attnbook/data/translation/model_<preset>.safetensors`` (fp16 weights) with a
``.json`` beside it holding the config, the training time, the loss curve and the BLEU.
``--preset paper`` gives Transformer-base sizes (6+6 layers, 8 heads, d=512; meant for a GPU).
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

import torch  # noqa: E402

import attnbook  # noqa: E402
from attnbook.seq2seq import Seq2SeqConfig, Seq2SeqTransformer, save_model  # noqa: E402
from attnbook.tasks import translation as tr  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", choices=attnbook.presets.PRESET_NAMES, default="quick")
    ap.add_argument("--steps", type=int, default=None, help="override the preset's training steps")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--bleu-sentences", type=int, default=500, help="test sentences for the final BLEU")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    p = attnbook.preset("translation", args.preset)
    steps = args.steps or p["train_steps"]
    attnbook.seed_everything(p["seed"])
    cfg = Seq2SeqConfig(vocab_size=tr.load_tokenizer().get_vocab_size(), d_model=p["d_model"],
                        n_heads=p["n_heads"], enc_layers=p["enc_layers"], dec_layers=p["dec_layers"],
                        d_ff=p["d_ff"], dropout=p["dropout"], max_len=p["max_len"])
    model = Seq2SeqTransformer(cfg)
    n_params = sum(t.numel() for t in model.parameters())
    print(f"preset={args.preset} params={n_params} steps={steps} config={cfg}", flush=True)

    stream = tr.BatchStream(tr.load_pairs("train"), batch_size=p["batch_size"], max_len=p["max_len"],
                            seed=p["seed"])
    dev_pairs = tr.load_pairs("dev")[:200]
    dev_src = tr.pad(tr.encode([e for e, _ in dev_pairs], p["max_len"]))
    dev_tgt = tr.pad(tr.encode([s for _, s in dev_pairs], p["max_len"], bos=True))
    def eval_fn(m):
        d = next(m.parameters()).device
        return {"dev_loss": float(m.loss(dev_src.to(d), dev_tgt.to(d)))}

    t0 = time.time()
    hist = tr.train_model(model, stream, steps=steps, lr=p["lr"], weight_decay=p["weight_decay"],
                          warmup=p["warmup"], label_smoothing=p["label_smoothing"], seed=p["seed"],
                          eval_fn=eval_fn, eval_every=max(1, steps // 10), progress=sys.stderr.isatty(),
                          desc="translation")
    wall = time.time() - t0
    print(f"trained {hist['steps_done']} steps in {hist['time']:.0f} s (wall {wall:.0f} s); "
          f"evals {hist['evals']}", flush=True)

    t1 = time.time()
    test = tr.load_pairs("test")[: args.bleu_sentences]
    hyps = tr.translate(model, [e for e, _ in test], max_len=p["max_len"])
    test_bleu = tr.bleu(hyps, [s for _, s in test])
    print(f"test BLEU (greedy, {len(test)} sentences) = {test_bleu:.2f} in {time.time() - t1:.0f} s", flush=True)

    every = max(1, len(hist["loss"]) // 200)
    meta = {
        "preset": args.preset,
        "train_steps": hist["steps_done"],
        "epochs": hist["steps_done"] / stream.batches_per_epoch,
        "train_seconds": round(hist["time"], 1),
        "train_wall_seconds": round(wall, 1),
        "threads": args.threads,
        "machine": f"{platform.machine()} {os.cpu_count()} cores (shared with other jobs)",
        "params": n_params,
        "recipe": {k: p[k] for k in ("lr", "batch_size", "warmup", "weight_decay", "label_smoothing", "seed")},
        "test_bleu_greedy": round(test_bleu, 2),
        "test_bleu_sentences": len(test),
        "loss_curve": {"step": hist["step"][::every], "loss": [round(x, 4) for x in hist["loss"][::every]]},
        "evals": hist["evals"],
        "torch": torch.__version__,
        "command": "python scripts/train_translation.py" + ("" if args.preset == "quick" else f" --preset {args.preset}"),
    }
    out = args.out or tr.DATA_DIR / f"model_{args.preset}.safetensors"
    save_model(model, out, meta)
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
