"""A deployed network on the board: `codesign.board.Network("NET.vtanet")` (docs/board.md).

Loads a verified bundle (`codesign.board.bundle`), puts every VTA step's program in the board's
contiguous buffers once (`VTADriver.load`: weights, bias, micro-ops, relocated instructions), and
runs the whole network per call: a VTA step gathers its input into its packed layout (one gather
map: the host rewrite and the packing in one), runs on the device, gathers its output back; a CPU
step runs the integer reference's kernels (the op kinds' `int_ref`, vectorized NumPy). Where the
plan reads an operand in place (schema 3, `Step.reads`: no pack charged), the step is fed the
producing step's packed output bytes from the planned offset instead of a gather (its input, or
the residual its epilogue adds: schema 4), and a positional
op (softmax) runs over that buffer through its positions (`window`, `positional`: shared with the
simulator's runner, `codesign.netrun.network`). Imports NumPy and codesign's network IR, program
and driver only: no torch, no compiler, no simulator.

    net = Network("resnet18.vtanet")            # on a PYNQ board: the real pynq API
    y, ms = net(x)                              # float output, wall ms per step
    net.profile()                               # step, unit, measured ms, predicted ms
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from codesign.board import bundle as fmt
from codesign.board.driver import DEFAULT_TIMEOUT_S, PynqApi, Resident, VTADriver, resident_bytes
from codesign.errors import ConfigError
from codesign.hw.config import HwConfig
from codesign.network.graph import Network as Graph
from codesign.network.graph import Op
from codesign.network.quantized import QParams, QuantizedNetwork, dequantize, quantize_array
from codesign.network.reference import int_op
from codesign.vta.program import DramRegion, Program


@dataclass(frozen=True)
class Read:
    """Region `region` of a VTA step is fed `nbytes` bytes of packed buffer `buffer` from `offset` on."""

    region: str
    tensor: str
    buffer: str
    offset: int
    nbytes: int


@dataclass(frozen=True)
class InPlace:
    """A positional CPU op over packed buffer `buffer` (`size` bytes): its input's elements at `positions`."""

    buffer: str
    size: int
    positions: np.ndarray


@dataclass(frozen=True)
class VtaStep:
    program: Program
    input: str
    input_map: np.ndarray | None  # None: its data region is read in place (`reads`)
    residual: str | None
    residual_map: np.ndarray | None  # None: its residual region is read in place (`reads`)
    output: str
    output_map: np.ndarray
    shape: tuple[int, ...]
    weight: str | None = None  # a matmul of two activations: the tensor its weight region holds
    weight_map: np.ndarray | None = None
    reads: tuple[Read, ...] = ()


@dataclass(frozen=True)
class StepInfo:
    name: str
    unit: str          # vta | cpu | host
    ops: tuple[str, ...]
    predicted_ms: float
    vta: VtaStep | None = None
    in_place: InPlace | None = None  # a CPU step whose first op runs over a packed buffer


def window(buffers: Mapping[str, np.ndarray], buffer: str, offset: int, size: int) -> np.ndarray:
    """`size` bytes of packed buffer `buffer` from `offset` on: what a VTA DMA reading it in place gets."""
    buf = buffers[buffer]
    if offset < 0 or offset + size > buf.size:
        raise ConfigError(f"a read of {size} bytes at {offset} overruns {buffer}'s packed buffer ({buf.size} bytes)")
    return buf[offset:offset + size]


def positional(buf: np.ndarray, positions: np.ndarray, size: int,
               fn: Callable[[np.ndarray], np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """A positional op over a packed buffer: `fn` of its input's elements read through `positions`
    -> (its output, a buffer of `size` bytes holding it at the same positions, pads zero)."""
    y = fn(buf[positions])
    out = np.zeros(size, np.int8)
    out[positions] = y
    return y, out


def _gather(x: np.ndarray, index: np.ndarray) -> np.ndarray:
    """append(x.ravel(), 0)[index]: a data move whose -1 entries are zeros."""
    flat = np.empty(x.size + 1, dtype=np.int8)
    flat[:-1] = x.reshape(-1)
    flat[-1] = 0
    return flat[index]


def _program(step: Mapping[str, Any], hw: HwConfig, b: fmt.Bundle) -> Program:
    p = step["program"]
    regions = [DramRegion(r["name"], int(r["addr"]), int(r["nbytes"]), r["role"],
                          None if r["data"] is None else b.array(r["data"])) for r in p["regions"]]
    return Program(hw, b.array(p["insns"]), b.array(p["uops"]), regions, dict(p["meta"]))


def _graph(b: fmt.Bundle) -> QuantizedNetwork:
    doc = b.doc
    ops = tuple(Op(o["name"], o["kind"], tuple(o["inputs"]), tuple(o["shape"]), fmt.decode(o["attrs"], b),
                   fmt.decode(o.get("weight"), b), None, o.get("source", "")) for o in doc["ops"])
    graph = Graph(doc["network"], tuple((i["tensor"], tuple(i["shape"])) for i in doc["inputs"]), ops,
                  tuple(o["tensor"] for o in doc["outputs"]))
    params = {}
    for name, raw in doc["params"].items():
        p = fmt.decode(raw, b)
        params[name] = QParams(weight=p["weight"], weight_frac=int(p["weight_frac"]), bias=p["bias"],
                               shift=int(p["shift"]), mul=int(p["mul"]), in_shifts=tuple(p["in_shifts"]),
                               table=p["table"], extra=dict(p["extra"]))
    return QuantizedNetwork(graph, {k: int(v) for k, v in doc["frac"].items()}, params)


def _check_reads(steps: Sequence[StepInfo], source: str) -> frozenset[str]:
    """The packed buffers later steps read in place, each checked to be written by an earlier step
    (a VTA step's output or a positional op's), and every region fed (read in place or gathered)."""
    written: set[str] = set()
    read: set[str] = set()
    for s in steps:
        wants = [(r.buffer, r.tensor) for r in s.vta.reads] if s.vta is not None else []
        if s.in_place is not None:
            wants.append((s.in_place.buffer, s.ops[0]))
        for buffer, what in wants:
            if buffer not in written:
                raise ConfigError(f"{source}: step {s.name} reads {what} in place from {buffer}'s packed buffer, "
                                  "which no earlier step writes (corrupt bundle)")
            read.add(buffer)
        if s.vta is not None:
            if s.vta.input_map is None and not any(r.region == "data" for r in s.vta.reads):
                raise ConfigError(f"{source}: step {s.name} has neither an input map nor an in-place read")
            if (s.vta.residual is not None and s.vta.residual_map is None
                    and not any(r.region == "residual" for r in s.vta.reads)):
                raise ConfigError(f"{source}: step {s.name} has neither a residual map nor an in-place read of its residual")
            written.add(s.vta.output)
        elif s.in_place is not None:
            written.add(s.ops[0])
    return frozenset(read)


class Network:
    """A bundle loaded on a board. `driver` (or `api`): the board's VTA driver (default: the real
    pynq API); `bitstream`: (config, sha256) the board runs, checked against the bundle's;
    `memory_bytes`: the contiguous memory this network may take, checked before anything loads."""

    def __init__(self, source: str | Path | bytes, *, driver: VTADriver | None = None, api: PynqApi | None = None,
                 bitstream: tuple[str, str] | None = None, memory_bytes: int | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S, name: str | None = None) -> None:
        b = fmt.read(source, name)
        if b.doc.get("codesign_version") is None or not isinstance(b.doc.get("steps"), list):
            raise ConfigError(f"{b.source}: network.json lacks its version or steps (not a network bundle)")
        self.source = b.source
        self.nbytes = b.nbytes
        self.doc = b.doc
        try:
            self.hw = HwConfig.from_dict(b.doc["hw"], source=b.source)
            self.qnet = _graph(b)
            steps = []
            for s in b.doc["steps"]:
                vta = None
                if s["unit"] == "vta":
                    v = s["vta"]
                    out_shape = tuple(self.qnet.network.op(v["output"]).shape)
                    reads = tuple(Read(r["region"], r["tensor"], r["buffer"], int(r["offset"]), int(r["nbytes"]))
                                  for r in v.get("reads", ()))
                    vta = VtaStep(_program(v, self.hw, b), v["input"],
                                  b.array(v["input_map"]) if v.get("input_map") else None, v.get("residual"),
                                  b.array(v["residual_map"]) if v.get("residual_map") else None, v["output"],
                                  b.array(v["output_map"]), out_shape, v.get("weight"),
                                  b.array(v["weight_map"]) if v.get("weight") else None, reads)
                ip = s.get("in_place")
                in_place = None if ip is None else InPlace(ip["buffer"], int(ip["size"]), b.array(ip["positions"]))
                steps.append(StepInfo(s["name"], s["unit"], tuple(s["ops"]), float(s["predicted_ms"]), vta, in_place))
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"{b.source}: network.json is not a network of schema {fmt.SCHEMA} "
                              f"({type(exc).__name__}: {exc})") from None
        self.steps = tuple(steps)
        self._kept = _check_reads(self.steps, b.source)
        if bitstream is not None:
            fmt.check_target(b, bitstream[0], bitstream[1], self.hw.to_dict() if bitstream[0] else None)
        need = self.resident_bytes
        if memory_bytes is not None and need > memory_bytes:
            raise ConfigError(f"{b.source}: the network needs {need} bytes of contiguous board memory, more than the "
                              f"{memory_bytes} bytes available; nothing was loaded (the limit: memory_bytes=, or "
                              "codesign board serve --network-bytes on a board server)")
        self.timeout_s = timeout_s
        self.driver = driver or VTADriver(api or PynqApi.real())
        self._resident: dict[str, Resident] = {}
        try:
            for s in self.steps:
                if s.vta is not None:
                    self._resident[s.name] = self.driver.load(s.vta.program)
        except BaseException:
            self.close()
            raise
        self.last_ms: dict[str, float] = {}
        self.last_device_ms: dict[str, float] = {}
        # per step, per fed region: ("gather", tensor, None) packed on the host by a gather map, or
        # ("in place", buffer, offset) the producer's packed bytes; a positional CPU op's input:
        # ("through positions", buffer, None)
        self.last_feeds: dict[str, dict[str, tuple[str, str, int | None]]] = {}

    # -- facts ------------------------------------------------------------------------------
    @property
    def resident_bytes(self) -> int:
        return sum(resident_bytes(s.vta.program) for s in self.steps if s.vta is not None)

    @property
    def inputs(self) -> list[dict[str, Any]]:
        return list(self.doc["inputs"])

    @property
    def outputs(self) -> list[dict[str, Any]]:
        return list(self.doc["outputs"])

    # -- running ----------------------------------------------------------------------------
    def quantize(self, xs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Inputs as int8: float arrays quantized with the bundle's exponents, int8 taken as they are."""
        if len(xs) != len(self.inputs):
            raise ConfigError(f"{self.source}: the network takes {len(self.inputs)} input(s), got {len(xs)}")
        out = []
        for x, spec in zip(xs, self.inputs):
            x = np.asarray(x)
            if tuple(x.shape) != tuple(spec["shape"]):
                raise ConfigError(f"input {spec['tensor']!r}: shape {tuple(x.shape)}, expected {tuple(spec['shape'])}")
            if x.dtype == np.int8:
                out.append(x)
            elif np.issubdtype(x.dtype, np.floating):
                out.append(quantize_array(x, int(spec["frac"])))
            else:
                raise ConfigError(f"input {spec['tensor']!r}: dtype {x.dtype}; expected float (quantized here) or int8")
        return out

    def run(self, *xs: np.ndarray) -> tuple[list[np.ndarray], dict[str, float]]:
        """int8 outputs and wall ms per step (a VTA step: its gathers, copies and device run)."""
        env: dict[str, np.ndarray] = {spec["tensor"]: q for spec, q in zip(self.inputs, self.quantize(xs))}
        net, times, device, feeds = self.qnet.network, {}, {}, {}
        buffers: dict[str, np.ndarray] = {}  # packed bytes a later step reads in place, by tensor
        for s in self.steps:
            if s.unit == "host":  # its data effect is inside the VTA steps' gathers
                continue
            t0 = time.perf_counter()
            fed: dict[str, tuple[str, str, int | None]] = {}
            if s.vta is not None:
                v = s.vta
                feed = {}
                for r in v.reads:  # no host pass: the bytes lie where the plan says
                    feed[r.region] = window(buffers, r.buffer, r.offset, r.nbytes)
                    fed[r.region] = ("in place", r.buffer, r.offset)
                gathers = [("data", v.input, v.input_map), ("residual", v.residual, v.residual_map),
                           ("weight", v.weight, v.weight_map)]
                for region, tensor, index in gathers:
                    if tensor is not None and region not in feed:
                        feed[region] = _gather(env[tensor], index)
                        fed[region] = ("gather", tensor, None)
                outs, dev = self.driver.run_resident(self._resident[s.name], feed, self.timeout_s)
                raw = outs["output"].view(np.int8)
                if v.output in self._kept:
                    buffers[v.output] = raw
                env[v.output] = raw[v.output_map].reshape(v.shape)
                device[s.name] = dev * 1e3
            else:
                for k, name in enumerate(s.ops):
                    op = net.op(name)
                    if k == 0 and s.in_place is not None:
                        ip = s.in_place
                        env[name], out = positional(buffers[ip.buffer], ip.positions, ip.size,
                                                    lambda x, op=op: int_op(self.qnet, op, [x]))
                        fed["input"] = ("through positions", ip.buffer, None)
                        if name in self._kept:
                            buffers[name] = out
                    else:
                        env[name] = int_op(self.qnet, op, [env[t] for t in op.inputs])
            times[s.name] = (time.perf_counter() - t0) * 1e3
            feeds[s.name] = fed
        self.last_ms, self.last_device_ms, self.last_feeds = times, device, feeds
        return [env[o["tensor"]] for o in self.outputs], times

    def __call__(self, *xs: np.ndarray) -> tuple[np.ndarray | list[np.ndarray], dict[str, float]]:
        """Float output(s) (dequantized) and wall ms per step."""
        ys, times = self.run(*xs)
        fl = [dequantize(y, int(o["frac"])).astype(np.float32) for y, o in zip(ys, self.outputs)]
        return (fl[0] if len(fl) == 1 else fl), times

    def profile(self, file: Any = None) -> str:
        """The last run's table: step, unit, measured ms (device ms of VTA steps), predicted ms."""
        if not self.last_ms:
            raise ConfigError("profile: run the network first (net(x))")
        lines = [f"{'step':<28} {'unit':<4} {'measured ms':>11} {'device ms':>10} {'predicted ms':>12}"]
        for s in self.steps:
            if s.unit == "host":
                lines.append(f"{s.name[:28]:<28} {'host':<4} {'(in VTA)':>11} {'':>10} {s.predicted_ms:12.3f}")
                continue
            dev = self.last_device_ms.get(s.name)
            lines.append(f"{s.name[:28]:<28} {s.unit:<4} {self.last_ms[s.name]:11.3f} "
                         f"{'' if dev is None else f'{dev:10.3f}':>10} {s.predicted_ms:12.3f}")
        lines.append(f"{'total':<28} {'':<4} {sum(self.last_ms.values()):11.3f} {sum(self.last_device_ms.values()):10.3f} "
                     f"{sum(s.predicted_ms for s in self.steps):12.3f}")
        text = "\n".join(lines)
        print(text, file=file)
        return text

    def close(self) -> None:
        """Free the board buffers (a second network can then take them)."""
        for res in self._resident.values():
            self.driver.unload(res)
        self._resident = {}

    def __enter__(self) -> Network:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["InPlace", "Network", "Read", "positional", "window"]
