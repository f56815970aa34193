"""XGBoost with transfer (AutoTVM's transfer learning): a base model trained on records of other
layers and another hardware config ranks a new layer's configs before anything is measured, so
the tuner reaches the optimum in fewer measurements than cold; `auto` picks exhaustive search
on the simulator and the learned tuner when a measurement is expensive."""

from __future__ import annotations

import json

import numpy as np

from codesign.hw.config import HwConfig
from codesign.paths import SHIPPED_AGENT
from codesign.tune import MeasureRecord, TableRunner, exhaustive_table, tune_layer
from codesign.tune.auto import AutoTuner
from codesign.tune.task import make_task
from codesign.workloads import parse_layer

HW = HwConfig()
OTHER_HW = HW.with_(LOG_INP_BUFF_SIZE=14)  # another hardware config
TRAIN = [parse_layer(s) for s in ("conv2d:1,64,14,14,64,3,3,1,1", "conv2d:1,32,16,16,64,3,3,1,1",
                                  "conv2d:1,64,16,16,32,1,1,1,0")]
HELD = parse_layer("conv2d:1,128,14,14,128,3,3,1,1")


def _records() -> list[MeasureRecord]:
    out = []
    for hw in (HW, OTHER_HW):
        for layer in TRAIN:
            res = tune_layer(layer, hw, tuner="random", budget=24, seed=0, runner=TableRunner(exhaustive_table(layer, hw)))
            out += [MeasureRecord.make(layer, hw, h.config, h.seconds, h.cycles, h.error, "random", 0, 0.0)
                    for h in res.history]
    return out


def _n95(res, opt: float) -> float:
    hit = np.flatnonzero(opt / res.curve() >= 0.95)
    return float(hit[0] + 1) if hit.size else np.inf


def test_transferred_xgb_needs_fewer_measurements_than_cold():
    records = _records()
    table = exhaustive_table(HELD, HW)
    opt = min(v[0] for v in table.values())
    cold, warm = [], []
    for seed in range(5):
        cold.append(_n95(tune_layer(HELD, HW, tuner="xgb", budget=40, seed=seed, runner=TableRunner(table)), opt))
        warm.append(_n95(tune_layer(HELD, HW, tuner="xgb", budget=40, seed=seed, runner=TableRunner(table),
                                    warm_start=records), opt))
    assert np.median(warm) < np.median(cold)
    assert np.median(warm) <= 8  # ranked by the base model before the task's own model exists


def test_auto_is_exhaustive_when_cheap_and_learned_when_expensive():
    table = exhaustive_table(HELD, HW)
    n_valid = len(table)
    cheap = tune_layer(HELD, HW, tuner="auto", budget=None, seed=0, runner=TableRunner(table, cost_s=1e-3))
    assert cheap.measurements == n_valid and cheap.best_seconds == min(v[0] for v in table.values())
    # A board-like cost: the pretrained agent shipped with the package (trained on simulator data)
    task = make_task(HELD, HW, "auto", 0, time_budget_s=10.0, learned_budget=12)
    costly = tune_layer(HELD, HW, tuner=task.tuner, budget=None, seed=0, runner=TableRunner(table, cost_s=5.0))
    assert isinstance(task.tuner, AutoTuner) and task.tuner.choice["search"] == "bandit"
    assert task.tuner.choice["agent"] == str(SHIPPED_AGENT) and SHIPPED_AGENT.stat().st_size < 1 << 20
    provenance = json.loads(SHIPPED_AGENT.with_suffix(".pt.json").read_text())
    assert provenance["trained_on"].startswith("simulator") and provenance["command"].startswith("python benchmarks/")
    assert costly.measurements == 12
    assert task.tuner.choice["exhaustive_s"] == 5.0 * n_valid
    forced = make_task(HELD, HW, "auto", 0, learned="xgb", learned_budget=12)
    tune_layer(HELD, HW, tuner=forced.tuner, budget=None, seed=0, runner=TableRunner(table, cost_s=5.0))
    assert forced.tuner.choice["search"] == "xgb" and forced.tuner.choice["agent"] is None
