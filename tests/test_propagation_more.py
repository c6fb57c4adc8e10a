"""Tests of the chapter sweeps of attnbook.signal.propagation (chapters "Rank collapse at initialisation" and
"Unequal gradients"): cosine_by_depth, grad_norms_by_config and jacobian_scaling_sweeps."""

from __future__ import annotations

import math

import pytest
import torch

from attnbook.signal import propagation as prop

CONFIGS = [("pre", False), ("post", True)]


def test_cosine_by_depth_matches_single_stacks_and_the_recursion():
    X = prop.correlated_tokens(2, 4, 16, 0.3, torch.Generator().manual_seed(0))
    sim, theory = prop.cosine_by_depth(X, [1, 4], 2, 2, 0.3, configs=CONFIGS)
    assert set(sim) == set(theory) == set(CONFIGS) and all(len(v) == 2 for v in sim.values())
    # the same stacks by hand: seeds 1000 L + s, mean over the nets
    vals = []
    for s in range(2):
        torch.manual_seed(4000 + s)
        net = prop.build_stack(4, 16, 2, layernorm="post", scaled=True)
        vals.append(prop.cosine_by_layer(net, X)[-1].item())
    assert sim["post", True][1] == pytest.approx(sum(vals) / 2)
    assert theory["post", True][1] == prop.meanfield_cosine(4, 0.3, 4, alpha=0.5, layernorm="post")[-1].item()
    assert theory["pre", False][0] == prop.meanfield_cosine(1, 0.3, 4, layernorm="pre")[-1].item()
    with pytest.raises(ValueError, match="n_nets"):
        prop.cosine_by_depth(X, [1], 0, 2, 0.3, configs=CONFIGS)


def test_grad_norms_by_config_is_qkv_grad_norms_of_each_stack():
    X = prop.correlated_tokens(1, 4, 8, 0.5, torch.Generator().manual_seed(1))
    grads = prop.grad_norms_by_config(X, 3, 2, CONFIGS, seed=7, readout_seed=3)
    assert set(grads) == set(CONFIGS)
    torch.manual_seed(7)
    net = prop.build_stack(3, 8, 2, layernorm="post", scaled=True)
    direct = prop.qkv_grad_norms(net, X, generator=torch.Generator().manual_seed(3))
    for name in "qkv":
        assert grads["post", True][name].shape == (3,)
        assert torch.equal(grads["post", True][name], direct[name])
    assert not torch.equal(grads["pre", False]["v"], grads["post", True]["v"])


def test_jacobian_scaling_sweeps_follow_the_generator_and_the_laws():
    n, d, sigma = 3, 6, 1 / math.sqrt(6)
    gen = torch.Generator().manual_seed(0)
    X = prop.correlated_tokens(1, n, d, 0.3, gen, dtype=torch.float64)[0]
    laws = prop.jacobian_scaling_sweeps(X, 2, d_k=2, d_v=2, sigma=sigma, rho=0.3, generator=gen,
                                        scales=(0.1, 0.2), large_scales=(1.0, 2.0), width_factors=(2, 4),
                                        lengths=(2, 4))
    assert laws["widths"] == [6, 12] and laws["lengths"] == [2, 4]
    assert set(laws["by_scale"]) == {"uniform", "random"} and len(laws["by_large_scale"]) == 2
    # exact uniform attention: the W_V norm is homogeneous of degree 2, the W_Q one of degree 6
    small, large = laws["by_scale"]["uniform"]
    assert large["v"] / small["v"] == pytest.approx(2 ** 2)
    assert large["q"] / small["q"] == pytest.approx(2 ** 6)
    # the width tokens are the generator's next draws, and the formula is the uniform-attention one
    again = torch.Generator().manual_seed(0)
    prop.correlated_tokens(1, n, d, 0.3, again, dtype=torch.float64)
    Xw = prop.tokens_with_cosine(n, 6, 0.3, again)
    assert laws["by_width"][0][1] == prop.uniform_attention_sq_norms(Xw, sigma, sigma, sigma, 2)
    assert laws["by_length"][1][0]["v"] > 0
    with pytest.raises(ValueError, match="n_tokens, d"):
        prop.jacobian_scaling_sweeps(X[None], 2, d_k=2, d_v=2, sigma=sigma, rho=0.3)


@pytest.mark.parametrize("rho,n,d", [(0.0, 4, 16), (0.2, 16, 64), (0.7, 9, 32), (0.95, 32, 40)])
def test_uniform_qk_v_ratio_is_the_square_root_of_the_jacobian_formulas_ratio(rho, n, d):
    X = prop.tokens_with_cosine(n, d, rho, torch.Generator().manual_seed(1)).double()
    sig = 1 / math.sqrt(d)
    f = prop.uniform_attention_sq_norms(X, sig, sig, sig, d_v=5)
    assert prop.uniform_qk_v_ratio(rho, n) == pytest.approx(math.sqrt(f["q"] / f["v"]), rel=1e-9)
    assert prop.uniform_qk_v_ratio(1.0, n) == 0.0
    with pytest.raises(ValueError):
        prop.uniform_qk_v_ratio(1.2, n)


def test_predicted_ratios_follow_the_mean_field_cosine_and_a_simulated_stack():
    """Layer l's prediction is the uniform ratio at the recursion's cosine of its input (layer 1: rho0); on a
    simulated stack at initialisation it lands within a factor of 2 of the measured ratio at every layer, and
    the unscaled post-LN one falls towards 0 with depth."""
    n, d, L, rho0 = 16, 64, 8, 0.2
    for ln, scaled in (("pre", False), ("post", True)):
        pred = prop.predicted_qk_v_ratios(L, rho0, n, layernorm=ln, scaled=scaled)
        mf = prop.meanfield_cosine(L, rho0, n, alpha=1 / math.sqrt(L) if scaled else 1.0, layernorm=ln)
        assert pred.shape == (L,) and pred[0] == pytest.approx(prop.uniform_qk_v_ratio(rho0, n))
        assert pred[-1] == pytest.approx(prop.uniform_qk_v_ratio(float(mf[L - 1]), n))
    X0 = prop.correlated_tokens(8, n, d, rho0, torch.Generator().manual_seed(0))
    grads = prop.grad_norms_by_config(X0, L, 4, [("pre", True)])["pre", True]
    measured = ((grads["q"] + grads["k"]) / (2 * grads["v"])).double()
    factor = (measured / prop.predicted_qk_v_ratios(L, rho0, n, layernorm="pre", scaled=True)).log().abs().exp()
    assert factor.max() < 2
    deep = prop.predicted_qk_v_ratios(32, rho0, n, layernorm="post", scaled=False)
    assert deep[-1] < 1e-3 * deep[0] and (deep[1:] <= deep[:-1]).all()


def test_pooled_ratios_are_root_mean_squares_over_stacks_and_both_weights():
    key = ("pre", True)
    one = {key: {"q": torch.tensor([3.0, 1.0]), "k": torch.tensor([3.0, 1.0]), "v": torch.tensor([1.0, 2.0])}}
    torch.testing.assert_close(prop.pooled_qk_v_ratios([one], key), torch.tensor([3.0, 0.5], dtype=torch.float64))
    # q and k pooled as squares, stacks too: sqrt(((1 + 49) / 2 + (25 + 25) / 2) / 2 / ((1 + 4) / 2))
    a = {key: {"q": torch.tensor([1.0]), "k": torch.tensor([7.0]), "v": torch.tensor([1.0])}}
    b = {key: {"q": torch.tensor([5.0]), "k": torch.tensor([5.0]), "v": torch.tensor([2.0])}}
    assert prop.pooled_qk_v_ratios([a, b], key).item() == pytest.approx(math.sqrt(25.0 / 2.5))
    with pytest.raises(ValueError, match="at least one stack"):
        prop.pooled_qk_v_ratios([], key)
