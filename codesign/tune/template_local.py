"""The `vta` family's default search (`auto` of `codesign tune|sweep` on `--schedules vta`),
"template+local", in two stages over a set of layers:

1. the template family (`autotvm`): `auto` as on that family — every valid template schedule
   timed when they fit `--exhaustive-budget` (always on the simulator: 40-3,500 per ResNet-18
   layer), else its learned search; its records are template records (`codesign export autotvm`
   has them);
2. the `vta` family: the template optimum's point of the family (`VtaSpace.from_template`, the
   identical program, so it times the same) measured first, then `local` (best-first
   neighbourhood search, its moves ranked before any is timed: `codesign.tune.rank`, with the
   template stage's fastest tilings to transplant onto) with `budget` measurements per layer,
   shared by the task scheduler — or,
   from `LEARNED_MIN_BUDGET` measurements per layer on, that ranked local search for the first
   `LOCAL_FIRST` of them, then the learned search (`family_search`, `LocalThenLearned`), which has
   observed the template stage's results and the local search's measurements.

A form of a plan group (the stem as a direct conv and through space-to-depth) that another form of
the group outclasses at the template stage gets no family stage (`outclassed`): its budget goes to
the other layers (ResNet-18 on pynq_1x16: the direct 7x7 stem, 29.0 ms vs 11.9 ms).

The result of a layer is the faster of both stages, so it is never worse than the template's
best, and the family costs the template's measurements plus `budget` per layer: neither the
family's 10^5-10^6 valid schedules per layer are enumerated nor a model is trained (timing
every valid vta schedule, or a template+learned search that enumerates the family to count it,
cost 30-400x a template trial per ResNet-18 network; docs/schedules.md)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from codesign.hw.config import HwConfig
from codesign.schedule.knobs import Config
from codesign.tune.auto import learned_tuner
from codesign.tune.env import roofline_seconds
from codesign.tune.local import LocalTuner
from codesign.tune.loop import TaskRun, TuneResult
from codesign.tune.measure import MeasureResult
from codesign.tune.rank import TRANSPLANTS
from codesign.tune.records import family_space
from codesign.tune.scheduler import TaskScheduler
from codesign.tune.tuner import Tuner
from codesign.tune.view import SpaceView
from codesign.workloads.layers import Layer

SEARCH = "template+local"
TEMPLATE_FAMILY = "autotvm"
FAMILY = "vta"

#: make_run(layer, position, family, tuner (a name or a Tuner), budget (None: the tuner's plan),
#: configs to measure first) -> the layer's TaskRun (runner, records, warm start: the caller's).
MakeRun = Callable[[Layer, int, str, "str | Tuner", "int | None", Sequence[Config]], TaskRun]


def template_seed(space: Any, template_best: Config | None) -> list[Config]:
    """The template optimum's point of the family, when it is a valid point there ([] if not)."""
    if template_best is None:
        return []
    try:
        point = space.from_template(template_best)
    except Exception:  # noqa: BLE001 - a template config the family cannot express
        return []
    return [point] if space.why_invalid(point) is None else []


def fastest_tilings(space: Any, template: TuneResult, n: int = TRANSPLANTS) -> list[int]:
    """The family's points of the template stage's `n` fastest distinct tilings after its best,
    fastest first (what `rank.transplants` puts a centre's other knobs on)."""
    ok = sorted((r for r in template.history if r.ok), key=lambda r: (r.seconds, int(r.config.index)))
    out: list[int] = []
    for point in as_family(space, ok[1:4 * n]):  # the best is the family stage's first centre already; one
        if int(point.config.index) not in out:  # validity check for all (each costs ~3 ms, a trial ~0.15 s)
            out.append(int(point.config.index))
        if len(out) >= n:
            break
    return out


def combine(template: TuneResult, family: TuneResult) -> TuneResult:
    """The layer's result: the family stage's, with the template stage's measurements counted
    (and its history first) and its best kept when it is faster."""
    family.history = list(template.history) + list(family.history)
    family.measurements += template.measurements
    family.invalid_skipped += template.invalid_skipped
    if template.best_result is not None:
        family.offer(template.best_result)
    return family


def as_family(space: Any, results: Sequence[MeasureResult]) -> list[MeasureResult]:
    """Template results as results of the family's points (`from_template`: the identical
    programs, so the same timings), unmeasured there; those the family cannot express or holds
    invalid are left out."""
    out = []
    for r in results:
        try:
            point = space.from_template(r.config)
        except Exception:  # noqa: BLE001, S112 - a template config the family cannot express
            continue
        out.append(MeasureResult(point, r.seconds, r.cycles, r.error, measured=False))
    keep = SpaceView(space, enumerate_limit=0).valid_mask([int(r.config.index) for r in out]) if out else []
    return [r for r, ok in zip(out, keep) if ok]


#: From this many family measurements per layer on, `auto`'s family stage is the learned search
#: (`family_search`): at 64 per layer template+learned beat template+local on ResNet-18's ten layers on
#: pynq_1x16 by 3.4% of their summed latency (faster on 7, slower on 2 by <= 0.3%) for 9.7x the search
#: CPU (55 vs 5.7 s); at 16 (a sweep trial's default) by 2.4% over the zoo's 140 layers for 5.9x the
#: CPU, which a sweep's many trials do not pay (docs/schedules.md, benchmarks/family_check.py).
LEARNED_MIN_BUDGET = 64


#: The learned search of the family stage: XGBoost, not the shipped agent (`auto.learned_tuner`'s
#: pick on a board, where a measurement costs seconds). ResNet-18 on pynq_1x16 by the user path
#: (`tune --workload` at its default budget 100, then `run --records`), seeds 0 / 1: xgb 99.78 /
#: 100.31 ms for 2.3 / 2.9 CPU-min, the agent 100.53 / 100.32 ms for 3.4 / 4.0 CPU-min.
LEARNED_SEARCH = "xgb"


#: The learned family stage first spends this many measurements per layer on the ranked local search
#: from the template optimum (what a sweep trial does), then the learned search, which has observed
#: them (and the template stage): its model starts from the kernel-knob moves local finds in a few
#: measurements, where it would otherwise spend its first rounds near random (module doc, `LocalThenLearned`).
LOCAL_FIRST = 24


class LocalThenLearned(Tuner):
    """The family stage from `LEARNED_MIN_BUDGET` on: `local` (ranked) for the first `first`
    measurements, then `learned`. Both observe every result; only `learned` is warm-started with the
    template stage's results (local's centres are the family stage's own measurements, as in a sweep
    trial)."""

    def __init__(self, local: Tuner, learned: Tuner, first: int = LOCAL_FIRST) -> None:
        super().__init__(learned.space, learned.seed, view=learned.view)
        self.local, self.learned, self.first = local, learned, int(first)
        self.name = learned.name
        self._measured = 0  # family measurements observed so far

    @property
    def in_local(self) -> bool:
        return self._measured < self.first

    @property
    def batch_size(self) -> int:  # type: ignore[override]
        return self.local.batch_size if self.in_local else self.learned.batch_size

    def set_task(self, layer: Layer, hw: HwConfig) -> None:
        self.local.set_task(layer, hw)
        self.learned.set_task(layer, hw)

    def propose(self, n: int) -> list[Config]:
        if self.in_local:
            return self.local.propose(min(n, self.first - self._measured))
        return self.learned.propose(n)

    def observe(self, results: Sequence[MeasureResult]) -> None:
        super().observe(results)
        self._measured += sum(1 for r in results if r.measured)
        self.local.observe(results)
        self.learned.observe(results)

    def warm_start(self, results: Sequence[MeasureResult]) -> None:
        Tuner.observe(self, results)  # known, not measured here: the local phase's count is unchanged
        self.learned.warm_start(results)

    def transfer(self, records: Sequence[Any]) -> None:
        self.learned.transfer(records)


def family_search(budget: int) -> str | None:
    """`auto`'s family stage for `budget` measurements per layer: the learned search
    (`LEARNED_SEARCH`) from `LEARNED_MIN_BUDGET` on, else None (`local`)."""
    return LEARNED_SEARCH if budget >= LEARNED_MIN_BUDGET else None


def search_name(learned: str | None) -> str:
    """The `search` label of the two stages: "template+local", or "template+<learned>"."""
    return SEARCH if learned is None else f"template+{learned}"


#: The most the family stage is taken to gain on a layer over its template optimum: the largest
#: vta / template-optimum ratio over the zoo's 140 unique layers (172 layer x config rows) is 1.565
#: (`benchmarks/family_check.py` at a trial's 16 per layer, docs/schedules.md; median 1.02; the
#: 1,000-measurement learned search gains 1.10x on ResNet-18's offloaded convs). A form of a group whose
#: template best / this (or its roofline bound, which no schedule beats) still exceeds another form's
#: template best could not become the group's choice however its family search went.
MAX_FAMILY_GAIN = 2.0


def outclassed(layers: Sequence[Layer], best: Sequence[float | None], hw: HwConfig,
               alternatives: Sequence[Mapping[Layer, int]]) -> set[int]:
    """Positions of `layers` no family search could make their plan group's choice: in every group
    of `alternatives` ({form: calls} per group) that asks for it, another form's template best x
    calls is below its reachable floor x calls (the larger of its roofline bound and its template
    best / `MAX_FAMILY_GAIN`). A layer no group names is never outclassed (`best`: the template
    stage's best seconds, None when nothing ran)."""
    seconds = {layer: (math.inf if s is None else float(s)) for layer, s in zip(layers, best)}
    out = set()
    for k, layer in enumerate(layers):
        groups = [g for g in alternatives if layer in g]
        if not groups or not math.isfinite(seconds[layer]):
            continue
        floor = max(seconds[layer] / MAX_FAMILY_GAIN, roofline_seconds(layer, hw) or 0.0)
        if all(any(other != layer and seconds.get(other, math.inf) * calls < floor * g[layer]
                   for other, calls in g.items()) for g in groups):
            out.add(k)
    return out


def tune_template_then_local(layers: Sequence[tuple[Layer, int]], hw: HwConfig, make_run: MakeRun, *, budget: int,
                             seed: int = 0, policy: str = "gain", on_round: Callable[[int, int], Any] | None = None,
                             learned: str | None = None, local_first: int = LOCAL_FIRST,
                             alternatives: Sequence[Mapping[Layer, int]] = ()) -> list[TuneResult]:
    """Both stages over `layers` (with their weights: occurrences); results in their order.
    `alternatives`: the forms of each plan group ({layer: calls}, `place.plan.layer_alternatives`);
    a layer another form of its every group outclasses at the template stage (`outclassed`) gets no
    family stage and keeps its template result, its budget going to the others' shared pool.
    `learned`: the family stage's search is `auto`'s learned search instead of `local`
    ("auto": the shipped agent where it matches, else XGBoost, `auto.learned_tuner`; or a tuner
    name), which observes every template result of its layer (as the family's points) first, after
    `local_first` measurements per layer of the ranked local search (0: the learned search alone)."""
    weights = [count for _layer, count in layers]
    first = [make_run(layer, k, TEMPLATE_FAMILY, "auto", None, ()) for k, (layer, _c) in enumerate(layers)]
    done = TaskScheduler(first, weights, policy=policy, on_round=on_round).run()
    skip = outclassed([layer for layer, _c in layers], [r.best_seconds for r in done], hw, alternatives)
    second, kept = [], [k for k in range(len(layers)) if k not in skip]
    for k, ((layer, _c), res) in enumerate(zip(layers, done)):
        if k in skip:
            continue
        space = family_space(layer, hw, FAMILY)
        if learned is None:
            # not enumerated: validity from the mask, index by index (the family has 10^5-10^6 valid
            # schedules per layer; counting them costs more than the search)
            view = SpaceView(space, enumerate_limit=0)
            tuner: Tuner = LocalTuner(space, seed + k, view=view, ranked=True, tilings=fastest_tilings(space, res))
        else:  # sampled, never listed (`SpaceView`, `VtaSpace.sample_valid`)
            view = SpaceView(space)
            model = learned_tuner(space, view, layer, hw, seed + k, learned=None if learned == "auto" else learned)[0]
            tuner = model if local_first <= 0 else LocalThenLearned(
                LocalTuner(space, seed + k, view=view, ranked=True, tilings=fastest_tilings(space, res)),
                model, local_first)
        run = make_run(layer, k, FAMILY, tuner, budget, template_seed(space, res.best))
        if learned is not None:
            tuner.warm_start(as_family(space, res.history))
        second.append(run)
    scheduler = TaskScheduler(second, [weights[k] for k in kept], policy=policy,
                              on_round=None if on_round is None else lambda j, made: on_round(kept[j], made))
    if policy != "even":  # the pool of today's family stage: a skipped layer's share goes to the others
        scheduler.pool += budget * len(skip)
    found = dict(zip(kept, scheduler.run()))
    return [combine(a, found[k]) if k in found else a for k, a in enumerate(done)]


__all__ = ["FAMILY", "LEARNED_MIN_BUDGET", "LOCAL_FIRST", "MAX_FAMILY_GAIN", "SEARCH", "LocalThenLearned",
           "as_family", "combine", "family_search", "outclassed", "search_name", "template_seed", "tune_template_then_local"]
