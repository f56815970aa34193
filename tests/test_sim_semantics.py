"""Functional simulator semantics (docs/vta.md §3), one behaviour per test, against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.errors import SimulationError
from codesign.hw.config import HwConfig
from codesign.vta import isa
from codesign.vta.program import ProgramBuilder
from codesign.vta.simulator import Machine

HW = HwConfig()
HW48 = HwConfig.from_name("pynq_4x8_i8w8a32_15_16_16_18")
I32 = np.iinfo(np.int32)


def run(b: ProgramBuilder, hw: HwConfig = HW, machine: Machine | None = None):
    b.finish()
    m = machine or Machine(hw)
    out = m.run(b.build())
    return m, out


def rand_i8(rng, *shape):
    return rng.integers(-128, 128, shape, dtype=np.int8)


def wrap32(x):
    return np.asarray(x, dtype=np.int64).astype(np.uint32).view(np.int32)


# -- LOAD -----------------------------------------------------------------------------------------
def test_padded_inp_load_writes_zero_pads():
    rng = np.random.default_rng(1)
    data = rand_i8(rng, 3, 5, 16)  # 3 rows x 5 INP elements
    b = ProgramBuilder(HW)
    ones = b.input("ones", np.ones((40, 16), np.int8), 16)
    r = b.input("x", data, 16)
    b.load(isa.MEM_INP, 0, ones.addr // 16, 1, 40)                       # dirty the SRAM first
    b.load(isa.MEM_INP, 10, r.addr // 16 + 1, 3, 4, x_stride=5, pads=(1, 2, 2, 1))
    m, _ = run(b)
    block = m.inp[10:10 + 6 * 7].reshape(6, 7, 16)
    assert np.array_equal(block, np.pad(data[:, 1:5], ((1, 2), (2, 1), (0, 0))))
    assert (m.inp[:10] == 1).all() and (m.inp[52:] == 0).all()
    assert m.counters["inp_load_nbytes"] == 40 * 16 + 3 * 4 * 16  # padding is not counted


def test_strided_loads_of_wgt_acc_acc8_and_uops():
    rng = np.random.default_rng(2)
    wgt = rand_i8(rng, 6, 256)
    acc = rng.integers(I32.min, I32.max, (4, 16), dtype=np.int32, endpoint=True)
    acc8 = rand_i8(rng, 3, 16)
    b = ProgramBuilder(HW)
    rw, ra, r8 = b.input("w", wgt, 256), b.input("a", acc, 64), b.input("a8", acc8, 16)
    b.load(isa.MEM_WGT, 3, rw.addr // 256, 3, 1, x_stride=2)              # rows 0, 2, 4
    b.load(isa.MEM_ACC, 5, ra.addr // 64 + 1, 1, 3)
    b.load(isa.MEM_ACC_8BIT, 20, r8.addr // 16, 1, 3, pads=(0, 0, 1, 0))  # dram_base in ACC elems * 4
    b.load_uops([[1, 2, 3], [4, 5, 6]], sram_base=7)
    b.load(isa.MEM_UOP, 12, 0, 1, 2, pads=(0, 0, 1, 0))  # same uops again, dram_base set below
    b.finish()
    prog = b.build()
    prog.insns[-2, isa.COL["dram_base"]] = prog.insns[-3, isa.COL["dram_base"]]
    m = Machine(HW)
    m.run(prog)
    assert np.array_equal(m.wgt[3:6], wgt[[0, 2, 4]])
    assert np.array_equal(m.acc[5:8], acc[1:4])
    assert np.array_equal(m.acc[20], np.zeros(16)) and np.array_equal(m.acc[21:24], acc8.astype(np.int32))
    assert m.uop[7:9].tolist() == [[1, 2, 3], [4, 5, 6]]
    assert m.uop[12:15].tolist() == [[0, 0, 0], [1, 2, 3], [4, 5, 6]]
    assert m.counters["wgt_load_nbytes"] == 3 * 256
    # ACC_8BIT reads 16 bytes per element but VTA's profiler counts ACC_ELEM_BYTES (64) per element
    assert m.counters["acc_load_nbytes"] == 3 * 64 + 3 * 64
    assert m.counters["uop_load_nbytes"] == 4 * 4


# -- GEMM -----------------------------------------------------------------------------------------
def gemm_reference(acc, inp, wgt, uops, io, ii, fdst, fsrc, fwgt, nb, nk, no):
    acc = acc.astype(np.int64).copy()
    for y in range(io):
        for x in range(ii):
            for d, s, w in uops:
                a = d + y * fdst[0] + x * fdst[1]
                i = s + y * fsrc[0] + x * fsrc[1]
                k = w + y * fwgt[0] + x * fwgt[1]
                prod = inp[i].reshape(nb, nk).astype(np.int64) @ wgt[k].reshape(no, nk).astype(np.int64).T
                acc[a] += prod.reshape(-1)
    return wrap32(acc)


@pytest.mark.parametrize("hw", [HW, HW48], ids=["1x16", "4x8"])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_gemm_accumulates_and_resets(hw, sparse):
    rng = np.random.default_rng(3)
    lanes_in, lanes_w = hw.batch * hw.block_in, hw.block_out * hw.block_in
    n_inp = 1500 if sparse else 24
    inp, wgt = rand_i8(rng, n_inp, lanes_in), rand_i8(rng, 12, lanes_w)
    uops = np.array([[0, 0, 0], [1, 1, 1], [5, 2, 3], [0, 3, 2]])  # dst 0 twice: accumulates
    if sparse:
        uops[1, 1] = 1400
    fd, fs, fw = (6, 2), (2, 1), (1, 1)
    b = ProgramBuilder(hw)
    ri, rw = b.input("i", inp, hw.inp_elem_bytes), b.input("w", wgt, hw.wgt_elem_bytes)
    b.load(isa.MEM_INP, 0, ri.addr // hw.inp_elem_bytes, 1, n_inp, push_next_dep=1)
    b.load(isa.MEM_WGT, 0, rw.addr // hw.wgt_elem_bytes, 1, 12, push_next_dep=1)
    bgn, end = b.load_uops(uops)
    b.gemm(bgn, end, 2, 3, dst=fd, reset=True, pop_prev_dep=1)
    b.gemm(bgn, end, 2, 3, dst=fd, src=fs, wgt=fw, pop_prev_dep=1)
    m, _ = run(b, hw)
    zero = np.zeros((hw.acc_depth, hw.batch * hw.block_out), np.int32)
    args = (inp, wgt, uops, 2, 3, fd, fs, fw, hw.batch, hw.block_in, hw.block_out)
    once = gemm_reference(zero, *args)
    assert np.array_equal(m.acc, once)
    assert m.counters["gemm_counter"] == 2 * 3 * 4  # the reset GEMM does not count
    b2 = ProgramBuilder(hw)
    b2.gemm(bgn, end, 2, 3, dst=fd, src=fs, wgt=fw)  # accumulate again on persistent SRAM
    m, _ = run(b2, hw, machine=m)
    assert np.array_equal(m.acc, gemm_reference(once, *args))
    b3 = ProgramBuilder(hw)
    b3.gemm(bgn, end, 1, 1, reset=True)  # reset only the uops' own dst rows 0, 1, 5
    m, _ = run(b3, hw, machine=m)
    expect = gemm_reference(once, *args)
    expect[[0, 1, 5]] = 0
    assert np.array_equal(m.acc, expect)


def test_gemm_wraps_int32():
    acc = np.full((1, 16), I32.max - 10, np.int32)
    inp, wgt = np.full((1, 16), 127, np.int8), np.full((1, 256), 127, np.int8)
    b = ProgramBuilder(HW)
    ra, ri, rw = b.input("a", acc, 64), b.input("i", inp, 16), b.input("w", wgt, 256)
    b.load(isa.MEM_INP, 0, ri.addr // 16, 1, 1, push_next_dep=1)
    b.load(isa.MEM_WGT, 0, rw.addr // 256, 1, 1, push_next_dep=1)
    b.load(isa.MEM_ACC, 0, ra.addr // 64, 1, 1)
    b.load_uops([[0, 0, 0]])
    b.gemm(0, 1, pop_prev_dep=1)
    b.gemm(0, 1, pop_prev_dep=1)
    m, _ = run(b)
    assert (m.acc[0] == wrap32(I32.max - 10 + 2 * 16 * 127 * 127)).all()


# -- ALU ------------------------------------------------------------------------------------------
def alu_reference(op, x, y):
    x, y = x.astype(np.int64), np.asarray(y, dtype=np.int64)
    if op == isa.ALU_MIN:
        r = np.minimum(x, y)
    elif op == isa.ALU_MAX:
        r = np.maximum(x, y)
    elif op == isa.ALU_ADD:
        r = x + y
    elif op == isa.ALU_MUL:
        r = x * y
    else:  # SHR: negative = left shift; |s| >= 32 -> sign fill / 0 (simulator docstring)
        y = np.broadcast_to(y, x.shape)
        right = x >> np.minimum(np.maximum(y, 0), 63)
        left = np.where(y <= -32, 0, x << np.clip(-y, 0, 31))
        r = np.where(y >= 0, right, left)
    return wrap32(r)


def alu_program(op, acc, imm=None):
    """dst rows 0..3 (uops 0, 1 with iter_in 2, dst_factor_in 2), src rows 4..7."""
    b = ProgramBuilder(HW)
    ra = b.input("a", acc, 64)
    b.load(isa.MEM_ACC, 0, ra.addr // 64, 1, len(acc))
    bgn, end = b.load_uops([[0, 4, 0], [1, 5, 0]])
    b.alu(op, bgn, end, iter_out=1, iter_in=2, dst=(0, 2), src=(0, 2), imm=imm)
    return b


@pytest.mark.parametrize("op", [isa.ALU_MIN, isa.ALU_MAX, isa.ALU_ADD, isa.ALU_SHR, isa.ALU_MUL],
                         ids=["min", "max", "add", "shr", "mul"])
def test_alu_src_operand(op):
    rng = np.random.default_rng(10 + op)
    acc = rng.integers(I32.min, I32.max, (8, 16), dtype=np.int32, endpoint=True)
    acc[:4, :4] = [I32.max, I32.min, -1, 0]
    if op == isa.ALU_SHR:  # shift amounts from the src rows, both signs, past 32
        acc[4:] = rng.integers(-40, 41, (4, 16))
    m, _ = run(alu_program(op, acc))
    assert np.array_equal(m.acc[:4], alu_reference(op, acc[:4], acc[4:]))
    assert np.array_equal(m.acc[4:8], acc[4:])
    assert m.counters["alu_counter"] == 4


@pytest.mark.parametrize("op,imm", [(isa.ALU_MIN, 127), (isa.ALU_MAX, 0), (isa.ALU_MIN, -5),
                                    (isa.ALU_ADD, -32768), (isa.ALU_ADD, 32767), (isa.ALU_MUL, -3),
                                    (isa.ALU_SHR, 8), (isa.ALU_SHR, 0), (isa.ALU_SHR, -4),
                                    (isa.ALU_SHR, 31), (isa.ALU_SHR, 40), (isa.ALU_SHR, -31),
                                    (isa.ALU_SHR, -40)])
def test_alu_immediate(op, imm):
    rng = np.random.default_rng(20)
    acc = rng.integers(I32.min, I32.max, (8, 16), dtype=np.int32, endpoint=True)
    acc[:4, :3] = [I32.max, I32.min, -1]
    m, _ = run(alu_program(op, acc, imm=imm))
    assert np.array_equal(m.acc[:4], alu_reference(op, acc[:4], imm))


def test_alu_runs_in_reference_order_within_one_instruction():
    acc = np.arange(1, 7, dtype=np.int32)[:, None].repeat(16, 1)
    b = ProgramBuilder(HW)
    ra = b.input("a", acc, 64)
    b.load(isa.MEM_ACC, 0, ra.addr // 64, 1, 6)
    b.load_uops([[1, 0, 0], [5, 0, 0]], sram_base=0)
    b.alu(isa.ALU_ADD, 0, 1, iter_in=4, dst=(0, 1), src=(0, 1))  # acc[k] += acc[k-1]: prefix sum
    b.alu(isa.ALU_ADD, 1, 2, iter_out=3, iter_in=1, imm=5)        # same dst 3 times: +15
    m, _ = run(b)
    assert m.acc[:5, 0].tolist() == [1, 3, 6, 10, 15]
    assert m.acc[5, 0] == 6 + 15


# -- STORE ----------------------------------------------------------------------------------------
def test_store_narrows_to_low_8_bits_with_dram_stride():
    vals = np.array([300, -1, 128, -129, I32.max, I32.min], np.int32)
    acc = np.repeat(vals[:, None], 16, 1) + np.arange(16, dtype=np.int32)
    b = ProgramBuilder(HW)
    ra = b.input("a", acc, 64)
    out = b.output("o", 2 * 4 * 16, 16)
    b.load(isa.MEM_ACC, 0, ra.addr // 64, 1, 6)
    b.alu(isa.ALU_SHR, 0, 0, imm=0, push_next_dep=1)  # empty ALU: only to hand over a g2s token
    b.store(0, out.addr // 16, 2, 3, x_stride=4, pop_prev_dep=1, push_prev_dep=1)
    b.load(isa.MEM_UOP, 0, 0, 0, 0, pop_next_dep=1)   # sync no-op taking the s2g token
    _, outputs = run(b)
    got = outputs["o"].view(np.int8).reshape(2, 4, 16)
    expect = acc.astype(np.int64).astype(np.uint8).view(np.int8).reshape(2, 3, 16)
    assert np.array_equal(got[:, :3], expect)
    assert (got[:, 3] == 0).all()                      # the stride gap is untouched


# -- tokens, deadlock, empty pops -----------------------------------------------------------------
def two_tile_program(rng, tokens: bool):
    """Two tiles through one INP slot and one ACC slot: load -> GEMM -> STORE, twice."""
    inp = rand_i8(rng, 2, 16)
    wgt = rand_i8(rng, 1, 256)
    b = ProgramBuilder(HW)
    ri, rw, ro = b.input("i", inp, 16), b.input("w", wgt, 256), b.output("o", 2 * 16, 16)
    t = int(tokens)
    b.load_uops([[0, 0, 0]])
    b.load(isa.MEM_WGT, 0, rw.addr // 256, 1, 1)
    for k in range(2):
        b.load(isa.MEM_INP, 0, ri.addr // 16 + k, 1, 1, pop_next_dep=t * (k > 0), push_next_dep=t)
        b.gemm(0, 1, reset=True, pop_prev_dep=t, pop_next_dep=t * (k > 0))
        b.gemm(0, 1, push_prev_dep=t * (k == 0), push_next_dep=t)
        b.store(0, ro.addr // 16 + k, 1, 1, pop_prev_dep=t, push_prev_dep=t)
    b.load(isa.MEM_UOP, 0, 0, 0, 0, pop_next_dep=t)
    b.finish()
    expect = (inp.astype(np.int32) @ wgt.reshape(16, 16).T.astype(np.int32)).astype(np.uint8)
    return b.build(), expect


def test_tokens_order_load_compute_store_across_modules():
    rng = np.random.default_rng(5)
    prog, expect = two_tile_program(rng, tokens=True)
    m = Machine(HW)
    out = m.run(prog)["o"].reshape(2, 16)
    assert np.array_equal(out, expect)
    assert m.tokens == [0, 0, 0, 0]
    wrong, expect = two_tile_program(np.random.default_rng(5), tokens=False)
    out = Machine(HW).run(wrong)["o"].reshape(2, 16)
    assert not np.array_equal(out, expect)  # without tokens the load module runs ahead


def test_deadlock_is_reported_with_instruction_and_opcode():
    b = ProgramBuilder(HW)
    b.load(isa.MEM_INP, 0, 0, 0, 0, pop_next_dep=1, push_next_dep=1)  # waits for g2l
    b.gemm(0, 0, pop_prev_dep=1, push_prev_dep=1)                      # waits for l2g
    b.insn(opcode=isa.OP_LOAD, memory_type=isa.MEM_INP, push_next_dep=1)
    b.finish()
    with pytest.raises(SimulationError, match=r"deadlock.*instruction 0 \(LOAD INP\).*g2l.*instruction 1 \(GEMM\).*l2g"):
        Machine(HW).run(b.build())


def test_empty_pop_is_reported():
    b = ProgramBuilder(HW)
    b.gemm(0, 0, pop_next_dep=1)  # nobody ever pushes s2g
    b.finish()
    with pytest.raises(SimulationError, match=r"instruction 0 \(GEMM\).*empty s2g"):
        Machine(HW).run(b.build())


def test_sync_noop_load_still_obeys_its_flags():
    b = ProgramBuilder(HW)
    b.load(isa.MEM_INP, 0, 0, 0, 0, push_next_dep=1)          # x_size 0: no data, but pushes l2g
    b.load(isa.MEM_UOP, 0, 0, 0, 0, pop_prev_dep=1)           # compute no-op pops it
    m, _ = run(b)
    assert m.tokens == [0, 0, 0, 0] and not any(m.counters.values())
    b = ProgramBuilder(HW)
    b.load(isa.MEM_UOP, 0, 0, 0, 0, pop_prev_dep=1)
    b.finish()
    with pytest.raises(SimulationError, match=r"instruction 0 \(LOAD UOP\).*empty l2g"):
        Machine(HW).run(b.build())


# -- bounds and static checks ---------------------------------------------------------------------
def _oob_cases():
    def inp_sram(b, r):
        b.load(isa.MEM_INP, HW.inp_depth - 3, r.addr // 16, 1, 2, pads=(0, 0, 1, 1))

    def dram_past_region(b, r):
        b.load(isa.MEM_INP, 0, r.addr // 16, 2, 4, x_stride=5)  # 2 rows of 5 -> 9 elems of 8

    def dram_before_region(b, r):
        b.load(isa.MEM_INP, 0, r.addr // 16 - 1, 1, 1)

    def gemm_dst(b, r):
        b.load_uops([[HW.acc_depth - 2, 0, 0]])
        b.gemm(0, 1, iter_out=3, dst=(1, 0))

    def gemm_wgt(b, r):
        b.load_uops([[0, 0, HW.wgt_depth - 1]])
        b.gemm(0, 1, iter_in=2, wgt=(0, 1))

    def alu_src(b, r):
        b.load_uops([[0, HW.acc_depth - 1, 0]])
        b.alu(isa.ALU_ADD, 0, 1, iter_in=2, src=(0, 1))

    def store_dram(b, r):
        b.store(0, r.addr // 16 + 7, 1, 2)

    def store_sram(b, r):
        b.store(HW.acc_depth - 1, r.addr // 16, 1, 2)

    return [(inp_sram, "INP SRAM"), (dram_past_region, "DRAM"), (dram_before_region, "DRAM"),
            (gemm_dst, "ACC SRAM"), (gemm_wgt, "WGT SRAM"), (alu_src, "ACC SRAM"),
            (store_dram, "DRAM"), (store_sram, "ACC SRAM")]


@pytest.mark.parametrize("emit,what", _oob_cases(), ids=lambda c: getattr(c, "__name__", None))
def test_out_of_bounds_accesses_raise(emit, what):
    b = ProgramBuilder(HW)
    r = b.input("x", np.zeros((8, 16), np.int8), 16)
    emit(b, r)
    b.finish()
    with pytest.raises(SimulationError, match=rf"instruction \d+ \(.*{what}"):
        Machine(HW).run(b.build())


@pytest.mark.parametrize("fields,match", [
    (dict(opcode=0, memory_type=isa.MEM_INP, push_prev_dep=1), "push_prev_dep must be 0 in the load"),
    (dict(opcode=1, memory_type=isa.MEM_OUT, pop_next_dep=1), "pop_next_dep must be 0 in the store"),
    (dict(opcode=1, memory_type=isa.MEM_ACC, x_size=1, y_size=1), "only 4 \\(OUT\\)"),
    (dict(opcode=1, memory_type=isa.MEM_OUT, x_size=1, y_size=1, x_pad_0=1), "pads must be 0"),
    (dict(opcode=0, memory_type=isa.MEM_OUT), "LOAD memory_type=4"),
    (dict(opcode=2, uop_bgn=3, uop_end=2), "uop_bgn=3 > uop_end=2"),
    (dict(opcode=4, uop_end=HW.uop_depth + 1), "uop_end"),
    (dict(opcode=4, alu_opcode=6), "alu_opcode=6"),
])
def test_static_checks(fields, match):
    b = ProgramBuilder(HW)
    b.insn(**fields)
    b.finish()
    with pytest.raises(SimulationError, match=match):
        Machine(HW).run(b.build())


def test_program_without_finish_is_rejected():
    b = ProgramBuilder(HW)
    b.gemm(0, 0)
    with pytest.raises(SimulationError, match="no FINISH"):
        Machine(HW).run(b.build())
