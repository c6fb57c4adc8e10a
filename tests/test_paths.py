"""Unit tests of attnbook.rank.paths (chapter "Path decomposition")."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from attnbook.core.attention import SelfAttentionNetwork
from attnbook.rank.paths import (
    SKIP,
    all_paths,
    head_output,
    path_decomposition,
    path_forward,
    path_length_counts,
    path_products,
    rank1_distance,
    rank1_distance_by_length,
    sample_paths,
    san_parameters,
    value_products,
)
from attnbook.rank.tasks.path_model import PathSAN


def _random_san(L, H, skip, d=16, seed=0):
    torch.manual_seed(seed)
    model = SelfAttentionNetwork(L, d, H, skip=skip, mlp=False, layernorm=None, alpha=0.7).double()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.3)  # non-zero biases everywhere
    X = torch.randn(5, d, dtype=torch.float64)
    return model, X


@pytest.mark.parametrize("L,H,skip", [(1, 1, False), (1, 4, False), (3, 2, False), (2, 4, False),
                                      (4, 2, False), (1, 2, True), (3, 2, True), (2, 4, True), (4, 2, True)])
def test_decomposition_sums_to_output(L, H, skip):
    model, X = _random_san(L, H, skip)
    attn, values, biases, sk, out = san_parameters(model, X)
    assert sk == skip
    dec = path_decomposition(attn, values, X, biases, skip=skip)
    assert dec.terms.shape[0] == ((H + 1) ** L if skip else H**L)
    rel = ((dec.total() - out).norm() / out.norm()).item()
    assert rel <= 1e-10
    # every term is P_path X W_path for the path in the same row
    P, W = path_products(attn, dec.paths), value_products(values, dec.paths)
    assert torch.allclose(P @ X @ W, dec.terms, rtol=1e-10, atol=1e-12)
    assert torch.equal(dec.paths, all_paths(L, H, skip=skip))


F64 = dict(atol=1e-12, rtol=1e-10)  # float64 identities: rounding ~1e-15, a wrong path is O(1) off


def test_path_products_row_stochastic_and_skip_is_identity():
    model, X = _random_san(3, 2, False)
    attn = san_parameters(model, X)[0]
    paths = torch.tensor([[0, 1, 0], [SKIP, SKIP, SKIP], [1, SKIP, 0]])
    P = path_products(attn, paths)
    assert_close(P.sum(-1), torch.ones(3, 5, dtype=P.dtype), **F64)
    assert_close(P[0], attn[2, 0] @ attn[1, 1] @ attn[0, 0], **F64)
    assert_close(P[1], torch.eye(5, dtype=P.dtype), **F64)
    assert_close(P[2], attn[2, 0] @ attn[0, 1], **F64)


def test_value_products_follow_the_path():
    """Eq. W-path: W_path = W^1_{h_1} ... W^L_{h_L}, identity on skipped layers (later layers on the right)."""
    model, X = _random_san(3, 2, True)
    values = san_parameters(model, X)[1]
    W = value_products(values, torch.tensor([[1, 0, 1], [SKIP, 1, SKIP], [0, SKIP, 1]]))
    assert_close(W[0], values[0, 1] @ values[1, 0] @ values[2, 1], **F64)
    assert_close(W[1], values[1, 1], **F64)
    assert_close(W[2], values[0, 0] @ values[2, 1], **F64)


def test_san_parameters_fold_alpha_and_biases():
    """Eq. fold: values[l, h] = alpha W_{V,h} W_{O,h} and biases[l] = alpha (sum_h b_{V,h} W_{O,h} + b_O),
    read off one layer by hand."""
    model, X = _random_san(1, 2, False)
    _, values, biases, _, _ = san_parameters(model, X)
    a = model.blocks[0].attn
    for h in range(2):
        sl = slice(8 * h, 8 * (h + 1))  # d = 16, two heads of 8
        assert_close(values[0, h], 0.7 * a.v.weight[sl].T @ a.out.weight[:, sl].T, **F64)
    assert_close(biases[0], 0.7 * (a.v.bias @ a.out.weight.T + a.out.bias), **F64)


def test_path_length_counts():
    assert path_length_counts(3, 2) == [1, 6, 12, 8]
    counts = path_length_counts(12, 12)
    assert sum(counts) == 13**12 and counts[5] == math.comb(12, 5) * 12**5
    lengths = (all_paths(3, 2, skip=True) != SKIP).sum(1)
    assert torch.bincount(lengths).tolist() == path_length_counts(3, 2)


def test_sample_paths():
    g = torch.Generator().manual_seed(0)
    p = sample_paths(6, 4, 2, 500, g)
    assert p.shape == (500, 6)
    assert torch.all((p != SKIP).sum(1) == 2)
    assert p.min() >= SKIP and p.max() <= 3
    assert set(p[p != SKIP].tolist()) == {0, 1, 2, 3}  # heads drawn from all H
    assert set((p == SKIP).nonzero()[:, 1].tolist()) == set(range(6))  # every layer gets skipped sometimes
    g1, g2 = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
    assert torch.equal(sample_paths(4, 3, 2, 10, g1), sample_paths(4, 3, 2, 10, g2))  # heads and skips seeded
    assert not torch.equal(sample_paths(4, 3, 2, 10, g1), sample_paths(4, 3, 2, 10, g2.manual_seed(2)))
    assert torch.all(sample_paths(4, 3, 4, 10) != SKIP)


def test_rank1_distance():
    g = torch.Generator().manual_seed(0)
    u, v = torch.randn(6, 1, generator=g), torch.randn(1, 6, generator=g)
    assert rank1_distance(u @ v).item() < 1e-6
    assert rank1_distance(torch.eye(4)).item() == pytest.approx(math.sqrt(3 / 4), rel=1e-6)
    assert rank1_distance(torch.eye(4), norm="spectral").item() == pytest.approx(1.0, rel=1e-6)
    D = torch.diag(torch.tensor([3.0, 2.0, 1.0], dtype=torch.float64))  # s = (3, 2, 1)
    assert rank1_distance(D).item() == pytest.approx(math.sqrt(5 / 14), rel=1e-12)
    assert rank1_distance(D, norm="spectral").item() == pytest.approx(2 / 3, rel=1e-12)
    batch = torch.randn(3, 5, 5, generator=g)
    assert_close(rank1_distance(batch), torch.stack([rank1_distance(m) for m in batch]), atol=1e-6, rtol=0)


def test_rank1_distance_of_large_cuda_matrices_stays_on_their_device(monkeypatch):
    """Matrices over 32 x 32 on CUDA take their singular values on the CPU (CUDA loops over them); the
    distances come back on the input's device and equal the CPU's."""
    from attnbook.core.virtual_cuda import virtual_cuda

    M = torch.softmax(torch.randn(4, 40, 40, generator=torch.Generator().manual_seed(3)), -1)
    on_cpu = rank1_distance(M)
    svdvals, solved_on = torch.linalg.svdvals, []
    monkeypatch.setattr(torch.linalg, "svdvals", lambda A: solved_on.append(A.device.type) or svdvals(A))
    with virtual_cuda() as dev:
        on_gpu = rank1_distance(M.to(dev))
        rank1_distance(M[:, :32, :32].to(dev))  # small ones: CUDA's batched solver
        assert solved_on == ["cpu", "cuda"]
        assert on_gpu.device.type == "cuda"
        assert_close(on_gpu.cpu(), on_cpu, atol=0, rtol=0)


def test_rank1_distance_by_length():
    g = torch.Generator().manual_seed(0)
    attn = torch.softmax(torch.randn(2, 3, 2, 5, 5, generator=g), -1)
    attn[1, :, 1] = 1 / 5  # uniform heads: any path through one is exactly rank one
    d = rank1_distance_by_length(attn, 40, torch.Generator().manual_seed(4))
    assert list(d) == [1, 2, 3] and all(v.shape == (40,) for v in d.values())
    assert d[1].min() < 1e-6 < d[1].max()  # some length-1 paths hit a uniform head, some do not
    # the same draws by hand: a path on sequence s gets s's matrices
    g2 = torch.Generator().manual_seed(4)
    paths, seqs = sample_paths(3, 2, 1, 40, g2), torch.randint(0, 2, (40,), generator=g2)
    by_hand = torch.cat([rank1_distance(path_products(attn[s], paths[seqs == s])) for s in (0, 1)])
    assert_close(d[1], by_hand)
    assert d[3].median() < d[1].median()  # longer products are closer to rank one
    with pytest.raises(ValueError, match="sequences, L, H"):
        rank1_distance_by_length(attn[0], 4)


# --- path-restricted forward (chapter "Path effectiveness", eqs. path-step and path-forward) ---


def _path_san(seed=0, depth=3, heads=2):
    torch.manual_seed(seed)
    return PathSAN(3, 8, heads, depth, vocab_size=7, n_positions=6).double()


def test_head_output_is_one_head_through_its_slice_of_the_output_projection():
    """Eq. path-step: P_h X W_{V,h} W_{O,h} + 1 b^T, against the full layer with the other heads gated off."""
    model = _path_san()
    attn = model.blocks[0].attn
    x = model.embed_inputs(torch.randint(0, 7, (2, 6), generator=torch.Generator().manual_seed(1)))
    for h in range(2):
        gate = torch.zeros(2, dtype=torch.float64)
        gate[h] = 1.0
        with_bias_once = attn(x, head_gates=gate)[0]
        # the gated layer drops the value bias of the other head but keeps b_O once
        assert_close(head_output(attn, x, h), with_bias_once, **F64)
    full, _ = attn(x)
    assert_close(head_output(attn, x, 0) + head_output(attn, x, 1) - attn.out.bias, full, **F64)


def test_head_output_ignores_masked_keys():
    """key_mask: padding keys get no weight, so real queries see exactly what the unpadded sequence gives."""
    model = _path_san()
    attn = model.blocks[1].attn
    x = torch.randn(1, 6, 8, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    mask = torch.tensor([[True, True, True, True, False, False]])
    for h in range(2):
        padded = head_output(attn, x, h, key_mask=mask)
        assert_close(padded[:, :4], head_output(attn, x[:, :4], h), **F64)
        assert (padded[:, :4] - head_output(attn, x, h)[:, :4]).abs().max() > 1e-6


def test_path_forward_by_hand():
    """Eq. path-forward: each path starts from X, applies LN(head_output) on each layer it takes, the
    identity on each layer it skips; the paths' outputs are summed and LayerNormed."""
    model = _path_san()
    blocks = model.blocks
    x = model.embed_inputs(torch.randint(0, 7, (2, 6), generator=torch.Generator().manual_seed(3)))

    def ln(t):
        return F.layer_norm(t, (8,))

    p1 = ln(head_output(blocks[2].attn, ln(head_output(blocks[0].attn, x, 1)), 0))  # path (1, skip, 0)
    p2 = ln(head_output(blocks[1].attn, x, 1))  # path (skip, 1, skip)
    got = path_forward(blocks, x, torch.tensor([[1, SKIP, 0], [SKIP, 1, SKIP]]))
    assert_close(got, ln(p1 + p2), **F64)
    assert_close(path_forward(blocks, x, torch.tensor([[SKIP, SKIP, SKIP]])), ln(x), **F64)
    # and a different head on one layer gives a different output
    other = path_forward(blocks, x, torch.tensor([[0, SKIP, 0], [SKIP, 1, SKIP]]))
    assert (other - got).abs().max() > 1e-3


def test_path_forward_batches_paths_by_head_as_one_by_one(monkeypatch):
    """On a GPU the paths that share a layer's head run as one batch, in chunks of paths: the same output as
    running each path alone (eq. path-forward), with a key mask, whatever the chunk size."""
    model = _path_san()
    blocks = model.blocks
    g = torch.Generator().manual_seed(5)
    x = model.embed_inputs(torch.randint(0, 7, (3, 6), generator=g))
    mask = torch.tensor([[True] * 6, [True] * 4 + [False] * 2, [True] * 5 + [False]])
    paths = sample_paths(3, 2, 2, 9, g)
    assert len(set(paths[:, 0].tolist())) > 1  # the draw mixes heads on a layer

    def one_path(path):
        h = x
        for layer, head in enumerate(path):
            if head != SKIP:
                h = F.layer_norm(head_output(blocks[layer].attn, h, head, mask), (8,))
        return h

    want = F.layer_norm(sum(one_path(p) for p in paths.tolist()), (8,))
    for max_elements in (2**26, x.numel() * 4, 1):  # all paths at once, chunks of 4, one at a time
        got = path_forward(blocks, x, paths, mask, by_head=True, max_elements=max_elements)
        assert_close(got, want, **F64)
    assert_close(path_forward(blocks, x, paths, mask), want, **F64)  # the CPU's default
    # on a GPU the default batches by head (at most one call per layer and head), on the model's device,
    # with the paths on the CPU
    from attnbook.core.virtual_cuda import virtual_cuda
    from attnbook.rank import paths as paths_module

    calls = []
    monkeypatch.setattr(paths_module, "head_output", lambda *a: calls.append(1) or head_output(*a))
    with virtual_cuda() as dev:
        model.to(dev)
        got = path_forward(blocks, x.detach().to(dev), paths, mask.to(dev))
        assert got.device.type == "cuda"
        assert_close(got.cpu(), want, **F64)
    assert len(calls) <= 3 * 2 < 2 * len(paths)  # one by one would take two calls per path


def test_path_san_forward_uses_the_paths_and_the_key_mask():
    model = _path_san()
    ids = torch.randint(1, 7, (2, 6), generator=torch.Generator().manual_seed(4))
    paths = torch.tensor([[0, SKIP, 1], [1, 1, SKIP]])
    got = model(ids, paths=paths)
    assert_close(got, model.classifier(path_forward(model.blocks, model.embed_inputs(ids), paths)), **F64)
    assert (got - model(ids)).abs().max() > 1e-3  # not the full model
    # padding: real tokens see what the unpadded sequence gives, for the full model and for paths
    mask = torch.tensor([[True] * 4 + [False] * 2] * 2)
    for p in (None, paths):
        assert_close(model(ids, paths=p, key_mask=mask)[:, :4], model(ids[:, :4], paths=p)[:, :4], **F64)


def test_path_san_embedding_adds_learned_positions_then_normalises():
    model = _path_san()
    with torch.no_grad():
        model.norm.weight.normal_(1.0, 0.3)
        model.norm.bias.normal_(0.0, 0.3)
    ids = torch.randint(0, 7, (2, 5), generator=torch.Generator().manual_seed(5))
    expected = model.norm(model.embed.weight[ids] + model.pos.weight[:5])
    assert_close(model.embed_inputs(ids), expected, **F64)
    with pytest.raises(ValueError, match="n_positions"):
        model.embed_inputs(torch.zeros(1, 7, dtype=torch.long))


def test_bad_input():
    with pytest.raises(ValueError, match="attn"):
        path_products(torch.rand(2, 3, 4), torch.zeros(1, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="paths"):
        path_products(torch.rand(2, 3, 4, 4), torch.zeros(1, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="head indices"):
        path_products(torch.rand(2, 3, 4, 4), torch.full((1, 2), 3))
    with pytest.raises(ValueError, match="X must"):
        path_decomposition(torch.rand(2, 3, 4, 4), torch.rand(2, 3, 5, 5), torch.rand(3, 5))
    with pytest.raises(ValueError, match="biases"):
        path_decomposition(torch.rand(2, 3, 4, 4), torch.rand(2, 3, 5, 5), torch.rand(4, 5), torch.rand(5))
    with pytest.raises(ValueError, match="length"):
        sample_paths(4, 2, 5, 3)
    with pytest.raises(ValueError, match="positive"):
        path_length_counts(0, 2)
    with pytest.raises(ValueError, match="norm"):
        rank1_distance(torch.eye(3), norm="nuclear")
    model = SelfAttentionNetwork(2, 8, 2, skip=False, mlp=True, layernorm=None)
    with pytest.raises(ValueError, match="MLP"):
        san_parameters(model, torch.randn(4, 8))
