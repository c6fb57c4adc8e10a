import pytest
import torch

from attnbook.norms import norm_1, norm_1_inf, norm_inf, relative_residual, res


def test_norms_by_hand():
    X = torch.tensor([[1.0, -2.0], [3.0, 4.0]])
    assert norm_1(X) == 6.0  # column sums 4, 6
    assert norm_inf(X) == 7.0  # row sums 3, 7
    assert torch.isclose(norm_1_inf(X), torch.tensor(42.0).sqrt())


def test_batched():
    X = torch.randn(3, 5, 4, 6)
    out = norm_1_inf(X)
    assert out.shape == (3, 5)
    assert torch.isclose(out[1, 2], norm_1_inf(X[1, 2]))


def test_rank_one_identical_rows_has_zero_residual():
    x = torch.randn(1, 7, dtype=torch.float64)
    X = x.expand(5, 7)
    assert relative_residual(X) < 1e-15
    assert norm_1_inf(res(X, "argmin")) < 1e-9


def test_argmin_is_no_worse_than_mean():
    torch.manual_seed(0)
    for _ in range(3):
        X = torch.randn(6, 4, dtype=torch.float64) ** 3
        assert norm_1_inf(res(X, "argmin")) <= norm_1_inf(res(X, "mean")) + 1e-9


def test_residual_is_invariant_to_adding_identical_rows():
    X = torch.randn(5, 3, dtype=torch.float64)
    shift = torch.randn(1, 3, dtype=torch.float64)
    assert torch.allclose(res(X + shift), res(X))


def test_bad_input():
    with pytest.raises(ValueError, match="n_tokens, d"):
        norm_1_inf(torch.randn(5))
    with pytest.raises(ValueError, match="center must be one of"):
        res(torch.randn(3, 3), "median")
    with pytest.raises(ValueError, match="at least one token"):
        norm_1(torch.randn(0, 3))
