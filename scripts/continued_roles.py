#!/usr/bin/env python
"""The encoder's head roles of a translation model before and after gate 1's constant-rate continuation
(chapter "A translation model", second page: would more training grow the neighbour heads?):

    .venv/bin/python scripts/run.py unpruned_converged_seed1    # first: the continuation (about 95 minutes)
    .venv/bin/python scripts/run.py continued_roles_seed1       # then this, about a minute

The continuation's file keeps no weights; its training state does (``runs/<control>/unpruned_trained_seed0/
state.pt``, kept after the run). This script rebuilds the trained-on model from it exactly as the run ended
(the average of the kept checkpoints where the run kept the average), refuses it unless its greedy BLEU on the
control's test verses equals the one the control's file records, and writes the encoder self-attention's
previous-token share, next-token share and confidence of every head, before and after, on the chapter's
analysis verses (``attnbook.heads.roles.head_roles``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import torch  # noqa: E402

import attnbook  # noqa: E402
from attnbook import stats  # noqa: E402
from attnbook.core import runs  # noqa: E402
from attnbook.heads import roles as hd  # noqa: E402
from attnbook.heads import sweeps  # noqa: E402
from attnbook.heads import translation as tr  # noqa: E402

STATS = ("prev", "next", "confidence")


def encoder_roles(model, verses, token_counts) -> dict:
    """The encoder's per-head statistics the chapter compares, as nested lists (4 decimals)."""
    enc = hd.head_roles(model, verses.src_ids, verses.tgt_ids, token_counts=token_counts,
                        parses=verses.parses)["enc_self"]
    return {k: enc[k].double().round(decimals=4).tolist() for k in STATS}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("name", help="the run, e.g. continued_roles_seed1")
    ap.add_argument("--preset", choices=attnbook.core.presets.PRESET_NAMES, default="quick")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None, help="write here instead of the shipped file")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cfg = runs.settings(args.name, args.preset)
    model, _ = tr.load_translation_model(cfg["model"], preset=args.preset)
    control = sweeps.load(cfg["control"], args.preset)
    entry = control["runs"][0]
    # where scripts/sweep_gates.py keeps the control arm's training state
    state_path = ROOT / "runs" / cfg["control"] / f"unpruned_trained_seed{entry['seed']}" / "state.pt"
    if not state_path.is_file():
        sys.exit(f"{state_path} is missing: run `{runs.command(cfg['control'], args.preset)}` first")
    t0 = time.time()
    verses = tr.analysis_verses(cfg["n_analysis"], model.cfg.max_len)
    counts = tr.source_token_counts()
    before = encoder_roles(model, verses, counts)
    state = torch.load(state_path, map_location="cpu", weights_only=False)
    if state["step"] != entry["train_steps"]:
        sys.exit(f"{state_path} is at step {state['step']}, the control's file at {entry['train_steps']}")
    model.load_state_dict(tr.average_state(state["extra"]["snapshots"]) if entry["averaged"] else state["model"])
    model.eval()
    test = tr.load_pairs("test")[: control["n_eval"]]
    greedy = round(stats.bleu(tr.translate(model, [e for e, _ in test]), [s for _, s in test]), 3)
    if greedy != entry["bleu_greedy"]:
        sys.exit(f"the rebuilt model scores greedy BLEU {greedy}, the control's file {entry['bleu_greedy']}: "
                 "the state is not the model that file describes")
    out = {"before": before, "after": encoder_roles(model, verses, counts), "continued_steps": entry["train_steps"],
           "continued_epochs": entry["epochs"], "greedy_bleu_checked": greedy, "verses": len(verses.src_ids),
           "seconds": round(time.time() - t0, 1), "threads": args.threads, "torch": torch.__version__,
           "meta": runs.record(args.name, args.preset, sys.argv)}
    target = args.out or runs.output_path(args.name, args.preset)
    runs.write_json(target, out)
    print(f"wrote {target} ({out['seconds']:.0f} s)")


if __name__ == "__main__":
    main()
