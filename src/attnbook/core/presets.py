"""Experiment sizes, seeding and device choice: one knob from a 2-core CPU to one GPU.

Every chapter reads its sizes with :func:`preset` (Intro, "Presets"). The active preset comes from the
``ATTNBOOK_PRESET`` environment variable; without it, ``paper`` when CUDA is available, else ``quick``.

* ``quick``: the whole book executes in at most 15 minutes on a 2-core CPU and every claim holds.
  CI runs exactly this, so readers and CI see the same numbers.
* ``paper``: the papers' own model sizes, data sizes and training lengths, for one GPU.

The table below is the only place where experiment sizes are written. Each experiment has a ``quick``
and a ``paper`` entry with the same keys, side by side.
"""

from __future__ import annotations

import os
import random
from types import MappingProxyType
from typing import Any, Mapping, Optional

import numpy as np
import torch

PRESET_NAMES = ("quick", "paper")
ENV_VAR = "ATTNBOOK_PRESET"

#: experiment -> preset -> sizes. Keep the two entries of an experiment side by side with the same keys.
TABLE: dict[str, dict[str, dict[str, Any]]] = {
    # chapter "Pure attention loses rank": relative residual vs depth for SAN and its variants.
    "pure_attention": {
        "quick": dict(n_tokens=32, d_model=64, n_heads=4, depth=24, n_inputs=8, n_nets=3),
        "paper": dict(n_tokens=128, d_model=768, n_heads=12, depth=48, n_inputs=32, n_nets=5),
    },
    # chapter "Path decomposition": exact checks of the path sum (same sizes at both presets: they are
    # float64 identities), then products of attention matrices along sampled paths of a random network.
    "path_decomposition": {
        "quick": dict(n_tokens=8, d_model=24, configs=((1, 4), (2, 3), (3, 4), (4, 2), (6, 2)),
                      rank1_depth=12, rank1_heads=12, rank1_tokens=32, rank1_d_model=96, n_sampled_paths=100),
        "paper": dict(n_tokens=8, d_model=24, configs=((1, 4), (2, 3), (3, 4), (4, 2), (6, 2)),
                      rank1_depth=12, rank1_heads=12, rank1_tokens=128, rank1_d_model=768, n_sampled_paths=500),
    },
    # chapter "The one-layer residual bound": random and adversarial (gradient-ascent) instances per step.
    "residual_bound_one_layer": {
        "quick": dict(n_tokens=6, d_model=8, d_qk=4, n_random=2000, n_starts=4, ascent_steps=120,
                      n_argmin=12, sweep_points=13, n_sweep_nets=4),
        "paper": dict(n_tokens=6, d_model=8, d_qk=4, n_random=50000, n_starts=32, ascent_steps=600,
                      n_argmin=100, sweep_points=25, n_sweep_nets=16),
    },
    # chapter "Deep bounds": the doubly exponential bound over depth, skips,
    # MLP Lipschitz constants (the lemma searched adversarially, as in "The one-layer residual bound"), LayerNorm.
    "deep_bounds": {
        "quick": dict(n_tokens=6, d_model=8, n_heads=2, depth=5, n_nets=8, collapse_tokens=16,
                      collapse_d_model=32, collapse_depth=24, n_collapse_nets=4,
                      mlp_random=2000, mlp_starts=64, mlp_ascent_steps=600),
        "paper": dict(n_tokens=6, d_model=8, n_heads=2, depth=5, n_nets=64, collapse_tokens=128,
                      collapse_d_model=768, collapse_depth=48, n_collapse_nets=8,
                      mlp_random=50000, mlp_starts=256, mlp_ascent_steps=2000),
    },
    # chapter "Rank collapse in pretrained transformers" (Dong et al. Fig. 2): pretrained models on
    # n_sequences x n_tokens real tokens (the paper: 32 x 128); BERT/ALBERT/XLNet-base at initialisation
    # (the paper's sizes) on init_sequences x init_tokens; n_paths sampled paths per depth, attention
    # matrices of path_sequences inputs, for the companion figure.
    "pretrained_rank_collapse": {
        "quick": dict(n_sequences=16, n_tokens=128, init_sequences=4, init_tokens=128, n_paths=40,
                      path_sequences=4),
        "paper": dict(n_sequences=32, n_tokens=128, init_sequences=32, init_tokens=128, n_paths=100,
                      path_sequences=32),
    },
    # chapter "Rank collapse at initialisation" (Noci et al. 2022): token
    # cosine vs depth (one stack per depth, n_nets draws) and per-layer W_Q/W_K/W_V gradient norms.
    "collapse_kills_qk": {
        "quick": dict(n_tokens=16, d_model=64, n_heads=4, batch=8, rho0=0.2,
                      depths=(1, 2, 4, 8, 16, 32, 64), n_nets=2, grad_depth=64),
        "paper": dict(n_tokens=64, d_model=512, n_heads=8, batch=16, rho0=0.2,
                      depths=(1, 2, 4, 8, 16, 32, 64, 128, 256), n_nets=4, grad_depth=256),
    },
    # chapter "Unequal gradients": one-head Jacobian norms
    # (n_draws weight draws), then SGD vs Adam on sequence reversal with a deep post-LN stack;
    # fairseq_*: the balancing temperature on a fairseq IWSLT encoder's layer inputs at initialisation
    # (sentences of fairseq_tokens tokens; fairseq_draws weight draws per layer); sweep_steps: the
    # optimiser sweep's runs (scripts/sweep_optimisers.py), long enough for the slower arms to plateau.
    "unequal_gradients": {
        "quick": dict(n_tokens=8, d_model=16, d_k=8, d_v=8, rho=0.3, n_draws=60,
                      vocab=10, seq_len=8, train_d_model=32, train_heads=2, train_depth=8,
                      batch=32, steps=200, sgd_lr=0.1, adam_lr=1e-3, n_eval=512,
                      fairseq_tokens=27, fairseq_sentences=4, fairseq_draws=16,
                      sweep_steps=1000),
        "paper": dict(n_tokens=32, d_model=64, d_k=32, d_v=32, rho=0.3, n_draws=400,
                      vocab=10, seq_len=16, train_d_model=128, train_heads=4, train_depth=16,
                      batch=64, steps=1000, sgd_lr=0.1, adam_lr=1e-3, n_eval=2048,
                      fairseq_tokens=27, fairseq_sentences=16, fairseq_draws=32,
                      sweep_steps=3000),
    },
    # chapter "A translation model" (Voita et al. 2019): the EN->ES Bible model
    # (scripts/train_translation.py; quick ships its checkpoint) and the dev/test sentences the chapter uses.
    # quick: a recipe for a small parallel corpus (29k pairs) that converges on one CPU thread in about
    # two hours: 48 encoder heads as in the paper (6 layers x 8) at width 128, a 3-layer decoder, dropout
    # and attention dropout 0.1, label smoothing 0.1, token-based batches, warm-up then cosine decay,
    # dev BLEU every eval_every steps, the average of the last average_last evaluated checkpoints.
    "translation": {
        "quick": dict(d_model=128, n_heads=8, enc_layers=6, dec_layers=3, d_ff=512, dropout=0.1,
                      attention_dropout=0.1, max_len=96, max_tokens=2400, batch_size=64, lr=2e-3,
                      warmup=400, weight_decay=0.01, label_smoothing=0.1, train_steps=6300,
                      eval_every=350, n_eval_bleu=200, average_last=5, patience=6, n_role_sentences=100,
                      seed=0, n_bleu=200, n_beam=200, n_analysis=200, n_relevance=64, n_minilm=200,
                      data_fraction=1.0),
        # paper: Transformer-base widths (Voita et al.'s model) with a recipe for this 1 M-token corpus on one GPU:
        # 2000 steps of 8000 tokens (about 14 epochs, as quick's 13), dropout 0.3 (fairseq's IWSLT recipe for a
        # small corpus), 10% warm-up then cosine, early stopping on greedy BLEU of 500 dev verses; sized to train
        # in about 10 minutes at the 3.7 steps/s measured on an H200 (issue 37), not yet run
        "paper": dict(d_model=512, n_heads=8, enc_layers=6, dec_layers=6, d_ff=2048, dropout=0.3,
                      attention_dropout=0.1, max_len=128, max_tokens=8000, batch_size=128, lr=7e-4,
                      warmup=200, weight_decay=0.01, label_smoothing=0.1, train_steps=2000,
                      eval_every=200, n_eval_bleu=500, average_last=5, patience=4, n_role_sentences=200,
                      seed=0, n_bleu=1000, n_beam=1000, n_analysis=1000, n_relevance=200, n_minilm=1000,
                      data_fraction=1.0),
    },
    # chapter "The circle task": one attention layer run recursively (Dong et al. 2021, Fig. 3).
    # Training: the book's recipe (AdamW, warm-up + cosine, clipping); the paper's recipe is shown once.
    "circle": {
        "quick": dict(n_points=1000, widths=(32, 128), n_heads=2, steps=1000, lr=5e-3, batch=128,
                      n_seeds=6, rollout=300, paper_recipe_epochs=70),
        "paper": dict(n_points=1000, widths=(32, 128), n_heads=2, steps=3000, lr=3e-3, batch=128,
                      n_seeds=16, rollout=300, paper_recipe_epochs=70),
    },
    # chapter "Path effectiveness": accuracy of sampled paths of each length (Dong et al. 2021, Fig. 4);
    # probe_train: training sequences the probe refitted to each path length is fitted on; training_seeds:
    # the seeds whose models judge the statements over training seeds (the first is the chapter's model).
    "path_effectiveness": {
        "quick": dict(
            sort=dict(d_model=48, n_heads=2, depth=6, length=8, vocab=10, n_train=1000, n_eval=200,
                      steps=250),
            hull=dict(d_model=48, n_heads=3, depth=6, n_points=10, n_train=10000, n_eval=300,
                      steps=250),
            memorization=dict(d_model=64, n_heads=2, depth=6, n_sentences=200, max_len=24,
                              n_train=200, n_eval=200, steps=150),
            n_paths=(5, 20), repeats=5, lr=2e-3, batch=128, probe_train=1000,
            training_seeds=(0, 1, 2)),
        "paper": dict(
            sort=dict(d_model=48, n_heads=2, depth=6, length=8, vocab=10, n_train=1000, n_eval=200,
                      steps=1000),
            hull=dict(d_model=84, n_heads=3, depth=6, n_points=10, n_train=10000, n_eval=300,
                      steps=1000),
            memorization=dict(d_model=250, n_heads=2, depth=6, n_sentences=500, max_len=32,
                              n_train=500, n_eval=500, steps=1500),
            n_paths=(5, 20), repeats=5, lr=2e-3, batch=128, probe_train=5000,
            training_seeds=(0, 1, 2)),
    },
    # chapter "What came after": pure SANs under masks (n_nets nets x n_inputs inputs, float64), tokens on the
    # sphere (n_points tokens from sphere_seeds initial conditions, Euler steps of dt, one saved state every
    # `every` steps), shaped attention stacks
    # (shaped_batch inputs of shaped_tokens tokens at each width, shaped_draws weight draws), and the
    # sentences the skip share and the sink heads of MiniLM are measured on.
    "after": {
        "quick": dict(n_tokens=32, d_model=64, n_heads=4, depth=48, n_nets=3, n_inputs=4, window=2,
                      n_points=32, sphere_dim=2, betas=(1.0, 4.0, 9.0), sphere_steps=6000, dt=0.1, every=50,
                      sphere_seeds=8,
                      shaped_tokens=16, shaped_widths=(32, 128), shaped_depth=64, shaped_batch=4, shaped_draws=4,
                      n_sentences=32, max_length=64),
        "paper": dict(n_tokens=128, d_model=256, n_heads=8, depth=96, n_nets=5, n_inputs=8, window=4,
                      n_points=64, sphere_dim=2, betas=(1.0, 4.0, 9.0), sphere_steps=6000, dt=0.1, every=50,
                      sphere_seeds=8,
                      shaped_tokens=32, shaped_widths=(64, 512), shaped_depth=128, shaped_batch=8, shaped_draws=4,
                      n_sentences=128, max_length=128),
    },
    # chapter "Pruning heads" (Voita et al. 2019; Michel et al. 2019): hard-concrete gate samples;
    # MiniLM: held-out sentences for the embedding similarity, importance batches, heads pruned per step.
    # The gate sweeps that do not fit quick are precomputed by scripts/sweep_gates.py (data/pruning/).
    "pruning_heads": {
        "quick": dict(n_gate_samples=200_000, minilm_eval=48, minilm_max_len=24, minilm_batch=16,
                      minilm_batches=1, minilm_prune_step=6),
        "paper": dict(n_gate_samples=1_000_000, minilm_eval=245, minilm_max_len=64, minilm_batch=64,
                      minilm_batches=8, minilm_prune_step=2),
    },
}


def active_preset() -> str:
    """Name of the active preset (Intro, "Presets"): ``ATTNBOOK_PRESET`` or the CUDA-based default."""
    name = os.environ.get(ENV_VAR, "").strip()
    if not name:
        return "paper" if torch.cuda.is_available() else "quick"
    if name not in PRESET_NAMES:
        raise ValueError(
            f"{ENV_VAR}={name!r} is not a preset; expected one of {', '.join(PRESET_NAMES)}"
        )
    return name


def preset(experiment: str, name: str | None = None) -> Mapping[str, Any]:
    """Sizes of ``experiment`` at the active preset (or at ``name``), as a read-only mapping.

    The mapping also holds ``preset``, the name of the preset it came from, so a chapter can print it.

    >>> preset("pure_attention", "quick")["depth"]
    24
    """
    if experiment not in TABLE:
        raise ValueError(
            f"unknown experiment {experiment!r}; expected one of {', '.join(sorted(TABLE))}"
        )
    chosen = active_preset() if name is None else name
    if chosen not in PRESET_NAMES:
        raise ValueError(f"unknown preset {chosen!r}; expected one of {', '.join(PRESET_NAMES)}")
    return MappingProxyType({**TABLE[experiment][chosen], "preset": chosen})


def seed_everything(seed: int) -> torch.Generator:
    """Seed Python, NumPy and PyTorch (CPU and CUDA); return a ``torch.Generator`` seeded the same.

    Every chapter calls this (through :func:`setup`) before it draws any random number.
    """
    if not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    return torch.Generator().manual_seed(seed)


def device() -> torch.device:
    """The device experiments run on: CUDA when available, else the CPU; ``cuda`` under
    ``ATTNBOOK_VIRTUAL_CUDA=1`` (:mod:`attnbook.core.virtual_cuda`, the CPU test of device-correct code)."""
    from attnbook.core import virtual_cuda

    if virtual_cuda.enabled():
        return virtual_cuda.enable_globally()
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def device_name(dev: torch.device | str) -> str:
    """What a run's record says it ran on: the GPU's name, ``"virtual CUDA on the CPU"``
    (:mod:`attnbook.core.virtual_cuda`), or ``"cpu"``."""
    dev = torch.device(dev)
    if dev.type != "cuda":
        return dev.type
    return torch.cuda.get_device_name(dev) if torch.cuda.is_available() else "virtual CUDA on the CPU"


def cpu_threads(wanted: int, environ: Optional[Mapping[str, str]] = None) -> int:
    """The CPU threads a chapter should use: ``wanted``, or fewer when ``OMP_NUM_THREADS`` asks for fewer (issue:
    chapters 10 and 11 asked torch for two threads even when ``make test`` runs two chapters side by side with
    one thread each; on two cores the four threads then waited on each other, and a 50-second chapter took up
    to 700 seconds)."""
    if not isinstance(wanted, int) or wanted < 1:
        raise ValueError(f"wanted must be a positive int, got {wanted!r}")
    value = (os.environ if environ is None else environ).get("OMP_NUM_THREADS", "").strip()
    if not value:
        return wanted
    try:
        limit = int(value)
    except ValueError:
        raise ValueError(f"OMP_NUM_THREADS={value!r} is not a number of threads") from None
    return max(1, min(wanted, limit))


def setup(seed: int = 0) -> torch.device:
    """Start a chapter: seed everything, apply the book's figure style, print the preset and device.

    Returns the device the chapter should use.
    """
    from attnbook.core import plotting  # local import: plotting pulls in matplotlib

    seed_everything(seed)
    plotting.use_style()
    dev = device()
    virtual = (" (virtual CUDA: the CPU applying CUDA's device rules)"
               if dev.type == "cuda" and not torch.cuda.is_available() else "")
    print(f"attnbook: preset={active_preset()} device={dev.type} seed={seed}{virtual}")
    return dev
