"""Grid search: valid configs in config-index order (AutoTVM's GridSearchTuner, minus the invalid
ones, which the schedule space rules out analytically)."""

from __future__ import annotations

from typing import Any

from codesign.schedule.knobs import Config
from codesign.schedule.space import ScheduleSpace
from codesign.tune.tuner import Tuner


class GridTuner(Tuner):
    name = "grid"
    batch_size = 8

    def __init__(self, space: ScheduleSpace, seed: int = 0, **kw: Any) -> None:
        super().__init__(space, seed, **kw)
        self._next = 0  # position in the sorted valid indices; the seed does not matter

    def propose(self, n: int) -> list[Config]:
        valid = self.view.valid
        out = []
        while len(out) < n and self._next < valid.size:
            idx = int(valid[self._next])
            self._next += 1
            if idx not in self.results:
                out.append(self.view.config(idx))
        return out
