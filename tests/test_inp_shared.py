"""One INP tile shared by every virtual thread (`Mapping.inp_shared`, issue 19 latency: ResNet-18's
512-channel 7x7 layers on pynq_1x16). When the whole input is one tile (whole plane, whole
reduction), input-stationary, and the threads split co, every thread would load the same tile:
thread 0 loads it once and every thread's GEMMs read it, so INP SRAM holds it once and the weight
stream loses one input load. Such schedules were refused by sram_inp before (two copies > INP
depth). Bit-exact against NumPy, race-free, block-form cycles equal `time_program`, exactly one
INP load; the other residencies of that geometry still need one tile per thread (rule
sram_inp_shared); a mapping whose INP changes is never shared."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.hw.config import HwConfig
from codesign.schedule import get_space
from codesign.schedule.families import mapping_for
from codesign.schedule.features import N_CONFIG_FEATURES
from codesign.schedule.vta_space import EXTRA_FEATURE_NAMES, VTHREADS
from codesign.vta import isa
from codesign.workloads import Conv2D


def _shared(hw: HwConfig, layer: Conv2D, n_threads: int, ins: int = 1) -> dict:
    """The whole input in one tile, one output channel block per thread and pair, input-stationary."""
    ci, co = layer.in_channels // hw.block_in, layer.out_channels // hw.block_out
    return {"tile_b": [1, 1], "tile_h": [1, layer.height], "tile_w": [1, layer.width], "tile_ci": [1, ci],
            "tile_co": [co, 1], "order": 0, "wgt_stationary": 0, "vthread": VTHREADS.index("co"), "uop_fold": 0,
            "inp_stationary": ins, "acc_resident": 0, "pad_skip": 1, "n_threads": n_threads, "uop_lift": 0,
            "uop_preload": 0, "early_epilogue": 1}


# (hw, layer, threads, inp_stationary): the input tile is more than INP depth / threads, so only one
# copy fits
CASES = [("pynq_1x16", Conv2D(1, 512, 7, 7, 128, 3, 3, 1, 1), 2, 1),   # ResNet-18's 7x7 input, fewer outputs
         ("pynq_1x16", Conv2D(1, 256, 7, 7, 128, 3, 3, 1, 1), 4, 1),
         ("pynq_4x8", Conv2D(4, 256, 7, 7, 64, 3, 3, 1, 1), 2, 1)]


def _inp_loads(insns: np.ndarray) -> int:
    c = isa.COL
    return int(((insns[:, c["opcode"]] == isa.OP_LOAD) & (insns[:, c["memory_type"]] == isa.MEM_INP)
                & (insns[:, c["x_size"]] > 0)).sum())


@pytest.mark.parametrize("hw_name,layer,n_threads,ins", CASES)
def test_shared_input_tile_runs_bit_exact_with_one_load(vta_case, hw_name: str, layer: Conv2D, n_threads: int,
                                                        ins: int) -> None:
    case = vta_case(layer, hw_name)
    hw = case.hw
    config = case.config(_shared(hw, layer, n_threads, ins))
    m = mapping_for(case.layer, config, hw)
    assert m.inp_shared and m.n_threads == n_threads
    assert m.tile.inp_sram <= hw.inp_depth < m.tile.inp_sram * n_threads  # one copy fits, one per thread not
    prog, _timed = case.check(config)  # bit-exact, race-free, block-form cycles == time_program
    assert _inp_loads(prog.insns) == 1
    at = N_CONFIG_FEATURES + EXTRA_FEATURE_NAMES.index("log2_inp_loads")  # the cost models' count: one
    assert case.space.features_batch([config.index])[0, at] == 0


def test_other_residencies_of_that_geometry_need_a_tile_per_thread() -> None:
    hw_name, layer, n, _ins = CASES[0]
    hw = HwConfig.resolve(hw_name)
    space = get_space(layer, hw, "vta")
    why = space.why_invalid({**_shared(hw, layer, n), "inp_stationary": 0})
    assert why is not None and why.startswith("sram_inp_shared:") and "inp_stationary=1" in why
    assert space.why_invalid({**_shared(hw, layer, n), "vthread": 0, "early_epilogue": 0}) is None  # one thread
    # one pair per thread loads the tile once too, but only input-stationary tiles are shared: the
    # templates' programs (INP at the reduction loop) stay instruction for instruction
    one_pair = Conv2D(1, 256, 7, 7, 64, 3, 3, 1, 1)
    sp = get_space(one_pair, hw, "vta")
    why = sp.why_invalid(_shared(hw, one_pair, 4, ins=0))
    assert why is not None and why.startswith("sram_inp_shared:")
    small = Conv2D(1, 128, 7, 7, 128, 3, 3, 1, 1)  # fits once per thread: never shared unless input-stationary
    sp = get_space(small, hw, "vta")
    cfg = sp.from_knobs({**_shared(hw, small, 2), "inp_stationary": 0})
    m = mapping_for(small, cfg, hw)
    assert not m.inp_shared and m.tile.inp_sram * 2 <= hw.inp_depth



def test_listing_and_sampler_reach_the_shared_tile() -> None:
    """The shared tile fits only unpadded (pad_skip's whole planes): the first pass of `valid_indices`
    and the sampler's support (kernel knobs at 0, the padded tile) bound INP SRAM by the smallest
    tile a kernel knob gives (rule sram_inp_bound), so both reach it (missed before: listed 0 of them)."""
    hw_name, layer, n, _ins = CASES[0]
    hw = HwConfig.resolve(hw_name)
    space = get_space(layer, hw, "vta")
    valid = space.valid_indices()
    for knobs in (_shared(hw, layer, n), {**_shared(hw, layer, n), "uop_preload": 1, "early_epilogue": 0}):
        assert space.why_invalid(knobs) is None
        assert space.from_knobs(knobs).index in set(valid.tolist())
    _pos, geo, _f, _l, ps_ok = space.sample_support()
    whole = (geo.tile_h == layer.height) & (geo.tile_w == layer.width) & (geo.ci_steps == 1)
    assert (whole & ps_ok).any()  # the geometry with the shared tile is in the support
