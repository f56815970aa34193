"""A mapping no AutoTVM template can express lowers to a correct program: weight-stationary
(output channels outermost, each weight tile loaded once while all spatial tiles stream past
it), written by hand from a template mapping's tile, is bit-exact against NumPy, race-free
(`simulate(check=True)`), loads each weight tile exactly once, and its fast-path cycles equal the
instruction-level model's. Illegal loop nests are refused by a named rule."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from codesign.errors import InvalidSchedule
from codesign.evaluate.run import random_inputs
from codesign.hw.config import HwConfig
from codesign.lower import lower_blocks, lower_program, regions
from codesign.mapping import Loop, Mapping
from codesign.mapping.legality import violations
from codesign.schedule import get_space
from codesign.schedule.families import mapping_for
from codesign.vta import isa, timing
from codesign.vta.program import DramAllocator, Program
from codesign.vta.simulator import simulate
from codesign.workloads import Conv2D

HW = HwConfig.resolve("pynq_1x16")


def weight_stationary(m: Mapping) -> Mapping:
    """`m`'s tiles with co outermost and WGT resident across b, h, w (the reduction has one
    step: the weight tile holds every input channel)."""
    loops = {lp.axis: lp for lp in m.loops}
    order = tuple(loops[a] for a in ("co", "b", "h", "w", "ci"))
    return replace(m, loops=order, residency=(("inp", order[-1].name), ("wgt", order[0].name),
                                              ("out", order[-2].name)))


def _program(m: Mapping, layer, data, weight) -> Program:
    low = lower_program(m, HW)
    alloc = DramAllocator()
    for name, nbytes, align, role in regions(m, HW):
        arr = {"data": (data, layer.pack_data), "weight": (weight, layer.pack_weight)}.get(name)
        packed = None if arr is None else np.ascontiguousarray(arr[1](arr[0], HW)).view(np.uint8)
        alloc.alloc(name, nbytes, align, role, packed)
    alloc.alloc_uops(low.uops, HW)
    return Program(HW, low.insns, low.uops, alloc.regions, {"layer": layer.name})


def _wgt_loads(insns: np.ndarray) -> int:
    return int(((insns[:, isa.COL["opcode"]] == isa.OP_LOAD) & (insns[:, isa.COL["memory_type"]] == isa.MEM_WGT)).sum())


def _configs(layer):
    """Valid configs whose reduction is one step, with and without virtual threads over co."""
    space = get_space(layer, HW)
    out = []
    for i in space.valid_indices():
        m = mapping_for(layer, space.get(int(i)), HW)
        if m.n_steps == 1 and m.loops[2].extent * m.vthreads[1].extent > 1:
            out.append(m)
    assert any(m.n_threads == 2 for m in out) and any(m.n_threads == 1 for m in out)
    assert any(m.n_pairs > m.loops[2].extent for m in out)  # spatial tiles stream past a weight tile
    return out


@pytest.mark.parametrize("layer", [Conv2D(1, 16, 8, 8, 64, 3, 3, 1, 1),   # padded 3x3, one ci block
                                   Conv2D(1, 32, 8, 8, 64, 1, 1, 2, 0)],  # strided 1x1, all ci in one tile
                         ids=lambda ly: ly.name)
def test_weight_stationary_is_bit_exact_race_free_and_loads_each_weight_tile_once(layer):
    data, weight = random_inputs(layer, seed=5)
    ref = layer.reference(data, weight)
    for base in _configs(layer):
        m = weight_stationary(base)
        assert violations(m, HW) == []
        prog = _program(m, layer, data, weight)
        res = simulate(prog, check=True)
        out = layer.unpack_output(np.asarray(res.outputs["output"]).view(np.int8), HW)
        assert np.array_equal(out, ref)
        assert res.tokens_left == {}
        insns = prog.insns
        # once per co tile and thread slice (h threads each hold the weight tile)
        assert _wgt_loads(insns) == base.loops[2].extent * base.n_threads
        assert _wgt_loads(lower_program(base, HW).insns) == base.n_pairs * base.n_threads  # template: every pair
        blocks = lower_blocks(m, HW)
        assert blocks.n_insns == insns.shape[0]
        fast = timing.time_blocks(blocks.rows, blocks.block_start, blocks.pair_class, blocks.periods, HW,
                                  timing.default_params())
        assert fast is not None and fast.cycles == timing.time_program(insns, HW).cycles


def test_illegal_nests_are_named():
    layer = Conv2D(1, 32, 8, 8, 32, 3, 3, 1, 1)  # padded: two reduction steps of one ci block
    space = get_space(layer, HW)
    m = mapping_for(layer, space.get(int(space.valid_indices()[0])), HW)
    assert m.n_steps == 2 and violations(m, HW) == []
    names = [name for name, _ in violations(weight_stationary(m), HW)]
    assert names == ["residency_reuse"]  # the weight tile would change with k while resident
    swapped = replace(m, loops=(m.loops[-1],) + m.loops[:-1])
    assert "reduction_innermost" in [name for name, _ in violations(swapped, HW)]
    short = replace(m, loops=(replace(m.loops[0], extent=2),) + m.loops[1:])
    assert [msg for name, msg in violations(short, HW) if name == "cover"] == [
        "divisibility: axis b of 1 is covered by 2 tile(s) of 1"]
    with pytest.raises(InvalidSchedule, match="residency: WGT is resident at loop 'co'"):
        lower_program(weight_stationary(m), HW)
    assert isinstance(Loop("x", "h", 1), Loop)
