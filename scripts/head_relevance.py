#!/usr/bin/env python
"""LRP relevance of every head of chapter 10's translation model on the whole dev split, and ship it:

    .venv/bin/python scripts/head_relevance.py               # about 20 minutes on one CPU thread

For every dev verse and every target token (teacher forcing), the relevance of the top-1 logit is
propagated back to every head with the official rule of Voita et al. (``attnbook.lrp``), each head's
relevance taken as a share of its layer, and averaged over all target tokens: over the whole split, over
its even and its odd verses (split-half reliability), and per verse for the first ``--live`` verses (chapter
10 recomputes those live: its live-versus-precomputed check). Also the share of each top-1 logit's
relevance that reaches the source tokens (rather than the target prefix). Writes
``src/attnbook/data/translation/lrp_relevance_<preset>.json`` with the command, time, threads and machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "scripts"))

import torch  # noqa: E402

import attnbook  # noqa: E402
from attnbook import lrp  # noqa: E402
from attnbook.tasks import translation as tr  # noqa: E402
from train_translation import cpu_name  # noqa: E402


def rounded(t: torch.Tensor) -> list:
    return [[round(float(x), 5) for x in row] for row in t]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", choices=attnbook.presets.PRESET_NAMES, default="quick")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--verses", type=int, default=None, help="the first N dev verses (default: all)")
    ap.add_argument("--live", type=int, default=6, help="verses stored one by one for the live check")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    p = attnbook.preset("translation", args.preset)
    model, meta = tr.load_translation_model()
    pairs = tr.load_pairs("dev")[: args.verses]
    src = tr.encode([e for e, _ in pairs], p["max_len"])
    tgt = tr.encode([s for _, s in pairs], p["max_len"], bos=True)
    kinds = ("enc_self", "dec_self", "dec_cross")
    sums = [{k: 0.0 for k in kinds}, {k: 0.0 for k in kinds}]
    tokens, source_share, per_verse = [0, 0], 0.0, []
    t0 = time.time()
    for i, (s, t) in enumerate(zip(src, tgt)):
        heads, src_rel, _ = lrp.sentence_relevance(model, s, t)
        shares = {k: lrp.layer_shares(v) for k, v in heads.items()}
        for k in kinds:
            sums[i % 2][k] = sums[i % 2][k] + shares[k].sum(0)
        tokens[i % 2] += len(t) - 1
        source_share += float(src_rel.sum(1).sum())
        if i < args.live:
            per_verse.append({k: rounded(shares[k].mean(0)) for k in kinds})
        if i % 50 == 0:
            print(f"verse {i}/{len(src)}: {time.time() - t0:.0f} s", flush=True)
    seconds = time.time() - t0
    halves = [{k: v / n for k, v in part.items()} for part, n in zip(sums, tokens)]
    whole = {k: (sums[0][k] + sums[1][k]) / sum(tokens) for k in kinds}
    out = args.out or tr.DATA_DIR / f"lrp_relevance_{args.preset}.json"
    record = {
        "what": "LRP head relevance (attnbook.lrp, the official alpha-beta rule, alpha = beta = 0.5): each "
                "head's relevance to the top-1 logit as a share of its layer, mean over target tokens",
        "model": str(tr.CONVERGED.name),
        "verses": len(src),
        "target_tokens": sum(tokens),
        "relevance": {k: rounded(v) for k, v in whole.items()},
        "halves": {k: [rounded(h[k]) for h in halves] for k in kinds},
        "half_tokens": tokens,
        "first_verses": per_verse,
        "source_share": round(source_share / sum(tokens), 4),
        "seconds": round(seconds, 1),
        "threads": args.threads,
        "machine": f"{cpu_name()}, {os.cpu_count()} cores, {platform.machine()}",
        "torch": torch.__version__,
        "command": "python scripts/head_relevance.py"
                   + ("" if args.preset == "quick" else f" --preset {args.preset}")
                   + ("" if args.verses is None else f" --verses {args.verses}"),
    }
    text = json.dumps(record, indent=1)
    out.write_text(re.sub(r"\[\s+([-0-9.e,\s]+?)\s+\]", lambda m: "[" + " ".join(m.group(1).split()) + "]", text)
                   + "\n")
    print(f"wrote {out}: {len(src)} verses, {sum(tokens)} target tokens in {seconds:.0f} s")


if __name__ == "__main__":
    main()
