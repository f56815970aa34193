"""`codesign run --layers`: a network's offloaded layers in order, bit-exact against NumPy, per-layer and
total latency, schedules from records / tophub / fallback."""

from __future__ import annotations

import json

import numpy as np
import pytest

from codesign.cli import main
from codesign.hw.config import HwConfig
from codesign.netrun import run_network, simulator_executor
from codesign.schedule import ScheduleSpace
from codesign.tune.records import MeasureRecord
from codesign.vta.timing import default_params
from codesign.workloads import parse_layer

HW = HwConfig.resolve("pynq_1x16")


def test_run_resnet18_simulated_bit_exact_with_tophub_schedules(tmp_path, capsys) -> None:
    png = tmp_path / "run.png"
    assert main(["run", "--workload", "resnet18", "--hw", "pynq_1x16", "--simulate", "--layers", "--json",
                 "--plot", str(png)]) == 0
    res = json.loads(capsys.readouterr().out)
    layers = res["layers"]
    assert len(layers) == 10 and res["all_bit_exact"] and all(r["mismatches"] == 0 for r in layers)
    assert {r["schedule_source"] for r in layers} == {"tophub"}  # VTA's own default schedules
    assert sum(r["count"] for r in layers) == 19
    assert res["total_measured_device_s"] == pytest.approx(sum(r["measured_device_s"] * r["count"] for r in layers))
    # The simulator runs the same timing model the prediction uses.
    for r in layers:
        assert r["measured_device_s"] == pytest.approx(r["predicted_device_s"], rel=1e-12)
        assert r["predicted_s"] > r["predicted_device_s"] and r["measured_call_s"] is None
        assert r["record_s"] is not None
    assert layers[1]["input_source"] == "chained"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_records_override_tophub_and_mismatch_is_reported(tmp_path, capsys) -> None:
    layer = parse_layer("conv2d:1,512,7,7,512,3,3,1,1")
    space = ScheduleSpace(layer, HW)
    config = space.get(int(space.valid_indices()[0]))
    recs = tmp_path / "records.jsonl"
    recs.write_text(MeasureRecord.make(layer, HW, config, 1e-3, 1, None, "test", 0).to_json() + "\n")
    assert main(["run", "--hw", "pynq_1x16", "--simulate", "--layers", "--records", str(recs), "--json"]) == 0
    rows = {r["layer"]: r for r in json.loads(capsys.readouterr().out)["layers"]}
    assert rows[layer.name]["schedule_source"] == "records" and rows[layer.name]["index"] == config.index
    assert rows["conv2d_1x64x56x56_64_3x3_s1_p1"]["schedule_source"] == "tophub"

    sim = simulator_executor(default_params())

    def flaky(layer, config, hw, data, weight):  # a board that corrupts one output byte
        out, s, d = sim(layer, config, hw, data, weight)
        if layer.name == "conv2d_1x64x56x56_128_1x1_s2_p0":
            out = out.copy()
            out.flat[5] = np.int8(out.flat[5] ^ 1)
        return out, s, d

    res = run_network("resnet18", HW, executor=flaky)
    bad = [r for r in res["layers"] if not r["bit_exact"]]
    assert [(r["layer"], r["mismatches"]) for r in bad] == [("conv2d_1x64x56x56_128_1x1_s2_p0", 1)]
    assert res["all_bit_exact"] is False


@pytest.mark.parametrize("argv,expect", [
    (["--records", "{tmp}"], "is a directory"),
    (["--workload", "nonet"], "unknown workload"),
    (["--profile", "nope"], "unknown calibration profile"),
])
def test_run_bad_input_one_line(tmp_path, capsys, argv, expect) -> None:
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(["run", "--hw", "pynq_1x16", "--simulate", "--layers", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and expect in err
