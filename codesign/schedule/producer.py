"""The AutoTVM templates as producers of mappings: a `ScheduleSpace` config -> `Mapping`
(`ScheduleSpace.mapping` calls `template_mapping` with itself and its view's space).

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

Geometry is always read from a space (`mapping_batch`, the one place it is built); configs are
rejected only by the spaces' named validity rules, never by a check here.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

import numpy as np

from codesign.errors import CodesignError, InvalidSchedule
from codesign.mapping.batch import Kernel, MappingBatch, transpose_uops
from codesign.mapping.mapping import Dma, Loop, Mapping, Tile
from codesign.schedule.indexed import KnobSpace
from codesign.schedule.knobs import Config, KnobValue
from codesign.schedule.templates import clip_epilogue
from codesign.schedule.validity import first_failure

# The space calls in here (`ScheduleSpace.mapping`), so it is typed as the base class (no cycle).
ScheduleSpace = KnobSpace


def knob_dict(config: Config | dict[str, KnobValue]) -> dict[str, KnobValue]:
    """AutoTVM entity as a dict from a `Config` (its `.knobs`) or a plain dict (anything else,
    e.g. a list entity read from a file, is refused with one line)."""
    knobs = getattr(config, "knobs", config)
    if not isinstance(knobs, dict):
        raise CodesignError(f"schedule config must be a Config or a knob dict, got {type(config).__name__}")
    return knobs


# -- tile geometry from the space, tabulated per space -------------------------------------------
_TABLE_MAX = 1 << 15  # spaces up to this size (ResNet-18: <= ~2.3k) are tabulated in one pass


@lru_cache(maxsize=64)  # a few MB each at most; keyed by the (cached, long-lived) space object
def geometry_table(space: ScheduleSpace) -> MappingBatch | None:
    """`space.mapping_batch` of every config of a space up to `_TABLE_MAX` (None above): its
    validity mask and every config's geometry row are read from it."""
    if space.size > _TABLE_MAX:
        return None
    return space.mapping_batch(np.arange(space.size, dtype=np.int64))



def geometry_row(space: ScheduleSpace, config: Config | dict[str, KnobValue],
                 skip: tuple[str, ...] = ()) -> tuple[dict[str, int], Kernel, Kernel]:
    """One config's tile geometry (`MappingBatch.row`) and (GEMM, reset) kernels, from `space`: a
    row of the tabulated space when valid, else the config alone. A knob value that is not a
    candidate is a ConfigError naming the allowed values, a config breaking a validity rule
    (`codesign.schedule.validity`, rules named in `skip` aside) an InvalidSchedule naming it."""
    knobs = knob_dict(config)
    table = geometry_table(space)
    index = getattr(config, "index", None)
    # A Config from another space could carry a stale index: use it only if its row has the knobs.
    row = None
    if table is not None and index is not None and 0 <= index < space.size:
        row = table.row(int(index))
        if not _row_has(row, knobs):
            row = None
    if row is None:
        index = space.from_knobs(knobs).index
    if table is not None and space.is_valid(int(index)):
        return (table.row(int(index)) if row is None else row, *table.kernels(int(index)))
    ta = space.mapping_batch(np.array([index], dtype=np.int64))
    why = first_failure(ta, skip=skip)
    if why is not None:
        raise InvalidSchedule(why)
    return (ta.row(0), *ta.kernels(0))


def _row_has(vals: dict[str, int], knobs: dict[str, KnobValue]) -> bool:
    for name, v in knobs.items():  # a plain loop: this runs per evaluated config
        x = vals.get(name)
        if x is not None and x != (int(v[-1]) if isinstance(v, (list, tuple)) else int(v)):
            return False
    return True


# -- the producers -------------------------------------------------------------------------------
@lru_cache(maxsize=4096)  # a space's configs repeat few loops; a Loop is frozen, so they share one
def _loop(name: str, axis: str, extent: int, scale: int = 1) -> Loop:
    return Loop(name, axis, extent, scale)


def conv_mapping(space: ScheduleSpace, config: Config | dict[str, KnobValue], shift: int = 8, *,
                 skip: tuple[str, ...] = ()) -> Mapping:
    """The mapping of conv2d_packed / dense_packed (module docstring) of `space`'s layer."""
    g, gemm, reset = geometry_row(space, config, skip)
    geo = space._geo  # `mapping.batch.geometry(layer, hw)`, built once with the space
    ont, hnt = g["oc_nthread"], g["h_nthread"]
    nh, nco = g["h_tiles"] // hnt, g["co_tiles"] // ont
    loops = (_loop("b", "b", g["b_tiles"]), _loop("h", "h", nh), _loop("co", "co", nco),
             _loop("w", "w", g["w_tiles"]), _loop("k", "ci", g["ci_steps"]))
    tile = Tile(g["tile_b"], g["tile_h"], g["tile_w"], g["tile_ci"], g["tile_co"], g["hin_t"], g["win_t"],
                g["inp_sram"], g["wgt_sram"], g["acc_sram"])
    info = (("tile_b", tile.b), ("tile_h", tile.h), ("tile_w", tile.w), ("tile_ci", tile.ci), ("tile_co", tile.co),
            ("oc_nthread", ont), ("h_nthread", hnt), ("hin_t", tile.hin), ("win_t", tile.win))
    return Mapping(
        geo=geo, tile=tile, loops=loops,
        vthreads=(_loop("ht", "h", hnt, nh), _loop("ot", "co", ont, nco)),
        residency=(("inp", "k"), ("wgt", "k"), ("out", "w")),
        gemm=gemm, reset=reset, epilogue=clip_epilogue(shift),
        dma=(("inp", Dma(g["inp_y_size"], g["inp_x_size"], g["inp_x_stride"])),
             ("wgt", Dma(g["wgt_y_size"], g["wgt_x_size"], g["wgt_x_stride"])),
             ("out", Dma(g["store_y_size"], g["store_x_size"], g["store_x_stride"]))),
        inp_channels=geo.ci, co_per_group=geo.co, info=info)


def template_mapping(space: ScheduleSpace, view: ScheduleSpace, config: Config | dict[str, KnobValue],
                     shift: int = 8, *, skip: tuple[str, ...] = ()) -> Mapping:
    """The mapping of `config` of `space` (any AutoTVM template); `view` is the space of the
    layer's `schedule_view()` conv (`space` itself for conv2d/dense). A grouped or transposed
    config is checked against its own space's rules first (InvalidSchedule naming the rule)."""
    tmpl = space.tmpl
    if not (tmpl.grouped or tmpl.transposed):
        return conv_mapping(space, config, shift, skip=skip)
    knobs = knob_dict(config)
    why = space.why_invalid(knobs)
    if why is not None:
        raise InvalidSchedule(why)
    layer, hw = space.layer, space.hw
    if tmpl.grouped:
        m = conv_mapping(view, knobs, shift, skip=skip)
        return replace(m, inp_channels=layer.in_channels // hw.block_in,
                       co_per_group=layer.out_channels // hw.block_out // layer.groups)
    # The view conv's micro-op rules do not apply: its GEMM kernel is replaced (the layer's own
    # space checked the replacement, `schedule.templates.adapt`).
    m = conv_mapping(view, knobs, shift, skip=(*skip, "uop_hazard", "uop_capacity"))
    t = m.tile
    uops = transpose_uops(layer, t.h, t.w, t.ci, t.co)
    if uops.shape[0] == 0:
        uops = np.zeros((1, 3), dtype=np.int64)  # pragma: no cover - every tile has a real pixel
    return replace(m, gemm=Kernel.from_uops(uops))


__all__ = ["conv_mapping", "geometry_row", "geometry_table", "knob_dict", "template_mapping"]
