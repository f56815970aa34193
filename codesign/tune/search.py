"""The default search of `codesign tune`, `codesign sweep` (every trial's inner loop) and of the
layers `codesign run` is given records for: one value (`Search`) and its defaults, in one place.

AutoTVM's split: a task (`task.make_task`: layer x hw x space x tuner) is what `Search.task`
builds with this search's settings; measuring (runner, records callback, warm start, transferred
seeds) is the caller's, through one function `make_run(task, k, budget, first) -> TaskRun`; the
tuner interface is `tuner.Tuner` (propose / observe / plan_budget / warm_start). `Search.tune`
is the one tuning loop over a set of layers:

- `auto` on the vta family (the default): the template's schedules, then the family stage from
  the template optimum (`template_local`: `local` below `LEARNED_MIN_BUDGET` measurements per
  layer, the learned search from it on);
- any other tuner / family: one task per layer, stepped by the task scheduler (`scheduler`).

`network_layers` is what a whole network asks VTA to run (the plan's layers, `place.choose_layers`:
the rewritten stem, the padded dense, the fused epilogues' layers), with their occurrences: what
`tune --workload` and a sweep trial tune alike, and what `run` then finds records for."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from codesign.errors import ConfigError
from codesign.hw.board import Board
from codesign.hw.config import HwConfig
from codesign.network.graph import Network
from codesign.place import choose_layers
from codesign.place.plan import layer_alternatives
from codesign.schedule.knobs import FAMILIES, Config
from codesign.tune import template_local
from codesign.tune.auto import DEFAULT_EXHAUSTIVE_S
from codesign.tune.loop import TaskRun, TuneResult
from codesign.tune.scheduler import POLICIES, TaskScheduler
from codesign.tune.task import TuneTask, make_task
from codesign.tune.tuner import Tuner
from codesign.workloads.layers import Layer

# -- the defaults, the one place they are written ------------------------------------------------
DEFAULT_TUNER = "auto"  # exhaustive where the simulator makes it cheap, else learned (codesign.tune.auto)
# The vta family (it contains the templates' schedules), whose `auto` is template+local (template+learned
# from LEARNED_MIN_BUDGET measurements per layer): at least as good as the template optimum on every zoo
# layer (benchmarks/family_check.py, benchmarks/sweep_families.py; docs/schedules.md "The default family").
DEFAULT_SCHEDULES = template_local.FAMILY
# The family of every other tuner without --schedules (on the vta family exhaustive would time its
# 10^5-10^6 valid schedules per layer; ppo/dqn act on the template's 7 knobs only).
TEMPLATE_SCHEDULES = template_local.TEMPLATE_FAMILY
# Measurements per layer: `codesign tune` (and what `run` is tuned with: the user path, the learned
# family stage) and one sweep trial (template+local: a ResNet-18 trial of ~2 CPU-s beside 48 others).
TUNE_BUDGET = 100
SWEEP_BUDGET = 16
POLICY = "gain"  # the task scheduler's policy (`scheduler.POLICIES`)
RL_TUNERS = ("bandit", "ppo", "dqn")  # one agent learns layer after layer (not interleaved by the scheduler)

#: make_run(task, position k, budget of the run (None: the tuner's plan), configs measured first) -> its TaskRun
MakeRun = Callable[[TuneTask, int, "int | None", Sequence[Config]], TaskRun]


def default_schedules(tuner: str | None) -> str:
    """The schedule family of `tuner` when none is given: vta for `auto` (there template+local,
    about twice a template search), the templates' for the others."""
    return DEFAULT_SCHEDULES if tuner in (None, DEFAULT_TUNER) else TEMPLATE_SCHEDULES


@dataclass(frozen=True)
class Search:
    """How the layers of one hardware config are tuned. `budget`: measurements per layer (the
    learned tuners; `auto`'s learned or local stage); `cap`: the budget also caps `auto` and
    `exhaustive` outside the two stages, which otherwise plan their own (every valid config when
    exhaustive)."""

    tuner: str = DEFAULT_TUNER
    family: str | None = None  # None: default_schedules(tuner)
    budget: int = TUNE_BUDGET
    seed: int = 0
    exhaustive_s: float = DEFAULT_EXHAUSTIVE_S  # `auto`: exhaustive when a layer fits this many seconds
    hparams: Mapping[str, Any] | None = field(default=None, hash=False)  # `--hparam` of the tuner
    policy: str = POLICY
    cap: bool = False

    def __post_init__(self) -> None:
        if self.family is None:
            object.__setattr__(self, "family", default_schedules(self.tuner))
        if self.family not in FAMILIES:
            raise ConfigError(f"--schedules {self.family!r}: allowed: {', '.join(FAMILIES)}")
        if not isinstance(self.budget, int) or self.budget < 1:
            raise ConfigError(f"--budget {self.budget!r}: must be a positive integer")
        if not isinstance(self.exhaustive_s, (int, float)) or not self.exhaustive_s >= 0:
            raise ConfigError(f"--exhaustive-budget {self.exhaustive_s!r}: must be a number of seconds >= 0")
        if self.policy not in POLICIES:
            raise ConfigError(f"--task-scheduler {self.policy!r}: allowed: {', '.join(POLICIES)}")

    @property
    def two_stage(self) -> bool:
        """`auto` on the vta family: template stage, then the family stage (`template_local`)."""
        return self.tuner == DEFAULT_TUNER and self.family == template_local.FAMILY

    @property
    def label(self) -> str:
        """What the search is called in output ("template+local", "template+learned", "xgb", ...)."""
        if not self.two_stage:
            return self.tuner
        learned = template_local.family_search(self.budget)
        return template_local.search_name(learned if learned != "auto" else "learned")

    def with_budget(self, budget: int) -> Search:
        return replace(self, budget=int(budget))

    def task(self, layer: Layer, hw: HwConfig, k: int = 0, *, family: str | None = None,
             tuner: str | Tuner | None = None, agent: Any = None) -> TuneTask:
        """The task of the `k`-th layer: this search's tuner (or `tuner`, a stage's) on `family`
        (default this search's), seeded `seed + k`."""
        name = self.tuner if tuner is None else tuner
        extra: dict[str, Any] = {}
        if name == "auto":
            extra = {"time_budget_s": self.exhaustive_s, "learned_budget": self.budget}
        if self.hparams and tuner is None:
            extra["hparams"] = dict(self.hparams)
        return make_task(layer, hw, name, self.seed + k, agent=agent, family=family or self.family, **extra)

    def run_budget(self, task: TuneTask) -> int | None:
        """The measurement cap of a task's run: None lets `auto`/`exhaustive` plan their own."""
        return None if task.tuner.name in ("auto", "exhaustive") and not self.cap else self.budget

    def tune(self, layers: Sequence[tuple[Layer, int]], hw: HwConfig, make_run: MakeRun, *,
             on_round: Callable[[int, int], Any] | None = None,
             alternatives: Sequence[Mapping[Layer, int]] = ()) -> list[TuneResult]:
        """Tune `layers` (with their occurrences: the scheduler's weights) on `hw`; results in order.
        `alternatives`: the plan groups' forms (`network_alternatives`): the two-stage search gives
        no family stage to a form another form of its group outclasses (`template_local.outclassed`)."""
        if self.two_stage:
            def stage_run(layer: Layer, k: int, family: str, tuner: str | Tuner, budget: int | None,
                          first: Sequence[Config]) -> TaskRun:
                task = self.task(layer, hw, k, family=family, tuner=tuner)
                return make_run(task, k, budget, first)

            return template_local.tune_template_then_local(
                layers, hw, stage_run, budget=self.budget, seed=self.seed, policy=self.policy, on_round=on_round,
                learned=template_local.family_search(self.budget), alternatives=alternatives)
        runs = []
        for k, (layer, _count) in enumerate(layers):
            task = self.task(layer, hw, k)
            runs.append(make_run(task, k, self.run_budget(task), ()))
        return TaskScheduler(runs, [count for _layer, count in layers], policy=self.policy, on_round=on_round).run()


def network_layers(network: Network, hw: HwConfig, board: Board | str | None = None) -> list[tuple[Layer, int]]:
    """The layers a network's plan asks VTA about on `hw` (`place.choose_layers`: every VTA form of
    every conv/linear/matmul group whose epilogue VTA can run — the stem through space-to-depth, the
    padded dense, ...), with their occurrences per request, in plan order."""
    hw = HwConfig.resolve(hw)
    return list(choose_layers(network, hw, board if board is not None else Board.for_target(hw.TARGET)).items())


def network_alternatives(network: Network, hw: HwConfig, board: Board | str | None = None) -> list[dict[Layer, int]]:
    """Each plan group's forms among `network_layers` (`place.plan.layer_alternatives`): what
    `Search.tune` is given so a form another form outclasses gets no family stage."""
    hw = HwConfig.resolve(hw)
    return layer_alternatives(network, hw, board if board is not None else Board.for_target(hw.TARGET))


__all__ = ["DEFAULT_SCHEDULES", "DEFAULT_TUNER", "MakeRun", "POLICY", "RL_TUNERS", "SWEEP_BUDGET", "Search",
           "TEMPLATE_SCHEDULES", "TUNE_BUDGET", "default_schedules", "network_alternatives", "network_layers"]
