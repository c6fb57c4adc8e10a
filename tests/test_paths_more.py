"""Unit tests of attnbook.rank.paths.path_length_fractions (chapter "Path decomposition")."""

from __future__ import annotations

import math

import pytest

from attnbook.rank.paths import path_length_counts, path_length_fractions


def test_path_length_fractions_by_hand():
    # L=2, H=2: 9 paths, 1 of length 0, 4 of length 1 (C(2,1) 2), 4 of length 2
    assert path_length_fractions(2, 2) == [1 / 9, 4 / 9, 4 / 9]
    assert path_length_fractions(1, 3) == [0.25, 0.75]


@pytest.mark.parametrize("L,H", [(1, 1), (6, 2), (6, 12), (12, 12)])
def test_path_length_fractions_sum_to_one_with_mean_L_H_over_H_plus_one(L, H):
    fr = path_length_fractions(L, H)
    assert len(fr) == L + 1
    assert math.isclose(sum(fr), 1.0, rel_tol=1e-12)
    assert math.isclose(sum(k * f for k, f in enumerate(fr)), L * H / (H + 1), rel_tol=1e-12)


def test_equal_counts_give_equal_fractions():
    # BERT-base: C(12, 11) 12^11 = 12^12 = C(12, 12) 12^12, so lengths 11 and 12 tie exactly
    counts, fr = path_length_counts(12, 12), path_length_fractions(12, 12)
    assert counts[11] == counts[12] and fr[11] == fr[12] == max(fr)
    assert fr[11] + fr[12] > 0.7 and sum(fr[:7]) < 0.01


def test_bad_sizes_raise():
    with pytest.raises(ValueError):
        path_length_fractions(0, 2)
