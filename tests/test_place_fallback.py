"""The plan's fused-epilogue fallback (`place.plan._fallback_configs`, `_Planner.fused_time`): when the
chosen schedule has no SRAM room for the fused operands, the fastest schedule that has is taken —
on the `vta` family from the template's points there (`from_template`: the same programs, so the
same result as the template family's scan), never from the family's 10^4-10^5 listed schedules."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.errors import InvalidSchedule
from codesign.evaluate.fused import Epilogue, measure_fused
from codesign.hw.config import HwConfig
from codesign.place import plan
from codesign.schedule import get_space
from codesign.schedule.vta_space import VtaSpace
from codesign.workloads import parse_layer

HW = HwConfig()
LAYER = parse_layer("conv2d:1,32,8,8,32,3,3,1,1")
EPI = Epilogue(8, bias=True, relu=True, residual=(1, 0, 1))


def _fused_s(config) -> float | None:  # noqa: ANN001
    try:
        return measure_fused(LAYER, config, HW, EPI).seconds
    except InvalidSchedule:
        return None


@pytest.fixture()
def vta(monkeypatch):
    space = get_space(LAYER, HW, "vta")
    listed = VtaSpace.valid_indices
    # the space is cached per process: another test may have listed it already (then the code uses
    # the listing, legitimately); these tests start from a space nobody listed
    monkeypatch.setattr(space, "_valid", None)
    for name in ("_table", "_row_values"):
        if name in space.__dict__:
            monkeypatch.delattr(space, name)

    def refuse(self):  # noqa: ANN001, ANN202
        if self is space:
            raise AssertionError("the vta family was listed")
        return listed(self)

    monkeypatch.setattr(VtaSpace, "valid_indices", refuse)
    return space


def test_the_fallback_scans_the_template_points_of_the_family_not_the_family(vta):
    tspace = get_space(LAYER, HW)
    got = list(plan._fallback_configs(LAYER, HW, vta))
    want = [vta.from_template(tspace.get(int(i))) for i in tspace.valid_indices()]
    assert [c.index for c in got] == [c.index for c in want] and all(c.family == "vta" for c in got)
    assert len(got) == tspace.n_valid


def test_fused_time_falls_back_to_the_fastest_template_point_with_room(vta):
    tspace = get_space(LAYER, HW)
    # a valid vta schedule without room for the fused operands (the fallback's trigger)
    cands = vta.sample_valid(400, np.random.default_rng(0))
    tight = next(vta.get(int(i)) for i in cands if _fused_s(vta.get(int(i))) is None)
    planner = object.__new__(plan._Planner)
    planner.hw = HW
    config, seconds = planner.fused_time(LAYER, tight, 1.0, EPI)
    timed = [(s, int(i)) for i in tspace.valid_indices() if (s := _fused_s(tspace.get(int(i)))) is not None]
    best_s, best_i = min(timed)
    assert config.family == "vta" and config.index == vta.from_template(tspace.get(best_i)).index
    assert seconds == best_s  # the same program as the template family's best fused schedule
