"""Precompute the head-pruning sweeps of chapter 11 ("Pruning heads") that do not fit the quick budget.

One command per part (each writes one JSON file under src/attnbook/data/pruning/):

    python scripts/sweep_gates.py minilm         # gates on all-MiniLM-L6-v2 for a sweep of lambda
    python scripts/sweep_gates.py encoder        # translation model: encoder-only gates, sweep of lambda
    python scripts/sweep_gates.py all-types      # translation model: gates on all three attention types
    python scripts/sweep_gates.py michel         # translation model: Michel importance pruning, BLEU curve
    python scripts/sweep_gates.py from-scratch   # pruned shapes trained from scratch (long: GPU advised)

or ``python scripts/sweep_gates.py all`` for the first four. ``--device cuda`` runs the translation parts on a
GPU (the shipped ``*_gpu.json``, ``all_types_gates.json`` and ``from_scratch.json`` were made that way; see
``src/attnbook/data/pruning/README.md`` for each file's command). Everything is seeded; the numbers depend only
on the shipped checkpoint and data (and, in the last digits, on the device).
"""

from __future__ import annotations

import argparse
import json
import platform
import shlex
import sys
import time
from pathlib import Path

import torch

import attnbook
from attnbook import gates as G
from attnbook import pruning as P

DEFAULT_OUT = Path(attnbook.__file__).parent / "data" / "pruning"
OUT = DEFAULT_OUT
#: where the translation parts run (``--device``; the MiniLM part always runs on the CPU)
DEVICE = torch.device("cpu")


def _write(name: str, payload: dict, part: str) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    payload["meta"] = {
        **payload.get("meta", {}),
        "script": "scripts/sweep_gates.py",
        "command": "python scripts/sweep_gates.py " + shlex.join(sys.argv[1:]),
        "torch": torch.__version__,
        "machine": platform.machine(),
        "threads": torch.get_num_threads(),
        "device": torch.cuda.get_device_name(DEVICE) if DEVICE.type == "cuda" else "cpu",
    }
    path = OUT / f"{name}.json"
    path.write_text(json.dumps(payload, indent=1) + "\n")
    print("wrote", path)


def _tolist(d: dict) -> dict:
    return {k: [[round(float(x), 4) for x in row] for row in v.tolist()] for k, v in d.items()}


# ------------------------------------------------------------------------------------------------ MiniLM

MINILM = dict(lambdas=[0.05, 0.2, 0.8], steps=60, batch=8, gate_lr=0.2, max_length=24,
              n_eval=120, record_every=10, seed=0)


def minilm_setup(n_eval: int, max_length: int):
    from attnbook import pretrained, text

    model, tok = pretrained.load_pretrained(pretrained.minilm_source())
    model.requires_grad_(False)
    sents = text.english_sentences()
    eval_sents = sents[::10][:n_eval]
    train_sents = [s for i, s in enumerate(sents) if i % 10]
    return model, tok, train_sents, eval_sents


def run_minilm() -> None:
    cfg = MINILM
    attnbook.seed_everything(cfg["seed"])
    model, tok, train_sents, eval_sents = minilm_setup(cfg["n_eval"], cfg["max_length"])
    hooks = G.attach_head_gates(model)
    with torch.no_grad():
        ref_eval = P.mean_pooled(model, tok, eval_sents, max_length=cfg["max_length"])

    def batch_fn(step: int) -> list[str]:
        g = torch.Generator().manual_seed(10_000 + step)
        idx = torch.randperm(len(train_sents), generator=g)[: cfg["batch"]].tolist()
        return [train_sents[i] for i in idx]

    def task_loss(m, batch, head_gates):
        hooks.gates = None
        with torch.no_grad():
            ref = P.mean_pooled(m, tok, batch, max_length=cfg["max_length"])
        hooks.gates = head_gates[""]
        emb = P.mean_pooled(m, tok, batch, max_length=cfg["max_length"])
        hooks.gates = None
        return (1 - torch.nn.functional.cosine_similarity(emb, ref, dim=-1)).mean()

    runs = []
    for lam in cfg["lambdas"]:
        t0 = time.time()
        gates = G.HeadGates((6, 12))
        hist = G.train_gates(model, gates, task_loss, batch_fn, lam=lam, steps=cfg["steps"], gate_lr=cfg["gate_lr"],
                             record_every=cfg["record_every"], schedule="constant", warmup=0, seed=cfg["seed"],
                             progress=True, device="cpu", desc=f"lambda={lam}")
        g = gates()[""]
        hooks.gates = g
        with torch.no_grad():
            sim = P.embedding_similarity(P.mean_pooled(model, tok, eval_sents, max_length=cfg["max_length"]), ref_eval)
        hooks.gates = None
        runs.append({
            "lam": lam, "n_kept": gates.n_open(), "similarity": round(sim, 5),
            "gates": _tolist({"": g})[""],
            "snapshots": [{"step": s["step"], "p_open": _tolist(s["p_open"])[""]} for s in hist["snapshots"]],
            "seconds": round(time.time() - t0, 1),
        })
        print(f"lambda={lam}: kept {gates.n_open()} heads, similarity {sim:.4f} ({time.time() - t0:.0f} s)", flush=True)
    hooks.remove()
    _write("minilm_gates", {"config": cfg, "runs": runs,
                            "meta": {"what": "hard-concrete gates on all-MiniLM-L6-v2 (model frozen, gates trained to "
                                     "keep mean-pooled embeddings close to the unpruned model's), eval on every "
                                     "10th sentence of attnbook.text.english_sentences()"}}, "minilm")


# ------------------------------------------------------------------------------------------- translation

TRANSLATION = dict(
    encoder=dict(lambdas=[0.05, 0.1, 0.2, 0.4, 0.8], steps=300, batch=32, lr=1e-4, gate_lr=0.05, record_every=10),
    all_types=dict(lambdas=[0.1, 0.2, 0.4, 0.8], steps=300, batch=32, lr=1e-4, gate_lr=0.05, record_every=10),
    michel=dict(n_batches=8, batch=32),
    n_bleu=300, label_smoothing=0.1, seed=0,
    scratch_steps=None,  # from-scratch: None = the shipped model's steps + the gate fine-tuning steps
)
KINDS = ("enc_self", "dec_self", "dec_cross")


def translation_setup(checkpoint=None):
    from attnbook.tasks import translation as tr

    model, meta = tr.load_translation_model(checkpoint, device=DEVICE)
    dev = tr.load_pairs("dev")[: TRANSLATION["n_bleu"]]
    return tr, model, meta, dev


def bleu_of(tr, model, dev, head_gates=None) -> float:
    hyps = tr.translate(model, [e for e, _ in dev], head_gates=head_gates)
    return round(tr.bleu(hyps, [s for _, s in dev]), 3)


def gate_sweep(kinds, cfg, checkpoint=None, name="encoder") -> None:
    """Fine-tune the shipped model with gates on ``kinds`` for each lambda (chapter 11). With only the
    encoder gated, the decoder, the embeddings and the output layer are frozen (Voita et al.'s recipe)."""
    import copy

    attnbook.seed_everything(TRANSLATION["seed"])
    tr, base, meta, dev = translation_setup(checkpoint)
    shape = (base.cfg.enc_layers, base.cfg.n_heads)
    stream = tr.BatchStream(tr.load_pairs("train"), batch_size=cfg["batch"], max_len=base.cfg.max_len,
                            seed=TRANSLATION["seed"] + 1)
    ls = TRANSLATION["label_smoothing"]
    t0 = time.time()
    full_bleu = bleu_of(tr, base, dev)
    print(f"unpruned BLEU {full_bleu} ({time.time() - t0:.0f} s)", flush=True)

    def task_loss(m, batch, head_gates):
        src, tgt = batch
        return m.loss(src, tgt, head_gates=head_gates, label_smoothing=ls)

    runs = []
    for lam in cfg["lambdas"]:
        t0 = time.time()
        model = copy.deepcopy(base)
        if kinds == ("enc_self",):
            model.requires_grad_(False)
            model.encoder.requires_grad_(True)
            model.enc_norm.requires_grad_(True)
        gates = G.HeadGates({k: (base.cfg.layers(k), base.cfg.n_heads) for k in kinds})
        hist = G.train_gates(model, gates, task_loss, stream, lam=lam, steps=cfg["steps"], lr=cfg["lr"],
                             gate_lr=cfg["gate_lr"], record_every=cfg["record_every"], schedule="constant",
                             warmup=0, seed=TRANSLATION["seed"], progress=True, device=DEVICE,
                             desc=f"lambda={lam}")
        g = gates()
        kept = {k: int((v > 0).sum()) for k, v in g.items()}
        b = bleu_of(tr, model, dev, head_gates=g)
        runs.append({
            "lam": lam, "kept": kept, "n_kept": sum(kept.values()), "bleu": b,
            "gates": _tolist(g),
            "snapshots": [{"step": s["step"], "p_open": _tolist(s["p_open"])} for s in hist["snapshots"]],
            "task_loss_first_last": [round(sum(hist["task_loss"][:10]) / 10, 4), round(sum(hist["task_loss"][-10:]) / 10, 4)],
            "seconds": round(time.time() - t0, 1),
        })
        print(f"lambda={lam}: kept {kept}, BLEU {b} ({time.time() - t0:.0f} s)", flush=True)
        _write(name, {"config": cfg, "kinds": list(kinds), "shape": list(shape), "full_bleu": full_bleu,
                      "n_bleu": len(dev), "complete": len(runs) == len(cfg["lambdas"]),
                      "checkpoint_meta": {k: meta.get(k) for k in ("config", "bleu", "steps") if k in meta},
                      "runs": runs}, "encoder" if name == "encoder_gates" else "all-types")


def run_encoder(checkpoint=None) -> None:
    gate_sweep(("enc_self",), TRANSLATION["encoder"], checkpoint, "encoder_gates")


def run_all_types(checkpoint=None) -> None:
    gate_sweep(KINDS, TRANSLATION["all_types"], checkpoint, "all_types_gates")


def run_michel(checkpoint=None) -> None:
    """Michel et al.'s importance pruning of the shipped model, encoder only and all types (chapter 11)."""
    attnbook.seed_everything(TRANSLATION["seed"])
    tr, model, meta, dev = translation_setup(checkpoint)
    model.eval()
    cfg = TRANSLATION["michel"]
    stream = tr.BatchStream(tr.load_pairs("train"), batch_size=cfg["batch"], max_len=model.cfg.max_len,
                            seed=TRANSLATION["seed"] + 2)
    batches = [stream(i) for i in range(cfg["n_batches"])]

    def loss_fn(batch, masks):
        src, tgt = batch
        return model.loss(src.to(DEVICE), tgt.to(DEVICE), head_gates=masks)

    out = {}
    for name, kinds, step in (("encoder", ("enc_self",), cfg.get("step_encoder", 1)), ("all_types", KINDS, 3)):
        if name not in cfg.get("parts", ("encoder", "all_types")):
            continue
        t0 = time.time()
        masks = P.full_masks({k: (model.cfg.layers(k), model.cfg.n_heads) for k in kinds})
        recs = P.prune_step_by_step(loss_fn, lambda m: bleu_of(tr, model, dev, head_gates=m), masks, batches,
                                    n_per_step=step, min_heads=1,
                                    progress=lambda r: print(name, r["n_kept"], r["score"], flush=True))
        out[name] = [{"n_kept": r["n_kept"], "bleu": r["score"],
                      "kept": {k: int((v != 0).sum()) for k, v in r["masks"].items()},
                      "masks": _tolist(r["masks"])} for r in recs]
        print(f"michel {name}: {time.time() - t0:.0f} s", flush=True)
        _write("michel", {"config": cfg, "n_bleu": len(dev), **out}, "michel")


def run_from_scratch(checkpoint=None) -> None:
    """Train the shapes found by the all-types gate sweep from scratch, with the pruned heads masked out
    (Voita et al. 2019, Table 3: "pruned" vs "from scratch"), with the shipped model's own recipe
    (``meta["recipe"]``: the one ``scripts/train_translation.py`` used). Each shape trains for the shipped
    model's steps plus the gate fine-tuning steps, so both arms have seen the same number of batches; the
    unpruned shape is trained the same way as a baseline on the same device. Long: one full training per
    shape (a GPU is advised)."""
    from attnbook.seq2seq import Seq2SeqConfig, Seq2SeqTransformer

    sweep = json.loads((OUT / "all_types_gates.json").read_text())
    tr, base, meta, dev = translation_setup(checkpoint)
    recipe = meta["recipe"]
    steps = TRANSLATION["scratch_steps"] or int(meta["train_steps"]) + int(sweep["config"]["steps"])
    stream = tr.BatchStream(tr.load_pairs("train"), batch_size=recipe["batch_size"], max_len=base.cfg.max_len,
                            seed=recipe["seed"])
    full = {k: [[1.0] * base.cfg.n_heads for _ in range(base.cfg.layers(k))] for k in KINDS}
    shapes = [{"lam": None, "gates": full, "kept": {k: base.cfg.layers(k) * base.cfg.n_heads for k in KINDS},
               "bleu": sweep["full_bleu"]}] + sweep["runs"]
    results, seen = [], {}
    for run in shapes:
        masks = {k: (torch.tensor(v) > 0).float() for k, v in run["gates"].items()}
        key = tuple(int(x) for k in KINDS for x in masks[k].flatten())
        if key in seen:                      # two lambdas kept the same heads: reuse the training
            b, sec = seen[key]
        else:
            attnbook.seed_everything(recipe["seed"])
            model = Seq2SeqTransformer(Seq2SeqConfig(**meta["config"]))
            t0 = time.time()
            tr.train_model(model, stream, steps=steps, lr=recipe["lr"], weight_decay=recipe["weight_decay"],
                           warmup=recipe["warmup"], label_smoothing=recipe["label_smoothing"], seed=recipe["seed"],
                           head_gates=masks, device=DEVICE, progress=False)
            b = bleu_of(tr, model, dev, head_gates=masks)
            sec = round(time.time() - t0, 1)
            seen[key] = (b, sec)
        results.append({"lam": run["lam"], "kept": run["kept"], "n_kept": int(sum(run["kept"].values())),
                        "bleu_pruned": run["bleu"], "bleu_scratch": b, "seconds": sec})
        print(results[-1], flush=True)
        _write("from_scratch", {"runs": results, "n_bleu": len(dev), "steps": steps, "recipe": recipe,
                                "complete": len(results) == len(shapes), "full_bleu_shipped": sweep["full_bleu"]},
               "from-scratch")


def _spec_key(spec: dict) -> str:
    return json.dumps(spec, sort_keys=True)


def run_gate_recipe(name: str, smoke: bool = False) -> None:
    """Voita et al.'s gate fine-tuning of the converged translation model for every lambda of recipe
    ``name`` (and its variants), resumable: runs already in the output file are kept (chapter 11)."""
    import copy

    from attnbook import recipes
    from attnbook.tasks import translation as tr

    rec = recipes.recipe(name)
    s = rec["settings"]
    out = (OUT / Path(rec["output"]).name) if OUT != DEFAULT_OUT else recipes.output_path(name)
    attnbook.seed_everything(s["seed"])
    base, meta = tr.load_translation_model(tr.DATA_DIR / f"{s['checkpoint']}.safetensors", device=DEVICE)
    pairs = tr.load_pairs(s["eval_split"])[: s["n_eval"]]
    if smoke:
        pairs, s = pairs[:8], {**s, "steps": 3, "record_every": 2, "lambdas": s["lambdas"][-1:], "variants": []}
    srcs, refs = [e for e, _ in pairs], [r for _, r in pairs]
    stream = tr.BatchStream(tr.load_pairs("train"), max_len=base.cfg.max_len, seed=s["seed"] + 1,
                            max_tokens=s["max_tokens"])

    def evaluate(model, gates=None) -> dict:
        binary = None if gates is None else {k: (v > 0).float() for k, v in gates.items()}
        res = {"bleu_greedy": round(tr.bleu(tr.translate(model, srcs, head_gates=binary), refs), 3),
               "bleu_beam": round(tr.bleu(tr.translate(model, srcs, head_gates=binary, beam=s["beam"],
                                                        length_penalty=s["length_penalty"]), refs), 3)}
        if gates is not None:
            res["bleu_greedy_soft_gates"] = round(tr.bleu(tr.translate(model, srcs, head_gates=gates), refs), 3)
        return res

    previous = json.loads(out.read_text()) if out.exists() and not smoke else {}
    done = {_spec_key(r["spec"]): r for r in previous.get("runs", [])}
    t0 = time.time()
    unpruned = previous.get("unpruned") or evaluate(base)
    print(f"unpruned {unpruned} ({time.time() - t0:.0f} s)", flush=True)
    defaults = {k: s[k] for k in ("lr", "gate_lr", "init_log_alpha", "steps")}
    specs = [{**defaults, "lam": lam} for lam in s["lambdas"]] + [{**defaults, **v} for v in s["variants"]]
    shapes = {k: (base.cfg.layers(k), base.cfg.n_heads) for k in s["kinds"]}
    runs = []

    def task_loss(m, batch, head_gates):
        src, tgt = batch
        return m.loss(src, tgt, head_gates=head_gates, label_smoothing=s["label_smoothing"])

    for spec in specs:
        if _spec_key(spec) in done:
            runs.append(done[_spec_key(spec)])
            continue
        t0 = time.time()
        model = copy.deepcopy(base)
        if s["kinds"] == ["enc_self"]:
            model.requires_grad_(False)
            model.encoder.requires_grad_(True)
            model.enc_norm.requires_grad_(True)
        gates = G.HeadGates(shapes, init_log_alpha=spec["init_log_alpha"], seed=s["seed"])
        p0 = _tolist(gates.expected_open())
        hist = G.train_gates(model, gates, task_loss, stream, lam=spec["lam"], steps=spec["steps"],
                             lr=spec["lr"], gate_lr=spec["gate_lr"], record_every=s["record_every"],
                             schedule="constant", warmup=0, clip=s["clip"], seed=s["seed"], progress=True,
                             device=DEVICE, desc=f"lambda={spec['lam']}")
        train_seconds = time.time() - t0
        g = gates()
        kept = {k: int((v > 0).sum()) for k, v in g.items()}
        res = evaluate(model, g)
        losses = hist["task_loss"]
        runs.append({
            "spec": spec, "kept": kept, "n_kept": sum(kept.values()), **res,
            "gates": _tolist(g), "p_open_init": p0,
            "snapshots": [{"step": q["step"], "p_open": _tolist(q["p_open"])} for q in hist["snapshots"]],
            "task_loss_first_last": [round(sum(losses[:20]) / 20, 4), round(sum(losses[-20:]) / 20, 4)],
            "train_seconds": round(train_seconds, 1), "seconds": round(time.time() - t0, 1),
        })
        print(f"{spec}: kept {kept}, {res} ({time.time() - t0:.0f} s)", flush=True)
        payload = {"unpruned": unpruned, "kinds": s["kinds"], "shapes": {k: list(v) for k, v in shapes.items()},
                   "n_eval": len(pairs), "complete": False, "runs": runs + [r for k, r in done.items()
                                                                           if r not in runs]}
        _write_recipe(out, name, rec, payload)
    payload = {"unpruned": unpruned, "kinds": s["kinds"], "shapes": {k: list(v) for k, v in shapes.items()},
               "n_eval": len(pairs), "complete": True, "runs": runs}
    _write_recipe(out, name, rec, payload)


def _spearman(a: torch.Tensor, b: torch.Tensor) -> float:
    ra = a.flatten().argsort().argsort().float()
    rb = b.flatten().argsort().argsort().float()
    return round(float(torch.corrcoef(torch.stack([ra, rb]))[0, 1]), 4)


def run_michel_recipe(name: str, smoke: bool = False) -> None:
    """Michel et al.'s importance pruning of the converged model, without fine-tuning, with the authors'
    estimator and the variants of recipe ``name`` (chapter 11, "Importance pruning")."""
    from attnbook import recipes
    from attnbook.seq2seq import ATTENTION_KINDS
    from attnbook.tasks import translation as tr

    rec = recipes.recipe(name)
    s = rec["settings"]
    out = (OUT / Path(rec["output"]).name) if OUT != DEFAULT_OUT else recipes.output_path(name)
    attnbook.seed_everything(s["seed"])
    model, _ = tr.load_translation_model(tr.DATA_DIR / f"{s['checkpoint']}.safetensors", device=DEVICE)
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
        return round(tr.bleu(tr.translate(model, [e for e, _ in pairs], head_gates=masks), [r for _, r in pairs]), 3)

    full = P.full_masks(shapes)
    per_token = [P.head_importance(loss_fn, full, [b], normalize=False, queries=queries) for b in batches]
    whole = [P.head_importance(loss_fn, full, [b], normalize=False) for b in batches]

    def mean(parts):
        return {k: sum(p[k] for p in parts) / len(parts) for k in ATTENTION_KINDS}

    def layer_normalised(imp):
        return {k: v / v.norm(dim=1, keepdim=True).clamp_min(1e-20) for k, v in imp.items()}

    importance = {"per_token": layer_normalised(mean(per_token)), "whole_batch": layer_normalised(mean(whole)),
                  "per_token_unnormalised": mean(per_token)}
    halves = [layer_normalised(mean(per_token[i::2])) for i in (0, 1)]
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
        path = out.parent / Path(recipes.recipe(gname)["output"]).name
        if not path.exists():
            continue
        sweep = json.loads(path.read_text())
        for run in sweep["runs"]:
            masks = {k: (torch.tensor(v) > 0).float() for k, v in run["gates"].items()}
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


def _write_recipe(path: Path, name: str, rec: dict, payload: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    payload["meta"] = {
        "recipe": name, "settings": rec["settings"], "what": rec["what"],
        "command": "python scripts/sweep_gates.py " + shlex.join(sys.argv[1:]),
        "torch": torch.__version__, "machine": platform.machine(), "processor": platform.processor(),
        "threads": torch.get_num_threads(),
        "device": torch.cuda.get_device_name(DEVICE) if DEVICE.type == "cuda" else "cpu",
    }
    path.write_text(json.dumps(payload, indent=1) + "\n")
    print("wrote", path, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("part", help="a recipe of attnbook.recipes, or one of minilm, encoder, all-types, "
                        "michel, from-scratch, all")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu", help="device of the translation parts (cpu or cuda)")
    parser.add_argument("--checkpoint", default=None, help="translation checkpoint (default: the shipped one)")
    parser.add_argument("--out", default=None, help="output folder (default: src/attnbook/data/pruning)")
    parser.add_argument("--scratch-steps", type=int, default=None,
                        help="training steps per shape for from-scratch (default: shipped steps + gate steps)")
    parser.add_argument("--smoke", action="store_true", help="a few steps of each part (to test the script)")
    parser.add_argument("--lambdas", default=None, help="comma-separated lambdas for encoder/all-types (default: TRANSLATION)")
    parser.add_argument("--steps", type=int, default=None, help="gate training steps per lambda (default: TRANSLATION)")
    parser.add_argument("--batch", type=int, default=None, help="batch size for gate training (default: TRANSLATION)")
    parser.add_argument("--gate-lr", type=float, default=None, help="learning rate of the gates (default: TRANSLATION)")
    parser.add_argument("--michel-step", type=int, default=None, help="encoder heads pruned per michel step (default 1)")
    parser.add_argument("--michel-batches", type=int, default=None, help="importance batches for michel (default: TRANSLATION)")
    parser.add_argument("--n-bleu", type=int, default=None, help="dev sentences for BLEU (default: TRANSLATION)")
    parser.add_argument("--michel-parts", default=None,
                        help="comma-separated subset of encoder,all_types for the michel part (default: both)")
    args = parser.parse_args()
    for c in (TRANSLATION["encoder"], TRANSLATION["all_types"]):
        if args.lambdas:
            c["lambdas"] = [float(x) for x in args.lambdas.split(",")]
        if args.steps:
            c["steps"] = args.steps
        if args.batch:
            c["batch"] = args.batch
        if args.gate_lr:
            c["gate_lr"] = args.gate_lr
    if args.michel_step:
        TRANSLATION["michel"]["step_encoder"] = args.michel_step
    if args.michel_batches:
        TRANSLATION["michel"]["n_batches"] = args.michel_batches
    if args.n_bleu:
        TRANSLATION["n_bleu"] = args.n_bleu
    if args.michel_parts:
        TRANSLATION["michel"]["parts"] = args.michel_parts.split(",")
    if args.scratch_steps:
        TRANSLATION["scratch_steps"] = args.scratch_steps
    if args.smoke:
        TRANSLATION["scratch_steps"] = 3
        for c in (TRANSLATION["encoder"], TRANSLATION["all_types"], MINILM):
            c.update(lambdas=c["lambdas"][-1:], steps=3, record_every=2)
        TRANSLATION.update(n_bleu=4)
        TRANSLATION["michel"].update(n_batches=1, batch=4)
        MINILM.update(n_eval=4, batch=4)
    global OUT, DEVICE
    DEVICE = torch.device(args.device)
    if args.out:
        OUT = Path(args.out)
    torch.set_num_threads(args.threads)
    from attnbook import recipes

    if args.part in recipes.RECIPES:
        run = run_michel_recipe if args.part.startswith("michel") else run_gate_recipe
        run(args.part, smoke=args.smoke)
        return
    parts = ["minilm", "encoder", "all-types", "michel"] if args.part == "all" else [args.part]
    for part in parts:
        if part == "minilm":
            run_minilm()
        else:
            {"encoder": run_encoder, "all-types": run_all_types, "michel": run_michel,
             "from-scratch": run_from_scratch}[part](args.checkpoint)


if __name__ == "__main__":
    main()
