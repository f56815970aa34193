"""Knobs, candidate order and AutoTVM index (docs/vta.md §7.2, §8), checked against the real PYNQ
records in sim/calibration and the worked example of docs/vta.md §7.3."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from codesign.errors import ConfigError
from codesign.hw.config import HwConfig
from codesign.schedule import CONV_KNOBS, DENSE_KNOBS, Config, ScheduleSpace, get_factors
from codesign.workloads import Conv2D, Dense

LOG = Path(__file__).resolve().parent.parent / "sim" / "calibration" / "pynq_resnet18.log"
HW1 = HwConfig()


def calibration_records():
    """(hw, layer, recorded index, entity dict) of every record; the 4x8 lines carry the data
    layout twice (8 task arguments)."""
    out = []
    for line in LOG.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        rec = json.loads(line)
        target, task, args, _ = rec["input"]
        assert task == "conv2d_packed.vta" and len(args) in (7, 8)
        hw = HwConfig.from_name(target.split("-model=")[1].split()[0])
        data, kernel = args[0][1], args[1][1]
        (sh, sw), pads = args[2], args[3]
        assert sh == sw and len(set(pads)) == 1
        layer = Conv2D(data[0] * data[4], data[1] * data[5], data[2], data[3], kernel[0] * kernel[4],
                       kernel[2], kernel[3], sh, pads[0])
        out.append((hw, layer, rec["config"]["index"], {e[0]: e[2] for e in rec["config"]["entity"]}))
    return out


RECORDS = calibration_records()


def test_get_factors():
    assert get_factors(1) == [1]
    assert get_factors(56) == [1, 2, 4, 7, 8, 14, 28, 56]
    assert get_factors(49) == [1, 7, 49]
    assert get_factors(32) == [1, 2, 4, 8, 16, 32]


def test_knobs_in_define_order():
    sp = ScheduleSpace(Conv2D(1, 64, 56, 56, 128, 3, 3, 2, 1), HW1)
    assert sp.template == "conv2d_packed.vta"
    assert tuple(k.name for k in sp.knobs) == CONV_KNOBS
    assert [k.kind for k in sp.knobs] == ["sp"] * 5 + ["ot"] * 2
    tile_h = sp.knobs[1]
    assert tile_h.candidates == ((28, 1), (14, 2), (7, 4), (4, 7), (2, 14), (1, 28))
    assert sp.knobs[3].candidates == ((4, 1), (2, 2), (1, 4))     # ci = 64/16 blocks
    assert sp.knobs[4].candidates == ((8, 1), (4, 2), (2, 4), (1, 8))
    assert sp.knobs[5].candidates == (1, 2)
    assert sp.dims == (1, 6, 6, 3, 4, 2, 2) and sp.size == 1728
    dense = ScheduleSpace(Dense(16, 512, 2048), HW1)
    assert dense.template == "dense_packed.vta"
    assert tuple(k.name for k in dense.knobs) == DENSE_KNOBS
    assert dense.dims == (5, 6, 8, 2)


def test_index_round_trip_whole_space():
    sp = ScheduleSpace(Conv2D(1, 32, 6, 6, 64, 3, 3, 1, 1), HW1)
    for index in range(sp.size):
        cfg = sp.get(index)
        assert cfg.index == index
        assert sp.from_knobs(cfg.knobs) == cfg
        assert sp.from_positions(sp.positions(cfg)) == cfg
        # first knob least significant
        pos = sp.positions(cfg)
        assert index == sum(p * int(np.prod(sp.dims[:j])) for j, p in enumerate(pos))
    allpos = sp.positions_of(np.arange(sp.size))
    assert np.array_equal(sp.index_of(allpos), np.arange(sp.size))


def test_from_knobs_forms_and_errors():
    sp = ScheduleSpace(Conv2D(1, 256, 14, 14, 512, 3, 3, 2, 1), HW1)
    explicit = {"tile_b": [1, 1], "tile_h": [1, 7], "tile_w": [1, 7], "tile_ci": [16, 1],
                "tile_co": [2, 16], "oc_nthread": 2, "h_nthread": 1}
    minus = dict(explicit, tile_h=[-1, 7], tile_co=[-1, 16])
    cfg = sp.from_knobs(explicit)
    assert cfg.index == 203 and sp.from_knobs(minus) == cfg
    assert sp.from_knobs(cfg.entity()) == cfg
    assert cfg.entity()[4] == ["tile_co", "sp", [2, 16]] and cfg.entity()[5] == ["oc_nthread", "ot", 2]
    assert sp.from_knobs(cfg.knobs).knobs == explicit
    with pytest.raises(ConfigError, match=r"knob tile_co=\[3, 16\] is not a candidate; allowed: \[32, 1\]"):
        sp.from_knobs(dict(explicit, tile_co=[3, 16]))
    with pytest.raises(ConfigError, match="knob oc_nthread=4"):
        sp.from_knobs(dict(explicit, oc_nthread=4))
    with pytest.raises(ConfigError, match="missing h_nthread"):
        sp.from_knobs({k: v for k, v in explicit.items() if k != "h_nthread"})
    with pytest.raises(ConfigError, match="out of range"):
        sp.get(sp.size)
    with pytest.raises(ConfigError, match="no VTA schedule space"):
        ScheduleSpace(Conv2D(1, 3, 8, 8, 16, 3, 3, 1, 1), HW1)
    assert hash(cfg) == hash(Config(203, {}))


@pytest.mark.parametrize("hw, layer, index, entity", RECORDS, ids=[f"{r[0].bitstream[:3]}-{r[1].name}" for r in RECORDS])
def test_calibration_record_index_and_validity(hw, layer, index, entity):
    sp = ScheduleSpace(layer, hw)
    cfg = sp.from_knobs(entity)
    assert cfg.index == index
    assert sp.get(index).knobs == {k: (list(v) if isinstance(v, list) else v) for k, v in entity.items()}
    assert sp.why_invalid(cfg) is None
    assert sp.is_valid(index)
    assert index in set(sp.valid_indices().tolist())


def test_calibration_log_has_both_configs():
    assert len(RECORDS) == 20
    assert {hw.bitstream for hw, *_ in RECORDS} == {"1x16_i8w8a32_15_15_18_17", "4x8_i8w8a32_15_16_16_18"}
    assert all(layer.batch == hw.batch * 1 for hw, layer, *_ in RECORDS)


def test_worked_example_tiling():
    """docs/vta.md §7.3: index 203, one 7x7 spatial tile, two co threads of 16 blocks."""
    layer = Conv2D(1, 256, 14, 14, 512, 3, 3, 2, 1)
    sp = ScheduleSpace(layer, HW1)
    ta = sp.mapping_batch(np.array([203]))
    t, (gemm, reset) = ta.row(0), ta.kernels(0)
    assert (t["tile_h"], t["tile_w"], t["tile_ci"], t["tile_co"], t["nthreads"]) == (7, 7, 1, 16, 2)
    assert (t["hin_t"], t["win_t"]) == (15, 15)
    assert (t["h_tiles"], t["w_tiles"], t["co_tiles"], t["ci_steps"], t["n_tiles"]) == (1, 1, 2, 16, 2)
    assert tuple(t[f"{k}_sram"] * t["nthreads"] for k in ("acc", "inp", "wgt")) == (1568, 450, 288)
    assert (gemm.iter_out, gemm.iter_in, gemm.size) == (7, 3, 336)
    assert list(gemm.names) == ["w", "dj", "di", "co", "h"]
    assert list(gemm.names[len(gemm.names) - len(gemm.unrolled):]) == ["di", "co", "h"]
    assert gemm.factors() == {"dst_factor_out": 1, "src_factor_out": 2, "wgt_factor_out": 0,
                              "dst_factor_in": 0, "src_factor_in": 1, "wgt_factor_in": 1}
    assert (reset.iter_out, reset.iter_in, reset.size) == (7, 16, 7)
    assert t["acc_sram"] == 784  # iter_in of the ALU epilogue (1 uop over the acc tile)
    # 16 rows x (ci_in*KH*KW) = 9, stride CI*KH*KW
    assert (t["wgt_y_size"], t["wgt_x_size"], t["wgt_x_stride"]) == (16, 9, 16 * 9)
    # 16 full 7x7 co planes fold into one row
    assert (t["store_y_size"], t["store_x_size"], t["store_x_stride"]) == (1, 784, 784)
    offs = gemm.uops
    assert offs.shape == (336, 3)
    # uop (di, co, h): dst = co*49 + h*7, src = di*15 + h*2*15, wgt = di*3 + co*9
    di, co, h = 2, 5, 3
    assert offs[(di * 16 + co) * 7 + h].tolist() == [co * 49 + h * 7, di * 15 + h * 30, di * 3 + co * 9]
    # the row of a whole-space vectorized pass is the same
    valid = sp.valid_indices()
    assert sp.mapping_batch(valid).row(int(np.searchsorted(valid, 203))) == t
