"""A placed network as a `.vtanet` bundle (`codesign deploy --workload NET -o NET.vtanet`): what
`codesign.board.Network` needs to run it on a board without torch, the planner or the compiler.

Each VTA step keeps its program (instructions, micro-ops, DRAM regions) compiled once with its
weights, bias and identity in place; the regions that change per inference (the step's input,
a fused residual) are left empty. The host rewrite around the layer (zero padding, space-to-depth,
im2col, zero insertion, tokens as pixels) and VTA's packed layout are both pure data moves, so each
is stored as one gather map: `packed = append(x.ravel(), 0)[map]` (-1 picks the appended zero), and
the output's unpacking likewise (`y = region[map]`). The maps are found by running the rewrite and
the packing on each byte of the source positions' indices (an int8 data move keeps every byte).
CPU steps keep their ops and integer parameters; the board runs them with the kinds' `int_ref`.

Packed buffers (schema 3): where the plan reads a VTA step's input in place (`Step.reads`: no pack
charged), the step records the read (`reads`: region, tensor, buffer, offset, nbytes) instead of
an input map, and a positional CPU op over a packed buffer (softmax) records its input's
positions there (`in_place`), as the planner follows them (`codesign.place.layouts`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from codesign import __version__
from codesign.board import bundle as fmt
from codesign.errors import ConfigError
from codesign.evaluate.fused import compile_fused
from codesign.evaluate.pool import compile_pool
from codesign.fileio import json_default_or_str
from codesign.netrun.network import GEMM_KINDS, Prepared, _residual_input, fused_views
from codesign.network.graph import Network
from codesign.network.kinds import get as get_kind
from codesign.network.layers import calls_of, layer_of
from codesign.place import Step
from codesign.place.layouts import Located, Locations, gemm_output, through, unview, view_index
from codesign.place.transforms import ENTRIES, Rewrite, matmul_entries, pad_axis, rounding_bias
from codesign.vta.program import Program

RUNTIME_REGIONS = ("data", "residual")  # regions written per inference; the others are constant


def gather_map(fn: Callable[[np.ndarray], np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
    """int32 map m with fn(x).ravel() == append(x.ravel(), 0)[m] for every int8 x of `shape`, for
    a pure data move `fn` (zeros it inserts map to -1). One pass of fn per byte of the indices."""
    n = math.prod(shape)
    if n + 1 >= 2 ** 31:
        raise ConfigError(f"bundle: a tensor of {n} elements is too large for an int32 gather map")
    codes = np.arange(1, n + 1, dtype=np.int64)
    acc = None
    for k in range(max(1, -(-int(n + 1).bit_length() // 8))):
        digit = ((codes >> (8 * k)) & 0xFF).astype(np.uint8).view(np.int8).reshape(shape)
        y = np.ascontiguousarray(np.asarray(fn(digit), dtype=np.int8)).reshape(-1).view(np.uint8).astype(np.int64)
        acc = y << (8 * k) if acc is None else acc | (y << (8 * k))
    return (acc - 1).astype(np.int32)


def _shape(net: Network, tensor: str) -> tuple[int, ...]:
    """The shape of `tensor`: an op's output or a network input."""
    return tuple(dict(net.inputs)[tensor]) if tensor in dict(net.inputs) else tuple(net.op(tensor).shape)


def _program_doc(program: Program, arrays: dict[str, np.ndarray], key: str,
                 runtime_regions: tuple[str, ...] = RUNTIME_REGIONS) -> dict[str, Any]:
    regions = []
    for r in program.regions:
        runtime = r.name in runtime_regions
        data = None
        if r.data is not None and not runtime:
            arrays[f"{key}.{r.name}"] = r.data
            data = {"array": f"{key}.{r.name}"}
        regions.append({"name": r.name, "addr": r.addr, "nbytes": r.nbytes, "role": r.role, "data": data,
                        "runtime": runtime})
    arrays[f"{key}.insns"], arrays[f"{key}.uops"] = program.insns, program.uops
    meta = json.loads(json.dumps(program.meta, default=json_default_or_str))
    return {"insns": {"array": f"{key}.insns"}, "uops": {"array": f"{key}.uops"}, "regions": regions, "meta": meta}


def _vta_gemm(prep: Prepared, step: Step, arrays: dict[str, np.ndarray], key: str) -> dict[str, Any]:
    net, qnet, hw = prep.network, prep.qnet, prep.plan.hw
    gemm = net.op(step.ops[0])
    if gemm.kind not in GEMM_KINDS or step.layer is None or step.epilogue is None:
        raise ConfigError(f"bundle: step {step.name} ({gemm.kind} on VTA) has no fused GEMM layer to bundle")
    if gemm.kind == "matmul":
        return _vta_matmul(prep, step, arrays, key)
    p = qnet.params[gemm.name]
    epi, layer = step.epilogue, step.layer
    bias = p.bias if epi.bias else None
    res_name = step.residual or _residual_input(net, step)
    rewrite = step.rewrite or Rewrite(step.transform, layer_of(net, gemm)[0], step.layer)
    in_shape = _shape(net, gemm.inputs[0])
    out_op = net.op(step.ops[-1])
    gemm_shape = tuple(gemm.shape)
    views = fused_views(net, step)  # a residual add fused through views: added where the GEMM's output lies
    index = view_index(gemm_shape, views)
    res0 = np.zeros(gemm_shape, np.int8) if res_name is not None else None
    x, w, b, r = rewrite.vta_operands(np.zeros(in_shape, np.int8), p.weight, bias, res0)
    config = prep.schedules[step.name].config
    program = compile_fused(layer, config, hw, epi, x, w, b, r)
    doc: dict[str, Any] = {"program": _program_doc(program, arrays, key), "input": gemm.inputs[0],
                           "residual": res_name, "output": out_op.name, "layer": layer.spec,
                           "rewrite": rewrite.describe(), "schedule": {
                               "source": prep.schedules[step.name].source, "family": prep.schedules[step.name].family,
                               "index": int(config.index)}}
    if not _reads(step, gemm.inputs[0], program, doc, hw, res_name):
        arrays[f"{key}.input_map"] = gather_map(
            lambda v: layer.pack_data(rewrite.vta_operands(v, p.weight, bias, res0)[0], hw), in_shape)
        doc["input_map"] = {"array": f"{key}.input_map"}
    if res_name is not None and not _reads(step, res_name, program, doc, hw, gemm.inputs[0], "residual"):
        arrays[f"{key}.residual_map"] = gather_map(
            lambda v: layer.pack_output(rewrite.vta_operands(np.zeros(in_shape, np.int8), p.weight, bias,
                                                             unview(v, index, gemm_shape))[3], hw),
            _shape(net, res_name))
        doc["residual_map"] = {"array": f"{key}.residual_map"}
    nbytes = program.region("output").nbytes
    arrays[f"{key}.output_map"] = gather_map(
        lambda v: rewrite.vta_output(layer.unpack_output(v, hw)).reshape(gemm_shape).ravel()[index].reshape(out_op.shape),
        (nbytes,))
    doc["output_map"] = {"array": f"{key}.output_map"}
    return doc


def _reads(step: Step, tensor: str, program: Program, doc: dict[str, Any], hw: Any, other: str | None = None,
           region: str = "data") -> bool:
    """Record in `doc` the plan's in-place read of the step's `tensor` (its input: the data region,
    or its fused add's residual: the residual region, fed the buffer's bytes from the offset: no
    gather map, no host pack); False when the host packs it. `other`: the step's other tensor
    that may be read in place (the input or the residual)."""
    got = [(b, o) for t, b, o in step.reads if t == tensor]
    others = [t for t, _, _ in step.reads if t not in (tensor, other)]
    if others:  # the planner reads only a GEMM's input or residual in place (a weight's pads must be zero)
        raise ConfigError(f"bundle: step {step.name} reads {others[0]} in place; only its input or residual can be")
    if not got:
        return False
    nbytes = program.region(region).nbytes
    want = step.layer.packed_data_shape(hw) if region == "data" else step.layer.packed_output_shape(hw)
    if nbytes != math.prod(want):
        raise ConfigError(f"bundle: step {step.name}: its {region} region ({nbytes} bytes) is not its layer's packed "
                          f"{'input' if region == 'data' else 'output'}")
    (buffer, offset), = got
    doc.setdefault("reads", []).append({"region": region, "tensor": tensor, "buffer": buffer, "offset": int(offset),
                                        "nbytes": nbytes})
    return True


class _Buffers:
    """Where the plan's packed buffers hold each tensor, followed as the planner and the simulator's
    runner follow them (`codesign.place.layouts`): a VTA GEMM step's output, through views, and a
    positional op's own buffer. Found when first asked (a view's positions cost a pass of int_ref)."""

    def __init__(self) -> None:
        self.located = Locations()

    def where(self, tensor: str) -> Located:
        return self.located.where(tensor, "bundle: ")

    def step(self, prep: Prepared, step: Step, arrays: dict[str, np.ndarray], key: str) -> dict[str, Any] | None:
        """Track `step`'s output; the `in_place` entry of a positional CPU step over a buffer, else None."""
        net, hw = prep.network, prep.plan.hw
        if step.placement == "vta" and step.pool is None and not step.host:
            op, out = net.op(step.ops[0]), step.ops[-1]
            matmul = op.kind == "matmul"
            rewrite = step.rewrite or Rewrite(step.transform, layer_of(net, op)[0], step.layer,
                                              calls=calls_of(op) if matmul else 1)
            shape, views = tuple(op.shape), fused_views(net, step)
            self.located[out] = lambda: gemm_output(rewrite, hw, shape, out, matmul, views)
            return None
        if step.placement == "vta" or step.host or not step.reads:
            return None
        op = net.op(step.ops[0])
        if get_kind(op.kind).view:
            self.located[op.name] = lambda: through(op, self.where(op.inputs[0]))
            return None
        src = self.where(op.inputs[0])
        if src.size >= 2 ** 31:
            raise ConfigError(f"bundle: {src.buffer}'s packed buffer of {src.size} bytes is too large for int32 positions")
        self.located[op.name] = Located(op.name, src.size, src.positions)
        arrays[f"{key}.positions"] = src.positions.astype(np.int32)
        return {"input": op.inputs[0], "buffer": src.buffer, "size": int(src.size),
                "positions": {"array": f"{key}.positions"}}


def why_not(prep: Prepared) -> str | None:
    """Why `prep` cannot be bundled, or None: a matmul of two activations made of several VTA
    calls (one per entry; its weight region changes between calls inside one step)."""
    for step in prep.plan.steps:
        if step.placement != "vta" or step.pool is not None or prep.network.op(step.ops[0]).kind != "matmul":
            continue
        op = prep.network.op(step.ops[0])
        rewrite = step.rewrite
        if (rewrite is None or rewrite.kind != ENTRIES) and calls_of(op) > 1:
            return f"a matmul of two activations on VTA in {calls_of(op)} calls ({step.name})"
    return None


def _vta_matmul(prep: Prepared, step: Step, arrays: dict[str, np.ndarray], key: str) -> dict[str, Any]:
    """A matmul of two activations (`netrun.network._vta_matmul`): its second operand is the
    program's weight region, written per inference like the input (`weight_map`). Bundled when the
    step is one VTA call (one entry, or every entry as one grouped conv); per-entry calls are not."""
    net, hw = prep.network, prep.plan.hw
    op = net.op(step.ops[0])
    dense = layer_of(net, op)[0]
    rewrite = step.rewrite or Rewrite(step.transform, dense, step.layer, calls=calls_of(op))
    shapes = [_shape(net, t) for t in op.inputs[:2]]
    transpose_b = bool(op.attrs.get("transpose_b"))
    a0, b0 = (np.zeros(s, np.int8) for s in shapes)
    xs0, ws0 = matmul_entries(a0, b0, op.shape, transpose_b)
    grouped = rewrite.kind == ENTRIES
    if not grouped and calls_of(op) != 1:
        raise ConfigError(f"bundle: step {step.name} (a matmul of {calls_of(op)} entries, one VTA call each) cannot "
                          "be bundled yet; run it with codesign run --board")
    bias = rounding_bias(int(step.epilogue.shift), dense.out_features) if step.epilogue.bias else None
    layer = step.layer

    def operands(xs: np.ndarray, ws: np.ndarray) -> tuple[np.ndarray, ...]:
        """(x, w, bias) of the one VTA call: every entry as a grouped conv, or the only entry."""
        return (rewrite.vta_operands(xs, ws, bias) if grouped else rewrite.vta_operands(xs[0], ws[0], bias))[:3]

    x, w, b = operands(xs0, ws0)
    config = prep.schedules[step.name].config
    program = compile_fused(layer, config, hw, step.epilogue, x, w, b, None)
    doc: dict[str, Any] = {"program": _program_doc(program, arrays, key, RUNTIME_REGIONS + ("weight",)),
                           "input": op.inputs[0], "weight": op.inputs[1], "residual": None, "output": op.name,
                           "layer": layer.spec, "rewrite": rewrite.describe(), "schedule": {
                               "source": prep.schedules[step.name].source, "family": prep.schedules[step.name].family,
                               "index": int(config.index)}}
    parts = ["weight_map", "output_map"]
    if not _reads(step, op.inputs[0], program, doc, hw):
        arrays[f"{key}.input_map"] = gather_map(
            lambda v: layer.pack_data(operands(*matmul_entries(v, b0, op.shape, transpose_b))[0], hw), shapes[0])
        parts.append("input_map")
    arrays[f"{key}.weight_map"] = gather_map(
        lambda v: layer.pack_weight(operands(*matmul_entries(a0, v, op.shape, transpose_b))[1], hw), shapes[1])
    nbytes = program.region("output").nbytes
    arrays[f"{key}.output_map"] = gather_map(
        lambda v: rewrite.vta_output(layer.unpack_output(v, hw)).reshape(op.shape), (nbytes,))
    for part in parts:
        doc[part] = {"array": f"{key}.{part}"}
    return doc


def _vta_pool(prep: Prepared, step: Step, arrays: dict[str, np.ndarray], key: str) -> dict[str, Any]:
    net, hw, pool = prep.network, prep.plan.hw, step.pool
    op = net.op(step.ops[0])
    src = op.inputs[0]
    in_shape = _shape(net, src)
    program = compile_pool(pool, hw, None)
    n, c = op.shape[:2]
    arrays[f"{key}.input_map"] = gather_map(
        lambda v: pool._io().pack_data(pad_axis(pad_axis(v, 0, pool.batch), 1, pool.channels), hw), in_shape)
    nbytes = program.region("output").nbytes
    arrays[f"{key}.output_map"] = gather_map(
        lambda v: np.ascontiguousarray(pool._out().unpack_output(v, hw)[:n, :c]).reshape(op.shape), (nbytes,))
    return {"program": _program_doc(program, arrays, key), "input": src, "residual": None, "output": op.name,
            "layer": pool.name, "rewrite": "as is", "schedule": {"source": "pool", "family": "alu", "index": 0},
            "input_map": {"array": f"{key}.input_map"}, "output_map": {"array": f"{key}.output_map"}}


def build(prep: Prepared, bitstream_sha256: str, board: str | None = None) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(network.json document, arrays) of the bundle of `prep` for the bitstream `bitstream_sha256`."""
    qnet, net, plan = prep.qnet, prep.network, prep.plan
    arrays: dict[str, np.ndarray] = {}
    ops = []
    for op in net.ops:
        d = {"name": op.name, "kind": op.kind, "inputs": list(op.inputs), "shape": list(op.shape),
             "attrs": fmt.encode(dict(op.attrs), arrays, f"attr.{op.name}"), "source": op.source}
        if op.kind not in GEMM_KINDS and op.weight is not None:  # a constant operand (small), for int_ref
            d["weight"] = fmt.encode(op.weight, arrays, f"const.{op.name}")
        ops.append(d)
    params = {}
    for name, p in qnet.params.items():
        params[name] = fmt.encode({"weight": p.weight, "weight_frac": p.weight_frac, "bias": p.bias, "shift": p.shift,
                                   "mul": p.mul, "in_shifts": tuple(p.in_shifts), "table": p.table,
                                   "extra": dict(p.extra)}, arrays, f"param.{name}")
    steps = []
    buffers = _Buffers()
    for i, step in enumerate(plan.steps):
        unit = "host" if step.host else step.placement
        d: dict[str, Any] = {"name": step.name, "kind": step.kind, "unit": unit, "ops": list(step.ops),
                             "reason": step.reason, "predicted_ms": step.predicted_s * 1e3,
                             "transform": step.transform}
        key = f"step{i}"
        if unit == "vta":
            d["vta"] = _vta_pool(prep, step, arrays, key) if step.pool is not None else _vta_gemm(prep, step, arrays, key)
        in_place = buffers.step(prep, step, arrays, key)
        if in_place is not None:
            d["in_place"] = in_place
        steps.append(d)
    quant = [{"tensor": n, "shape": list(s), "frac": int(qnet.frac[n]), "dtype": "int8"} for n, s in net.inputs]
    doc = {"codesign_version": __version__, "name": prep.name, "hw_name": plan.hw.name, "hw": plan.hw.to_dict(),
           "bitstream_sha256": bitstream_sha256, "board": board or getattr(plan.board, "name", str(plan.board)),
           "batch": plan.batch, "network": net.name, "inputs": quant,
           "outputs": [{"tensor": t, "shape": list(net.op(t).shape), "frac": int(qnet.frac[t]), "dtype": "int8"}
                       for t in net.outputs],
           "frac": {k: int(v) for k, v in qnet.frac.items()}, "ops": ops, "params": params, "steps": steps,
           "predicted_latency_ms": plan.latency_s * 1e3}
    return doc, arrays


def to_bytes(prep: Prepared, bitstream_sha256: str, board: str | None = None) -> bytes:
    return fmt.to_bytes(*build(prep, bitstream_sha256, board))


def write(prep: Prepared, path: str | Path, bitstream_sha256: str, board: str | None = None) -> int:
    """Write the bundle; returns its size in bytes."""
    return fmt.write(path, *build(prep, bitstream_sha256, board))


__all__ = ["build", "gather_map", "to_bytes", "write", "RUNTIME_REGIONS"]
