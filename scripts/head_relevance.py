#!/usr/bin/env python
"""LRP relevance of every head of chapter 10's encoders, and ship it:

    .venv/bin/python scripts/head_relevance.py                  # translation model, about 20 min (1 thread)
    .venv/bin/python scripts/head_relevance.py --model minilm   # all-MiniLM-L6-v2, about 23 min (1 thread)

Translation model: for every dev verse and every target token (teacher forcing), the relevance of the
top-1 logit is propagated back to every head with the official rule of Voita et al. (``attnbook.heads.lrp``),
each head's relevance taken as a share of its layer, and averaged over all target tokens; also the share
of each top-1 logit's relevance that reaches the source tokens (rather than the target prefix).
MiniLM: the same rule from the sentence embedding (``attnbook.hf.relevance``) on the English side of the
first ``n_minilm`` dev verses (the verses chapter 10 measures MiniLM's roles on), one weight per verse.
Both: over the whole set, over its even and its odd verses (split-half reliability), and per verse for the
first ``--live`` verses (chapter 10 recomputes those live: its live-versus-precomputed check). Writes
``src/attnbook/data/translation/lrp_relevance_<preset>.json`` (``lrp_relevance_minilm_<preset>.json``)
with the command, time, threads and machine.
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
from attnbook import hf
from attnbook.core import runs as run_table  # noqa: E402
from attnbook.heads import lrp  # noqa: E402
from attnbook.hf import relevance  # noqa: E402
from attnbook.heads import translation as tr  # noqa: E402
from train_translation import cpu_name  # noqa: E402


def rounded(t: torch.Tensor) -> list:
    return [[round(float(x), 5) for x in row] for row in t]


def translation_relevance(preset: str, verses: int | None, device: str = "cpu"):
    """Per dev verse of the translation model at ``preset`` (the first ``verses``; None: all): (kind -> layer
    shares summed over target tokens, tokens, the source share summed over target tokens)."""
    p = attnbook.preset("translation", preset)
    model, _ = tr.load_translation_model(preset=preset, device=device)
    pairs = tr.load_pairs("dev")[:verses]
    src = tr.encode([e for e, _ in pairs], p["max_len"])
    tgt = tr.encode([s for _, s in pairs], p["max_len"], bos=True)
    for s, t in zip(src, tgt):
        heads, src_rel, _ = lrp.sentence_relevance(model, s, t)
        yield ({k: lrp.layer_shares(v).sum(0) for k, v in heads.items()}, len(t) - 1,
               float(src_rel.sum(1).sum()))


def minilm_relevance(preset: str, verses: int | None, device: str = "cpu"):
    """Per verse for all-MiniLM-L6-v2, on the first ``verses`` dev verses: (enc_self -> layer shares, weight 1,
    None). The model is the same at every preset."""
    lm, tok = hf.load_pretrained(hf.minilm_source(), device=device)
    for text, _ in tr.load_pairs("dev")[:verses]:
        ids = tok(text, truncation=True, max_length=128)["input_ids"]
        yield {"enc_self": lrp.layer_shares(relevance.sentence_head_relevance(lm, ids)[0])}, 1, None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=("translation", "minilm"), default="translation")
    ap.add_argument("--preset", choices=attnbook.core.presets.PRESET_NAMES, default="quick")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu", help="where the model runs (cpu or cuda; the shipped files: cpu)")
    ap.add_argument("--verses", type=int, default=None,
                    help="the first N dev verses (default: the run table's: all; MiniLM: the preset's n_minilm)")
    ap.add_argument("--live", type=int, default=None,
                    help="verses stored one by one for the live check (default: the run table's)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    name = "lrp_relevance" + ("" if args.model == "translation" else "_minilm")
    table = run_table.settings(name, args.preset)  # the run table's settings (attnbook.core.runs)
    verses = table["verses"] if args.verses is None else args.verses
    live = table["live"] if args.live is None else args.live
    per_verse_fn = translation_relevance if args.model == "translation" else minilm_relevance
    sums, weights, source_share, per_verse, n = [{}, {}], [0, 0], 0.0, [], 0
    t0 = time.time()
    for i, (shares, weight, src_share) in enumerate(per_verse_fn(args.preset, verses, args.device)):
        for k, v in shares.items():
            sums[i % 2][k] = sums[i % 2].get(k, 0.0) + v
        weights[i % 2] += weight
        source_share += src_share or 0.0
        if i < live:
            per_verse.append({k: rounded(v / weight) for k, v in shares.items()})
        if i % 50 == 0:
            print(f"verse {i}: {time.time() - t0:.0f} s", flush=True)
        n = i + 1
    seconds = time.time() - t0
    kinds = list(sums[0])
    halves = [{k: v / w for k, v in part.items()} for part, w in zip(sums, weights)]
    whole = {k: (sums[0][k] + sums[1][k]) / sum(weights) for k in kinds}
    out = args.out or run_table.output_path(name, args.preset)
    what = ("each head's relevance to the top-1 logit as a share of its layer, mean over target tokens"
            if args.model == "translation" else
            "each head's relevance to the sentence embedding (attnbook.hf.relevance) as a share of its "
            "layer, mean over verses")
    record = {
        "what": "LRP head relevance (the official alpha-beta rule, alpha = beta = 0.5): " + what,
        "model": table["model"] if args.model == "translation" else hf.MINILM_HUB_NAME,
        "verses": n,
        ("target_tokens" if args.model == "translation" else "weight"): sum(weights),
        "relevance": {k: rounded(v) for k, v in whole.items()},
        "halves": {k: [rounded(h[k]) for h in halves] for k in kinds},
        "half_tokens": weights,
        "first_verses": per_verse,
        "seconds": round(seconds, 1),
        "threads": args.threads,
        "machine": f"{cpu_name()}, {os.cpu_count()} cores, {platform.machine()}",
        "torch": torch.__version__,
    }
    if args.model == "translation":
        record["source_share"] = round(source_share / sum(weights), 4)
    if (verses, live) == (table["verses"], table["live"]):  # a file of the run table's run
        record["meta"] = run_table.record(name, args.preset, sys.argv)
    run_table.write_json(out, record)
    print(f"wrote {out}: {n} verses in {seconds:.0f} s")


if __name__ == "__main__":
    main()
