"""Tests of attnbook.heads.importance: Michel et al.'s head importance and step-by-step pruning."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from attnbook.heads import importance as P
from attnbook.core.attention import MultiHeadSelfAttention


def linear_loss(a):
    """loss = sum a * xi: dL/dxi = a exactly."""
    return lambda batch, masks: (masks["enc"] * a).sum() * batch


def test_importance_is_abs_gradient_layer_normalised():
    a = torch.tensor([[1.0, -2.0, 2.0], [0.0, 3.0, -4.0]])
    masks = P.full_masks({"enc": (2, 3)})
    raw = P.head_importance(linear_loss(a), masks, [1.0, 3.0], normalize=False)["enc"]
    assert_close(raw, 2 * a.abs(), atol=1e-6, rtol=0)  # mean of |1 a| and |3 a|
    imp = P.head_importance(linear_loss(a), masks, [1.0, 3.0])["enc"]
    assert_close(imp, a.abs() / a.abs().norm(dim=1, keepdim=True), atol=1e-6, rtol=0)
    assert_close(imp.norm(dim=1), torch.ones(2), atol=1e-6, rtol=0)


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


def test_importance_is_scored_once_unless_told_to_recompute():
    """The authors' code ranks the heads once (one loss_fn call per batch); ``recompute=True`` (their
    ``--exact_pruning``) re-scores the remaining heads before every step. Here the loss makes the kept head with the lowest index the
    least important at the current masks, so only re-scoring prunes heads 0, 1, 2 in that order."""
    calls = []

    def loss_fn(batch, masks):
        calls.append(1)
        m = masks[""]
        kept = (m.detach() != 0).flatten()
        first = int(kept.nonzero()[0]) if kept.any() else 0
        weights = torch.full((4,), 10.0)
        weights[first] = 1.0  # the first kept head matters least
        return (m.flatten() * weights).sum()

    records = P.prune_step_by_step(loss_fn, lambda m: 0.0, torch.ones(1, 4), [0, 1], n_per_step=1, min_heads=1,
                                   recompute=True)
    assert [r["masks"][""].tolist() for r in records] == [[[1, 1, 1, 1]], [[0, 1, 1, 1]], [[0, 0, 1, 1]], [[0, 0, 0, 1]]]
    assert len(calls) == 3 * 2  # three scorings of two batches
    calls.clear()
    records = P.prune_step_by_step(loss_fn, lambda m: 0.0, torch.ones(1, 4), [0, 1], n_per_step=1, min_heads=1)
    assert len(calls) == 2 and records[-1]["masks"][""].tolist() == [[0, 0, 0, 1]]  # ties: pruned in index order


def test_per_token_importance_takes_the_absolute_value_at_each_position():
    """With ``queries``, the mask reaches the loss as one gate per sentence and position and |.| is taken
    there (the authors' estimator): a head whose effects cancel across positions still scores the sum of
    their sizes, while the whole-batch estimator sees only what is left after cancelling."""
    # loss = sum over sentences b and positions t of xi[b, l, h, t] * c[b, l, h, t]
    c = torch.tensor([[[[1.0, -1.0, 2.0]], [[0.5, 0.5, 0.5]]]])  # (1 sentence, 2 layers, 1 head, 3 positions)

    def loss_fn(batch, masks):
        m = masks["enc"]
        return (m * c).sum() if m.ndim == 4 else (m * c.sum(dim=(0, 3))).sum()

    per_token = P.head_importance(loss_fn, {"enc": torch.ones(2, 1)}, [0], normalize=False,
                                  queries=lambda batch: {"enc": (1, 3)})["enc"]
    whole = P.head_importance(loss_fn, {"enc": torch.ones(2, 1)}, [0], normalize=False)["enc"]
    assert per_token.flatten().tolist() == [4.0, 1.5]
    assert whole.flatten().tolist() == [2.0, 1.5]
    with pytest.raises(ValueError, match="queries"):
        P.head_importance(loss_fn, {"enc": torch.ones(2, 1)}, [0], queries=lambda batch: {"dec": (1, 3)})


def test_per_token_importance_of_the_translation_model_bounds_the_whole_batch_one():
    """On a real (tiny) seq2seq model the per-position gates sum to the per-sentence gradient, so by the
    triangle inequality the per-token importance is at least the whole-batch one, head by head; and the
    authors' estimator differs from the variant (it is not the same computation under another name)."""
    from attnbook.heads.seq2seq import Seq2SeqConfig, Seq2SeqTransformer

    torch.manual_seed(0)
    model = Seq2SeqTransformer(Seq2SeqConfig(vocab_size=20, d_model=16, n_heads=2, enc_layers=2, dec_layers=1,
                                             d_ff=32, dropout=0.0, attention_dropout=0.0, max_len=16))
    model.eval()
    src = torch.randint(3, 20, (3, 7))
    tgt = torch.cat([torch.ones(3, 1, dtype=torch.long), torch.randint(3, 20, (3, 5))], dim=1)

    def loss_fn(batch, masks):
        return model.loss(*batch, head_gates=masks)

    def queries(batch):
        s, t = batch
        return {"enc_self": (s.shape[0], s.shape[1]), "dec_self": (t.shape[0], t.shape[1] - 1)}

    masks = {"enc_self": torch.ones(2, 2), "dec_self": torch.ones(1, 2)}
    per_token = P.head_importance(loss_fn, masks, [(src, tgt)], normalize=False, queries=queries)
    whole = P.head_importance(loss_fn, masks, [(src, tgt)], normalize=False)
    for kind in masks:
        assert (per_token[kind] >= whole[kind] - 1e-6).all()
    assert any((per_token[k] > whole[k] * 1.01).any() for k in masks)


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
