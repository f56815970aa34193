"""Property tests: random valid programs never crash, counters equal what the program moves, and
batched GEMM / ALU equal a literal transcription of the reference loops (docs/vta.md §3.3, §3.4)."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codesign.hw.config import HwConfig
from codesign.vta import isa
from codesign.vta.program import Program, ProgramBuilder
from codesign.vta.simulator import Machine, count_insns, elem_bytes, simulate

CONFIGS = [HwConfig(), HwConfig.from_name("pynq_4x8_i8w8a32_15_16_16_18"),
           HwConfig().with_(LOG_UOP_BUFF_SIZE=13, LOG_INP_BUFF_SIZE=14)]
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
DRAM_ELEMS = 64  # elements per input region


def wrap32(x):
    return np.asarray(x, dtype=np.int64).astype(np.uint32).view(np.int32)


class Gen:
    """Draws one random valid program; tracks token counts in program order so every pop is
    satisfiable (one consumer per token queue, so the greedy scheduler can never deadlock)."""

    def __init__(self, data, hw: HwConfig) -> None:
        self.d, self.hw = data, hw
        rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
        self.b = ProgramBuilder(hw)
        eb = elem_bytes(hw)
        self.eb = eb
        self.regions = {
            isa.MEM_INP: self.b.input("inp", rng.integers(0, 256, DRAM_ELEMS * eb[isa.MEM_INP], dtype=np.uint8),
                                      eb[isa.MEM_INP]),
            isa.MEM_WGT: self.b.input("wgt", rng.integers(0, 256, DRAM_ELEMS * eb[isa.MEM_WGT], dtype=np.uint8),
                                      eb[isa.MEM_WGT]),
            isa.MEM_ACC: self.b.input("acc", rng.integers(0, 256, DRAM_ELEMS * eb[isa.MEM_ACC], dtype=np.uint8),
                                      eb[isa.MEM_ACC]),
            isa.MEM_ACC_8BIT: self.b.input("acc8", rng.integers(0, 256, DRAM_ELEMS * eb[isa.MEM_ACC_8BIT],
                                                                dtype=np.uint8), eb[isa.MEM_ACC]),
        }
        self.out = self.b.output("out", DRAM_ELEMS * hw.out_elem_bytes, hw.out_elem_bytes)
        self.tokens = [0, 0, 0, 0]  # l2g, g2l, g2s, s2g
        self.expect = dict.fromkeys(("inp_load_nbytes", "wgt_load_nbytes", "acc_load_nbytes",
                                     "uop_load_nbytes", "out_store_nbytes", "gemm_counter", "alu_counter"), 0)

    def i(self, lo: int, hi: int) -> int:
        return self.d.draw(st.integers(lo, max(lo, hi)))

    def deps(self, queue: int) -> dict[str, int]:
        pops = {isa.Q_LOAD: {"pop_next_dep": 1}, isa.Q_COMPUTE: {"pop_prev_dep": 0, "pop_next_dep": 3},
                isa.Q_STORE: {"pop_prev_dep": 2}}[queue]
        pushes = {isa.Q_LOAD: {"push_next_dep": 0}, isa.Q_COMPUTE: {"push_prev_dep": 1, "push_next_dep": 2},
                  isa.Q_STORE: {"push_prev_dep": 3}}[queue]
        out = {}
        for flag, tq in pops.items():
            if self.tokens[tq] and self.d.draw(st.booleans()):
                self.tokens[tq] -= 1
                out[flag] = 1
        for flag, tq in pushes.items():
            if self.d.draw(st.booleans()):
                self.tokens[tq] += 1
                out[flag] = 1
        return out

    def load(self, mem: int) -> None:
        hw = self.hw
        depth = {isa.MEM_INP: hw.inp_depth, isa.MEM_WGT: hw.wgt_depth, isa.MEM_ACC: hw.acc_depth,
                 isa.MEM_ACC_8BIT: hw.acc_depth}[mem]
        ys, xs = self.i(0, 3), self.i(0, 4)
        stride = xs + self.i(0, 2)
        pads = tuple(self.i(0, 2) for _ in range(4))
        span = (ys - 1) * stride + xs if ys and xs else 0
        # ACC_8BIT: dram_base counts rows of BATCH*BLOCK_OUT int8 values (docs/vta.md §3.2)
        dram = self.regions[mem].addr // self.eb[mem] + self.i(0, DRAM_ELEMS - span)
        xt, yt = pads[2] + xs + pads[3], pads[0] + ys + pads[1]
        sram = self.i(0, depth - xt * yt)
        queue = isa.Q_LOAD if mem in (isa.MEM_INP, isa.MEM_WGT) else isa.Q_COMPUTE
        self.b.load(mem, sram, dram, ys, xs, x_stride=stride, pads=pads, **self.deps(queue))
        name = {isa.MEM_INP: "inp", isa.MEM_WGT: "wgt"}.get(mem, "acc")
        # VTA's profiler counts ACC_8BIT in 32-bit ACC elements, not the int8 bytes it reads (docs/vta.md §3.7)
        self.expect[f"{name}_load_nbytes"] += xs * ys * self.eb[isa.MEM_ACC if mem == isa.MEM_ACC_8BIT else mem]

    def kernel(self, depths: tuple[int, int, int]) -> tuple[dict, list, int]:
        """Random micro-ops + loop whose every index stays inside `depths` (dst, src, wgt)."""
        io, ii = self.i(1, 3), self.i(1, 3)
        fac = [(self.i(0, 3), self.i(0, 3)) for _ in range(3)]
        reach = [(io - 1) * f[0] + (ii - 1) * f[1] for f in fac]
        n = self.i(0, 4)
        uops = [[self.i(0, min(depths[k] - 1 - reach[k], 9)) for k in range(3)] for _ in range(n)]
        bgn = self.i(0, 20)
        if n:
            self.b.load_uops(uops, sram_base=bgn, **self.deps(isa.Q_COMPUTE))
            self.expect["uop_load_nbytes"] += 4 * n
        loop = dict(uop_bgn=bgn, uop_end=bgn + n, iter_out=io, iter_in=ii,
                    dst_factor_out=fac[0][0], dst_factor_in=fac[0][1],
                    src_factor_out=fac[1][0], src_factor_in=fac[1][1])
        return loop, fac, io * ii * n

    def gemm(self) -> None:
        hw = self.hw
        loop, fac, n = self.kernel((hw.acc_depth, hw.inp_depth, hw.wgt_depth))
        reset = self.d.draw(st.booleans())
        self.b.insn(opcode=isa.OP_GEMM, reset_reg=int(reset), wgt_factor_out=fac[2][0],
                    wgt_factor_in=fac[2][1], **loop, **self.deps(isa.Q_COMPUTE))
        if not reset:
            self.expect["gemm_counter"] += n

    def alu(self) -> None:
        loop, _, n = self.kernel((self.hw.acc_depth, self.hw.acc_depth, 1 << 30))
        use_imm = self.d.draw(st.booleans())
        self.b.insn(opcode=isa.OP_ALU, alu_opcode=self.i(0, 4), use_imm=int(use_imm),
                    imm=self.i(-(1 << 15), (1 << 15) - 1) if use_imm else 0, **loop,
                    **self.deps(isa.Q_COMPUTE))
        self.expect["alu_counter"] += n

    def store(self) -> None:
        ys, xs = self.i(0, 3), self.i(0, 4)
        stride = xs + self.i(0, 2)
        span = (ys - 1) * stride + xs if ys and xs else 0
        self.b.store(self.i(0, self.hw.acc_depth - xs * ys), self.out.addr // self.hw.out_elem_bytes
                     + self.i(0, DRAM_ELEMS - span), ys, xs, x_stride=stride, **self.deps(isa.Q_STORE))
        self.expect["out_store_nbytes"] += xs * ys * self.hw.out_elem_bytes

    def program(self):
        steps = self.d.draw(st.lists(st.sampled_from(
            ["inp", "wgt", "acc", "acc8", "gemm", "alu", "store"]), min_size=1, max_size=14))
        for s in steps:
            {"inp": lambda: self.load(isa.MEM_INP), "wgt": lambda: self.load(isa.MEM_WGT),
             "acc": lambda: self.load(isa.MEM_ACC), "acc8": lambda: self.load(isa.MEM_ACC_8BIT),
             "gemm": self.gemm, "alu": self.alu, "store": self.store}[s]()
        self.b.finish()
        return self.b.build()


@SETTINGS
@given(data=st.data(), k=st.integers(0, len(CONFIGS) - 1))
def test_random_valid_programs_run_and_count_what_they_move(data, k):
    hw = CONFIGS[k]
    gen = Gen(data, hw)
    prog = gen.program()
    machine = Machine(hw)
    outputs = machine.run(prog)
    assert machine.counters == gen.expect
    assert count_insns(prog.insns, hw) == gen.expect
    assert machine.tokens == gen.tokens  # every token pushed and not popped is still queued
    assert set(outputs) == {"out"} and outputs["out"].dtype == np.uint8


@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_timing_only_mode_matches_functional_counters(data):
    gen = Gen(data, CONFIGS[0])
    prog = gen.program()
    fun, tim = simulate(prog), simulate(prog, functional=False)
    assert fun.counters == tim.counters == gen.expect
    assert fun.cycles == tim.cycles and fun.busy == tim.busy and tim.outputs == {}
    assert fun.seconds_device == fun.cycles / CONFIGS[0].clock_hz


def _reference_loop(m: Machine, row: dict, fn) -> None:
    for y in range(row["iter_out"]):
        for x in range(row["iter_in"]):
            for u in range(row["uop_bgn"], row["uop_end"]):
                d, s, w = (int(v) for v in m.uop[u])
                fn(d + y * row["dst_factor_out"] + x * row["dst_factor_in"],
                   s + y * row["src_factor_out"] + x * row["src_factor_in"],
                   w + y * row.get("wgt_factor_out", 0) + x * row.get("wgt_factor_in", 0))


@SETTINGS
@given(data=st.data(), k=st.integers(0, 1), sparse=st.booleans())
def test_batched_gemm_equals_reference_loop(data, k, sparse):
    hw = CONFIGS[k]
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    spread = (hw.inp_depth // 4, hw.wgt_depth // 4) if sparse else (6, 6)
    n = data.draw(st.integers(1, 6))
    io, ii = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
    f = [data.draw(st.integers(0, 3)) for _ in range(6)]
    uops = np.stack([rng.integers(0, 8, n), rng.integers(0, spread[0], n), rng.integers(0, spread[1], n)], 1)
    m = Machine(hw)
    m.inp[:] = rng.integers(-128, 128, m.inp.shape)
    m.wgt[:] = rng.integers(-128, 128, m.wgt.shape)
    m.acc[:] = rng.integers(-(2**31), 2**31, m.acc.shape)
    m.uop[:n] = uops
    row = dict(opcode=isa.OP_GEMM, uop_bgn=0, uop_end=n, iter_out=io, iter_in=ii,
               dst_factor_out=f[0], dst_factor_in=f[1], src_factor_out=f[2], src_factor_in=f[3],
               wgt_factor_out=f[4], wgt_factor_in=f[5])
    ref = m.acc.astype(np.int64)
    nb, nk, no = hw.batch, hw.block_in, hw.block_out

    def mac(d, s, w):
        ref[d] += (m.inp[s].reshape(nb, nk).astype(np.int64) @ m.wgt[w].reshape(no, nk).T.astype(np.int64)).ravel()

    _reference_loop(m, row, mac)
    m.run(Program(hw, np.concatenate([isa.insn_from_fields(**row), isa.insn_from_fields(opcode=isa.OP_FINISH)])))
    assert np.array_equal(m.acc, wrap32(ref))


@SETTINGS
@given(data=st.data(), op=st.integers(0, 4), use_imm=st.booleans())
def test_alu_equals_reference_loop_including_in_place_hazards(data, op, use_imm):
    hw = CONFIGS[0]
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    n = data.draw(st.integers(1, 4))
    io, ii = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))
    f = [data.draw(st.integers(0, 2)) for _ in range(4)]
    m = Machine(hw)
    m.acc[:16] = rng.integers(-(2**31), 2**31, (16, 16))
    if op == isa.ALU_SHR and not use_imm:
        m.acc[:16] = rng.integers(-40, 41, (16, 16))
    m.uop[:n] = np.stack([rng.integers(0, 6, n), rng.integers(0, 6, n), np.zeros(n, int)], 1)
    imm = data.draw(st.integers(-(2**15), 2**15 - 1)) if use_imm else 0
    if op == isa.ALU_SHR and use_imm:
        imm = data.draw(st.integers(-40, 40))
    row = dict(opcode=isa.OP_ALU, uop_bgn=0, uop_end=n, iter_out=io, iter_in=ii, dst_factor_out=f[0],
               dst_factor_in=f[1], src_factor_out=f[2], src_factor_in=f[3], alu_opcode=op,
               use_imm=int(use_imm), imm=imm)
    ref = m.acc.astype(np.int64)

    def step(d, s, _w):
        x = ref[d]
        y = np.full_like(x, imm) if use_imm else ref[s].copy()
        if op == 0:
            r = np.minimum(x, y)
        elif op == 1:
            r = np.maximum(x, y)
        elif op == 2:
            r = x + y
        elif op == 4:
            r = x * y
        else:
            r = np.array([a >> min(b, 63) if b >= 0 else (a << -b if b > -32 else 0)
                          for a, b in zip(x.tolist(), y.tolist())], dtype=object)
        ref[d] = wrap32(np.array([int(v) & 0xFFFFFFFF for v in r], dtype=np.int64))

    _reference_loop(m, row, step)
    m.run(Program(hw, np.concatenate([isa.insn_from_fields(**row), isa.insn_from_fields(opcode=isa.OP_FINISH)])))
    assert np.array_equal(m.acc, wrap32(ref))


VALUES = [0] * 16 + [1, 2, 3, 4, 5, 16, 8193, -1, 1 << 16]


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(0, 8), st.booleans(),
                               st.lists(st.sampled_from(VALUES), min_size=isa.N_FIELDS, max_size=isa.N_FIELDS)),
                     min_size=1, max_size=4),
       finish=st.booleans())
def test_compiled_static_scan_agrees_with_the_numpy_rules(rows, finish):
    """The one-pass compiled check accepts exactly the programs the worded NumPy rules accept,
    and both name the same first problem."""
    from codesign.errors import SimulationError
    from codesign.vta.simulator import _explain_program, check_program

    m = np.array([[op] + vals[1:] for op, _, vals in rows], dtype=np.int64)
    for r, (op, clean, _) in enumerate(rows):
        if clean and op <= 4:  # keep only the opcode's own fields: mostly valid rows
            own = [isa.COL[f.name] for f in isa.layout(op, CONFIGS[0])]
            m[r, [c for c in range(isa.N_FIELDS) if c not in own]] = 0
    if finish:
        m = np.concatenate([m, isa.insn_from_fields(opcode=isa.OP_FINISH)])
    prog = Program(CONFIGS[0], m)
    try:
        _explain_program(prog)
        explained = None
    except SimulationError as exc:
        explained = str(exc)
    try:
        check_program(prog)
        checked = None
    except SimulationError as exc:
        checked = str(exc)
    assert checked == explained
