"""Reading a torch.fx graph without importing torch: node shapes, arguments, module paths, and
the state of one walk over a graph (`Walk`) that the op kinds' builders add `Op`s to."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from codesign.errors import ConfigError
from codesign.network.graph import Op


def shape_of(node: Any) -> tuple[int, ...]:
    val = getattr(node, "meta", {}).get("val")
    shape = getattr(val, "shape", None)
    if shape is None:
        raise ConfigError(f"node {node.name!r}: no shape information (export the module with example inputs)")
    try:
        return tuple(int(d) for d in shape)
    except TypeError:  # a SymInt that is not a constant
        raise ConfigError(f"node {node.name!r}: dynamic shape {tuple(shape)}; the network IR takes static "
                          "shapes (export with fixed-size example inputs, no dynamic_shapes)") from None


def ints(value: Any, n: int = 2, default: int | None = None) -> tuple[int, ...]:
    """An int or a list of ints (one value for every axis when given once) as an n-tuple."""
    if value is None or (isinstance(value, (list, tuple)) and not value):
        return (default,) * n if default is not None else ()
    if isinstance(value, int):
        return (int(value),) * n
    vals = tuple(int(v) for v in value)
    return vals * n if len(vals) == 1 else vals


def arg(node: Any, i: int, name: str, default: Any = None) -> Any:
    """Positional argument i of `node`, else its keyword `name`, else `default`."""
    if len(node.args) > i:
        return node.args[i]
    return node.kwargs.get(name, default)


def source(node: Any) -> str:
    """The torch module path (and class) a node came from, for messages."""
    stack = getattr(node, "meta", {}).get("nn_module_stack") or {}
    if not stack:
        return ""
    path, kind = list(stack.values())[-1]
    name = getattr(kind, "__name__", None) or str(kind).rsplit(".", 1)[-1].strip("'>")
    return f"{path or '<root>'}: {name}"


def to_numpy(t: Any) -> np.ndarray | None:
    """A torch tensor as float32 NumPy (None for meta tensors: shapes only)."""
    if t is None or getattr(getattr(t, "device", None), "type", "") == "meta":
        return None
    return t.detach().to("cpu").float().numpy().copy()


def fetch(gm: Any, target: str) -> Any:
    obj = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def is_node(value: Any) -> bool:
    return hasattr(value, "name") and hasattr(value, "op")


class Walk:
    """State of one walk over an fx graph (aliases, parameters, ops so far)."""

    def __init__(self, gm: Any, what: str) -> None:
        self.gm, self.what = gm, what
        self.alias: dict[str, str] = {}      # fx node name -> IR tensor name
        self.params: dict[str, Any] = {}     # fx node name -> torch tensor (get_attr, through observers)
        self.ops: list[Op] = []
        self.index: dict[str, int] = {}      # IR op name -> position in ops
        self.users: dict[str, int] = {}      # IR tensor -> number of fx users of its node
        self.inputs: list[tuple[str, tuple[int, ...]]] = []
        self.observers: dict[str, Any] = {}  # IR tensor or "<op>.weight" -> observer module
        self.weight_of: dict[str, str] = {}  # fx param node name -> name used for its observer
        # fx node of a multi-output op (split, chunk, ...) -> its items' builder: getitem(w, node, i)
        self.items: dict[str, Callable[[Walk, Any, int], None]] = {}

    def tensor(self, node: Any, at: Any) -> str:
        """The IR tensor of operand `node`; a module parameter (or a constant folded from them) used
        as an activation becomes a `constant` op, once."""
        name = getattr(node, "name", None)
        if name not in self.alias and name in self.params:
            value = self.params[name]
            shape = tuple(int(d) for d in getattr(value, "shape", ()))
            if not hasattr(value, "shape"):
                raise self.unsupported(at, f"an operand that is not a tensor ({node!r})")
            op = Op(name, "constant", (), shape, {}, to_numpy(value), None, source(at))
            self.index[name] = len(self.ops)
            self.ops.append(op)
            self.alias[name] = name
        if name not in self.alias:
            raise self.unsupported(at, f"an operand that is not a tensor of the graph ({node!r})")
        return self.alias[name]

    def is_tensor(self, node: Any) -> bool:
        return getattr(node, "name", None) in self.alias

    def is_param(self, node: Any) -> bool:
        return getattr(node, "name", None) in self.params

    def param(self, node: Any) -> Any:
        if node is None:
            return None
        if getattr(node, "name", None) not in self.params:
            raise ConfigError(f"{self.what}: node {node.name!r} is used as a weight but is computed by the graph; "
                              "the network IR takes conv/linear weights that are module parameters")
        return self.params[node.name]

    def producer(self, node: Any) -> Op | None:
        """The IR op whose output `node` is (through aliases), or None for a graph input."""
        name = self.alias.get(getattr(node, "name", None))
        return self.ops[self.index[name]] if name in self.index else None

    def unsupported(self, node: Any, why: str) -> ConfigError:
        src = source(node)
        return ConfigError(f"{self.what}: op {node.target} at node {node.name!r}"
                           f"{f' (module {src})' if src else ''} cannot be represented: {why}")

    def add(self, node: Any, kind: str, inputs: tuple[str, ...], attrs: dict[str, Any] | None = None,
            weight: Any = None, bias: Any = None, shape: tuple[int, ...] | None = None, name: str | None = None) -> Op:
        """Add an op for `node`. The node's own output is the op named after it; a builder that
        decomposes one node into several ops names the intermediate ones (`name`, e.g.
        f"{node.name}_scores") and adds the node's own op last."""
        w = weight if isinstance(weight, np.ndarray) or weight is None else to_numpy(weight)
        b = bias if isinstance(bias, np.ndarray) or bias is None else to_numpy(bias)
        op = Op(name or node.name, kind, inputs, shape_of(node) if shape is None else shape, attrs or {}, w, b,
                source(node))
        if op.name in self.index or (name is not None and name in self.alias):
            raise self.unsupported(node, f"two ops named {op.name!r}")
        self.index[op.name] = len(self.ops)
        self.ops.append(op)
        if name is None:
            self.alias[node.name] = node.name
            self.users[node.name] = len(node.users)
        else:
            self.alias[name] = name
            self.users[name] = 1
        return op


__all__ = ["Walk", "arg", "fetch", "ints", "is_node", "shape_of", "source", "to_numpy"]
