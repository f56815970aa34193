"""`VtaSpace`: the `vta` schedule family of a layer on one hardware config (docs/schedules.md).

The AutoTVM templates fix one loop nest (b, h, co, w tile loops, the reduction innermost, INP and
WGT loaded at every reduction step, virtual threads on h or co). This family keeps the tile
geometry of `mapping.MappingBatch` and frees what the lowering (`codesign.lower`) can emit
correctly for any nest:

- `tile_b/h/w/ci/co`: the template's split knobs (divisors of the extent, `[n // f, f]`), then for
  h, w, ci, co the sizes that do not divide (`[ceil(n / f), f]`, one per tile count: f =
  ceil(n / k)): the last tile is a smaller edge tile (`mapping.edges`; not for transposed convs,
  whose zero-skipping kernel depends on the tile, nor co of grouped convs, whose co tiles lie in
  one group; batch blocks are 1 in every zoo workload);
- `order`: the order of the four pair loops, an index into `ORDERS` (0 = the template's);
- `wgt_stationary`: 1 loads each weight tile once per iteration of the co loop and keeps it
  across the loops inside it (needs the whole reduction in one tile, `ci_steps == 1`);
- `vthread`: virtual threads on axis `VTHREADS[v]` (0 = none; h and co are the template's);
- `uop_fold`: which two loops of the GEMM micro-op kernel (`mapping.batch.GEMM_LOOPS`) become the
  instruction's iter_out / iter_in fields, the rest unrolled into micro-ops: 0 = the template's
  `fold_uop_loop` (the two outermost live loops), k = the pair `FOLD_PAIRS[k - 1]` (both live,
  not the template's pair; the dst hazard is checked over the whole GEMM stream). Fewer loop
  iterations cost less loop overhead, bigger kernels more micro-op cache and loads;
- `inp_stationary`: 1 loads each input tile once per iteration of the innermost spatial (b, h, w)
  loop of extent > 1 and keeps it across the co loop inside it (needs the whole reduction in one
  tile; the mirror of `wgt_stationary`);
- `acc_resident`: n moves the n innermost pair loops of extent > 1 inside the reduction loop: the partial sums
  of their output tiles all stay in ACC (one slot each), an operand that does not change with
  them is loaded once per reduction step and reused by every slot (INP across co tiles, WGT
  across spatial tiles), the requantization and STOREs run after the last step. ACC cannot be
  spilled (VTA's STORE reads the int8 OUT buffer, never ACC): nests whose slots do not fit are
  refused (`acc_spill`);
- `pad_skip`: 1 replaces the GEMM kernel by one that skips every tap reading zero padding
  (`mapping.batch.pad_skip_kernel`: explicit micro-ops over the (pixel, tap) pairs inside the image,
  iter_out / iter_in over the input / output channel blocks), for tiles covering the whole output
  plane of a padded conv (one tile position, so one kernel; no edge tiles, uop_fold = 0): fewer
  GEMM cycles than the MACs of the padded conv (a 3x3 conv on a 7x7 image: 19² of 21² taps). On
  other tiles of a padded conv (row tiles, column tiles) it is `mapping.batch.pad_rows_kernel`: one
  kernel whose micro-op range the first / last row tile's GEMM trims (the taps above / below the
  image), the column padding skipped when the tile is the whole width (`apply_pad_rows`);
- INP tiles whose region is no single 2-D DMA pattern (padded loads of several channel or batch
  blocks, unpadded tiles that do not fold) are loaded one (batch, channel) block per LOAD
  (`Mapping.inp_loads`), so the template's `pad_ci`, `pad_b` and `dma_inp` rules do not apply;
- `n_threads`: how many virtual threads run on the `vthread` axis, `THREAD_COUNTS` (2 = the
  template's). Each owns 1/T of INP/WGT/ACC SRAM; the emitter's tokens order a ring of T slots
  (docs/vta.md §7.3 "More than two virtual threads");
- `uop_lift`: 0 = the whole GEMM kernel in one instruction per batch block and step, k = the loops
  `LIFTS[k]` (one of `GEMM_LOOPS`, k = 1..6, or two of them, k = 7..21) lifted out of the micro-op
  kernel into one GEMM instruction per iteration (`Mapping.gemm_lift`): smaller kernels (the capacity rule admits bigger tiles, the dst hazard is
  checked per instruction over its whole stream), more instructions. The others fold as above;
- `uop_preload`: 0 = the runtime's ring cache (each kernel loaded by a LOAD UOP at its use, reloaded
  when evicted); 1 = every kernel of the program in the micro-op buffer at once, loaded by one LOAD
  UOP at the head of the compute queue (`Mapping.uop_preload`): no LOAD UOP waits for the shared
  port behind the weight stream (rule `uop_preload_fit`: they fit); 2 = 1 with each reset kernel
  flat, one micro-op per accumulator row and no loop (`Mapping.reset_flat`: its II=1 pipeline fills
  once, not once per (iter_out, iter_in) pair; rule `uop_flat_reset_edge`: full tiles only);
- `early_epilogue`: 1 runs each thread's requantization (up to a fused residual) right after its own
  GEMMs of the last reduction step, before the next thread's (`Mapping.early_epilogue`): thread 0's
  ALU passes overlap thread 1's last loads instead of adding to the drain after them (rule
  `early_epilogue_live`: more than one thread, else the same program).

Index and knobs work as in `ScheduleSpace` (mixed radix, first knob least significant), so the
tuners and `SpaceView` walk it unchanged. Validity is the template rules of
`schedule.validity` (SRAM per thread x threads, DMA patterns, micro-op capacity and hazard, field
ranges) that still hold, the group/transpose rules of `schedule.templates`, and this family's
own (`RULES`); `why_invalid` prefixes the message with the rule's name. Every valid template
config is a point of this space (`from_template`), so the family's optimum is never worse.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Sequence

import numpy as np

from codesign.errors import ConfigError
from codesign.mapping import table as shared
from codesign.mapping.batch import (
    FOLD_PAIRS,
    GEMM_LOOPS,
    MAX_DMA_FIELD,
    MAX_ITER,
    Geometry,
    MappingBatch,
    dst_hazard,
    pad_rows_kernel,
    pad_skip_kernel,
    pad_skip_uops,
    take,
)
from codesign.mapping.edges import edge_bits
from codesign.mapping.table import MappingTable
from codesign.schedule import edge_rules, templates
from codesign.schedule.features import CONFIG_FEATURE_NAMES, N_CONFIG_FEATURES, config_features
from codesign.schedule.indexed import KnobSpace
from codesign.schedule.knobs import Config, Knob, KnobValue, make_knobs
from codesign.schedule.validity import Rule, check

PAIR_AXES = ("b", "h", "co", "w")
ORDERS: tuple[tuple[str, ...], ...] = tuple(itertools.permutations(PAIR_AXES))  # [0]: the template's
VTHREADS: tuple[str | None, ...] = (None, "h", "co", "w", "b")
N_THREADS = 2  # the templates' thread count ("VTA only supports 2 virtual threads" is TVM's lowering)
#: `n_threads` values: threads on the `vthread` axis ([0] = the templates' 2; docs/vta.md §7.3).
THREAD_COUNTS = (2, 3, 4, 8)
TILE_KNOBS = ("tile_b", "tile_h", "tile_w", "tile_ci", "tile_co")
#: The family's first knobs; every knob appended after them takes today's program at position 0,
#: so a knob dict (a record) without them means that value (`VtaSpace._knob_dict`).
BASE_KNOBS = TILE_KNOBS + ("order", "wgt_stationary", "vthread", "uop_fold")
#: This family's rules that depend on the loop order or the residency (`valid_indices`).
ORDER_RULES = frozenset({"wgt_stationary_ci", "wgt_stationary_reuse", "order_canonical", "inp_stationary_ci",
                         "inp_stationary_reuse", "stationary_both", "acc_resident_live", "acc_resident_stationary",
                         "acc_resident_group", "acc_spill", "field_acc_resident", "nest_edge",
                         "nest_edge_uop_cache", "uop_preload_fit", "sram_inp_shared"})
#: The knobs that change only the GEMM micro-op kernel, and the rules that depend on them (with the
#: edge rules, `edge_rules`): the first pass of `valid_indices` leaves them out. `uop_preload` is not
#: one: no pass-A rule reads it, so it is part of each geometry (and of `sample_support`'s draws).
KERNEL_KNOBS = ("uop_fold", "uop_lift", "pad_skip")
#: `uop_lift` values: the GEMM_LOOPS indices lifted out of the micro-op kernel, outer to inner
#: (0: none; 1..6 one loop, as before pairs were added; then every pair).
LIFTS: tuple[tuple[int, ...], ...] = (((),) + tuple((i,) for i in range(len(GEMM_LOOPS)))
                                      + tuple(itertools.combinations(range(len(GEMM_LOOPS)), 2)))
_LIFT_COLS = np.array([list(c) + [-1] * (2 - len(c)) for c in LIFTS], dtype=np.int64)  # (22, 2), -1: none
KERNEL_RULES = frozenset({"uop_capacity", "field_iter", "uop_hazard", "uop_fold_live", "uop_lift_live",
                          "uop_lift_edge", "pad_skip_tile", "pad_skip_lift", "uop_flat_reset_edge", "sram_inp"})
#: `uop_preload` values: 0 the ring, 1 every kernel loaded once at the start, 2 = 1 with flat resets.
PRELOADS = (0, 1, 2)
#: (wgt_stationary, inp_stationary, acc_resident) combinations the second pass of `valid_indices`
#: tries (the others break `stationary_both` / `acc_resident_stationary`).
NESTS: tuple[tuple[int, int, int], ...] = ((0, 0, 0), (1, 0, 0), (0, 1, 0), (0, 0, 1), (0, 0, 2))
ACC_RESIDENT_MAX = 2
#: Template rules this family replaces: INP loads split per block (pad_ci, pad_b, dma_inp), and
#: its own thread rule (one axis, `vthread_div`) instead of the template's two knobs.
REPLACED = frozenset({"pad_ci", "pad_b", "dma_inp", "vthread_oc", "vthread_h", "vthread_max", "sram_inp"})

EXTRA_FEATURE_NAMES: tuple[str, ...] = (
    "pos_b", "pos_h", "pos_co", "pos_w",  # position of each pair loop, 0 outermost .. 1 innermost
    "wgt_stationary", "vt_h", "vt_co", "vt_w", "vt_b",
    "log2_wgt_bytes_loaded",  # WGT bytes over the layer with residency
    "log2_inp_loads",         # INP LOAD instructions over the layer
    "uop_fold_chosen",        # 1: the GEMM fold is a chosen pair, 0: the template's
    "edge_tile_frac",         # fraction of the output tiles that are edge tiles (smaller, own kernels)
    "edge_fill",              # output elements / (tiles x full tile elements): 1 when every size divides
    "inp_stationary",
    "log2_acc_slots",         # output tiles resident in ACC per thread (acc_resident)
    "pad_skip",               # the GEMM kernel skips the taps that read zero padding
    "log2_threads",           # log2 of the virtual threads (0: none)
    "log2_lift_insns",        # GEMM instructions per batch block and step (uop_lift: product of the lifted extents)
)
N_FEATURES = N_CONFIG_FEATURES + len(EXTRA_FEATURE_NAMES)


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


def _ok_msg(rule: Rule) -> tuple[np.ndarray, Callable[[int], str]]:
    return rule.ok, rule.message


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


class VtaSpace(KnobSpace):
    """All `vta`-family schedules of `layer` on `hw` (module docstring)."""

    family = "vta"

    @property
    def coupled_knobs(self) -> tuple[tuple[int, ...], ...]:
        """Knob positions a search should move together: the GEMM kernel's knobs (`KERNEL_KNOBS`)
        exclude each other (pad_skip wants uop_fold = uop_lift = 0), so a best point with a chosen
        fold is two or three one-knob moves, all invalid, away from its pad_skip twin."""
        names = [k.name for k in self.knobs]
        return (tuple(names.index(k) for k in KERNEL_KNOBS),)

    def _knob_dict(self, config: object) -> dict[str, KnobValue]:
        """The knobs of `config`; appended knobs it lacks (records written before they existed)
        take their position-0 value, the program it was recorded with."""
        knobs = getattr(config, "knobs", config)
        if isinstance(knobs, dict):
            missing = {k.name: k.candidates[0] for k in self.knobs if k.name not in knobs and k.name not in BASE_KNOBS}
            if missing:
                config = {**knobs, **missing}
        return super()._knob_dict(config)

    def make_knobs(self) -> tuple[Knob, ...]:
        tiles = tuple(edge_rules.with_edges(k, self.layer) for k in make_knobs(self.layer, self.hw)
                      if k.name in TILE_KNOBS)
        return tiles + (
            Knob("order", "ot", tuple(range(len(ORDERS)))),
            Knob("wgt_stationary", "ot", (0, 1)),
            Knob("vthread", "ot", tuple(range(len(VTHREADS)))),
            Knob("uop_fold", "ot", tuple(range(len(FOLD_PAIRS) + 1))),
            Knob("inp_stationary", "ot", (0, 1)),
            Knob("acc_resident", "ot", tuple(range(ACC_RESIDENT_MAX + 1))),
            Knob("pad_skip", "ot", (0, 1)),
            Knob("n_threads", "ot", THREAD_COUNTS),
            Knob("uop_lift", "ot", tuple(range(len(LIFTS)))),
            Knob("uop_preload", "ot", PRELOADS),
            Knob("early_epilogue", "ot", (0, 1)))

    # -- geometry and validity -----------------------------------------------------------------
    def batch(self, indices: np.ndarray, geometry: MappingBatch | None = None) -> VtaBatch:
        """Knob values and tile geometry of the configs `indices` (the one place they are built);
        `geometry`: their tile geometry already built, with the template's kernels (a `take` of
        configs with the same tiles and threads, `valid_indices`)."""
        pos = self.positions_of(indices)
        v = {k.name: self._values[j][pos[:, j]] for j, k in enumerate(self.knobs)}
        vt = v["vthread"]
        nt = np.where(vt > 0, v["n_threads"], 1)
        if geometry is None:
            geo = {name: v[name] for name in TILE_KNOBS if name in v}
            geo["oc_nthread"] = nt
            t = templates.adapt(self.layer, MappingBatch(self._geo, self.hw, geo))
        else:
            t = geometry
        lift, lift_loop, lift_ok = self._lift(t, v["uop_lift"])
        fold = v["uop_fold"]
        transpose = self.template == templates.TRANSPOSE_TEMPLATE
        fold_ok = apply_fold(t, fold) if not transpose else fold == 0
        ps = v["pad_skip"]
        ps_ok = (ps == 0) | apply_pad_skip(t, ps, fold, transpose)
        pre = v["uop_preload"]
        apply_flat_reset(t, pre == 2)
        return VtaBatch(t, v["order"], v["wgt_stationary"], vt, fold, fold_ok, v["inp_stationary"], v["acc_resident"],
                        ps, ps_ok, nt, pos[:, self.knob_names.index("n_threads")], lift, lift_loop, lift_ok, pre,
                        v["early_epilogue"])

    def _lift(self, t: MappingBatch, lift: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Lift the loops `LIFTS[lift]` out of each config's GEMM kernel (in place on `t.gemm`:
        the kernel without them, folded as the template folds; the dst hazard of a lifted config is
        that of its instruction's whole stream). Returns (lift, lifted loop rows, lift_ok)."""
        loops = t.gemm["loops"]
        lift_loop = np.zeros((t.n, 2, 4), dtype=np.int64)
        lift_loop[..., 0] = 1
        lifted = lift > 0
        lift_ok = ~lifted
        if not lifted.any() or self.template == templates.TRANSPOSE_TEMPLATE:  # its kernel is no loop nest
            return lift, lift_loop, lift_ok
        loops = loops.copy()
        live = lifted.copy()
        for slot in range(2):
            col = _LIFT_COLS[lift, slot]
            rows = np.flatnonzero(col >= 0)
            lift_loop[rows, slot] = loops[rows, col[rows]]
            live[rows] &= lift_loop[rows, slot, 0] > 1
            loops[rows, col[rows], 0] = 1
        lift_ok = lift_ok | live
        fold = MappingBatch._fold(loops)
        roles = fold["roles"]
        stream = np.argsort(np.where(roles == 1, -2, np.where(roles == 2, -1, np.arange(loops.shape[1]))),
                            axis=1, kind="stable")
        s_ext = np.take_along_axis(loops[..., 0], stream, axis=1)
        s_dst = np.take_along_axis(loops[..., 1], stream, axis=1)
        fold["hazard"] = np.where(lifted, dst_hazard(s_ext, s_dst, s_ext > 1), fold["hazard"])
        t.gemm = {k: (np.where(lifted[:, None] if fold[k].ndim == 2 else (lifted[:, None, None] if fold[k].ndim == 3
                                                                         else lifted), fold[k], t.gemm[k]))
                  for k in t.gemm}
        return lift, lift_loop, lift_ok

    def valid_table(self) -> tuple[VtaBatch, dict[int, int]]:
        """The `batch` of every valid config, built once, and each valid index's row in it (the
        producer reads one config's geometry as a row lookup)."""
        if not hasattr(self, "_table"):
            valid = self.valid_indices()
            self._table = (self.batch(valid), {int(i): r for r, i in enumerate(valid.tolist())})
            pos = self.positions_of(valid)
            self._row_values = [tuple(int(self._values[j][p]) for j, p in enumerate(row)) for row in pos.tolist()]
        return self._table

    def valid_index_of(self, config: Config | dict | list | int) -> int | None:
        """`config.index` when `config` is a valid Config of this space (its knobs are those of
        the index), else None (then `as_config` + `why_invalid` decide). Tuners measure Configs
        the space built, so this skips rebuilding them."""
        index = getattr(config, "index", None)
        knobs = getattr(config, "knobs", None)
        if not isinstance(index, int) or not isinstance(knobs, dict):
            return None
        row = self.valid_table()[1].get(index)
        if row is None or len(knobs) != len(self.knob_names):
            return None
        try:
            values = tuple(int(v[-1]) if isinstance(v, (list, tuple)) else int(v)
                           for v in (knobs[n] for n in self.knob_names))
        except (KeyError, TypeError, ValueError, IndexError):
            return None
        return index if values == self._row_values[row] else None

    def mapping_batch(self, indices: np.ndarray) -> MappingBatch:
        return self.batch(indices).t

    def rules(self, b: VtaBatch, edges: bool = True) -> list[Rule]:
        """Every rule, in order: the template rules that still hold, the layer template's own,
        then this family's (the edge tiles' last, `edge_rules`; `edges=False` leaves them out)."""
        t, n = b.t, b.t.n
        out = [r for r in check(t) if r.name not in REPLACED] + templates.rules(self.layer, t)

        def add(name: str, ok: np.ndarray, message: Callable[[int], str]) -> None:
            out.append(Rule(name, np.broadcast_to(np.asarray(ok, dtype=bool), (n,)), message))

        axis_tiles = np.stack([b.tiles[a] if a else np.ones(n, dtype=np.int64) for a in VTHREADS], axis=1)
        tiles_vt = axis_tiles[np.arange(n), b.vt]
        add("vthread_div", tiles_vt % b.nt == 0, lambda i: (
            f"virtual threads: {b.nt[i]} threads on axis {VTHREADS[b.vt[i]]} need a tile count divisible "
            f"by {b.nt[i]}, got {tiles_vt[i]}"))
        # INP SRAM: one tile per thread, or one for all threads when the tile never changes and the
        # threads split co (one loaded once is then shared: `Mapping.inp_shared`; pass C's rule
        # sram_inp_shared keeps the residencies that reload it to one tile per thread)
        shareable, _once = self._inp_shared(b)
        tab = self.table(b)
        # the rule over the tile any residency could share (pass B runs without order and residency)
        add("sram_inp", *_ok_msg(shared.sram(dataclasses.replace(tab, inp_shared=shareable), self.hw, "inp")))
        # the same over the smallest tile any kernel knob gives the geometry (pad_skip's unpadded
        # whole planes, `apply_pad_skip`): the first pass of `valid_indices` runs with them at 0
        g = self._geo
        whole = whole_plane_unpadded(t, self.template == templates.TRANSPOSE_TEMPLATE)
        low = np.where(whole, np.minimum(t.inp_sram, t.tile_b * t.tile_ci * g.height * g.width), t.inp_sram)
        add("sram_inp_bound", *_ok_msg(shared.sram(dataclasses.replace(tab, inp_sram=low, inp_shared=shareable),
                                                   self.hw, "inp")))
        # the rule itself (with sram_inp, whose bound it tightens to the residency's sharing)
        add("sram_inp_shared", shared.sram(tab, self.hw, "inp").ok, lambda i: (
            f"{shared.sram_message('inp', int(t.inp_sram[i]), int(b.nt[i]), self.hw.inp_depth)}; one tile shared by "
            "the threads needs it loaded once: input-stationary (inp_stationary=1)"))
        add("early_epilogue_live", (b.early == 0) | (b.nt > 1), lambda i: (
            "early epilogue: with one thread the epilogue follows its GEMMs anyway (the same program as "
            "early_epilogue=0)"))
        add("vthread_count", (b.vt > 0) | (b.nt_pos == 0), lambda i: (
            f"virtual threads: n_threads={THREAD_COUNTS[b.nt_pos[i]]} needs a thread axis (vthread=0 runs one "
            f"thread; only n_threads={THREAD_COUNTS[0]} is kept)"))
        add("wgt_stationary_ci", (b.ws == 0) | (t.ci_steps == 1), lambda i: (
            f"residency: a stationary weight tile must hold the whole reduction (tile_ci = {self._geo.ci} "
            f"blocks), got {t.ci_steps[i]} reduction steps"))
        inside = self._loads_per_co(b) < b.t.n_tiles // b.nt
        add("wgt_stationary_reuse", (b.ws == 0) | inside, lambda i: (
            "residency: a stationary weight tile is reused by no loop inside the co loop (the same "
            "program as wgt_stationary=0)"))
        live = sum((b.extent[a] > 1).astype(np.int64) << k for k, a in enumerate(PAIR_AXES))
        live = live | (b.ws << PAIR_AXES.index("co"))  # a resident co loop's place matters even at extent 1
        add("order_canonical", CANONICAL[live, b.order], lambda i: (
            f"loop order: order {b.order[i]} {ORDERS[b.order[i]]} moves only extent-1 loops of a "
            f"smaller order index (the same program)"))
        add("uop_fold_live", b.fold_ok, lambda i: (
            f"micro-op fold: pair {b.fold[i]} folds GEMM loops "
            f"{[GEMM_LOOPS[j] for j in FOLD_PAIRS[b.fold[i] - 1]]}, which needs both loops of extent > 1 "
            "and not the template's own fold (uop_fold=0); a transposed conv's kernel is not folded"))
        add("uop_lift_live", b.lift_ok, lambda i: (
            f"micro-op lift: GEMM loops {[GEMM_LOOPS[j] for j in LIFTS[b.lift[i]]]} need extent > 1 each (nothing "
            "to lift otherwise); a transposed conv's kernel is not lifted"))
        add("uop_lift_edge", (b.lift == 0) | (edge_bits(t) == 0), lambda i: (
            f"micro-op lift: uop_lift={b.lift[i]} lifts a loop of the full tile's kernel, but the edge tiles of "
            "tile sizes that do not divide have kernels of their own extents (lowered whole only)"))
        self._nest_rules(b, tab, add)
        self._preload_rules(b, tab, add)
        add("pad_skip_tile", b.ps_ok, lambda i: (
            "pad_skip: the padding-skipping kernel needs a conv that is not transposed, tile sizes that divide (no "
            f"edge tiles) and uop_fold = 0 (got {b.fold[i]}), and either a tile covering the whole output plane of a "
            f"padded or strided conv (tile_h = {self._geo.out_h}, tile_w = {self._geo.out_w}) or a padded conv whose "
            f"middle row tiles read no row padding (got tile_h = {t.tile_h[i]}, tile_w = {t.tile_w[i]}, "
            f"pad = {self._geo.pad})"))
        add("pad_skip_lift", (b.ps == 0) | (b.lift == 0), lambda i: (
            f"pad_skip: the padding-skipping kernel is explicit micro-ops over the taps inside the image; no loop "
            f"of it is lifted into instructions (uop_lift = 0), got uop_lift={b.lift[i]}"))
        split_max = np.maximum(np.maximum(t.hin_t, t.win_t), self._geo.width)
        add("field_inp_split", ~b.split | (split_max <= MAX_DMA_FIELD), lambda i: (
            f"field range: an INP block load size or stride {split_max[i]} > {MAX_DMA_FIELD}"))
        if edges:
            out += edge_rules.rules(b)
            need_u = b.edge_uops * b.slots
            add("nest_edge_uop_cache", need_u <= self.hw.uop_depth, lambda i: (
                f"micro-op cache: with edge tiles every kernel stays cached; {b.slots[i]} ACC slots per thread "
                f"x {b.edge_uops[i]} micro-ops of one slot's kernels = {need_u[i]} > UOP depth {self.hw.uop_depth}"))
        return out

    def _nest_rules(self, b: VtaBatch, tab: MappingTable,
                    add: Callable[[str, np.ndarray, Callable[[int], str]], None]) -> None:
        """The rules of `inp_stationary` and `acc_resident`."""
        t = b.t
        add("inp_stationary_ci", (b.ins == 0) | (t.ci_steps == 1), lambda i: (
            f"residency: a stationary input tile must hold the whole reduction (tile_ci = {self._geo.ci} "
            f"blocks), got {t.ci_steps[i]} reduction steps"))
        spatial = np.stack([np.where(b.extent[a] > 1, b.pos[:, PAIR_AXES.index(a)], -1) for a in ("b", "h", "w")],
                           axis=1).max(axis=1)
        co_pos = b.pos[:, PAIR_AXES.index("co")]
        add("inp_stationary_reuse", (b.ins == 0) | ((b.extent["co"] > 1) & (co_pos > spatial)), lambda i: (
            "residency: a stationary input tile is reused by no co loop inside the innermost spatial loop "
            "(the same program as inp_stationary=0)"))
        add("stationary_both", *_ok_msg(shared.stationary_both(tab)))
        add("acc_resident_live", b.acc <= b.n_live, lambda i: (
            f"residency: acc_resident={b.acc[i]} needs {b.acc[i]} tile loops of extent > 1 to move inside the "
            f"reduction, got {b.n_live[i]} (the same program as acc_resident={b.n_live[i]})"))
        add("acc_resident_stationary", (b.acc == 0) | ((b.ws == 0) & (b.ins == 0)), lambda i: (
            "residency: loops inside the reduction load their operands per reduction step (wgt_stationary "
            "and inp_stationary must be 0)"))
        grouped = self.template == templates.GROUP_TEMPLATE
        co_in = b.inner[:, PAIR_AXES.index("co")]
        add("acc_resident_group", ~(grouped & (co_in | (b.ins == 1))), lambda i: (
            "residency: a grouped conv's input tile changes with the co tile's group, so it is not reused "
            "across a co loop (inp_stationary=0, co not inside the reduction)"))
        add("acc_spill", *_ok_msg(shared.acc_spill(tab, self.hw)))
        add("nest_edge", *_ok_msg(shared.nest_edge(tab)))
        if hasattr(b, "edge_uops"):  # the edge kernels of one slot per thread (`edge_rules.rules`) x the slots
            need_u = b.edge_uops * b.slots
            add("nest_edge_uop_cache", need_u <= self.hw.uop_depth, lambda i: (
                f"micro-op cache: with edge tiles every kernel stays cached; {b.slots[i]} ACC slots per thread "
                f"x {b.edge_uops[i]} micro-ops of one slot's kernels = {need_u[i]} > UOP depth {self.hw.uop_depth}"))
        add("field_acc_resident", b.slots * t.acc_sram <= MAX_ITER, lambda i: (
            f"field range: the epilogue's ALU iter_in {b.slots[i] * t.acc_sram[i]} (ACC slots x tile) > {MAX_ITER}"))

    def _preload_rules(self, b: VtaBatch, tab: MappingTable,
                       add: Callable[[str, np.ndarray, Callable[[int], str]], None]) -> None:
        """The rules of `uop_preload`: every kernel of the program fits the micro-op buffer at once
        (with edge tiles they do already: `edge_uop_cache`), flat resets on full tiles only."""
        edge = tab.edges
        add("uop_preload_fit", *_ok_msg(shared.uop_preload_fit(tab, self.hw)))
        add("uop_flat_reset_edge", (b.pre != 2) | ~edge, lambda i: (
            "micro-op preload: flat reset kernels (uop_preload=2) are built for full tiles only; this schedule has "
            "edge tiles (a tile size that does not divide)"))

    def table(self, b: VtaBatch) -> MappingTable:
        """The shared rules' table (`mapping.table`) of the configs of `b`: the fields of the
        mappings the producer builds from them (`families.vta_mapping`)."""
        t = b.t
        shareable, once = self._inp_shared(b)
        spatial = np.isin(np.array(PAIR_AXES), ("b", "h", "w"))
        # resident across pairs: loaded outside the reduction loop, so not at a loop moved inside it
        ins = (b.ins == 1) & ~(b.inner & spatial[None, :]).any(axis=1)
        ws = (b.ws == 1) & ~b.inner[:, PAIR_AXES.index("co")]
        return MappingTable(n_threads=b.nt, acc_sram=t.acc_sram, inp_sram=t.inp_sram, wgt_sram=t.wgt_sram,
                            inp_shared=shareable & once, n_inner=b.slots, inp_stationary=ins, wgt_stationary=ws,
                            edges=edge_bits(t) != 0, uop_preload=b.pre > 0, tile_b=t.tile_b,
                            reset_uops=t.reset["n_uops"], gemm_uops=t.gemm["n_uops"],
                            n_lift=b.lift_loop[..., 0].prod(axis=1),
                            epilogue_uops=np.full(t.n, len(templates.clip_epilogue(0)), dtype=np.int64))

    def _inp_shared(self, b: VtaBatch) -> tuple[np.ndarray, np.ndarray]:
        """(shareable, loaded once): the INP tile never changes and the threads split co, so one
        tile can serve them all; and it is input-stationary, so loaded once per thread
        (order_canonical keeps order 0): then it is shared (`Mapping.inp_shared`)."""
        shareable = ((b.vt == VTHREADS.index("co")) & (b.t.ci_steps == 1) & (b.extent["b"] == 1)
                     & (b.extent["h"] == 1) & (b.extent["w"] == 1) & (self.template != templates.GROUP_TEMPLATE))
        return shareable, b.ins == 1

    @staticmethod
    def _loads_per_co(b: VtaBatch) -> np.ndarray:
        """Iterations of the co loop and the loops outside it: the loads of a stationary weight
        tile per thread."""
        pos = _POS[b.order]
        co = pos[:, PAIR_AXES.index("co")]
        n = np.ones_like(co)
        for k, a in enumerate(PAIR_AXES):
            n = n * np.where(pos[:, k] <= co, b.extent[a], 1)
        return n

    @staticmethod
    def _loads_per_inp(b: VtaBatch) -> np.ndarray:
        """Iterations of the innermost spatial loop of extent > 1 and the loops outside it: the
        loads of a stationary input tile per thread."""
        spatial = np.stack([np.where(b.extent[a] > 1, b.pos[:, PAIR_AXES.index(a)], -1) for a in ("b", "h", "w")],
                           axis=1).max(axis=1)
        n = np.ones_like(spatial)
        for k, a in enumerate(PAIR_AXES):
            n = n * np.where(b.pos[:, k] <= spatial, b.extent[a], 1)
        return n

    def valid_indices(self) -> np.ndarray:
        """Sorted valid indices, in three passes: (A) the rules that depend neither on the kernel
        knobs (`KERNEL_KNOBS`, `KERNEL_RULES`) nor on the loop order and residency (`ORDER_RULES`)
        over the tile sizes x threads with those knobs at 0 (1/64,512 of the space); (B) the rules
        that ignore order and residency over the survivors x the kernel-knob values their GEMM loops
        allow (`sample_support`: a fold of live loops, a lift `uop_lift_live` and `uop_lift_edge`
        allow, pad_skip where it applies; ~1/13 of every fold and lift), their geometry taken from
        A's batch; (C) every rule over B's survivors x all orders x `NESTS` (the residency
        combinations the other rules leave), the geometry and kernels taken from B's batch."""
        if self._valid is None:
            names = self.knob_names
            free = [names.index(k) for k in ("order", "wgt_stationary", "inp_stationary", "acc_resident")]
            kern = [names.index(k) for k in KERNEL_KNOBS]
            grid = np.array([(o, *nest) for o in range(self.dims[free[0]]) for nest in NESTS], dtype=np.int64)
            pos_a, geo, _f, _l, _p = self.sample_support()  # pass A
            rows_b, kvals = self.support_kernels()
            survivors = []
            chunk = 1 << 15  # configs per batch: memory stays ~0.5 GB
            for start in range(0, len(rows_b), chunk):
                rows = rows_b[start:start + chunk]
                pos_b = pos_a[rows]
                pos_b[:, kern] = kvals[start:start + chunk]
                b = self.batch(self.index_of(pos_b), take(geo, rows))
                ok = np.ones(len(pos_b), dtype=bool)
                for rule in self.rules(b, edges=False):
                    if rule.name not in ORDER_RULES:
                        ok &= rule.ok
                for rule in edge_rules.rules(b, ok):  # the edge tiles' kernels, of the survivors only
                    ok &= rule.ok
                keep = np.flatnonzero(ok)
                # pass C on these survivors x every order and residency: their geometry is taken
                # from this batch, not rebuilt; the edge rules ignore order and residency
                for part in range(0, len(keep), max(1, chunk // len(grid))):
                    kp = keep[part:part + max(1, chunk // len(grid))]
                    full = np.repeat(pos_b[kp], len(grid), axis=0)
                    for col, j in enumerate(free):
                        full[:, j] = np.tile(grid[:, col], len(kp))
                    bf = take(b, np.repeat(kp, len(grid)), b.t.n)
                    bf.set_nest(*(full[:, j] for j in free))
                    ok2 = np.ones(len(full), dtype=bool)
                    for rule in self.rules(bf, edges=False):
                        ok2 &= rule.ok
                    survivors.append(self.index_of(full[ok2]))
            idx = np.sort(np.concatenate(survivors)) if survivors else np.zeros(0, dtype=np.int64)
            self._valid = idx
            self._valid.setflags(write=False)
        return self._valid

    def valid_mask(self, indices: np.ndarray | None = None) -> np.ndarray:
        idx = np.arange(self.size, dtype=np.int64) if indices is None else np.asarray(indices, dtype=np.int64)
        return self._mask(idx)

    def _mask(self, idx: np.ndarray, edges: bool = True) -> np.ndarray:
        mask = np.ones(idx.shape[0], dtype=bool)
        chunk = 1 << 15  # bounded memory: a batch holds a few KB per config
        for start in range(0, idx.shape[0], chunk):
            part = mask[start:start + chunk]
            for rule in self.rules(self.batch(idx[start:start + chunk]), edges):
                part &= rule.ok
        return mask

    def violations(self, config: Config | dict | list | int) -> list[tuple[str, str]]:
        """(rule name, message) of every rule `config` breaks."""
        cfg = self.as_config(config)
        return [(r.name, r.message(0)) for r in self.rules(self.batch(np.array([cfg.index]))) if not r.ok[0]]

    def why_invalid(self, config: Config | dict | list | int) -> str | None:
        """'<rule>: <message>' of the first rule `config` breaks, or None if it is valid."""
        cfg = self.as_config(config)
        if self._valid is not None and self._valid_row(cfg.index) is not None:
            return None
        bad = self.violations(cfg)
        return f"{bad[0][0]}: {bad[0][1]}" if bad else None

    # -- the template's configs -------------------------------------------------------------------
    def from_template(self, knobs: Config | dict[str, KnobValue]) -> Config:
        """The point of this space whose mapping is the AutoTVM template's for `knobs` (same
        tiles, order 0, WGT loaded every step, the template's thread axis)."""
        k = dict(getattr(knobs, "knobs", knobs))
        ont, hnt = int(k.get("oc_nthread", 1)), int(k.get("h_nthread", 1))
        if ont * hnt > N_THREADS:
            raise ConfigError(f"oc_nthread={ont} x h_nthread={hnt}: the template allows at most {N_THREADS} threads")
        vt = VTHREADS.index("co") if ont > 1 else VTHREADS.index("h") if hnt > 1 else 0
        return self.from_knobs({**{n: k[n] for n in TILE_KNOBS if n in self.knob_names},
                                "order": 0, "wgt_stationary": 0, "vthread": vt, "uop_fold": 0,
                                "inp_stationary": 0, "acc_resident": 0, "pad_skip": 0, "n_threads": THREAD_COUNTS[0],
                                "uop_lift": 0, "uop_preload": 0, "early_epilogue": 0})

    # -- features ---------------------------------------------------------------------------------
    def features_batch(self, indices: Sequence[int] | np.ndarray) -> np.ndarray:
        """(n, N_FEATURES) float32: the template features of the tiles (`schedule.features`)
        and `EXTRA_FEATURE_NAMES`."""
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        b = self.batch(idx)
        t, hw = b.t, self.hw
        pos = _POS[b.order] / (len(PAIR_AXES) - 1)
        log2_lift = np.log2(b.lift_loop[..., 0]).sum(axis=1)
        vt = np.stack([b.vt == VTHREADS.index(a) for a in ("h", "co", "w", "b")], axis=1)
        per_step = t.ci_steps * t.n_tiles // b.slots  # (pair, thread, reduction step) triples
        wgt_loads = np.where(b.ws == 1, self._loads_per_co(b) * t.nthreads, per_step * b.inner_loads(("co",)))
        inp_loads = np.where(b.ins == 1, self._loads_per_inp(b) * t.nthreads, per_step * b.inner_loads(("b", "h", "w")))
        shareable, once = self._inp_shared(b)
        inp_loads = np.where(shareable & once, 1, inp_loads)  # one tile for every thread (`Mapping.inp_shared`)
        inp_loads = inp_loads * np.where(b.split, t.tile_b * t.tile_ci, 1)
        extra = np.concatenate([pos, b.ws[:, None], vt,
                                np.log2(np.maximum(wgt_loads * t.wgt_sram * hw.wgt_elem_bytes, 1))[:, None],
                                np.log2(np.maximum(inp_loads, 1))[:, None], (b.fold > 0)[:, None],
                                *edge_rules.features(t), b.ins[:, None], np.log2(b.slots)[:, None],
                                b.ps[:, None], np.log2(b.nt)[:, None], log2_lift[:, None]], axis=1)
        base = config_features(t)
        for name in ("log2_gemm_insns", "log2_compute_per_load"):  # per step: every lifted instruction
            base[:, CONFIG_FEATURE_NAMES.index(name)] += log2_lift.astype(np.float32)
        return np.concatenate([base, extra.astype(np.float32)], axis=1).astype(np.float32)

    # -- valid configs sampled without enumerating them (the learned searches: `tune.view.SpaceView`) --
    def sample_support(self) -> tuple[np.ndarray, MappingBatch, np.ndarray, np.ndarray, np.ndarray]:
        """The configs `sample_valid` draws from: a superset of the valid ones, built without
        enumerating them (pass A of `valid_indices`, ~1/64,512 of the space, then one bool per
        geometry and kernel-knob value). The geometries (tile sizes x threads, the other knobs at 0)
        that pass every rule free of the kernel knobs, order and residency; for each, the folds
        whose two GEMM loops are live (a lift only makes loops extent 1), the lifts `uop_lift_live`
        and `uop_lift_edge` allow (they read the geometry's own loops), pad_skip where
        `pad_skip_tile` allows it (it needs uop_fold = uop_lift = 0: `pad_skip_tile`,
        `pad_skip_lift`); x every order x `NESTS`. Returns (geometry positions (g, knobs), their
        geometry (a `MappingBatch`, row-aligned, the template's kernels), fold ok (g, folds), lift
        ok (g, lifts), pad_skip ok (g,)); computed once."""
        if not hasattr(self, "_support"):
            names = self.knob_names
            zero = [names.index(k) for k in ("order", "wgt_stationary", "inp_stationary", "acc_resident",
                                             *KERNEL_KNOBS)]
            geo_dims = [1 if j in zero else d for j, d in enumerate(self.dims)]
            n_geo = int(np.prod(geo_dims, dtype=np.int64))
            keep_pos = []
            for start in range(0, n_geo, 1 << 15):
                pos = np.stack(np.unravel_index(np.arange(start, min(start + (1 << 15), n_geo)), geo_dims[::-1])[::-1],
                               axis=1)
                ba = self.batch(self.index_of(pos))
                ok = np.ones(len(pos), dtype=bool)
                for rule in self.rules(ba, edges=False):
                    if rule.name not in ORDER_RULES and rule.name not in KERNEL_RULES:
                        ok &= rule.ok
                keep_pos.append(pos[ok])
            pos = np.concatenate(keep_pos) if keep_pos else np.zeros((0, len(self.dims)), dtype=np.int64)
            geo = self.batch(self.index_of(pos)).t  # the template's kernels (kernel knobs at 0)
            n_fold, n_lift = self.dims[names.index("uop_fold")], self.dims[names.index("uop_lift")]
            transpose = self.template == templates.TRANSPOSE_TEMPLATE
            live = geo.gemm["loops"][..., 0] > 1  # (g, GEMM loops) of the unlifted kernel
            pairs = np.array([(0, 1), *FOLD_PAIRS], dtype=np.int64)[:n_fold]
            fold_ok = live[:, pairs[:, 0]] & live[:, pairs[:, 1]]
            fold_ok[:, 0] = True
            if transpose:
                fold_ok[:, 1:] = False
            lift_ok = np.zeros((len(pos), n_lift), dtype=bool)
            ps_ok = np.zeros(len(pos), dtype=bool)
            if len(pos):
                for value in range(n_lift):
                    p = pos.copy()
                    p[:, names.index("uop_lift")] = value
                    b = self.batch(self.index_of(p), take(geo, np.arange(len(pos))))
                    rules = {r.name: r.ok for r in self.rules(b, edges=False)}
                    lift_ok[:, value] = rules["uop_lift_live"] & rules["uop_lift_edge"]
                p = pos.copy()
                p[:, names.index("pad_skip")] = 1
                b = self.batch(self.index_of(p), take(geo, np.arange(len(pos))))
                ps_ok = {r.name: r.ok for r in self.rules(b, edges=False)}["pad_skip_tile"].copy()
            self._support = (pos, geo, fold_ok, lift_ok, ps_ok)
            self._sampled = [0, 0]  # draws from the support, valid ones among them (`valid_estimate`)
        pos, geo, fold_ok, lift_ok, ps_ok = self._support
        return pos, geo, fold_ok, lift_ok, ps_ok

    def support_size(self) -> int:
        """Configs in `sample_support` (every order and residency of `NESTS` counted)."""
        _pos, _geo, fold_ok, lift_ok, ps_ok = self.sample_support()
        per_geo = fold_ok.sum(axis=1) * lift_ok.sum(axis=1) + ps_ok
        return int(per_geo.sum()) * len(ORDERS) * len(NESTS)

    def sample_valid(self, n: int, rng: np.random.Generator, exclude: object = (), *,
                     max_draws: int = 1 << 22, nest: int | None = None) -> np.ndarray:
        """Up to `n` distinct valid indices not in `exclude`, uniformly at random over the valid
        configs, without enumerating them: configs are drawn uniformly from `sample_support` (a
        superset of the valid ones) and kept when every rule holds (the mask's own rules, so a
        kept config is exactly valid, and every valid config is as likely). Gives up after
        `max_draws` draws (a space with almost no valid configs). `nest`: uniformly over the valid
        configs of residency `NESTS[nest]` only (`sample_strata`)."""
        pos, geo, fold_ok, lift_ok, ps_ok = self.sample_support()
        ex = exclude if isinstance(exclude, (set, dict, frozenset)) else set(exclude)  # type: ignore[arg-type]
        out: list[int] = []
        if n <= 0 or not len(pos):
            return np.zeros(0, dtype=np.int64)
        names = self.knob_names
        n_f, n_l = fold_ok.sum(axis=1), lift_ok.sum(axis=1)
        weight = (n_f * n_l + ps_ok).astype(np.float64)  # kernel-knob values of each geometry
        if nest is not None and (NESTS[nest][0] or NESTS[nest][1]):  # a stationary tile holds the whole reduction
            weight = np.where(geo.ci_steps == 1, weight, 0.0)
        if weight.sum() == 0:
            return np.zeros(0, dtype=np.int64)
        cum = np.cumsum(weight)
        folds = np.argsort(~fold_ok, axis=1, kind="stable")  # row g: its allowed folds first
        lifts = np.argsort(~lift_ok, axis=1, kind="stable")
        free = [names.index(k) for k in ("order", "wgt_stationary", "inp_stationary", "acc_resident")]
        grid = np.array([(o, *r) for o in range(len(ORDERS)) for r in (NESTS if nest is None else NESTS[nest:nest + 1])],
                        dtype=np.int64)
        col = {k: names.index(k) for k in KERNEL_KNOBS}
        seen: set[int] = set()
        draws, chunk = 0, 2048
        while len(out) < n and draws < max_draws:
            g = np.minimum(np.searchsorted(cum, rng.random(chunk) * cum[-1], side="right"), len(pos) - 1)
            u = rng.integers(0, weight[g].astype(np.int64))
            ps = u >= n_f[g] * n_l[g]
            p = pos[g].copy()
            p[:, col["uop_fold"]] = np.where(ps, 0, folds[g, np.minimum(u // n_l[g], n_f[g] - 1)])
            p[:, col["uop_lift"]] = np.where(ps, 0, lifts[g, u % n_l[g]])
            p[:, col["pad_skip"]] = ps
            p[:, free] = grid[rng.integers(0, len(grid), size=chunk)]
            idx = self.index_of(p)
            b = self.batch(idx, take(geo, g))
            ok = np.ones(chunk, dtype=bool)
            for rule in self.rules(b, edges=False):  # every rule but the edge tiles', on the cheap geometry
                ok &= rule.ok
            cand = np.flatnonzero(ok)
            if cand.size:  # the edge tiles' rules: the mask itself (exact)
                cand = cand[self._mask(idx[cand])]
            draws += chunk
            if nest is None:  # `valid_estimate`'s acceptance counts uniform draws only
                self._sampled[0] += chunk
                self._sampled[1] += int(cand.size)
            for i in idx[cand].tolist():
                if i not in ex and i not in seen:
                    seen.add(i)
                    out.append(i)
                    if len(out) >= n:
                        break
        return np.asarray(out, dtype=np.int64)

    def sample_strata(self, n: int, rng: np.random.Generator, exclude: object = (), *,
                      max_draws: int = 1 << 18) -> np.ndarray:
        """Up to `n` distinct valid indices not in `exclude`, an equal share from each residency
        of `NESTS` (uniform within it; what a residency cannot give, uniform draws fill): a search's
        starting points see every loop-nest structure, as Ansor samples its sketches evenly,
        instead of in proportion to their valid configs (on ResNet-18's 7x7 conv 285 of 495,622
        valid schedules are input-stationary, 6 of them the shared-input streams that win it)."""
        ex = set(exclude) if not isinstance(exclude, (set, dict, frozenset)) else set(exclude)  # type: ignore[arg-type]
        out: list[int] = []
        for k in range(len(NESTS)):
            share = (n - len(out)) // (len(NESTS) - k)
            got = self.sample_valid(share, rng, ex, max_draws=max_draws, nest=k).tolist() if share > 0 else []
            ex.update(got)
            out += got
        if len(out) < n:
            out += self.sample_valid(n - len(out), rng, ex).tolist()
        return np.asarray(out, dtype=np.int64)

    def valid_estimate(self, draws: int = 1 << 16) -> float:
        """Valid configs, estimated as `support_size` x the fraction of `draws` uniform draws from
        the support that are valid (seeded: the same estimate every time; at ~1% acceptance,
        +-4% one sigma); computed once."""
        if not hasattr(self, "_valid_est"):
            size = self.support_size()
            before = list(self._sampled)
            if size:
                self.sample_valid(1 << 62, np.random.default_rng(0), max_draws=draws)
            drawn, valid = self._sampled[0] - before[0], self._sampled[1] - before[1]
            self._valid_est = size * valid / drawn if drawn else 0.0
        return self._valid_est

    def valid_mask_staged(self, indices: Sequence[int] | np.ndarray, *, exact: bool = True) -> np.ndarray:
        """`valid_mask(indices)`, with the edge tiles' rules (most of the mask's time where tile
        sizes do not divide: each config's edge variants are built) evaluated only on the configs
        every other rule accepts (the mask itself on those, so the result is the mask's).
        `exact=False`: every rule but the edge tiles' (a superset of the valid configs, for a
        search's intermediate steps; what it proposes is checked exactly)."""
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        ok = self._mask(idx, edges=False)
        if not exact:
            return ok
        sel = np.flatnonzero(ok)
        if sel.size:
            ok[sel] = self._mask(idx[sel])
        return ok

    def support_kernels(self) -> tuple[np.ndarray, np.ndarray]:
        """The kernel-knob values of `sample_support`, listed: (rows into its geometries (m,),
        values (m, len(KERNEL_KNOBS))) — every allowed fold x allowed lift with pad_skip 0, then
        pad_skip 1 with neither where it applies (pass B of `valid_indices`)."""
        _pos, _geo, fold_ok, lift_ok, ps_ok = self.sample_support()
        g, f, lf = np.nonzero(fold_ok[:, :, None] & lift_ok[:, None, :])
        p = np.flatnonzero(ps_ok)
        col = {k: i for i, k in enumerate(KERNEL_KNOBS)}
        vals = np.zeros((g.size + p.size, len(KERNEL_KNOBS)), dtype=np.int64)
        vals[:g.size, col["uop_fold"]], vals[:g.size, col["uop_lift"]] = f, lf
        vals[g.size:, col["pad_skip"]] = 1
        return np.concatenate([g, p]).astype(np.int64), vals
