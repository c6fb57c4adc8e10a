"""Time the batched path decomposition against a naive loop over paths (chapter "Path decomposition").

    python scripts/bench_paths.py            # L=6, H=4 (4096 paths), n=16, d=32, float64
"""

from __future__ import annotations

import argparse
import itertools
import time

import torch

from attnbook.rank.paths import path_decomposition


def naive(attn, values, X):
    """One path at a time: P_path X W_path for each of the H^L paths (what the batched version avoids)."""
    L, H = attn.shape[:2]
    terms = []
    for path in itertools.product(range(H), repeat=L):
        P, W = torch.eye(X.shape[0], dtype=X.dtype), torch.eye(X.shape[1], dtype=X.dtype)
        for l, h in enumerate(path):
            P, W = attn[l, h] @ P, W @ values[l, h]
        terms.append(P @ X @ W)
    return torch.stack(terms)


def best_of(fn, repeats):
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--L", type=int, default=6)
    ap.add_argument("--H", type=int, default=4)
    ap.add_argument("--n", type=int, default=16)
    ap.add_argument("--d", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    torch.manual_seed(0)
    attn = torch.rand(a.L, a.H, a.n, a.n, dtype=torch.float64).softmax(-1)
    values = torch.randn(a.L, a.H, a.d, a.d, dtype=torch.float64) / a.d**0.5
    X = torch.randn(a.n, a.d, dtype=torch.float64)
    t_batched, dec = best_of(lambda: path_decomposition(attn, values, X), a.repeats)
    t_naive, terms = best_of(lambda: naive(attn, values, X), 1)  # slow: one run is enough
    err = ((dec.terms - terms).norm() / terms.norm()).item()
    print(f"L={a.L} H={a.H} paths={a.H ** a.L} n={a.n} d={a.d} threads={torch.get_num_threads()}")
    print(f"batched {t_batched * 1e3:.1f} ms, naive loop {t_naive * 1e3:.1f} ms, "
          f"ratio naive/batched {t_naive / t_batched:.1f}x, max rel diff {err:.1e}")


if __name__ == "__main__":
    main()
