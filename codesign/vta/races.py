"""Check mode of the simulator: SRAM accesses of two modules that no dependency token orders.

The functional simulator runs the load, compute and store modules in one fixed order, so a
program that lacks a token can still compute the right answer here and race on the device (VTA's
own simulator starts each round at a random module, the hardware runs the modules concurrently).
This check does not depend on any order. It replays the token protocol once, without data
(compute stops at FINISH, as in the simulator) and builds the happens-before relation from it:

* instructions of one module are ordered by their queue position;
* the k-th pop of a token queue waits for the k-th push of it (tokens are plain counts, FIFO),
  and a push happens when its instruction has finished, so the pushing instruction happens
  before the popping one. Tokens already in the machine's queues order nothing.

Every instruction gets a vector clock (how many instructions of each module happen before it).
Along the replay, a shadow of each SRAM (INP, WGT, ACC; row granularity) keeps the last writer
and the last reader per module; an access of another module's row that is not ordered after that
writer (read-after-write, write-after-write) or, for a write, after those readers
(write-after-read) is a race (reported as write/read or write/write: which one came first is
exactly what is not fixed). STORE reads the accumulator rows it narrows (the simulator has no
OUT SRAM; on the device the same rows of OUT are written together with ACC). Finally every LOAD
and STORE must happen before FINISH: otherwise the host may read the output (or start the next
run) while they still run.

Rows are computed exactly (every (iter_out, iter_in, uop) index of GEMM and ALU, with the
micro-ops as LOAD UOP put them in the micro-op SRAM), so double buffering over disjoint halves
is not a false alarm. Plain Python + NumPy: meant for tests and `codesign simulate --check`,
not for the tuners' inner loop.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from codesign.vta import isa
from codesign.vta.program import Program

C = isa.COL
# token queue popped by (pop_prev, pop_next) / pushed by (push_prev, push_next) per module (docs/vta.md §2.8)
_POP = {isa.Q_LOAD: (None, 1), isa.Q_COMPUTE: (0, 3), isa.Q_STORE: (2, None)}
_PUSH = {isa.Q_LOAD: (None, 0), isa.Q_COMPUTE: (1, 2), isa.Q_STORE: (3, None)}
_SRAMS = ("INP", "WGT", "ACC")


@dataclass(frozen=True)
class Race:
    kind: str  # "write/read", "write/write" or "after FINISH"
    sram: str
    row: int
    writer: int  # instruction indices: the writing one and the other access (or FINISH)
    other: int

    def message(self, describe: Callable[[np.ndarray, int], str], insns: np.ndarray) -> str:
        """One line; `describe` names an instruction (the simulator's `describe`)."""
        a, b = describe(insns, self.writer), describe(insns, self.other)
        if self.kind == "after FINISH":
            return f"{a} is not ordered before {b}: no dependency token makes FINISH wait for it"
        verb = "writes it too" if self.kind == "write/write" else "reads it"
        return (f"unsynchronized {self.sram} SRAM row {self.row}: {a} writes it and {b} {verb} in another "
                "module, and no dependency token orders the two (the result depends on module timing)")


def _accesses(m: np.ndarray, i: int, uop: np.ndarray) -> list[tuple[int, np.ndarray, bool]]:
    """(sram 0..2 = INP/WGT/ACC, rows, is_write) of instruction i (LOAD UOP: see `_load_uops`)."""
    op = int(m[i, C["opcode"]])
    if op in (isa.OP_LOAD, isa.OP_STORE):
        xs, ys = int(m[i, C["x_size"]]), int(m[i, C["y_size"]])
        if xs == 0:
            return []
        sb, mem = int(m[i, C["sram_base"]]), int(m[i, C["memory_type"]])
        if op == isa.OP_STORE:
            return [(2, np.arange(sb, sb + xs * ys), False)]
        xp0, xp1 = int(m[i, C["x_pad_0"]]), int(m[i, C["x_pad_1"]])
        yp0, yp1 = int(m[i, C["y_pad_0"]]), int(m[i, C["y_pad_1"]])
        n = (xp0 + xs + xp1) * (yp0 + ys + yp1)
        if mem == isa.MEM_UOP:
            return []  # handled by the caller (it needs the DRAM image)
        sram = {isa.MEM_INP: 0, isa.MEM_WGT: 1}.get(mem, 2)
        return [(sram, np.arange(sb, sb + n), True)]
    if op not in (isa.OP_GEMM, isa.OP_ALU):
        return []
    bgn, end = int(m[i, C["uop_bgn"]]), int(m[i, C["uop_end"]])
    io, ii = int(m[i, C["iter_out"]]), int(m[i, C["iter_in"]])
    if end <= bgn or io == 0 or ii == 0:
        return []
    u = uop[bgn:end]
    y = np.arange(io)[:, None, None]
    x = np.arange(ii)[None, :, None]

    def rows(col: int, f_out: str, f_in: str) -> np.ndarray:
        return np.unique((u[:, col][None, None, :] + y * int(m[i, C[f_out]]) + x * int(m[i, C[f_in]])).ravel())

    dst = rows(0, "dst_factor_out", "dst_factor_in")
    if op == isa.OP_GEMM:
        if m[i, C["reset_reg"]]:
            return [(2, dst, True)]
        return [(0, rows(1, "src_factor_out", "src_factor_in"), False),
                (1, rows(2, "wgt_factor_out", "wgt_factor_in"), False), (2, dst, False), (2, dst, True)]
    out = [(2, dst, False)]
    if not m[i, C["use_imm"]]:
        out.append((2, rows(1, "src_factor_out", "src_factor_in"), False))
    return [*out, (2, dst, True)]


def find_races(program: Program, dram: np.ndarray, limit: int = 10) -> list[Race]:
    """Up to `limit` unsynchronized cross-module SRAM accesses of `program` (empty: none).
    `dram`: the DRAM image the program starts with (byte addresses; only the micro-ops are read).
    The program must pass `simulator.check_program`; deadlocks and empty pops are the simulator's
    to report (the replay just stops there)."""
    hw, m = program.hw, np.ascontiguousarray(program.insns, dtype=np.int64)
    queue = isa.queue_of(m)
    members = [np.flatnonzero(queue == q) for q in range(3)]
    widths = isa.uop_widths(hw)
    uop = np.zeros((hw.uop_depth, 3), dtype=np.int64)
    depth = (hw.inp_depth, hw.wgt_depth, hw.acc_depth)
    last_w = [np.full(d, -1, np.int64) for d in depth]  # instruction index of the last writer
    last_r = [np.full((3, d), -1, np.int64) for d in depth]  # per module: instruction of the last read
    pos = np.empty(m.shape[0], np.int64)
    for q in range(3):
        pos[members[q]] = np.arange(members[q].size)
    clock = np.zeros((3, 3), np.int64)  # running vector clock of each module
    fifo: list[deque] = [deque() for _ in range(4)]  # vector clocks of pushed tokens
    heads = [0, 0, 0]
    races: list[Race] = []
    seen: set[tuple[int, int, str]] = set()
    finish = -1

    def report(kind: str, sram: int, row: int, writer: int, other: int) -> None:
        key = (writer, other, kind)
        if key not in seen and len(races) < limit:
            seen.add(key)
            races.append(Race(kind, _SRAMS[sram], row, writer, other))

    def ordered_before(writers: np.ndarray, vc: np.ndarray) -> np.ndarray:
        """For instruction indices (>= 0), whether each happens before an access with clock vc."""
        return vc[queue[writers]] > pos[writers]

    progressed = True
    while progressed and finish < 0:
        progressed = False
        for q in range(3):
            while heads[q] < members[q].size and finish < 0:
                i = int(members[q][heads[q]])
                pops = [t for t, col in zip(_POP[q], ("pop_prev_dep", "pop_next_dep"), strict=True)
                        if t is not None and m[i, C[col]]]
                if any(not fifo[t] for t in pops):
                    break  # a fresh machine has no tokens waiting: the pop blocks
                vc = clock[q].copy()
                for t in pops:
                    vc = np.maximum(vc, fifo[t].popleft())
                vc[q] = pos[i]  # instructions of this module before i
                op, mem = int(m[i, C["opcode"]]), int(m[i, C["memory_type"]])
                if op == isa.OP_LOAD and mem == isa.MEM_UOP and m[i, C["x_size"]]:
                    _load_uops(m, i, uop, dram, widths)
                for sram, rows, write in _accesses(m, i, uop):
                    rows = rows[(rows >= 0) & (rows < depth[sram])]
                    w = last_w[sram][rows]
                    other = (w >= 0) & (queue[np.maximum(w, 0)] != q)
                    bad = np.flatnonzero(other & ~ordered_before(np.maximum(w, 0), vc))
                    if bad.size:
                        report("write/write" if write else "write/read", sram, int(rows[bad[0]]),
                               int(w[bad[0]]), i)
                    if write:
                        for r_mod in range(3):
                            if r_mod == q:
                                continue
                            rd = last_r[sram][r_mod, rows]
                            bad = np.flatnonzero((rd >= 0) & ~ordered_before(np.maximum(rd, 0), vc))
                            if bad.size:
                                report("write/read", sram, int(rows[bad[0]]), i, int(rd[bad[0]]))
                        last_w[sram][rows] = i
                        last_r[sram][:, rows] = -1
                    else:
                        last_r[sram][q, rows] = i
                vc[q] = pos[i] + 1  # i itself is done
                clock[q] = vc
                for t, col in zip(_PUSH[q], ("push_prev_dep", "push_next_dep"), strict=True):
                    if t is not None and m[i, C[col]]:
                        fifo[t].append(vc.copy())
                heads[q] += 1
                progressed = True
                if op == isa.OP_FINISH:
                    finish = i
    if finish >= 0:
        vc = clock[isa.Q_COMPUTE]
        for q in (isa.Q_LOAD, isa.Q_STORE):
            if vc[q] < members[q].size:
                report("after FINISH", 0, -1, int(members[q][vc[q]]), finish)
    return races


def _load_uops(m: np.ndarray, i: int, uop: np.ndarray, dram: np.ndarray, widths: tuple[int, ...]) -> None:
    """LOAD UOP into the micro-op SRAM model (docs/vta.md §3.2: 4-byte elements, zero pads)."""
    xs, ys, stride = int(m[i, C["x_size"]]), int(m[i, C["y_size"]]), int(m[i, C["x_stride"]])
    sb, db = int(m[i, C["sram_base"]]), int(m[i, C["dram_base"]])
    xp0, xp1 = int(m[i, C["x_pad_0"]]), int(m[i, C["x_pad_1"]])
    yp0, yp1 = int(m[i, C["y_pad_0"]]), int(m[i, C["y_pad_1"]])
    xt = xp0 + xs + xp1
    block = np.zeros((yp0 + ys + yp1, xt, 3), np.int64)
    for y in range(ys):
        lo = (db + y * stride) * isa.UOP_BYTES
        word = dram[lo:lo + xs * isa.UOP_BYTES].view("<u4").astype(np.int64)
        shift = 0
        for j, width in enumerate(widths):
            block[yp0 + y, xp0:xp0 + xs, j] = (word >> shift) & ((1 << width) - 1)
            shift += width
    rows = block.reshape(-1, 3)
    uop[sb:sb + rows.shape[0]] = rows[: max(0, uop.shape[0] - sb)]


__all__ = ["Race", "find_races"]
