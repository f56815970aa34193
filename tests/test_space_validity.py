"""Validity rules (docs/vta.md §7.4): the vectorized `valid_indices` against an independent,
loop-by-loop Python checker that enumerates every micro-op kernel explicitly; named messages."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from codesign.hw.config import HwConfig
from codesign.schedule import ScheduleSpace, partition
from codesign.workloads import Conv2D, Dense, get_workload, parse_layer

HW1 = HwConfig()
HW4 = HwConfig.from_name("pynq_4x8_i8w8a32_15_16_16_18")
TINY = HwConfig().with_(LOG_UOP_BUFF_SIZE=8, LOG_ACC_BUFF_SIZE=14)  # uop depth 64, acc depth 256


def fold_2d(dims):
    """Scalar port of ir_pass._fold_buffer_dim + _get_2d_pattern: at most (y, x) after merging."""
    groups = []  # [size, stride], innermost first
    for extent, stride in reversed([d for d in dims if d[0] > 1]):
        if groups and stride == groups[-1][0] * groups[-1][1]:
            groups[-1][0] *= extent
        else:
            groups.append([extent, stride])
    if groups and groups[0][1] != 1:
        groups.insert(0, [1, 1])
    return len(groups) <= 2, groups


def pattern(dims):
    """(y_size, x_size, x_stride) of a foldable region."""
    ok, groups = fold_2d(dims)
    assert ok
    if not groups:
        return (1, 1, 1)
    if len(groups) == 1:
        return (1, groups[0][0], groups[0][0])
    return (groups[1][0], groups[0][0], groups[1][1])


def store_dims(layer, hw, t):
    co = (layer.out_channels if isinstance(layer, Conv2D) else layer.out_features) // hw.block_out
    oh, ow = (layer.out_height, layer.out_width) if isinstance(layer, Conv2D) else (1, 1)
    return [(t["tile_b"], co * oh * ow), (t["tile_co"], oh * ow), (t["tile_h"], ow), (t["tile_w"], 1)]


def kernel_dsts(loops):
    """Explicit fold_uop_loop: drop extent-1 loops, fold the two outermost, unroll the rest and
    return the dst index of every uop in push order."""
    live = [lp for lp in loops if lp[1] > 1]
    unrolled = live[2:]
    if not unrolled:
        return [0]
    return [sum(i * lp[2] for i, lp in zip(idx, unrolled))
            for idx in itertools.product(*[range(lp[1]) for lp in unrolled])]


def brute_valid(layer, hw, knobs):
    conv = isinstance(layer, Conv2D)
    if conv:
        H, W, KH, KW, s, p = layer.height, layer.width, layer.kernel_h, layer.kernel_w, layer.stride, layer.padding
        OH, OW = layer.out_height, layer.out_width
        CI, CO = layer.in_channels // hw.block_in, layer.out_channels // hw.block_out
        th, tw, hn = knobs["tile_h"][1], knobs["tile_w"][1], knobs["h_nthread"]
    else:
        H = W = KH = KW = s = OH = OW = 1
        p = 0
        CI, CO = layer.in_features // hw.block_in, layer.out_features // hw.block_out
        th = tw = hn = 1
    tb, tci, tco, on = knobs["tile_b"][1], knobs["tile_ci"][1], knobs["tile_co"][1], knobs["oc_nthread"]
    nthr = on * hn
    hin, win = (th - 1) * s + KH, (tw - 1) * s + KW
    if tb * tco * th * tw * nthr > hw.acc_depth:
        return "sram_acc"
    if tb * tci * hin * win * nthr > hw.inp_depth:
        return "sram_inp"
    if tco * tci * KH * KW * nthr > hw.wgt_depth:
        return "sram_wgt"
    store_ok, store = fold_2d([(tb, CO * OH * OW), (tco, OH * OW), (th, OW), (tw, 1)])
    if not store_ok:
        return "dma_store"
    if p == 0:
        inp_ok, inp = fold_2d([(tb, CI * H * W), (tci, H * W), (hin, W), (win, 1)])
        if not inp_ok:
            return "dma_inp"
    if p > 0 and (tci != 1 or tb != 1):
        return "pad"
    # (name, extent, dst factor): docs/vta.md §7.3 loop order and acc layout co*th*tw + h*tw + w
    gemm = [("k_o.inner", tci, 0), ("w", tw, 1), ("dj", KW, 0), ("di", KH, 0), ("co", tco, th * tw), ("h", th, tw)]
    reset = [("w", tw, 1), ("co", tco, th * tw), ("h", th, tw)]
    dsts = kernel_dsts(gemm)
    if max(len(dsts), len(kernel_dsts(reset))) > hw.uop_depth:
        return "uop_capacity"
    live = [lp[1] for lp in gemm if lp[1] > 1][:2] + [lp[1] for lp in reset if lp[1] > 1][:2]
    if max(live + [tb * tco * th * tw]) > 16383:
        return "field_iter"
    for seq in (dsts, kernel_dsts(reset)):
        for i in range(1, len(seq)):
            if seq[i] == seq[i - 1] or (i >= 2 and seq[i] == seq[i - 2]):
                return "uop_hazard"
    if (CO // tco) % on or (OH // th) % hn:
        return "vthread"
    if on * hn > 2:
        return "vthread_max"
    return None


LAYERS = [
    ("conv2d:1,32,8,8,48,3,3,1,1", HW1),
    ("conv2d:1,64,6,6,32,1,1,1,0", HW1),
    ("conv2d:2,32,9,9,32,3,3,2,1", HW1),
    ("conv2d:2,64,12,12,64,1,1,2,0", HW1),
    ("conv2d:1,32,10,10,32,1,3,1,0", HW1),
    ("conv2d:4,32,8,8,32,3,3,1,1", HW4),
    ("conv2d:8,16,8,8,16,1,1,1,0", HW4),
    ("dense:4,64,96", HW1),
    ("dense:8,64,32", HW4),
    ("conv2d:1,64,56,56,64,3,3,1,1", HW1),
    ("conv2d:1,128,28,28,256,1,1,2,0", HW1),
    ("conv2d:1,64,16,16,64,3,3,1,1", TINY),
    ("dense:16,256,256", TINY),
]


@pytest.mark.parametrize("spec, hw", LAYERS, ids=[f"{s}@{h.bitstream[:4]}" for s, h in LAYERS])
def test_valid_indices_match_brute_force(spec, hw):
    layer = parse_layer(spec)
    sp = ScheduleSpace(layer, hw)
    brute = np.array([brute_valid(layer, hw, sp.get(i).knobs) is None for i in range(sp.size)])
    assert np.array_equal(np.flatnonzero(brute), sp.valid_indices())
    assert 0 < len(sp.valid_indices()) < sp.size or spec.startswith("dense")
    # DMA shapes of valid configs equal the scalar folding
    for i in sp.valid_indices()[::5]:
        cfg, t = sp.get(int(i)), sp.mapping_batch(np.array([i])).row(0)
        assert (t["store_y_size"], t["store_x_size"], t["store_x_stride"]) == pattern(store_dims(layer, hw, t)), cfg
    # the scalar path names a rule exactly for the invalid ones
    for i in range(0, sp.size, max(1, sp.size // 97)):
        assert (sp.why_invalid(i) is None) == bool(brute[i])


def test_resnet18_valid_counts():
    """Regression numbers (this implementation) for every ResNet-18 layer on both configs."""
    expect = {
        # in from_torch's graph order (a stage's 3x3 s2, 3x3 s1, then the 1x1 s2 projection)
        "pynq_1x16_i8w8a32_15_15_18_17": [182, 138, 147, 315, 103, 103, 295, 40, 40, 132],
        "pynq_4x8_i8w8a32_15_16_16_18": [217, 167, 176, 464, 121, 121, 417, 46, 46, 176],
    }
    for hw in (HW1, HW4):
        wl = get_workload("resnet18").for_hw(hw)
        convs = [layer for layer, _ in partition(wl, hw)[0] if isinstance(layer, Conv2D)]
        counts = [ScheduleSpace(layer, hw).n_valid for layer in convs]
        assert counts == expect[hw.name]


def first_rule(layer, hw, **knobs):
    sp = ScheduleSpace(layer, hw)
    base = {k.name: (list(k.candidates[0]) if k.kind == "sp" else 1) for k in sp.knobs}
    for name, value in knobs.items():
        base[name] = [-1, value] if name.startswith("tile") else value
    return sp.why_invalid(sp.from_knobs(base))


def test_messages_name_the_rule_and_numbers():
    c = Conv2D(1, 64, 56, 56, 64, 3, 3, 1, 1)
    assert first_rule(c, HW1, tile_h=56, tile_w=56) == \
        "SRAM capacity: acc tile 3136 elements x 1 thread(s) = 3136 > ACC depth 2048"
    assert first_rule(c, HW1, tile_h=14, tile_w=56, tile_co=2, oc_nthread=2) == \
        "SRAM capacity: acc tile 1568 elements x 2 thread(s) = 3136 > ACC depth 2048"
    assert first_rule(c, HW1, tile_h=8, tile_w=28, tile_co=2).startswith("2-D DMA pattern: the STORE")
    assert first_rule(c, HW1, tile_ci=2).startswith("padding: a padded conv (pad=1) needs tile_ci[1]=1, got 2")
    assert first_rule(c, HW1, tile_h=1, tile_w=8).startswith("uop dst hazard")
    assert first_rule(c, HW1, tile_h=2, tile_w=8).startswith("uop dst hazard")
    assert first_rule(c, HW1, tile_h=4, tile_w=8) is None
    assert first_rule(c, HW1, tile_h=4, tile_w=56, tile_co=4, oc_nthread=2) == (
        "virtual-thread divisibility: 1 co tile(s) (co 4 / tile_co 4) not divisible by oc_nthread=2")
    assert first_rule(c, HW1, tile_h=56, tile_w=4, tile_co=1, h_nthread=2).startswith(
        "virtual-thread divisibility: 1 h tile(s)")
    unpadded = Conv2D(1, 64, 56, 56, 64, 1, 1, 1, 0)
    assert first_rule(unpadded, HW1, tile_h=4, tile_w=8, tile_ci=2).startswith("2-D DMA pattern: the INP load")
    assert first_rule(unpadded, HW1, tile_h=4, tile_w=56, tile_ci=2) is None
    big = Conv2D(1, 64, 32, 32, 64, 3, 3, 1, 1)
    assert first_rule(big, TINY, tile_h=32, tile_w=2, tile_co=4) == (
        "uop capacity: the GEMM kernel unrolls 384 micro-ops > UOP depth 64")


def test_dma_edge_cases_follow_tvm_folding():
    # tile_h = tile_w = 1 with several co blocks stores co1 single elements at stride OH*OW: a
    # valid (y, x=1) pattern, although docs/vta.md §7.4.2's shorthand formula would reject it.
    c = Conv2D(1, 16, 8, 8, 64, 1, 1, 1, 0)
    assert first_rule(c, HW1, tile_h=1, tile_w=1, tile_co=4) is None
    # a 1-wide input window with several ci blocks and 1 < hin_t < H needs 3 dims -> rejected
    assert first_rule(Conv2D(1, 32, 8, 8, 16, 1, 1, 1, 0), HW1, tile_h=4, tile_w=1, tile_ci=2).startswith(
        "2-D DMA pattern: the INP load")


def test_valid_indices_fast_path_on_a_large_space():
    layer = Conv2D(1, 1024, 720, 720, 1024, 3, 3, 1, 1)
    sp = ScheduleSpace(layer, HW1)
    assert sp.size == 1 * 30 * 30 * 7 * 7 * 2 * 2  # 176400 configs
    valid = sp.valid_indices()
    assert valid.dtype == np.int64 and np.all(np.diff(valid) > 0)
    rng = np.random.default_rng(0)
    for i in rng.choice(sp.size, 40, replace=False):
        assert (sp.why_invalid(int(i)) is None) == (int(i) in set(valid.tolist()))
    dense = ScheduleSpace(Dense(1024, 4096, 4096), HW1)
    assert dense.size == 11 * 9 * 9 * 2
    assert len(dense.valid_indices()) > 0


def test_hazard_closed_form_against_enumeration():
    """The closed-form dst-hazard rule of MappingBatch._fold equals explicit enumeration of the
    unrolled kernel for arbitrary loop extents and dst factors (including 0 and negative)."""
    from codesign.mapping import MappingBatch

    rng = np.random.default_rng(11)
    n, L = 3000, 5
    ext = rng.integers(1, 5, (n, L))
    dst = rng.integers(-4, 5, (n, L))
    loops = np.stack([ext, dst, np.zeros_like(ext), np.zeros_like(ext)], axis=-1)
    fold = MappingBatch._fold(loops)
    for i in range(n):
        seq = kernel_dsts([("l", int(e), int(d)) for e, d in zip(ext[i], dst[i])])
        bad = any(seq[j] == seq[j - 1] or (j >= 2 and seq[j] == seq[j - 2]) for j in range(1, len(seq)))
        assert bool(fold["hazard"][i]) == bad, (ext[i], dst[i])
        assert fold["n_uops"][i] == len(seq)
        live = [int(e) for e in ext[i] if e > 1]
        assert (fold["iter_out"][i], fold["iter_in"][i]) == ((live + [1, 1])[0], (live + [1, 1])[1])
