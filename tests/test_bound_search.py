"""Tests of attnbook.rank.bound_search: the random and adversarial worst ratios of an inequality."""

from __future__ import annotations

import pytest
import torch

from attnbook.rank.bound_search import worst_ratio


def _sample(batch, gen):
    return {"a": torch.randn(batch, 3, generator=gen, dtype=torch.float64),
            "b": torch.randn(batch, 3, generator=gen, dtype=torch.float64)}


def _cauchy_schwarz(a, b):  # |<a, b>| <= |a| |b|: ratio <= 1, approached when a is parallel to b
    return (a * b).sum(-1).abs() / (a.norm(dim=-1) * b.norm(dim=-1))


def test_the_ascent_approaches_a_tight_bound_from_below_and_beats_random_search():
    r = worst_ratio(_cauchy_schwarz, _sample, n_random=20, n_starts=4, steps=300, lr=0.05, seed=0)
    assert r["random"] < r["adversarial"] <= 1 + 1e-12
    assert r["adversarial"] > 0.999
    assert set(r["found"]) == {"a", "b"} and not r["found"]["a"].requires_grad
    assert _cauchy_schwarz(**r["found"]).max() == pytest.approx(r["adversarial"], abs=1e-3)


def test_a_false_inequality_is_found_and_the_same_seed_repeats():
    def false(a, b):  # |<a, b>| <= 0.5 |a| |b| is false
        return _cauchy_schwarz(a, b) / 0.5

    r = worst_ratio(false, _sample, n_random=5, n_starts=2, steps=200, lr=0.05, seed=1)
    assert r["adversarial"] > 1.9
    again = worst_ratio(false, _sample, n_random=5, n_starts=2, steps=200, lr=0.05, seed=1)
    assert again["random"] == r["random"] and again["adversarial"] == r["adversarial"]
    with pytest.raises(ValueError):
        worst_ratio(false, _sample, n_random=0, n_starts=2, steps=1, lr=0.1, seed=0)
