"""Noise in the book's results: every interval the book computes, in one place.

* :func:`two_sample_t`, :func:`welch_t`, :func:`stratified_welch_t`: t tests of a difference of means over
  seeds (pooled variance; each group its own, as chapter "The circle task"'s delays over 16 seeds; and over
  strata whose levels differ, chapter "Path effectiveness").
* :func:`bleu`, :func:`bleu_interval`: corpus BLEU and sacreBLEU's bootstrap interval (chapters "A translation
  model" and "Pruning heads").
* :func:`paired_bleu_difference`, :func:`paired_bleu_contrast`: Koehn's paired bootstrap of a difference of BLEUs
  and of a weighted sum of them (chapter "Pruning heads").
* :func:`across_seeds`: one shape's paired differences over seeds, their mean, envelope and spread.
* :func:`pooled_sd`, :func:`pooled_seed_intervals`, :func:`pooled_rule_power`: the seed-to-seed sd pooled over
  groups of seeds, t intervals over training seeds with it, and how often that rule decides each way at a paper's effect size.
* :func:`two_arm_seed_intervals`, :func:`two_arm_rule_power`: the same with seed noise on both arms (each arm's
  sd pooled over shapes, Welch-Satterthwaite degrees of freedom), and that rule's power.
* :func:`reaches_power`: how often a one-sided interval rule (a level the paper reports reaching) reproduces
  at the paper's value.
* :func:`envelope_rule_power`: how often the envelope rule decides each way at a paper's effect size (its
  power).
* :func:`weighted_seed_interval`: a contrast of several arms' seed means with a noise every seed shares (the
  test verses), and its Welch-type interval.
* :func:`top_overlap_p`: the chance of a top-k overlap at least as large under random rankings (a qualitative
  statement of a paper decided against chance: chapter "A translation model").
* :func:`share_interval`: the Clopper-Pearson interval of a share of runs (how many seeds of a model merge
  their tokens: chapter "The circle task"); :func:`share_difference_interval`: Newcombe's interval of the
  difference of two such shares (a model against its control).
* :func:`detectable_effect`, :func:`share_rule_detectable`: for a rule on a direction (the paper gives no
  size), the smallest true effect, or share of runs, that the rule finds 80% of the time at the book's noise.

BLEU goes through sacreBLEU's public API only (``BLEU.sentence_score`` for each sentence's n-gram statistics,
``BLEU.compute_bleu`` for a corpus score from summed statistics, ``sacrebleu.significance.estimate_ci``).
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np
from sacrebleu.metrics import BLEU
from sacrebleu.significance import estimate_ci


#: sacreBLEU's default BLEU: 13a tokenisation, exponential smoothing, up to 4-grams
_BLEU = dict(smooth_method="exp", smooth_value=None, effective_order=False, max_ngram_order=4)


def _check_pairs(hypotheses: Sequence[str], references: Sequence[str]) -> None:
    if len(hypotheses) != len(references) or not hypotheses:
        raise ValueError(f"need equally many hypotheses and references, got {len(hypotheses)}, {len(references)}")


def sentence_statistics(hypotheses: Sequence[str], references: Sequence[str]) -> np.ndarray:
    """Each sentence's BLEU statistics, ``(n, 10)``: hypothesis length, reference length, matched and total
    1- to 4-grams (sacreBLEU's ``sentence_score``, default tokenisation; the counts do not depend on
    smoothing). Summed over sentences they give the corpus BLEU (:func:`bleu_from_statistics`)."""
    _check_pairs(hypotheses, references)
    metric = BLEU(effective_order=True)  # only the counts are used; this keeps sacreBLEU from warning
    rows = []
    for h, r in zip(hypotheses, references):
        s = metric.sentence_score(h, [r])
        rows.append([s.sys_len, s.ref_len, *s.counts, *s.totals])
    return np.array(rows, dtype=np.int64)


def bleu_from_statistics(summed: Sequence[float]) -> float:
    """Corpus BLEU from sentence statistics summed over a corpus (or a resample of it)."""
    return float(BLEU.compute_bleu(correct=list(summed[2:6]), total=list(summed[6:10]), sys_len=int(summed[0]),
                                   ref_len=int(summed[1]), **_BLEU).score)


def bleu(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """Corpus BLEU (sacreBLEU, default 13a tokenisation, detokenised text) (chapter "A translation model")."""
    return bleu_from_statistics(sentence_statistics(hypotheses, references).sum(0))


def bleu_interval(hypotheses: Sequence[str], references: Sequence[str], n_bootstrap: int = 1000,
                  seed: int = 12345) -> dict:
    """Corpus BLEU with sacreBLEU's bootstrap 95% interval (chapter "A translation model"): ``{"bleu", "mean",
    "low", "high"}``, the numbers ``sacrebleu --confidence`` prints (sentences resampled ``n_bootstrap`` times
    with its fixed seed, the interval ``mean +- ci`` of :func:`sacrebleu.significance.estimate_ci`)."""
    stats = sentence_statistics(hypotheses, references)
    rng = np.random.default_rng(seed)
    idx = rng.choice(len(stats), size=(n_bootstrap, len(stats)), replace=True)
    resampled = stats.astype(np.float32)[idx].sum(1)  # as sacreBLEU sums them
    mean, ci = estimate_ci(np.array([bleu_from_statistics(r) for r in resampled]))
    return {"bleu": bleu_from_statistics(stats.sum(0)), "mean": float(mean), "low": float(mean - ci),
            "high": float(mean + ci)}


def paired_bleu_difference(baseline: Sequence[str], system: Sequence[str], references: Sequence[str],
                           n_bootstrap: int = 1000, seed: int = 12345) -> dict:
    """Corpus BLEU of ``system`` minus that of ``baseline`` on the same references, with a paired bootstrap
    (Koehn 2004): sentences are resampled jointly for both systems, so the interval is that of the
    difference (chapter "Pruning heads" compares pruned and from-scratch models with it). Returns
    ``{"delta", "low", "high", "p_not_better"}`` (95% percentile interval; the share of resamples in which
    ``system`` is not better)."""
    return paired_bleu_contrast([baseline, system], [-1.0, 1.0], references, n_bootstrap, seed)


def paired_bleu_contrast(systems: Sequence[Sequence[str]], weights: Sequence[float], references: Sequence[str],
                         n_bootstrap: int = 1000, seed: int = 12345) -> dict:
    """The weighted sum of corpus BLEUs, sum_i weights[i] * BLEU(systems[i]), with the paired bootstrap of
    :func:`paired_bleu_difference`: all systems resampled on the same sentences. With weights (-1, +1, +1, -1)
    on (before A, after A, before B, after B) it is how much more A gained than B, with the interval of that
    difference of gains (chapter "Pruning heads": what training on gains a pruned model beyond what it gains
    the unpruned one). Returns ``{"delta", "low", "high", "p_not_better"}`` (``p_not_better``: the share of
    resamples where the sum is at most 0)."""
    if len(systems) != len(weights) or not systems:
        raise ValueError(f"need one weight per system, got {len(weights)} weights for {len(systems)} systems")
    if not references or any(len(h) != len(references) for h in systems):
        raise ValueError(f"need equally many sentences, got {[len(h) for h in systems]} hypotheses for "
                         f"{len(references)} references")
    return paired_bootstrap_contrast([sentence_statistics(h, references) for h in systems], weights, n_bootstrap,
                                     seed)


def paired_bootstrap_contrast(statistics: Sequence[np.ndarray], weights: Sequence[float], n_bootstrap: int = 1000,
                              seed: int = 12345) -> dict:
    """The paired bootstrap of :func:`paired_bleu_contrast` on each system's sentence statistics
    (:func:`sentence_statistics`, ``(n, 10)`` each, one row per test sentence in the same order): every
    resample draws one set of sentences for all systems. Returns ``{"delta", "low", "high", "p_not_better"}``
    (95% percentile interval)."""
    stats = [np.asarray(st) for st in statistics]
    if len(stats) != len(weights) or not stats:
        raise ValueError(f"need one weight per system, got {len(weights)} weights for {len(stats)} systems")
    n = len(stats[0])
    if not n or any(st.shape != (n, 10) for st in stats):
        raise ValueError(f"need (n, 10) sentence statistics for every system, got {[st.shape for st in stats]}")

    def contrast(idx=slice(None)) -> float:
        return sum(w * bleu_from_statistics(st[idx].sum(0)) for w, st in zip(weights, stats))

    delta = contrast()
    rng = np.random.default_rng(seed)
    samples = np.array([contrast(rng.integers(0, n, n)) for _ in range(n_bootstrap)])
    low, high = np.percentile(samples, [2.5, 97.5])
    return {"delta": float(delta), "low": float(low), "high": float(high),
            "p_not_better": float((samples <= 0).mean())}


def across_seeds(per_seed: Sequence[Mapping]) -> dict:
    """One shape's paired differences over its seeds (chapter "Pruning heads", Voita et al.'s Table 2): the
    mean of the seeds' differences, the envelope of their paired 95% intervals over verses (lowest ``low`` to
    highest ``high``; with one seed, that seed's interval, which decides its verdict) and the spread of the
    seeds' differences (largest minus smallest: how much the seed decides)."""
    if not per_seed:
        raise ValueError("across_seeds needs the paired difference of at least one seed")
    deltas = [s["delta"] for s in per_seed]
    return {"n_seeds": len(deltas), "delta": sum(deltas) / len(deltas),
            "low": min(s["low"] for s in per_seed), "high": max(s["high"] for s in per_seed),
            "spread": max(deltas) - min(deltas)}


def pooled_sd(groups: Sequence) -> tuple:
    """The standard deviation pooled over ``groups`` of seeds (seeds on each array's last axis, any leading axes
    batched): the within-group squared deviations summed over every group, over ``sum(n - 1)`` degrees of
    freedom. Returns ``(sd, dof)``; the one variance estimate behind :func:`pooled_seed_intervals`,
    :func:`pooled_rule_power` and the data rule of :func:`attnbook.heads.role_grid.setting_effect`."""
    groups = [np.asarray(g, dtype=float) for g in groups]
    dof = sum(g.shape[-1] - 1 for g in groups)
    if dof < 1:
        raise ValueError(f"a pooled sd needs a group with at least two seeds, got {[g.shape[-1] for g in groups]}")
    squares = sum(((g - g.mean(-1, keepdims=True)) ** 2).sum(-1) for g in groups)
    return np.sqrt(squares / dof), dof


def _two_groups(a: Sequence[float], b: Sequence[float], level: float, least: int, test: str) -> list:
    """The two groups of :func:`two_sample_t` and :func:`welch_t` as float arrays, checked: at least ``least``
    finite values each, and a confidence ``level`` in (0, 1)."""
    groups = [np.asarray(list(map(float, g))) for g in (a, b)]
    if min(g.size for g in groups) < least:
        raise ValueError(f"{test} needs at least {('one value', 'two values')[least - 1]}, got "
                         f"{groups[0].size} and {groups[1].size}")
    if not all(np.isfinite(g).all() for g in groups):
        raise ValueError(f"the values must be finite, got {[g.tolist() for g in groups]}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    return groups


def two_sample_t(a: Sequence[float], b: Sequence[float], level: float = 0.95) -> dict:
    """``a``'s mean minus ``b``'s, by Student's two-sample t test with the seed variance pooled over both groups
    (:func:`pooled_sd`, ``len(a) + len(b) - 2`` degrees of freedom): ``change``, ``p`` (two-sided), ``interval``
    (the ``level`` confidence interval the test inverts: it excludes 0 exactly when ``p < 1 - level``), ``dof``
    and ``n`` (the two group sizes). With no degree of freedom (one value per group) ``p`` is NaN and
    ``interval`` None; with no spread at all, ``p`` is 0 for any change (1 for none) and the interval a point.
    The rule of chapter 10's role grid (:func:`attnbook.heads.role_grid.setting_effect`) and of chapter 9's
    speed findings."""
    from scipy.stats import t as student_t

    groups = _two_groups(a, b, level, least=1, test="each group")
    change = float(groups[0].mean() - groups[1].mean())
    dof = groups[0].size + groups[1].size - 2
    out = {"change": change, "p": float("nan"), "interval": None, "dof": dof,
           "n": (int(groups[0].size), int(groups[1].size))}
    if dof == 0:
        return out
    se = float(pooled_sd(groups)[0]) * float(np.sqrt(1 / groups[0].size + 1 / groups[1].size))
    if se == 0:  # groups without spread: any change is beyond their noise
        p = 0.0 if change else 1.0
    else:
        p = float(2 * student_t.sf(abs(change) / se, dof))
    half = float(student_t.ppf(1 - (1 - level) / 2, dof)) * se
    return {**out, "p": p, "interval": (change - half, change + half)}


def welch_t(a: Sequence[float], b: Sequence[float], level: float = 0.95) -> dict:
    """``a``'s mean minus ``b``'s by Welch's t test: each group keeps its own variance, the degrees of freedom by
    Welch and Satterthwaite (chapter "Pruning heads": two arms whose seed noise differs, such as training from
    scratch and a gate seed). Returns ``change``, ``p`` (two-sided), ``interval`` (the ``level`` interval),
    ``dof`` and ``n``. Each group needs two values at least; with no spread in either, ``p`` is 0 for any change
    (1 for none) and the interval a point."""
    return stratified_welch_t([a], [b], level)


def _welch_dof(parts: Sequence[float], sizes: Sequence[int], known: float = 0.0) -> float:
    """Welch and Satterthwaite's degrees of freedom of a sum of variances ``parts`` (each a group's variance of
    its mean, estimated from ``sizes[i]`` values) plus a ``known`` variance, which adds no uncertainty; infinite
    when the estimated parts are all 0."""
    estimated = sum(v ** 2 / (n - 1) for v, n in zip(parts, sizes))
    return math.inf if estimated == 0 else (sum(parts) + known) ** 2 / estimated


def stratified_welch_t(a_strata: Sequence[Sequence[float]], b_strata: Sequence[Sequence[float]],
                       level: float = 0.95) -> dict:
    """The mean over strata of ``a``'s mean minus ``b``'s in each stratum, by Welch's t test over the strata
    (chapter "Path effectiveness": 20 paths minus 5 at path lengths 1 and 2, each length a stratum whose level
    differs). The estimate's variance sums each group's variance of its mean, ``var / n``, over the groups of
    every stratum, divided by the number of strata squared; the degrees of freedom by Welch and Satterthwaite
    over all the groups. Resampling the strata pooled instead would add the spread between the strata's levels
    to the noise. One stratum is :func:`welch_t`. Returns ``change``, ``p`` (two-sided), ``interval`` (the
    ``level`` interval), ``dof`` and ``n`` (the sizes of ``a``'s groups summed, then ``b``'s)."""
    from scipy.stats import t as student_t

    if len(a_strata) != len(b_strata) or not len(a_strata):
        raise ValueError(f"need the same number (at least one) of strata on both sides, got {len(a_strata)} "
                         f"and {len(b_strata)}")
    pairs = [_two_groups(a, b, level, least=2, test="Welch's test: each group") for a, b in zip(a_strata, b_strata)]
    k = len(pairs)
    change = float(sum(a.mean() - b.mean() for a, b in pairs)) / k
    groups = [g for pair in pairs for g in pair]
    parts = [float(g.var(ddof=1)) / g.size / k ** 2 for g in groups]
    se = float(np.sqrt(sum(parts)))
    n = (int(sum(a.size for a, _ in pairs)), int(sum(b.size for _, b in pairs)))
    if all(np.ptp(g) == 0 for g in groups):  # no spread (the var and mean of equal floats can be off by 1e-17)
        change = float(sum(a[0] - b[0] for a, b in pairs)) / k
        return {"change": change, "p": 0.0 if change else 1.0, "interval": (change, change),
                "dof": float(sum(g.size - 1 for g in groups)), "n": n}
    dof = _welch_dof(parts, [g.size for g in groups])
    half = float(student_t.ppf(1 - (1 - level) / 2, dof)) * se
    return {"change": change, "p": float(2 * student_t.sf(abs(change) / se, dof)),
            "interval": (change - half, change + half), "dof": float(dof), "n": n}


def weighted_seed_interval(groups: Sequence[Sequence[float]], weights: Sequence[float], shared_se: float = 0.0,
                           level: float = 0.95) -> dict:
    """A contrast of independent arms' seed means, ``sum_i w_i * mean(groups[i])``, with its Welch-type ``level``
    interval (chapter "Pruning heads": the cost of pruning at a head count between two trained-on shapes,
    ``w * pruned(lo) + (1 - w) * pruned(hi) - control``, each arm over its own training seeds). The variance
    sums ``w_i^2 var_i / n_i`` over the arms and ``shared_se^2``, a noise every seed shares and the seeds'
    spread cannot show (the test verses, measured by a paired bootstrap); the degrees of freedom by Welch and
    Satterthwaite, the shared term counted as known. Each arm needs two seeds. Returns ``mean``, ``low``,
    ``high``, ``se``, ``seed_se`` (the seeds' part of ``se``), ``dof`` and ``n_seeds``."""
    from scipy.stats import t as student_t

    arms = [np.asarray(list(map(float, g))) for g in groups]
    if len(arms) != len(weights) or not arms:
        raise ValueError(f"need one weight per arm, got {len(arms)} arms and {len(weights)} weights")
    if min(a.size for a in arms) < 2 or not all(np.isfinite(a).all() for a in arms):
        raise ValueError(f"each arm needs two finite seeds at least, got {[a.tolist() for a in arms]}")
    if not shared_se >= 0 or not 0 < level < 1:
        raise ValueError(f"need shared_se >= 0 and 0 < level < 1, got {shared_se}, {level}")
    parts = [w ** 2 * float(a.var(ddof=1)) / a.size for w, a in zip(weights, arms)]
    seed_var = sum(parts)
    se = float(np.sqrt(seed_var + shared_se ** 2))
    mean = float(sum(w * a.mean() for w, a in zip(weights, arms)))
    if se == 0:
        return {"mean": mean, "low": mean, "high": mean, "se": 0.0, "seed_se": 0.0, "dof": math.inf,
                "n_seeds": [a.size for a in arms]}
    dof = _welch_dof(parts, [a.size for a in arms], known=shared_se ** 2)
    half = float(student_t.ppf(1 - (1 - level) / 2, dof)) * se
    return {"mean": mean, "low": mean - half, "high": mean + half, "se": se, "seed_se": float(np.sqrt(seed_var)),
            "dof": float(dof), "n_seeds": [a.size for a in arms]}


def pooled_seed_intervals(per_shape: Sequence[Sequence[float]], level: float = 0.95) -> list[dict]:
    """Seed-level intervals of each shape's mean difference over its training seeds (chapter "Pruning
    heads", the verdict of Voita et al.'s Table 2): ``per_shape`` holds, for each shape, one difference per
    seed. Each shape's mean gets a Student t interval, ``mean +- t * sd / sqrt(n_seeds)``, whose seed-to-seed
    standard deviation ``sd`` is pooled over the shapes (the within-shape variance, with ``sum(n - 1)``
    degrees of freedom): two seeds per shape cannot estimate it alone, the shapes together can. The test
    verses are held fixed (the same for every seed and arm), so the interval is over training seeds on
    these verses. With one shape it is the one-sample t interval of its mean (chapter 7 uses it so, over
    sampled path sets). Returns per shape ``{"mean", "low", "high", "n_seeds", "sd", "dof"}``."""
    from scipy.stats import t as student_t

    shapes = [np.asarray(d, dtype=float) for d in per_shape]
    if not shapes or any(d.size == 0 for d in shapes):
        raise ValueError(f"need at least one seed for every shape, got {[d.size for d in shapes]} seeds")
    if sum(d.size - 1 for d in shapes) == 0:
        raise ValueError("a seed-level interval needs a shape with at least two seeds (one seed each "
                         "leaves the seed-to-seed variance unmeasured)")
    if not 0 < level < 1:
        raise ValueError(f"level is a probability in (0, 1), got {level}")
    sd, dof = pooled_sd(shapes)
    sd = float(sd)
    q = float(student_t.ppf(0.5 + level / 2, dof))
    return [{"mean": float(d.mean()), "low": float(d.mean() - q * sd / d.size ** 0.5),
             "high": float(d.mean() + q * sd / d.size ** 0.5), "n_seeds": int(d.size), "sd": sd, "dof": dof}
            for d in shapes]


def _two_arm_interval(diff, sd_a, dof_a, n_a, sd_b, dof_b, n_b, level: float):
    """``diff`` +- Student t half-width with each arm's variance of its mean (``sd**2 / n``) and the degrees of
    freedom by Welch and Satterthwaite from each arm's own ``dof`` (arrays broadcast: the simulations of
    :func:`two_arm_rule_power` batch over them). Returns ``(low, high, dof)``."""
    from scipy.stats import t as student_t

    va, vb = np.square(sd_a) / n_a, np.square(sd_b) / n_b
    var = va + vb
    with np.errstate(divide="ignore", invalid="ignore"):
        dof = np.where(var > 0, var ** 2 / (va ** 2 / dof_a + vb ** 2 / dof_b), float(dof_a + dof_b))
    half = student_t.ppf(0.5 + level / 2, dof) * np.sqrt(var)
    return diff - half, diff + half, dof


def two_arm_seed_intervals(arm_a: Sequence[Sequence[float]], arm_b: Sequence[Sequence[float]],
                           level: float = 0.95) -> list[dict]:
    """Seed-level intervals of each shape's difference of two arms' mean results, noise on both arms
    (chapter "Pruning heads", Voita et al.'s Table 2 with seeds on the pruned arm too; issue "Verdicts a
    referee would sign"): ``arm_a[i]`` and ``arm_b[i]`` hold shape ``i``'s results, one per training seed (beam
    BLEU from scratch, and of the pruned models). Each arm's seed-to-seed sd is pooled over the shapes
    (:func:`pooled_sd`, its own degrees of freedom), so a shape where an arm has one seed still gets that arm's
    noise, measured at the other shapes. The shape's difference ``mean(a) - mean(b)`` gets a Student t interval
    with standard error ``sqrt(sd_a**2 / n_a + sd_b**2 / n_b)`` and Welch-Satterthwaite degrees of freedom
    (the arms' noise differs: :func:`welch_t`'s reasoning, with variances pooled over shapes). The test verses
    are held fixed, as in :func:`pooled_seed_intervals`. Returns per shape ``{"mean", "low", "high", "n_a",
    "n_b", "sd_a", "sd_b", "dof"}``."""
    if not 0 < level < 1:
        raise ValueError(f"level is a probability in (0, 1), got {level}")
    a = [np.asarray(x, dtype=float) for x in arm_a]
    b = [np.asarray(x, dtype=float) for x in arm_b]
    if not a or len(a) != len(b) or any(x.size == 0 for x in a + b):
        raise ValueError(f"need both arms' seeds for every shape, got {[x.size for x in a]} and "
                         f"{[x.size for x in b]} seeds")
    for arm, name in ((a, "first"), (b, "second")):
        if sum(x.size - 1 for x in arm) == 0:
            raise ValueError(f"the {name} arm has one seed at every shape: its seed-to-seed noise is not "
                             "measured, so a two-arm interval cannot be formed (pooled_seed_intervals holds "
                             "that arm fixed instead)")
    (sd_a, dof_a), (sd_b, dof_b) = pooled_sd(a), pooled_sd(b)
    out = []
    for xa, xb in zip(a, b):
        diff = float(xa.mean() - xb.mean())
        low, high, dof = _two_arm_interval(diff, sd_a, dof_a, xa.size, sd_b, dof_b, xb.size, level)
        out.append({"mean": diff, "low": float(low), "high": float(high), "n_a": int(xa.size),
                    "n_b": int(xb.size), "sd_a": float(sd_a), "sd_b": float(sd_b), "dof": float(dof)})
    return out


def two_arm_rule_power(effect: float, sd_a: float, sd_b: float, seeds_a: Sequence[int], seeds_b: Sequence[int],
                       *, threshold: float = 0.0, level: float = 0.95, n_sim: int = 20000, seed: int = 0) -> dict:
    """How often the two-arm rule (:func:`two_arm_seed_intervals`) decides each way when every shape's true
    difference is the paper's ``effect`` (chapter "Pruning heads": the rule's power, printed with its
    verdict): arm a's seeds are ``N(effect, sd_a)``, arm b's ``N(0, sd_b)``, with ``seeds_a`` and ``seeds_b``
    seeds per shape, and the first shape's interval decides. Returns the shares ``reproduces`` (the interval
    wholly on ``effect``'s side of ``threshold``), ``differs`` and ``undecided``."""
    na, nb = [int(n) for n in seeds_a], [int(n) for n in seeds_b]
    if not na or len(na) != len(nb) or min(na + nb) < 1 or sum(n - 1 for n in na) == 0 \
            or sum(n - 1 for n in nb) == 0 or not (sd_a >= 0 and sd_b >= 0 and sd_a + sd_b > 0) \
            or effect == threshold:
        raise ValueError(f"need seeds in every shape of both arms, a shape with two or more in each arm, sds >= 0 "
                         f"(not both 0) "
                         f"and an effect off the threshold, got seeds {na} and {nb}, sds {sd_a}, {sd_b}, "
                         f"effect={effect}")
    rng = np.random.default_rng(seed)
    draws_a = [effect + sd_a * rng.standard_normal((n_sim, n)) for n in na]
    draws_b = [sd_b * rng.standard_normal((n_sim, n)) for n in nb]
    (sa, da), (sb, db) = pooled_sd(draws_a), pooled_sd(draws_b)
    diff = draws_a[0].mean(1) - draws_b[0].mean(1)
    low, high, _ = _two_arm_interval(diff, sa, da, na[0], sb, db, nb[0], level)
    above, below = low > threshold, high <= threshold
    same, other = (above, below) if effect > threshold else (below, above)
    return {"reproduces": float(same.mean()), "differs": float(other.mean()),
            "undecided": float(1 - same.mean() - other.mean()), "n_sim": n_sim}


def pooled_rule_power(effect: float, seed_sd: float, seeds_per_shape: Sequence[int], *,
                      threshold: float = 0.0, level: float = 0.95, n_sim: int = 20000, seed: int = 0) -> dict:
    """How often the seed-level rule decides each way when the true difference of every shape is the
    paper's ``effect`` (chapter "Pruning heads": the rule's power, printed with its verdict): each simulated
    seed's difference is ``effect + seed_sd * N(0, 1)``, the shapes have ``seeds_per_shape`` seeds, and the
    first shape's :func:`pooled_seed_intervals` interval decides. Returns the shares ``reproduces`` (the
    interval wholly on ``effect``'s side of ``threshold``), ``differs`` and ``undecided``."""
    counts = [int(n) for n in seeds_per_shape]
    if not counts or min(counts) < 1 or sum(n - 1 for n in counts) == 0 or not seed_sd > 0 \
            or effect == threshold:
        raise ValueError(f"need seeds in every shape, one shape with two or more, seed_sd > 0 and an effect "
                         f"off the threshold, got seeds {counts}, seed_sd={seed_sd}, effect={effect}")
    from scipy.stats import t as student_t

    rng = np.random.default_rng(seed)
    draws = [effect + seed_sd * rng.standard_normal((n_sim, n)) for n in counts]
    sd, dof = pooled_sd(draws)  # one pooled sd per simulated experiment
    half = float(student_t.ppf(0.5 + level / 2, dof)) * sd / np.sqrt(counts[0])
    low, high = draws[0].mean(1) - half, draws[0].mean(1) + half
    above, below = low > threshold, high <= threshold
    same, other = (above, below) if effect > threshold else (below, above)
    return {"reproduces": float(same.mean()), "differs": float(other.mean()),
            "undecided": float(1 - same.mean() - other.mean()), "n_sim": n_sim}


def envelope_rule_power(effect: float, sentence_se: float, seed_sd: float, n_seeds: int, *,
                        threshold: float = 0.0, z: float = 1.96, n_sim: int = 20000, seed: int = 0) -> dict:
    """How often the envelope rule of :func:`attnbook.claims.compare` (``interval`` with ``same_side_of``,
    the envelope of ``n_seeds`` seeds' 95% intervals as :func:`across_seeds` makes it) gives each verdict when
    the true difference is the paper's ``effect`` (chapter "Pruning heads": the rule's power, printed with
    its verdict). Each simulated seed has true difference ``effect + seed_sd * N(0, 1)``, estimated with
    sentence noise ``sentence_se`` and the interval ``estimate +- z * sentence_se``. Returns the shares
    ``reproduces`` (the whole envelope on ``effect``'s side of ``threshold``), ``differs`` (wholly on the
    other side) and ``undecided``."""
    if n_seeds < 1 or sentence_se < 0 or not seed_sd >= 0 or effect == threshold:
        raise ValueError(f"need n_seeds >= 1, non-negative noise and an effect off the threshold, got "
                         f"n_seeds={n_seeds}, sentence_se={sentence_se}, seed_sd={seed_sd}, effect={effect}")
    rng = np.random.default_rng(seed)
    true = effect + seed_sd * rng.standard_normal((n_sim, n_seeds))
    estimate = true + sentence_se * rng.standard_normal((n_sim, n_seeds))
    low, high = (estimate - z * sentence_se).min(1), (estimate + z * sentence_se).max(1)
    above, below = low > threshold, high <= threshold
    same = above if effect > threshold else below
    other = below if effect > threshold else above
    return {"reproduces": float(same.mean()), "differs": float(other.mean()),
            "undecided": float(1 - same.mean() - other.mean()), "n_sim": n_sim}


def reaches_power(effect: float, level: float, sentence_se: float, seed_sd: float, z: float = 1.96) -> float:
    """How often the one-sided interval rule of :func:`attnbook.claims.compare` (``reaches`` with
    ``interval``: the whole interval ``estimate +- z * sentence_se`` at or above ``level``) says *reproduces*
    when the true value is the paper's ``effect`` (chapter "Pruning heads"): the estimate varies with the
    verses and with the seed-to-seed spread ``seed_sd`` the interval does not see,
    ``Phi((effect - level - z se) / sqrt(se^2 + sd^2))``."""
    if not sentence_se > 0 or not seed_sd >= 0:
        raise ValueError(f"need sentence_se > 0 and seed_sd >= 0, got {sentence_se}, {seed_sd}")
    from scipy.stats import norm

    return float(norm.cdf((effect - level - z * sentence_se) / (sentence_se ** 2 + seed_sd ** 2) ** 0.5))


def share_interval(hits: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The exact (Clopper-Pearson) ``level`` interval of a share ``hits / n`` of independent runs, e.g. the share
    of seeds whose tokens merge (chapter "The circle task"): it covers the true share at least ``level`` of the
    time, so a comparison with a threshold through :func:`attnbook.claims.compare`'s ``interval`` rule is
    *undecided* unless the seeds decide it."""
    if not (n >= 1 and 0 <= hits <= n and 0 < level < 1):
        raise ValueError(f"need 0 <= hits <= n, n >= 1 and 0 < level < 1, got hits={hits}, n={n}, level={level}")
    from scipy.stats import beta

    tail = (1 - level) / 2
    low = 0.0 if hits == 0 else float(beta.ppf(tail, hits, n - hits + 1))
    high = 1.0 if hits == n else float(beta.ppf(1 - tail, hits + 1, n - hits))
    return low, high


def _wilson(hits: int, n: int, z: float) -> tuple[float, float]:
    """Wilson's score interval of ``hits / n`` at normal quantile ``z``."""
    p, zz = hits / n, z * z / n
    centre = (p + zz / 2) / (1 + zz)
    half = z / (1 + zz) * np.sqrt(p * (1 - p) / n + zz / (4 * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def share_difference_interval(hits_a: int, n_a: int, hits_b: int, n_b: int,
                              level: float = 0.95) -> tuple[float, float]:
    """Newcombe's hybrid score interval (his method 10, 1998) of the difference of two shares of independent
    runs, ``hits_a / n_a - hits_b / n_b`` (chapter "The circle task": the share of seeds whose tokens merge,
    with attention minus each token attending only to itself). Each share's Wilson interval is combined by
    squares; unlike the Wald interval it stays near its level for a dozen runs an arm and for shares of 0 or
    1."""
    for hits, n in ((hits_a, n_a), (hits_b, n_b)):
        if not (n >= 1 and 0 <= hits <= n):
            raise ValueError(f"need 0 <= hits <= n and n >= 1 for each arm, got hits={hits}, n={n}")
    if not 0 < level < 1:
        raise ValueError(f"level is a confidence level in (0, 1), got {level}")
    from scipy.stats import norm

    z = float(norm.ppf(1 - (1 - level) / 2))
    (lo_a, hi_a), (lo_b, hi_b) = _wilson(hits_a, n_a, z), _wilson(hits_b, n_b, z)
    p_a, p_b = hits_a / n_a, hits_b / n_b
    diff = p_a - p_b
    return (float(diff - np.sqrt((p_a - lo_a) ** 2 + (hi_b - p_b) ** 2)),
            float(diff + np.sqrt((hi_a - p_a) ** 2 + (p_b - lo_b) ** 2)))


def detectable_effect(interval: Sequence[float], level: float, power: float = 0.8) -> float:
    """The smallest true effect a direction rule finds ``power`` of the time at the noise of ``interval`` (the
    rule of :func:`attnbook.claims.compare` with ``same_side_of`` and ``interval``: the whole interval on the
    paper's side of its threshold; chapters "The circle task" and "Path effectiveness"). A paper that gives a
    direction and no size has no effect at which to state the rule's power; this says instead which effects the
    data could have found, so that an *undecided* verdict says how large an effect it leaves open. Normal
    approximation: the interval's half-width is ``z_level`` standard errors, and the rule finds an effect
    ``delta`` (its distance from the threshold) with probability ``Phi(delta / se - z_level)``, so
    ``delta = (z_level + z_power) * se``. ``level``: the interval's two-sided level (0.9 for chapter 7's
    :func:`stratified_welch_t` intervals; for a t interval on few degrees of freedom the normal approximation
    overstates the standard error a little, so the effect it gives errs large)."""
    lo, hi = (float(x) for x in interval)
    if not (np.isfinite(lo) and np.isfinite(hi) and lo <= hi):
        raise ValueError(f"expected a finite interval (lo, hi) with lo <= hi, got {interval!r}")
    if not (0 < level < 1 and 0 < power < 1):
        raise ValueError(f"level and power are probabilities in (0, 1), got level={level}, power={power}")
    from scipy.stats import norm

    z_level = float(norm.ppf((1 + level) / 2))
    se = (hi - lo) / 2 / z_level
    return (z_level + float(norm.ppf(power))) * se


def detectable_effect_t(se: float, dof: float, level: float, power: float = 0.8) -> float:
    """The smallest true effect that a direction rule on a Student t interval finds ``power`` of the time
    (the whole two-sided ``level`` interval on the paper's side of its threshold), at standard error ``se`` on
    ``dof`` degrees of freedom (chapter "Path effectiveness": a t interval over three training seeds). The rule
    holds when ``mean / se`` exceeds the t quantile ``t_crit``; under a true effect ``delta`` that ratio follows
    a noncentral t with noncentrality ``delta / se``, solved here for the noncentrality at which it exceeds
    ``t_crit`` with probability ``power``. On few degrees of freedom :func:`detectable_effect`'s normal
    approximation is far off (at 2, it finds about half the effect). ``se`` is taken as the true standard
    error: the answer says what effects this noise level leaves open, not a power guaranteed in advance."""
    from scipy.optimize import brentq
    from scipy.stats import nct
    from scipy.stats import t as student_t

    if not (np.isfinite(se) and se > 0 and np.isfinite(dof) and dof > 0):
        raise ValueError(f"expected a positive finite standard error and degrees of freedom, got se={se}, "
                         f"dof={dof}")
    if not (0 < level < 1 and 0.5 < power < 1):
        raise ValueError(f"level is a probability in (0, 1) and power one in (0.5, 1), got level={level}, "
                         f"power={power}")
    crit = float(student_t.ppf((1 + level) / 2, dof))
    noncentrality = brentq(lambda nc: float(nct.sf(crit, dof, nc)) - power, 0.0, 1e3)
    return float(noncentrality * se)


def share_rule_detectable(n: int, threshold: float = 0.5, level: float = 0.95, power: float = 0.8):
    """The smallest true share of runs at which the direction rule on a share of ``n`` runs (the whole exact
    interval of :func:`share_interval` above ``threshold``) reproduces ``power`` of the time (chapter "The circle
    task": how many seeds merge). Exact: the rule needs at least ``k`` hits, the fewest whose interval lies above
    the threshold, and reproduces with probability ``P(Binomial(n, p) >= k)``; the share ``p`` at which that
    reaches ``power`` is found by bisection. None where no number of hits out of ``n`` decides (too few runs)."""
    if not (isinstance(n, (int, np.integer)) and n >= 1 and 0 <= threshold < 1 and 0 < level < 1
            and 0 < power < 1):
        raise ValueError(f"need an int n >= 1, 0 <= threshold < 1 and level, power in (0, 1), got n={n!r}, "
                         f"threshold={threshold}, level={level}, power={power}")
    from scipy.stats import binom

    k = next((k for k in range(n + 1) if share_interval(k, n, level)[0] > threshold), None)
    if k is None:
        return None
    lo, hi = threshold, 1.0
    for _ in range(60):  # P(Binomial(n, p) >= k) grows with p
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if binom.sf(k - 1, n, mid) < power else (lo, mid)
    return hi


def permutation_p(drawn, observed: float, tie: float = 1e-9, below: bool = False) -> float:
    """The one-sided p-value of a permutation (or Monte Carlo) test (chapter "Pruning heads": the layer slope,
    the role gap and the order of the kinds against chance): the share of the statistics ``drawn`` under the
    null that are at least ``observed``, counting the observed one among the draws, ``(hits + 1) / (draws +
    1)``, so never 0 (Phipson and Smyth, 2010). A draw within ``tie`` of the observed value counts as a hit, so
    that the same statistic summed in another order is not missed as a tie. ``below=True``: the same test turned
    the other way, the share at most ``observed`` (evidence that the statistic lies below chance)."""
    drawn = np.asarray(drawn, dtype=float).ravel()
    if drawn.size == 0 or not np.isfinite(drawn).all() or not np.isfinite(observed):
        raise ValueError(f"need finite drawn statistics and a finite observed one, got {drawn.size} draws and "
                         f"observed={observed!r}")
    hits = drawn <= observed + tie if below else drawn >= observed - tie
    return float((hits.sum() + 1) / (drawn.size + 1))


def top_overlap_p(n_items: int, top: int, overlap: int, below: bool = False) -> float:
    """One-sided p-value of an overlap of ``overlap`` items between the ``top`` items of two rankings of
    ``n_items`` (chapter "A translation model": are the most relevant heads the most positional ones?): the
    probability that two independent random top-``top`` sets share at least ``overlap`` items, the upper tail of
    the hypergeometric distribution; ``below=True``: at most ``overlap`` items, the lower tail (the same test
    turned the other way, for a verdict that the overlap lies below chance)."""
    if not 1 <= top <= n_items or not 0 <= overlap <= top:
        raise ValueError(f"need 1 <= top <= n_items and 0 <= overlap <= top, got n_items={n_items}, top={top}, "
                         f"overlap={overlap}")
    from scipy.stats import hypergeom

    if below:
        return float(hypergeom.cdf(overlap, n_items, top, top))
    return float(hypergeom.sf(overlap - 1, n_items, top, top))


def spearman(x, y) -> dict:
    """Spearman's rank correlation of two equally long sequences with its one-sided p-values (scipy's
    ``spearmanr``): ``{"rho", "p_less", "p_greater"}``, ``p_less`` the probability under independence of a
    correlation at most the observed one (chapter "What came after": do heads that attend to sinks add less?)."""
    x, y = np.asarray(x, dtype=float).ravel(), np.asarray(y, dtype=float).ravel()
    if len(x) != len(y) or len(x) < 3:
        raise ValueError(f"need two sequences of the same length, at least 3; got {len(x)} and {len(y)}")
    from scipy.stats import spearmanr

    rho = float(spearmanr(x, y)[0])
    return {"rho": rho, "p_less": float(spearmanr(x, y, alternative="less")[1]),
            "p_greater": float(spearmanr(x, y, alternative="greater")[1])}
