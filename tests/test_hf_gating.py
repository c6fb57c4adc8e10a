"""Tests of attnbook.hf.gating: head gates on Hugging Face BERT-like models through forward pre-hooks."""

from __future__ import annotations

import copy

import pytest
import torch

from attnbook.hf import gating as G


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
        with hooks.gating(torch.ones(2, 4)):
            torch.testing.assert_close(model(input_ids=ids).last_hidden_state, ref, atol=1e-6, rtol=0)
        g = torch.ones(2, 4)
        g[1, 2] = 0.0
        with hooks.gating(g):
            gated = model(input_ids=ids).last_hidden_state
        # outside the block the model runs ungated again
        torch.testing.assert_close(model(input_ids=ids).last_hidden_state, ref, atol=1e-6, rtol=0)
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
    with hooks.gating(xi):
        model(input_ids=ids).last_hidden_state.pow(2).mean().backward()
    hooks.remove()
    assert xi.grad is not None and (xi.grad != 0).all()


def test_hook_bad_input(tiny_bert):
    model, ids = tiny_bert
    with G.attach_head_gates(model) as hooks:
        with pytest.raises(ValueError, match="shape"):
            with hooks.gating(torch.ones(3, 4)):
                model(input_ids=ids)
    with pytest.raises(ValueError, match="removed"):
        with hooks.gating(torch.ones(2, 4)):
            pass
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
    with torch.no_grad(), G.attach_head_gates(model) as hooks, hooks.gating(g):
        gated = model(input_ids=ids).last_hidden_state
    surgery = copy.deepcopy(model)
    with torch.no_grad():
        surgery.transformer.layer[0].attention.out_lin.weight[:, 8:16] = 0.0
        expected = surgery(input_ids=ids).last_hidden_state
    torch.testing.assert_close(gated, expected, atol=1e-5, rtol=1e-5)
    with torch.no_grad():
        assert (gated - model(input_ids=ids).last_hidden_state).abs().max() > 1e-3




def test_per_token_gates_scale_one_head_at_one_token(tiny_bert):
    """Gates of shape (batch, layers, heads, tokens) (Michel et al.'s per-token importance) scale one head
    at one token: at the last layer, only that token's output changes."""
    model, ids = tiny_bert
    g = torch.ones(3, 2, 4, 7)
    with torch.no_grad(), G.attach_head_gates(model) as hooks:
        with hooks.gating(g):
            full = model(input_ids=ids).last_hidden_state
        g[0, 1, 2, 5] = 0.0
        with hooks.gating(g):
            cut = model(input_ids=ids).last_hidden_state
    changed = (full - cut).abs().amax(dim=-1)
    assert changed[0, 5] > 1e-4
    changed[0, 5] = 0
    assert changed.max() == 0
