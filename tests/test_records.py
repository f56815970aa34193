"""Records JSONL: one flushed line per measurement, readable while written, crash tolerant."""

from __future__ import annotations

import json

import pytest

from codesign.errors import ConfigError
from codesign.hw.config import HwConfig
from codesign.schedule import ScheduleSpace
from codesign.tune import MeasureRecord, RecordWriter, best_records, import_autotvm_log, load_records
from codesign.tune.records import RECORD_KEYS
from codesign.workloads import parse_layer

HW = HwConfig()
LAYER = parse_layer("conv2d:1,32,8,8,32,3,3,1,1")
SPACE = ScheduleSpace(LAYER, HW)


def rec(index, seconds, error=None):
    return MeasureRecord.make(LAYER, HW, SPACE.get(index), seconds, None if seconds is None else 7, error,
                              "random", 3, timestamp=1.5)


def test_line_format_is_the_contract(tmp_path):
    path = tmp_path / "r.jsonl"
    with RecordWriter(path) as w:
        w.write(rec(5, 0.25))
        # flushed per line: readable before the writer is closed
        obj = json.loads(path.read_text().splitlines()[0])
    assert tuple(obj) == RECORD_KEYS
    assert obj == {"layer": LAYER.name, "layer_spec": "conv2d:1,32,8,8,32,3,3,1,1", "hw": HW.name,
                   "knobs": {k: (list(v) if isinstance(v, (list, tuple)) else v)
                             for k, v in SPACE.get(5).knobs.items()},
                   "index": 5, "seconds": 0.25, "cycles": 7, "error": None, "tuner": "random", "seed": 3,
                   "timestamp": 1.5}


def test_truncated_last_line_survives_a_crash(tmp_path):
    path = tmp_path / "r.jsonl"
    with RecordWriter(path) as w:
        w.write(rec(1, 0.5))
        w.write(rec(2, None, "timeout"))
    full = path.read_text()
    path.write_text(full + rec(3, 0.1).to_json()[:37])  # the process died mid-line
    got = load_records(path)
    assert [(r.index, r.seconds, r.error) for r in got] == [(1, 0.5, None), (2, None, "timeout")]
    with pytest.raises(ConfigError, match=r"r.jsonl:3: not a tuning record"):
        load_records(path, strict=True)
    with RecordWriter(path) as w:  # resuming starts on a fresh line
        w.write(rec(4, 0.2))
    assert [r.index for r in load_records(path)] == [1, 2, 4]


def test_best_records_per_layer_and_hw():
    other = HwConfig.resolve("pynq_4x8")
    big = parse_layer("conv2d:4,32,8,8,32,3,3,1,1")
    r4 = MeasureRecord.make(big, other, ScheduleSpace(big, other).valid_configs()[0], 0.3, 1, None, "x", 0)
    best = best_records([rec(1, 0.5), rec(2, 0.2), rec(3, None, "err"), r4])
    assert best[(LAYER.name, HW.name)].index == 2
    assert best[(big.name, other.name)] is r4


def test_missing_file_is_a_user_error(tmp_path):
    with pytest.raises(ConfigError, match="no such records file"):
        load_records(tmp_path / "nope.jsonl")


def test_import_calibration_log_keeps_index_and_knobs():
    from codesign import autotvm

    log = "sim/calibration/pynq_resnet18.log"
    recs = import_autotvm_log(log)
    parsed, _ = autotvm.parse_log(log)
    assert recs and all(r.tuner == "autotvm" and r.ok for r in recs)
    logged = {(HwConfig.from_name(p.model).name, p.index, p.cost, p.timestamp) for p in parsed}
    assert {(r.hw, r.index, r.seconds, r.timestamp) for r in recs} <= logged
    # every record carries knobs that map back to its recorded index
    for r in recs:
        assert ScheduleSpace(parse_layer(r.layer_spec), HwConfig.from_name(r.hw)).from_knobs(r.knobs).index == r.index
    assert len(recs) == len(parsed)


def test_line_is_the_dataclass_as_asdict_gives_it():
    """to_json reads the fields without asdict's deep copy (issue 21 §4: that copy was ~30 us of
    every records line); the text is the same, board extras included."""
    import dataclasses

    from codesign.tune.records import MeasureRecord as R

    for r in (rec(5, 0.25), rec(7, None, "InvalidSchedule: x"),
              dataclasses.replace(rec(9, 0.5), source="board:b@h:1 bitstream:ab", device_s=0.4, call_s=0.45)):
        d = dataclasses.asdict(r)
        if d["source"] == "simulator":
            d = {k: v for k, v in d.items() if k not in ("source", "device_s", "call_s")}
        if d["family"] == "autotvm":  # template records keep the original line format
            del d["family"]
        assert r.to_json() == json.dumps(d, separators=(", ", ": "))
        assert R.from_dict(json.loads(r.to_json())) == r
