"""AutoTVM v0.1 logs (TVM 2018, docs/vta.md §8.1): parsed and normalized to v0.2, the hardware
config taken from --hw or the tensor shapes, read by replay, calibrate, warm start and the
arm_cpu replay. Before, every such line was skipped with "only v0.2 is supported"."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout

import numpy as np
import pytest

from codesign.autotvm import CONV2D_TASK, parse_line, parse_log, resolve_hw
from codesign.calibrate.cpu_replay import replay_cpu
from codesign.calibrate.fit import calibrate
from codesign.calibrate.replay import replay
from codesign.cli import main
from codesign.errors import ConfigError
from codesign.hw.config import HwConfig
from codesign.paths import ROOT
from codesign.tune.records import read_autotvm_log

V01 = ROOT / "tests" / "data" / "autotvm_v0.1_sim_2018.log"
HW16 = HwConfig.resolve("pynq_1x16")
HW48 = HwConfig.resolve("pynq_4x8")


def test_v01_records_parse_and_normalize():
    records, skipped = parse_log(V01)
    assert (len(records), skipped) == (10, [])
    first = records[0]
    raw = json.loads(V01.read_text().splitlines()[0])
    assert (first.version, first.template_key, first.model, first.task) == (0.1, "direct", "sim", CONV2D_TASK)
    assert first.index == raw["i"][5]["i"] == 203
    assert first.costs == raw["r"][0] and first.error_no == 0
    assert first.args[3] == [0, 0, 0, 0]  # v0.1 [pad_h, pad_w] -> four sides
    assert first.knobs["tile_co"] == [2, 16] and first.knobs["oc_nthread"] == 2


def test_hw_from_shapes_or_flag():
    rec = parse_log(V01)[0][0]
    assert resolve_hw(rec) == HW16  # -model=sim: the shipped config with BATCH 1, BLOCK 16
    assert resolve_hw(rec, HW48) == HW48  # the flag wins where -model= names no config
    # A v0.1 record whose shapes no shipped config uses asks for --hw.
    raw = json.loads(V01.read_text().splitlines()[0])
    raw["i"][2][0][1] = [1, 8, 14, 14, 1, 32]
    raw["i"][2][1][1] = [16, 8, 1, 1, 32, 32]
    with pytest.raises(ConfigError, match="BLOCK_IN=32.*Pass --hw"):
        resolve_hw(parse_line(json.dumps(raw)))


def test_replay_reads_v01_and_recomputes_the_index():
    rows, skipped, summary = replay(V01)
    assert (len(rows), skipped) == (10, [])
    assert all(r.valid for r in rows)
    assert [r.index_computed for r in rows] == [r.index_recorded for r in rows]
    assert summary["index_mismatch"] == 0
    errs = [abs(r.predicted_s / r.measured_s - 1) * 100 for r in rows]
    assert summary["mape"] == pytest.approx(float(np.mean(errs)))
    # --hw with other packing: each record says why it does not fit.
    rows, skipped, _ = replay(V01, hw=HW48)
    assert rows == [] and len(skipped) == 10 and "BATCH=1, BLOCK_IN=16" in skipped[0].reason


def test_calibrate_and_warm_start_read_v01():
    _params, report = calibrate([V01], names=["host_call_s"], loo=False)
    assert report["records_used"] == 10 and report["records_skipped"] == []
    recs, skipped = read_autotvm_log(V01)
    assert len(recs) == 10 and skipped == []
    assert {r.hw for r in recs} == {HW16.name}
    assert recs[0].seconds == pytest.approx(0.0006344365)
    recs, skipped = read_autotvm_log(V01, HW48)
    assert recs == [] and len(skipped) == 10


def test_cli_replay_v01_with_hw():
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert main(["replay", str(V01), "--hw", "pynq_1x16", "--json"]) == 0
    out = json.loads(buf.getvalue())
    assert out["summary"]["replayed"] == 10 and out["summary"]["index_mismatch"] == 0
    assert out["records"][0]["model"] == "sim"


def test_arm_cpu_v01_records_replay(tmp_path):
    target = "llvm -device=arm_cpu -model=pynq -target=armv7a-linux-gnueabihf -mattr=+neon"
    conv = ["TENSOR", [1, 64, 56, 56], "float32"]
    lines = []
    for template, seconds in (("winograd", 0.03), ("direct", 0.07)):
        args = [conv, ["TENSOR", [64, 64, 3, 3], "float32"], [1, 1], [1, 1], [1, 1], "NCHW", "float32"]
        lines.append({"i": [target, "topi_nn_conv2d", args, {}, ["conv2d"] + args,
                            {"e": [["tile_co", "sp", [8, 8]]], "c": None, "i": 7, "t": template}],
                      "r": [[seconds], 0, 1.0, 1.5e9], "v": 0.1})
    dw = [conv, ["TENSOR", [64, 1, 3, 3], "float32"], [2, 2], [1, 1], [1, 1], "float32"]
    lines.append({"i": [target, "topi_nn_depthwise_conv2d_nchw", dw, {}, ["depthwise_conv2d_nchw"] + dw,
                        {"e": [], "c": None, "i": 0, "t": "direct"}], "r": [[0.004], 0, 1.0, 1.5e9], "v": 0.1})
    path = tmp_path / "arm_v01.log"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    rows, skipped, summary = replay_cpu(path)
    assert skipped == [] and [(r.kind, r.line) for r in rows] == [("winograd", 1), ("spatial_pack", 2),
                                                                  ("depthwise", 3)]
    assert rows[1].macs == 64 * 64 * 56 * 56 * 9
    assert rows[2].layer.startswith("dwconv_1x64x56x56_64_3x3_s2x2_p1-1-1-1")
    assert summary["replayed"] == 3
