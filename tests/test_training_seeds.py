"""Tests of chapter "Path effectiveness" over training seeds (attnbook.rank.tasks.training_seeds): the models
trained as the chapter trains them, the paths sampled in its order, one seed's effects and their t intervals
over seeds."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import t as student_t

from attnbook.rank import tasks
from attnbook.rank.tasks import training_seeds

SORT = dict(d_model=16, n_heads=2, depth=2, length=8, vocab=10, n_train=40, n_eval=20, steps=3)
CFG = dict(sort=SORT, batch=8, lr=1e-3)


def _params(model):
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def test_train_path_models_is_reproducible_by_seed_and_seeds_differ():
    a = training_seeds.train_path_models(CFG, seed=0, names=("sort",))["sort"]
    b = training_seeds.train_path_models(CFG, seed=0, names=("sort",))["sort"]
    c = training_seeds.train_path_models(CFG, seed=1, names=("sort",))["sort"]
    assert torch.equal(_params(a["model"]), _params(b["model"]))
    assert not torch.equal(_params(a["model"]), _params(c["model"]))
    assert not torch.equal(a["eval"][0], c["eval"][0])  # the seed draws the data too
    assert a["history"]["steps_done"] == SORT["steps"]
    assert a["full"] == tasks.full_accuracy(a["model"], a["eval"])
    with pytest.raises(ValueError, match="unknown tasks"):
        training_seeds.train_path_models(CFG, seed=0, names=("sorting",))


def test_each_seed_initialises_its_models_differently(monkeypatch):
    """Not only the data: the training seed seeds the library too, so the initial weights differ."""
    monkeypatch.setattr(training_seeds, "train", lambda *a, **k: {"steps_done": 0})
    first = training_seeds.train_path_models(CFG, seed=0, names=("sort",))["sort"]["model"]
    again = training_seeds.train_path_models(CFG, seed=0, names=("sort",))["sort"]["model"]
    other = training_seeds.train_path_models(CFG, seed=1, names=("sort",))["sort"]["model"]
    assert torch.equal(_params(first), _params(again))
    assert not torch.equal(_params(first), _params(other))


def test_path_accuracies_draws_in_the_chapters_order_from_one_generator():
    trained = training_seeds.train_path_models(CFG, seed=0, names=("sort",))
    got = training_seeds.path_accuracies(trained, (3, 5), 2, torch.Generator().manual_seed(1))
    g = torch.Generator().manual_seed(1)
    model, ev = trained["sort"]["model"], trained["sort"]["eval"]
    for n in (3, 5):  # n = 5 after n = 3, from the same generator
        np.testing.assert_array_equal(got["sort", n], tasks.path_accuracy_by_length(model, ev, n, 2, g))


def test_seed_effects_reads_length_one_the_longest_and_both_short_lengths():
    many = np.array([[0.2, 0.2], [0.5, 0.7], [0.9, 0.9], [0.1, 0.3]])  # means 0.2, 0.6, 0.9, 0.2
    few = np.array([[0.2, 0.2], [0.4, 0.4], [0.7, 0.9], [0.1, 0.1]])  # means 0.2, 0.4, 0.8, 0.1
    e = training_seeds.seed_effects(many, few, floor=0.1)
    assert e["short"] == pytest.approx(0.5)  # length 1, not the better length 2
    assert e["longest"] == pytest.approx(0.1)
    assert e["falls"] == pytest.approx(-0.4)
    assert e["more_paths"] == pytest.approx((0.2 + 0.1) / 2)  # both short lengths, unequal gains
    assert training_seeds.seed_effects(many, few, 0.1, short=2)["short"] == pytest.approx(0.8)
    with pytest.raises(ValueError, match="shape"):
        training_seeds.seed_effects(many, few[:3], 0.1)
    with pytest.raises(ValueError, match="outside"):
        training_seeds.seed_effects(many, few, 0.1, short=4)


def test_across_seeds_is_the_t_interval_over_seeds():
    per_seed = [{"short": v, "falls": -v} for v in (0.3, 0.5, 0.1)]
    r = training_seeds.across_seeds(per_seed, level=0.9, effects=("short", "falls"))
    half = student_t.ppf(0.95, 2) * np.std([0.3, 0.5, 0.1], ddof=1) / 3 ** 0.5
    assert r["short"]["mean"] == pytest.approx(0.3)
    assert (r["short"]["low"], r["short"]["high"]) == pytest.approx((0.3 - half, 0.3 + half))
    assert r["falls"]["high"] == pytest.approx(-0.3 + half)
    assert r["short"]["se"] == pytest.approx(np.std([0.3, 0.5, 0.1], ddof=1) / 3 ** 0.5)
    assert r["short"]["values"] == [0.3, 0.5, 0.1]
    with pytest.raises(ValueError, match="two seeds"):
        training_seeds.across_seeds(per_seed[:1])


def test_across_seeds_covers_the_true_effect_at_its_level():
    """Three seeds an interval: the 90% t interval covers the true mean about 90% of the time; a normal
    interval on the same three values would cover it about 74% of the time and fails this."""
    rng = np.random.default_rng(6)
    hits = []
    for _ in range(3000):
        values = 0.2 + 0.05 * rng.standard_normal(3)
        r = training_seeds.across_seeds([{"short": v} for v in values], 0.9, effects=("short",))["short"]
        hits.append(r["low"] <= 0.2 <= r["high"])
    assert np.mean(hits) == pytest.approx(0.9, abs=0.02)
