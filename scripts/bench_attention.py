"""Benchmark: the library's attention against PyTorch's fused kernel at the same shapes (BOOK.md budget:
within 1.25x when attention matrices are not requested).

    .venv/bin/python scripts/bench_attention.py

Three timings per shape, forward only, median of repeats: the library's MultiHeadSelfAttention; the same
projections around a bare ``F.scaled_dot_product_attention`` call (the reference: the budget is about the
library's overhead); and ``torch.nn.MultiheadAttention`` for context. Also the cost of returning the
attention matrices.
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.nn.functional as F

from attnbook.core.attention import MultiHeadSelfAttention

SHAPES = [  # (batch, tokens, d_model, heads)
    (32, 128, 384, 12),
    (8, 512, 768, 12),
    (64, 32, 64, 4),
]


def timeit(fn, repeats: int = 15) -> float:
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def reference(mha: MultiHeadSelfAttention, x: torch.Tensor) -> torch.Tensor:
    b, n, _ = x.shape
    h, dh = mha.n_heads, mha.d_head

    def split(t):
        return t.view(b, n, h, dh).transpose(1, 2)

    out = F.scaled_dot_product_attention(split(mha.q(x)), split(mha.k(x)), split(mha.v(x)))
    return mha.out(out.transpose(1, 2).reshape(b, n, h * dh))


def main() -> None:
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print("| batch x tokens x d, heads | library (ms) | bare SDPA (ms) | ratio | nn.MultiheadAttention (ms) | with attention matrices (ms) |")
    print("|---|---|---|---|---|---|")
    worst = 0.0
    with torch.inference_mode():
        for b, n, d, h in SHAPES:
            mha = MultiHeadSelfAttention(d, h)
            torch_mha = torch.nn.MultiheadAttention(d, h, batch_first=True)
            x = torch.randn(b, n, d)
            assert torch.allclose(mha(x)[0], reference(mha, x), atol=1e-5)
            lib = timeit(lambda: mha(x))
            ref = timeit(lambda: reference(mha, x))
            pt = timeit(lambda: torch_mha(x, x, x, need_weights=False))
            full = timeit(lambda: mha(x, return_attention=True))
            worst = max(worst, lib / ref)
            print(f"| {b}x{n}x{d}, {h} | {lib*1e3:.2f} | {ref*1e3:.2f} | {lib/ref:.2f} | {pt*1e3:.2f} | {full*1e3:.2f} |")
    print(f"worst ratio library / bare SDPA: {worst:.2f} (budget 1.25): {'PASS' if worst <= 1.25 else 'FAIL'}")


if __name__ == "__main__":
    main()
