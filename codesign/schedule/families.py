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
    pad_rows_kernel,
    pad_skip_kernel,
    transpose_uops,
)
from codesign.mapping.edges import N_VARIANTS, Edges, EdgeTile
from codesign.mapping.mapping import Dma, Loop, Mapping, Tile
from codesign.schedule import edge_rules
from codesign.schedule.knobs import Config, KnobValue, family_of
from codesign.schedule.space import ScheduleSpace, get_space
from codesign.schedule.templates import GROUP_TEMPLATE, TRANSPOSE_TEMPLATE, clip_epilogue
from codesign.schedule.validity import first_failure
from codesign.schedule.vta_space import LIFTS, ORDERS, PAIR_AXES, VTHREADS, VtaBatch, VtaSpace
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
    """The mapping of a `vta`-family config (`schedule.vta_space`): the template's tile
    geometry with the config's loop order, INP/WGT residency, loops inside the reduction (ACC
    slots), thread axis and INP loads per tile.
    Invalid configs raise InvalidSchedule naming the rule."""
    space = get_space(layer, hw, "vta")
    # The fast path (a row of the table of every valid config) only once they are enumerated: a
    # search that measures a few configs must not enumerate the family's 10^5-10^6 valid ones.
    index = space.valid_index_of(config) if _enumerated(space) else None
    if index is None:
        cfg = space.as_config(config)
        why = space.why_invalid(cfg)
        if why is not None:
            raise InvalidSchedule(why)
        index = cfg.index
    return _vta_mapping(space, index, shift)


#: Valid configs up to which a listed space maps configs from its table of all of them: a row
#: costs ~2 KB (the batch's arrays, the index dict, the row's knob values), so 2.4M valid schedules
#: (ResNet-18's 56x56 conv on pynq_4x8) would hold ~5 GB per layer for a search of 10^3 configs.
TABLE_MAX = 1 << 17


def _enumerated(space: VtaSpace) -> bool:
    """The space has its valid configs listed already (an exhaustive search did) and they are
    few enough to tabulate (`TABLE_MAX`): their table costs one batch, and every later config is a
    row lookup. A larger listing (counted, e.g. `n_valid`) maps each config from its own row."""
    if hasattr(space, "_table"):
        return True
    valid = getattr(space, "_valid", None)
    return valid is not None and len(valid) <= TABLE_MAX


@lru_cache(maxsize=4096)  # tuners re-measure and re-run the same configs
def _vta_mapping(space: VtaSpace, index: int, shift: int) -> Mapping:
    layer, hw = space.layer, space.hw
    r = space.valid_table()[1].get(index) if _enumerated(space) else None
    b = space.valid_table()[0] if r is not None else None
    if r is None:  # no table yet (or not in it): the config's own one-row batch
        b, r = space.batch(np.array([index], dtype=np.int64)), 0
    g = b.t.row(r)
    gemm, reset = b.t.kernels(r)
    order, vt, ws = ORDERS[int(b.order[r])], VTHREADS[int(b.vt[r])], int(b.ws[r])
    ins, n_in, ps = int(b.ins[r]), int(b.acc[r]), int(b.ps[r])
    extent = {a: int(b.extent[a][r]) for a in PAIR_AXES}
    live = [a for a in order if extent[a] > 1]
    inner = tuple(live[len(live) - n_in:]) if n_in else ()  # the n_in innermost loops of extent > 1
    outer = tuple(a for a in order if a not in inner)
    loops = (tuple(Loop(a, a, extent[a]) for a in outer) + (Loop("k", "ci", g["ci_steps"]),)
             + tuple(Loop(a, a, extent[a]) for a in inner))
    vthreads = (Loop(f"{vt}t", vt, int(b.nt[r]), scale=extent[vt]),) if vt else ()
    split = bool(b.split[r])
    tile = Tile(g["tile_b"], g["tile_h"], g["tile_w"], g["tile_ci"], g["tile_co"], g["hin_t"], g["win_t"],
                g["inp_sram"], g["wgt_sram"], g["acc_sram"])
    geo = geometry(layer, hw)
    if ps:  # the padding-skipping kernel (`mapping.batch.pad_skip_kernel`; validity rule pad_skip_tile)
        gemm = pad_skip_kernel(geo, tile.ci, tile.co)[0]
    pre = int(b.pre[r])
    if pre == 2:  # a flat reset kernel: one uop per ACC row of a batch block (`vta_space.apply_flat_reset`)
        reset = Kernel(np.array([[tile.co * tile.h * tile.w, 1, 0, 0]], dtype=np.int64), names=("acc",))
    inp = Dma(tile.hin, tile.win, geo.width) if split else Dma(g["inp_y_size"], g["inp_x_size"], g["inp_x_stride"])
    info = (("tile_b", tile.b), ("tile_h", tile.h), ("tile_w", tile.w), ("tile_ci", tile.ci), ("tile_co", tile.co),
            ("order", ORDERS.index(order)), ("wgt_stationary", ws), ("vthread", VTHREADS.index(vt)),
            ("hin_t", tile.hin), ("win_t", tile.win), ("inp_stationary", ins), ("acc_resident", n_in),
            ("pad_skip", ps), ("uop_preload", pre), ("early_epilogue", int(b.early[r])))
    m = Mapping(
        geo=geo, tile=tile, loops=loops, vthreads=vthreads,
        residency=(("inp", _inp_level(order, extent, ins, inner)),
                   ("wgt", "co" if ws or "co" in inner else "k"), ("out", "k" if inner else order[-1])),
        gemm=gemm, reset=reset, epilogue=clip_epilogue(shift),
        dma=(("inp", inp), ("wgt", Dma(g["wgt_y_size"], g["wgt_x_size"], g["wgt_x_stride"])),
             ("out", Dma(g["store_y_size"], g["store_x_size"], g["store_x_stride"]))),
        inp_channels=geo.ci, co_per_group=geo.co, info=info,
        inp_loads=tile.b * tile.ci if split else 1,
        inp_unpadded=bool(ps),  # the padding-skipping kernel reads the unpadded image (`pad_skip_kernel`)
        uop_preload=pre > 0, early_epilogue=bool(b.early[r]),
        gemm_lift=tuple(tuple(int(x) for x in b.lift_loop[r, s]) for s in range(len(LIFTS[int(b.lift[r])]))))
    if ps:
        m = _pad_rows(m)
    last = tuple(n - 1 if size % f else -1 for size, f, n in (
        (geo.out_h, tile.h, g["h_tiles"]), (geo.out_w, tile.w, g["w_tiles"]), (geo.co, tile.co, g["co_tiles"]),
        (geo.ci, tile.ci, g["ci_steps"])))
    if max(last) >= 0:  # tile sizes that do not divide: the edge tiles' variants (mapping.edges)
        m = replace(m, edges=_edges(space, b, r, g, last, geo.width))
    if layer.template == GROUP_TEMPLATE:
        m = replace(m, inp_channels=layer.in_channels // hw.block_in,
                    co_per_group=layer.out_channels // hw.block_out // layer.groups)
    elif layer.template == TRANSPOSE_TEMPLATE:
        uops = transpose_uops(layer, tile.h, tile.w, tile.ci, tile.co)
        m = replace(m, gemm=Kernel.from_uops(uops if uops.shape[0] else np.zeros((1, 3), dtype=np.int64)))
    return m


def _pad_rows(m: Mapping) -> Mapping:
    """A `pad_skip` mapping whose tile is not the whole output plane: `mapping.batch.pad_rows_kernel`
    in place of the whole-plane kernel (one kernel, its range trimmed at the first / last row tile:
    `Mapping.gemm_trim`), and the padded INP tile and loads of the same tiles without pad_skip."""
    g, t = m.geo, m.tile
    if t.h == g.out_h and t.w == g.out_w:
        return m
    pr = pad_rows_kernel(g, t.h, t.w, t.ci, t.co)
    return replace(m, gemm=pr.kernel, gemm_trim=(pr.top, pr.bottom), inp_unpadded=False)


#: edge tile variants built per space and kept (`_edges`); a bound, not a working-set size
_VARIANT_CACHE_MAX = 1 << 16


def _edges(space: VtaSpace, b: VtaBatch, r: int, one: dict[str, int], last: tuple[int, ...], width: int) -> Edges:
    """The 16 tile variants of config row `r` of `b` (`edge_rules.variant_batch`; `one` its
    `MappingBatch.row`) as `Edges`.

    A variant is determined by its own tile sizes, threads and the config's micro-op fold
    (`edge_rules.VARIANT_KEY`; not by the loop order, the residency or the other axes' sizes), and
    many configs share it (an edge of one row, the full tile, ...): each is built once per space.
    The first config of the space's valid table builds every variant its configs run in one
    `MappingBatch` (an exhaustive walk of 10^5 configs needs a few ten thousand); the rows of an
    `EdgeTile` are read from it at first use."""
    bits = sum(1 << k for k, x in enumerate(last) if x >= 0)
    g = b.t.geo
    fold = int(b.fold[r])
    keys: dict[int, tuple[int, ...]] = {}
    for v in range(N_VARIANTS):
        if v & ~bits:
            continue
        sizes = [one["tile_b"], one["oc_nthread"], one["h_nthread"], fold]  # edge_rules.VARIANT_KEY
        for k, (a, n, tiles) in enumerate((("h", g.out_h, "h_tiles"), ("w", g.out_w, "w_tiles"),
                                           ("co", g.co, "co_tiles"), ("ci", g.ci, "ci_steps"))):
            f = one[f"tile_{a}"]
            sizes.append(n - (one[tiles] - 1) * f if v >> k & 1 else f)  # as edge_rules.variant_sizes
        keys[v] = tuple(sizes)
    cache: dict[tuple[int, ...], EdgeTile] = space.__dict__.setdefault("_edge_variants", {})
    missing = [v for v, key in keys.items() if key not in cache]
    if missing:
        if len(cache) > _VARIANT_CACHE_MAX:
            cache.clear()
        table = space.__dict__.get("_edge_table")
        of_table = _enumerated(space) and b is space.valid_table()[0]  # never enumerates for one config
        if table is None and of_table:  # every variant of the valid table at once
            vkeys, rows, vs = edge_rules.variant_keys(b)
            vb, split = edge_rules.variants_at(b, rows, vs)
            table = space.__dict__["_edge_table"] = (vb, split, {k: i for i, k in enumerate(map(tuple, vkeys.tolist()))})
        at = {v: table[2].get(keys[v]) for v in missing} if table is not None and of_table else {}
        for v, i in at.items():
            if i is not None:
                cache[keys[v]] = _edge_tile(table[0], i, bool(table[1][i]), width)
        rest = [v for v in missing if at.get(v) is None]
        if rest:
            vb, split = edge_rules.variant_batch(b, r, np.array(rest, dtype=np.int64))
            for i, v in enumerate(rest):
                cache[keys[v]] = _edge_tile(vb, i, bool(split[i]), width)
    variants = [cache[keys[v & bits]] for v in range(N_VARIANTS)]
    return Edges(last, tuple(variants))


def _edge_tile(vb: MappingBatch, i: int, split: bool, width: int) -> EdgeTile:
    """Row `i` of a variant batch as an `EdgeTile`."""
    g = vb.row(i)
    gemm, reset = vb.kernels(i)
    tile = Tile(g["tile_b"], g["tile_h"], g["tile_w"], g["tile_ci"], g["tile_co"], g["hin_t"], g["win_t"],
                g["inp_sram"], g["wgt_sram"], g["acc_sram"])
    inp = (tile.hin, tile.win, width) if split else (g["inp_y_size"], g["inp_x_size"], g["inp_x_stride"])
    return EdgeTile(tile, gemm, reset, inp, (g["wgt_y_size"], g["wgt_x_size"], g["wgt_x_stride"]),
                    (g["store_y_size"], g["store_x_size"], g["store_x_stride"]), tile.b * tile.ci if split else 1)


def _inp_level(order: tuple[str, ...], extent: dict[str, int], ins: int, inner: tuple[str, ...]) -> str:
    """The loop INP is loaded at: input-stationary, the innermost spatial loop of extent > 1 (the
    outermost spatial loop when none is: loaded once); inside the reduction, the innermost inner
    spatial loop; else the reduction loop (every step)."""
    spatial = [a for a in order if a != "co"]
    if ins:
        live = [a for a in spatial if extent[a] > 1]
        return live[-1] if live else spatial[0]
    moved = [a for a in inner if a != "co"]
    return moved[-1] if moved else "k"


Producer = Callable[..., Mapping]
FAMILIES: dict[str, Producer] = {
    "conv2d_packed.vta": conv_mapping,
    "dense_packed.vta": conv_mapping,
    GROUP_TEMPLATE: group_mapping,
    TRANSPOSE_TEMPLATE: transpose_mapping,
}


def mapping_for(layer: Layer, config: Config | dict[str, KnobValue], hw: HwConfig, shift: int = 8) -> Mapping:
    """The `Mapping` of `layer` under `config`: a `vta`-family config by `vta_mapping`, an AutoTVM
    one by its template's producer (`FAMILIES`)."""
    if family_of(config) == "vta":
        return vta_mapping(layer, config, hw, shift)
    template = getattr(layer, "template", None)
    if template not in FAMILIES:
        raise CodesignError(f"layer {getattr(layer, 'name', layer)!r}: template {template!r} is not "
                            f"supported by the compiler (allowed: {', '.join(FAMILIES)})")
    return FAMILIES[template](layer, config, hw, shift)
