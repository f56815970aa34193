"""Timing model (codesign.vta.timing) on hand-built instruction matrices: exact cycle counts."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from codesign.errors import ConfigError, SimulationError
from codesign.hw.config import HwConfig
from codesign.vta import isa
from codesign.vta.timing import TimingParams, port_efficiency, predict_seconds, time_program

HW = HwConfig()  # pynq 1x16: INP elem 16 B, WGT 256 B, OUT 16 B, bus 8 B
P = TimingParams(
    dma_bytes_per_cycle_efficiency=0.5, dma_insn_latency=20, dma_row_overhead=3,
    gemm_insn_overhead=7, gemm_loop_overhead=4, alu_insn_overhead=5, alu_loop_overhead=2,
    host_call_s=1e-4, host_per_insn_s=2e-6,
)


def ins(**kw: int) -> np.ndarray:
    return isa.insn_from_fields(**kw)


def prog(*rows: np.ndarray) -> np.ndarray:
    return np.vstack(rows)


FINISH = ins(opcode=isa.OP_FINISH)


def load(mem: int, y: int, x: int, **kw: int) -> np.ndarray:
    return ins(opcode=isa.OP_LOAD, memory_type=mem, y_size=y, x_size=x, x_stride=x, **kw)


def dma_cycles(y: int, x: int, elem: int, pad: int = 0, p: TimingParams = P) -> float:
    beats = math.ceil(x * elem / HW.bus_bytes)
    return p.dma_insn_latency + y * p.dma_row_overhead + pad * p.pad_cycles_per_elem + \
        y * beats / p.dma_bytes_per_cycle_efficiency


def test_lone_gemm_equals_formula() -> None:
    g = ins(opcode=isa.OP_GEMM, uop_bgn=3, uop_end=20, iter_out=5, iter_in=6)
    r = time_program(prog(g), HW, P)
    expect = P.gemm_insn_overhead + 5 * 6 * (17 + P.gemm_loop_overhead)
    assert r.cycles == expect == 7 + 30 * 21
    assert r.busy == {"load": 0, "compute": expect, "store": 0}
    assert r.port_busy == 0


def test_alu_is_two_cycles_per_uop_even_with_imm() -> None:
    a = ins(opcode=isa.OP_ALU, uop_bgn=0, uop_end=1, iter_out=1, iter_in=784, use_imm=1, imm=8,
            alu_opcode=isa.ALU_SHR)
    r = time_program(prog(a, FINISH), HW, P)
    assert r.cycles == P.alu_insn_overhead + 784 * (2 + P.alu_loop_overhead) + P.sync_cycles


def test_load_cost_with_padding_and_wgt_ignores_pads() -> None:
    inp = load(isa.MEM_INP, 13, 13, y_pad_0=1, y_pad_1=1, x_pad_0=1, x_pad_1=1)
    pad = 2 * 15 + 13 * 2
    r = time_program(prog(inp), HW, P)
    assert r.cycles == math.ceil(dma_cycles(13, 13, 16, pad))
    assert r.port_busy == 13 * 26 / 0.5
    wgt = load(isa.MEM_WGT, 4, 9, y_pad_0=1, x_pad_0=1)  # WGT has no pad path (docs/vta.md §4.6)
    assert time_program(prog(wgt), HW, P).cycles == math.ceil(dma_cycles(4, 9, 256))


def test_uop_load_uses_the_32_bit_uop_port() -> None:
    u = load(isa.MEM_UOP, 1, 50)
    r = time_program(prog(u), HW, P)
    assert r.cycles == P.dma_insn_latency + P.dma_row_overhead + 50 / 0.5
    assert r.busy["compute"] == r.cycles


def test_two_loads_serialize_on_the_shared_port() -> None:
    # An INP load (load module) and a UOP load (compute module) with no dependency: the modules
    # run concurrently but their data beats share one port.
    a = load(isa.MEM_INP, 10, 40)  # 10 rows x 80 beats -> 1600 port cycles
    b = load(isa.MEM_UOP, 1, 400)  # 400 beats -> 800 port cycles
    r = time_program(prog(a, b), HW, P)
    ta = dma_cycles(10, 40, 16)
    # b requests the port first (after 20 + 3 off-port cycles), a (ready at 20 + 10*3) waits.
    ready_b = P.dma_insn_latency + P.dma_row_overhead
    assert r.cycles == ready_b + 800 + 1600
    assert r.port_busy == 2400
    assert r.cycles > ta  # serialized, not overlapped
    assert time_program(prog(a), HW, P).cycles == ta
    # Swapping the instructions' order in the program does not change the arbitration.
    assert time_program(prog(b, a), HW, P).cycles == r.cycles


def test_port_efficiency_drops_when_footprint_exceeds_cache() -> None:
    # Footprint 4 * 65536 B = 256 KiB = cache/2 -> all hits; double the cache -> half misses.
    q = P.with_(dma_dram_efficiency=0.25, cache_bytes=128 * 1024)
    ld = load(isa.MEM_INP, 4, 4096)  # 4 rows x 4096 elems x 16 B = 256 KiB contiguous
    r = time_program(prog(ld), HW, q)
    assert r.footprint_bytes == 4 * 4096 * 16
    beats = 4 * 4096 * 16 // 8
    hit = 128 / 256
    eff = 1 / (hit / 0.5 + (1 - hit) / 0.25)
    assert r.port_busy == round(beats / eff)
    assert r.cycles == math.ceil(q.dma_insn_latency + 4 * q.dma_row_overhead + beats / eff)
    # A cache larger than the footprint: every beat at the L2 efficiency.
    assert time_program(prog(ld), HW, P).port_busy == beats / 0.5
    assert port_efficiency(HW, 256 * 1024, q) == pytest.approx(eff)
    assert port_efficiency(HW, 1000, q) == 0.5
    assert port_efficiency(HW.with_(clock_mhz=200), 1000, q) == 0.25


def test_memory_costs_keep_their_nanoseconds_at_another_clock() -> None:
    fast = HW.with_(clock_mhz=200)
    g = ins(opcode=isa.OP_GEMM, uop_bgn=0, uop_end=100, iter_out=10, iter_in=10)
    assert time_program(prog(g), fast, P).cycles == time_program(prog(g), HW, P).cycles
    ld = load(isa.MEM_INP, 8, 64)  # 8 rows x 128 beats
    beats = 8 * 128
    # 2x clock: latency and row overhead cost 2x cycles, efficiency 0.5 -> min(1, 0.25): same ns.
    expect = 2 * (P.dma_insn_latency + 8 * P.dma_row_overhead) + beats / 0.25
    assert time_program(prog(ld), fast, P).cycles == expect
    assert expect / 200e6 == pytest.approx(dma_cycles(8, 64, 16) / 100e6)
    # Slower clock: the port caps at one beat per cycle.
    slow = HW.with_(clock_mhz=25)
    assert time_program(prog(ld), slow, P).port_busy == beats


def test_store_cost() -> None:
    s = ins(opcode=isa.OP_STORE, memory_type=isa.MEM_OUT, y_size=7, x_size=49, x_stride=49)
    r = time_program(prog(s), HW, P)
    assert r.cycles == math.ceil(dma_cycles(7, 49, 16))
    assert r.busy["store"] == r.cycles


def test_decoupling_load_overlaps_independent_compute() -> None:
    g = ins(opcode=isa.OP_GEMM, uop_bgn=0, uop_end=100, iter_out=10, iter_in=10)
    ld = load(isa.MEM_WGT, 16, 9)
    tg = P.gemm_insn_overhead + 100 * (100 + P.gemm_loop_overhead)
    tl = dma_cycles(16, 9, 256)
    r = time_program(prog(g, ld), HW, P)
    assert r.cycles == max(tg, tl) == tg
    assert r.busy["load"] == tl and r.busy["compute"] == tg


def test_tokens_delay_pop_until_push() -> None:
    ld = load(isa.MEM_INP, 4, 4, push_next_dep=1)  # load -> compute (l2g)
    g = ins(opcode=isa.OP_GEMM, pop_prev_dep=1, push_next_dep=1, uop_bgn=0, uop_end=4, iter_out=1, iter_in=1)
    st = ins(opcode=isa.OP_STORE, memory_type=isa.MEM_OUT, y_size=1, x_size=4, x_stride=4, pop_prev_dep=1)
    # Program order puts the GEMM first: it still has to wait for the load's token.
    r = time_program(prog(g, st, ld, FINISH), HW, P)
    tl = dma_cycles(4, 4, 16)
    tg = P.gemm_insn_overhead + (4 + P.gemm_loop_overhead)
    ts = dma_cycles(1, 4, 16)
    assert r.cycles == tl + tg + ts
    # Without the tokens, all three would overlap.
    free = [row.copy() for row in (g, st, ld)]
    for row in free:
        for f in ("pop_prev_dep", "push_next_dep"):
            row[0, isa.COL[f]] = 0
    assert time_program(prog(*free), HW, P).cycles < r.cycles


def test_war_token_from_compute_to_load() -> None:
    # Double-buffer style: the second load waits for compute to release the buffer (g2l).
    l1 = load(isa.MEM_INP, 2, 8, push_next_dep=1)
    l2 = load(isa.MEM_INP, 2, 8, pop_next_dep=1)
    g = ins(opcode=isa.OP_GEMM, pop_prev_dep=1, push_prev_dep=1, uop_bgn=0, uop_end=500, iter_out=1, iter_in=1)
    r = time_program(prog(l1, g, l2), HW, P)
    t1 = dma_cycles(2, 8, 16)
    tg = P.gemm_insn_overhead + 500 + P.gemm_loop_overhead
    assert r.cycles == t1 + tg + t1


def test_deadlock_raises_naming_the_instruction() -> None:
    g = ins(opcode=isa.OP_GEMM, pop_prev_dep=1, uop_bgn=0, uop_end=1, iter_out=1, iter_in=1)
    with pytest.raises(SimulationError, match=r"deadlock.*instruction 0 \(GEMM\).*l2g"):
        time_program(prog(g, FINISH), HW, P)
    # Circular wait: load waits on compute, compute waits on load.
    l1 = load(isa.MEM_INP, 1, 1, pop_next_dep=1, push_next_dep=1)
    g2 = ins(opcode=isa.OP_GEMM, pop_prev_dep=1, push_prev_dep=1, uop_bgn=0, uop_end=1, iter_out=1, iter_in=1)
    with pytest.raises(SimulationError, match="deadlock"):
        time_program(prog(l1, g2), HW, P)


def test_illegal_dependency_flag_raises() -> None:
    bad = load(isa.MEM_INP, 1, 1, pop_prev_dep=1)
    with pytest.raises(SimulationError, match="instruction 0 .*LOAD INP"):
        time_program(prog(bad), HW, P)


def test_sync_noops_and_finish_take_one_cycle() -> None:
    noop_l = load(isa.MEM_INP, 0, 0)
    noop_c = load(isa.MEM_UOP, 0, 0)
    noop_s = ins(opcode=isa.OP_STORE, memory_type=isa.MEM_OUT)
    r = time_program(prog(noop_l, noop_c, noop_s, FINISH), HW, P)
    assert r.cycles == 2 and r.busy == {"load": 1, "compute": 2, "store": 1} and r.port_busy == 0


def test_predict_seconds_adds_host_terms() -> None:
    s = predict_seconds(100_000, 50, HW, P)
    assert s == pytest.approx(100_000 / 100e6 + 1e-4 + 50 * 2e-6)


def test_params_save_load_roundtrip(tmp_path) -> None:
    path = tmp_path / "p.json"
    P.save(path, {"note": "test"})
    doc = json.loads(path.read_text())
    assert doc["provenance"] == {"note": "test"}
    assert TimingParams.load(path) == P
    path.write_text(json.dumps({"params": {"bogus": 1}}))
    with pytest.raises(ConfigError, match="bogus"):
        TimingParams.load(path)
    with pytest.raises(ConfigError, match="no such"):
        TimingParams.load(tmp_path / "missing.json")
    with pytest.raises(ConfigError, match="dma_bytes_per_cycle_efficiency"):
        TimingParams(dma_bytes_per_cycle_efficiency=1.5)


def test_shipped_params_load() -> None:
    p = TimingParams.load()
    assert 0 < p.dma_bytes_per_cycle_efficiency <= 1
    assert p.alu_cycles_per_uop == 2 and p.pad_cycles_per_elem == 1
