"""Fused conv/dense epilogues (codesign/evaluate/fused.py, docs/vta.md §7.8): bit-exact against
codesign.network.reference's integer kernels on the simulator, free of races (every SRAM access
of two modules ordered by a token), FIFOs empty at FINISH, and the block-form timing equal to
the full program's `time_program`; what VTA cannot express is a one-line `fused_reason`."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.errors import CodesignError, InvalidSchedule, SimulationError
from codesign.evaluate.fused import (
    Epilogue,
    compile_fused,
    fused_invalid,
    fused_mapping,
    fused_reason,
    measure_fused,
    reference_fused,
    run_fused,
)
from codesign.hw.config import HwConfig
from codesign.lower import lower_blocks, lower_program
from codesign.mapping.mapping import AluOp, fuse, fused_slots
from codesign.schedule import get_space
from codesign.schedule.families import mapping_for
from codesign.tune.view import SpaceView
from codesign.vta import isa, timing
from codesign.vta.simulator import simulate
from codesign.workloads import Conv2D, Dense

HWS = ["pynq_1x16", "pynq_4x8"]
EPILOGUES = {
    "bias": Epilogue(9, bias=True),
    "bias_relu": Epilogue(9, bias=True, relu=True),
    "bias_add_relu": Epilogue(9, bias=True, relu=True, residual=(1, 0, 1)),
    "bias_add_lb": Epilogue(10, bias=True, residual=(0, 2, 3)),
}


def _layers(hw):
    n = hw.batch
    return {"conv3x3": Conv2D(n, 32, 8, 8, 32, 3, 3, 1, 1), "conv1x1s2": Conv2D(n, 32, 8, 8, 64, 1, 1, 2, 0),
            "dense": Dense(n, 64, 64)}


def _inputs(layer, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, layer.data_shape(), dtype=np.int8)
    w = rng.integers(-128, 128, layer.weight_shape(), dtype=np.int8)
    bias = rng.integers(-40000, 40000, layer.output_shape()[1]).astype(np.int32)
    r = rng.integers(-128, 128, layer.output_shape(), dtype=np.int8)
    return x, w, bias, r


def _schedules(layer, hw, n=3):
    """`n` valid schedules spread over the space (first, middle, last)."""
    sp = get_space(layer, hw)
    v = sp.valid_indices()
    return [sp.get(int(v[i])) for i in sorted({0, len(v) // 2, len(v) - 1})][:n]


CASES = [(hw, name, epi) for hw in HWS for name in ("conv3x3", "conv1x1s2", "dense")
         for epi in EPILOGUES if not (name == "conv1x1s2" and epi == "bias_add_lb")]


@pytest.mark.parametrize("hw_name,layer_name,epi_name", CASES)
def test_fused_bit_exact_race_free_and_block_timing_exact(hw_name, layer_name, epi_name):
    hw = HwConfig.resolve(hw_name)
    layer, epi = _layers(hw)[layer_name], EPILOGUES[epi_name]
    x, w, bias, r = _inputs(layer)
    ref = reference_fused(layer, epi, x, w, bias, r)
    assert (ref < 0).any() != epi.relu  # the clip's lower bound is exercised
    for config in _schedules(layer, hw):
        run = run_fused(layer, config, hw, epi, x, w, bias, r, check=True)
        np.testing.assert_array_equal(run.output, ref, err_msg=f"{config.knobs}")
        res = simulate(run.program)
        assert not res.tokens_left and not res.not_run
        m = measure_fused(layer, config, hw, epi)
        assert m.cycles == run.cycles == timing.time_program(run.program.insns, hw).cycles
        blocks = lower_blocks(fused_mapping(layer, config, hw, epi), hw)
        assert blocks.n_insns == run.program.insns.shape[0]


def test_residual_differs_from_plain_add_of_rounded_terms():
    """The add happens in int32 before the rounding shift (not two rounded int8 terms summed):
    the residual step changes the output versus the conv alone."""
    hw = HwConfig.resolve("pynq_1x16")
    layer = _layers(hw)["conv3x3"]
    x, w, bias, r = _inputs(layer, 1)
    config = _schedules(layer, hw)[0]
    plain = run_fused(layer, config, hw, Epilogue(9, bias=True), x, w, bias).output
    fused = run_fused(layer, config, hw, Epilogue(9, bias=True, residual=(1, 0, 1)), x, w, bias, r).output
    assert not np.array_equal(plain, fused)
    np.testing.assert_array_equal(fused, reference_fused(layer, Epilogue(9, True, False, (1, 0, 1)), x, w, bias, r))


def test_residual_load_needs_its_token():
    """Dropping the WAR token of a residual load (it overwrites an INP slice a GEMM still reads)
    is a race the checker reports: the emitted token is what orders it."""
    hw = HwConfig.resolve("pynq_1x16")
    layer = _layers(hw)["conv3x3"]
    epi = EPILOGUES["bias_add_relu"]
    x, w, bias, r = _inputs(layer)
    config = _schedules(layer, hw)[0]
    prog = compile_fused(layer, config, hw, epi, x, w, bias, r)
    m = prog.insns
    C = isa.COL
    region = next(g for g in prog.regions if g.name == "residual")
    lo, hi = region.addr // hw.inp_elem_bytes, (region.addr + region.nbytes) // hw.inp_elem_bytes
    loads = np.flatnonzero((m[:, C["opcode"]] == isa.OP_LOAD) & (m[:, C["memory_type"]] == isa.MEM_INP)
                           & (m[:, C["dram_base"]] >= lo) & (m[:, C["dram_base"]] < hi))
    fm = fused_mapping(layer, config, hw, epi)
    assert len(loads) == fm.n_pairs * fm.n_threads * fused_slots(fm).chunks and m[loads, C["pop_next_dep"]].all()
    victim = loads[len(loads) // 2]
    simulate(prog, check=True)  # clean as emitted
    m[victim, C["pop_next_dep"]] = 0
    with pytest.raises(SimulationError, match="unsynchronized INP SRAM"):
        simulate(prog, check=True)


def test_plain_epilogue_unchanged_by_fuse_of_its_own_steps():
    """fuse(m, m.epilogue) is m: the templates' programs do not change (the 3,259-config digest
    test pins them byte for byte)."""
    hw = HwConfig.resolve("pynq_1x16")
    layer = _layers(hw)["conv3x3"]
    config = _schedules(layer, hw)[0]
    m = mapping_for(layer, config, hw, 8)
    a, b = lower_program(m, hw).insns, lower_program(fuse(m, m.epilogue), hw).insns
    np.testing.assert_array_equal(a, b)


def test_fused_reason_one_liners():
    hw = HwConfig.resolve("pynq_1x16")
    layer = _layers(hw)["conv3x3"]
    odd = HwConfig.resolve("pynq_1x16x8_i8w8a32_15_15_17_16")  # BLOCK_IN 16, BLOCK_OUT 8
    assert fused_reason(layer, Epilogue(8, True, True), hw) is None
    assert fused_reason(layer, Epilogue(8, True, True, (1, 0, 1)), hw) is None
    assert fused_reason(layer, Epilogue(8, True, True), odd) is None
    why = fused_reason(layer, Epilogue(8, True, True, (1, 0, 1)), odd)
    assert "BLOCK_IN == BLOCK_OUT" in why and "\n" not in why
    assert "lb <= 6" in fused_reason(layer, Epilogue(8, residual=(0, 7, 1)), hw)
    assert "0..15" in fused_reason(layer, Epilogue(16), hw)
    assert "BLOCK_IN" in fused_reason(Conv2D(1, 3, 8, 8, 32, 3, 3, 1, 1), Epilogue(8), hw)
    with pytest.raises(CodesignError, match="BLOCK_IN == BLOCK_OUT"):
        fused_mapping(layer, _schedules(layer, odd)[0], odd, Epilogue(8, True, True, (1, 0, 1)))


def test_missing_operand_and_sram_room_are_one_line_errors():
    hw = HwConfig.resolve("pynq_1x16")
    layer = _layers(hw)["conv3x3"]
    x, w, _, _ = _inputs(layer)
    config = _schedules(layer, hw)[0]
    with pytest.raises(CodesignError, match="no bias array"):
        run_fused(layer, config, hw, Epilogue(8, bias=True), x, w)
    # a tile that fills the ACC SRAM leaves no room for its bias blocks
    tiny = hw.with_(LOG_ACC_BUFF_SIZE=11)  # 32 ACC blocks: a 4x8 tile of 1 channel block fills it
    big = Conv2D(1, 16, 4, 8, 16, 1, 1, 1, 0)
    sp = get_space(big, tiny)
    full = [sp.get(int(i)) for i in sp.valid_indices() if sp.mapping_batch(np.array([i])).acc_sram[0] == 32]
    assert full
    why = fused_invalid(big, full[0], tiny, Epilogue(8, bias=True))
    assert why is not None and "bias" in why and "\n" not in why
    with pytest.raises(InvalidSchedule):
        measure_fused(big, full[0], tiny, Epilogue(8, bias=True))
    assert fused_invalid(big, full[0], tiny, Epilogue(8)) is None


def test_fuse_rejects_malformed_steps():
    hw = HwConfig.resolve("pynq_1x16")
    layer = _layers(hw)["dense"]
    m = mapping_for(layer, _schedules(layer, hw)[0], hw, 8)
    for steps in ((AluOp("gemm", 0, "bias"), AluOp("max", 0)), (AluOp("min", 127), AluOp("gemm", 1, "residual")),
                  (AluOp("add", 0, "bias"), AluOp("add", 0, "bias"), AluOp("max", 0))):
        with pytest.raises(ValueError):
            fuse(m, steps)


@pytest.mark.parametrize("hw_name", HWS)
def test_fused_on_the_vta_family(hw_name):
    """fuse applies to any family's mapping: the `vta` family's loop orders, weight-stationary
    residency (the identity block stays clear of the resident weights) and threads on any axis."""
    hw = HwConfig.resolve(hw_name)
    layer, epi = _layers(hw)["conv3x3"], EPILOGUES["bias_add_relu"]
    x, w, bias, r = _inputs(layer, 2)
    ref = reference_fused(layer, epi, x, w, bias, r)
    sp = get_space(layer, hw, "vta")
    # 400 valid schedules drawn by the space's sampler, in index order: listing all (313,221 on the 4x8
    # core) took ~30 s and the picks below prove the same residencies, threads and orders
    configs = [sp.get(i) for i in sorted(SpaceView(sp).sample_valid(400, np.random.default_rng(0)))]
    picked = [c for c in configs if c.knobs["wgt_stationary"]][:3] + [c for c in configs if c.knobs["vthread"]][-2:]
    picked += [c for c in configs if c.knobs["order"] not in (0,)][:2]
    assert {c.knobs["wgt_stationary"] for c in picked} == {0, 1}
    ran = 0
    for config in picked:
        if fused_invalid(layer, config, hw, epi) is not None:
            continue
        ran += 1
        run = run_fused(layer, config, hw, epi, x, w, bias, r, check=True)
        np.testing.assert_array_equal(run.output, ref, err_msg=f"{config.knobs}")
        assert measure_fused(layer, config, hw, epi).cycles == run.cycles
    assert ran >= 5


@pytest.mark.parametrize("hw_name", HWS)
def test_residual_in_chunks_when_the_tile_exceeds_the_inp_slice(hw_name):
    """A residual tile larger than the thread's INP slice is loaded and added in chunks of
    channel planes (full-width planes several per LOAD, narrower ones one each): still bit-exact,
    race-free, block timing exact, and no schedule is rejected for INP room."""
    hw = HwConfig.resolve(hw_name)
    epi = EPILOGUES["bias_add_relu"]
    seen = set()
    for name, layer in (("conv1x1s2", _layers(hw)["conv1x1s2"]), ("wide", Conv2D(hw.batch, 16, 8, 8, 64, 1, 1, 1, 0)),
                        ("dense", Dense(hw.batch, 16, 64))):
        x, w, bias, r = _inputs(layer, 3)
        ref = reference_fused(layer, epi, x, w, bias, r)
        sp = get_space(layer, hw)
        chunked = []
        for i in sp.valid_indices():
            c = sp.get(int(i))
            assert fused_invalid(layer, c, hw, epi) is None
            fm = fused_mapping(layer, c, hw, epi)
            fs = fused_slots(fm)
            if fs.chunks > 1:
                chunked.append((c, fs.planes > 1, fm.tile.w == fm.geo.out_w))
        kinds = {}
        for c, multi, full in chunked:
            kinds.setdefault((multi, full), c)
        for (multi, full), config in kinds.items():
            seen.add((name, multi, full))
            run = run_fused(layer, config, hw, epi, x, w, bias, r, check=True)
            np.testing.assert_array_equal(run.output, ref, err_msg=f"{name} {config.knobs}")
            assert measure_fused(layer, config, hw, epi).cycles == run.cycles
    assert any(multi for _, multi, _ in seen) and any(not full for _, _, full in seen)


def test_identity_in_the_thread_slice_when_wgt_is_full():
    """A schedule filling the WGT SRAM leaves no row for the identity block: it is loaded into
    the thread's own WGT slice with every pair's residual (that slice is reloaded at the next
    reduction step anyway) — bit-exact, race-free, block timing exact."""
    hw = HwConfig.resolve("pynq_1x16").with_(LOG_WGT_BUFF_SIZE=10)  # 4 WGT blocks
    layer, epi = Conv2D(1, 32, 8, 8, 32, 1, 1, 1, 0), EPILOGUES["bias_add_relu"]
    x, w, bias, r = _inputs(layer, 4)
    sp = get_space(layer, hw)
    full = [c for c in (sp.get(int(i)) for i in sp.valid_indices())
            if fused_slots(fused_mapping(layer, c, hw, epi), hw.wgt_depth).ident_each]
    assert full
    for config in full[:3]:
        run = run_fused(layer, config, hw, epi, x, w, bias, r, check=True)
        np.testing.assert_array_equal(run.output, reference_fused(layer, epi, x, w, bias, r))
        assert measure_fused(layer, config, hw, epi).cycles == run.cycles
