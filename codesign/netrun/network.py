"""A whole quantized network end to end (`codesign run`): import with weights, quantize, place,
execute every step in order, check every op against the integer reference.

- model: `codesign.network.load_model` (zoo name with seeded random weights, `file.py:factory`,
  `.pt2`, `.onnx`), quantized with torchao PT2E (`codesign.network.quantize`) on `--calibration FILE.npy`
  or the example inputs;
- plan: `codesign.place.plan_network` with `ScheduleChooser` (records of any family, tophub,
  best template schedule);
- execution, step by step in the plan's order: a VTA step runs its fused op (conv/dense with its
  epilogue: bias, residual, ReLU, shift, clip) through `codesign.evaluate.fused` on the executor
  (functional simulator, or a board), after the plan's host transform (NumPy, `codesign.place`);
  a CPU step runs its ops with the integer reference's op functions;
- check: every op's output against `run_int` of the same input. Ops fused into a VTA step never
  leave VTA: they share the step's output check.
- packed buffers, as the plan costs them (`codesign.place.layouts`): every VTA GEMM step keeps the
  packed bytes it wrote; a step the plan marks as reading an operand in place (`Step.reads`, no
  pack charged) gets exactly those bytes from the plan's offset; a view over a packed buffer
  moves nothing; a positional CPU op (softmax) reads its input from the buffer through its
  positions and writes its own buffer at the same positions (pads zero).

Input: the network's example inputs, or the first batch of `--calibration` when given. Times: the
plan's predicted seconds per step (VTA: the timing model of the chosen schedule; CPU: the CPU cost
model); on boards, each VTA step's device and call time measured too.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from codesign.board.network import positional
from codesign.board.network import window as in_place_window
from codesign.errors import ConfigError
from codesign.evaluate.fused import run_fused
from codesign.evaluate.pool import run_pool
from codesign.hw.board import Board
from codesign.hw.config import HwConfig
from codesign.netrun.schedules import ScheduleChooser
from codesign.network.graph import Network
from codesign.network.importer import load_model
from codesign.network.kinds import EPILOGUE, GEMM, POOL, REGISTRY
from codesign.network.kinds import get as get_kind
from codesign.network.layers import calls_of, layer_of
from codesign.network.quantize import quantize
from codesign.network.quantized import QuantizedNetwork
from codesign.network.reference import int_op, run_int
from codesign.place import Plan, Step, plan_network
from codesign.place.layouts import Located, Locations, gemm_output, through, unpack_input, unview, view_index
from codesign.place.refine import Chosen, refine
from codesign.place.transforms import ENTRIES, Rewrite, matmul_entries, pad_axis, rounding_bias
from codesign.plotting import pyplot, save_figure
from codesign.tune.records import MeasureRecord
from codesign.vta import timing

GEMM_KINDS = tuple(k.name for k in REGISTRY.values() if k.vta == GEMM)
# Kinds VTA runs as a step of their own (a GEMM, a pool) or inside a GEMM with another tensor (the
# residual add): a CPU placement of one of these gets a note saying why. A lone ReLU gets none.
OFFLOADABLE = tuple(k.name for k in REGISTRY.values() if k.vta in (GEMM, POOL) or (k.vta == EPILOGUE and k.observe))


# executor(step, config, hw, x, w, bias, residual); for a pool step (`step.pool`), config is the Pool
# and w, bias, residual are None -> (int8 output in the VTA layer's layout, device
# seconds, a board's whole call seconds or None). The simulator's device seconds are the timing
# model's (nothing measured); a board's are measured start to done (`codesign.deploy`).
VtaExecutor = Callable[..., tuple[np.ndarray, float, "float | None"]]


def simulator_executor(params: timing.TimingParams | None = None) -> VtaExecutor:
    params = params or timing.default_params()

    def run(step: Step, config: Any, hw: HwConfig, x: np.ndarray, w: np.ndarray | None, bias: np.ndarray | None,
            residual: np.ndarray | None) -> tuple[np.ndarray, float, None]:
        if step.pool is not None:  # `config` is the step's Pool
            res = run_pool(config, hw, x, params=params)
            return np.asarray(res.output), res.cycles / hw.clock_hz, None
        res = run_fused(step.layer, config, hw, step.epilogue, x, w, bias, residual, params=params)
        return np.asarray(res.output), res.cycles / hw.clock_hz, None

    return run


@dataclass(frozen=True)
class Prepared:
    """A quantized network, its plan and the schedules chosen for its VTA layers."""

    name: str
    qnet: QuantizedNetwork
    plan: Plan
    chooser: ScheduleChooser
    example: np.ndarray | tuple[np.ndarray, ...]  # the input(s) `run` uses (float, the IR's batch)
    schedules: dict[str, Chosen] = field(default_factory=dict)  # VTA step -> its schedule and source

    @property
    def network(self) -> Network:
        return self.qnet.network


def load_calibration(path: str | Path, example_shape: Sequence[int]) -> np.ndarray:
    """An .npy of calibration inputs (N, *example shape[1:]) or a one-line error naming the file."""
    p = Path(path)
    try:
        arr = np.load(p, allow_pickle=False)
    except FileNotFoundError:
        raise ConfigError(f"{p}: calibration file not found") from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{p}: not a NumPy .npy array of calibration inputs ({exc})") from None
    want = tuple(int(d) for d in example_shape[1:])
    if arr.ndim != len(want) + 1 or tuple(arr.shape[1:]) != want or arr.shape[0] < 1:
        raise ConfigError(f"{p}: calibration data has shape {tuple(arr.shape)}, expected "
                          f"(N, {', '.join(map(str, want))}) for the network's input {tuple(example_shape)}")
    if not np.issubdtype(arr.dtype, np.number):
        raise ConfigError(f"{p}: calibration data has dtype {arr.dtype}, expected numbers")
    return arr.astype(np.float32)


def at_batch(qnet: QuantizedNetwork, batch: int) -> QuantizedNetwork:
    """The same integer network with every tensor's leading (batch) axis set to `batch`."""
    net = qnet.network
    if all(shape[0] == batch for _, shape in net.inputs):
        return qnet

    def attrs(op: Any) -> Any:
        if op.kind == "flatten":
            return {**op.attrs, "shape": (batch, *op.attrs["shape"][1:])}
        if op.kind == "concat" and op.attrs.get("dim") == 0:
            raise ConfigError(f"{op.where()}: concatenation along the batch axis; `codesign run` runs one batch")
        return op.attrs

    ops = tuple(replace(op, shape=(batch, *op.shape[1:]), attrs=attrs(op)) for op in net.ops)
    inputs = tuple((n, (batch, *shape[1:])) for n, shape in net.inputs)
    return replace(qnet, network=Network(net.name, inputs, ops, net.outputs))


def prepare(module: Any, inputs: Sequence[Any], name: str, hw: HwConfig, *, calibration: np.ndarray | None = None,
            records: Sequence[MeasureRecord] = (), family: str | None = None,
            params: timing.TimingParams | None = None, board: Board | None = None) -> Prepared:
    """Quantize `module` (calibrated on `calibration`, else `inputs`) and place it on `hw`. A
    network of several inputs (an LSTM cell's x, h, c) runs on its example inputs."""
    if len(inputs) != 1 and calibration is not None:
        raise ConfigError(f"network {name!r} takes {len(inputs)} inputs; --calibration gives one input array "
                          "(run it on its example inputs)")
    # The exported graph carries the calibration batch (up to 64): plan and run at the example's.
    qnet = at_batch(quantize(module, inputs, calibration, name), int(inputs[0].shape[0]))
    chooser = ScheduleChooser(hw, records, family, params)
    plan, schedules = refine(plan_network(qnet, hw, board or Board.for_target(hw.TARGET), chooser), chooser)
    placed = [o for s in plan.steps if not s.host for o in s.ops]
    missing = [op.name for op in qnet.network.ops if op.name not in placed]
    if missing or len(placed) != len(set(placed)):
        raise ConfigError(f"network {name!r}: the plan places {len(placed)} ops for {len(qnet.network.ops)} "
                          f"(unplaced: {', '.join(missing[:5]) or 'none'}; an op placed twice otherwise)")
    batch = qnet.network.inputs[0][1][0]
    arrays = tuple(np.asarray(t.detach().cpu().numpy() if hasattr(t, "detach") else t, np.float32) for t in inputs)
    example: np.ndarray | tuple[np.ndarray, ...] = arrays if len(arrays) > 1 else arrays[0]
    if calibration is not None and len(calibration) >= batch:
        example = calibration[:batch]
    return Prepared(name, qnet, plan, chooser, example, schedules)


def prepare_spec(spec: str, hw: HwConfig, *, calibration_file: str | Path | None = None, **kw: Any) -> Prepared:
    """`prepare` of a `--workload` form (zoo name, file.py:factory, .pt2, .onnx)."""
    module, inputs, name = load_model(spec)
    calibration = load_calibration(calibration_file, tuple(inputs[0].shape)) if calibration_file else None
    return prepare(module, inputs, name, hw, calibration=calibration, **kw)


@dataclass
class OpRow:
    name: str
    kind: str
    placement: str                      # vta | cpu
    step: str                           # the step that ran it (a VTA step's ops are fused)
    predicted_ms: float                 # the step's predicted time, on its first op; 0 on ops fused into it
    bit_exact: bool
    mismatches: int
    reason: str = ""
    transform: str | None = None
    schedule: dict[str, Any] | None = None
    host: bool = False                  # a host data pass of the plan (not an op of the network)
    measured_device_ms: float | None = None
    measured_call_ms: float | None = None
    measured_ms: float | None = None    # a deployed network's step, wall ms on the board (on its first op)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        return {k: v for k, v in d.items() if v is not None and (k != "host" or v)}


@dataclass
class Execution:
    env: dict[str, np.ndarray]          # every tensor as executed (int8)
    reference: dict[str, np.ndarray]    # every tensor of run_int on the same input
    rows: list[OpRow] = field(default_factory=list)
    buffers: dict[str, np.ndarray] = field(default_factory=dict)  # packed bytes a VTA step / in-place op wrote
    located: Locations = field(default_factory=Locations)  # where they hold a tensor

    def where(self, tensor: str) -> Located:
        return self.located.where(tensor, "")

    def window(self, buffer: str, offset: int, size: int) -> np.ndarray:
        """`size` bytes of `buffer` from `offset` (what a VTA DMA reading it in place gets)."""
        return in_place_window(self.buffers, buffer, offset, size)

    @property
    def bit_exact(self) -> bool:
        return all(r.bit_exact for r in self.rows)

    def outputs(self, qnet: QuantizedNetwork) -> list[np.ndarray]:
        return [self.env[t] for t in qnet.network.outputs]


def _residual_input(net: Network, step: Step) -> str | None:
    """The add input of a fused step that is not produced inside the step (the residual tensor)."""
    inside = set(step.ops)
    for name in step.ops:
        op = net.op(name)
        if op.kind == "add":
            outside = [t for t in op.inputs if t not in inside]
            if len(outside) != 1:
                raise ConfigError(f"step {step.name}: the fused add {name} has {len(outside)} inputs from outside the step")
            return outside[0]
    return None


def _compare(got: np.ndarray, want: np.ndarray) -> int:
    if got.shape != want.shape:
        return int(want.size)
    return int(np.count_nonzero(got != want))


def execute(prep: Prepared, x: np.ndarray, executor: VtaExecutor,
            on_step: Callable[[Step], None] | None = None) -> Execution:
    """Run every step of the plan on float input `x` (the IR's input shape), VTA steps on `executor`."""
    qnet, net, hw = prep.qnet, prep.network, prep.plan.hw
    reference = run_int(qnet, x)
    env = {name: reference[name] for name, _ in net.inputs}  # quantizing the input: the same int8
    exe = Execution(env, reference)
    for step in prep.plan.steps:
        if step.host:
            # quantize / pack / unpack / rewrite / dequantize: their data effect is the int8 input
            # above, the rewrite around a VTA layer and the unpacked VTA outputs; here their time.
            exe.rows.append(OpRow(step.name, step.kind, step.placement, step.name, step.predicted_s * 1e3, True, 0,
                                  step.reason, step.transform, host=True))
        elif step.placement == "vta" and step.pool is not None:
            _vta_pool(prep, step, env, exe, executor, hw)
        elif step.placement == "vta":
            _vta_step(prep, step, env, exe, executor, hw)
        else:
            for k, name in enumerate(step.ops):
                op = net.op(name)
                if k == 0 and step.reads:
                    _in_place(qnet, op, exe)
                else:
                    env[name] = int_op(qnet, op, [env[t] for t in op.inputs])
                bad = _compare(env[name], reference[name])
                exe.rows.append(OpRow(name, op.kind, "cpu", step.name, step.predicted_s * 1e3 if k == 0 else 0.0,
                                      bad == 0, bad, step.reason if k == 0 else f"fused into {step.name}"))
        if on_step is not None:
            on_step(step)
    return exe


def _in_place(qnet: QuantizedNetwork, op: Any, exe: Execution) -> None:
    """A CPU op over a tensor where a packed buffer holds it (`Step.reads`): a view moves nothing
    (its output's positions follow); a positional op reads its input's elements from the buffer
    through their positions and writes its output at the same positions of a buffer of its own."""
    if get_kind(op.kind).view:
        exe.env[op.name] = int_op(qnet, op, [exe.env[op.inputs[0]]])  # the same values, named anew
        # its positions only when a positional op reads through it (a VTA read needs the offset only)
        exe.located[op.name] = lambda: through(op, exe.where(op.inputs[0]))
        return
    src = exe.where(op.inputs[0])
    exe.env[op.name], exe.buffers[op.name] = positional(exe.buffers[src.buffer], src.positions, src.size,
                                                        lambda x: int_op(qnet, op, [x]))
    exe.located[op.name] = Located(op.name, src.size, src.positions)


def _in_place_input(exe: Execution, step: Step, tensor: str, layer: Any, hw: HwConfig, call: int = 0) -> np.ndarray | None:
    """The VTA layer's input, in its data layout, when the plan reads operand `tensor` in place:
    call `call`'s bytes of the buffer from the plan's offset (the executor packs them back to the
    same bytes); None when the plan packs it on the host."""
    for t, buffer, offset in step.reads:
        if t == tensor:
            size = int(np.prod(layer.packed_data_shape(hw)))
            return unpack_input(layer, exe.window(buffer, offset + call * size, size), hw)
    return None


def _in_place_residual(exe: Execution, step: Step, tensor: str | None, layer: Any, hw: HwConfig) -> np.ndarray | None:
    """The residual in the VTA layer's output layout when the plan reads it in place (the buffer's
    bytes from the offset: `layouts.residual_slots`), None when the host packs it."""
    for t, buffer, offset in step.reads:
        if t == tensor:
            size = int(np.prod(layer.packed_output_shape(hw)))
            return layer.unpack_output(exe.window(buffer, offset, size), hw)
    return None


def _keep_output(exe: Execution, step: Step, name: str, outputs: list[np.ndarray], rewrite: Rewrite, hw: HwConfig,
                 shape: tuple[int, ...], matmul: bool, views: Sequence[Any] = ()) -> None:
    """The packed bytes the VTA step wrote (its calls' back to back), where its output lies in them
    (`shape`: the GEMM's output; `views`: those a residual add was fused through)."""
    exe.buffers[name] = np.concatenate([step.layer.pack_output(np.asarray(o, np.int8), hw).ravel() for o in outputs])
    exe.located[name] = lambda: gemm_output(rewrite, hw, shape, name, matmul, views)


def fused_views(net: Network, step: Step) -> tuple[Any, ...]:
    """The views between a VTA step's GEMM and the residual add fused through them (`fusion.Group.views`)."""
    return tuple(op for op in (net.op(n) for n in step.ops[1:]) if get_kind(op.kind).view)


def _vta_pool(prep: Prepared, step: Step, env: dict[str, np.ndarray], exe: Execution, executor: VtaExecutor,
              hw: HwConfig) -> None:
    """A pool on VTA's ALU (`step.pool`, `codesign.evaluate.pool`): its input zero-padded to the
    pool's batch and channels (the packed layout's), the output cut back to the op's."""
    net = prep.network
    op, pool = net.op(step.ops[0]), step.pool
    x = pad_axis(pad_axis(env[op.inputs[0]], 0, pool.batch), 1, pool.channels)
    output, device_s, call_s = executor(step, pool, hw, x, None, None, None)
    n, c = op.shape[:2]
    y = np.ascontiguousarray(np.asarray(output, dtype=np.int8)[:n, :c]).reshape(op.shape)
    env[op.name] = y
    bad = _compare(y, exe.reference[op.name])
    row = OpRow(op.name, op.kind, "vta", step.name, step.predicted_s * 1e3, bad == 0, bad, step.reason,
                schedule={"source": "pool", "family": "alu", "index": 0, "layer": pool.name})
    if call_s is not None:
        row.measured_device_ms, row.measured_call_ms = device_s * 1e3, call_s * 1e3
    exe.rows.append(row)


def _vta_step(prep: Prepared, step: Step, env: dict[str, np.ndarray], exe: Execution, executor: VtaExecutor,
              hw: HwConfig) -> None:
    qnet, net = prep.qnet, prep.network
    gemm = net.op(step.ops[0])
    if gemm.kind not in GEMM_KINDS or step.layer is None or step.epilogue is None:
        raise ConfigError(f"step {step.name}: a VTA step of kind {gemm.kind!r} without a fused GEMM layer; "
                          "`codesign run` executes VTA conv/dense steps")
    chosen = prep.schedules[step.name]
    config = chosen.config
    out_name = step.ops[-1]
    if gemm.kind == "matmul":
        output, device_s, call_s = _vta_matmul(prep, step, exe, executor, hw, config)
    else:
        p = qnet.params[gemm.name]
        x, w = env[gemm.inputs[0]], p.weight
        bias = p.bias if step.epilogue.bias else None
        res_name = step.residual or _residual_input(net, step)
        residual = env[res_name] if res_name is not None else None
        views = fused_views(net, step)
        gemm_shape = tuple(gemm.shape)
        index = view_index(gemm_shape, views) if views else None
        if index is not None and residual is not None:  # added where the GEMM's output lies
            residual = unview(residual, index, gemm_shape)
        # The plan's host transform (pad / space-to-depth / im2col) in NumPy, around the VTA layer.
        rewrite = step.rewrite or Rewrite(step.transform, layer_of(net, gemm)[0], step.layer)
        given = _in_place_input(exe, step, gemm.inputs[0], step.layer, hw)
        if given is not None:  # no host pass: the input's bytes are where the plan says
            x = np.zeros_like(x)
        res_given = _in_place_residual(exe, step, res_name, step.layer, hw)
        if res_given is not None:  # nor for the residual: ACC loads the buffer's bytes
            residual = np.zeros_like(residual)
        x, w, bias, residual = rewrite.vta_operands(x, w, bias, residual)
        output, device_s, call_s = executor(step, config, hw, x if given is None else given, w, bias,
                                            residual if res_given is None else res_given)
        _keep_output(exe, step, out_name, [output], rewrite, hw, gemm_shape, False, views)
        output = rewrite.vta_output(np.asarray(output, dtype=np.int8))
        if index is not None:
            output = output.reshape(gemm_shape).ravel()[index]
    y = output.reshape(net.op(out_name).shape)
    env[out_name] = y
    bad = _compare(y, exe.reference[out_name])
    schedule = {"source": chosen.source, "family": chosen.family, "index": int(config.index),
                "layer": step.layer.name}
    for k, name in enumerate(step.ops):
        op = net.op(name)
        row = OpRow(name, op.kind, "vta", step.name, step.predicted_s * 1e3 if k == 0 else 0.0, bad == 0, bad,
                    step.reason if k == 0 else f"fused into {step.name}", step.transform if k == 0 else None,
                    schedule if k == 0 else None)
        if k == 0 and call_s is not None:  # a board measured it
            row.measured_device_ms, row.measured_call_ms = device_s * 1e3, call_s * 1e3
        exe.rows.append(row)


def _vta_matmul(prep: Prepared, step: Step, exe: Execution, executor: VtaExecutor, hw: HwConfig,
                config: Any) -> tuple[np.ndarray, float, float | None]:
    """A matmul of two activations on VTA: one call of the step's layer per batch entry (or one
    grouped conv of them all: `entries_as_groups`), the entry's first operand as the input and
    its second (transposed to (out, in) unless `transpose_b`) as the weight, a bias of
    2^(shift-1) rounding the shift. -> (the entries' outputs stacked (E, M, N), device seconds
    and call seconds summed over the calls)."""
    env, net = exe.env, prep.network
    op = net.op(step.ops[0])
    layer = layer_of(net, op)[0]
    rewrite = step.rewrite or Rewrite(step.transform, layer, step.layer, calls=calls_of(op))
    a = env[op.inputs[0]]
    in_place = any(t == op.inputs[0] for t, _, _ in step.reads)
    if in_place:  # no host pass: the first operand's bytes are read where the plan says
        a = np.zeros_like(a)
    xs, ws = matmul_entries(a, env[op.inputs[1]], op.shape, bool(op.attrs.get("transpose_b")))
    bias = rounding_bias(int(step.epilogue.shift), layer.out_features) if step.epilogue.bias else None
    shape, out_name = tuple(op.shape), step.ops[-1]
    if rewrite.kind == ENTRIES:  # every entry in one call: a grouped conv
        x, w, bias, _ = rewrite.vta_operands(xs, ws, bias)
        given = _in_place_input(exe, step, op.inputs[0], step.layer, hw)
        output, device_s, call_s = executor(step, config, hw, x if given is None else given, w, bias, None)
        _keep_output(exe, step, out_name, [output], rewrite, hw, shape, True)
        return rewrite.vta_output(np.asarray(output, dtype=np.int8)), device_s, call_s
    outs, raw, device_s, call_s = [], [], 0.0, 0.0
    for e, (xe, we) in enumerate(zip(xs, ws)):
        x, w, entry_bias, _ = rewrite.vta_operands(xe, we, bias)
        given = _in_place_input(exe, step, op.inputs[0], step.layer, hw, e)
        output, dev, call = executor(step, config, hw, x if given is None else given, w, entry_bias, None)
        raw.append(output)
        outs.append(rewrite.vta_output(np.asarray(output, dtype=np.int8)))
        device_s += dev
        call_s = None if call is None or call_s is None else call_s + call
    _keep_output(exe, step, out_name, raw, rewrite, hw, shape, True)
    return np.stack(outs), device_s, call_s


def summary(prep: Prepared, exe: Execution, executor_name: str, wall_s: float | None = None) -> dict[str, Any]:
    """The JSON of one run: whole-network latency and throughput, per-op rows, notes."""
    plan = prep.plan
    vta = sum(s.predicted_s for s in plan.steps if s.placement == "vta")
    host = sum(s.predicted_s for s in plan.steps if s.host)
    cpu = sum(s.predicted_s for s in plan.steps if s.placement != "vta" and not s.host)
    rows = [r.to_dict() for r in exe.rows]
    measured = [r for r in exe.rows if r.measured_device_ms is not None]
    out: dict[str, Any] = {
        "network": prep.name, "hw": plan.hw.name, "board": getattr(plan.board, "name", str(plan.board)),
        "batch": plan.batch, "executor": executor_name,
        "latency_ms": plan.latency_s * 1e3, "throughput_ips": plan.throughput_ips,
        "vta_ms": vta * 1e3, "cpu_ms": cpu * 1e3, "host_ms": host * 1e3,
        "bit_exact": exe.bit_exact, "mismatched_ops": [r.name for r in exe.rows if not r.bit_exact],
        "ops": rows, "steps": len(plan.steps),
        "schedules": _schedule_counts(exe.rows),
        "notes": notes(prep),
    }
    if measured:
        out["measured_vta_device_ms"] = sum(r.measured_device_ms for r in measured)  # type: ignore[misc]
        calls = [r.measured_call_ms for r in measured]
        if all(c is not None for c in calls):
            out["measured_vta_call_ms"] = sum(calls)  # type: ignore[arg-type]
    if wall_s is not None:
        out["wall_s"] = wall_s
    return out


def _schedule_counts(rows: Sequence[OpRow]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in rows:
        if r.schedule is not None:
            key = f"{r.schedule['source']}:{r.schedule['family']}"
            counts[key] = counts.get(key, 0) + 1
    return counts


def notes(prep: Prepared) -> list[str]:
    """One line per op VTA could in principle run that the plan leaves on the CPU, with why."""
    net = prep.network
    out = []
    for step in prep.plan.steps:
        if step.placement == "vta" or step.host:
            continue
        for name in step.ops:
            op = net.op(name)
            if op.kind in OFFLOADABLE:
                out.append(f"{op.kind} {op.where()} runs on the CPU: {step.reason}")
    return out


def plot_steps(prep: Prepared, result: dict[str, Any], path: str | Path) -> Path:
    """Predicted time per step, coloured by where it runs."""
    plt = pyplot()
    steps = prep.plan.steps
    fig, ax = plt.subplots(figsize=(max(6.0, 0.22 * len(steps) + 2), 4.2))
    colors = ["tab:blue" if s.placement == "vta" else "tab:orange" for s in steps]
    ax.bar(np.arange(len(steps)), [s.predicted_s * 1e3 for s in steps], color=colors)
    ax.set_xticks(np.arange(len(steps)), [s.name for s in steps], rotation=70, ha="right", fontsize=6)
    ax.set_ylabel("predicted ms per image")
    ax.set_title(f"{result['network']} on {result['hw']}: {result['latency_ms']:.1f} ms per image "
                 f"(VTA {result['vta_ms']:.1f} blue, CPU {result['cpu_ms']:.1f} orange)", fontsize=9)
    return save_figure(fig, path)


def run(prep: Prepared, executor: VtaExecutor, executor_name: str,
        on_step: Callable[[Step], None] | None = None) -> dict[str, Any]:
    t0 = time.perf_counter()
    exe = execute(prep, prep.example, executor, on_step)
    return summary(prep, exe, executor_name, time.perf_counter() - t0)


__all__ = ["at_batch", "Execution", "OpRow", "Prepared", "VtaExecutor", "execute", "load_calibration", "notes",
           "plot_steps", "prepare", "prepare_spec", "run", "simulator_executor", "summary"]
