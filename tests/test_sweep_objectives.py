"""`--objectives`: throughput is maximized (the front, the hypervolume, the reference point and the
searcher agree), pareto.json and trials.jsonl say what each objective measures, bad lists are one
line."""

from __future__ import annotations

import json

import pytest

from codesign.errors import ConfigError
from codesign.pareto import ParetoFront, hypervolume, reference_point, stock_comparison
from codesign.pareto.objectives import objective_values, parse_objectives
from codesign.sweep.options import SweepOptions

# Starts Ray: one Ray module at a time (xdist_group, pyproject addopts) so two local clusters never
# compete for the ports, /tmp/ray and ~/.ray/auth_token of the machine.
pytestmark = pytest.mark.xdist_group("ray")

LT = ("latency_ms", "throughput_ips")


def _p(name: str, latency: float, throughput: float) -> dict:
    return {"config": name, "latency_ms": latency, "throughput_ips": throughput}


def test_front_maximizes_throughput() -> None:
    single = _p("single", 10.0, 100.0)  # BATCH 1: fastest request
    batched = _p("batched", 16.0, 250.0)  # BATCH 4: slower request, more images/s
    worse = _p("worse", 16.0, 200.0)  # as slow as `batched`, fewer images/s: dominated
    front = ParetoFront(LT, [single, batched, worse])
    assert {p.config for p in front} == {"single", "batched"}  # minimizing both would keep only `single`
    assert [p.config for p in front.dominated_by(worse)] == ["batched"]
    assert objective_values(batched, LT) == (16.0, -250.0)  # signed: smaller is better
    ref = reference_point([single, batched], objectives=LT)
    assert ref == {"latency_ms": pytest.approx(1.1 * 16.0), "throughput_ips": pytest.approx(100.0 / 1.1)}
    # rectangle areas: (17.6 - 10) x (100 - 90.9) + (17.6 - 16) x (250 - 100)
    expect = (17.6 - 10.0) * (100.0 - 100.0 / 1.1) + (17.6 - 16.0) * (250.0 - 100.0)
    assert front.hypervolume(ref) == pytest.approx(expect)
    assert hypervolume([single, batched, worse], ref, LT) == pytest.approx(expect)
    comp = stock_comparison(front, [worse], LT)["worse"]
    assert comp.dominated_by == ["batched"] and comp.objectives == {"latency_ms": 16.0, "throughput_ips": 200.0}


def test_bad_objectives_are_one_line() -> None:
    assert parse_objectives("latency,throughput") == LT
    with pytest.raises(ConfigError, match="'speed': unknown objective; allowed: latency, area, power, throughput"):
        parse_objectives("latency,speed")
    with pytest.raises(ConfigError, match="at least two distinct"):
        SweepOptions(objectives=("latency_ms", "latency_ms"))


def test_cli_bad_objectives_prints_one_line_and_creates_nothing(tmp_path, capsys) -> None:
    from codesign.cli import main

    assert main(["sweep", "--objectives", "latency,speed", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--objectives 'speed'" in err[0]
    assert not (tmp_path / "o").exists()


SPACE = """\
board: pynq-z1
params:
  LOG_BATCH: [0, 2]
  LOG_BLOCK: [3, 4]
fixed: {LOG_INP_BUFF_SIZE: 14, LOG_WGT_BUFF_SIZE: 16, LOG_ACC_BUFF_SIZE: 16, clock_mhz: 100}
"""


def test_sweep_with_throughput_objective(ray_session, tmp_path, capsys) -> None:
    from codesign.commands.report import format_table
    from codesign.sweep import run_sweep
    from codesign.workloads import Workload

    (tmp_path / "s.yaml").write_text(SPACE)
    wl = Workload("tiny", (("conv2d:1,32,8,8,32,3,3,1,1", 2),))
    out = tmp_path / "sweep"
    run_sweep(tmp_path / "s.yaml", wl, out, SweepOptions(trials=None, budget=4, tuner="random", search="grid",
                                                         seed=0, objectives=LT), progress=False)
    rows = [json.loads(x) for x in (out / "trials.jsonl").read_text().splitlines()]
    feasible = [r for r in rows if r["feasible"]]
    assert {r["batch"] for r in feasible} == {1, 4}
    for r in feasible:  # one request = the padded batch; images/s with full batches
        assert r["throughput_ips"] == pytest.approx(r["batch"] / (r["latency_ms"] * 1e-3), rel=1e-12)
    assert all([o["key"] for o in r["objective_info"]] == list(LT) for r in rows)
    doc = json.loads((out / "pareto.json").read_text())
    assert doc["objectives"] == list(LT)
    info = {o["key"]: o for o in doc["objective_info"]}
    assert info["throughput_ips"]["direction"] == "max" and "images per second" in info["throughput_ips"]["measures"]
    assert "one request" in info["latency_ms"]["measures"]
    # the front is the brute-force non-dominated set with throughput maximized
    vec = {r["config"]: (r["latency_ms"], -r["throughput_ips"]) for r in feasible}
    brute = {c for c, v in vec.items()
             if not any(all(a <= b for a, b in zip(w, v)) and w != v for w in vec.values())}
    assert {p["config"] for p in doc["points"]} == brute
    assert any(p["batch"] == 4 for p in doc["points"])  # kept for its images/s although slower per request
    table = format_table(doc)
    assert "throughput_ips (max)" in table and "latency_ms: time of one request" in table
