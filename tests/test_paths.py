"""Unit tests of attnbook.paths (chapter "Path decomposition")."""

from __future__ import annotations

import math

import pytest
import torch

from attnbook.attention import SelfAttentionNetwork
from attnbook.paths import (
    SKIP,
    all_paths,
    path_decomposition,
    path_length_counts,
    path_products,
    rank1_distance,
    sample_paths,
    san_parameters,
    value_products,
)


def _random_san(L, H, skip, d=16, seed=0):
    torch.manual_seed(seed)
    model = SelfAttentionNetwork(L, d, H, skip=skip, mlp=False, layernorm=None, alpha=0.7).double()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.3)  # non-zero biases everywhere
    X = torch.randn(5, d, dtype=torch.float64)
    return model, X


@pytest.mark.parametrize("L,H,skip", [(1, 1, False), (1, 4, False), (3, 2, False), (2, 4, False),
                                      (4, 2, False), (1, 2, True), (3, 2, True), (2, 4, True), (4, 2, True)])
def test_decomposition_sums_to_output(L, H, skip):
    model, X = _random_san(L, H, skip)
    attn, values, biases, sk, out = san_parameters(model, X)
    assert sk == skip
    dec = path_decomposition(attn, values, X, biases, skip=skip)
    assert dec.terms.shape[0] == ((H + 1) ** L if skip else H**L)
    rel = ((dec.total() - out).norm() / out.norm()).item()
    assert rel <= 1e-10
    # every term is P_path X W_path for the path in the same row
    P, W = path_products(attn, dec.paths), value_products(values, dec.paths)
    assert torch.allclose(P @ X @ W, dec.terms, rtol=1e-10, atol=1e-12)
    assert torch.equal(dec.paths, all_paths(L, H, skip=skip))


def test_path_products_row_stochastic_and_skip_is_identity():
    model, X = _random_san(3, 2, False)
    attn = san_parameters(model, X)[0]
    paths = torch.tensor([[0, 1, 0], [SKIP, SKIP, SKIP], [1, SKIP, 0]])
    P = path_products(attn, paths)
    assert torch.allclose(P.sum(-1), torch.ones(3, 5, dtype=P.dtype))
    assert torch.allclose(P[0], attn[2, 0] @ attn[1, 1] @ attn[0, 0])
    assert torch.allclose(P[1], torch.eye(5, dtype=P.dtype))
    assert torch.allclose(P[2], attn[2, 0] @ attn[0, 1])


def test_path_length_counts():
    assert path_length_counts(3, 2) == [1, 6, 12, 8]
    counts = path_length_counts(12, 12)
    assert sum(counts) == 13**12 and counts[5] == math.comb(12, 5) * 12**5
    lengths = (all_paths(3, 2, skip=True) != SKIP).sum(1)
    assert torch.bincount(lengths).tolist() == path_length_counts(3, 2)


def test_sample_paths():
    g = torch.Generator().manual_seed(0)
    p = sample_paths(6, 4, 2, 500, g)
    assert p.shape == (500, 6)
    assert torch.all((p != SKIP).sum(1) == 2)
    assert p.min() >= SKIP and p.max() <= 3
    assert set((p == SKIP).nonzero()[:, 1].tolist()) == set(range(6))  # every layer gets skipped sometimes
    g1, g2 = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
    assert torch.equal(sample_paths(4, 3, 4, 10, g1), sample_paths(4, 3, 4, 10, g2))
    assert torch.all(sample_paths(4, 3, 4, 10) != SKIP)


def test_rank1_distance():
    u, v = torch.randn(6, 1), torch.randn(1, 6)
    assert rank1_distance(u @ v).item() < 1e-6
    assert rank1_distance(torch.eye(4)).item() == pytest.approx(math.sqrt(3 / 4))
    assert rank1_distance(torch.eye(4), norm="spectral").item() == pytest.approx(1.0)
    assert rank1_distance(torch.randn(3, 5, 5)).shape == (3,)


def test_bad_input():
    with pytest.raises(ValueError, match="attn"):
        path_products(torch.rand(2, 3, 4), torch.zeros(1, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="paths"):
        path_products(torch.rand(2, 3, 4, 4), torch.zeros(1, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="head indices"):
        path_products(torch.rand(2, 3, 4, 4), torch.full((1, 2), 3))
    with pytest.raises(ValueError, match="X must"):
        path_decomposition(torch.rand(2, 3, 4, 4), torch.rand(2, 3, 5, 5), torch.rand(3, 5))
    with pytest.raises(ValueError, match="biases"):
        path_decomposition(torch.rand(2, 3, 4, 4), torch.rand(2, 3, 5, 5), torch.rand(4, 5), torch.rand(5))
    with pytest.raises(ValueError, match="length"):
        sample_paths(4, 2, 5, 3)
    with pytest.raises(ValueError, match="positive"):
        path_length_counts(0, 2)
    with pytest.raises(ValueError, match="norm"):
        rank1_distance(torch.eye(3), norm="nuclear")
    model = SelfAttentionNetwork(2, 8, 2, skip=False, mlp=True, layernorm=None)
    with pytest.raises(ValueError, match="MLP"):
        san_parameters(model, torch.randn(4, 8))
