"""The power of the book's interval rules (attnbook.stats: envelope_rule_power, pooled_rule_power,
reaches_power),
checked on simulated data with a known answer."""


import numpy as np
import pytest
from scipy.stats import norm

from attnbook import claims, stats


def test_one_seed_power_matches_the_normal_formula():
    # one seed, no seed noise: reproduces when estimate + 1.96 se < 0, i.e. Phi(-effect/se - 1.96)
    se, effect = 0.3, -0.8
    out = stats.envelope_rule_power(effect, se, 0.0, 1, n_sim=200_000)
    assert out["reproduces"] == pytest.approx(norm.cdf(-effect / se - 1.96), abs=0.005)
    assert out["differs"] == pytest.approx(norm.cdf(effect / se - 1.96), abs=0.002)
    assert out["reproduces"] + out["differs"] + out["undecided"] == pytest.approx(1.0)


def test_power_is_symmetric_in_the_sign_of_the_effect():
    a = stats.envelope_rule_power(0.6, 0.3, 0.2, 2, n_sim=100_000)
    b = stats.envelope_rule_power(-0.6, 0.3, 0.2, 2, n_sim=100_000)
    assert a["reproduces"] == pytest.approx(b["reproduces"], abs=0.01)
    assert a["differs"] == pytest.approx(b["differs"], abs=0.005)
    # one seed, no seed noise, a positive effect: it differs when estimate + 1.96 se <= 0
    up = stats.envelope_rule_power(0.8, 0.3, 0.0, 1, n_sim=200_000)
    assert up["differs"] == pytest.approx(norm.cdf(-0.8 / 0.3 - 1.96), abs=0.002)


def test_more_seeds_lower_the_envelope_rules_power():
    # every seed's interval must lie on the paper's side: a conservative rule, weaker with each seed
    two = stats.envelope_rule_power(-0.5, 0.3, 0.4, 2)["reproduces"]
    three = stats.envelope_rule_power(-0.5, 0.3, 0.4, 3)["reproduces"]
    assert three < two


def test_compare_states_the_rules_power():
    claims.REGISTRY.clear()
    c = claims.compare("x", -0.2, paper=-0.5, source="Table 2", same_side_of=0.0, interval=(-0.6, 0.1),
                       power=0.19)
    assert "power: 0.19" in c.condition and c.verdict == "undecided"
    with pytest.raises(ValueError, match="interval rule"):
        claims.compare("y", -0.2, paper=-0.5, source="Table 2", same_side_of=0.0, power=0.5)
    with pytest.raises(ValueError, match="share in"):
        claims.compare("z", -0.2, paper=-0.5, source="Table 2", same_side_of=0.0, interval=(-0.6, 0.1),
                       power=1.5)
    claims.REGISTRY.clear()


def _pooled_coverage(n_sim, seeds=(2, 2, 2), sd=0.5, level=0.95):
    # shapes with different true means: the pooled variance must be the within-shape one
    rng = np.random.default_rng(7)
    means = [0.3, -1.0, 2.0][: len(seeds)]
    hits = 0
    for _ in range(n_sim):
        draws = [m + sd * rng.standard_normal(n) for m, n in zip(means, seeds)]
        first = stats.pooled_seed_intervals(draws, level)[0]
        hits += first["low"] <= means[0] <= first["high"]
    return hits / n_sim


def test_pooled_seed_interval_covers_the_true_mean_at_its_level():
    # 6000 simulated experiments: a 95% interval covers 0.95 +- 0.01; with z instead of t (too narrow) it
    # covers about 0.86, with one shape's degrees of freedom (too wide) about 0.998
    assert _pooled_coverage(6000) == pytest.approx(0.95, abs=0.01)
    assert _pooled_coverage(3000, seeds=(3, 1), level=0.9) == pytest.approx(0.90, abs=0.017)


def test_pooled_seed_intervals_pool_the_within_shape_variance():
    out = stats.pooled_seed_intervals([[1.0, 2.0], [10.0, 12.0], [5.0]])
    sd = ((0.5 + 2.0) / 2) ** 0.5  # squared deviations 0.25+0.25 and 1+1, over 1 + 1 degrees of freedom
    assert out[0]["sd"] == pytest.approx(sd) and out[0]["dof"] == 2
    q = 4.302652729911275  # Student t, 97.5% quantile, 2 degrees of freedom
    assert (out[0]["mean"], out[0]["high"]) == pytest.approx((1.5, 1.5 + q * sd / 2 ** 0.5))
    assert out[2]["low"] == pytest.approx(5.0 - q * sd) and out[2]["n_seeds"] == 1
    with pytest.raises(ValueError, match="at least two seeds"):
        stats.pooled_seed_intervals([[1.0], [2.0]])
    with pytest.raises(ValueError, match="every shape"):
        stats.pooled_seed_intervals([[1.0, 2.0], []])


def test_pooled_rule_power_is_the_noncentral_t_tail():
    from scipy.stats import nct, t

    effect, sd, seeds = -0.8, 0.5, (2, 2, 2)
    dof, q = 3, t.ppf(0.975, 3)
    exact = nct.sf(q, dof, -effect * 2 ** 0.5 / sd)  # P(mean + q s / sqrt(2) < 0)
    out = stats.pooled_rule_power(effect, sd, seeds, n_sim=200_000)
    assert out["reproduces"] == pytest.approx(exact, abs=0.005)
    assert out["reproduces"] + out["differs"] + out["undecided"] == pytest.approx(1.0)
    more = stats.pooled_rule_power(effect, sd, (3, 3, 3), n_sim=50_000)["reproduces"]
    assert more > out["reproduces"]  # unlike the envelope rule, more seeds raise its power
    with pytest.raises(ValueError, match="one shape with two or more"):
        stats.pooled_rule_power(effect, sd, (1, 1))


def test_reaches_power_matches_a_simulation_of_the_one_sided_rule():
    rng = np.random.default_rng(3)
    effect, level, se, sd = -0.15, -0.65, 0.2, 0.3
    est = effect + sd * rng.standard_normal(200_000) + se * rng.standard_normal(200_000)
    simulated = np.mean(est - 1.96 * se >= level)
    assert stats.reaches_power(effect, level, se, sd) == pytest.approx(simulated, abs=0.005)
    # without seed noise and the effect on the level, the interval clears it only 2.5% of the time
    assert stats.reaches_power(level, level, se, 0.0) == pytest.approx(0.025, abs=1e-3)
    with pytest.raises(ValueError):
        stats.reaches_power(effect, level, 0.0, sd)


def test_pooled_sd_pools_within_groups_and_batches_over_leading_axes():
    groups = [[1.0, 2.0], [10.0, 12.0], [5.0]]
    sd, dof = stats.pooled_sd(groups)
    assert dof == 2 and sd == pytest.approx(((0.5 + 2.0) / 2) ** 0.5)
    batched, _ = stats.pooled_sd([np.array([[1.0, 2.0], [0.0, 4.0]]), np.array([[10.0, 12.0], [1.0, 1.0]])])
    assert batched == pytest.approx([sd, 2.0])  # one pooled sd per row: (8 + 0) / 2 degrees of freedom
    with pytest.raises(ValueError, match="at least two seeds"):
        stats.pooled_sd([[1.0], [2.0]])


def test_two_sample_t_is_the_pooled_t_test_and_its_interval_covers_at_its_level():
    from scipy.stats import ttest_ind

    a, b = [325.0, 450.0, 625.0], [75.0, 75.0, 75.0]
    out = stats.two_sample_t(a, b)
    assert out["change"] == pytest.approx(391.67, abs=0.01) and out["dof"] == 4 and out["n"] == (3, 3)
    assert out["p"] == pytest.approx(ttest_ind(a, b).pvalue)  # scipy's pooled (equal-variance) t test
    lo, hi = out["interval"]
    assert lo > 0 and (lo + hi) / 2 == pytest.approx(out["change"])
    assert stats.two_sample_t([1.0], [2.0])["interval"] is None  # no degree of freedom
    assert stats.two_sample_t([2.0, 2.0], [1.0, 1.0])["p"] == 0.0  # no spread: any change is beyond it
    with pytest.raises(ValueError, match="finite"):
        stats.two_sample_t([1.0, float("inf")], [1.0, 2.0])
    with pytest.raises(ValueError, match="at least one value"):
        stats.two_sample_t([], [1.0])
    # a known change of 100 with seed sd 60: the 90% interval covers it 90% of the time (a z quantile or one
    # group's variance would not, at three seeds a group)
    rng = np.random.default_rng(3)
    covered = [lo <= 100 <= hi for lo, hi in
               (stats.two_sample_t(rng.normal(400, 60, 3), rng.normal(300, 60, 3), level=0.9)["interval"]
                for _ in range(4000))]
    assert np.mean(covered) == pytest.approx(0.90, abs=0.015)


def test_welch_t_keeps_each_arm_s_variance_and_covers_at_its_level():
    from scipy.stats import ttest_ind

    a, b = [31.5, 30.4, 30.9], [30.1, 30.0, 29.9, 29.85]
    out = stats.welch_t(a, b)
    assert out["p"] == pytest.approx(ttest_ind(a, b, equal_var=False).pvalue)  # scipy's Welch test
    assert out["change"] == pytest.approx(np.mean(a) - np.mean(b)) and out["n"] == (3, 4)
    assert 2 < out["dof"] < 3  # Welch-Satterthwaite, not n_a + n_b - 2
    with pytest.raises(ValueError, match="two values"):
        stats.welch_t([1.0], [1.0, 2.0])
    # unequal seed noise (sd 0.8 on 3 seeds, 0.1 on 4): Welch's 95% interval covers a known change about 95% of
    # the time; the pooled interval would cover it about 84% of the time
    rng = np.random.default_rng(0)
    covered = [lo <= 1 <= hi for lo, hi in (stats.welch_t(rng.normal(1, 0.8, 3), rng.normal(0, 0.1, 4))["interval"]
                                            for _ in range(4000))]
    assert np.mean(covered) == pytest.approx(0.945, abs=0.015)


def test_two_arm_intervals_put_both_arms_noise_in_and_cover_at_their_level():
    # by hand: arm a 3 seeds at one shape and 2 at another, arm b 3 seeds at the first shape and 1 at the second
    a, b = [[31.0, 30.0, 32.0], [29.0, 30.0]], [[30.0, 30.2, 29.8], [30.5]]
    out = stats.two_arm_seed_intervals(a, b)
    sd_a = np.sqrt((2.0 + 0.5) / 3)  # pooled over (3 - 1) + (2 - 1) degrees of freedom
    sd_b = np.sqrt(0.08 / 2)  # the second shape's one seed adds no degree of freedom
    assert out[0]["sd_a"] == pytest.approx(sd_a) and out[0]["sd_b"] == pytest.approx(sd_b)
    assert out[1]["mean"] == pytest.approx(29.5 - 30.5) and (out[1]["n_a"], out[1]["n_b"]) == (2, 1)
    va, vb = sd_a ** 2 / 3, sd_b ** 2 / 3
    assert out[0]["dof"] == pytest.approx((va + vb) ** 2 / (va ** 2 / 3 + vb ** 2 / 2))
    from scipy.stats import t as student_t
    half = student_t.ppf(0.975, out[0]["dof"]) * np.sqrt(va + vb)
    assert (out[0]["low"], out[0]["high"]) == pytest.approx((1.0 - half, 1.0 + half))
    # the second shape's one seed of arm b still carries arm b's noise, measured at the first shape
    se1 = np.sqrt(sd_a ** 2 / 2 + sd_b ** 2 / 1)
    assert out[1]["high"] - out[1]["low"] == pytest.approx(2 * student_t.ppf(0.975, out[1]["dof"]) * se1)
    with pytest.raises(ValueError, match="one seed at every shape"):
        stats.two_arm_seed_intervals(a, [[30.0], [30.5]])
    # coverage on simulated arms whose noise differs (sd 0.8 and 0.15), 3 and 2 seeds at three shapes
    rng = np.random.default_rng(1)
    covered = []
    for _ in range(3000):
        sim_a = [rng.normal(1.0, 0.8, 3) for _ in range(3)]
        sim_b = [rng.normal(0.0, 0.15, n) for n in (3, 1, 1)]
        first = stats.two_arm_seed_intervals(sim_a, sim_b)[0]
        covered.append(first["low"] <= 1.0 <= first["high"])
    assert np.mean(covered) == pytest.approx(0.95, abs=0.015)


def test_two_arm_rule_power_matches_the_rule_applied_to_simulated_experiments():
    power = stats.two_arm_rule_power(-0.5, 0.5, 0.3, [3, 3, 3], [3, 1, 1], n_sim=4000)
    rng = np.random.default_rng(5)
    hits = 0
    for _ in range(2000):
        sim_a = [rng.normal(-0.5, 0.5, 3) for _ in range(3)]
        sim_b = [rng.normal(0.0, 0.3, n) for n in (3, 1, 1)]
        hits += stats.two_arm_seed_intervals(sim_a, sim_b)[0]["high"] <= 0
    assert power["reproduces"] == pytest.approx(hits / 2000, abs=0.03)
    assert sum(power[k] for k in ("reproduces", "undecided", "differs")) == pytest.approx(1)
    flipped = stats.two_arm_rule_power(0.5, 0.5, 0.3, [3, 3, 3], [3, 1, 1], n_sim=4000)
    assert flipped["reproduces"] == pytest.approx(power["reproduces"], abs=0.02)
    with pytest.raises(ValueError, match="two or more in each arm"):
        stats.two_arm_rule_power(-0.5, 0.5, 0.3, [3], [1])


def test_two_arm_rule_power_uses_each_arm_s_own_seed_count_at_the_deciding_shape():
    # unequal seeds at the first shape (4 against 2): the rule's power as the rule decides simulated experiments
    power = stats.two_arm_rule_power(-0.5, 0.3, 0.6, [4, 4], [2, 3], n_sim=20000)
    rng = np.random.default_rng(6)
    hits = sum(stats.two_arm_seed_intervals([rng.normal(-0.5, 0.3, n) for n in (4, 4)],
                                            [rng.normal(0.0, 0.6, n) for n in (2, 3)])[0]["high"] <= 0
               for _ in range(3000))
    assert power["reproduces"] == pytest.approx(hits / 3000, abs=0.03)


def test_detectable_effect_is_found_at_its_power_by_the_direction_rule():
    """A direction rule's detectable effect (issue 36: what an undecided verdict leaves open): with a known
    standard error, the rule (the whole 90% interval above 0) finds an effect of that size 80% of the time, and
    a smaller effect less often."""
    rng = np.random.default_rng(3)
    se, z = 0.7, norm.ppf(0.95)
    delta = stats.detectable_effect((-z * se, z * se), level=0.9)
    assert delta == pytest.approx((z + norm.ppf(0.8)) * se)
    for true, rate in ((delta, 0.8), (0.5 * delta, norm.cdf(0.5 * delta / se - z))):
        est = true + se * rng.standard_normal(200_000)
        assert np.mean(est - z * se > 0) == pytest.approx(rate, abs=0.005)
    # another power or level moves it the right way
    assert stats.detectable_effect((-1, 1), 0.9, power=0.9) > stats.detectable_effect((-1, 1), 0.9)
    assert stats.detectable_effect((-1, 1), 0.95) < stats.detectable_effect((-1, 1), 0.9)
    assert stats.detectable_effect((0.3, 0.3), 0.9) == 0.0  # no noise: any effect is found
    with pytest.raises(ValueError, match="interval"):
        stats.detectable_effect((1, -1), 0.9)


def test_detectable_effect_of_a_welch_interval_on_simulated_seeds():
    """The delay rule of chapter "The circle task" (a 90% Welch t interval) on 16 simulated seeds a group (sd 1):
    the effect read from the intervals is about the normal answer, and the rule finds an effect of that size
    about 80% of the time (a little less: t's tails are wider than the normal's at 30 degrees of freedom)."""
    rng = np.random.default_rng(4)
    n, true = 16, (norm.ppf(0.95) + norm.ppf(0.8)) * (2 / 16) ** 0.5
    found, read = [], []
    for i in range(300):
        a, b = true + rng.standard_normal(n), rng.standard_normal(n)
        lo, hi = stats.welch_t(a, b, level=0.9)["interval"]
        found.append(lo > 0)
        read.append(stats.detectable_effect((lo, hi), 0.9))
    assert np.median(read) == pytest.approx(true, rel=0.15)
    assert 0.72 <= np.mean(found) <= 0.92


def test_share_rule_detectable_is_exact():
    # 6 runs: only 6 of 6 puts the exact 95% interval above one half, so the share must reach 0.8 ** (1/6)
    assert stats.share_rule_detectable(6) == pytest.approx(0.8 ** (1 / 6), abs=1e-9)
    assert stats.share_rule_detectable(4) is None  # even 4 of 4 leaves one half inside the interval
    from scipy.stats import binom

    p = stats.share_rule_detectable(15)
    k = 12  # the fewest of 15 whose interval lies above one half
    assert stats.share_interval(k, 15)[0] > 0.5 > stats.share_interval(k - 1, 15)[0]
    assert binom.sf(k - 1, 15, p) == pytest.approx(0.8, abs=1e-6)
    rng = np.random.default_rng(5)  # and by simulating the rule itself
    hits = rng.binomial(15, p, 20_000)
    decides = np.array([stats.share_interval(h, 15)[0] > 0.5 for h in range(16)])
    assert decides[hits].mean() == pytest.approx(0.8, abs=0.01)
    # another level moves the number of hits the rule needs: 7 of 8 at 90% (8 of 8 at 95%)
    p90 = stats.share_rule_detectable(8, level=0.9)
    assert stats.share_interval(7, 8, 0.9)[0] > 0.5 > stats.share_interval(6, 8, 0.9)[0]
    assert binom.sf(6, 8, p90) == pytest.approx(0.8, abs=1e-6)
    with pytest.raises(ValueError, match="n >= 1"):
        stats.share_rule_detectable(0)


def test_stratified_welch_t_keeps_the_strata_apart_and_covers_at_its_level():
    # one stratum is Welch's test (scipy's)
    from scipy.stats import ttest_ind
    a, b = [31.5, 30.4, 30.9], [30.1, 30.0, 29.9, 29.85]
    assert stats.stratified_welch_t([a], [b])["p"] == pytest.approx(ttest_ind(a, b, equal_var=False).pvalue)
    # strata without spread, even where float rounding gives a variance of 1e-34: a point interval
    flat = stats.stratified_welch_t([[0.1] * 3, [0.3] * 3], [[0.1] * 3, [0.1] * 3])
    assert flat["interval"] == pytest.approx((0.1, 0.1)) and flat["p"] == 0.0
    assert stats.welch_t([0.1] * 3, [0.1] * 3)["p"] == 1.0  # no change at all
    # by hand, two strata: (1 - 0) and (3 - 2) average to 1; the variances of the four means are
    # 0.5 / 2, 0.5 / 2, 2 / 2, 0 / 2, their sum over 2 strata squared is 0.375
    out = stats.stratified_welch_t([[0.5, 1.5], [2.0, 4.0]], [[-0.5, 0.5], [2.0, 2.0]], level=0.9)
    assert out["change"] == pytest.approx(1.0) and out["n"] == (4, 4)
    parts = np.array([0.25, 0.25, 1.0, 0.0]) / 4
    assert out["dof"] == pytest.approx(parts.sum() ** 2 / (parts ** 2).sum())
    from scipy.stats import t as student_t
    half = student_t.ppf(0.95, out["dof"]) * np.sqrt(0.375)
    assert out["interval"] == pytest.approx((1 - half, 1 + half))
    with pytest.raises(ValueError, match="same number"):
        stats.stratified_welch_t([a, a], [b])
    # coverage on simulated path sets: two lengths whose levels differ by 0.2, 5 repeats per arm and length, a
    # true gain of 0.05; the 90% interval covers it about 90% of the time (pooling the lengths would cover it
    # nearly always, the gap between the lengths counted as noise)
    rng = np.random.default_rng(2)
    covered = []
    for _ in range(3000):
        many = [rng.normal(0.55, 0.05, 5), rng.normal(0.75, 0.08, 5)]
        few = [rng.normal(0.50, 0.05, 5), rng.normal(0.70, 0.03, 5)]
        lo, hi = stats.stratified_welch_t(many, few, level=0.9)["interval"]
        covered.append(lo <= 0.05 <= hi)
    assert np.mean(covered) == pytest.approx(0.9, abs=0.015)


def test_detectable_effect_t_is_found_at_its_power_on_three_seeds():
    """The direction rule over three training seeds (chapter "Path effectiveness"): the whole 90% t interval of
    three values drawn with sd 1 above 0 finds the effect of ``detectable_effect_t`` 80% of the time. The normal
    approximation's effect, smaller, is found far less often; a t quantile at ``level`` rather than
    ``(1 + level) / 2`` would give a smaller effect too."""
    from scipy.stats import t as student_t

    rng = np.random.default_rng(5)
    n, se = 3, 1 / 3 ** 0.5
    crit = student_t.ppf(0.95, n - 1)

    def found(true):
        x = true + rng.standard_normal((100_000, n))
        return np.mean(x.mean(1) - crit * x.std(1, ddof=1) / n ** 0.5 > 0)

    delta = stats.detectable_effect_t(se, n - 1, level=0.9)
    assert found(delta) == pytest.approx(0.8, abs=0.01)
    normal = stats.detectable_effect((-norm.ppf(0.95) * se, norm.ppf(0.95) * se), 0.9)
    assert normal < 0.7 * delta and found(normal) < 0.55
    assert stats.detectable_effect_t(se, 30, 0.9) == pytest.approx(normal, rel=0.1)  # many seeds: normal
    assert stats.detectable_effect_t(se, n - 1, 0.9, power=0.9) > delta
    with pytest.raises(ValueError, match="standard error"):
        stats.detectable_effect_t(0.0, 2, 0.9)


def test_weighted_seed_interval_is_welch_with_weights_and_a_shared_term_and_covers_at_its_level():
    # by hand: the contrast 0.25 * a + 0.75 * b - c over three arms' seeds
    a, b, c = [30.0, 31.0, 32.0], [29.0, 29.5], [30.0, 30.2, 29.8]
    w = [0.25, 0.75, -1.0]
    out = stats.weighted_seed_interval([a, b, c], w, shared_se=0.2)
    parts = [0.25 ** 2 * 1.0 / 3, 0.75 ** 2 * 0.125 / 2, 0.04 / 3]
    assert out["mean"] == pytest.approx(0.25 * 31 + 0.75 * 29.25 - 30)
    assert out["seed_se"] == pytest.approx(np.sqrt(sum(parts)))
    assert out["se"] == pytest.approx(np.sqrt(sum(parts) + 0.04))
    assert out["dof"] == pytest.approx((sum(parts) + 0.04) ** 2 / sum(
        v ** 2 / (n - 1) for v, n in zip(parts, (3, 2, 3))))
    assert out["n_seeds"] == [3, 2, 3]
    from scipy.stats import t as student_t
    half = student_t.ppf(0.975, out["dof"]) * out["se"]  # the t quantile at Welch's degrees of freedom
    assert (out["low"], out["high"]) == pytest.approx((out["mean"] - half, out["mean"] + half))
    with pytest.raises(ValueError, match="two finite seeds"):
        stats.weighted_seed_interval([a, [1.0], c], w)
    with pytest.raises(ValueError, match="one weight per arm"):
        stats.weighted_seed_interval([a, b], w)
    # unequal seed noise on three arms of 3 seeds, and a verse noise shared by every seed (sd 0.3, known):
    # the 95% interval covers the true contrast about 95% of the time; without the shared term, or without
    # the weights, it would cover far less
    rng = np.random.default_rng(0)
    sds, truth = (0.6, 0.2, 0.1), 0.25 * 1.0 + 0.75 * 2.0 - 1.5

    def covers(shared_se):
        arms = [rng.normal(m, sd, 3) for m, sd in zip((1.0, 2.0, 1.5), sds)]
        shift = rng.normal(0, 0.3)  # the verses: one draw moves every seed's score alike
        r = stats.weighted_seed_interval([x + shift * (wi != -1) for x, wi in zip(arms, w)], w,
                                         shared_se=shared_se)
        return r["low"] <= truth <= r["high"]

    with_shared = np.mean([covers(0.3) for _ in range(4000)])  # the contrast moves by the shift
    assert with_shared == pytest.approx(0.95, abs=0.02)
    without = np.mean([covers(0.0) for _ in range(2000)])
    assert without < 0.85
    # the seeds alone (no shared noise), three per arm: the t quantile covers at its level, a normal one
    # (1.96) would cover about 90% of the time
    seeds_only = [stats.weighted_seed_interval([rng.normal(m, sd, 3) for m, sd in zip((1.0, 2.0, 1.5), sds)], w)
                  for _ in range(4000)]
    assert np.mean([r["low"] <= truth <= r["high"] for r in seeds_only]) == pytest.approx(0.95, abs=0.02)
