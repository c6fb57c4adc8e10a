"""Tests of attnbook.core.runs: every shipped precomputed file is made by a named recipe, with its settings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from attnbook.core import runs

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", sorted(runs.RECIPES))
def test_each_recipe_names_a_script_part_and_output(name):
    rec = runs.recipe(name)
    script = ROOT / rec["script"]
    assert script.exists(), rec["script"]
    assert f'"{rec["part"]}": ' in script.read_text(), f"{rec['script']} has no part {rec['part']!r}"
    assert runs.command(name) == f"python {rec['script']} {name}"
    assert runs.output_path(name).parent.parent == runs.DATA


@pytest.mark.parametrize("name", sorted(runs.RECIPES))
def test_a_shipped_file_records_its_recipe_and_current_settings(name):
    path = runs.output_path(name)
    if not path.exists():
        pytest.skip(f"{path.name} is not shipped yet")
    payload = json.loads(path.read_text())
    runs.check_recorded(payload, name)
    assert payload["meta"]["command"] == runs.command(name)


def test_a_stale_or_foreign_file_is_an_error():
    name = "minilm_gates"
    payload = {"meta": {"recipe": name, "settings": runs.recipe(name)["settings"]}}
    runs.check_recorded(payload, name)
    stale = json.loads(json.dumps(payload))
    stale["meta"]["settings"]["steps"] += 1
    with pytest.raises(ValueError, match="other settings"):
        runs.check_recorded(stale, name)
    with pytest.raises(ValueError, match="not made by recipe"):
        runs.check_recorded(payload, "michel_converged")
    with pytest.raises(ValueError, match="unknown recipe"):
        runs.recipe("no_such_recipe")


def test_recipe_returns_a_copy():
    rec = runs.recipe("minilm_gates")
    rec["settings"]["steps"] = -1
    assert runs.recipe("minilm_gates")["settings"]["steps"] != -1
