"""Reading and summarising the shipped pruning sweeps of chapter "Pruning heads".

A sweep file is the output of a named run (:mod:`attnbook.core.runs`); :func:`load` refuses a file that a
different run, or the same run at another preset or with other settings, made. The helpers turn its runs into
what the chapter reports: the heads each run kept (binary masks), whether the gates had stopped moving, how
much two runs agree on which heads survive, heads kept per kind (:func:`kind_shares`) and per layer
(:func:`layer_slopes`), how much more specialised the kept heads are (:func:`role_gap`), BLEU at a given number
of heads, how many heads can go before BLEU drops, and the paired comparisons of the pruned, from-scratch and
trained-on models (:func:`scratch_versus_pruned`, :func:`trained_on_gains`, :func:`scratch_claims`), and
the measured reasons the chapter gives where its pruning costs differ from the paper's
(:func:`encoder_reason`, :func:`all_kinds_reason`).
"""

from __future__ import annotations

from typing import Callable, Mapping, Optional, Sequence

import numpy as np
import torch

from attnbook.claims import NOT_MEASURED, Claim, compare, finding, gate, not_available
from attnbook.claims.prose import listing
from attnbook.core import runs
from attnbook.heads.gates import STRETCH, TEMPERATURE, deterministic_gates
from attnbook.heads.masks import ATTENTION_KINDS, HeadMask, as_head_mask, binary
from attnbook.stats import (across_seeds, paired_bleu_contrast, paired_bleu_difference, permutation_p,
                            pooled_rule_power, pooled_seed_intervals, two_arm_rule_power, two_arm_seed_intervals,
                            weighted_seed_interval, welch_t)


#: the arms a from-scratch recipe of chapter "Pruning heads" runs when its settings name none: each shape trained
#: from scratch, and the pruned model as the gate recipe leaves it (one run per shape, the first seed)
DEFAULT_ARMS = ("scratch", "pruned")


def recipe_arms(settings: Mapping) -> list[str]:
    """The arms a pruning recipe with ``settings`` runs (:data:`DEFAULT_ARMS` unless it names its own)."""
    return list(settings.get("arms", DEFAULT_ARMS))


def load(name: str, preset: str | None = "quick") -> dict:
    """The shipped result of pruning run ``name`` (:func:`attnbook.core.runs.load`). The pruning runs prune the
    converged model of preset ``quick``, the only one shipped, so that is the default preset here."""
    return runs.load(name, preset)


def merged(record: Mapping, *more: Mapping) -> dict:
    """A record of chapter "Pruning heads" (a from-scratch run, ``scratch_converged``, or a trained-on one,
    ``pruned_converged``) with the runs of ``more`` records of the same design added: further seeds
    (``scratch_converged_seed2``) or further shapes (``pruned_converged_2heads``) in files of their own. A
    :class:`attnbook.core.runs.Missing` (not shipped) adds nothing. Raises where a record was evaluated on other
    verses or with other settings, or repeats a run (arm, lambda, seed). ``complete`` holds only if every
    record is complete; ``seeds`` lists every seed, ``added`` the runs that came from ``more``. Every setting
    but the seeds, lambdas, arms and the rule choosing a trained-on seed's gate seed (``gate_seeds``,
    :func:`trained_on_gate_seed`; each run records its ``gate_seed``) must be the record's: the gate recipe,
    preset, split, beam, length penalty."""
    out = {**record, "runs": list(record["runs"]), "seeds": list(record["meta"]["settings"]["seeds"]), "added": []}

    def design(settings):  # what must match for the runs to pair (not which gate seed a seed starts from)
        return {k: v for k, v in settings.items() if k not in ("seeds", "lambdas", "arms", "gate_seeds")}
    base = design(record["meta"]["settings"])
    arms = set(recipe_arms(record["meta"]["settings"]))
    for extra in (m for m in more if m):
        settings = extra["meta"]["settings"]
        if extra["n_eval"] != record["n_eval"] or design(settings) != base:
            raise ValueError(f"run {extra['meta'].get('run')} was evaluated on {extra['n_eval']} verses with "
                             f"settings {design(settings)}; the record on {record['n_eval']} with {base}")
        if not set(recipe_arms(settings)) <= arms:
            raise ValueError(f"run {extra['meta'].get('run')} holds arms {recipe_arms(settings)}, the record "
                             f"{sorted(arms)}: another arm's runs would pass for this one's")
        have = {(r["arm"], r["lam"], r["seed"]) for r in out["runs"]}
        twice = [k for k in ((r["arm"], r["lam"], r["seed"]) for r in extra["runs"]) if k in have]
        if twice:
            raise ValueError(f"run {extra['meta'].get('run')} repeats {twice}")
        out["runs"] += extra["runs"]
        out["added"] += extra["runs"]
        out["seeds"] += [s for s in settings["seeds"] if s not in out["seeds"]]
        out["complete"] = out["complete"] and extra["complete"]
    return out


#: chapter "Pruning versus training from scratch": the trained-on pruned arm, its first run then its further
#: runs (the 2-head shape, seeds 1 and 2 at 3 heads, seeds 1 and 2 at 8 and 22 heads), and the control, the
#: unpruned model trained on alike, its first seed then its further seeds
TRAINED_ON_RUNS = ("pruned_converged", "pruned_converged_2heads", "pruned_converged_seeds",
                   "pruned_converged_seeds_8_22")
CONTROL_RUNS = ("unpruned_converged", "unpruned_converged_seeds")


def trained_on_and_control(preset: str = "quick") -> tuple[dict, dict]:
    """The trained-on pruned arm and its control (chapter "Pruning versus training from scratch", and the
    like-with-like costs of chapter "Pruning the translation encoder"): each its first run's record
    (:func:`load`, which must be shipped) :func:`merged` with every further run of :data:`TRAINED_ON_RUNS` or
    :data:`CONTROL_RUNS` shipped at ``preset``; one not shipped adds nothing."""
    def arm(names):
        first, *more = names
        return merged(load(first, preset), *(runs.find(n, preset) for n in more))
    return arm(TRAINED_ON_RUNS), arm(CONTROL_RUNS)


def kept_masks(run: Mapping) -> HeadMask:
    """The binary masks of a run: 1 for a head whose evaluation gate is open, 0 for a closed one (runs of a
    gate sweep store ``"gates"``, Michel runs ``"masks"``; a bare ``(layers, heads)`` list is kind ``""``)."""
    values = run.get("gates", run.get("masks"))
    if values is None:
        raise ValueError("a run must hold 'gates' or 'masks'")
    if not isinstance(values, Mapping):
        values = {"": values}
    return binary({k: torch.tensor(v, dtype=torch.float32) for k, v in values.items()})


def _snapshot_before(snapshots: Sequence[Mapping], window: int) -> Mapping:
    """The last snapshot at least ``window`` steps before the final one."""
    if len(snapshots) < 2:
        raise ValueError("need at least two snapshots")
    last = snapshots[-1]
    earlier = [s for s in snapshots if s["step"] <= last["step"] - window]
    if not earlier:
        raise ValueError(f"no snapshot {window} steps before the last one (step {last['step']})")
    return earlier[-1]


def gate_drift(snapshots: Sequence[Mapping], window: int) -> float:
    """The largest change of any head's ``P(g != 0)`` over the last ``window`` training steps of a run:
    near 0 when the gates have stopped moving (the official recipe trains "until they stop")."""
    last, ref = snapshots[-1], _snapshot_before(snapshots, window)
    return max(
        float((torch.tensor(last["p_open"][k]) - torch.tensor(ref["p_open"][k])).abs().max()) for k in last["p_open"]
    )


def kept_from_p_open(p_open: Mapping[str, Sequence], temperature: float = TEMPERATURE,
                     stretch: tuple[float, float] = STRETCH) -> HeadMask:
    """The binary masks a snapshot of ``P(g != 0)`` stands for: ``log_alpha`` recovered from eq.
    ``p-closed`` (``logit(P) + beta log(-l/r)``), kept where the evaluation gate is open."""
    out = {}
    for k, p in p_open.items():
        p = torch.tensor(p, dtype=torch.float64).clamp(1e-12, 1 - 1e-12)
        log_alpha = torch.logit(p) + temperature * np.log(-stretch[0] / stretch[1])
        out[k] = (deterministic_gates(log_alpha, stretch=stretch) > 0).float()
    return out


def settling(snapshots: Sequence[Mapping], window: int) -> dict:
    """How much a gate run still moved over its last ``window`` steps: ``max_dp``, the largest change of
    any ``P(g != 0)`` (:func:`gate_drift`), and ``overlap``, the :func:`jaccard` overlap of the heads kept
    at the end and ``window`` steps earlier (1: the decisions had stopped changing)."""
    ref = _snapshot_before(snapshots, window)
    overlap = jaccard(kept_from_p_open(ref["p_open"]), kept_from_p_open(snapshots[-1]["p_open"]))
    return {"max_dp": gate_drift(snapshots, window), "overlap": overlap}


#: the settings of a gate sweep that its main runs share but for lambda (its variants change one of them)
MAIN_SETTINGS = ("lr", "gate_lr", "init_log_alpha", "steps")


def main_settings(sweep: Mapping) -> dict:
    """The settings of a gate sweep's main runs but for lambda (chapter "Pruning heads"), read from the sweep's
    recorded settings: the ``defaults`` of :func:`main_runs`, :func:`gate_seed_agreement` and
    :func:`same_heads_replicates`."""
    settings = sweep["meta"]["settings"]
    missing = [k for k in MAIN_SETTINGS if k not in settings]
    if missing:
        raise ValueError(f"the sweep's settings lack {missing}; a gate sweep records {list(MAIN_SETTINGS)}")
    return {k: settings[k] for k in MAIN_SETTINGS}


def main_runs(sweep: Mapping, defaults: Mapping) -> dict:
    """The main runs of a gate sweep by lambda (chapter "Pruning heads"): those whose settings are ``defaults``
    but for lambda (the other runs vary one setting to check a shortcut)."""
    return {r["spec"]["lam"]: r for r in sweep["runs"] if r["spec"] == {**defaults, "lam": r["spec"]["lam"]}}


def settling_rows(sweep: Mapping, main: Mapping, window: int) -> list[dict]:
    """Every run of a gate sweep as chapter "Pruning heads" tabulates it: its ``spec``, heads ``kept``, how much it
    still moved over its last ``window`` steps (:func:`settling`) and ``same_as_main``, the :func:`jaccard`
    overlap of its kept heads with those of the main run at its lambda (``main``: :func:`main_runs`)."""
    return [{"spec": r["spec"], "kept": r["n_kept"], **settling(r["snapshots"], window),
             "same_as_main": jaccard(kept_masks(r), kept_masks(main[r["spec"]["lam"]]))} for r in sweep["runs"]]


def _gate_seed_runs(sweep: Mapping, defaults: Mapping, lam: float, *,
                    others_required: bool = True) -> list[Mapping]:
    """The main run at ``lam`` and the runs that vary only its gate seed, in seed order (main first). Raises
    where the sweep has no main run at ``lam``, or (``others_required``) no other gate seed there."""
    main = main_runs(sweep, defaults).get(lam)
    if main is None:
        raise ValueError(f"the sweep has no main run at lambda={lam}")
    others = sorted((r for r in sweep["runs"] if set(r["spec"]) == set(defaults) | {"lam", "seed"}
                     and r["spec"] == {**defaults, "lam": lam, "seed": r["spec"]["seed"]}),
                    key=lambda r: r["spec"]["seed"])
    if others_required and not others:
        raise ValueError(f"the sweep runs no other gate seed at lambda={lam}")
    return [main, *others]


def _same_heads_runs(sweep: Mapping, defaults: Mapping, lam: float, *,
                     others_required: bool = True) -> list[Mapping]:
    """The main run at ``lam`` and those of its gate-seed runs that keep exactly its heads (main first)."""
    main, *others = _gate_seed_runs(sweep, defaults, lam, others_required=others_required)
    mask = kept_masks(main)
    return [main, *(r for r in others if jaccard(kept_masks(r), mask) == 1.0)]


def gate_seed_agreement(sweep: Mapping, defaults: Mapping, lam: float, window: int = 60) -> dict:
    """Does the gate seed decide which heads survive? (chapter "Pruning heads"): at ``lam``, the main run
    (gate seed of the recipe) and the runs that vary only the gate seed (a variant's ``seed``: the initial log
    alpha and the gate noise). Returns the ``seeds`` (the main run's first), heads ``kept`` by each, the
    :func:`jaccard` ``overlaps`` of the other seeds' kept heads with the main run's and their ``mean``,
    ``always``, the heads every seed keeps, and ``settling``: :func:`settling` over the last ``window`` steps
    of the least settled run (the largest ``max_dp``, the smallest ``overlap``), for :func:`settling_gates`:
    the seeds' kept heads are compared only once every run has settled. Raises if the sweep has no main run,
    or no other seed, at ``lam``."""
    main, *others = _gate_seed_runs(sweep, defaults, lam)
    masks = [kept_masks(r) for r in [main, *others]]
    overlaps = [jaccard(m, masks[0]) for m in masks[1:]]
    always = sum(int(torch.stack([m[k] != 0 for m in masks]).all(0).sum()) for k in masks[0])
    settled = [settling(r["snapshots"], window) for r in [main, *others]]
    return {"seeds": [sweep["meta"]["settings"]["seed"], *[r["spec"]["seed"] for r in others]],
            "kept": [int(sum(int((m[k] != 0).sum()) for k in m)) for m in masks],
            "overlaps": overlaps, "mean": sum(overlaps) / len(overlaps), "always": always,
            "settling": {"max_dp": max(t["max_dp"] for t in settled),
                         "overlap": min(t["overlap"] for t in settled)}}


def same_heads_replicates(sweep: Mapping, defaults: Mapping, lam: float) -> dict:
    """The pruned arm over gate seeds (chapter "Pruning heads", pruned versus scratch): at ``lam``, the main run
    and those of its gate-seed runs (:func:`gate_seed_agreement`) that keep exactly its heads, so that every one
    is the same pruned architecture as the from-scratch arm's. Returns their ``seeds`` (the main run's first),
    ``bleu_beam``, the heads ``kept`` and ``n_eval``, the test verses they were scored on."""
    same = _same_heads_runs(sweep, defaults, lam)
    return {"seeds": [sweep["meta"]["settings"]["seed"], *[r["spec"]["seed"] for r in same[1:]]],
            "bleu_beam": [float(r["bleu_beam"]) for r in same], "kept": int(same[0]["n_kept"]),
            "n_eval": sweep["n_eval"]}


def trained_on_gate_seed(sweep: Mapping, lam: float, seed: int, rule: str = "seed") -> int:
    """The gate seed from whose run seed ``seed`` of the trained-on pruned arm rebuilds its pruned model at
    ``lam`` (chapter "Pruning heads", pruned versus scratch; each rule committed before the runs that use it).
    ``"seed"``: gate seed ``seed`` itself (``pruned_converged_seeds``, at 3 heads, where gate seeds 1 and 2 keep
    the main run's heads). ``"same_heads"``: gate seed ``seed`` where the sweep's run with that gate seed keeps
    exactly the main run's heads (:func:`same_heads_replicates`), else the main run's gate seed, so that every
    seed at a shape keeps one architecture, the one trained from scratch, and varies the batch order only
    (``pruned_converged_seeds_8_22``: no gate seed keeps the main run's heads at 8 heads, and the sweep runs
    no other gate seed at 22)."""
    main_seed = sweep["meta"]["settings"]["seed"]
    if rule == "seed":
        return seed
    if rule != "same_heads":
        raise ValueError(f"the trained-on arm's gate-seed rule is 'seed' or 'same_heads', got {rule!r}")
    defaults = main_settings(sweep)  # raises where the sweep does not record them
    same = _same_heads_runs(sweep, defaults, lam, others_required=False)  # raises without a main run at lam
    return seed if seed in {r["spec"]["seed"] for r in same[1:]} else main_seed


def gate_noise_finding(row: Mapping, replicates: Mapping, *, precomputed: str = "") -> Claim:
    """Scratch minus pruned with noise on both arms (chapter "Pruning heads"; issue "Verdicts a referee would
    sign": the gate-noise seed among the pruned arm's seeds): ``row`` is a row of :func:`scratch_versus_pruned`
    (its from-scratch seeds' beam BLEU), ``replicates`` the pruned arm over gate seeds that keep the same heads
    (:func:`same_heads_replicates`, the 300-step pruned models, all from the one converged model). A finding:
    the difference of the two arms' mean beam BLEU by Welch's t test, each arm keeping its own variance (the
    seeds of a training from scratch move BLEU far more than the gate seeds do; :func:`attnbook.stats.welch_t`,
    95%)."""
    if row["kept"] != replicates["kept"]:
        raise ValueError(f"the row has {row['kept']} heads, the gate seeds' runs {replicates['kept']}")
    if row["n_eval"] != replicates["n_eval"]:
        raise ValueError(f"the from-scratch arm was scored on {row['n_eval']} test verses, the gate seeds' runs "
                         f"on {replicates['n_eval']}: the arms must be scored on the same verses")
    scratch = [s["bleu_beam"] for s in row["scratch"]]
    t = welch_t(scratch, replicates["bleu_beam"])
    return finding(
        f"scratch minus pruned (300 steps), {row['kept']} encoder heads, both arms over seeds: the pruned arm "
        "over the gate seeds that keep the same heads (BLEU, beam 4)", t["change"], interval=t["interval"],
        test=f"Welch's t over seeds, each arm its own variance ({len(scratch)} seeds from scratch, gate "
        f"seeds {listing(replicates['seeds'])} of the one converged model pruned, {t['dof']:.1f} degrees of "
        "freedom)", digits=3, precomputed=precomputed)


#: the gates of chapter "Pruning heads" on which heads the gates keep: the least mean overlap (Jaccard) of other
#: gate seeds' kept heads, or of a settled other initialisation's, with the main run's; a run is settled when over
#: the last window no P(g != 0) moved by more than MAX_SETTLE_DP and no decision changed
MIN_KEPT_OVERLAP = 0.6
MAX_SETTLE_DP = 0.1


def seed_overlap_gate(agreement: Mapping, lam: float, *, precomputed: str = "") -> Claim:
    """The gate-seed gate (chapter "Pruning heads"): at ``lam``, the mean overlap of the other gate seeds' kept
    heads with the main run's (:func:`gate_seed_agreement`'s ``mean``) is at least :data:`MIN_KEPT_OVERLAP`."""
    return gate(f"lambda={lam}: mean overlap of gate seeds {listing(agreement['seeds'][1:])}'s kept heads with "
                f"seed {agreement['seeds'][0]}'s", agreement["mean"], at_least=MIN_KEPT_OVERLAP, digits=2,
                precomputed=precomputed, guards="which heads the gates keep (it would depend on the gate seed)")


def settling_gates(settle: Mapping, run: str, window: int, *, precomputed: str = "",
                   guards: str = "comparing them with the glorot-initialised gates") -> list[Claim]:
    """Has a gate run settled? (chapter "Pruning heads"): from :func:`settling` over the last ``window`` steps
    of ``run`` (its description), the largest change of P(g != 0) is at most :data:`MAX_SETTLE_DP` and every
    decision is unchanged. They guard comparing the run's kept heads with another run's (``guards`` says
    which)."""
    return [gate(f"{run}: largest change of P(g != 0) over the last {window} steps", settle["max_dp"],
                 at_most=MAX_SETTLE_DP, digits=2, guards=guards, precomputed=precomputed),
            gate(f"{run}: share of decisions unchanged over the last {window} steps", settle["overlap"],
                 at_least=1.0, digits=2, guards=guards, precomputed=precomputed)]


def init_overlap_gate(overlap: float, lam: float, run: str, *, precomputed: str = "") -> Claim:
    """The initialisation gate (chapter "Pruning heads"): a settled run with another gate initialisation
    (``run``) keeps the main run's heads, overlap (Jaccard) at least :data:`MIN_KEPT_OVERLAP`."""
    return gate(f"lambda={lam}: {run}, settled, keep the glorot gates' heads (overlap)", overlap,
                at_least=MIN_KEPT_OVERLAP, digits=2, precomputed=precomputed,
                guards="the statement that the kept heads do not hinge on the initialisation")


def not_nested(main: Mapping) -> int:
    """Heads kept at a larger lambda but pruned at the next smaller one (chapter "Pruning heads": 0 when the kept
    sets are nested, every head that survives a stronger penalty surviving the weaker ones)."""
    lams = sorted(main)
    kept = {lam: binary(kept_masks(main[lam])) for lam in lams}
    return sum(int(((kept[b][k] > 0) & (kept[a][k] == 0)).sum()) for a, b in zip(lams, lams[1:]) for k in kept[a])


def recovered_shares(fine_tuned: Mapping, not_fine_tuned: Sequence[tuple], full_bleu: float) -> list[float]:
    """For each mask, the share of what it costs without fine-tuning that fine-tuning wins back (chapter "Pruning
    heads"): ``(fine-tuned - not fine-tuned) / (full - not fine-tuned)``, for ``not_fine_tuned`` pairs
    ``(key, BLEU)`` whose key ``fine_tuned`` maps to the fine-tuned BLEU of the same mask."""
    out = []
    for key, b in not_fine_tuned:
        if full_bleu == b:
            raise ValueError(f"the mask {key!r} costs nothing without fine-tuning: no share to win back")
        out.append((fine_tuned[key] - b) / (full_bleu - b))
    return out


def jaccard(a, b) -> float:
    """Overlap of the kept heads of two masks, ``|A and B| / |A or B|`` (1 when both keep nothing)."""
    a, b = as_head_mask(a), as_head_mask(b)
    if set(a) != set(b) or any(a[k].shape != b[k].shape for k in a):
        raise ValueError("the two masks must have the same kinds and shapes")
    inter = sum(int(((a[k] != 0) & (b[k] != 0)).sum()) for k in a)
    union = sum(int(((a[k] != 0) | (b[k] != 0)).sum()) for k in a)
    return 1.0 if union == 0 else inter / union


def kept_per_layer(masks) -> dict[str, list[int]]:
    """Heads kept in each layer, per kind."""
    return {k: [int(x) for x in (m != 0).sum(dim=1)] for k, m in as_head_mask(masks).items()}


def layer_slope(kept):
    """Least-squares slope of heads kept against layer index (first layer 0): negative when the upper
    layers lose more heads, positive when the lower layers do (Voita et al.'s per-layer pattern). ``kept``
    holds heads kept per layer on its last axis; a batch of them (leading axes, as :func:`layer_slope_p`'s
    random draws) gives an array of slopes, one layer list a float."""
    y = np.asarray(kept, dtype=float)
    if y.ndim == 0 or y.shape[-1] < 2:
        raise ValueError("need at least two layers")
    x = np.arange(y.shape[-1], dtype=float)
    slopes = np.polyfit(x, y.reshape(-1, y.shape[-1]).T, 1)[0]
    return float(slopes[0]) if y.ndim == 1 else slopes.reshape(y.shape[:-1])


def kind_shares(sweep: Mapping) -> dict:
    """An all-kinds gate sweep by kind (chapter "Pruning heads", Voita et al.'s order of the attention kinds):
    ``runs`` (by increasing lambda), ``n_heads`` (heads of each kind), ``share`` (each kind's share of heads
    kept at each run) and ``order`` (the kinds from the most pruned, the lowest mean share kept, to the least)."""
    kinds = [k for k in ATTENTION_KINDS if k in sweep["shapes"]]
    n_heads = {k: int(np.prod(sweep["shapes"][k])) for k in kinds}
    by_lam = sorted(sweep["runs"], key=lambda r: r["spec"]["lam"])
    share = {k: [r["kept"][k] / n_heads[k] for r in by_lam] for k in kinds}
    return {"runs": by_lam, "n_heads": n_heads, "share": share,
            "order": sorted(kinds, key=lambda k: np.mean(share[k]))}


def layer_slopes(sweep_runs: Sequence[Mapping], per_run: Sequence[Mapping[str, list]], n_heads: Mapping[str, int],
                 kinds: Sequence[str]) -> dict:
    """Where in depth the gates prune each of ``kinds`` (chapter "Pruning heads", Voita et al.'s layer pattern),
    from each run's heads kept per layer (``per_run``, :func:`kept_per_layer` of each of ``sweep_runs``): for each
    kind, the run that keeps closest to half its heads (``lam``, ``per_layer``, ``slope``: :func:`layer_slope`)
    and ``every``, the slope at every run that prunes the kind, as ``(lambda, slope)``."""
    if len(per_run) != len(sweep_runs):
        raise ValueError(f"need the heads kept per layer of every run, got {len(per_run)} for {len(sweep_runs)}")
    out = {}
    for k in kinds:
        i = min(range(len(sweep_runs)), key=lambda i: abs(sweep_runs[i]["kept"][k] / n_heads[k] - 0.5))
        out[k] = {"lam": sweep_runs[i]["spec"]["lam"], "per_layer": per_run[i][k],
                  "slope": layer_slope(per_run[i][k]),
                  "every": [(r["spec"]["lam"], layer_slope(per[k])) for r, per in zip(sweep_runs, per_run)
                            if r["kept"][k] < n_heads[k]]}
    return out


def layer_slope_p(kept: torch.Tensor, direction: int, n_draws: int = 10000, seed: int = 0,
                  below: bool = False) -> float:
    """The one-sided permutation test of :func:`layer_slope` against chance (chapter "Pruning heads", Voita et
    al.'s layer pattern: do the gates keep heads by depth, or could the slope come from keeping the same number
    of heads at random?): ``kept`` is one kind's ``(layers, heads)`` mask; the share of ``n_draws`` random kept
    sets of the same size, over every head of the kind, whose slope is at least as far in ``direction``
    (``+1``: upper layers keep more; ``-1``: lower layers keep more) as the observed one, counting the observed
    set among the draws (so never 0). ``below=True``: the same test turned the other way, the share of draws
    at most as far in ``direction`` (evidence that the slope lies below chance). Draws are seeded and made on
    the CPU."""
    if direction not in (1, -1):
        raise ValueError(f"direction is +1 or -1 (the paper's sign of the slope), got {direction!r}")
    kept = torch.as_tensor(kept).detach().cpu() != 0
    layers, heads = kept.shape
    k = int(kept.sum())
    if layers < 2 or k in (0, kept.numel()):
        raise ValueError(f"need two layers or more and some heads kept and some pruned, got {layers} layers and "
                         f"{k} of {kept.numel()} kept")
    observed = direction * layer_slope(kept.sum(1).tolist())
    gen = torch.Generator().manual_seed(seed)
    picks = torch.rand(n_draws, kept.numel(), generator=gen).argsort(1)[:, :k]
    per_layer = torch.zeros(n_draws, kept.numel(), dtype=torch.float64).scatter_(1, picks, 1.0)
    slopes = direction * layer_slope(per_layer.reshape(n_draws, layers, heads).sum(2).numpy())
    return permutation_p(slopes, observed, below=below)


def role_gap(strength: torch.Tensor, kept: torch.Tensor) -> float:
    """How much more specialised the kept heads are (chapter "Pruning heads"): the mean role strength of the
    kept heads minus that of the pruned ones (``strength``, ``kept``: ``(layers, heads)``)."""
    kept = kept.bool()
    if strength.shape != kept.shape or not kept.any() or kept.all():
        raise ValueError(f"need strengths and a mask of one shape with kept and pruned heads, got "
                         f"{tuple(strength.shape)}, {tuple(kept.shape)} with {int(kept.sum())} kept")
    return float(strength[kept].mean() - strength[~kept].mean())


def role_gap_p(strength: torch.Tensor, kept: torch.Tensor, n_draws: int = 10000, seed: int = 0,
               below: bool = False) -> float:
    """The one-sided permutation test of :func:`role_gap` against chance (chapter "Pruning heads": are the kept
    heads more specialised than heads kept at random?): the share of ``n_draws`` random kept sets of the same
    size whose role gap is at least the observed one, counting the observed set among the draws (so never 0);
    ``below=True``: at most the observed one (the same test turned the other way). Draws are seeded and made on
    the CPU."""
    observed = role_gap(strength.double(), kept)  # in the draws' precision, so that a tie is a tie
    flat, k = strength.detach().flatten().double().cpu(), int(kept.bool().sum())
    gen = torch.Generator().manual_seed(seed)
    picks = torch.rand(n_draws, flat.numel(), generator=gen).argsort(1)[:, :k]
    in_kept = torch.zeros(n_draws, flat.numel(), dtype=torch.bool).scatter_(1, picks, True)
    total = flat.sum()
    kept_mean = (flat * in_kept).sum(1) / k
    gaps = kept_mean - (total - kept_mean * k) / (flat.numel() - k)
    return permutation_p(gaps.numpy(), observed, below=below)


def kind_order_p(runs: Sequence[Mapping], reference: Sequence[str], n_draws: int = 10000, seed: int = 0) -> dict:
    """Do the gates prune the attention kinds in the paper's ``reference`` order (first pruned first)? Chapter
    "Pruning heads", Voita et al.'s order of the kinds, tested at the level of single heads, since the order of
    three kinds alone cannot reach p < 0.05 (a random order is the paper's one time in six).

    Each head's keep score is the share of the sweep's ``runs`` that keep it (:func:`kept_masks`). The statistic
    (Jonckheere-Terpstra's, as a share) is the share of pairs of heads of two kinds, the first earlier in
    ``reference``, in which the earlier kind's head has the lower keep score (ties count a half): 0.5 by
    chance, 1 when every head of an earlier kind is kept less often. ``p``: the one-sided permutation test
    against heads' kinds assigned at random (the kinds' sizes kept), the share of ``n_draws`` seeded draws at
    least as high, counting the observed assignment (so never 0); ``p_below``: the same draws, at most as high
    (the test turned the other way). Returns ``dict(value, chance=0.5, p, p_below, smallest_p, pairs)``."""
    if sorted(set(reference)) != sorted(reference) or not runs:
        raise ValueError(f"need runs and distinct kinds in the reference order, got {len(runs)} runs and {reference}")
    masks = [kept_masks(r) for r in runs]
    if any(sorted(m) != sorted(reference) for m in masks):
        raise ValueError(f"every run must hold gates for exactly the kinds {sorted(reference)}")
    score = torch.cat([torch.stack([m[k].flatten() for m in masks]).double().mean(0) for k in reference])
    label = torch.cat([torch.full((masks[0][k].numel(),), i) for i, k in enumerate(reference)])
    below = (score[:, None] < score[None, :]).double() + 0.5 * (score[:, None] == score[None, :]).double()
    sizes = torch.bincount(label, minlength=len(reference)).double()
    pairs = float(sum(sizes[i] * sizes[j] for i in range(len(reference)) for j in range(i + 1, len(reference))))

    def statistic(onehot):  # (draws, heads, kinds): the ordered head pairs with the earlier kind kept less
        per = torch.einsum("dai,ab,dbj->dij", onehot, below, onehot)
        return torch.triu(per, diagonal=1).sum((1, 2)) / pairs
    eye = torch.eye(len(reference), dtype=torch.float64)
    observed = float(statistic(eye[label][None])[0])
    gen = torch.Generator().manual_seed(seed)
    shuffled = label[torch.rand(n_draws, label.numel(), generator=gen).argsort(1)]
    drawn = statistic(eye[shuffled])
    p, p_below = (permutation_p(drawn.numpy(), observed, below=b) for b in (False, True))
    return dict(value=observed, chance=0.5, p=p, p_below=p_below, smallest_p=1 / (n_draws + 1), pairs=int(pairs))


def bleu_at(n_heads: float, points: Sequence[tuple[float, float]]) -> float:
    """BLEU at ``n_heads`` heads, linearly interpolated between ``(heads kept, BLEU)`` points."""
    pts = sorted(points)
    if not pts:
        raise ValueError("no points")
    x, y = zip(*pts)
    if not x[0] <= n_heads <= x[-1]:
        raise ValueError(f"{n_heads} heads is outside the measured range {x[0]}..{x[-1]}")
    return float(np.interp(n_heads, x, y))


def changes_at_paper_shares(sweep_runs: Sequence[Mapping], n_total: int, full_bleu: float,
                            paper_by_share: Sequence[tuple[float, float]], key: str = "bleu_beam") -> dict:
    """Each run's BLEU change from the unpruned model beside the paper's at the same share of heads kept (chapter
    "Pruning heads", Voita et al.'s Table 2 compared by share, linear between the paper's points
    ``(share kept, BLEU change)``): ``{n_kept: (run, book change, paper change)}`` for the runs whose share of
    the ``n_total`` heads lies within the paper's points."""
    lowest = min(share for share, _ in paper_by_share)
    out = {}
    for r in sweep_runs:
        share = r["n_kept"] / n_total
        if share >= lowest:
            out[r["n_kept"]] = (r, r[key] - full_bleu, bleu_at(share, paper_by_share))
    return out


def changes_at_paper_shapes(sweep_runs: Sequence[Mapping], n_total: int, full_bleu: float,
                            paper_shapes: Sequence[tuple[int, float]], paper_total: int,
                            key: str = "bleu_beam") -> dict:
    """The book's BLEU change from its unpruned model at each shape the paper prints (chapter "Pruning heads",
    Voita et al.'s Table 2 compared where the paper gives a number, never the paper interpolated):
    ``paper_shapes`` holds ``(heads kept, BLEU change)`` of the paper's ``paper_total`` heads; the book's change
    at the same share of its ``n_total`` heads is linear in the share between its two runs around it. Returns
    ``{paper heads kept: {"share", "book", "paper", "between", "nearest"}}`` for the paper's shapes within the
    book's runs (``between``: the heads kept by those two runs, ``nearest``: the run closest in share)."""
    points = sorted((r["n_kept"] / n_total, r[key] - full_bleu, r) for r in sweep_runs)
    if not points:
        raise ValueError("no runs to compare")
    out = {}
    for kept, paper_change in paper_shapes:
        share = kept / paper_total
        if not points[0][0] <= share <= points[-1][0]:
            continue
        lo = max((p for p in points if p[0] <= share), key=lambda p: p[0])
        hi = min((p for p in points if p[0] >= share), key=lambda p: p[0])
        out[kept] = {"share": share, "book": bleu_at(share, [(x, y) for x, y, _ in points]),
                     "paper": paper_change, "between": (lo[2]["n_kept"], hi[2]["n_kept"]),
                     "nearest": min((lo, hi), key=lambda p: abs(p[0] - share))[2]}
    return out


def prunable_share(curve: Sequence[tuple[float, float]], full_bleu: float, n_total: int, max_drop: float) -> float:
    """The largest share of the ``n_total`` heads removed, along a pruning curve of ``(heads kept, BLEU)``
    points taken from the full model down, before BLEU first falls more than ``max_drop`` below
    ``full_bleu`` (Michel et al.'s "how many heads can go")."""
    if n_total < 1 or max_drop < 0:
        raise ValueError(f"need n_total >= 1 and max_drop >= 0, got {n_total}, {max_drop}")
    best = 0.0
    for kept, bleu in sorted(curve, reverse=True):
        if bleu < full_bleu - max_drop:
            break
        best = max(best, 1 - kept / n_total)
    return best


def gaps_to_curve(points: Sequence[tuple[float, float]], curve: Sequence[tuple[float, float]]) -> dict:
    """``BLEU(points) - BLEU(curve)`` at the same number of heads, ``{heads: gap}``, for the ``(heads, BLEU)``
    points that lie within the curve's range of heads (its upper end excluded: the full model, where both
    agree), the curve interpolated linearly: how much one way of choosing heads beats another where they can
    be compared (chapter "Pruning heads", selection without fine-tuning)."""
    xs = [n for n, _ in curve]
    inside = [(n, b) for n, b in points if min(xs) <= n < max(xs)]
    if not inside:
        raise ValueError("no point lies within the curve's range of heads")
    return {n: b - bleu_at(n, curve) for n, b in inside}


def scratch_versus_pruned(record: Mapping, references: Sequence[str], n_bootstrap: int = 1000,
                          pruned_arm: Optional[Mapping] = None) -> list[dict]:
    """The rows of chapter "Pruning heads"'s pruned-versus-scratch comparison (Voita et al. Table 2) from
    the result of recipe ``scratch_converged``: one row per pruned shape that has a pruned arm, with
    ``lam``, ``kept``, ``n_eval`` (the verses scored), the pruned model's beam BLEU and, per seed trained from scratch, its beam BLEU and
    the paired bootstrap difference scratch minus pruned on the same ``references``
    (:func:`attnbook.stats.paired_bleu_difference`). The hypotheses must be the file's, for
    the first ``record["n_eval"]`` references. With ``pruned_arm`` (the result of recipe
    ``pruned_converged``, merged with its further seeds), its pruned models trained on to convergence (arm
    ``"pruned_trained"``) take the place of the record's pruned models: the first seed's model is the one each
    from-scratch seed is paired with, and ``pruned_seeds`` lists every seed's ``seed`` and ``bleu_beam`` (one
    entry for the 300-step pruned model), for the two-arm rule of :func:`scratch_claims`. Every pruned seed
    must keep the from-scratch arm's heads, and the paired model must be the record's first seed's."""
    refs = list(references)[: record["n_eval"]]
    if len(refs) != record["n_eval"]:
        raise ValueError(f"the record was evaluated on {record['n_eval']} references, got {len(refs)}")
    if pruned_arm is None:
        source = [r for r in record["runs"] if r["arm"] == "pruned"]
    elif pruned_arm["n_eval"] != record["n_eval"]:
        raise ValueError(f"the pruned arm was evaluated on {pruned_arm['n_eval']} references, "
                         f"the record on {record['n_eval']}")
    else:
        source = [r for r in pruned_arm["runs"] if r["arm"] == "pruned_trained"]
    pruned: dict = {}  # lambda -> its pruned models, the first seed first
    for r in sorted(source, key=lambda r: -1 if r["seed"] is None else r["seed"]):
        pruned.setdefault(r["lam"], []).append(r)
    rows = []
    for lam, models in sorted(pruned.items(), key=lambda kv: -kv[0]):
        p = models[0]
        if pruned_arm is not None and p["seed"] != pruned_arm["meta"]["settings"]["seeds"][0]:
            raise ValueError(f"lambda {lam}: the trained-on arm has no run of its first seed "
                             f"{pruned_arm['meta']['settings']['seeds'][0]}, only seeds {[m['seed'] for m in models]}")
        if any(m["kept"] != p["kept"] or m["masks"] != p["masks"] for m in models[1:]):
            raise ValueError(f"lambda {lam}: the pruned models of seeds {[m['seed'] for m in models]} keep "
                             "different heads; the seed-level rule needs one architecture per shape")
        seeds = []
        for s in sorted((r for r in record["runs"] if r["arm"] == "scratch" and r["lam"] == lam),
                        key=lambda r: r["seed"]):
            if s["kept"] != p["kept"] or s["masks"] != p["masks"]:
                raise ValueError(f"lambda {lam}: the scratch run of seed {s['seed']} has another shape")
            diff = paired_bleu_difference(p["hypotheses_beam"], s["hypotheses_beam"], refs,
                                          n_bootstrap=n_bootstrap)
            seeds.append({"seed": s["seed"], "bleu_beam": s["bleu_beam"]["bleu"], **diff})
        rows.append({"lam": lam, "kept": p["kept"], "n_eval": record["n_eval"], "pruned_beam": p["bleu_beam"]["bleu"],
                     "pruned_seeds": [{"seed": m["seed"], "bleu_beam": m["bleu_beam"]["bleu"]} for m in models],
                     "matches_sweep": p.get("matches_sweep"), "scratch": seeds,
                     "across_seeds": across_seeds(seeds) if seeds else None})
    return rows




def with_gate_seeds(rows: Sequence[Mapping], sweep: Mapping) -> list[dict]:
    """The rows of :func:`scratch_versus_pruned` (the 300-step pruned arm, one model per shape) with the gate
    seeds' noise on the pruned arm (chapter "Pruning heads", pruned versus scratch; issue "Verdicts a referee
    would sign": the gate-noise seed among a pruned arm's seeds): at a shape where gate seeds of ``sweep`` other
    than the main run's keep exactly its heads (:func:`same_heads_replicates`), their 300-step models join the
    row's ``pruned_seeds``, so that :func:`scratch_claims` takes both arms' noise. Every row must have the main
    run's heads and test verses; where seeds join, the row's own model must score as the sweep's main run (beam
    BLEU to 0.01), since the arm then mixes the row's evaluation with the sweep's. A shape whose gate seeds keep
    other heads, or with no other gate seed, keeps its one model."""
    defaults, main_seed = main_settings(sweep), sweep["meta"]["settings"]["seed"]
    out = []
    for row in rows:
        main, *same = _same_heads_runs(sweep, defaults, row["lam"], others_required=False)
        if sweep["n_eval"] != row["n_eval"] or main["n_kept"] != row["kept"]:
            raise ValueError(f"lambda {row['lam']}: the gate sweep's main run keeps {main['n_kept']} heads on "
                             f"{sweep['n_eval']} test verses, the row {row['kept']} on {row['n_eval']}")
        if not same:  # no other gate seed keeps these heads: the one model
            out.append(dict(row))
            continue
        if abs(float(main["bleu_beam"]) - row["pruned_beam"]) > 0.01:  # the arm joins the sweep's scores
            raise ValueError(f"lambda {row['lam']}: the row's pruned model scores {row['pruned_beam']} (beam), the "
                             f"sweep's main run {main['bleu_beam']}: not the same model")
        out.append({**row, "pruned_seeds": [{"seed": main_seed, "bleu_beam": float(main["bleu_beam"])}] + [
            {"seed": r["spec"]["seed"], "bleu_beam": float(r["bleu_beam"])} for r in same]})
    return out


def first_seed_runs(record: Mapping) -> list[dict]:
    """The runs of a trained-on record (``pruned_converged`` or ``unpruned_converged``, merged with files of
    further seeds) made with its first seed, the recipe's own (chapter "Pruning heads"): one per shape, the
    models :func:`trained_on_gains` and :func:`cost_at` pair; the other seeds enter the seed-level rule of
    :func:`scratch_claims`. Raises where the first seed has two runs of one shape."""
    first = record["meta"]["settings"]["seeds"][0]
    out = [r for r in record["runs"] if r["seed"] == first]
    shapes = [r["lam"] for r in out]
    if len(set(shapes)) != len(shapes):
        raise ValueError(f"seed {first} has more than one run of a shape: {shapes}")
    return out


def _shared_references(trained_on: Mapping, control: Mapping, references: Sequence[str]) -> list[str]:
    """The references the trained-on runs and their control were both evaluated on (their ``n_eval`` first)."""
    refs = list(references)[: trained_on["n_eval"]]
    if len(refs) != trained_on["n_eval"] or control["n_eval"] != trained_on["n_eval"]:
        raise ValueError(f"the records were evaluated on {trained_on['n_eval']} and {control['n_eval']} "
                         f"references, got {len(refs)}")
    return refs


def trained_on_gains(trained_on: Mapping, control: Mapping, scratch: Mapping, references: Sequence[str],
                     n_bootstrap: int = 1000) -> list[dict]:
    """What training on to convergence does (chapter "Pruning heads"), from the results of runs
    ``pruned_converged`` (``trained_on``), ``unpruned_converged`` (``control``) and ``scratch_converged``
    (``scratch``, whose pruned arm holds the models after the gates' 300-step fine-tuning). One row per pruned
    shape (fewest heads first), then the control's, each with ``label``, ``kept``, ``before`` and ``after`` (beam
    BLEU), the run's ``train_steps``, ``epochs``, ``stopped``, ``minutes`` and ``threads``, and three paired
    bootstraps on the same verses (:mod:`attnbook.stats`): ``gain`` (after minus before), for a pruned shape
    ``beyond_control`` (its gain minus the control's, one bootstrap over the four models' translations: what
    adapting to the mask gives beyond more training) and ``cost`` (the trained-on pruned model minus the
    trained-on unpruned one: what pruning costs when both are trained alike). A trained-on shape that
    ``scratch`` has no 300-step model of (2 heads) has ``before``, ``gain`` and ``beyond_control`` None: its
    cost is measured, its gain is not. Each arm is its first seed's runs (:func:`first_seed_runs`), the seed
    that the 300-step pruned models were made with."""
    refs = _shared_references(trained_on, control, references)
    ctrl = first_seed_runs(control)[0]
    short = {r["lam"]: r for r in scratch["runs"] if r["arm"] == "pruned"}
    control_hyps = [ctrl["before"]["hypotheses_beam"], ctrl["hypotheses_beam"]]
    arms = [(str(r["kept"]), r["kept"], short.get(r["lam"]), r)
            for r in sorted(first_seed_runs(trained_on), key=lambda r: r["kept"])]
    arms.append(("48 (unpruned control)", None, ctrl["before"], ctrl))
    rows = []
    for label, kept, before, r in arms:
        hyps = None if before is None else [before["hypotheses_beam"], r["hypotheses_beam"]]
        rows.append({
            "label": label, "kept": kept, "before": None if before is None else before["bleu_beam"]["bleu"],
            "after": r["bleu_beam"]["bleu"],
            "gain": None if hyps is None else paired_bleu_difference(*hyps, refs, n_bootstrap),
            "beyond_control": None if kept is None or hyps is None else paired_bleu_contrast(
                hyps + control_hyps, [-1, 1, 1, -1], refs, n_bootstrap),
            "cost": None if kept is None else paired_bleu_difference(ctrl["hypotheses_beam"], r["hypotheses_beam"], refs,
                                                                     n_bootstrap),
            "train_steps": r["train_steps"], "epochs": r["epochs"], "stopped": r["stopped"],
            "minutes": r["train_wall_seconds"] / 60, "threads": r["threads"], "averaged": r["averaged"]})
    return rows


def seed_cost_finding(n_heads: int, trained_on: Mapping, control: Mapping, *, precomputed: str = "") -> Optional[Claim]:
    """The cost of pruning to ``n_heads`` encoder heads with seed noise on both arms (chapter "Pruning heads";
    the rule written before run ``unpruned_converged_seeds``): the trained-on pruned models of that shape over
    their seeds (gate seed and batch order at 3 heads; the batch order alone at 8 and 22,
    :func:`trained_on_gate_seed`) minus the unpruned model trained on alike over its seeds (batch
    order), beam BLEU, by Welch's t test (:func:`attnbook.stats.welch_t`, 95%) over the seeds' scores on the
    same test verses (the verses' own noise is left out, as :func:`seed_cost_at` puts it in). A finding: *higher*, *lower*
    or *not shown*. None while either arm has fewer than two seeds (the paired bootstrap of seed 0,
    :func:`trained_on_gains`, is then the only measurement). Both arms must be scored on the same verses."""
    if trained_on["n_eval"] != control["n_eval"]:
        raise ValueError(f"the arms were scored on {trained_on['n_eval']} and {control['n_eval']} verses")
    pruned = [r["bleu_beam"]["bleu"] for r in trained_on["runs"] if r["kept"] == n_heads]
    unpruned = [r["bleu_beam"]["bleu"] for r in control["runs"]]
    if len(pruned) < 2 or len(unpruned) < 2:
        return None
    t = welch_t(pruned, unpruned)
    return finding(f"{n_heads} encoder heads trained on minus the unpruned model trained on alike, both arms over "
                   "seeds: the cost of pruning (beam BLEU)", t["change"], interval=t["interval"],
                   test=f"Welch's t over seeds ({len(pruned)} trained-on pruned, {len(unpruned)} control; "
                   f"{t['dof']:.1f} degrees of freedom), conditional on the one converged model and on these test "
                   "verses", digits=2,
                   precomputed=precomputed)


def _bracket(n_heads: int, shapes) -> tuple[int, int, float]:
    """The shapes around ``n_heads`` (the largest at most, the smallest at least) and the weight ``w`` of the
    lower one in the linear interpolation between them (1 at a shape run); raises outside the shapes."""
    lo = max((k for k in shapes if k <= n_heads), default=None)
    hi = min((k for k in shapes if k >= n_heads), default=None)
    if lo is None or hi is None:
        raise ValueError(f"{n_heads} heads is outside the pruned shapes {sorted(shapes)}")
    return lo, hi, 1.0 if hi == lo else (hi - n_heads) / (hi - lo)


def _interpolated_cost(n_heads: int, shapes: Mapping[int, Sequence[str]], baseline: Sequence[str],
                       references: Sequence[str], n_bootstrap: int) -> dict:
    """The BLEU change at ``n_heads`` from the pruned models' translations at each shape (``shapes``, by heads
    kept) against the ``baseline`` model's: at a shape run, its change; between two, the linear interpolation
    ``w * change(lo) + (1 - w) * change(hi)`` as one paired bootstrap over the three models' translations
    (:func:`attnbook.stats.paired_bleu_contrast`). Adds ``between`` and ``weight`` (``w``); raises outside the
    shapes."""
    lo, hi, w = _bracket(n_heads, shapes)
    out = paired_bleu_contrast([baseline, shapes[lo], shapes[hi]], [-1.0, w, 1.0 - w], references, n_bootstrap)
    return {**out, "between": (lo, hi), "weight": w}


def cost_at(n_heads: int, trained_on: Mapping, control: Mapping, references: Sequence[str],
            n_bootstrap: int = 1000) -> dict:
    """The cost of pruning to ``n_heads`` encoder heads measured like with like (chapter "Pruning heads"): a
    trained-on pruned model (run ``pruned_converged``, ``trained_on``) minus the unpruned model trained on
    alike (run ``unpruned_converged``, ``control``), beam BLEU on the same verses. At a shape that was run it
    is that model's cost; between two shapes, the linear interpolation of their costs,
    ``w * cost(k_lo) + (1 - w) * cost(k_hi)``, as one paired bootstrap over the three models' translations
    (:func:`_interpolated_cost`), so that the paper's printed head counts are compared without interpolating
    the paper. Returns ``delta``, ``low``, ``high``, ``between`` (the shapes used) and ``weight`` (``w``);
    outside the shapes run it raises. Each arm is its first seed's runs (:func:`first_seed_runs`)."""
    refs = _shared_references(trained_on, control, references)
    shapes = {r["kept"]: r["hypotheses_beam"] for r in first_seed_runs(trained_on)}
    return _interpolated_cost(n_heads, shapes, first_seed_runs(control)[0]["hypotheses_beam"], refs, n_bootstrap)


def gate_cost_at(n_heads: int, scratch: Mapping, control: Mapping, references: Sequence[str],
                 n_bootstrap: int = 1000) -> dict:
    """The cost of pruning to ``n_heads`` encoder heads as the 300-step gates leave the model (chapter "Pruning
    heads", the encoder page's analogue of the paper's encoder-only curve): the pruned models of run
    ``scratch_converged`` (its arm ``"pruned"``, rebuilt from the gate sweep) minus the converged model the
    gates started from (run ``unpruned_converged``'s ``before``), beam BLEU as the paper decodes, interpolated
    between shapes as :func:`cost_at` does. Returns what :func:`cost_at` returns."""
    refs = _shared_references(scratch, control, references)
    shapes = {r["kept"]: r["hypotheses_beam"] for r in scratch["runs"] if r["arm"] == "pruned"}
    baseline = first_seed_runs(control)[0]["before"]["hypotheses_beam"]
    return _interpolated_cost(n_heads, shapes, baseline, refs, n_bootstrap)


def seed_cost_at(n_heads: int, trained_on: Mapping, control: Mapping, references: Sequence[str],
                 n_bootstrap: int = 1000, level: float = 0.95) -> dict:
    """The like-with-like cost of pruning to ``n_heads`` encoder heads over every arm's training seeds (chapter
    "Pruning heads", the comparison with the paper's encoder-only curve): the seeds' mean beam BLEU of the
    trained-on pruned models at the two shapes around ``n_heads``, interpolated as in :func:`cost_at`
    (``w * mean(lo) + (1 - w) * mean(hi)``), minus the control's seeds' mean. Its ``level`` interval
    (:func:`attnbook.stats.weighted_seed_interval`) puts in each arm's seed noise and the test verses' noise
    that every seed of an arm shares (``verse_se``): the variance of the paired bootstrap of that same
    contrast of seed means over every model's translations (:func:`attnbook.stats.paired_bleu_contrast`,
    weights ``w_i / n_i``; its 95% interval's width / 3.92, squared) less each model's own verse noise
    (``own_se``: half the bootstrap variance of the difference of two seeds of one arm, averaged over the
    arm's pairs, times ``w^2 / n`` summed over the arms). The seeds' spread already holds a model's own verse
    noise; counted in both, the interval covered about 98% of the time on simulated models at 95%
    (``tests/test_sweeps.py``). Returns
    ``delta``, ``low``, ``high``, ``se``, ``seed_se``, ``verse_se``, ``own_se``, ``dof``, ``n_seeds``
    (control, lower shape, upper shape; the lower shape alone where ``n_heads`` is a shape run), ``between``
    and ``weight``. Raises where an arm has fewer than two seeds."""
    refs = _shared_references(trained_on, control, references)
    lo, hi, w = _bracket(n_heads, {r["kept"] for r in first_seed_runs(trained_on)})
    runs = [control["runs"]] + [[r for r in trained_on["runs"] if r["kept"] == k] for k in sorted({lo, hi})]
    weights = [-1.0, w] + ([1.0 - w] if hi != lo else [])
    if min(len(a) for a in runs) < 2:
        raise ValueError(f"the cost at {n_heads} heads over seeds needs two seeds per arm, got "
                         f"{[len(a) for a in runs]} (control, {lo} heads, {hi} heads)")
    def boot_var(hyps, ws):  # the paired bootstrap's variance of a weighted sum of BLEUs
        b = paired_bleu_contrast(hyps, ws, refs, n_bootstrap)
        return ((b["high"] - b["low"]) / 3.92) ** 2
    contrast_var = boot_var([r["hypotheses_beam"] for arm in runs for r in arm],
                            [wi / len(arm) for wi, arm in zip(weights, runs) for _ in arm])
    # each model's own verse noise: half the bootstrap variance of two seeds' difference in one arm (what
    # the arm shares cancels); the seeds' spread holds it already, so it leaves the shared term
    own_var = [float(np.mean([boot_var([a["hypotheses_beam"], b["hypotheses_beam"]], [1.0, -1.0]) / 2
                              for i, a in enumerate(arm) for b in arm[i + 1:]])) for arm in runs]
    own = sum(wi ** 2 * v / len(arm) for wi, v, arm in zip(weights, own_var, runs))
    verse_se = float(np.sqrt(max(0.0, contrast_var - own)))
    arms = [[r["bleu_beam"]["bleu"] for r in arm] for arm in runs]
    r = weighted_seed_interval(arms, weights, shared_se=verse_se, level=level)
    return {"delta": r["mean"], "low": r["low"], "high": r["high"], "se": r["se"], "seed_se": r["seed_se"],
            "verse_se": verse_se, "own_se": float(np.sqrt(own)), "dof": r["dof"], "n_seeds": r["n_seeds"],
            "between": (lo, hi), "weight": w}


def continuation_gain(control, references: Sequence[str], n_bootstrap: int = 1000) -> dict:
    """What training on gives the converged model (chapter "A translation model", gate 1: has training
    converged?): run ``unpruned_converged`` (``control``) trained the shipped model on at a constant small
    rate until dev BLEU stopped rising; returns the beam BLEU gain on the test verses it was evaluated on,
    after minus before, with Koehn's paired bootstrap (:func:`attnbook.stats.paired_bleu_difference`:
    ``delta``, ``low``, ``high``), the run's ``train_steps`` and ``epochs``, and its name (``run``, where a
    file records one). Where ``control`` is a :class:`attnbook.core.runs.Missing` (no control run at this
    preset, :func:`load_continuation`), the numbers are NaN and ``missing`` holds it: the gate is then *not
    available*, never passed."""
    if not control:
        nan = float("nan")
        return {"delta": nan, "low": nan, "high": nan, "train_steps": 0, "epochs": nan, "run": control.name,
                "missing": control}
    refs = list(references)[: control["n_eval"]]
    if len(refs) != control["n_eval"]:
        raise ValueError(f"the control was evaluated on {control['n_eval']} references, got {len(refs)}")
    run = control["runs"][0]
    gain = paired_bleu_difference(run["before"]["hypotheses_beam"], run["hypotheses_beam"], refs, n_bootstrap)
    return {**gain, "train_steps": run["train_steps"], "epochs": run["epochs"],
            "run": control.get("meta", {}).get("run")}


#: the run that trains each shipped translation model on at a constant rate, gate 1's control (chapter "A
#: translation model"); all are defined at quick, the preset whose models are shipped
CONTINUATIONS = {"translation_model": "unpruned_converged", "translation_model_h4": "unpruned_converged_h4",
                 "translation_model_seed1": "unpruned_converged_seed1",
                 **{f"translation_model_{v}": f"unpruned_converged_{v}"
                    for v in ("h4_seed1", "data25", "data25_seed1", "data50", "data50_seed1")}}


def load_continuation(meta: Mapping):
    """Gate 1's control run for the translation model whose meta is ``meta`` (as
    :func:`attnbook.heads.translation.load_translation_model` returns it: its run and preset): the shipped
    file of its run in :data:`CONTINUATIONS` (``ValueError`` for a model without one). A model of another
    preset than quick gets a falsy :class:`attnbook.core.runs.Missing` that says so (no control run is
    defined there yet), and so does one whose control run has no file yet (with its command)."""
    made = meta["meta"]
    if made["run"] not in CONTINUATIONS:
        raise ValueError(f"no continuation run is defined for {made['run']!r}; gate 1 is defined for "
                         f"{sorted(CONTINUATIONS)}")
    name = CONTINUATIONS[made["run"]]
    if made["preset"] != "quick":
        return runs.Missing(name, made["preset"], f"gate 1 of the {made['preset']} model of {made['run']!r} "
                            f"needs a continuation run at {made['preset']!r}, which the run table does not "
                            f"define yet (only at quick)")
    return runs.find(name, "quick")


#: chapter "A translation model", gate 1: a model has converged when the upper end of the paired 95% interval of
#: the beam BLEU that training on at a constant rate gains (:func:`continuation_gain`) is at most this
CONVERGED_GAIN = 0.5


def converged(gain: Mapping) -> bool:
    """Gate 1's rule (chapter "A translation model"): the continuation's gain (:func:`continuation_gain`) is
    small enough, ``gain["high"] <= CONVERGED_GAIN`` (false where the control run is missing)."""
    return "missing" not in gain and gain["high"] <= CONVERGED_GAIN


def convergence_gate(gain: Mapping, *, precomputed: Optional[str] = None, model: str = "") -> Claim:
    """Gate 1 as a claim (chapter "A translation model"): :func:`converged` on ``gain``, precomputed by the
    command of the control run the gain was read from (``gain["run"]``) unless ``precomputed`` names one;
    ``model`` prefixes the name when the chapter gates more than one model."""
    prefix = f"{model}, gate" if model else "gate"
    name = f"{prefix}: beam BLEU gained by training on at a constant rate (upper end of the paired 95% interval)"
    if "missing" in gain:
        return not_available(name, gain["missing"])
    return gate(name, gain["high"], at_most=CONVERGED_GAIN, digits=2, band=0.05,
                guards="more training still improves the model; the head analyses describe a model that has "
                "learned its task (gates 2 and 3) but not converged",
                precomputed=precomputed or runs.command(gain["run"]))


def not_converged_note(gain: Mapping) -> str:
    """The clause that carries a failed gate 1 into a comparison's reason ("" when the gate passes; where the
    control run is missing, that convergence is not gated)."""
    if "missing" in gain:
        missing = gain["missing"]
        return (f"; its convergence is not gated at preset {missing.preset} (no file of run {missing.name}"
                + (f": `{missing.command}`)" if missing.command else ")"))
    return "" if converged(gain) else (
        f"; the model is not converged (trained on, it gains {gain['delta']:+.2f} BLEU, paired 95% interval up "
        f"to {gain['high']:+.2f})")


def gate_points(sweep: Mapping, score_fn: Callable[[dict], float]) -> list[dict]:
    """Each run of a single-kind gate sweep (chapter "Pruning heads", MiniLM) scored live: its ``lam``,
    ``n_kept`` (heads whose evaluation gate is open), ``gates`` (``score_fn`` with the trained gate values),
    ``binary`` (with the binary masks, :func:`kept_masks`) and ``script``, the score the sweep stored."""
    out = []
    for run in sweep["runs"]:
        binary_masks = kept_masks(run)[""]
        out.append({"lam": run["lam"], "n_kept": int(binary_masks.sum()),
                    "gates": score_fn({"": torch.tensor(run["gates"])}),
                    "binary": score_fn({"": binary_masks}), "script": run["similarity"]})
    return out


def training_minutes(trained: Sequence[Mapping]) -> dict[int, tuple[float, float]]:
    """The shortest and longest wall time, in minutes, of the trainings in ``trained`` (runs with
    ``threads`` and ``train_wall_seconds``), by the number of threads they ran on (in increasing order)."""
    by_threads: dict[int, list[float]] = {}
    for r in trained:
        by_threads.setdefault(r["threads"], []).append(r["train_wall_seconds"] / 60)
    return {t: (min(m), max(m)) for t, m in sorted(by_threads.items())}


def heads_per_kind(model: Mapping) -> dict[str, int]:
    """Heads of each attention kind of an encoder-decoder Transformer described by ``heads`` per layer and
    ``layers`` (encoder, decoder), as the paper's model is (:mod:`attnbook.claims.papers`)."""
    enc, dec = model["layers"]
    return {"enc_self": model["heads"] * enc, "dec_self": model["heads"] * dec, "dec_cross": model["heads"] * dec}


def kind_share_comparison(by_kind: Mapping, paper: Mapping, paper_n: Mapping[str, int]) -> dict:
    """Each kind's share of heads kept in the book and in the paper at about the same share of all heads
    (chapter "Pruning heads"): the run of ``by_kind`` (:func:`kind_shares`) whose share of all heads kept is
    closest to that of the paper's largest pruned shape (``paper``: ``kinds`` and ``kept`` per shape, the
    first the largest; ``paper_n``: its heads per kind). Returns ``run``, ``paper_kept`` (the paper's heads
    kept), and the shares kept per kind, ``book`` and ``paper``."""
    n_heads = by_kind["n_heads"]
    book_total, paper_total = sum(n_heads.values()), sum(paper_n.values())
    biggest = paper["kept"][0]
    near = min(by_kind["runs"], key=lambda r: abs(r["n_kept"] / book_total - sum(biggest) / paper_total))
    return {"run": near, "paper_kept": sum(biggest),
            "book": {k: near["kept"][k] / n_heads[k] for k in n_heads},
            "paper": {k: biggest[paper["kinds"].index(k)] / paper_n[k] for k in n_heads}}


def encoder_reason(n: int, main: Mapping, full_bleu: float, no_ft: Sequence[tuple[int, float]],
                   long_run: Optional[Mapping], window: int = 60, trained_on: Optional[Mapping] = None) -> str:
    """Why the encoder gates' BLEU change with ``n`` heads differs from the paper's, as measured (chapter
    "Pruning heads"): what the main run's masks (``main``: :func:`main_runs`) cost without fine-tuning
    (``no_ft``: ``(heads, BLEU)``; ``full_bleu``: the unpruned model's greedy BLEU), what its fine-tuning won
    back, how much of its kept set changed over the last ``window`` steps (:func:`settling`), and, when
    ``long_run`` (trained twice as long; ``None`` where it is not compared, unsettled) keeps ``n`` heads too,
    its BLEU change; the head width, which the book has not varied in a pruning run, is named as a reason not
    measured. The gate runs' numbers are greedy BLEU, and say so. ``trained_on``: the cost of pruning to the
    paper's head count measured like with like (:func:`seed_cost_at`: pruned and unpruned models both trained
    on to convergence, over their seeds, beam 4), which measures how much of the gap the short fine-tuning
    makes."""
    run = next(r for r in main.values() if r["n_kept"] == n)
    cost = full_bleu - dict(no_ft).get(n, float("nan"))
    st = settling(run["snapshots"], window=window)
    won_back = run["bleu_greedy"] - full_bleu + cost
    return (f"with {n} heads the masks cost {cost:.1f} BLEU (greedy) without fine-tuning and "
            f"{run['spec']['steps']} steps of fine-tuning win back {won_back:.1f}; over the last "
            f"{window} steps {1 - st['overlap']:.0%} of the kept set still changed; the paper fine-tunes until "
            "the gates stop; head width (64 dimensions in the paper, 16 here): reason not measured"
            + (f"; {long_run['spec']['steps']} steps instead of {run['spec']['steps']} give "
               f"{long_run['bleu_greedy'] - full_bleu:+.2f} (greedy) with the same heads"
               if long_run is not None and long_run["n_kept"] == n else "")
            + ("" if trained_on is None else
               f"; trained on to convergence alike (beam 4, over seeds), pruning to {trained_on['heads']} heads "
               "changes BLEU "
               f"by {trained_on['delta']:+.2f} [{trained_on['low']:+.2f}, {trained_on['high']:+.2f}]"))


def all_kinds_reason(run: Mapping, no_ft_bleu: float, full_bleu: float, paper_total: int, book_total: int) -> str:
    """Why an all-kinds gate run's BLEU change differs from the paper's, as measured (chapter "Pruning heads"):
    the heads it kept per kind, what its masks cost without fine-tuning (``no_ft_bleu``, greedy; ``full_bleu``:
    the unpruned model's) and what its fine-tuning won back."""
    cost = full_bleu - no_ft_bleu
    return (f"kept per kind {run['kept']}; the masks alone cost {cost:.1f} BLEU (greedy) and "
            f"{run['spec']['steps']} steps of fine-tuning win back {run['bleu_greedy'] - full_bleu + cost:.1f}; "
            f"the paper fine-tunes until the gates stop; head width ({paper_total} heads of 64 dimensions in the "
            f"paper, {book_total} of 16 here): reason not measured")


def arm_difference(row: Mapping) -> float:
    """From scratch minus the pruned arm at one shape of :func:`scratch_versus_pruned`, as the verdict of
    :func:`scratch_claims` reads it: the mean of the seeds' paired differences while the pruned arm has one
    model, the difference of the arms' mean beam BLEU once it has seeds (``pruned_seeds``)."""
    pruned = [p["bleu_beam"] for p in row.get("pruned_seeds") or []]
    if len(pruned) <= 1:
        return row["across_seeds"]["delta"]
    scratch = [s["bleu_beam"] for s in row["scratch"]]
    return float(np.mean(scratch) - np.mean(pruned))


def scratch_claims(rows: Sequence[Mapping], arm: str, done: str, paper: float, source: str,
                   precomputed: str, analogue: str = "", why: str = NOT_MEASURED) -> list[Claim]:
    """One comparison with the paper per shape of :func:`scratch_versus_pruned`'s ``rows`` that has
    from-scratch runs (Voita et al. Table 2, ``paper``: its scratch-minus-pruned BLEU, read at ``source``):
    from scratch minus the ``arm`` model, the mean over seeds, decided by the seeds' 95% t interval with the
    seed-to-seed variance pooled over the shapes (:func:`attnbook.stats.pooled_seed_intervals`), with the
    rule's power at the paper's effect from that variance (:func:`attnbook.stats.pooled_rule_power`). With
    one seed per shape the seeds' noise is not measured: the seed's paired 95% interval over verses decides
    and no power is given. Where the ``arm`` has two or more seeds at a shape (``pruned_seeds``), both arms'
    noise enters: scratch's mean minus the arm's mean, each arm's seed sd pooled over the shapes, Welch's
    degrees of freedom (:func:`attnbook.stats.two_arm_seed_intervals`, its power
    :func:`attnbook.stats.two_arm_rule_power`), at every shape, provided the from-scratch arm has two or more
    seeds at some shape too (else the one seed's interval over verses decides, as above). Both arms' seeds
    prune or train one converged model's recipe, so the interval is conditional on that model. ``done`` says
    how much of the recipe finished. ``analogue``: the experiment the book ran where the paper ran another
    (encoder-only shapes against Table 2's all-kinds gap), so that each claim counts as an analogue. ``why``:
    the reason a verdict other than *reproduces* has, after what was measured (by default
    :data:`attnbook.claims.NOT_MEASURED`)."""
    shaped = [row for row in rows if row["scratch"]]
    deltas = [[s["delta"] for s in row["scratch"]] for row in shaped]
    scratch_bleu = [[s["bleu_beam"] for s in row["scratch"]] for row in shaped]
    arm_bleu = [[p["bleu_beam"] for p in row.get("pruned_seeds") or [{"bleu_beam": row["pruned_beam"]}]]
                for row in shaped]
    two_arm = any(len(b) > 1 for b in arm_bleu) and any(len(d) > 1 for d in deltas)
    pooled = (two_arm_seed_intervals(scratch_bleu, arm_bleu) if two_arm
              else pooled_seed_intervals(deltas) if any(len(d) > 1 for d in deltas) else [None] * len(shaped))
    out = []
    counts, arm_counts = [len(d) for d in deltas], [len(b) for b in arm_bleu]

    def first(i, xs):  # shape i's count first, then the other shapes' (the power simulates shape i)
        return [xs[i]] + xs[:i] + xs[i + 1:]

    def measured(seeds):  # the shapes whose seeds measure an arm's spread (two seeds or more)
        n = sum(k > 1 for k in seeds)
        return f"{n} shape{'s' * (n != 1)}"
    for i, (row, p) in enumerate(zip(shaped, pooled)):
        a = row["across_seeds"]
        if p is None:  # one seed per shape: the verses' interval of that seed
            low, high, power = a["low"], a["high"], None
            how = f"one seed: its paired 95% interval over verses runs from {low:+.2f} to {high:+.2f}"
        elif two_arm:  # both arms over their seeds
            low, high = p["low"], p["high"]
            a = {**a, "delta": arm_difference(row)}  # = p["mean"]
            power = None if p["sd_a"] + p["sd_b"] == 0 else two_arm_rule_power(
                paper, p["sd_a"], p["sd_b"], first(i, counts), first(i, arm_counts))["reproduces"]
            how = (f"{p['n_b']} {arm} seed(s); the two arms' 95% t interval (seed sd {p['sd_a']:.2f} from "
                   f"scratch, pooled over {measured(counts)}, and {p['sd_b']:.2f} {arm}, pooled over "
                   f"{measured(arm_counts)}; {p['dof']:.1f} degrees of freedom) runs from {low:+.2f} to "
                   f"{high:+.2f}")
        else:  # the power of this shape's interval: its seeds first, then the other shapes'
            low, high = p["low"], p["high"]
            power = pooled_rule_power(paper, p["sd"], first(i, counts))["reproduces"]
            how = (f"the seeds' 95% t interval (seed sd {p['sd']:.2f} pooled over {len(deltas)} shapes, "
                   f"{p['dof']} degrees of freedom) runs from {low:+.2f} to {high:+.2f}")
        verdict = ("from scratch is the better beyond the seeds' noise" if low > 0
                   else "the pruned model is the better beyond the seeds' noise" if high < 0
                   else "the interval reaches 0")
        reason = (f"{a['delta']:+.2f} BLEU over {a['n_seeds']} seed(s)"
                  + (f", spread {a['spread']:.2f}" if a["n_seeds"] > 1 else "")
                  + f"; {how}: {verdict}; {done}; why: {why}")
        # the name holds no seed list, so that a seed added later keeps the claim's name (the reason counts them)
        out.append(compare(f"scratch minus {arm}, {row['kept']} encoder heads, mean over its seeds "
                           "(BLEU, beam 4)", a["delta"], paper=paper,
                           same_side_of=0.0, interval=(low, high), digits=2, source=source,
                           reason=reason, precomputed=precomputed, power=power, analogue=analogue))
    return out
