"""Three details where our simulator differed from VTA's C++ functional simulator (issue 9):
the ACC_8BIT load counter, FINISH ending the run, and the check mode for missing tokens."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from codesign.errors import SimulationError
from codesign.evaluate.compiler import compile_layer
from codesign.evaluate.run import random_inputs
from codesign.hw.config import HwConfig
from codesign.schedule import get_space
from codesign.vta import isa
from codesign.vta.program import ProgramBuilder
from codesign.vta.simulator import check_races, simulate
from codesign.workloads import Conv2D

HW = HwConfig()
HW48 = HwConfig.from_name("pynq_4x8_i8w8a32_15_16_16_18")
C = isa.COL


@pytest.mark.parametrize("hw", [HW, HW48], ids=lambda h: h.bitstream)
def test_acc8_load_counts_vta_accumulator_bytes_in_both_modes(hw):
    lanes = hw.batch * hw.block_out
    b = ProgramBuilder(hw)
    r8 = b.input("a8", np.arange(5 * lanes, dtype=np.uint8), lanes)
    b.load(isa.MEM_ACC_8BIT, 0, r8.addr // lanes, 1, 5)
    b.finish()
    prog = b.build()
    expected = 5 * hw.acc_elem_bytes  # 5 elements of BATCH*BLOCK_OUT int32 lanes, as VTA's profiler counts
    assert hw.acc_elem_bytes == 4 * lanes
    assert simulate(prog).counters["acc_load_nbytes"] == expected
    assert simulate(prog, functional=False).counters["acc_load_nbytes"] == expected


def test_finish_ends_the_run():
    b = ProgramBuilder(HW)
    acc = np.arange(16, dtype=np.int32).reshape(1, 16)
    ra = b.input("a", acc, HW.acc_elem_bytes)
    ro = b.output("o", HW.out_elem_bytes, HW.out_elem_bytes)
    b.load_uops([[0, 0, 0]], sram_base=0)
    b.load(isa.MEM_ACC, 0, ra.addr // HW.acc_elem_bytes, 1, 1)
    b.alu(isa.ALU_ADD, 0, 1, imm=1, push_next_dep=1)
    b.store(0, ro.addr // HW.out_elem_bytes, 1, 1, pop_prev_dep=1, push_prev_dep=1)
    b.insn(opcode=isa.OP_LOAD, memory_type=isa.MEM_UOP, pop_next_dep=1)  # runtime Synchronize no-op
    b.finish()
    b.alu(isa.ALU_ADD, 0, 1, imm=100)  # after FINISH: VTA never runs it
    b.alu(isa.ALU_MUL, 0, 1, imm=3)
    prog = b.build()
    res = simulate(prog)
    assert res.not_run == 2
    assert res.counters["alu_counter"] == 1
    assert simulate(prog, functional=False).counters["alu_counter"] == 1
    assert res.outputs["o"].view(np.int8).tolist() == list(range(1, 17))


def _compiled(index: int | None = None):
    layer = Conv2D(1, 32, 8, 8, 32, 3, 3, 1, 1)
    space = get_space(layer, HW)
    data, weight = random_inputs(layer, seed=3)
    index = int(space.valid_indices()[0]) if index is None else index
    prog = compile_layer(layer, space.get(index), HW, data=data, weight=weight)
    return layer, prog, layer.reference(data, weight)


def _drop_token(prog, producer: int, push_col: str, consumer: int, pop_col: str, k: int):
    """The program with the k-th push of one token queue and its matching pop removed."""
    m = prog.insns.copy()
    q = isa.queue_of(m)
    pushes = np.flatnonzero((q == producer) & (m[:, C[push_col]] == 1))
    pops = np.flatnonzero((q == consumer) & (m[:, C[pop_col]] == 1))
    m[pushes[k], C[push_col]] = 0
    m[pops[k], C[pop_col]] = 0
    return replace(prog, insns=m)


def test_check_mode_accepts_compiled_programs():
    layer, prog, ref = _compiled()
    res = simulate(prog, check=True)
    assert np.array_equal(layer.unpack_output(res.outputs["output"].view(np.int8), HW), ref)
    assert check_races(prog) == []


# (config index, dropped token, SRAM): configs and tokens where the fixed module order still gives the
# right answer (found by dropping each token of each kind in turn)
@pytest.mark.parametrize("index,token,sram", [
    (0, (isa.Q_LOAD, "push_next_dep", isa.Q_COMPUTE, "pop_prev_dep", 0), "INP"),  # l2g: GEMM may beat its LOAD
    (64, (isa.Q_COMPUTE, "push_prev_dep", isa.Q_LOAD, "pop_next_dep", 1), "INP"),  # g2l: LOAD may overwrite
    (64, (isa.Q_COMPUTE, "push_next_dep", isa.Q_STORE, "pop_prev_dep", 1), "ACC"),  # g2s: STORE may beat the ALU
])
def test_missing_token_passes_plain_simulation_but_check_mode_finds_the_race(index, token, sram):
    layer, prog, ref = _compiled(index)
    racy = _drop_token(prog, *token)
    res = simulate(racy)  # the fixed module order happens to give the right answer here...
    assert np.array_equal(layer.unpack_output(res.outputs["output"].view(np.int8), HW), ref)
    assert res.tokens_left == {}
    with pytest.raises(SimulationError, match=f"unsynchronized {sram} SRAM row"):  # ...check mode does not
        simulate(racy, check=True)


def test_check_mode_finds_a_store_that_finish_does_not_wait_for():
    layer, prog, ref = _compiled()
    q = isa.queue_of(prog.insns)
    n_s2g = int(((q == isa.Q_STORE) & (prog.insns[:, C["push_prev_dep"]] == 1)).sum())
    racy = _drop_token(prog, isa.Q_STORE, "push_prev_dep", isa.Q_COMPUTE, "pop_next_dep", n_s2g - 1)
    assert np.array_equal(layer.unpack_output(simulate(racy).outputs["output"].view(np.int8), HW), ref)
    with pytest.raises(SimulationError, match=r"\(STORE OUT\) is not ordered before instruction \d+ \(FINISH\)"):
        simulate(racy, check=True)
