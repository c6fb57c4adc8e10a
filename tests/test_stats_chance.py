"""Tests of attnbook.stats.top_overlap_p: a known value, and its size on random rankings (a p-value against chance
must not reject more often than its level when there is no effect)."""

from __future__ import annotations

from math import comb

import numpy as np
import pytest

from attnbook.stats import top_overlap_p


def test_known_values():
    # 48 heads, top 3: P(overlap >= 1) = 1 - C(45, 3) / C(48, 3); P(overlap >= 3) = 1 / C(48, 3)
    assert top_overlap_p(48, 3, 1) == pytest.approx(1 - comb(45, 3) / comb(48, 3))
    assert top_overlap_p(48, 3, 3) == pytest.approx(1 / comb(48, 3))
    assert top_overlap_p(48, 3, 0) == pytest.approx(1.0)
    # the lower tail: P(overlap <= 0) = C(45, 3) / C(48, 3); the two tails overlap in P(overlap = k)
    assert top_overlap_p(48, 3, 0, below=True) == pytest.approx(comb(45, 3) / comb(48, 3))
    assert top_overlap_p(48, 3, 3, below=True) == pytest.approx(1.0)
    assert top_overlap_p(48, 3, 1) + top_overlap_p(48, 3, 1, below=True) == pytest.approx(
        1 + 3 * comb(45, 2) / comb(48, 3))


def test_random_rankings_reject_at_most_at_the_level():
    """Under no effect (independent random top sets), p < 0.05 happens at most 5% of the time (the discrete test
    is conservative), and p < 0.2 about as often as the tail it reports: an off-by-one in the tail (P(X > k)
    instead of P(X >= k)) rejects far too often."""
    rng = np.random.default_rng(0)
    n, top, trials = 12, 3, 20_000
    ps = np.array([top_overlap_p(n, top, len(set(rng.choice(n, top, replace=False)) &
                                                 set(rng.choice(n, top, replace=False)))) for _ in range(trials)])
    assert (ps < 0.05).mean() <= 0.05 + 0.005
    exact = top_overlap_p(n, top, 2)  # the largest attainable p below 0.2 at these sizes
    assert (ps <= exact).mean() == pytest.approx(exact, abs=0.01)


def test_bad_sizes_are_refused():
    with pytest.raises(ValueError, match="overlap"):
        top_overlap_p(10, 3, 4)


def test_share_interval_known_values_and_coverage():
    """The Clopper-Pearson interval: its textbook values, and on simulated runs with a known share it covers that
    share at least 95% of the time but not far more (an interval too narrow, or a normal one at small n, fails)."""
    from attnbook.stats import share_interval

    lo, hi = share_interval(2, 6)
    assert (round(lo, 4), round(hi, 4)) == (0.0433, 0.7772)
    assert share_interval(0, 6)[0] == 0 and share_interval(6, 6)[1] == 1
    rng = np.random.default_rng(0)
    for true, n in ((0.3, 6), (0.5, 16), (0.8, 30)):
        hits = rng.binomial(n, true, size=4000)
        cover = np.mean([lo <= true <= hi for lo, hi in (share_interval(int(k), n) for k in hits)])
        assert 0.95 <= cover <= 0.995, (true, n, cover)
    with pytest.raises(ValueError):
        share_interval(7, 6)


def test_share_difference_interval_matches_newcombe_and_covers_the_true_difference():
    """Newcombe's method 10: the values of his 1998 paper (Table II), and on simulated pairs of arms with known
    shares, a dozen runs an arm, it covers the true difference about 95% of the time (the Wald interval covers
    0.88-0.92 at these sizes and fails; so does an interval at the wrong level)."""
    from attnbook.stats import share_difference_interval

    for args, expected in (((56, 70, 48, 80), (0.0524, 0.3339)), ((9, 10, 3, 10), (0.1705, 0.8090)),
                           ((5, 56, 0, 29), (-0.0381, 0.1926))):
        assert tuple(round(x, 4) for x in share_difference_interval(*args)) == expected
    rng = np.random.default_rng(1)
    for p_a, n_a, p_b, n_b in ((0.5, 14, 0.1, 16), (0.3, 12, 0.3, 12), (0.2, 10, 0.05, 20)):
        a, b = rng.binomial(n_a, p_a, size=4000), rng.binomial(n_b, p_b, size=4000)
        cover = np.mean([lo <= p_a - p_b <= hi for lo, hi in
                         (share_difference_interval(int(x), n_a, int(y), n_b) for x, y in zip(a, b))])
        assert 0.93 <= cover <= 0.99, (p_a, n_a, p_b, n_b, cover)
    with pytest.raises(ValueError, match="hits"):
        share_difference_interval(3, 2, 0, 5)
    with pytest.raises(ValueError, match="level"):
        share_difference_interval(1, 2, 0, 5, level=95)


def test_permutation_p_counts_the_observed_draw_and_ties():
    from attnbook.stats import permutation_p

    drawn = np.arange(1.0, 10.0)  # 1 .. 9
    assert permutation_p(drawn, 9.0) == pytest.approx(2 / 10)  # one draw ties, plus the observed one
    assert permutation_p(drawn, 100.0) == pytest.approx(1 / 10)  # never 0
    assert permutation_p(drawn, 0.0) == pytest.approx(1.0)
    assert permutation_p(drawn, 9.0 + 1e-12) == pytest.approx(2 / 10)  # a tie summed in another order
    assert permutation_p(drawn, 9.0 + 1e-6) == pytest.approx(1 / 10)  # a draw 1e-6 below is no tie
    # turned the other way: the share at most the observed one, ties counted the same way
    assert permutation_p(drawn, 1.0, below=True) == pytest.approx(2 / 10)
    assert permutation_p(drawn, 1.0 - 1e-12, below=True) == pytest.approx(2 / 10)
    assert permutation_p(drawn, 1.0 - 1e-6, below=True) == pytest.approx(1 / 10)
    assert permutation_p(drawn, 100.0, below=True) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="finite"):
        permutation_p([], 1.0)
    with pytest.raises(ValueError, match="finite"):
        permutation_p([1.0, np.nan], 1.0)


def test_permutation_p_rejects_at_its_level_under_the_null():
    """With no effect the observed statistic is one more draw from the null: p < 0.05 about 5% of the time (an
    strict inequality, which drops the ties of a discrete statistic, makes it reject too often)."""
    from attnbook.stats import permutation_p

    rng = np.random.default_rng(1)
    continuous = np.array([permutation_p(rng.normal(size=99), rng.normal()) for _ in range(4000)])
    assert (continuous <= 0.05).mean() == pytest.approx(0.05, abs=0.012)  # p = (hits + 1) / 100
    discrete = np.array([permutation_p(rng.integers(0, 4, size=99), rng.integers(0, 4)) for _ in range(4000)])
    assert (discrete <= 0.25).mean() <= 0.25 + 0.02
    assert (discrete <= 0.30).mean() >= 0.2  # nor too large: the observed draw's ties are not counted twice
