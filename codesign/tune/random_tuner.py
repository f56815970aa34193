"""Random search over the valid configs, without replacement (AutoTVM's RandomTuner)."""

from __future__ import annotations

from codesign.schedule.knobs import Config
from codesign.tune.tuner import Tuner


class RandomTuner(Tuner):
    name = "random"
    batch_size = 8

    def propose(self, n: int) -> list[Config]:
        return [self.view.config(i) for i in self.random_unmeasured(n)]
