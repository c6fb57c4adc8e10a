"""Noise in the book's results: seed-bootstrap intervals for comparisons with a paper (every chapter that
compares runs over seeds; used by :func:`attnbook.claims.compare`'s ``interval`` rule).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np


def bootstrap_mean_difference(
    a: Sequence[float], b: Sequence[float] = (), *, level: float = 0.9, n_boot: int = 4000, seed: int = 0
) -> tuple[float, float, float]:
    """Mean of ``a`` minus mean of ``b`` (``b`` empty: the mean of ``a``) with a percentile bootstrap interval.

    ``a`` and ``b`` are independent samples (one value per seed); each bootstrap draw resamples both with
    replacement. Returns ``(estimate, lo, hi)``, with ``lo <= estimate <= hi`` enforced so that a skewed
    bootstrap never leaves the point estimate outside its own interval. Deterministic for a given ``seed``.
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.ndim != 1 or a.size < 2 or b.ndim != 1 or b.size == 1:
        raise ValueError(
            f"expected one-dimensional samples with at least 2 values (b may be empty), got sizes {a.shape}, {b.shape}"
        )
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("samples must be finite")
    rng = np.random.default_rng(seed)
    boot = a[rng.integers(0, a.size, (n_boot, a.size))].mean(1)
    estimate = a.mean()
    if b.size:
        boot = boot - b[rng.integers(0, b.size, (n_boot, b.size))].mean(1)
        estimate = estimate - b.mean()
    lo, hi = np.quantile(boot, [(1 - level) / 2, (1 + level) / 2])
    return float(estimate), float(min(lo, estimate)), float(max(hi, estimate))
