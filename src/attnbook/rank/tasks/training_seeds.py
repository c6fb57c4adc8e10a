"""Chapter "Path effectiveness" over training seeds: the statements of Dong et al.'s Fig. 4 judged with the
training seed as the unit, not the sampled path sets of one trained model.

A training seed draws the task's data (sort and hull: training and evaluation sequences; memorization: the
random labels), the model's initialisation and the batch order. The chapter's t tests over sampled path sets
hold one trained model fixed, so they say what that model does; whether another training of the same recipe
would give the same verdict needs models trained at other seeds. :func:`train_path_models` trains the chapter's
three models at one seed exactly as the chapter does, :func:`path_accuracies` samples their paths as the chapter
does, :func:`seed_effects` reduces one seed's tables to the effects the statements are about, and
:func:`across_seeds` gives each effect's t interval over the seeds.
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

import numpy as np
import torch

from attnbook.core.presets import seed_everything
from attnbook.core.train import train
from attnbook.rank.tasks import full_accuracy, path_accuracy_by_length, path_task
from attnbook.stats import pooled_seed_intervals

#: the chapter's three tasks, in the order it trains them and samples their paths
TASKS = ("sort", "hull", "memorization")

#: the effects of :func:`seed_effects`, each with the direction of the paper's statement about it
EFFECTS = ("short", "longest", "falls", "more_paths")


def build_path_task(name: str, size: Mapping, seed: int) -> dict:
    """Task ``name`` at training ``seed``: the library seeded with ``seed`` (the model's initialisation and
    anything drawn later), then :func:`attnbook.rank.tasks.path_task` at ``size`` (its preset entry) from a
    generator seeded with ``seed`` (the task's data). The one definition of "the task at seed s" for the
    chapter's trainings and ``scripts/bench_recipes.py``."""
    seed_everything(seed)
    return path_task(name, size, torch.Generator().manual_seed(seed))


def train_path_models(cfg: Mapping, seed: int, device=None, names: Sequence[str] = TASKS) -> dict:
    """The chapter's models of tasks ``names``, each trained with the book's recipe at training ``seed``:
    the task built by :func:`build_path_task`, then :func:`attnbook.core.train.train` for the preset's
    steps (``cfg`` is the ``path_effectiveness`` preset). Returns per task the task's dict (``model``, ``eval``, ``chance``,
    ``ceiling``, ...) with ``history`` (the training's) and ``full`` (the full model's accuracy)."""
    unknown = [n for n in names if n not in TASKS]
    if unknown:
        raise ValueError(f"unknown tasks {unknown}; expected some of {TASKS}")
    trained = {}
    for name in names:
        task = build_path_task(name, cfg[name], seed)
        history = train(task["model"], lambda step, t=task: t["batch_fn"](cfg["batch"]), task["loss_fn"],
                        steps=cfg[name]["steps"], lr=cfg["lr"], progress=False, device=device)
        trained[name] = dict(task, history=history, full=full_accuracy(task["model"], task["eval"]))
    return trained


def path_accuracies(trained: Mapping, n_paths: Sequence[int], repeats: int, generator=None) -> dict:
    """Accuracy by path length of every trained model, ``{(task, n): (depth + 1, repeats) table}`` for each
    number of paths ``n`` (:func:`attnbook.rank.tasks.path_accuracy_by_length`), drawn in the chapter's order
    (task by task, ``n_paths`` in turn) from one ``generator``."""
    return {(name, n): path_accuracy_by_length(task["model"], task["eval"], n, repeats, generator)
            for name, task in trained.items() for n in n_paths}


def seed_effects(many, few, floor: float, short: int = 1, lengths=(1, 2)) -> dict:
    """One trained model's effects for the statements of Fig. 4, from its accuracy tables with many paths
    (``many``) and few (``few``), each ``(depth + 1, repeats)``, and its task's ``floor`` (chance, or the
    hull's majority line), each a mean over the sampled path sets:

    * ``short``: length ``short`` (the paper's short path, length 1; no length chosen after looking) minus
      the floor ("short paths lie above chance": above 0);
    * ``longest``: the longest paths (every layer a head) minus the floor ("they fall to chance": near 0);
    * ``falls``: the longest paths minus length ``short`` ("accuracy falls with length": below 0);
    * ``more_paths``: many paths minus few, the mean over ``lengths`` ("20 paths beat 5": above 0)."""
    many, few = (np.asarray(t, dtype=float) for t in (many, few))
    if many.ndim != 2 or many.shape != few.shape or many.shape[0] < 2:
        raise ValueError(f"expected two (depth + 1, repeats) tables of one shape, got {many.shape} and "
                         f"{few.shape}")
    if not all(0 < k < many.shape[0] for k in (short, *lengths)):
        raise ValueError(f"path lengths {short}, {lengths} outside 1..{many.shape[0] - 1}")
    mean = many.mean(axis=1)
    return {"short": float(mean[short] - floor), "longest": float(mean[-1] - floor),
            "falls": float(mean[-1] - mean[short]),
            "more_paths": float(np.mean([mean[k] - few[k].mean() for k in lengths]))}


def across_seeds(per_seed: Sequence[Mapping[str, float]], level: float = 0.9,
                 effects: Optional[Sequence[str]] = None) -> dict:
    """Each effect's mean over the training seeds with its Student t ``level`` interval over them
    (:func:`attnbook.stats.pooled_seed_intervals` with one shape: ``n_seeds - 1`` degrees of freedom), from
    one :func:`seed_effects` dict per seed. Returns ``{effect: {"mean", "low", "high", "sd", "dof",
    "n_seeds", "se", "values"}}``."""
    if len(per_seed) < 2:
        raise ValueError(f"an interval over training seeds needs at least two seeds, got {len(per_seed)}")
    out = {}
    for effect in effects or EFFECTS:
        values = [float(s[effect]) for s in per_seed]
        r = pooled_seed_intervals([values], level)[0]
        out[effect] = dict(r, se=r["sd"] / np.sqrt(r["n_seeds"]), values=values)
    return out
