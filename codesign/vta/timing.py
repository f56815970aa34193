"""Cycle-approximate timing model of VTA's decoupled access-execute pipeline (reference §4).

Three in-order module queues (load, compute, store; dispatch rule §2.9) advance concurrently and
synchronize through the four dependency-token FIFOs (§2.8, §3.8). The model (§4.6):

* Every module keeps a local clock `free[m]`. The head instruction of a module may start at
  `max(free[m], time of each token it pops)`; tokens are popped before and pushed at the *end*
  of an instruction, so a FIFO holds the times at which its tokens become available.
* The one shared memory port (§4.2: five AXI masters on one SmartConnect into one 64-bit ACP
  port) is a resource that the *data beats* of a DMA occupy; request latency, per-row burst
  set-up and padding cycles keep the module busy but leave the port free for the others. The
  ready head instructions of the three modules are taken in order of their contended event
  (a DMA's port request time, otherwise the start time), so the port is arbitrated first come,
  first served in simulated time (at whole-transfer granularity).
* Costs per instruction (the PYNQ bitstream is the HLS design, so HLS timings are used, §4.3):

  - LOAD/STORE with x_size == 0 (a sync no-op) and FINISH: `sync_cycles` (§4.4 `sSync`).
  - LOAD/STORE: `dma_insn_latency + y_size*dma_row_overhead + pad_elems*pad_cycles_per_elem`
    off the port, then `y_size*ceil(x_size*E/port_bytes) / eff` cycles on the port (E =
    element bytes of the memory type; port_bytes = hw.bus_bytes, or `uop_port_bytes` for LOAD
    UOP: the HLS uop port is 32-bit, §4.5). Pad elements (INP/ACC only; WGT and UOP loads have
    no pad path, §4.6) are `(y_pad_0+y_pad_1)*(x_pad_0+x_size+x_pad_1) + y_size*(x_pad_0+
    x_pad_1)`, written one per cycle (§4.3 `reset_mem`).
  - Port efficiency `eff`: on PYNQ the data port is the coherent ACP (§4.2), so DMA traffic is
    served by the ARM's L2 cache when the operator's working set is resident there (AutoTVM
    times repeated calls on the same buffers). With F = DRAM bytes spanned by the program's
    DMAs, hit = min(1, cache_bytes / F) and `1/eff = hit/dma_bytes_per_cycle_efficiency +
    (1 - hit)/dma_dram_efficiency`. (Calibration, issue 3 §5: with one efficiency the two
    ResNet-18 layers with > 1 MB of weights on 1x16 were predicted 12–18% too short while the
    small 1x1 layers were predicted too long; with the L2 term every record is within ~4%.)
  - DMA latencies and efficiencies are given at `ref_clock_mhz` (the calibration clock). The
    memory system is not clocked by the PL, so at another PL clock latencies keep their
    nanoseconds and efficiencies their bytes/s (capped at one beat per cycle); on-chip costs
    (GEMM, ALU, padding, sync) stay in cycles.
  - GEMM: `gemm_insn_overhead + iter_out*iter_in*(n_uop + gemm_loop_overhead)` (II=1 inner
    loop, outer loops not flattened so every (iter_out, iter_in) pair pays a pipeline fill, §4.3).
  - ALU: `alu_insn_overhead + iter_out*iter_in*(n_uop*alu_cycles_per_uop + alu_loop_overhead)`;
    HLS pipelines the ALU at II=2 whether or not `use_imm` is set (only the Chisel ALU does one
    uop per cycle with immediates, §4.4) and PYNQ runs the HLS design, so II=2 always.

Not modelled (small next to the data traffic of real layers): instruction fetch over the port
(16 B per instruction), back-pressure of the 512-entry command queues, AXI burst interleaving
finer than whole transfers, the ACC read-after-write hazard (§3.9).

Device cycles become operator seconds in exactly one place, `predict_seconds`: measured AutoTVM
costs time the whole operator call on the board, including the host-side JIT runtime that
builds every instruction on the ARM CPU before the device runs (§4.7), so the host cost is the
explicit term `host_call_s + host_per_insn_s * n_insns`.

The kernel is a `numba.njit(cache=True)` function over the int64 instruction matrix (columns
`isa.COL`) plus small parameter arrays; `time_program` is the thin Python wrapper.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from numba import njit

from codesign.errors import ConfigError, SimulationError
from codesign.fileio import atomic_write_json, read_document
from codesign.hw.config import HwConfig
from codesign.paths import SIM_DATA
from codesign.vta import isa

DEFAULT_PARAMS_PATH = SIM_DATA / "timing_params.json"


@dataclass(frozen=True)
class TimingParams:
    """Every constant of the timing model, in one place. Units are device cycles unless the name
    ends in `_s` (seconds). "fitted" = set by `codesign calibrate` from measured records; the
    defaults here are physical first guesses used only when no fitted file exists."""

    # -- DMA (shared memory port, reference §4.2, §4.4, §4.5) ---------------------------------
    #: Fraction of the bus's one beat per cycle the shared port sustains when the data is
    #: resident in the ARM L2 cache (the PYNQ data port is the coherent S_AXI_ACP, §4.2, whose
    #: reads and writes go through the Cortex-A9 SCU/L2). fitted.
    dma_bytes_per_cycle_efficiency: float = 0.8
    #: The same fraction when the data misses the L2 and comes from DDR. fitted.
    dma_dram_efficiency: float = 0.5
    #: Bytes of cache between the port and DDR: the 512 KiB L2 of the Zynq-7000 PS (Zynq-7000
    #: TRM, UG585). An operator whose DRAM footprint F (bytes spanned by its DMAs) fits is served
    #: from L2 when timed repeatedly; beyond it a fraction min(1, cache_bytes/F) still hits.
    #: 0 = no cache (every beat at dma_dram_efficiency). fixed by the board.
    cache_bytes: float = 524288.0
    #: Cycles per LOAD/STORE instruction: module invocation + first read request latency. fitted.
    dma_insn_latency: float = 40.0
    #: Cycles per DMA row: one `memcpy` burst per row in the HLS row loop; the burst's request
    #: latency is not overlapped with the previous row (§4.3). fitted.
    dma_row_overhead: float = 10.0
    #: PL clock (MHz) at which the DMA latencies and efficiencies above are expressed: the
    #: clock of the calibration board (PYNQ 100 MHz, §4.1). At another clock they are rescaled
    #: so that memory latency (ns) and bandwidth (bytes/s) stay constant (`_param_array`). fixed.
    ref_clock_mhz: float = 100.0
    #: Cycles per zero-padding element: written one element per cycle by `reset_mem` (§4.3,
    #: Chisel §4.4 alike). fixed by hardware.
    pad_cycles_per_elem: float = 1.0
    #: Bytes per beat of the compute module's uop port: 32-bit in HLS (§4.5). fixed by hardware.
    uop_port_bytes: float = 4.0
    # -- compute module (§4.3, §4.4) ----------------------------------------------------------
    #: Cycles per GEMM instruction: invocation, decode, token handshakes, write-back drain.
    #: fixed at the Chisel estimate of about 6 (§4.4: start 1 + idle 1 + write-back pipe ~4;
    #: HLS publishes no figure and ResNet-18 records cannot separate it from the loop fill).
    gemm_insn_overhead: float = 6.0
    #: Cycles per (iter_out, iter_in) pair of a GEMM: HLS pipeline fill/drain of the II=1 uop
    #: loop (§4.3, derived). fitted.
    gemm_loop_overhead: float = 5.0
    #: Cycles per ALU micro-op: HLS `PIPELINE II=2` (single register-file read port). fixed.
    alu_cycles_per_uop: float = 2.0
    #: Cycles per ALU instruction (invocation, decode, ~4-cycle pipeline latency, §4.4). fixed
    #: like gemm_insn_overhead (same mechanism; not identifiable from ResNet-18 records).
    alu_insn_overhead: float = 6.0
    #: Cycles per (iter_out, iter_in) pair of an ALU instruction: pipeline fill of the II=2
    #: loop. fitted.
    alu_loop_overhead: float = 3.0
    #: Cycles of a sync no-op (x_size == 0) and of FINISH (§4.4 `sSync`). fixed.
    sync_cycles: float = 1.0
    # -- host (§4.7) -------------------------------------------------------------------------
    #: Seconds of host overhead per operator call (launch, cache maintenance, MMIO, polling). fitted.
    host_call_s: float = 100e-6
    #: Host CPU seconds per instruction generated at run time by the JIT runtime. fitted.
    host_per_insn_s: float = 1e-6
    #: Host seconds per byte of the operator's inputs (data + weights) and per byte of its output:
    #: cache maintenance (flush before, invalidate after the call) and copies on the ARM side,
    #: which scale with the buffers, not with the device program. These are environment terms of
    #: a calibration profile (`sim/profiles/`, `codesign calibrate --profile`); 0 in the shipped
    #: fit, whose 20 tophub records cannot separate them from the DMA terms.
    host_per_in_byte_s: float = 0.0
    host_per_out_byte_s: float = 0.0

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise ConfigError(f"timing parameter {f.name}={v!r}: must be a finite number >= 0")
            object.__setattr__(self, f.name, float(v))
        for name in ("dma_bytes_per_cycle_efficiency", "dma_dram_efficiency"):
            v = getattr(self, name)
            if v <= 0 or v > 1:
                raise ConfigError(f"timing parameter {name}={v}: must be in (0, 1]")
        for name in ("uop_port_bytes", "ref_clock_mhz"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"timing parameter {name}: must be > 0")

    @staticmethod
    def names() -> tuple[str, ...]:
        return tuple(f.name for f in fields(TimingParams))

    def to_dict(self) -> dict[str, float]:
        return asdict(self)

    def with_(self, **changes: float) -> TimingParams:
        unknown = sorted(set(changes) - set(self.names()))
        if unknown:
            raise ConfigError(f"unknown timing parameter {unknown[0]!r}; allowed: {', '.join(self.names())}")
        return TimingParams(**{**self.to_dict(), **changes})

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "timing parameters") -> TimingParams:
        if not isinstance(data, dict):
            raise ConfigError(f"{source}: expected a mapping of timing parameters")
        unknown = sorted(set(data) - set(cls.names()))
        if unknown:
            raise ConfigError(f"{source}: unknown timing parameter {unknown[0]!r}; allowed: "
                              + ", ".join(cls.names()))
        try:
            return cls(**data)
        except ConfigError as exc:
            raise ConfigError(f"{source}: {exc}") from None

    @classmethod
    def load(cls, path: str | Path | None = None) -> TimingParams:
        """Parameters from a JSON file written by `save` (default: the shipped fitted
        `sim/timing_params.json`; the documented defaults if that file does not exist)."""
        if path is None:
            if not DEFAULT_PARAMS_PATH.exists():
                return cls()
            path = DEFAULT_PARAMS_PATH
        path = Path(path)
        doc = read_document(path, "timing-parameter file")
        if not isinstance(doc, dict) or "params" not in doc:
            raise ConfigError(f"{path}: expected an object with a 'params' mapping")
        return cls.from_dict(doc["params"], source=str(path))

    def save(self, path: str | Path, provenance: dict[str, Any]) -> None:
        """Write {"params", "provenance"} atomically (temp file + os.replace)."""
        atomic_write_json(path, {"params": self.to_dict(), "provenance": provenance})


@lru_cache(maxsize=8)
def _default_params(mtime: float) -> TimingParams:
    return TimingParams.load()


def default_params() -> TimingParams:
    """The shipped parameters (re-read when the file changes)."""
    try:
        mtime = DEFAULT_PARAMS_PATH.stat().st_mtime
    except FileNotFoundError:
        mtime = -1.0
    return _default_params(mtime)


@dataclass(frozen=True)
class TimingResult:
    """Device cycles of a program, busy cycles per module and data cycles on the shared port."""

    cycles: int
    busy: dict[str, int]
    port_busy: int
    #: DRAM bytes spanned by the program's DMAs (per memory type, summed): the working set that
    #: decides how much of the port traffic the L2 serves.
    footprint_bytes: int = 0


# -- the kernel -------------------------------------------------------------------------------
# Column indices the kernel reads, in this order (filled from isa.COL).
_KCOLS = ("opcode", "pop_prev_dep", "pop_next_dep", "push_prev_dep", "push_next_dep",
          "memory_type", "y_size", "x_size", "y_pad_0", "y_pad_1", "x_pad_0", "x_pad_1",
          "uop_bgn", "uop_end", "iter_out", "iter_in", "dram_base", "x_stride")
_COLS = np.array([isa.COL[c] for c in _KCOLS], dtype=np.int64)
# Parameter vector order for the kernel.
_PCOLS = ("dma_bytes_per_cycle_efficiency", "dma_insn_latency", "dma_row_overhead",
          "pad_cycles_per_elem", "gemm_insn_overhead", "gemm_loop_overhead", "alu_cycles_per_uop",
          "alu_insn_overhead", "alu_loop_overhead", "sync_cycles", "dma_dram_efficiency",
          "cache_bytes")

# Kernel status codes.
_OK, _DEADLOCK, _BAD_FLAG, _BAD_OPCODE, _BAD_MEM = 0, 1, 2, 3, 4
# Token FIFOs (reference §2.8).
_L2G, _G2L, _G2S, _S2G = 0, 1, 2, 3
_FIFO_NAMES = ("l2g", "g2l", "g2s", "s2g")


@njit(cache=True)
def _mix_efficiency(eff_hit, eff_dram, cache, footprint):  # pragma: no cover - compiled
    """Port efficiency for a DRAM footprint: the L2 serves a fraction min(1, cache/footprint)
    of the beats at eff_hit, DDR the rest at eff_dram (harmonic mix: cycles per beat add)."""
    hit = 1.0
    if footprint > cache:
        hit = cache / footprint
    return 1.0 / (hit / eff_hit + (1.0 - hit) / eff_dram)


@njit(cache=True)
def _dma_fixed(insns, i, op, c_mem, c_y, c_x, c_yp0, c_yp1, c_xp0, c_xp1, lat, row_oh, pad_c):  # pragma: no cover
    """Off-port cycles of a DMA: request latency, per-row burst set-up, zero padding (INP/ACC
    loads only)."""
    mem = insns[i, c_mem]
    y = insns[i, c_y]
    pad = 0
    if op == 0 and (mem == 2 or mem == 3 or mem == 5):
        xp = insns[i, c_xp0] + insns[i, c_xp1]
        pad = (insns[i, c_yp0] + insns[i, c_yp1]) * (xp + insns[i, c_x]) + y * xp
    return lat + y * row_oh + pad * pad_c


@njit(cache=True)
def _time_kernel(insns, cols, elem_bytes, port_bytes, p):  # pragma: no cover - compiled
    n = insns.shape[0]
    c_op, c_pp, c_pn, c_hp, c_hn = cols[0], cols[1], cols[2], cols[3], cols[4]
    c_mem, c_y, c_x = cols[5], cols[6], cols[7]
    c_yp0, c_yp1, c_xp0, c_xp1 = cols[8], cols[9], cols[10], cols[11]
    c_ub, c_ue, c_io, c_ii = cols[12], cols[13], cols[14], cols[15]
    c_base, c_stride = cols[16], cols[17]
    eff_hit, lat, row_oh, pad_c = p[0], p[1], p[2], p[3]
    g_oh, g_loop, a_cpu, a_oh, a_loop, sync = p[4], p[5], p[6], p[7], p[8], p[9]
    eff_dram, cache = p[10], p[11]

    # DRAM footprint: bytes spanned by the DMAs of each memory type, summed.
    lo = np.full(6, np.inf)
    hi = np.full(6, -np.inf)
    for i in range(n):
        op = insns[i, c_op]
        mem = insns[i, c_mem]
        if (op == 0 or op == 1) and insns[i, c_x] != 0 and mem >= 0 and mem < 6:
            b = insns[i, c_base] * elem_bytes[mem]
            e = (insns[i, c_base] + (insns[i, c_y] - 1) * insns[i, c_stride] + insns[i, c_x]) * elem_bytes[mem]
            if b < lo[mem]:
                lo[mem] = b
            if e > hi[mem]:
                hi[mem] = e
    footprint = 0.0
    for mem in range(6):
        if hi[mem] > lo[mem]:
            footprint += hi[mem] - lo[mem]
    eff = _mix_efficiency(eff_hit, eff_dram, cache, footprint)

    # Dispatch (reference §2.9): STORE -> store; LOAD INP/WGT -> load; the rest -> compute.
    qidx = np.empty((3, n), np.int64)
    qlen = np.zeros(3, np.int64)
    for i in range(n):
        op = insns[i, c_op]
        mem = insns[i, c_mem]
        if op == 1:
            q = 2
        elif op == 0 and (mem == 1 or mem == 2):
            q = 0
        else:
            q = 1
        qidx[q, qlen[q]] = i
        qlen[q] += 1

    # FIFOs of token-availability times; indices as _L2G.._S2G.
    fifo = np.empty((4, n + 1), np.float64)
    head = np.zeros(4, np.int64)
    tail = np.zeros(4, np.int64)
    # pop_prev / pop_next / push_prev / push_next FIFO per module (-1: the bit must be 0).
    pop_prev = np.array([-1, 0, 2], np.int64)
    pop_next = np.array([1, 3, -1], np.int64)
    push_prev = np.array([-1, 1, 3], np.int64)
    push_next = np.array([0, 2, -1], np.int64)

    free = np.zeros(3, np.float64)
    busy = np.zeros(3, np.float64)
    ptr = np.zeros(3, np.int64)
    heads = np.full(3, -1, np.int64)
    port_free = 0.0
    port_busy = 0.0
    t_end = 0.0

    while True:
        best = -1
        best_t = 0.0
        best_key = np.inf
        pending = False
        for m in range(3):
            if ptr[m] >= qlen[m]:
                heads[m] = -1
                continue
            pending = True
            i = qidx[m, ptr[m]]
            heads[m] = i
            t = free[m]
            ok = True
            if insns[i, c_pp] != 0:
                f = pop_prev[m]
                if f < 0:
                    return _BAD_FLAG, i, 0.0, busy, port_busy, heads, footprint
                if head[f] == tail[f]:
                    ok = False
                elif fifo[f, head[f]] > t:
                    t = fifo[f, head[f]]
            if insns[i, c_pn] != 0:
                f = pop_next[m]
                if f < 0:
                    return _BAD_FLAG, i, 0.0, busy, port_busy, heads, footprint
                if head[f] == tail[f]:
                    ok = False
                elif fifo[f, head[f]] > t:
                    t = fifo[f, head[f]]
            if (insns[i, c_hp] != 0 and push_prev[m] < 0) or (insns[i, c_hn] != 0 and push_next[m] < 0):
                return _BAD_FLAG, i, 0.0, busy, port_busy, heads, footprint
            if not ok:
                continue
            # Order by the time of the contended event: a DMA's port request (after its
            # off-port latency/row/pad cycles), otherwise the start.
            key = t
            op = insns[i, c_op]
            if (op == 0 or op == 1) and insns[i, c_x] != 0:
                key = t + _dma_fixed(insns, i, op, c_mem, c_y, c_x, c_yp0, c_yp1, c_xp0, c_xp1,
                                     lat, row_oh, pad_c)
            if key < best_key:
                best = m
                best_t = t
                best_key = key
        if not pending:
            break
        if best < 0:
            return _DEADLOCK, -1, 0.0, busy, port_busy, heads, footprint

        m = best
        i = qidx[m, ptr[m]]
        t = best_t
        if insns[i, c_pp] != 0:
            head[pop_prev[m]] += 1
        if insns[i, c_pn] != 0:
            head[pop_next[m]] += 1

        op = insns[i, c_op]
        if op == 0 or op == 1:  # LOAD / STORE
            x = insns[i, c_x]
            if x == 0:
                end = t + sync
            else:
                mem = insns[i, c_mem]
                if mem < 0 or mem >= elem_bytes.shape[0]:
                    return _BAD_MEM, i, 0.0, busy, port_busy, heads, footprint
                y = insns[i, c_y]
                row_bytes = x * elem_bytes[mem]
                beats = (row_bytes + port_bytes[mem] - 1) // port_bytes[mem]
                data = y * beats / eff
                ready = t + _dma_fixed(insns, i, op, c_mem, c_y, c_x, c_yp0, c_yp1, c_xp0, c_xp1,
                                       lat, row_oh, pad_c)
                start = ready if ready > port_free else port_free
                end = start + data
                port_free = end
                port_busy += data
        elif op == 2:  # GEMM
            nu = insns[i, c_ue] - insns[i, c_ub]
            loops = insns[i, c_io] * insns[i, c_ii]
            end = t + g_oh + loops * (nu + g_loop)
        elif op == 4:  # ALU
            nu = insns[i, c_ue] - insns[i, c_ub]
            loops = insns[i, c_io] * insns[i, c_ii]
            end = t + a_oh + loops * (nu * a_cpu + a_loop)
        elif op == 3:  # FINISH
            end = t + sync
        else:
            return _BAD_OPCODE, i, 0.0, busy, port_busy, heads, footprint

        if insns[i, c_hp] != 0:
            f = push_prev[m]
            fifo[f, tail[f]] = end
            tail[f] += 1
        if insns[i, c_hn] != 0:
            f = push_next[m]
            fifo[f, tail[f]] = end
            tail[f] += 1
        busy[m] += end - t
        free[m] = end
        ptr[m] += 1
        if end > t_end:
            t_end = end
    return _OK, -1, t_end, busy, port_busy, heads, footprint


# -- Python wrapper ---------------------------------------------------------------------------
@lru_cache(maxsize=64)
def _hw_arrays(hw: HwConfig, uop_port_bytes: float) -> tuple[np.ndarray, np.ndarray]:
    """Element bytes and port bytes per beat, indexed by memory type (reference §2.2, §4.5)."""
    elem = np.zeros(6, dtype=np.int64)
    elem[isa.MEM_UOP] = hw.uop_elem_bytes
    elem[isa.MEM_WGT] = hw.wgt_elem_bytes
    elem[isa.MEM_INP] = hw.inp_elem_bytes
    elem[isa.MEM_ACC] = hw.acc_elem_bytes
    elem[isa.MEM_OUT] = hw.out_elem_bytes
    elem[isa.MEM_ACC_8BIT] = hw.batch * hw.block_out  # int8 DRAM data into ACC (§2.2)
    port = np.full(6, hw.bus_bytes, dtype=np.int64)
    port[isa.MEM_UOP] = max(1, min(int(uop_port_bytes), hw.bus_bytes))
    return elem, port


@lru_cache(maxsize=64)
def _param_array(params: TimingParams, clock_mhz: float) -> np.ndarray:
    """Kernel parameters in device cycles at `clock_mhz`. The memory system (L2, DDR) does not
    run on the PL clock: its latencies are fixed in nanoseconds and its bandwidth in bytes/s,
    so at a clock r = clock/ref_clock times faster a latency costs r times more cycles and a
    port efficiency e becomes min(1, e/r) (the port still moves at most one beat per cycle)."""
    r = float(clock_mhz) / params.ref_clock_mhz
    values = params.to_dict()
    for name in ("dma_insn_latency", "dma_row_overhead"):
        values[name] *= r
    for name in ("dma_bytes_per_cycle_efficiency", "dma_dram_efficiency"):
        values[name] = min(1.0, values[name] / r)
    return np.array([values[k] for k in _PCOLS], dtype=np.float64)


def _describe_head(insns: np.ndarray, i: int) -> str:
    op = int(insns[i, isa.COL["opcode"]])
    name = isa.OPCODE_NAMES.get(op, f"opcode {op}")
    if op in (isa.OP_LOAD, isa.OP_STORE):
        name += " " + isa.MEM_NAMES.get(int(insns[i, isa.COL["memory_type"]]), "?")
    return f"instruction {i} ({name})"


def time_program(insns: np.ndarray, hw: HwConfig, params: TimingParams | None = None) -> TimingResult:
    """Cycles of an instruction matrix on `hw` under the decoupled access-execute model.

    Raises SimulationError on a deadlock (no module can progress) or an illegal instruction."""
    params = default_params() if params is None else params
    m = np.ascontiguousarray(insns, dtype=np.int64)
    if m.ndim != 2 or m.shape[1] != isa.N_FIELDS:
        raise SimulationError(f"instruction matrix must have shape (n, {isa.N_FIELDS}), got {m.shape}")
    elem, port = _hw_arrays(hw, params.uop_port_bytes)
    status, idx, end, busy, port_busy, heads, footprint = _time_kernel(m, _COLS, elem, port,
                                                                      _param_array(params, hw.clock_mhz))
    if status == _DEADLOCK:
        blocked = []
        for q, h in enumerate(heads):
            if h < 0:
                continue
            waits = []
            for col, fifo in (("pop_prev_dep", (None, _L2G, _G2S)[q]), ("pop_next_dep", (_G2L, _S2G, None)[q])):
                if m[h, isa.COL[col]] and fifo is not None:
                    waits.append(_FIFO_NAMES[fifo])
            blocked.append(f"{isa.QUEUE_NAMES[q]} queue at {_describe_head(m, int(h))} waits on "
                           + "/".join(waits))
        raise SimulationError("deadlock: no module can progress; " + "; ".join(blocked))
    if status == _BAD_FLAG:
        raise SimulationError(f"{_describe_head(m, int(idx))}: dependency flag not allowed in its module's "
                              "queue (load: no pop_prev/push_prev; store: no pop_next/push_next; §2.8)")
    if status == _BAD_OPCODE:
        raise SimulationError(f"instruction {idx}: opcode={m[idx, isa.COL['opcode']]} unknown; allowed 0..4")
    if status == _BAD_MEM:
        raise SimulationError(f"instruction {idx}: memory_type={m[idx, isa.COL['memory_type']]} unknown; "
                              "allowed 0..5")
    return TimingResult(
        cycles=int(math.ceil(end - 1e-9)),
        busy={name: int(round(b)) for name, b in zip(isa.QUEUE_NAMES, busy)},
        port_busy=int(round(port_busy)),
        footprint_bytes=int(footprint),
    )


def port_efficiency(hw: HwConfig, footprint_bytes: float, params: TimingParams | None = None) -> float:
    """Fraction of one bus beat per cycle the shared port sustains at `hw`'s clock for an
    operator whose DRAM footprint is `footprint_bytes` (the same formula `time_program` uses;
    for roofline-style bounds)."""
    params = default_params() if params is None else params
    p = _param_array(params, hw.clock_mhz)
    return float(_mix_efficiency(p[_PCOLS.index("dma_bytes_per_cycle_efficiency")],
                                 p[_PCOLS.index("dma_dram_efficiency")], p[_PCOLS.index("cache_bytes")],
                                 float(footprint_bytes)))


def host_seconds(n_insns: int, params: TimingParams, in_bytes: int = 0, out_bytes: int = 0) -> float:
    """Host-side seconds of one operator call (§4.7): per call, per instruction, per byte in/out."""
    return (params.host_call_s + params.host_per_insn_s * float(n_insns)
            + params.host_per_in_byte_s * float(in_bytes) + params.host_per_out_byte_s * float(out_bytes))


def predict_seconds(cycles: int | float, n_insns: int, hw: HwConfig, params: TimingParams | None = None,
                    in_bytes: int = 0, out_bytes: int = 0) -> float:
    """Operator seconds = device cycles at the config clock + host overhead (§4.7). The ONE place
    where device cycles become the seconds a user or an AutoTVM log sees. `in_bytes`/`out_bytes`
    (the operator's input and output buffers) feed the per-byte host terms of a profile."""
    params = default_params() if params is None else params
    return float(cycles) / hw.clock_hz + host_seconds(n_insns, params, in_bytes, out_bytes)


__all__ = ["TimingParams", "TimingResult", "time_program", "predict_seconds", "host_seconds", "port_efficiency",
           "default_params",
           "DEFAULT_PARAMS_PATH"]
