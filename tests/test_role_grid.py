"""Tests of attnbook.heads.role_grid (chapter "A translation model", the role table's grid of settings): the
data cell's early-stopping gate fails for a record still improving, and the setting rule's four answers on
cases with a known answer."""

from __future__ import annotations

import math

import pytest

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


def test_setting_effect_raises_lowers_or_within_noise():
    up = role_grid.setting_effect([0.58, 0.55], [0.40])
    assert up["says"] == "raises"
    assert up["change"] == pytest.approx(0.165) and up["spread"] == pytest.approx(0.03)
    assert role_grid.setting_effect([0.40, 0.42], [0.58])["says"] == "lowers"
    # a change smaller than the seed spread, whichever cell has the two seeds
    assert role_grid.setting_effect([0.50, 0.60], [0.53])["says"] == "within seed noise"
    assert role_grid.setting_effect([0.55], [0.52, 0.62])["says"] == "within seed noise"
    # a change exactly as large as the spread is not larger than it (exact in binary floating point)
    assert role_grid.setting_effect([0.5, 0.75], [0.375])["says"] == "within seed noise"
    # the spread is the larger of the two cells' spreads
    both = role_grid.setting_effect([0.60, 0.62], [0.40, 0.49])
    assert both["spread"] == pytest.approx(0.09) and both["says"] == "raises"


def test_setting_effect_without_two_seeds_in_a_cell_is_undecided():
    one = role_grid.setting_effect([0.58], [0.40])
    assert one["says"] == "undecided" and math.isnan(one["spread"])


def test_setting_effect_refuses_an_empty_cell_or_a_missing_value():
    with pytest.raises(ValueError, match="at least one seed"):
        role_grid.setting_effect([0.5, 0.6], [])
    with pytest.raises(ValueError, match="finite"):
        role_grid.setting_effect([0.5, float("nan")], [0.4])


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
