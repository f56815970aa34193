"""One tuning task (AutoTVM's `Task`): a layer on a hardware config with its schedule space, the
space view every tuner shares and the tuner. `make_task` is the one place these are built, for
`codesign tune`, the sweep's trials and agent pre-training alike."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from codesign.hw.config import HwConfig
from codesign.schedule.space import ScheduleSpace
from codesign.tune.records import DEFAULT_FAMILY, family_space
from codesign.tune.registry import make_tuner
from codesign.tune.tuner import Tuner
from codesign.tune.view import SpaceView
from codesign.workloads.layers import Layer


@dataclass(frozen=True)
class TuneTask:
    layer: Layer
    hw: HwConfig
    space: ScheduleSpace
    view: SpaceView
    tuner: Tuner


def make_task(layer: Layer, hw: HwConfig, tuner: str | Tuner = "xgb", seed: int = 0, *, agent: Any = None,
              space: ScheduleSpace | None = None, view: SpaceView | None = None, family: str = DEFAULT_FAMILY,
              **tuner_kwargs: Any) -> TuneTask:
    """The task of `layer` on `hw`. `tuner` is a registered name (built here with `seed`, `agent`
    and `tuner_kwargs`) or a tuner object (its space and view are used). `space` defaults to the
    cached space of `family` (`family_space`: "autotvm" templates or "vta"), so a (layer, hw)
    space is built once per process."""
    if isinstance(tuner, Tuner):
        return TuneTask(layer, hw, tuner.space, tuner.view, tuner)
    space = space if space is not None else family_space(layer, hw, family)
    view = view or SpaceView(space)
    return TuneTask(layer, hw, space, view, make_tuner(tuner, space, seed, agent=agent, view=view, **tuner_kwargs))


__all__ = ["TuneTask", "make_task"]
