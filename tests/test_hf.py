"""Tests of attnbook.hf (loading, surgery into SAN variants, the Fig. 2 measure) and attnbook.core.text."""

from __future__ import annotations

import time

import pytest
import torch
from torch import nn

from attnbook import hf as pt
from attnbook.core.norms import relative_residual
from attnbook.core.text import english_sentences

transformers = pytest.importorskip("transformers")

#: float32 layers recomputed from their recorded inputs: the same operations, possibly in another order or
#: kernel, agree to a few units of 1e-7 per op; 1e-5 leaves room and is far below a real surgery error (O(1))
F32 = dict(atol=1e-5, rtol=1e-5)
from transformers import AutoConfig, AutoModel, BertTokenizer  # noqa: E402

TINY = {
    "bert": dict(hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=64),
    "albert": dict(hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=64,
                   embedding_size=16, num_hidden_groups=1, inner_group_num=1, hidden_act="gelu_new"),
    "xlnet": dict(d_model=32, n_layer=3, n_head=4, d_inner=64),
}


def tiny_model(kind: str, seed: int = 0) -> nn.Module:
    config = AutoConfig.for_model(kind, vocab_size=100, **TINY[kind])
    torch.manual_seed(seed)
    return AutoModel.from_config(config, attn_implementation="eager").eval()


def tiny_batch(n_sequences: int = 2, n_tokens: int = 10) -> dict:
    ids = torch.randint(5, 100, (n_sequences, n_tokens), generator=torch.Generator().manual_seed(1))
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def capture(module: nn.Module, what: str = "output"):
    """Record a module's first positional input or its (first) output on every call."""
    calls = []
    if what == "input":
        handle = module.register_forward_pre_hook(lambda m, a: calls.append(a[0].detach()))
    else:
        handle = module.register_forward_hook(
            lambda m, a, o: calls.append((o[0] if isinstance(o, tuple) else o).detach())
        )
    return calls, handle


# --------------------------------------------------------------------------------------------- text


def test_english_sentences():
    s = english_sentences()
    assert len(s) > 2000 and all(isinstance(x, str) and x for x in s)
    assert s[0].startswith("In the beginning")
    assert not any("<" in x or ">" in x for x in s), "markup left in the sample"
    assert english_sentences(5) == s[:5]
    for bad in (0, -1, 2.5, True, len(s) + 1):
        with pytest.raises(ValueError):
            english_sentences(bad)


def test_text_batch_has_exactly_n_real_tokens():
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + "in the beginning god created heavens and earth , .".split()
    tok = _tokenizer(vocab)
    batch = pt.text_batch(tok, 3, 12)
    assert batch["input_ids"].shape == (3, 12) and bool(batch["attention_mask"].all())
    assert (batch["input_ids"][:, 0] == tok.cls_token_id).all()
    assert (batch["input_ids"][:, -1] == tok.sep_token_id).all()
    assert (batch["input_ids"] != tok.pad_token_id).all()
    with pytest.raises(ValueError):
        pt.text_batch(tok, 0, 12)
    with pytest.raises(ValueError):
        pt.text_batch(tok, 2, 2)
    with pytest.raises(ValueError, match="not enough text"):
        pt.text_batch(tok, 2, 500, sentences=["in the beginning"])


def _tokenizer(vocab, folder=None):
    import tempfile
    from pathlib import Path

    folder = Path(folder or tempfile.mkdtemp())
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tok = BertTokenizer(vocab=str(folder / "vocab.txt"))  # transformers 5: vocab_file= would map all to [UNK]
    assert tok.unk_token_id not in tok(vocab[5])["input_ids"], "the test vocabulary was not read"
    return tok


# ------------------------------------------------------------------------------------------ loading


def test_load_pretrained_from_a_saved_folder(tmp_path, monkeypatch):
    """The load-by-name path, on a tiny random BertModel saved with save_pretrained (no network)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model = tiny_model("bert")
    model.save_pretrained(tmp_path)
    tok = _tokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "in", "the", "beginning"], tmp_path)
    tok.save_pretrained(tmp_path)
    loaded, tokenizer = pt.load_pretrained(str(tmp_path))
    assert not loaded.training and pt.architecture(loaded) == "bert"
    batch = tiny_batch()
    with torch.no_grad():
        a = model(**batch).last_hidden_state
        b = loaded(**batch, output_attentions=True)
    torch.testing.assert_close(a, b.last_hidden_state, **F32)
    assert b.attentions[0] is not None, "eager attention must return attention matrices"
    assert tokenizer("in the beginning")["input_ids"][0] == tokenizer.cls_token_id
    # the loaded model goes through the whole pipeline
    curves = pt.residual_curves(loaded, batch)
    assert set(curves) == set(pt.VARIANTS) and curves["SAN"].shape == (4, 2)


def test_offline_fallback_is_fast_and_says_so(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.perf_counter()
    assert pt.hub_reachable() is False
    models, message = pt.load_paper_models(names=("bert-base-cased-not-cached-here",))
    assert models == {}
    assert "Offline" in message and "all-MiniLM-L6-v2" in message
    assert time.perf_counter() - start < 30


def test_hub_reachable_times_out_quickly(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # discard port: nothing listens
    start = time.perf_counter()
    assert pt.hub_reachable(timeout=1.0) is False
    assert time.perf_counter() - start < 5
    with pytest.raises(ValueError):
        pt.hub_reachable(timeout=0)


def test_load_pretrained_rejects_bad_names():
    for bad in ("", "   ", None, 3):
        with pytest.raises(ValueError):
            pt.load_pretrained(bad)
    with pytest.raises(ValueError):
        pt.load_paper_models(names="bert-base-cased")


def test_minilm_source_is_the_shipped_folder_or_the_hub_name():
    src = pt.minilm_source()
    assert src == pt.MINILM_HUB_NAME or src.endswith("model")


def test_init_model_has_the_papers_sizes():
    model = pt.init_model("albert-base-v2", seed=3, vocab_size=123)
    c = model.config
    assert (c.hidden_size, c.num_hidden_layers, c.num_attention_heads, c.embedding_size) == (768, 12, 12, 128)
    assert c.vocab_size == 123 and c.num_hidden_groups == 1
    again = pt.init_model("albert-base-v2", seed=3, vocab_size=123)
    torch.testing.assert_close(model.encoder.embedding_hidden_mapping_in.weight,
                               again.encoder.embedding_hidden_mapping_in.weight, atol=0, rtol=0)  # same draws
    assert pt.BASE_CONFIGS["bert-base-cased"]["hidden_size"] == 768
    assert pt.BASE_CONFIGS["xlnet-base-cased"]["n_layer"] == 12
    with pytest.raises(ValueError):
        pt.init_model("gpt2")
    with pytest.raises(ValueError):
        pt.init_model("bert-base-cased", vocab_size=0)


# ------------------------------------------------------------------------------------------ surgery


@pytest.mark.parametrize("kind", ["bert", "albert", "xlnet"])
def test_layer_outputs_match_output_hidden_states(kind):
    model, batch = tiny_model(kind), tiny_batch()
    hs = pt.layer_outputs(model, batch)
    with torch.no_grad():
        ref = model(**batch, output_hidden_states=True).hidden_states
    assert len(hs) == len(ref) == 4
    for a, b in zip(hs, ref):
        torch.testing.assert_close(a, b, **F32)


@pytest.mark.parametrize("kind", ["bert", "albert", "xlnet"])
def test_variants_restore_the_model(kind):
    model, batch = tiny_model(kind), tiny_batch()
    before = pt.layer_outputs(model, batch)
    modules = [type(m) for m in model.modules()]
    curves = pt.residual_curves(model, batch)
    after = pt.layer_outputs(model, batch)
    for a, b in zip(before, after):
        torch.testing.assert_close(a, b, **F32)
    assert [type(m) for m in model.modules()] == modules
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())
    torch.testing.assert_close(torch.as_tensor(curves["Transformer"]),
                               torch.stack([relative_residual(h) for h in before]), **F32)
    # a SAN of these sizes collapses: the residual falls by orders of magnitude
    assert curves["SAN"][-1].max() < 1e-2 * curves["SAN"][0].min()


def test_bert_surgery_is_the_papers():
    model, batch = tiny_model("bert"), tiny_batch()
    layer = model.encoder.layer[0]
    so = layer.attention.output
    for name in pt.VARIANTS:
        ctx, h1 = capture(layer.attention.self)
        with pt.variant(model, name):
            hs = pt.layer_outputs(model, batch)
        h1.remove()
        keep_skip, keep_mlp = pt.VARIANT_SWITCHES[name]
        with torch.no_grad():
            attn = so.LayerNorm(so.dense(ctx[0]) + (hs[0] if keep_skip else 0))  # no skip: LN kept
            expected = layer.output(layer.intermediate(attn), attn) if keep_mlp else attn
        torch.testing.assert_close(hs[1], expected, msg=name, **F32)


def test_albert_surgery_patches_the_shared_layer_everywhere():
    model, batch = tiny_model("albert"), tiny_batch()
    layer = model.encoder.albert_layer_groups[0].albert_layers[0]
    att = layer.attention
    for name in pt.VARIANTS:
        ctx, handle = capture(att.dense, "input")
        with pt.variant(model, name):
            hs = pt.layer_outputs(model, batch)
        handle.remove()
        assert len(ctx) == 3  # one shared layer, applied three times
        keep_skip, keep_mlp = pt.VARIANT_SWITCHES[name]
        with torch.no_grad():
            for l in range(3):  # every application of the shared layer is patched
                a = att.LayerNorm(att.dense(ctx[l]) + (hs[l] if keep_skip else 0))
                expected = layer.full_layer_layer_norm(layer.ff_chunk(a) + a) if keep_mlp else a
                torch.testing.assert_close(hs[l + 1], expected, msg=f"{name}, layer {l + 1}", **F32)
    # the paper's own ALBERT surgery leaves LN(GELU(a) + a)
    ctx, handle = capture(att.dense, "input")
    with pt.variant(model, "SAN+skip", albert_as_paper=True):
        hs = pt.layer_outputs(model, batch)
    handle.remove()
    with torch.no_grad():
        a = att.LayerNorm(att.dense(ctx[0]) + hs[0])
        torch.testing.assert_close(hs[1], layer.full_layer_layer_norm(layer.activation(a) + a), **F32)


def test_xlnet_surgery_is_the_papers():
    model, batch = tiny_model("xlnet"), tiny_batch()
    layer = model.layer[0]
    ln_in = {}
    for name in pt.VARIANTS:
        calls, h1 = capture(layer.rel_attn.layer_norm, "input")
        att_out, h2 = capture(layer.rel_attn)
        with pt.variant(model, name):
            hs = pt.layer_outputs(model, batch)
        h1.remove(), h2.remove()
        ln_in[name] = calls[0].transpose(0, 1)
        keep_skip, keep_mlp = pt.VARIANT_SWITCHES[name]
        if not keep_mlp:  # the layer's output is the attention sub-block's
            torch.testing.assert_close(hs[1], att_out[0].transpose(0, 1), **F32)
    # the skip adds exactly the layer's input before the LayerNorm
    torch.testing.assert_close(ln_in["Transformer"] - ln_in["SAN+MLP"], hs[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ln_in["SAN+skip"] - ln_in["SAN"], hs[0], atol=1e-5, rtol=1e-5)


def test_attention_matrices_are_row_stochastic():
    model, batch = tiny_model("bert"), tiny_batch(3, 7)
    A = pt.attention_matrices(model, batch)
    assert A.shape == (3, 3, 4, 7, 7)
    torch.testing.assert_close(A.sum(-1), torch.ones(3, 3, 4, 7), atol=1e-6, rtol=0)


def test_attention_matrices_are_each_layers_own():
    """Layer l's matrices are softmax(q(h_l) k(h_l)^T / sqrt(d_head)) of that layer's input h_l (the previous
    layer's output, from layer_outputs), not of the embeddings; computed here from the query and key maps."""
    model, batch = tiny_model("bert"), tiny_batch(2, 6)
    model.double()
    A = pt.attention_matrices(model, batch)
    hs = pt.layer_outputs(model, batch)
    with torch.no_grad():
        for layer, block in enumerate(model.encoder.layer):
            att = block.attention.self
            q, k = (lin(hs[layer]).view(2, 6, 4, 8).transpose(1, 2) for lin in (att.query, att.key))
            P = torch.softmax(q @ k.transpose(-1, -2) / 8**0.5, dim=-1)
            torch.testing.assert_close(A[:, layer], P.float(), atol=1e-6, rtol=0, msg=f"layer {layer}")
    assert (A[:, 2] - A[:, 0]).abs().max() > 1e-3
    with pytest.raises(ValueError):
        pt.attention_matrices(tiny_model("xlnet"), batch)


def test_bad_inputs_raise_clear_errors():
    model = tiny_model("bert")
    with pytest.raises(ValueError, match="unknown variant"):
        with pt.variant(model, "SAN+LN"):
            pass
    with pytest.raises(ValueError, match="BERT, ALBERT or XLNet"):
        with pt.variant(nn.Linear(2, 2), "SAN"):
            pass
    with pytest.raises(ValueError, match="BERT, ALBERT or XLNet"):
        pt.architecture(AutoModel.from_config(AutoConfig.for_model(
            "distilbert", vocab_size=50, dim=16, n_layers=1, n_heads=2, hidden_dim=32)))
    with pytest.raises(ValueError, match="input_ids"):
        pt.layer_outputs(model, {"ids": torch.zeros(1, 3, dtype=torch.long)})
    with pytest.raises(ValueError, match="shape"):
        pt.layer_outputs(model, {"input_ids": torch.zeros(3, dtype=torch.long)})
    with pytest.raises(ValueError, match="sequence"):
        pt.residual_curves(model, tiny_batch(), variants="SAN")


@pytest.mark.parametrize("kind", ["bert", "albert"])
def test_head_matrices_fold_the_query_key_and_value_output_maps(kind):
    """hf.head_matrices: x^T W_QK,h y = q_h(x) . k_h(y) without biases, and x^T W_h = the head's value
    pushed through its block of the output projection; ALBERT repeats its shared layer."""
    model = tiny_model(kind)
    mats = pt.head_matrices(model)
    assert len(mats) == 3
    W_qk, W_vo, dh = mats[0]
    assert W_qk.shape == (4, 32, 32) and dh == 8 and W_qk.dtype == torch.float64
    layer = model.encoder.layer[0] if kind == "bert" else model.encoder.albert_layer_groups[0].albert_layers[0]
    att = layer.attention.self if kind == "bert" else layer.attention
    dense = layer.attention.output.dense if kind == "bert" else layer.attention.dense
    x, y = torch.randn(32, dtype=torch.float64), torch.randn(32, dtype=torch.float64)
    h = 2
    q = (att.query.weight.double() @ x)[h * dh:(h + 1) * dh]
    k = (att.key.weight.double() @ y)[h * dh:(h + 1) * dh]
    assert float(x @ W_qk[h] @ y) == pytest.approx(float(q @ k), rel=1e-9)
    v = (att.value.weight.double() @ x)[h * dh:(h + 1) * dh]
    torch.testing.assert_close(x @ W_vo[h], dense.weight.double()[:, h * dh:(h + 1) * dh] @ v)
    if kind == "albert":
        assert mats[1][0] is mats[0][0]
    thresholds = pt.contraction_thresholds(model)
    assert len(thresholds) == 3 and all(t > 0 for t in thresholds)
    with pytest.raises(ValueError, match="XLNet"):
        pt.head_matrices(tiny_model("xlnet"))


def test_where_the_bound_applies_compares_each_layer_input_with_its_threshold():
    model = tiny_model("bert")
    batch = tiny_batch()
    w = pt.where_the_bound_applies(model, batch)
    assert w["threshold"].shape == w["input_residual"].shape == (3,)
    assert list(w["threshold"]) == pytest.approx(pt.contraction_thresholds(model), rel=1e-12)
    from attnbook.core.norms import norm_1_inf, res

    with pt.variant(model, "SAN"):
        hs = pt.layer_outputs(model, batch)
    absolute = norm_1_inf(res(hs[1].double()))
    assert w["input_residual"][1] == pytest.approx(float(absolute.median()), rel=1e-5)
    assert (w["applies"] == (w["input_residual"] < w["threshold"])).all()


def test_encoder_head_roles_count_rare_tokens_on_the_qualifying_sentences_only():
    """The rare-token share of a BERT encoder is :func:`attnbook.heads.roles.rare_token_share` on the sentences
    whose rarest content token is outside the most frequent ones, with [CLS]/[SEP] neither queries nor
    keys."""
    import tempfile
    from pathlib import Path

    from attnbook.heads import roles as hd

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + "the lord spake unto moses , saying .".split()
    folder = Path(tempfile.mkdtemp())
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tok = BertTokenizer(vocab=str(folder / "vocab.txt"))
    model = tiny_model("bert")
    counts = pt.token_counts(tok, ["the lord spake unto moses", "moses ."] + ["the lord spake , saying ."] * 2)
    assert counts[vocab.index("moses")] == 2 and counts[vocab.index("the")] == 3 and counts[2] == 0
    assert counts.shape == (len(vocab),)  # the only rare token: the first sentence qualifies, not the second
    sentences = ["the lord spake unto moses", "the lord spake , saying ."]
    # ranks: the, lord, spake, "." 0-3; moses, ",", saying 4-6; unto 7: only the first sentence has a token
    # outside the top 7
    roles = pt.encoder_head_roles(model, tok, sentences, token_counts=counts, rare_outside_top=7)
    assert roles["rare_sentences"] == 1.0 and roles["rare"].shape == (3, 4)
    enc = tok(sentences[:1], return_tensors="pt")
    a = pt.attention_matrices(model, enc).transpose(0, 1)  # (layers, 1, heads, n, n)
    content = torch.ones(1, a.shape[-1], dtype=torch.bool)
    content[0, [0, -1]] = False
    share, chance = hd.rare_token_share(a, enc["input_ids"], counts, content, content)
    torch.testing.assert_close(roles["rare"], share, atol=1e-6, rtol=0)
    assert roles["rare_chance"] == pytest.approx(chance) == pytest.approx(1 / 5)
