"""Package structure (docs/architecture.md): imports of `codesign` form no cycle, and no
`codesign.*` module imports another inside a function, except the allow-listed heavy optional
libraries (loaded where used so `import codesign.x` stays fast) and the package root's one re-export."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "codesign"
# Third-party libraries that may be imported inside functions: each is heavy to import and needed
# only by some commands (torch: RL tuners, network import; torchao: quantization; xgboost: xgb tuner; ray/optuna: the sweep; matplotlib:
# plots; scipy: the calibration fit; tvm/pynq: the board flow; onnx/onnx2torch/torchvision: the optional
# `onnx` extra, only for .onnx workloads).
HEAVY = {"torch", "torchao", "xgboost", "ray", "optuna", "matplotlib", "scipy", "tvm", "tvm_ffi", "pynq", "onnx",
         "onnx2torch", "torchvision"}
# (module, imported module): codesign imports allowed inside a function, with the reason.
ALLOWED_CODESIGN = {
    ("codesign", "codesign.evaluate.run"),  # `codesign.run_layer`: the package root must not load numba
    # the emulated board loads the numba simulator; a real board's server must not need numba
    ("codesign.board.server", "codesign.board.emulated"),
    # the sweep runner imports Ray Tune (~1 s): `codesign sweep --help` stays instant
    ("codesign.commands.sweep", "codesign.sweep.runner"),
}


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imports(tree: ast.Module):
    """(node, imported module names, at module level?) for every import statement."""
    top = {id(n) for n in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield node, [a.name for a in node.names], id(node) in top
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node, [node.module] + [f"{node.module}.{a.name}" for a in node.names], id(node) in top


def _import_graph() -> dict[str, set[str]]:
    """Module-level and function-level edges; importing `a.b.c` also runs the packages `a.b`."""
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for mod, path in modules.items():
        for _node, names, _top in _imports(ast.parse(path.read_text())):
            for name in names:
                parts = name.split(".")
                for i in range(2, len(parts) + 1):
                    target = ".".join(parts[:i])
                    if target in modules and not (mod == target or mod.startswith(target + ".")):
                        graph[mod].add(target)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_codesign_import_graph_has_no_cycle():
    cycle = _cycle(_import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_cycle_check_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_no_function_level_imports_except_heavy_libraries():
    bad = []
    for mod, path in sorted(_modules().items()):
        for node, names, top in _imports(ast.parse(path.read_text())):
            if top:
                continue
            root = names[0].split(".")[0]
            if root == "codesign":
                if (mod, names[0]) not in ALLOWED_CODESIGN:
                    bad.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} imports {names[0]}")
            elif root not in HEAVY:
                bad.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} imports {root} inside a function")
    assert not bad, "move these imports to module level:\n" + "\n".join(bad)


def test_every_module_imports_on_its_own():
    # A fresh interpreter per stage entry point: a cycle hidden behind package __init__ order would
    # raise ImportError here even if the static graph missed it.
    entries = ["codesign.workloads", "codesign.network", "codesign.cpu", "codesign.schedule", "codesign.evaluate.run", "codesign.place", "codesign.tune",
               "codesign.pareto", "codesign.calibrate", "codesign.autotvm", "codesign.sweep.trial"]
    code = "import importlib, sys\nfor m in sys.argv[1:]:\n    importlib.import_module(m)\n"
    for mod in entries:
        subprocess.run([sys.executable, "-c", code, mod], check=True, cwd=PACKAGE.parent)
