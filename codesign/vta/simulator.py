"""Functional VTA simulator (docs/vta.md §3, after VTA's `sim_driver.cc` / `sim_tlpp.cc`) plus the
entry point `simulate()` that adds cycles from the timing model (`codesign.vta.timing`).

Execution model (docs/vta.md §3.8): instructions are dispatched to the load / compute / store queues by the
fetch rule (docs/vta.md §2.9, `isa.queue_of`); each module runs its queue in order; pops of the four token
queues (l2g, g2l, g2s, s2g; plain counts, tokens carry no data) are blocking and happen before
an instruction executes, pushes after. The scheduler runs the load, then the compute, then the
store module until its head instruction blocks, and repeats until none can progress (sim_tlpp
starts at a random module; a fixed order makes runs reproducible -- a program whose result
depends on the order is missing tokens). Then every queue must be empty, otherwise the program
is stuck: reported as an empty-queue pop (no remaining instruction will ever push the token)
or as a deadlock (a cycle of waits), naming the blocked instructions. FINISH must execute, and
it ends the run as in sim_tlpp (its loop stops once FINISH has run): compute instructions queued
after it never run, the load and store modules only drain what is ready without the compute
module; whatever did not run is counted in `SimResult.not_run` (VTA drops it silently). A
program whose result depends on the module order is missing tokens: `simulate(check=True)` runs
`codesign.vta.races`, which finds unsynchronized cross-module SRAM accesses independently of the
order. Tokens left over at the end are reported in
`SimResult.tokens_left` (the device FIFOs would keep them for the next run). Not modelled:
the 512-entry command and 1024-entry token FIFO capacities (docs/vta.md §2.8).

Data: the SRAMs are NumPy arrays shaped (depth, lanes) -- INP int8, WGT int8, ACC int32 and
UOP (depth, 3) int64 holding decoded micro-ops. There is no OUT SRAM: STORE narrows from ACC
as the simulator does (docs/vta.md §3.1, §3.5). DRAM is one flat np.uint8 array indexed by physical byte
address covering every region of the program. Every SRAM and DRAM access is bounds-checked;
a DRAM access must lie inside one region. `Machine` state (SRAMs, token counts) persists
across `run` calls, as on the device.

LOAD pads with zeros for every memory type including WGT and UOP, as sim_driver's
SRAM::Load does (docs/vta.md §3.2; HLS ignores WGT/UOP padding). LOAD ACC_8BIT reads BATCH*BLOCK_OUT int8
values per element at byte address dram_base * ACC_ELEM_BYTES / 4 and sign-extends them;
acc_load_nbytes counts what VTA's profiler counts, x_size*y_size*ACC_ELEM_BYTES (the 32-bit
accumulator element), not the one byte per lane it reads from DRAM (`counter_bytes`).

Speed: the whole execution -- scheduler, DMA copies, GEMM, ALU -- is one numba kernel
(`_engine`, ~1-3 M instructions/s); Python only prepares arrays and words errors. GEMM is
batched over all (iter_out, iter_in, uop) instances of an instruction after a bounds pass
(int8 x int8 -> int32 wrap-around, 3-5 GMAC/s on one core). A table of all (input row, weight
row) products via float32 BLAS was tried and dropped: with small BLOCK_IN it computes many
unused products, and OpenBLAS threads collapse when the machine's cores are shared. ALU runs
in the exact sequential order of the reference loop, so in-place hazards within one
instruction behave as in `sim_driver.cc`.

SHR with a shift amount s taken from imm or an ACC value (docs/vta.md §3.4): s >= 0 is an arithmetic right
shift, s < 0 a left shift by -s (int32 wrap-around). C leaves |s| >= 32 undefined; we use the
infinite-precision limit: right shifts by >= 32 give the sign (0 or -1), left shifts by >= 32
give 0. (HLS would instead use only the low 5 bits; compilers never emit such shifts.)
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
from numba import njit

from codesign.errors import SimulationError
from codesign.hw.config import HwConfig
from codesign.vta import isa, timing
from codesign.vta.program import Program, check_region_data
from codesign.vta.races import find_races

COUNTERS = ("inp_load_nbytes", "wgt_load_nbytes", "acc_load_nbytes", "uop_load_nbytes",
            "out_store_nbytes", "gemm_counter", "alu_counter")

# Token queues (docs/vta.md §2.8): numbering and per-module flag tables live in `isa`.
L2G, G2L, G2S, S2G = isa.TOK_L2G, isa.TOK_G2L, isa.TOK_G2S, isa.TOK_S2G
TOKEN_NAMES = isa.TOKEN_NAMES
# Per module: token queue read by pop_prev / pop_next and written by push_prev / push_next;
# None marks a flag that must be 0 for that module (docs/vta.md §2.8 table).
_POP = {q: tuple(None if t < 0 else t for t in (isa.POP_PREV[q], isa.POP_NEXT[q])) for q in range(3)}
_PUSH = {q: tuple(None if t < 0 else t for t in (isa.PUSH_PREV[q], isa.PUSH_NEXT[q])) for q in range(3)}
_PRODUCER = {t: q for q in range(3) for t in (isa.PUSH_PREV[q], isa.PUSH_NEXT[q]) if t >= 0}

C = isa.COL
_C_OP, _C_POPP, _C_POPN, _C_PUSHP, _C_PUSHN = (C["opcode"], C["pop_prev_dep"], C["pop_next_dep"],
                                                C["push_prev_dep"], C["push_next_dep"])
_C_MEM, _C_SRAM, _C_DRAM, _C_YS, _C_XS, _C_STRIDE = (C["memory_type"], C["sram_base"], C["dram_base"],
                                                      C["y_size"], C["x_size"], C["x_stride"])
_C_YP0, _C_YP1, _C_XP0, _C_XP1 = C["y_pad_0"], C["y_pad_1"], C["x_pad_0"], C["x_pad_1"]
_C_RESET, _C_BGN, _C_END, _C_IO, _C_II = C["reset_reg"], C["uop_bgn"], C["uop_end"], C["iter_out"], C["iter_in"]
_C_DFO, _C_DFI, _C_SFO, _C_SFI, _C_WFO, _C_WFI = (C["dst_factor_out"], C["dst_factor_in"], C["src_factor_out"],
                                                  C["src_factor_in"], C["wgt_factor_out"], C["wgt_factor_in"])
_C_ALU, _C_IMM_ON, _C_IMM = C["alu_opcode"], C["use_imm"], C["imm"]

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
    not_run: int = 0  # instructions still queued when FINISH ended the run (functional mode)


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
def check_program(program: Program) -> dict[str, int]:
    """Raise SimulationError for anything wrong that does not need data: field ranges, dependency
    flags a module must not use (docs/vta.md §2.8), memory types, STORE rules (docs/vta.md §3.5), micro-op ranges, a
    missing FINISH. Returns the profiler counters (see `count_insns`). One compiled pass over
    the matrix; the NumPy rules of `_explain_program` only run to word an error."""
    m = np.ascontiguousarray(program.insns, dtype=np.int64)
    bad = -1
    if m.shape[0]:
        bad, has_finish, counts = _scan(m, *_scan_tables(program.hw))
        if bad < 0 and has_finish:
            return dict(zip(COUNTERS, (int(c) for c in counts)))
    _explain_program(program)
    raise SimulationError(f"{describe(m, bad)}: invalid instruction")  # pragma: no cover


def _explain_program(program: Program) -> None:
    """The checks of `check_program` in NumPy, raising the first violation with its message."""
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
                                      f"{isa.QUEUE_NAMES[queue]} module (docs/vta.md §2.8)")
    for queue, (pp, pn) in _PUSH.items():
        for col, tok, word in ((_C_PUSHP, pp, "push_prev_dep"), (_C_PUSHN, pn, "push_next_dep")):
            bad = np.flatnonzero((q == queue) & (m[:, col] != 0)) if tok is None else []
            if len(bad):
                raise SimulationError(f"{describe(m, bad[0])}: {word} must be 0 in the "
                                      f"{isa.QUEUE_NAMES[queue]} module (docs/vta.md §2.8)")
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
                              "is allowed (docs/vta.md §3.5)")
    pads = m[:, [C["y_pad_0"], C["y_pad_1"], C["x_pad_0"], C["x_pad_1"]]].any(axis=1)
    bad = np.flatnonzero(store & pads)
    if bad.size:
        raise SimulationError(f"{describe(m, bad[0])}: STORE pads must be 0 (docs/vta.md §3.5)")
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
    """DRAM bytes per element moved by a LOAD/STORE of each memory type (`isa.elem_bytes`)."""
    return isa.elem_bytes(hw)


def counter_bytes(hw: HwConfig) -> dict[int, int]:
    """Bytes per element that VTA's profiler adds to the *_load_nbytes / out_store_nbytes
    counters (docs/vta.md §3.7): the DRAM bytes, except LOAD ACC_8BIT, which sim_driver counts with the SRAM's
    ACC_ELEM_BYTES (32-bit lanes) although it reads one byte per lane."""
    out = elem_bytes(hw)
    out[isa.MEM_ACC_8BIT] = hw.acc_elem_bytes
    return out


def count_insns(insns: np.ndarray, hw: HwConfig) -> dict[str, int]:
    """The profiler counters (docs/vta.md §3.7) computed from the instruction matrix alone (timing-only mode):
    bytes = x_size * y_size * `counter_bytes` per LOAD/STORE (padding excluded), micro-ops =
    iter_out * iter_in * (uop_end - uop_bgn) per GEMM (reset GEMMs excluded, as in
    sim_driver.cc RunGEMM) and per ALU. Compute-module instructions after the first FINISH are
    not counted: they never run."""
    m = np.ascontiguousarray(insns, dtype=np.int64)
    _, _, counts = _scan(m, *_scan_tables(hw))
    return dict(zip(COUNTERS, (int(c) for c in counts)))


@lru_cache(maxsize=32)
def _scan_tables(hw: HwConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Per-opcode (8, n_fields) lower/upper bounds of every column (0..0 for a field the opcode
    lacks; unknown opcodes 5..7 are impossible), counter bytes per memory type, uop depth."""
    lo = np.zeros((8, isa.N_FIELDS), dtype=np.int64)
    hi = np.zeros((8, isa.N_FIELDS), dtype=np.int64)
    lo[5:, _C_OP] = 1
    for op, lay in isa.layouts(hw).items():
        for f in lay:
            lo[op, C[f.name]], hi[op, C[f.name]] = f.lo, f.hi
        lo[op, _C_OP] = hi[op, _C_OP] = op
    cb = counter_bytes(hw)
    cbytes = np.array([cb[k] for k in range(6)], dtype=np.int64)
    return lo, hi, cbytes, hw.uop_depth


# -- numba kernels ---------------------------------------------------------------------------------
@njit(cache=True)
def _copy_in(sram, dram, sb, dram_byte, ys, xs, stride_bytes, yp0, yp1, xp0, xp1):  # pragma: no cover
    """2-D strided DRAM -> SRAM copy with zero padding (docs/vta.md §3.2); `sram` is the byte view (depth,
    element bytes) of INP, WGT or ACC. SRAM rows are packed with pitch x_pad_0+x_size+x_pad_1."""
    eb = sram.shape[1]
    xt = xp0 + xs + xp1
    row = sb
    for _ in range(yp0 * xt):
        sram[row, :] = 0
        row += 1
    for y in range(ys):
        for _ in range(xp0):
            sram[row, :] = 0
            row += 1
        src = dram_byte + y * stride_bytes
        for _x in range(xs):
            for b in range(eb):
                sram[row, b] = dram[src + b]
            src += eb
            row += 1
        for _ in range(xp1):
            sram[row, :] = 0
            row += 1
    for _ in range(yp1 * xt):
        sram[row, :] = 0
        row += 1


@njit(cache=True)
def _copy_out(acc, dram, sb, dram_byte, ys, xs, stride_bytes):  # pragma: no cover - compiled
    """STORE (docs/vta.md §3.5): low 8 bits of ACC rows sb.. (packed) to 2-D strided DRAM."""
    lanes = acc.shape[1]
    row = sb
    for y in range(ys):
        dst = dram_byte + y * stride_bytes
        for _x in range(xs):
            for lane in range(lanes):
                dram[dst + lane] = np.uint8(acc[row, lane] & 0xFF)
            dst += lanes
            row += 1


@njit(cache=True)
def _scan(m, lo, hi, ebytes, uop_depth):  # pragma: no cover - compiled
    """One pass over the instruction matrix: first row breaking a static rule (or -1), whether
    a FINISH exists, and the seven profiler counters (order of COUNTERS; `ebytes` = counter bytes
    per memory type; compute-module rows after the first FINISH never run and are not counted)."""
    counts = np.zeros(7, dtype=np.int64)
    bad = -1
    has_finish = False
    for r in range(m.shape[0]):
        op = m[r, _C_OP]
        ok = 0 <= op <= 7
        if ok:
            for c in range(m.shape[1]):
                if m[r, c] < lo[op, c] or m[r, c] > hi[op, c]:
                    ok = False
                    break
        if ok:
            mem, xs, ys = m[r, _C_MEM], m[r, _C_XS], m[r, _C_YS]
            if op == 0:
                if mem == 1 or mem == 2:  # load module: no prev flags (docs/vta.md §2.8)
                    ok = m[r, _C_POPP] == 0 and m[r, _C_PUSHP] == 0
                ok = ok and mem != 4 and mem <= 5
                if ok and not (has_finish and (mem == 0 or mem >= 3)):  # UOP/ACC: compute module
                    k = (3, 1, 0, 2, -1, 2)[mem]  # counter of each memory type
                    counts[k] += xs * ys * ebytes[mem]
            elif op == 1:  # store module: no next flags; OUT only and no pads (docs/vta.md §3.5)
                ok = m[r, _C_POPN] == 0 and m[r, _C_PUSHN] == 0
                if xs > 0:
                    ok = ok and mem == 4 and (m[r, _C_YP0] | m[r, _C_YP1] | m[r, _C_XP0] | m[r, _C_XP1]) == 0
                counts[4] += xs * ys * ebytes[4]
            elif op == 2 or op == 4:
                bgn, end = m[r, _C_BGN], m[r, _C_END]
                ok = bgn <= end and end <= uop_depth and (op == 2 or m[r, _C_ALU] <= 4)
                n = m[r, _C_IO] * m[r, _C_II] * (end - bgn)
                if has_finish:
                    n = 0
                if op == 4:
                    counts[6] += n
                elif m[r, _C_RESET] == 0:
                    counts[5] += n
            elif op == 3:
                has_finish = True
        if not ok and bad < 0:
            bad = r
    return bad, has_finish, counts


@njit(cache=True)
def _loop_max(uop, bgn, end, col, n_out, n_in, f_out, f_in):  # pragma: no cover - compiled
    """Largest index a (iter_out, iter_in, uop) loop forms from micro-op column `col` (all terms
    are non-negative, so the maximum is at the last iteration)."""
    m = 0
    for u in range(bgn, end):
        m = max(m, uop[u, col])
    return m + (n_out - 1) * f_out + (n_in - 1) * f_in


@njit(cache=True)
def _gemm(acc, inp, wgt, uop, bgn, end, n_out, n_in, fd0, fd1, fs0, fs1, fw0, fw1, reset,
          nb, nk, no):  # pragma: no cover - compiled
    """GEMM over every (iter_out, iter_in, uop) instance (docs/vta.md §3.3): acc[d][i][j] += sum_k
    inp[s][i][k] * wgt[w][j][k] (int32 wrap-around), or acc[d] = 0 with reset. Checks bounds
    before touching anything; returns (0, 0) or (1|2|3 = ACC|INP|WGT, offending index)."""
    hi = _loop_max(uop, bgn, end, 0, n_out, n_in, fd0, fd1)
    if hi >= acc.shape[0]:
        return 1, hi
    if not reset:
        hi = _loop_max(uop, bgn, end, 1, n_out, n_in, fs0, fs1)
        if hi >= inp.shape[0]:
            return 2, hi
        hi = _loop_max(uop, bgn, end, 2, n_out, n_in, fw0, fw1)
        if hi >= wgt.shape[0]:
            return 3, hi
    for y in range(n_out):
        for x in range(n_in):
            for u in range(bgn, end):
                d = uop[u, 0] + y * fd0 + x * fd1
                if reset:
                    for lane in range(acc.shape[1]):
                        acc[d, lane] = 0
                    continue
                s = uop[u, 1] + y * fs0 + x * fs1
                w = uop[u, 2] + y * fw0 + x * fw1
                for i in range(nb):
                    for j in range(no):
                        total = 0
                        for k in range(nk):
                            total += np.int32(inp[s, i * nk + k]) * np.int32(wgt[w, j * nk + k])
                        acc[d, i * no + j] += total
    return 0, 0


@njit(cache=True)
def _alu(acc, uop, bgn, end, n_out, n_in, fd0, fd1, fs0, fs1, alu_op, use_imm, imm):  # pragma: no cover
    """acc[d][l] = f(acc[d][l], imm or acc[s][l]) in the reference loop order (docs/vta.md §3.4); returns
    (0, 0) or (1, offending ACC index) before touching anything."""
    hi = _loop_max(uop, bgn, end, 0, n_out, n_in, fd0, fd1)
    if not use_imm:
        hi = max(hi, _loop_max(uop, bgn, end, 1, n_out, n_in, fs0, fs1))
    if hi >= acc.shape[0]:
        return 1, hi
    lanes = acc.shape[1]
    for yy in range(n_out):
        for xx in range(n_in):
            for u in range(bgn, end):
                d = uop[u, 0] + yy * fd0 + xx * fd1
                s = uop[u, 1] + yy * fs0 + xx * fs1
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
    return 0, 0


@njit(cache=True)
def _dram_ok(starts, ends, lo, hi):  # pragma: no cover - compiled
    """Is the byte range [lo, hi) inside one DRAM region?"""
    for r in range(starts.shape[0]):
        if starts[r] <= lo and hi <= ends[r]:
            return lo > 0
    return False


@njit(cache=True)
def _exec_mem(m, i, op, inp_b, wgt_b, acc, acc_b, uop, dram, starts, ends, ebytes, depths,
              uop_bits, counters):  # pragma: no cover - compiled
    """One LOAD or STORE (docs/vta.md §3.2, §3.5). Returns (status, a, b): 0 ok; 1 SRAM out of bounds
    (a = memory type, b = index); 2 DRAM out of bounds (a, b = byte range)."""
    xs, ys = m[i, _C_XS], m[i, _C_YS]
    if xs == 0:  # sync no-op: only its dependency flags matter
        return 0, 0, 0
    mt, stride, sb, db = m[i, _C_MEM], m[i, _C_STRIDE], m[i, _C_SRAM], m[i, _C_DRAM]
    if op == 1:
        mt = 4  # STORE reads ACC rows (no OUT SRAM in the simulator, §3.1)
    eb = ebytes[mt]
    yp0, yp1, xp0, xp1 = m[i, _C_YP0], m[i, _C_YP1], m[i, _C_XP0], m[i, _C_XP1]
    xt, yt = xp0 + xs + xp1, yp0 + ys + yp1
    if op == 1:
        if ys == 0:
            return 0, 0, 0
        xt, yt = xs, ys
    if sb + xt * yt > depths[mt]:
        return 1, mt, sb + xt * yt - 1
    lo, hi = db * eb, (db + (ys - 1) * stride + xs) * eb
    if ys > 0 and not _dram_ok(starts, ends, lo, hi):
        return 2, lo, hi
    if op == 1:
        _copy_out(acc, dram, sb, lo, ys, xs, stride * eb)
        counters[4] += xs * ys * eb
        return 0, 0, 0
    if mt == 2:
        _copy_in(inp_b, dram, sb, lo, ys, xs, stride * eb, yp0, yp1, xp0, xp1)
        counters[0] += xs * ys * eb
    elif mt == 1:
        _copy_in(wgt_b, dram, sb, lo, ys, xs, stride * eb, yp0, yp1, xp0, xp1)
        counters[1] += xs * ys * eb
    elif mt == 3:
        _copy_in(acc_b, dram, sb, lo, ys, xs, stride * eb, yp0, yp1, xp0, xp1)
        counters[2] += xs * ys * eb
    else:  # UOP (decoded on the way in) or ACC_8BIT (int8 sign-extended to int32 lanes)
        lanes = uop.shape[1] if mt == 0 else acc.shape[1]
        row = sb
        for _ in range(yp0 * xt):
            _zero_row(uop, acc, mt, row, lanes)
            row += 1
        for y in range(ys):
            for _ in range(xp0):
                _zero_row(uop, acc, mt, row, lanes)
                row += 1
            src = lo + y * stride * eb
            for _x in range(xs):
                if mt == 0:
                    word = (np.int64(dram[src]) | (np.int64(dram[src + 1]) << 8)
                            | (np.int64(dram[src + 2]) << 16) | (np.int64(dram[src + 3]) << 24))
                    uop[row, 0] = word & ((1 << uop_bits[0]) - 1)
                    uop[row, 1] = (word >> uop_bits[0]) & ((1 << uop_bits[1]) - 1)
                    uop[row, 2] = (word >> (uop_bits[0] + uop_bits[1])) & ((1 << uop_bits[2]) - 1)
                else:
                    for lane in range(lanes):
                        acc[row, lane] = np.int32(np.int8(dram[src + lane]))
                src += eb
                row += 1
            for _ in range(xp1):
                _zero_row(uop, acc, mt, row, lanes)
                row += 1
        for _ in range(yp1 * xt):
            _zero_row(uop, acc, mt, row, lanes)
            row += 1
        # ACC_8BIT counts as VTA's profiler does: ACC element bytes, not the bytes read (docs/vta.md §3.7)
        counters[3 if mt == 0 else 2] += xs * ys * (eb if mt == 0 else ebytes[3])
    return 0, 0, 0


@njit(cache=True)
def _zero_row(uop, acc, mt, row, lanes):  # pragma: no cover - compiled
    for lane in range(lanes):
        if mt == 0:
            uop[row, lane] = 0
        else:
            acc[row, lane] = 0


@njit(cache=True)
def _engine(m, order, qstart, heads, tokens, counters, inp, wgt, acc, uop, inp_b, wgt_b, acc_b,
            dram, starts, ends, ebytes, depths, uop_bits, nb, nk, no):  # pragma: no cover - compiled
    """Run the three module queues with token semantics (docs/vta.md §3.8) until none can progress.
    `order[qstart[q]:qstart[q+1]]` are the instruction indices of queue q; `heads`, `tokens` and
    `counters` are updated in place. Returns (status, instruction, a, b, finished): status 0 =
    no module can progress (done if every head reached its end), 1 = SRAM out of bounds (a =
    memory type 0..4 with 4 = ACC read by STORE, 5..7 = ACC/INP/WGT in GEMM/ALU; b = index),
    2 = DRAM out of bounds (a, b = byte range). The compute module stops after FINISH; load and
    store then run only what is ready without it."""
    finished = 0
    progressed = True
    while progressed:
        progressed = False
        for core in range(3):
            if core == 1 and finished:
                continue
            if core == 0:
                pp, pn, up, un = -1, 1, -1, 0      # load: pops g2l, pushes l2g
            elif core == 1:
                pp, pn, up, un = 0, 3, 1, 2        # compute: pops l2g/s2g, pushes g2l/g2s
            else:
                pp, pn, up, un = 2, -1, 3, -1      # store: pops g2s, pushes s2g
            h = heads[core]
            n = qstart[core + 1] - qstart[core]
            while h < n:
                i = order[qstart[core] + h]
                pop_p = m[i, _C_POPP] != 0 and pp >= 0
                pop_n = m[i, _C_POPN] != 0 and pn >= 0
                if (pop_p and tokens[pp] == 0) or (pop_n and tokens[pn] == 0):
                    break
                if pop_p:
                    tokens[pp] -= 1
                if pop_n:
                    tokens[pn] -= 1
                op = m[i, _C_OP]
                st, a, b = 0, 0, 0
                if op == 0 or op == 1:
                    st, a, b = _exec_mem(m, i, op, inp_b, wgt_b, acc, acc_b, uop, dram, starts, ends,
                                         ebytes, depths, uop_bits, counters)
                elif op == 2 or op == 4:
                    bgn, end, n_out, n_in = m[i, _C_BGN], m[i, _C_END], m[i, _C_IO], m[i, _C_II]
                    cnt = n_out * n_in * (end - bgn)
                    if cnt > 0:
                        if op == 2:
                            reset = m[i, _C_RESET] != 0
                            code, idx = _gemm(acc, inp, wgt, uop, bgn, end, n_out, n_in,
                                              m[i, _C_DFO], m[i, _C_DFI], m[i, _C_SFO], m[i, _C_SFI],
                                              m[i, _C_WFO], m[i, _C_WFI], reset, nb, nk, no)
                            if not reset:  # reset GEMMs do not count (sim_driver.cc RunGEMM)
                                counters[5] += cnt
                        else:
                            code, idx = _alu(acc, uop, bgn, end, n_out, n_in, m[i, _C_DFO], m[i, _C_DFI],
                                             m[i, _C_SFO], m[i, _C_SFI], m[i, _C_ALU], m[i, _C_IMM_ON] != 0,
                                             m[i, _C_IMM])
                            counters[6] += cnt
                        if code:
                            st, a, b = 1, 4 + code, idx
                else:
                    finished += 1
                if st:
                    heads[core] = h
                    return st, i, a, b, finished
                if m[i, _C_PUSHP] != 0 and up >= 0:
                    tokens[up] += 1
                if m[i, _C_PUSHN] != 0 and un >= 0:
                    tokens[un] += 1
                h += 1
                progressed = True
                if op == 3:
                    break  # FINISH ends the compute module's run
            heads[core] = h
    return 0, -1, 0, 0, finished


# -- the machine -------------------------------------------------------------------------------------
class Machine:
    """VTA device state: SRAMs and token queues persist across `run` calls, as on the device (docs/vta.md §3.1,
    docs/vta.md §3.8)."""

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
        self.not_run = 0  # instructions of the last run still queued when FINISH ended it

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
        self._starts = [r.addr for r in regions]
        self._ends = [r.end for r in regions]
        self._dram_ranges = (np.array(self._starts, dtype=np.int64), np.array(self._ends, dtype=np.int64))

    def _check_dram(self, i: int, lo: int, hi: int) -> None:
        r = bisect.bisect_right(self._starts, lo) - 1
        if lo <= 0 or r < 0 or hi > self._ends[r]:
            raise SimulationError(
                f"{describe(self.insns, i)}: DRAM bytes [{lo:#x}, {hi:#x}) are outside every "
                "region of the program" + (f" (nearest region starts at {self._starts[r]:#x}, ends at "
                                           f"{self._ends[r]:#x})" if r >= 0 else ""))

    # -- scheduling ------------------------------------------------------------------------------
    def run(self, program: Program, inputs: dict[str, Any] | None = None) -> dict[str, np.ndarray]:
        """Execute `program`; return the bytes of its output regions. Counters accumulate in
        `self.counters`, tokens in `self.tokens`."""
        if program.hw != self.hw:
            raise SimulationError(f"program is for {program.hw.name}, machine is {self.hw.name}")
        check_program(program)
        self._setup_dram(program, inputs)
        m = self.insns = program.insns
        queue = isa.queue_of(m)
        order = np.argsort(queue, kind="stable").astype(np.int64)
        qstart = np.searchsorted(queue[order], np.arange(4)).astype(np.int64)
        heads = np.zeros(3, dtype=np.int64)
        tokens = np.array(self.tokens, dtype=np.int64)
        counters = np.array([self.counters[k] for k in COUNTERS], dtype=np.int64)
        eb = elem_bytes(self.hw)
        ebytes = np.array([eb[k] for k in range(6)], dtype=np.int64)  # DRAM bytes (addressing)
        depths = np.array([self.uop.shape[0], self.wgt.shape[0], self.inp.shape[0], self.acc.shape[0],
                           self.acc.shape[0], self.acc.shape[0]], dtype=np.int64)
        status, i, a, b, finished = _engine(
            m, order, qstart, heads, tokens, counters, self.inp, self.wgt, self.acc, self.uop,
            self.inp.view(np.uint8), self.wgt.view(np.uint8), self.acc.view(np.uint8), self.dram,
            *self._dram_ranges, ebytes, depths, np.array(isa.uop_widths(self.hw), dtype=np.int64),
            self.nb, self.nk, self.no)
        self.tokens = [int(t) for t in tokens]
        self.counters = dict(zip(COUNTERS, (int(c) for c in counters)))
        self.finished += finished
        if status == 1:
            name, depth = [("UOP", self.uop), ("WGT", self.wgt), ("INP", self.inp), ("ACC", self.acc),
                           ("ACC", self.acc), ("ACC", self.acc), ("INP", self.inp), ("WGT", self.wgt)][a]
            raise SimulationError(f"{describe(m, i)}: {name} SRAM index {b} out of bounds "
                                  f"(depth {depth.shape[0]})")
        if status == 2:
            self._check_dram(i, a, b)
        left = int((np.diff(qstart)[:3] - heads).sum())
        if left and not finished:
            raise SimulationError(self._stuck_message(m, order, qstart, heads))
        if not finished:  # pragma: no cover - check_program requires FINISH
            raise SimulationError("program ended without executing FINISH")
        self.not_run = left
        return {r.name: self.dram[r.addr:r.end].copy() for r in program.regions if r.role == "output"}

    def _stuck_message(self, m: np.ndarray, order: np.ndarray, qstart: np.ndarray, heads: np.ndarray) -> str:
        waits = []
        for core in range(3):
            if heads[core] >= qstart[core + 1] - qstart[core]:
                continue
            i = int(order[qstart[core] + heads[core]])
            for col, tq in ((_C_POPP, _POP[core][0]), (_C_POPN, _POP[core][1])):
                if m[i, col] and self.tokens[tq] == 0:
                    waits.append((core, i, tq))
                    break
        # An empty pop: no instruction still to run in the producing module pushes that token.
        for core, i, tq in waits:
            prod = _PRODUCER[tq]
            col = _C_PUSHP if _PUSH[prod][0] == tq else _C_PUSHN
            rest = order[qstart[prod] + heads[prod]:qstart[prod + 1]]
            if not m[rest, col].any():
                return (f"{describe(m, i)} in the {isa.QUEUE_NAMES[core]} module pops an empty "
                        f"{TOKEN_NAMES[tq]} token queue: no remaining instruction pushes "
                        f"{TOKEN_NAMES[tq]}")
        parts = [f"{isa.QUEUE_NAMES[core]} waits at {describe(m, i)} for a "
                 f"{TOKEN_NAMES[tq]} token" for core, i, tq in waits]
        return "deadlock: no module can progress; " + "; ".join(parts)


# -- check mode ---------------------------------------------------------------------------------------
def check_races(program: Program, inputs: dict[str, Any] | None = None) -> list[str]:
    """One line per SRAM access pair of two modules that no dependency token orders, and per LOAD /
    STORE that FINISH does not wait for (`codesign.vta.races`); empty for a well-synchronized
    program. Input data does not matter (missing inputs count as zeros)."""
    check_program(program)
    filled = dict(inputs or {})
    for r in program.regions:
        if r.role == "input" and r.data is None and r.name not in filled:
            filled[r.name] = np.zeros(r.nbytes, np.uint8)
    machine = Machine(program.hw)
    machine._setup_dram(program, filled)  # the micro-ops LOAD UOP reads
    return [race.message(describe, program.insns) for race in find_races(program, machine.dram)]


# -- entry point -------------------------------------------------------------------------------------
def simulate(program: Program, *, functional: bool = True, params: Any = None,
             inputs: dict[str, Any] | None = None, check: bool = False) -> SimResult:
    """Run `program`. Functional mode executes it over DRAM and SRAMs (raising SimulationError on
    deadlock, empty pops and out-of-bounds accesses) and returns its output regions; timing-only
    mode touches no data. Both return the same counters, and cycles/busy from
    `codesign.vta.timing.time_program`; seconds_device = cycles / clock (no host overhead).
    `check=True` first looks for SRAM accesses of two modules that no dependency token orders
    (`codesign.vta.races`) and raises SimulationError naming them: such a program can pass here
    and race on the device."""
    outputs: dict[str, np.ndarray] = {}
    tokens_left: dict[str, int] = {}
    not_run = 0
    if check:
        problems = check_races(program, inputs)
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            raise SimulationError(problems[0] + more)
    if functional:
        machine = Machine(program.hw)
        outputs = machine.run(program, inputs)
        counters = dict(machine.counters)
        tokens_left = {TOKEN_NAMES[k]: v for k, v in enumerate(machine.tokens) if v}
        not_run = machine.not_run
    else:
        counters = check_program(program)
    res = timing.time_program(program.insns, program.hw, params)
    return SimResult(
        cycles=int(res.cycles),
        seconds_device=float(res.cycles) / program.hw.clock_hz,
        busy={k: int(v) for k, v in res.busy.items()},
        counters=counters,
        outputs=outputs,
        n_insns=program.n_insns,
        tokens_left=tokens_left,
        not_run=not_run,
    )


__all__ = ["simulate", "SimResult", "Machine", "check_program", "count_insns", "elem_bytes", "counter_bytes",
           "describe", "check_races", "COUNTERS", "TOKEN_NAMES"]
