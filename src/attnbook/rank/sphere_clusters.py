"""Clusters before collapse: self-attention as interacting particles on the sphere (chapter "What came after":
Geshkovski, Letrouit, Polyanskiy and Rigollet, "A mathematical perspective on transformers", 2023).

Tokens ``x_1 .. x_n`` on the unit sphere move under one shared attention layer with ``Q = K = V = I`` and inverse
temperature ``beta``:

    dx_i/dt = P_{x_i}( sum_j softmax_j(beta <x_i, x_j>) x_j ),   P_x(y) = y - <x, y> x,

integrated, as the authors' code integrates it, by an Euler step followed by renormalising every token.
:func:`simulate` returns the trajectory; :func:`count_clusters` counts groups of tokens that have (nearly) merged.
"""

from __future__ import annotations

import torch


def simulate(n_tokens: int, dim: int, beta: float, *, steps: int, dt: float, generator: torch.Generator,
             every: int = 1) -> torch.Tensor:
    """Tokens drawn uniformly on the sphere of ``R^dim`` (from ``generator``), moved for ``steps`` Euler steps of
    size ``dt``; returns the positions every ``every`` steps, ``(steps // every + 1, n, dim)``, float64."""
    if n_tokens < 2 or dim < 2 or beta < 0 or steps < 1 or dt <= 0 or every < 1:
        raise ValueError("need n_tokens >= 2, dim >= 2, beta >= 0, steps >= 1, dt > 0 and every >= 1")
    x = torch.randn(n_tokens, dim, generator=generator, dtype=torch.float64)
    x = x / x.norm(dim=1, keepdim=True)
    out = [x]
    for step in range(1, steps + 1):
        pull = torch.softmax(beta * x @ x.T, dim=1) @ x
        pull = pull - (pull * x).sum(1, keepdim=True) * x  # the tangent part
        x = x + dt * pull
        x = x / x.norm(dim=1, keepdim=True)
        if step % every == 0:
            out.append(x)
    return torch.stack(out)


def count_clusters(x: torch.Tensor, tol: float = 1e-2) -> int:
    """The number of clusters among tokens ``(n, dim)`` on the sphere: the connected groups of tokens whose
    distance to some other token of the group is below ``tol``."""
    if x.ndim != 2:
        raise ValueError(f"expected tokens (n, dim), got shape {tuple(x.shape)}")
    close = torch.cdist(x, x) < tol
    seen, clusters = set(), 0
    for start in range(len(x)):
        if start in seen:
            continue
        clusters += 1
        stack = [start]
        seen.add(start)
        while stack:
            i = stack.pop()
            for j in close[i].nonzero().flatten().tolist():
                if j not in seen:
                    seen.add(j)
                    stack.append(j)
    return clusters


def clusters_over_time(trajectory: torch.Tensor, tol: float = 1e-2) -> list[int]:
    """:func:`count_clusters` at every saved time of a :func:`simulate` trajectory."""
    return [count_clusters(x, tol) for x in trajectory]


def first_time(counts, times, at_most: int) -> float:
    """The first of ``times`` at which ``counts`` (clusters at each saved time) is at most ``at_most``, or
    ``inf`` when it never is within the window (chapter "What came after": when clusters form and merge)."""
    if len(counts) != len(times):
        raise ValueError(f"need one count per time, got {len(counts)} counts and {len(times)} times")
    return next((float(t) for t, k in zip(times, counts) if k <= at_most), float("inf"))


def two_cluster_phase(counts, times) -> float:
    """How long the phase of (at most) two clusters lasts, over the time it took to form: ``(t_1 - t_2) / t_2``
    with ``t_k`` the :func:`first_time` with at most ``k`` clusters (chapter "What came after"). ``inf`` when the
    tokens are still in two clusters at the end of the window; ``nan`` when two clusters never form."""
    formed, merged = first_time(counts, times, 2), first_time(counts, times, 1)
    if formed == float("inf"):
        return float("nan")
    if formed == 0:
        raise ValueError("the tokens start in at most two clusters: no formation time to compare with")
    return (merged - formed) / formed
