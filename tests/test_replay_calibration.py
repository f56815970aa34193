"""Replay of the real PYNQ calibration log on the shipped timing parameters."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout

import numpy as np
import pytest

from codesign.calibrate import load_cases, prepare, replay
from codesign.cli import main
from codesign.paths import SIM_DATA
from codesign.vta.timing import TimingParams

LOG = SIM_DATA / "calibration" / "pynq_resnet18.log"


@pytest.fixture(scope="module")
def shipped() -> tuple:
    return replay(LOG, TimingParams.load())


def test_shipped_params_reach_targets(shipped) -> None:
    rows, skipped, summary = shipped
    assert skipped == []
    assert len(rows) == 20 and summary["replayed"] == 20
    assert all(r.valid for r in rows)
    assert summary["index_mismatch"] == 0
    assert all(r.index_recorded == r.index_computed for r in rows)
    assert summary["mape"] <= 10.0
    assert summary["spearman"] >= 0.95


def test_replay_uses_same_seconds_as_compiled_timing(shipped) -> None:
    # measure_seconds (replay) and compile_layer + time_program + predict_seconds (calibrate)
    # must agree exactly: the fit optimizes what replay reports.
    rows, _, _ = shipped
    params = TimingParams.load()
    cases, _ = load_cases(LOG)
    fcases, skipped = prepare(cases[:4])
    assert skipped == []
    got = np.array([fc.predict(params) for fc in fcases])
    assert got == pytest.approx([r.predicted_s for r in rows[:4]], rel=1e-12)


def test_replay_skips_unusable_records_with_reasons(tmp_path) -> None:
    lines = LOG.read_text().splitlines()
    good = lines[1]
    obj = json.loads(good)
    failed = json.loads(good)
    failed["result"] = [[1e9], 4, 1.0, 1.0]
    group = json.loads(good)
    group["input"][1] = "conv3d_packed.vta"  # a template this tool does not model
    nomodel = json.loads(good)
    nomodel["input"][0] = "ext_dev -device=vta -keys=cpu"
    path = tmp_path / "mixed.log"
    path.write_text("\n".join([
        "# header", good, "garbage {", json.dumps(failed), json.dumps(group), json.dumps(nomodel),
    ]) + "\n")
    rows, skipped, summary = replay(path, TimingParams.load())
    assert [r.line for r in rows] == [2]
    assert rows[0].index_recorded == obj["config"]["index"] == rows[0].index_computed
    reasons = {s.line: s.reason for s in skipped}
    assert set(reasons) == {3, 4, 5, 6}
    assert "not valid JSON" in reasons[3]
    assert "error_no=4" in reasons[4]
    assert "conv3d_packed.vta" in reasons[5] and "not supported" in reasons[5]
    assert "-model=" in reasons[6]
    assert summary["skipped"] == 4 and summary["replayed"] == 1


def test_cli_replay_json(shipped) -> None:
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert main(["replay", str(LOG), "--json"]) == 0
    out = json.loads(buf.getvalue())
    assert len(out["records"]) == 20
    rec = out["records"][0]
    for key in ("task", "model", "layer", "index_recorded", "index_computed", "valid", "measured_s",
                "predicted_s"):
        assert key in rec
    assert rec["model"] == "pynq_1x16_i8w8a32_15_15_18_17" and rec["index_recorded"] == 203
    assert out["summary"]["mape"] == pytest.approx(shipped[2]["mape"])
    assert out["summary"]["spearman"] == pytest.approx(shipped[2]["spearman"])


def test_replay_dense_record_written_by_format_record(tmp_path) -> None:
    from codesign.autotvm import format_record
    from codesign.evaluate.run import measure_seconds
    from codesign.hw.config import HwConfig
    from codesign.schedule import ScheduleSpace
    from codesign.workloads import Dense

    hw = HwConfig()
    layer = Dense(1, 256, 128)
    space = ScheduleSpace(layer, hw)
    config = space.get(int(space.valid_indices()[0]))
    path = tmp_path / "dense.log"
    path.write_text(format_record(layer, hw, config, 1.41e-4, all_cost=1.0, timestamp=1.0) + "\n")
    rows, skipped, summary = replay(path, TimingParams.load())
    assert skipped == [] and len(rows) == 1
    r = rows[0]
    assert (r.task, r.layer, r.valid) == ("dense_packed.vta", layer.name, True)
    assert r.index_recorded == r.index_computed == config.index
    assert r.predicted_s == measure_seconds(layer, config, hw, TimingParams.load())[0]
    assert summary["mape"] == pytest.approx(abs(r.predicted_s / 1.41e-4 - 1) * 100)


def test_model_ranks_the_board_tuned_worked_example_first() -> None:
    # docs/vta.md §7.3 worked example (line 2): AutoTVM kept it as the fastest measured config; the model
    # must order this layer's 40 valid schedules so that it is (one of) the fastest too.
    from codesign.calibrate.replay import rank_recorded

    cases, _ = load_cases(LOG)
    case = next(c for c in cases if c.record.line == 2)
    k = rank_recorded(case, TimingParams.load())
    assert k["n_valid"] == 40
    assert k["faster_configs"] == 0 and k["rank_pct"] == 0.0
    assert k["recorded_over_best"] == pytest.approx(1.0)
