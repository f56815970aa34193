"""Task scheduler: spend a network's measurements on the layer where they gain most (Ansor's task
scheduler, Zheng et al. OSDI 2020 §6, and DynaTune's UCB, Li et al. ICLR 2021), not evenly.

Every layer (a `TaskRun`) first gets one round (of at most pool / layers measurements). Then each round goes to the layer with the
largest expected gain per measurement, weighted by how often the layer runs in the network:

    gain_i = w_i * (recent_i + c * headroom_i * sqrt(ln N / n_i) / n_i)

- recent_i: seconds the best schedule improved per measurement over the layer's last `window`
  measurements (Ansor's backward-looking gradient);
- headroom_i = best_i - bound_i: what is left above the layer's roofline lower bound
  (`codesign.analysis.roofline`, the same bound the RL reward normalizes by); a layer at its
  bound has nothing to gain. Spread over the n_i measurements already spent, with the UCB factor
  sqrt(ln N / n_i) (N: all measurements), it is the optimistic term that keeps a layer whose
  recent rounds found nothing from being starved while it still has headroom;
- w_i: the layer's weight (occurrences in the network), c: `explore`.

Layers whose search is exhaustive (`exhaustive`, or `auto` choosing it) are not scheduled: they
run to completion first, and so does the exact phase of a learned one (`Tuner.exact_pending`:
`auto`'s template points on the vta family), outside the pool. The others share a pool of measurements (default: the sum of their own
budgets); each may use the whole pool.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from codesign.hw.config import HwConfig
from codesign.tune.env import roofline_seconds
from codesign.tune.exhaustive import ExhaustiveTuner
from codesign.tune.loop import TaskRun, TuneResult
from codesign.workloads.layers import Layer

WINDOW = 16  # measurements over which a layer's recent improvement is measured
EXPLORE = 1.0  # UCB constant c
POLICIES = ("gain", "even")


@dataclass
class Allocation:
    """What the scheduler did: measurements per layer in the order given, and the order of the
    rounds (layer position per round)."""

    measurements: list[int]
    rounds: list[int] = field(default_factory=list)


def is_exhaustive(run: TaskRun) -> bool:
    """The task's search is exhaustive (`exhaustive`, or `auto` after choosing it)."""
    tuner = run.task.tuner
    return isinstance(tuner, ExhaustiveTuner) or isinstance(getattr(tuner, "inner", None), ExhaustiveTuner)


class TaskScheduler:
    """Steps `runs` (one per layer, with `weights`) until the pool is spent or every run is done.
    `policy`: "gain" (module doc) or "even" (each layer runs to its own budget, in order — what
    tuning layer by layer did). `bound(layer, hw)`: seconds no schedule can beat (default: the
    roofline bound; None when unknown, then the headroom is the best itself)."""

    def __init__(self, runs: Sequence[TaskRun], weights: Sequence[float] | None = None, *,
                 pool: int | None = None, policy: str = "gain", window: int = WINDOW, explore: float = EXPLORE,
                 bound: Callable[[Layer, HwConfig], float | None] = roofline_seconds,
                 on_round: Callable[[int, int], Any] | None = None) -> None:
        if policy not in POLICIES:
            raise ValueError(f"policy {policy!r}: allowed {', '.join(POLICIES)}")
        self.runs = list(runs)
        self.weights = [1.0] * len(self.runs) if weights is None else [float(w) for w in weights]
        self.policy, self.window, self.explore = policy, int(window), float(explore)
        self.on_round = on_round  # (layer position, measurements made) after every round
        self.learned = [k for k, r in enumerate(self.runs) if not is_exhaustive(r)]
        exact = sum(min(self.runs[k].task.tuner.exact_pending(), self.runs[k].budget) for k in self.learned)
        self.pool = sum(self.runs[k].budget for k in self.learned) - exact if pool is None else int(pool)
        self.bounds = [bound(r.task.layer, r.task.hw) if k in self.learned else None
                       for k, r in enumerate(self.runs)]
        self.allocation = Allocation([0] * len(self.runs))

    def _step(self, k: int, limit: int | None = None) -> int:
        made = self.runs[k].step(limit)
        self.allocation.measurements[k] += made
        self.allocation.rounds.append(k)
        if self.on_round is not None:
            self.on_round(k, made)
        return made

    def gain(self, k: int, total: int) -> float:
        """Expected seconds saved per measurement on layer k, weighted (module doc)."""
        res = self.runs[k].result
        n = res.measurements
        if res.best_seconds is None or n == 0:
            return math.inf  # nothing runs yet: measure it
        curve = res.curve()
        w = min(self.window, curve.size)
        before = curve[-w - 1] if curve.size > w else curve[0]
        recent = (before - curve[-1]) / w if math.isfinite(before) else 0.0
        bound = self.bounds[k]
        headroom = max(res.best_seconds - (bound if bound is not None else 0.0), 0.0)
        bonus = self.explore * headroom * math.sqrt(math.log(max(total, 2)) / n) / n
        return self.weights[k] * (recent + bonus)

    def run(self) -> list[TuneResult]:
        """Tune every layer; the results in the order of `runs`. Runs are closed at the end."""
        try:
            for k, r in enumerate(self.runs):  # exhaustive layers and exact phases: nothing to schedule
                while (k not in self.learned or r.task.tuner.exact_pending() > 0) and not r.done:
                    self._step(k)
            if self.policy == "even":
                for k in self.learned:
                    while not self.runs[k].done:
                        self._step(k)
                return [r.result for r in self.runs]
            for k in self.learned:  # each layer may use the whole pool; the pool caps the sum
                self.runs[k].budget = self.runs[k].result.measurements + self.pool
            spent = 0
            share = max(1, self.pool // max(1, len(self.learned)))  # a small pool still reaches every layer
            for k in self.learned:  # one round each
                if spent < self.pool and not self.runs[k].done:
                    spent += self._step(k, min(share, self.pool - spent))
            stalled = 0
            while spent < self.pool:
                live = [k for k in self.learned if not self.runs[k].done]
                if not live:
                    break
                total = sum(self.runs[k].result.measurements for k in self.learned)
                gains = np.asarray([self.gain(k, total) for k in live])
                k = live[int(np.argmax(gains))]
                made = self._step(k, self.pool - spent)
                spent += made
                stalled = 0 if made else stalled + 1
                if stalled > 20 * len(live):  # every live tuner proposes only known configs
                    break
            return [r.result for r in self.runs]
        finally:
            for r in self.runs:
                r.close()


__all__ = ["Allocation", "POLICIES", "TaskScheduler", "is_exhaustive"]
