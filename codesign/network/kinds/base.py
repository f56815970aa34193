"""The op-kind record and the registry every layer of the network flow reads.

An `OpKind` declares, once, everything the flow needs of one kind of op: the aten ops it is
imported from (`aten`, `build`), how PT2E annotates it for quantization (`observe`,
`weight_arg`), how its exponents and integer parameters follow from calibrated ranges (`quant`),
its integer and float NumPy references (`int_ref`, `float_ref`), what it asks of a CPU (`cpu`),
its VTA lowering if any (`vta`) and the placement facts (`layout_free`, `label`). Adding an op
kind is one `register(OpKind(...))` in a module of this package plus its tests.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from codesign.cpu import ConvShape, CpuWork, tensor_pass
from codesign.errors import ConfigError
from codesign.network.fx import Walk
from codesign.network.graph import Network, Op
from codesign.network.quantized import QParams, frac_bits
from codesign.workloads.layers import Dense

# VTA lowerings a kind can declare (codesign.place maps each to its costing and codesign.evaluate
# to its programs): a GEMM through the conv/dense templates with a fused epilogue; a pool on
# the ALU; an op a GEMM's epilogue can take (ReLU, a residual add).
GEMM, POOL, EPILOGUE = "gemm", "pool", "epilogue"
VTA_FORMS = (GEMM, POOL, EPILOGUE)


@dataclass
class QuantContext:
    """What a kind's `quant` rule reads: the graph, the calibrated ranges (max |x| per tensor;
    `"<op>.weight"` for weights) and the fractional bits of every tensor decided so far."""

    net: Network
    amax: Mapping[str, float]
    frac: dict[str, int]
    per_channel: bool = False  # GEMM weights get per-output-channel exponents (codesign.network.quantized)

    def fin(self, op: Op) -> list[int]:
        return [self.frac[t] for t in op.inputs]

    def observed(self, op: Op) -> float:
        """The range observed at `op`'s output, or after the ReLU that alone consumes it (the clip
        to int8 commutes with ReLU, so conv-relu is observed after the ReLU as XNNPACK does)."""
        users = self.net.consumers(op.name)
        if len(users) == 1 and users[0].kind == "relu" and users[0].name in self.amax:
            return self.amax[users[0].name]
        if op.name not in self.amax:
            raise ConfigError(f"no calibrated range for the output of {op.where()}")
        return self.amax[op.name]

    def output_frac(self, op: Op) -> int:
        return frac_bits(self.observed(op))

    def weight_frac(self, op: Op) -> int:
        """Fractional bits of `op`'s constant operand: its observer's range, else its own max |w|."""
        key = f"{op.name}.weight"
        if key in self.amax:
            return frac_bits(self.amax[key])
        if op.weight is None:
            raise ConfigError(f"no calibrated range for the weight of {op.where()}")
        return frac_bits(float(np.max(np.abs(op.weight))) if op.weight.size else 0.0)


Build = Callable[[Walk, Any, str], None]
IntRef = Callable[[Op, QParams, list[np.ndarray], int], np.ndarray]
FloatRef = Callable[[Op, list[np.ndarray]], np.ndarray]
Quant = Callable[[QuantContext, Op], tuple[int, QParams]]
# (network, op, rows, elements read, elements written) -> what it asks of a CPU
CpuRule = Callable[[Network, Op, int, int, int], "CpuWork | ConvShape | Dense"]


def keep_scale(ctx: QuantContext, op: Op) -> tuple[int, QParams]:
    """Output keeps the first input's exponent; no integer parameters (ReLU, max pool, reshape)."""
    return ctx.frac[op.inputs[0]], QParams()


def bytes_pass(net: Network, op: Op, rows: int, read: int, write: int) -> CpuWork:
    """A bytes-bound int8 pass over what the op reads and writes."""
    return tensor_pass(op.name, read, write, "int8", "int8")


def always(net: Network, op: Op) -> bool:
    return True


def never(net: Network, op: Op) -> bool:
    return False


@dataclass(frozen=True)
class OpKind:
    name: str
    doc: str                           # what it computes and the attrs it carries
    aten: tuple[str, ...]              # aten op names (no namespace/overload) `build` reads
    build: Build | None                # fx node -> Op(s) added to the walk (None: made by another kind's build)
    int_ref: IntRef                    # the integer semantics (bit-exact contract for VTA and the CPU)
    float_ref: FloatRef                # the module's float arithmetic
    label: str                         # how placement reasons name it
    quant: Quant = keep_scale          # output exponent and integer parameters
    observe: bool = False              # PT2E observes its output: its scale is its own
    weight_arg: int | None = None      # PT2E: argument index of an int8 weight (per-tensor observer)
    cpu: CpuRule = bytes_pass          # what it asks of a CPU
    layout_free: Callable[[Network, Op], bool] = never  # runs on VTA's packed blocks as on NCHW
    vta: str | None = None             # VTA lowering (VTA_FORMS) or None: CPU only
    moves_data: bool = True            # False: a view (reshape) that costs nothing
    # Layout tracking (codesign.place.layouts): `view`: int_ref only moves values (any integer
    # dtype, no arithmetic), so the placement follows a packed VTA buffer through it as positions
    # (no data moved). `positional`: it computes from its input's logical values wherever they
    # lie, so it reads a tracked packed layout through its position map and writes its output
    # in the same layout (padding zero): same integers, no unpack / pack around it.
    view: bool = False
    positional: bool = False

    def __post_init__(self) -> None:
        if self.vta is not None and self.vta not in VTA_FORMS:
            raise ValueError(f"op kind {self.name}: vta={self.vta!r}; allowed: {', '.join(VTA_FORMS)}, None")


REGISTRY: dict[str, OpKind] = {}
BUILDERS: dict[str, Build] = {}       # aten op name -> the build that reads it


def register_builder(aten: tuple[str, ...], build: Build) -> None:
    """Read aten ops `aten` with `build` (an op that folds into another, or makes another kind's op)."""
    taken = [a for a in aten if a in BUILDERS]
    if taken:
        raise ValueError(f"aten {taken} has a builder already")
    for a in aten:
        BUILDERS[a] = build


def register(kind: OpKind) -> OpKind:
    if kind.name in REGISTRY:
        raise ValueError(f"op kind {kind.name!r} registered twice")
    REGISTRY[kind.name] = kind
    if kind.build is not None:
        register_builder(kind.aten, kind.build)
    return kind


def get(name: str, where: str = "") -> OpKind:
    """The kind `name`, or a one-line error naming the allowed kinds."""
    if name not in REGISTRY:
        raise ConfigError(f"{where + ': ' if where else ''}unknown op kind {name!r}; allowed: {', '.join(REGISTRY)}")
    return REGISTRY[name]


def elems(shape: tuple[int, ...]) -> int:
    return math.prod(shape)


__all__ = ["BUILDERS", "EPILOGUE", "GEMM", "POOL", "REGISTRY", "VTA_FORMS", "OpKind", "QuantContext", "always",
           "bytes_pass", "elems", "get", "keep_scale", "never", "register", "register_builder"]
