"""The `vta` family's `pad_skip` knob (docs/schedules.md, issue 19 latency): a GEMM kernel that skips
the taps reading zero padding, for tiles covering the whole output plane of a padded conv. On both
stock configs over a padded 3x3, a strided 3x3, a grouped 3x3 and a 512-channel 7x7 conv (the layer
shape where ResNet-18's time goes): every pad_skip config tried is bit-exact against NumPy,
race-free (`simulate(check=True)`), its block-form cycles equal `time_program`, and it is faster
than the same config with the padded kernel; the kernel holds exactly the (pixel, tap) pairs inside
the image; configs it does not apply to are refused by the named rule; template points keep
pad_skip = 0."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.analysis.roofline import attained_fraction
from codesign.errors import InvalidSchedule
from codesign.evaluate.compiler import compile_layer
from codesign.evaluate.run import measure
from codesign.hw.config import HwConfig
from codesign.mapping.batch import geometry, pad_skip_kernel, pad_taps
from codesign.schedule import get_space
from codesign.schedule.families import mapping_for
from codesign.vta import isa
from codesign.workloads import Conv2D

LAYERS = (Conv2D(1, 32, 8, 8, 32, 3, 3, 1, 1),     # padded 3x3
          Conv2D(1, 32, 14, 14, 32, 3, 3, 2, 1),   # strided 3x3 (pads on the top/left only)
          Conv2D(1, 64, 6, 6, 64, 3, 3, 1, 1, groups=2),
          Conv2D(1, 512, 7, 7, 32, 3, 3, 1, 1),    # ResNet-18's 512-channel 7x7 input (fewer outputs)
          Conv2D(1, 64, 14, 14, 64, 1, 1, 2, 0))   # strided 1x1: no padding, the whole planes in one DMA row


def _picks(space, n: int = 2) -> list[int]:
    """The first and n - 1 random valid configs with pad_skip = 1 on tiles of the whole output plane
    (with threads when some have; other tiles: tests/test_pad_rows.py)."""
    valid = space.valid_indices()
    b = space.batch(valid)
    g = space.batch(valid[:1]).t.geo
    whole = (b.ps == 1) & (b.t.tile_h == g.out_h) & (b.t.tile_w == g.out_w)
    hits = np.flatnonzero(whole)
    threaded = np.flatnonzero(whole & (b.vt > 0))
    rng = np.random.default_rng(0)
    rows = [hits[0], *threaded[:1], *rng.choice(hits, size=min(n - 1, hits.size), replace=False)]
    return [int(valid[r]) for r in dict.fromkeys(rows)]


@pytest.mark.parametrize("layer", LAYERS, ids=lambda ly: ly.name)
def test_pad_skip_is_bit_exact_race_free_exactly_timed_and_faster(layer, stock_hw, vta_case):
    case = vta_case(layer, stock_hw)
    layer, hw, space = case.layer, case.hw, case.space
    picks = _picks(space)
    assert picks, "no valid pad_skip config"
    for i in picks[:1 if layer.macs > 10 ** 7 else 3]:
        config = space.get(i)
        prog, fast = case.check(config)  # bit-exact, race-free, exactly timed
        # the unpadded INP tile: no pads, one DMA row per batch block (not one per image row)
        c = isa.COL
        inp = prog.insns[(prog.insns[:, c["opcode"]] == isa.OP_LOAD) & (prog.insns[:, c["memory_type"]] == isa.MEM_INP)
                         & (prog.insns[:, c["x_size"]] > 0)]
        assert not inp[:, [c["y_pad_0"], c["y_pad_1"], c["x_pad_0"], c["x_pad_1"]]].any()
        assert (inp[:, c["y_size"]] <= layer.batch // hw.batch).all()
        assert _macs(prog.insns) == round(layer.macs // hw.macs_per_cycle * _inside(layer, hw))
        other = space.from_knobs({**config.knobs, "pad_skip": 0})
        if space.why_invalid(other) is not None:  # the padded INP tile does not fit where the unpadded one does
            continue
        padded = compile_layer(layer, other, hw, data=case.data, weight=case.weight)
        if layer.padding:
            assert _macs(prog.insns) < _macs(padded.insns)
        else:  # nothing to skip: the whole planes load in fewer DMA rows
            assert _inp_rows(prog.insns) < _inp_rows(padded.insns)
        if layer.macs > 10 ** 7:  # a layer of real size: fewer GEMM cycles outweigh the bigger kernel's load
            assert fast.cycles < measure(layer, other, hw).cycles, config.knobs


def _macs(insns: np.ndarray) -> int:
    """GEMM micro-op cycles (one BATCH x BLOCK_IN x BLOCK_OUT block each) of a program, resets aside."""
    c = isa.COL
    gemm = (insns[:, c["opcode"]] == isa.OP_GEMM) & (insns[:, c["reset_reg"]] == 0)
    g = insns[gemm]
    return int(((g[:, c["uop_end"]] - g[:, c["uop_bgn"]]) * g[:, c["iter_out"]] * g[:, c["iter_in"]]).sum())


def _inp_rows(insns: np.ndarray) -> int:
    """DMA rows of a program's INP loads."""
    c = isa.COL
    inp = (insns[:, c["opcode"]] == isa.OP_LOAD) & (insns[:, c["memory_type"]] == isa.MEM_INP)
    return int(insns[inp, c["y_size"]].sum())


def _inside(layer, hw) -> float:
    """Fraction of the padded conv's (pixel, tap) pairs that read the image."""
    g = geometry(layer, hw)
    return (pad_taps(g.out_h, g.kh, g.stride, g.pad, g.height).mean()
            * pad_taps(g.out_w, g.kw, g.stride, g.pad, g.width).mean())


@pytest.mark.parametrize("layer", LAYERS[:2], ids=lambda ly: ly.name)
def test_pad_skip_kernel_reads_only_the_image(layer):
    hw = HwConfig.resolve("pynq_1x16")
    g = geometry(layer, hw)
    kernel, hazard = pad_skip_kernel(g, 2, 2)
    assert not hazard
    vh = pad_taps(g.out_h, g.kh, g.stride, g.pad, g.height)
    vw = pad_taps(g.out_w, g.kw, g.stride, g.pad, g.width)
    assert kernel.size == vh.sum() * vw.sum() < g.out_h * g.out_w * g.kh * g.kw
    # each uop reads the unpadded image (inp[ci][H][W]) at its pixel's tap
    h, w = np.divmod(kernel.uops[:, 0], g.out_w)
    di, dj = np.divmod(kernel.uops[:, 2], g.kw)
    row, col = h * g.stride + di - g.pad, w * g.stride + dj - g.pad
    assert ((row >= 0) & (row < g.height) & (col >= 0) & (col < g.width)).all()
    assert (kernel.uops[:, 1] == row * g.width + col).all()
    # every (pixel, tap) pair inside the image exactly once
    pairs = {(int(d), int(w)) for d, _, w in kernel.uops}
    assert len(pairs) == kernel.size


def test_pad_skip_refused_where_it_does_not_apply_and_templates_keep_zero(vta_case):
    case = vta_case(Conv2D(1, 32, 8, 8, 32, 3, 3, 1, 1))
    layer, hw, space = case.layer, case.hw, case.space
    knobs = {**space.get(_picks(space)[0]).knobs, "tile_h": [3, 3]}  # an edge tile (3 does not divide 8)
    why = space.why_invalid(knobs)
    assert why is not None and why.startswith("pad_skip_tile")
    with pytest.raises(InvalidSchedule, match="pad_skip_tile"):
        mapping_for(layer, space.from_knobs(knobs), hw)
    unpadded = get_space(Conv2D(1, 32, 8, 8, 32, 1, 1, 1, 0), hw, "vta")
    assert not (unpadded.batch(unpadded.valid_indices()).ps == 1).any()
    tspace = get_space(layer, hw)
    for c in tspace.valid_configs()[:20]:
        assert space.from_template(c).knobs["pad_skip"] == 0


def test_roofline_stays_a_bound_for_pad_skip_schedules(vta_case):
    """The compute bound counts only the MACs on real input: a pad_skip schedule of ResNet-18's
    14x14 3x3 conv runs fewer GEMM cycles than the padded conv's MACs, and must not beat the bound."""
    case = vta_case(Conv2D(1, 256, 14, 14, 256, 3, 3, 1, 1))
    layer, hw, space = case.layer, case.hw, case.space
    valid = space.valid_where(pad_skip=1, tile_h=14, tile_w=14)  # the whole plane's kernel, listed alone
    b = space.batch(valid)
    ps = valid[(b.ps == 1) & (b.t.tile_h == 14) & (b.t.tile_w == 14)]
    assert ps.size == valid.size > 0
    best = min(measure(layer, space.get(int(i)), hw).cycles for i in ps)
    assert best < layer.macs // hw.macs_per_cycle  # below every MAC of the padded conv
    assert 0.9 < attained_fraction(layer, hw, int(best)) <= 1
