"""Tests of attnbook.heads.gates: the hard-concrete distribution against its closed forms, the L0 penalty,
HeadGates with the library's attention, and the pre-hook on a Hugging Face BERT model."""

from __future__ import annotations

import math

import pytest
import torch

from attnbook.heads import gates as G
from attnbook.core.attention import MultiHeadSelfAttention

LOG_ALPHAS = [-4.0, -2.0, -1.0, 0.0, 0.5, 1.0, 2.0, 4.0]
N_SAMPLES = 200_000


@pytest.mark.parametrize("la", LOG_ALPHAS)
def test_sampled_zeros_and_ones_match_closed_form(la):
    gen = torch.Generator().manual_seed(123)
    log_alpha = torch.full((N_SAMPLES,), la)
    g = G.sample_gates(log_alpha, generator=gen)
    assert g.min() >= 0 and g.max() <= 1
    for frac, p in (((g == 0).float().mean(), G.prob_zero(torch.tensor(la))),
                    ((g == 1).float().mean(), G.prob_one(torch.tensor(la)))):
        p = float(p)
        sd = math.sqrt(p * (1 - p) / N_SAMPLES)
        assert abs(float(frac) - p) <= 5 * sd + 1e-4, (la, float(frac), p)


def test_closed_forms_agree_with_exact_cdf():
    """P(g = 0) = P(s <= -l/(r-l)) with s = sigmoid((logit u + log_alpha)/beta), logit u ~ Logistic(0, 1)."""
    beta, (l, r) = G.TEMPERATURE, G.STRETCH
    for la in LOG_ALPHAS:
        t0 = -l / (r - l)
        p0 = 1 / (1 + math.exp(-(beta * math.log(t0 / (1 - t0)) - la)))
        assert float(G.prob_zero(torch.tensor(la))) == pytest.approx(p0, abs=1e-6)
        t1 = (1 - l) / (r - l)
        p1 = 1 - 1 / (1 + math.exp(-(beta * math.log(t1 / (1 - t1)) - la)))
        assert float(G.prob_one(torch.tensor(la))) == pytest.approx(p1, abs=1e-6)
    # the paper's formula for the expected L0 norm of a gate
    la = torch.linspace(-5, 5, 11)
    torch.testing.assert_close(G.prob_nonzero(la), torch.sigmoid(la - 0.33 * math.log(0.1 / 1.1)), atol=1e-6, rtol=0)


def test_sample_mean_matches_numerical_expectation():
    la = torch.tensor(0.7)
    gen = torch.Generator().manual_seed(0)
    g = G.sample_gates(la.expand(N_SAMPLES).clone(), generator=gen)
    u = torch.linspace(1e-6, 1 - 1e-6, 2_000_001, dtype=torch.float64)
    s = torch.sigmoid((torch.log(u) - torch.log1p(-u) + 0.7) / 0.33)
    expected = (s * 1.2 - 0.1).clamp(0, 1).mean()
    assert float(g.mean()) == pytest.approx(float(expected), abs=4 * float(g.std()) / math.sqrt(N_SAMPLES))


def test_deterministic_gates_official_formula():
    la = torch.tensor([-10.0, math.log(1 / 11), 0.0, math.log(11.0), 10.0])
    g = G.deterministic_gates(la)
    torch.testing.assert_close(g, (1.2 * torch.sigmoid(la) - 0.1).clamp(0, 1), atol=1e-6, rtol=0)
    assert g[0] == 0 and g[-1] == 1
    assert float(g[1]) == pytest.approx(0.0, abs=1e-6)
    assert float(g[3]) == pytest.approx(1.0, abs=1e-6)
    assert float(g[2]) == pytest.approx(0.5, abs=1e-6)


def test_sample_is_differentiable():
    la = torch.zeros(3, 4, requires_grad=True)
    g = G.sample_gates(la, generator=torch.Generator().manual_seed(0))
    g.sum().backward()
    assert la.grad is not None and la.grad.abs().sum() > 0


def test_l0_penalty_reductions():
    la = {"a": torch.zeros(2, 3), "b": torch.full((1, 3), 2.0)}
    p_a, p_b = float(G.prob_nonzero(torch.tensor(0.0))), float(G.prob_nonzero(torch.tensor(2.0)))
    assert float(G.l0_penalty(la, reduction="sum")) == pytest.approx(6 * p_a + 3 * p_b, rel=1e-6)
    assert float(G.l0_penalty(la)) == pytest.approx((3 * p_a * 2 + 3 * p_b) / 3, rel=1e-6)
    assert float(G.l0_penalty(torch.zeros(2, 3))) == pytest.approx(3 * p_a, rel=1e-6)


def test_head_gates_module_train_eval_and_penalty():
    hg = G.HeadGates({"enc_self": (2, 4), "dec_cross": (3, 4)}, init_log_alpha=3.0)
    hg.train()
    g = hg(torch.Generator().manual_seed(0))
    assert set(g) == {"enc_self", "dec_cross"} and g["dec_cross"].shape == (3, 4)
    hg.eval()
    g = hg()
    assert all(bool((t == 1).all()) for t in g.values())
    assert hg.n_open() == 20
    with torch.no_grad():
        hg.log_alpha["enc_self"][0, 1] = -5.0
    assert hg.n_open() == 19 and not bool(hg.open_mask()["enc_self"][0, 1])
    pen = hg.penalty()
    pen.backward()
    assert hg.log_alpha["enc_self"].grad is not None
    single = G.HeadGates((2, 3))
    assert set(single()) == {""}


def test_head_gates_drive_library_attention():
    torch.manual_seed(0)
    attn = MultiHeadSelfAttention(16, 4)
    x = torch.randn(2, 5, 16)
    hg = G.HeadGates((1, 4), init_log_alpha=0.0)
    hg.train()
    out, _ = attn(x, head_gates=hg()[""][0])
    out.pow(2).sum().backward()
    assert hg.log_alpha["all"].grad.abs().sum() > 0


@pytest.mark.parametrize(
    "call",
    [
        lambda: G.sample_gates([0.0, 1.0]),
        lambda: G.sample_gates(torch.tensor([1, 2])),
        lambda: G.sample_gates(torch.tensor([])),
        lambda: G.sample_gates(torch.tensor([float("nan")])),
        lambda: G.sample_gates(torch.zeros(2), temperature=0.0),
        lambda: G.sample_gates(torch.zeros(2), stretch=(0.0, 1.0)),
        lambda: G.prob_nonzero(torch.zeros(2), stretch=(-0.1, 0.9)),
        lambda: G.l0_penalty(torch.zeros(2), reduction="mean"),
        lambda: G.l0_penalty(torch.zeros(2)),
        lambda: G.l0_penalty({}),
        lambda: G.HeadGates((2, 0)),
        lambda: G.HeadGates((2, 3, 4)),
        lambda: G.HeadGates({}),
        lambda: G.HeadGates((2, 3), init_log_alpha=float("inf")),
    ],
)
def test_bad_input_raises(call):
    with pytest.raises(ValueError):
        call()


# --------------------------------------------------------------------------- Hugging Face pre-hook


def test_glorot_init_matches_the_official_range_and_is_seeded():
    """``init_log_alpha="glorot"`` draws U(-sqrt(3/heads), sqrt(3/heads)) (0.61 for 8 heads), so P(g != 0)
    starts between about 0.55 and 0.80 as in the official code; the same seed gives the same gates."""
    g = G.HeadGates({"enc_self": (6, 8)}, init_log_alpha="glorot", seed=3)
    la = g.log_alpha["enc_self"].detach()
    assert la.abs().max() <= math.sqrt(3 / 8) + 1e-6 and la.std() > 0.2
    p = g.expected_open()["enc_self"]
    assert 0.54 <= float(p.min()) and float(p.max()) <= 0.81 and float(p.max() - p.min()) > 0.15
    same = G.HeadGates({"enc_self": (6, 8)}, init_log_alpha="glorot", seed=3).log_alpha["enc_self"]
    other = G.HeadGates({"enc_self": (6, 8)}, init_log_alpha="glorot", seed=4).log_alpha["enc_self"]
    assert torch.equal(la, same.detach()) and not torch.equal(la, other.detach())
    with pytest.raises(ValueError, match="glorot"):
        G.HeadGates((2, 2), init_log_alpha="xavier")
