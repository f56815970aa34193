"""The `vta` family's residency nests (docs/schedules.md): `inp_stationary` (an input tile kept in
INP SRAM across the co loop) and `acc_resident` (tile loops inside the reduction, their partial
sums resident in ACC, one slot each). Every value on both stock configs over a padded 3x3, a
strided 3x3, a strided 1x1, a 512-channel 7x7 conv and a dense layer: bit-exact against NumPy,
race-free (`simulate(check=True)`), block-form cycles equal to `time_program`. The nests load
what they promise (INP once per reduction step across co tiles, WGT once per step across spatial
tiles, INP once across the co loop), nests whose partial sums do not fit ACC are refused by
`acc_spill` with the reason, and fused epilogues stay on one ACC slot per thread."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.errors import InvalidSchedule
from codesign.evaluate.compiler import compile_insns
from codesign.evaluate.fused import Epilogue, reference_fused, run_fused
from codesign.evaluate.run import measure
from codesign.mapping.legality import violations
from codesign.mapping.mapping import AluOp, fuse
from codesign.schedule import get_space
from codesign.schedule.families import mapping_for
from codesign.schedule.vta_space import EXTRA_FEATURE_NAMES, N_FEATURES, ORDERS
from codesign.vta import isa, timing
from codesign.workloads import Conv2D, Dense

LAYERS = (Conv2D(1, 32, 8, 8, 64, 3, 3, 1, 1),     # padded 3x3
          Conv2D(1, 32, 8, 8, 64, 3, 3, 2, 1),     # strided 3x3
          Conv2D(1, 64, 8, 8, 32, 1, 1, 2, 0),     # strided 1x1
          Conv2D(1, 512, 7, 7, 32, 3, 3, 1, 1),    # ResNet-18's 512-channel 7x7 input (fewer outputs: seconds)
          Dense(1, 64, 64))
NESTS = (("inp_stationary", 1), ("acc_resident", 1), ("acc_resident", 2))
BASE = {"tile_b": [1, 1], "wgt_stationary": 0, "vthread": 0, "uop_fold": 0, "inp_stationary": 0, "acc_resident": 0}


def _picks(space, knob: str, value: int, n: int = 2) -> list[int]:
    """The first and n - 1 random valid configs with `knob` = value (and threads, when some have)."""
    valid = space.valid_where(**{knob: value})  # the listing's configs with knob = value, in its order
    if not valid.size:
        return []
    hits = np.arange(valid.size)
    threaded = np.flatnonzero(space.batch(valid).vt > 0)
    rng = np.random.default_rng(value)
    rows = [hits[0], *(threaded[:1]), *rng.choice(hits, size=min(n - 1, hits.size), replace=False)]
    return [int(valid[r]) for r in dict.fromkeys(rows)]


def test_a_listing_restricted_to_knob_values_is_the_listing_of_those_values():
    """`VtaSpace.valid_where` (the staged passes over the fixed knobs' values only: what `_picks` and
    the pad_skip tests list) is exactly the whole listing's configs with those values, in its order,
    whether the space is unlisted, has its sampler's support built, or is listed; a knob or value the
    family lacks is refused in one line."""
    from codesign.errors import ConfigError
    from codesign.hw.config import HwConfig
    from codesign.schedule.vta_space import VtaSpace

    layer, hw = Conv2D(1, 16, 4, 4, 32, 3, 3, 1, 1), HwConfig.resolve("pynq_1x16")  # 7,554 valid
    listed = VtaSpace(layer, hw)
    full = listed.valid_indices()
    pos = listed.positions_of(full)
    value = {k.name: np.array([c[1] if k.kind == "sp" else c for c in k.candidates]) for k in listed.knobs}
    cases = ({"inp_stationary": 1}, {"acc_resident": (1, 2)}, {"pad_skip": 1, "tile_h": 4},
             {"tile_w": 2, "order": 5, "vthread": 2}, {"uop_fold": (0, 2), "n_threads": 2, "uop_lift": (0, 1, 9)}, {"wgt_stationary": 1})
    supported = VtaSpace(layer, hw)
    supported.sample_support()
    for fixed in cases:
        keep = np.all([np.isin(value[k][pos[:, listed.knob_names.index(k)]], v) for k, v in fixed.items()], axis=0)
        want = full[keep]
        assert want.size, fixed  # each case selects some configs
        for space in (VtaSpace(layer, hw), supported, listed):
            assert np.array_equal(space.valid_where(**fixed), want), fixed
    with pytest.raises(ConfigError, match="no knob tile_q"):
        listed.valid_where(tile_q=1)
    with pytest.raises(ConfigError, match="pad_skip=3 is no value"):
        listed.valid_where(pad_skip=3)


def _loads(insns: np.ndarray, mem: int) -> int:
    return int(((insns[:, isa.COL["opcode"]] == isa.OP_LOAD) & (insns[:, isa.COL["memory_type"]] == mem)
                & (insns[:, isa.COL["x_size"]] > 0)).sum())


@pytest.mark.parametrize("layer", LAYERS, ids=lambda ly: ly.name)
def test_every_nest_is_bit_exact_race_free_and_block_timing_is_exact(layer, stock_hw, vta_case):
    case = vta_case(layer, stock_hw)
    layer = case.layer
    seen = 0
    big = layer.macs > 10 ** 7  # the 7x7 layer: one config per nest keeps the simulator in seconds
    for knob, value in NESTS:
        for i in _picks(case.space, knob, value)[:1 if big else 2]:
            case.check(case.space.get(i))  # bit-exact, race-free, exactly timed
            seen += 1
    # acc_resident exists on every layer with two live tile loops; inp_stationary needs the whole
    # reduction in one INP tile, which the 512-channel 7x7 conv's padded input does not fit
    assert seen >= (2 if big else 3 if isinstance(layer, Dense) else 5)


def test_acc_resident_reuses_each_input_tile_across_the_co_tiles(vta_case):
    """(b, h | k | co): the reduction outside the co loop; the co tiles' partial sums stay in
    ACC, INP is loaded once per reduction step for all of them, WGT streams once."""
    case = vta_case(Conv2D(1, 64, 8, 8, 64, 3, 3, 1, 1))  # 4 ci blocks, 4 co blocks
    layer, hw = case.layer, case.hw
    tiles = {**BASE, "tile_h": [2, 4], "tile_w": [1, 8], "tile_ci": [2, 2], "tile_co": [4, 1], "order": 0}
    config = case.config({**tiles, "acc_resident": 1})  # w has one tile: co is innermost live
    plain = case.config(tiles)
    m = mapping_for(layer, config, hw)
    assert [lp.axis for lp in m.inner_loops] == ["co"] and m.n_inner == 4 and m.level("inp") == m.red
    insns, before = compile_insns(layer, config, hw).insns, compile_insns(layer, plain, hw).insns
    spatial, steps = 2, 2
    assert _loads(insns, isa.MEM_INP) == spatial * steps * 2        # two channel blocks per load, once per step
    assert _loads(before, isa.MEM_INP) == spatial * steps * 2 * 4  # reloaded for every co tile
    assert _loads(insns, isa.MEM_WGT) == _loads(before, isa.MEM_WGT) == spatial * steps * 4
    stores = insns[insns[:, isa.COL["opcode"]] == isa.OP_STORE]
    assert stores.shape[0] == spatial * 4  # one STORE per ACC slot, after the last reduction step
    case.check(config)


def test_acc_resident_reuses_each_weight_tile_across_the_spatial_tiles(vta_case):
    """(b, co, w | k | h): WGT loaded once per reduction step for the h tiles resident in ACC."""
    case = vta_case(Conv2D(1, 64, 8, 8, 32, 3, 3, 1, 1))
    layer, hw = case.layer, case.hw
    tiles = {**BASE, "tile_h": [4, 2], "tile_w": [1, 8], "tile_ci": [2, 2], "tile_co": [1, 2], "order": 0}
    config = case.config({**tiles, "acc_resident": 1})  # h is the only loop of 2+ tiles
    plain = case.config(tiles)
    m = mapping_for(layer, config, hw)
    assert [lp.axis for lp in m.inner_loops] == ["h"] and m.level("wgt") == m.red and m.n_inner == 4
    insns = compile_insns(layer, config, hw).insns
    assert _loads(insns, isa.MEM_WGT) == 2  # once per reduction step, not x 4 h tiles
    assert _loads(compile_insns(layer, plain, hw).insns, isa.MEM_WGT) == 2 * 4
    assert measure(layer, config, hw).cycles == timing.time_program(insns, hw).cycles


def test_inp_stationary_loads_each_input_tile_once(vta_case):
    case = vta_case(Conv2D(1, 32, 8, 8, 64, 3, 3, 1, 1))
    config = case.config({**BASE, "tile_h": [2, 4], "tile_w": [1, 8], "tile_ci": [1, 2], "tile_co": [4, 1], "order": 0,
                          "inp_stationary": 1})
    insns = compile_insns(case.layer, config, case.hw).insns
    assert _loads(insns, isa.MEM_INP) == 2 * 2  # two h tiles x two channel blocks, not x 4 co tiles
    assert _loads(insns, isa.MEM_WGT) == 2 * 4


def test_nests_are_refused_by_named_rules(vta_case):
    space = vta_case(Conv2D(1, 64, 56, 56, 64, 3, 3, 1, 1)).space
    # 56 rows x 4 co tiles of 1x56 pixels x 1 block inside the reduction: 12544 > 2048 ACC rows
    bad = dict(space.violations({**BASE, "tile_h": [56, 1], "tile_w": [1, 56], "tile_ci": [4, 1], "tile_co": [4, 1],
                                 "order": ORDERS.index(("b", "co", "h", "w")), "acc_resident": 2}))
    assert bad["acc_spill"].startswith("ACC spill: 224 resident output tiles x 56 elements") and "never ACC" in bad["acc_spill"]
    tiles = {"tile_h": [2, 4], "tile_w": [1, 8], "tile_ci": [1, 2], "tile_co": [4, 1]}
    sp = vta_case(Conv2D(1, 32, 8, 8, 64, 3, 3, 1, 1)).space
    cases = {
        "inp_stationary_ci": {**tiles, "tile_ci": [2, 1], "inp_stationary": 1, "order": 0},
        "inp_stationary_reuse": {**tiles, "order": ORDERS.index(("b", "co", "h", "w")), "inp_stationary": 1},
        "acc_resident_live": {**tiles, "tile_h": [1, 8], "order": 0, "acc_resident": 2},  # only co has 2+ tiles
        "acc_resident_stationary": {**tiles, "tile_h": [4, 2], "order": ORDERS.index(("co", "b", "h", "w")),
                                    "acc_resident": 1, "wgt_stationary": 1},
    }
    for rule, knobs in cases.items():
        assert rule in dict(sp.violations({**BASE, **knobs})), rule
    gsp = vta_case(Conv2D(1, 64, 6, 6, 64, 3, 3, 1, 1, groups=2)).space
    b = gsp.batch(gsp.valid_indices())
    assert not (b.ins == 1).any() and not b.inner[:, 2].any()  # no co reuse of a group's input tile


def test_fused_epilogues_stay_on_one_acc_slot_per_thread(vta_case):
    case = vta_case(Conv2D(1, 64, 8, 8, 64, 3, 3, 1, 1))
    layer, hw = case.layer, case.hw
    config = case.config({**BASE, "tile_h": [2, 4], "tile_w": [1, 8], "tile_ci": [2, 2], "tile_co": [4, 1], "order": 0,
                          "acc_resident": 1})
    m = fuse(mapping_for(layer, config, hw), (AluOp("add", src="bias"), AluOp("shr", 8), AluOp("min", 127),
                                              AluOp("max", 0)))
    assert [name for name, _ in violations(m, hw)] == ["fused_acc_resident"]
    small_case = vta_case(Conv2D(1, 32, 8, 8, 64, 3, 3, 1, 1))
    ins = small_case.config({**BASE, "tile_h": [2, 4], "tile_w": [1, 8], "tile_ci": [1, 2], "tile_co": [4, 1],
                             "order": 0, "inp_stationary": 1})
    small, (x, w) = small_case.layer, small_case.inputs
    rng = np.random.default_rng(3)
    bias = rng.integers(-2000, 2000, size=small.out_channels, dtype=np.int32)
    r = rng.integers(-128, 128, size=small.reference(x, w).shape, dtype=np.int8)
    with pytest.raises(InvalidSchedule, match="INP slice"):
        run_fused(small, ins, hw, Epilogue(8, residual=(1, 0, 1)), x, w, None, r)
    epi = Epilogue(8, bias=True)  # the bias lives in ACC: an input-stationary nest keeps it
    run = run_fused(small, ins, hw, epi, x, w, bias, check=True)
    assert np.array_equal(run.output, reference_fused(small, epi, x, w, bias))


def test_template_point_and_features_keep_their_shape(vta_case):
    case = vta_case(Conv2D(4, 32, 8, 8, 64, 3, 3, 1, 1), "pynq_4x8")
    layer, hw, space = case.layer, case.hw, case.space
    auto = get_space(layer, hw)
    point = space.from_template(auto.get(int(auto.valid_indices()[0])))
    assert point.knobs["inp_stationary"] == 0 and point.knobs["acc_resident"] == 0
    old = {k: v for k, v in point.knobs.items() if k not in ("inp_stationary", "acc_resident")}
    assert space.from_knobs(old) == point  # a record written before the nests keeps its program
    valid = space.valid_indices()
    feats = space.features_batch(valid)
    assert feats.shape == (len(valid), N_FEATURES) and np.isfinite(feats).all()
    acc = space.positions_of(valid)[:, space.knob_names.index("acc_resident")] > 0
    slots = feats[:, N_FEATURES - len(EXTRA_FEATURE_NAMES) + EXTRA_FEATURE_NAMES.index("log2_acc_slots")]
    assert (slots[~acc] == 0).all() and len(np.unique(slots[acc])) > 1  # log2 of the ACC slots varies
