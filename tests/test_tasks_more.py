"""Tests of the path-effectiveness analysis in attnbook.rank.tasks (chapter "Path effectiveness"): accuracy
by path length, the best short path, the share of the full model's gain, and 20 paths against 5."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnbook.rank import tasks

SIZE = dict(d_model=16, n_heads=2, depth=2, length=8, vocab=10, n_train=40, n_eval=20)


def test_accuracy_by_length_is_path_accuracy_for_every_length_in_turn():
    t = tasks.path_task("sort", SIZE, torch.Generator().manual_seed(0))
    table = tasks.path_accuracy_by_length(t["model"], t["eval"], 3, 2, torch.Generator().manual_seed(1))
    assert table.shape == (SIZE["depth"] + 1, 2)
    g = torch.Generator().manual_seed(1)
    expected = [tasks.path_accuracy(t["model"], t["eval"], k, 3, 2, g) for k in range(SIZE["depth"] + 1)]
    np.testing.assert_array_equal(table, np.array(expected))


def test_probe_accuracy_by_length_fits_on_the_first_sequences():
    t = tasks.path_task("sort", SIZE, torch.Generator().manual_seed(0))
    x, y, m = t["train_set"]
    table = tasks.path_probe_accuracy_by_length(t["model"], t["train_set"], t["eval"], 2, 1,
                                                torch.Generator().manual_seed(2), n_fit=10)
    g = torch.Generator().manual_seed(2)
    expected = [tasks.path_probe_accuracy(t["model"], (x[:10], y[:10], None), t["eval"], k, 2, 1, g)
                for k in range(SIZE["depth"] + 1)]
    assert table.shape == (3, 1)
    np.testing.assert_array_equal(table, np.array(expected))
    assert ((0 <= table) & (table <= 1)).all()


def test_best_short_and_gain_share():
    table = np.array([[0.1, 0.1], [0.4, 0.6], [0.6, 0.8], [0.9, 0.9]])  # means 0.1, 0.5, 0.7, 0.9
    assert tasks.best_short(table) == pytest.approx(0.7)
    assert tasks.best_short(table, lengths=(1,)) == pytest.approx(0.5)
    assert tasks.best_short(table, lengths=(3,)) == pytest.approx(0.9)
    # (0.7 - 0.5) / (0.9 - 0.5): half of the gain over chance 0.5
    assert tasks.gain_share(table, full=0.9, floor=0.5) == pytest.approx(0.5)
    assert tasks.gain_share(table, full=0.9, floor=0.1) == pytest.approx(0.75)
    with pytest.raises(ValueError):
        tasks.gain_share(table, full=0.5, floor=0.5)


def test_more_paths_gain_takes_each_short_length_as_a_stratum():
    many = np.array([[0.0, 0.0], [0.5, 0.7], [0.6, 0.8], [0.0, 0.0]])
    few = np.array([[1.0, 1.0], [0.4, 0.4], [0.5, 0.6], [1.0, 1.0]])
    r = tasks.more_paths_gain(many, few)
    assert r["value"] == pytest.approx(0.65 - 0.475)  # lengths 1 and 2 only
    # each length's variances of the means (0.02 / 2 and 0 at length 1; 0.02 / 2 and 0.005 / 2 at length 2),
    # summed and divided by 2 lengths squared; Welch-Satterthwaite degrees of freedom over the four groups
    parts = np.array([0.01, 0.0, 0.01, 0.0025]) / 4
    dof = parts.sum() ** 2 / (parts ** 2).sum()
    from scipy.stats import t as student_t
    half = student_t.ppf(0.95, dof) * np.sqrt(parts.sum())
    assert r["interval"] == pytest.approx((0.175 - half, 0.175 + half))


def test_path_above_floor_tests_the_best_short_length_against_the_floor():
    table = np.array([[0.1, 0.1, 0.1], [0.3, 0.4, 0.5], [0.6, 0.7, 0.8], [0.9, 0.9, 0.9]])
    r = tasks.path_above_floor(table, floor=0.1)
    assert (r["length"], r["n"]) == (2, 3) and r["value"] == pytest.approx(0.7)
    # t = (0.7 - 0.1) / (0.1 / sqrt 3) on 2 degrees of freedom, one-sided, times 2 lengths
    from scipy.stats import t as student_t
    assert r["p"] == pytest.approx(2 * student_t.sf(0.6 / (0.1 / np.sqrt(3)), 2))
    assert tasks.path_above_floor(table, floor=0.75)["p"] > 0.5  # below the floor: no evidence
    assert tasks.path_above_floor(table, floor=0.5, lengths=(3,))["p"] == 0  # no spread, above
    with pytest.raises(ValueError, match="at least 2"):
        tasks.path_above_floor(table[:, :1], floor=0.1)
    # below: every length must lie below the floor; the largest of the lengths' one-sided p
    assert r["p_below"] > 0.99  # far above 0.1
    low = tasks.path_above_floor(table, floor=0.75)
    assert low["p_below"] == pytest.approx(student_t.sf(0.05 / (0.1 / np.sqrt(3)), 2))  # length 2 decides
    assert tasks.path_above_floor(table, floor=0.65)["p_below"] > 0.5  # length 2 is above 0.65: not all below
    assert tasks.path_above_floor(table, floor=0.95, lengths=(3,))["p_below"] == 0  # no spread, below
    at_chance = np.full((2, 3), 0.1)  # a table fixed at sorting's chance: neither above nor below it
    assert tasks.path_above_floor(at_chance, floor=0.1, lengths=(1,)) | {"value": 0} == {
        "value": 0, "p": 1.0, "p_below": 1.0, "length": 1, "n": 3}


def test_path_above_floor_rejects_five_percent_of_null_tables():
    """Calibration on simulated tables with a known answer: with both lengths at the floor, p < 0.05 in about
    5% of tables (the best of two chosen after looking, so an uncorrected or two-sided test fails), and a
    real gain is found."""
    rng = np.random.default_rng(0)
    null = [tasks.path_above_floor(rng.normal(0.3, 0.05, (3, 5)), floor=0.3)["p"] < 0.05
            for _ in range(4000)]
    assert 0.035 < np.mean(null) < 0.065
    gain = [tasks.path_above_floor(rng.normal(0.4, 0.05, (3, 5)), floor=0.3)["p"] < 0.05
            for _ in range(500)]
    assert np.mean(gain) > 0.9
