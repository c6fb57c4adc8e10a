"""The power of the book's interval rules (attnbook.stats: seed_noise, envelope_rule_power, containment_power),
checked on simulated data with a known answer."""

import math

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


def test_more_seeds_lower_the_envelope_rules_power():
    # every seed's interval must lie on the paper's side: a conservative rule, weaker with each seed
    two = stats.envelope_rule_power(-0.5, 0.3, 0.4, 2)["reproduces"]
    three = stats.envelope_rule_power(-0.5, 0.3, 0.4, 3)["reproduces"]
    assert three < two


def test_seed_noise_recovers_known_noise():
    rng = np.random.default_rng(1)
    se, sd, shapes = 0.3, 0.5, []
    for _ in range(400):  # two seeds per shape
        deltas = 1.0 + sd * rng.standard_normal(2) + se * rng.standard_normal(2)
        shapes.append([{"delta": d, "low": d - 1.96 * se, "high": d + 1.96 * se} for d in deltas])
    out = stats.seed_noise(shapes)
    assert out["sentence_se"] == pytest.approx(se)
    assert out["seed_sd"] == pytest.approx(sd, rel=0.1)
    assert out["dof"] == 400


def test_seed_noise_needs_seeds():
    with pytest.raises(ValueError, match="at least one seed"):
        stats.seed_noise([])


def test_containment_power_is_the_coverage_without_seed_noise():
    assert stats.containment_power(0.3, 0.0) == pytest.approx(0.95, abs=0.0005)
    # the simulated coverage of the interval, with seed noise it does not see
    rng = np.random.default_rng(2)
    se, sd = 0.3, 0.4
    est = sd * rng.standard_normal(100_000) + se * rng.standard_normal(100_000)
    assert stats.containment_power(se, sd) == pytest.approx(np.mean(abs(est) <= 1.96 * se), abs=0.01)
    assert math.isclose(stats.containment_power(se, 10.0), 0.0, abs_tol=0.05)


def test_compare_states_the_rules_power():
    claims.REGISTRY.clear()
    c = claims.compare("x", -0.2, paper=-0.5, source="Table 3", same_side_of=0.0, interval=(-0.6, 0.1),
                       power=0.19)
    assert "power: 0.19" in c.condition and c.verdict == "undecided"
    with pytest.raises(ValueError, match="interval rule"):
        claims.compare("y", -0.2, paper=-0.5, source="Table 3", same_side_of=0.0, power=0.5)
    with pytest.raises(ValueError, match="share in"):
        claims.compare("z", -0.2, paper=-0.5, source="Table 3", same_side_of=0.0, interval=(-0.6, 0.1),
                       power=1.5)
    claims.REGISTRY.clear()
