"""Calibration never writes over shipped files, refuses unpinnable fits, and profiles fit the
host (environment) terms the data pin."""

from __future__ import annotations

import hashlib
import json

import pytest

from codesign.calibrate import profiles
from codesign.cli import main
from codesign.evaluate.compiler import compile_insns
from codesign.evaluate.run import layer_io_bytes, measure_seconds
from codesign.hw.config import HwConfig
from codesign.paths import SIM_DATA
from codesign.tune.records import MeasureRecord
from codesign.vta.timing import DEFAULT_PARAMS_PATH, TimingParams

LOG = SIM_DATA / "calibration" / "pynq_resnet18.log"


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(autouse=True)
def _profile_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(profiles.PROFILE_DIR_ENV, str(tmp_path / "profiles"))


def test_calibrate_without_output_never_touches_shipped_params(tmp_path, capsys) -> None:
    # Issue 9: `codesign calibrate LOG` without -o overwrote sim/timing_params.json.
    short = tmp_path / "three.log"
    short.write_text("\n".join(LOG.read_text().splitlines()[:3]) + "\n")
    before = _sha(DEFAULT_PARAMS_PATH)
    assert main(["calibrate", str(short)]) == 2
    err = capsys.readouterr().err
    assert "-o FILE" in err and "--profile" in err and len(err.strip().splitlines()) == 1
    assert main(["calibrate", str(LOG), "-o", str(DEFAULT_PARAMS_PATH)]) == 2
    assert "never overwritten" in capsys.readouterr().err
    assert _sha(DEFAULT_PARAMS_PATH) == before


def test_calibrate_refuses_more_parameters_than_records_pin(tmp_path, capsys) -> None:
    short = tmp_path / "three.log"
    short.write_text("\n".join(LOG.read_text().splitlines()[:3]) + "\n")
    out = tmp_path / "p.json"
    assert main(["calibrate", str(short), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "2 usable record(s) cannot pin 7 free parameter(s)" in err and "at least 8 records" in err
    assert not out.exists()
    # Two free parameters are fine with these two records plus the host_call_s prior.
    assert main(["calibrate", str(short), "-o", str(out), "--fit", "dma_row_overhead,host_call_s", "--no-loo"]) == 0
    assert out.exists()


def test_shipped_profiles_are_never_overwritten(capsys) -> None:
    shipped = SIM_DATA / "profiles" / "tophub-2019.json"
    before = _sha(shipped)
    assert main(["calibrate", "--profile", "tophub-2019", str(LOG)]) == 2
    assert "never overwritten" in capsys.readouterr().err
    assert main(["calibrate", "--profile", str(shipped), str(LOG)]) == 2
    assert _sha(shipped) == before


def test_profile_fit_on_shipped_data_and_use_in_replay(tmp_path, capsys) -> None:
    assert main(["calibrate", "--profile", "lab", str(LOG), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    prov = doc["provenance"]
    assert doc["kind"] == "profile" and prov["records_used"] == 20
    assert prov["data"][0]["sha256"] == _sha(LOG)
    assert set(prov["fitted"]) | set(prov["not_fitted"]) == set(profiles.ENV_TERMS)
    for t in prov["not_fitted"]:  # terms not chosen keep the shipped value
        assert doc["params"][t] == getattr(TimingParams.load(), t)
    assert prov["after"]["mape"] < 3 and prov["leave_one_out"]["mape"] < 4
    written = tmp_path / "profiles" / "lab.json"
    assert written.exists()
    assert main(["replay", str(LOG), "--profile", "lab", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)["summary"]
    assert "profile lab" in summary["params"]
    assert summary["mape"] == pytest.approx(prov["after"]["mape"], rel=1e-6)
    assert main(["replay", str(LOG), "--profile", "missing"]) == 2
    assert "unknown calibration profile 'missing'" in capsys.readouterr().err


def _synthetic_records(path, inject: TimingParams, with_device_time: bool, sample) -> int:
    """Measurements of the ResNet-18 layers on two configs: the device model's time plus an injected
    host cost (the emulated board's device timing with a host that costs per call and per byte)."""
    lines = []
    for layer, hw, configs in sample:
        timed = sorted((measure_seconds(layer, c, hw), c.index, c) for c in configs)
        for (_s, cycles), _i, config in timed[:2]:  # good schedules, as a tuner would keep
            device_s = cycles / hw.clock_hz
            i, o = layer_io_bytes(layer)
            n = int(compile_insns(layer, config, hw).insns.shape[0])
            host = (inject.host_call_s + inject.host_per_insn_s * n + inject.host_per_in_byte_s * i
                    + inject.host_per_out_byte_s * o)
            rec = json.loads(MeasureRecord.make(layer, hw, config, device_s + host, cycles, None, "board", 0).to_json())
            if with_device_time:  # a board record: device time measured apart from the call
                rec["device_s"] = device_s
            lines.append(json.dumps(rec))
    path.write_text("\n".join(lines) + "\n")
    return len(lines)


@pytest.mark.parametrize("with_device_time", [False, True])
def test_profile_recovers_injected_per_byte_host_cost(tmp_path, capsys, with_device_time,
                                                     resnet18_schedule_sample) -> None:
    # The profile holds the terms it does not fit at the shipped values, so the emulated host has the
    # shipped per-instruction cost (issue 35 §5: 0.2 us with the default fitted to every shipped log; it
    # was 1.9 ns, and ignored here, when the default was fitted to the ResNet-18 records alone).
    truth = TimingParams().with_(host_call_s=2.0e-4, host_per_insn_s=TimingParams.load().host_per_insn_s,
                                 host_per_in_byte_s=0.0, host_per_out_byte_s=4.0e-9)
    recs = tmp_path / "board.jsonl"
    n = _synthetic_records(recs, truth, with_device_time, resnet18_schedule_sample)
    assert n >= 20
    assert main(["calibrate", "--profile", "emulated", str(recs), "--terms",
                 "host_call_s,host_per_out_byte_s", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["provenance"]["records_with_device_time"] == (n if with_device_time else 0)
    assert doc["params"]["host_per_out_byte_s"] == pytest.approx(4.0e-9, rel=0.03)
    assert doc["params"]["host_call_s"] == pytest.approx(2.0e-4, rel=0.05)
    assert doc["provenance"]["after"]["mape"] < 0.5


def test_explicit_unpinnable_term_is_refused_with_records_needed(tmp_path, capsys, resnet18_schedule_sample) -> None:
    truth = TimingParams().with_(host_call_s=2.0e-4, host_per_out_byte_s=4.0e-9)
    recs = tmp_path / "board.jsonl"
    _synthetic_records(recs, truth, False, resnet18_schedule_sample)
    few = tmp_path / "few.jsonl"
    few.write_text("\n".join(recs.read_text().splitlines()[:2]) + "\n")
    assert main(["calibrate", "--profile", "x", str(few), "--terms", profiles.ENV_TERMS[0] + ",host_per_insn_s"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "cannot be pinned by these 2 records" in err and "records with this spread" in err
    assert not (tmp_path / "profiles" / "x.json").exists()


def test_tune_and_sweep_trial_use_the_profile(tmp_path, capsys) -> None:
    from codesign.hw import Board
    from codesign.sweep.options import SweepOptions
    from codesign.sweep.trial import evaluate_hw
    from codesign.workloads import Workload

    # A profile whose host costs 1 ms more per call than the shipped fit.
    shipped = TimingParams.load()
    doc = {"kind": "profile", "name": "slowhost", "params": {"host_call_s": shipped.host_call_s + 1e-3}}
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "slowhost.json").write_text(json.dumps(doc))
    layer = "conv2d:1,32,8,8,32,3,3,1,1"
    argv = ["tune", "--layer", layer, "--hw", "pynq_1x16", "--tuner", "random", "--trials", "4", "--json"]
    assert main(argv) == 0
    base = json.loads(capsys.readouterr().out)["best"]["seconds"]
    assert main([*argv, "--profile", "slowhost"]) == 0
    slow = json.loads(capsys.readouterr().out)["best"]["seconds"]
    assert slow - base == pytest.approx(1e-3, rel=1e-6)

    hw, board, wl = HwConfig.resolve("pynq_1x16"), Board.named("pynq-z1"), Workload("tiny", ((layer, 2),))
    params, _ = profiles.resolve_params("slowhost")
    a = evaluate_hw(hw, board, wl, tuner="random", budget=3, seed=0)
    b = evaluate_hw(hw, board, wl, tuner="random", budget=3, seed=0, params=params)
    assert b["latency_ms"] - a["latency_ms"] == pytest.approx(2 * 1.0, rel=1e-6)  # 2 calls x 1 ms
    opts = SweepOptions(space="space.yaml", workload="resnet18", profile="slowhost")
    assert SweepOptions.from_json(opts.to_json()).profile == "slowhost"
