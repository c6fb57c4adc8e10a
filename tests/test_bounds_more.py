"""Tests of the analysis that chapters "The one-layer residual bound" and "Deep bounds" read from
attnbook.rank.one_layer and attnbook.rank.deep_bound: the random instances, the sweep of the one-layer bound,
the deep bound's simulation, SAN+MLP curves and LayerNorm's effect on the relative residual."""

from __future__ import annotations

import math

import pytest
import torch

from attnbook.core.attention import SelfAttentionNetwork, gaussian_init_
from attnbook.core.norms import relative_residual, residual_by_layer
from attnbook.rank import deep_bound as DB
from attnbook.rank import one_layer


@pytest.fixture
def float64():
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)


def test_sample_instances_shapes_scales_and_draw_order():
    n, d, d_qk = 5, 4, 3
    inst = one_layer.sample_instances(7, torch.Generator().manual_seed(0), n=n, d=d, d_qk=d_qk)
    shapes = {k: tuple(v.shape) for k, v in inst.items()}
    assert shapes == {"X": (7, n, d), "Wq": (7, d, d_qk), "Wk": (7, d, d_qk), "bq": (7, 1, d_qk),
                      "bk": (7, 1, d_qk), "Wv": (7, d, d)}
    # the draws in order: s, w, the shared row, R0, then the weights
    g = torch.Generator().manual_seed(0)
    s = 10 ** (torch.rand(7, 1, 1, generator=g) * 2.5 - 2)
    w = 10 ** (torch.rand(7, 1, 1, generator=g) * 1.5 - 1)
    shared = torch.randn(7, 1, d, generator=g)
    R0 = torch.randn(7, n, d, generator=g)
    torch.testing.assert_close(inst["X"], shared + s * R0)
    torch.testing.assert_close(inst["Wq"], w * torch.randn(7, d, d_qk, generator=g) / 2)
    assert bool(((s >= 1e-2) & (s <= 10**0.5)).all()) and bool(((w >= 0.1) & (w <= 10**0.5)).all())


def test_self_attention_with_zero_scores_averages_the_tokens():
    g = torch.Generator().manual_seed(1)
    X, Wv = torch.randn(2, 4, 3, generator=g), torch.randn(2, 3, 3, generator=g)
    Wq = Wk = torch.zeros(2, 3, 2)
    bq = bk = torch.zeros(2, 1, 2)
    out = one_layer.self_attention(X, Wq, Wk, bq, bk, Wv)
    torch.testing.assert_close(out, (X.mean(-2, keepdim=True) @ Wv).expand(2, 4, 3))
    # a single token attends to itself only, whatever the scores: the output is X W_V
    Wq, Wk = torch.randn(2, 3, 2, generator=g), torch.randn(2, 3, 2, generator=g)
    torch.testing.assert_close(one_layer.self_attention(X[:, :1], Wq, Wk, bq, bk, Wv), X[:, :1] @ Wv)


def test_bound_sweep_scales_the_residual_and_stays_below_the_bound(float64):
    scales = torch.logspace(-3, 0, 7)
    sweep = one_layer.bound_sweep(scales, [0.5, 2.0], 3, torch.Generator().manual_seed(11), n=5, d=6, d_qk=3)
    assert list(sweep) == [0.5, 2.0]
    for rin, obs, bnd in sweep.values():
        assert rin.shape == obs.shape == bnd.shape == (3, 7)
        # X = 1 x^T + s R0 with R0 centred: the input residual is s ||R0||, linear in s
        torch.testing.assert_close(rin / scales, (rin[:, :1] / scales[0]).expand(3, 7))
        assert bool((obs <= bnd).all())
    summary = one_layer.sweep_summary(sweep, scales <= 1e-2)
    assert summary["slopes"].shape == (6,) and summary["gaps"].shape == (3 * 2 * 3,)
    assert summary["slopes"].tolist() == pytest.approx([3.0] * 6, abs=0.02)  # cubic at small residuals
    assert 0 < summary["worst"] <= 1


def test_sweep_summary_of_a_known_power_law():
    r = torch.logspace(-3, 0, 4, dtype=torch.float64).repeat(2, 1)
    sweep = {1.0: (r, 5 * r**3, 100 * r**3), 2.0: (r, r**2, 2 * r**2)}
    out = one_layer.sweep_summary(sweep, torch.tensor([True, True, True, False]))
    assert out["slopes"].tolist() == pytest.approx([3, 3, 2, 2])
    assert out["gaps"].tolist() == pytest.approx([20] * 6 + [2] * 6)
    assert out["worst"] == pytest.approx(0.5)


def test_simulate_against_bound_starts_at_twice_the_input_residual_and_holds(float64):
    observed, tracked, bounds = DB.simulate_against_bound(2, n=4, d=8, n_heads=2, depth=4, scale=0.01, seed=0)
    assert observed.shape == tracked.shape == bounds.shape == (2, 5)
    torch.testing.assert_close(bounds[:, 0], (2 * observed[:, 0]).log10())
    assert bool((observed[:, 0] < 0.1).all())
    above = observed > 1e-13
    assert bool((observed[above].log10() <= bounds[above] + 1e-9).all())
    assert bool((tracked <= bounds).all()) and tracked[:, -1].max() < -100  # every layer, far below round-off
    torch.testing.assert_close(tracked[:, :2], observed[:, :2].log10(), rtol=0, atol=1e-8)
    again, _, _ = DB.simulate_against_bound(2, n=4, d=8, n_heads=2, depth=4, scale=0.01, seed=0)
    torch.testing.assert_close(observed, again)


def _biased_san(depth, seed=0, **kw):
    torch.manual_seed(seed)
    net = gaussian_init_(SelfAttentionNetwork(depth, 8, 2, skip=False, mlp=False, layernorm=None, **kw))
    with torch.no_grad():
        for b in net.blocks:
            for lin in (b.attn.q, b.attn.k, b.attn.v, b.attn.out):
                lin.bias.normal_()
    return net


@pytest.mark.parametrize("kw", [{}, dict(temperature=0.5, alpha=1.7)])
def test_tracked_residuals_agree_with_a_forward_pass_above_round_off(float64, kw):
    net = _biased_san(6, **kw)
    g = torch.Generator().manual_seed(0)
    X = torch.randn(1, 1, 8, generator=g) + 0.3 * torch.randn(1, 5, 8, generator=g)
    direct = residual_by_layer(net, X, relative=False)[0].log10()
    tracked = DB.tracked_log10_residuals(net, X)
    assert tracked.shape == (7,)
    above = direct > -9
    assert int(above.sum()) >= 3
    torch.testing.assert_close(tracked[above], direct[above], rtol=0, atol=1e-6)
    assert tracked[-1] < direct[-1] - 100  # the forward pass stopped at round-off, the tracked one did not


def test_tracked_residuals_contract_with_order_three(float64):
    # Delta is linear in E, E quadratic in the residual: log r(l+1) - 3 log r(l) tends to a constant
    tracked = DB.tracked_log10_residuals(_biased_san(8, seed=1), torch.randn(5, 8, generator=torch.Generator()
                                                                             .manual_seed(1)) * 0.1 + 1.0)
    ratios = tracked[1:] / tracked[:-1]  # log r(l+1) / log r(l): 3 + log C / log r(l) -> 3
    assert ratios[-3:].tolist() == pytest.approx([3.0] * 3, abs=0.02)
    assert ratios[-1] == pytest.approx(3.0, abs=0.002)


def test_tracked_residuals_linear_branch_matches_the_exact_one(float64, monkeypatch):
    net = _biased_san(5, seed=2)
    X = 1.0 + 0.05 * torch.randn(6, 8, generator=torch.Generator().manual_seed(2))
    exact = DB.tracked_log10_residuals(net, X)  # exact expm1 branch down to s^2 = 1e-150
    monkeypatch.setattr(DB, "_LINEAR_BELOW", math.log(1e-12))  # linear branch from s^2 = 1e-12 on
    linear = DB.tracked_log10_residuals(net, X)
    assert exact[3] < -20
    torch.testing.assert_close(linear, exact, rtol=0, atol=1e-9)


def test_tracked_residuals_refuse_what_they_cannot_follow(float64):
    with pytest.raises(ValueError, match="pure SAN"):
        DB.tracked_log10_residuals(SelfAttentionNetwork(2, 8, 2, skip=True, mlp=False, layernorm=None),
                                   torch.randn(5, 8))
    with pytest.raises(ValueError, match="rank one"):
        DB.tracked_log10_residuals(_biased_san(2), torch.ones(5, 8))
    with pytest.raises(ValueError, match="n_tokens, 8"):
        DB.tracked_log10_residuals(_biased_san(2), torch.randn(2, 5, 8))


def test_mlp_instances_and_the_mlp():
    inst = DB.mlp_instances(3, torch.Generator().manual_seed(0), n=5, d=2)
    assert {k: tuple(v.shape) for k, v in inst.items()} == {"X": (3, 5, 2), "W1": (3, 2, 8), "W2": (3, 8, 2),
                                                              "b1": (3, 1, 8), "b2": (3, 1, 2)}
    X = torch.tensor([[1.0, -1.0], [2.0, 0.0]])
    W1 = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    W2 = torch.tensor([[1.0], [10.0]])
    out = DB.mlp(X, W1, torch.zeros(2), W2, torch.tensor([0.5]))
    assert out.flatten().tolist() == [1.5, 2.5]  # relu cuts the -1


def test_mlp_gain_curves_lambda_scales_with_the_square_of_the_gain(float64):
    X = torch.randn(1, 6, 8, generator=torch.Generator().manual_seed(0))
    curves, lambdas = DB.mlp_gain_curves(X, depth=3, n_heads=2, gains=(1.0, 2.0), seed=3)
    assert lambdas[2.0] == pytest.approx(4 * lambdas[1.0])  # both MLP weights doubled, same draw
    assert curves[1.0].shape == (4,) and curves[1.0][0] == curves[2.0][0] == relative_residual(X[0])
    assert not torch.equal(curves[1.0], curves[2.0])
    from attnbook.core.virtual_cuda import virtual_cuda

    with virtual_cuda() as dev:  # a CPU input with the net on a CUDA device: moved with the net
        on_device, _ = DB.mlp_gain_curves(X, depth=3, n_heads=2, gains=(1.0,), seed=3, device=dev)
    assert torch.equal(on_device[1.0].cpu(), curves[1.0])


def test_first_layer_below():
    curve = torch.tensor([1.0, 1e-3, 1e-9, 1e-12])
    assert DB.first_layer_below(curve, 1e-8) == 2
    assert DB.first_layer_below(curve, 1e-20) == 4
    assert DB.first_layer_below(curve, 2.0) == 0


def test_layernorm_residual_ratios_match_the_draws_one_by_one(float64):
    ln = torch.nn.LayerNorm(6)
    ratios = DB.layernorm_residual_ratios(ln, torch.Generator().manual_seed(2), 4, scales=[1e-3, 1.0])
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for s, got in zip([1e-3, 1.0], ratios):
            Xs = torch.randn(1, 6, generator=g) + s * torch.randn(4, 6, generator=g)
            assert got == pytest.approx(float(relative_residual(ln(Xs)) / relative_residual(Xs)))
    assert len(ratios) == 2 and all(math.isfinite(r) and r > 0 for r in ratios)


def test_the_sweep_calls_the_library_bound(float64, monkeypatch):
    calls = []
    real = one_layer.lemma_bound

    def spy(*args, **kw):
        calls.append(args[-1])
        return real(*args, **kw)

    monkeypatch.setattr(one_layer, "lemma_bound", spy)
    one_layer.bound_sweep(torch.tensor([1e-2, 1e-1]), [1.0], 2, torch.Generator().manual_seed(0), n=3, d=4,
                          d_qk=2)
    assert calls == [2, 2]  # once per head, with d_qk


def test_random_net_curves_draw_net_i_after_seed_plus_i(float64):
    X = torch.randn(1, 5, 8, generator=torch.Generator().manual_seed(0))
    kw = dict(skip=False, mlp=False, layernorm=None)
    curves = DB.random_net_curves(X, 3, 2, n_nets=3, seed=4, **kw)
    assert curves.shape == (3, 4)
    torch.manual_seed(5)
    second = gaussian_init_(SelfAttentionNetwork(3, 8, 2, **kw))
    torch.testing.assert_close(curves[1], residual_by_layer(second, X)[0])
    absolute = DB.random_net_curves(X, 3, 2, n_nets=3, seed=4, relative=False, **kw)
    torch.testing.assert_close(absolute[1], residual_by_layer(second, X, relative=False)[0])
    assert not torch.equal(curves[0], curves[1])
    with pytest.raises(ValueError, match="n_nets"):
        DB.random_net_curves(X, 3, 2, n_nets=0, **kw)


def _mp_residual_by_layer(net, X, digits=200):
    """log10 ||res_mean(X^l)||_{1,inf} of every layer of a pure SAN, by a forward pass in mpmath at ``digits``
    decimal digits: an independent reference for tracked_log10_residuals below float64's round-off."""
    import mpmath

    mpmath.mp.dps = digits

    def mat(t):
        return mpmath.matrix(t.detach().double().tolist())

    def log10_residual(Y):
        n, d = Y.rows, Y.cols
        mean = [mpmath.fsum(Y[i, j] for i in range(n)) / n for j in range(d)]
        R = mpmath.matrix(n, d)
        for i in range(n):
            for j in range(d):
                R[i, j] = Y[i, j] - mean[j]
        col = max(mpmath.fsum(abs(R[i, j]) for i in range(n)) for j in range(d))
        row = max(mpmath.fsum(abs(R[i, j]) for j in range(d)) for i in range(n))
        return float(mpmath.log10(mpmath.sqrt(col * row)))

    Y, out = mat(X), []
    out.append(log10_residual(Y))
    for block in net.blocks:
        a = block.attn
        H, dh = a.n_heads, a.d_head

        def proj(lin, Y):
            W, b = mat(lin.weight.T), mat(lin.bias[None, :])
            Z = Y * W
            for i in range(Z.rows):
                for j in range(Z.cols):
                    Z[i, j] += b[0, j]
            return Z

        Q, K, V = proj(a.q, Y), proj(a.k, Y), proj(a.v, Y)
        n = Y.rows
        heads = mpmath.matrix(n, H * dh)
        for h in range(H):
            cols = range(h * dh, (h + 1) * dh)
            for i in range(n):
                scores = [mpmath.fsum(Q[i, c] * K[j, c] for c in cols) * mpmath.mpf(a.scale) for j in range(n)]
                top = max(scores)
                w = [mpmath.exp(s - top) for s in scores]
                z = mpmath.fsum(w)
                for c in cols:
                    heads[i, c] = mpmath.fsum(w[j] * V[j, c] for j in range(n)) / z
        Y = proj(a.out, heads)
        out.append(log10_residual(Y))
    return torch.tensor(out, dtype=torch.float64)


def test_tracked_residuals_agree_with_a_200_digit_forward_pass_far_below_round_off(float64):
    net = _biased_san(4, seed=3, temperature=0.7)
    X = 1.0 + 0.2 * torch.randn(4, 8, generator=torch.Generator().manual_seed(3))
    reference = _mp_residual_by_layer(net, X)
    tracked = DB.tracked_log10_residuals(net, X)
    assert reference[-1] < -40  # far below float64's round-off
    torch.testing.assert_close(tracked, reference, rtol=0, atol=1e-6)


def test_tracked_residuals_refuse_mlp_and_layernorm_and_read_float32_in_float64():
    for kw in (dict(mlp=True, layernorm=None), dict(mlp=False, layernorm="post")):
        with pytest.raises(ValueError, match="pure SAN"):
            DB.tracked_log10_residuals(SelfAttentionNetwork(2, 8, 2, skip=False, **kw), torch.randn(5, 8))
    torch.manual_seed(0)
    net32 = gaussian_init_(SelfAttentionNetwork(6, 8, 2, skip=False, mlp=False, layernorm=None))
    X = 1.0 + 0.1 * torch.randn(5, 8, generator=torch.Generator().manual_seed(0))
    tracked = DB.tracked_log10_residuals(net32, X)  # float32 weights and input
    assert bool(torch.isfinite(tracked).all()) and tracked[-1] < -300
    torch.testing.assert_close(tracked, DB.tracked_log10_residuals(net32.double(), X.double()))


def test_tracked_residuals_follow_large_scores_without_overflow(float64):
    net = _biased_san(3, seed=4)
    X = 30.0 * torch.randn(5, 8, generator=torch.Generator().manual_seed(4))  # scores in the hundreds
    tracked = DB.tracked_log10_residuals(net, X)
    direct = residual_by_layer(net, X[None], relative=False)[0].log10()
    assert bool(torch.isfinite(tracked).all())
    above = direct > -9
    torch.testing.assert_close(tracked[above], direct[above], rtol=0, atol=1e-6)
