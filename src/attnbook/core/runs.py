"""Named recipes: every precomputed file the book ships and the one command that regenerates it.

A recipe is a name, the script that runs it, the file it writes (relative to ``attnbook/data/``) and every
setting the run uses. ``python <script> <name>`` regenerates the file, and the file records the recipe's
name and settings (``meta["recipe"]``, ``meta["settings"]``), so a reader can tell which run made it and
:func:`check_recorded` can tell whether a shipped file is stale. Sizes of the chapters' live runs stay in
:mod:`attnbook.core.presets`; this module holds only what is too long to run in a chapter.

chapter "Pruning heads" reads the ``*_converged`` pruning recipes; the settings and where they depart
from Voita et al.'s official code are explained in the recipe comments and in the chapter.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Mapping

#: the folder of every shipped file (package data)
DATA = Path(__file__).resolve().parents[1] / "data"

#: Voita et al.'s gate fine-tuning on the converged translation model (chapter "Pruning heads"). Shared settings:
#: the model's own dropout (the model stays in training mode), label smoothing 0.1, token-based batches as
#: in its training, log_alpha drawn as the official code does (glorot-uniform), binary masks at evaluation.
#: Departures from the official code, to fit a 2-core CPU: the model's weights learn at a constant 2e-4
#: (its own cosine schedule had decayed to zero; the official run keeps the Noam schedule going) and the
#: gates at 0.05 rather than at the weights' rate, for a few hundred steps instead of "until they stop
#: moving" by hand; the ``variants`` rerun one lambda with the other gate init and a smaller gate rate to
#: show which heads survive does not hinge on those choices.
_GATES_CONVERGED = dict(
    checkpoint="converged_quick",
    max_tokens=2400,
    lr=2e-4,
    gate_lr=0.05,
    init_log_alpha="glorot",
    steps=300,
    record_every=20,
    label_smoothing=0.1,
    clip=1.0,
    seed=0,
    eval_split="test",
    n_eval=None,  # None: every sentence of the split
    beam=4,
    length_penalty=0.6,
)

RECIPES: dict[str, dict[str, Any]] = {
    "minilm_gates": dict(
        script="scripts/sweep_gates.py",
        part="minilm_gates",
        output="pruning/minilm_gates.json",
        what="hard-concrete gates on all-MiniLM-L6-v2 (model frozen, the 72 gates trained to keep mean-pooled "
        "embeddings close to the unpruned model's), evaluated on every 10th sentence of "
        "attnbook.core.text.english_sentences()",
        settings=dict(lambdas=[0.05, 0.2, 0.8], steps=60, batch=8, gate_lr=0.2, max_length=24, n_eval=120,
                      record_every=10, seed=0),
    ),
    "encoder_gates_converged": dict(
        script="scripts/sweep_gates.py",
        part="gate_sweep",
        output="pruning/encoder_gates_converged.json",
        what="hard-concrete gates on the 48 encoder self-attention heads of the converged model; decoder, "
        "shared embeddings and output frozen (the embeddings are shared with the decoder here, so they "
        "stay frozen too); one fine-tuning run per lambda",
        settings=dict(
            _GATES_CONVERGED,
            kinds=["enc_self"],
            lambdas=[0.02, 0.05, 0.1, 0.2, 0.5],
            variants=[
                dict(lam=0.1, init_log_alpha=3.0),
                dict(lam=0.1, gate_lr=0.02, steps=600),
                dict(lam=0.05, steps=600),
            ],
        ),
    ),
    "all_kinds_gates_converged": dict(
        script="scripts/sweep_gates.py",
        part="gate_sweep",
        output="pruning/all_kinds_gates_converged.json",
        what="hard-concrete gates on all 96 heads of the converged model (48 encoder self-attention, 24 "
        "decoder self-attention, 24 encoder-decoder attention), whole model fine-tuned",
        settings=dict(
            _GATES_CONVERGED,
            kinds=["enc_self", "dec_self", "dec_cross"],
            lambdas=[0.05, 0.1, 0.2, 0.5],
            variants=[],
        ),
    ),
    "scratch_converged": dict(
        script="scripts/sweep_gates.py",
        part="scratch",
        output="pruning/scratch_converged.json",
        what="Voita et al.'s Table 3 on the encoder: each pruned shape of encoder_gates_converged (the binary "
        "mask of one lambda) trained from scratch with the converged model's own recipe (preset translation "
        "quick, scripts/train_translation.py), the mask fixed for the whole training; the pruned models "
        "rebuilt with the gate sweep's settings; test BLEU greedy and beam 4 with sacreBLEU intervals and the "
        "beam hypotheses for the paired bootstrap. Runs go seed by seed, so a partial file holds whole shapes",
        settings=dict(
            preset="quick",
            gate_recipe="encoder_gates_converged",
            lambdas=[0.1, 0.05, 0.02],  # 3, 8 and 22 of 48 encoder heads
            seeds=[0, 1],  # seed 0 is the converged model's own seed (same init, same batch order)
            eval_split="test",
            beam=4,
            length_penalty=0.6,
        ),
    ),
    "pruned_converged": dict(
        script="scripts/sweep_gates.py",
        part="scratch",
        output="pruning/pruned_converged.json",
        what="the pruned arm of scratch_converged trained on to convergence: each pruned model of "
        "encoder_gates_converged (rebuilt with the sweep's settings, its binary mask) then trained, the whole "
        "model with its mask fixed, with scratch_converged's recipe (the same loop, batches, dev evaluations, "
        "early stopping and checkpoint averaging) except that the learning rate starts at the gate sweep's "
        "fine-tuning rate with no warm-up (a continuation, not a restart) and decays on the same cosine; test "
        "BLEU greedy and beam 4 with the beam hypotheses, to pair with scratch_converged's",
        settings=dict(
            preset="quick",
            gate_recipe="encoder_gates_converged",
            lambdas=[0.1, 0.05, 0.02],  # 3, 8 and 22 of 48 encoder heads, as scratch_converged
            seeds=[0],  # the batch order of the converged model's training and of the gate sweep's seed
            arms=["pruned_trained"],
            continue_training=dict(lr=_GATES_CONVERGED["lr"], warmup=0),
            eval_split="test",
            beam=4,
            length_penalty=0.6,
        ),
    ),
    "unpruned_converged": dict(
        script="scripts/sweep_gates.py",
        part="scratch",
        output="pruning/unpruned_converged.json",
        what="the control of pruned_converged: the converged model itself, every head kept, trained on exactly "
        "as pruned_converged trains the pruned models (the same loop, batches, learning rate from the gate "
        "sweep's fine-tuning rate with no warm-up, dev evaluations, early stopping and checkpoint averaging), "
        "to tell what training on gains from more training alone from what it gains by adapting to a mask; "
        "test BLEU greedy and beam 4 with the beam hypotheses before and after",
        settings=dict(
            preset="quick",
            gate_recipe="encoder_gates_converged",  # the checkpoint and the mask layout
            lambdas=[],
            seeds=[0],  # the batch order of pruned_converged's trainings
            arms=["unpruned_trained"],
            continue_training=dict(lr=_GATES_CONVERGED["lr"], warmup=0),
            eval_split="test",
            beam=4,
            length_penalty=0.6,
        ),
    ),
    "michel_fine_tuned_converged": dict(
        script="scripts/sweep_gates.py",
        part="michel_fine_tuned",
        output="pruning/michel_fine_tuned_converged.json",
        what="Michel et al.'s masks given the gates' fine-tuning: the authors' per-token importance of "
        "michel_converged (encoder heads, layer-normalised, ranked once) pruned to the number of encoder heads "
        "the gates of encoder_gates_converged kept at each lambda, then fine-tuned exactly as the gates were "
        "(that recipe's steps, learning rate, label-smoothed loss, clipping, batches and seed; encoder only), "
        "the masks fixed; test BLEU, greedy, with sacreBLEU intervals, before and after the fine-tuning, and "
        "the fine-tuned models' beam hypotheses (scratch_converged's decoding, so that they pair with its "
        "rebuilt gate-pruned models' for a paired bootstrap)",
        settings=dict(
            michel_recipe="michel_converged",
            gate_recipe="encoder_gates_converged",
            lambdas=[0.1, 0.05, 0.02],  # 3, 8 and 22 of 48 encoder heads
            beam=4,  # beam search as scratch_converged decodes
            length_penalty=0.6,
        ),
    ),
    "michel_converged": dict(
        script="scripts/sweep_gates.py",
        part="michel",
        output="pruning/michel_converged.json",
        what="Michel et al.'s importance pruning of the converged model without fine-tuning: the authors' "
        "per-token estimator ranked once (encoder heads alone and all 96 heads), and the variants "
        "(whole-batch estimator, re-scoring before every step, no layer-wise normalisation), split-half "
        "reliability of the importance, single-head ablation, the best single head of each layer, and the "
        "gate sweeps' masks applied without fine-tuning",
        settings=dict(
            checkpoint="converged_quick",
            max_tokens=2400,
            n_batches=40,  # training batches for the importance (40 x ~2400 tokens)
            label_smoothing=0.0,  # the importance is taken on the plain cross-entropy
            prune_fractions=[0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9],
            eval_split="test",
            n_eval=None,
            ablation_split="dev",
            n_ablation=200,  # single-head ablation and best head per layer: first dev verses, greedy
            gate_recipes=["encoder_gates_converged", "all_kinds_gates_converged"],
            seed=0,
        ),
    ),
}


def recipe(name: str) -> dict[str, Any]:
    """A deep copy of recipe ``name`` (``script``, ``part`` (the script's function), ``output``, ``what``,
    ``settings``)."""
    if name not in RECIPES:
        raise ValueError(f"unknown recipe {name!r}; recipes: {', '.join(sorted(RECIPES))}")
    return copy.deepcopy(RECIPES[name])


def output_path(name: str) -> Path:
    """Where recipe ``name`` writes its result (under ``attnbook/data/``)."""
    return DATA / recipe(name)["output"]


def command(name: str) -> str:
    """The one command that regenerates recipe ``name``'s file."""
    return f"python {recipe(name)['script']} {name}"


def check_recorded(payload: Mapping[str, Any], name: str) -> None:
    """Raise ``ValueError`` unless ``payload`` (a shipped result) was made by recipe ``name`` with the
    recipe's current settings: a stale file is an error, not a silently different result."""
    meta = payload.get("meta", {}) if isinstance(payload, Mapping) else {}
    if meta.get("recipe") != name:
        raise ValueError(f"this file was not made by recipe {name!r} (it records {meta.get('recipe')!r})")
    if meta.get("settings") != recipe(name)["settings"]:
        raise ValueError(f"the file of recipe {name!r} was made with other settings; rerun `{command(name)}`")
