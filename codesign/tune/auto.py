"""`auto`, the default inner search: exact where measuring is cheap, sample-efficient where it
is expensive. Before the first proposal it asks the runner what one measurement costs
(`Runner.seconds_per_measurement`: a probe of a few configs on the simulator, the board's cost
on a board) and searches exhaustively when every valid config fits the time budget
(`time_budget_s`, `--exhaustive-budget`); otherwise it runs a learned tuner within the loop's
measurement budget: `learned` when given, else the pretrained agent shipped with the package for
the space's family (`paths.SHIPPED_AGENT`, `paths.SHIPPED_VTA_AGENT`: hardware-conditioned bandits
trained on simulator data) when it matches the task (conv2d/dense template; an agent of another
feature length is refused in one line), else XGBoost (`learned_tuner`). Neither needs the space
listed: a family too large to enumerate is sampled (`SpaceView`, `VtaSpace.sample_valid`) and its
valid count estimated.

On a family larger than the templates (`vta`) the learned search never ends worse than the
template: when the family is too big to time whole but the template's valid schedules (its
`from_template` points, 40-3,500 per ResNet-18 layer) fit the time budget, those are timed first,
exhaustively (the "template" phase), then the rest of the budget goes to the learned search over
the whole family, which has observed them (its model and local moves start from the best).
`choice` records which (`search` "template+bandit", `template_points`, `template_phase`).
`exhaustive=False` never times the whole family (a benchmark's declared budget: the template
phase, when its points fit the time budget, then the learned search), `True` always does."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from codesign.errors import ConfigError
from codesign.hw.config import HwConfig
from codesign.paths import SHIPPED_AGENT, SHIPPED_VTA_AGENT
from codesign.schedule.knobs import Config
from codesign.schedule.space import ScheduleSpace, get_space
from codesign.schedule.templates import TEMPLATES, template_of
from codesign.tune.exhaustive import ExhaustiveTuner
from codesign.tune.measure import MeasureInput, MeasureResult, Runner
from codesign.tune.records import MeasureRecord
from codesign.tune.registry import make_tuner
from codesign.tune.tuner import DEFAULT_BUDGET, Tuner
from codesign.tune.view import SpaceView
from codesign.workloads.layers import Layer

#: Seconds of measuring per layer below which `auto` is exhaustive. ResNet-18 layers have <= 464
#: valid configs at <= ~1 ms each on the simulator (benchmarks/compiler.py), far below it; a board
#: at seconds per measurement is far above it.
DEFAULT_EXHAUSTIVE_S = 10.0
PROBES = 3  # configs timed to estimate the cost of one measurement
SHIPPED_AGENTS = {"autotvm": SHIPPED_AGENT, "vta": SHIPPED_VTA_AGENT}  # per schedule family
TEMPLATE_BATCH = 64  # configs per round of the template phase (exhaustive: no model between rounds)


def learned_tuner(space: ScheduleSpace, view: SpaceView, layer: Layer, hw: HwConfig, seed: int = 0, *,
                  learned: str | None = None, agent: Any = None, **kw: Any) -> tuple[Tuner, Any, str | None]:
    """(the learned search of `auto`, already `set_task`; the agent file it uses or None; why the
    shipped agent was refused or None): `learned` when given (with `agent`), else the family's
    shipped agent (`SHIPPED_AGENTS`) when it matches the task (a conv2d/dense template, its
    observation length), else XGBoost — also when the agent is refused (another feature length,
    said in one line): a cold bandit is not the better search."""
    shipped = SHIPPED_AGENTS.get(view.family)
    refused = None
    if learned is None and agent is None and shipped is not None and shipped.exists() \
            and getattr(layer, "template", None) in TEMPLATES and template_of(layer).agent_trained:
        tuner = make_tuner("bandit", space, seed, view=view, agent=str(shipped))
        tuner.set_task(layer, hw)  # an agent of another feature length: refused (one line)
        refused = getattr(tuner, "refused", None)
        if refused is None:
            return tuner, shipped, None
    extra = {} if agent is None else {"agent": agent}
    tuner = make_tuner(learned or "xgb", space, seed, view=view, **extra, **kw)
    tuner.set_task(layer, hw)
    return tuner, agent, refused


class AutoTuner(Tuner):
    name = "auto"

    def __init__(self, space: ScheduleSpace, seed: int = 0, *, time_budget_s: float = DEFAULT_EXHAUSTIVE_S,
                 learned: str | None = None, learned_budget: int = DEFAULT_BUDGET, agent: Any = None,
                 exhaustive: bool | None = None, **kw: Any) -> None:
        super().__init__(space, seed, kw.pop("view", None))
        self.time_budget_s = float(time_budget_s)
        self.learned_budget = int(learned_budget)
        self.exhaustive = exhaustive  # None: decided by the time budget
        self.learned, self.learned_kw, self.agent_arg = learned, kw, agent
        self.inner: Tuner | None = None
        self._agent_path: Any = None
        self._refused: str | None = None  # why the shipped agent was refused (then: XGBoost)
        self.choice: dict[str, Any] = {}
        self._task: tuple[Layer, HwConfig] | None = None
        self._queue: list[int] = []  # template points still to time (the template phase)
        self._held: list[MeasureResult] = []  # their results, handed to the learned tuner in one call

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
        points: list[int] = []
        if self.exhaustive if self.exhaustive is not None else exhaustive_s <= self.time_budget_s:
            self.inner = ExhaustiveTuner(self.space, self.seed, view=self.view)
            self.inner.set_task(layer, hw)
        else:
            self.inner = self._learned(layer, hw)
            points = self.template_points(layer, hw)
            if points and cost * len(points) <= self.time_budget_s:
                self._queue = list(points)
        phase = bool(self._queue)
        self.choice = {"search": ("template+" if phase else "") + self.inner.name, "valid": int(round(n_valid)),
                       "seconds_per_measurement": cost, "exhaustive_s": exhaustive_s,
                       "time_budget_s": self.time_budget_s,
                       "agent": None if self._agent_path is None else str(self._agent_path),
                       "template_points": len(points), "template_phase": phase,
                       "agent_refused": self._refused}
        self.batch_size = TEMPLATE_BATCH if phase else self.inner.batch_size
        if budget is None:
            if isinstance(self.inner, ExhaustiveTuner):
                return int(round(n_valid))
            return len(self._queue) + self.learned_budget
        return int(budget)

    def template_points(self, layer: Layer, hw: HwConfig) -> list[int]:
        """Indices of the template's valid schedules in this family's space (`from_template`),
        valid here, in the template's index order; [] for the template family itself or a space
        without `from_template`."""
        from_template = getattr(self.space, "from_template", None)
        if self.view.family == "autotvm" or from_template is None:
            return []
        try:
            tspace = get_space(layer, hw)
            idx = [int(from_template(tspace.get(int(i))).index) for i in tspace.valid_indices()]
        except ConfigError:
            return []  # no template space (or a template config the family cannot express)
        idx = list(dict.fromkeys(idx))
        ok = self.view.valid_mask(np.asarray(idx, dtype=np.int64))
        return [i for i, k in zip(idx, ok.tolist()) if k]

    def exact_pending(self) -> int:
        return len(self._queue)

    def _learned(self, layer: Layer, hw: HwConfig) -> Tuner:
        """The learned tuner (already `set_task`), `learned_tuner`'s."""
        tuner, self._agent_path, self._refused = learned_tuner(
            self.space, self.view, layer, hw, self.seed, learned=self.learned, agent=self.agent_arg, **self.learned_kw)
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
        if self._queue:  # the template phase: every template point, in order
            take, self._queue = self._queue[:n], self._queue[n:]
            return [self.view.config(i) for i in take]
        return self._chosen().propose(n)

    def observe(self, results: Sequence[MeasureResult]) -> None:
        super().observe(results)
        if self._queue or self._held:
            self._held += list(results)
            if self._queue:
                return
            # the template phase is over: the learned tuner sees all of it at once (one model fit)
            results, self._held = self._held, []
            self.batch_size = self._chosen().batch_size
        self._chosen().observe(results)

    def warm_start(self, results: Sequence[MeasureResult]) -> None:
        super().observe(results)
        self._chosen().warm_start(results)

    def transfer(self, records: Sequence[MeasureRecord]) -> None:
        self._chosen().transfer(records)


__all__ = ["AutoTuner", "DEFAULT_EXHAUSTIVE_S", "learned_tuner"]
