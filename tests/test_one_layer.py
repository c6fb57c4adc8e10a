"""Tests of attnbook.rank.one_layer: the one-layer residual bound of chapter "The one-layer residual bound"."""

from __future__ import annotations

import math

import pytest
import torch

from attnbook.core.norms import norm_1_inf, res
from attnbook.rank import one_layer


def test_the_bound_is_the_lemma_s_formula_by_hand():
    W_qk = torch.tensor([[1.0, -2.0], [0.5, 0.0]])  # ||.||_1 = 2 (columns), ||.||_inf = 3 (rows)
    W_v = torch.tensor([[2.0, 0.0], [0.0, 1.0]])  # sqrt(2 * 2)
    R = torch.tensor([[0.1, 0.0], [-0.1, 0.0]])  # sqrt(0.2 * 0.1)
    r, q, v = math.sqrt(0.02), math.sqrt(6.0), 2.0
    mu = q * r**2 / math.sqrt(4)
    gamma = 0.25 * math.exp(2 * mu) * (1 + math.exp(mu))
    expected = 8 * gamma * q * v / 2 * r**3
    assert float(one_layer.lemma_bound(W_qk, W_v, R, 4)) == pytest.approx(expected, rel=1e-6)
    assert float(one_layer.lemma_bound(W_qk, W_v, R, 4, center="argmin")) == pytest.approx(expected / 2, rel=1e-6)
    assert float(one_layer.gamma(torch.tensor(0.0))) == 0.5
    with pytest.raises(ValueError, match="center"):
        one_layer.lemma_bound(W_qk, W_v, R, 4, center="median")


def test_the_bound_holds_for_one_head_on_random_inputs():
    g = torch.Generator().manual_seed(0)
    n, d, d_qk = 5, 4, 3
    for _ in range(50):
        X = torch.randn(1, d, generator=g) + 0.3 * torch.randn(n, d, generator=g)
        Wq, Wk, Wv = (torch.randn(d, k, generator=g) for k in (d_qk, d_qk, d))
        SA = ((X @ Wq) @ (X @ Wk).T / math.sqrt(d_qk)).softmax(-1) @ X @ Wv
        bound = one_layer.lemma_bound(Wq @ Wk.T, Wv, res(X), d_qk)
        assert float(norm_1_inf(res(SA))) <= float(bound)


def test_loglog_slope_reads_a_power_law():
    x = torch.logspace(-3, -1, 7).repeat(2, 1)
    y = torch.stack([x[0] ** 3 * 5, x[1] ** 2])
    assert one_layer.loglog_slope(x, y).tolist() == pytest.approx([3.0, 2.0], rel=1e-5)
    with pytest.raises(ValueError, match="positive"):
        one_layer.loglog_slope(x, -y)
