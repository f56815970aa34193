"""Placement: every op of a network on VTA or the board's CPU, by predicted cost, with a reason.

`plan_network` walks the fusion groups (`codesign.place.fusion`) in order. A conv2d/linear group
is costed on VTA in each form `transforms.rewrites` offers (as is, zero-padded, space-to-depth,
im2col, block-diagonal groups): the schedule `choose(layer)` picks (timed with its fused epilogue when
`codesign.evaluate.fused` is present) plus the host passes that form needs (packing its input,
the rewrite); and on the CPU (`codesign.cpu`, int8: the quantized network's integer semantics,
which is how the deployment runs CPU ops; the CPU model states when an int8 rate is assumed from
float32). The cheaper wins. Ops VTA cannot express go to the CPU with the reason.

A matmul of two activations (batch x heads entries of M x K x N) is costed in three VTA forms:
E calls of the entry's dense (weight = the second operand, loaded as WGT), E calls of it as a
1x1 conv over its M rows (`transforms.TOKENS`), one grouped 1x1 conv of all entries
(`transforms.ENTRIES`); each with the host passes packing both operands and the unpack its
consumer needs (a softmax, a permute). Only a power-of-two scale runs there (no multiplier).

Layouts: a tensor lives on the host as int8 NCHW ("host"), packed for VTA in DRAM ("vta":
NCHW{b}n{bi}c, zero-padded channels/rows), or as the float32 graph input ("float"). Element-wise
ops and pools run on the CPU in either layout (TVM's `graph_pack` keeps them packed between
offloaded convs too); a CPU conv/linear, a flatten of a spatial tensor and a concat need the host
layout. Every change of layout is a host step costed as a bytes-bound pass (`tensor_pass`):
quantize (+ pack) of an input, pack, unpack, rewrite, unpack + dequantize of an output.

Batch: VTA runs the padded batch (a multiple of BATCH); the CPU runs the request's own rows.
`Plan.latency_s` is one request through the whole network; `Plan.throughput_ips` is a full padded
batch of requests served back to back (CPU and host steps scaled by padded / request rows).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from codesign.cpu import CpuCost, layer_cost, tensor_pass
from codesign.errors import CodesignError, InvalidSchedule
from codesign.evaluate import pool as pools
from codesign.evaluate.fused import Epilogue, fused_reason, measure_fused
from codesign.evaluate.run import measure
from codesign.hw.board import Board
from codesign.hw.config import HwConfig
from codesign.network import kinds
from codesign.network.graph import Network, Op
from codesign.network.kinds.attention import scale_factor
from codesign.network.kinds.elementwise import clamp_bounds
from codesign.network.kinds.pool import window_count
from codesign.network.layers import calls_of, layer_of
from codesign.network.quantized import QParams, QuantizedNetwork, pool_factors
from codesign.place.fusion import GEMM_KINDS, MATMUL, Group, groups
from codesign.place.layouts import Located, gemm_output, input_slots, residual_slots, through, window
from codesign.place.transforms import ENTRIES, Rewrite, entries_as_groups, rewrites, round_up
from codesign.schedule import get_space
from codesign.schedule.knobs import Config
from codesign.workloads.layers import Layer

VTA, CPU = "vta", "cpu"
HOST, PACKED, FLOAT = "host", "vta", "float"
VIEW = "view"  # elements left where a packed buffer holds them, behind views (`layouts.Located`)
# Timing-only plans (no quantization): the epilogue's SHR amounts are unknown; nonzero ones keep
# every optional ALU step (the time of a quantized network's epilogue is at most this).
TIMING_SHIFT = 8
CPU_DTYPE = "int8"  # CPU ops run the integer network (bit-exact with VTA's int8 operands)
# Host data-movement steps: costed here, their data effect is `Rewrite.vta_operands`/`vta_output`
# and the runner's quantize/dequantize of graph inputs/outputs.
HOST_KINDS = ("quantize", "pack", "unpack", "rewrite", "dequantize")

Choose = Callable[[Layer], tuple[Config, float]]


@dataclass(frozen=True, eq=False)
class Step:
    """One step of a plan: a group of ops (or a host pass) and where it runs, why, and its time.
    `alternatives` maps each costed option ("cpu", "vta", "vta:space_to_depth", ...) to seconds
    (the option's own time plus the host passes it needs); `transform` the VTA form's rewrite."""

    name: str
    ops: tuple[str, ...]
    kind: str
    placement: str
    reason: str
    layer: Layer | None
    epilogue: Epilogue | None
    predicted_s: float
    alternatives: dict[str, float]
    transform: str | None
    config: Config | None = None
    rewrite: Rewrite | None = None
    residual: str | None = None       # the tensor a fused add reads (loaded into ACC)
    inputs: tuple[str, ...] = ()      # tensors read
    output: str = ""                  # tensor written
    batch_s: float | None = None      # seconds for a full padded batch (throughput); None = predicted_s
    group: str = ""                   # the fused group's name (its head op) for an op step
    pool: pools.Pool | None = None    # a pool on VTA's ALU
    # (operand, buffer, offset): a VTA step reads that operand (its input, or the residual its
    # epilogue loads into ACC: `residual`) in place, the buffer's packed bytes from the offset on
    # (`layouts.window`, `layouts.residual_slots`), no host pass; a CPU step of a view or a
    # positional op over a packed buffer: (input, buffer, -1)
    reads: tuple[tuple[str, str, int], ...] = ()

    @property
    def host(self) -> bool:
        return self.kind in HOST_KINDS

    def row(self) -> dict[str, Any]:
        return {"name": self.name, "ops": list(self.ops), "kind": self.kind, "placement": self.placement,
                "reason": self.reason, "predicted_ms": self.predicted_s * 1e3, "group": self.group,
                "layer": None if self.layer is None else self.layer.spec, "transform": self.transform,
                "config": None if self.config is None else self.config.to_dict(),
                "epilogue": None if self.epilogue is None else dict(self.epilogue.__dict__),
                "alternatives_ms": {k: v * 1e3 for k, v in self.alternatives.items()},
                "reads_in_place": [{"tensor": t, "buffer": b, "offset": o} for t, b, o in self.reads]}


@dataclass(frozen=True, eq=False)
class Plan:
    """Every op of `network` placed on `hw` + `board`'s CPU; `batch` = the padded batch VTA runs."""

    network: Network | QuantizedNetwork
    hw: HwConfig
    board: Board
    batch: int
    steps: tuple[Step, ...]
    cpu_dtype: str = CPU_DTYPE
    request_batch: int = 1

    @property
    def graph(self) -> Network:
        return self.network.network if isinstance(self.network, QuantizedNetwork) else self.network

    @property
    def latency_s(self) -> float:
        """One request through the whole network (VTA at the padded batch)."""
        return sum(s.predicted_s for s in self.steps)

    @property
    def batch_latency_s(self) -> float:
        return sum(s.predicted_s if s.batch_s is None else s.batch_s for s in self.steps)

    @property
    def throughput_ips(self) -> float:
        """Images per second when every step serves a full padded batch, one batch after another."""
        return self.batch / self.batch_latency_s

    def seconds(self, placement: str) -> float:
        return sum(s.predicted_s for s in self.steps if s.placement == placement)

    @property
    def vta_s(self) -> float:
        return self.seconds(VTA)

    @property
    def cpu_s(self) -> float:
        return self.seconds(CPU)

    def step_of(self, op: str) -> Step:
        """The step that computes op `op`."""
        for s in self.steps:
            if op in s.ops and not s.host:
                return s
        raise KeyError(op)

    def summary(self) -> dict[str, Any]:
        return {"network": self.graph.name, "hw": self.hw.name, "board": self.board.name, "cpu": self.board.cpu,
                "cpu_dtype": self.cpu_dtype, "batch": self.batch, "request_batch": self.request_batch,
                "latency_ms": self.latency_s * 1e3, "throughput_ips": self.throughput_ips,
                "vta_ms": self.vta_s * 1e3, "cpu_ms": self.cpu_s * 1e3,
                "host_ms": sum(s.predicted_s for s in self.steps if s.host) * 1e3,
                "steps": len(self.steps), "vta_steps": sum(s.placement == VTA for s in self.steps)}

    def op_rows(self) -> list[dict[str, Any]]:
        """One row per op of the network (and per host pass), in execution order: where it runs,
        its fused group, predicted ms (a group's time on its first op, 0 on the ops fused into it)
        and the reason."""
        kinds = {op.name: op.kind for op in self.graph.ops}
        rows = []
        for s in self.steps:
            for i, name in enumerate(s.ops or (s.name,)):
                rows.append({"name": name, "kind": kinds.get(name, s.kind), "placement": s.placement,
                             "predicted_ms": s.predicted_s * 1e3 if i == 0 else 0.0, "group": s.group or s.name,
                             "host": s.host, "transform": s.transform if i == 0 else None,
                             "reason": s.reason if i == 0 else f"fused into {s.name} ({s.kind})"})
        return rows

    def to_json(self) -> dict[str, Any]:
        return {**self.summary(), "ops": self.op_rows(), "steps": [s.row() for s in self.steps]}


def _fallback_configs(layer: Layer, hw: HwConfig, space: Any) -> Any:
    """The configs `fused_time` scans when the chosen one has no room for the fused operands:
    every valid template config; on a larger family (`from_template`) the template's points
    there (the same programs, so the same result as the template family's scan), not the
    family's 10^5-10^6 valid configs (timing each with its epilogue took minutes per network)."""
    if getattr(space, "family", "autotvm") == "autotvm" or not hasattr(space, "from_template"):
        yield from (space.get(int(i)) for i in space.valid_indices())
        return
    tspace = get_space(layer, hw)
    for i in tspace.valid_indices():
        try:
            yield space.from_template(tspace.get(int(i)))
        except CodesignError:  # a template config the family cannot express: not a point there
            continue


def _ms(s: float) -> str:
    return f"{s * 1e3:.3f} ms"


# -- CPU costs ----------------------------------------------------------------------------------
def _per_row(shape: tuple[int, ...], rows: int) -> float:
    """Elements per request row: the IR's shapes are at its exported batch, `rows` requests (a
    tensor whose axis 0 is not the batch, after a batch-moving permute, is counted whole)."""
    return math.prod(shape) / rows


class _Costs:
    """CPU and host pass costs on one board, one request of `rows` rows."""

    def __init__(self, net: Network, board: Board, rows: int) -> None:
        self.net, self.board, self.rows = net, board, rows

    def gemm(self, op: Op, rows: int) -> CpuCost:
        """A GEMM op on the CPU: what its kind asks of a CPU (`OpKind.cpu`: the conv's geometry, a
        dense of every leading position), at `rows` rows."""
        return layer_cost(kinds.get(op.kind).cpu(self.net, op, rows, 0, 0), self.board, CPU_DTYPE)

    def pass_s(self, name: str, read: int, write: int, rd: str = CPU_DTYPE, wd: str = CPU_DTYPE) -> float:
        return layer_cost(tensor_pass(name, read, write, rd, wd), self.board).seconds

    def op_cost(self, op: Op, elems: Mapping[str, int], rows: int, write: int | None = None) -> CpuCost | None:
        """A non-GEMM op on the CPU: what its kind asks (`OpKind.cpu`, by default a bytes-bound
        pass over what it reads and writes; `elems`: the elements of each input as stored, padded
        when packed). None for a view, which moves nothing."""
        kind = kinds.get(op.kind)
        if not kind.moves_data:
            return None
        scale = rows / self.rows
        read = int(sum(elems[t] for t in op.inputs) * scale)
        written = int(_per_row(op.shape, self.rows) * rows) if write is None else int(write * scale)
        return layer_cost(kind.cpu(self.net, op, rows, read, written), self.board, CPU_DTYPE)

    def op(self, op: Op, elems: Mapping[str, int], rows: int, write: int | None = None) -> float:
        cost = self.op_cost(op, elems, rows, write)
        return 0.0 if cost is None else cost.seconds

    def basis(self, op: Op, elems: Mapping[str, int], write: int | None = None) -> str:
        """How the op's CPU time is modelled, for its reason."""
        cost = self.op_cost(op, elems, self.rows, write)
        if cost is None or cost.kind == "pass":
            return "bytes-bound pass"
        return f"{CPU_DTYPE} {cost.kind}, {cost.basis}"


# -- the planner --------------------------------------------------------------------------------
def _epilogue(qnet: QuantizedNetwork | None, group: Group) -> Epilogue:
    head, last = group.head, group.ops[-1]
    if head.kind == MATMUL:
        return _matmul_epilogue(qnet, group)
    if qnet is None:  # timing-only: every optional ALU step present (nonzero shifts), an upper bound
        return Epilogue(shift=TIMING_SHIFT, bias=True, relu=group.relu, residual=(1, 0, 1) if group.add else None)
    p = qnet.params[head.name]
    residual = None
    if group.add is not None:
        a = qnet.params[group.add.name]
        k = group.add.inputs.index(group.into_add)
        residual = (a.in_shifts[k], a.in_shifts[1 - k], a.shift)
    clip = clamp_bounds(last, qnet.frac[last.name]) if group.relu and last.kind == "clamp" else None
    return Epilogue(shift=int(p.shift), bias=True, relu=group.relu, residual=residual, clip=clip)


def _matmul_epilogue(qnet: QuantizedNetwork | None, group: Group) -> Epilogue:
    """A matmul's epilogue: its rounded shift (a bias of 2^(shift-1): `transforms.rounding_bias`;
    none at shift 0), then the clip (a fused ReLU / clamp's bounds)."""
    last = group.ops[-1]
    shift = TIMING_SHIFT if qnet is None else int(qnet.params[group.head.name].shift)
    clip = clamp_bounds(last, qnet.frac[last.name]) if qnet is not None and group.relu and last.kind == "clamp" else None
    return Epilogue(shift=shift, bias=shift > 0, relu=group.relu, clip=clip)


def _batched(layer: Layer, batch: int) -> Layer:
    return layer.with_batch(batch)


@dataclass(frozen=True)
class HostPass:
    """A layout change of `tensor` into layout `to` (or the rewrite of an op's input) on the CPU."""

    kind: str
    tensor: str
    to: str
    seconds: float


@dataclass
class _VtaOption:
    rewrite: Rewrite
    config: Config
    vta_s: float
    host: list[HostPass]  # the host passes it needs first
    unpack_s: float = 0.0  # a matmul: the unpack of its output its consumers need (emitted by them)
    reads: tuple[tuple[str, str, int], ...] = ()  # operands read in place from a packed buffer

    @property
    def seconds(self) -> float:
        return self.vta_s + sum(h.seconds for h in self.host) + self.unpack_s


class _Planner:
    def __init__(self, net: Network | QuantizedNetwork, hw: HwConfig, board: Board, choose: Choose) -> None:
        self.qnet = net if isinstance(net, QuantizedNetwork) else None
        self.net = net.network if isinstance(net, QuantizedNetwork) else net
        self.hw, self.board, self.choose = hw, board, choose
        rows = {shape[0] for _, shape in self.net.inputs} or {1}
        self.rows = max(rows)
        self.batch = round_up(self.rows, hw.batch)
        self.costs = _Costs(self.net, board, self.rows)
        self.have: dict[str, set[str]] = {n: {FLOAT} for n, _ in self.net.inputs}
        self.packed_elems: dict[str, int] = {}  # tensor -> elements of its packed (padded) copy
        # tensor -> where a packed buffer holds its elements (VTA outputs, views of them), made
        # when first asked (`located`) and dropped once every consumer is placed
        self.locations: dict[str, Callable[[], Located] | Located] = {}
        self.steps: list[Step] = []
        self.group = ""  # the GEMM group being placed
        self.calls = 1   # how many times the form `choose` is asked about runs (a matmul's entries)

    # -- layouts --------------------------------------------------------------------------------
    def elems(self, tensor: str, layout: str) -> int:
        if layout == PACKED:
            return self.packed_elems[tensor]
        return math.prod(self.net.shape(tensor))

    def _scale(self) -> float:
        return self.batch / self.rows

    def _packed_size(self, tensor: str) -> int:
        shape = self.net.shape(tensor)
        c = round_up(shape[1], self.hw.block_in) if len(shape) > 1 else 1
        return self.batch * c * math.prod(shape[2:])

    def need(self, tensor: str, to: str) -> HostPass | None:
        """The host pass that makes `tensor` available in layout `to`, or None when it is."""
        have = self.have[tensor]
        if to in have:
            return None
        write = self._packed_size(tensor) if to == PACKED else self.elems(tensor, HOST)
        if have == {FLOAT}:
            read = self.elems(tensor, HOST)
            return HostPass("quantize", tensor, to, self.costs.pass_s(f"quantize {tensor}", read, write, "float32"))
        src = HOST if HOST in have else (PACKED if PACKED in have else VIEW)
        kind = "pack" if to == PACKED else "unpack"
        return HostPass(kind, tensor, to, self.costs.pass_s(f"{kind} {tensor}", self.elems(tensor, src), write))

    def located(self, tensor: str) -> Located | None:
        """Where a packed buffer holds `tensor`'s elements, or None (not tracked)."""
        got = self.locations.get(tensor)
        if got is None or isinstance(got, Located):
            return got
        self.locations[tensor] = got = got()
        return got

    def read_in_place(self, op: Op, rw: Rewrite, tensor: str) -> tuple[str, str, int] | None:
        """(tensor, buffer, offset) when the VTA form `rw` of `op` reads its first operand
        `tensor` where a packed buffer already holds it (`layouts.window`), else None."""
        src = self.located(tensor)
        if src is None:
            return None
        off = window(src, input_slots(self.net, op, rw, self.hw))
        return None if off is None else (tensor, src.buffer, off)

    def residual_in_place(self, group: Group, rw: Rewrite) -> tuple[str, str, int] | None:
        """(residual, buffer, offset) when a packed buffer already holds the residual of `group`'s
        fused add as the VTA form `rw` loads it into ACC (its output layout), else None. Not when
        the residual is also the GEMM's input (one tensor, one read per step)."""
        res = group.residual
        src = self.located(res) if res is not None and res != group.head.inputs[0] else None
        if src is None:
            return None
        slots = residual_slots(rw, self.hw, self.net.shape(group.head.inputs[0]), self.net.shape(group.head.name),
                               group.views)
        off = window(src, slots)
        return None if off is None else (res, src.buffer, off)

    def emit_host(self, hp: HostPass, before: str) -> None:
        have = self.have[hp.tensor]
        src = FLOAT if have == {FLOAT} else (HOST if HOST in have else (PACKED if PACKED in have else VIEW))
        gather = (f", a gather from {loc.buffer}'s packed bytes"
                  if src in (PACKED, VIEW) and (loc := self.located(hp.tensor)) is not None else "")
        what = {"quantize": f"quantize float32 -> int8{' + pack into VTA blocks' if hp.to == PACKED else ''}",
                "pack": f"pack int8 NCHW -> VTA blocks (zero-padded to BATCH/BLOCK){gather}",
                "unpack": f"unpack VTA blocks -> int8 NCHW{gather}",
                "rewrite": f"{'quantize + ' if src == FLOAT else ''}host rewrite into VTA blocks{gather}"}[hp.kind]
        self.steps.append(Step(name=f"{hp.kind}:{hp.tensor}", ops=(), kind=hp.kind, placement=CPU,
                               reason=f"{what} ({src} -> {hp.to}) for {before}", layer=None, epilogue=None,
                               predicted_s=hp.seconds, alternatives={}, transform=None, inputs=(hp.tensor,),
                               output=hp.tensor, batch_s=hp.seconds * self._scale(), group=before))
        if hp.kind == "rewrite":  # its output is the rewritten layer's input, no copy of the tensor
            return
        if hp.to == PACKED:
            self.packed_elems.setdefault(hp.tensor, self._packed_size(hp.tensor))
        have.add(hp.to)
        if hp.kind == "quantize":
            have.discard(FLOAT)

    # -- GEMM groups ----------------------------------------------------------------------------
    def vta_options(self, group: Group, layer: Layer, epi: Epilogue) -> tuple[list[_VtaOption], list[str]]:
        options, why = [], []
        x = group.head.inputs[0]
        forms = rewrites(_batched(layer, layer.batch), self.hw)
        if group.head.kind == MATMUL:
            # E calls of the entry's dense (or of it as a 1x1 conv over its rows), or one grouped conv
            calls = calls_of(group.head)
            forms = [dataclasses.replace(f, calls=calls) for f in forms]
            forms += [g for g in (entries_as_groups(layer, calls, self.hw),) if g is not None]
        for rw in forms:
            self.calls = rw.calls
            label = rw.kind or "as is"
            reason = fused_reason(rw.layer, epi, self.hw)
            if reason is not None:
                why.append(f"{label}: {reason}")
                continue
            try:
                config, seconds = self.choose(rw.layer)
            except CodesignError as exc:
                why.append(f"{label}: {exc}")
                continue
            fused = self.fused_time(rw.layer, config, seconds, epi)
            if isinstance(fused, str):
                why.append(f"{label}: {fused}")
                continue
            config, seconds = fused
            host: list[HostPass] = []
            if group.head.kind == MATMUL:  # each operand packed per entry (or read in place)
                host, reads = self.matmul_host(group.head, rw)
                options.append(_VtaOption(rw, config, seconds * rw.calls, host, self.matmul_unpack(group, rw), reads))
                continue
            reads: tuple[tuple[str, str, int], ...] = ()
            # a pass would be charged: unless the input already lies in a buffer as this form reads it
            if ((rw.reshapes_input or PACKED not in self.have[x])
                    and (got := self.read_in_place(group.head, rw, x)) is not None):
                reads = (got,)
            elif rw.reshapes_input:  # read from the host layout (or the float input: quantized on the way)
                read, write = rw.host_elems()
                src_float = self.have[x] == {FLOAT}
                if not src_float and HOST not in self.have[x]:
                    host.append(self.need(x, HOST))
                host.append(HostPass("rewrite", x, PACKED, self.costs.pass_s(
                    f"{rw.kind} {x}", read, write, "float32" if src_float else CPU_DTYPE)))
            elif (need := self.need(x, PACKED)) is not None:
                host.append(need)
            if group.residual is not None and (need := self.need(group.residual, PACKED)) is not None:
                # no pack either when a buffer holds the residual as the epilogue loads it
                got = self.residual_in_place(group, rw)
                if got is None:
                    host.append(need)
                else:
                    reads += (got,)
            options.append(_VtaOption(rw, config, seconds, host, reads=reads))
        return options, why

    def matmul_host(self, op: Op, rw: Rewrite) -> tuple[list[HostPass], tuple[tuple[str, str, int], ...]]:
        """(host passes, operands read in place) of a matmul on VTA: the first operand read where
        a packed buffer already holds it as the form's INP blocks (`read_in_place`: Q in the QKV
        projection's output, the attention probabilities in the softmax's), else each operand
        broadcast over the batch entries and packed into the form's blocks — the first as INP
        (E·M'·K' elements), the second transposed as WGT (E·N'·K') — in one pass from the host
        layout or gathered from the packed buffer that holds it (unpacked first when only packed
        and untracked); a float graph input quantized in the same pass."""
        v, host, reads = rw.layer, [], []
        written = (rw.calls * math.prod(v.data_shape()), rw.calls * math.prod(v.weight_shape()))
        for k, t in enumerate(op.inputs):
            if k == 0 and (got := self.read_in_place(op, rw, t)) is not None:
                reads.append(got)
                continue
            src_float = self.have[t] == {FLOAT}
            gather = not src_float and HOST not in self.have[t] and self.located(t) is not None
            if not src_float and not gather and HOST not in self.have[t] and not any(h.tensor == t for h in host):
                host.append(self.need(t, HOST))
            what = "input" if k == 0 else "weight"
            host.append(HostPass("rewrite", t, PACKED, self.costs.pass_s(
                f"{'gather' if gather else 'pack'} {what} entries {t}", self.elems(t, HOST), written[k],
                "float32" if src_float else CPU_DTYPE)))
        return host, tuple(reads)

    def matmul_unpack(self, group: Group, rw: Rewrite) -> float:
        """Seconds of the unpack its consumers will need of a matmul's packed output (a softmax,
        a permute: anything not layout-free), counted in its VTA figure so that the choice sees
        it (the consumer's step emits it, as for any GEMM)."""
        out = group.output
        users = self.net.consumers(out)
        # a view or positional consumer reads it where it lies (its own consumers pay any gather)
        if out not in self.net.outputs and all(
                (k := kinds.get(u.kind)).layout_free(self.net, u) or k.view or k.positional for u in users):
            return 0.0
        packed = math.prod(rw.layer.output_shape()) * rw.calls
        return self.costs.pass_s(f"unpack {out}", packed, self.elems(out, HOST))

    def matmul_reason(self, op: Op) -> str | None:
        """Why VTA cannot run matmul `op` bit-exactly, or None: a scale that is not a power of two
        needs a multiply (VTA's ALU has none); the rounding offset must not wrap the int32 ACC."""
        p = self.qnet.params[op.name] if self.qnet is not None else None
        mul = p.mul if p is not None else scale_factor(float(op.attrs.get("scale", 1.0)))[0]
        if mul != 1:
            return (f"scale {op.attrs.get('scale')} is not a power of two: its integer multiplier {mul} needs a "
                    "multiply, and VTA's ALU has none")
        k = int(op.attrs["contract"])
        if k * 128 * 128 + (1 << 15) >= 1 << 31:
            return f"contraction over {k} terms: the int32 sum plus its rounding offset could wrap VTA's ACC"
        return None

    def fused_time(self, layer: Layer, config: Config, seconds: float, epi: Epilogue) -> tuple[Config, float] | str:
        """(config, seconds) of `layer` with its epilogue: the chooser's seconds plus what the
        epilogue adds to that config in the timing model (the chooser's figure may be a board
        measurement); when the chosen config has no SRAM room for the fused operands, the fastest
        config of its space that has (model seconds); or why none has."""
        try:
            extra = measure_fused(layer, config, self.hw, epi).seconds - measure(layer, config, self.hw).seconds
            return config, seconds + extra
        except InvalidSchedule as exc:
            first = str(exc)
        space = get_space(layer, self.hw, getattr(config, "family", "autotvm"))
        best: tuple[float, Config] | None = None
        for c in _fallback_configs(layer, self.hw, space):
            try:
                t = measure_fused(layer, c, self.hw, epi).seconds
            except InvalidSchedule:
                continue
            if best is None or t < best[0]:
                best = (t, c)
        if best is None:
            return f"no schedule has room for the fused epilogue ({first})"
        return best[1], best[0]

    def split_add(self, group: Group, layer: Layer, fused: list[_VtaOption]) -> str | None:
        """Why the residual add (and its ReLU) of `group` is cheaper as CPU passes over the packed
        tensors after the plain GEMM than fused into it (the fused residual costs an identity GEMM
        and ALU passes over the tile), or None when fusing is at least as cheap."""
        plain = group.without_add()
        options, _ = self.vta_options(plain, layer, _epilogue(self.qnet, plain))
        if not fused or not options or (PACKED not in self.have.get(group.residual, set()) and not group.views):
            return None
        fused_s = min(o.seconds for o in fused)
        best = min(options, key=lambda o: o.seconds)
        plain_s = best.seconds
        if group.views:
            # a view of the GEMM's blocks is not the residual's packed layout: the CPU add runs on
            # the host layout, after a gather of the view (and the residual in the host layout)
            host = math.prod(self.net.shape(group.add.name))
            need = self.need(group.residual, HOST)
            tail = (self.costs.op(group.add, dict.fromkeys(group.add.inputs, host), self.rows)
                    + self.costs.pass_s(f"unpack {group.into_add}", math.prod(best.rewrite.layer.output_shape()), host)
                    + (0.0 if need is None else need.seconds))
        else:
            res = self.elems(group.residual, PACKED)
            # the add's pass; its ReLU rides in the same pass (a clip in registers, no bytes of its own)
            tail = self.costs.op(group.add, dict.fromkeys(group.add.inputs, res), self.rows)
        if plain_s + tail >= fused_s:
            return None
        return (f"not fused: the plain GEMM {_ms(plain_s)} + CPU passes {_ms(tail)} < fused into "
                f"{group.head.name} {_ms(fused_s)}")

    def gemm(self, group: Group) -> None:
        head = group.head
        self.group = head.name  # whose forms `choose` is asked about (`choose_layers`)
        layer, why_none = layer_of(self.net, head)
        if layer is not None and head.kind == MATMUL and (blocked := self.matmul_reason(head)) is not None:
            why_none = blocked
        epi = _epilogue(self.qnet, group)
        options, why = ([], [why_none]) if layer is None or why_none else self.vta_options(group, layer, epi)
        if group.add is not None and layer is not None and (split := self.split_add(group, layer, options)):
            self.gemm(group.without_add())
            for view in group.views:  # moves nothing: its output's positions follow the GEMM's
                self.other(view, {})
            # the add, with its ReLU (the add's sole user, `fusion.groups`) in the same CPU pass
            tail = group.ops[1 + len(group.views):]
            self.other(group.add, {o.name: split for o in tail}, clips=tail[1:])
            return
        # CPU: the GEMM (TVM fuses ReLU and the add into its kernel: the add reads one more tensor).
        cost = self.costs.gemm(head, self.rows)
        cpu_s, cpu_batch_s = cost.seconds, self.costs.gemm(head, self.batch).seconds
        reads = ([head.inputs[0]] if head.kind != MATMUL else list(dict.fromkeys(head.inputs))) + (
            [group.residual] if group.residual else [])
        cpu_host = [h for h in (self.need(t, HOST) for t in reads) if h is not None]
        if group.residual:
            extra = self.costs.pass_s("residual", self.elems(group.residual, HOST), 0) - self.board_overhead()
            cpu_s += extra
            cpu_batch_s += extra * self._scale()
        cpu_total = cpu_s + sum(h.seconds for h in cpu_host)
        alternatives = {CPU: cpu_total}
        for o in options:
            alternatives[f"{VTA}:{o.rewrite.kind}" if o.rewrite.kind else VTA] = o.seconds
        what = f"{kinds.get(head.kind).label}, " if head.kind == MATMUL else ""
        memory = ("" if cost.memory_basis == "measured" else
                  f"; its {_ms(cost.memory_s)} of memory traffic at a bandwidth {cost.memory_basis}")
        cpu_text = f"CPU {_ms(cpu_total)} ({what}{CPU_DTYPE} {cost.kind}, {cost.basis}{memory})"
        best = min(options, key=lambda o: o.seconds) if options else None
        name, ops, kind = head.name, group.names, group.kind
        if best is not None and best.seconds <= cpu_total:
            for h in best.host:
                self.emit_host(h, name)
            form = "" if best.rewrite.kind is None else f" via {best.rewrite.describe()}"
            if head.kind == MATMUL and best.rewrite.kind != ENTRIES:
                calls = best.rewrite.calls
                form += f", {calls} call{'s' if calls > 1 else ''} of {best.rewrite.layer.name} (one per batch entry)"
            host_s = sum(h.seconds for h in best.host)
            unpack = f" + unpack after {_ms(best.unpack_s)}" if best.unpack_s else ""
            in_place = "".join(f"; reads {'its residual ' if t == group.residual else ''}{t} in place from {b}'s "
                               f"packed output (offset {o}: no pack)" for t, b, o in best.reads)
            reason = (f"VTA {_ms(best.seconds)} (schedule {_ms(best.vta_s)} + host {_ms(host_s)}{unpack}){form} "
                      f"< {cpu_text}{in_place}")
            self.steps.append(Step(name=name, ops=ops, kind=kind, placement=VTA, reason=reason, layer=best.rewrite.layer,
                                   epilogue=epi, predicted_s=best.vta_s, alternatives=alternatives,
                                   transform=best.rewrite.kind, config=best.config, rewrite=best.rewrite,
                                   residual=group.residual, inputs=tuple(reads), output=group.output,
                                   batch_s=best.vta_s, group=name, reads=best.reads))
            out = best.rewrite.layer.output_shape()
            self.packed_elems[group.output] = math.prod(out) * best.rewrite.calls
            # behind views (a residual add fused through them) it lies in the GEMM's blocks, not
            # its own: a consumer that wants it packed gathers it
            self.have[group.output] = {VIEW} if group.views else {PACKED}
            rw, shape, matmul = best.rewrite, self.net.shape(head.name), head.kind == MATMUL
            self.locations[group.output] = lambda: gemm_output(rw, self.hw, shape, group.output, matmul, group.views)
            return
        for h in cpu_host:
            self.emit_host(h, name)
        if best is None:
            reason = f"CPU {_ms(cpu_total)}: VTA cannot run it ({'; '.join(w for w in why if w)})"
        else:
            reason = (f"{cpu_text} < VTA {_ms(best.seconds)} (schedule {_ms(best.vta_s)} + host "
                      f"{_ms(best.seconds - best.vta_s)}{'' if best.rewrite.kind is None else ', ' + best.rewrite.kind})")
        self.steps.append(Step(name=name, ops=ops, kind=kind, placement=CPU, reason=reason, layer=layer, epilogue=None,
                               predicted_s=cpu_s, alternatives=alternatives, transform=None, residual=group.residual,
                               inputs=tuple(reads), output=group.output, batch_s=cpu_batch_s, group=name))
        self.have[group.output] = {HOST}

    def board_overhead(self) -> float:
        return layer_cost(tensor_pass("nothing", 0, 0), self.board).seconds

    # -- other ops ------------------------------------------------------------------------------
    def _pool_params(self, op: Op) -> QParams:
        """The pool's integer parameters: the quantized network's, else (timing only) the ones
        `network.quantized.plan` would give its window (a multiply when it is not 2^p)."""
        if self.qnet is not None:
            return self.qnet.params.get(op.name, QParams())
        if op.kind == "max_pool2d":
            return QParams()
        mul, shift = pool_factors(window_count(op, self.net.shape(op.inputs[0])))
        return QParams(shift=shift, mul=mul)

    def vta_pool(self, op: Op) -> tuple[Any, float, list[HostPass]] | str:
        """(pool, VTA seconds, host passes it needs) of a pool op on VTA's ALU, or why not."""
        pool, why = pools.pool_of(self.net, op, self._pool_params(op))
        if pool is None:
            return why
        # the packed input carries zero-padded channels and rows: the pool runs on all of them
        pool = dataclasses.replace(pool, batch=self.batch, channels=round_up(pool.channels, self.hw.block_in))
        why = pools.pool_reason(pool, self.hw)
        if why is not None:
            return why
        need = self.need(op.inputs[0], PACKED)
        return pool, pools.measure_pool(pool, self.hw).seconds, [need] if need is not None else []

    def other(self, op: Op, why_not_fused: Mapping[str, str], clips: tuple[Op, ...] = ()) -> None:
        """`op` on the CPU (or a pool on VTA when cheaper). `clips`: ReLU/clamp ops on its output
        computed in the same pass on the CPU (a max/min in registers: no bytes, no time of their own)."""
        kind = kinds.get(op.kind, op.where())
        layout_free = kind.layout_free(self.net, op)
        ins = list(dict.fromkeys(op.inputs))
        layout = PACKED if layout_free and all(PACKED in self.have[t] for t in ins) else HOST
        # a view (host layout wanted) or a positional op (also when layout-free: in place its output
        # stays tracked, so a consumer can read it where it lies) over a tracked packed buffer
        if (((layout == HOST and kind.view) or kind.positional) and not clips and len(ins) == 1
                and HOST not in self.have[ins[0]] and (src := self.located(ins[0])) is not None):
            self.in_place(op, kind, src)
            return
        cpu_host = [h for h in (self.need(t, HOST) for t in ins) if h is not None] if layout == HOST else []
        elems = {t: self.elems(t, layout) for t in ins}
        seconds = self.costs.op(op, elems, self.rows)
        batch_s = self.costs.op(op, {t: int(e * self._scale()) for t, e in elems.items()}, self.batch)
        cpu_total = seconds + sum(h.seconds for h in cpu_host)
        what = kind.label
        cpu_text = f"CPU {_ms(cpu_total)} ({what}, {self.costs.basis(op, elems)} over the {layout} layout)"
        alternatives = {CPU: cpu_total}
        if kind.vta == kinds.POOL and not clips:
            vta = self.vta_pool(op)
            if isinstance(vta, str):
                vta_why = f"VTA cannot run it: {vta}"
            else:
                pool, vta_s, host = vta
                vta_total = vta_s + sum(h.seconds for h in host)
                alternatives[VTA] = vta_total
                if vta_total <= cpu_total:
                    for h in host:
                        self.emit_host(h, op.name)
                    reason = f"VTA {_ms(vta_total)} ({pool.kind} pool on the ALU, host {_ms(vta_total - vta_s)}) < {cpu_text}"
                    self.steps.append(Step(name=op.name, ops=(op.name,), kind=op.kind, placement=VTA, reason=reason,
                                           layer=None, epilogue=None, predicted_s=vta_s, alternatives=alternatives,
                                           transform=None, inputs=tuple(op.inputs), output=op.name, batch_s=vta_s,
                                           group=op.name, pool=pool))
                    self.have[op.name] = {PACKED}
                    self.packed_elems[op.name] = pool.batch * pool.channels * pool.out_h * pool.out_w
                    return
                vta_why = f"VTA {_ms(vta_total)} ({pool.kind} pool on the ALU, host {_ms(vta_total - vta_s)})"
            reason = f"{cpu_text}{'; ' if vta_why.startswith('VTA cannot') else ' < '}{vta_why}"
        elif kind.vta == kinds.EPILOGUE:
            why = why_not_fused.get(op.name)
            reason = (f"{cpu_text}: VTA's ALU runs {what} only inside a conv/dense epilogue"
                      + (f" ({why})" if why else ""))
        else:
            reason = f"{cpu_text}: VTA has no lowering for {op.kind}"
        if not kind.moves_data:
            reason = f"CPU 0 ms ({what}{'; on 1x1 pixels VTA blocks are the dense layout' if layout == PACKED else ''})"
        for h in cpu_host:
            self.emit_host(h, op.name)
        if clips:
            reason += f"; {' and '.join(kinds.get(c.kind).label for c in clips)} in the same pass"
        out = clips[-1].name if clips else op.name
        self.steps.append(Step(name=op.name, ops=(op.name, *(c.name for c in clips)),
                               kind="+".join((op.kind, *(c.kind for c in clips))), placement=CPU, reason=reason,
                               layer=None, epilogue=None, predicted_s=seconds, alternatives=alternatives,
                               transform=None, inputs=tuple(op.inputs), output=out, batch_s=batch_s, group=op.name))
        # same blocks as its input: padded channels (and rows) carried along
        padded_c = (self.packed_elems[ins[0]] // (self.batch * math.prod(self.net.shape(ins[0])[2:]))
                    if layout == PACKED else 0)
        for name in (op.name, *(c.name for c in clips)):
            self.have[name] = {layout}
            if layout == PACKED:
                self.packed_elems[name] = self.batch * padded_c * math.prod(self.net.shape(name)[2:])

    def in_place(self, op: Op, kind: kinds.OpKind, src: Located) -> None:
        """`op` over its input where packed buffer `src.buffer` holds it: a view moves nothing (its
        output's positions follow, `layouts.through`); a positional op (softmax) is one pass that
        reads the elements through their positions and writes its output at the same positions of
        a buffer of its own (pads zero) — the integer reference's values, in the packed layout."""
        x = op.inputs[0]
        reads = ((x, src.buffer, -1),)
        if kind.view:
            self.steps.append(Step(name=op.name, ops=(op.name,), kind=op.kind, placement=CPU,
                                   reason=(f"CPU 0 ms ({kind.label}): a view of {src.buffer}'s packed VTA output, no data "
                                           "moved (a consumer that needs another layout gathers it in its own pass)"),
                                   layer=None, epilogue=None, predicted_s=0.0, alternatives={CPU: 0.0}, transform=None,
                                   inputs=(x,), output=op.name, batch_s=0.0, group=op.name, reads=reads))
            self.have[op.name] = {VIEW}
            self.locations[op.name] = through(op, src)
            return
        elems = {x: src.size}
        seconds = self.costs.op(op, elems, self.rows, write=src.size)
        batch_s = self.costs.op(op, {x: int(src.size * self._scale())}, self.batch, write=int(src.size * self._scale()))
        reason = (f"CPU {_ms(seconds)} ({kind.label}, {self.costs.basis(op, elems, src.size)} over {src.buffer}'s packed "
                  "VTA layout in place: read through its positions, written at the same positions, pads zero; "
                  "no unpack or pack around it)")
        self.steps.append(Step(name=op.name, ops=(op.name,), kind=op.kind, placement=CPU, reason=reason, layer=None,
                               epilogue=None, predicted_s=seconds, alternatives={CPU: seconds}, transform=None,
                               inputs=(x,), output=op.name, batch_s=batch_s, group=op.name, reads=reads))
        # the same layout as its input: the canonical packed one when the input had it
        self.have[op.name] = {PACKED} if PACKED in self.have[x] else {VIEW}
        if PACKED in self.have[x]:
            self.packed_elems[op.name] = self.packed_elems[x]
        self.locations[op.name] = Located(op.name, src.size, src.positions)

    def outputs(self) -> None:
        for t in self.net.outputs:
            have = self.have[t]
            src = HOST if HOST in have else (PACKED if PACKED in have else (VIEW if VIEW in have else FLOAT))
            read = self.elems(t, src) if src != FLOAT else self.elems(t, HOST)
            write = self.elems(t, HOST)
            seconds = self.costs.pass_s(f"dequantize {t}", read, write, CPU_DTYPE, "float32")
            what = ("unpack VTA blocks + dequantize int8 -> float32" if src in (PACKED, VIEW)
                    else "dequantize int8 -> float32")
            self.steps.append(Step(name=f"dequantize:{t}", ops=(), kind="dequantize", placement=CPU,
                                   reason=f"{what} of output {t}", layer=None, epilogue=None, predicted_s=seconds,
                                   alternatives={}, transform=None, inputs=(t,), output=t,
                                   batch_s=seconds * self._scale()))

    def run(self) -> Plan:
        gs, why = groups(self.net)
        placed: set[str] = set()
        for g in gs:
            if g.head.kind in GEMM_KINDS:
                self.gemm(g)
            else:
                self.other(g.head, why)
            placed.update(g.names)
            # a buffer's positions are kept while an unplaced op may read them
            for t in {t for op in g.ops for t in op.inputs} & set(self.locations):
                if t not in self.net.outputs and all(u.name in placed for u in self.net.consumers(t)):
                    del self.locations[t]
        self.outputs()
        return Plan(network=self.qnet or self.net, hw=self.hw, board=self.board, batch=self.batch,
                    steps=tuple(self.steps), request_batch=self.rows)


def plan_network(net: Network | QuantizedNetwork, hw: HwConfig, board: Board | str, choose: Choose) -> Plan:
    """Every op of `net` placed on `hw` or `board`'s CPU by predicted cost. `choose(layer)` gives
    the schedule of a VTA layer and its seconds (`best_template_schedule` by default in the CLI).
    Works without weights (meta-device networks: shapes only)."""
    board = board if isinstance(board, Board) else Board.named(board)
    return _Planner(net, HwConfig.resolve(hw), board, choose).run()


def _asked(net: Network | QuantizedNetwork, hw: HwConfig, board: Board | str) -> dict[str, dict[Layer, int]]:
    """Per conv/linear/matmul group, in plan order, the layers a plan asks `choose` about with
    their calls (a matmul's per-entry form once per batch entry): one plan with every group on the
    CPU, no schedule timed."""
    board = board if isinstance(board, Board) else Board.named(board)
    asked: dict[str, dict[Layer, int]] = {}

    def probe(layer: Layer) -> tuple[Config, float]:
        asked.setdefault(planner.group, {})[layer] = planner.calls
        raise CodesignError("probe: layers only")

    planner = _Planner(net, HwConfig.resolve(hw), board, probe)
    planner.run()
    return asked


def choose_layers(net: Network | QuantizedNetwork, hw: HwConfig, board: Board | str) -> dict[Layer, int]:
    """The layers `plan_network(net, hw, board, choose)` asks `choose` about (every VTA form of
    every conv/linear/matmul group whose epilogue VTA can run), each with the number of groups that
    ask for it (a matmul's per-entry forms once per batch entry): its occurrences per request.
    What is asked depends on the network and `hw` only, not on the answers, so a caller can tune
    these layers together before planning (the sweep's task scheduler)."""
    out: dict[Layer, int] = {}
    for forms in _asked(net, hw, board).values():
        for layer, calls in forms.items():
            out[layer] = out.get(layer, 0) + calls
    return out


def layer_alternatives(net: Network | QuantizedNetwork, hw: HwConfig, board: Board | str) -> list[dict[Layer, int]]:
    """The forms each conv/linear/matmul group asks `choose` about: one {layer: calls} per group, in
    plan order. A group with 2+ forms (the stem as a direct conv and through space-to-depth, a
    matmul's entries or grouped form) runs one of them, so a search may spend little on a form
    another form of every group asking for it clearly beats (`codesign.tune.template_local`)."""
    return list(_asked(net, hw, board).values())


__all__ = ["Step", "Plan", "plan_network", "choose_layers", "layer_alternatives", "VTA", "CPU", "HOST_KINDS", "CPU_DTYPE", "Choose"]
