"""Random search over the valid configs, without replacement (AutoTVM's RandomTuner)."""

from __future__ import annotations

from typing import Any

from codesign.tune.tuner import Tuner


class RandomTuner(Tuner):
    name = "random"
    batch_size = 8

    def propose(self, n: int) -> list[Any]:
        return [self.view.config(i) for i in self.random_unmeasured(n)]
