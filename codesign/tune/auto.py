"""`auto`, the default inner search: exact where measuring is cheap, sample-efficient where it
is expensive. Before the first proposal it asks the runner what one measurement costs
(`Runner.seconds_per_measurement`: a probe of a few configs on the simulator, the board's cost
on a board) and searches exhaustively when every valid config fits the time budget
(`time_budget_s`, `--exhaustive-budget`); otherwise it runs a learned tuner within the loop's
measurement budget: `learned` when given, else the pretrained agent shipped with the package
(`paths.SHIPPED_AGENT`, a hardware-conditioned bandit trained on simulator data) when it matches
the task (conv2d/dense template, same feature set), else XGBoost."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from codesign.errors import ConfigError
from codesign.hw.config import HwConfig
from codesign.paths import SHIPPED_AGENT
from codesign.schedule.knobs import Config
from codesign.schedule.space import ScheduleSpace
from codesign.tune.exhaustive import ExhaustiveTuner
from codesign.tune.measure import MeasureInput, MeasureResult, Runner
from codesign.tune.records import MeasureRecord
from codesign.tune.registry import make_tuner
from codesign.tune.tuner import DEFAULT_BUDGET, Tuner
from codesign.workloads.layers import Layer

#: Seconds of measuring per layer below which `auto` is exhaustive. ResNet-18 layers have <= 464
#: valid configs at <= ~1 ms each on the simulator (benchmarks/compiler.py), far below it; a board
#: at seconds per measurement is far above it.
DEFAULT_EXHAUSTIVE_S = 10.0
PROBES = 3  # configs timed to estimate the cost of one measurement
AGENT_TEMPLATES = ("conv2d_packed.vta", "dense_packed.vta")  # what the shipped agent was trained on


class AutoTuner(Tuner):
    name = "auto"

    def __init__(self, space: ScheduleSpace, seed: int = 0, *, time_budget_s: float = DEFAULT_EXHAUSTIVE_S,
                 learned: str | None = None, learned_budget: int = DEFAULT_BUDGET, agent: Any = None,
                 **kw: Any) -> None:
        super().__init__(space, seed, kw.pop("view", None))
        self.time_budget_s = float(time_budget_s)
        self.learned_budget = int(learned_budget)
        self.learned, self.learned_kw, self.agent_arg = learned, kw, agent
        self.inner: Tuner | None = None
        self._agent_path: Any = None
        self.choice: dict[str, Any] = {}
        self._task: tuple[Layer, HwConfig] | None = None

    def set_task(self, layer: Layer, hw: HwConfig) -> None:
        self._task = (layer, hw)

    def plan_budget(self, budget: int | None, runner: Runner) -> int:
        """Without a budget (`None`): every valid config when exhaustive, `learned_budget`
        measurements otherwise; a given budget caps either."""
        layer, hw = self._task if self._task is not None else (self.space.layer, self.space.hw)
        n_valid = self.view.n_valid()  # estimated for a space too large to enumerate
        probe = self.view.sample_valid(PROBES, self.rng)
        cost = runner.seconds_per_measurement([MeasureInput(layer, hw, self.view.config(int(i))) for i in probe])
        exhaustive_s = cost * n_valid
        if exhaustive_s <= self.time_budget_s:
            self.inner = ExhaustiveTuner(self.space, self.seed, view=self.view)
            self.inner.set_task(layer, hw)
        else:
            self.inner = self._learned(layer, hw)
        self.choice = {"search": self.inner.name, "valid": int(round(n_valid)), "seconds_per_measurement": cost,
                       "exhaustive_s": exhaustive_s, "time_budget_s": self.time_budget_s,
                       "agent": None if self._agent_path is None else str(self._agent_path)}
        self.batch_size = self.inner.batch_size
        if budget is None:
            return int(round(n_valid)) if isinstance(self.inner, ExhaustiveTuner) else self.learned_budget
        return int(budget)

    def _learned(self, layer: Layer, hw: HwConfig) -> Tuner:
        """The learned tuner (already `set_task`): `learned`, else the shipped agent if it matches,
        else XGBoost."""
        self._agent_path: Any = self.agent_arg
        if self.learned is None and self.agent_arg is None and SHIPPED_AGENT.exists() \
                and getattr(layer, "template", None) in AGENT_TEMPLATES:
            try:
                tuner = make_tuner("bandit", self.space, self.seed, view=self.view, agent=str(SHIPPED_AGENT))
                tuner.set_task(layer, hw)  # ConfigError if the agent's features (or family) do not match
                self._agent_path = SHIPPED_AGENT
                return tuner
            except ConfigError:
                pass  # an agent of another feature set: XGBoost instead
        agent = {} if self.agent_arg is None else {"agent": self.agent_arg}
        tuner = make_tuner(self.learned or "xgb", self.space, self.seed, view=self.view, **agent, **self.learned_kw)
        tuner.set_task(layer, hw)
        return tuner

    # -- everything else is the chosen tuner's ----------------------------------------------
    def _chosen(self) -> Tuner:
        if self.inner is None:  # used outside the tuning loop: decide with the simulator's cost
            raise RuntimeError("AutoTuner: plan_budget() chooses the search; call it first (tune_task does)")
        return self.inner

    @property
    def agent(self) -> Any:  # type: ignore[override]
        return None if self.inner is None else self.inner.agent

    def propose(self, n: int) -> list[Config]:
        return self._chosen().propose(n)

    def observe(self, results: Sequence[MeasureResult]) -> None:
        super().observe(results)
        self._chosen().observe(results)

    def warm_start(self, results: Sequence[MeasureResult]) -> None:
        super().observe(results)
        self._chosen().warm_start(results)

    def transfer(self, records: Sequence[MeasureRecord]) -> None:
        self._chosen().transfer(records)


__all__ = ["AutoTuner", "DEFAULT_EXHAUSTIVE_S"]
