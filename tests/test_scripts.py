"""The scripts that make shipped files, run end to end with their expensive step stubbed: each writes a file that
records its run, preset and settings (attnbook.core.runs), which the loader then accepts."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from attnbook.core import runs

ROOT = Path(__file__).resolve().parents[1]


def script(name: str):
    """Import ``scripts/<name>.py`` as a module (the scripts put ``src`` and ``scripts`` on the path)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    spec = importlib.util.spec_from_file_location(f"script_{name}", ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_main(module, argv, monkeypatch):
    monkeypatch.setattr(sys, "argv", [f"scripts/{module.__name__.removeprefix('script_')}.py", *argv])
    module.main()


def test_sweep_optimisers_writes_a_file_of_its_run(tmp_path, monkeypatch):
    """Learning rates are chosen on the selection seeds and the arm is judged on other seeds at the chosen rate;
    Adam is warmed up, SGD is not; a GPU's batched seeds give the same file."""
    mod = script("sweep_optimisers")
    calls = []

    def fake_train_run(size, *, optimizer, scaled, temperature, lr, seed, steps, x_eval, warmup):
        calls.append((optimizer, scaled, lr, seed, warmup))
        # on the selection seeds SGD ties at 0.03 and 0.1 (0.1 has the lower loss), Adam is best at 3e-3
        best = (0.03, 0.1, 3e-3)
        acc = 0.9 if seed >= 10 and lr in best else 0.5 + 0.01 * seed
        loss = 0.5 if lr == 0.1 else (float("nan") if lr == 1.0 else 1.0)
        return {"acc": acc, "loss": loss, "log": [{"step": 0, "loss": loss}]}

    def fake_train_seeds(size, *, seeds, device, **kw):  # a GPU's batched seeds: the same records
        assert device == "cuda"
        return [fake_train_run(size, seed=seed, **kw) for seed in seeds]

    monkeypatch.setattr(mod.rv, "train_run", fake_train_run)
    monkeypatch.setattr(mod, "train_seeds", fake_train_seeds)
    monkeypatch.setattr(mod, "batches_models_on", lambda device: device == "cuda")  # as on a machine with a GPU
    monkeypatch.setattr(mod.rv, "balancing_temperature", lambda size, scaled: 2.0)
    run_main(mod, ["--out", str(tmp_path / "on_gpu.json"), "--device", "cuda"], monkeypatch)
    on_gpu = json.loads((tmp_path / "on_gpu.json").read_text())
    assert len(calls) == 5 * (5 * 3 + 3)
    calls.clear()
    out = tmp_path / "optimiser_sweep_quick.json"
    run_main(mod, ["--out", str(out)], monkeypatch)
    payload = json.loads(out.read_text())
    s = runs.settings("optimiser_sweep", "quick")
    assert len(calls) == 5 * (5 * 3 + 3) and {c[2] for c in calls if c[0] == "adam"} == set(s["learning_rates"]["adam"])
    assert {c[4] for c in calls if c[0] == "adam"} == {s["steps"] // 10} and {c[4] for c in calls if c[0] == "sgd"} == {0}
    assert payload["meta"]["run"] == "optimiser_sweep" and payload["meta"]["settings"] == s
    runs.check_recorded(payload, "optimiser_sweep", "quick")
    assert on_gpu["arms"] == payload["arms"] and on_gpu["device"] == "cuda"
    for a in payload["arms"]:  # chosen on the selection seeds: the tie broken by the loss, 3e-3 alone for Adam
        assert a["best_lr"] == (0.1 if a["optimizer"] == "sgd" else 3e-3)
        judged = [r for r in a["runs"] if r["role"] == "judged"]
        assert [r["seed"] for r in judged] == s["seeds"] and {r["lr"] for r in judged} == {a["best_lr"]}
        assert all("log" in r for r in judged) and not any("log" in r for r in a["runs"] if r["role"] != "judged")
        assert {r["seed"] for r in a["runs"] if r["role"] == "selection"} == set(s["selection_seeds"])


def test_head_relevance_writes_a_file_of_its_run_only_with_the_table_s_settings(tmp_path, monkeypatch):
    import torch

    mod = script("head_relevance")

    def fake(preset, verses, device):
        for i in range(verses):
            yield {"enc_self": torch.full((2, 3), float(i))}, 1, None

    monkeypatch.setattr(mod, "minilm_relevance", fake)
    out = tmp_path / "lrp_relevance_minilm_quick.json"
    run_main(mod, ["--model", "minilm", "--out", str(out)], monkeypatch)
    payload = json.loads(out.read_text())
    assert payload["verses"] == runs.settings("lrp_relevance_minilm", "quick")["verses"]
    assert len(payload["first_verses"]) == 2
    runs.check_recorded(payload, "lrp_relevance_minilm", "quick")
    other = tmp_path / "few.json"
    run_main(mod, ["--model", "minilm", "--verses", "4", "--out", str(other)], monkeypatch)
    assert "meta" not in json.loads(other.read_text())  # other settings: not a file of the run


@pytest.mark.parametrize("extra", [[], ["--cap", "1"]])
def test_bench_recipes_records_its_run_and_refuses_other_settings_without_out(extra, tmp_path, monkeypatch):
    mod = script("bench_recipes")
    monkeypatch.setattr(mod, "run", lambda task, recipe, *a, **k: {"task": task, "recipe": recipe})
    out = tmp_path / "bench_recipes_quick.json"
    run_main(mod, [*extra, "--out", str(out)], monkeypatch)
    payload = json.loads(out.read_text())
    assert [r["recipe"] for r in payload["rows"]] == ["paper", "book", "paper", "book"]
    if extra:
        assert "meta" not in payload
        with pytest.raises(SystemExit):
            run_main(mod, extra, monkeypatch)
    else:
        runs.check_recorded(payload, "bench_recipes", "quick")


def test_a_trained_on_seed_rebuilds_its_pruned_model_from_the_sweep_run_of_its_gate_seed():
    """Seed 0 of the trained-on arm is the gate sweep's main run (as pruned_converged was made); seed s the
    variant with gate seed s; a seed the sweep has no run of is refused."""
    mod = script("sweep_gates")
    settings = {"lr": 2e-4, "gate_lr": 0.05, "init_log_alpha": "glorot", "steps": 300, "seed": 0}
    main = {"lr": 2e-4, "gate_lr": 0.05, "init_log_alpha": "glorot", "steps": 300, "lam": 0.1}
    sweep = {"runs": [{"spec": main}, {"spec": {**main, "seed": 1}}, {"spec": {**main, "lam": 0.05}}]}
    assert mod._pruned_run(sweep, settings, 0.1) is sweep["runs"][0]
    assert mod._pruned_run(sweep, settings, 0.1, gate_seed=0) is sweep["runs"][0]
    assert mod._pruned_run(sweep, settings, 0.1, gate_seed=1) is sweep["runs"][1]
    with pytest.raises(ValueError, match="no run"):
        mod._pruned_run(sweep, settings, 0.05, gate_seed=1)
