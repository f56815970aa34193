"""Cycle-approximate timing model of VTA's decoupled access-execute pipeline (docs/vta.md §4).

Three in-order module queues (load, compute, store; dispatch rule docs/vta.md §2.9) advance concurrently and
synchronize through the four dependency-token FIFOs (docs/vta.md §2.8, §3.8). The model (docs/vta.md §4.6):

* Every module keeps a local clock `free[m]`. The head instruction of a module may start at
  `max(free[m], time of each token it pops)`; tokens are popped before and pushed at the *end*
  of an instruction, so a FIFO holds the times at which its tokens become available.
* The one shared memory port (docs/vta.md §4.2: five AXI masters on one SmartConnect into one 64-bit ACP
  port) is a resource that the *data beats* of a DMA occupy; request latency, per-row burst
  set-up and padding cycles keep the module busy but leave the port free for the others. The
  ready head instructions of the three modules are taken in order of their contended event
  (a DMA's port request time, otherwise the start time), so the port is arbitrated first come,
  first served in simulated time (at whole-transfer granularity).
* Costs per instruction (the PYNQ bitstream is the HLS design, so HLS timings are used, §4.3):

  - LOAD/STORE with x_size == 0 (a sync no-op) and FINISH: `sync_cycles` (docs/vta.md §4.4 `sSync`).
  - LOAD/STORE: `dma_insn_latency + y_size*dma_row_overhead + pad_elems*pad_cycles_per_elem`
    off the port, then `y_size*ceil(x_size*E/port_bytes) / eff` cycles on the port (E =
    element bytes of the memory type; port_bytes = hw.bus_bytes, or `uop_port_bytes` for LOAD
    UOP: the HLS uop port is 32-bit, §4.5). Pad elements (INP/ACC only; WGT and UOP loads have
    no pad path, §4.6) are `(y_pad_0+y_pad_1)*(x_pad_0+x_size+x_pad_1) + y_size*(x_pad_0+
    x_pad_1)`, written one per cycle (docs/vta.md §4.3 `reset_mem`).
  - Port efficiency `eff`: on PYNQ the data port is the coherent ACP (docs/vta.md §4.2), so DMA traffic is
    served by the ARM's L2 cache when the operator's working set is resident there (AutoTVM
    times repeated calls on the same buffers). With F = DRAM bytes spanned by the program's
    DMAs, hit = min(1, cache_bytes / F) and `1/eff = hit/dma_bytes_per_cycle_efficiency +
    (1 - hit)/dma_dram_efficiency`. (Calibration against the tophub log, docs/vta.md §9: with one efficiency the two
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
finer than whole transfers, the ACC read-after-write hazard (docs/vta.md §3.9).

Device cycles become operator seconds in exactly one place, `predict_seconds`: measured AutoTVM
costs time the whole operator call on the board, including the host-side JIT runtime that
builds every instruction on the ARM CPU before the device runs (docs/vta.md §4.7), so the host cost is the
explicit term `host_call_s + host_per_insn_s * n_insns`.

The kernel is a `numba.njit(cache=True)` function over the int64 instruction matrix (columns
`isa.COL`) plus small parameter arrays; `time_program` is the thin Python wrapper.
"""

from __future__ import annotations

import math
import time
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

    # -- DMA (shared memory port, docs/vta.md §4.2, §4.4, §4.5) ---------------------------------
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
    #: latency is not overlapped with the previous row (docs/vta.md §4.3). fitted.
    dma_row_overhead: float = 10.0
    #: PL clock (MHz) at which the DMA latencies and efficiencies above are expressed: the
    #: clock of the calibration board (PYNQ 100 MHz, §4.1). At another clock they are rescaled
    #: so that memory latency (ns) and bandwidth (bytes/s) stay constant (`_param_array`). fixed.
    ref_clock_mhz: float = 100.0
    #: Cycles per zero-padding element: written one element per cycle by `reset_mem` (docs/vta.md §4.3,
    #: Chisel docs/vta.md §4.4 alike). fixed by hardware.
    pad_cycles_per_elem: float = 1.0
    #: Bytes per beat of the compute module's uop port: 32-bit in HLS (docs/vta.md §4.5). fixed by hardware.
    uop_port_bytes: float = 4.0
    # -- compute module (docs/vta.md §4.3, §4.4) ----------------------------------------------------------
    #: Cycles per GEMM instruction: invocation, decode, token handshakes, write-back drain.
    #: fixed at the Chisel estimate of about 6 (docs/vta.md §4.4: start 1 + idle 1 + write-back pipe ~4;
    #: HLS publishes no figure and ResNet-18 records cannot separate it from the loop fill).
    gemm_insn_overhead: float = 6.0
    #: Cycles per (iter_out, iter_in) pair of a GEMM: HLS pipeline fill/drain of the II=1 uop
    #: loop (docs/vta.md §4.3, derived). fitted.
    gemm_loop_overhead: float = 5.0
    #: Cycles per ALU micro-op: HLS `PIPELINE II=2` (single register-file read port). fixed.
    alu_cycles_per_uop: float = 2.0
    #: Cycles per ALU instruction (invocation, decode, ~4-cycle pipeline latency, §4.4). fixed
    #: like gemm_insn_overhead (same mechanism; not identifiable from ResNet-18 records).
    alu_insn_overhead: float = 6.0
    #: Cycles per (iter_out, iter_in) pair of an ALU instruction: pipeline fill of the II=2
    #: loop. fitted.
    alu_loop_overhead: float = 3.0
    #: Cycles of a sync no-op (x_size == 0) and of FINISH (docs/vta.md §4.4 `sSync`). fixed.
    sync_cycles: float = 1.0
    # -- host (docs/vta.md §4.7) -------------------------------------------------------------------------
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


_checked = [-1.0, -1.0]  # [monotonic time of the last stat, mtime seen]


def default_params() -> TimingParams:
    """The shipped parameters (re-read when the file changes; its mtime is looked at no more
    than once a second: tuners call this thousands of times a second)."""
    now = time.monotonic()
    if now - _checked[0] > 1.0:
        try:
            _checked[1] = DEFAULT_PARAMS_PATH.stat().st_mtime
        except FileNotFoundError:
            _checked[1] = -1.0
        _checked[0] = now
    return _default_params(_checked[1])


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
_OK, _DEADLOCK, _BAD_FLAG, _BAD_OPCODE, _BAD_MEM, _OVERFLOW = 0, 1, 2, 3, 4, 5
#: Time unit of the kernel: 2^-24 cycle. Times are int64 so that the model is exactly invariant
#: under a time shift (what makes periodic fast-forward exact); every cost is rounded to this
#: grid once (a DMA's port time per beat), far below a cycle, and 2^63 units are ~5e11 cycles.
_TIME_SCALE = float(1 << 24)
# Token FIFOs (docs/vta.md §2.8).
_FIFO_NAMES = isa.TOKEN_NAMES  # token FIFOs numbered as in `isa` (TOK_L2G..TOK_S2G)
_POP_PREV, _POP_NEXT = np.array(isa.POP_PREV, dtype=np.int64), np.array(isa.POP_NEXT, dtype=np.int64)
_PUSH_PREV, _PUSH_NEXT = np.array(isa.PUSH_PREV, dtype=np.int64), np.array(isa.PUSH_NEXT, dtype=np.int64)
_TOKEN_FIFO = np.stack([_POP_PREV, _POP_NEXT, _PUSH_PREV, _PUSH_NEXT])  # [flag bit, module] -> FIFO, -1: none
#: Per module, the flag bits it may not carry (no FIFO: `_TOKEN_FIFO` -1).
_BAD_FLAGS = np.array([sum(1 << t for t in range(4) if _TOKEN_FIFO[t, m] < 0) for m in range(3)], dtype=np.int64)


@njit(cache=True)
def _mix_efficiency(eff_hit, eff_dram, cache, footprint):  # pragma: no cover - compiled
    """Port efficiency for a DRAM footprint: the L2 serves a fraction min(1, cache/footprint)
    of the beats at eff_hit, DDR the rest at eff_dram (harmonic mix: cycles per beat add)."""
    hit = 1.0
    if footprint > cache:
        hit = cache / footprint
    return 1.0 / (hit / eff_hit + (1.0 - hit) / eff_dram)


@njit(cache=True)
def _dma_fixed(op, mem, y, x, y_pad, x_pad, lat, row_oh, pad_c):  # pragma: no cover - compiled
    """Off-port time of a DMA: request latency, per-row burst set-up, zero padding (INP/ACC
    loads only; y_pad, x_pad: the rows and columns of padding, both sides). Scalars only: a compiled
    call with an array argument costs reference counting, per row."""
    pad = 0
    if op == 0 and (mem == 2 or mem == 3 or mem == 5):
        pad = y_pad * (x_pad + x) + y * x_pad
    return lat + y * row_oh + pad * pad_c


@njit(cache=True)
def _span(base, y, stride, x):  # pragma: no cover - compiled
    """(first, end) DRAM elements of a DMA of y rows of x elements, `stride` apart, from `base`."""
    return base, base + (y - 1) * stride + x


@njit(cache=True)
def dma_span(rows, i, c_base, c_y, c_stride, c_x):  # pragma: no cover - compiled
    """(first, end) DRAM elements DMA row i spans: the unit of the footprint (`_decode`; the block
    form's span rows, `lower.emit.span_rows`, keep the rows that widen it)."""
    return _span(rows[i, c_base], rows[i, c_y], rows[i, c_stride], rows[i, c_x])


@njit(cache=True)
def _fix(x):  # pragma: no cover - compiled
    """Cycles (float) -> fixed-point time units (int64, TIME_SCALE per cycle)."""
    return np.int64(np.round(x * _TIME_SCALE))


# The engine's small state is one int64 array `st` of rows (`_engine` works on a view of each row);
# `_fast_forward` takes it whole: a compiled call costs reference counting per array argument.
_PQ, _IQ, _FREE, _BUSY, _HK = 0, 1, 2, 3, 4  # per queue (3): unit of the head, its position among the
# unit's rows of the queue, clock, busy time, the head's row (-1: the queue is done)
_HEAD, _TAIL = 5, 6  # per token FIFO (4): ring positions of the first token and past the last
_N_ST = 7
# Columns of an anchor row (`_fast_forward`): unit (a multiple of the row's period; before the first
# anchor, minus the period), length of the state (0: not kept, -1: none yet),
# load clock, busy time (3 queues, port), units of the queue heads, then the state itself.
_A_PAIR, _A_LEN, _A_REF, _A_BUSY, _A_POS, _A_STATE = 0, 1, 2, 3, 7, 10
#: Most words of state a snapshot keeps (12 + the tokens in flight).
_MAX_STATE = 12 + 64


@njit(cache=True)
def _seek(q, st, pair_class, blk, rt):  # pragma: no cover - compiled
    """Queue q's head: its row at position iq[q] of unit pq[q] (units without rows of q are passed)
    into hk[q]; -1: q is done."""
    NP = pair_class.shape[0]
    while st[_PQ, q] < NP and st[_IQ, q] >= blk[pair_class[st[_PQ, q]], _B_LEN + q]:
        st[_PQ, q] += 1
        st[_IQ, q] = 0
    if st[_PQ, q] >= NP:
        st[_HK, q] = -1
        return
    k = blk[pair_class[st[_PQ, q]], _B_FIRST + q]
    for _ in range(st[_IQ, q]):
        k = rt[k, _R_NXT]
    st[_HK, q] = k


@njit(cache=True)
def _blocked(q, st, rt):  # pragma: no cover - compiled
    """Does queue q's head pop a token FIFO that is empty (it cannot start before a token is pushed)?"""
    k = st[_HK, q]
    if k < 0:
        return False
    fl = rt[k, _R_FLAG]
    if fl < 0:
        return False
    if fl & 1 and st[_HEAD, _POP_PREV[q]] == st[_TAIL, _POP_PREV[q]]:
        return True
    return (fl & 2) != 0 and st[_HEAD, _POP_NEXT[q]] == st[_TAIL, _POP_NEXT[q]]


@njit(cache=True)
def _fast_forward(st, anc, fifo, mask, port_free, port_busy, t_end, pair_class, periods, blk,
                  rt):  # pragma: no cover - compiled
    """The load queue starts unit j = pq[0]: compare the state relative to the load clock with
    the snapshot at unit j - c of each candidate period c (anchor rows of `anc`, one per period; its
    last row takes the current state), skip the periods that repeat exactly (see `_engine`), then keep
    the state (after the last skip) as the anchor of each period its unit is a multiple of. Returns
    (port_free, port_busy, t_end).

    The unit a skip lands on is compared again, like any unit the load queue starts: a skip leaves
    exactly the state the simulation reaches there, and the snapshots are states it reached, so a
    larger period whose anchor is one period back is found there (without it, when a smaller period
    repeats inside a larger one, the multiples of the larger are reached only by skips and the larger
    period is never compared).

    A queue parked at the same place in both (same unit and row, `_A_POS`) whose head waits for a
    token its FIFO does not hold is not compared relative to the load clock: its FIFO held as many
    tokens at both (the FIFOs are compared) and only it pops them, so none was pushed in between; it
    ran nothing, the others ran without it (a blocked head takes no part in the arbitration), so in
    the periods skipped it stays where it is, its clock and busy time unchanged (it starts at the
    token's time). This is the store queue while the steps of a pair repeat (the step form,
    `lower.PairBlocks`): it waits for the pair's epilogue."""
    NP = pair_class.shape[0]
    n_per = periods.shape[0]
    cur = n_per  # the row of the current state
    S = _A_STATE
    first = True
    while True:  # after a skip, the periods are tried again at the unit it lands on
        # Snapshot into row cur: the unit, the load clock, busy times, queue units, and the state
        # relative to the load clock (the other queues' positions relative to the load queue's unit,
        # clocks, port, token FIFOs).
        j = st[_PQ, 0]
        ref = st[_FREE, 0]
        anc[cur, _A_PAIR] = j
        anc[cur, _A_REF] = ref
        for q in range(3):
            anc[cur, _A_BUSY + q] = st[_BUSY, q]
            anc[cur, _A_POS + q] = st[_PQ, q]
        anc[cur, _A_BUSY + 3] = port_busy
        size = 12
        for f in range(4):
            size += st[_TAIL, f] - st[_HEAD, f]
        if size > _MAX_STATE:  # too many tokens to keep
            size = 0
        anc[cur, _A_LEN] = size
        if size == 0:
            if first:
                return port_free, port_busy, t_end
            break
        first = False
        anc[cur, S] = st[_PQ, 1] - j
        anc[cur, S + 1] = st[_IQ, 1]
        anc[cur, S + 2] = st[_PQ, 2] - j
        anc[cur, S + 3] = st[_IQ, 2]
        anc[cur, S + 4] = st[_FREE, 1] - ref
        anc[cur, S + 5] = st[_FREE, 2] - ref
        anc[cur, S + 6] = port_free - ref
        anc[cur, S + 7] = t_end - ref
        k = S + 12
        for f in range(4):
            anc[cur, S + 8 + f] = st[_TAIL, f] - st[_HEAD, f]
            for e in range(st[_HEAD, f], st[_TAIL, f]):
                anc[cur, k] = fifo[f, e & mask] - ref
                k += 1

        skipped = False
        for a in range(n_per):
            c = periods[a]
            # (an anchor's unit is a multiple of its period, so then j is one: no division)
            if anc[a, _A_PAIR] != j - c or anc[a, _A_LEN] != size:
                continue
            same = True
            for s in range(S + 6, S + size):  # port, end, token FIFOs
                if anc[cur, s] != anc[a, s]:
                    same = False
                    break
            if not same:
                continue
            lo_pair = j
            parked = 0  # bit q: queue q is parked
            for q in range(1, 3):  # each other queue: moved with the load queue, or parked
                pos, row, clock = S + 2 * q - 2, S + 2 * q - 1, S + 3 + q
                if anc[cur, pos] == anc[a, pos] and anc[cur, row] == anc[a, row] and anc[cur, clock] == anc[a, clock]:
                    if st[_PQ, q] < lo_pair:
                        lo_pair = st[_PQ, q]
                elif (anc[a, _A_POS + q] == st[_PQ, q] and anc[cur, row] == anc[a, row]
                      and _blocked(q, st, rt)):
                    parked |= 1 << q
                else:
                    same = False
            if not same or lo_pair < c:
                continue
            # Units lo_pair .. r_end - 1 repeat those c before. In r periods a moving queue q reads its
            # units up to pq[q] + r*c (its head there is examined); the load queue only reaches j + r*c
            # as the r-th period ends (its head there not yet examined, but it stopped there: that
            # unit has load rows). The queues other than the load queue may be ahead of it (the store
            # queue at the last step of the pair, `lower.PairBlocks` step form).
            r_end = lo_pair
            while r_end < NP and pair_class[r_end] == pair_class[r_end - c]:
                r_end += 1
            reps = (r_end - j) // c
            for q in range(1, 3):
                if not (parked >> q) & 1 and (r_end - 1 - st[_PQ, q]) // c < reps:
                    reps = (r_end - 1 - st[_PQ, q]) // c
            if reps >= 1 and j + reps * c == r_end and (r_end >= NP or blk[pair_class[r_end], _B_LEN] == 0):
                reps -= 1
            if reps < 1:
                continue
            shift = reps * (ref - anc[a, _A_REF])
            for q in range(3):
                if (parked >> q) & 1:
                    continue
                st[_FREE, q] += shift
                st[_BUSY, q] += reps * (st[_BUSY, q] - anc[a, _A_BUSY + q])
                st[_PQ, q] += reps * c
            port_busy += reps * (port_busy - anc[a, _A_BUSY + 3])
            port_free += shift
            t_end += shift
            for f in range(4):
                for e in range(st[_HEAD, f], st[_TAIL, f]):
                    fifo[f, e & mask] += shift
            for q in range(3):
                _seek(q, st, pair_class, blk, rt)
            skipped = True
            break
        if not skipped:
            break
    width = S + size
    for a in range(n_per):  # anchor j for the periods it is a multiple of (j only grows: few divisions)
        c = periods[a]
        due = anc[a, _A_PAIR] + c  # the multiple of c after the anchor's
        if j == due or (j > due and j % c == 0):
            for s in range(width):
                anc[a, s] = anc[cur, s]
    return port_free, port_busy, t_end


# Kinds of a decoded queue row (`_decode`): a fixed duration (GEMM, ALU, FINISH, sync no-op), a DMA
# (off-port time, then data on the shared port), and the two faults raised when the row executes.
_K_FIXED, _K_DMA, _K_BAD_OPCODE, _K_BAD_MEM = 0, 1, 2, 3
# Columns of a decoded row (`_decode`'s `rt`): the next row of its queue in its block, token flags, kind,
# fixed time, arbitration key offset, beats on the port.
_R_NXT, _R_FLAG, _R_KIND, _R_FIX, _R_KEY, _R_BEATS = 0, 1, 2, 3, 4, 5
# Columns of a decoded block (`_decode`'s `blk`): first row of each queue (3), number of rows (3).
_B_FIRST, _B_LEN = 0, 3


@njit(cache=True)
def _decode(rows, cols, block_start, elem_bytes, port_bytes, p):  # pragma: no cover - compiled
    """Every row's cost, once, in one pass over the rows (the engine re-examines a blocked head at
    every step; rows are 30 columns wide, so every pass over them costs a cache line per row on large
    programs). Per block b and module queue q (docs/vta.md §2.9: STORE -> store; LOAD INP/WGT -> load;
    the rest -> compute), the block's rows of q in program order are a list: its first row
    blk[b, _B_FIRST + q] (-1: none), blk[b, _B_LEN + q] rows, each row's next rt[i, _R_NXT] (-1: the
    last). For each row i, in the columns `_R_*` of rt: its token flags (1 pop_prev, 2 pop_next,
    4 push_prev, 8 push_next; -1: a flag its module may not carry), kind (`_K_*`), fixed time (a DMA's off-port latency, row set-up and padding; otherwise the
    whole duration), arbitration key offset (the time from its start to its contended event: a DMA's
    fixed time, otherwise 0) and a DMA's beats on the port (its data time is beats x inv_eff, the time
    units per beat: the port efficiency depends on the footprint of all rows). Exactly the integer
    arithmetic the cost formulas of the module docstring give. Rows outside the blocks (`time_blocks`)
    count for the footprint only. Returns (blk, rt, inv_eff, footprint): two arrays, so that the engine
    and `_fast_forward` take few array arguments (each costs reference counting per call)."""
    c_op = cols[0]
    c_f0, c_f1, c_f2, c_f3 = cols[1], cols[2], cols[3], cols[4]  # pop_prev, pop_next, push_prev, push_next
    c_mem, c_y, c_x = cols[5], cols[6], cols[7]
    c_yp0, c_yp1, c_xp0, c_xp1 = cols[8], cols[9], cols[10], cols[11]
    c_ub, c_ue, c_io, c_ii = cols[12], cols[13], cols[14], cols[15]
    c_base, c_stride = cols[16], cols[17]
    eff_hit, eff_dram, cache = p[0], p[10], p[11]
    lat, row_oh, pad_c = _fix(p[1]), _fix(p[2]), _fix(p[3])
    g_oh, g_loop, a_cpu, a_oh, a_loop, sync = _fix(p[4]), _fix(p[5]), _fix(p[6]), _fix(p[7]), _fix(p[8]), _fix(p[9])
    unit = np.int64(_TIME_SCALE)
    n = rows.shape[0]
    nb = block_start.shape[0] - 1
    blk = np.empty((nb, 6), np.int64)
    blk[:, _B_FIRST:_B_FIRST + 3] = -1
    blk[:, _B_LEN:_B_LEN + 3] = 0
    rt = np.zeros((n, 6), np.int64)
    lo_b = np.full(6, np.inf)
    hi_b = np.full(6, -np.inf)
    last = np.full(3, -1, np.int64)  # the block's last row so far of each queue
    b = -1  # block of row i (-1: before the first, nb: after the last)
    b_end = block_start[0]
    for i in range(n):
        while i == b_end and b < nb:
            b += 1
            b_end = block_start[b + 1] if b < nb else n
            last[:] = -1
        op = rows[i, c_op]
        mem = rows[i, c_mem]
        if op == 1:
            m = 2
        elif op == 0 and (mem == 1 or mem == 2):
            m = 0
        else:
            m = 1
        rt[i, _R_NXT] = -1
        if 0 <= b < nb:
            blk[b, _B_LEN + m] += 1
            if last[m] < 0:
                blk[b, _B_FIRST + m] = i
            else:
                rt[last[m], _R_NXT] = i
            last[m] = i
        fl = ((rows[i, c_f0] != 0) | (rows[i, c_f1] != 0) << 1 | (rows[i, c_f2] != 0) << 2
              | (rows[i, c_f3] != 0) << 3)
        rt[i, _R_FLAG] = -1 if fl & _BAD_FLAGS[m] else fl
        if op == 0 or op == 1:  # LOAD / STORE
            x = rows[i, c_x]
            if x == 0:
                rt[i, _R_KIND] = _K_FIXED
                rt[i, _R_FIX] = sync
            else:
                y = rows[i, c_y]
                fix = _dma_fixed(op, mem, y, x, rows[i, c_yp0] + rows[i, c_yp1], rows[i, c_xp0] + rows[i, c_xp1],
                                 lat, row_oh, pad_c)
                rt[i, _R_FIX] = fix
                rt[i, _R_KEY] = fix
                if mem < 0 or mem >= elem_bytes.shape[0]:
                    rt[i, _R_KIND] = _K_BAD_MEM
                else:
                    rt[i, _R_KIND] = _K_DMA
                    beats = (x * elem_bytes[mem] + port_bytes[mem] - 1) // port_bytes[mem]
                    rt[i, _R_BEATS] = y * beats
                if mem >= 0 and mem < 6:  # the DRAM footprint: bytes spanned per memory type, summed
                    fb, fe = _span(rows[i, c_base], y, rows[i, c_stride], x)  # dma_span, from scalars
                    fb *= elem_bytes[mem]
                    fe *= elem_bytes[mem]
                    if fb < lo_b[mem]:
                        lo_b[mem] = fb
                    if fe > hi_b[mem]:
                        hi_b[mem] = fe
        elif op == 2:  # GEMM
            rt[i, _R_KIND] = _K_FIXED
            nu = rows[i, c_ue] - rows[i, c_ub]
            rt[i, _R_FIX] = g_oh + rows[i, c_io] * rows[i, c_ii] * (nu * unit + g_loop)
        elif op == 4:  # ALU
            rt[i, _R_KIND] = _K_FIXED
            nu = rows[i, c_ue] - rows[i, c_ub]
            rt[i, _R_FIX] = a_oh + rows[i, c_io] * rows[i, c_ii] * (nu * a_cpu + a_loop)
        elif op == 3:  # FINISH
            rt[i, _R_KIND] = _K_FIXED
            rt[i, _R_FIX] = sync
        else:
            rt[i, _R_KIND] = _K_BAD_OPCODE
    footprint = 0.0
    for mem in range(6):
        if hi_b[mem] > lo_b[mem]:
            footprint += hi_b[mem] - lo_b[mem]
    inv_eff = _fix(1.0 / _mix_efficiency(eff_hit, eff_dram, cache, footprint))
    return blk, rt, inv_eff, footprint


@njit(cache=True)
def _engine(blk, rt, inv_eff, pair_class, periods, fifo_cap):  # pragma: no cover - compiled
    """The timing model over a program given as blocks of rows (decoded by `_decode`): unit `j` of
    the program (a pair, or a step of a pair: `lower.PairBlocks`) runs block `pair_class[j]` (the
    last entry is the tail block). A plain instruction matrix is one block run once. Returns
    (status, row, end, busy, port_busy, heads, steps), times in fixed-point units (busy and heads: per
    queue, rows of the state array `st`; their entry 3 is unused).

    Periodic fast-forward (exact): times are integers, and the model only adds costs and
    compares times, so it commutes with a shift of every time. When the load queue starts
    unit j, the state relative to the load clock (queue positions relative to j, clocks, token
    FIFOs) is compared with the state at unit j - c for each candidate period c (j % c == 0);
    if it is equal (a queue parked on an empty token FIFO may stay where it is, `_fast_forward`)
    and the blocks of the units the queues read repeat with period c, the next periods repeat
    exactly, so they are skipped by adding their time and busy-cycle increments (then the unit the
    skip lands on is compared again). `_fast_forward` does this at every unit the load queue starts
    (period 1 is always a candidate, so there is always a snapshot to keep): the engine's small state
    and the snapshots are one array each (`st`, `anc`), and the decoded rows two (`_decode`), so that
    the call passes few arrays (a compiled call costs reference counting per array argument)."""
    # Token FIFOs (isa.TOK_L2G..TOK_S2G) as rings of availability times.
    # ring slots: a power of two >= fifo_cap (an index is masked, not divided, at every step)
    size = 1
    while size < fifo_cap:
        size *= 2
    mask = size - 1
    fifo = np.empty((4, size), np.int64)
    st = np.zeros((_N_ST, 4), np.int64)  # the small state (`_PQ`...), one array for `_fast_forward`
    head, tail = st[_HEAD], st[_TAIL]
    pop_prev, pop_next, push_prev, push_next = _POP_PREV, _POP_NEXT, _PUSH_PREV, _PUSH_NEXT

    free, busy = st[_FREE], st[_BUSY]
    pq = st[_PQ]  # unit of each queue's head
    iq = st[_IQ]  # its position among the unit's rows of the queue
    hk = st[_HK]  # its row (-1: the queue is done)
    hk[:] = -1
    NP = pair_class.shape[0]
    for q in range(3):
        while pq[q] < NP and blk[pair_class[pq[q]], _B_LEN + q] == 0:
            pq[q] += 1
        if pq[q] < NP:
            hk[q] = blk[pair_class[pq[q]], _B_FIRST + q]
    port_free = np.int64(0)
    port_busy = np.int64(0)
    t_end = np.int64(0)
    steps = 0

    # Periodic fast-forward anchors: one snapshot per candidate period, and the current state (last row).
    n_per = periods.shape[0]
    anc = np.zeros((n_per + 1, _A_STATE + _MAX_STATE), np.int64)
    anc[:, _A_LEN] = -1  # no anchor yet
    for a in range(n_per):
        anc[a, _A_PAIR] = -periods[a]  # the multiple of the period before unit 0

    # Ready time of each queue's head (its clock, or the time of a token it pops if later; -1: it
    # waits on an empty token FIFO, or the queue is done) and its arbitration key, kept: a step
    # changes them only for the queue that ran and for one whose empty FIFO it pushed a token to
    # (a FIFO has one consumer: push_prev of module m is pop_next of m - 1, push_next pop_prev of
    # m + 1, `isa`); those are marked in `dirty` (bit q) and recomputed, here, inline (a helper
    # taking the arrays would cost reference counting at every step). A head's flags are checked
    # there too: a new head is always marked.
    qt = np.full(3, -1, np.int64)
    qkey = np.zeros(3, np.int64)
    dirty = 7
    while True:
        for q in range(3):
            if not (dirty >> q) & 1:
                continue
            qt[q] = -1
            k = hk[q]
            if k < 0:
                continue
            fl = rt[k, _R_FLAG]
            if fl < 0:
                return _BAD_FLAG, k, t_end, busy, port_busy, hk, steps
            t = free[q]
            if fl & 1:
                f = pop_prev[q]
                if head[f] == tail[f]:
                    continue
                if fifo[f, head[f] & mask] > t:
                    t = fifo[f, head[f] & mask]
            if fl & 2:
                f = pop_next[q]
                if head[f] == tail[f]:
                    continue
                if fifo[f, head[f] & mask] > t:
                    t = fifo[f, head[f] & mask]
            qt[q] = t
            # Order by the time of the contended event: a DMA's port request (after its
            # off-port latency/row/pad cycles), otherwise the start.
            qkey[q] = t + rt[k, _R_KEY]
        dirty = 0
        m = -1
        for q in range(3):  # a tie goes to the lower queue
            if qt[q] >= 0 and (m < 0 or qkey[q] < qkey[m]):
                m = q
        if m < 0:
            if hk[0] < 0 and hk[1] < 0 and hk[2] < 0:
                break
            return _DEADLOCK, -1, t_end, busy, port_busy, hk, steps

        k = hk[m]
        fl = rt[k, _R_FLAG]
        t = qt[m]
        steps += 1
        if fl & 1:
            head[pop_prev[m]] += 1
        if fl & 2:
            head[pop_next[m]] += 1

        kind = rt[k, _R_KIND]
        if kind == _K_FIXED:
            end = t + rt[k, _R_FIX]
        elif kind == _K_DMA:
            data = rt[k, _R_BEATS] * inv_eff
            ready = t + rt[k, _R_FIX]
            start = ready if ready > port_free else port_free
            end = start + data
            port_free = end
            port_busy += data
        elif kind == _K_BAD_MEM:
            return _BAD_MEM, k, t_end, busy, port_busy, hk, steps
        else:
            return _BAD_OPCODE, k, t_end, busy, port_busy, hk, steps

        dirty = 1 << m
        if fl & 4:
            f = push_prev[m]
            n = tail[f] - head[f]
            if n >= fifo_cap:
                return _OVERFLOW, k, t_end, busy, port_busy, hk, steps
            fifo[f, tail[f] & mask] = end
            tail[f] += 1
            if n == 0:
                dirty |= 1 << (m - 1)
        if fl & 8:
            f = push_next[m]
            n = tail[f] - head[f]
            if n >= fifo_cap:
                return _OVERFLOW, k, t_end, busy, port_busy, hk, steps
            fifo[f, tail[f] & mask] = end
            tail[f] += 1
            if n == 0:
                dirty |= 1 << (m + 1)
        busy[m] += end - t
        free[m] = end
        if end > t_end:
            t_end = end
        iq[m] += 1
        if rt[k, _R_NXT] >= 0:
            hk[m] = rt[k, _R_NXT]
            continue
        # the queue's next unit with rows of it (inline, as the ready times above)
        p = pq[m] + 1
        while p < NP and blk[pair_class[p], _B_LEN + m] == 0:
            p += 1
        pq[m] = p
        iq[m] = 0
        hk[m] = blk[pair_class[p], _B_FIRST + m] if p < NP else -1
        if m != 0 or p >= NP or n_per == 0:
            continue

        # the load queue starts unit pq[0]: snapshot, try to skip whole periods
        port_free, port_busy, t_end = _fast_forward(st, anc, fifo, mask, port_free, port_busy, t_end, pair_class,
                                                    periods, blk, rt)
        dirty = 7
    return _OK, -1, t_end, busy, port_busy, hk, steps


@njit(cache=True)
def _kernel(rows, block_start, elem_bytes, port_bytes, p, pair_class, periods, fifo_cap):  # pragma: no cover
    """`_decode` then `_engine` in one compiled call (one dispatch; scalars back, no arrays to box):
    (status, row, cycles, busy[0], busy[1], busy[2], port_busy, heads[0], heads[1], heads[2], footprint),
    the times in cycles (the end rounded up, busy times to the nearest)."""
    blk, rt, inv_eff, footprint = _decode(rows, _COLS, block_start, elem_bytes, port_bytes, p)
    status, row, end, busy, port_busy, heads, _ = _engine(blk, rt, inv_eff, pair_class, periods, fifo_cap)
    unit = np.int64(_TIME_SCALE)
    half = unit >> 1
    return (status, row, -(-end // unit), (busy[0] + half) // unit, (busy[1] + half) // unit,
            (busy[2] + half) // unit, (port_busy + half) // unit, heads[0], heads[1], heads[2], footprint)


# -- Python wrapper ---------------------------------------------------------------------------
@lru_cache(maxsize=64)
def _hw_arrays(hw: HwConfig, uop_port_bytes: float) -> tuple[np.ndarray, np.ndarray]:
    """Element bytes and port bytes per beat, indexed by memory type (docs/vta.md §2.2, §4.5)."""
    elem = np.zeros(6, dtype=np.int64)
    elem[isa.MEM_UOP] = hw.uop_elem_bytes
    elem[isa.MEM_WGT] = hw.wgt_elem_bytes
    elem[isa.MEM_INP] = hw.inp_elem_bytes
    elem[isa.MEM_ACC] = hw.acc_elem_bytes
    elem[isa.MEM_OUT] = hw.out_elem_bytes
    elem[isa.MEM_ACC_8BIT] = hw.batch * hw.block_out  # int8 DRAM data into ACC (docs/vta.md §2.2)
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


#: (hw, params, (elem, port, param array)) of the last call, kept by identity (one tuple: read and
#: replaced whole, so a thread never sees the arrays of another pair)
_last_arrays: list[Any] = [(None, None, None)]


def _kernel_arrays(hw: HwConfig, params: TimingParams) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`_hw_arrays` and `_param_array` of (hw, params). Tuners time thousands of schedules on the same
    objects, so the last pair is kept by identity (both are frozen; hashing them costs more)."""
    last = _last_arrays[0]
    if last[0] is hw and last[1] is params:
        return last[2]
    elem, port = _hw_arrays(hw, params.uop_port_bytes)
    arrays = (elem, port, _param_array(params, hw.clock_mhz))
    _last_arrays[0] = (hw, params, arrays)
    return arrays


def _describe_head(insns: np.ndarray, i: int) -> str:
    op = int(insns[i, isa.COL["opcode"]])
    name = isa.OPCODE_NAMES.get(op, f"opcode {op}")
    if op in (isa.OP_LOAD, isa.OP_STORE):
        name += " " + isa.MEM_NAMES.get(int(insns[i, isa.COL["memory_type"]]), "?")
    return f"instruction {i} ({name})"


_LOAD, _COMPUTE, _STORE = isa.QUEUE_NAMES


def _result(out: tuple, rows: np.ndarray) -> TimingResult:
    """TimingResult of a `_kernel` run, or the SimulationError its status names."""
    status, idx, cycles, b_load, b_compute, b_store, port_busy, h_load, h_compute, h_store, footprint = out
    if status != _OK:
        _raise_status(status, idx, (h_load, h_compute, h_store), rows)
    return TimingResult(cycles, {_LOAD: b_load, _COMPUTE: b_compute, _STORE: b_store}, port_busy, int(footprint))


def _raise_status(status: int, idx: int, heads: tuple[int, int, int], m: np.ndarray) -> None:
    """The SimulationError a `_kernel` status names (none for _OVERFLOW: `time_blocks` handles it)."""
    if status == _DEADLOCK:
        blocked = []
        for q, h in enumerate(heads):
            if h < 0:
                continue
            waits = []
            for col, fifo in (("pop_prev_dep", isa.POP_PREV[q]), ("pop_next_dep", isa.POP_NEXT[q])):
                if m[h, isa.COL[col]] and fifo >= 0:
                    waits.append(_FIFO_NAMES[fifo])
            blocked.append(f"{isa.QUEUE_NAMES[q]} queue at {_describe_head(m, int(h))} waits on "
                           + "/".join(waits))
        raise SimulationError("deadlock: no module can progress; " + "; ".join(blocked))
    if status == _BAD_FLAG:
        raise SimulationError(f"{_describe_head(m, int(idx))}: dependency flag not allowed in its module's "
                              "queue (load: no pop_prev/push_prev; store: no pop_next/push_next; docs/vta.md §2.8)")
    if status == _BAD_OPCODE:
        raise SimulationError(f"instruction {idx}: opcode={m[idx, isa.COL['opcode']]} unknown; allowed 0..4")
    if status == _BAD_MEM:
        raise SimulationError(f"instruction {idx}: memory_type={m[idx, isa.COL['memory_type']]} unknown; "
                              "allowed 0..5")


def time_program(insns: np.ndarray, hw: HwConfig, params: TimingParams | None = None) -> TimingResult:
    """Cycles of an instruction matrix on `hw` under the decoupled access-execute model: every
    instruction is simulated in order (the instruction-level model).

    Raises SimulationError on a deadlock (no module can progress) or an illegal instruction."""
    params = default_params() if params is None else params
    m = np.ascontiguousarray(insns, dtype=np.int64)
    if m.ndim != 2 or m.shape[1] != isa.N_FIELDS:
        raise SimulationError(f"instruction matrix must have shape (n, {isa.N_FIELDS}), got {m.shape}")
    elem, port, p = _kernel_arrays(hw, params)
    out = _kernel(m, np.array([0, m.shape[0]], dtype=np.int64), elem, port, p, np.zeros(1, dtype=np.int64),
                  np.zeros(0, dtype=np.int64), m.shape[0] + 1)
    return _result(out, m)


#: Token capacity of the FIFOs in `time_blocks` (programs built from pair blocks keep a few
#: tokens in flight; more means a malformed pattern and falls back to `time_program`).
_BLOCK_FIFO_CAP = 4096


def time_blocks(rows: np.ndarray, block_start: np.ndarray, pair_class: np.ndarray, periods: np.ndarray,
                hw: HwConfig, params: TimingParams | None = None) -> TimingResult | None:
    """Cycles of a program given as blocks of instruction rows: block b is
    rows[block_start[b]:block_start[b + 1]], and the program runs block pair_class[j] for
    j = 0, 1, ... (a compiler's pairs, or the steps of its pairs, `lower.PairBlocks`; the last entry
    the tail). Exactly the cycles, busy and port cycles `time_program` gives on the full matrix (same
    kernel; whole periods of units whose state repeats are skipped, see `_engine`). Rows after the
    last block are run by none: they count for the DRAM footprint alone (`lower.PairBlocks` span
    rows). `periods`: candidate periods in units, largest first. None if more tokens are in flight
    than the kernel keeps."""
    params = default_params() if params is None else params
    elem, port, p = _kernel_arrays(hw, params)
    out = _kernel(rows, block_start, elem, port, p, pair_class, periods, _BLOCK_FIFO_CAP)
    if out[0] == _OVERFLOW:
        return None
    return _result(out, rows)


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
    """Host-side seconds of one operator call (docs/vta.md §4.7): per call, per instruction, per byte in/out."""
    return (params.host_call_s + params.host_per_insn_s * float(n_insns)
            + params.host_per_in_byte_s * float(in_bytes) + params.host_per_out_byte_s * float(out_bytes))


def predict_seconds(cycles: int | float, n_insns: int, hw: HwConfig, params: TimingParams | None = None,
                    in_bytes: int = 0, out_bytes: int = 0) -> float:
    """Operator seconds = device cycles at the config clock + host overhead (docs/vta.md §4.7). The ONE place
    where device cycles become the seconds a user or an AutoTVM log sees. `in_bytes`/`out_bytes`
    (the operator's input and output buffers) feed the per-byte host terms of a profile."""
    params = default_params() if params is None else params
    return float(cycles) / hw.clock_hz + host_seconds(n_insns, params, in_bytes, out_bytes)


__all__ = ["TimingParams", "TimingResult", "time_program", "time_blocks", "predict_seconds", "host_seconds",
           "port_efficiency",
           "default_params",
           "DEFAULT_PARAMS_PATH"]
