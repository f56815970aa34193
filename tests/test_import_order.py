"""The one-way import order that docs/architecture.md states holds for the tree: a folder (or top-level
module) of `codesign` imports at module level only the ones before it in `ORDER`, and the document
states exactly this order."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "codesign"
BASE = {"errors", "paths", "fileio", "plotting", "interrupts"}  # everything may import these
ORDER = [["hw"], ["codesign"], ["workloads"], ["network", "cpu"], ["vta"], ["mapping"], ["lower"], ["schedule"],
         ["autotvm"], ["evaluate"], ["place"], ["analysis", "bitstream"],
         ["board"], ["tune"], ["calibrate"], ["pareto"], ["sweep"], ["netrun", "deploy"], ["commands"], ["cli"]]


def _unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "codesign"


def _level(unit: str) -> int:
    if unit in BASE:
        return -1
    return next(i for i, units in enumerate(ORDER) if unit in units)


def _module_level_imports():
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        module = ".".join(parts)
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                if name == "codesign" or name.startswith("codesign."):
                    yield module, name


def test_every_folder_is_placed():
    units = {_unit(m) for m, _ in _module_level_imports()} | {p.stem for p in PACKAGE.glob("*.py")} | {
        p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    units.discard("__init__")
    placed = BASE | {u for level in ORDER for u in level}
    assert units <= placed, f"place {sorted(units - placed)} in ORDER and in docs/architecture.md"


def test_imports_go_one_way():
    wrong = [(m, name) for m, name in _module_level_imports()
             if _unit(m) != _unit(name) and _level(_unit(name)) > _level(_unit(m))]
    assert not wrong, f"imports against the order of docs/architecture.md: {wrong}"


def test_the_document_states_this_order():
    text = " ".join((ROOT / "docs" / "architecture.md").read_text().split())
    stated = " → ".join(", ".join(level) for level in ORDER if level != ["codesign"])
    assert stated in text, stated
