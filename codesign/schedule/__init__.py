"""Schedule spaces of the VTA AutoTVM templates: knobs, AutoTVM indices, validity rules and
fixed-size features over the tile geometry of `codesign.mapping.batch`; every space
produces a config's Mapping (`space.mapping`; `producer` for the templates, `families.mapping_for` by
family)."""

from codesign.schedule.features import (
    CONFIG_FEATURE_NAMES,
    HW_FEATURE_NAMES,
    LAYER_FEATURE_NAMES,
    N_CONFIG_FEATURES,
    N_HW_FEATURES,
    N_LAYER_FEATURES,
    hw_features,
    layer_features,
)
from codesign.schedule.knobs import CONV_KNOBS, DENSE_KNOBS, Config, Knob, get_factors, make_knobs
from codesign.schedule.space import ScheduleSpace, get_space
from codesign.schedule.support import partition, unsupported_reason

__all__ = [
    "CONFIG_FEATURE_NAMES", "HW_FEATURE_NAMES", "LAYER_FEATURE_NAMES", "N_CONFIG_FEATURES",
    "N_HW_FEATURES", "N_LAYER_FEATURES", "hw_features", "layer_features",
    "CONV_KNOBS", "DENSE_KNOBS", "Config", "Knob", "get_factors", "make_knobs",
    "ScheduleSpace", "get_space", "partition", "unsupported_reason",
]
