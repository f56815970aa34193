"""The default schedule chooser of a plan: a layer's best AutoTVM-template schedule, by `measure`
over every valid config of its space (the spaces of network layers are small: tens to a few
hundred valid configs, ~1 ms of timing model each)."""

from __future__ import annotations

import functools

from codesign.errors import CodesignError
from codesign.evaluate.run import measure
from codesign.hw.config import HwConfig
from codesign.schedule import get_space
from codesign.schedule.knobs import Config
from codesign.workloads.layers import Layer


@functools.lru_cache(maxsize=512)
def best_template_schedule(layer: Layer, hw: HwConfig) -> tuple[Config, float]:
    """(config, seconds) of the fastest valid schedule of `layer` on `hw` (ties: lowest index);
    CodesignError if the layer has no valid schedule."""
    space = get_space(layer, hw)
    valid = space.valid_indices()
    if not len(valid):
        raise CodesignError(f"layer {layer.name} has no valid schedule on {hw.name}")
    best: tuple[float, int] | None = None
    for i in valid:
        s = measure(layer, space.get(int(i)), hw).seconds
        if best is None or s < best[0]:
            best = (s, int(i))
    return space.get(best[1]), best[0]


def chooser(hw: HwConfig):
    """`choose(layer)` for `plan_network`: `best_template_schedule` on `hw`."""
    return lambda layer: best_template_schedule(layer, hw)


__all__ = ["best_template_schedule", "chooser"]
