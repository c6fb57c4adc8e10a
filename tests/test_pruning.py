"""Tests of attnbook.pruning: Michel et al.'s head importance and step-by-step pruning."""

from __future__ import annotations

import pytest
import torch

from attnbook import pruning as P
from attnbook.attention import MultiHeadSelfAttention


def linear_loss(a):
    """loss = sum a * xi: dL/dxi = a exactly."""
    return lambda batch, masks: (masks["enc"] * a).sum() * batch


def test_importance_is_abs_gradient_layer_normalised():
    a = torch.tensor([[1.0, -2.0, 2.0], [0.0, 3.0, -4.0]])
    masks = P.full_masks({"enc": (2, 3)})
    raw = P.head_importance(linear_loss(a), masks, [1.0, 3.0], normalize=False)["enc"]
    assert torch.allclose(raw, 2 * a.abs())  # mean of |1 a| and |3 a|
    imp = P.head_importance(linear_loss(a), masks, [1.0, 3.0])["enc"]
    assert torch.allclose(imp, a.abs() / a.abs().norm(dim=1, keepdim=True))
    assert torch.allclose(imp.norm(dim=1), torch.ones(2))


def test_prune_least_important_skips_pruned_heads():
    imp = {"enc": torch.tensor([[0.1, 0.5, 0.2], [0.05, 0.9, 0.3]])}
    masks = P.full_masks({"enc": (2, 3)})
    m1 = P.prune_least_important(imp, masks, 2)
    assert m1["enc"].tolist() == [[0, 1, 1], [0, 1, 1]]
    m2 = P.prune_least_important(imp, m1, 1)  # next least important among kept: 0.2
    assert m2["enc"].tolist() == [[0, 1, 0], [0, 1, 1]]
    assert P.count_kept(m2) == 3


def test_prune_across_types():
    imp = {"a": torch.tensor([[0.3, 0.1]]), "b": torch.tensor([[0.2], [0.05]])}
    masks = P.full_masks({"a": (1, 2), "b": (2, 1)})
    m = P.prune_least_important(imp, masks, 2)
    assert m["a"].tolist() == [[1, 0]] and m["b"].tolist() == [[1], [0]]


def test_step_by_step_on_a_real_attention_model():
    """The training/pruning path run for a few steps on a tiny gated attention model."""
    torch.manual_seed(0)
    layers = torch.nn.ModuleList(MultiHeadSelfAttention(8, 2) for _ in range(2))
    x = torch.randn(4, 5, 8)
    target = torch.randn(4, 5, 8)

    def forward(masks):
        h = x
        for i, layer in enumerate(layers):
            out, _ = layer(h, head_gates=masks[""][i])
            h = h + out
        return h

    def loss_fn(batch, masks):
        return (forward(masks) - target).pow(2).mean()

    def score(masks):
        with torch.no_grad():
            return float(torch.cosine_similarity(forward(masks).flatten(), forward({"": torch.ones(2, 2)}).flatten(), dim=0))

    records = P.prune_step_by_step(loss_fn, score, torch.ones(2, 2), [0, 1], n_per_step=1, min_heads=1)
    assert [r["n_kept"] for r in records] == [4, 3, 2, 1]
    assert records[0]["score"] == pytest.approx(1.0, abs=1e-6)
    assert all(P.count_kept(r["masks"]) == r["n_kept"] for r in records)
    # masks are nested: a pruned head stays pruned
    for r0, r1 in zip(records, records[1:]):
        assert bool(((r1["masks"][""] != 0) <= (r0["masks"][""] != 0)).all())
    once = P.prune_step_by_step(loss_fn, score, torch.ones(2, 2), [0], n_per_step=2, recompute=False)
    assert [r["n_kept"] for r in once] == [4, 2, 1]


@pytest.mark.parametrize(
    "call",
    [
        lambda: P.full_masks((2,)),
        lambda: P.full_masks({"a": (0, 2)}),
        lambda: P.head_importance(linear_loss(torch.ones(1, 2)), {"enc": torch.ones(1, 2)}, []),
        lambda: P.head_importance(lambda b, m: torch.ones(2, requires_grad=True), torch.ones(1, 2), [0]),
        lambda: P.head_importance(lambda b, m: m[""].sum(), torch.ones(2), [0]),
        lambda: P.head_importance(lambda b, m: m[""].sum(), {}, [0]),
        lambda: P.prune_least_important({"a": torch.ones(1, 2)}, {"a": torch.ones(1, 2)}, 3),
        lambda: P.prune_least_important({"a": torch.ones(1, 2)}, {"b": torch.ones(1, 2)}, 1),
        lambda: P.prune_step_by_step(lambda b, m: m[""].sum(), lambda m: 0.0, torch.ones(1, 2), [0], n_per_step=0),
        lambda: P.prune_step_by_step(lambda b, m: m[""].sum(), lambda m: 0.0, torch.ones(1, 2), [0], n_per_step=1, min_heads=3),
        lambda: P.prune_step_by_step(lambda b, m: m[""].sum(), lambda m: 0.0, torch.ones(1, 2), iter([0]), n_per_step=1),
    ],
)
def test_bad_input_raises(call):
    with pytest.raises(ValueError):
        call()
