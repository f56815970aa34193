"""Functional VTA simulator (reference §3, after VTA's `sim_driver.cc` / `sim_tlpp.cc`) plus the
entry point `simulate()` that adds cycles from the timing model (`codesign.vta.timing`).

Execution model (§3.8): instructions are dispatched to the load / compute / store queues by the
fetch rule (§2.9, `isa.queue_of`); each module runs its queue in order; pops of the four token
queues (l2g, g2l, g2s, s2g; plain counts, tokens carry no data) are blocking and happen before
an instruction executes, pushes after. The scheduler runs each module until its head
instruction blocks and cycles through the modules until none can progress: then the program
either finished or is stuck, which is reported as an empty-queue pop (no remaining instruction
will ever push the token) or a deadlock (a cycle of waits).

Data: the SRAMs are NumPy arrays shaped (depth, lanes) -- INP int8, WGT int8, ACC int32 and
UOP (depth, 3) int64 holding decoded micro-ops. There is no OUT SRAM: STORE narrows from ACC
as the simulator does (§3.1, §3.5). DRAM is one flat np.uint8 array indexed by physical byte
address covering every region of the program. Every SRAM and DRAM access is bounds-checked;
a DRAM access must lie inside one region.

GEMM is batched over all micro-op instances of an instruction: their (dst, src, wgt) index
arrays are built with NumPy and one numba kernel does the int8 x int8 -> int32 inner products
(3-5 GMAC/s on one core). A table of all (input row, weight row) products via float32 BLAS
was tried and dropped: with small BLOCK_IN it computes many unused products, and OpenBLAS
threads collapse when the machine's cores are shared. ALU runs in a numba kernel in the exact
sequential order of the reference loop, so in-place hazards within one instruction behave as
in `sim_driver.cc`.

SHR with a shift amount s taken from imm or an ACC value (§3.4): s >= 0 is an arithmetic right
shift, s < 0 a left shift by -s (int32 wrap-around). C leaves |s| >= 32 undefined; we use the
infinite-precision limit: right shifts by >= 32 give the sign (0 or -1), left shifts by >= 32
give 0. (HLS would instead use only the low 5 bits; compilers never emit such shifts.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numba import njit

from codesign.errors import SimulationError
from codesign.hw.config import HwConfig
from codesign.vta import isa
from codesign.vta.program import Program, check_region_data

COUNTERS = ("inp_load_nbytes", "wgt_load_nbytes", "acc_load_nbytes", "uop_load_nbytes",
            "out_store_nbytes", "gemm_counter", "alu_counter")

# Token queues (reference §2.8).
L2G, G2L, G2S, S2G = 0, 1, 2, 3
TOKEN_NAMES = ("l2g", "g2l", "g2s", "s2g")
# Per module: token queue read by pop_prev / pop_next and written by push_prev / push_next;
# None marks a flag that must be 0 for that module (§2.8 table).
_POP = {isa.Q_LOAD: (None, G2L), isa.Q_COMPUTE: (L2G, S2G), isa.Q_STORE: (G2S, None)}
_PUSH = {isa.Q_LOAD: (None, L2G), isa.Q_COMPUTE: (G2L, G2S), isa.Q_STORE: (S2G, None)}
_PRODUCER = {L2G: isa.Q_LOAD, G2L: isa.Q_COMPUTE, G2S: isa.Q_COMPUTE, S2G: isa.Q_STORE}

C = isa.COL
_C_OP, _C_POPP, _C_POPN, _C_PUSHP, _C_PUSHN = (C["opcode"], C["pop_prev_dep"], C["pop_next_dep"],
                                                C["push_prev_dep"], C["push_next_dep"])

@dataclass(frozen=True)
class SimResult:
    """Outcome of `simulate`. `outputs` maps each "output" region name to its bytes (uint8);
    `tokens_left` lists token queues that still hold tokens at the end (normally none)."""

    cycles: int
    seconds_device: float
    busy: dict[str, int]
    counters: dict[str, int]
    outputs: dict[str, np.ndarray]
    n_insns: int
    tokens_left: dict[str, int] = field(default_factory=dict)


# -- description helpers -------------------------------------------------------------------------
def describe(insns: np.ndarray, i: int) -> str:
    """'instruction 12 (LOAD INP)' -- used in every error message."""
    op = int(insns[i, _C_OP])
    name = isa.OPCODE_NAMES.get(op, f"opcode {op}")
    if op in (isa.OP_LOAD, isa.OP_STORE):
        name += " " + isa.MEM_NAMES.get(int(insns[i, C["memory_type"]]), "?")
    elif op == isa.OP_ALU:
        name += " " + isa.ALU_NAMES.get(int(insns[i, C["alu_opcode"]]), "?")
    elif op == isa.OP_GEMM and insns[i, C["reset_reg"]]:
        name += " reset"
    return f"instruction {i} ({name})"


# -- static checks and counters (shared by functional and timing-only modes) ------------------------
def check_program(program: Program) -> None:
    """Raise SimulationError for anything wrong that does not need data: field ranges, dependency
    flags a module must not use (§2.8), memory types, STORE rules (§3.5), micro-op ranges."""
    hw, m = program.hw, program.insns
    try:
        isa.check_insns(m, hw)
    except ValueError as exc:
        raise SimulationError(str(exc)) from None
    if m.shape[0] == 0:
        raise SimulationError("program has no instructions (a VTA program ends with FINISH)")
    op, q = m[:, _C_OP], isa.queue_of(m)
    for queue, (pp, pn) in _POP.items():
        for col, tok, word in ((_C_POPP, pp, "pop_prev_dep"), (_C_POPN, pn, "pop_next_dep")):
            bad = np.flatnonzero((q == queue) & (m[:, col] != 0)) if tok is None else []
            if len(bad):
                raise SimulationError(f"{describe(m, bad[0])}: {word} must be 0 in the "
                                      f"{isa.QUEUE_NAMES[queue]} module (reference §2.8)")
    for queue, (pp, pn) in _PUSH.items():
        for col, tok, word in ((_C_PUSHP, pp, "push_prev_dep"), (_C_PUSHN, pn, "push_next_dep")):
            bad = np.flatnonzero((q == queue) & (m[:, col] != 0)) if tok is None else []
            if len(bad):
                raise SimulationError(f"{describe(m, bad[0])}: {word} must be 0 in the "
                                      f"{isa.QUEUE_NAMES[queue]} module (reference §2.8)")
    mem, xs = m[:, C["memory_type"]], m[:, C["x_size"]]
    bad = np.flatnonzero((op == isa.OP_LOAD) & ~np.isin(mem, [isa.MEM_UOP, isa.MEM_WGT, isa.MEM_INP,
                                                              isa.MEM_ACC, isa.MEM_ACC_8BIT]))
    if bad.size:
        raise SimulationError(f"{describe(m, bad[0])}: LOAD memory_type={mem[bad[0]]}; allowed 0 (UOP), "
                              "1 (WGT), 2 (INP), 3 (ACC), 5 (ACC_8BIT)")
    store = (op == isa.OP_STORE) & (xs > 0)
    bad = np.flatnonzero(store & (mem != isa.MEM_OUT))
    if bad.size:
        raise SimulationError(f"{describe(m, bad[0])}: STORE memory_type={mem[bad[0]]}; only 4 (OUT) "
                              "is allowed (reference §3.5)")
    pads = m[:, [C["y_pad_0"], C["y_pad_1"], C["x_pad_0"], C["x_pad_1"]]].any(axis=1)
    bad = np.flatnonzero(store & pads)
    if bad.size:
        raise SimulationError(f"{describe(m, bad[0])}: STORE pads must be 0 (reference §3.5)")
    loop = (op == isa.OP_GEMM) | (op == isa.OP_ALU)
    bgn, end = m[:, C["uop_bgn"]], m[:, C["uop_end"]]
    bad = np.flatnonzero(loop & (bgn > end))
    if bad.size:
        raise SimulationError(f"{describe(m, bad[0])}: uop_bgn={bgn[bad[0]]} > uop_end={end[bad[0]]}")
    bad = np.flatnonzero(loop & (end > hw.uop_depth))
    if bad.size:
        raise SimulationError(f"{describe(m, bad[0])}: uop_end={end[bad[0]]} exceeds the micro-op "
                              f"buffer depth {hw.uop_depth}")
    bad = np.flatnonzero((op == isa.OP_ALU) & (m[:, C["alu_opcode"]] > isa.ALU_MUL))
    if bad.size:
        raise SimulationError(f"{describe(m, bad[0])}: alu_opcode={m[bad[0], C['alu_opcode']]}; "
                              "allowed 0 (MIN), 1 (MAX), 2 (ADD), 3 (SHR), 4 (MUL)")
    if not (op == isa.OP_FINISH).any():
        raise SimulationError("program has no FINISH instruction (the host would wait forever)")


def elem_bytes(hw: HwConfig) -> dict[int, int]:
    """DRAM bytes per element moved by a LOAD/STORE of each memory type (§1.2, §3.2)."""
    return {isa.MEM_UOP: isa.UOP_BYTES, isa.MEM_WGT: hw.wgt_elem_bytes, isa.MEM_INP: hw.inp_elem_bytes,
            isa.MEM_ACC: hw.acc_elem_bytes, isa.MEM_OUT: hw.out_elem_bytes,
            # int8 DRAM data widened to int32 lanes: one byte per ACC lane moves (§3.2).
            isa.MEM_ACC_8BIT: hw.batch * hw.block_out}


def count_insns(insns: np.ndarray, hw: HwConfig) -> dict[str, int]:
    """The profiler counters (§3.7) computed from the instruction matrix alone (timing-only mode)."""
    m = np.asarray(insns, dtype=np.int64)
    op, mem = m[:, _C_OP], m[:, C["memory_type"]]
    moved = m[:, C["x_size"]] * m[:, C["y_size"]]
    eb = elem_bytes(hw)
    load = op == isa.OP_LOAD

    def nbytes(mask: np.ndarray, mtype: int) -> int:
        return int(moved[mask].sum()) * eb[mtype]

    uops = m[:, C["iter_out"]] * m[:, C["iter_in"]] * (m[:, C["uop_end"]] - m[:, C["uop_bgn"]])
    return {
        "inp_load_nbytes": nbytes(load & (mem == isa.MEM_INP), isa.MEM_INP),
        "wgt_load_nbytes": nbytes(load & (mem == isa.MEM_WGT), isa.MEM_WGT),
        "acc_load_nbytes": nbytes(load & (mem == isa.MEM_ACC), isa.MEM_ACC)
        + nbytes(load & (mem == isa.MEM_ACC_8BIT), isa.MEM_ACC_8BIT),
        "uop_load_nbytes": nbytes(load & (mem == isa.MEM_UOP), isa.MEM_UOP),
        "out_store_nbytes": nbytes(op == isa.OP_STORE, isa.MEM_OUT),
        # reset GEMMs do not count (sim_driver.cc RunGEMM)
        "gemm_counter": int(uops[(op == isa.OP_GEMM) & (m[:, C["reset_reg"]] == 0)].sum()),
        "alu_counter": int(uops[op == isa.OP_ALU].sum()),
    }


# -- numba kernels ---------------------------------------------------------------------------------
@njit(cache=True)
def _gemm(acc, inp, wgt, dst, src, wsrc, nb, nk, no):  # pragma: no cover - compiled
    """acc[d][i][j] += sum_k inp[s][i][k] * wgt[w][j][k] per micro-op instance (§3.3)."""
    for t in range(dst.shape[0]):
        d, s, w = dst[t], src[t], wsrc[t]
        for i in range(nb):
            for j in range(no):
                total = 0
                for k in range(nk):
                    total += np.int32(inp[s, i * nk + k]) * np.int32(wgt[w, j * nk + k])
                acc[d, i * no + j] += total


@njit(cache=True)
def _alu(acc, dst, src, alu_op, use_imm, imm):  # pragma: no cover - compiled
    """acc[d][l] = f(acc[d][l], imm or acc[s][l]) in the reference loop order (§3.4)."""
    lanes = acc.shape[1]
    for t in range(dst.shape[0]):
        d, s = dst[t], src[t]
        for lane in range(lanes):
            x = np.int64(acc[d, lane])
            y = np.int64(imm) if use_imm else np.int64(acc[s, lane])
            if alu_op == 0:
                r = min(x, y)
            elif alu_op == 1:
                r = max(x, y)
            elif alu_op == 2:
                r = x + y
            elif alu_op == 3:
                if y >= 0:
                    r = x >> min(y, 63)  # >= 32: sign fill, see module docstring
                elif y > -32:
                    r = x << (-y)
                else:
                    r = np.int64(0)
            else:
                r = x * y
            acc[d, lane] = np.int32(r)  # truncation = int32 wrap-around


# -- the machine -------------------------------------------------------------------------------------
class Machine:
    """VTA device state: SRAMs and token queues persist across `run` calls, as on the device (§3.1,
    §3.8)."""

    def __init__(self, hw: HwConfig) -> None:
        self.hw = hw
        self.nb, self.nk, self.no = hw.batch, hw.block_in, hw.block_out
        self.inp = np.zeros((hw.inp_depth, self.nb * self.nk), dtype=np.int8)
        self.wgt = np.zeros((hw.wgt_depth, self.no * self.nk), dtype=np.int8)
        self.acc = np.zeros((hw.acc_depth, self.nb * self.no), dtype=np.int32)
        self.uop = np.zeros((hw.uop_depth, 3), dtype=np.int64)
        self.tokens = [0, 0, 0, 0]
        self.counters = dict.fromkeys(COUNTERS, 0)
        self.finished = 0

    # -- DRAM ------------------------------------------------------------------------------------
    def _setup_dram(self, program: Program, inputs: dict[str, Any] | None) -> None:
        inputs = dict(inputs or {})
        names = {r.name for r in program.regions}
        unknown = sorted(set(inputs) - names)
        if unknown:
            raise SimulationError(f"inputs name unknown DRAM region {unknown[0]!r}; regions: "
                                  + ", ".join(sorted(names)))
        regions = sorted(program.regions, key=lambda r: r.addr)
        maxe = max(elem_bytes(self.hw).values())
        end = max([r.end for r in regions], default=0)
        self.dram = np.zeros(-(-max(end, 1) // maxe) * maxe, dtype=np.uint8)
        for r in regions:
            if r.name in inputs:
                data = check_region_data(r.name, inputs[r.name], r.nbytes)
            else:
                data = r.data
            if data is None and r.role == "uop" and r.nbytes == isa.UOP_BYTES * program.n_uops:
                # a timing-only compile leaves the micro-op region empty; its content is the
                # program's micro-op table (program.py)
                data = np.frombuffer(isa.encode_uops(program.uops, self.hw), dtype=np.uint8)
            if data is None:
                if r.role == "input":
                    raise SimulationError(f"DRAM region {r.name!r} (input) has no data; pass "
                                          f"inputs={{{r.name!r}: array}}")
                continue
            self.dram[r.addr:r.end] = data
        self._starts = np.array([r.addr for r in regions], dtype=np.int64)
        self._ends = np.array([r.end for r in regions], dtype=np.int64)
        self._views: dict[tuple[int, Any], np.ndarray] = {}

    def _dram_view(self, nbytes: int, dtype: Any) -> np.ndarray:
        """DRAM as rows of `nbytes` bytes of `dtype` (element index = byte address / nbytes)."""
        key = (nbytes, dtype)
        view = self._views.get(key)
        if view is None:
            view = self.dram.view(dtype).reshape(-1, nbytes // np.dtype(dtype).itemsize)
            self._views[key] = view
        return view

    def _check_dram(self, i: int, lo: int, hi: int) -> None:
        r = int(np.searchsorted(self._starts, lo, side="right")) - 1
        if lo <= 0 or r < 0 or hi > self._ends[r]:
            raise SimulationError(
                f"{describe(self.insns, i)}: DRAM bytes [{lo:#x}, {hi:#x}) are outside every "
                "region of the program" + (f" (nearest region starts at {self._starts[r]:#x}, ends at "
                                           f"{self._ends[r]:#x})" if r >= 0 else ""))

    def _dram_rows(self, i: int, base: int, y_size: int, x_size: int, stride: int, nbytes: int) -> np.ndarray:
        """Element indices (y_size, x_size) of a 2-D strided DRAM access, bounds-checked."""
        if y_size == 0:  # nothing is read or written
            return np.zeros((0, x_size), dtype=np.int64)
        self._check_dram(i, base * nbytes, (base + (y_size - 1) * stride + x_size) * nbytes)
        return base + np.arange(y_size)[:, None] * stride + np.arange(x_size)[None, :]

    def _sram_check(self, i: int, what: str, hi: int, depth: int) -> None:
        if hi > depth:
            raise SimulationError(f"{describe(self.insns, i)}: {what} SRAM index {hi - 1} out of bounds "
                                  f"(depth {depth})")

    # -- instructions ------------------------------------------------------------------------------
    def _load(self, i: int, row: list[int]) -> None:
        xs = row[C["x_size"]]
        if xs == 0:  # sync no-op (§3.2)
            return
        mt, ys, stride = row[C["memory_type"]], row[C["y_size"]], row[C["x_stride"]]
        yp0, yp1, xp0, xp1 = row[C["y_pad_0"]], row[C["y_pad_1"]], row[C["x_pad_0"]], row[C["x_pad_1"]]
        sb, db = row[C["sram_base"]], row[C["dram_base"]]
        xt, yt = xp0 + xs + xp1, yp0 + ys + yp1
        nbytes = elem_bytes(self.hw)[mt]
        if mt == isa.MEM_UOP:
            sram, name, counter, src = self.uop, "UOP", "uop_load_nbytes", (4, np.uint8)
        elif mt == isa.MEM_INP:
            sram, name, counter, src = self.inp, "INP", "inp_load_nbytes", (nbytes, np.int8)
        elif mt == isa.MEM_WGT:
            sram, name, counter, src = self.wgt, "WGT", "wgt_load_nbytes", (nbytes, np.int8)
        elif mt == isa.MEM_ACC:
            sram, name, counter, src = self.acc, "ACC", "acc_load_nbytes", (nbytes, np.dtype("<i4"))
        else:  # ACC_8BIT: int8 DRAM data sign-extended into int32 lanes (§3.2)
            sram, name, counter, src = self.acc, "ACC", "acc_load_nbytes", (nbytes, np.int8)
        self._sram_check(i, name, sb + xt * yt, sram.shape[0])
        idx = self._dram_rows(i, db, ys, xs, stride, nbytes)
        data = self._dram_view(*src)[idx]
        if mt == isa.MEM_UOP:
            data = isa.decode_uops(data.tobytes(), self.hw).reshape(ys, xs, 3)
        block = sram[sb:sb + xt * yt].reshape(yt, xt, sram.shape[1])
        block[...] = 0
        block[yp0:yp0 + ys, xp0:xp0 + xs] = data
        self.counters[counter] += xs * ys * nbytes

    def _store(self, i: int, row: list[int]) -> None:
        xs = row[C["x_size"]]
        if xs == 0:
            return
        ys, stride, sb, db = row[C["y_size"]], row[C["x_stride"]], row[C["sram_base"]], row[C["dram_base"]]
        nbytes = self.hw.out_elem_bytes
        self._sram_check(i, "ACC", sb + xs * ys, self.acc.shape[0])
        idx = self._dram_rows(i, db, ys, xs, stride, nbytes)
        # low OUT_WIDTH bits, two's-complement wrap, no saturation (§3.5)
        vals = self.acc[sb:sb + xs * ys].astype(np.uint8).reshape(ys, xs, self.acc.shape[1])
        self._dram_view(nbytes, np.uint8)[idx] = vals
        self.counters["out_store_nbytes"] += xs * ys * nbytes

    def _indices(self, row: list[int], col: int, fo: str, fi: str) -> np.ndarray:
        """Index of every (iter_out, iter_in, uop) instance in loop order (§3.3, §3.4)."""
        u = self.uop[row[C["uop_bgn"]]:row[C["uop_end"]], col]
        y = np.arange(row[C["iter_out"]], dtype=np.int64)[:, None, None] * row[C[fo]]
        x = np.arange(row[C["iter_in"]], dtype=np.int64)[None, :, None] * row[C[fi]]
        return (u[None, None, :] + y + x).ravel()

    def _gemm(self, i: int, row: list[int]) -> None:
        n = row[C["iter_out"]] * row[C["iter_in"]] * (row[C["uop_end"]] - row[C["uop_bgn"]])
        if n <= 0:
            return
        dst = self._indices(row, 0, "dst_factor_out", "dst_factor_in")
        self._sram_check(i, "ACC", int(dst.max()) + 1, self.acc.shape[0])
        if row[C["reset_reg"]]:
            self.acc[dst] = 0
            return
        src = self._indices(row, 1, "src_factor_out", "src_factor_in")
        wgt = self._indices(row, 2, "wgt_factor_out", "wgt_factor_in")
        self._sram_check(i, "INP", int(src.max()) + 1, self.inp.shape[0])
        self._sram_check(i, "WGT", int(wgt.max()) + 1, self.wgt.shape[0])
        _gemm(self.acc, self.inp, self.wgt, dst, src, wgt, self.nb, self.nk, self.no)
        self.counters["gemm_counter"] += n

    def _alu(self, i: int, row: list[int]) -> None:
        n = row[C["iter_out"]] * row[C["iter_in"]] * (row[C["uop_end"]] - row[C["uop_bgn"]])
        if n <= 0:
            return
        dst = self._indices(row, 0, "dst_factor_out", "dst_factor_in")
        src = self._indices(row, 1, "src_factor_out", "src_factor_in")
        self._sram_check(i, "ACC", int(dst.max()) + 1, self.acc.shape[0])
        use_imm = bool(row[C["use_imm"]])
        if not use_imm:
            self._sram_check(i, "ACC", int(src.max()) + 1, self.acc.shape[0])
        _alu(self.acc, dst, src, row[C["alu_opcode"]], use_imm, row[C["imm"]])
        self.counters["alu_counter"] += n

    def _execute(self, i: int, row: list[int]) -> None:
        op = row[_C_OP]
        if op == isa.OP_LOAD:
            self._load(i, row)
        elif op == isa.OP_GEMM:
            self._gemm(i, row)
        elif op == isa.OP_ALU:
            self._alu(i, row)
        elif op == isa.OP_STORE:
            self._store(i, row)
        else:
            self.finished += 1

    # -- scheduling ------------------------------------------------------------------------------
    def run(self, program: Program, inputs: dict[str, Any] | None = None) -> dict[str, np.ndarray]:
        """Execute `program`; return the bytes of its output regions. Counters accumulate in
        `self.counters`."""
        if program.hw != self.hw:
            raise SimulationError(f"program is for {program.hw.name}, machine is {self.hw.name}")
        check_program(program)
        self._setup_dram(program, inputs)
        self.insns = program.insns
        rows = program.insns.tolist()
        queue = isa.queue_of(program.insns)
        order = [np.flatnonzero(queue == k).tolist() for k in range(3)]
        heads = [0, 0, 0]
        tok = self.tokens
        finished_before = self.finished
        progressed = True
        while progressed:
            progressed = False
            for core in (isa.Q_LOAD, isa.Q_COMPUTE, isa.Q_STORE):
                pp, pn = _POP[core]
                up, un = _PUSH[core]
                q, h = order[core], heads[core]
                while h < len(q):
                    i = q[h]
                    row = rows[i]
                    pop_p, pop_n = row[_C_POPP], row[_C_POPN]
                    if (pop_p and tok[pp] == 0) or (pop_n and tok[pn] == 0):
                        break
                    if pop_p:
                        tok[pp] -= 1
                    if pop_n:
                        tok[pn] -= 1
                    self._execute(i, row)
                    if row[_C_PUSHP]:
                        tok[up] += 1
                    if row[_C_PUSHN]:
                        tok[un] += 1
                    h += 1
                    progressed = True
                heads[core] = h
        if any(heads[k] < len(order[k]) for k in range(3)):
            raise SimulationError(self._stuck_message(rows, order, heads))
        if self.finished == finished_before:  # pragma: no cover - check_program requires FINISH
            raise SimulationError("program ended without executing FINISH")
        return {r.name: self.dram[r.addr:r.end].copy() for r in program.regions if r.role == "output"}

    def _stuck_message(self, rows: list[list[int]], order: list[list[int]], heads: list[int]) -> str:
        waits = []
        for core in range(3):
            if heads[core] >= len(order[core]):
                continue
            i = order[core][heads[core]]
            row = rows[i]
            for col, tq in ((_C_POPP, _POP[core][0]), (_C_POPN, _POP[core][1])):
                if row[col] and self.tokens[tq] == 0:
                    waits.append((core, i, tq))
                    break
        # An empty pop: no instruction still to run in the producing module pushes that token.
        for core, i, tq in waits:
            prod = _PRODUCER[tq]
            col = _C_PUSHP if _PUSH[prod][0] == tq else _C_PUSHN
            pending = [j for j in order[prod][heads[prod]:] if rows[j][col]]
            if not pending:
                return (f"{describe(self.insns, i)} in the {isa.QUEUE_NAMES[core]} module pops an empty "
                        f"{TOKEN_NAMES[tq]} token queue: no remaining instruction pushes "
                        f"{TOKEN_NAMES[tq]}")
        parts = [f"{isa.QUEUE_NAMES[core]} waits at {describe(self.insns, i)} for a "
                 f"{TOKEN_NAMES[tq]} token" for core, i, tq in waits]
        return "deadlock: no module can progress; " + "; ".join(parts)


# -- entry point -------------------------------------------------------------------------------------
def simulate(program: Program, *, functional: bool = True, params: Any = None,
             inputs: dict[str, Any] | None = None) -> SimResult:
    """Run `program`. Functional mode executes it over DRAM and SRAMs (raising SimulationError on
    deadlock, empty pops and out-of-bounds accesses) and returns its output regions; timing-only
    mode touches no data. Both return the same counters, and cycles/busy from
    `codesign.vta.timing.time_program`; seconds_device = cycles / clock (no host overhead)."""
    from codesign.vta import timing  # lazy: numba compile of the timing kernel on first use

    outputs: dict[str, np.ndarray] = {}
    tokens_left: dict[str, int] = {}
    if functional:
        machine = Machine(program.hw)
        outputs = machine.run(program, inputs)
        counters = dict(machine.counters)
        tokens_left = {TOKEN_NAMES[k]: v for k, v in enumerate(machine.tokens) if v}
    else:
        check_program(program)
        counters = count_insns(program.insns, program.hw)
    res = timing.time_program(program.insns, program.hw, params)
    return SimResult(
        cycles=int(res.cycles),
        seconds_device=float(res.cycles) / program.hw.clock_hz,
        busy={k: int(v) for k, v in res.busy.items()},
        counters=counters,
        outputs=outputs,
        n_insns=program.n_insns,
        tokens_left=tokens_left,
    )


__all__ = ["simulate", "SimResult", "Machine", "check_program", "count_insns", "elem_bytes",
           "describe", "COUNTERS", "TOKEN_NAMES"]
