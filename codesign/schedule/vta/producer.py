"""The producer of the `vta` family: a config of a `VtaSpace` -> its `Mapping` (`VtaSpace.mapping`).

The tile geometry, kernels and DMA shapes are read from the space's batch of the config (a row of
the table of every valid config once listed, of the batch of a search's sample, or the config's
own); the loop order, residency, ACC slots, thread axis and micro-op options from its knobs.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from codesign.errors import InvalidSchedule
from codesign.mapping.batch import (
    Kernel,
    MappingBatch,
    pad_rows_kernel,
    pad_skip_kernel,
    transpose_uops,
)
from codesign.mapping.edges import N_VARIANTS, Edges, EdgeTile
from codesign.mapping.mapping import Dma, Loop, Mapping, Tile
from codesign.schedule import edge_rules
from codesign.schedule.indexed import KnobSpace as VtaSpace  # the space's base: vta.space imports this module
from codesign.schedule.knobs import Config, KnobValue
from codesign.schedule.templates import clip_epilogue
from codesign.schedule.vta.batch import VtaBatch
from codesign.schedule.vta.knobs import LIFTS, ORDERS, PAIR_AXES, VTHREADS
from codesign.workloads.layers import Layer

#: Valid configs up to which a listed space maps configs from its table of all of them: a row
#: costs ~2 KB (the batch's arrays, the index dict, the row's knob values), so 2.4M valid schedules
#: (ResNet-18's 56x56 conv on pynq_4x8) would hold ~5 GB per layer for a search of 10^3 configs.
TABLE_MAX = 1 << 17


def listed(space: VtaSpace) -> bool:
    """The space has its valid configs listed already (an exhaustive search did) and they are
    few enough to tabulate (`TABLE_MAX`): their table costs one batch, and every later config is a
    row lookup. A larger listing (counted, e.g. `n_valid`) maps each config from its own row."""
    return space.listed_within(TABLE_MAX)


def produce(space: VtaSpace, config: Config | dict[str, KnobValue], shift: int = 8) -> Mapping:
    """The mapping of `config` in `space` (`VtaSpace.mapping`). Invalid configs raise
    InvalidSchedule naming the rule; a config the space has proven valid (listed, or sampled by its
    own mask: `SampleMixin.proven_valid`) is not checked again."""
    # The fast path (a row of the table of every valid config) only once they are enumerated: a
    # search that measures a few configs must not enumerate the family's 10^5-10^6 valid ones.
    index = space.valid_index_of(config) if listed(space) else None
    if index is None:
        index = _index(space, config)
        if not space.proven_valid(index):  # a sampled config is proven: no rule to check again
            why = space.why_invalid(index)
            if why is not None:
                raise InvalidSchedule(why)
    return row_mapping(space, index, shift)


def _index(space: VtaSpace, config: Config | dict[str, KnobValue] | int) -> int:
    """The canonical index of `config` (`as_config(config).index`) without building its Config:
    its knob positions in mixed radix (`KnobSpace.index_of_config`)."""
    if isinstance(config, (int, np.integer)) and not isinstance(config, bool):
        return space.as_config(config).index
    return space.index_of_config(config)


def _row(space: VtaSpace, index: int) -> tuple[VtaBatch, int]:
    """The batch row of `index`: the valid table's when listed, else one built for the configs the
    space sampled (`SampleMixin.proven_rows`: one batch for a search's whole sample, not one per
    config), else the config's own one-row batch."""
    if listed(space):
        r = space.valid_table()[1].get(index)
        if r is not None:
            return space.valid_table()[0], r
    found = space.proven_rows(index)
    if found is not None:
        return found
    return space.batch(np.array([index], dtype=np.int64)), 0


@lru_cache(maxsize=4096)  # tuners re-measure and re-run the same configs
def row_mapping(space: VtaSpace, index: int, shift: int) -> Mapping:
    """The mapping of the valid config `index` of `space` (no validity check: callers have one)."""
    layer, hw = space.layer, space.hw
    b, r = _row(space, index)
    g = b.t.row(r)
    gemm, reset = b.t.kernels(r)
    order, vt, ws = ORDERS[int(b.order[r])], VTHREADS[int(b.vt[r])], int(b.ws[r])
    ins, n_in, ps = int(b.ins[r]), int(b.acc[r]), int(b.ps[r])
    extent = {a: int(b.extent[a][r]) for a in PAIR_AXES}
    live = [a for a in order if extent[a] > 1]
    inner = tuple(live[len(live) - n_in:]) if n_in else ()  # the n_in innermost loops of extent > 1
    outer = tuple(a for a in order if a not in inner)
    # shared Loop objects (`_loop`): a fresh mapping allocates (and the collector later walks) fewer
    loops = _loops(tuple((a, extent[a]) for a in outer), g["ci_steps"], tuple((a, extent[a]) for a in inner))
    vthreads = (_loop(f"{vt}t", vt, int(b.nt[r]), extent[vt]),) if vt else ()
    split = bool(b.split[r])
    tile = _tile(g["tile_b"], g["tile_h"], g["tile_w"], g["tile_ci"], g["tile_co"], g["hin_t"], g["win_t"],
                 g["inp_sram"], g["wgt_sram"], g["acc_sram"])
    geo = space._geo  # `geometry(layer, hw)`, built once with the space
    pre, early = int(b.pre[r]), int(b.early[r])
    if pre == 2:  # a flat reset kernel: one uop per ACC row of a batch block (`vta_space.apply_flat_reset`)
        reset = _flat_reset(tile.co * tile.h * tile.w)
    inp = (tile.hin, tile.win, geo.width) if split else (g["inp_y_size"], g["inp_x_size"], g["inp_x_stride"])
    info = (("tile_b", tile.b), ("tile_h", tile.h), ("tile_w", tile.w), ("tile_ci", tile.ci), ("tile_co", tile.co),
            ("order", ORDERS.index(order)), ("wgt_stationary", ws), ("vthread", VTHREADS.index(vt)),
            ("hin_t", tile.hin), ("win_t", tile.win), ("inp_stationary", ins), ("acc_resident", n_in),
            ("pad_skip", ps), ("uop_preload", pre), ("early_epilogue", early))
    # the padding-skipping kernel (`mapping.batch.pad_skip_kernel`; validity rule pad_skip_tile); on a
    # tile that is not the whole output plane its row-trimmed form and the padded INP tile (`_pad_rows`)
    trim, unpadded = (0, 0), bool(ps)  # pad_skip's whole-plane kernel reads the unpadded image
    if ps:
        if tile.h == geo.out_h and tile.w == geo.out_w:
            gemm = pad_skip_kernel(geo, tile.ci, tile.co)[0]
        else:
            pr = pad_rows_kernel(geo, tile.h, tile.w, tile.ci, tile.co)
            gemm, trim, unpadded = pr.kernel, (pr.top, pr.bottom), False
    last = tuple(n - 1 if size % f else -1 for size, f, n in (
        (geo.out_h, tile.h, g["h_tiles"]), (geo.out_w, tile.w, g["w_tiles"]), (geo.co, tile.co, g["co_tiles"]),
        (geo.ci, tile.ci, g["ci_steps"])))
    # tile sizes that do not divide: the edge tiles' variants (mapping.edges)
    edges = _edges(space, b, r, g, last, geo.width) if max(last) >= 0 else None
    inp_channels, co_per_group = geo.ci, geo.co
    if space.tmpl.grouped:
        inp_channels = layer.in_channels // hw.block_in
        co_per_group = layer.out_channels // hw.block_out // layer.groups
    elif space.tmpl.transposed:
        gemm = _transpose_kernel(layer, tile.h, tile.w, tile.ci, tile.co)
    lift = int(b.lift[r])
    return Mapping(
        geo=geo, tile=tile, loops=loops, vthreads=vthreads,
        residency=(("inp", _inp_level(order, extent, ins, inner)),
                   ("wgt", "co" if ws or "co" in inner else "k"), ("out", "k" if inner else order[-1])),
        gemm=gemm, reset=reset, epilogue=_epilogue(shift),
        dma=_dmas(inp, (g["wgt_y_size"], g["wgt_x_size"], g["wgt_x_stride"]),
                  (g["store_y_size"], g["store_x_size"], g["store_x_stride"])),
        inp_channels=inp_channels, co_per_group=co_per_group, info=info,
        inp_loads=tile.b * tile.ci if split else 1, edges=edges,
        inp_unpadded=unpadded, gemm_trim=trim,
        uop_preload=pre > 0, early_epilogue=bool(early),
        gemm_lift=tuple(tuple(b.lift_loop[r, s].tolist()) for s in range(len(LIFTS[lift]))) if lift else ())


# A space's configs repeat few loops, tiles and DMA patterns, and each is frozen: configs share one
# (a fresh mapping allocates fewer objects, and the collector has fewer long-lived ones to walk).
_tile = lru_cache(maxsize=1 << 14)(Tile)
_dma = lru_cache(maxsize=1 << 14)(Dma)


@lru_cache(maxsize=1 << 14)
def _dmas(inp: tuple[int, int, int], wgt: tuple[int, int, int], out: tuple[int, int, int]) -> tuple:
    """`Mapping.dma` of the (y_size, x_size, x_stride) patterns of INP, WGT and OUT."""
    return ("inp", _dma(*inp)), ("wgt", _dma(*wgt)), ("out", _dma(*out))


@lru_cache(maxsize=1 << 14)
def _loops(outer: tuple[tuple[str, int], ...], steps: int, inner: tuple[tuple[str, int], ...]) -> tuple[Loop, ...]:
    """`Mapping.loops`: the pair loops `outer` (axis, extent), the reduction of `steps`, the loops
    `inner` inside it."""
    return (tuple(_loop(a, a, e) for a, e in outer) + (_loop("k", "ci", steps),)
            + tuple(_loop(a, a, e) for a, e in inner))


@lru_cache(maxsize=4096)
def _loop(name: str, axis: str, extent: int, scale: int = 1) -> Loop:
    return Loop(name, axis, extent, scale)


@lru_cache(maxsize=64)  # one per shift: a frozen tuple of frozen steps, shared
def _epilogue(shift: int) -> tuple:
    return clip_epilogue(shift)


@lru_cache(maxsize=1024)  # one per tile's ACC rows
def _flat_reset(rows: int) -> Kernel:
    return Kernel(np.array([[rows, 1, 0, 0]], dtype=np.int64), names=("acc",))


@lru_cache(maxsize=1024)  # by the tile: a transposed conv's space has few tile sizes
def _transpose_kernel(layer: Layer, h: int, w: int, ci: int, co: int) -> Kernel:
    uops = transpose_uops(layer, h, w, ci, co)
    return Kernel.from_uops(uops if uops.shape[0] else np.zeros((1, 3), dtype=np.int64))


#: edge tile variants built per space and kept (`_edges`); a bound, not a working-set size
_VARIANT_CACHE_MAX = 1 << 16


def _edges(space: VtaSpace, b: VtaBatch, r: int, one: dict[str, int], last: tuple[int, ...], width: int) -> Edges:
    """The 16 tile variants of config row `r` of `b` (`edge_rules.variant_batch`; `one` its
    `MappingBatch.row`) as `Edges`.

    A variant is determined by its own tile sizes, threads and the config's micro-op fold
    (`edge_rules.VARIANT_KEY`; not by the loop order, the residency or the other axes' sizes), and
    many configs share it (an edge of one row, the full tile, ...): each is built once per space.
    The first config of a batch of many (the space's valid table, a search's sample) builds every
    variant its configs run in one `MappingBatch` (an exhaustive walk of 10^5 configs needs a few ten thousand); the rows of an
    `EdgeTile` are read from it at first use."""
    bits = sum(1 << k for k, x in enumerate(last) if x >= 0)
    g = b.t.geo
    base = (one["tile_b"], one["oc_nthread"], one["h_nthread"], int(b.fold[r]))  # edge_rules.VARIANT_KEY
    # each axis' (full, edge) tile size, as edge_rules.variant_sizes
    opts = tuple((f, n - (one[tiles] - 1) * f) for f, n, tiles in (
        (one["tile_h"], g.out_h, "h_tiles"), (one["tile_w"], g.out_w, "w_tiles"), (one["tile_co"], g.co, "co_tiles"),
        (one["tile_ci"], g.ci, "ci_steps")))
    # configs that differ only in loop order, residency or threads' axis share their variants: the
    # variants' keys below are a function of (last, base, opts), so that is the whole set's key
    whole: dict[tuple, Edges] = space.__dict__.setdefault("_edges_of", {})
    wkey = (last, base, opts)
    found = whole.get(wkey)
    if found is not None:
        return found
    keys = {v: base + tuple(o[v >> k & 1] for k, o in enumerate(opts)) for v in range(N_VARIANTS) if not v & ~bits}
    cache: dict[tuple[int, ...], EdgeTile] = space.__dict__.setdefault("_edge_variants", {})
    missing = [v for v, key in keys.items() if key not in cache]
    if len(whole) > _VARIANT_CACHE_MAX:
        whole.clear()
    if missing:
        if len(cache) > _VARIANT_CACHE_MAX:
            cache.clear()
            whole.clear()
        # a batch of many configs (the valid table, a search's sample) builds every variant its
        # configs run at once and keeps them on the batch; a one-config batch builds its own
        of_table = b.t.n > 1
        table = b.__dict__.get("_edge_table") if of_table else None
        if table is None and of_table:
            vkeys, rows, vs = edge_rules.variant_keys(b)
            vb, split = edge_rules.variants_at(b, rows, vs)
            table = b.__dict__["_edge_table"] = (vb, split, {k: i for i, k in enumerate(map(tuple, vkeys.tolist()))})
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
    whole[wkey] = Edges(last, tuple(variants))
    return whole[wkey]


def _edge_tile(vb: MappingBatch, i: int, split: bool, width: int) -> EdgeTile:
    """Row `i` of a variant batch as an `EdgeTile`."""
    g = vb.row(i)
    gemm, reset = vb.kernels(i)
    tile = _tile(g["tile_b"], g["tile_h"], g["tile_w"], g["tile_ci"], g["tile_co"], g["hin_t"], g["win_t"],
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
