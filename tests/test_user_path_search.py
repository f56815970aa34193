"""The family stage of the user path's default search (`codesign tune` at its default budget, from
`LEARNED_MIN_BUDGET` measurements per layer): the ranked local search from the template optimum for
the first `local_first` measurements (what a sweep trial runs), then XGBoost, which has observed the
template stage and those measurements (`template_local.LocalThenLearned`)."""

from __future__ import annotations

import pytest
from table_runs import table_make_run

from codesign.hw.config import HwConfig
from codesign.tune import exhaustive_table
from codesign.tune.template_local import LocalThenLearned, tune_template_then_local
from codesign.workloads import parse_layer

HW = HwConfig()
LAYER = parse_layer("conv2d:1,16,8,8,16,3,3,1,1")  # ~1,900 valid vta schedules
# the worker of the other files that time every vta schedule of LAYER (exhaustive_table's cache)
pytestmark = pytest.mark.xdist_group("vta_table_conv2d_1x16x8x8")


@pytest.fixture(scope="module")
def tables():
    return {"autotvm": exhaustive_table(LAYER, HW, family="autotvm"), "vta": exhaustive_table(LAYER, HW, family="vta")}


def _search(tables, budget, learned, local_first=0):  # noqa: ANN001, ANN202
    made = []
    make_run = table_make_run(tables, HW, made)
    res = tune_template_then_local([(LAYER, 1)], HW, make_run, budget=budget, seed=0, learned=learned,
                                   local_first=local_first)[0]
    return res, made


def test_local_first_then_the_learned_search_that_observed_everything(tables):
    first, budget = 6, 14
    n_template = len(tables["autotvm"])
    local, _ = _search(tables, first, None)  # a sweep trial's family stage at `first` per layer
    res, made = _search(tables, budget, "xgb", local_first=first)
    tuner = made[-1].tuner
    assert isinstance(tuner, LocalThenLearned) and tuner.learned.name == "xgb"
    assert res.measurements == n_template + budget
    family = [int(r.config.index) for r in res.history[n_template:]]
    # the first measurements are the local search's, in its order; the rest are new configs
    assert family[:first] == [int(r.config.index) for r in local.history[n_template:]]
    assert len(set(family)) == budget
    # the learner saw the template stage (as family points) and every family measurement
    seen = tuner.learned.results
    assert all(i in seen for i in family)
    assert sum(1 for r in seen.values() if not r.measured) >= n_template - 1
    assert res.best_seconds <= min(s for s, _ in tables["autotvm"].values()) * (1 + 1e-12)
    assert res.best_seconds <= local.best_seconds * (1 + 1e-12)  # it continues from local's best


def test_without_local_first_the_learned_search_runs_alone(tables):
    res, made = _search(tables, 8, "xgb", local_first=0)
    assert made[-1].tuner.name == "xgb" and not isinstance(made[-1].tuner, LocalThenLearned)
    assert res.measurements == len(tables["autotvm"]) + 8
