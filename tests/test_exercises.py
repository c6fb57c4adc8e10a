"""Tests of attnbook.booktools.exercises: each check accepts the right answer (computed here another way), rejects a
plausible wrong one with a hint, and every exercise's worked solution is in a chapter, where CI runs it."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pytest
import torch

from attnbook.booktools import exercises
from attnbook.signal import propagation as prop

BOOK = Path(__file__).resolve().parents[1] / "book"


def test_the_ratio_exercise_accepts_the_jacobian_formulas_answer_and_not_its_square():
    X = prop.tokens_with_cosine(16, 48, 0.5, torch.Generator().manual_seed(2)).double()
    norms = prop.uniform_attention_sq_norms(X, 48 ** -0.5, 48 ** -0.5, 48 ** -0.5, d_v=6)
    assert exercises.check("ch08-ratio", math.sqrt(norms["q"] / norms["v"])).right
    wrong = exercises.check("ch08-ratio", norms["q"] / norms["v"])  # forgot the square root
    assert not wrong.right and "Hint" in wrong.message


def test_the_collapsed_exercise_accepts_the_enumeration_and_not_the_mean_count():
    counts = [max(seq.count(v) for v in range(3)) for seq in itertools.product(range(3), repeat=4)]
    assert exercises.check("ch09-collapsed", sum(counts) / len(counts) / 4).right
    assert not exercises.check("ch09-collapsed", 1 / 3).right  # a digit drawn at random


def test_feedback_for_no_answer_bad_answers_and_unknown_exercises():
    pending = exercises.check("ch08-ratio", None)
    assert not pending.right and pending.message.startswith("not answered yet")
    assert "ch08-ratio" in pending._repr_markdown_()
    with pytest.raises(ValueError, match="expects a number"):
        exercises.check("ch08-ratio", "0.3")
    with pytest.raises(ValueError, match="unknown exercise"):
        exercises.check("ch99-nothing", 1.0)
    with pytest.raises(AssertionError, match="worked solution"):
        exercises.solved("ch09-collapsed", 0.5)


def test_every_exercise_has_its_worked_solution_in_a_chapter():
    """A chapter cell calls exercises.solved(<name>, ...) for every exercise: running the chapters (nbval in
    make test) runs every solution through its check."""
    solved = set()
    for path in BOOK.glob("part*/*.ipynb"):
        for cell in json.loads(path.read_text())["cells"]:
            src = "".join(cell["source"])
            solved.update(name for name in exercises.EXERCISES if f'exercises.solved("{name}"' in src)
    assert solved == set(exercises.EXERCISES)


def test_the_gamma_exercise_accepts_the_value_at_one_and_not_at_zero():
    assert exercises.check("ch03-gamma", math.exp(2) * (1 + math.e) / 4).right
    assert not exercises.check("ch03-gamma", 0.5).right  # gamma at mu = 0


def test_the_residual_exercise_accepts_the_hand_computation_and_not_the_argmin_centre():
    X = torch.tensor(exercises.RESIDUAL_EXAMPLE, dtype=torch.float64)
    R = X - X.mean(0)
    norm = lambda A: math.sqrt(A.abs().sum(0).max() * A.abs().sum(1).max())  # noqa: E731
    assert exercises.check("ch01-residual", norm(R) / norm(X)).right
    assert not exercises.check("ch01-residual", norm(R)).right  # not divided by ||X||


def test_the_path_length_exercise_accepts_the_commonest_length_only():
    counts = [math.comb(12, k) * 12**k for k in range(13)]
    best = counts.index(max(counts))
    assert exercises.check("ch02-commonest-length", best).right
    assert not exercises.check("ch02-commonest-length", best + 1).right


def test_the_previous_token_exercise_counts_argmaxes_one_to_the_left():
    A = exercises.ATTENTION_EXAMPLE
    hits = sum(max(range(5), key=lambda j: A[i][j]) == i - 1 for i in range(5))
    assert exercises.check("ch10-previous-token", hits / 5).right
    assert not exercises.check("ch10-previous-token", hits / 4).right  # the first query left out


def test_the_bound_exercise_accepts_the_formula_and_not_the_bare_cube():
    ex = exercises.BOUND_EXAMPLE
    r, sq = ex["residual"], math.sqrt(ex["d_head"])
    mu = ex["qk_norm"] * r**2 / sq
    bound = math.exp(2 * mu) * (1 + math.exp(mu)) * ex["beta"] * ex["n_heads"] / sq * r**3
    assert exercises.check("ch04-one-layer-bound", bound).right
    assert not exercises.check("ch04-one-layer-bound", r**3).right


def test_the_collapse_step_exercise_wants_sustained_merging_not_the_first_crossing():
    gaps = exercises.GAPS_EXAMPLE
    sustained = next(t for t in range(len(gaps)) if all(g < 0.05 for g in gaps[t:]))
    first = next(t for t, g in enumerate(gaps) if g < 0.05)
    assert exercises.check("ch06-collapse-step", sustained).right
    assert not exercises.check("ch06-collapse-step", first).right


def test_the_gate_exercise_accepts_a_sampled_estimate_s_exact_value_only():
    from attnbook.heads import gates

    u = torch.rand(2_000_000, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    s = torch.sigmoid((u.log() - (1 - u).log()) / gates.TEMPERATURE)
    closed = float(((s * 1.2 - 0.1) <= 0).double().mean())
    exact = float(torch.sigmoid(-torch.tensor(gates.TEMPERATURE * math.log(0.1 / 1.1))).neg() + 1)
    assert closed == pytest.approx(exact, abs=1e-3)
    assert exercises.check("ch11-closed-gate", exact).right
    assert not exercises.check("ch11-closed-gate", closed + 0.01).right


def test_the_contraction_exercise_accepts_where_the_bound_crosses_the_identity():
    ex = exercises.BOUND_EXAMPLE
    sq = math.sqrt(ex["d_head"])

    def over_r(r):  # the bound divided by r
        mu = ex["qk_norm"] * r**2 / sq
        return math.exp(2 * mu) * (1 + math.exp(mu)) * ex["beta"] * ex["n_heads"] / sq * r**2

    lo, hi = 1e-6, 10.0
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if over_r(mid) < 1 else (lo, mid)
    assert exercises.check("ch05-contraction", lo).right
    assert not exercises.check("ch05-contraction", 1.0).right


def test_the_short_paths_exercise_counts_lengths_zero_to_two():
    share = sum(math.comb(6, k) * 2**k for k in range(3)) / 3**6
    assert exercises.check("ch07-short-paths", share).right
    assert not exercises.check("ch07-short-paths", sum(math.comb(6, k) * 2**k for k in (1, 2)) / 3**6).right


def test_every_chapter_has_a_checked_exercise():
    without = [p.name for p in sorted(BOOK.glob("part*/*.ipynb"))
               if "exercises.solved(" not in p.read_text()]
    assert not without, f"chapters without a checked exercise: {without}"


def test_the_window_exercise_counts_layers_of_three_positions():
    assert exercises.check("ch12-window-reach", math.ceil(31 / 2)).right
    assert not exercises.check("ch12-window-reach", math.ceil(31 / 3)).right  # counted the token itself too
    assert not exercises.check("ch12-window-reach", 31 // 2).right  # rounded down


def test_the_importance_exercise_takes_absolute_values_before_the_mean():
    values = exercises.IMPORTANCE_EXAMPLE
    assert exercises.check("ch11-per-token-importance", sum(abs(v) for v in values) / len(values)).right
    assert not exercises.check("ch11-per-token-importance", abs(sum(values) / len(values))).right


def test_the_rule_power_exercise_accepts_the_normal_formula_and_not_the_coverage():
    from scipy.stats import norm

    gap, se = exercises.POWER_EXAMPLE["gap"], exercises.POWER_EXAMPLE["se"]
    assert exercises.check("ch11-rule-power", float(norm.cdf(-gap / se - 1.96))).right
    assert not exercises.check("ch11-rule-power", 0.95).right
    assert not exercises.check("ch11-rule-power", float(norm.cdf(-gap / se - 1.645))).right


def test_the_confidence_exercise_averages_each_querys_largest_weight():
    rows = exercises.ATTENTION_EXAMPLE
    assert exercises.check("ch10-confidence", sum(max(r) for r in rows) / len(rows)).right
    assert not exercises.check("ch10-confidence", max(max(r) for r in rows)).right
    assert not exercises.check("ch10-confidence", sum(r[0] for r in rows) / len(rows)).right


def test_the_overlap_exercise_wants_the_jaccard_index_not_a_one_sided_share():
    a, b = (set(heads) for heads in exercises.KEPT_EXAMPLE)
    assert exercises.check("ch11-kept-overlap", len(a & b) / len(a | b)).right
    assert not exercises.check("ch11-kept-overlap", len(a & b) / len(a)).right
    assert not exercises.check("ch11-kept-overlap", len(a & b) / len(b)).right


def test_the_multiplier_exercise_wants_one_over_tau_star_with_fairseq_s_quarter():
    n, rho = 27, 0.3
    tau_sq = 0.25 * (1 - rho) ** 2 * (n - 1) / (n * (1 + (n - 1) * rho))
    assert exercises.check("ch09-multiplier", 1 / math.sqrt(tau_sq)).right
    assert not exercises.check("ch09-multiplier", math.sqrt(tau_sq)).right  # tau*, not its inverse
    assert not exercises.check("ch09-multiplier", 1 / math.sqrt(tau_sq / 0.25)).right  # the 1/4 forgotten


def test_the_sink_exercise_counts_argmaxes_on_the_first_key_not_its_mean_weight():
    a = torch.tensor(exercises.ATTENTION_EXAMPLE)
    assert exercises.check("ch10-sink-share", float((a.argmax(-1) == 0).double().mean())).right
    assert not exercises.check("ch10-sink-share", float(a[:, 0].mean())).right


def test_the_setting_effect_exercise_takes_the_difference_of_the_cell_means():
    ex = exercises.SETTING_EXAMPLE
    means = [sum(ex[k]) / len(ex[k]) for k in ("all_verses", "quarter")]
    assert exercises.check("ch10-setting-effect", means[0] - means[1]).right
    assert not exercises.check("ch10-setting-effect", ex["all_verses"][0] - ex["quarter"][0]).right  # seed 0 only
