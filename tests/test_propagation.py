"""Unit tests of attnbook.signal.propagation (chapters 8 and 9).

Formulas are checked in float64 with rtol 1e-10 (rounding is ~1e-15, a wrong factor is O(1)); Monte-Carlo
checks use a tolerance of several standard errors, stated next to them."""

import math

import pytest
import torch
from torch.testing import assert_close

from attnbook.signal import propagation as prop

F64 = dict(atol=1e-12, rtol=1e-10)


def test_token_cosine_collapsed_and_orthogonal():
    x = torch.randn(1, 1, 5, generator=torch.Generator().manual_seed(0))
    assert_close(prop.token_cosine(x.expand(2, 4, 5)), torch.ones(2), atol=1e-6, rtol=0)
    assert_close(prop.token_cosine(torch.eye(3)), torch.tensor(0.0), atol=1e-7, rtol=0)
    with pytest.raises(ValueError):
        prop.token_cosine(torch.randn(1, 4))


def test_token_cosine_against_a_loop_over_pairs():
    """Chapter 8, eq. cos-sim: the mean of cos(x_i, x_j) over the n (n - 1) ordered pairs i != j."""
    X = torch.randn(3, 4, 6, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    expected = []
    for b in range(3):
        cos = [torch.nn.functional.cosine_similarity(X[b, i], X[b, j], dim=0)
               for i in range(4) for j in range(4) if i != j]
        expected.append(torch.stack(cos).mean())
    assert_close(prop.token_cosine(X), torch.stack(expected), **F64)


def test_correlated_tokens_have_the_requested_cosine():
    """x_i = sqrt(rho) z + sqrt(1 - rho) e_i: cosine rho, squared norm d. With d = 20000 each pair's cosine
    has standard deviation about 1/sqrt(d) = 0.007, so 0.03 is four of them."""
    X = prop.correlated_tokens(3, 5, 20000, 0.3, torch.Generator().manual_seed(2))
    assert X.shape == (3, 5, 20000)
    assert_close(prop.token_cosine(X), torch.full((3,), 0.3), atol=0.03, rtol=0)
    assert_close(X.pow(2).mean(-1), torch.ones(3, 5), atol=0.05, rtol=0)


def test_tokens_with_cosine_exact():
    X = prop.tokens_with_cosine(6, 10, 0.3, torch.Generator().manual_seed(0))
    G = X @ X.T / 10
    assert_close(G.diagonal(), torch.ones(6, dtype=X.dtype), **F64)
    off = G[~torch.eye(6, dtype=bool)]
    assert_close(off, torch.full_like(off, 0.3), **F64)
    with pytest.raises(ValueError):
        prop.tokens_with_cosine(6, 6, 0.3)
    with pytest.raises(ValueError):
        prop.correlated_tokens(1, 4, 8, 1.5)


def test_build_stack_sets_residual_scale_temperature_and_placement():
    """Chapter 8: scaled=True is Noci et al.'s alpha = 1/sqrt(L); temperature, LayerNorm and MLP reach every block."""
    net = prop.build_stack(4, 8, 2, layernorm="post", scaled=True, temperature=0.5, mlp=False)
    for b in net.blocks:
        assert b.alpha == pytest.approx(0.5, rel=1e-15) and b.attn.temperature == 0.5
        assert b.layernorm == "post" and b.mlp is None and b.skip
    plain = prop.build_stack(4, 8, 2)
    for b in plain.blocks:
        assert b.alpha == 1.0 and b.attn.temperature == 1.0 and b.layernorm == "pre" and b.mlp is not None


def test_cosine_by_layer_is_the_cosine_of_each_hidden_state():
    torch.manual_seed(3)
    net = prop.build_stack(3, 16, 2, dtype=torch.float64)
    X = prop.correlated_tokens(2, 5, 16, 0.2, torch.Generator().manual_seed(4), dtype=torch.float64)
    _, hidden, _ = net(X)
    expected = torch.stack([prop.token_cosine(h).mean() for h in hidden])
    got = prop.cosine_by_layer(net, X)
    assert got.shape == (4,)
    assert_close(got, expected, **F64)
    assert (expected[1:] - expected[0]).abs().min() > 1e-3  # the layers' values are not the input's


def test_meanfield_one_layer_by_hand():
    """Eqs. mf-attn, relu-kernel, mf-pre and mf-post for one layer, alpha = 1/2, n = 4, rho_0 = 0.2:
    attention adds alpha^2 mu = 0.25 * 0.4 = 0.1 to q and c; the MLP adds alpha^2 / 2 to q and
    alpha^2 kappa(r) to c; post-LN renormalises after each branch."""
    a2, mu = 0.25, (1 + 3 * 0.2) / 4
    q, c = 1 + a2 * mu, 0.2 + a2 * mu  # attention branch
    assert_close(prop.meanfield_cosine(1, 0.2, 4, alpha=0.5, layernorm="pre", mlp=False),
                 torch.tensor([0.2, c / q], dtype=torch.float64), **F64)
    r = c / q
    pre = (c + a2 * float(prop.relu_kernel(r))) / (q + a2 / 2)
    assert_close(prop.meanfield_cosine(1, 0.2, 4, alpha=0.5, layernorm="pre"),
                 torch.tensor([0.2, pre], dtype=torch.float64), **F64)
    c_post = r  # post-LN: q = 1 again, c = c / q
    post = (c_post + a2 * float(prop.relu_kernel(r))) / (1 + a2 / 2)
    assert_close(prop.meanfield_cosine(1, 0.2, 4, alpha=0.5, layernorm="post"),
                 torch.tensor([0.2, post], dtype=torch.float64), **F64)


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
    """kappa(1) = 1/2, kappa(0) = 1/(2 pi), kappa(-1) = 0, and kappa(+-0.5) against 4 million Gaussian pairs
    (the product relu(u) relu(v) has standard deviation < 1, so the standard error is < 5e-4)."""
    assert prop.relu_kernel(1.0).item() == pytest.approx(0.5, rel=1e-12)
    assert prop.relu_kernel(0.0).item() == pytest.approx(1 / (2 * math.pi), rel=1e-12)
    assert prop.relu_kernel(-1.0).item() == pytest.approx(0.0, abs=1e-12)
    g = torch.Generator().manual_seed(5)
    u, w = torch.randn(2, 4_000_000, generator=g, dtype=torch.float64)
    for rho in (0.5, -0.5):
        v = rho * u + math.sqrt(1 - rho**2) * w
        mc = (u.clamp(min=0) * v.clamp(min=0)).mean().item()
        assert prop.relu_kernel(rho).item() == pytest.approx(mc, abs=2e-3), rho
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


def test_qkv_grad_norms_are_per_layer_gradients_of_the_readout_loss():
    """Chapter 8: ||grad_{W_Q^l} <R, Y>||_F per layer l, against torch.autograd on the same loss."""
    torch.manual_seed(6)
    net = prop.build_stack(3, 8, 2, dtype=torch.float64)
    X = prop.correlated_tokens(2, 4, 8, 0.2, torch.Generator().manual_seed(7), dtype=torch.float64)
    R = torch.randn(X.shape, generator=torch.Generator().manual_seed(8), dtype=torch.float64)
    got = prop.qkv_grad_norms(net, X, readout=R)
    Y, _, _ = net(X)
    for name in "qkv":
        weights = [getattr(b.attn, name).weight for b in net.blocks]
        grads = torch.autograd.grad((Y * R).sum(), weights, retain_graph=True)
        assert_close(got[name], torch.stack([g.norm() for g in grads]), **F64)
    assert (got["q"][1:] - got["q"][0]).abs().min() > 1e-6  # per-layer values, not layer 0's


def test_single_head_is_a_one_head_attention_with_temperature():
    """Chapter 9, eq. head, against the library's MultiHeadSelfAttention (no biases, identity output map)."""
    from attnbook.core.attention import MultiHeadSelfAttention

    g = torch.Generator().manual_seed(9)
    X = torch.randn(5, 4, generator=g, dtype=torch.float64)
    Wq, Wk, Wv = (torch.randn(4, 4, generator=g, dtype=torch.float64) for _ in range(3))
    mha = MultiHeadSelfAttention(4, 1, bias=False, temperature=2.5).double()
    with torch.no_grad():
        mha.q.weight.copy_(Wq.T), mha.k.weight.copy_(Wk.T), mha.v.weight.copy_(Wv.T)
        mha.out.weight.copy_(torch.eye(4))
    assert_close(prop.single_head(X, Wq, Wk, Wv, temperature=2.5), mha(X[None])[0][0], **F64)


def test_uniform_attention_closed_forms_by_hand():
    """Eqs. jv and jq on X = [[1, 0], [0, 1], [1, 1]]: xbar = (2/3, 2/3), ||X||_F^2 = 4,
    C = X^T Pi X = [[2/3, -1/3], [-1/3, 2/3]], ||C||_F^2 = 10/9, n = 3; sigma_q = 1, sigma_k = 1/2,
    sigma_v = 2, d_v = 3, tau = 2: common = 4 * 3 * 4 * (10/9) / (9 * 4) = 40/27."""
    X = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], dtype=torch.float64)
    f = prop.uniform_attention_sq_norms(X, 1.0, 0.5, 2.0, d_v=3, temperature=2.0)
    common = 40 / 27
    assert f["q"] == pytest.approx(0.25 * common, rel=1e-12)
    assert f["k"] == pytest.approx(1.0 * common, rel=1e-12)
    assert f["v"] == pytest.approx(3 * 3 * 8 / 9, rel=1e-12)
    # eq. tau-star: tau*^2 = sigma_k^2 sigma_v^2 ||X||^2 ||C||^2 / (n^3 ||xbar||^2) = 1 * 4 * (10/9) / (27 * 8/9)
    tau = prop.balancing_temperature(X, 0.5, 2.0)
    assert tau == pytest.approx(math.sqrt(4 * (10 / 9) / (27 * 8 / 9)), rel=1e-12)
    at_tau = prop.uniform_attention_sq_norms(X, 0.5, 0.5, 2.0, d_v=3, temperature=tau)
    assert at_tau["q"] == pytest.approx(at_tau["v"], rel=1e-12)


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


def test_mean_jacobian_sq_norms_is_the_monte_carlo_side_of_the_closed_forms():
    """Eq. jv holds draw by draw (exact); eq. jq is an expectation, met by the mean of many draws; the same
    seed gives the same draws; a temperature scales the query/key norms by 1/tau^2 at uniform attention."""
    gen = torch.Generator().manual_seed(0)
    X = torch.randn(6, 8, generator=gen, dtype=torch.float64)
    sigma = 8**-0.5
    mc = prop.mean_jacobian_sq_norms(X, 400, d_k=4, d_v=4, sigma=sigma, seed=1)
    f = prop.uniform_attention_sq_norms(X, sigma, sigma, sigma, 4)
    assert mc["v"] == pytest.approx(f["v"], rel=1e-12)
    assert mc["q"] == pytest.approx(f["q"], rel=0.15) and mc["k"] == pytest.approx(f["k"], rel=0.15)
    assert prop.mean_jacobian_sq_norms(X, 3, d_k=4, d_v=4, sigma=sigma, seed=1) == \
        prop.mean_jacobian_sq_norms(X, 3, d_k=4, d_v=4, sigma=sigma, seed=1)
    hot = prop.mean_jacobian_sq_norms(X, 3, d_k=4, d_v=4, sigma=sigma, seed=1, temperature=2.0)
    cold = prop.mean_jacobian_sq_norms(X, 3, d_k=4, d_v=4, sigma=sigma, seed=1)
    assert hot["q"] == pytest.approx(cold["q"] / 4, rel=1e-10) and hot["v"] == pytest.approx(cold["v"])
    # at real random W_Q the attention is not uniform and the value norm moves off eq. jv
    real = prop.mean_jacobian_sq_norms(4 * X, 3, d_k=4, d_v=4, sigma=sigma, seed=1, uniform=False)
    exact = prop.mean_jacobian_sq_norms(4 * X, 3, d_k=4, d_v=4, sigma=sigma, seed=1)
    assert abs(real["v"] / exact["v"] - 1) > 0.05
    with pytest.raises(ValueError, match="n_draws"):
        prop.mean_jacobian_sq_norms(X, 0, d_k=4, d_v=4, sigma=sigma)


def test_input_scale_powers_hold_by_homogeneity_and_at_near_uniform_attention():
    """Chapter "Unequal gradients": at W_Q = 0 (uniform attention) the W_Q norm scales exactly like s^6 and the
    W_V norm like s^2 (homogeneity: these hold by construction, so they are tested here, not claimed in the
    chapter); with real random W_Q at small scales attention is nearly uniform and the powers nearly hold."""
    gen = torch.Generator().manual_seed(3)
    X = torch.randn(6, 8, generator=gen, dtype=torch.float64)
    kw = dict(d_k=4, d_v=4, sigma=8**-0.5, seed=2)
    scales = [0.5, 1.0, 2.0]
    exact = [prop.mean_jacobian_sq_norms(s * X, 3, **kw) for s in scales]
    assert prop.log_log_slope(scales, [r["q"] for r in exact]) == pytest.approx(6.0, abs=1e-9)
    assert prop.log_log_slope(scales, [r["v"] for r in exact]) == pytest.approx(2.0, abs=1e-9)
    small = [0.01, 0.02, 0.04]
    near = [prop.mean_jacobian_sq_norms(s * X, 3, uniform=False, **kw) for s in small]
    assert prop.log_log_slope(small, [r["q"] for r in near]) == pytest.approx(6.0, abs=0.05)
    assert prop.log_log_slope(small, [r["v"] for r in near]) == pytest.approx(2.0, abs=0.01)


def test_log_crossing_interpolates_in_log_log():
    x = [0.5, 1.0, 4.0, 8.0]
    assert prop.log_crossing(x, [(2 / v) ** 2 for v in x]) == pytest.approx(2.0, rel=1e-12)
    assert prop.log_crossing(x, [(3 / v) ** 2 for v in x], level=9 / 16) == pytest.approx(4.0, rel=1e-12)
    with pytest.raises(ValueError, match="does not fall"):
        prop.log_crossing(x, [2.0, 3.0, 4.0, 5.0])


def test_log_log_slope():
    x = [1.0, 2.0, 4.0]
    assert prop.log_log_slope(x, [v**3 for v in x]) == pytest.approx(3.0, rel=1e-12)
    assert prop.log_log_slope(x, [5 * v**-0.5 for v in x]) == pytest.approx(-0.5, rel=1e-12)
    with pytest.raises(ValueError):
        prop.log_log_slope([1.0, -1.0], [1.0, 2.0])


def test_training_a_scaled_tempered_stack_lowers_its_loss():
    """Chapter 9's training path: SGD on a scaled, tempered post-LN stack. The first recorded loss is the
    initial network's, and a few steps lower it."""
    from attnbook.core.train import train

    torch.manual_seed(0)
    net = prop.build_stack(2, 8, 2, layernorm="post", scaled=True, temperature=0.5)
    X = torch.randn(4, 5, 8)
    target = torch.randn(4, 5, 8)
    with torch.no_grad():
        initial = float((net(X)[0] - target).pow(2).mean())
    hist = train(net, lambda s: X, lambda m, b: (m(b)[0] - target).pow(2).mean(), steps=20, optimizer="sgd",
                 lr=0.05, warmup=0, clip=None, progress=False, device="cpu")
    assert hist["loss"][0] == pytest.approx(initial, rel=1e-5)
    assert hist["loss"][-1] < 0.9 * hist["loss"][0]


def test_build_stack_device_and_readout_follow_device():
    # device=None and device="cpu" draw the same weights from the CPU generator
    torch.manual_seed(3)
    a = prop.build_stack(3, 16, 2)
    torch.manual_seed(3)
    b = prop.build_stack(3, 16, 2, device="cpu")
    for x, y in zip(a.state_dict().values(), b.state_dict().values()):
        assert torch.equal(x, y)  # the same draws, copied (no arithmetic)
    X = prop.correlated_tokens(2, 4, 16, 0.2, torch.Generator().manual_seed(0))
    g1 = prop.qkv_grad_norms(a, X, generator=torch.Generator().manual_seed(1))
    g2 = prop.qkv_grad_norms(b, X, readout=torch.randn(X.shape, generator=torch.Generator().manual_seed(1)))
    for k in "qkv":
        assert_close(g1[k], g2[k], rtol=1e-6, atol=0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_build_stack_and_readout_on_the_gpu():
    torch.manual_seed(0)  # the weights come from the global generator (CUDA's too): seeded
    c = prop.build_stack(3, 16, 2, device="cuda")
    assert next(c.parameters()).is_cuda
    X = prop.correlated_tokens(2, 4, 16, 0.2, torch.Generator().manual_seed(0))
    g = prop.qkv_grad_norms(c, X.cuda(), generator=torch.Generator().manual_seed(1))
    assert g["v"].is_cuda
    cpu = prop.build_stack(3, 16, 2)
    cpu.load_state_dict({k: v.cpu() for k, v in c.state_dict().items()})
    g_cpu = prop.qkv_grad_norms(cpu, X, generator=torch.Generator().manual_seed(1))
    for k in "qkv":  # float32 on two devices: kernels differ, so only 1e-4 relative agreement is expected
        assert_close(g[k].cpu(), g_cpu[k], rtol=1e-4, atol=1e-6)


def test_xavier_uniform_std_is_torch_s():
    w = torch.empty(512, 512)
    torch.manual_seed(0)
    torch.nn.init.xavier_uniform_(w, gain=2**-0.5)
    assert abs(float(w.std()) - prop.xavier_uniform_std(512, 512, gain=2**-0.5)) < 2e-4
    assert prop.xavier_uniform_std(512, 512, gain=2**-0.5) ** 2 == pytest.approx(1 / 1024)
    with pytest.raises(ValueError):
        prop.xavier_uniform_std(0, 5)


def test_balancing_temperature_in_fairseq_s_setting_is_a_logit_multiplier_near_8_5():
    """Chapter "Unequal gradients": the closed form tau*^2 = s_k^2 s_v^2 d^2 (1-rho)^2 (n-1) / (n (1 + (n-1) rho))
    at d = 512, sigma^2 = 1/(2d), rho = 0.3, n = 25 gives 1/tau* = 8.35."""
    gen = torch.Generator().manual_seed(0)
    X = prop.tokens_with_cosine(25, 512, 0.3, gen)
    s = prop.xavier_uniform_std(512, 512, gain=2**-0.5)
    by_hand = (0.25 * 0.7**2 * 24 / (25 * (1 + 24 * 0.3))) ** 0.5
    assert prop.balancing_temperature(X, s, s) == pytest.approx(by_hand, rel=1e-9)
    assert 1 / by_hand == pytest.approx(8.35, abs=0.01)
