"""`pad_skip` on tiles that are not the whole output plane (docs/schedules.md "pad_skip", issue 19):
one GEMM kernel per schedule (`mapping.batch.pad_rows_kernel`) whose micro-op range the first / last
row tile trims (the taps above / below the image), the column padding skipped on whole-width tiles.
On both stock configs, over a padded 3x3, a strided 3x3 and a grouped 3x3 conv: every row-tile
pad_skip config tried is bit-exact against NumPy, race-free (`simulate(check=True)`), its block-form
cycles equal `time_program`, its INP loads are exactly those of the same tiles without pad_skip
(the padded load: rows outside the image are the DMA's zero pads, never read from DRAM), and it runs
fewer GEMM cycles; on whole-width tiles exactly the MACs on real input. Each tile position's range
holds exactly its (pixel, tap) pairs inside the image; tiles whose middle row tiles read padding
are refused by pad_skip_tile; the two validity passes agree with the full mask."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.evaluate.compiler import compile_layer
from codesign.evaluate.run import measure
from codesign.hw.config import HwConfig
from codesign.mapping.batch import geometry, pad_rows_kernel, pad_taps
from codesign.schedule import get_space
from codesign.vta import isa
from codesign.workloads import Conv2D

LAYERS = (Conv2D(1, 32, 8, 8, 32, 3, 3, 1, 1),     # padded 3x3: top and bottom row tiles trimmed
          Conv2D(1, 32, 14, 14, 32, 3, 3, 2, 1),   # strided 3x3: only the top row tile reads padding
          Conv2D(1, 64, 6, 6, 64, 3, 3, 1, 1, groups=2))


def _row_tiles(space) -> tuple[np.ndarray, np.ndarray]:
    """Valid configs with pad_skip = 1 on tiles that are not the whole plane, and which of them
    are whole-width row tiles."""
    valid = space.valid_indices()
    b = space.batch(valid)
    g = b.t.geo
    whole = (b.t.tile_h == g.out_h) & (b.t.tile_w == g.out_w)
    sel = (b.ps == 1) & ~whole
    return valid[sel], (b.t.tile_w == g.out_w)[sel]


def _gemm_cycles(insns: np.ndarray) -> int:
    """GEMM micro-op cycles of a program (one BATCH x BLOCK_IN x BLOCK_OUT block each), resets aside."""
    c = isa.COL
    g = insns[(insns[:, c["opcode"]] == isa.OP_GEMM) & (insns[:, c["reset_reg"]] == 0)]
    return int(((g[:, c["uop_end"]] - g[:, c["uop_bgn"]]) * g[:, c["iter_out"]] * g[:, c["iter_in"]]).sum())


def _inp_loads(insns: np.ndarray) -> np.ndarray:
    c = isa.COL
    rows = (insns[:, c["opcode"]] == isa.OP_LOAD) & (insns[:, c["memory_type"]] == isa.MEM_INP)
    cols = [c[f] for f in ("sram_base", "dram_base", "y_size", "x_size", "x_stride", "y_pad_0", "y_pad_1", "x_pad_0",
                           "x_pad_1")]
    return insns[rows][:, cols]


@pytest.mark.parametrize("layer", LAYERS, ids=lambda ly: ly.name)
def test_pad_rows_bit_exact_race_free_exactly_timed_same_loads_fewer_macs(layer, stock_hw, vta_case):
    case = vta_case(layer, stock_hw)
    layer, hw, space = case.layer, case.hw, case.space
    idx, full_width = _row_tiles(space)
    assert idx.size and full_width.any(), "no valid pad_skip config on row tiles"
    rng = np.random.default_rng(1)
    picks = [int(idx[np.flatnonzero(full_width)[0]]), *rng.choice(idx, size=min(3, idx.size), replace=False).tolist()]
    g = geometry(layer, hw)
    real = layer.macs // hw.macs_per_cycle * (pad_taps(g.out_h, g.kh, g.stride, g.pad, g.height).mean()
                                              * pad_taps(g.out_w, g.kw, g.stride, g.pad, g.width).mean())
    for i in dict.fromkeys(picks):
        config = space.get(i)
        prog, _ = case.check(config)  # bit-exact, race-free, exactly timed
        if inner(config.knobs["tile_w"]) == g.out_w:  # whole-width tiles: every tap on padding skipped
            assert _gemm_cycles(prog.insns) == round(real)
        other = space.from_knobs({**config.knobs, "pad_skip": 0})
        if space.why_invalid(other) is None:
            padded = compile_layer(layer, other, hw, data=case.data, weight=case.weight)
            assert np.array_equal(_inp_loads(prog.insns), _inp_loads(padded.insns))  # the same, honest loads
            assert _gemm_cycles(prog.insns) < _gemm_cycles(padded.insns)


def inner(v) -> int:
    return int(v[-1]) if isinstance(v, (list, tuple)) else int(v)


@pytest.mark.parametrize("layer,tile_h,tile_w", [(LAYERS[0], 2, 8), (LAYERS[0], 4, 4), (LAYERS[0], 1, 8),
                                                  (LAYERS[0], 8, 2), (LAYERS[1], 1, 7), (LAYERS[1], 7, 1)],
                         ids=lambda x: getattr(x, "name", str(x)))
def test_each_row_tile_runs_exactly_its_taps_inside_the_image(layer, tile_h, tile_w):
    hw = HwConfig.resolve("pynq_1x16")
    g = geometry(layer, hw)
    pr = pad_rows_kernel(g, tile_h, tile_w, 2, 2)
    assert pr.ok and not pr.hazard
    u = pr.kernel.uops
    n_h, win = g.out_h // tile_h, (tile_w - 1) * g.stride + g.kw
    h, w = np.divmod(u[:, 0], tile_w)
    di, dj = np.divmod(u[:, 2], g.kw)
    assert (u[:, 1] == (h * g.stride + di) * win + w * g.stride + dj).all()  # the padded tile's layout
    assert len({(int(d), int(x)) for d, _, x in u}) == len(u)  # each (pixel, tap) pair once
    for i in range(n_h):
        lo, hi = (pr.top if i == 0 else 0), len(u) - (pr.bottom if i == n_h - 1 else 0)
        run = {(int(d), int(x)) for d, _, x in u[lo:hi]}
        want = set()
        for hh in range(tile_h):
            for ww in range(tile_w):
                for a in range(g.kh):
                    for b in range(g.kw):
                        row = (i * tile_h + hh) * g.stride - g.pad + a
                        col = ww * g.stride - g.pad + b
                        # columns: skipped only when the tile is the whole width (its pads are zeros else)
                        if 0 <= row < g.height and (tile_w < g.out_w or 0 <= col < g.width):
                            want.add((hh * tile_w + ww, a * g.kw + b))
        assert run == want, i


def test_refused_where_middle_row_tiles_read_padding_or_tiles_have_edges():
    hw = HwConfig.resolve("pynq_1x16")
    layer = Conv2D(1, 32, 8, 8, 32, 5, 5, 1, 2)  # pad 2: the second of 1-row tiles reads the top padding too
    assert not pad_rows_kernel(geometry(layer, hw), 1, 8, 1, 1).ok
    space = get_space(layer, hw, "vta")
    idx, _ = _row_tiles(space)
    base = {**space.get(int(idx[0])).knobs, "uop_fold": 0, "pad_skip": 1}
    for knobs in ({**base, "tile_h": [8, 1], "tile_w": [1, 8]},
                  {**base, "tile_h": [3, 3]}):  # an edge tile: 3 does not divide 8
        assert "pad_skip_tile" in [name for name, _ in space.violations(knobs)], knobs


def test_two_passes_agree_with_row_tile_pad_skip(two_pass_agrees, vta_case):
    space = vta_case(LAYERS[0]).space
    assert two_pass_agrees(space, n=150) > 0
    assert _row_tiles(space)[0].size > 0


#: the best schedules without pad_skip last session's latency_gap found (/tmp/gap_final.json, main 3b518a5)
BEST_56 = {"tile_b": [1, 1], "tile_h": [8, 7], "tile_w": [1, 56], "tile_ci": [4, 1], "tile_co": [2, 2], "order": 0,
           "wgt_stationary": 0, "vthread": 1, "uop_fold": 10, "inp_stationary": 0, "acc_resident": 0, "pad_skip": 0,
           "n_threads": 2, "uop_lift": 0}
BEST_28 = {"tile_b": [1, 1], "tile_h": [4, 7], "tile_w": [1, 28], "tile_ci": [8, 1], "tile_co": [4, 2], "order": 2,
           "wgt_stationary": 0, "vthread": 1, "uop_fold": 11, "inp_stationary": 0, "acc_resident": 0, "pad_skip": 0,
           "n_threads": 2, "uop_lift": 0}


@pytest.mark.parametrize("layer,best", [(Conv2D(1, 64, 56, 56, 64, 3, 3, 1, 1), BEST_56),
                                        (Conv2D(1, 128, 28, 28, 128, 3, 3, 1, 1), BEST_28)],
                         ids=("56x56", "28x28"))
def test_resnet18_row_tiles_with_pad_skip_beat_the_best_without(layer, best):
    """ResNet-18's 56x56 and 28x28 3x3 convs on stock 1x16 (issue 19's time): the best schedule
    without pad_skip, whole-width row tiles of 7 rows, is beaten by its pad_skip twin (pad_skip = 1,
    the kernel's own fold), whose kernel skips the 2 of 58 (30) columns' taps and the border rows'."""
    hw = HwConfig.resolve("pynq_1x16")
    g = geometry(layer, hw)
    pr = pad_rows_kernel(g, 7, g.out_w, 2, 2)
    assert pr.ok and not pr.hazard
    assert pr.kernel.size == 7 * (3 * g.out_w - 2) * 3 and pr.top == pr.bottom == 3 * g.out_w - 2
    space = get_space(layer, hw, "vta")
    twin = {**best, "pad_skip": 1, "uop_fold": 0}
    assert space.why_invalid(best) is None and space.why_invalid(twin) is None
    assert measure(layer, space.from_knobs(twin), hw).cycles < measure(layer, space.from_knobs(best), hw).cycles
