"""`VtaBatch`: the knob values of n `vta` configs and their tile geometry; the canonical orders."""

from __future__ import annotations

import numpy as np

from codesign.mapping.batch import (
    MappingBatch,
)
from codesign.schedule.vta.kernels import apply_fold
from codesign.schedule.vta.knobs import (
    ORDERS,
    PAIR_AXES,
    VTHREADS,
)


def _canonical_table() -> np.ndarray:
    """(16, 24) bool: canonical[live bits of PAIR_AXES, order] — an order is canonical when no
    smaller order index puts the live loops (extent > 1) in the same sequence: orders that only
    move extent-1 loops emit the same program, and the space keeps one of them."""
    tab = np.zeros((1 << len(PAIR_AXES), len(ORDERS)), dtype=bool)
    for bits in range(tab.shape[0]):
        live = {a for i, a in enumerate(PAIR_AXES) if bits >> i & 1}
        seen: set[tuple[str, ...]] = set()
        for p, order in enumerate(ORDERS):
            key = tuple(a for a in order if a in live)
            if key not in seen:
                seen.add(key)
                tab[bits, p] = True
    return tab


CANONICAL = _canonical_table()
_POS = np.array([[order.index(a) for a in PAIR_AXES] for order in ORDERS], dtype=np.int64)  # (24, 4)


class VtaBatch:
    """The knob values of n configs of a `VtaSpace` and their `MappingBatch` (threads counted in
    `oc_nthread`, so the SRAM rules see T = 1 or `n_threads` whatever the axis)."""

    def __init__(self, t: MappingBatch, order: np.ndarray, ws: np.ndarray, vt: np.ndarray,
                 fold: np.ndarray, fold_ok: np.ndarray, ins: np.ndarray, acc: np.ndarray, ps: np.ndarray,
                 ps_ok: np.ndarray, nt: np.ndarray, nt_pos: np.ndarray, lift: np.ndarray, lift_loop: np.ndarray,
                 lift_ok: np.ndarray, pre: np.ndarray, early: np.ndarray) -> None:
        self.pre, self.early = pre, early  # uop_preload, early_epilogue
        self.t, self.order, self.ws, self.vt, self.fold, self.fold_ok = t, order, ws, vt, fold, fold_ok
        self.ins, self.acc = ins, acc  # inp_stationary; acc_resident: pair loops inside the reduction
        self.ps, self.ps_ok = ps, ps_ok  # pad_skip, and where it applies
        self.nt, self.nt_pos = nt, nt_pos  # threads (1 without an axis), position of the n_threads knob
        # uop_lift value, (n, 2, 4) the lifted loops' [extent, dst, src, wgt] ([1, 0, 0, 0]: none), all live?
        self.lift, self.lift_loop, self.lift_ok = lift, lift_loop, lift_ok
        tiles = {"b": t.b_tiles, "h": t.h_tiles, "co": t.co_tiles, "w": t.w_tiles}
        # temporal extent of each pair loop: tiles over the axis / threads on it
        self.extent = {a: tiles[a] // np.where(vt == VTHREADS.index(a), nt, 1) for a in PAIR_AXES}
        self.tiles = tiles
        # one LOAD per INP block (not for pad_skip's unpadded tile of the whole plane: one 2-D pattern;
        # on other tiles pad_skip keeps the padded tile and its loads, `apply_pad_rows`)
        unpadded = (self.ps == 1) & self.ps_ok & (t.tile_h == t.geo.out_h) & (t.tile_w == t.geo.out_w)
        self.split = ((t.geo.pad > 0) & (t.tile_b * t.tile_ci > 1) | ~t.inp_pattern()["ok"]) & ~unpadded
        self.set_nest(order, ws, self.ins, self.acc)

    def set_nest(self, order: np.ndarray, ws: np.ndarray, ins: np.ndarray, acc: np.ndarray) -> None:
        """Set the loop order and residency knobs and what follows from them (the tile geometry
        does not depend on them: `valid_indices` reuses it for every order and residency)."""
        self.order, self.ws, self.ins, self.acc = order, ws, ins, acc
        self.pos = _POS[order]  # (n, 4) position of each pair loop in the order
        #: inner[:, i]: loop PAIR_AXES[i] runs inside the reduction (one of the `acc` innermost loops
        #: of extent > 1, so orders that move only extent-1 loops stay the same program); slots:
        #: ACC tiles per thread; n_live: loops of extent > 1
        ext = np.stack([self.extent[a] for a in PAIR_AXES], axis=1)
        live = ext > 1
        after = (live[:, None, :] & (self.pos[:, None, :] > self.pos[:, :, None])).sum(axis=2)
        self.inner = live & (after < self.acc[:, None])
        self.n_live = live.sum(axis=1)
        self.slots = np.where(self.inner, ext, 1).prod(axis=1)

    def inner_loads(self, axes: tuple[str, ...]) -> np.ndarray:
        """Loads per pair and reduction step of an operand that changes with the inner loops on
        `axes`: the iterations of the inner loops at or outside the innermost of them (1: none)."""
        ext = np.stack([self.extent[a] for a in PAIR_AXES], axis=1)
        sel = self.inner & np.isin(np.array(PAIR_AXES), axes)[None, :]
        deepest = np.where(sel, self.pos, -1).max(axis=1)
        return np.where(self.inner & (self.pos <= deepest[:, None]), ext, 1).prod(axis=1)

    def refold(self, t: MappingBatch, rows: np.ndarray) -> MappingBatch:
        """`t` (the geometry of other tile sizes of the configs `rows`, e.g. their edge tiles)
        with those configs' micro-op folds."""
        apply_fold(t, self.fold[rows])
        return t

