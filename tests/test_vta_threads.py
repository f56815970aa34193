"""The `vta` family's thread count (`n_threads`: more than two virtual threads, a ring of T SRAM
slots ordered by the emitter's tokens) and micro-op loop lifting (`uop_lift`: a GEMM kernel loop
as separate GEMM instructions): every value is bit-exact against NumPy, race-free
(`simulate(check=True)`) and its block-form cycles equal the full program's, on both stock
configs; the rules that bound them are named; records without the new knobs keep their program."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from codesign.errors import InvalidSchedule
from codesign.evaluate.compiler import compile_insns
from codesign.mapping.batch import GEMM_LOOPS
from codesign.mapping.edges import edge_bits
from codesign.schedule import get_space
from codesign.schedule.families import mapping_for
from codesign.schedule.vta_space import LIFTS, N_FEATURES, THREAD_COUNTS, VTHREADS
from codesign.vta import isa
from codesign.vta.simulator import check_races
from codesign.workloads import Conv2D, Dense

# Extents with a factor 3 (12 rows, 6 output pixels, 3 or 6 channel blocks) so that T = 3 has tile
# counts it divides; powers of two for T = 4 and 8.
LAYERS = (Conv2D(4, 32, 12, 12, 32, 3, 3, 1, 1),   # padded 3x3
          Conv2D(4, 32, 12, 12, 48, 3, 3, 2, 1),   # strided padded 3x3
          Conv2D(4, 64, 8, 8, 48, 1, 1, 1, 0),     # 1x1
          Dense(4, 64, 96))
NEW_VALUES = [("n_threads", v) for v in THREAD_COUNTS[1:]] + [("uop_lift", v) for v in range(1, len(GEMM_LOOPS) + 1)]
PAIR_LIFTS = [v for v in range(len(LIFTS)) if len(LIFTS[v]) == 2]


class _Cols:
    """The knob columns the tests select on, of configs `indices`, built in chunks (a batch of every
    valid config of a 12x12 conv holds ~1 GB)."""

    def __init__(self, space, indices: np.ndarray) -> None:
        parts = []
        for s in range(0, len(indices), 1 << 13):
            b = space.batch(indices[s:s + (1 << 13)])
            parts.append(np.stack([b.nt, b.lift, b.acc, b.ws, b.ins, edge_bits(b.t)]))
        cols = np.concatenate(parts, axis=1)
        self.nt, self.lift, self.acc, self.ws, self.ins, self.edge = cols


def test_every_new_knob_value_is_bit_exact_race_free_and_block_timing_is_exact(stock_hw, vta_case):
    """For each new value and layer, a random valid config: from 4,096 drawn uniformly by the
    space's sampler where there are many more (listing 10^6 valid configs costs ~20 s on pynq_4x8),
    else from all of them."""
    covered = set()
    rng = np.random.default_rng(0)
    for layer in LAYERS:
        case = vta_case(layer, stock_hw)
        space = case.space
        many = space.valid_estimate() > 1 << 14
        valid = np.sort(space.sample_valid(1 << 12, np.random.default_rng(1))) if many else space.valid_indices()
        b = _Cols(space, valid)
        for name, value in NEW_VALUES:
            hits = np.flatnonzero(b.nt == value if name == "n_threads" else b.lift == value)
            if not hits.size:
                continue
            covered.add((name, value))
            config = space.get(int(valid[rng.choice(hits)]))
            assert config.knobs[name] == value
            case.check(config, run_layer=True)
    assert covered == set(NEW_VALUES)  # every value is reached by some layer


def test_four_threads_run_as_a_ring_of_four_slots(vta_case):
    """T = 4 on the co axis: four INP/WGT/ACC slices, each load group waits for the GEMM that
    read its slot four groups earlier; dropping one of those waits is a race the check finds."""
    case = vta_case(Conv2D(1, 32, 8, 8, 64, 3, 3, 1, 1))
    layer, hw = case.layer, case.hw
    knobs = {"tile_b": [1, 1], "tile_h": [2, 4], "tile_w": [1, 8], "tile_ci": [2, 1], "tile_co": [4, 1],
             "order": 0, "wgt_stationary": 0, "vthread": VTHREADS.index("co"), "uop_fold": 0, "n_threads": 4,
             "uop_lift": 0}
    config = case.config(knobs)
    m = mapping_for(layer, config, hw)
    assert m.n_threads == 4 and m.vthreads[0].extent == 4 and (m.n_pairs, m.n_steps) == (2, 2)
    prog, _ = case.check(config, run_layer=True)
    insns = prog.insns
    c = isa.COL
    loads = np.flatnonzero((insns[:, c["opcode"]] == isa.OP_LOAD) & (insns[:, c["memory_type"]] == isa.MEM_INP)
                           & (insns[:, c["x_size"]] > 0))
    bases = insns[loads, c["sram_base"]]
    assert sorted(set(bases.tolist())) == [t * m.tile.inp_sram for t in range(4)]  # four slots
    assert not insns[loads[:4], c["pop_next_dep"]].any() and insns[loads[4:], c["pop_next_dep"]].all()
    broken = insns.copy()
    broken[loads[5], c["pop_next_dep"]] = 0  # slot 1's second load no longer waits for its GEMM
    assert check_races(prog) == []
    races = check_races(replace(prog, insns=broken))
    assert races and "unsynchronized INP SRAM row" in races[0]


def test_thread_rules_are_named(vta_case):
    case = vta_case(Conv2D(1, 32, 8, 8, 32, 3, 3, 1, 1))
    layer, hw, space = case.layer, case.hw, case.space
    base = {"tile_b": [1, 1], "tile_h": [2, 4], "tile_w": [1, 8], "tile_ci": [2, 1], "tile_co": [1, 2],
            "order": 0, "wgt_stationary": 0, "vthread": VTHREADS.index("h"), "uop_fold": 0, "n_threads": 2,
            "uop_lift": 0}
    assert space.why_invalid(base) is None
    cases = {"vthread_div": {"n_threads": 3},                  # 2 h tiles
             "vthread_count": {"vthread": 0, "n_threads": 4}}  # no thread axis
    for rule, change in cases.items():
        why = space.why_invalid({**base, **change})
        assert why is not None and why.startswith(f"{rule}: "), (rule, why)
    assert space.why_invalid({**base, "tile_h": [4, 2], "n_threads": 4}) is None
    big = get_space(Conv2D(1, 32, 32, 32, 32, 3, 3, 1, 1), hw, "vta")  # 8 threads x 2 x 6 x 34 INP elements
    why = big.why_invalid({**base, "tile_h": [8, 4], "tile_w": [1, 32], "tile_ci": [1, 2], "n_threads": 8})
    assert why.startswith("sram_inp: SRAM capacity: inp tile 408 elements x 8 thread(s) = 3264 > INP depth 2048")
    with pytest.raises(InvalidSchedule, match="^vthread_count: "):
        mapping_for(layer, {**base, "vthread": 0, "n_threads": 4}, hw)


def test_lifting_a_loop_makes_one_gemm_per_iteration_with_its_own_kernel(vta_case):
    case = vta_case(Conv2D(1, 32, 8, 8, 32, 3, 3, 1, 1))
    layer, hw, space = case.layer, case.hw, case.space
    tiles = {"tile_b": [1, 1], "tile_h": [4, 2], "tile_w": [1, 8], "tile_ci": [1, 2], "tile_co": [1, 2],
             "order": 0, "wgt_stationary": 0, "vthread": 0, "uop_fold": 0, "n_threads": 2}
    ext = {"k_o.inner": 2, "w": 8, "dj": 3, "di": 3, "co": 2, "h": 2}  # the tile's GEMM loops
    whole = mapping_for(layer, {**tiles, "uop_lift": 0}, hw)
    n_gemm = {}
    lifts = [k for k in range(1, len(GEMM_LOOPS) + 1) if space.why_invalid({**tiles, "uop_lift": k}) is None]
    assert len(lifts) >= 4
    for lift in lifts:
        name = GEMM_LOOPS[lift - 1]
        m = mapping_for(layer, {**tiles, "uop_lift": lift}, hw)
        assert m.n_lift == ext[name] and m.gemm_lift[0][0] == ext[name]
        assert m.gemm.size * m.gemm.iter_out * m.gemm.iter_in * m.n_lift == (
            whole.gemm.size * whole.gemm.iter_out * whole.gemm.iter_in)  # the same micro-op executions
        insns = compile_insns(layer, {**tiles, "uop_lift": lift}, hw).insns
        gemm = (insns[:, isa.COL["opcode"]] == isa.OP_GEMM) & (insns[:, isa.COL["reset_reg"]] == 0)
        n_gemm[name] = int(gemm.sum())
        assert n_gemm[name] == ext[name] * whole.n_pairs * whole.n_steps
    for lift in lifts[:2]:
        case.check(space.from_knobs({**tiles, "uop_lift": lift}), run_layer=True)
    one = tiles | {"tile_w": [8, 1]}  # w has extent 1: nothing to lift
    bad = dict(space.violations({**one, "uop_lift": GEMM_LOOPS.index("w") + 1}))
    assert bad["uop_lift_live"].startswith("micro-op lift: GEMM loops ['w'] need extent > 1 each")


def test_lifting_admits_kernels_the_whole_kernel_rules_refuse(vta_case):
    """Fails before uop_lift. (1) A chosen fold (dj, di) of a 4x8 3x3 tile whose other loops
    unroll to 8 x 14 x 8 x 14 = 12544 micro-ops > the 8192-entry buffer: with k_o.inner lifted,
    8 GEMMs per step of 1568 micro-ops each. (2) A fold whose stream has dj (dst factor 0) right
    inside a short kernel writes an ACC row twice in a row (docs/vta.md §3.9): with dj lifted,
    each instruction's stream is hazard-free. Both run bit-exact and race-free."""
    case = vta_case(Conv2D(4, 64, 14, 14, 64, 3, 3, 1, 1), "pynq_4x8")
    layer, hw, space = case.layer, case.hw, case.space
    knobs = {"tile_b": [1, 1], "tile_h": [1, 14], "tile_w": [1, 14], "tile_ci": [1, 8], "tile_co": [1, 8],
             "order": 0, "wgt_stationary": 0, "vthread": 0, "uop_fold": 10, "n_threads": 2}
    assert space.why_invalid({**knobs, "uop_lift": 0}).startswith("uop_capacity: ")
    config = case.config({**knobs, "uop_lift": GEMM_LOOPS.index("k_o.inner") + 1})
    m = mapping_for(layer, config, hw)
    assert (m.n_lift, m.gemm.size) == (8, 1568)
    case.check(config, run_layer=True)

    case = vta_case(Conv2D(1, 32, 8, 8, 32, 3, 3, 1, 1))
    layer, hw, space = case.layer, case.hw, case.space
    knobs = {"tile_b": [1, 1], "tile_h": [4, 2], "tile_w": [4, 2], "tile_ci": [1, 2], "tile_co": [2, 1],
             "order": 0, "wgt_stationary": 0, "vthread": 0, "uop_fold": 3, "n_threads": 2}
    assert space.why_invalid({**knobs, "uop_lift": 0}).startswith("uop_hazard: ")
    config = case.config({**knobs, "uop_lift": GEMM_LOOPS.index("dj") + 1})
    case.check(config, run_layer=True)


def test_records_without_the_new_knobs_keep_their_program_and_features_stay_fixed_length(vta_case):
    space = vta_case(Conv2D(1, 32, 8, 8, 32, 3, 3, 1, 1)).space
    old = {"tile_b": [1, 1], "tile_h": [2, 4], "tile_w": [1, 8], "tile_ci": [2, 1], "tile_co": [1, 2],
           "order": 0, "wgt_stationary": 0, "vthread": VTHREADS.index("h"), "uop_fold": 0}
    config = space.from_knobs(old)
    assert config.knobs["n_threads"] == THREAD_COUNTS[0] and config.knobs["uop_lift"] == 0
    valid = np.random.default_rng(0).permutation(space.valid_indices())[:8000]
    feats = space.features_batch(valid)
    assert feats.shape == (len(valid), N_FEATURES) and np.isfinite(feats).all()
    assert len(set(np.round(feats[:, -1], 3).tolist())) > 1 and len(set(_Cols(space, valid).nt.tolist())) > 2


# Threads and lifted loops with the other knobs: ACC slots (acc_resident: C slots per thread, C x T
# in all), edge tiles (odd thread counts: an edge size makes a tile count T divides, e.g. 7 rows in
# 3 tiles of 3 + 3 + 1, one per thread; the last thread runs the edge tile), stationary operands.
COMBO_LAYERS = (Conv2D(1, 32, 8, 8, 64, 3, 3, 1, 1),   # ACC slots: 4 co x 8 rows
                Conv2D(1, 32, 7, 7, 48, 3, 3, 1, 1),   # edges on h, w (7) and co (3 blocks)
                Conv2D(1, 48, 9, 9, 32, 1, 1, 2, 0))   # strided 1x1: h, w, ci edges
COMBOS = {
    "threads x acc_resident": lambda b, e: (b.nt > 2) & (b.acc > 0),
    "acc_resident x edge tiles": lambda b, e: (b.acc > 0) & (e > 0),
    "acc_resident 2 x threads x edge tiles": lambda b, e: (b.acc == 2) & (b.nt > 1) & (e > 0),
    "two lifted loops": lambda b, e: np.isin(b.lift, PAIR_LIFTS),
    "two lifted loops x acc_resident": lambda b, e: np.isin(b.lift, PAIR_LIFTS) & (b.acc > 0),
    "lift x acc_resident": lambda b, e: (b.lift > 0) & (b.acc > 0),
    "odd threads x edge tiles": lambda b, e: (b.nt % 2 == 1) & (e > 0),
    "threads x edge tiles": lambda b, e: (b.nt > 2) & (e > 0),
    "threads x stationary": lambda b, e: (b.nt > 2) & ((b.ws > 0) | (b.ins > 0)),
}


def test_threads_and_lifts_with_acc_slots_edge_tiles_and_residency_are_bit_exact(stock_hw, vta_case):
    """Fails before: more than two threads and edge tiles were refused together (rule
    edge_threads_lift), ACC slots and edge tiles too (rule nest_edge), no config lifted two loops,
    and neither knob existed beside the residency nests. Two configs of each combination (the
    first valid and a random one) on both stock configs."""
    rng = np.random.default_rng(1)
    covered = set()
    for layer in COMBO_LAYERS:
        case = vta_case(layer, stock_hw)
        space = case.space
        valid = space.valid_indices()
        b = _Cols(space, valid)
        bits = b.edge
        for name, want in COMBOS.items():
            hits = np.flatnonzero(want(b, bits))
            if not hits.size:
                continue
            covered.add(name)
            for r in dict.fromkeys([int(hits[0]), int(rng.choice(hits))]):
                case.check(space.get(int(valid[r])), run_layer=True)
    assert covered == set(COMBOS)


def test_threads_times_acc_slots_store_from_c_times_t_slices(vta_case):
    """T = 4 threads on co, acc_resident = 1 (the 2 h tiles inside the reduction): each thread
    keeps 2 ACC slots, 8 in all, each stored once from its own ACC rows."""
    case = vta_case(Conv2D(1, 32, 8, 8, 64, 3, 3, 1, 1))
    layer, hw = case.layer, case.hw
    config = case.config({"tile_b": [1, 1], "tile_h": [2, 4], "tile_w": [1, 8], "tile_ci": [2, 1],
                          "tile_co": [4, 1], "order": 0, "wgt_stationary": 0, "vthread": VTHREADS.index("co"),
                          "uop_fold": 0, "inp_stationary": 0, "acc_resident": 1, "n_threads": 4, "uop_lift": 0})
    m = mapping_for(layer, config, hw)
    assert (m.n_threads, m.n_inner, m.n_pairs) == (4, 2, 1)
    case.check(config, run_layer=True)
    insns = compile_insns(layer, config, hw).insns
    c = isa.COL
    stores = insns[insns[:, c["opcode"]] == isa.OP_STORE]
    assert sorted(stores[:, c["sram_base"]].tolist()) == [s * m.tile.acc_sram for s in range(8)]


def test_a_lifted_loop_is_refused_on_edge_tiles_by_name(vta_case):
    case = vta_case(Conv2D(1, 32, 7, 7, 48, 3, 3, 1, 1))
    layer, hw, space = case.layer, case.hw, case.space
    knobs = {"tile_b": [1, 1], "tile_h": [3, 3], "tile_w": [1, 7], "tile_ci": [1, 2], "tile_co": [1, 3],
             "order": 0, "wgt_stationary": 0, "vthread": VTHREADS.index("h"), "uop_fold": 0, "n_threads": 3}
    assert space.why_invalid({**knobs, "uop_lift": 0}) is None  # 3 threads, one h tile each, the last of 1 row
    why = space.why_invalid({**knobs, "uop_lift": GEMM_LOOPS.index("w") + 1})
    assert why is not None and why.startswith("uop_lift_edge: "), why
    with pytest.raises(InvalidSchedule, match="^uop_lift_edge: "):
        mapping_for(layer, {**knobs, "uop_lift": GEMM_LOOPS.index("w") + 1}, hw)


def test_acc_slots_on_edge_tiles_store_each_slot_with_its_own_variant(vta_case):
    """Fails before (nest_edge refused it): 7 rows in tiles of 2 (2 + 2 + 2 + 1), the 4 h tiles
    inside the reduction (acc_resident = 1): 4 ACC slots, the last holding a 1-row edge tile; every
    output element is stored once, from its slot, with the slot's own size."""
    case = vta_case(Conv2D(1, 32, 7, 7, 48, 3, 3, 1, 1))
    layer, hw, space = case.layer, case.hw, case.space
    knobs = {"tile_b": [1, 1], "tile_h": [4, 2], "tile_w": [1, 7], "tile_ci": [2, 1], "tile_co": [1, 3],
             "order": 0, "wgt_stationary": 0, "vthread": 0, "uop_fold": 0, "inp_stationary": 0, "acc_resident": 1,
             "n_threads": 2, "uop_lift": 0}
    config = case.config(knobs)
    m = mapping_for(layer, config, hw)
    assert m.n_inner == 4 and m.edges is not None and m.inner_loops[0].axis == "h"
    case.check(config, run_layer=True)
    insns = compile_insns(layer, config, hw).insns
    c = isa.COL
    st = insns[insns[:, c["opcode"]] == isa.OP_STORE]
    assert sorted(set(st[:, c["sram_base"]].tolist())) == [s * m.tile.acc_sram for s in range(4)]
    # each slot stores its tile: 2 rows x 7 pixels x 3 channel blocks, the edge slot 1 row
    sizes = (st[:, c["y_size"]] * st[:, c["x_size"]]).tolist()
    assert sorted(sizes) == [21, 42, 42, 42]
    assert space.why_invalid({**knobs, "inp_stationary": 1, "acc_resident": 0}).split(":")[0] in {
        "nest_edge", "inp_stationary_ci", "inp_stationary_reuse"}


def test_two_lifted_loops_make_one_gemm_per_pair_of_iterations(vta_case):
    case = vta_case(Conv2D(1, 32, 8, 8, 32, 3, 3, 1, 1))
    layer, hw, space = case.layer, case.hw, case.space
    tiles = {"tile_b": [1, 1], "tile_h": [4, 2], "tile_w": [1, 8], "tile_ci": [1, 2], "tile_co": [1, 2],
             "order": 0, "wgt_stationary": 0, "vthread": 0, "uop_fold": 0, "n_threads": 2}
    whole = mapping_for(layer, {**tiles, "uop_lift": 0}, hw)
    lift = LIFTS.index((GEMM_LOOPS.index("dj"), GEMM_LOOPS.index("di")))
    config = case.config({**tiles, "uop_lift": lift})
    m = mapping_for(layer, config, hw)
    assert m.n_lift == 9 and [lp[0] for lp in m.gemm_lift] == [3, 3]
    assert m.gemm.size * m.gemm.iter_out * m.gemm.iter_in * 9 == whole.gemm.size * whole.gemm.iter_out * whole.gemm.iter_in
    insns = compile_insns(layer, config, hw).insns
    gemm = (insns[:, isa.COL["opcode"]] == isa.OP_GEMM) & (insns[:, isa.COL["reset_reg"]] == 0)
    assert int(gemm.sum()) == 9 * whole.n_pairs * whole.n_steps
    case.check(config, run_layer=True)
    one = tiles | {"tile_w": [8, 1]}  # w has extent 1: nothing to lift
    bad = dict(space.violations({**one, "uop_lift": LIFTS.index((GEMM_LOOPS.index("w"), GEMM_LOOPS.index("dj")))}))
    assert bad["uop_lift_live"].startswith("micro-op lift: GEMM loops ['w', 'dj'] need extent > 1 each")
