"""The sweep costs the whole network per request: a trial's latency is its network plan's (VTA
steps with the trial's tuned schedules plus CPU steps; the plan `codesign run --records` makes of
the trial's records), the layers it tunes are the plan's VTA
layers, a BATCH=4 design serves a request in its padded batch's time, the report and the layer
plot show CPU steps beside VTA steps, and workloads the network IR cannot represent keep the
offloaded-layers costing with the reason."""

from __future__ import annotations

import json

import pytest

from codesign.commands.report import format_table
from codesign.evaluate.fused import demand, fused_invalid
from codesign.hw import Board, HwConfig
from codesign.hw.resources import estimate
from codesign.netrun.schedules import ScheduleChooser
from codesign.place import VTA, plan_network
from codesign.place.refine import refine
from codesign.sweep.network import network_from_json, network_to_json, timing_network
from codesign.sweep.plots import layer_bars
from codesign.sweep.rows import TrialRow
from codesign.sweep.trial import InnerTuning, LayerTuner, RecordList, evaluate_hw, evaluate_plan
from codesign.workloads import get_workload

# Starts Ray: one Ray module at a time (xdist_group, pyproject addopts) so two local clusters never
# compete for the ports, /tmp/ray and ~/.ray/auth_token of the machine.
pytestmark = pytest.mark.xdist_group("ray")

BOARD = Board.named("pynq-z1")


@pytest.fixture(scope="module")
def resnet18():
    net, why = timing_network("resnet18")
    assert why is None
    return net


def _trial(net, hw_name: str, tuning: InnerTuning | None = None):
    hw = HwConfig.from_name(hw_name)
    records = RecordList()
    tuner = LayerTuner(hw, tuning or InnerTuning(tuner="exhaustive"), records, None)
    result = evaluate_plan(hw, BOARD, net, estimate(hw, BOARD), tuner)
    # The plan `codesign run --records` makes of the trial's records: each fused op on the fastest
    # of its layer's best records for its own epilogue.
    chooser = ScheduleChooser(hw, records.records)
    plan, _chosen = refine(plan_network(net, hw, BOARD, chooser), chooser)
    return hw, tuner, result, plan


@pytest.fixture(scope="module")
def trial_1x16(resnet18):
    return _trial(resnet18, "pynq_1x16_i8w8a32_15_15_18_17")


def test_trial_latency_is_the_plan_latency_of_its_tuned_schedules(resnet18, trial_1x16):
    hw, tuner, r, plan = trial_1x16
    assert r["feasible"] and r["scope"] == "whole network"
    assert r["latency_ms"] == pytest.approx(plan.latency_s * 1e3, rel=1e-12)
    # never slower than the plan of each layer's plain best (what a trial scored before refining)
    plain = plan_network(resnet18, hw, BOARD, lambda layer: (tuner.results[layer][0].best,
                                                             tuner.results[layer][1].seconds))
    assert r["latency_ms"] <= plain.latency_s * 1e3 * (1 + 1e-12)
    assert r["throughput_ips"] == pytest.approx(plan.throughput_ips, rel=1e-12)
    assert r["vta_ms"] + r["cpu_ms"] == pytest.approx(r["latency_ms"], rel=1e-12)
    assert r["cpu_ms"] > 0  # the CPU steps (pools, host passes, ...) are counted
    # The layers the trial reports are the plan's VTA layers (rewritten stem, padded dense included)
    vta_layers = [s.layer.name for s in plan.steps if s.placement == VTA]
    assert {x["layer"] for x in r["layers"]} == set(vta_layers)
    assert sum(x["count"] for x in r["layers"]) == len(vta_layers)
    # and each one was tuned by the trial: its row is the best of its tuning
    for x in r["layers"]:
        (layer,) = [lay for lay in tuner.results if lay.name == x["layer"]]
        assert x["seconds"] == tuner.results[layer][0].best_seconds
    # every op of the graph is in a step, on VTA or the CPU
    placed = {op for s in plan.steps for op in s.ops}
    assert placed == {op.name for op in resnet18.ops}
    assert [s["placement"] for s in r["steps"]] == [s.placement for s in plan.steps]
    # a layers-only evaluation of the same design counts less: only the offloaded convs
    old = evaluate_hw(hw, BOARD, get_workload("resnet18"), tuner="exhaustive")
    assert old["scope"] == "offloaded layers" and old["latency_ms"] < r["latency_ms"]


def test_trial_plans_on_a_schedule_that_fits_the_residual_without_scanning_the_templates(resnet18, monkeypatch):
    # On this design the default search's best schedule of a 3x3 conv has no SRAM room for the residual
    # tile: the trial asks the planner for the fastest measured schedule that fits the layer's most
    # demanding epilogue (as `codesign run --records` does), so the planner never falls back to timing
    # every template schedule with the epilogue (~0.7 CPU-s a layer), and scores what `run` executes.
    import codesign.place.plan as plan_mod

    def no_scan(*args, **kwargs):
        raise AssertionError("the planner scanned the template space for a schedule with room for the epilogue")
        yield  # a generator, as the function it replaces

    monkeypatch.setattr(plan_mod, "_fallback_configs", no_scan)
    hw, tuner, r, plan = _trial(resnet18, "pynq_1x16_i8w8a32_14_15_17_17_200MHz", InnerTuning())
    assert r["latency_ms"] == pytest.approx(plan.latency_s * 1e3, rel=1e-12)
    fits_not = [layer for layer, (res, _best) in tuner.results.items()
                if fused_invalid(layer, res.best, hw, demand(layer, hw)) is not None]
    assert fits_not  # the case this test is about: some tuned best cannot host the residual


def test_batch4_design_serves_a_request_in_its_padded_batch_time(resnet18):
    hw, tuner, r, plan = _trial(resnet18, "pynq_4x8_i8w8a32_15_16_16_18")
    assert hw.batch == 4 and r["batch"] == plan.batch == 4
    assert r["latency_ms"] == pytest.approx(plan.latency_s * 1e3, rel=1e-12)
    # never slower than the plan of each layer's plain best (what a trial scored before refining)
    plain = plan_network(resnet18, hw, BOARD, lambda layer: (tuner.results[layer][0].best,
                                                             tuner.results[layer][1].seconds))
    assert r["latency_ms"] <= plain.latency_s * 1e3 * (1 + 1e-12)
    # the VTA steps of one request take the batch-4 layers' time: the request waits for its batch
    for s in plan.steps:
        if s.placement == VTA:
            assert s.layer.batch == 4
    vta = [x for x in r["layers"]]
    assert sum(x["seconds"] * x["count"] for x in vta) * 1e3 <= r["vta_ms"] * (1 + 1e-9)
    # images per second: a full batch of 4 requests per padded-batch time (CPU steps once per image)
    assert r["throughput_ips"] == pytest.approx(4 / plan.batch_latency_s, rel=1e-12)
    assert r["throughput_ips"] > 1e3 / r["latency_ms"]  # more than one image per request time


def test_report_and_layer_plot_show_cpu_steps_beside_vta_steps(trial_1x16):
    _hw, _tuner, r, plan = trial_1x16
    point = TrialRow.from_json({"trial_id": "t0", **r}).point()
    pts, names, per_design, _note = layer_bars([point])
    cpu_bars = [n for n in names if n.startswith("CPU ")]
    assert cpu_bars and any(n.startswith("VTA ") for n in names)
    cpu_kinds = {s.kind for s in plan.steps if s.placement != VTA}
    # each CPU op kind has its bar, or is one of the tiny ones summed into "CPU other (N kinds)"
    other = [n for n in cpu_bars if n.startswith("CPU other (")]
    grouped = int(other[0].split("(")[1].split()[0]) if other else 0
    named = {n[4:] for n in cpu_bars if n not in other}
    assert named <= cpu_kinds and len(cpu_kinds - named) == grouped
    assert sum(per_design[0].values()) == pytest.approx(r["latency_ms"], rel=1e-9)  # nothing lost
    doc = {"points": [point], "hypervolume": 1.0, "reference_point": {"latency_ms": 1e3, "area": 1.1, "power_w": 9.0},
           "stock_comparison": {}}
    table = format_table(doc)
    (line,) = [x for x in table.splitlines() if x.startswith(f"  {point.config}: VTA")]
    slowest_cpu = max((s for s in plan.steps if s.placement != VTA), key=lambda s: s.predicted_s)
    n_cpu = sum(s.placement != VTA for s in plan.steps)
    assert f"CPU {r['cpu_ms']:.2f} ms in {n_cpu} steps" in line
    assert slowest_cpu.name in line


def test_graph_round_trips_through_sweep_json(resnet18):
    back = network_from_json(json.loads(json.dumps(network_to_json(resnet18))))
    assert back.rows() == resnet18.rows()
    hw = HwConfig.from_name("pynq_1x16_i8w8a32_15_15_18_17")
    from codesign.place import chooser

    assert plan_network(back, hw, BOARD, chooser(hw)).latency_s == plan_network(resnet18, hw, BOARD, chooser(hw)).latency_s


SOFTPLUS = """\
import torch
from torch import nn

def net():
    return nn.Sequential(nn.Conv2d(16, 16, 3), nn.Softplus(), nn.Flatten(), nn.Linear(16 * 6 * 6, 10)), \\
        (torch.zeros(1, 16, 8, 8),)
"""


def test_network_the_ir_cannot_represent_keeps_the_layers_costing(tmp_path):
    from codesign.sweep.runner import _network_options

    (tmp_path / "soft.py").write_text(SOFTPLUS)
    spec = f"{tmp_path / 'soft.py'}:net"
    net, why = timing_network(spec)
    assert net is None and "softplus" in why
    doc, note = _network_options(spec)
    assert doc is None and note == why
    r = evaluate_hw(HwConfig.from_name("pynq_1x16_i8w8a32_15_15_18_17"), BOARD, get_workload(spec),
                    tuner="random", budget=2)
    assert r["feasible"] and r["scope"] == "offloaded layers" and r["cpu_ms"] is None


def test_the_zoos_lstm_is_costed_whole():
    net, why = timing_network("lstm")
    assert why is None and {"sigmoid", "tanh", "binary", "linear"} <= set(net.counts())


SPACE = """\
board: pynq-z1
params:
  LOG_BLOCK: [4]
fixed: {LOG_INP_BUFF_SIZE: 15, LOG_WGT_BUFF_SIZE: 18, LOG_ACC_BUFF_SIZE: 17, LOG_UOP_BUFF_SIZE: 15, clock_mhz: 100}
"""


def test_sweep_of_a_zoo_network_writes_the_whole_network(ray_session, tmp_path, capsys):
    from codesign.cli import main
    from codesign.sweep import run_sweep
    from codesign.sweep.options import SweepOptions

    (tmp_path / "s.yaml").write_text(SPACE)
    out = tmp_path / "sweep"
    result = run_sweep(tmp_path / "s.yaml", "resnet18", out,
                       SweepOptions(trials=None, search="grid", tuner="exhaustive"), progress=False)
    saved = json.loads((out / "sweep.json").read_text())
    assert saved["network"]["name"] == "resnet18" and saved["network_note"] is None
    (point,) = result.pareto.points
    assert point.scope == "whole network" and point.config == "pynq_1x16_i8w8a32_15_15_18_17"
    assert {s.placement for s in point.steps} == {"vta", "cpu"}
    assert point.latency_ms == pytest.approx(point.vta_ms + point.cpu_ms, rel=1e-12)
    assert result.pareto.scopes == ["whole network"]
    assert main(["report", str(out)]) == 0
    text = capsys.readouterr().out
    assert "latency counts: whole network" in text and f"  {point.config}: VTA" in text
