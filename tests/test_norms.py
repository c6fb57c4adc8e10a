import itertools
import math

import numpy as np
import pytest
import torch
from torch.testing import assert_close

from attnbook.core import norms
from attnbook.core.norms import (
    _argmin_center_certified,
    norm_1,
    norm_1_inf,
    norm_inf,
    relative_residual,
    res,
)

EXACT = dict(atol=1e-12, rtol=0.0)  # float64 sums of a few small numbers: rounding ~1e-16


def test_norms_by_hand():
    X = torch.tensor([[1.0, -2.0], [3.0, 4.0]], dtype=torch.float64)
    assert_close(norm_1(X), torch.tensor(6.0, dtype=torch.float64), **EXACT)  # column sums 4, 6
    assert_close(norm_inf(X), torch.tensor(7.0, dtype=torch.float64), **EXACT)  # row sums 3, 7
    assert_close(norm_1_inf(X), torch.tensor(42.0, dtype=torch.float64).sqrt(), **EXACT)
    assert_close(norm_1(X.T), torch.tensor(7.0, dtype=torch.float64), **EXACT)  # not symmetric in rows/columns


def test_relative_residual_by_hand():
    """Eq. rel-res with the token mean: X = [[2, 0], [0, 0]] has mean row (1, 0), res = [[1, 0], [-1, 0]],
    ||res||_{1,inf} = sqrt(2 * 1), ||X||_{1,inf} = sqrt(2 * 2): ratio sqrt(2) / 2."""
    X = torch.tensor([[2.0, 0.0], [0.0, 0.0]], dtype=torch.float64)
    assert_close(res(X), torch.tensor([[1.0, 0.0], [-1.0, 0.0]], dtype=torch.float64), **EXACT)
    assert_close(relative_residual(X), torch.tensor(2**0.5 / 2, dtype=torch.float64), **EXACT)


def test_batched():
    X = torch.randn(3, 5, 4, 6, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    out = norm_1_inf(X)
    assert out.shape == (3, 5)
    assert_close(out[1, 2], norm_1_inf(X[1, 2]), **EXACT)
    assert_close(relative_residual(X)[2, 4], relative_residual(X[2, 4]), **EXACT)


def test_rank_one_identical_rows_has_zero_residual():
    x = torch.randn(1, 7, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    X = x.expand(5, 7)
    assert relative_residual(X) < 1e-15
    assert norm_1_inf(res(X, "argmin")) < 1e-9


def test_argmin_is_no_worse_than_mean():
    torch.manual_seed(0)
    for _ in range(3):
        X = torch.randn(6, 4, dtype=torch.float64) ** 3
        assert norm_1_inf(res(X, "argmin")) <= norm_1_inf(res(X, "mean")) + 1e-9


def test_residual_is_invariant_to_adding_identical_rows():
    g = torch.Generator().manual_seed(1)
    X = torch.randn(5, 3, generator=g, dtype=torch.float64)
    shift = torch.randn(1, 3, generator=g, dtype=torch.float64)
    assert_close(res(X + shift), res(X), **EXACT)


def test_bad_input():
    with pytest.raises(ValueError, match="n_tokens, d"):
        norm_1_inf(torch.randn(5))
    with pytest.raises(ValueError, match="center must be one of"):
        res(torch.randn(3, 3), "median")
    with pytest.raises(ValueError, match="at least one token"):
        norm_1(torch.randn(0, 3))


def _brute_force_min_product(X):
    """min_x ||X - 1x^T||_1 ||X - 1x^T||_inf by vertex enumeration, independent of the library's method.

    With every absolute value written out over all sign patterns, {(x, s, t): ||.||_1 <= s, ||.||_inf <= t}
    is a pointed polyhedron; s t is minimised over its projection onto (s, t) at a vertex (on each edge of
    its lower-left boundary s t is a concave quadratic), and that vertex is the image of a vertex of the
    polyhedron. So: solve every choice of d + 2 constraints as equalities, keep the feasible points."""
    X = np.asarray(X, dtype=np.float64)
    n, d = X.shape
    rows, rhs = [], []  # constraint  coef . (x, s, t) <= rhs
    for j in range(d):  # sum_i sigma_i (X_ij - x_j) <= s
        for sig in itertools.product((-1.0, 1.0), repeat=n):
            c = np.zeros(d + 2)
            c[j], c[d] = -sum(sig), -1.0
            rows.append(c)
            rhs.append(-float(np.dot(sig, X[:, j])))
    for i in range(n):  # sum_j sigma_j (X_ij - x_j) <= t
        for sig in itertools.product((-1.0, 1.0), repeat=d):
            c = np.zeros(d + 2)
            c[:d], c[d + 1] = -np.array(sig), -1.0
            rows.append(c)
            rhs.append(-float(np.dot(sig, X[i])))
    A, b = np.array(rows), np.array(rhs)
    combos = np.array(list(itertools.combinations(range(len(A)), d + 2)))
    M, v = A[combos], b[combos]
    ok = np.abs(np.linalg.det(M)) > 1e-9
    pts = np.linalg.solve(M[ok], v[ok][..., None])[..., 0]
    feasible = (pts @ A.T <= b + 1e-9 * (1 + np.abs(b))).all(axis=1)
    return float((pts[feasible, d] * pts[feasible, d + 1]).min())


@pytest.mark.parametrize("shape", [(4, 1), (5, 1), (3, 2), (4, 2)])
def test_argmin_is_exact_against_brute_force(shape):
    gen = torch.Generator().manual_seed(sum(shape))
    for _ in range(3):
        X = torch.randn(*shape, generator=gen, dtype=torch.float64) ** 3
        brute = _brute_force_min_product(X.numpy())
        x, value, lower = _argmin_center_certified(X.numpy())
        ours = norm_1_inf(res(X, "argmin")).item() ** 2
        assert ours == pytest.approx(brute, rel=1e-9)
        assert value == pytest.approx(ours, rel=1e-12)
        assert lower <= brute * (1 + 1e-9)
        assert lower >= brute * (1 - 1e-9)  # the certificate is tight


def test_argmin_is_exact_when_the_common_row_dominates():
    # the residual is 1e-7 of the common row: solver tolerances must act on the residual, not on X
    gen = torch.Generator().manual_seed(3)
    R = torch.randn(4, 2, generator=gen, dtype=torch.float64) ** 3
    X = 5.0 + torch.randn(1, 2, generator=gen, dtype=torch.float64) + 1e-7 * R
    brute = _brute_force_min_product(R.numpy())  # the residual does not depend on the common row
    assert norm_1_inf(res(X, "argmin")).item() == pytest.approx(1e-7 * brute**0.5, rel=1e-7)


def test_collapse_order_recovers_the_exponent_and_the_constant():
    """r_{l+1} = C r_l^p, for p = 3 (the paper's cubic rate) and p = 2, from several starting residuals."""
    for p, C in ((3.0, 40.0), (2.0, 0.5)):
        rows = []
        for r in (0.05, 0.1, 0.2):
            row = [r]
            for _ in range(4):
                row.append(C * row[-1] ** p)
            rows.append(row)
        fit = norms.collapse_order(torch.tensor(rows), lo=1e-300)
        assert abs(fit["order"] - p) < 1e-5 and abs(fit["log_C"] - math.log(C)) < 1e-4


def test_collapse_order_ignores_pairs_at_round_off_and_refuses_too_few():
    geometric = torch.tensor([[0.4 * 0.5**k for k in range(8)] + [1e-17, 1e-17]])
    fit = norms.collapse_order(geometric)
    assert abs(fit["order"] - 1.0) < 1e-9 and fit["pairs"] == 7, "the round-off pairs must be left out"
    with pytest.raises(ValueError, match="need 3"):
        norms.collapse_order(torch.tensor([[0.9, 0.8, 0.7]]))


def test_residual_by_layer_measures_every_hidden_state():
    from attnbook.core.attention import SelfAttentionNetwork, gaussian_init_

    torch.manual_seed(0)
    net = gaussian_init_(SelfAttentionNetwork(3, 8, 2, skip=False, mlp=False, layernorm=None)).double()
    X = torch.randn(2, 5, 8, dtype=torch.float64)
    curve = norms.residual_by_layer(net, X)
    assert curve.shape == (2, 4)
    _, hidden, _ = net(X)
    for layer, h in enumerate(hidden):
        assert_close(curve[:, layer], norms.relative_residual(h.detach()))
    assert_close(curve[:, 0], norms.relative_residual(X))
    absolute = norms.residual_by_layer(net, X, relative=False)
    assert_close(absolute[1, 2], norms.norm_1_inf(norms.res(hidden[2][1].detach())))
    assert (curve[:, -1] < curve[:, 0]).all()  # a pure SAN collapses
    with pytest.raises(ValueError, match="batch"):
        norms.residual_by_layer(net, X[0])


def _chains(gen, n_runs: int, order: float = 3.0) -> torch.Tensor:
    """Curves of three steps log r' = c + order log r + noise, each run with its own constant c (shared by its
    pairs, and carried into its later inputs: the runs, not the pairs, are independent)."""
    rows = []
    for _ in range(n_runs):
        c, r = gen.normal(-1.0, 0.8), 10 ** gen.uniform(-1.5, -0.5)
        row = [r]
        for _ in range(3):
            r = float(np.exp(c + order * np.log(r) + gen.normal(0, 0.1)))
            row.append(r)
        rows.append(row)
    return torch.tensor(rows, dtype=torch.float64)


def test_collapse_order_interval_covers_the_pooled_order_about_95_percent_of_the_time():
    gen = np.random.default_rng(0)
    # the pooled fit's own target (the shared constants tilt it a little off 3), from many runs
    target = norms.collapse_order(_chains(gen, 20000), lo=1e-300)["order"]
    hits = sum(low <= target <= high for low, high in
               (norms.collapse_order_interval(_chains(gen, 20), lo=1e-300) for _ in range(300)))
    assert 0.87 <= hits / 300 <= 0.99  # 0.91 here; a 90% interval (0.85), or no t quantile, falls below


def test_collapse_order_interval_needs_two_runs():
    one = torch.tensor([[0.3, 0.01, 1e-6, 1e-12]], dtype=torch.float64)
    with pytest.raises(ValueError, match="at least 2 runs"):
        norms.collapse_order_interval(one, lo=1e-300)
