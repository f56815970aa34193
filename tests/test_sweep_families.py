"""The sweep's whole-network trial tunes the plan's VTA layers as one task set (issue 19 §2): the
task scheduler spends the learned layers' measurements where they save the most per request
(weights = occurrences per request), within the same total budget as tuning them one by one, and
the request's latency is no worse than the even split of that budget."""

from __future__ import annotations

import statistics

import pytest

from codesign.hw import Board, HwConfig
from codesign.hw.resources import estimate
from codesign.place import choose_layers, plan_network
from codesign.sweep.network import shapes_only, vta_layer_counts
from codesign.sweep.trial import InnerTuning, LayerTuner, evaluate_plan
from codesign.tune import search as search_mod

BOARD = Board.named("pynq-z1")
HW = HwConfig.from_name("pynq_1x16_i8w8a32_15_15_18_17")
BUDGET = 24  # measurements per layer: the pool is BUDGET x the plan's layers
SEEDS = range(8)


@pytest.fixture(scope="module")
def net():
    """A stem, three residual blocks of one 64-channel 3x3 conv (6 occurrences per request), a
    strided conv and a dense classifier (shapes only, as a sweep costs it)."""
    import torch
    from torch import nn

    from codesign.network.importer import import_network

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c0 = nn.Conv2d(16, 64, 3, 1, 1)
            self.b = nn.ModuleList(nn.Conv2d(64, 64, 3, 1, 1) for _ in range(6))
            self.down = nn.Conv2d(64, 128, 3, 2, 1)
            self.fc = nn.Linear(128, 16)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.relu(self.c0(x))
            for k in range(0, 6, 2):
                y = torch.relu(self.b[k + 1](torch.relu(self.b[k](y))) + y)
            y = torch.relu(self.down(y))
            return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(y, 1), 1))

    return shapes_only(import_network(Net().eval(), (torch.zeros(1, 16, 14, 14),), "blocks"))


def _trial(net, seed: int, scheduler: str = "gain") -> tuple[dict, LayerTuner]:
    tuner = LayerTuner(HW, InnerTuning(tuner="random", budget=BUDGET, seed=seed, scheduler=scheduler), None, None)
    return evaluate_plan(HW, BOARD, net, estimate(HW, BOARD), tuner), tuner


def test_choose_layers_are_what_the_plan_asks_with_their_occurrences(net):
    asked = choose_layers(net, HW, BOARD)
    seen: list = []

    def choose(layer):
        seen.append(layer)
        from codesign.place import best_template_schedule

        return best_template_schedule(layer, HW)

    plan = plan_network(net, HW, BOARD, choose)
    assert set(seen) == set(asked)
    for layer, count in vta_layer_counts(plan).items():
        assert asked[layer] == count
    assert sorted(asked.values()) == [1, 1, 1, 6]


def test_whole_network_trial_spends_one_pool_through_the_scheduler(net, monkeypatch):
    made = []
    real = search_mod.TaskScheduler  # the default search's one loop (codesign.tune.search)

    def spy(runs, weights=None, **kw):
        made.append([r.task.layer for r in runs])
        made[-1] = dict(zip(made[-1], weights))
        return real(runs, weights, **kw)

    monkeypatch.setattr(search_mod, "TaskScheduler", spy)
    r, tuner = _trial(net, seed=0)
    # One task set: every layer the plan asks about, weighted by its occurrences per request.
    assert made == [choose_layers(net, HW, BOARD)]
    spent = {row["layer"]: row["measurements"] for row in r["layers"]}
    heavy = max(r["layers"], key=lambda row: row["count"])
    assert heavy["count"] == 6
    # The same total budget as tuning the layers one by one, spent unevenly: the 6-fold layer
    # gets more than its own share, the others less or their share.
    assert r["measurements"] == BUDGET * len(made[0])
    assert spent[heavy["layer"]] > BUDGET
    assert len(set(spent.values())) > 1


def test_scheduled_latency_is_no_worse_than_the_even_split(net):
    gain = [_trial(net, s)[0] for s in SEEDS]
    even = [_trial(net, s, "even")[0] for s in SEEDS]
    # The even split spends each layer's own budget (the dense's space is smaller: it stops there).
    assert sum(r["measurements"] for r in gain) >= sum(r["measurements"] for r in even)
    assert all(r["measurements"] == BUDGET * 4 for r in gain)  # the whole pool, no more
    assert statistics.mean(r["latency_ms"] for r in gain) <= statistics.mean(r["latency_ms"] for r in even)


def test_report_lists_the_steps_of_the_first_few_front_designs_unless_asked_for_all(capsys, tmp_path):
    import json

    from codesign.cli import main
    from codesign.commands.report import STEPS_SHOWN

    steps = [{"name": "conv", "kind": "conv2d", "placement": "vta", "ms": 2.0},
             {"name": "pool", "kind": "max_pool2d", "placement": "cpu", "ms": 1.0}]
    points = [{"config": f"d{k:02d}", "latency_ms": 10.0 + k, "area": 0.9 - 0.01 * k, "power_w": 3.0,
               "clock_verified": True, "steps": steps} for k in range(STEPS_SHOWN + 7)]
    doc = {"points": points, "hypervolume": 1.0, "stock_comparison": {},
           "reference_point": {"latency_ms": 100.0, "area": 1.1, "power_w": 4.0}}
    (tmp_path / "pareto.json").write_text(json.dumps(doc))

    def listed(*flags: str) -> list[str]:
        assert main(["report", str(tmp_path), *flags]) == 0
        return [line.split(":")[0].strip() for line in capsys.readouterr().out.splitlines()
                if line.startswith("  d") and "VTA 2.00 ms in 1 steps" in line]

    # the fastest few, in table order, and a line saying how to see the rest
    assert listed() == [f"d{k:02d}" for k in range(STEPS_SHOWN)]
    assert listed("--sort", "area") == [f"d{k:02d}" for k in reversed(range(7, STEPS_SHOWN + 7))]
    assert listed("--all-steps") == [f"d{k:02d}" for k in range(STEPS_SHOWN + 7)]


def test_evaluate_hw_tunes_the_family_it_is_given():
    from codesign.sweep.trial import evaluate_hw
    from codesign.workloads import Workload

    # 4x4 pixels: 16,000 valid vta schedules timed (~8 s); the 8x8 conv's 90,000 took 90 s for the same claim
    wl = Workload("one", (("conv2d:1,32,4,4,32,3,3,1,1", 2),))
    rows = {f: evaluate_hw(HW, BOARD, wl, tuner="exhaustive", schedules=f) for f in ("autotvm", "vta")}
    assert "order" in rows["vta"]["layers"][0]["knobs"] and "order" not in rows["autotvm"]["layers"][0]["knobs"]
    # the vta family contains the template's schedules: its exhaustive optimum is never slower
    assert rows["vta"]["latency_ms"] <= rows["autotvm"]["latency_ms"] * (1 + 1e-12)
    assert rows["vta"]["measurements"] > rows["autotvm"]["measurements"]
