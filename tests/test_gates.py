"""Tests of attnbook.gates: the hard-concrete distribution against its closed forms, the L0 penalty,
HeadGates with the library's attention, and the pre-hook on a Hugging Face BERT model."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from attnbook import gates as G
from attnbook.attention import MultiHeadSelfAttention

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


@pytest.fixture(scope="module")
def tiny_bert():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.BertConfig(
        vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=32, attn_implementation="eager",
    )
    model = transformers.BertModel(cfg).eval()
    ids = torch.randint(0, 50, (3, 7))
    return model, ids


def test_hook_identity_and_zero_head_equals_weight_surgery(tiny_bert):
    model, ids = tiny_bert
    ref = model(input_ids=ids).last_hidden_state
    with G.attach_head_gates(model) as hooks:
        assert hooks.shape == (2, 4)
        hooks.gates = torch.ones(2, 4)
        torch.testing.assert_close(model(input_ids=ids).last_hidden_state, ref, atol=1e-6, rtol=0)
        g = torch.ones(2, 4)
        g[1, 2] = 0.0
        hooks.gates = g
        gated = model(input_ids=ids).last_hidden_state
    # same as zeroing the columns of head (1, 2) in the output projection
    dense = model.encoder.layer[1].attention.output.dense
    saved = dense.weight.detach().clone()
    with torch.no_grad():
        dense.weight[:, 16:24] = 0.0
    surgery = model(input_ids=ids).last_hidden_state
    with torch.no_grad():
        dense.weight.copy_(saved)
    torch.testing.assert_close(gated, surgery, atol=1e-5, rtol=0)
    assert (gated - ref).abs().max() > 1e-3
    # hooks removed: model back to normal
    torch.testing.assert_close(model(input_ids=ids).last_hidden_state, ref, atol=1e-6, rtol=0)


def test_hook_passes_gradients(tiny_bert):
    model, ids = tiny_bert
    hooks = G.attach_head_gates(model)
    xi = torch.ones(2, 4, requires_grad=True)
    hooks.gates = xi
    model(input_ids=ids).last_hidden_state.pow(2).mean().backward()
    hooks.remove()
    assert xi.grad is not None and (xi.grad != 0).all()


def test_hook_bad_input(tiny_bert):
    model, ids = tiny_bert
    with G.attach_head_gates(model) as hooks:
        hooks.gates = torch.ones(3, 4)
        with pytest.raises(ValueError):
            model(input_ids=ids)
    with pytest.raises(ValueError):
        G.output_projections(torch.nn.Linear(3, 3))
    with pytest.raises(ValueError):
        G.attach_head_gates(model, n_heads=5)
    with pytest.raises(ValueError):
        G.GateHooks([], 4)


def test_hook_gates_a_distilbert_model_too():
    """DistilBERT's output projection is ``transformer.layer[i].attention.out_lin``: gating head (0, 1) equals
    zeroing its columns there."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(1)
    cfg = transformers.DistilBertConfig(vocab_size=40, dim=16, n_layers=2, n_heads=2, hidden_dim=32,
                                        max_position_embeddings=16, attn_implementation="eager")
    model = transformers.DistilBertModel(cfg).eval()
    ids = torch.randint(0, 40, (2, 6), generator=torch.Generator().manual_seed(2))
    projections = G.output_projections(model)
    assert projections == [layer.attention.out_lin for layer in model.transformer.layer]
    g = torch.ones(2, 2)
    g[0, 1] = 0.0
    with torch.no_grad(), G.attach_head_gates(model) as hooks:
        hooks.gates = g
        gated = model(input_ids=ids).last_hidden_state
    surgery = copy.deepcopy(model)
    with torch.no_grad():
        surgery.transformer.layer[0].attention.out_lin.weight[:, 8:16] = 0.0
        expected = surgery(input_ids=ids).last_hidden_state
    torch.testing.assert_close(gated, expected, atol=1e-5, rtol=1e-5)
    with torch.no_grad():
        assert (gated - model(input_ids=ids).last_hidden_state).abs().max() > 1e-3


def _constant_task(model, batch, head_gates):
    """A task loss that does not depend on the gates (so only the L0 penalty can move them)."""
    return (model(batch)[0] ** 2).mean()


def test_train_gates_minimises_task_plus_lambda_penalty():
    """Eq. gate-objective: the optimised loss is L_task + lambda L_C at every step, and the penalty alone closes
    gates. Adam's first step moves each parameter by lr * g / (|g| + eps), i.e. by its learning rate (here
    |g| ~ 1e-2, so eps = 1e-8 changes it by 1e-6 of a step): with a gate-free task loss every log_alpha goes
    from 3 to 3 - gate_lr, not to 3 - lr."""
    torch.manual_seed(0)
    attn = MultiHeadSelfAttention(8, 2)
    x = torch.randn(4, 5, 8)
    kw = dict(lr=1e-4, gate_lr=0.05, schedule="constant", warmup=0, clip=None, progress=False, seed=0, device="cpu")
    hg = G.HeadGates((1, 2), init_log_alpha=3.0)
    hist = G.train_gates(attn, hg, _constant_task, [x], lam=0.5, steps=1, **kw)
    assert hist["penalty"][0] == pytest.approx(2 * float(G.prob_nonzero(torch.tensor(3.0))), rel=1e-6)
    assert hist["loss"][0] == pytest.approx(hist["task_loss"][0] + 0.5 * hist["penalty"][0], rel=1e-6)
    torch.testing.assert_close(hg.log_alpha["all"].detach(), torch.full((1, 2), 3.0 - 0.05), atol=1e-5, rtol=0)
    assert float(hg.penalty().detach()) < hist["penalty"][0]
    hist = G.train_gates(attn, G.HeadGates((1, 2)), _constant_task, [x], lam=2.0, steps=5, **kw)
    for total, task, pen in zip(hist["loss"], hist["task_loss"], hist["penalty"]):
        assert total == pytest.approx(task + 2.0 * pen, rel=1e-6)
    hg0 = G.HeadGates((1, 2), init_log_alpha=3.0)  # lambda = 0 and a gate-free task: the gates never move
    G.train_gates(attn, hg0, _constant_task, [x], lam=0.0, steps=3, **kw)
    torch.testing.assert_close(hg0.log_alpha["all"].detach(), torch.full((1, 2), 3.0), atol=1e-6, rtol=0)


def test_train_gates_passes_sampled_gates_to_the_task():
    """In training the task sees hard-concrete samples, not the evaluation gate; afterwards the gates are left
    in eval mode."""
    seen = []

    def task(model, batch, head_gates):
        seen.append(head_gates[""].detach().clone())
        return (model(batch, head_gates=head_gates[""][0])[0] ** 2).mean()

    torch.manual_seed(0)
    attn = MultiHeadSelfAttention(8, 2)
    hg = G.HeadGates((1, 2), init_log_alpha=0.0)
    G.train_gates(attn, hg, task, [torch.randn(2, 3, 8)], lam=0.1, steps=20, progress=False, seed=0, device="cpu")
    values = torch.cat([g.flatten() for g in seen])
    # log_alpha stays near 0, where the evaluation gate is about 0.5 while a sample is exactly 0 with
    # probability 0.31 and exactly 1 with probability 0.31 (prob_zero, prob_one): 40 samples show both
    assert len(seen) == 20 and bool((values == 0).any()) and bool((values == 1).any())
    assert not hg.training


def test_train_gates_closes_gates_of_useless_heads():
    """The gate training path for a few steps: a model whose loss ignores heads 2, 3 closes their gates."""
    torch.manual_seed(0)
    attn = MultiHeadSelfAttention(8, 4)
    x = torch.randn(8, 5, 8)
    with torch.no_grad():
        target, _ = attn(x, head_gates=torch.tensor([1.0, 1.0, 0.0, 0.0]))

    def task_loss(model, batch, head_gates):
        out, _ = model(batch, head_gates=head_gates[""][0])
        return (out - target).pow(2).mean() * 100

    attn.requires_grad_(False)
    hg = G.HeadGates((1, 4))
    hist = G.train_gates(attn, hg, task_loss, [x], lam=0.5, steps=150, gate_lr=0.1, record_every=50, schedule="constant", warmup=0,
                         progress=False, seed=0, device="cpu")
    assert [s["step"] for s in hist["snapshots"]] == [0, 49, 99, 149, 150]
    assert len(hist["task_loss"]) == len(hist["penalty"]) == 150
    kept = hg.open_mask()[""][0].tolist()
    assert kept == [True, True, False, False]
    with pytest.raises(ValueError):
        G.train_gates(attn, hg, task_loss, [x], lam=-1.0, steps=1)
    with pytest.raises(ValueError):
        G.Gated(attn, "not gates")


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
