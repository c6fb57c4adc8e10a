"""Tests of attnbook.signal.fairseq_inputs: a fairseq IWSLT encoder's layer inputs at initialisation and the
temperature that balances one head's query and value gradients on them (chapter "Unequal gradients")."""

from __future__ import annotations

import math

import pytest
import torch

from attnbook.signal import fairseq_inputs as fi
from attnbook.signal import propagation as prop

SMALL = dict(d_model=32, n_heads=4, d_ff=64, depth=3)


@pytest.mark.parametrize("temperature", [0.3, 1.0, 2.5])
def test_jacobian_norms_by_formula_equal_automatic_differentiation(temperature):
    g = torch.Generator().manual_seed(1)
    X = torch.randn(6, 7, generator=g, dtype=torch.float64)
    W = [0.6 * torch.randn(7, m, generator=g, dtype=torch.float64) for m in (3, 3, 5)]
    got = fi.jacobian_sq_norms(X, *W, temperature=temperature)
    want = prop.jacobian_sq_norms(X, *W, temperature=temperature)
    assert got == pytest.approx(want, rel=1e-10)
    assert got["q"] != pytest.approx(got["k"], rel=1e-3)  # W_Q and W_K enter differently


def test_sinusoidal_positions_are_fairseq_s():
    P = fi.sinusoidal_positions(5, 8)
    assert P.shape == (5, 8)
    assert torch.allclose(P.pow(2).sum(1), torch.full((5,), 4.0, dtype=torch.float64))  # d / 2 per position
    w = 10000 ** (-torch.arange(4, dtype=torch.float64) / 3)
    assert torch.allclose(P[0], torch.cat([(2 * w).sin(), (2 * w).cos()]))  # position 2 first, sines first
    with pytest.raises(ValueError, match="even"):
        fi.sinusoidal_positions(3, 7)


def test_layer_inputs_scale_and_collapse_as_fairseq_s_encoder_at_init():
    inputs = fi.layer_inputs(20, torch.Generator().manual_seed(0), n_sentences=3, vocab=500, **SMALL)
    assert inputs.shape == (3, 3, 20, 32) and inputs.dtype == torch.float64
    sq = inputs.pow(2).sum(-1).mean((1, 2)) / 32
    assert 1.25 < float(sq[0]) < 1.75  # embeddings (d) plus positions (d / 2)
    assert torch.allclose(sq[1:], torch.ones(2, dtype=torch.float64), atol=1e-6)  # after a LayerNorm
    cos = [float(prop.token_cosine(x).mean()) for x in inputs]
    assert cos[0] < cos[1] < cos[2]  # collapse at initialisation
    again = fi.layer_inputs(20, torch.Generator().manual_seed(0), n_sentences=3, vocab=500, **SMALL)
    assert torch.equal(inputs, again)
    with pytest.raises(ValueError, match="distinct"):
        fi.layer_inputs(30, torch.Generator(), vocab=20, **SMALL)


def test_simulated_balance_is_where_the_ratio_crosses_one():
    X = fi.layer_inputs(12, torch.Generator().manual_seed(2), n_sentences=2, vocab=100, **SMALL)[1]
    kw = dict(sigma=0.2, d_k=8, d_v=8, n_draws=6, seed=3)
    tau = fi.simulated_balance(X, **kw)
    ratio = fi.query_value_ratios(X, [tau / 1.2, tau * 1.2], **kw)
    assert ratio[0] > 1 > ratio[1]
    # the query norm falls like 1 / tau^2 where attention is near uniform (large tau), the value norm stays
    far = fi.query_value_ratios(X, [50.0, 100.0], **kw)
    assert far[0] / far[1] == pytest.approx(4.0, rel=0.02)


def test_balance_by_layer_rows():
    inputs = fi.layer_inputs(16, torch.Generator().manual_seed(4), n_sentences=2, vocab=300, **SMALL)
    rows = fi.balance_by_layer(inputs, n_draws=4)
    assert [r["layer"] for r in rows] == [1, 2, 3]
    for r, X in zip(rows, inputs):
        sigma = prop.xavier_uniform_std(32, 32, gain=2**-0.5)
        want = sum(1 / prop.balancing_temperature(S, sigma, sigma) for S in X) / 2
        assert r["formula"] == pytest.approx(want)
        assert 0.4 < r["simulated"] / r["formula"] < 2.5 and math.isfinite(r["cosine"])
    assert rows[-1]["formula"] > rows[0]["formula"]  # collapsed tokens need a larger multiplier
    with pytest.raises(ValueError, match="depth, sentences"):
        fi.balance_by_layer(inputs[0], n_draws=2)


def test_balance_table_has_a_row_per_layer():
    rows = [dict(layer=1, sq_norm=1.49, cosine=0.24, formula=4.67, simulated=3.72),
            dict(layer=2, sq_norm=1.0, cosine=0.33, formula=8.97, simulated=7.05)]
    lines = fi.balance_table(rows).splitlines()
    assert len(lines) == 4 and lines[2] == "| 1 | 1.49 | 0.24 | 4.7 | 3.7 |"


def test_where_in_layers_names_the_enclosing_layers():
    m = [3.7, 7.0, 9.9, 14.4]
    assert fi.where_in_layers(m, 8.5) == "between layers 2 and 3's"
    assert fi.where_in_layers(m, 10.2) == "at layer 3's"
    assert fi.where_in_layers(m, 2.0) == "below every layer's"
    assert fi.where_in_layers(m, 20.0) == "above every layer's"
    with pytest.raises(ValueError):
        fi.where_in_layers([], 1.0)
