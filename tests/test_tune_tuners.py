"""Tuners and the tuning driver: never re-measure, never measure invalid configs, find the exhaustive
optimum when the budget covers the space, warm start, early stopping, error capture."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.evaluate.run import measure_seconds
from codesign.hw.config import HwConfig
from codesign.schedule import ScheduleSpace
from codesign.tune import (
    TUNERS,
    FunctionRunner,
    MeasureRecord,
    SpaceView,
    TableRunner,
    Tuner,
    exhaustive,
    exhaustive_table,
    load_records,
    tune_layer,
)
from codesign.workloads import parse_layer

HW = HwConfig()
SMALL = parse_layer("conv2d:1,32,8,8,32,3,3,1,1")  # 256 configs, 42 valid on 1x16


@pytest.fixture(scope="module")
def small():
    space = ScheduleSpace(SMALL, HW)
    view = SpaceView(space)
    table = exhaustive_table(SMALL, HW, space=space)
    return space, view, table


class CountingRunner(TableRunner):
    def __init__(self, table):
        super().__init__(table)
        self.seen: list[int] = []

    def measure_one(self, inp):
        self.seen.append(int(inp.config.index))
        return super().measure_one(inp)


def test_exhaustive_is_the_table_minimum(small):
    space, view, table = small
    assert sorted(table) == sorted(view.valid.tolist())  # every valid config compiles and times
    best, seconds = exhaustive(SMALL, HW)
    assert seconds == min(v[0] for v in table.values())
    assert table[best.index][0] == seconds
    idx = int(view.valid[3])
    assert table[idx] == measure_seconds(SMALL, space.get(idx), HW)


@pytest.mark.parametrize("name", TUNERS)
def test_full_budget_finds_exhaustive_optimum(small, name, tmp_path):
    space, view, table = small
    runner = CountingRunner(table)
    rec = tmp_path / "r.jsonl"
    res = tune_layer(SMALL, HW, tuner=name, budget=len(view.valid), seed=1, runner=runner, space=space,
                     view=view, records=rec)
    valid = set(view.valid.tolist())
    assert len(runner.seen) == len(set(runner.seen)) == res.measurements == len(view.valid)
    assert set(runner.seen) <= valid  # invalid configs never reach the runner
    opt = min(v[0] for v in table.values())
    assert res.best_seconds == opt
    assert table[res.best.index][0] == opt
    recs = load_records(rec)
    assert [r.index for r in recs] == runner.seen
    assert all(r.tuner == name and r.seed == 1 and r.hw == HW.name and r.layer == SMALL.name for r in recs)


@pytest.mark.parametrize("name", TUNERS)
def test_partial_budget_monotone_and_deterministic(small, name):
    space, view, table = small
    runs = [tune_layer(SMALL, HW, tuner=name, budget=15, seed=3, runner=TableRunner(table), space=space,
                       view=view) for _ in range(2)]
    a, b = runs
    curve = a.curve()
    assert a.measurements == 15 and curve.size == 15
    assert np.all(np.diff(curve) <= 0)  # best-so-far never gets worse
    assert curve[-1] == a.best_seconds == min(h.seconds for h in a.history)
    assert [h.config.index for h in a.history] == [h.config.index for h in b.history]  # seeded


class InvalidProposer(Tuner):
    """Proposes every config in index order, valid or not."""

    name = "invalid-proposer"

    def __init__(self, space, seed=0, view=None):
        super().__init__(space, seed, view)
        self.next = 0
        self.feedback = []

    def propose(self, n):
        out = [self.space.get(i) for i in range(self.next, min(self.next + n, self.view.size))]
        self.next += n
        return out

    def observe(self, results):
        super().observe(results)
        self.feedback += list(results)


def test_invalid_configs_are_penalized_not_measured(small):
    space, view, table = small
    runner = CountingRunner(table)
    tuner = InvalidProposer(space, view=view)
    res = tune_layer(SMALL, HW, tuner=tuner, budget=10, runner=runner, space=space, view=view)
    assert res.measurements == 10 and set(runner.seen) <= set(view.valid.tolist())
    invalid = [r for r in tuner.feedback if not r.measured]
    assert invalid and all(r.error.startswith("invalid: ") for r in invalid)
    assert res.invalid_skipped == len(invalid) == int(np.sum(~np.isin(np.arange(tuner.next), view.valid)))
    # the reason is the space's named rule
    r0 = invalid[0]
    assert r0.error == "invalid: " + space.why_invalid(r0.config)


def test_warm_start_skips_known_configs(small, tmp_path):
    space, view, table = small
    first = tune_layer(SMALL, HW, tuner="random", budget=10, seed=0, runner=TableRunner(table), space=space,
                       view=view, records=tmp_path / "a.jsonl")
    runner = CountingRunner(table)
    second = tune_layer(SMALL, HW, tuner="random", budget=10, seed=0, runner=runner, space=space, view=view,
                        warm_start=tmp_path / "a.jsonl")
    known = {h.config.index for h in first.history}
    assert not known & set(runner.seen) and second.measurements == 10
    assert second.best_seconds <= first.best_seconds  # the warm-start best counts


def test_patience_stops_early(small):
    space, view, table = small
    res = tune_layer(SMALL, HW, tuner="grid", budget=40, runner=TableRunner(table), space=space, view=view,
                     patience=3)
    assert res.stopped == "patience" and res.measurements < 40
    c = res.curve()
    assert np.all(c[-3:] == c[-4])


def failing(layer, config, hw):
    if config.index % 2:
        raise RuntimeError("board reset")
    return 0.001 + config.index * 1e-6, 100


def test_runner_errors_are_captured_and_recorded(small, tmp_path):
    space, view, _ = small
    res = tune_layer(SMALL, HW, tuner="grid", budget=12, runner=FunctionRunner(failing), space=space, view=view,
                     records=tmp_path / "r.jsonl")
    assert res.measurements == 12
    errs = [h for h in res.history if h.config.index % 2]
    assert errs and all(h.error == "RuntimeError: board reset" and h.seconds is None for h in errs)
    recs = load_records(tmp_path / "r.jsonl")
    assert [r.error for r in recs] == [h.error for h in res.history]
    assert res.best.index % 2 == 0


def test_workload_layer_spec_round_trips():
    rec = MeasureRecord.make(SMALL, HW, ScheduleSpace(SMALL, HW).get(5), 1.0, 10, None, "x", 0, 0.0)
    assert parse_layer(rec.layer_spec) == SMALL


def test_view_builds_many_configs_at_once_exactly_as_space_get(small):
    """The exhaustive path builds every valid Config in one step (`SpaceView.configs`, issue 21
    §4: `ScheduleSpace.get` one by one was an eighth of its CPU time); same index and knobs."""
    from codesign.tune.exhaustive import ExhaustiveTuner

    space, view, _ = small
    every = np.arange(space.size)
    got = view.configs(every)
    assert [(c.index, c.knobs) for c in got] == [(c.index, c.knobs) for c in (space.get(int(i)) for i in every)]
    got[0].knobs["tile_co"].append(99)  # each Config owns its lists, as from space.get
    assert view.configs([0])[0].knobs == space.get(0).knobs
    tuner = ExhaustiveTuner(space)
    proposed = tuner.propose(len(view.valid))
    assert [c.index for c in proposed] == view.valid.tolist()
    assert all(c.knobs == space.get(c.index).knobs for c in proposed)
    with pytest.raises(Exception, match="out of range"):
        view.configs([space.size])
