"""The space protocol tuners search through (`SpaceView`: sampling, neighbours, mutate on spaces
too large to enumerate), the cost-model-guided evolutionary search, the task scheduler across a
network's layers, and schedule families on records."""

from __future__ import annotations

import json

import numpy as np
import pytest

from codesign.hw.config import HwConfig
from codesign.schedule import ScheduleSpace, get_space
from codesign.schedule.knobs import Config
from codesign.schedule.space import index_of, positions_of
from codesign.tune import MeasureRecord, SpaceView, TableRunner, exhaustive_table, load_records, tune_layer
from codesign.tune.loop import TaskRun
from codesign.tune.measure import FunctionRunner
from codesign.tune.records import best_any_family, best_records
from codesign.tune.scheduler import TaskScheduler
from codesign.tune.task import make_task
from codesign.workloads import parse_layer

HW = HwConfig()
BIG = parse_layer("conv2d:1,256,14,14,256,3,3,1,1")


class GridSpace:
    """A synthetic knob space of 10^7 configs (7 knobs x 10 candidates), about 30% valid, with
    the public interface of a schedule space; enumerating it is an error (the view must sample)."""

    family = "autotvm"

    def __init__(self, layer=BIG, hw=HW) -> None:
        self.layer, self.hw = layer, hw
        self.dims = (10,) * 7
        self.size = 10 ** 7
        self.knobs = ()

    def _pos(self, idx):
        return positions_of(np.asarray(idx, dtype=np.int64), self.dims)

    def valid_mask(self, indices):
        p = self._pos(indices)
        return (p[:, 0] + p[:, 1] * p[:, 2] + p[:, 5]) % 10 < 3

    def valid_indices(self):
        raise AssertionError("a large space must not be enumerated")

    def is_valid(self, config):
        return bool(self.valid_mask([getattr(config, "index", config)])[0])

    def why_invalid(self, config):
        return None if self.is_valid(config) else "(k0 + k1*k2 + k5) % 10 >= 3"

    def features_batch(self, indices):
        p = self._pos(indices).astype(np.float32)
        return np.hstack([p, p[:, :3] * p[:, 3:6]])

    def get(self, index):
        return Config(int(index), {f"k{j}": int(v) for j, v in enumerate(self._pos([index])[0])})

    def from_knobs(self, knobs):
        knobs = getattr(knobs, "knobs", knobs)
        return self.get(int(index_of(np.asarray([[knobs[f"k{j}"] for j in range(7)]]), self.dims)[0]))

    def cost(self, layer, config, hw):
        """A smooth landscape with its optimum at a valid point (all knobs 4: 4 + 16 + 4 = 24 -> 4 % 10 >= 3?
        no: the optimum is the valid config nearest to 7s); only the tuner's measurements see it."""
        p = self._pos([config.index])[0]
        return float(1e-3 * (1 + 0.05 * np.sum((p - 7) ** 2))), None


@pytest.fixture(scope="module")
def big():
    space = GridSpace()
    return space, SpaceView(space)


def test_large_view_samples_valid_configs_without_enumerating(big):
    space, view = big
    assert not view.enumerable
    rng = np.random.default_rng(0)
    got = view.sample_valid(200, rng)
    assert len(got) == len(set(got)) == 200
    assert space.valid_mask(np.asarray(got)).all()
    again = view.sample_valid(50, np.random.default_rng(0), exclude=got[:10])
    assert len(again) == 50 and not set(again) & set(got[:10])
    # the estimate of valid configs is within 5% of the exact count (30% of the grid)
    exact = sum(int(space.valid_mask(np.arange(s, s + 10 ** 6)).sum()) for s in range(0, 10 ** 7, 10 ** 6))
    assert abs(view.n_valid() - exact) <= 0.05 * exact


def test_neighbours_and_mutate_return_valid_one_knob_moves(big):
    space, view = big
    rng = np.random.default_rng(1)
    starts = np.asarray(view.sample_valid(40, rng))
    for i in starts[:10].tolist():
        nb = view.neighbours(i)
        assert nb.size > 0 and space.valid_mask(nb).all() and i not in nb.tolist()
        diff = (view.positions(nb) != view.positions([i])[0]).sum(axis=1)
        assert (diff == 1).all()
        # every valid one-knob move is listed (checked against the mask of each knob's line)
        pos = view.positions([i])[0]
        expect = 0
        for k, d in enumerate(view.dims):
            line = np.repeat(pos[None, :], d, axis=0)
            line[:, k] = np.arange(d)
            expect += int(space.valid_mask(view.index(line)).sum()) - 1
        assert nb.size == expect
    out = view.mutate(starts, rng)
    assert space.valid_mask(out).all()
    moved = out != starts
    assert moved.mean() > 0.8
    assert ((view.positions(out[moved]) != view.positions(starts[moved])).sum(axis=1) == 1).all()


@pytest.mark.parametrize("name", ["xgb", "evo", "bandit", "ga", "random"])
def test_tuners_search_a_space_they_cannot_enumerate(big, name):
    space = GridSpace()
    view = SpaceView(space)
    res = tune_layer(BIG, HW, tuner=name, budget=48, seed=0, runner=FunctionRunner(space.cost), space=space,
                     view=view)
    assert res.measurements == 48 == len({h.config.index for h in res.history})
    assert space.valid_mask([h.config.index for h in res.history]).all()


def test_evo_beats_random_on_a_large_space():
    best = {}
    for name in ("random", "evo"):
        space = GridSpace()
        runs = [tune_layer(BIG, HW, tuner=name, budget=64, seed=s, runner=FunctionRunner(space.cost), space=space,
                           view=SpaceView(space)).best_seconds for s in range(3)]
        best[name] = float(np.median(runs))
    assert best["evo"] < best["random"]


SMALL = parse_layer("conv2d:1,64,14,14,64,3,3,1,1")


def test_evo_finds_the_optimum_on_a_fixed_seed():
    table = exhaustive_table(SMALL, HW)
    opt = min(v[0] for v in table.values())
    res = tune_layer(SMALL, HW, tuner="evo", budget=len(table) // 2, seed=0, runner=TableRunner(table))
    assert res.best_seconds == opt  # within half the valid schedules


def _flat_and_steep():
    flat = parse_layer("conv2d:1,32,8,8,32,3,3,1,1")
    steep = parse_layer("conv2d:1,64,14,14,64,3,3,1,1")
    steep_table = exhaustive_table(steep, HW)
    opt = min(v[0] for v in steep_table.values())

    def fn(layer, config, hw):  # every schedule of `flat` is equally fast: nothing to gain there
        return (1e-3, None) if layer == flat else steep_table[int(config.index)]

    bounds = {flat: 1e-3, steep: 0.5 * opt}
    return flat, steep, fn, bounds


@pytest.mark.parametrize("policy", ["gain", "even"])
def test_scheduler_spends_on_the_layer_with_headroom(policy):
    flat, steep, fn, bounds = _flat_and_steep()
    runner = FunctionRunner(fn)
    runs = [TaskRun(make_task(layer, HW, "random", 0), budget=24, runner=runner) for layer in (flat, steep)]
    sched = TaskScheduler(runs, [1, 1], policy=policy, bound=lambda layer, hw: bounds[layer])
    results = sched.run()
    n_flat, n_steep = (r.measurements for r in results)
    assert n_flat + n_steep == 48
    if policy == "even":
        assert n_flat == n_steep == 24
    else:
        assert n_steep >= 4 * n_flat  # the flat layer got its first round, then nothing
        assert n_flat == runs[0].task.tuner.batch_size


def test_records_carry_the_schedule_family(tmp_path):
    layer = SMALL
    space = ScheduleSpace(layer, HW)
    cfg = space.get(int(space.valid_indices()[0]))
    old = MeasureRecord.make(layer, HW, cfg, 1e-3, 10, None, "xgb", 0, 1.0)
    assert old.family == "autotvm" and "family" not in json.loads(old.to_json())  # line format unchanged
    vta = get_space(layer, HW, "vta")
    vcfg = vta.get(int(vta.valid_indices()[5]))
    new = MeasureRecord.make(layer, HW, vcfg, 5e-4, 8, None, "evo", 0, 2.0)
    assert new.family == "vta" and json.loads(new.to_json())["family"] == "vta"
    path = tmp_path / "r.jsonl"
    path.write_text(old.to_json() + "\n" + new.to_json() + "\n")
    back = load_records(path)
    assert [r.family for r in back] == ["autotvm", "vta"]
    assert best_records(back)[(layer.name, HW.name)].family == "vta"
    assert best_records(back, family="autotvm")[(layer.name, HW.name)].family == "autotvm"
    rec, config = best_any_family(back)[(layer.name, HW.name)]  # what codesign run deploys
    assert rec.family == "vta" and config == vcfg and config.family == "vta"
    # a record whose knobs are no candidates is passed over for the next fastest
    bad = MeasureRecord(**{**new.__dict__, "seconds": 1e-4, "knobs": {**new.knobs, "tile_h": [1, 999]}})
    rec, config = best_any_family([*back, bad])[(layer.name, HW.name)]
    assert rec.seconds == 5e-4 and config == vcfg


# The worker of the files that time every vta schedule of conv2d_1x16x8x8 (test_tune_vta_search,
# test_auto_vta_sampled, test_train_pool, test_vta_family's best-vs-template test): exhaustive_table
# is cached in-process, so this test's table costs nothing there (the 90,000 schedules of a 32-channel
# conv took ~60 s and proved the same thing).
@pytest.mark.xdist_group("vta_table_conv2d_1x16x8x8")
def test_vta_family_through_the_protocol():
    space = get_space(SMALL, HW, "vta")
    view = SpaceView(space)
    rng = np.random.default_rng(3)
    starts = np.asarray(view.sample_valid(30, rng))
    out = view.mutate(starts, rng)
    assert space.valid_mask(out).all() and (out != starts).mean() > 0.5
    for i in starts[:5].tolist():
        nb = view.neighbours(i)
        assert nb.size and space.valid_mask(nb).all()
        diff = view.positions(nb) != view.positions([i])[0]
        group = np.zeros(diff.shape[1], dtype=bool)
        group[list(space.coupled_knobs[0])] = True
        # one knob, or one move inside the coupled kernel knobs (its partners reset to position 0)
        coupled = (diff & ~group).sum(axis=1) == 0
        assert ((diff.sum(axis=1) == 1) | coupled).all()
    layer = parse_layer("conv2d:1,16,8,8,16,3,3,1,1")
    table = exhaustive_table(layer, HW, family="vta")
    assert sorted(table) == SpaceView(get_space(layer, HW, "vta")).valid.tolist()
    tenth = np.percentile([v[0] for v in table.values()], 10)
    res = tune_layer(layer, HW, tuner="evo", budget=48, seed=0, runner=TableRunner(table), family="vta")
    assert res.best.family == "vta" and res.best_seconds <= tenth


def test_xgb_proposes_its_models_top_unmeasured_configs_where_it_scores_them_all():
    """On an enumerable view the fit scores every valid config, so XGBoost proposes exactly the
    best-scored unmeasured ones (annealing from random starts only approximated that maximum)."""
    from codesign.tune.env import SampledView, sample_valid_pool
    from codesign.tune.measure import MeasureInput, SimulatorRunner
    from codesign.tune.registry import make_tuner

    layer = parse_layer("conv2d:1,16,8,8,16,3,3,1,1")
    space = get_space(layer, HW, "vta")
    view = SampledView(space, sample_valid_pool(space, 600, np.random.default_rng(0)))
    tuner = make_tuner("xgb", space, seed=0, view=view, hparams={"epsilon": 0.0})
    first = [view.config(int(i)) for i in view.sample_valid(24, np.random.default_rng(1))]
    tuner.observe(SimulatorRunner(HW).run([MeasureInput(layer, HW, c) for c in first]))
    proposed = [int(c.index) for c in tuner.propose(8)]
    scores = tuner.score(view.valid)
    scores[np.isin(view.valid, [int(c.index) for c in first])] = -np.inf  # measured: never proposed again
    top = view.valid[np.argsort(-scores, kind="stable")[:8]]
    assert proposed == top.tolist()
