"""The `vta` family's `uop_preload` and `early_epilogue` knobs (issue 19 latency: what keeps the weight
stream of the memory-bound 512-channel layers going, and the drain after it): every micro-op kernel
loaded by one LOAD UOP at the head of the program (`uop_preload` 1), with flat reset kernels (2);
each thread's requantization right after its own last GEMMs (`early_epilogue` 1). Every value is
bit-exact against NumPy, race-free (`simulate(check=True)`) and its block-form cycles equal
`time_program`, on both stock configs, with ACC slots, threads, edge tiles and a fused epilogue; the
rules that bound them are named; template points keep 0. Fails before the knobs."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.evaluate.compiler import compile_layer
from codesign.evaluate.fused import Epilogue, measure_fused, reference_fused, run_fused
from codesign.mapping.edges import edge_bits
from codesign.schedule import get_space
from codesign.schedule.families import mapping_for
from codesign.schedule.vta_space import VTHREADS
from codesign.vta import isa, timing
from codesign.workloads import Conv2D

LAYERS = (Conv2D(1, 512, 7, 7, 128, 3, 3, 1, 1),   # ResNet-18's 512-channel 7x7 input (fewer outputs)
          Conv2D(1, 32, 12, 12, 48, 3, 3, 2, 1),   # strided padded 3x3 (edge tiles: 6 rows in 4s)
          Conv2D(1, 64, 14, 14, 64, 1, 1, 2, 0))   # strided 1x1
# ACC slots on co (acc_resident = 1), threads on co, pad_skip: the 7x7 layer's schedule that streams
# its weights in rows of 16 input channel blocks (64 rows instead of 512 on ResNet-18's layer)
SLOTS = {"tile_b": [1, 1], "tile_h": [1, 7], "tile_w": [1, 7], "tile_ci": [2, 16], "tile_co": [4, 2], "order": 0,
         "wgt_stationary": 0, "vthread": VTHREADS.index("co"), "uop_fold": 0, "inp_stationary": 0,
         "acc_resident": 1, "pad_skip": 1, "n_threads": 2, "uop_lift": 0}


def _uop_loads(insns: np.ndarray) -> np.ndarray:
    c = isa.COL
    return insns[(insns[:, c["opcode"]] == isa.OP_LOAD) & (insns[:, c["memory_type"]] == isa.MEM_UOP)
                 & (insns[:, c["x_size"]] > 0)]


def _check(case, config) -> int:
    """Bit-exact, race-free, exactly timed; the preload is the one LOAD UOP, at the head, of every kernel."""
    prog, timed = case.check(config)
    loads = _uop_loads(prog.insns)
    if config.knobs["uop_preload"]:
        c = isa.COL
        compute = prog.insns[(prog.insns[:, c["opcode"]] != isa.OP_LOAD) | (prog.insns[:, c["memory_type"]] == isa.MEM_UOP)]
        assert len(loads) == 1 and compute[0, c["memory_type"]] == isa.MEM_UOP  # the head of the compute queue
        assert loads[0, c["sram_base"]] == 0
    return timed.cycles


@pytest.mark.parametrize("layer", LAYERS, ids=lambda ly: ly.name)
def test_preload_is_bit_exact_race_free_and_exactly_timed(layer, stock_hw, vta_case):
    """A random valid config per value (with edge tiles / ACC slots where the layer has them)."""
    case = vta_case(layer, stock_hw)
    space = case.space
    # 1,000 valid configs drawn uniformly by the space's sampler: every kind below has dozens of hits,
    # and listing the family first (481,383 on pynq_4x8's 512-channel layer) took ~25 s
    picks = np.sort(space.sample_valid(1000, np.random.default_rng(0)))
    b = space.batch(picks)
    edge = edge_bits(b.t) != 0
    for on in (b.pre == 1, b.pre == 2, b.early == 1, (b.early == 1) & (b.pre > 0)):
        for sel in (on & edge, on & (b.slots > 1), on & ~edge):
            if sel.any():
                _check(case, space.get(int(picks[np.flatnonzero(sel)[0]])))
        assert on.any()


def test_preload_keeps_the_weight_stream_going_on_the_512_channel_layer(vta_case):
    """With ACC slots the per-slot kernels (16 here) are loaded at their first use by the ring, each
    LOAD UOP waiting on the shared port behind a weight tile; preloaded, they load once at the head:
    fewer cycles, and the flat reset kernels run one pipeline fill per reset."""
    case = vta_case(LAYERS[0])
    layer, hw, space = case.layer, case.hw, case.space
    cycles = {p: _check(case, space.from_knobs({**SLOTS, "uop_preload": p})) for p in (0, 1, 2)}
    assert cycles[1] < 0.85 * cycles[0]
    ring = _uop_loads(compile_layer(layer, space.from_knobs({**SLOTS, "uop_preload": 0}), hw).insns)
    assert len(ring) > 1
    m0, m2 = (mapping_for(layer, space.from_knobs({**SLOTS, "uop_preload": p}), hw) for p in (0, 2))
    assert m2.reset.size == m0.tile.co * m0.tile.h * m0.tile.w and m2.reset.iter_out * m2.reset.iter_in == 1
    assert m0.reset.iter_out * m0.reset.iter_in > 1


def test_early_epilogue_runs_thread_0s_requantization_before_thread_1s_last_gemm(vta_case):
    """The drain after the last weight load is one thread's epilogue, not both: fewer cycles on the
    512-channel layer, and in program order thread 0's first ALU op precedes thread 1's last GEMM."""
    case = vta_case(LAYERS[0])
    layer, hw, space = case.layer, case.hw, case.space
    cycles = {e: _check(case, space.from_knobs({**SLOTS, "uop_preload": 1, "early_epilogue": e})) for e in (0, 1)}
    assert cycles[1] < cycles[0]
    c = isa.COL
    for e in (0, 1):
        insns = compile_layer(layer, space.from_knobs({**SLOTS, "uop_preload": 1, "early_epilogue": e}), hw).insns
        op = insns[:, c["opcode"]]
        first_alu = np.flatnonzero(op == isa.OP_ALU)[0]
        last_gemm = np.flatnonzero((op == isa.OP_GEMM) & (insns[:, c["reset_reg"]] == 0))[-1]
        assert (first_alu < last_gemm) == bool(e)
    assert space.why_invalid({**SLOTS, "vthread": 0, "tile_co": [8, 1], "early_epilogue": 1}).startswith(
        "early_epilogue_live: ")


def test_preload_with_a_fused_epilogue_is_bit_exact_and_exactly_timed(vta_case):
    case = vta_case(Conv2D(1, 64, 14, 14, 64, 3, 3, 1, 1))
    layer, hw = case.layer, case.hw
    config = case.config({"tile_b": [1, 1], "tile_h": [2, 7], "tile_w": [1, 14], "tile_ci": [2, 2], "tile_co": [2, 2],
                          "order": 0, "wgt_stationary": 0, "vthread": VTHREADS.index("co"), "uop_fold": 0,
                          "inp_stationary": 0, "acc_resident": 0, "pad_skip": 0, "n_threads": 2, "uop_lift": 0,
                          "uop_preload": 2, "early_epilogue": 1})
    rng = np.random.default_rng(1)
    x = rng.integers(-128, 128, layer.data_shape(), dtype=np.int8)
    w = rng.integers(-128, 128, layer.weight_shape(), dtype=np.int8)
    bias = rng.integers(-40000, 40000, layer.output_shape()[1]).astype(np.int32)
    res = rng.integers(-128, 128, layer.output_shape(), dtype=np.int8)
    epi = Epilogue(9, bias=True, relu=True, residual=(1, 0, 1))
    run = run_fused(layer, config, hw, epi, x, w, bias, res, check=True)
    np.testing.assert_array_equal(run.output, reference_fused(layer, epi, x, w, bias, res))
    assert len(_uop_loads(run.program.insns)) == 1
    assert measure_fused(layer, config, hw, epi).cycles == timing.time_program(run.program.insns, hw).cycles


def test_preload_rules_are_named_and_template_points_keep_zero(vta_case):
    case = vta_case(LAYERS[0])
    layer, hw, space = case.layer, case.hw, case.space
    # ResNet-18's layer: 32 slot kernels x 361 micro-ops (2 threads x 16 co tiles of 1 block) > 8192
    full = vta_case(Conv2D(1, 512, 7, 7, 512, 3, 3, 1, 1)).space
    assert full.why_invalid({**SLOTS, "tile_co": [32, 1], "uop_preload": 0}) is None
    why = full.why_invalid({**SLOTS, "tile_co": [32, 1], "uop_preload": 1})
    assert why is not None and why.startswith("uop_preload_fit: micro-op preload: every kernel loaded at once needs")
    edgy = vta_case(LAYERS[1]).space
    valid = edgy.valid_indices()
    b = edgy.batch(valid)
    config = edgy.get(int(valid[np.flatnonzero((edge_bits(b.t) != 0) & (b.pre == 1))[0]]))
    assert edgy.why_invalid({**config.knobs, "uop_preload": 2}).startswith("uop_flat_reset_edge: ")
    tspace = get_space(layer, hw)
    for c in tspace.valid_configs()[:20]:
        assert space.from_template(c).knobs["uop_preload"] == space.from_template(c).knobs["early_epilogue"] == 0
    old = {k: v for k, v in SLOTS.items() if k not in ("uop_preload", "early_epilogue")}  # a record from before
    assert space.as_config(old).knobs["uop_preload"] == space.as_config(old).knobs["early_epilogue"] == 0


def test_two_passes_agree_with_the_full_mask(two_pass_agrees, vta_case):
    assert two_pass_agrees(vta_case(Conv2D(1, 32, 12, 12, 48, 3, 3, 2, 1)).space, n=150) > 0
