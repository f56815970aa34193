"""The space owns its producer (`VtaSpace.mapping`) and knows which configs it proved valid; the
templates are objects (`schedule.templates.Template`), not names compared across the code."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from codesign.errors import ConfigError, InvalidSchedule
from codesign.evaluate.run import measure
from codesign.hw.config import HwConfig
from codesign.schedule import get_space
from codesign.schedule.templates import CONV2D, CONV2D_TRANSPOSE, DENSE, GROUP_CONV2D, template_of
from codesign.schedule.vta.space import VtaSpace
from codesign.workloads import Conv2D, Dense, parse_layer

HW = HwConfig.resolve("pynq_1x16")
LAYER = Conv2D(1, 32, 7, 7, 48, 3, 3, 1, 1)  # 7x7: tiles of 2, 3, 4 leave edge tiles


def _same(a: object, b: object) -> bool:
    """Deep equality of mappings (dataclasses, tuples, numpy arrays)."""
    if dataclasses.is_dataclass(a):
        return type(a) is type(b) and all(_same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(a, b)
    if isinstance(a, (tuple, list)):
        return isinstance(b, (tuple, list)) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def test_a_sampled_config_is_mapped_without_a_second_check_and_as_a_fresh_space_maps_it(monkeypatch):
    space = get_space(LAYER, HW, "vta")
    idx = space.sample_valid(12, np.random.default_rng(3))
    assert all(space.proven_valid(int(i)) for i in idx)
    fresh = VtaSpace(LAYER, HW)  # proves nothing: checks every rule, maps from one-row batches
    expected = [fresh.mapping(fresh.get(int(i))) for i in idx]

    def no_check(*_a, **_k):
        raise AssertionError("a proven config was checked again")

    monkeypatch.setattr(space, "violations", no_check)
    got = [space.mapping(space.get(int(i))) for i in idx]
    assert all(_same(a, b) for a, b in zip(got, expected))
    assert [measure(LAYER, space.get(int(i)), HW).cycles for i in idx[:3]] == \
        [measure(LAYER, fresh.get(int(i)), HW).cycles for i in idx[:3]]


def test_an_unproven_config_is_still_checked():
    space = VtaSpace(LAYER, HW)
    valid = set(space.sample_valid(64, np.random.default_rng(0)).tolist())
    bad = next(i for i in range(space.size) if i not in valid and space.why_invalid(i) is not None)
    assert not space.proven_valid(bad)
    with pytest.raises(InvalidSchedule, match=space.why_invalid(bad).split(":")[0]):
        space.mapping(space.get(bad))


def test_every_layer_kind_has_its_template_object():
    assert template_of(Conv2D(1, 16, 8, 8, 16, 3, 3, 1, 1)) is CONV2D
    assert template_of(Dense(1, 64, 32)) is DENSE
    assert template_of(parse_layer("conv2d:1,64,8,8,64,3,3,1,1,1,4")).grouped
    assert template_of(CONV2D_TRANSPOSE.name).transposed and CONV2D_TRANSPOSE.edge_axes == ()
    assert "co" not in GROUP_CONV2D.edge_axes and "co" in CONV2D.edge_axes
    with pytest.raises(ConfigError, match="allowed: conv2d_packed.vta"):
        template_of("nope.vta")


SPACE_LAYERS = [Conv2D(1, 32, 8, 8, 32, 3, 3, 1, 1), Dense(1, 256, 128),
                Conv2D(1, 64, 6, 6, 32, 3, 3, 1, 1, groups=2), parse_layer("conv2d_transpose:1,16,4,4,16,4,4,2,1")]


@pytest.mark.parametrize("family", ["autotvm", "vta"])
@pytest.mark.parametrize("layer", SPACE_LAYERS, ids=lambda ly: ly.name)
def test_every_space_maps_an_index_a_config_and_its_knobs_alike_and_refuses_an_invalid_one(layer, family):
    """`space.mapping(index)` for every template and the vta family: an index, its Config and its
    knob dict give the same mapping, whose program is the one `measure` times; an invalid config is
    refused with the space's own message (`why_invalid`)."""
    if family == "vta" and template_of(layer).transposed:
        pytest.skip("the vta family has no transposed-conv space")
    space = get_space(layer, HW, family)
    rng = np.random.default_rng(5)
    valid = space.sample_valid(4, rng) if family == "vta" else rng.choice(space.valid_indices(), 4)
    for i in (int(v) for v in valid):
        m = space.mapping(i)
        assert _same(m, space.mapping(space.get(i))) and _same(m, space.mapping(dict(space.get(i).knobs)))
    bad = next(int(i) for i in rng.integers(0, space.size, 10_000) if space.why_invalid(int(i)) is not None)
    with pytest.raises(InvalidSchedule) as err:
        space.mapping(bad)
    assert space.why_invalid(bad).split(":")[-1].strip() in str(err.value)
