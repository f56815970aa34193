"""Edge tiles in the `vta` family (`mapping.edges`, docs/schedules.md): the tile-size candidates
that do not divide, the validity rules of the edge tiles, their features, and one config's 16
tile variants for the producer.

Candidates: for each tile count k of an axis of extent n one size f = ceil(n / k) (any other size
with k tiles only wastes more of the last one), so an axis has about 2·sqrt(n) sizes; the
dividing ones keep their positions (the template's splits come first, `[n // f, f]`), the others
follow as `[ceil(n / f), f]`, ascending.

Rules (the full tile's SRAM, DMA and micro-op rules bound the edge tiles' footprint and fields;
what an edge tile adds is checked here, on each of its variants):
- `edge_uop_cache`: the kernels of every variant a thread runs (resets and GEMMs per batch block,
  the epilogue's ALU kernels) fit the micro-op cache at once: each is loaded once, at its first
  use (`lower.uops`), so the ring never evicts and pairs stay identical;
- `edge_uop_hazard`: no variant's kernel writes an ACC row one of the previous two micro-ops wrote
  (a variant whose fold would, takes the first fold without that hazard: `edge_fold`);
- `edge_dma_store`: every variant's STORE is one 2-D pattern (an INP load that is not is split
  into one LOAD per channel block, as for the full tile);
- `edge_field_iter`: every variant's GEMM/reset loop counts fit the 14-bit fields.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from codesign.mapping.batch import FOLD_PAIRS, MAX_ITER, MappingBatch
from codesign.mapping.edges import CI_BIT, EDGE_AXES, N_VARIANTS, edge_bits, edge_sizes, variant_sizes
from codesign.schedule.knobs import Knob
from codesign.schedule.templates import template_of
from codesign.schedule.validity import Rule
from codesign.workloads.layers import Layer


class VtaBatch(Protocol):
    """What the rules read of `vta_space.VtaBatch` (that module imports this one)."""

    t: MappingBatch
    vt: np.ndarray
    extent: dict[str, np.ndarray]
    edge_uops: np.ndarray  # set by `rules`: micro-ops of the kernels of one ACC slot per thread

    def refold(self, t: MappingBatch, rows: np.ndarray) -> MappingBatch: ...

EDGE_KNOBS = {"tile_h": "h", "tile_w": "w", "tile_ci": "ci", "tile_co": "co"}
#: ALU kernels of the epilogue per thread: the requantization's SHR, MIN, MAX, one micro-op each
#: (`schedule.templates.clip_epilogue`; a fused epilogue's kernels are checked when it is built,
#: `evaluate.fused.fused_mapping`).
EPILOGUE_KERNELS = 3
THREAD_AXES = (None, "h", "co", "w", "b")  # vta_space.VTHREADS (the thread axis of knob `vthread`)


def with_edges(knob: Knob, layer: Layer) -> Knob:
    """`knob` with the non-dividing sizes of its axis appended (module docstring); unchanged for
    axes without edge tiles (batch; transposed convs; co of grouped convs)."""
    axis = EDGE_KNOBS.get(knob.name)
    if axis not in template_of(layer).edge_axes:
        return knob
    n = max(f for _, f in knob.candidates)
    extra = tuple((-(-n // f), f) for f in sorted({-(-n // k) for k in range(1, n + 1)}) if n % f)
    return Knob(knob.name, knob.kind, tuple(knob.candidates) + extra)


def edge_fold(b: VtaBatch, vb: MappingBatch, rows: np.ndarray) -> MappingBatch:
    """`vb` (edge tile variants of the configs `rows` of `b`) with the configs' micro-op folds; a
    variant whose GEMM kernel would then write one ACC row twice in a row (an edge tile of one
    output row and channel block leaves only the dst-0 loops dj, di in the kernel) takes the first
    fold of `FOLD_PAIRS` that has no such hazard over its whole GEMM stream (its own kernel)."""
    b.refold(vb, rows)
    sel = np.flatnonzero(vb.gemm["hazard"])
    if sel.size:  # every fold of every hazardous variant in one batch; each takes its first without hazard
        pairs = np.array(FOLD_PAIRS, dtype=np.int64)
        n_p = len(FOLD_PAIRS)
        fp = MappingBatch.fold_pair(np.repeat(vb.gemm["loops"][sel], n_p, axis=0), np.tile(pairs[:, 0], sel.size),
                                    np.tile(pairs[:, 1], sel.size))
        good = ~fp["hazard"].reshape(sel.size, n_p)
        found = good.any(axis=1)
        pick = (np.arange(sel.size) * n_p + good.argmax(axis=1))[found]
        ok = sel[found]
        for k in vb.gemm:
            if k != "loops":
                vb.gemm[k][ok] = fp[k][pick]
    return vb


def _occurs(b: VtaBatch, rows: np.ndarray, bits: np.ndarray, last: bool, v: int) -> np.ndarray:
    """(len(rows),) bool: the last thread (`last`; the only one without threads) or any other
    runs a tile of variant `v` (its edge bits within `bits`). A threaded axis' edge tile is the
    last thread's last tile: the others never run it, and the last runs only it when each thread
    has one tile on that axis."""
    ok = (bits & v) == v
    vt = b.vt[rows]
    for k, a in enumerate(EDGE_AXES[:3]):
        on, edged = v >> k & 1, (bits >> k & 1) == 1
        threaded = vt == THREAD_AXES.index(a)
        if not last:
            ok &= ~(threaded & (on == 1))
        else:
            ok &= ~(threaded & edged & (on == 0) & (b.extent[a][rows] == 1))
    return ok


def rules(b: VtaBatch, need: np.ndarray | None = None) -> list[Rule]:
    """The edge rules (module docstring) over the configs of `b` (only the rows `need` are checked;
    the others pass)."""
    t, n, hw = b.t, b.t.n, b.t.hw
    bits = edge_bits(t)
    sel = np.flatnonzero((bits > 0) if need is None else (bits > 0) & need)
    total = np.zeros(n, dtype=np.int64)
    hazard = np.zeros(n, dtype=bool)
    store_bad = np.zeros(n, dtype=bool)
    iters = np.zeros(n, dtype=np.int64)
    if sel.size:
        sb = bits[sel]
        gemm_n = np.zeros((sel.size, N_VARIANTS), dtype=np.int64)
        reset_n = np.zeros((sel.size, N_VARIANTS), dtype=np.int64)
        gemm_n[:, 0], reset_n[:, 0] = t.gemm["n_uops"][sel], t.reset["n_uops"][sel]
        for v in range(1, N_VARIANTS):
            m = (sb & v) == v
            if not m.any():
                continue
            rows = sel[m]
            vb = edge_fold(b, MappingBatch(t.geo, hw, variant_sizes(t, v, rows)), rows)
            gemm_n[m, v], reset_n[m, v] = vb.gemm["n_uops"], vb.reset["n_uops"]
            hazard[rows] |= vb.gemm["hazard"] | vb.reset["hazard"]
            store_bad[rows] |= ~vb.store_pattern()["ok"]
            it = np.max(np.stack([vb.gemm["iter_out"], vb.gemm["iter_in"], vb.reset["iter_out"],
                                  vb.reset["iter_in"]]), axis=0)
            iters[rows] = np.maximum(iters[rows], it)
        g = t.tile_b[sel]
        acc = np.zeros(sel.size, dtype=np.int64)
        nt = t.nthreads[sel]
        acc += nt * EPILOGUE_KERNELS
        # threads 0..T-2 run the same variants (never a threaded axis' edge tile); thread T-1 its own
        for last, weight in ((False, nt - 1), (True, np.ones_like(nt))):
            for v in range(N_VARIANTS):
                occ = _occurs(b, sel, sb, last, v)
                # a reset runs at step 0 over the pair's tile: one kernel per h, w, co variant
                acc += np.where(occ, weight * g * (gemm_n[:, v] + (reset_n[:, v] if v & CI_BIT == 0 else 0)), 0)
        total[sel] = acc
    # the count for one ACC slot per thread; with C slots (acc_resident) at most C x this many
    # kernels run: `VtaSpace` rule nest_edge_uop_cache
    b.edge_uops = total
    depth = hw.uop_depth
    return [
        Rule("edge_uop_cache", total <= depth, lambda i: (
            f"micro-op cache: the kernels of the full and edge tiles need {total[i]} micro-ops together > "
            f"UOP depth {depth} (with edge tiles every kernel stays cached)")),
        Rule("edge_uop_hazard", ~hazard, lambda i: (
            "uop dst hazard: a GEMM or reset kernel of an edge tile writes the same ACC row as one of the "
            "previous two micro-ops")),
        Rule("edge_dma_store", ~store_bad, lambda i: (
            "2-D DMA pattern: the STORE of an edge tile does not reduce to 2-D")),
        Rule("edge_field_iter", iters <= MAX_ITER, lambda i: (
            f"field range: an edge tile's GEMM/reset loop count {iters[i]} > {MAX_ITER} (14-bit iter fields)")),
    ]


def features(t: MappingBatch) -> list[np.ndarray]:
    """(n, 1) columns: the fraction of output tiles that are edge tiles (h, w or co), and the
    output elements over tiles x full tile elements (1 when every size divides)."""
    e = edge_sizes(t)
    full_tiles = ((t.h_tiles - (e["h"] < t.tile_h)) * (t.w_tiles - (e["w"] < t.tile_w))
                  * (t.co_tiles - (e["co"] < t.tile_co)) * t.b_tiles)
    g = t.geo
    fill = (g.b * g.co * g.out_h * g.out_w) / (t.n_tiles * t.acc_sram)
    return [(1.0 - full_tiles / t.n_tiles)[:, None], np.broadcast_to(fill, (t.n,))[:, None]]


#: what an edge tile variant is determined by (`variant_keys`): its tile sizes, threads and the
#: config's micro-op fold, never the loop order, the residency or the other axes' sizes
VARIANT_KEY = ("tile_b", "oc_nthread", "h_nthread", "fold", "tile_h", "tile_w", "tile_co", "tile_ci")


def variant_keys(b: VtaBatch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct variants (`VARIANT_KEY` rows, (U, 8)) that the configs of `b` with edge tiles
    run, and for each one config row and variant that has it (for `variants_at`)."""
    t, g = b.t, b.t.geo
    bits = edge_bits(t)
    edged = np.flatnonzero(bits > 0)
    if edged.size == 0:
        return np.zeros((0, len(VARIANT_KEY)), dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    v_all = np.arange(N_VARIANTS, dtype=np.int64)
    # (variant, config) pairs, variant-major: an edge bit of an axis without edges never runs
    vs, at = np.nonzero((bits[None, edged] & v_all[:, None]) == v_all[:, None])
    rows = edged[at]
    cols = [np.broadcast_to(getattr(t, k), (t.n,))[rows] for k in ("tile_b", "oc_nthread", "h_nthread")]
    cols.append(b.fold[rows])
    for k, (a, n, tiles) in enumerate((("h", g.out_h, "h_tiles"), ("w", g.out_w, "w_tiles"), ("co", g.co, "co_tiles"),
                                       ("ci", g.ci, "ci_steps"))):
        f = np.broadcast_to(getattr(t, f"tile_{a}"), (t.n,))[rows]
        count = np.broadcast_to(getattr(t, tiles), (t.n,))[rows]
        cols.append(np.where(vs >> k & 1 == 1, n - (count - 1) * f, f))  # as variant_sizes
    keys = np.stack([*cols, rows, vs], axis=1).astype(np.int64)
    # one config per variant: the first (smallest variant, then config row) of each key, keys sorted
    keys = keys[np.unique(keys[:, :-2], axis=0, return_index=True)[1]]
    return keys[:, :-2], keys[:, -2], keys[:, -1]


def variants_at(b: VtaBatch, rows: np.ndarray, variants: np.ndarray) -> tuple[MappingBatch, np.ndarray]:
    """Variant `variants[i]` of config row `rows[i]` of `b`, as row i of a MappingBatch (with the
    config's fold), and whether its INP tile is loaded one block per LOAD (as `VtaBatch.split`)."""
    t, g = b.t, b.t.geo
    rows, v = np.asarray(rows, dtype=np.int64), np.asarray(variants, dtype=np.int64)
    sizes = {k: np.broadcast_to(getattr(t, k), (t.n,))[rows] for k in ("tile_b", "oc_nthread", "h_nthread")}
    for k, (a, n, tiles) in enumerate((("h", g.out_h, "h_tiles"), ("w", g.out_w, "w_tiles"), ("co", g.co, "co_tiles"),
                                       ("ci", g.ci, "ci_steps"))):
        f = np.broadcast_to(getattr(t, f"tile_{a}"), (t.n,))[rows]
        count = np.broadcast_to(getattr(t, tiles), (t.n,))[rows]
        sizes[f"tile_{a}"] = np.where(v >> k & 1 == 1, n - (count - 1) * f, f)  # as variant_sizes
    vb = edge_fold(b, MappingBatch(g, t.hw, sizes), rows)
    vb.patterns()  # the three in one pass (the producer reads every variant's row)
    split = (t.geo.pad > 0) & (vb.tile_b * vb.tile_ci > 1) | ~vb.inp_pattern()["ok"]
    return vb, split


def variant_batch(b: VtaBatch, r: int, variants: np.ndarray | None = None) -> tuple[MappingBatch, np.ndarray]:
    """Config row `r` of `b`: its 16 tile variants (or only `variants`) as the rows of a
    MappingBatch (its fold), and whether each variant's INP tile is loaded one block per LOAD (as
    `VtaBatch.split`)."""
    v = np.arange(N_VARIANTS, dtype=np.int64) if variants is None else np.asarray(variants, dtype=np.int64)
    return variants_at(b, np.full(v.size, r), v)


__all__ = ["EDGE_KNOBS", "VARIANT_KEY", "features", "rules", "variant_batch", "variant_keys", "variants_at",
           "with_edges"]
