"""The network IR: every op of an exported graph, its weights and its edges.

A `Network` is a list of `Op`s in topological order. Each op produces one tensor named after the
op; `inputs` name the tensors it consumes (graph inputs or earlier ops), so placement and fusion
can walk producers and consumers. Weights are float32 NumPy arrays as the module holds them, with
batch norm already folded into the conv before it (`None` when the module was built on the meta
device: shapes only). No torch here: `codesign.network.importer` builds networks from torch.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

# An op attr: the op moves or regroups the batch axis (a sequence-first attention, Swin's window
# partition), so the network runs at the batch it was exported with (`Network.fixed_batch`).
FIXED_BATCH = "fixed_batch"


@dataclass(frozen=True, eq=False)
class Op:
    """One op: its output tensor is named `name`, of `shape`."""

    name: str
    kind: str
    inputs: tuple[str, ...]
    shape: tuple[int, ...]
    attrs: Mapping[str, Any] = field(default_factory=dict)
    weight: np.ndarray | None = None     # conv2d: OIHW; linear: (out, in)
    bias: np.ndarray | None = None       # (out,), float32
    source: str = ""                     # the torch module path the op came from (for messages)

    @property
    def macs(self) -> int:
        """Multiply-accumulates per run: a conv2d/linear's per output from its weight shape, a
        matmul of two activations' from its `contract` length; 0 for the others."""
        if self.kind == "conv2d" and self.attrs.get("weight_shape"):
            return math.prod(self.shape) * math.prod(self.attrs["weight_shape"][1:])
        if self.kind == "linear" and self.attrs.get("weight_shape"):
            return math.prod(self.shape) * int(self.attrs["weight_shape"][1])
        if self.attrs.get("contract"):
            return math.prod(self.shape) * int(self.attrs["contract"])
        return 0

    def where(self) -> str:
        return f"node {self.name!r}" + (f" (module {self.source})" if self.source else "")


@dataclass(frozen=True, eq=False)
class Network:
    """A whole network: graph inputs (name, shape), ops in topological order, graph outputs."""

    name: str
    inputs: tuple[tuple[str, tuple[int, ...]], ...]
    ops: tuple[Op, ...]
    outputs: tuple[str, ...]

    def __post_init__(self) -> None:
        known = {n for n, _ in self.inputs}
        for op in self.ops:
            missing = [t for t in op.inputs if t not in known]
            if missing:
                raise ValueError(f"op {op.name} consumes {missing}, produced by no earlier op")
            known.add(op.name)

    def op(self, name: str) -> Op:
        return self._by_name[name]

    @cached_property
    def _by_name(self) -> dict[str, Op]:
        return {op.name: op for op in self.ops}

    @cached_property
    def _consumers(self) -> dict[str, list[Op]]:
        users: dict[str, list[Op]] = {}
        for op in self.ops:
            for t in dict.fromkeys(op.inputs):
                users.setdefault(t, []).append(op)
        return users

    def consumers(self, tensor: str) -> list[Op]:
        """The ops that read `tensor`, in graph order."""
        return list(self._consumers.get(tensor, ()))

    def shape(self, tensor: str) -> tuple[int, ...]:
        return dict(self.inputs)[tensor] if tensor in dict(self.inputs) else self._by_name[tensor].shape

    def counts(self) -> dict[str, int]:
        """Ops per kind, in first-seen order."""
        return dict(Counter(op.kind for op in self.ops))

    @property
    def macs(self) -> int:
        return sum(op.macs for op in self.ops)

    @property
    def batch(self) -> int:
        """The batch the graph was exported with (its inputs' axis 0)."""
        return max((shape[0] for _, shape in self.inputs if shape), default=1)

    @property
    def fixed_batch(self) -> bool:
        """True when an op moves or regroups the batch axis: the network then runs only at `batch`
        (the references evaluate other batches in chunks of it)."""
        return any(op.attrs.get(FIXED_BATCH) for op in self.ops)

    @property
    def has_weights(self) -> bool:
        return all(op.weight is not None for op in self.ops if op.kind in ("conv2d", "linear"))

    def rows(self) -> list[dict[str, Any]]:
        """One JSON-ready row per op (name, kind, shape, inputs, attrs, MACs, module)."""
        return [{"name": op.name, "kind": op.kind, "shape": list(op.shape), "inputs": list(op.inputs),
                 "attrs": {k: (list(v) if isinstance(v, tuple) else v) for k, v in op.attrs.items()},
                 "macs": op.macs, "module": op.source} for op in self.ops]
