"""Each VTA step of a plan with the schedule chosen for its own epilogue (`refine`). The planner
asks its chooser for a layer's schedule without the epilogue (one layer serves ops with and
without a residual add), so it gets one that fits the most demanding; an op without a residual,
or with a ReLU's extra ALU pass, may have a faster one among the layer's other good schedules.
`codesign run` refines with its records (`netrun.schedules.ScheduleChooser`), a sweep trial with
its own measurements (`sweep.trial`): both score the plan `codesign run --records` executes."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Protocol

from codesign.evaluate.fused import Epilogue, measure_fused
from codesign.place.plan import Plan
from codesign.vta import timing
from codesign.workloads.layers import Layer


@dataclass(frozen=True)
class Chosen:
    config: Any
    seconds: float             # timing model, one call (device + host terms)
    source: str                # records | tophub | template | plan | trial
    family: str
    record_s: float | None     # the record's own seconds (a board measurement for tophub)


class EpilogueChooser(Protocol):
    """What `refine` asks: the schedule for any op of a layer, and the one for an op's epilogue."""

    params: timing.TimingParams

    def choose(self, layer: Layer) -> Chosen: ...

    def for_epilogue(self, layer: Layer, epi: Epilogue) -> Chosen: ...


def refine(plan: Plan, chooser: EpilogueChooser) -> tuple[Plan, dict[str, Chosen]]:
    """`plan` with each fused VTA step on the fastest of: the schedule chosen for its epilogue,
    the layer's general choice and the step's own; its time is the fused op's on the timing model
    with the chooser's parameters. Returns the plan and each refined step's schedule."""
    steps, schedules = [], {}
    for step in plan.steps:
        if step.placement == "vta" and step.layer is not None and step.epilogue is not None:
            mine = chooser.for_epilogue(step.layer, step.epilogue)
            given = chooser.choose(step.layer)
            cands = [mine] + ([given] if step.config is None or step.config.index == given.config.index else [])
            calls = step.rewrite.calls if step.rewrite is not None else 1  # a matmul: one call per batch entry
            timed = [(calls * measure_fused(step.layer, c.config, plan.hw, step.epilogue, chooser.params).seconds, k, c)
                     for k, c in enumerate(cands)]
            if step.config is not None and all(step.config is not c.config for c in cands):
                timed.append((calls * measure_fused(step.layer, step.config, plan.hw, step.epilogue,
                                                    chooser.params).seconds,
                              len(cands), Chosen(step.config, step.predicted_s, "plan", step.config.family, None)))
            seconds, _, best = min(timed, key=lambda t: t[:2])
            reason = step.reason
            if step.config is None or best.config is not step.config:
                reason += (f"; then schedule #{best.config.index} ({best.source}, {best.family}) chosen for this op's "
                           f"epilogue: {seconds * 1e3:.3f} ms")
            step = replace(step, config=best.config, predicted_s=seconds, batch_s=seconds, reason=reason)
            schedules[step.name] = best
        steps.append(step)
    return replace(plan, steps=tuple(steps)), schedules


__all__ = ["Chosen", "EpilogueChooser", "refine"]
