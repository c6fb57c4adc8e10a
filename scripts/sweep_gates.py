"""Run a named pruning recipe of chapter "Pruning heads" (:mod:`attnbook.core.runs`) and write its result.

    python scripts/sweep_gates.py minilm_gates               # gates on all-MiniLM-L6-v2, a sweep of lambda
    python scripts/sweep_gates.py encoder_gates_converged    # converged translation model: encoder heads
    python scripts/sweep_gates.py all_kinds_gates_converged  # converged translation model: all 96 heads
    python scripts/sweep_gates.py michel_converged           # Michel et al.'s importance pruning, its arms
    python scripts/sweep_gates.py michel_fine_tuned_converged   # Michel's masks with the gates' fine-tuning
    python scripts/sweep_gates.py scratch_converged          # the pruned shapes trained from scratch

Every setting is in the recipe; the file written (under ``src/attnbook/data/``, or ``--out``) records the
recipe's name and settings, the command, torch, machine and threads. The gate sweeps are resumable: rerun
the same command and the runs already in the file are kept. ``--smoke`` runs a few steps of a recipe into
``--out`` to test the script. ``--device cuda`` runs it on a GPU.
"""

from __future__ import annotations

import argparse
import json
import platform
import shlex
import sys
import time
from pathlib import Path
from typing import Optional

import torch
from scipy.stats import spearmanr

import attnbook
from attnbook.heads import gate_training as GT
from attnbook.heads import gates as G
from attnbook.heads import masks as head_masks
from attnbook.heads import sweeps
from attnbook import hf
from attnbook.core import runs as run_table
from attnbook.core import text
from attnbook.core.presets import device_name
from attnbook.heads import importance as P
from attnbook.heads.masks import ATTENTION_KINDS
from attnbook import stats  # noqa: E402
from attnbook.heads import translation as tr

ROOT = Path(__file__).resolve().parents[1]

#: where the translation recipes run (``--device``; MiniLM always runs on the CPU)
DEVICE = torch.device("cpu")


def _converged(checkpoint: str):
    """The shipped translation model a pruning recipe names (``converged_<preset>``), on :data:`DEVICE`."""
    if not checkpoint.startswith("converged_"):
        raise ValueError(f"expected a checkpoint named converged_<preset>, got {checkpoint!r}")
    return tr.load_translation_model(preset=checkpoint.removeprefix("converged_"), device=DEVICE)


def _output(name: str, out_dir: Optional[Path]) -> Path:
    path = run_table.output_path(name, "quick")
    return path if out_dir is None else Path(out_dir) / path.name


def _recipe(name: str) -> dict:
    """A pruning run of the run table as this script reads it: its settings (at quick, the only preset the pruning
    runs are defined at, since they prune the converged model of that preset), what it is, its part."""
    r = run_table.run(name)
    return {"settings": run_table.settings(name, "quick"), "what": r.what, "part": r.part}


def _tolist(d: dict) -> dict:
    return {k: [[round(float(x), 4) for x in row] for row in v.tolist()] for k, v in d.items()}


def run_minilm_gates(name: str, out_dir: Optional[Path] = None, smoke: bool = False) -> None:
    """Hard-concrete gates on all-MiniLM-L6-v2 (model frozen, only the 72 gates trained to keep the
    mean-pooled sentence embeddings close to the unpruned model's), one run per lambda."""
    rec = _recipe(name)
    s = rec["settings"]
    if smoke:
        s = {**s, "lambdas": s["lambdas"][-1:], "steps": 3, "record_every": 2, "n_eval": 4, "batch": 4}
    attnbook.seed_everything(s["seed"])
    model, tok = hf.load_pretrained(hf.minilm_source())
    model.requires_grad_(False)
    sents = text.english_sentences()
    eval_sents = sents[::10][: s["n_eval"]]
    train_sents = [x for i, x in enumerate(sents) if i % 10]
    hooks = hf.attach_head_gates(model)
    with torch.no_grad():
        ref_eval = hf.mean_pooled(model, tok, eval_sents, max_length=s["max_length"])

    def batch_fn(step: int) -> list[str]:
        g = torch.Generator().manual_seed(10_000 + step)
        idx = torch.randperm(len(train_sents), generator=g)[: s["batch"]].tolist()
        return [train_sents[i] for i in idx]

    def task_loss(m, batch, head_gates):
        with torch.no_grad():
            ref = hf.mean_pooled(m, tok, batch, max_length=s["max_length"])
        with hooks.gating(head_gates[""]):
            emb = hf.mean_pooled(m, tok, batch, max_length=s["max_length"])
        return (1 - torch.nn.functional.cosine_similarity(emb, ref, dim=-1)).mean()

    runs = []
    for lam in s["lambdas"]:
        t0 = time.time()
        gates = G.HeadGates((6, 12))
        hist = GT.train_gates(model, gates, task_loss, batch_fn, lam=lam, steps=s["steps"], gate_lr=s["gate_lr"],
                              record_every=s["record_every"], schedule="constant", warmup=0, seed=s["seed"],
                              progress=True, device="cpu", desc=f"lambda={lam}")
        g = gates()[""]
        with torch.no_grad(), hooks.gating(g):
            sim = hf.embedding_similarity(hf.mean_pooled(model, tok, eval_sents, max_length=s["max_length"]), ref_eval)
        runs.append({
            "lam": lam, "n_kept": gates.n_open(), "similarity": round(sim, 5),
            "gates": _tolist({"": g})[""],
            "snapshots": [{"step": q["step"], "p_open": _tolist(q["p_open"])[""]} for q in hist["snapshots"]],
            "seconds": round(time.time() - t0, 1),
        })
        print(f"lambda={lam}: kept {gates.n_open()} heads, similarity {sim:.4f} ({time.time() - t0:.0f} s)", flush=True)
    hooks.remove()
    _write_recipe(_output(name, out_dir), name, rec, {"runs": runs})


def _spec_key(spec: dict) -> str:
    return json.dumps(spec, sort_keys=True)


def _gate_stream(base, s: dict) -> tr.BatchStream:
    """The training batches of a gate recipe (settings ``s``)."""
    return tr.BatchStream(tr.load_pairs("train"), max_len=base.cfg.max_len, seed=s["seed"] + 1,
                          max_tokens=s["max_tokens"])


def _gate_spec(s: dict, lam) -> dict:
    """The spec of a gate recipe's run at ``lam`` with the recipe's default settings."""
    return {**{k: s[k] for k in ("lr", "gate_lr", "init_log_alpha", "steps")}, "lam": lam}


def _pruned_run(sweep: dict, gate_settings: dict, lam, gate_seed=None) -> dict:
    """The gate sweep's run at ``lam`` with gate seed ``gate_seed`` (None or the sweep's seed: its main run;
    another: the variant that changes only the gate seed), the run a pruned model is rebuilt from (chapter
    "Pruning heads": seed s of the trained-on arm is gate seed s). Raises if the sweep has no such run."""
    spec = _gate_spec(gate_settings, lam)
    if gate_seed is not None and gate_seed != gate_settings["seed"]:
        spec = {**spec, "seed": gate_seed}
    found = next((r for r in sweep["runs"] if r["spec"] == spec), None)
    if found is None:
        raise ValueError(f"the gate sweep has no run {spec}: a pruned model of gate seed {gate_seed} at lambda "
                         f"{lam} needs that run in the sweep first")
    return found


def _train_gates(base, stream, s: dict, spec: dict):
    """One run of a gate recipe (settings ``s``, run ``spec``): Voita et al.'s gate fine-tuning. A spec's
    ``seed`` (a variant's gate seed: the gates' initial log alpha and their noise) replaces the recipe's."""
    return GT.gate_translation_model(
        base, stream, kinds=s["kinds"], lam=spec["lam"], steps=spec["steps"], lr=spec["lr"],
        gate_lr=spec["gate_lr"], init_log_alpha=spec["init_log_alpha"], label_smoothing=s["label_smoothing"],
        record_every=s["record_every"], clip=s["clip"], seed=spec.get("seed", s["seed"]), device=DEVICE,
        progress=True, desc=f"lambda={spec['lam']}")


def run_gate_sweep(name: str, out_dir: Optional[Path] = None, smoke: bool = False) -> None:
    """Voita et al.'s gate fine-tuning of the converged translation model for every lambda of recipe
    ``name`` (and its variants), resumable: runs already in the output file are kept (chapter 11)."""
    rec = _recipe(name)
    s = rec["settings"]
    out = _output(name, out_dir)
    attnbook.seed_everything(s["seed"])
    base, meta = _converged(s['checkpoint'])
    pairs = tr.load_pairs(s["eval_split"])[: s["n_eval"]]
    if smoke:
        pairs, s = pairs[:8], {**s, "steps": 3, "record_every": 2, "lambdas": s["lambdas"][-1:], "variants": []}
    srcs, refs = [e for e, _ in pairs], [r for _, r in pairs]
    stream = _gate_stream(base, s)

    def evaluate(model, gates=None) -> dict:
        binary = None if gates is None else head_masks.binary(gates)
        res = {"bleu_greedy": round(stats.bleu(tr.translate(model, srcs, head_gates=binary), refs), 3),
               "bleu_beam": round(stats.bleu(tr.translate(model, srcs, head_gates=binary, beam=s["beam"],
                                                        length_penalty=s["length_penalty"]), refs), 3)}
        if gates is not None:
            res["bleu_greedy_soft_gates"] = round(stats.bleu(tr.translate(model, srcs, head_gates=gates), refs), 3)
        return res

    previous = json.loads(out.read_text()) if out.exists() and not smoke else {}
    # each run records the threads it ran on (a file written before runs did records one for all of them)
    done = {_spec_key(r["spec"]): {**r, "threads": r.get("threads", previous["meta"]["threads"])}
            for r in previous.get("runs", [])}
    t0 = time.time()
    unpruned = previous.get("unpruned") or evaluate(base)
    print(f"unpruned {unpruned} ({time.time() - t0:.0f} s)", flush=True)
    specs = [_gate_spec(s, lam) for lam in s["lambdas"]] + [{**_gate_spec(s, None), **v} for v in s["variants"]]
    shapes = {k: (base.cfg.layers(k), base.cfg.n_heads) for k in s["kinds"]}
    runs = []

    def write(complete: bool) -> None:
        kept_earlier = [] if complete else [r for r in done.values() if r not in runs]
        payload = {"unpruned": unpruned, "kinds": s["kinds"], "shapes": {k: list(v) for k, v in shapes.items()},
                   "n_eval": len(pairs), "complete": complete, "runs": runs + kept_earlier}
        _write_recipe(out, name, rec, payload)

    for spec in specs:
        if _spec_key(spec) in done:
            runs.append(done[_spec_key(spec)])
            continue
        t0 = time.time()
        model, gates, hist = _train_gates(base, stream, s, spec)
        train_seconds = time.time() - t0
        g = gates()
        kept = {k: int(m.sum()) for k, m in head_masks.binary(g).items()}
        res = evaluate(model, g)
        losses = hist["task_loss"]
        snapshots = [{"step": q["step"], "p_open": _tolist(q["p_open"])} for q in hist["snapshots"]]
        runs.append({
            "spec": spec, "kept": kept, "n_kept": sum(kept.values()), **res,
            "gates": _tolist(g), "p_open_init": snapshots[0]["p_open"], "snapshots": snapshots,
            "task_loss_first_last": [round(sum(losses[:20]) / 20, 4), round(sum(losses[-20:]) / 20, 4)],
            "train_seconds": round(train_seconds, 1), "seconds": round(time.time() - t0, 1),
            "threads": torch.get_num_threads(),
        })
        print(f"{spec}: kept {kept}, {res} ({time.time() - t0:.0f} s)", flush=True)
        write(complete=False)
    write(complete=True)


def run_scratch(name: str, out_dir: Optional[Path] = None, smoke: bool = False,
                time_limit: Optional[float] = None) -> None:
    """Voita et al.'s Table 2 on the encoder (chapter "Pruning heads"): every pruned shape of the gate recipe
    trained from scratch with the converged model's recipe (:func:`attnbook.heads.translation.train_to_convergence`,
    the binary mask fixed throughout), seed by seed, and the pruned models rebuilt with the gate recipe's
    settings (their masks checked against the shipped sweep); a recipe's ``arms`` may instead name
    ``"pruned_trained"``: the rebuilt pruned model trained on with ``continue_training``'s overrides
    (recipe ``pruned_converged``), or ``"unpruned_trained"``: its control, the converged model with every head
    kept, evaluated and then trained on the same way (recipe ``unpruned_converged``; one run per seed, no
    lambda). Resumable: finished runs stay in the file and an unfinished training
    continues from its state file (a resumed pruned model is rebuilt first, then its state loaded);
    ``time_limit`` (minutes) stops one cleanly."""
    rec = _recipe(name)
    s = rec["settings"]
    out = _output(name, out_dir)
    sweep = sweeps.load(s["gate_recipe"])
    gate_settings = _recipe(s["gate_recipe"])["settings"]  # the sweep's, to look its runs up
    gs = gate_settings  # the settings the pruned models are rebuilt with (shortened by --smoke)
    # the model's own training settings a continuation keeps (a data-axis model trains on its own verses)
    p = {**attnbook.preset("translation", s["preset"]), **s.get("recipe", {})}
    pairs = tr.load_pairs(s["eval_split"])
    lambdas, seeds = s["lambdas"], s["seeds"]
    if smoke:
        pairs, lambdas, seeds = pairs[:8], lambdas[:1], seeds[:1]
        p.update(train_steps=4, eval_every=2, n_eval_bleu=4, average_last=2)
        gs = {**gs, "steps": 3, "record_every": 2}
    srcs, refs = [e for e, _ in pairs], [r for _, r in pairs]
    state_dir = (ROOT / "runs" / name) if out_dir is None else Path(out_dir) / "runs"

    def evaluate(model, masks) -> dict:
        greedy = tr.translate(model, srcs, head_gates=masks)
        beam = tr.translate(model, srcs, head_gates=masks, beam=s["beam"], length_penalty=s["length_penalty"])
        return {"bleu_greedy": round(stats.bleu(greedy, refs), 3),
                "bleu_beam": _bleu_interval(beam, refs),
                "hypotheses_beam": beam}

    def pruned_run(lam, gate_seed=None) -> dict:
        return _pruned_run(sweep, gate_settings, lam, gate_seed)

    previous = json.loads(out.read_text()) if out.exists() and not smoke else {}
    # each run records the threads it ran on (a file written before runs did records one for all of them)
    runs = [{**r, "threads": r.get("threads", previous["meta"]["threads"])} for r in previous.get("runs", [])]
    done = {(r["arm"], r["lam"], r["seed"]) for r in runs}
    arms = sweeps.recipe_arms(s)  # "pruned" is one run per shape, with the first seed
    jobs = [(arm, lam, None if arm == "pruned" else seed) for i, seed in enumerate(seeds)
            for lam in ([None] if arms == ["unpruned_trained"] else lambdas)
            for arm in arms if arm != "pruned" or i == 0]
    base = None

    def converged_model():
        """The converged model of the gate recipe, as shipped (a fresh copy on every call)."""
        return _converged(gs['checkpoint'])[0]

    def control_model():
        """The model the ``unpruned_trained`` control trains on: the recipe's ``model`` (a translation model run,
        for a variant's convergence gate) or the gate recipe's converged model."""
        if "model" not in s:
            return converged_model()
        return tr.load_translation_model(s["model"], preset=s["preset"], device=DEVICE)[0]

    def converge(model, q: dict, masks, state_name: str, entry: dict) -> bool:
        """Train ``model`` with :func:`tr.train_to_convergence` (settings ``q``, ``masks`` fixed) into
        ``entry``; false when the time limit stopped it (its state is kept to continue)."""
        state = state_dir / state_name / "state.pt"
        state.parent.mkdir(parents=True, exist_ok=True)
        tag = f"[{entry['arm']} {entry['lam']}, seed {entry['seed']}]"
        res = tr.train_to_convergence(model, q, head_gates=masks, state_path=state, resume=True,
                                      time_limit=None if time_limit is None else 60 * time_limit,
                                      log=lambda line: print(f"{tag} {line}", flush=True))
        if not res["finished"]:
            return False
        hist, stream = res["hist"], res["stream"]
        entry.update(train_steps=hist["steps_done"], epochs=round(stream.epochs(hist["steps_done"]), 3),
                     stopped=hist["stopped"], train_wall_seconds=round(res["extra"]["wall"], 1),
                     averaged=res["averaged"], dev_bleu_averaged=res["avg_eval"]["dev_bleu"],
                     dev_bleu_last=res["last_eval"]["dev_bleu"], evals=hist["evals"])
        return True

    def train_on(model, masks, state_name: str, entry: dict) -> bool:
        """Train a converged (or pruned converged) ``model`` on with ``continue_training``'s overrides."""
        model.requires_grad_(True)
        q = {**p, **s["continue_training"], "seed": entry["seed"]}
        attnbook.seed_everything(entry["seed"])
        return converge(model, q, masks, state_name, entry)

    def write(complete: bool) -> None:
        shipped = {} if "model" in s else {"unpruned": sweep["unpruned"]}  # the gate recipe's model, evaluated
        _write_recipe(out, name, rec, {"n_eval": len(pairs), "complete": complete, "runs": runs, **shipped})

    for arm, lam, seed in jobs:
        if (arm, lam, seed) in done:
            continue
        t0 = time.time()
        entry = {"arm": arm, "lam": lam, "seed": seed, "threads": torch.get_num_threads()}
        if arm == "unpruned_trained":  # the control: the converged model itself, every head kept
            model = control_model()
            kinds = sweeps.kept_masks(sweep["runs"][0])  # the kinds the gate recipe prunes, every head kept
            masks = head_masks.full_masks({k: (model.cfg.layers(k), model.cfg.n_heads) for k in kinds})
            entry["before"] = evaluate(model, masks)
            finished = train_on(model, masks, f"unpruned_trained_seed{seed}", entry)
        elif arm == "scratch":
            masks = sweeps.kept_masks(pruned_run(lam))
            q = {**p, "seed": seed}
            attnbook.seed_everything(seed)
            model = tr.model_from_preset(q).to(DEVICE)
            finished = converge(model, q, masks, f"lam{lam}_seed{seed}", entry)
        else:  # the pruned model, rebuilt with the gate recipe's settings
            # a trained-on seed is also its gate seed (the gates' initial log alpha and noise) under the recipe's
            # rule (sweeps.trained_on_gate_seed): seed 0 the sweep's main run, seed s its variant with gate seed s
            # (or the main run where that variant keeps other heads); the 300-step pruned arm is the main run's
            gate_seed = (sweeps.trained_on_gate_seed(sweep, lam, seed, s.get("gate_seeds", "seed"))
                         if arm == "pruned_trained" else None)
            sweep_run = pruned_run(lam, gate_seed)
            masks = sweeps.kept_masks(sweep_run)
            if base is None:
                base = converged_model()
            spec = sweep_run["spec"]
            if smoke:
                spec = {**spec, "steps": gs["steps"]}
            entry["gate_seed"] = spec.get("seed", gate_settings["seed"])
            model, gates, _ = _train_gates(base, _gate_stream(base, gs), gs, spec)
            rebuilt = head_masks.binary(gates())
            entry["matches_sweep"] = all(bool(torch.equal(rebuilt[k], masks[k])) for k in masks)
            masks = rebuilt
            finished = True
            if arm == "pruned_trained":  # then trained on to convergence, the whole model, its mask fixed
                finished = train_on(model, masks, f"lam{lam}_pruned_trained_seed{seed}", entry)
        if not finished:
            print(f"time limit reached in {arm} lambda={lam} seed={seed}: rerun to continue", flush=True)
            write(complete=False)
            return
        entry.update(kept=head_masks.count_kept(masks), masks=_tolist(masks), **evaluate(model, masks),
                     seconds=round(time.time() - t0, 1))
        print(f"{arm} lambda={lam} seed={seed}: kept {entry['kept']}, greedy {entry['bleu_greedy']}, "
              f"beam {entry['bleu_beam']['bleu']} ({entry['seconds']:.0f} s)", flush=True)
        runs.append(entry)
        write(complete=False)
    write(complete=True)


def _spearman(a: torch.Tensor, b: torch.Tensor) -> float:
    return round(float(spearmanr(a.flatten().numpy(), b.flatten().numpy())[0]), 4)


def run_michel(name: str, out_dir: Optional[Path] = None, smoke: bool = False) -> None:
    """Michel et al.'s importance pruning of the converged model, without fine-tuning, with the authors'
    estimator and the variants of recipe ``name`` (chapter 11, "Importance pruning")."""
    rec = _recipe(name)
    s = rec["settings"]
    out = _output(name, out_dir)
    attnbook.seed_everything(s["seed"])
    model, _ = _converged(s['checkpoint'])
    model.eval()
    test = tr.load_pairs(s["eval_split"])[: s["n_eval"]]
    dev = tr.load_pairs(s["ablation_split"])[: s["n_ablation"]]
    if smoke:
        test, dev, s = test[:6], dev[:4], {**s, "n_batches": 2, "prune_fractions": [0.0, 0.5]}
    stream = tr.BatchStream(tr.load_pairs("train"), max_len=model.cfg.max_len, seed=s["seed"] + 2,
                            max_tokens=s["max_tokens"])
    batches = [stream(i) for i in range(s["n_batches"])]
    shapes = {k: (model.cfg.layers(k), model.cfg.n_heads) for k in ATTENTION_KINDS}
    t_start = time.time()

    def loss_fn(batch, masks):
        src, tgt = batch
        return model.loss(src.to(DEVICE), tgt.to(DEVICE), head_gates=masks, label_smoothing=s["label_smoothing"])

    def queries(batch):
        src, tgt = batch
        n = {"enc_self": src.shape[1], "dec_self": tgt.shape[1] - 1, "dec_cross": tgt.shape[1] - 1}
        return {k: (src.shape[0], n[k]) for k in ATTENTION_KINDS}

    def bleu_on(pairs, masks) -> float:
        return round(stats.bleu(tr.translate(model, [e for e, _ in pairs], head_gates=masks), [r for _, r in pairs]), 3)

    full = P.full_masks(shapes)
    per_token = [P.head_importance(loss_fn, full, [b], normalize=False, queries=queries) for b in batches]
    whole = [P.head_importance(loss_fn, full, [b], normalize=False) for b in batches]

    def mean(parts):
        return {k: sum(p[k] for p in parts) / len(parts) for k in ATTENTION_KINDS}

    importance = {"per_token": P.layer_normalise(mean(per_token)), "whole_batch": P.layer_normalise(mean(whole)),
                  "per_token_unnormalised": mean(per_token)}
    halves = [P.layer_normalise(mean(per_token[i::2])) for i in (0, 1)]
    split_half = {k: _spearman(halves[0][k], halves[1][k]) for k in ATTENTION_KINDS}
    split_half["all"] = _spearman(torch.cat([halves[0][k].flatten() for k in ATTENTION_KINDS]),
                                  torch.cat([halves[1][k].flatten() for k in ATTENTION_KINDS]))
    estimators_agree = _spearman(torch.cat([importance["per_token"][k].flatten() for k in ATTENTION_KINDS]),
                                 torch.cat([importance["whole_batch"][k].flatten() for k in ATTENTION_KINDS]))
    print(f"importance {time.time() - t_start:.0f} s; split-half {split_half}", flush=True)
    full_bleu = bleu_on(test, full)

    def one_shot(imp, kinds) -> list[dict]:
        n_total = sum(shapes[k][0] * shapes[k][1] for k in kinds)
        scoped = {k: imp[k] for k in kinds}
        rows = []
        for frac in s["prune_fractions"]:
            masks = P.prune_least_important(scoped, P.full_masks({k: shapes[k] for k in kinds}), round(frac * n_total))
            rows.append({"fraction": frac, "n_kept": P.count_kept(masks), "bleu": bleu_on(test, masks),
                         "kept": {k: int(v.sum()) for k, v in masks.items()}, "masks": _tolist(masks)})
        print(kinds, [(r["n_kept"], r["bleu"]) for r in rows], flush=True)
        return rows

    arms = {
        "encoder_per_token": one_shot(importance["per_token"], ["enc_self"]),
        "all_per_token": one_shot(importance["per_token"], list(ATTENTION_KINDS)),
        "encoder_whole_batch": one_shot(importance["whole_batch"], ["enc_self"]),
        "all_whole_batch": one_shot(importance["whole_batch"], list(ATTENTION_KINDS)),
        "all_per_token_unnormalised": one_shot(importance["per_token_unnormalised"], list(ATTENTION_KINDS)),
    }
    n_enc = shapes["enc_self"][0] * shapes["enc_self"][1]
    step = max(1, round(0.1 * n_enc))
    recs = P.prune_step_by_step(lambda b, m: loss_fn(b, m), lambda m: bleu_on(test, m),
                                P.full_masks({"enc_self": shapes["enc_self"]}), batches[: max(1, len(batches) // 2)],
                                n_per_step=step, min_heads=n_enc - step * (len(s["prune_fractions"]) - 1),
                                recompute=True, queries=lambda b: {"enc_self": queries(b)["enc_self"]})
    arms["encoder_per_token_recomputed"] = [{"n_kept": r["n_kept"], "bleu": r["score"], "masks": _tolist(r["masks"])}
                                            for r in recs]
    print("recomputed", [(r["n_kept"], r["bleu"]) for r in arms["encoder_per_token_recomputed"]], flush=True)

    dev_full = bleu_on(dev, full)
    single, best_head = {}, {}
    for k in ATTENTION_KINDS:
        L, H = shapes[k]
        single[k] = [[0.0] * H for _ in range(L)]
        best_head[k] = []
        for layer in range(L):
            only = []
            for h in range(H):
                masks = P.full_masks(shapes)
                masks[k][layer, h] = 0.0
                single[k][layer][h] = bleu_on(dev, masks)
                masks = P.full_masks(shapes)
                masks[k][layer] = 0.0
                masks[k][layer, h] = 1.0
                only.append(bleu_on(dev, masks))
            best_head[k].append({"bleus": only, "best": int(max(range(H), key=lambda h: only[h])),
                                 "best_bleu": max(only)})
        print("ablation", k, f"{time.time() - t_start:.0f} s", flush=True)

    gate_masks = []
    for gname in s["gate_recipes"]:
        path = out.parent / run_table.output_path(gname, "quick").name
        if not path.exists():
            continue
        sweep = json.loads(path.read_text())
        for run in sweep["runs"]:
            masks = head_masks.binary({k: torch.tensor(v) for k, v in run["gates"].items()})
            gate_masks.append({"recipe": gname, "spec": run["spec"], "n_kept": run["n_kept"],
                               "bleu_fine_tuned": run["bleu_greedy"], "bleu_not_fine_tuned": bleu_on(test, masks)})
    payload = {
        "shapes": {k: list(v) for k, v in shapes.items()}, "n_eval": len(test), "n_ablation": len(dev),
        "full_bleu": full_bleu, "dev_full_bleu": dev_full,
        "importance": {name_: _tolist(v) for name_, v in importance.items()},
        "split_half": split_half, "estimators_rank_correlation": estimators_agree,
        "arms": arms, "single_head_ablation": single, "best_head_per_layer": best_head,
        "gate_masks_without_fine_tuning": gate_masks, "seconds": round(time.time() - t_start, 1),
    }
    _write_recipe(out, name, rec, payload)


def run_michel_fine_tuned(name: str, out_dir: Optional[Path] = None, smoke: bool = False) -> None:
    """Michel et al.'s importance masks at the gates' numbers of encoder heads, fine-tuned as the gates were
    (:func:`attnbook.heads.gate_training.fine_tune_with_masks`, the gate recipe's settings), so that the
    selection of heads is compared with the gates' at the same fine-tuning (chapter "Pruning heads")."""
    rec = _recipe(name)
    s = rec["settings"]
    out = _output(name, out_dir)
    michel, sweep = sweeps.load(s["michel_recipe"]), sweeps.load(s["gate_recipe"])
    gs = _recipe(s["gate_recipe"])["settings"]
    base, _ = _converged(gs['checkpoint'])
    pairs, lambdas, steps = tr.load_pairs(gs["eval_split"]), s["lambdas"], gs["steps"]
    if smoke:
        pairs, lambdas, steps = pairs[:8], lambdas[:1], 3
    srcs, refs = [e for e, _ in pairs], [r for _, r in pairs]
    importance = {"enc_self": torch.tensor(michel["importance"]["per_token"]["enc_self"])}
    shape = {"enc_self": tuple(michel["shapes"]["enc_self"])}
    n_heads = shape["enc_self"][0] * shape["enc_self"][1]

    def greedy_bleu(model, masks) -> dict:
        hyps = tr.translate(model, srcs, head_gates=masks)
        return _bleu_interval(hyps, refs)

    rows = []
    for lam in lambdas:
        t0 = time.time()
        gate_run = _pruned_run(sweep, gs, lam)
        masks = P.prune_least_important(importance, P.full_masks(shape), n_heads - gate_run["n_kept"])
        before = greedy_bleu(base, masks)
        model, hist = GT.fine_tune_with_masks(
            base, _gate_stream(base, gs), masks, kinds=["enc_self"], steps=steps, lr=gs["lr"],
            label_smoothing=gs["label_smoothing"], clip=gs["clip"], seed=gs["seed"], device=DEVICE,
            progress=True, desc=f"Michel masks, {gate_run['n_kept']} heads")
        beam = tr.translate(model, srcs, head_gates=masks, beam=s["beam"], length_penalty=s["length_penalty"])
        rows.append({"lam": lam, "n_kept": P.count_kept(masks), "masks": _tolist(masks),
                     "bleu_not_fine_tuned": before, "bleu_fine_tuned": greedy_bleu(model, masks),
                     "bleu_beam_fine_tuned": _bleu_interval(beam, refs),
                     "hypotheses_beam_fine_tuned": beam,
                     "gate_bleu_greedy": gate_run["bleu_greedy"], "steps": hist["steps_done"],
                     "seconds": round(time.time() - t0, 1)})
        print({k: v for k, v in rows[-1].items() if k not in ("masks", "hypotheses_beam_fine_tuned")},
              flush=True)
        _write_recipe(out, name, rec, {"n_eval": len(pairs), "complete": False, "rows": rows})
    _write_recipe(out, name, rec, {"n_eval": len(pairs), "complete": True, "rows": rows})


def _bleu_interval(hyps: list, refs: list) -> dict:
    """sacreBLEU's corpus BLEU with its bootstrap interval, rounded as the shipped files record it."""
    return {k: round(v, 3) for k, v in stats.bleu_interval(hyps, refs).items()}


def _write_recipe(path: Path, name: str, rec: dict, payload: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    payload["meta"] = {
        **run_table.record(name, "quick"),
        "command": "python scripts/sweep_gates.py " + shlex.join(sys.argv[1:]),
        "torch": torch.__version__, "machine": platform.machine(), "processor": platform.processor(),
        "threads": torch.get_num_threads(),
        "device": device_name(DEVICE),
    }
    path.write_text(json.dumps(payload, indent=1) + "\n")
    print("wrote", path, flush=True)


PARTS = {"minilm_gates": run_minilm_gates, "gate_sweep": run_gate_sweep, "michel": run_michel,
         "michel_fine_tuned": run_michel_fine_tuned, "scratch": run_scratch}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("recipe", choices=sorted(n for n, r in run_table.RUNS.items() if r.part))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu", help="device of the translation recipes (cpu or cuda)")
    parser.add_argument("--out", default=None, help="output folder (default: where the recipe's file is shipped)")
    parser.add_argument("--smoke", action="store_true", help="a few steps, to test the script (needs --out)")
    parser.add_argument("--time-limit", type=float, default=None,
                        help="minutes of training before a from-scratch run stops (rerun to continue)")
    args = parser.parse_args()
    if args.smoke and not args.out:
        parser.error("--smoke writes a test result: give --out so that it does not replace the shipped file")
    global DEVICE
    DEVICE = torch.device(args.device)
    torch.set_num_threads(args.threads)
    part = _recipe(args.recipe)["part"]
    extra = {"time_limit": args.time_limit} if part == "scratch" else {}
    if args.time_limit is not None and not extra:
        parser.error("--time-limit applies to the from-scratch recipes only")
    PARTS[part](args.recipe, Path(args.out) if args.out else None, smoke=args.smoke, **extra)


if __name__ == "__main__":
    main()
