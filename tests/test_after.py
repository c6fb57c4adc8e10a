"""Tests of the library behind chapter "What came after": masked collapse, clusters on the sphere, shaped attention
and the skip path's share."""

from __future__ import annotations

import math

import pytest
import torch

from attnbook.core import norms
from attnbook.rank import masked_collapse as mc
from attnbook.rank import skip_share
from attnbook.rank import sphere_clusters as sc
from attnbook.signal import propagation as prop
from attnbook.signal import shaped_attention as sa


def test_masks_allow_what_their_names_say():
    full, causal = mc.attention_mask("full", 5), mc.attention_mask("causal", 5)
    window, cwin = mc.attention_mask("window", 5, window=1), mc.attention_mask("causal window", 5, window=2)
    assert full.all() and causal.sum() == 15 and not causal[0, 1] and causal[4, 0]
    assert window[2].tolist() == [False, True, True, True, False]
    assert cwin[4].tolist() == [False, False, True, True, True]
    assert all(m.diagonal().all() for m in (full, causal, window, cwin))
    with pytest.raises(ValueError, match="kind"):
        mc.attention_mask("local", 4)


def test_under_a_causal_mask_the_first_token_moves_alone_and_the_others_follow_it():
    torch.manual_seed(0)
    net = mc.pure_san(12, 16, 2)
    X = torch.randn(2, 6, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    other = X.clone()
    other[:, 1:] = torch.randn(2, 5, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    mask = mc.attention_mask("causal", 6)
    a, b = mc.masked_hidden(net, X, mask), mc.masked_hidden(net, other, mask)
    assert torch.equal(a[-1][:, 0], b[-1][:, 0])  # token 1 never sees the others
    gap = mc.distance_to_first_token(a)
    assert gap[-1] < 1e-2 * gap[0]
    full = mc.masked_hidden(net, X, None)
    assert not torch.allclose(full[-1][:, 0], a[-1][:, 0])  # without the mask it does


def test_residual_curves_pair_the_masks_on_the_same_nets():
    kw = dict(n_tokens=8, d_model=16, n_heads=2, depth=6, n_nets=2, n_inputs=3, seed=4)
    full, causal = mc.residual_curves("full", **kw), mc.residual_curves("causal", **kw)
    assert full.shape == (6, 7) and full.dtype == torch.float64
    assert torch.equal(full[:, 0], causal[:, 0])  # the same inputs
    assert (full[:, -1] < causal[:, -1]).all()  # full attention collapses faster


def test_decay_per_layer_and_layers_to_reach():
    assert mc.decay_per_layer(0.5 ** torch.arange(20.0)) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="need 3"):
        mc.decay_per_layer(torch.tensor([1.0, 1.0, 1e-20]))
    assert mc.layers_to_reach(16, 3) == 5 and mc.layers_to_reach(4, 3) == 1 and mc.layers_to_reach(1, 2) == 0


def test_sphere_tokens_stay_on_the_sphere_and_clusters_are_counted():
    tr = sc.simulate(10, 3, 1.0, steps=50, dt=0.1, generator=torch.Generator().manual_seed(0), every=10)
    assert tr.shape == (6, 10, 3) and torch.allclose(tr.norm(dim=-1), torch.ones(6, 10, dtype=torch.float64))
    pts = torch.tensor([[1.0, 0.0], [1.0, 1e-3], [0.0, 1.0], [-1.0, 0.0], [-1.0, 5e-3]], dtype=torch.float64)
    assert sc.count_clusters(pts) == 3 and sc.count_clusters(pts, tol=2.0) == 1
    chain = torch.tensor([[0.0, 0.0], [0.008, 0.0], [0.016, 0.0]])  # linked through the middle one
    assert sc.count_clusters(chain) == 1
    assert sc.clusters_over_time(tr)[0] == 10


def test_shaped_attention_is_the_identity_plus_a_centred_softmax():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(2, 5, 8, generator=g, dtype=torch.float64)
    W_Q, W_K = (torch.randn(8, 8, generator=g, dtype=torch.float64) for _ in range(2))
    A = sa.attention_matrix(X, W_Q, W_K, "shaped", tau0=1.0)
    assert torch.allclose(A.sum(-1), torch.ones(2, 5, dtype=torch.float64))  # rows still sum to one
    soft = ((X @ W_Q) @ (X @ W_K).transpose(-1, -2) / math.sqrt(8) / math.sqrt(8)).softmax(-1)
    assert torch.allclose(A, torch.eye(5, dtype=torch.float64) + soft - 0.2)
    flat = sa.attention_matrix(X, 0 * W_Q, W_K, "shaped")
    assert torch.allclose(flat, torch.eye(5, dtype=torch.float64).expand(2, 5, 5))  # zero logits: the identity
    with pytest.raises(ValueError, match="kind"):
        sa.attention_matrix(X, W_Q, W_K, "sparse")


def test_shaped_stacks_keep_the_token_cosine_and_softmax_stacks_collapse():
    X = prop.correlated_tokens(2, 8, 64, 0.2, torch.Generator().manual_seed(0), dtype=torch.float64)
    soft = sa.cosine_by_depth(X, 16, "softmax", generator=torch.Generator().manual_seed(1))
    shaped = sa.cosine_by_depth(X, 16, "shaped", generator=torch.Generator().manual_seed(1))
    assert soft.shape == (17,) and soft[-1] > 0.99
    assert abs(float(shaped[-1] - shaped[0])) < 0.2


def test_skip_share_follows_the_official_code():
    X = torch.tensor([[1.0, -2.0], [3.0, 0.5]])
    # ||X||_inf (largest row sum) 3.5 times ||X||_1 (largest column sum) 4: no square root, as in the code
    assert float(skip_share.composite_norm(X)) == pytest.approx(14.0)
    # the product of two norms grows with the square of a scale: 3 X counts 9 times
    assert skip_share.skip_share([X, X], [X, 3 * X]) == pytest.approx(2 / 12)
    assert skip_share.skip_share([X], [torch.zeros_like(X)]) == 1.0
    # the paper's norm (with the square root) compares the scales themselves: 3 X counts 3 times
    assert skip_share.skip_share([X, X], [X, 3 * X], norm=norms.norm_1_inf) == pytest.approx(2 / 6)
    with pytest.raises(ValueError, match="as many"):
        skip_share.skip_share([X], [])


def test_spearman_p_values_are_calibrated_under_independence_and_small_for_a_clear_relation():
    import numpy as np

    from attnbook.stats import spearman

    rng = np.random.default_rng(0)
    ps = [spearman(rng.normal(size=40), rng.normal(size=40))["p_less"] for _ in range(400)]
    assert 0.02 < np.mean(np.array(ps) < 0.05) < 0.09  # about 5% under the null
    x = rng.normal(size=40)
    clear = spearman(x, -x + 0.1 * rng.normal(size=40))
    assert clear["rho"] < -0.9 and clear["p_less"] < 1e-6 and clear["p_greater"] > 0.99
    with pytest.raises(ValueError, match="same length"):
        spearman([1, 2, 3], [1, 2])


def test_first_time_and_the_two_cluster_phase():
    times = [0.0, 5.0, 10.0, 15.0, 20.0]
    assert sc.first_time([9, 4, 2, 2, 1], times, 2) == 10.0 and sc.first_time([9, 4, 2, 2, 1], times, 1) == 20.0
    assert sc.first_time([9, 4, 3, 3, 3], times, 2) == math.inf
    assert sc.two_cluster_phase([9, 4, 2, 2, 1], times) == pytest.approx(1.0)  # (20 - 10) / 10
    assert sc.two_cluster_phase([9, 2, 2, 2, 1], times) == pytest.approx(3.0)  # (20 - 5) / 5
    assert sc.two_cluster_phase([9, 4, 2, 2, 2], times) == math.inf  # still two at the end
    assert math.isnan(sc.two_cluster_phase([9, 4, 3, 3, 3], times))
    with pytest.raises(ValueError, match="one count per time"):
        sc.first_time([1, 2], times, 1)
    with pytest.raises(ValueError, match="start in at most two"):
        sc.two_cluster_phase([2, 1, 1, 1, 1], times)
