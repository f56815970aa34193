"""Edge tiles in the `vta` family (codesign/mapping/edges.py, codesign/schedule/edge_rules.py): tile
sizes that do not divide their extent are points of the space; their programs (a smaller last
tile on h, w, co and a smaller last reduction step on ci, each variant with its own kernels)
are bit-exact against NumPy, race-free (`simulate(check=True)`), and their block-form timing
and instruction count equal the full program's."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.errors import ConfigError
from codesign.evaluate.blocks import compile_blocks
from codesign.evaluate.compiler import compile_insns
from codesign.evaluate.fused import Epilogue, fused_invalid, measure_fused, reference_fused, run_fused
from codesign.evaluate.run import run_layer
from codesign.hw.config import HwConfig
from codesign.mapping.edges import CI_BIT, edge_bits
from codesign.schedule import get_space
from codesign.schedule.knobs import get_factors
from codesign.schedule.vta_space import EXTRA_FEATURE_NAMES, N_FEATURES, VTHREADS, VtaSpace
from codesign.vta import isa
from codesign.workloads import Conv2D, Dense

LAYERS = (Conv2D(4, 32, 7, 7, 48, 3, 3, 1, 1),    # padded 3x3: h, w, co edges
          Conv2D(4, 48, 9, 9, 32, 1, 1, 2, 0),    # strided 1x1: h, w, ci edges
          Conv2D(4, 48, 11, 11, 32, 3, 3, 2, 1),  # strided padded 3x3
          Conv2D(4, 64, 10, 10, 64, 3, 3, 1, 1, groups=2),  # grouped: h, w edges
          Dense(4, 80, 48))                        # ci, co edges


def _edge_sample(space: VtaSpace, seed: int) -> list:
    """Valid configs with edge tiles: the first of each kind (a ci edge step, a co edge under threads
    on co, an h edge under threads on h, a w edge with a stationary weight tile), plus one random."""
    valid = space.valid_indices()
    b = space.batch(valid)
    bits = edge_bits(b.t)
    picks = []
    for want in (bits & CI_BIT > 0, (bits & 4 > 0) & (b.vt == VTHREADS.index("co")),
                 (bits & 1 > 0) & (b.vt == VTHREADS.index("h")), (bits & 2 > 0) & (b.ws == 1)):
        hits = np.flatnonzero(want)
        if hits.size:
            picks.append(int(valid[hits[0]]))
    edged = np.flatnonzero(bits > 0)
    if edged.size:
        picks.append(int(valid[np.random.default_rng(seed).choice(edged)]))
    return [space.get(i) for i in dict.fromkeys(picks)]


@pytest.mark.parametrize("layer", LAYERS, ids=lambda ly: ly.name)
def test_edge_schedules_are_bit_exact_race_free_and_block_timing_is_exact(layer, stock_hw, vta_case):
    case = vta_case(layer, stock_hw)
    configs = _edge_sample(case.space, seed=len(case.layer.name))
    if not configs:
        pytest.skip(f"{case.layer.name} has no non-dividing tile size on {stock_hw}")
    for config in configs:
        prog, _ = case.check(config, run_layer=True)  # bit-exact, race-free, exactly timed
        assert compile_blocks(case.layer, config, case.hw).n_insns == prog.insns.shape[0]


def test_a_non_dividing_tile_is_a_valid_point_and_runs_bit_exact(vta_case):
    """7 output rows in tiles of 3 (3 + 3 + 1), 3 output channel blocks in tiles of 2 (2 + 1):
    before edge tiles these sizes were no candidates. Each output element is stored exactly once
    (no padded rows or channels written), bit-exact."""
    case = vta_case(Conv2D(1, 32, 7, 7, 48, 3, 3, 1, 1))
    layer, hw = case.layer, case.hw
    config = case.config({"tile_b": [1, 1], "tile_h": [3, 3], "tile_w": [1, 7], "tile_ci": [1, 2],
                          "tile_co": [2, 2], "order": 0, "wgt_stationary": 0, "vthread": 0, "uop_fold": 0})
    assert np.array_equal(run_layer(layer, config, hw).output, case.ref)
    insns = compile_insns(layer, config, hw).insns
    store = insns[:, isa.COL["opcode"]] == isa.OP_STORE
    written = (insns[store, isa.COL["y_size"]] * insns[store, isa.COL["x_size"]]).sum()
    assert written == 3 * 7 * 7  # co blocks x rows x columns, once each
    assert int(store.sum()) == 3 * 2  # h tiles x co tiles
    with pytest.raises(ConfigError, match="tile_h"):  # the template space keeps only divisors
        get_space(layer, hw).from_knobs({"tile_b": [1, 1], "tile_h": [3, 3], "tile_w": [1, 7], "tile_ci": [1, 2],
                                         "tile_co": [1, 3], "oc_nthread": 1, "h_nthread": 1})


def test_a_ci_edge_step_loads_only_the_real_channel_blocks(vta_case):
    """3 input channel blocks in reduction steps of 2 (2 + 1): the last step's INP and WGT loads
    carry one block, and the output is exact (no zero fill needed)."""
    case = vta_case(Dense(1, 48, 32))
    layer, hw = case.layer, case.hw
    config = case.config({"tile_b": [1, 1], "tile_ci": [2, 2], "tile_co": [1, 2], "order": 0,
                          "wgt_stationary": 0, "vthread": 0, "uop_fold": 0})
    insns = compile_insns(layer, config, hw).insns
    op, mem = insns[:, isa.COL["opcode"]], insns[:, isa.COL["memory_type"]]
    wgt = (op == isa.OP_LOAD) & (mem == isa.MEM_WGT)
    assert (insns[wgt, isa.COL["y_size"]] * insns[wgt, isa.COL["x_size"]]).tolist() == [4, 2]  # co x ci blocks
    assert np.array_equal(run_layer(layer, config, hw).output, case.ref)


def test_non_dividing_candidates_follow_the_dividing_ones_one_per_tile_count():
    hw = HwConfig.resolve("pynq_1x16")
    layer = Conv2D(1, 64, 56, 56, 64, 3, 3, 1, 1)
    vta, auto = get_space(layer, hw, "vta"), get_space(layer, hw)
    h, h_auto = (next(k for k in s.knobs if k.name == "tile_h") for s in (vta, auto))
    assert h.candidates[:len(h_auto)] == h_auto.candidates  # today's values keep their positions
    extra = h.candidates[len(h_auto):]
    sizes = [f for _, f in extra]
    assert sizes == sorted(sizes) and not set(sizes) & set(get_factors(56))
    assert all(k == -(-56 // f) and f == -(-56 // k) for k, f in extra)  # the smallest size of its count
    assert len(h.candidates) <= 2 * int(np.sqrt(56)) + 1


def test_edge_features(vta_case):
    space = vta_case(Conv2D(1, 32, 7, 7, 48, 3, 3, 1, 1)).space
    valid = space.valid_indices()
    bits = edge_bits(space.batch(valid).t)
    feats = space.features_batch(valid)
    assert feats.shape == (len(valid), N_FEATURES)
    frac = feats[:, N_FEATURES - len(EXTRA_FEATURE_NAMES) + EXTRA_FEATURE_NAMES.index("edge_tile_frac")]
    fill = feats[:, N_FEATURES - len(EXTRA_FEATURE_NAMES) + EXTRA_FEATURE_NAMES.index("edge_fill")]
    pair_edges = (bits & 7) > 0
    assert np.all(fill[~pair_edges] == 1) and np.all(fill[pair_edges] < 1)
    assert np.all(frac[~pair_edges] == 0) and np.all((frac[pair_edges] > 0) & (frac[pair_edges] < 1))


def test_fused_epilogues_on_edge_tiles(vta_case):
    """Bias (one ADD kernel per edge variant), ReLU and a residual that fits the INP slice run on
    edge tiles bit-exact and race-free with exact block timing; a residual loaded in chunks is
    refused with its rule."""
    case = vta_case(Conv2D(1, 32, 7, 7, 32, 3, 3, 1, 1))
    layer, hw, space = case.layer, case.hw, case.space
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, layer.data_shape(), dtype=np.int8)
    w = rng.integers(-128, 128, layer.weight_shape(), dtype=np.int8)
    bias = rng.integers(-40000, 40000, layer.output_shape()[1]).astype(np.int32)
    r = rng.integers(-128, 128, layer.output_shape(), dtype=np.int8)
    valid = space.valid_indices()
    edged = valid[edge_bits(space.batch(valid).t) > 0]
    epi = Epilogue(9, bias=True, relu=True, residual=(1, 0, 1))
    ref = reference_fused(layer, epi, x, w, bias, r)
    ran, refused = 0, []
    chunked = "fused residual: a residual tile loaded in chunks"
    for i in rng.permutation(edged)[:2000].tolist():  # until 3 ran and one was refused for its chunks
        config = space.get(i)
        why = fused_invalid(layer, config, hw, epi)
        if why is not None:
            refused.append(why)
        elif ran < 3:
            run = run_fused(layer, config, hw, epi, x, w, bias, r, check=True)
            assert np.array_equal(run.output, ref), config.knobs
            assert measure_fused(layer, config, hw, epi).cycles == run.cycles
            ran += 1
        if ran >= 3 and any(w.startswith(chunked) for w in refused):
            break
    assert ran >= 3
    assert any(w.startswith(chunked) for w in refused), refused


def test_two_pass_valid_indices_equal_the_full_mask_with_edges(two_pass_agrees):
    space = VtaSpace(Conv2D(1, 32, 5, 5, 48, 3, 3, 1, 1), HwConfig.resolve("pynq_1x16"))
    assert two_pass_agrees(space) > 0  # sampled core points x every order and residency (conftest)
    assert (edge_bits(space.batch(space.valid_indices()).t) > 0).sum() > 0
    names = {r.name for r in space.rules(space.batch(np.arange(1 << 12)))}
    assert {"edge_uop_cache", "edge_uop_hazard", "edge_dma_store", "edge_field_iter"} <= names
