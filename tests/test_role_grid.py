"""Tests of attnbook.heads.role_grid (chapter "A translation model", the role table's grid of settings): the
data cell's early-stopping gate fails for a record still improving, and the setting rule's four answers on
cases with a known answer."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attnbook.claims import ClaimFailed
from attnbook.heads import role_grid


def _record(scores, patience=6):
    return {"evals": [{"step": 350 * (i + 1), "dev_bleu": s} for i, s in enumerate(scores)],
            "recipe": {"patience": patience}, "command": "python scripts/run.py translation_model_data25"}


def test_evaluations_since_best_counts_from_the_first_best():
    assert role_grid.evaluations_since_best(_record([10, 12, 11, 12, 11])["evals"]) == 3
    assert role_grid.evaluations_since_best(_record([10, 11, 12])["evals"]) == 0
    with pytest.raises(ValueError, match="no dev evaluations"):
        role_grid.evaluations_since_best([])


def test_early_stopping_gate_passes_a_stopped_run_and_fails_one_still_improving():
    stopped = role_grid.early_stopping_gate(_record([10, 14, 13, 13.5, 12, 13, 13.9, 12.5], patience=6),
                                            model="a quarter")
    assert stopped.holds and stopped.verdict == "passes" and stopped.value == 6
    assert "translation_model_data25" in stopped.precomputed
    # the shipped model's record ends one evaluation after its best: the gate must fail, not raise
    improving = role_grid.early_stopping_gate(_record([30, 31, 32.2, 32.1, 32.5, 32.3]), model="all verses")
    assert not improving.holds and improving.verdict == "fails" and improving.value == 1
    five = role_grid.early_stopping_gate(_record([14, 13, 13, 13, 13, 13]), model="five after")
    assert not five.holds  # five evaluations after the best are one short of patience 6


def test_task_gates_pass_a_model_that_uses_its_encoder_and_fail_one_that_does_not_or_loops():
    kw = dict(model="m", n_verses=500, guards="its roles", precomputed="cmd")
    ok = role_grid.task_gates({"drop": 8.0, "looping_share": 0.02}, **kw)
    assert [g.verdict for g in ok] == ["passes", "passes"]
    weak = role_grid.task_gates({"drop": 2.7, "looping_share": 0.02}, **kw)
    assert [g.holds for g in weak] == [False, True] and "its roles" in weak[0].reason
    loops = role_grid.task_gates({"drop": 8.0, "looping_share": 0.08}, **kw)
    assert [g.holds for g in loops] == [True, False]
    edge = role_grid.task_gates({"drop": 5.0, "looping_share": 0.05}, **kw)  # the limits pass
    assert all(g.holds for g in edge) and "first 500 test verses" in edge[0].name
    assert [g.precomputed for g in edge] == ["cmd", "cmd"]


def test_the_analysed_model_s_gates_raise_when_it_does_not_use_its_encoder_or_loops():
    """Gates 2 and 3 as must-hold checks (chapters 10 and 11 on the model Part III analyses): at the limits they
    hold; below the encoder drop or above the looping share they raise."""
    at_limit = role_grid.encoder_use_check(role_grid.MIN_ENCODER_DROP, removed="off", precomputed="cmd")
    assert at_limit.holds and at_limit.name.endswith("heads are off") and at_limit.precomputed == "cmd"
    with pytest.raises(ClaimFailed, match="heads are off"):
        role_grid.encoder_use_check(role_grid.MIN_ENCODER_DROP - 0.1, removed="off")
    assert role_grid.looping_check(role_grid.MAX_LOOPING_SHARE, outputs="its outputs").holds
    with pytest.raises(ClaimFailed, match="its outputs that loop"):
        role_grid.looping_check(role_grid.MAX_LOOPING_SHARE + 0.01, outputs="its outputs")


def test_setting_effect_is_a_pooled_two_sample_t_test():
    from scipy.stats import ttest_ind

    ref, setting = [0.58, 0.55, 0.61], [0.40, 0.47]
    out = role_grid.setting_effect(ref, setting)
    assert out["p"] == pytest.approx(ttest_ind(ref, setting).pvalue) and out["says"] == "raises"
    assert out["change"] == pytest.approx(0.145) and out["spread"] == pytest.approx(0.07)
    assert role_grid.setting_effect(setting, ref)["says"] == "lowers"
    # two seeds against one: 1 degree of freedom, a change of ten spreads is still within seed noise
    wide = role_grid.setting_effect([0.50, 0.52], [0.30])
    assert wide["says"] == "within seed noise" and 0.05 < wide["p"] < 0.2
    assert role_grid.setting_effect([0.60, 0.60], [0.50, 0.50])["says"] == "raises"  # no seed noise at all


def test_setting_effect_errs_at_its_level_when_nothing_changes():
    # normal seed noise, no effect: raises or lowers about 5% of the time, for 2 against 2 and 2 against 1
    # seeds (the rule first committed, "the change exceeds the largest seed spread", errs 22% and 45%)
    rng = np.random.default_rng(0)
    for n_setting in (2, 1):
        says = [role_grid.setting_effect(rng.normal(0.5, 0.05, 2), rng.normal(0.5, 0.05, n_setting))["says"]
                for _ in range(4000)]
        assert np.mean([s != "within seed noise" for s in says]) == pytest.approx(0.05, abs=0.012)


@pytest.mark.parametrize("n_ref, n_setting", [(2, 2), (2, 1), (3, 2)])
def test_setting_effect_interval_covers_the_true_change_95_percent_of_the_time(n_ref, n_setting):
    # a known answer: the cells differ by 0.1 in mean, seed noise sd 0.05; a too narrow interval (z instead of t,
    # or one cell's variance only) covers far less than 95% at these few seeds
    rng = np.random.default_rng(1)
    covered, agree = [], []
    for _ in range(3000):
        e = role_grid.setting_effect(rng.normal(0.6, 0.05, n_ref), rng.normal(0.5, 0.05, n_setting))
        lo, hi = e["interval"]
        covered.append(lo <= 0.1 <= hi)
        agree.append((lo > 0 or hi < 0) == (e["says"] != "within seed noise"))  # the interval inverts the test
    assert np.mean(covered) == pytest.approx(0.95, abs=0.013) and all(agree)


def test_a_setting_claim_is_a_finding_with_the_tests_interval_and_degrees_of_freedom():
    e = role_grid.setting_effect([0.58, 0.55, 0.61], [0.40, 0.47])
    c = role_grid.setting_claim("best neighbour share, all minus half", e, band=0.03, precomputed="cmd")
    assert (c.kind, c.verdict, c.precomputed, c.band) == ("finding", "higher", "cmd", 0.03)
    assert c.interval == pytest.approx(e["interval"], rel=0.01) and c.value == pytest.approx(e["change"], rel=0.01)
    assert "(3 against 2 seeds, 3 degree(s) of freedom)" in c.condition
    assert "95% interval" in c.condition
    at_90 = role_grid.setting_claim("x", role_grid.setting_effect([0.50, 0.52], [0.30], level=0.1), band=0.03)
    assert "90% interval" in at_90.condition
    noisy = role_grid.setting_claim("x", role_grid.setting_effect([0.50, 0.52], [0.30]), band=0.03)
    assert noisy.verdict == "not shown"
    assert role_grid.setting_claim("x", role_grid.setting_effect([0.5], [0.3]), band=0.03).verdict == "undecided"


def test_setting_effect_without_two_seeds_in_a_cell_is_undecided():
    one = role_grid.setting_effect([0.58], [0.40])
    assert one["says"] == "undecided" and math.isnan(one["spread"]) and math.isnan(one["p"])
    assert one["interval"] is None and one["dof"] == 0


def test_setting_effect_refuses_an_empty_cell_or_a_missing_value():
    with pytest.raises(ValueError, match="at least one seed"):
        role_grid.setting_effect([0.5, 0.6], [])
    with pytest.raises(ValueError, match="finite"):
        role_grid.setting_effect([0.5, float("nan")], [0.4])


def test_data_axis_tests_every_pair_of_analysed_amounts_and_grows_only_if_each_step_raises():
    levels = {"all": [0.60, 0.62], "50%": [0.50, 0.51], "25%": [0.40, 0.41]}
    out = role_grid.data_axis(levels)
    assert list(out["steps"]) == ["all - 50%", "all - 25%", "50% - 25%"]
    assert out["steps"]["50% - 25%"] == role_grid.setting_effect(levels["50%"], levels["25%"])
    assert out["grows"] is True
    flat = role_grid.data_axis({**levels, "50%": [0.50, 0.62]})  # half no better than a quarter? noisy
    assert flat["steps"]["50% - 25%"]["says"] == "within seed noise" and flat["grows"] is False
    backwards = role_grid.data_axis({"all": [0.60, 0.62], "50%": [0.70, 0.71], "25%": [0.40, 0.41]})
    assert backwards["steps"]["all - 50%"]["says"] == "lowers" and backwards["grows"] is False
    # growth is judged on neighbouring steps: all - 25% raising does not make up for a flat half
    wide_flat = role_grid.data_axis({"all": [0.60, 0.61], "50%": [0.50, 0.70], "25%": [0.40, 0.41]})
    assert wide_flat["steps"]["all - 25%"]["says"] == "raises" and wide_flat["grows"] is False


def test_data_axis_says_nothing_of_growth_when_a_step_is_undecided():
    one_each = role_grid.data_axis({"all": [0.60, 0.62], "50%": [0.50], "25%": [0.40]})
    assert one_each["steps"]["50% - 25%"]["says"] == "undecided" and one_each["grows"] is None


def test_data_axis_leaves_out_amounts_without_analysed_models_and_then_says_nothing_of_growth():
    out = role_grid.data_axis({"all": [0.60, 0.62], "50%": [0.50], "25%": []})
    assert list(out["steps"]) == ["all - 50%"] and out["grows"] is None
    assert role_grid.data_axis({"all": [0.6, 0.62], "50%": [], "25%": []}) == {"steps": {}, "grows": None}
    with pytest.raises(ValueError, match="two amounts"):
        role_grid.data_axis({"all": [0.6]})


def test_grid_runs_name_each_variant_with_what_it_changes_and_whether_it_is_shipped():
    cells = {c["run"]: c for c in role_grid.grid_runs()}
    assert "translation_model" not in cells and "translation_model_eval" not in cells
    assert cells["translation_model_h4"]["changes"] == {"n_heads": 4}
    assert cells["translation_model_seed1"]["changes"] == {"seed": 1}
    assert cells["translation_model_d512_seed1"]["changes"] == {"d_model": 512, "d_ff": 2048, "seed": 1}
    assert cells["translation_model_h4"]["shipped"] and not cells["translation_model_h4"]["pending"]
    gpu = cells["translation_model_d256"]
    assert not gpu["shipped"] and "GPU" in gpu["pending"]
    assert gpu["command"] == "python scripts/run.py translation_model_d256"
