"""The shipped default timing model (issue 35 §5): fitted to every shipped VTA log, with its held-out
errors in its provenance; profiles say where they hold and warn on another hw config."""

from __future__ import annotations

import hashlib
import json
from types import SimpleNamespace

import numpy as np
import pytest

from codesign.calibrate.fit import prepare
from codesign.calibrate.metrics import mape
from codesign.calibrate.profiles import hw_warning, load_profile, transfer_line
from codesign.calibrate.replay import load_cases
from codesign.calibrate.sessions import (
    fit_grouped,
    leave_group_out,
    network_label,
    session_labels,
    shipped_vta_logs,
)
from codesign.paths import ROOT
from codesign.vta.timing import DEFAULT_PARAMS_PATH, TimingParams

PROV = json.loads(DEFAULT_PARAMS_PATH.read_text())["provenance"]
R1x16 = "pynq_1x16_i8w8a32_15_15_18_17"
R4x8 = "pynq_4x8_i8w8a32_15_16_16_18"


def test_shipped_default_is_fitted_on_every_shipped_vta_log() -> None:
    logs = shipped_vta_logs()
    assert {d["file"] for d in PROV["data"]} == {str(p.relative_to(ROOT)) for p in logs}
    for d in PROV["data"]:
        assert d["sha256"] == hashlib.sha256((ROOT / d["file"]).read_bytes()).hexdigest()
    assert PROV["records_used"] == sum(d["records_used"] for d in PROV["data"]) == len(PROV["per_record"])
    assert sum(s["records"] for s in PROV["sessions"].values()) == PROV["records_used"]
    # Held-out errors: one fold per session and per network, every record held out once.
    loso, lono = PROV["leave_one_session_out"]["per_group"], PROV["leave_one_network_out"]["per_group"]
    assert set(loso) == set(PROV["sessions"]) and set(lono) == set(PROV["networks"])
    assert sum(v["records"] for v in loso.values()) == sum(v["records"] for v in lono.values()) == PROV["records_used"]
    assert PROV["leave_one_session_out"]["mape_mean_over_groups"] == pytest.approx(np.mean([v["mape"] for v in loso.values()]))
    # The shipped candidate is the one with the lowest leave-one-session-out error.
    best = min(PROV["candidates"], key=lambda c: c["loso_mape_mean"])
    assert PROV["chosen_rule"] == best["rule"]


def test_shipped_default_matches_a_recomputation_on_a_subset() -> None:
    # Re-predict the 4 AlexNet records with the shipped parameters: the provenance's per-record errors hold.
    log = ROOT / "sim/calibration/pynq_1x16_alexnet.log"
    fcases, _bad = prepare(load_cases([log])[0])
    params = TimingParams.load()
    rows = {r["line"]: r for r in PROV["per_record"] if r["file"] == "sim/calibration/pynq_1x16_alexnet.log"}
    assert len(fcases) == len(rows) == 4
    for fc in fcases:
        assert fc.predict(params) == pytest.approx(rows[fc.case.record.line]["predicted_s"], rel=1e-3)
        assert network_label(fc.case.file, fc.case.record.line) == rows[fc.case.record.line]["network"] == "Alexnet"
    pred = [fc.predict(params) for fc in fcases]
    assert mape(pred, [fc.measured_s for fc in fcases]) == pytest.approx(
        PROV["in_sample"]["per_network"]["Alexnet"]["mape"], abs=0.05)


def test_session_labels_split_on_gaps() -> None:
    day = 86400.0
    t0 = 1562800000.0  # 2019-07-10 23:06 UTC
    labels = session_labels([t0 + 3 * day, t0, t0 + 0.5 * day, t0 + 1.2 * day, t0 + 10 * day])
    assert labels[1] == labels[2] == labels[3] == "2019-07-10"   # gaps under two days: one session
    assert labels[0] == labels[1]                               # 1.8 days after the last: still it
    assert labels[4] == "2019-07-20"                            # 7 days later: a new one


def _fake(call_s: float, out_bytes: float, per_byte: float, ts: float) -> SimpleNamespace:
    """A record whose model time is host_call_s + host_per_out_byte_s * out_bytes (device terms unused)."""
    return SimpleNamespace(measured_s=call_s + per_byte * out_bytes,
                           predict=lambda p: p.host_call_s + p.host_per_out_byte_s * out_bytes,
                           case=SimpleNamespace(record=SimpleNamespace(timestamp=ts)))


def test_leave_one_session_out_on_a_synthetic_set() -> None:
    # Three sessions: A and B have no per-byte host cost, C has 50 ns/B. The call cost is 0.1 ms (the
    # prior's median, so the prior does not pull). Held out, A and B are predicted exactly by a fit on the
    # other two (the min rule's unseen-session value is B's or A's 0); C is predicted at 0 ns/B.
    call, nb = 1e-4, [1e4, 3e4, 1e5]
    sessions, cases = [], []
    for s, per_byte in (("A", 0.0), ("B", 0.0), ("C", 50e-9)):
        for b in nb:
            cases.append(_fake(call, b, per_byte, 0.0))
            sessions.append(s)
    base = TimingParams().with_(host_call_s=3e-4, host_per_out_byte_s=0.0)
    full = fit_grouped(cases, sessions, base, starts=[base])
    assert full.session_values["C"]["host_per_out_byte_s"] == pytest.approx(50e-9, rel=1e-3)
    assert full.default("min").host_per_out_byte_s == pytest.approx(0.0, abs=1e-12)
    out = leave_group_out(cases, sessions, sessions, base, "min", base)["per_group"]
    assert out["A"]["mape"] == pytest.approx(0.0, abs=0.05) and out["B"]["mape"] == pytest.approx(0.0, abs=0.05)
    expect = np.mean([50e-9 * b / (call + 50e-9 * b) for b in nb]) * 100
    assert out["C"]["mape"] == pytest.approx(expect, rel=1e-2)
    assert out["C"]["trained_on"] == ["A", "B"] and out["C"]["records"] == 3


def test_profile_records_where_it_was_fitted_and_warns_on_another_config() -> None:
    _params, doc = load_profile("tophub-2019-08")
    on = doc["provenance"]["fitted_on"]
    assert on["hw"] == [R1x16] and on["sessions"] == ["2019-08-09"]
    line = hw_warning(doc, [R4x8])
    assert line is not None and "\n" not in line
    assert line.startswith(f"warning: profile tophub-2019-08 was fitted on {R1x16}, not {R4x8}")
    assert hw_warning(doc, [R1x16]) is None
    # Its error on the shipped records of other sessions is stated next to its own fit error.
    shipped = doc["provenance"]["shipped_sessions"]
    assert {s for s, t in shipped.items() if not t["own"]} == {"2019-07-11", "2019-07-30"}
    text = transfer_line(doc)
    assert text.startswith(f"fit MAPE {doc['provenance']['after']['mape']:.2f}% on its 22 records")
    for s, t in shipped.items():
        assert f"{s} " in text and f"{t['mape']:.1f}% (shipped default {t['default_mape']:.1f}%)" in text


def test_replay_with_a_profile_of_another_config_warns_once(capsys) -> None:
    from codesign.cli import main

    assert main(["replay", "sim/calibration/pynq_resnet18.log", "--profile", "tophub-2019-08"]) == 0
    out, err = capsys.readouterr()
    warnings = [ln for ln in err.splitlines() if ln.startswith("warning: profile")]
    assert len(warnings) == 1 and R4x8 in warnings[0]
    assert "profile tophub-2019-08: fit MAPE" in out


def test_a_hand_written_profile_has_no_transfer_claims() -> None:
    doc = {"kind": "profile", "name": "slowhost", "params": {"host_call_s": 1e-3}}
    assert hw_warning(doc, [R4x8]) is None
    assert transfer_line(doc).startswith("no fit provenance")


def test_calibrate_default_on_a_subset_matches_a_recomputation(tmp_path, capsys) -> None:
    # `codesign calibrate default LOG -o FILE` on the ResNet-18 log alone (two sessions, one per config):
    # its leave-one-session-out error per session is a fit on the other session, predicted at the rule's value.
    from codesign.cli import main

    log = "sim/calibration/pynq_resnet18.log"
    out = tmp_path / "p.json"
    assert main(["calibrate", "default", log, "-o", str(out), "--json"]) == 0
    prov = json.loads(out.read_text())["provenance"]
    assert prov["records_used"] == 20 and set(prov["sessions"]) == {"2019-07-11", "2019-07-30"}
    assert prov["command"] == f"codesign calibrate default {log} -o FILE"
    fcases, _ = prepare(load_cases([ROOT / log])[0])
    sessions = session_labels([fc.case.record.timestamp for fc in fcases])
    rule = prov["chosen_rule"]
    assert rule != "pooled"
    for held, got in prov["leave_one_session_out"]["per_group"].items():
        train = [fc for fc, s in zip(fcases, sessions) if s != held]
        test = [fc for fc, s in zip(fcases, sessions) if s == held]
        res = fit_grouped(train, [s for s in sessions if s != held], TimingParams(), starts=[TimingParams()])
        pred = [fc.predict(res.default(rule)) for fc in test]
        assert got["mape"] == pytest.approx(mape(pred, [fc.measured_s for fc in test]), rel=0.05, abs=0.2)
    # One network only: no leave-one-network-out fold can be fitted, and none is claimed.
    assert prov["leave_one_network_out"]["per_group"] == {}
    assert main(["calibrate", "default", log, "-o", str(DEFAULT_PARAMS_PATH)]) == 2
