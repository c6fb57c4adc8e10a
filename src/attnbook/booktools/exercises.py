"""Checked exercises (every part of the book): a chapter's coding exercise is checked here, with a verdict and a hint (issue: a tutorial
whose exercises give feedback).

The reader writes an answer in the chapter and calls :func:`check`, which says whether it is right and, if not,
gives a hint. Each answer is compared with a reference the library computes (never a typed-in number), so the
exercise stays right when the library changes. The chapter's worked solution, hidden behind a toggle in the
rendered book, ends with :func:`solved`, which raises when the solution is wrong: since every chapter is executed
in CI, an exercise cannot rot.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch

from attnbook import stats
from attnbook.core.norms import relative_residual
from attnbook.heads import gates, role_grid, roles
from attnbook.rank import deep_bound, masked_collapse, one_layer
from attnbook.rank.tasks import circle
from attnbook.rank.paths import path_length_counts
from attnbook.signal import propagation as prop
from attnbook.signal import reverser as rv


@dataclass(frozen=True)
class Exercise:
    """One checked exercise: its ``name`` (``chNN-topic``), the question in a sentence, the reference answer (a
    function, so that it is computed by the library when checked), a hint, and the relative tolerance."""

    name: str
    question: str
    reference: Callable[[], float]
    hint: str
    rel_tol: float = 1e-6


#: chapter "Pure attention loses rank"'s exercise matrix: three tokens of width two
RESIDUAL_EXAMPLE = ((1.0, 2.0), (3.0, 4.0), (5.0, 0.0))

#: chapter "A translation model"'s exercise: one head's attention over five tokens (rows: queries, row-stochastic)
ATTENTION_EXAMPLE = ((0.70, 0.10, 0.10, 0.05, 0.05),
                     (0.60, 0.20, 0.10, 0.05, 0.05),
                     (0.10, 0.50, 0.20, 0.10, 0.10),
                     (0.10, 0.20, 0.30, 0.25, 0.15),
                     (0.05, 0.05, 0.10, 0.60, 0.20))


#: chapter "What it takes to grow the roles"'s data-rule exercise: a role statistic per seed in two cells
SETTING_EXAMPLE = dict(all_verses=(0.58, 0.50), quarter=(0.27, 0.33))


#: chapter "Pruning heads"'s importance exercise: one head's output times the gradient there, summed over its
#: dimensions, on eight tokens
IMPORTANCE_EXAMPLE = (0.30, -0.25, 0.10, -0.05, 0.40, -0.35, 0.20, -0.15)

#: chapter "Pruning heads"'s power exercise: the true gap (BLEU) and the sentence standard error of one seed
POWER_EXAMPLE = dict(gap=-0.8, se=0.3)


#: chapter "Pruning heads"'s overlap exercise: the heads (layer, head) two gate seeds keep
KEPT_EXAMPLE = (((1, 1), (1, 4), (2, 6), (3, 2), (5, 8)), ((1, 1), (1, 4), (2, 6), (4, 3)))


def _kept_overlap(kept) -> float:
    """The gate-seed gate's overlap (:func:`attnbook.heads.sweeps.jaccard`) of two lists of kept heads."""
    from attnbook.heads.sweeps import jaccard

    def mask(heads):
        m = torch.zeros(6, 8)
        for layer, head in heads:
            m[layer - 1, head - 1] = 1
        return m

    return jaccard(mask(kept[0]), mask(kept[1]))


#: chapter "The circle task"'s exercise: the token gap of a rollout at steps 0, 1, ..., 7
GAPS_EXAMPLE = (0.95, 0.60, 0.04, 0.20, 0.07, 0.03, 0.01, 0.02)

#: chapter "Deep bounds"'s exercise: a one-head layer's constants and an input residual
BOUND_EXAMPLE = dict(beta=1.0, qk_norm=1.0, n_heads=1, d_head=4, residual=0.1)


def _layer(example) -> deep_bound.LayerConstants:
    return deep_bound.LayerConstants(example["beta"], example["qk_norm"], example["n_heads"], example["d_head"])


def _one_layer_bound(example) -> float:
    return math.exp(deep_bound.log_one_layer_bound(math.log(example["residual"]), _layer(example)))


def _previous_token_share(attention) -> float:
    a = torch.tensor(attention, dtype=torch.float64)[None, None, None]  # (layers, batch, heads, n, n)
    every = torch.ones(1, a.shape[-1], dtype=torch.bool)
    return float(roles.relative_position_share(a, every, every, offsets=(-1,))[0, 0, 0])


EXERCISES: dict[str, Exercise] = {e.name: e for e in [
    Exercise(
        "ch01-residual",
        "The three tokens of exercises.RESIDUAL_EXAMPLE (rows): what is their relative residual "
        "||res(X)||_(1,inf) / ||X||_(1,inf), with the token mean as the centre?",
        lambda: float(relative_residual(torch.tensor(RESIDUAL_EXAMPLE, dtype=torch.float64))),
        "Subtract the mean row from every row; ||A||_(1,inf) = sqrt(||A||_1 ||A||_inf), the largest absolute "
        "column sum times the largest absolute row sum, under a square root.",
    ),
    Exercise(
        "ch02-commonest-length",
        "In a stack of L = 12 layers with H = 12 heads and skip connections, which path length k has the most "
        "paths?",
        lambda: float(max(range(13), key=lambda k: path_length_counts(12, 12)[k])),
        "A path of length k picks k of the L layers and one of H heads in each: C(L, k) H^k paths; compare "
        "neighbouring k.",
        rel_tol=0.0,
    ),
    Exercise(
        "ch03-gamma",
        "The lemma's constant gamma(mu) grows with mu = ||W_QK||_(1,inf) ||R||_(1,inf)^2 / sqrt(d_qk). What is its "
        "largest value for mu <= 1?",
        lambda: float(one_layer.gamma(torch.tensor(1.0, dtype=torch.float64))),
        "gamma = e^(2 mu) (1 + e^mu) / 4 increases with mu, so its largest value on [0, 1] is at mu = 1.",
    ),
    Exercise(
        "ch04-one-layer-bound",
        "A one-head layer has beta = 1, ||W_QK||_(1,inf) = 1 and d_head = 4 (exercises.BOUND_EXAMPLE). What does "
        "the one-layer bound allow for the output residual when the input residual is r = 0.1?",
        lambda: _one_layer_bound(BOUND_EXAMPLE),
        "The bound is 4 gamma beta H / sqrt(d_head) r^3 with gamma = e^(2 mu) (1 + e^mu) / 4 and "
        "mu = ||W_QK||_(1,inf) r^2 / sqrt(d_head).",
    ),
    Exercise(
        "ch05-contraction",
        "For the layer of exercises.BOUND_EXAMPLE, below which input residual r does the one-layer bound "
        "contract, i.e. bound the output residual by less than r?",
        lambda: deep_bound.contraction_threshold(_layer(BOUND_EXAMPLE)),
        "The bound over r is 4 gamma(mu) beta H / sqrt(d_head) r^2, which grows with r: find where it crosses 1 "
        "(bisection on log r).",
        rel_tol=1e-6,
    ),
    Exercise(
        "ch06-collapse-step",
        "A rollout's token gaps at steps 0 to 7 are exercises.GAPS_EXAMPLE. At which step have the tokens "
        "collapsed (they stay below the merging gap 0.05 from then on)?",
        lambda: float(circle.collapse_step(torch.tensor(GAPS_EXAMPLE))),
        "Not the first step below 0.05: the first step after which the gap never rises to 0.05 again.",
        rel_tol=0.0,
    ),
    Exercise(
        "ch11-closed-gate",
        "A hard-concrete gate has log alpha = 0, temperature 0.33 and stretch (-0.1, 1.1), the book's. What is "
        "the probability that a sampled gate is exactly 0 (the head switched off)?",
        lambda: float(gates.prob_zero(torch.tensor(0.0, dtype=torch.float64))),
        "A sample is 0 when the stretched value s (r - l) + l is at most 0, i.e. s <= -l / (r - l); s = "
        "sigmoid((log u - log(1 - u) + log alpha) / temperature) with u uniform: solve for u.",
    ),
    Exercise(
        "ch11-per-token-importance",
        "One head's output times the gradient there, summed over its dimensions, is exercises.IMPORTANCE_EXAMPLE "
        "on eight tokens. What is its importance as Michel et al.'s code computes it?",
        lambda: float(torch.tensor(IMPORTANCE_EXAMPLE, dtype=torch.float64).abs().mean()),
        "Their code takes the absolute value for each token and then the mean over tokens; the absolute value of "
        "the mean (HuggingFace's whole-batch estimator) lets positive and negative tokens cancel.",
    ),
    Exercise(
        "ch10-sink-share",
        "In exercises.ATTENTION_EXAMPLE, take the first key to be a [CLS] token. What share of the queries put "
        "their largest weight on it (the head's sink share)?",
        lambda: float((torch.tensor(ATTENTION_EXAMPLE).argmax(-1) == 0).double().mean()),
        "Find each query's most attended key (its row's argmax) and count the queries for which it is key 0; "
        "the mean weight on key 0 is a different number.",
    ),
    Exercise(
        "ch11-kept-overlap",
        "Two gate seeds keep the heads of exercises.KEPT_EXAMPLE. What is their overlap as the gate-seed gate "
        "measures it: the heads both keep over the heads either keeps?",
        lambda: _kept_overlap(KEPT_EXAMPLE),
        "Count the heads in both lists and the heads in at least one list; the share of the first list that "
        "the second keeps is a different, one-sided number.",
    ),
    Exercise(
        "ch11-rule-power",
        "One seed, no seed-to-seed noise: the rule says reproduces when estimate + 1.96 se < 0. With the true gap "
        "and the se of exercises.POWER_EXAMPLE, how often does it say so?",
        lambda: stats.envelope_rule_power(POWER_EXAMPLE["gap"], POWER_EXAMPLE["se"], 0.0, 1,
                                          n_sim=400_000)["reproduces"],
        "The estimate is normal with mean -0.8 and standard deviation 0.3; the interval lies below 0 when the "
        "estimate is below -1.96 x 0.3.",
        rel_tol=0.01,
    ),
    Exercise(
        "ch10-confidence",
        "One head's attention over five tokens is exercises.ATTENTION_EXAMPLE (rows are queries). What is its "
        "confidence, the mean over queries of the largest weight?",
        lambda: float(roles.head_confidence(torch.tensor(ATTENTION_EXAMPLE, dtype=torch.float64)[None, None, None],
                                            torch.ones(1, 5, dtype=torch.bool),
                                            torch.ones(1, 5, dtype=torch.bool))[0, 0]),
        "For each row take its largest entry (the weight on the query's favourite key), then average the rows.",
    ),
    Exercise(
        "ch10-setting-effect",
        "Seeds 0 and 1 trained on all the verses give the best neighbour shares SETTING_EXAMPLE['all_verses'], "
        "two seeds on a quarter of them SETTING_EXAMPLE['quarter']. What change does the data rule's t test "
        "weigh against the seeds' noise?",
        lambda: role_grid.setting_effect(SETTING_EXAMPLE["all_verses"], SETTING_EXAMPLE["quarter"])["change"],
        "Average each cell over its seeds and subtract the quarter's mean from all the verses'; the difference "
        "of two single seeds, or a seed spread, is another number.",
    ),
    Exercise(
        "ch10-previous-token",
        "One head's attention over five tokens is exercises.ATTENTION_EXAMPLE (rows are queries). What share of "
        "its queries put their largest weight on the previous token?",
        lambda: _previous_token_share(ATTENTION_EXAMPLE),
        "For each query i, find the key j with the largest weight and count the queries with j = i - 1; the "
        "first query has no previous token and counts as a miss.",
    ),
    Exercise(
        "ch07-short-paths",
        "A stack of L = 6 layers with H = 2 heads and skip connections: what share of all its paths have length "
        "at most 2?",
        lambda: sum(path_length_counts(6, 2)[:3]) / sum(path_length_counts(6, 2)),
        "There are C(L, k) H^k paths of length k and (H + 1)^L in all.",
    ),
    Exercise(
        "ch08-ratio",
        "Under uniform attention, 16 tokens of norm sqrt(d) with every pairwise cosine 0.5: predict the query to "
        "value gradient-norm ratio of one attention layer at initialisation.",
        lambda: prop.uniform_qk_v_ratio(0.5, 16),
        "Use the closed forms of the Jacobian norms for these tokens: ||X||_F^2 = n d, ||xbar||^2 = d (1 + (n-1) "
        "rho) / n, ||C||_F^2 = d^2 (1 - rho)^2 (n - 1), with sigma^2 = 1/d; the width d cancels.",
    ),
    Exercise(
        "ch12-window-reach",
        "A causal sliding window lets every token attend to itself and the 2 tokens before it, as the chapter's "
        "causal window does at the quick preset. After how many layers does the last of 32 tokens depend on the "
        "first?",
        lambda: float(masked_collapse.layers_to_reach(32, 2)),
        "Each layer carries information at most 2 positions forward: count the layers it takes to cover the 31 "
        "positions from the first token to the last.",
        rel_tol=0.0,
    ),
    Exercise(
        "ch09-multiplier",
        "fairseq's initialisation gives sigma_k^2 sigma_v^2 d^2 = 1/4. For 27 tokens of norm sqrt(d) whose pairwise "
        "cosines are all 0.3, what logit multiplier 1/tau* balances the query/key and value gradient norms?",
        lambda: 1.0 / (math.sqrt(0.25) * prop.uniform_qk_v_ratio(0.3, 27)),
        "tau*^2 is sigma_k^2 sigma_v^2 d^2 times (1 - rho)^2 (n - 1) / (n (1 + (n - 1) rho)) (eq. ch09-tau-star); "
        "the multiplier is 1 / tau*, not tau*, and the factor 1/4 belongs under the square root.",
    ),
    Exercise(
        "ch09-collapsed",
        "A model whose output tokens are all alike gives one answer at every position. For 4 uniform digits of "
        "3 values, what is the best accuracy it can reach on the reversal task?",
        lambda: rv.collapsed_accuracy(3, 4),
        "Its best answer is the input's most frequent digit, which is right count/4 of the time: average the "
        "largest digit count over all 3^4 sequences (itertools.product) and divide by 4.",
    ),
]}


@dataclass(frozen=True)
class Feedback:
    """The verdict on an answer: ``right`` and a message, shown as one line in a notebook."""

    name: str
    right: bool
    message: str

    def __repr__(self) -> str:
        return f"{self.name}: {self.message}"

    def _repr_markdown_(self) -> str:
        return f"**{self.name}**: {'✅' if self.right else '✳️'} {self.message}"


def check(name: str, answer) -> Feedback:
    """Whether ``answer`` (a number) answers exercise ``name``: right within its tolerance, or a hint. ``None``
    (not answered yet) gets the question and the hint."""
    if name not in EXERCISES:
        raise ValueError(f"unknown exercise {name!r}; expected one of {', '.join(EXERCISES)}")
    ex = EXERCISES[name]
    if answer is None:
        return Feedback(name, False, f"not answered yet. {ex.question} Hint: {ex.hint}")
    try:
        if isinstance(answer, (str, bytes)):
            raise TypeError
        value = float(answer)  # a number, or a one-element tensor or array
    except (TypeError, ValueError):
        raise ValueError(f"exercise {name!r} expects a number, got {type(answer).__name__}") from None
    if math.isclose(value, ex.reference(), rel_tol=ex.rel_tol, abs_tol=1e-12):
        return Feedback(name, True, "right.")
    return Feedback(name, False, f"not yet ({value:.6g} is not the answer). Hint: {ex.hint}")


def solved(name: str, answer) -> Feedback:
    """:func:`check` for a chapter's worked solution: raises ``AssertionError`` when the solution does not pass
    its own exercise's check, so that running the chapter (CI) fails on an exercise that rotted."""
    feedback = check(name, answer)
    if not feedback.right:
        raise AssertionError(f"the worked solution of exercise {name!r} fails its check: {feedback.message}")
    return feedback
