"""The search on the `vta` schedule family (issue 19 §2): `auto` never ends worse than the
template, records are resolved by knob values (the family's index changes as it grows), and a
shipped agent of another feature length is refused in one line, then XGBoost searches."""

from __future__ import annotations

import math

import numpy as np
import pytest

from codesign.evaluate.compiler import compile_layer
from codesign.evaluate.run import measure
from codesign.hw.config import HwConfig
from codesign.mapping.edges import edge_bits
from codesign.schedule import edge_rules, get_space
from codesign.schedule.knobs import Knob
from codesign.schedule.vta import producer
from codesign.schedule.vta_space import VtaSpace
from codesign.tune import MeasureRecord, TableRunner, exhaustive_table, tune_layer
from codesign.tune import auto as auto_mod
from codesign.tune import records as records_mod
from codesign.tune.bandit import BanditAgent
from codesign.tune.loop import TaskRun
from codesign.tune.records import best_any_family, resolve_config
from codesign.tune.scheduler import TaskScheduler
from codesign.tune.task import make_task
from codesign.vta import timing
from codesign.workloads import Conv2D, parse_layer

HW = HwConfig()
LAYER = parse_layer("conv2d:1,16,8,8,16,3,3,1,1")  # ~350 valid vta schedules, 16 template ones
# One worker for the three files that time every vta schedule of LAYER: exhaustive_table's in-process
# cache then times them once.
pytestmark = pytest.mark.xdist_group("vta_table_conv2d_1x16x8x8")


@pytest.fixture(scope="module")
def table():
    return exhaustive_table(LAYER, HW, family="vta")


def _template_opt(table) -> float:
    vta, tmpl = get_space(LAYER, HW, "vta"), get_space(LAYER, HW)
    return min(table[vta.from_template(tmpl.get(int(i))).index][0] for i in tmpl.valid_indices())


def test_auto_times_the_template_first_when_the_family_is_too_big(table):
    n_template = get_space(LAYER, HW).n_valid
    assert len(table) * 0.01 > 1.0 >= n_template * 0.01  # the family does not fit the budget, its templates do
    # one seed: the template phase does not depend on it (seeds 0 and 1 run it again in the scheduler test)
    task = make_task(LAYER, HW, "auto", 0, family="vta", time_budget_s=1.0, learned_budget=4)
    res = tune_layer(LAYER, HW, tuner=task.tuner, budget=None, seed=0, runner=TableRunner(table, cost_s=0.01))
    choice = task.tuner.choice
    assert choice["template_phase"] and choice["search"].startswith("template+")
    assert choice["template_points"] == n_template and res.measurements == n_template + 4
    assert res.best_seconds <= _template_opt(table)  # never worse than the template


def test_scheduler_runs_the_template_phase_outside_its_pool(table):
    runs = []
    for seed in range(2):
        task = make_task(LAYER, HW, "auto", seed, family="vta", time_budget_s=1.0, learned_budget=4)
        runs.append(TaskRun(task, budget=None, seed=seed, runner=TableRunner(table, cost_s=0.01)))
    n_template = runs[0].task.tuner.exact_pending()
    sched = TaskScheduler(runs)
    assert sched.pool == 8  # the learned budgets only
    results = sched.run()
    assert sum(r.measurements for r in results) == 2 * n_template + 8
    assert all(r.best_seconds <= _template_opt(table) for r in results)


class Grown(VtaSpace):
    """The vta family after it grew a knob whose position 0 is today's program. Here the knob is
    the least significant, so every index moves (as when a value is added to an existing knob);
    its other value is no program yet (invalid)."""

    def make_knobs(self):
        return (Knob("extra", "ot", (0, 1)),) + super().make_knobs()

    def _new(self, idx):
        return self.positions_of(np.asarray(idx, dtype=np.int64).reshape(-1))[:, 0] != 0

    def valid_mask(self, indices=None):
        idx = np.arange(self.size) if indices is None else np.asarray(indices)
        return super().valid_mask(idx) & ~self._new(idx)

    def why_invalid(self, config):
        cfg = self.as_config(config)
        return "extra: not a program yet" if self._new([cfg.index])[0] else super().why_invalid(cfg)


def test_vta_records_are_resolved_by_knobs_not_index(monkeypatch):
    old = get_space(LAYER, HW, "vta")
    grown = Grown(LAYER, HW)
    cfgs = [old.get(int(i)) for i in old.valid_indices()[[10, 100, 300]]]
    recs = [MeasureRecord.make(LAYER, HW, c, 1e-3 * (k + 1), 100, None, "xgb", 0, 1.0) for k, c in enumerate(cfgs)]
    stale = MeasureRecord(**{**recs[0].__dict__, "seconds": 1e-4, "knobs": {**recs[0].knobs, "uop_fold": 99}})
    assert grown.size == 2 * old.size and grown.from_knobs({**cfgs[1].knobs, "extra": 0}).index != cfgs[1].index
    # one record: the config with the same knob values (new knob at 0), whatever its index now
    got = resolve_config(grown, recs[1].knobs)
    assert got is not None and got.knobs == {**cfgs[1].knobs, "extra": 0}
    assert resolve_config(grown, stale.knobs) is None
    # warm start: the old records fill the cache under their new indices, the stale one is counted
    res = tune_layer(LAYER, HW, tuner="random", budget=0, seed=0, space=grown, warm_start=[*recs, stale],
                     runner=TableRunner({}))
    assert res.warm_skipped == 1
    assert res.best_seconds == 1e-3 and res.best.knobs == {**cfgs[0].knobs, "extra": 0}
    # deployment: the fastest record is stale, so the next fastest is used, and the stale one counted
    monkeypatch.setattr(records_mod, "family_space", lambda layer, hw, family="autotvm": grown)
    skipped: list = []
    rec, config = best_any_family([*recs, stale], skipped)[(LAYER.name, HW.name)]
    assert rec.seconds == 1e-3 and config.index == grown.from_knobs({**cfgs[0].knobs, "extra": 0}).index
    assert skipped == [stale]


def test_an_agent_of_another_feature_length_is_refused_then_xgboost_searches(tmp_path, monkeypatch, capsys, table):
    path = tmp_path / "bandit_vta_old.pt"
    BanditAgent(17).save(path)  # trained when the family had other features
    monkeypatch.setitem(auto_mod.SHIPPED_AGENTS, "vta", path)
    task = make_task(LAYER, HW, "auto", 0, family="vta", time_budget_s=1.0, learned_budget=4)
    res = tune_layer(LAYER, HW, tuner=task.tuner, budget=None, seed=0, runner=TableRunner(table, cost_s=0.01))
    choice = task.tuner.choice
    assert choice["search"] == "template+xgb" and choice["agent"] is None
    assert str(path) in choice["agent_refused"] and "are 17 long" in choice["agent_refused"]
    err = [line for line in capsys.readouterr().err.splitlines() if str(path) in line]
    assert len(err) == 1 and "not used" in err[0] and "Traceback" not in err[0]
    assert res.best_seconds <= _template_opt(table)


def test_auto_without_exhaustive_runs_the_template_phase_then_the_learned_budget(table):
    """`exhaustive=False` (a benchmark's declared budget, benchmarks/networks.py): never the whole
    family, even when it would fit the time budget; the template's points first, then the budget."""
    n_template = get_space(LAYER, HW).n_valid
    task = make_task(LAYER, HW, "auto", 0, family="vta", time_budget_s=math.inf, exhaustive=False, learned_budget=5)
    res = tune_layer(LAYER, HW, tuner=task.tuner, budget=None, runner=TableRunner(table, cost_s=0.01))
    assert task.tuner.choice["search"].startswith("template+") and task.tuner.choice["template_phase"]
    assert res.measurements == n_template + 5 < len(table)
    assert res.best_seconds <= _template_opt(table)


def test_edge_variants_are_built_once_per_tile_size_threads_and_fold(monkeypatch):
    """An exhaustive walk times each tile size under every loop order and residency; the edge
    tiles' variants depend only on the tile sizes, threads and micro-op fold, so they are built
    once for all of them, and every config's block timing still equals its full program's."""
    hw = HwConfig.resolve("pynq_1x16")
    layer = Conv2D(1, 32, 7, 7, 48, 3, 3, 1, 1)  # 7 rows/columns: tiles of 2, 3, 4 leave edge tiles
    space = get_space(layer, hw, "vta")
    valid = space.valid_indices()
    bits = edge_bits(space.batch(valid).t)
    pos = space.positions_of(valid)
    cols = [space.knob_names.index(n) for n in space.knob_names if n.startswith("tile_") or n in ("vthread", "uop_fold")]
    groups: dict[tuple, list[int]] = {}
    for i, key, edged in zip(valid.tolist(), map(tuple, pos[:, cols].tolist()), (bits > 0).tolist()):
        if edged:
            groups.setdefault(key, []).append(i)
    same = max(groups.values(), key=len)[:4]  # one tile size, threads and fold; other orders/residency
    assert len(same) >= 3
    calls = []
    build = edge_rules.variants_at
    monkeypatch.setattr(edge_rules, "variants_at", lambda *a, **k: calls.append(1) or build(*a, **k))
    producer.row_mapping.cache_clear()
    space.__dict__.pop("_edge_variants", None)
    space.valid_table()[0].__dict__.pop("_edge_table", None)
    for i in same:
        config = space.get(i)
        prog = compile_layer(layer, config, hw)
        assert measure(layer, config, hw).cycles == timing.time_program(prog.insns, hw).cycles
    assert len(calls) == 1


def test_the_shipped_vta_agent_matches_the_family():
    """sim/agents/bandit_vta_sim.pt observes what the family's features are now, so `codesign tune
    --schedules vta` (auto on an expensive runner) loads it instead of starting cold; a knob that
    adds features must retrain it (python benchmarks/train_agent.py --schedules vta)."""
    from codesign.paths import SHIPPED_VTA_AGENT

    task = make_task(LAYER, HW, "bandit", 0, family="vta", agent=str(SHIPPED_VTA_AGENT))
    task.tuner.set_task(LAYER, HW)
    assert task.tuner.refused is None, task.tuner.refused
