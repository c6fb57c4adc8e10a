#!/usr/bin/env python
"""Time one training step of chapter 10's translation model against ``torch.nn.Transformer`` of the same
size, on the same batches (ratio in one run), and count the operators each step dispatches:

    .venv/bin/python scripts/bench_seq2seq.py --threads 1                  # about a minute on a quiet CPU
    python scripts/bench_seq2seq.py --device cuda --preset paper --bf16     # on a GPU, at the paper's width

Both models: the ``translation`` preset's sizes, pre-LayerNorm, dropout and attention dropout as the
recipe, one embedding shared by source, target and output, sinusoidal positions, label-smoothed
cross-entropy, AdamW. The batches are the first token-based training batches. Prints, for each model,
milliseconds per step, target tokens per second and the profiler's operator events per step (every
``aten`` call the step dispatches: on a GPU each is at least one kernel launch, so the count bounds how
fast a small model can step), and the ratio ours / nn.Transformer (below 1: ours is faster). Issue
"Part III at the paper's width" asks for at least 300k target tokens per second at ``--preset paper`` on
one H200.
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


def _step(model, opt, src, tgt, bf16: bool) -> None:
    with torch.autocast(src.device.type, dtype=torch.bfloat16, enabled=bf16):
        loss = model.loss(src, tgt, label_smoothing=0.1)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_steps(model, batches, warmup: int = 3, bf16: bool = False) -> dict:
    """Seconds per training step after ``warmup`` steps, target tokens per second, and the operator events
    of one more step (``torch.profiler``: every aten call it dispatches)."""
    from torch.profiler import ProfilerActivity, profile

    device = batches[0][0].device
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model.train()
    for src, tgt in batches[:warmup]:
        _step(model, opt, src, tgt, bf16)
    _sync(device)
    t0 = time.perf_counter()
    for src, tgt in batches[warmup:]:
        _step(model, opt, src, tgt, bf16)
    _sync(device)
    seconds = (time.perf_counter() - t0) / (len(batches) - warmup)
    tokens = sum(int((tgt[:, 1:] != 0).sum()) for _, tgt in batches[warmup:]) / (len(batches) - warmup)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        _step(model, opt, *batches[warmup], bf16)
        _sync(device)
    ops = sum(e.count for e in prof.key_averages() if e.key.startswith("aten::"))
    return {"seconds": seconds, "tokens_per_second": tokens / seconds, "ops": ops}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--preset", choices=attnbook.core.presets.PRESET_NAMES, default="quick")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--bf16", action="store_true", help="bf16 autocast (as a GPU training would run)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    p = attnbook.preset("translation", args.preset)
    cfg = Seq2SeqConfig(vocab_size=tr.load_tokenizer().get_vocab_size(), d_model=p["d_model"],
                        n_heads=p["n_heads"], enc_layers=p["enc_layers"], dec_layers=p["dec_layers"],
                        d_ff=p["d_ff"], dropout=p["dropout"], attention_dropout=p["attention_dropout"],
                        max_len=p["max_len"])
    stream = tr.BatchStream(tr.load_pairs("train")[:6000], max_len=p["max_len"], seed=0, max_tokens=p["max_tokens"])
    batches = [tuple(t.to(device) for t in stream(i)) for i in range(args.steps + 3)]
    results = {}
    for name, make in (("attnbook", Seq2SeqTransformer), ("nn.Transformer", TorchTransformer),
                       ("attnbook (again)", Seq2SeqTransformer)):
        torch.manual_seed(0)
        results[name] = time_steps(make(cfg).to(device), batches, bf16=args.bf16)
    for name, r in results.items():
        print(f"{name:18s} {1000 * r['seconds']:8.1f} ms per step, {r['tokens_per_second']:9.0f} target "
              f"tokens/s, {r['ops']:6d} operator events per step")
    ours = min(results["attnbook"]["seconds"], results["attnbook (again)"]["seconds"])
    print(f"ratio attnbook / nn.Transformer: {ours / results['nn.Transformer']['seconds']:.2f} "
          f"({device}, {args.threads} thread(s), preset {args.preset}, d_model {cfg.d_model}, "
          f"{args.steps} steps of {p['max_tokens']}-token batches{', bf16' if args.bf16 else ''})")


if __name__ == "__main__":
    main()
