"""A `template_local.MakeRun` over exhaustive timing tables (family -> {index: (seconds, ...)}): the
default search's two stages tested without the simulator, every task it builds kept in `made`."""

from __future__ import annotations

from typing import Any

from codesign.hw.config import HwConfig
from codesign.tune import TableRunner
from codesign.tune.loop import TaskRun
from codesign.tune.task import make_task


def table_make_run(tables: dict[str, Any], hw: HwConfig, made: list[Any]) -> Any:
    def make_run(layer, k, family, tuner, budget, first):  # noqa: ANN001, ANN202 - template_local.MakeRun
        extra = {"time_budget_s": 10.0} if tuner == "auto" else {}
        task = make_task(layer, hw, tuner, k, family=family, **extra)
        made.append(task)
        return TaskRun(task, budget=budget, seed=k, runner=TableRunner(tables[family], cost_s=0.001))

    return make_run
