"""The AutoTVM template family as a producer of mappings: Config → `Mapping`.

`conv2d_packed.vta` and `dense_packed.vta` (dense is a 1x1 conv on a 1x1 image, docs/vta.md
§7.5) tile the layer's output as (bo, h0, co0, w0) tile loops with the input channels innermost
and the virtual threads split off h0 and co0 (cthread outermost, docs/vta.md §7.3); INP and WGT
are loaded at every reduction step, the tile is stored once per pair. Their grouped and
transposed variants (docs/vta.md §7.6) are the same nest over their `schedule_view()` conv:

- `group_conv2d_packed.vta`: one group's conv; the INP load of the co tile reads the input
  channel blocks of its group (`Mapping.co_per_group`, a co tile lies in one group), the data
  tensor holds all groups' channels (`Mapping.inp_channels`).
- `conv2d_transpose_packed.vta`: the stride-1 conv over the dilated, padded input with the GEMM
  kernel replaced by the unfolded, zero-skipping one (`mapping.batch.transpose_uops`).

Geometry is always read from the layer's `ScheduleSpace` (`mapping_batch`, the one place it is
built); configs are rejected only by the space's named validity rules, never by a check here.
`FAMILIES` maps a template name to its producer (the one place template names are dispatched).
`vta_mapping` is the producer of the `vta` family (`schedule.vta_space`, docs/schedules.md);
`mapping_for` dispatches on the config's family first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import lru_cache

import numpy as np

from codesign.errors import CodesignError, InvalidSchedule
from codesign.hw.config import HwConfig
from codesign.mapping.batch import (
    Kernel,
    MappingBatch,
    geometry,
    inner,
    transpose_uops,
)
from codesign.mapping.mapping import Dma, Loop, Mapping, Tile
from codesign.schedule.knobs import Config, KnobValue, family_of
from codesign.schedule.space import ScheduleSpace, get_space
from codesign.schedule.templates import (
    CONV2D,
    CONV2D_TRANSPOSE,
    DENSE,
    GROUP_CONV2D,
    TEMPLATES,
    Template,
    clip_epilogue,
)
from codesign.schedule.validity import first_failure
from codesign.workloads.layers import Layer


def knob_dict(config: Config | dict[str, KnobValue]) -> dict[str, KnobValue]:
    """AutoTVM entity as a dict from a `Config` (its `.knobs`) or a plain dict (anything else,
    e.g. a list entity read from a file, is refused with one line)."""
    knobs = getattr(config, "knobs", config)
    if not isinstance(knobs, dict):
        raise CodesignError(f"schedule config must be a Config or a knob dict, got {type(config).__name__}")
    return knobs


# -- tile geometry from the space, tabulated per (layer, hw) -------------------------------------
_TABLE_MAX = 1 << 15  # spaces up to this size (ResNet-18: <= ~2.3k) are tabulated in one pass


@lru_cache(maxsize=64)  # a few MB each at most
def _space_table(layer: Layer, hw: HwConfig) -> tuple[ScheduleSpace, MappingBatch | None]:
    space = get_space(layer, hw)  # ConfigError (one line) when the layer has no space on hw
    if space.size > _TABLE_MAX:
        return space, None
    return space, space.mapping_batch(np.arange(space.size, dtype=np.int64))


def geometry_row(layer: Layer, config: Config | dict[str, KnobValue], hw: HwConfig,
                 skip: tuple[str, ...] = ()) -> tuple[dict[str, int], Kernel, Kernel]:
    """One config's tile geometry (`MappingBatch.row`) and (GEMM, reset) kernels, from the layer's
    space: a row of the tabulated space when valid, else the config alone. A knob value that is
    not a candidate is a ConfigError naming the allowed values, a config breaking a validity rule
    (`codesign.schedule.validity`, rules named in `skip` aside) an InvalidSchedule naming it."""
    knobs = knob_dict(config)
    space, table = _space_table(layer, hw)
    index = getattr(config, "index", None)
    # A Config from another space could carry a stale index: use it only if its row has the knobs.
    if table is None or index is None or not 0 <= index < space.size or not _row_has(table.row(int(index)), knobs):
        index = space.from_knobs(knobs).index
    if table is not None and space.is_valid(int(index)):
        return (table.row(int(index)), *table.kernels(int(index)))
    ta = space.mapping_batch(np.array([index], dtype=np.int64))
    why = first_failure(ta, skip=skip)
    if why is not None:
        raise InvalidSchedule(why)
    return (ta.row(0), *ta.kernels(0))


def _row_has(vals: dict[str, int], knobs: dict[str, KnobValue]) -> bool:
    return all(inner(v) == vals[name] for name, v in knobs.items() if name in vals)


# -- the producers -------------------------------------------------------------------------------
def conv_mapping(layer: Layer, config: Config | dict[str, KnobValue], hw: HwConfig, shift: int = 8, *,
                 skip: tuple[str, ...] = ()) -> Mapping:
    """The mapping of conv2d_packed / dense_packed (module docstring)."""
    g, gemm, reset = geometry_row(layer, config, hw, skip)
    geo = geometry(layer, hw)
    ont, hnt = g["oc_nthread"], g["h_nthread"]
    nh, nco = g["h_tiles"] // hnt, g["co_tiles"] // ont
    loops = (Loop("b", "b", g["b_tiles"]), Loop("h", "h", nh), Loop("co", "co", nco),
             Loop("w", "w", g["w_tiles"]), Loop("k", "ci", g["ci_steps"]))
    tile = Tile(g["tile_b"], g["tile_h"], g["tile_w"], g["tile_ci"], g["tile_co"], g["hin_t"], g["win_t"],
                g["inp_sram"], g["wgt_sram"], g["acc_sram"])
    info = (("tile_b", tile.b), ("tile_h", tile.h), ("tile_w", tile.w), ("tile_ci", tile.ci), ("tile_co", tile.co),
            ("oc_nthread", ont), ("h_nthread", hnt), ("hin_t", tile.hin), ("win_t", tile.win))
    return Mapping(
        geo=geo, tile=tile, loops=loops,
        vthreads=(Loop("ht", "h", hnt, scale=nh), Loop("ot", "co", ont, scale=nco)),
        residency=(("inp", "k"), ("wgt", "k"), ("out", "w")),
        gemm=gemm, reset=reset, epilogue=clip_epilogue(shift),
        dma=tuple((op, Dma(g[f"{kind}_y_size"], g[f"{kind}_x_size"], g[f"{kind}_x_stride"]))
                  for op, kind in (("inp", "inp"), ("wgt", "wgt"), ("out", "store"))),
        inp_channels=geo.ci, co_per_group=geo.co, info=info)


def _checked(layer: Layer, config: Config | dict[str, KnobValue], hw: HwConfig) -> dict[str, KnobValue]:
    """The knobs of a grouped/transposed conv after its own space's rules (InvalidSchedule)."""
    knobs = knob_dict(config)
    why = get_space(layer, hw).why_invalid(knobs)
    if why is not None:
        raise InvalidSchedule(why)
    return knobs


def group_mapping(layer: Layer, config: Config | dict[str, KnobValue], hw: HwConfig, shift: int = 8) -> Mapping:
    m = conv_mapping(layer.schedule_view(), _checked(layer, config, hw), hw, shift)
    return replace(m, inp_channels=layer.in_channels // hw.block_in,
                   co_per_group=layer.out_channels // hw.block_out // layer.groups)


def transpose_mapping(layer: Layer, config: Config | dict[str, KnobValue], hw: HwConfig, shift: int = 8) -> Mapping:
    knobs = _checked(layer, config, hw)
    # The view conv's micro-op rules do not apply: its GEMM kernel is replaced (the layer's own
    # space checked the replacement, `schedule.templates.adapt`).
    m = conv_mapping(layer.schedule_view(), knobs, hw, shift, skip=("uop_hazard", "uop_capacity"))
    t = m.tile
    uops = transpose_uops(layer, t.h, t.w, t.ci, t.co)
    if uops.shape[0] == 0:
        uops = np.zeros((1, 3), dtype=np.int64)  # pragma: no cover - every tile has a real pixel
    return replace(m, gemm=Kernel.from_uops(uops))


def vta_mapping(layer: Layer, config: Config | dict[str, KnobValue], hw: HwConfig, shift: int = 8) -> Mapping:
    """The mapping of a `vta`-family config (`schedule.vta`): its space's own producer
    (`VtaSpace.mapping`). Invalid configs raise InvalidSchedule naming the rule."""
    return get_space(layer, hw, "vta").mapping(config, shift)


Producer = Callable[..., Mapping]
FAMILIES: dict[Template, Producer] = {
    CONV2D: conv_mapping,
    DENSE: conv_mapping,
    GROUP_CONV2D: group_mapping,
    CONV2D_TRANSPOSE: transpose_mapping,
}


def mapping_for(layer: Layer, config: Config | dict[str, KnobValue], hw: HwConfig, shift: int = 8) -> Mapping:
    """The `Mapping` of `layer` under `config`: a `vta`-family config by `vta_mapping`, an AutoTVM
    one by its template's producer (`FAMILIES`)."""
    if family_of(config) == "vta":
        return vta_mapping(layer, config, hw, shift)
    template = getattr(layer, "template", None)
    producer = FAMILIES.get(TEMPLATES.get(template))  # type: ignore[arg-type]
    if producer is None:
        raise CodesignError(f"layer {getattr(layer, 'name', layer)!r}: template {template!r} is not "
                            f"supported by the compiler (allowed: {', '.join(t.name for t in FAMILIES)})")
    return producer(layer, config, hw, shift)
