"""Tests of attnbook.heads.gate_training: Voita et al.'s gate fine-tuning through the book's training loop."""

from __future__ import annotations

import copy

import pytest
import torch

from attnbook.heads import gate_training as GT
from attnbook.heads import gates as G
from attnbook.core.attention import MultiHeadSelfAttention
from attnbook.heads.seq2seq import Seq2SeqConfig, Seq2SeqTransformer


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
    hist = GT.train_gates(attn, hg, _constant_task, [x], lam=0.5, steps=1, **kw)
    assert hist["penalty"][0] == pytest.approx(2 * float(G.prob_nonzero(torch.tensor(3.0))), rel=1e-6)
    assert hist["loss"][0] == pytest.approx(hist["task_loss"][0] + 0.5 * hist["penalty"][0], rel=1e-6)
    torch.testing.assert_close(hg.log_alpha["all"].detach(), torch.full((1, 2), 3.0 - 0.05), atol=1e-5, rtol=0)
    assert float(hg.penalty().detach()) < hist["penalty"][0]
    hist = GT.train_gates(attn, G.HeadGates((1, 2)), _constant_task, [x], lam=2.0, steps=5, **kw)
    for total, task, pen in zip(hist["loss"], hist["task_loss"], hist["penalty"]):
        assert total == pytest.approx(task + 2.0 * pen, rel=1e-6)
    hg0 = G.HeadGates((1, 2), init_log_alpha=3.0)  # lambda = 0 and a gate-free task: the gates never move
    GT.train_gates(attn, hg0, _constant_task, [x], lam=0.0, steps=3, **kw)
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
    GT.train_gates(attn, hg, task, [torch.randn(2, 3, 8)], lam=0.1, steps=20, progress=False, seed=0, device="cpu")
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
    hist = GT.train_gates(attn, hg, task_loss, [x], lam=0.5, steps=150, gate_lr=0.1, record_every=50, schedule="constant", warmup=0,
                         progress=False, seed=0, device="cpu")
    assert [s["step"] for s in hist["snapshots"]] == [0, 49, 99, 149, 150]
    assert len(hist["task_loss"]) == len(hist["penalty"]) == 150
    kept = hg.open_mask()[""][0].tolist()
    assert kept == [True, True, False, False]
    with pytest.raises(ValueError):
        GT.train_gates(attn, hg, task_loss, [x], lam=-1.0, steps=1)
    with pytest.raises(ValueError):
        GT.Gated(attn, "not gates")




def test_fine_tuning_with_fixed_masks_trains_only_the_encoder_and_leaves_masked_heads():
    """Michel et al.'s masks given the gates' fine-tuning: with encoder heads pruned only the encoder
    trains (the decoder is exactly unchanged), a masked head gets no gradient (its query rows do not
    move), the others do, and the input model is left unchanged."""
    torch.manual_seed(0)
    model = Seq2SeqTransformer(Seq2SeqConfig(vocab_size=20, d_model=16, n_heads=2, enc_layers=2, dec_layers=1,
                                             d_ff=32, dropout=0.0, max_len=8))
    original = copy.deepcopy(model.state_dict())
    src = torch.tensor([[5, 6, 7, 2], [8, 9, 2, 0]])
    tgt = torch.tensor([[1, 10, 11, 12, 2], [1, 13, 2, 0, 0]])
    mask = {"enc_self": torch.tensor([[1.0, 0.0], [1.0, 1.0]])}
    tuned, hist = GT.fine_tune_with_masks(model, lambda step: (src, tgt), mask, kinds=["enc_self"], steps=4,
                                       lr=1e-2, label_smoothing=0.1, clip=1.0, seed=0, device="cpu")
    assert len(hist["loss"]) == 4 and hist["loss"][-1] < hist["loss"][0]
    for k, v in model.state_dict().items():
        assert torch.equal(v, original[k]), f"{k}: the input model changed"
    after = tuned.state_dict()
    assert all(torch.equal(after[k], original[k]) for k in original if k.startswith("decoder."))
    q = "encoder.0.self_attn.q.weight"
    assert torch.equal(after[q][8:], original[q][8:]) and not torch.equal(after[q][:8], original[q][:8])
