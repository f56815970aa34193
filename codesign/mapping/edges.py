"""Edge tiles: tile sizes that do not divide their extent (the `vta` family, docs/schedules.md).

An axis of extent n cut into tiles of f runs ceil(n / f) tiles; the last is the *edge* tile of
n - (ceil(n / f) - 1)·f. Edges are allowed on h, w (output rows / columns), co (output channel
blocks) and ci (the reduction's input channel blocks: the last reduction step). A tile is one of
16 *variants*: bit k of the variant set when it is the edge tile of `EDGE_AXES[k]`.

Each variant is a tile of its own size with its own compact SRAM layouts (the layouts of
`mapping.batch` for that size, every thread's slice starting where the full tile's does), so it is
exactly the geometry `MappingBatch` gives for those tile sizes: its micro-op kernels (the same
fold choice), its DMA patterns, its ACC elements. Nothing is padded beyond what the layer's own
padding needs: an edge tile loads, computes and stores only its real rows, columns and channel
blocks (a ci edge step loads only the real channel blocks of INP and WGT, so no zero fill is
needed). The full tile's SRAM footprint bounds every variant's.

`variant_sizes` gives each variant's tile sizes for many configs (validity, features);
`Edges` carries one mapping's variants to the lowering (`codesign.lower`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from codesign.mapping.batch import Kernel, MappingBatch

EDGE_AXES = ("h", "w", "co", "ci")  # variant bit k: the edge tile of EDGE_AXES[k]
N_VARIANTS = 1 << len(EDGE_AXES)
PAIR_BITS = 7  # the h, w, co bits: what a pair (and the reset kernel, the epilogue, the STORE) sees
CI_BIT = 8


def edge_sizes(t: MappingBatch) -> dict[str, np.ndarray]:
    """Size of the last tile on each edge axis (the tile size where it divides), (n,) each."""
    g = t.geo
    return {"h": g.out_h - (t.h_tiles - 1) * t.tile_h, "w": g.out_w - (t.w_tiles - 1) * t.tile_w,
            "co": g.co - (t.co_tiles - 1) * t.tile_co, "ci": g.ci - (t.ci_steps - 1) * t.tile_ci}


def edge_bits(t: MappingBatch) -> np.ndarray:
    """(n,) int: bit k set when axis EDGE_AXES[k] has an edge tile."""
    e = edge_sizes(t)
    full = {"h": t.tile_h, "w": t.tile_w, "co": t.tile_co, "ci": t.tile_ci}
    return sum((e[a] < full[a]).astype(np.int64) << k for k, a in enumerate(EDGE_AXES))


def variant_sizes(t: MappingBatch, v: int, rows: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Tile sizes (MappingBatch knob arrays) of variant `v` of the configs `rows` of `t`."""
    sel = slice(None) if rows is None else rows
    g = t.geo
    out = {}
    for k, (a, n, tiles, size) in enumerate((("h", g.out_h, t.h_tiles, t.tile_h), ("w", g.out_w, t.w_tiles, t.tile_w),
                                              ("co", g.co, t.co_tiles, t.tile_co), ("ci", g.ci, t.ci_steps, t.tile_ci))):
        f = np.broadcast_to(size, (t.n,))[sel]  # only the selected rows (t may be a whole space's table)
        out[f"tile_{a}"] = n - (np.broadcast_to(tiles, (t.n,))[sel] - 1) * f if v >> k & 1 else f
    out.update(tile_b=t.tile_b[sel], oc_nthread=t.oc_nthread[sel], h_nthread=t.h_nthread[sel])
    return out


@dataclass(frozen=True)
class EdgeTile:
    """One variant of a mapping's tile: sizes (b, h, w, ci, co, hin, win) and SRAM elements as
    `Tile`, its kernels, the 2-D patterns of its INP (`inp_loads` LOADs: 1 or one per batch x
    channel block) / WGT / OUT transfers as (y_size, x_size, x_stride)."""

    tile: object  # mapping.Tile (kept untyped here: mapping imports this module)
    gemm: Kernel
    reset: Kernel
    inp: tuple[int, int, int]
    wgt: tuple[int, int, int]
    out: tuple[int, int, int]
    inp_loads: int


@dataclass(frozen=True)
class Edges:
    """The edge tiles of a mapping: `last` = the index of the edge tile on h, w, co (over the pair
    loops and threads) and of the edge reduction step, -1 where the tile size divides; `variants`
    the 16 variants (those of axes without an edge equal the full tile)."""

    last: tuple[int, int, int, int]
    variants: tuple[EdgeTile, ...]

    def bits(self) -> int:
        return sum(1 << k for k, x in enumerate(self.last) if x >= 0)
