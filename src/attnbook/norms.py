"""The composite (1, inf) norm and the residual of Dong et al. (2021), chapter "Pure attention loses rank".

* ``||X||_{1,inf} = sqrt(||X||_1 ||X||_inf)``: the geometric mean of the largest absolute column sum
  (``||X||_1``) and the largest absolute row sum (``||X||_inf``). It is not a norm in general: the
  triangle inequality can fail (chapter 1 shows a counterexample); the proofs only use it through
  ``||X||_1`` and ``||X||_inf``, which are norms.
* ``res(X) = X - 1 x^T``: what is left of ``X`` after removing a rank-one matrix with identical rows.
  The paper takes ``x = argmin_x ||X - 1 x^T||_{1,inf}``; the official experiment code subtracts the
  token mean. This module offers both (``center="mean"`` or ``"argmin"``). The book uses the token mean
  in experiments, like the official code, and the argmin where a proof needs it; chapter 1 measures how
  much they differ.
"""

from __future__ import annotations

import numpy as np
import torch

CENTERS = ("mean", "argmin")


def _check_matrix(X: torch.Tensor, name: str = "X") -> torch.Tensor:
    if not isinstance(X, torch.Tensor):
        X = torch.as_tensor(X)
    if X.ndim < 2:
        raise ValueError(f"{name} must have shape (..., n_tokens, d), got shape {tuple(X.shape)}")
    if X.shape[-1] == 0 or X.shape[-2] == 0:
        raise ValueError(f"{name} must have at least one token and one feature, got {tuple(X.shape)}")
    return X


def norm_1(X: torch.Tensor) -> torch.Tensor:
    """``||X||_1``: largest absolute column sum, over the last two dims (chapter 1, eq. norm-1)."""
    X = _check_matrix(X)
    return X.abs().sum(dim=-2).amax(dim=-1)


def norm_inf(X: torch.Tensor) -> torch.Tensor:
    """``||X||_inf``: largest absolute row sum, over the last two dims (chapter 1, eq. norm-inf)."""
    X = _check_matrix(X)
    return X.abs().sum(dim=-1).amax(dim=-1)


def norm_1_inf(X: torch.Tensor) -> torch.Tensor:
    """Composite norm ``sqrt(||X||_1 ||X||_inf)`` of Dong et al. (2021), batched over leading dims."""
    return torch.sqrt(norm_1(X) * norm_inf(X))


def _argmin_center(X: np.ndarray, n_grid: int = 24) -> np.ndarray:
    """``argmin_x ||X - 1 x^T||_{1,inf}`` for one matrix, by linear programming.

    ``min_x sqrt(A(x) B(x))`` with ``A = ||.||_1`` and ``B = ||.||_inf`` is solved as
    ``min_t sqrt(t * min{B(x) : A(x) <= t})``: each inner problem is a linear program (variables x, the
    absolute deviations E, and the bound b on row sums), and the outer problem is a search over t.
    """
    from scipy.optimize import linprog
    from scipy.sparse import csr_matrix, hstack, identity, kron, vstack

    n, d = X.shape
    # variables: x (d), E (n*d, E_ij >= |X_ij - x_j|), b (bound on every row sum of E)
    tile_x = kron(np.ones((n, 1)), identity(d))  # (n*d, d): picks x_j for entry (i, j)
    eye_e = identity(n * d)
    zero_b = csr_matrix((n * d, 1))
    row_sums = kron(identity(n), np.ones((1, d)))  # (n, n*d)
    col_sums = kron(np.ones((1, n)), identity(d))  # (d, n*d)
    A_ub = vstack(
        [
            hstack([-tile_x, -eye_e, zero_b]),  # X_ij - x_j <= E_ij
            hstack([tile_x, -eye_e, zero_b]),  # x_j - X_ij <= E_ij
            hstack([csr_matrix((n, d)), row_sums, -np.ones((n, 1))]),  # row sums <= b
            hstack([csr_matrix((d, d)), col_sums, csr_matrix((d, 1))]),  # column sums <= t
        ]
    ).tocsr()
    flat = X.reshape(-1)
    cost = np.zeros(d + n * d + 1)
    cost[-1] = 1.0
    bounds = [(None, None)] * d + [(0, None)] * (n * d + 1)

    def composite(x: np.ndarray) -> float:
        R = np.abs(X - x)
        return float(np.sqrt(R.sum(axis=0).max() * R.sum(axis=1).max()))

    a_min = np.abs(X - np.median(X, axis=0)).sum(axis=0).max()  # smallest possible ||.||_1
    a_max = np.abs(X - X.mean(axis=0)).sum(axis=0).max()
    best_x = X.mean(axis=0)
    best_val = composite(best_x)
    for t in np.linspace(a_min, max(a_max, a_min), n_grid) * (1 + 1e-9) + 1e-12:
        b_ub = np.concatenate([-flat, flat, np.zeros(n), np.full(d, t)])
        sol = linprog(cost, A_ub=A_ub, b_ub=b_ub, bounds=bounds, method="highs")
        if sol.status == 0 and composite(sol.x[:d]) < best_val:
            best_x, best_val = sol.x[:d], composite(sol.x[:d])
    return best_x


def res(X: torch.Tensor, center: str = "mean") -> torch.Tensor:
    """Residual ``res(X) = X - 1 x^T`` (chapter 1, eq. res), batched over leading dims.

    ``center="mean"``: ``x`` is the token mean (the official code, all experiments).
    ``center="argmin"``: ``x`` minimises ``||X - 1 x^T||_{1,inf}`` (the paper's definition; solved by
    linear programming, so it is slow and meant for small matrices).
    """
    X = _check_matrix(X)
    if center == "mean":
        return X - X.mean(dim=-2, keepdim=True)
    if center == "argmin":
        flat = X.detach().reshape(-1, *X.shape[-2:]).to(torch.float64).cpu().numpy()
        xs = np.stack([_argmin_center(m) for m in flat])
        x = torch.as_tensor(xs, dtype=X.dtype, device=X.device).reshape(*X.shape[:-2], 1, X.shape[-1])
        return X - x
    raise ValueError(f"center must be one of {', '.join(CENTERS)}, got {center!r}")


def relative_residual(X: torch.Tensor, center: str = "mean") -> torch.Tensor:
    """``||res(X)||_{1,inf} / ||X||_{1,inf}`` (chapter 1, eq. rel-res): 0 for a rank-one matrix with
    identical rows. With ``center="mean"`` this is the measure of the paper's Figure 2 and its code."""
    X = _check_matrix(X)
    return norm_1_inf(res(X, center)) / norm_1_inf(X)
