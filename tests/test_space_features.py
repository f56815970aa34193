"""Fixed-size features of configs, layers and hardware configs; tiling cache consistency."""

from __future__ import annotations

import numpy as np

from codesign.hw.config import HwConfig
from codesign.mapping.batch import MappingBatch, geometry, knob_arrays
from codesign.schedule import (
    CONFIG_FEATURE_NAMES,
    N_CONFIG_FEATURES,
    N_HW_FEATURES,
    N_LAYER_FEATURES,
    ScheduleSpace,
    hw_features,
    layer_features,
)
from codesign.schedule.validity import first_failure
from codesign.workloads import Conv2D, Dense

HW1 = HwConfig()
HW4 = HwConfig.from_name("pynq_4x8_i8w8a32_15_16_16_18")


def test_config_features_of_the_worked_example():
    layer = Conv2D(1, 256, 14, 14, 512, 3, 3, 2, 1)
    sp = ScheduleSpace(layer, HW1)
    f = sp.features(203)
    assert f.dtype == np.float32 and f.shape == (N_CONFIG_FEATURES,)
    named = dict(zip(CONFIG_FEATURE_NAMES, f.tolist()))
    assert named["log2_tile_h"] == named["log2_tile_w"] == np.float32(np.log2(7))
    assert named["log2_tile_co"] == 4.0 and named["log2_tile_ci"] == 0.0
    assert named["oc_nthread"] == 2.0 and named["h_nthread"] == 1.0
    assert named["acc_util"] == np.float32(1568 / 2048)
    assert named["inp_util"] == np.float32(450 / 2048)
    assert named["wgt_util"] == np.float32(288 / 1024)
    assert named["log2_uops"] == np.float32(np.log2(336))
    assert named["log2_ci_steps"] == 4.0 and named["log2_n_tiles"] == 1.0
    # INP bytes: 2 tiles x 16 steps x 225 elements x 16 B
    assert named["log2_inp_bytes"] == np.float32(np.log2(2 * 16 * 225 * 16))


def test_features_batch_matches_single_and_is_finite():
    for layer, hw in [(Conv2D(1, 64, 56, 56, 64, 3, 3, 1, 1), HW1), (Conv2D(4, 128, 28, 28, 256, 1, 1, 2, 0), HW4),
                      (Dense(16, 512, 2048), HW1)]:
        sp = ScheduleSpace(layer, hw)
        idx = sp.valid_indices()
        batch = sp.features_batch(idx)
        assert batch.shape == (len(idx), N_CONFIG_FEATURES) and batch.dtype == np.float32
        assert np.isfinite(batch).all()
        for row in (0, len(idx) // 2, len(idx) - 1):
            assert np.array_equal(sp.features(int(idx[row])), batch[row])
        assert len({tuple(r) for r in batch.tolist()}) == len(idx)  # features tell configs apart


def test_layer_and_hw_features():
    conv = layer_features(Conv2D(1, 64, 56, 56, 128, 3, 3, 2, 1))
    assert conv.shape == (N_LAYER_FEATURES,) and conv.dtype == np.float32
    assert conv.tolist()[:6] == [1.0, 0.0, 6.0, np.log2(56).astype(np.float32), np.float32(np.log2(56)), 7.0]
    assert conv.tolist()[6:10] == [3.0, 3.0, 2.0, 1.0]
    dense = layer_features(Dense(16, 512, 1024))
    assert dense.shape == (N_LAYER_FEATURES,) and dense[0] == 0.0 and dense[2] == 9.0
    h1, h4 = hw_features(HW1), hw_features(HW4)
    assert h1.shape == (N_HW_FEATURES,)
    assert h1.tolist() == [0, 4, 4, 13, 11, 10, 11, np.float32(np.log2(100)), 3]
    assert h4.tolist()[:7] == [2, 3, 3, 13, 11, 10, 11]


def _geometry(t: MappingBatch, i: int) -> tuple:
    """Config i's geometry as comparable plain values (row + both folded kernels)."""
    kernels = tuple((k.names, k.iter_out, k.iter_in, tuple(k.factors().items()), k.uops.tolist())
                    for k in t.kernels(i))
    return t.row(i), kernels


def test_cached_tiling_equals_direct_and_scalar_rules_agree():
    for layer, hw in [(Conv2D(1, 128, 28, 28, 128, 3, 3, 1, 1), HW1), (Dense(4, 512, 1024), HW4)]:
        sp = ScheduleSpace(layer, hw)
        geo = geometry(layer, hw)
        for index in sp.valid_indices()[::7]:
            cfg = sp.get(int(index))
            whole = sp.mapping_batch(sp.valid_indices())
            row = int(np.searchsorted(sp.valid_indices(), index))
            single = MappingBatch(geo, hw, knob_arrays(cfg.knobs, geo.kind))
            assert _geometry(whole, row) == _geometry(single, 0) == _geometry(sp.mapping_batch(np.array([index])), 0)
            # the uncached single-config rule path agrees with the vectorized mask
            assert first_failure(single) is None


def test_dense_tiling_is_one_uop():
    """docs/vta.md §7.5: k_o.inner and co fold into iter_out/iter_in, leaving 1 uop."""
    layer = Dense(1, 512, 1024)
    sp = ScheduleSpace(layer, HW1)
    cfg = sp.from_knobs({"tile_b": [1, 1], "tile_ci": [-1, 8], "tile_co": [-1, 16], "oc_nthread": 2})
    ta = sp.mapping_batch(np.array([cfg.index]))
    t, (gemm, _) = ta.row(0), ta.kernels(0)
    assert list(gemm.names) == ["k_o.inner", "co"]
    assert (gemm.iter_out, gemm.iter_in, gemm.size) == (8, 16, 1)
    assert gemm.factors()["wgt_factor_out"] == 1 and gemm.factors()["wgt_factor_in"] == 8
    assert (t["acc_sram"], t["inp_sram"], t["wgt_sram"], t["nthreads"]) == (16, 8, 128, 2)
    assert (t["co_tiles"], t["ci_steps"], t["n_tiles"]) == (4, 4, 4)
    assert sp.why_invalid(cfg) is None
