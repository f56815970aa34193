"""AutoTVM v0.2 log format (codesign.autotvm): parsing, layer/hardware rebuild, exact writing."""

from __future__ import annotations

import json

import pytest

from codesign.autotvm import (
    LogFormatError,
    format_record,
    hw_from_target,
    layer_from_args,
    parse_line,
    parse_log,
    task_args,
)
from codesign.errors import ConfigError
from codesign.hw.config import HwConfig
from codesign.paths import SIM_DATA
from codesign.workloads import Conv2D, Dense

LOG = SIM_DATA / "calibration" / "pynq_resnet18.log"
HW1 = HwConfig.from_name("pynq_1x16_i8w8a32_15_15_18_17")
HW4 = HwConfig.from_name("pynq_4x8_i8w8a32_15_16_16_18")
TOPHUB_LINE = (
    '{"input": ["ext_dev -device=vta -keys=cpu -model=pynq_1x16_i8w8a32_15_15_18_17", "conv2d_packed.vta", '
    '[["TENSOR", [1, 16, 14, 14, 1, 16], "int8"], ["TENSOR", [32, 16, 3, 3, 16, 16], "int8"], [2, 2], '
    '[1, 1, 1, 1], [1, 1], "NCHW1n16c", "int32"], {}], "config": {"index": 203, "code_hash": null, '
    '"entity": [["tile_b", "sp", [1, 1]], ["tile_h", "sp", [1, 7]], ["tile_w", "sp", [1, 7]], '
    '["tile_ci", "sp", [16, 1]], ["tile_co", "sp", [2, 16]], ["oc_nthread", "ot", 2], '
    '["h_nthread", "ot", 1]]}, "result": [[0.0039937316], 0, 8.405554056167603, 1562808175.4555], '
    '"version": 0.2, "tvm_version": "0.7.dev0"}'
)


def test_parse_calibration_log() -> None:
    records, skipped = parse_log(LOG)
    assert skipped == []
    assert len(records) == 20
    assert {r.model for r in records} == {"pynq_1x16_i8w8a32_15_15_18_17", "pynq_4x8_i8w8a32_15_16_16_18"}
    r = records[0]
    assert r.line == 2  # line 1 is a '#' comment
    assert r.task == "conv2d_packed.vta" and r.index == 203 and r.error_no == 0
    assert r.costs == [0.0039937316] and r.cost == 0.0039937316
    assert r.knobs["tile_co"] == [2, 16] and r.knobs["oc_nthread"] == 2
    assert r.all_cost == 8.405554056167603 and r.timestamp == 1562808175.4555


def test_layer_from_both_conv2d_arg_forms() -> None:
    records, _ = parse_log(LOG)
    r7 = records[0]
    assert len(r7.args) == 7
    assert layer_from_args(r7.task, r7.args, hw_from_target(r7.target)) == Conv2D(1, 256, 14, 14, 512, 3, 3, 2, 1)
    r8 = next(r for r in records if r.model.startswith("pynq_4x8"))
    assert len(r8.args) == 8
    # data [1, 8, 56, 56, 4, 8] -> batch 4, 64 channels; kernel [8, 8, 3, 3, 8, 8] -> 64 out.
    assert layer_from_args(r8.task, r8.args, HW4) == Conv2D(4, 64, 56, 56, 64, 3, 3, 1, 1)


def test_dense_args_roundtrip() -> None:
    layer = Dense(4, 256, 128)
    args = task_args(layer, HW4)
    assert args == [["TENSOR", [1, 32, 4, 8], "int8"], ["TENSOR", [16, 32, 8, 8], "int8"], None, "int32"]
    assert layer_from_args("dense_packed.vta", args, HW4) == layer


def test_layer_from_args_rejects_bad_inputs() -> None:
    args = task_args(Conv2D(1, 64, 56, 56, 64, 3, 3, 1, 1), HW1)
    bad = list(args)
    bad[3] = [1, 1, 0, 0]
    with pytest.raises(LogFormatError, match="not symmetric"):
        layer_from_args("conv2d_packed.vta", bad, HW1)
    with pytest.raises(LogFormatError, match="BLOCK_IN"):
        layer_from_args("conv2d_packed.vta", args, HW4)  # 1x16 packing on a 4x8 config
    with pytest.raises(LogFormatError, match="not supported.*conv2d_packed.vta"):
        layer_from_args("conv3d_packed.vta", args, HW1)
    with pytest.raises(LogFormatError, match="7 arguments"):
        layer_from_args("conv2d_packed.vta", args[:5], HW1)
    # The tophub 4x8 dense record uses a 1x16 packing: inconsistent with BATCH=4/BLOCK=8 (docs/vta.md §9).
    with pytest.raises(LogFormatError, match="BATCH=1"):
        layer_from_args("dense_packed.vta", [["TENSOR", [4, 16, 1, 16], "int8"],
                                             ["TENSOR", [8, 16, 16, 16], "int8"], None, "int32"], HW4)


def test_hw_from_target() -> None:
    assert hw_from_target("ext_dev -device=vta -keys=cpu -model=pynq_4x8_i8w8a32_15_16_16_18") == HW4
    with pytest.raises(ConfigError, match="-model="):
        hw_from_target("ext_dev -device=vta -keys=cpu")
    with pytest.raises(ConfigError, match="-model=bogus"):
        hw_from_target("ext_dev -device=vta -model=bogus")


def test_parse_log_skips_bad_lines_with_reasons(tmp_path) -> None:
    path = tmp_path / "bad.log"
    v01 = json.dumps({"i": ["x"], "r": [[1.0], 0, 1.0, 1.0], "v": 0.1})
    path.write_text("\n".join(["# comment", "", "{not json", v01, '{"input": 1}', TOPHUB_LINE, "[1, 2]"]) + "\n")
    records, skipped = parse_log(path)
    assert [r.line for r in records] == [6]
    reasons = {s.line: s.reason for s in skipped}
    assert set(reasons) == {3, 4, 5, 7}
    assert "not valid JSON" in reasons[3]
    assert "v0.1" in reasons[4]
    assert "missing key" in reasons[5]
    assert "not a JSON object" in reasons[7]
    with pytest.raises(ConfigError, match="no such log file"):
        parse_log(tmp_path / "missing.log")


def _pynq_1x16_lines() -> list[str]:
    lines = LOG.read_text().splitlines()
    return [ln for ln in lines if not ln.startswith("#") and "pynq_1x16" in ln]


def test_format_record_roundtrips_calibration_lines_exactly() -> None:
    from codesign.schedule import ScheduleSpace

    lines = _pynq_1x16_lines()
    assert len(lines) == 10
    for text in lines:
        rec = parse_line(text)
        hw = hw_from_target(rec.target)
        layer = layer_from_args(rec.task, rec.args, hw)
        config = ScheduleSpace(layer, hw).from_knobs(rec.knobs)
        out = format_record(layer, hw, config, rec.costs[0], error_no=rec.error_no,
                            all_cost=rec.all_cost, timestamp=rec.timestamp)
        assert out == text
        # A knob dict works too (resolved through the schedule space).
        assert format_record(layer, hw, rec.knobs, rec.costs, all_cost=rec.all_cost,
                             timestamp=rec.timestamp) == text


def test_format_record_error_and_4x8_layout() -> None:
    from codesign.schedule import ScheduleSpace

    layer = Conv2D(4, 64, 56, 56, 64, 3, 3, 1, 1)
    space = ScheduleSpace(layer, HW4)
    config = space.get(0)
    out = json.loads(format_record(layer, HW4, config, 0.5, error_no=4, all_cost=1.0, timestamp=2.0))
    assert out["input"][0] == "ext_dev -device=vta -keys=cpu -model=pynq_4x8_i8w8a32_15_16_16_18"
    assert out["input"][2][5] == "NCHW4n8c" and len(out["input"][2]) == 7
    assert out["input"][2][0] == ["TENSOR", [1, 8, 56, 56, 4, 8], "int8"]
    assert out["result"] == [[1e9], 4, 1.0, 2.0]
    assert out["config"] == {"index": 0, "code_hash": None, "entity": [list(e) for e in config.entity()]}
    assert list(out) == ["input", "config", "result", "version", "tvm_version"]
