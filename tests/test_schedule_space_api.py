"""The space owns its producer (`VtaSpace.mapping`) and knows which configs it proved valid; the
templates are objects (`schedule.templates.Template`), not names compared across the code."""

from __future__ import annotations

import dataclasses
import hashlib

import numpy as np
import pytest

from codesign.errors import ConfigError, InvalidSchedule
from codesign.evaluate.run import measure
from codesign.hw.config import HwConfig
from codesign.schedule import get_space
from codesign.schedule.families import mapping_for
from codesign.schedule.space import ScheduleSpace
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


# The old producers' (`families.conv_mapping` / `group_mapping` / `transpose_mapping` dispatched by
# `families.mapping_for`, `families.vta_mapping`; main at 863d0f5) mappings of sampled valid configs
# as `_digest`s, and their one-line refusal of invalid configs (a codesign rule, then a template rule).
OLD = {
    "conv2d": (LAYER, "autotvm", {0: "7c9f4dc9f738686e", 3: "5c0b1c0efc028b7e", 9: "d3a578d4153350b6",
                                   11: "accfc56445c90ae1"},
               {2: "uop dst hazard: in the unrolled GEMM kernel (3 uops, tile_co=1, tile_h=1) a micro-op writes "
                   "the same ACC row as one of the previous two"}),
    "dense": (Dense(1, 64, 32), "autotvm", {0: "2ae21746dc41ffd7", 2: "6b789daed5f31f97", 5: "cf70ca35cbc090a0",
                                            8: "0a6bb72856841f91"},
              {9: "virtual-thread divisibility: 1 co tile(s) (co 2 / tile_co 2) not divisible by oc_nthread=2"}),
    "group_conv2d": (parse_layer("conv2d:1,64,8,8,64,3,3,1,1,1,4"), "autotvm",
                     {0: "c9765495d44ebe08", 14: "e3644201fac8558c", 58: "602797399e50c1d0", 110: "85777aec4ab4e9e7"},
                     {4: "uop dst hazard: in the unrolled GEMM kernel (3 uops, tile_co=1, tile_h=1) a micro-op writes "
                         "the same ACC row as one of the previous two",
                      16: "group conv: a co tile of 2 blocks crosses a group boundary (1 output blocks per group; "
                          "tile_co[1] must divide it)"}),
    "conv2d_transpose": (parse_layer("conv2d_transpose:1,32,4,4,16,4,4,2,1"), "autotvm",
                         {6: "09d6bc2220dd815a", 10: "4edcd349efd00b2f", 15: "8392610413db3808",
                          78: "6d63cb0cc7608c37"},
                         {0: "uop dst hazard: in the unrolled GEMM kernel (4 uops, tile_co=1, tile_h=1) a micro-op "
                             "writes the same ACC row as one of the previous two",
                          2: "conv2d transpose: tile_w=1 is not a multiple of the stride 2 and there are 8 w tiles, "
                             "so the zero-skip pattern would differ between tiles"}),
    "vta": (LAYER, "vta", {1824858136: "a9cb060c33a98cc8", 1825117286: "e9cf2bd799ad07d4",
                           1831694874: "8996e051fb9efdc8", 3075854426: "7cffa328630a2812"},
            {5: "uop_hazard: uop dst hazard: in the unrolled GEMM kernel (3 uops, tile_co=1, tile_h=1) a micro-op "
                "writes the same ACC row as one of the previous two"}),
}


def _feed(h: hashlib._Hash, x: object) -> None:
    if dataclasses.is_dataclass(x):
        h.update(type(x).__name__.encode())
        for f in dataclasses.fields(x):
            h.update(f.name.encode())
            _feed(h, getattr(x, f.name))
    elif isinstance(x, np.ndarray):
        h.update(str(x.dtype).encode() + str(x.shape).encode() + np.ascontiguousarray(x).tobytes())
    elif isinstance(x, (tuple, list)):
        h.update(b"(%d" % len(x))
        for y in x:
            _feed(h, y)
    else:
        h.update(repr(x).encode())


def _digest(m: object) -> str:
    """Every field of a mapping, arrays by dtype, shape and bytes, hashed."""
    h = hashlib.sha256()
    _feed(h, m)
    return h.hexdigest()[:16]


@pytest.mark.parametrize("case", sorted(OLD))
def test_every_space_maps_an_index_as_the_old_producer_did(case):
    layer, family, valid, invalid = OLD[case]
    space = get_space(layer, HW, family)
    assert isinstance(space, VtaSpace if family == "vta" else ScheduleSpace)
    for i, old in valid.items():
        m = space.mapping(i)
        assert _digest(m) == old, (case, i)
        assert _same(m, space.mapping(space.get(i))) and _same(m, mapping_for(layer, space.get(i), HW))
    for i, message in invalid.items():
        assert "\n" not in message
        with pytest.raises(InvalidSchedule) as e:
            space.mapping(i)
        assert str(e.value) == message
        with pytest.raises(InvalidSchedule) as e:
            mapping_for(layer, space.get(i), HW)
        assert str(e.value) == message


def test_a_grouped_or_transposed_space_maps_through_its_view_conv():
    conv = get_space(LAYER, HW)
    assert conv.view is conv
    for spec in ("conv2d:1,64,8,8,64,3,3,1,1,1,4", "conv2d_transpose:1,32,4,4,16,4,4,2,1"):
        space = get_space(parse_layer(spec), HW)
        assert space.view is get_space(space.layer.schedule_view(), HW) and space.view.tmpl is CONV2D
