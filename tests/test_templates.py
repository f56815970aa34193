"""group_conv2d_packed.vta and conv2d_transpose_packed.vta: knobs and AutoTVM index, validity,
bit-exact lowering on every valid config of small layers, timing, and AutoTVM log round trips
through export and replay."""

from __future__ import annotations

import json

import numpy as np
import pytest

from codesign import autotvm
from codesign.calibrate.replay import replay
from codesign.cli import main
from codesign.evaluate.compiler import compile_layer
from codesign.evaluate.run import measure_seconds, random_inputs, run_layer
from codesign.hw.config import HwConfig
from codesign.mapping.batch import transpose_uops
from codesign.schedule import CONFIG_FEATURE_NAMES, ScheduleSpace, get_factors, layer_features
from codesign.tune import MeasureRecord, RecordWriter
from codesign.vta import isa
from codesign.workloads import Conv2D, Conv2DTranspose, parse_layer

HW1 = HwConfig()
HW4 = HwConfig.resolve("pynq_4x8")


def _group(hw: HwConfig) -> list[Conv2D]:
    b = hw.batch
    return [Conv2D(b, 64, 6, 6, 32, 3, 3, 1, 1, groups=2), Conv2D(b, 64, 7, 7, 64, 3, 3, 2, 1, groups=4),
            Conv2D(b, 32, 4, 4, 64, 1, 1, 1, 0, groups=2)]


def _transpose(hw: HwConfig) -> list[Conv2DTranspose]:
    b = hw.batch
    return [Conv2DTranspose(b, 32, 4, 4, 16, 4, 4, 2, 1), Conv2DTranspose(b, 16, 4, 4, 32, 3, 3, 1, 1),
            Conv2DTranspose(b, 16, 2, 3, 16, 3, 3, 3, 0)]


def test_knobs_and_index_follow_autotvm():
    # group conv: ci splits kernel.shape[1], the input blocks of ONE group (docs/vta.md §7.2)
    layer = Conv2D(1, 128, 14, 14, 64, 3, 3, 1, 1, groups=2)
    sp = ScheduleSpace(layer, HW1)
    assert sp.template == "group_conv2d_packed.vta"
    assert sp.knob_names == ("tile_b", "tile_h", "tile_w", "tile_ci", "tile_co", "oc_nthread", "h_nthread")
    assert [len(k) for k in sp.knobs] == [1, len(get_factors(14)), len(get_factors(14)), len(get_factors(4)),
                                         len(get_factors(4)), 2, 2]
    assert sp.knobs[3].candidates == ((4, 1), (2, 2), (1, 4))
    # transpose: h/w split the transposed output OH = (H-1)s - 2p + KH
    tr = Conv2DTranspose(1, 64, 4, 4, 32, 4, 4, 2, 1)
    st = ScheduleSpace(tr, HW1)
    assert st.template == "conv2d_transpose_packed.vta" and tr.out_height == 8
    assert st.knobs[1].candidates == tuple((8 // f, f) for f in (1, 2, 4, 8))
    # mixed radix, first knob least significant (docs/vta.md §8)
    knobs = {"tile_b": [1, 1], "tile_h": [2, 4], "tile_w": [1, 8], "tile_ci": [2, 2], "tile_co": [1, 2],
             "oc_nthread": 2, "h_nthread": 1}
    pos = [0, 2, 3, 1, 1, 1, 0]
    dims = [len(k) for k in st.knobs]
    index = sum(p * int(np.prod(dims[:j])) for j, p in enumerate(pos))
    assert st.from_knobs(knobs).index == index and st.get(index).knobs == knobs


def test_template_validity_rules_name_themselves():
    sp = ScheduleSpace(Conv2D(1, 64, 8, 8, 64, 3, 3, 1, 1, groups=2), HW1)
    cross = {"tile_b": [1, 1], "tile_h": [1, 8], "tile_w": [1, 8], "tile_ci": [2, 1], "tile_co": [1, 4],
             "oc_nthread": 1, "h_nthread": 1}
    assert "crosses a group boundary" in sp.why_invalid(cross)
    st = ScheduleSpace(Conv2DTranspose(1, 16, 6, 6, 16, 4, 4, 2, 1), HW1)
    odd = {"tile_b": [1, 1], "tile_h": [4, 3], "tile_w": [1, 12], "tile_ci": [1, 1], "tile_co": [1, 1],
           "oc_nthread": 1, "h_nthread": 1}
    assert "not a multiple of the stride 2" in st.why_invalid(odd)


def test_transpose_kernel_skips_inserted_zeros():
    layer = Conv2DTranspose(1, 16, 4, 4, 16, 4, 4, 2, 1)
    uops = transpose_uops(layer, 8, 8, 1, 1)
    # a 4x4 kernel at stride 2 touches (4/2)^2 = 4 real pixels per output: 4 of 16 taps
    assert uops.shape[0] == 8 * 8 * 4
    sp = ScheduleSpace(layer, HW1)
    cfg = next(c for c in sp.valid_configs() if c["tile_h"][1] == 8 and c["tile_w"][1] == 8)
    prog = compile_layer(layer, cfg, HW1, functional=False)
    gemm = prog.insns[(prog.insns[:, isa.COL["opcode"]] == isa.OP_GEMM) & (prog.insns[:, isa.COL["reset_reg"]] == 0)]
    assert (gemm[:, isa.COL["uop_end"]] - gemm[:, isa.COL["uop_bgn"]] == 256).all()
    assert (gemm[:, isa.COL["iter_out"]] == 1).all() and (gemm[:, isa.COL["iter_in"]] == 1).all()


@pytest.mark.parametrize("hw", [HW1, HW4], ids=["1x16", "4x8"])
def test_every_valid_config_is_bit_exact(hw):
    """Every valid config of several small grouped and transposed convs matches the NumPy
    reference (grouped conv by groups, transposed conv by scattering, not by the lowering)."""
    checked = 0
    for layer in _group(hw) + _transpose(hw):
        sp = ScheduleSpace(layer, hw)
        assert sp.n_valid > 0, layer.name
        data, weight = random_inputs(layer)
        ref = layer.reference(data, weight)
        for index in sp.valid_indices():
            out = run_layer(layer, sp.get(int(index)), hw, data, weight).output
            assert np.array_equal(out, ref), (layer.name, int(index))
            checked += 1
    assert checked > 100


def test_timing_uses_the_same_model():
    for layer in (_group(HW1)[0], _transpose(HW1)[0]):
        sp = ScheduleSpace(layer, HW1)
        secs = []
        for index in sp.valid_indices()[:6]:
            cfg = sp.get(int(index))
            s, cycles = measure_seconds(layer, cfg, HW1)
            run = run_layer(layer, cfg, HW1, functional=False)
            assert run.seconds == pytest.approx(s) and run.cycles == cycles > 0
            secs.append(s)
        assert len(set(secs)) > 1  # configs differ in time
    # skipping the inserted zeros: fewer cycles than the dense conv over the dilated input
    tr = Conv2DTranspose(1, 64, 8, 8, 64, 4, 4, 2, 1)
    sp = ScheduleSpace(tr, HW1)
    cfg = next(c for c in sp.valid_configs() if c["tile_h"][1] == 16 and c["tile_w"][1] == 16)
    dense = ScheduleSpace(tr.schedule_view(), HW1)
    if dense.is_valid(cfg.knobs):
        assert measure_seconds(tr, cfg, HW1)[1] < measure_seconds(tr.schedule_view(), cfg.knobs, HW1)[1]


def test_log_args_round_trip():
    for layer, hw in ((Conv2D(1, 64, 14, 14, 64, 3, 3, 1, 1, groups=4), HW1),
                      (Conv2D(4, 64, 14, 14, 64, 3, 3, 2, 1, groups=2), HW4),
                      (Conv2DTranspose(1, 64, 8, 8, 32, 4, 4, 2, 1), HW1)):
        args = autotvm.task_args(layer, hw)
        assert autotvm.layer_from_args(layer.template, json.loads(json.dumps(args)), hw) == layer
    g = autotvm.task_args(Conv2D(1, 64, 14, 14, 64, 3, 3, 1, 1, groups=4), HW1)
    assert g[1] == ["TENSOR", [4, 1, 3, 3, 16, 16], "int8"] and g[5] == 4 and g[6] == "int32"
    t = autotvm.task_args(Conv2DTranspose(1, 64, 8, 8, 32, 4, 4, 2, 1), HW1)
    assert t[2:] == [[2, 2], [1, 1, 1, 1], "int32", [0, 0]]
    bad = list(g)
    bad[5] = 3
    with pytest.raises(autotvm.LogFormatError, match="x groups 3 != data channel blocks 4"):
        autotvm.layer_from_args("group_conv2d_packed.vta", bad, HW1)


def test_records_round_trip_through_export_and_replay(tmp_path, capsys):
    layers = [(parse_layer("conv2d:1,64,8,8,64,3,3,1,1,1,2"), HW1),
              (parse_layer("conv2d_transpose:1,32,4,4,16,4,4,2,1"), HW1),
              (parse_layer("conv2d_transpose:4,16,4,4,16,4,4,2,1"), HW4)]
    rows = []
    for layer, hw in layers:
        sp = ScheduleSpace(layer, hw)
        for k, cfg in enumerate(sp.valid_configs()[:3]):
            s, cycles = measure_seconds(layer, cfg, hw)
            rows.append(MeasureRecord.make(layer, hw, cfg, s, cycles, None, "exhaustive", 0, timestamp=100.0 + k))
    records = tmp_path / "r.jsonl"
    with RecordWriter(records) as w:
        w.write_all(rows)
    log = tmp_path / "vta.log"
    assert main(["export", "autotvm", str(records), "-o", str(log)]) == 0
    lines = log.read_text().splitlines()
    assert len(lines) == 3
    assert {json.loads(x)["input"][1] for x in lines} == {"group_conv2d_packed.vta", "conv2d_transpose_packed.vta"}
    got, skipped, summary = replay(log)
    assert not skipped and summary["replayed"] == 3
    assert summary["index_mismatch"] == 0 and summary["invalid"] == 0
    for row in got:
        assert row.predicted_s is not None and row.predicted_s > 0


def test_features_describe_the_template_kernels():
    tr = Conv2DTranspose(1, 32, 4, 4, 16, 4, 4, 2, 1)
    sp = ScheduleSpace(tr, HW1)
    feats = sp.features_batch(sp.valid_indices())
    assert np.isfinite(feats).all()
    col = CONFIG_FEATURE_NAMES.index("log2_uops")
    for row, index in zip(feats, sp.valid_indices()):
        k = sp.get(int(index)).knobs
        n = transpose_uops(tr, k["tile_h"][1], k["tile_w"][1], k["tile_ci"][1], k["tile_co"][1]).shape[0]
        assert row[col] == pytest.approx(np.log2(n))
    # a grouped conv is described by the conv its template tiles (one group's input channels)
    grp = Conv2D(1, 64, 8, 8, 64, 3, 3, 1, 1, groups=4)
    assert np.array_equal(layer_features(grp), layer_features(grp.schedule_view()))
    assert np.isfinite(ScheduleSpace(grp, HW1).features_batch(ScheduleSpace(grp, HW1).valid_indices())).all()
