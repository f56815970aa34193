"""Tile plans: what the tiles of a layer under a schedule look like on VTA.

A `TilePlan` is the template-independent description the compiler assembles into an
instruction stream (`codesign.vta.compiler`): the tile grid (pairs of virtual-thread tiles x
input-channel steps), the per-thread SRAM footprint, the micro-op kernels (reset GEMM,
accumulate GEMM with its `iter_out`/`iter_in` fold) and, as NumPy arrays over the tile grid,
every DMA field that depends on the tile position (DRAM offsets, sizes, pads).

Tile geometry (tile sizes, counts, Hin_t/Win_t, per-thread SRAM use, the `fold_uop_loop`
`Kernel`s of the GEMM/reset and the 2-D DMA patterns) is `codesign.schedule.tiling.TileArrays`
-- the one definition shared with the validity rules and the features -- computed once per
(layer, hw) space and read here one row per config. What is added here: the tile-grid /
virtual-thread mapping, and per tile position the DRAM offsets and the INP pads (docs/vta.md §7.3
"DMA instructions").
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field, replace
from functools import lru_cache

import numpy as np

from codesign.errors import CodesignError, InvalidSchedule
from codesign.hw.config import HwConfig
from codesign.schedule.knobs import Config, KnobValue
from codesign.schedule.space import ScheduleSpace, get_space
from codesign.schedule.tiling import Geometry, Kernel, TileArrays, geometry
from codesign.schedule.validity import first_failure
from codesign.workloads.layers import Layer


@dataclass(frozen=True)
class Dma2D:
    """A 2-D DMA over the tile grid: every field is an int64 array broadcastable to the grid
    shape of its kind ((P, K, T) for loads, (P, T) for stores); `dram` is in elements relative
    to the region start."""

    dram: np.ndarray
    y_size: int | np.ndarray
    x_size: int | np.ndarray
    x_stride: int
    y_pad_0: int | np.ndarray = 0
    y_pad_1: int | np.ndarray = 0
    x_pad_0: int | np.ndarray = 0
    x_pad_1: int | np.ndarray = 0


@dataclass(frozen=True)
class TilePlan:
    """Everything the assembler needs; see the module docstring."""

    n_pairs: int  # P: iterations of the tile loops outside the virtual-thread axis
    n_steps: int  # K: input-channel (ci-outer) steps per tile
    n_threads: int  # T: virtual threads (oc_nthread * h_nthread)
    n_batch: int  # G: batch blocks per tile; the GEMMs run once per batch block (tiling docstring)
    inp_per_thread: int  # SRAM elements of one thread's slice
    wgt_per_thread: int
    acc_per_thread: int
    acc_per_batch: int  # offsets of one batch block inside a thread's slice
    inp_per_batch: int
    reset: Kernel
    gemm: Kernel
    inp: Dma2D | None  # over the pairs `pair_ids` (None in a `base_plan`)
    wgt: Dma2D | None
    store: Dma2D | None
    inp_elems: int  # DRAM sizes in elements of the packed tensors
    wgt_elems: int
    out_elems: int
    info: dict[str, int]  # tile sizes, thread counts, hin_t/win_t (also the program's metadata)
    geo: Geometry  # of the layer
    grid: tuple[int, int, int, int] = (1, 1, 1, 1)  # pair loops (bo, h0', co0', w0), outer to inner
    dma_shape: dict[str, int] = field(default_factory=dict)  # the config's geometry row
    pair_ids: np.ndarray | None = None  # pairs the DMA arrays cover, in program order


# -- knobs -------------------------------------------------------------------------------------
def knob_dict(config: Config | dict[str, KnobValue]) -> dict[str, KnobValue]:
    """AutoTVM entity as a dict from a `Config` (its `.knobs`) or a plain dict (anything else,
    e.g. a list entity read from a file, is refused with one line)."""
    knobs = getattr(config, "knobs", config)
    if not isinstance(knobs, dict):
        raise CodesignError(f"schedule config must be a Config or a knob dict, got {type(config).__name__}")
    return knobs


# -- tile geometry from `codesign.schedule.tiling`, tabulated per (layer, hw) ----------------------
_TABLE_MAX = 1 << 15  # spaces up to this size (ResNet-18: <= ~2.3k) are tabulated in one pass


@lru_cache(maxsize=64)  # a few MB each at most
def _space_table(layer: Layer, hw: HwConfig) -> tuple[ScheduleSpace, TileArrays | None]:
    space = get_space(layer, hw)  # ConfigError (one line) when the layer has no space on hw
    if space.size > _TABLE_MAX:
        return space, None
    return space, space.tile_arrays(np.arange(space.size, dtype=np.int64))


def _geometry_row(layer: Layer, config: Config | dict[str, KnobValue], hw: HwConfig,
                  knobs: dict[str, KnobValue], skip: tuple[str, ...] = ()
                  ) -> tuple[dict[str, int], Kernel, Kernel]:
    """One config's tile geometry, always from the layer's `ScheduleSpace` (its `tile_arrays`
    is the one place geometry is built): a row of the tabulated space when the config is valid,
    else the config alone. The compiler states no rule itself: a knob value that is not a
    candidate of the space is a ConfigError naming the allowed values (every split candidate
    divides its axis, thread counts are 1 or 2, `schedule.knobs`), a config that breaks a
    validity rule (`codesign.schedule.validity`) an InvalidSchedule with the first such rule."""
    space, table = _space_table(layer, hw)
    index = getattr(config, "index", None)
    # A Config from another space could carry a stale index: use it only if its row has the knobs.
    if table is None or index is None or not 0 <= index < space.size or not _row_has(table.row(int(index)), knobs):
        index = space.from_knobs(knobs).index
    if table is not None and space.is_valid(int(index)):
        return (table.row(int(index)), *table.kernels(int(index)))
    ta = space.tile_arrays(np.array([index], dtype=np.int64))
    why = first_failure(ta, skip=skip)
    if why is not None:
        raise InvalidSchedule(why)
    return (ta.row(0), *ta.kernels(0))


def _row_has(vals: dict[str, int], knobs: dict[str, KnobValue]) -> bool:
    """Whether a geometry row has the inner factors / thread counts of `knobs` (names the row
    lacks are not compared)."""
    return all(_inner_of(v) == vals[name] for name, v in knobs.items() if name in vals)


def _inner_of(value: KnobValue) -> int:
    return int(value[-1]) if isinstance(value, (list, tuple)) else int(value)


# -- the plan ------------------------------------------------------------------------------------
def tile_plan(layer: Layer, config: Config | dict[str, KnobValue], hw: HwConfig, pairs: np.ndarray | None = None, *,
              check_hazard: bool = True) -> TilePlan:
    """The `TilePlan` of `layer` under `config` (Config or knob dict) on `hw`; its DMA arrays
    cover every pair, or only the pair indices `pairs` (see `with_pairs`). `check_hazard=False`
    when a template replaces the GEMM kernel (vta/template_plans.py): the micro-op rules of this
    conv's kernel then do not apply."""
    return with_pairs(base_plan(layer, config, hw, check_hazard=check_hazard), pairs)


def base_plan(layer: Layer, config: Config | dict[str, KnobValue], hw: HwConfig, *,
              check_hazard: bool = True) -> TilePlan:
    """The position-independent part of the `TilePlan` (DMA arrays not built yet).

    Tile sizes, counts, Hin_t/Win_t, SRAM use, fold plans and DMA patterns come from
    `codesign.schedule.tiling` (dense is a 1x1 conv on a 1x1 image there, docs/vta.md §7.5).
    Added here: per-tile DRAM offsets and pads, and the tile-grid / thread mapping."""
    template = getattr(layer, "template", None)
    if template not in ("conv2d_packed.vta", "dense_packed.vta"):
        raise CodesignError(f"layer {getattr(layer, 'name', layer)!r}: template {template!r} is not "
                            "supported by the compiler (allowed: conv2d_packed.vta, dense_packed.vta)")
    g, gemm, reset = _geometry_row(layer, config, hw, knob_dict(config),
                                   () if check_hazard else ("uop_hazard", "uop_capacity"))
    geo = geometry(layer, hw)
    tb, th, tw, tci, tco = g["tile_b"], g["tile_h"], g["tile_w"], g["tile_ci"], g["tile_co"]
    ont, hnt = g["oc_nthread"], g["h_nthread"]
    nb, nh, nw, K, nco = g["b_tiles"], g["h_tiles"], g["w_tiles"], g["ci_steps"], g["co_tiles"]
    H, W, OH, OW = geo.height, geo.width, geo.out_h, geo.out_w
    CIB, COB = geo.ci, geo.co
    hin, win = g["hin_t"], g["win_t"]
    kk = geo.kh * geo.kw
    T = ont * hnt
    grid = (nb, nh // hnt, nco // ont, nw)
    return TilePlan(
        n_pairs=int(np.prod(grid)), n_steps=K, n_threads=T, n_batch=tb,
        inp_per_thread=g["inp_elems"], wgt_per_thread=g["wgt_elems"], acc_per_thread=g["acc_elems"],
        acc_per_batch=tco * th * tw, inp_per_batch=tci * hin * win,
        reset=reset, gemm=gemm, inp=None, wgt=None, store=None,
        inp_elems=geo.b * CIB * H * W, wgt_elems=COB * CIB * kk, out_elems=geo.b * COB * OH * OW,
        info=dict(tile_b=tb, tile_h=th, tile_w=tw, tile_ci=tci, tile_co=tco, oc_nthread=ont,
                  h_nthread=hnt, hin_t=hin, win_t=win),
        geo=geo, grid=grid, dma_shape=g,
    )


def _pads(start: np.ndarray, extent: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Zero padding before and after a window [start, start + extent) of an axis of `size`."""
    return np.maximum(-start, 0), np.maximum(start + extent - size, 0)


def with_pairs(plan: TilePlan, pairs: np.ndarray | None = None) -> TilePlan:
    """`plan` with the DMA arrays of the pairs `pairs` (indices into the tile grid, in program
    order; None = all pairs). Pair j is the tile-loop iteration (bo, h0', co0', w0) =
    unravel(j, grid); thread t = ht * oc_nthread + ot, cthread outermost (docs/vta.md §7.3)."""
    geo, g = plan.geo, plan.dma_shape
    info = plan.info
    tb, th, tw, tci, tco = (info[k] for k in ("tile_b", "tile_h", "tile_w", "tile_ci", "tile_co"))
    ont, hin, win = info["oc_nthread"], info["hin_t"], info["win_t"]
    H, W, OH, OW = geo.height, geo.width, geo.out_h, geo.out_w
    CIB, COB, s, p = geo.ci, geo.co, geo.stride, geo.pad
    kk = geo.kh * geo.kw
    T, K = plan.n_threads, plan.n_steps
    nh_t, nco_t = plan.grid[1], plan.grid[2]
    if pairs is None:
        pairs = np.arange(plan.n_pairs, dtype=np.int64)
    bo, h0i, co0i, w0 = (a.reshape(-1, 1) for a in np.unravel_index(pairs, plan.grid))
    t = np.arange(T)
    h0 = (t // ont) * nh_t + h0i  # (P, T)
    co0 = (t % ont) * nco_t + co0i
    b0 = bo * tb + 0 * co0
    k = np.arange(K).reshape(1, K, 1)

    # INP (docs/vta.md §7.3 "DMA instructions"): window start in input coordinates.
    hs = (h0 * th * s - p)[:, None, :]  # (P, 1, T)
    ws = (w0 * tw * s - p)[:, None, :]
    chan = b0[:, None, :] * CIB + k * tci  # (P, K, T)
    if p:
        yp0, yp1 = _pads(hs, hin, H)
        xp0, xp1 = _pads(ws, win, W)
        inp = Dma2D(dram=(chan * H + hs + yp0) * W + ws + xp0, y_size=hin - yp0 - yp1,
                    x_size=win - xp0 - xp1, x_stride=W, y_pad_0=yp0, y_pad_1=yp1, x_pad_0=xp0,
                    x_pad_1=xp1)
    else:
        inp = Dma2D((chan * H + hs) * W + ws, g["inp_y_size"], g["inp_x_size"], g["inp_x_stride"])
    # WGT: (co, ci, kh, kw) block of the tile.
    wgt = Dma2D((co0[:, None, :] * tco * CIB + k * tci) * kk, g["wgt_y_size"], g["wgt_x_size"],
                g["wgt_x_stride"])
    # STORE (docs/vta.md §7.4 rule 2): acc tile [b, co, h, w] -> out[b, co, h, w].
    store = Dma2D(((b0 * COB + co0 * tco) * OH + h0 * th) * OW + w0 * tw, g["store_y_size"],
                  g["store_x_size"], g["store_x_stride"])
    return replace(plan, inp=inp, wgt=wgt, store=store, pair_ids=np.asarray(pairs, dtype=np.int64))


def pad_classes(plan: TilePlan) -> tuple[np.ndarray, np.ndarray]:
    """Which pairs load identically shaped (padded) INP tiles: a class id per h0' (over all
    threads) and per w0 of the tile grid; every other DMA field that the timing depends on is
    the same at every tile position (the dram offsets differ but only set the footprint)."""
    geo, info = plan.geo, plan.info
    nh_t, nw = plan.grid[1], plan.grid[3]
    if not geo.pad:
        return np.zeros(nh_t, dtype=np.int64), np.zeros(nw, dtype=np.int64)
    ont, T = info["oc_nthread"], plan.n_threads
    h0 = (np.arange(T) // ont) * nh_t + np.arange(nh_t)[:, None]  # (nh', T)
    top, bottom = _pads(h0 * info["tile_h"] * geo.stride - geo.pad, info["hin_t"], geo.height)
    left, right = _pads(np.arange(nw) * info["tile_w"] * geo.stride - geo.pad, info["win_t"], geo.width)
    return (_dense([(tuple(a), tuple(b)) for a, b in zip(top.tolist(), bottom.tolist())]),
            _dense(list(zip(left.tolist(), right.tolist()))))


def _dense(keys: list[Hashable]) -> np.ndarray:
    """Ids 0, 1, ... of the distinct keys, in order of first appearance (short axes)."""
    ids: dict[Hashable, int] = {}
    return np.array([ids.setdefault(k, len(ids)) for k in keys], dtype=np.int64)

