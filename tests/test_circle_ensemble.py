"""Tests of attnbook.rank.tasks.circle_ensemble: the batched ensemble trains what circle.fit trains, model by
model, and each model's clipping is its own."""

from __future__ import annotations

import pytest
import torch

from attnbook.rank.tasks import circle
from attnbook.rank.tasks.circle_ensemble import ensemble_sweep, fit_ensemble

KW = dict(steps=25, lr=3e-3, batch=8, n_points=40, device="cpu")


@pytest.mark.parametrize("variant", [{}, {"mlp": True, "skip": True}, {"attention": False}, {"attention": "self"}])
def test_the_ensemble_trains_the_models_fit_trains(variant):
    models, hist = fit_ensemble(16, [0, 3], **KW, **variant)
    for i, seed in enumerate([0, 3]):
        alone, alone_hist = circle.fit(16, seed, **KW, **variant)
        got = [row[i] for row in hist["loss"]]
        assert got == pytest.approx(alone_hist["loss"], rel=1e-4, abs=1e-7)
        for (name, p), q in zip(alone.named_parameters(), models[i].parameters()):
            # no gradient (softmax ignores it; with each token attending to itself, the queries and keys too):
            # Adam moves them by rounding noise
            untouched = (".attn.q.", ".attn.k.") if variant.get("attention") == "self" else ("attn.k.bias",)
            if any(part in name for part in untouched):
                continue
            torch.testing.assert_close(q, p, rtol=1e-3, atol=1e-5, msg=name)


def test_each_model_is_clipped_by_its_own_norm():
    """With a tiny clip every step is clipped: model 1 trained beside model 2 must move as model 1 trained alone
    (a norm shared across the ensemble would make it depend on model 2's gradient)."""
    kw = {**KW, "steps": 10, "clip": 1e-3}
    _, alone = fit_ensemble(16, [1], **kw)
    _, together = fit_ensemble(16, [1, 2], **kw)
    assert [row[0] for row in together["loss"]] == pytest.approx([row[0] for row in alone["loss"]], rel=1e-5)


def test_bad_seeds_are_refused():
    with pytest.raises(ValueError, match="distinct"):
        fit_ensemble(16, [1, 1], **KW)
    with pytest.raises(ValueError, match="distinct"):
        fit_ensemble(16, [], **KW)


def test_the_ensemble_sweep_gives_the_records_of_the_seed_sweep():
    """Same keys, seeds in order, and each record the one circle.fit's model gives (a swapped seed order or a
    variant dropped from the options would fail)."""
    variants = {"SAN": {}, "SAN+skip": {"skip": True}}
    X, Y = circle.circle_dataset(KW["n_points"])
    fit_kw = {k: v for k, v in KW.items()}
    batched = ensemble_sweep([8, 16], variants, 2, X, Y, 60, n_heads=2, **fit_kw)
    alone = circle.seed_sweep(lambda d, v, seed: circle.fit(d, seed, n_heads=2, **fit_kw, **variants[v]),
                              [8, 16], list(variants), 2, X, Y, 60)
    assert list(batched) == list(alone)
    for key in alone:
        for b, a in zip(batched[key], alone[key]):
            assert b["mse_over_stay_put"] == pytest.approx(a["mse_over_stay_put"], rel=1e-3)
            assert b["final_gap"] == pytest.approx(a["final_gap"], rel=1e-3, abs=1e-5)
            torch.testing.assert_close(b["traj"], a["traj"], rtol=1e-3, atol=1e-4)
    with pytest.raises(ValueError, match="n_seeds"):
        ensemble_sweep([8], variants, 0, X, Y, 20, **fit_kw)
