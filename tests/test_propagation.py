"""Unit tests of attnbook.propagation (chapters 8 and 9)."""

import math

import pytest
import torch

from attnbook import propagation as prop


def test_token_cosine_collapsed_and_orthogonal():
    x = torch.randn(1, 1, 5)
    assert torch.allclose(prop.token_cosine(x.expand(2, 4, 5)), torch.ones(2))
    assert prop.token_cosine(torch.eye(3)).item() == pytest.approx(0.0)
    with pytest.raises(ValueError):
        prop.token_cosine(torch.randn(1, 4))


def test_tokens_with_cosine_exact():
    X = prop.tokens_with_cosine(6, 10, 0.3, torch.Generator().manual_seed(0))
    G = X @ X.T / 10
    assert torch.allclose(G.diagonal(), torch.ones(6, dtype=X.dtype))
    off = G[~torch.eye(6, dtype=bool)]
    assert torch.allclose(off, torch.full_like(off, 0.3))
    with pytest.raises(ValueError):
        prop.tokens_with_cosine(6, 6, 0.3)
    with pytest.raises(ValueError):
        prop.correlated_tokens(1, 4, 8, 1.5)


def test_meanfield_matches_closed_form_pre_ln_attention_only():
    rho0, n, L = 0.2, 8, 10
    rho = prop.meanfield_cosine(L, rho0, n, mlp=False, layernorm="pre")
    # q - c is invariant, so 1 - rho_l = (1 - rho0) / q_l and q_l >= 1 + l / n
    q = (1 - rho0) / (1 - rho)
    assert (q[1:] - q[:-1] >= 1 / n - 1e-12).all()
    scaled = prop.meanfield_cosine(64, rho0, n, alpha=1 / 8, layernorm="post")
    assert scaled[-1] <= 1 - (1 - rho0) * math.exp(-1.5)
    with pytest.raises(ValueError):
        prop.meanfield_cosine(3, 0.2, 8, layernorm="none")


def test_relu_kernel_values():
    assert prop.relu_kernel(1.0).item() == pytest.approx(0.5)
    assert prop.relu_kernel(0.0).item() == pytest.approx(1 / (2 * math.pi))
    with pytest.raises(ValueError):
        prop.relu_kernel(1.5)


def test_collapsed_input_zero_qk_gradients():
    torch.manual_seed(0)
    net = prop.build_stack(3, 16, 2, layernorm="post", dtype=torch.float64)
    X = torch.randn(1, 1, 16, dtype=torch.float64).expand(2, 5, 16).contiguous()
    g = prop.qkv_grad_norms(net, X, generator=torch.Generator().manual_seed(0))
    assert (g["q"] <= 1e-10 * g["v"]).all() and (g["k"] <= 1e-10 * g["v"]).all()
    assert (g["v"] > 0).all()
    with pytest.raises(ValueError):
        prop.qkv_grad_norms(net, X, readout=torch.zeros(1, 5, 16, dtype=torch.float64))
    with pytest.raises(ValueError):
        prop.build_stack(3, 16, 2, layernorm=None)


def test_jacobian_norms_match_uniform_formula():
    gen = torch.Generator().manual_seed(0)
    X = torch.randn(5, 6, generator=gen, dtype=torch.float64)
    Wk, Wv = torch.randn(6, 3, generator=gen, dtype=torch.float64), torch.randn(6, 4, generator=gen, dtype=torch.float64)
    J = prop.jacobian_sq_norms(X, torch.zeros(6, 3, dtype=torch.float64), Wk, Wv, temperature=2.0)
    f = prop.uniform_attention_sq_norms(X, 1.0, 1.0, 1.0, 4, temperature=2.0)
    assert J["v"] == pytest.approx(f["v"], rel=1e-12)
    assert J["k"] == pytest.approx(0.0, abs=1e-20)
    # for fixed weights, ||dS/dW_Q||^2 = ||X||^2 ||W_K^T C W_V||^2 / (n^2 tau^2 d_k)
    Xc = X - X.mean(0)
    exact = X.pow(2).sum() * (Wk.T @ (Xc.T @ Xc) @ Wv).pow(2).sum() / (25 * 4.0 * 3)
    assert J["q"] == pytest.approx(exact.item(), rel=1e-10)
    assert prop.balancing_temperature(X, 1.0, 1.0) > 0
    with pytest.raises(ValueError):
        prop.single_head(X, torch.zeros(5, 3), Wk, Wv)


def test_log_log_slope():
    x = [1.0, 2.0, 4.0]
    assert prop.log_log_slope(x, [v**3 for v in x]) == pytest.approx(3.0)
    with pytest.raises(ValueError):
        prop.log_log_slope([1.0, -1.0], [1.0, 2.0])


def test_training_path_runs_a_few_steps():
    from attnbook.train import train

    torch.manual_seed(0)
    net = prop.build_stack(2, 8, 2, layernorm="post", scaled=True, temperature=0.5)
    X = torch.randn(4, 5, 8)
    hist = train(net, lambda s: X, lambda m, b: m(b)[0].pow(2).mean(), steps=3, optimizer="sgd", lr=0.01,
                 warmup=0, clip=None, progress=False, device="cpu")
    assert len(hist["loss"]) == 3


def test_build_stack_device_and_readout_follow_device():
    # device=None and device="cpu" draw the same weights from the CPU generator
    torch.manual_seed(3)
    a = prop.build_stack(3, 16, 2)
    torch.manual_seed(3)
    b = prop.build_stack(3, 16, 2, device="cpu")
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    X = prop.correlated_tokens(2, 4, 16, 0.2, torch.Generator().manual_seed(0))
    g1 = prop.qkv_grad_norms(a, X, generator=torch.Generator().manual_seed(1))
    g2 = prop.qkv_grad_norms(b, X, readout=torch.randn(X.shape, generator=torch.Generator().manual_seed(1)))
    assert all(torch.equal(g1[k], g2[k]) for k in "qkv")
    if torch.cuda.is_available():
        c = prop.build_stack(3, 16, 2, device="cuda")
        assert next(c.parameters()).is_cuda
        assert prop.qkv_grad_norms(c, X.cuda(), generator=torch.Generator().manual_seed(1))["v"].is_cuda
