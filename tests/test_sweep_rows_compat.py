"""trials.jsonl and pareto.json as the code on main writes them load into the typed rows
(`TrialRow`, `DesignPoint`, `ParetoDoc`) and are written back byte for byte: an existing sweep
directory still resumes, reports and plots."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from codesign.cli import main
from codesign.pareto.io import read_pareto, read_pareto_json
from codesign.pareto.point import DesignPoint
from codesign.sweep.results import write_pareto
from codesign.sweep.rows import TRIALS_FILE, TrialRow, read_trials

# Written by `SweepCallback` on main (fd94650, `append_jsonl(TrialRow.to_json())`): a whole-network
# design, a second one with a key this version does not know, an infeasible config and an error row.
MAIN_LINES = [
    '{"trial_id":"a1","status":"ok","config":"pynq_1x16_i8w8a32_15_15_18_17","feasible":true,"number":0,"timestamp":1764366000.5,"params":{"BATCH":1},"reason":null,"latency_ms":41.25,"throughput_ips":24.24,"vta_ms":30.0,"cpu_ms":11.25,"scope":"whole network","scope_note":null,"area":0.4,"power_w":2.5,"energy_j":0.103125,"hw":{"name":"pynq_1x16_i8w8a32_15_15_18_17","clock_mhz":100},"resources":{"utilization":{"lut":0.5,"ff":0.25,"bram18":0.75,"dsp":0.125}},"activity":{"load":0.5,"compute":0.25,"store":0.125},"batch":1,"clock_verified":true,"layers":[{"layer":"conv2d_1x16x8x8_16_3x3_s1_p1","count":2,"seconds":0.015,"cycles":1500000,"knobs":{"tile_h":2},"index":7,"measurements":16,"gops":1.5}],"unsupported":[{"layer":"dense_1x512_10","count":1,"reason":"no VTA kernel"}],"steps":[{"name":"conv1","kind":"conv2d","placement":"vta","ms":30.0,"layer":"conv2d_1x16x8x8_16_3x3_s1_p1","transform":"space_to_depth"},{"name":"pool","kind":"max_pool2d","placement":"cpu","ms":11.25}],"objective_info":[{"key":"latency_ms","direction":"min"},{"key":"area","direction":"min"},{"key":"power_w","direction":"min"}],"measurements":16,"wall_s":3.5,"cached":false,"node":"n1"}',
    '{"trial_id":"b2","status":"ok","config":"pynq_1x32_i8w8a32_15_15_18_17","feasible":true,"number":1,"timestamp":1764366000.5,"params":{"BATCH":2},"reason":null,"latency_ms":30.5,"throughput_ips":24.24,"vta_ms":30.0,"cpu_ms":11.25,"scope":"whole network","scope_note":null,"area":0.6,"power_w":2.75,"energy_j":0.0838,"hw":{"name":"pynq_1x16_i8w8a32_15_15_18_17","clock_mhz":100},"resources":{"utilization":{"lut":0.5,"ff":0.25,"bram18":0.75,"dsp":0.125}},"activity":{"load":0.5,"compute":0.25,"store":0.125},"batch":1,"clock_verified":true,"layers":[{"layer":"conv2d_1x16x8x8_16_3x3_s1_p1","count":2,"seconds":0.015,"cycles":1500000,"knobs":{"tile_h":2},"index":7,"measurements":16,"gops":1.5}],"unsupported":[{"layer":"dense_1x512_10","count":1,"reason":"no VTA kernel"}],"steps":[{"name":"conv1","kind":"conv2d","placement":"vta","ms":30.0,"layer":"conv2d_1x16x8x8_16_3x3_s1_p1","transform":"space_to_depth"},{"name":"pool","kind":"max_pool2d","placement":"cpu","ms":11.25}],"objective_info":[{"key":"latency_ms","direction":"min"},{"key":"area","direction":"min"},{"key":"power_w","direction":"min"}],"measurements":16,"wall_s":3.5,"cached":false,"future_key":[1,2]}',
    '{"trial_id":"c3","status":"ok","config":"pynq_2x16_i8w8a32_15_15_18_17","feasible":false,"number":2,"timestamp":1764366001.0,"params":{"BATCH":4},"reason":"needs 60000 LUT","latency_ms":null,"throughput_ips":null,"vta_ms":null,"cpu_ms":null,"scope":null,"scope_note":null,"area":1.2,"power_w":null,"energy_j":null,"hw":null,"resources":null,"activity":null,"batch":null,"clock_verified":null,"layers":[],"unsupported":[],"steps":[],"objective_info":[{"key":"latency_ms","direction":"min"},{"key":"area","direction":"min"},{"key":"power_w","direction":"min"}],"measurements":0,"wall_s":0.01,"cached":false}',
    '{"trial_id":"d4","status":"error","config":null,"feasible":false,"number":3,"timestamp":1764366002.0,"params":{"BATCH":8},"reason":null,"error":"RuntimeError: boom","latency_ms":null,"throughput_ips":null,"vta_ms":null,"cpu_ms":null,"scope":null,"scope_note":null,"area":null,"power_w":null,"energy_j":null,"hw":null,"resources":null,"activity":null,"batch":null,"clock_verified":null,"layers":[],"unsupported":[],"steps":[],"objective_info":[{"key":"latency_ms","direction":"min"},{"key":"area","direction":"min"},{"key":"power_w","direction":"min"}],"measurements":0,"wall_s":null,"cached":false,"retries":1}',
]
# sha256 of the pareto.json main's `write_pareto(DIR, rows, stock_names=(STOCK,), power_bound=3.0)` wrote
# from these rows.
MAIN_PARETO_SHA256 = "36b2f53ae4ec973a81c26be88eeffd2f5921ab9cb4d79f5baf82472aaa5661e0"
STOCK = "pynq_1x16_i8w8a32_15_15_18_17"


def _dumps(row: dict) -> str:
    return json.dumps(row, separators=(",", ":"))  # `append_jsonl`'s form


def _sweep_dir(tmp_path: Path) -> Path:
    (tmp_path / TRIALS_FILE).write_text("\n".join(MAIN_LINES) + "\n")
    return tmp_path


def test_main_trials_load_typed_and_round_trip_byte_identical(tmp_path: Path) -> None:
    rows = read_trials(_sweep_dir(tmp_path))
    assert [r.trial_id for r in rows] == ["a1", "b2", "c3", "d4"]
    a1, b2, c3, d4 = rows
    assert a1.design and a1.layers[0].knobs == {"tile_h": 2} and a1.layers[0].cycles == 1500000
    assert [s.placement for s in a1.steps] == ["vta", "cpu"] and a1.steps[0].transform == "space_to_depth"
    assert a1.unsupported[0].reason == "no VTA kernel" and a1.node == "n1"
    assert b2.extra == {"future_key": [1, 2]}
    assert not c3.design and c3.reason == "needs 60000 LUT"
    assert not d4.ok and d4.retries == 1 and d4.error == "RuntimeError: boom"
    assert [_dumps(r.to_json()) for r in rows] == MAIN_LINES
    # What the driver appends for a new trial (its keys in the callback's order): main's line.
    data = json.loads(MAIN_LINES[0])
    first = {k: data.pop(k) for k in ("trial_id", "number", "status", "timestamp")}
    assert _dumps(TrialRow.from_json({**first, **data}).built().to_json()) == MAIN_LINES[0]


def test_pareto_json_from_main_rows_is_main_bytes_and_reads_back(tmp_path: Path, capsys) -> None:
    out = _sweep_dir(tmp_path)
    doc = write_pareto(out, read_trials(out), stock_names=(STOCK,), power_bound=3.0)
    text = (out / "pareto.json").read_bytes()
    assert hashlib.sha256(text).hexdigest() == MAIN_PARETO_SHA256
    assert [p.config for p in doc.points] == ["pynq_1x32_i8w8a32_15_15_18_17", STOCK]
    assert doc.points[1].layers[0].to_json() == {"layer": "conv2d_1x16x8x8_16_3x3_s1_p1", "count": 2,
                                                  "seconds": 0.015, "knobs": {"tile_h": 2}}
    back = read_pareto(out)
    assert back.stock_comparison[STOCK].dominated_by == [] and back.stock_comparison[STOCK].on_front
    assert json.dumps(back.to_json(), indent=2) + "\n" == text.decode()
    assert main(["report", str(out), "--json"]) == 0
    assert capsys.readouterr().out == json.dumps(read_pareto_json(out)) + "\n"


def test_an_older_point_gains_no_keys() -> None:
    """A version-1 point (no throughput, scope, steps) writes back without nulls for them."""
    old = {"config": "c", "latency_ms": 2, "area": 0.5, "power_w": 1.0, "layers": [{"layer": "x", "count": 1,
                                                                               "seconds": 1}]}
    point = DesignPoint.from_json(old)
    assert point.throughput_ips is None and point.layers[0].seconds == 1
    assert json.dumps(point.to_json()) == json.dumps(old)
