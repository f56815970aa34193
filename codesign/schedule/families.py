"""A config's `Mapping`, whatever its family: every schedule space produces its own
(`ScheduleSpace.mapping`: the AutoTVM templates, `schedule/producer.py`; `VtaSpace.mapping`: the
`vta` family, `schedule/vta/producer.py`); `mapping_for` finds the space of a config's family."""

from __future__ import annotations

from codesign.hw.config import HwConfig
from codesign.mapping.mapping import Mapping
from codesign.schedule.knobs import Config, KnobValue, family_of
from codesign.schedule.space import get_space
from codesign.workloads.layers import Layer


def mapping_for(layer: Layer, config: Config | dict[str, KnobValue], hw: HwConfig, shift: int = 8) -> Mapping:
    """The `Mapping` of `layer` under `config` on `hw`, by the space of the config's family (a
    layer whose template the compiler does not know is a ConfigError naming the templates)."""
    return get_space(layer, hw, family_of(config)).mapping(config, shift)


__all__ = ["mapping_for"]
