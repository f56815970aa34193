"""Calibration (codesign.calibrate.fit): parameter recovery, provenance, shipped file, metrics."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
from contextlib import redirect_stdout

import numpy as np
import pytest
from scipy.stats import spearmanr

from codesign.calibrate import fit, load_cases, mape, prepare, spearman
from codesign.calibrate.fit import FIT_PARAMS, PRIORS, FitCase, predict_all
from codesign.cli import main
from codesign.paths import SIM_DATA
from codesign.vta.timing import DEFAULT_PARAMS_PATH, TimingParams

LOG = SIM_DATA / "calibration" / "pynq_resnet18.log"


@pytest.fixture(scope="module")
def fcases() -> list[FitCase]:
    cases, skipped = load_cases(LOG)
    assert skipped == []
    out, bad = prepare(cases)
    assert bad == [] and len(out) == 20
    return out


def _with_measured(fcases: list[FitCase], seconds: np.ndarray) -> list[FitCase]:
    out = []
    for fc, s in zip(fcases, seconds):
        rec = dataclasses.replace(fc.case.record, costs=[float(s)])
        out.append(dataclasses.replace(fc, case=dataclasses.replace(fc.case, record=rec)))
    return out


def test_fit_recovers_known_parameters(fcases) -> None:
    truth = TimingParams(dma_bytes_per_cycle_efficiency=0.7, dma_dram_efficiency=0.4, dma_row_overhead=30.0,
                         gemm_loop_overhead=3.0, host_call_s=1e-4, host_per_insn_s=5e-7)
    synthetic = _with_measured(fcases, predict_all(fcases, truth))
    names = ("dma_bytes_per_cycle_efficiency", "dma_dram_efficiency", "dma_row_overhead", "host_per_insn_s")
    start = truth.with_(dma_bytes_per_cycle_efficiency=0.5, dma_dram_efficiency=0.6, dma_row_overhead=5.0,
                        host_per_insn_s=2e-6)
    res = fit(synthetic, start, names)
    for n in names:
        assert getattr(res.params, n) == pytest.approx(getattr(truth, n), rel=0.02), n
    assert mape(res.predicted, [fc.measured_s for fc in synthetic]) < 0.2
    # Parameters not named stay exactly at the base values.
    assert res.params.gemm_loop_overhead == 3.0 and res.params.host_call_s == 1e-4


def test_calibrate_cli_writes_params_with_provenance(tmp_path) -> None:
    log = tmp_path / "cal.log"
    log.write_bytes(LOG.read_bytes())
    out = tmp_path / "params.json"
    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = main(["calibrate", str(log), "-o", str(out), "--no-loo", "--json",
                   "--fit", "dma_bytes_per_cycle_efficiency,host_call_s"])
    assert rc == 0
    printed = json.loads(buf.getvalue())
    doc = json.loads(out.read_text())
    prov = doc["provenance"]
    assert printed["params"] == doc["params"]
    assert TimingParams.load(out) == TimingParams(**doc["params"])
    assert prov["data"] == [{"file": str(log), "sha256": hashlib.sha256(log.read_bytes()).hexdigest(),
                             "records_used": 20}]
    assert prov["records_used"] == 20 and prov["records_skipped"] == []
    assert prov["fitted"] == ["dma_bytes_per_cycle_efficiency", "host_call_s"]
    assert "host_call_s" in prov["priors"]
    assert prov["after"]["mape"] <= prov["before"]["mape"] + 1e-9
    assert "leave_one_out" not in prov
    assert len(prov["per_record"]) == 20


def test_shipped_params_come_from_the_calibration_log() -> None:
    doc = json.loads(DEFAULT_PARAMS_PATH.read_text())
    prov = doc["provenance"]
    assert prov["data"][0]["file"] == "sim/calibration/pynq_resnet18.log"
    assert prov["data"][0]["sha256"] == hashlib.sha256(LOG.read_bytes()).hexdigest()
    assert prov["records_used"] == 20
    assert set(prov["fitted"]) == set(FIT_PARAMS)
    assert set(PRIORS) <= set(prov["priors"])
    assert prov["after"]["mape"] <= 10 and prov["after"]["spearman"] >= 0.95
    loo = prov["leave_one_out"]
    assert len(loo["per_record"]) == 20 and loo["mape"] <= 10
    # Generalization to an unseen hardware config is measured too (fit on one, predict the other).
    assert set(prov["leave_one_config_out"]) == {"pynq_1x16_i8w8a32_15_15_18_17", "pynq_4x8_i8w8a32_15_16_16_18"}
    assert all(m["records"] == 10 for m in prov["leave_one_config_out"].values())


def test_shipped_params_are_current(fcases) -> None:
    # The recorded fit quality must still hold with today's compiler (otherwise re-run
    # `codesign calibrate sim/calibration/pynq_resnet18.log`).
    prov = json.loads(DEFAULT_PARAMS_PATH.read_text())["provenance"]
    pred = predict_all(fcases, TimingParams.load())
    assert mape(pred, [fc.measured_s for fc in fcases]) == pytest.approx(prov["after"]["mape"], abs=1.0)


def test_metrics() -> None:
    assert mape([1.1, 0.9], [1.0, 1.0]) == pytest.approx(10.0)
    a = [3.0, 1.0, 2.0, 2.0, 5.0]
    b = [30.0, 10.0, 25.0, 20.0, 4.0]
    assert spearman(a, b) == pytest.approx(spearmanr(a, b).statistic)
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert np.isnan(spearman([1.0], [2.0]))
