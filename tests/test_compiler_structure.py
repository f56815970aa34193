"""Shape of the instruction stream: the docs/vta.md §7.3 worked example, analytic counters, token balance,
micro-op rules, the uop cache, and timing-only vs functional agreement."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.errors import InvalidSchedule
from codesign.evaluate.compiler import compile_insns, compile_layer
from codesign.evaluate.run import random_inputs
from codesign.hw.config import HwConfig
from codesign.schedule import get_space, partition
from codesign.vta import isa
from codesign.vta.simulator import simulate
from codesign.workloads import Conv2D, Dense, get_workload

C = isa.COL
HW = HwConfig()
WORKED = Conv2D(1, 256, 14, 14, 512, 3, 3, 2, 1)  # docs/vta.md §7.3 worked example / docs/vta.md §8 record


def _rows(m, opcode, mem=None, reset=None):
    sel = m[:, C["opcode"]] == opcode
    if mem is not None:
        sel &= m[:, C["memory_type"]] == mem
    if reset is not None:
        sel &= m[:, C["reset_reg"]] == reset
    return m[sel]


def test_worked_example_index_203():
    space = get_space(WORKED, HW)
    config = space.get(203)
    assert config.knobs["tile_co"] == [2, 16] and config.knobs["oc_nthread"] == 2
    prog = compile_layer(WORKED, config, HW, functional=False)
    m = prog.insns
    inp = _rows(m, isa.OP_LOAD, isa.MEM_INP)
    inp = inp[inp[:, C["x_size"]] > 0]  # without the final sync no-op
    # LOAD INP 15x15 with top/left pad 1 (bottom/right rows fall inside the 14x14 input).
    assert len(inp) == 2 * 16
    assert set(map(tuple, inp[:, [C["y_pad_0"], C["x_pad_0"], C["y_pad_1"], C["x_pad_1"]]])) == {(1, 1, 0, 0)}
    assert (inp[:, C["y_size"]] + 1 == 15).all() and (inp[:, C["x_size"]] + 1 == 15).all()
    assert (inp[:, C["x_stride"]] == 14).all()
    wgt = _rows(m, isa.OP_LOAD, isa.MEM_WGT)
    assert len(wgt) == 32 and (wgt[:, C["y_size"]] == 16).all() and (wgt[:, C["x_size"]] == 9).all()
    gemm = _rows(m, isa.OP_GEMM, reset=0)
    assert len(gemm) == 16 * 2  # 16 ci steps x 2 threads
    assert (gemm[:, C["iter_out"]] == 7).all() and (gemm[:, C["iter_in"]] == 3).all()
    assert ((gemm[:, C["uop_end"]] - gemm[:, C["uop_bgn"]]) == 336).all()
    reset = _rows(m, isa.OP_GEMM, reset=1)
    assert len(reset) == 2
    assert (reset[:, C["uop_end"]] - reset[:, C["uop_bgn"]] == 7).all()
    assert (reset[:, [C["iter_out"], C["iter_in"]]] == (7, 16)).all()
    alu = _rows(m, isa.OP_ALU)
    assert len(alu) == 6 and (alu[:, C["iter_in"]] == 784).all()
    assert [tuple(r) for r in alu[:3][:, [C["alu_opcode"], C["imm"]]]] == [
        (isa.ALU_SHR, 8), (isa.ALU_MIN, 127), (isa.ALU_MAX, 0)]
    assert len(_rows(m, isa.OP_STORE)) == 2
    # Thread slices: SRAM bases of the two threads (acc 784, inp 225, wgt 144 elements each).
    assert sorted(set(inp[:, C["sram_base"]])) == [0, 225]
    assert sorted(set(wgt[:, C["sram_base"]])) == [0, 144]
    assert prog.meta["n_threads"] == 2 and prog.meta["n_steps"] == 16


def _token_counts(m):
    """pushes and pops per FIFO (l2g, g2l, g2s, s2g) from the dispatch rule (docs/vta.md §2.8, §2.9)."""
    q = isa.queue_of(m)
    get = {k: m[:, C[k]].astype(bool) for k in ("pop_prev_dep", "pop_next_dep", "push_prev_dep", "push_next_dep")}
    L, G, S = q == isa.Q_LOAD, q == isa.Q_COMPUTE, q == isa.Q_STORE
    pushes = {"l2g": (get["push_next_dep"] & L).sum(), "g2l": (get["push_prev_dep"] & G).sum(),
              "g2s": (get["push_next_dep"] & G).sum(), "s2g": (get["push_prev_dep"] & S).sum()}
    pops = {"l2g": (get["pop_prev_dep"] & G).sum(), "g2l": (get["pop_next_dep"] & L).sum(),
            "g2s": (get["pop_prev_dep"] & S).sum(), "s2g": (get["pop_next_dep"] & G).sum()}
    illegal = ((get["pop_prev_dep"] | get["push_prev_dep"]) & L).sum() + (
        (get["pop_next_dep"] | get["push_next_dep"]) & S).sum()
    return pushes, pops, illegal


@pytest.mark.parametrize("layer", [ly for ly, _ in partition(get_workload("resnet18"), HW)[0]][-4:],
                         ids=lambda ly: ly.name)
def test_counters_and_tokens_for_every_valid_config(layer):
    """For every valid config: gemm/alu/store/weight/input counters equal the analytic
    values, every pushed token is popped,
    the program ends with the docs/vta.md §5.4 synchronization, and every kernel is loaded once."""
    space = get_space(layer, HW)
    B, BI, BO = HW.batch, HW.block_in, HW.block_out
    ci_b, co_b = layer.in_channels // BI, layer.out_channels // BO
    kk = layer.kernel_h * layer.kernel_w
    for index in space.valid_indices():
        config = space.get(int(index))
        prog = compile_layer(layer, config, HW, functional=False)
        m = prog.insns
        res = simulate(prog, functional=False)
        c = res.counters
        assert c["gemm_counter"] == layer.macs // (B * BI * BO)
        assert c["alu_counter"] == 3 * (layer.batch // B) * co_b * layer.out_height * layer.out_width
        assert c["out_store_nbytes"] == int(np.prod(layer.output_shape()))
        k = config.knobs
        n_spatial = (layer.out_height // k["tile_h"][1]) * (layer.out_width // k["tile_w"][1])
        assert c["wgt_load_nbytes"] == n_spatial * co_b * ci_b * kk * HW.wgt_elem_bytes
        # Input bytes: each tile loads its clipped input window for every ci block.
        th, tw, s, p = k["tile_h"][1], k["tile_w"][1], layer.stride, layer.padding
        hin, win = (th - 1) * s + layer.kernel_h, (tw - 1) * s + layer.kernel_w

        def clipped(start, n, size):
            return max(0, min(start + n, size) - max(start, 0))

        rows = sum(clipped(h0 * th * s - p, hin, layer.height) for h0 in range(layer.out_height // th))
        cols = sum(clipped(w0 * tw * s - p, win, layer.width) for w0 in range(layer.out_width // tw))
        assert c["inp_load_nbytes"] == (co_b // k["tile_co"][1]) * ci_b * rows * cols * HW.inp_elem_bytes
        pushes, pops, illegal = _token_counts(m)
        assert pushes == pops and illegal == 0
        assert m[-1, C["opcode"]] == isa.OP_FINISH and not m[-1, 1:5].any()
        assert tuple(m[-2, [C["opcode"], C["memory_type"], C["x_size"], C["pop_prev_dep"], C["pop_next_dep"]]]) == (
            isa.OP_LOAD, isa.MEM_UOP, 0, 1, 1)
        # All kernels fit the uop buffer here, so each is loaded exactly once.
        n_threads = k["oc_nthread"] * k["h_nthread"]
        assert c["uop_load_nbytes"] == 4 * prog.uops.shape[0]
        assert len(_rows(m, isa.OP_LOAD, isa.MEM_UOP)) - 1 == 5 * n_threads
        isa.check_insns(m, HW)


def test_every_kernel_respects_the_dst_hazard_and_fits():
    layer = partition(get_workload("resnet18"), HW)[0][2][0]  # 128x28x28 -> 128, 3x3
    space = get_space(layer, HW)
    for index in space.valid_indices()[::7]:
        prog = compile_layer(layer, space.get(int(index)), HW, functional=False)
        m = prog.insns
        comp = m[np.isin(m[:, C["opcode"]], (isa.OP_GEMM, isa.OP_ALU))]
        assert (comp[:, C["uop_end"]] <= HW.uop_depth).all()
        for bgn, end in set(map(tuple, comp[:, [C["uop_bgn"], C["uop_end"]]])):
            # the uop SRAM holds the kernel loaded at bgn: find it in DRAM through its LOAD UOP
            lu = _rows(m, isa.OP_LOAD, isa.MEM_UOP)
            lu = lu[(lu[:, C["sram_base"]] == bgn) & (lu[:, C["x_size"]] == end - bgn)]
            start = lu[0, C["dram_base"]] - prog.region("uop").addr // 4
            dst = prog.uops[start:start + end - bgn, 0]
            assert not (dst[1:] == dst[:-1]).any() and not (dst[2:] == dst[:-2]).any()


def test_hazardous_schedule_is_rejected():
    layer = Conv2D(1, 16, 8, 8, 16, 3, 3, 1, 1)
    knobs = {"tile_b": [1, 1], "tile_h": [8, 1], "tile_w": [1, 8], "tile_ci": [1, 1],
             "tile_co": [1, 1], "oc_nthread": 1, "h_nthread": 1}  # unrolled di only: same dst 3x
    assert "hazard" in get_space(layer, HW).why_invalid(knobs)
    with pytest.raises(InvalidSchedule, match="hazard"):
        compile_insns(layer, knobs, HW)


def test_uop_ring_evicts_and_reloads_and_stays_exact():
    """With a 128-entry uop buffer two 96-uop GEMM kernels evict each other (runtime ring,
    docs/vta.md §5.4): the kernels are reloaded before each use and the result is unchanged."""
    layer = Conv2D(1, 32, 16, 16, 64, 3, 3, 1, 1)
    knobs = {"tile_b": [1, 1], "tile_h": [2, 8], "tile_w": [1, 16], "tile_ci": [2, 1],
             "tile_co": [1, 4], "oc_nthread": 1, "h_nthread": 2}
    small = HW.with_(LOG_UOP_BUFF_SIZE=9)
    assert small.uop_depth == 128
    data, weight = random_inputs(layer, seed=2)
    outs, loads = [], []
    for hw in (HW, small):
        prog = compile_layer(layer, knobs, hw, data=data, weight=weight)
        res = simulate(prog)
        outs.append(layer.unpack_output(np.asarray(res.outputs["output"]).view(np.int8), hw))
        loads.append(res.counters["uop_load_nbytes"])
    ref = layer.reference(data, weight)
    assert np.array_equal(outs[0], ref) and np.array_equal(outs[1], ref)
    assert loads[1] > loads[0] == 4 * (2 * (8 + 96 + 3))


@pytest.mark.parametrize("layer,hw", [
    (Conv2D(1, 32, 8, 8, 32, 3, 3, 1, 1), HW),
    (Dense(1, 256, 128), HW),
    (Conv2D(4, 16, 8, 8, 16, 3, 3, 1, 1), HwConfig.from_name("pynq_4x8_i8w8a32_15_16_16_18")),
], ids=["conv", "dense", "conv4x8"])
def test_timing_only_equals_functional(layer, hw):
    space = get_space(layer, hw)
    data, weight = random_inputs(layer)
    for index in space.valid_indices()[::5]:
        config = space.get(int(index))
        fun = simulate(compile_layer(layer, config, hw, data=data, weight=weight))
        tim = simulate(compile_layer(layer, config, hw, functional=False), functional=False)
        assert (fun.cycles, fun.counters, fun.busy, fun.n_insns) == (tim.cycles, tim.counters, tim.busy, tim.n_insns)
        assert np.array_equal(compile_insns(layer, config, hw).insns,
                              compile_layer(layer, config.knobs, hw, functional=False).insns)


def test_dram_layout_is_aligned_and_nonzero():
    prog = compile_layer(WORKED, get_space(WORKED, HW).get(203), HW, functional=False)
    sizes = {"data": HW.inp_elem_bytes, "weight": HW.wgt_elem_bytes, "output": HW.out_elem_bytes, "uop": 4}
    for name, elem in sizes.items():
        region = prog.region(name)
        assert region.addr > 0 and region.addr % elem == 0
    assert prog.region("data").nbytes == int(np.prod(WORKED.data_shape()))
    assert prog.region("weight").nbytes == int(np.prod(WORKED.weight_shape()))
    assert prog.region("output").nbytes == int(np.prod(WORKED.output_shape()))
    # every DMA stays inside its region
    m = prog.insns
    for mem, name, elem, op in ((isa.MEM_INP, "data", HW.inp_elem_bytes, isa.OP_LOAD),
                                (isa.MEM_WGT, "weight", HW.wgt_elem_bytes, isa.OP_LOAD),
                                (isa.MEM_OUT, "output", HW.out_elem_bytes, isa.OP_STORE)):
        rows = _rows(m, op, mem)
        rows = rows[rows[:, C["x_size"]] > 0]
        region = prog.region(name)
        first = rows[:, C["dram_base"]] * elem
        last = (rows[:, C["dram_base"]] + (rows[:, C["y_size"]] - 1) * rows[:, C["x_stride"]]
                + rows[:, C["x_size"]]) * elem
        assert (first >= region.addr).all() and (last <= region.end).all()
