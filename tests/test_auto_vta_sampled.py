"""`auto` on the `vta` family without listing it (issue 19 §2, stop26 deviation 5): the valid count is
estimated by the family's sampler, the template's points are timed first, then the learned search
(XGBoost when the shipped agent does not match) — and the family stage of template+learned
(`template_local`, `learned=`) observes the template results as the family's points."""

from __future__ import annotations

import numpy as np
import pytest
from table_runs import table_make_run

from codesign.hw.config import HwConfig
from codesign.schedule import get_space
from codesign.schedule.vta_space import VtaSpace
from codesign.tune import TableRunner, exhaustive_table, tune_layer
from codesign.tune.task import make_task
from codesign.tune.template_local import as_family, tune_template_then_local
from codesign.tune.view import ENUMERATE_LIMIT
from codesign.workloads import parse_layer

HW = HwConfig()
LAYER = parse_layer("conv2d:1,16,8,8,16,3,3,1,1")  # 1e8 configs, ~1,900 valid vta schedules
# One worker for the three files that time every vta schedule of LAYER: exhaustive_table's in-process
# cache then times them once.
pytestmark = pytest.mark.xdist_group("vta_table_conv2d_1x16x8x8")


@pytest.fixture(scope="module")
def table():
    return exhaustive_table(LAYER, HW, family="vta")


def _refuse_listing(monkeypatch, space):
    listed = VtaSpace.valid_indices

    def refuse(self):  # noqa: ANN001, ANN202 - only `space` (another may be listed by the test's table)
        if self is space:
            raise AssertionError("the vta family was listed")
        return listed(self)

    monkeypatch.setattr(VtaSpace, "valid_indices", refuse)


def test_auto_on_a_vta_space_estimates_it_times_the_template_then_learns_without_listing_it(monkeypatch, table):
    space = VtaSpace(LAYER, HW)
    assert space.size > ENUMERATE_LIMIT
    _refuse_listing(monkeypatch, space)
    n_template = get_space(LAYER, HW).n_valid
    task = make_task(LAYER, HW, "auto", 0, space=space, time_budget_s=1.0, learned_budget=8, learned="xgb")
    res = tune_layer(LAYER, HW, tuner=task.tuner, budget=None, seed=0, runner=TableRunner(table, cost_s=0.01))
    choice = task.tuner.choice
    assert abs(choice["valid"] - len(table)) <= 0.1 * len(table)  # estimated, not counted
    assert choice["search"] == "template+xgb" and choice["template_points"] == n_template
    assert res.measurements == n_template + 8
    assert np.isin([r.config.index for r in res.history], list(table)).all()


def test_template_plus_learned_observes_the_template_results_and_is_never_worse(table):
    tables = {"autotvm": exhaustive_table(LAYER, HW, family="autotvm"), "vta": table}
    made = []
    make_run = table_make_run(tables, HW, made)
    res = tune_template_then_local([(LAYER, 1)], HW, make_run, budget=6, seed=0, learned="xgb")[0]
    template_best = min(s for s, _ in tables["autotvm"].values())
    learner = made[-1].tuner
    assert learner.name == "xgb"
    n_template = len(tables["autotvm"])
    assert res.measurements == n_template + 6  # the template's schedules, then the budget
    # the learner saw every template result as its family point (same timings), measured none of them again
    points = as_family(made[-1].space, list(made[0].tuner.results.values()))
    assert len(points) == n_template
    assert all(learner.results[int(p.config.index)].seconds == p.seconds for p in points)
    assert res.best_seconds <= template_best
