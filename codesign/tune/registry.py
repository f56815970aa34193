"""Tuners by name. Each entry names the module and class of one tuner, so listing the tuners (CLI
choices, validation) imports none of them, and a tuner's heavy libraries (torch, xgboost) load
only when it is built. Adding a tuner is one line here."""

from __future__ import annotations

import importlib
from typing import Any

from codesign.errors import ConfigError
from codesign.schedule.space import ScheduleSpace
from codesign.tune.tuner import Tuner
from codesign.tune.view import SpaceView

TUNER_CLASSES: dict[str, str] = {
    "auto": "codesign.tune.auto:AutoTuner",
    "exhaustive": "codesign.tune.exhaustive:ExhaustiveTuner",
    "random": "codesign.tune.random_tuner:RandomTuner",
    "grid": "codesign.tune.grid:GridTuner",
    "ga": "codesign.tune.ga:GATuner",
    "xgb": "codesign.tune.xgb:XGBTuner",
    "evo": "codesign.tune.evo:EvoTuner",
    "bandit": "codesign.tune.bandit:BanditTuner",
    "ppo": "codesign.tune.ppo:PPOTuner",
    "dqn": "codesign.tune.dqn:DQNTuner",
}
TUNERS: tuple[str, ...] = tuple(TUNER_CLASSES)


def tuner_class(name: str) -> type[Tuner]:
    """The class registered as `name`; ConfigError naming the allowed tuners otherwise."""
    target = TUNER_CLASSES.get(name.lower())
    if target is None:
        raise ConfigError(f"tuner {name!r} is unknown; allowed: {', '.join(TUNERS)}")
    module, _, cls = target.partition(":")
    return getattr(importlib.import_module(module), cls)


def make_tuner(name: str, space: ScheduleSpace, seed: int = 0, *, agent: Any = None,
               view: SpaceView | None = None, **kwargs: Any) -> Tuner:
    """Build a tuner by name (`TUNERS`). `agent` (path or object) warm-starts RL tuners."""
    cls = tuner_class(name)
    if agent is not None:
        kwargs["agent"] = agent
    return cls(space, seed=seed, view=view, **kwargs)


__all__ = ["TUNERS", "TUNER_CLASSES", "make_tuner", "tuner_class"]
