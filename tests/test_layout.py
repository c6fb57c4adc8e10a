"""The library's house (README "Layout"): one folder per part of the book, and no module imports a part listed
after its own, so that Part I code never depends on Part III code, nor the shared core on any part."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "attnbook"

#: the parts in order: a module may import from its own part and from parts listed before it. ``hf.loading``
#: (pretrained weights and tokenizers, offline) serves Part I's memorization task too, so it sits with the core;
#: the rest of ``hf`` measures pretrained models with every part's tools, so it comes last but one.
ORDER = ["core", "hf.loading", "stats", "claims", "rank", "signal", "heads", "hf", "booktools"]


def part_of(module: str) -> str:
    """``attnbook.heads.roles`` -> ``heads``; ``attnbook.stats`` -> ``stats``; ``attnbook.hf.loading`` ->
    ``hf.loading``."""
    parts = module.split(".")
    if parts[0] != "attnbook" or len(parts) < 2:
        raise ValueError(f"not a module of attnbook: {module}")
    return "hf.loading" if parts[1:3] == ["hf", "loading"] else parts[1]


def imports_of(path: Path) -> set[str]:
    """The attnbook modules ``path`` imports (absolute imports; the library uses no relative ones)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                raise AssertionError(f"{path}: relative import; write `from attnbook.<part>... import`")
            if node.module and node.module.startswith("attnbook."):
                out.add(node.module)
            elif node.module == "attnbook":
                out.update(f"attnbook.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("attnbook."))
    return out


MODULES = sorted(p for p in SRC.rglob("*.py") if p != SRC / "__init__.py")


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_no_module_imports_a_part_listed_after_its_own(path):
    own = part_of("attnbook." + ".".join(path.relative_to(SRC).with_suffix("").parts))
    assert own in ORDER, f"{path.relative_to(SRC)} is in no part of {ORDER}"
    for module in imports_of(path):
        other = part_of(module)
        assert ORDER.index(other) <= ORDER.index(own), f"{path.relative_to(SRC)} ({own}) imports {module} ({other})"


def test_part_iii_lives_in_one_folder():
    part3 = {"seq2seq", "translation", "roles", "lrp", "masks", "gates", "gate_training", "importance", "sweeps"}
    assert part3 <= {p.stem for p in (SRC / "heads").glob("*.py")}
    outside = [p for p in SRC.rglob("*.py") if p.stem in part3 and p.parent != SRC / "heads"]
    assert not outside


def test_the_order_catches_an_upward_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from attnbook.heads import roles\n")
    assert part_of(next(iter(imports_of(bad)))) == "heads"
    assert ORDER.index("heads") > ORDER.index("rank")
