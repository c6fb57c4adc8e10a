"""The composite (1, inf) norm and the residual of Dong et al. (2021), chapter "Pure attention loses rank".

* ``||X||_{1,inf} = sqrt(||X||_1 ||X||_inf)``: the geometric mean of the largest absolute column sum
  (``||X||_1``) and the largest absolute row sum (``||X||_inf``). It is not a norm in general: the
  triangle inequality can fail (chapter "Pure attention loses rank" shows a counterexample); the proofs only use it
  through ``||X||_1`` and ``||X||_inf``, which are norms.
* ``res(X) = X - 1 x^T``: what is left of ``X`` after removing a rank-one matrix with identical rows.
  The paper takes ``x = argmin_x ||X - 1 x^T||_{1,inf}``; the official experiment code subtracts the
  token mean. This module offers both (``center="mean"`` or ``"argmin"``). The book uses the token mean
  in experiments, like the official code, and the argmin where a proof needs it; chapter "Pure attention loses rank"
  measures how much they differ.
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
    """``||X||_1``: largest absolute column sum, over the last two dims (chapter "Pure attention loses rank", eq.
    norm-1)."""
    X = _check_matrix(X)
    return X.abs().sum(dim=-2).amax(dim=-1)


def norm_inf(X: torch.Tensor) -> torch.Tensor:
    """``||X||_inf``: largest absolute row sum, over the last two dims (chapter "Pure attention loses rank", eq.
    norm-inf)."""
    X = _check_matrix(X)
    return X.abs().sum(dim=-1).amax(dim=-1)


def norm_1_inf(X: torch.Tensor) -> torch.Tensor:
    """Composite norm ``sqrt(||X||_1 ||X||_inf)`` of Dong et al. (2021), batched over leading dims."""
    return torch.sqrt(norm_1(X) * norm_inf(X))


def _argmin_lp(n: int, d: int):
    """Constraint matrix of ``h(s) = min{||X - 1 x^T||_inf : ||X - 1 x^T||_1 <= s}`` as one linear program.

    Variables: ``x`` (d), the absolute deviations ``E`` (n*d, ``E_ij >= |X_ij - x_j|``) and the bound ``b`` on
    every row sum of ``E`` (the objective). Rows: the two sides of each absolute value, the n row sums
    ``<= b``, and last the d column sums ``<= s`` (so only the last d entries of ``b_ub`` depend on ``s``).
    """
    # scipy.sparse and scipy.optimize take about a second to import; only the exact argmin centre needs them
    from scipy.sparse import csr_matrix, hstack, identity, kron, vstack

    tile_x = kron(np.ones((n, 1)), identity(d))  # (n*d, d): picks x_j for entry (i, j)
    eye_e = identity(n * d)
    zero_b = csr_matrix((n * d, 1))
    row_sums = kron(identity(n), np.ones((1, d)))  # (n, n*d)
    col_sums = kron(np.ones((1, n)), identity(d))  # (d, n*d)
    return vstack(
        [
            hstack([-tile_x, -eye_e, zero_b]),  # X_ij - x_j <= E_ij
            hstack([tile_x, -eye_e, zero_b]),  # x_j - X_ij <= E_ij
            hstack([csr_matrix((n, d)), row_sums, -np.ones((n, 1))]),  # row sums <= b
            hstack([csr_matrix((d, d)), col_sums, csr_matrix((d, 1))]),  # column sums <= s
        ]
    ).tocsr()


def _argmin_center_certified(X: np.ndarray, rtol: float = 1e-12, max_lps: int = 2000):
    """Exact ``argmin_x ||X - 1 x^T||_{1,inf}`` for one float64 matrix (chapter "Pure attention loses rank", eq.
    ``eq-res``), with a certificate. Returns ``(x, value, lower_bound)`` where ``value = ||X - 1 x^T||_1 ||X - 1 x^T||_inf`` (the
    *square* of the composite norm) and ``lower_bound <= min_x`` of that product (``value - lower_bound`` is
    the certified gap, zero up to rounding and the LP solver's tolerances).

    Method. Write ``a(x) = ||X - 1 x^T||_1`` and ``b(x) = ||X - 1 x^T||_inf``; both are convex and piecewise
    linear in ``x``, and ``||.||_{1,inf}^2 = a b``. Let ``h(s) = min{b(x) : a(x) <= s}`` (the linear program of
    ``_argmin_lp``). Then ``min_x a b = min_s s h(s)``: ``s h(s) >= a(x_s) b(x_s)`` for the LP's solution
    ``x_s``, and ``s = a(x*)`` attains the minimum. ``h`` is the value function of an LP whose right-hand side
    is affine in ``s``, so it is convex, non-increasing and piecewise linear, and the sum of the LP's dual
    values on the column-sum rows is a subgradient of ``h`` at ``s``. On each linear piece
    ``h(s) = alpha - beta s`` (``beta >= 0``) the product ``s h(s)`` is a concave quadratic, so its minimum lies
    at a breakpoint of ``h`` or at an end of the range: ``s_lo = min_x a`` (column-wise medians) and
    ``s_hi = a`` at a minimiser of ``b`` alone (beyond it ``h`` is constant and ``s h(s)`` increases). The
    breakpoints are found by the tangent-intersection (sandwich) method: for an interval with values and
    subgradients at both ends, the two tangents meet at ``s_m``; convexity puts ``h`` between the tangents and
    the chord, so ``h(s_m)`` equal to the tangents' value means ``h`` is exactly the maximum of the two tangents
    there (one breakpoint, at ``s_m``, now evaluated); otherwise the interval is split at ``s_m``. An interval
    is also dropped when the lower bound ``min(s_1 h_1, s_2 h_2, s_m L(s_m))`` (with ``L`` the larger tangent,
    again a concave quadratic on each side of ``s_m``) cannot beat the best value found: that is the
    certificate. Every LP solution ``x_s`` is scored by its exact ``a b``. ``X`` is first shifted by its
    column medians and scaled to unit largest entry, so that solver tolerances are relative to the residual,
    not to the (possibly much larger) common row ``1 x^T``.
    """
    from scipy.optimize import linprog  # imported here for the same reason as in _argmin_lp

    n, d = X.shape
    shift = np.median(X, axis=0)
    Y = X - shift
    scale = float(np.abs(Y).max())
    if not np.isfinite(scale):
        raise ValueError("X must be finite for center='argmin'")
    if scale == 0.0:  # all rows identical: the residual is zero
        return shift, 0.0, 0.0
    Y = Y / scale
    A_ub = _argmin_lp(n, d)
    flat = Y.reshape(-1)
    cost = np.zeros(d + n * d + 1)
    cost[-1] = 1.0
    bounds = [(None, None)] * d + [(0, None)] * (n * d + 1)
    b_base = np.concatenate([-flat, flat, np.zeros(n + d)])
    options = dict(primal_feasibility_tolerance=1e-10, dual_feasibility_tolerance=1e-10)
    n_lps = 0

    def solve(s: float | None):
        nonlocal n_lps
        n_lps += 1
        if s is None:  # min b alone: drop the column-sum rows
            sol = linprog(cost, A_ub=A_ub[:-d], b_ub=b_base[:-d], bounds=bounds, method="highs-ds", options=options)
        else:
            b_ub = b_base.copy()
            b_ub[-d:] = s
            sol = linprog(cost, A_ub=A_ub, b_ub=b_ub, bounds=bounds, method="highs-ds", options=options)
        if sol.status != 0:
            raise RuntimeError(f"center='argmin': linear program failed ({sol.message})")
        slope = 0.0 if s is None else float(sol.ineqlin.marginals[-d:].sum())  # d h / d s (<= 0)
        return float(sol.fun), slope, sol.x[:d]

    best_x, best = np.zeros(d), np.inf

    def score(x: np.ndarray) -> None:
        nonlocal best_x, best
        R = np.abs(Y - x)
        value = float(R.sum(axis=0).max() * R.sum(axis=1).max())
        if value < best:
            best_x, best = x, value

    score(np.zeros(d))  # the column medians: a = s_lo
    _, _, x_b = solve(None)
    score(x_b)
    s_lo = float(np.abs(Y).sum(axis=0).max())
    s_hi = max(float(np.abs(Y - x_b).sum(axis=0).max()), s_lo)
    h_lo, m_lo, x = solve(s_lo)
    score(x)
    lower = [s_lo * h_lo]
    if s_hi > s_lo * (1 + rtol):
        h_hi, m_hi, x = solve(s_hi)
        score(x)
        lower = [min(s_lo * h_lo, s_hi * h_hi)]
        stack = [(s_lo, h_lo, m_lo, s_hi, h_hi, m_hi)]
        while stack:
            s1, h1, m1, s2, h2, m2 = stack.pop()
            if m2 - m1 <= rtol * max(1.0, abs(m1)):  # equal slopes: h is linear on [s1, s2]
                sm, Lm = s2, h2
            else:
                sm = min(max((h2 - h1 + m1 * s1 - m2 * s2) / (m1 - m2), s1), s2)
                Lm = max(h1 + m1 * (sm - s1), h2 + m2 * (sm - s2), h2)
            bound = min(s1 * h1, s2 * h2, sm * Lm)
            if bound >= best * (1 - rtol) or s2 - s1 <= rtol * s2 or n_lps >= max_lps:
                lower.append(bound)
                continue
            hm, mm, x = solve(sm)
            score(x)
            if hm <= Lm + rtol * max(abs(hm), 1.0):  # h = max of the two tangents on [s1, s2]
                lower.append(min(s1 * h1, s2 * h2, sm * hm))
                continue
            stack += [(s1, h1, m1, sm, hm, mm), (sm, hm, mm, s2, h2, m2)]
    lower_bound = min(min(lower), best)
    return shift + scale * best_x, best * scale**2, lower_bound * scale**2


def _argmin_center(X: np.ndarray) -> np.ndarray:
    """``argmin_x ||X - 1 x^T||_{1,inf}`` for one matrix (chapter "Pure attention loses rank", eq. ``eq-res``); exact
    to the LP solver's precision, see ``_argmin_center_certified`` for the method and its certificate."""
    return _argmin_center_certified(X)[0]


def res(X: torch.Tensor, center: str = "mean") -> torch.Tensor:
    """Residual ``res(X) = X - 1 x^T`` (chapter "Pure attention loses rank", eq. res), batched over leading dims.

    ``center="mean"``: ``x`` is the token mean (the official code, all experiments).
    ``center="argmin"``: ``x`` minimises ``||X - 1 x^T||_{1,inf}`` (the paper's definition; solved exactly,
    to the LP solver's precision, by a short sequence of linear programmes per matrix, see
    ``_argmin_center_certified``; meant for small matrices).
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
    """``||res(X)||_{1,inf} / ||X||_{1,inf}`` (chapter "Pure attention loses rank", eq. rel-res): 0 for a rank-one
    matrix with identical rows. With ``center="mean"`` this is the measure of the paper's Figure 2 and its code."""
    X = _check_matrix(X)
    return norm_1_inf(res(X, center)) / norm_1_inf(X)


def residual_by_layer(net, X: torch.Tensor, relative: bool = True, center: str = "mean") -> torch.Tensor:
    """The relative residual (eq. rel-res), or with ``relative=False`` the residual norm
    ``||res(.)||_{1,inf}``, of the input and of every layer's output of ``net`` on ``X`` (chapters "Pure
    attention loses rank" and "Deep bounds"): shape ``(batch, depth + 1)``, on the CPU, column 0 the input.
    ``net(X)`` must return ``(output, [X, x_1, ..., x_L], ...)`` as
    :class:`attnbook.core.attention.SelfAttentionNetwork` does; it runs without gradients."""
    if X.ndim != 3:
        raise ValueError(f"X must have shape (batch, n_tokens, d_model), got {tuple(X.shape)}")
    with torch.no_grad():
        hidden = net(X)[1]
    if relative:
        values = [relative_residual(h, center) for h in hidden]
    else:
        values = [norm_1_inf(res(h, center)) for h in hidden]
    return torch.stack(values, dim=1).cpu()


def _usable_pairs(c: torch.Tensor, lo: float, hi: float) -> torch.Tensor:
    """Which consecutive layer pairs of curves ``c`` ``(runs, layers + 1)`` have both residuals in ``(lo, hi)``
    (above round-off, below order one): the pairs :func:`collapse_order` fits, ``(runs, layers)``."""
    r0, r1 = c[:, :-1], c[:, 1:]
    return (r0 > lo) & (r0 < hi) & (r1 > lo) & (r1 < hi)


def collapse_order(curves: torch.Tensor, lo: float = 1e-13, hi: float = 0.5) -> dict:
    """The order of convergence of residual curves (chapter "Pure attention loses rank"): the least-squares
    fit of ``log r_{l+1} = log C + p log r_l`` over every consecutive pair of layers (rows of ``curves``
    ``(runs, layers + 1)``) whose residuals both lie in ``(lo, hi)``, above round-off and below order one.

    The paper's bound ``r_{l+1} <= C r_l^3`` is the line ``p = 3``; a quadratic contraction gives ``p = 2``
    and a geometric one ``p = 1`` (with ``log C`` the log of the ratio). Returns ``{"order": p,
    "log_C": log C, "pairs": number of pairs used}``; raises ``ValueError`` with fewer than 3 pairs."""
    c = torch.as_tensor(curves, dtype=torch.float64)
    if c.ndim != 2 or c.shape[1] < 2:
        raise ValueError(f"expected curves of shape (runs, layers + 1) with at least 2 layers, got {tuple(c.shape)}")
    r0, r1 = c[:, :-1], c[:, 1:]
    ok = _usable_pairs(c, lo, hi)
    if int(ok.sum()) < 3:
        raise ValueError(f"only {int(ok.sum())} layer pairs with residuals in ({lo:g}, {hi:g}); need 3")
    x, y = r0[ok].log(), r1[ok].log()
    xc = x - x.mean()
    order = float((xc * (y - y.mean())).sum() / (xc**2).sum())
    return {"order": order, "log_C": float(y.mean() - order * x.mean()), "pairs": int(ok.sum())}


def collapse_order_interval(curves: torch.Tensor, lo: float = 1e-13, hi: float = 0.5,
                            level: float = 0.95) -> tuple[float, float]:
    """An interval at nominal ``level`` for :func:`collapse_order`'s order over the runs (rows of ``curves``:
    sequences or networks, the independent units; the layer pairs of one run share its input): the fitted
    order plus or minus Student's t quantile (degrees of freedom: usable runs less 1) times the delete-one-run
    jackknife standard error. Deterministic. On simulated curves of 15-20 runs (chains of three pairs with a
    constant per run, one pair per run with uneven noise) it covered 91-96% at 95% (a bootstrap over runs
    88-94%), so read it as somewhat narrow. ``ValueError`` when fewer than 2 runs have usable pairs."""
    from scipy.stats import t as student_t

    c = torch.as_tensor(curves, dtype=torch.float64)
    order = collapse_order(c, lo, hi)["order"]  # validates the shape and that 3 pairs exist
    runs = c[_usable_pairs(c, lo, hi).any(1)]
    n = runs.shape[0]
    if n < 2:
        raise ValueError(f"need at least 2 runs with layer pairs in ({lo:g}, {hi:g}) to leave one out, got {n}")
    left_out = []
    for i in range(n):
        try:
            left_out.append(collapse_order(torch.cat([runs[:i], runs[i + 1:]]), lo, hi)["order"])
        except ValueError:  # too few pairs without this run: no spread measurable from it
            raise ValueError(f"leaving run {i} out leaves fewer than 3 layer pairs; need more runs") from None
    jk = np.array(left_out)
    se = float(np.sqrt((n - 1) / n * ((jk - jk.mean()) ** 2).sum()))
    half = float(student_t.ppf((1 + level) / 2, n - 1)) * se
    return order - half, order + half
