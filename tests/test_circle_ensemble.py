"""Tests of attnbook.rank.tasks.circle_ensemble: the batched ensemble trains what circle.fit trains, model by
model, and each model's clipping is its own."""

from __future__ import annotations

import pytest
import torch

from attnbook.rank.tasks import circle
from attnbook.rank.tasks.circle_ensemble import fit_ensemble

KW = dict(steps=25, lr=3e-3, batch=8, n_points=40, device="cpu")


@pytest.mark.parametrize("variant", [{}, {"mlp": True, "skip": True}, {"attention": False}])
def test_the_ensemble_trains_the_models_fit_trains(variant):
    models, hist = fit_ensemble(16, [0, 3], **KW, **variant)
    for i, seed in enumerate([0, 3]):
        alone, alone_hist = circle.fit(16, seed, **KW, **variant)
        got = [row[i] for row in hist["loss"]]
        assert got == pytest.approx(alone_hist["loss"], rel=1e-4, abs=1e-7)
        for (name, p), q in zip(alone.named_parameters(), models[i].parameters()):
            if name.endswith("attn.k.bias"):  # no gradient (softmax ignores it): Adam moves it by rounding noise
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
