"""The one access function: DRAM offsets, sizes and pads of every LOAD/STORE of a `Mapping`,
from its loop order and residency (docs/vta.md §7.3 "DMA instructions", §7.4).

Iteration j of the pair loops has index (j // place) % extent in each loop (`inner_products`),
thread t the same over the virtual-thread loops; an axis' tile index is the sum of index x scale
over the loops walking it (`tile_of`). From the tile origin (batch block b0, pixel h0/w0, output
block co0) and the reduction step k:

    INP   window [h0·s - p, + hin) x [w0·s - p, + win) of channel blocks
          b0·C_img + (co0 // co_per_group)·CI + k·tile_ci, clipped to the image: the clipped
          rows/columns are the pads (the unpadded DMA pattern otherwise)
    WGT   (co0·CI + k·tile_ci)·KH·KW
    OUT   ((b0·CO + co0)·OH + h0)·OW + w0

(a fused residual tile is read like OUT from the residual region, the bias as tile_co contiguous
ACC blocks from co0·tile_co), and an operand is loaded at (j, k, c) — pair, reduction step, sub-step
of the loops inside the reduction (`Mapping.inner_loops`) — when the index of its residency loop or
of a loop outside it changed (every step at c = 0 when it is the reduction loop). The functions are compiled: the emitter calls
them per instruction (`emit`), and `pad_classes` per loop index.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from numba import njit

from codesign.mapping.edges import Edges
from codesign.mapping.mapping import Loop, Mapping, fused_slots, inner_products

AXIS = {"b": 0, "h": 1, "co": 2, "w": 3, "ci": 4}
# Scalars of `spec`, in this order.
SPEC = ("H", "W", "OH", "OW", "CI", "CO", "s", "p", "kk", "tb", "th", "tw", "tci", "tco", "hin", "win",
        "c_img", "co_pg", "inp_y", "inp_x", "inp_stride", "wgt_y", "wgt_x", "wgt_stride", "out_y", "out_x",
        "out_stride", "inp_place", "wgt_place", "inp_base", "wgt_base", "out_base",
        "P", "K", "T", "inp_pt", "wgt_pt", "acc_pt", "ring_start", "inp_split",
        "bias_base", "res_base", "id_base", "bias_sram", "res_chunks", "res_pitch", "id_sram", "res_planes",
        "id_each", "e_ci", "e_acc", "h_last", "w_last", "co_last", "ci_last", "n_inner", "acc_sub", "inp_iplace",
        "wgt_iplace", "e_co", "e_pix", "ps_top", "ps_bot", "inp_shared")
(H, W, OH, OW, CI, CO, S, PAD, KK, TB, TH, TW, TCI, TCO, HIN, WIN, C_IMG, CO_PG, INP_Y, INP_X, INP_ST,
 WGT_Y, WGT_X, WGT_ST, OUT_Y, OUT_X, OUT_ST, INP_PLACE, WGT_PLACE, INP_BASE, WGT_BASE, OUT_BASE,
 NP, NK, NT, INP_PT, WGT_PT, ACC_PT, RING_START, INP_SPLIT,
 BIAS_BASE, RES_BASE, ID_BASE, BIAS_SRAM, RES_CHUNKS, RES_PITCH, ID_SRAM, RES_PLANES, ID_EACH,
 E_CI, E_ACC, H_LAST, W_LAST, CO_LAST, CI_LAST, NC, ACC_SUB, INP_IPLACE, WGT_IPLACE, E_CO, E_PIX, PS_TOP,
 PS_BOT, INP_SHARED) = range(len(SPEC))
#: The scalars an edge tile variant (`mapping.edges`) replaces in its row of the variant table; TB,
#: TH, TW, TCI, TCO stay the full tile's (they place every tile's origin).
VARIANT = (HIN, WIN, INP_Y, INP_X, INP_ST, WGT_Y, WGT_X, WGT_ST, OUT_Y, OUT_X, OUT_ST, INP_SPLIT, E_CI, E_ACC, E_CO,
           E_PIX)
_VARIANT_AT = np.array(VARIANT, dtype=np.int64)


@lru_cache(maxsize=1024)
def loop_table(loops: tuple[Loop, ...]) -> np.ndarray:
    """(L, 4) [extent, place, axis, scale] of loops outer to inner (read-only, shared)."""
    places = inner_products(tuple(lp.extent for lp in loops))
    table = np.array([[lp.extent, p, AXIS[lp.axis], lp.scale] for lp, p in zip(loops, places)],
                     dtype=np.int64).reshape(-1, 4)
    table.setflags(write=False)
    return table


def tables(m: Mapping) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`loop_table` of `m`'s pair, thread and inner loops, kept on the (frozen) mapping: `spec` and
    the edge tiles' micro-op plan (`uops`) read them."""
    got = m.__dict__.get("_loop_tables")
    if got is None:
        got = m.__dict__["_loop_tables"] = _nest_tables(m)
    return got


#: `tables` by the identity of the `Loop` objects of a nest (producers share them among the configs
#: of a space: `loop_table`'s key hashes every loop, a Python call each). The entry keeps its loops
#: alive, so no other object can have their ids while it is kept.
_NESTS: dict[tuple[int, ...], tuple[tuple[Loop, ...], tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
_NESTS_MAX = 1 << 12


def _nest_tables(m: Mapping) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    nest = m.loops + m.vthreads
    key = (len(m.loops), *map(id, nest))
    got = _NESTS.get(key)
    if got is None:
        if len(_NESTS) >= _NESTS_MAX:
            _NESTS.clear()
        got = _NESTS[key] = (nest, (loop_table(m.pair_loops), loop_table(m.vthreads), loop_table(m.inner_loops)))
    return got[1]


def spec(m: Mapping, bases: tuple[int, ...], ring_start: int = -1, wgt_depth: int = 0
         ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(scalars `SPEC`, pair loop table, thread loop table, variant table) of `m`; `bases` are the
    element offsets of the data, weight and output regions (then of the bias, residual and
    identity regions of a fused epilogue), `ring_start` the micro-op ring's period start (`uops`).
    The variant table has one row of scalars per edge tile variant (`mapping.edges`; one row, the
    scalars, when every tile size divides): the transfer sizes of a tile come from its row. Last,
    the inner loop table: the loops inside the reduction (`Mapping.inner_loops`, ACC slots)."""
    g, t = m.geo, m.tile
    fused = _NO_FUSED_ROW  # a fused epilogue's DRAM bases, SRAM slots and chunks (most mappings have none: 0)
    if m.has_bias or m.has_residual:
        fs = fused_slots(m, wgt_depth)
        fused = (bases[3], bases[4], bases[5], fs.bias, fs.chunks if m.has_residual else 0, fs.res_pitch, fs.ident,
                 fs.planes, int(fs.ident_each))
    pi, pw, po = m.pattern("inp"), m.pattern("wgt"), m.pattern("out")
    # the place value of each loaded operand's residency loop among the pair loops (loaded at
    # pair j, step 0, sub-step 0 when j % place == 0), 0: loaded at reduction steps, at the
    # sub-steps c (of the inner loops) with c % iplace == 0: iplace = n_inner at the reduction
    # loop (once per step), the inner loop's place value at an inner loop
    red, C = m.red, m.n_inner
    loops, threads, inner = tables(m)
    lv_inp, lv_wgt = m.level("inp"), m.level("wgt")
    place_inp = int(loops[lv_inp, 1]) if lv_inp < red else 0
    place_wgt = int(loops[lv_wgt, 1]) if lv_wgt < red else 0
    iplace_inp = 1 if lv_inp < red else C if lv_inp == red else int(inner[lv_inp - red - 1, 1])
    iplace_wgt = 1 if lv_wgt < red else C if lv_wgt == red else int(inner[lv_wgt - red - 1, 1])
    acc_pt = C * t.acc_sram
    # the scalars in `SPEC` order (tests/test_access_spec.py states them by name)
    sc = np.array((g.height, g.width, g.out_h, g.out_w, g.ci, g.co, g.stride,
                   0 if m.inp_unpadded else g.pad,  # an unpadded INP tile (`Mapping.inp_unpadded`): no window pads
                   g.kh * g.kw, t.b, t.h, t.w, t.ci, t.co, t.hin, t.win, m.inp_channels, m.co_per_group,
                   pi.y_size, pi.x_size, pi.x_stride, pw.y_size, pw.x_size, pw.x_stride, po.y_size, po.x_size,
                   po.x_stride, place_inp, place_wgt, bases[0], bases[1], bases[2],
                   m.n_pairs, m.n_steps, m.n_threads, t.inp_sram, t.wgt_sram, acc_pt, ring_start, m.inp_loads,
                   *fused, t.ci, acc_pt, *(m.edges.last if m.edges is not None else _NO_EDGE), C, t.acc_sram,
                   iplace_inp, iplace_wgt, t.co, t.h * t.w, m.gemm_trim[0], m.gemm_trim[1], int(m.inp_shared)),
                  dtype=np.int64)
    if m.edges is None:
        scv = sc[None, :]  # one row, the scalars (a view: both are only read)
    else:  # the scalars, each variant's own `VARIANT` scalars in their columns
        scv = _variant_table(sc, _variant_rows(m.edges, C, t.acc_sram))
    return sc, loops, threads, scv, inner


_NO_EDGE = (-1, -1, -1, -1)  # h_last, w_last, co_last, ci_last without edge tiles


def _variant_rows(edges: Edges, C: int, acc_sram: int) -> np.ndarray:
    """(V, len(SPEC)) the `VARIANT` scalars of each edge tile variant in their columns (of the
    variant table; 0 elsewhere), kept on the `Edges` (shared by the configs of a space that run the
    same variants; read only)."""
    kept = edges.__dict__.setdefault("_variant_rows", {})
    rows = kept.get((C, acc_sram))
    if rows is None:
        rows = np.zeros((len(edges.variants), len(SPEC)), dtype=np.int64)
        # with C > 1 ACC slots the epilogue's ALU runs over all of them (each a tile of its own variant)
        rows[:, _VARIANT_AT] = [(e.tile.hin, e.tile.win, *e.inp, *e.wgt, *e.out, e.inp_loads, e.tile.ci,
                                 C * acc_sram if C > 1 else e.tile.acc_sram, e.tile.co, e.tile.h * e.tile.w)
                                for e in edges.variants]
        rows.setflags(write=False)
        kept[C, acc_sram] = rows
    return rows


@njit(cache=True)
def _variant_table(sc, rows):  # pragma: no cover - compiled
    """The variant table (`spec`) in one compiled call (np.where costs more): a row of the scalars
    `sc` per variant, its `VARIANT` columns from its row of `rows`."""
    out = np.empty(rows.shape, np.int64)
    for v in range(rows.shape[0]):
        out[v] = sc
        for c in _VARIANT_AT:
            out[v, c] = rows[v, c]
    return out


_NO_FUSED_ROW = (0,) * 9  # bias_base .. id_each of `SPEC` without a fused epilogue


@njit(cache=True)
def _add(tab, i, acc):  # pragma: no cover - compiled
    b, h, co, w = acc
    for lp in range(tab.shape[0]):
        v = (i // tab[lp, 1]) % tab[lp, 0] * tab[lp, 3]
        ax = tab[lp, 2]
        if ax == 0:
            b += v
        elif ax == 1:
            h += v
        elif ax == 2:
            co += v
        elif ax == 3:
            w += v
    return b, h, co, w


@njit(cache=True)
def tile_of(j, t, loops, threads):  # pragma: no cover - compiled
    """(b, h, co, w) tile indices of pair j, thread t."""
    return _add(threads, t, _add(loops, j, (0, 0, 0, 0)))


@njit(cache=True)
def sub_tile(tiles, t, inner, c):  # pragma: no cover - compiled
    """(b, h, co, w) of the output tile of sub-step c (the inner loops) of thread t's pair tile."""
    return _add(inner, c, (tiles[t, 0], tiles[t, 1], tiles[t, 2], tiles[t, 3]))


@njit(cache=True)
def loaded(sc, place, iplace, j, k, c):  # pragma: no cover - compiled
    """Is an operand with residency place `place` / inner place `iplace` (`spec`) loaded at pair
    j, reduction step k, sub-step c?"""
    if place == 0:
        return c % iplace == 0
    return k == 0 and c == 0 and j % place == 0


@njit(cache=True)
def window(sc, h, w):  # pragma: no cover - compiled
    """INP window of tile (h, w): top, left corner in input pixels and the 4 pads."""
    hs = h * sc[TH] * sc[S] - sc[PAD]
    ws = w * sc[TW] * sc[S] - sc[PAD]
    return (hs, ws, max(-hs, 0), max(hs + sc[HIN] - sc[H], 0), max(-ws, 0), max(ws + sc[WIN] - sc[W], 0))


@njit(cache=True)
def inp_access(sc, b, h, co, w, k):  # pragma: no cover - compiled
    """(dram, y_size, x_size, x_stride, y_pad_0, y_pad_1, x_pad_0, x_pad_1) of an INP load."""
    hs, ws, yp0, yp1, xp0, xp1 = window(sc, h, w)
    chan = b * sc[TB] * sc[C_IMG] + (co * sc[TCO]) // sc[CO_PG] * sc[CI] + k * sc[TCI]
    dram = sc[INP_BASE] + (chan * sc[H] + hs + yp0) * sc[W] + ws + xp0
    if sc[PAD] > 0:  # a padded load is never folded (mapping.batch inp_pattern): hin rows of win pixels
        return (dram, sc[HIN] - yp0 - yp1, sc[WIN] - xp0 - xp1, sc[W], yp0, yp1, xp0, xp1)
    return (dram, sc[INP_Y], sc[INP_X], sc[INP_ST], 0, 0, 0, 0)


@njit(cache=True)
def inp_part_access(sc, b, h, co, w, k, part):  # pragma: no cover - compiled
    """INP load `part` (= batch block x TCI + channel block) of a tile loaded one block per LOAD
    (`Mapping.inp_loads`): hin rows of win pixels at stride W, pads as the padded load."""
    hs, ws, yp0, yp1, xp0, xp1 = window(sc, h, w)
    chan = ((b * sc[TB] + part // sc[E_CI]) * sc[C_IMG] + (co * sc[TCO]) // sc[CO_PG] * sc[CI]
            + k * sc[TCI] + part % sc[E_CI])
    dram = sc[INP_BASE] + (chan * sc[H] + hs + yp0) * sc[W] + ws + xp0
    return (dram, sc[HIN] - yp0 - yp1, sc[WIN] - xp0 - xp1, sc[W], yp0, yp1, xp0, xp1)


@njit(cache=True)
def wgt_access(sc, b, h, co, w, k):  # pragma: no cover - compiled
    dram = sc[WGT_BASE] + (co * sc[TCO] * sc[CI] + k * sc[TCI]) * sc[KK]
    return (dram, sc[WGT_Y], sc[WGT_X], sc[WGT_ST], 0, 0, 0, 0)


@njit(cache=True)
def out_access(sc, b, h, co, w):  # pragma: no cover - compiled
    dram = sc[OUT_BASE] + ((b * sc[TB] * sc[CO] + co * sc[TCO]) * sc[OH] + h * sc[TH]) * sc[OW] + w * sc[TW]
    return (dram, sc[OUT_Y], sc[OUT_X], sc[OUT_ST], 0, 0, 0, 0)


@njit(cache=True)
def res_access(sc, b, h, co, w, c):  # pragma: no cover - compiled
    """LOAD INP of residual chunk c: the whole output tile with its own pattern (one chunk), or
    `res_planes` channel planes of one batch block, from the residual region."""
    if sc[RES_CHUNKS] == 1:
        dram = sc[RES_BASE] + ((b * sc[TB] * sc[CO] + co * sc[TCO]) * sc[OH] + h * sc[TH]) * sc[OW] + w * sc[TW]
        return (dram, sc[OUT_Y], sc[OUT_X], sc[OUT_ST], 0, 0, 0, 0)
    per_g = sc[TCO] // sc[RES_PLANES]
    g, c0 = c // per_g, (c % per_g) * sc[RES_PLANES]
    dram = (sc[RES_BASE] + (((b * sc[TB] + g) * sc[CO] + co * sc[TCO] + c0) * sc[OH] + h * sc[TH]) * sc[OW]
            + w * sc[TW])
    if sc[TW] == sc[OW] or sc[TH] == 1:  # contiguous planes, OH·OW apart
        return (dram, sc[RES_PLANES], sc[TH] * sc[TW], sc[OH] * sc[OW], 0, 0, 0, 0)
    return (dram, sc[TH], sc[TW], sc[OW], 0, 0, 0, 0)


@njit(cache=True)
def bias_access(sc, co):  # pragma: no cover - compiled
    """LOAD ACC of the tile's tile_co bias blocks (contiguous in the bias region; an edge tile's
    row of the variant table: its own count)."""
    return (sc[BIAS_BASE] + co * sc[TCO], 1, sc[E_CO], sc[E_CO], 0, 0, 0, 0)


@njit(cache=True)
def gemm_trim(sc, h):  # pragma: no cover - compiled
    """(micro-ops skipped at the start, at the end) of the GEMM kernel of a tile in row tile h:
    the first row tile skips the taps above the image, the last those below (`Mapping.gemm_trim`)."""
    last = (sc[OH] + sc[TH] - 1) // sc[TH] - 1
    return (sc[PS_TOP] if h == 0 else 0, sc[PS_BOT] if h == last else 0)


@njit(cache=True)
def variant(sc, h, w, co):  # pragma: no cover - compiled
    """Row of tile (h, w, co) in the variant table (`spec`): its h, w, co edge bits."""
    return (1 if h == sc[H_LAST] else 0) | (2 if w == sc[W_LAST] else 0) | (4 if co == sc[CO_LAST] else 0)


@njit(cache=True)
def _axis_classes(sc, scv, loops, threads, lp, which, T):  # pragma: no cover - compiled
    n, place = loops[lp, 0], loops[lp, 1]
    sig = np.zeros((n, 3 * T), np.int64)
    ids = np.zeros(n, np.int64)
    rep = np.empty(n, np.int64)
    n_ids = 0
    for i in range(n):
        for t in range(T):
            b, h, co, w = tile_of(i * place, t, loops, threads)
            if which == 2:  # co: the edge bit only (pads and sizes of h, w are the other loops')
                sig[i, 3 * t] = 1 if co == sc[CO_LAST] else 0
                continue
            v = variant(sc, h, w, -2)
            pads = window(scv[v if v < scv.shape[0] else 0], h, w)
            sig[i, 3 * t] = pads[2 + 2 * which]
            sig[i, 3 * t + 1] = pads[3 + 2 * which]
            sig[i, 3 * t + 2] = v >> which & 1  # the edge tile: its own sizes
        ids[i] = n_ids  # the class of the first index of the same signature (each class' first: `rep`)
        for c in range(n_ids):
            q = rep[c]
            same = True
            for x in range(3 * T):
                if sig[q, x] != sig[i, x]:
                    same = False
                    break
            if same:
                ids[i] = c
                break
        if ids[i] == n_ids:
            rep[n_ids] = i
            n_ids += 1
    return ids


@njit(cache=True)
def pad_classes(sc, scv, loops, threads, h_loop, w_loop, co_loop):  # pragma: no cover - compiled
    """Which pairs load identically shaped (padded) INP tiles: a class id per index of the h, w
    and co pair loops (the pads and edge tiles over all threads; ids in order of first
    appearance). Every other DMA field the timing depends on is the same at every tile position
    (the DRAM offsets differ but only set the footprint)."""
    T = 1
    for lp in range(threads.shape[0]):
        T *= threads[lp, 0]
    one = np.zeros(1, np.int64)  # an axis walked inside the reduction: alike in every pair
    return (_axis_classes(sc, scv, loops, threads, h_loop, 0, T) if h_loop >= 0 else one,
            _axis_classes(sc, scv, loops, threads, w_loop, 1, T) if w_loop >= 0 else one,
            _axis_classes(sc, scv, loops, threads, co_loop, 2, T) if co_loop >= 0 else one)
