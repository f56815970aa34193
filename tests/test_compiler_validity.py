"""The compiler accepts exactly the configs the validity rules accept: it states no rule itself
(`ScheduleSpace.mapping` reads its geometry from the layer's `ScheduleSpace` and raises the first
rule of `codesign.schedule.validity` a config breaks)."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.errors import CodesignError, ConfigError, InvalidSchedule
from codesign.evaluate.compiler import compile_insns
from codesign.hw.config import HwConfig
from codesign.schedule import get_space
from codesign.schedule.families import mapping_for as plan_for
from codesign.schedule.knobs import Config
from codesign.workloads import Conv2D, Dense
from codesign.workloads.layers import Conv2DTranspose

HW1 = HwConfig.resolve("pynq_1x16")
HW4 = HwConfig.resolve("pynq_4x8")
# Small buffers, so that SRAM and micro-op capacity rules reject configs too.
SMALL = HW1.with_(LOG_UOP_BUFF_SIZE=7, LOG_ACC_BUFF_SIZE=15, LOG_INP_BUFF_SIZE=13)

LAYERS = [  # batch 4: a multiple of BATCH on both configs
    Conv2D(4, 32, 8, 8, 32, 3, 3, 1, 1),
    Conv2D(4, 32, 16, 16, 64, 3, 3, 2, 1),
    Conv2D(4, 64, 8, 8, 32, 1, 1, 1, 0),
    Dense(4, 256, 128),
]


def _decisions(layer, hw, build) -> tuple[np.ndarray, dict[int, str]]:
    """Accept mask of `build(layer, config, hw)` over every config of the space, and the
    InvalidSchedule message of each rejected one."""
    space = get_space(layer, hw)
    ok = np.zeros(space.size, dtype=bool)
    why: dict[int, str] = {}
    for index in range(space.size):
        try:
            build(layer, space.get(index), hw)
            ok[index] = True
        except InvalidSchedule as err:
            why[index] = str(err)
    return ok, why


@pytest.mark.parametrize("hw", [HW1, HW4, SMALL], ids=["1x16", "4x8", "small"])
@pytest.mark.parametrize("layer", LAYERS, ids=lambda ly: ly.name)
def test_compiler_accepts_exactly_what_validity_accepts(layer, hw):
    space = get_space(layer, hw)
    valid = space.valid_mask()
    ok, why = _decisions(layer, hw, plan_for)
    assert np.array_equal(ok, valid)
    # the compiler's message is the named rule's, config for config
    assert why == {i: space.why_invalid(i) for i in np.flatnonzero(~valid).tolist()}
    # a knob dict (no index) and a Config with a stale index take the same decisions
    rng = np.random.default_rng(0)
    for index in rng.choice(space.size, size=min(space.size, 40), replace=False).tolist():
        cfg = space.get(index)
        stale = Config((index + 1) % space.size, cfg.knobs)
        for config in (dict(cfg.knobs), stale):
            try:
                plan_for(layer, config, hw)
                assert valid[index]
            except InvalidSchedule as err:
                assert str(err) == why[index]


def test_both_outcomes_are_covered():
    """The parametrized grid above rejects and accepts configs (else it would prove nothing)."""
    masks = [get_space(ly, hw).valid_mask() for ly in LAYERS for hw in (HW1, HW4, SMALL)]
    assert all(m.any() for m in masks) and sum(int((~m).sum()) for m in masks) > 100
    rules = {get_space(ly, SMALL).why_invalid(int(i)).split(":")[0]
             for ly in LAYERS for i in np.flatnonzero(~get_space(ly, SMALL).valid_mask())}
    assert {"SRAM capacity", "uop capacity"} <= rules


@pytest.mark.parametrize("layer", [Conv2D(1, 64, 6, 6, 32, 3, 3, 1, 1, groups=2),
                                   Conv2D(1, 64, 7, 7, 64, 3, 3, 2, 1, groups=4),
                                   Conv2DTranspose(1, 16, 4, 4, 16, 4, 4, 2, 1),
                                   Conv2DTranspose(1, 16, 2, 3, 16, 3, 3, 3, 0)], ids=lambda ly: ly.name)
def test_template_plans_accept_exactly_what_validity_accepts(layer):
    space = get_space(layer, HW1)
    ok, why = _decisions(layer, HW1, plan_for)
    valid = space.valid_mask()
    assert valid.any() and not valid.all()
    assert np.array_equal(ok, valid)
    assert why == {i: space.why_invalid(i) for i in np.flatnonzero(~valid).tolist()}


def test_knob_outside_the_space_and_layer_without_a_space_are_one_line():
    layer = LAYERS[0]
    knobs = dict(get_space(layer, HW1).valid_configs()[0].knobs, tile_h=[2, 3])  # 3 does not divide 8
    with pytest.raises(ConfigError, match=r"knob tile_h=\[2, 3\] is not a candidate"):
        plan_for(layer, knobs, HW1)
    knobs = dict(get_space(layer, HW1).valid_configs()[0].knobs, oc_nthread=4)
    with pytest.raises(ConfigError, match="knob oc_nthread=4 is not a candidate; allowed: 1, 2"):
        plan_for(layer, knobs, HW1)
    # in_channels=24 is no multiple of BLOCK_IN=16: no schedule space, so nothing to compile
    with pytest.raises(CodesignError, match="in_channels=24"):
        compile_insns(Conv2D(1, 24, 8, 8, 32, 3, 3, 1, 1), knobs, HW1)
