"""The GEMM and reset micro-op kernels a `vta` config's kernel knobs choose, put into its `MappingBatch`
(fold, padding-skipping kernels, flat resets)."""

from __future__ import annotations

import numpy as np

from codesign.mapping.batch import (
    FOLD_PAIRS,
    Geometry,
    MappingBatch,
    pad_rows_kernel,
    pad_skip_kernel,
    pad_skip_uops,
)


def apply_fold(t: MappingBatch, fold: np.ndarray) -> np.ndarray:
    """Put the chosen micro-op folds (`uop_fold` > 0, `FOLD_PAIRS`) into `t.gemm`; returns
    whether each fold is live (both loops of extent > 1, not the template's own pair)."""
    fold_ok = fold == 0
    chosen = fold > 0
    if chosen.any():
        pair = np.array([(0, 1), *FOLD_PAIRS], dtype=np.int64)[fold]
        live = t.gemm["loops"][..., 0] > 1
        rows = np.arange(t.n)
        roles = t.gemm["roles"]
        fold_ok = fold_ok | (live[rows, pair[:, 0]] & live[rows, pair[:, 1]]
                             & ~((roles[rows, pair[:, 0]] == 1) & (roles[rows, pair[:, 1]] == 2)))
        fp = MappingBatch.fold_pair(t.gemm["loops"], pair[:, 0], pair[:, 1])
        t.gemm = {k: (np.where(chosen[:, None] if fp[k].ndim == 2 else chosen, fp[k], t.gemm[k])
                      if k != "loops" else t.gemm[k]) for k in t.gemm}
    return fold_ok


def whole_plane_unpadded(t: MappingBatch, transpose: bool) -> np.ndarray:
    """The geometries whose tile may be pad_skip's unpadded whole planes (`apply_pad_skip`, with
    pad_skip = 1 and the kernel's own fold): the tile covers the whole output plane of a padded or
    strided conv, not transposed, and every tile size divides."""
    g = t.geo
    return ((t.tile_h == g.out_h) & (t.tile_w == g.out_w) & (g.pad > 0 or g.stride > 1) & (not transpose)
            & (t.co_tiles * t.tile_co == g.co) & (t.ci_steps * t.tile_ci == g.ci))


def apply_pad_skip(t: MappingBatch, ps: np.ndarray, fold: np.ndarray, transpose: bool) -> np.ndarray:
    """Put the padding-skipping GEMM kernel (`pad_skip` = 1, `mapping.batch.pad_skip_kernel`)
    into `t.gemm` and its unpadded INP tile (the whole image's tile_b x tile_ci planes: SRAM,
    hin/win = H/W, one 2-D DMA pattern) into `t` where it applies; returns where it applies: the
    tile covers the whole output plane (one tile position, so one kernel), the conv is padded or
    strided (an unpadded strided conv skips no tap, but its whole planes load as one DMA row, the
    rows and columns the stride skips over-fetched, instead of one row per tile row and channel
    block), every tile size divides (no edge variants), the fold is the kernel's own (uop_fold =
    0), no transposed conv (its zero-skipping kernel is another). On the other tiles of a padded
    conv: `apply_pad_rows`."""
    g = t.geo
    ok = (ps == 1) & (fold == 0) & whole_plane_unpadded(t, transpose)
    if ok.any():
        n = pad_skip_uops(g)
        hazard = np.zeros(t.n, dtype=bool)
        for ci_many in (False, True):
            for co_many in (False, True):
                sel = ok & ((t.tile_ci > 1) == ci_many) & ((t.tile_co > 1) == co_many)
                if sel.any():
                    hazard[sel] = _pad_skip_hazard(g, 2 if ci_many else 1, int(t.tile_co[sel][0]) if co_many else 1)
        plane = g.height * g.width
        inp = t.inp_pattern()
        # tile_b planes of tile_ci contiguous channel blocks each (contiguous when tile_ci = CI)
        one = (t.tile_b == 1) | (t.tile_ci == g.ci)
        t._patterns["inp"] = {"ok": inp["ok"] | ok,
                              "y_size": np.where(ok, np.where(one, 1, t.tile_b), inp["y_size"]),
                              "x_size": np.where(ok, np.where(one, t.tile_b * t.tile_ci * plane, t.tile_ci * plane),
                                                 inp["x_size"]),
                              "x_stride": np.where(ok, np.where(one, t.tile_b * t.tile_ci * plane, g.ci * plane),
                                                   inp["x_stride"])}
        t.hin_t = np.where(ok, g.height, t.hin_t)
        t.win_t = np.where(ok, g.width, t.win_t)
        t.inp_sram = np.where(ok, t.tile_b * t.tile_ci * plane, t.inp_sram)
        t.gemm = {**t.gemm, "n_uops": np.where(ok, n, t.gemm["n_uops"]),
                  "iter_out": np.where(ok, t.tile_ci, t.gemm["iter_out"]),
                  "iter_in": np.where(ok, t.tile_co, t.gemm["iter_in"]),
                  "hazard": np.where(ok, hazard, t.gemm["hazard"])}
    ok = ok | apply_pad_rows(t, ps, fold, transpose)
    return ok


def apply_flat_reset(t: MappingBatch, flat: np.ndarray) -> None:
    """Make the reset kernel of the configs `flat` one micro-op per accumulator row of a batch
    block (tile_co x tile_h x tile_w rows, contiguous in ACC) with iter_out = iter_in = 1
    (`uop_preload` = 2, `Mapping.reset_flat`): no dst hazard, every row written once."""
    if not flat.any():
        return
    n = t.tile_co * t.tile_h * t.tile_w
    one = np.ones(t.n, dtype=np.int64)
    r = t.reset
    t.reset = {**r, "n_uops": np.where(flat, n, r["n_uops"]), "iter_out": np.where(flat, one, r["iter_out"]),
               "iter_in": np.where(flat, one, r["iter_in"]), "hazard": np.where(flat, False, r["hazard"])}


def _pad_skip_hazard(g: Geometry, tile_ci: int, tile_co: int) -> bool:
    # the wrap of iter_in moves dst by (tile_co - 1) planes: any tile_co > 2 is further apart than 2
    return pad_skip_kernel(g, tile_ci, min(tile_co, 2))[1]


def apply_pad_rows(t: MappingBatch, ps: np.ndarray, fold: np.ndarray, transpose: bool) -> np.ndarray:
    """Put `mapping.batch.pad_rows_kernel` into `t.gemm` where `pad_skip` = 1 applies to a tile
    that is not the whole output plane, and return where: a padded conv (not transposed), the
    kernel's own fold (uop_fold = 0), every tile size dividing, and only the first and last row
    tiles reading row padding (`PadRows.ok`). The INP tile and its loads stay the padded ones. The
    kernel's size (the middle row tiles' range, the largest) is what the micro-op cache holds."""
    g = t.geo
    ok = np.zeros(t.n, dtype=bool)
    sel = ((ps == 1) & (fold == 0) & (not transpose) & (g.pad > 0) & ~((t.tile_h == g.out_h) & (t.tile_w == g.out_w))
           & (t.h_tiles * t.tile_h == g.out_h) & (t.w_tiles * t.tile_w == g.out_w)
           & (t.co_tiles * t.tile_co == g.co) & (t.ci_steps * t.tile_ci == g.ci))
    if not sel.any():
        return ok
    n_uops = t.gemm["n_uops"].copy()
    hazard = t.gemm["hazard"].copy()
    rows = np.flatnonzero(sel)
    keys = np.stack([t.tile_h[rows], t.tile_w[rows], np.minimum(t.tile_ci[rows], 2), np.minimum(t.tile_co[rows], 2)],
                    axis=1)
    uniq, inv = np.unique(keys, axis=0, return_inverse=True)
    for u, key in enumerate(uniq.tolist()):
        pr = pad_rows_kernel(t.geo, *key)
        at = rows[inv.reshape(-1) == u]
        ok[at] = pr.ok
        n_uops[at] = pr.kernel.size
        hazard[at] = pr.hazard
    t.gemm = {**t.gemm, "n_uops": np.where(ok, n_uops, t.gemm["n_uops"]),
              "iter_out": np.where(ok, t.tile_ci, t.gemm["iter_out"]),
              "iter_in": np.where(ok, t.tile_co, t.gemm["iter_in"]),
              "hazard": np.where(ok, hazard, t.gemm["hazard"])}
    return ok

