"""The timing kernel decodes every row's cost once (`timing._decode`) and the engine reads the decoded
queue rows: the faults it refuses keep their instruction and message, and a row's cost is the
module docstring's formula (the same integer arithmetic) wherever in the queue it sits."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.errors import SimulationError
from codesign.hw.config import HwConfig
from codesign.vta import isa, timing

HW = HwConfig.resolve("pynq_1x16")


def ins(**fields: int) -> np.ndarray:
    row = np.zeros(isa.N_FIELDS, dtype=np.int64)
    for name, value in fields.items():
        row[isa.COL[name]] = value
    return row


FINISH = ins(opcode=isa.OP_FINISH)


def test_unknown_opcode_names_its_instruction() -> None:
    m = np.stack([ins(opcode=isa.OP_GEMM, uop_bgn=0, uop_end=1, iter_out=1, iter_in=1), ins(opcode=7), FINISH])
    with pytest.raises(SimulationError, match=r"instruction 1: opcode=7 unknown"):
        timing.time_program(m, HW)


def test_unknown_memory_type_of_a_dma_names_its_instruction() -> None:
    # memory type 9 dispatches to the compute queue (neither STORE nor LOAD INP/WGT) and faults when it runs
    m = np.stack([ins(opcode=isa.OP_LOAD, memory_type=9, y_size=1, x_size=4, x_stride=4), FINISH])
    with pytest.raises(SimulationError, match=r"instruction 0: memory_type=9 unknown"):
        timing.time_program(m, HW)


def test_illegal_flag_refused_even_when_its_fifo_is_empty() -> None:
    # a load popping pop_prev (the load module has no previous module) behind an empty FIFO
    m = np.stack([ins(opcode=isa.OP_LOAD, memory_type=isa.MEM_INP, y_size=1, x_size=4, x_stride=4,
                      pop_prev_dep=1, pop_next_dep=1), FINISH])
    with pytest.raises(SimulationError, match=r"instruction 0 \(LOAD INP\): dependency flag not allowed"):
        timing.time_program(m, HW)


def test_a_row_costs_its_formula_repeated_in_one_queue() -> None:
    # n identical GEMMs then FINISH on the compute queue: n times the GEMM formula plus one sync, in
    # the kernel's fixed-point units, rounded up to cycles once (through the decoded rows)
    g = ins(opcode=isa.OP_GEMM, uop_bgn=2, uop_end=9, iter_out=3, iter_in=5)
    p = timing.default_params()
    unit = 1 << 24

    def fix(x: float) -> int:
        return int(round(x * unit))

    gemm = fix(p.gemm_insn_overhead) + 3 * 5 * (7 * unit + fix(p.gemm_loop_overhead))
    for n in (1, 37):
        res = timing.time_program(np.stack([g] * n + [FINISH]), HW)
        assert res.cycles == -(-(n * gemm + fix(p.sync_cycles)) // unit)
