"""Exhaustive search: every valid config of a layer, timed. VTA template spaces hold a few
hundred valid configs and a simulated measurement takes ~0.1-1 ms (`codesign.evaluate.blocks`), so on
the simulator the exact optimum costs well under a second per layer.

`ExhaustiveTuner` is a tuner like the others (the tuning loop's cache, records and callbacks
apply; one round proposes every valid config, so a parallel runner spreads them over its
workers in chunks). `exhaustive_table` is the ground truth benchmarks and `codesign space
--exhaustive` use; its tables are cached per (layer, hardware, timing parameters) in-process."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from codesign.errors import InvalidSchedule
from codesign.hw.config import HwConfig
from codesign.schedule import ScheduleSpace, get_space
from codesign.schedule.knobs import Config
from codesign.tune.measure import MeasureInput, Runner, SimulatorRunner
from codesign.tune.records import family_space
from codesign.tune.tuner import Tuner
from codesign.tune.view import SpaceView
from codesign.vta.timing import TimingParams
from codesign.workloads.layers import Layer


class ExhaustiveTuner(Tuner):
    """Proposes every valid config not known yet, in index order, in one round."""

    name = "exhaustive"

    def __init__(self, space: ScheduleSpace, seed: int = 0, **kw: Any) -> None:
        super().__init__(space, seed, **kw)
        self.batch_size = max(1, len(self.view.valid))

    def plan_budget(self, budget: int | None, runner: Runner) -> int:
        return len(self.view.valid) if budget is None else int(budget)  # by default: the whole space

    def propose(self, n: int) -> list[Config]:
        return self.view.configs(self.unmeasured_valid()[:n])


@lru_cache(maxsize=256)
def _table(layer: Layer, hw: HwConfig, params: TimingParams | None, n_parallel: int,
           family: str = "autotvm") -> tuple[tuple[int, float, int], ...]:
    view = SpaceView(family_space(layer, hw, family))  # valid indices sorted, configs built in one step
    with SimulatorRunner(hw, n_parallel=n_parallel, params=params) as runner:
        results = runner.run([MeasureInput(layer, hw, c) for c in view.configs(view.valid)])
    return tuple((int(r.config.index), float(r.seconds), int(r.cycles or 0)) for r in results if r.ok)


def exhaustive_table(layer: Layer, hw: HwConfig | str, *, params: TimingParams | None = None, progress: bool = False,
                     space: ScheduleSpace | None = None, n_parallel: int = 1,
                     family: str = "autotvm") -> dict[int, tuple[float, int]]:
    """{config index: (seconds, cycles)} for every valid config of schedule family `family` that
    measures without error (a config the compiler rejects is not a candidate). `progress` is
    accepted for the callers that show one; a template layer takes well under a second."""
    del progress, space  # the cached table is built from get_space(layer, hw, family)
    return {i: (s, c) for i, s, c in _table(layer, HwConfig.resolve(hw), params, int(n_parallel), family)}


def exhaustive(layer: Layer, hw: HwConfig, *, params: TimingParams | None = None,
               progress: bool = False) -> tuple[Config, float]:
    """(best Config, its seconds) over every valid config of `layer` on `hw`."""
    table = exhaustive_table(layer, hw, params=params, progress=progress)
    if not table:
        raise InvalidSchedule(f"layer {layer.name} on {hw.name}: no valid schedule measures without error")
    best = min(table, key=lambda i: (table[i][0], i))
    return get_space(layer, HwConfig.resolve(hw)).get(best), table[best][0]


__all__ = ["ExhaustiveTuner", "exhaustive", "exhaustive_table"]
