"""Export: AutoTVM v0.2 lines that `codesign.autotvm` parses back to the same layer, hw, index and
knobs; vta_config.json; the CLI."""

from __future__ import annotations

import json

from codesign import autotvm
from codesign.cli import main
from codesign.hw.config import HwConfig
from codesign.schedule import ScheduleSpace
from codesign.tune import MeasureRecord, RecordWriter
from codesign.workloads import parse_layer

HW = HwConfig()
HW48 = HwConfig.resolve("pynq_4x8")
CONV = parse_layer("conv2d:1,32,8,8,32,3,3,1,1")
CONV4 = parse_layer("conv2d:4,32,8,8,64,3,3,1,1")
DENSE = parse_layer("dense:1,256,128")


def _records(tmp_path):
    path = tmp_path / "r.jsonl"
    rows = []
    for layer, hw in ((CONV, HW), (DENSE, HW), (CONV4, HW48)):
        valid = ScheduleSpace(layer, hw).valid_configs()
        for k, cfg in enumerate(valid[:4]):
            rows.append(MeasureRecord.make(layer, hw, cfg, 0.01 / (k + 1) if k != 3 else None, 5,
                                           None if k != 3 else "timeout", "xgb", 0, timestamp=100.0 + k))
    with RecordWriter(path) as w:
        w.write_all(rows)
    return path, rows


def test_export_autotvm_round_trips(tmp_path, capsys):
    path, rows = _records(tmp_path)
    out = tmp_path / "vta.log"
    assert main(["export", "autotvm", str(path), "-o", str(out)]) == 0
    lines = out.read_text().splitlines()
    assert len(lines) == 3
    for line in lines:
        rec = autotvm.parse_line(line)
        hw = autotvm.hw_from_target(rec.target)
        layer = autotvm.layer_from_args(rec.task, rec.args, hw)
        best = [r for r in rows if r.layer == layer.name and r.hw == hw.name][2]  # fastest successful
        assert rec.target == f"ext_dev -device=vta -keys=cpu -model={hw.vta_model}"
        assert rec.task == layer.template
        assert rec.index == best.index
        assert ScheduleSpace(layer, hw).from_knobs(rec.knobs).index == best.index
        assert {k: (list(v) if isinstance(v, list) else v) for k, v in rec.knobs.items()} == best.knobs
        assert rec.costs == [best.seconds] and rec.error_no == 0 and rec.timestamp == best.timestamp
        assert line == autotvm.format_record(layer, hw, ScheduleSpace(layer, hw).get(best.index), best.seconds,
                                             timestamp=best.timestamp)


def test_export_autotvm_hw_filter_and_json(tmp_path, capsys):
    path, _ = _records(tmp_path)
    out = tmp_path / "v48.log"
    assert main(["export", "autotvm", str(path), "--hw", "pynq_4x8", "-o", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["lines"] == 1 and summary["records_read"] == 12
    assert summary["entries"][0]["hw"] == HW48.name
    assert "-model=pynq_4x8_i8w8a32_15_16_16_18" in out.read_text()


def test_export_vta_config(tmp_path):
    out = tmp_path / "vta_config.json"
    assert main(["export", "vta-config", "pynq_4x8", "-o", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data == HW48.to_vta_json()
    assert HwConfig.from_vta_json(out) == HW48


def test_export_empty_records_is_one_line_error(tmp_path, capsys):
    empty = tmp_path / "e.jsonl"
    empty.write_text("")
    assert main(["export", "autotvm", str(empty)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("codesign export: error:") and err.count("\n") == 1


def test_export_refuses_configs_that_share_an_autotvm_model(tmp_path, capsys):
    """-model= carries no clock: two clocks of one bitstream name would collide in the TVM flow."""
    fast = HW.with_(clock_mhz=200)
    path = tmp_path / "r.jsonl"
    cfg = ScheduleSpace(CONV, HW).valid_configs()[0]
    with RecordWriter(path) as w:
        w.write_all([MeasureRecord.make(CONV, hw, cfg, s, 5, None, "xgb", 0, timestamp=1.0)
                     for hw, s in ((HW, 0.02), (fast, 0.01))])
    assert main(["export", "autotvm", str(path), "-o", str(tmp_path / "x.log")]) == 2
    err = capsys.readouterr().err
    assert HW.vta_model in err and fast.name in err and "--hw" in err
    assert not (tmp_path / "x.log").exists()
    assert main(["export", "autotvm", str(path), "--hw", fast.name, "-o", str(tmp_path / "y.log")]) == 0
    rec = autotvm.parse_line((tmp_path / "y.log").read_text().splitlines()[0])
    assert rec.costs == [0.01]


def test_export_picks_the_template_best_and_reports_the_slowdown(tmp_path, capsys):
    """A faster record of another schedule family cannot be an AutoTVM line: the template's best
    is exported and the summary says how much slower it is, per layer and in total."""
    path, rows = _records(tmp_path)
    faster = MeasureRecord(**{**rows[0].__dict__, "family": "vta", "index": 12345, "seconds": 0.002,
                              "knobs": {"not": "a template knob"}})  # CONV on HW: template best is 0.01/3
    only_vta = MeasureRecord(**{**faster.__dict__, "layer": "conv2d_other", "seconds": 0.001})
    with RecordWriter(path) as w:
        w.write_all([faster, only_vta])
    out = tmp_path / "vta.log"
    assert main(["export", "autotvm", str(path), "--hw", HW.name, "-o", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    by_layer = {e["layer"]: e for e in summary["entries"]}
    conv = by_layer[CONV.name]
    assert conv["seconds"] == 0.01 / 3 and conv["best_seconds"] == 0.002 and conv["best_family"] == "vta"
    assert abs(conv["slowdown"] - (0.01 / 3) / 0.002) < 1e-12
    dense = by_layer[DENSE.name]
    assert dense["slowdown"] == 1.0 and dense["best_family"] == "autotvm"
    assert summary["per_request"] is None  # no network: no total (tests/test_export_per_request.py)
    assert [m["layer"] for m in summary["missing"]] == ["conv2d_other"]
    lines = out.read_text().splitlines()
    assert len(lines) == 2 and all(autotvm.parse_line(x).index != 12345 for x in lines)
    assert main(["export", "autotvm", str(path), "--hw", HW.name, "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert f"{(0.01 / 3) / 0.002:.3f}x" in text and "no template record, not exported" in text
