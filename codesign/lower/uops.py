"""Micro-op kernels of a mapping and where the runtime's ring cache puts them (docs/vta.md §5.4).

One kernel per runtime call site, per virtual thread t (thread slices differ only by their SRAM
offsets, docs/vta.md §7.3 cthread): G resets and G GEMMs (one per batch block), one per epilogue
step (an immediate ALU op or the residual GEMM: 1 uop over the tile; the bias ADD: one uop per
output channel block of the tile, docs/vta.md §7.8). Kernels are placed in the micro-op SRAM by the runtime's ring cache (`UopQueue::Push`):
loaded by one LOAD UOP the first time they are used, reloaded only after being evicted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from numba import njit

from codesign.errors import InvalidSchedule
from codesign.lower.access import AXIS, tables
from codesign.lower.emit import pair_order, pair_uses
from codesign.mapping.batch import Kernel
from codesign.mapping.edges import CI_BIT, PAIR_BITS, Edges
from codesign.mapping.lazy import lazy
from codesign.mapping.mapping import Mapping, fused_slots


@njit(cache=True)
def _ring_kernel(sizes, uses, n_pairs, depth):  # pragma: no cover - compiled
    """The runtime's uop ring over n_pairs repetitions of the kernel use sequence `uses`, until
    the ring state at a pair boundary repeats. Returns (load, bgn, m, start): rows 0..m-1 of
    (LOAD UOP before the use?, kernel SRAM start); start = first pair of the period or -1."""
    n_k = sizes.shape[0]
    U = uses.shape[0]
    begin = np.zeros(n_k, np.int64)
    end = np.zeros(n_k, np.int64)
    cache = np.empty(n_k + 1, np.int64)
    n_cache = 0
    sram_end = 0
    cache_idx = 0
    width = 3 + 3 * n_k
    seen = np.empty((n_pairs, width), np.int64)
    load = np.zeros((n_pairs, U), np.bool_)
    bgn = np.zeros((n_pairs, U), np.int64)
    tmp = np.empty(n_k + 1, np.int64)
    for p in range(n_pairs):
        key = seen[p]
        key[:] = -1
        key[0], key[1], key[2] = sram_end, cache_idx, n_cache
        key[3:3 + n_k] = begin
        key[3 + n_k:3 + 2 * n_k] = end
        key[3 + 2 * n_k:3 + 2 * n_k + n_cache] = cache[:n_cache]
        for q in range(p):
            same = True
            for c in range(width):
                if seen[q, c] != key[c]:
                    same = False
                    break
            if same:
                return load, bgn, p, q
        for ui in range(U):
            kid = uses[ui]
            if end[kid] == begin[kid]:  # not cached: push (UopQueue::Push)
                n = sizes[kid]
                if sram_end + n > depth:  # wrap: evict from the start
                    cache_idx = 0
                    uop_begin = 0
                    sram_end = n
                else:
                    uop_begin = sram_end
                    sram_end += n
                evict_begin = cache_idx
                ci = cache_idx
                while ci < n_cache and begin[cache[ci]] < sram_end:
                    begin[cache[ci]] = 0
                    end[cache[ci]] = 0
                    ci += 1
                begin[kid] = uop_begin
                end[kid] = sram_end
                # cache = cache[:evict_begin] + [kid] + cache[ci:]
                rest = n_cache - ci
                tmp[:rest] = cache[ci:n_cache]
                cache[evict_begin] = kid
                cache[evict_begin + 1:evict_begin + 1 + rest] = tmp[:rest]
                n_cache = evict_begin + 1 + rest
                cache_idx = evict_begin + 1
                load[p, ui] = True
            bgn[p, ui] = begin[kid]
    return load, bgn, n_pairs, -1


def ring_schedule(sizes: np.ndarray, uses: np.ndarray, n_pairs: int, depth: int) -> Ring:
    """Simulate the runtime's uop ring over the per-pair kernel use sequence `uses`: for each
    use whether a LOAD UOP precedes it and the kernel's SRAM start. The ring is deterministic,
    so once the state at a pair boundary repeats the rest is periodic (`Ring`)."""
    load, bgn, m, start = _ring_kernel(np.asarray(sizes, dtype=np.int64), np.asarray(uses, dtype=np.int64),
                                       int(n_pairs), int(depth))
    return Ring(load[:m], bgn[:m], None if start < 0 else int(start))


@dataclass(frozen=True)
class Ring:
    """The uop ring over the pairs: rows of (load before use?, kernel SRAM start) per kernel use
    for pairs 0..m-1; from pair m on, pair j repeats row `start + (j - m) % (m - start)`."""

    load: np.ndarray  # (m, uses) bool
    bgn: np.ndarray   # (m, uses) int64
    start: int | None  # None: every pair has its own row

    def row_of(self, pairs: np.ndarray) -> np.ndarray:
        m = self.load.shape[0]
        if self.start is None:
            return pairs
        return np.where(pairs < m, pairs, self.start + (pairs - m) % max(m - self.start, 1))

    def steady(self, n_pairs: int) -> bool:
        """No pair after the first reloads a kernel (the rows pairs >= 1 use load nothing; row
        0 is one of them only when the period starts at pair 0, and pair 0 always loads)."""
        return self._steady

    @lazy  # a ring is shared by the configs whose plans agree (`_ring_plan`)
    def _steady(self) -> bool:
        return self.start != 0 and not self.load[1:].any()


@lru_cache(maxsize=4096)  # keyed by threads, steps, ACC slots...: a space's configs need many
def use_order(T: int, K: int, G: int, E: int, R: int = 0, n_pre: int = -1, C: int = 1, L: int = 1,
              early: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(kernel of each compute instruction of a pair, in program order; the kernels in first-use
    order = the DRAM uop array). Kernel t * S + slot, S = GC + GCL + E': slots c * G + b the resets
    of ACC slot c (C slots: the tiles of the inner loops) and batch block b, G * C + (c * G + b) * L
    + i the GEMMs (L per batch block: the iterations i of the lifted loops, `Mapping.gemm_lift`),
    then the epilogue's E' = E kernels (a residual step: `R` chunk kernels in its place, after its
    first `n_pre` ops). The program order is the emitter's: the kernels its blocks use, block by
    block of `emit.pair_order` (`emit.pair_uses`; `early`: `Mapping.early_epilogue`)."""
    n_pre = E if n_pre < 0 else n_pre
    comp_kid, first = _use_order(T, K, G, E, R, n_pre, C, L, early)
    for arr in (comp_kid, first):
        arr.setflags(write=False)
    return comp_kid, first


@njit(cache=True)
def _use_order(T, K, G, E, R, n_pre, C, L, early):  # pragma: no cover - compiled
    """`use_order` in one compiled call (a miss costs a few us, not the ~40 us of NumPy calls)."""
    comp_kid = pair_uses(pair_order(T, K, C, R, early), G, G * L, C, n_pre, R, E - n_pre - (1 if R else 0))
    seen = np.zeros(comp_kid.max() + 1 if comp_kid.shape[0] else 1, np.bool_)
    first = np.empty(comp_kid.shape[0], np.int64)
    n = 0
    for k in comp_kid:  # first-use order
        if not seen[k]:
            seen[k] = True
            first[n] = k
            n += 1
    return comp_kid, first[:n].copy()


@dataclass(frozen=True)
class Uops:
    sizes: np.ndarray     # uops per kernel
    uses: np.ndarray      # kernel of each compute instruction of a pair, in program order
    ring: Ring
    dram_off: np.ndarray  # kernel -> offset in the DRAM uop array (first-load order)
    first: np.ndarray     # kernels in first-use order
    #: kernel of use slot s for tile variant v: kvar[s, v] (`mapping.edges`; one column without edges)
    kvar: np.ndarray = field(default_factory=lambda: _EMPTY_KVAR)
    #: with edge tiles: the pair of each kernel's first use (never reloaded), else empty
    first_pair: np.ndarray = field(default_factory=lambda: _EMPTY)
    #: with edge tiles: (thread, slot, variant) of every kernel
    origin: np.ndarray = field(default_factory=lambda: _EMPTY_ORIGIN)
    #: with edge tiles run through the ring: the pairs that first load some kernel, ascending
    #: (their own classes of identical pairs, `lower.lower_blocks`); else empty
    special: np.ndarray = field(default_factory=lambda: _EMPTY)
    #: micro-ops of every kernel in first-use order (the DRAM uop array; -1: not counted)
    n_uops: int = -1


# the defaults of `Uops` (read only: the plans' arrays are, so the compiled emitter sees one type)
_EMPTY, _EMPTY_KVAR, _EMPTY_ORIGIN = (np.zeros(shape, dtype=np.int64) for shape in (0, (0, 1), (0, 3)))
for _a in (_EMPTY, _EMPTY_KVAR, _EMPTY_ORIGIN):
    _a.setflags(write=False)


def _residual(m: Mapping) -> tuple[int, int]:
    """(load groups of the residual, epilogue ops before it): (0, E) without one."""
    for o, a in enumerate(m.epilogue):
        if a.src == "residual":
            return fused_slots(m).chunks, o
    return 0, len(m.epilogue)


def _epilogue_kernels(m: Mapping) -> tuple[int, int, tuple[int, ...]]:
    """(`_residual`, each thread's epilogue kernel sizes): one uop per kernel, the bias ADD one per
    output channel block."""
    E = len(m.epilogue)
    if not m.has_bias and not m.has_residual:  # the usual epilogue: immediate ALU ops alone
        return 0, E, (1,) * E
    R, n_pre = _residual(m)
    return R, n_pre, tuple([m.tile.co if a.src == "bias" else 1 for a in m.epilogue[:n_pre]]
                           + [1] * (E - n_pre - (1 if R else 0) + R))


def uop_plan(m: Mapping, depth: int) -> Uops:
    """Kernel sizes, uses and ring schedule of `m` on a uop buffer of `depth` (kernels fit it:
    validity rule `uop_capacity`). Every array of the plan is read only: full-tile plans are
    shared by the configs that agree on their few integers (`_ring_plan`, `_preload_plan`), and the
    plan is kept on the (frozen) mapping for the last depth (a config measured again: its mapping is
    cached, `producer.row_mapping`)."""
    got = m.__dict__.get("_uop_plan")
    if got is not None and got[0] == depth:
        return got[1]
    plan = _uop_plan(m, depth)
    m.__dict__["_uop_plan"] = (depth, plan)
    return plan


def _uop_plan(m: Mapping, depth: int) -> Uops:
    T, K, G, E, C = m.n_threads, m.n_steps, m.tile.b, len(m.epilogue), m.n_inner
    R, n_pre, epi = _epilogue_kernels(m)
    order = (T, K, G, E, R, n_pre, C, m.n_lift, m.early_epilogue)
    kernels = (m.reset.size, m.gemm.size, epi)
    if m.edges is not None:  # edge tiles lift no loop (validity rule uop_lift_edge)
        return _edge_plan(m, depth, kernel_sizes(kernels, order), order)
    if not m.uop_preload:
        return _ring_plan(kernels, order, m.n_pairs, depth)
    return _preload_plan(kernels, order, depth)


@lru_cache(maxsize=4096)
def kernel_sizes(kernels: tuple[int, int, tuple[int, ...]], order: tuple) -> np.ndarray:
    """Uops of each kernel (`use_order`'s numbering) from (reset size, GEMM size, each epilogue
    kernel's size) and `use_order`'s arguments `order` (read only, shared)."""
    reset, gemm, epi = kernels
    T, G, C, L = order[0], order[2], order[6], order[7]
    sizes = np.array(([reset] * G * C + [gemm] * G * C * L + list(epi)) * T, dtype=np.int64)
    sizes.setflags(write=False)
    return sizes


def _read_only(*arrays: np.ndarray) -> None:
    for a in arrays:
        a.setflags(write=False)


@lru_cache(maxsize=4096)
def _ring_plan(kernels: tuple, order: tuple, n_pairs: int, depth: int) -> Uops:
    """`uop_plan` of full tiles run through the ring: a function of the kernel sizes, the use order
    (`use_order`'s arguments), the pair count and the depth alone, so the configs of a space that
    agree on them (about half of a template space) share one plan (read only)."""
    sz = kernel_sizes(kernels, order)
    uses, first = use_order(*order)
    ring = ring_schedule(sz, uses, n_pairs, depth)
    dram_off, kvar = _first_offsets(sz, first)[0], np.arange(len(sz), dtype=np.int64)[:, None]
    _read_only(ring.load, ring.bgn, dram_off, kvar)
    return Uops(sz, uses, ring, dram_off, first, kvar)


@lru_cache(maxsize=4096)
def _preload_plan(kernels: tuple, order: tuple, depth: int) -> Uops:
    """`Mapping.uop_preload` on full tiles: every kernel at its offset in the DRAM array (first-use
    order) = its SRAM start, all loaded by the one LOAD UOP the emitter puts at the head of the
    program (`emit`; `first_pair` -1: no kernel is loaded at a use). Shared as `_ring_plan`."""
    uses, first = use_order(*order)
    sz = kernel_sizes(kernels, order)
    dram_off, total = _first_offsets(sz, first)
    if total > depth:
        raise InvalidSchedule(f"uop_preload_fit: micro-op preload: every kernel loaded at once needs {total} "
                              f"micro-ops > UOP depth {depth}")
    ring = Ring(np.zeros((1, len(uses)), dtype=bool), np.zeros((1, len(uses)), dtype=np.int64), None)
    kvar, first_pair = np.arange(len(sz), dtype=np.int64)[:, None], np.full(len(sz), -1, dtype=np.int64)
    _read_only(ring.load, ring.bgn, dram_off, kvar, first_pair)
    return Uops(sz, uses, ring, dram_off, first, kvar, first_pair, n_uops=int(total))


@njit(cache=True)
def _first_offsets(sizes, first):  # pragma: no cover - compiled
    """(each kernel's offset in the DRAM uop array: the kernels `first` back to back, 0 if unused;
    their micro-ops in all)."""
    dram_off = np.zeros(sizes.shape[0], np.int64)
    total = 0
    for k in first:
        dram_off[k] = total
        total += sizes[k]
    return dram_off, total


def preload_size(m: Mapping, u: Uops) -> int:
    """Micro-ops the head-of-program LOAD UOP brings (`Mapping.uop_preload`; 0: none)."""
    if not m.uop_preload:
        return 0
    return u.n_uops if u.n_uops >= 0 else int(u.sizes[u.first].sum())


def pair_variants(m: Mapping) -> np.ndarray:
    """(T, P, C) tile variant (h, w, co edge bits, `mapping.edges`) of every thread in every pair
    and sub-step c (the output tiles of the loops inside the reduction, `Mapping.inner_loops`)."""
    h, w, co = m.edges.last[:3] if m.edges is not None else (-1, -1, -1)
    return _pair_variants(*tables(m), h, w, co, m.n_threads, m.n_pairs, m.n_inner)


_H, _W, _CO = AXIS["h"], AXIS["w"], AXIS["co"]  # the axes of the edge bits 0, 1, 2 (compile-time constants)


@njit(cache=True)
def _axis_index(tab, n, ax):  # pragma: no cover - compiled
    """(n,) the tile index on axis `ax` of iterations 0..n-1 of the loops of `tab` (`access.loop_table`):
    the sum over the loops walking it."""
    out = np.zeros(n, np.int64)
    for lp in range(tab.shape[0]):
        if tab[lp, 2] == ax:
            extent, place, scale = tab[lp, 0], tab[lp, 1], tab[lp, 3]
            for i in range(n):
                out[i] += (i // place) % extent * scale
    return out


@njit(cache=True)
def _pair_variants(loops, threads, inner, h_last, w_last, co_last, T, P, C):  # pragma: no cover - compiled
    """`pair_variants` from the loop tables of the pair, thread and inner loops and the edge tile
    index on h, w, co (-1: none): a tile's index on an axis is its thread's + its pair's + its
    sub-step's (`_axis_index`, each once)."""
    out = np.zeros((T, P, C), np.int64)
    lasts = (h_last, w_last, co_last)
    axes = (_H, _W, _CO)
    for bit in range(3):
        last, ax = lasts[bit], axes[bit]
        if last < 0:
            continue
        it, ip, ic = _axis_index(threads, T, ax), _axis_index(loops, P, ax), _axis_index(inner, C, ax)
        for t in range(T):
            for p in range(P):
                rest = last - it[t] - ip[p]  # the sub-steps' index that reaches the edge tile
                for c in range(C):
                    if ic[c] == rest:
                        out[t, p, c] |= 1 << bit
    return out


def _edge_plan(m: Mapping, depth: int, sizes: np.ndarray, order: tuple) -> Uops:
    """Edge tiles (`mapping.edges`): each thread's reset, GEMM and bias-ADD kernels exist once per
    ACC slot and tile variant it runs there; every kernel is loaded once, at its first use, and
    stays in the micro-op cache (validity rule `edge_uop_cache`: all of them fit at once), so the
    runtime's ring never wraps and a kernel's SRAM start is its offset in the DRAM array (first-use
    order). With `Mapping.uop_preload` they are all loaded at the head instead (`first_pair` -1)."""
    T, G, C = m.n_threads, m.tile.b, m.n_inner
    S = len(sizes) // T
    GC = G * C  # resets (slots 0..GC-1: c * G + b), then GEMMs (GC + c * G + b), then the epilogue
    bias = 2 * GC + (next(o for o, a in enumerate(m.epilogue) if a.src == "bias") if m.has_bias else S)  # (S: none)
    edges = m.edges
    uses = use_order(*order)[0]
    h, w, co, ci = edges.last
    vsize, bits = _variant_sizes(edges)
    buf, n_k, n_first, n_special, total = _edge_plan_kernel(
        sizes, uses, T, S, GC, G, bias, bits, vsize,
        h, w, co, ci, *tables(m), m.n_pairs, C,
        m.uop_preload)
    if total > depth:
        raise InvalidSchedule(f"edge_uop_cache: micro-op cache: the kernels of the full and edge tiles need "
                              f"{total} micro-ops together > UOP depth {depth}")
    buf.setflags(write=False)  # its views below are read only too
    # the plan's arrays, back to back in `buf` (`_edge_plan_kernel`)
    n0, V = len(sizes), len(vsize)
    a, b = n0 * V, n0 * V + n_k
    kvar, ksizes, kinds = buf[:a].reshape(n0, V), buf[a:b], buf[b:b + 3 * n_k].reshape(n_k, 3)
    a = b + 3 * n_k
    first, first_pair, dram_off, special = (buf[a:a + n_first], buf[a + n_first:a + n_first + n_k],
                                            buf[a + n_first + n_k:a + n_first + 2 * n_k],
                                            buf[a + n_first + 2 * n_k:a + n_first + 2 * n_k + n_special])
    return Uops(ksizes, uses, _no_ring(len(uses)), dram_off, first, kvar, first_pair, origin=kinds, special=special,
                n_uops=total)


@lru_cache(maxsize=1024)
def _no_ring(n_uses: int) -> Ring:
    """The ring of an edge-tile plan: one row, no LOAD UOP at a use (`_edge_plan`; read only, shared)."""
    ring = Ring(np.zeros((1, n_uses), dtype=bool), np.zeros((1, n_uses), dtype=np.int64), None)
    _read_only(ring.load, ring.bgn)
    return ring


def _variant_sizes(edges: Edges) -> tuple[np.ndarray, int]:
    """((V, 3) each edge tile variant's (GEMM, reset, bias-ADD) kernel size (the full tile's row
    unused: 0), `Edges.bits`), kept on the `Edges` (shared by the configs of a space that run the
    same variants)."""
    got = edges.__dict__.get("_variant_sizes")
    if got is None:
        vsize = np.array([(e.gemm.size, e.reset.size, e.tile.co) if v else (0, 0, 0)
                          for v, e in enumerate(edges.variants)], dtype=np.int64)
        vsize.setflags(write=False)
        got = edges.__dict__["_variant_sizes"] = (vsize, edges.bits())
    return got


@njit(cache=True)
def _edge_plan_kernel(sizes, uses, T, S, GC, G, bias, edged, vsize, h_last, w_last, co_last, ci_last,
                      loops, threads, inner, P, C, preload):  # pragma: no cover - compiled
    """`_edge_plan` in one compiled call: (buf, kernels n, first-use kernels, special pairs, micro-ops
    of every kernel); buf holds back to back kvar (len(sizes), V), the kernel sizes (n), origin (n,
    3), first, first_pair (n), the DRAM offsets (n) and the pairs of a kernel's first load in order
    (none with `preload`): one array to return, not seven (each costs a boxing). The ring's rows are
    `_no_ring`'s."""
    kvar, ksizes, kinds = _edge_kernels(sizes, T, S, GC, bias, edged, vsize)
    # the pairs that first run some (thread, sub-step, variant) hold every kernel's first use
    pv = _pair_variants(loops, threads, inner, h_last, w_last, co_last, T, P, C)
    first, first_pair = _edge_first(uses, S, GC, G, T, ci_last, pv, kvar, ksizes.shape[0])
    n = ksizes.shape[0]
    dram_off = np.zeros(n, np.int64)
    total = 0
    n_special = 0
    special = np.empty(first.shape[0], np.int64)
    for k in first:  # first-use order: their pairs ascend
        dram_off[k] = total
        total += ksizes[k]
        if n_special == 0 or special[n_special - 1] != first_pair[k]:
            special[n_special] = first_pair[k]
            n_special += 1
    if preload:  # every kernel cached at once already: the preload loads them first
        first_pair[:] = -1
        n_special = 0
    else:
        for k in range(n):
            if first_pair[k] < 0:  # never used: never loaded
                first_pair[k] = np.iinfo(np.int64).max
    nf = first.shape[0]
    buf = np.empty(kvar.size + 6 * n + nf + n_special, np.int64)
    a = kvar.size
    buf[:a] = kvar.ravel()
    buf[a:a + n] = ksizes
    buf[a + n:a + 4 * n] = kinds.ravel()
    a += 4 * n
    buf[a:a + nf] = first
    buf[a + nf:a + nf + n] = first_pair
    buf[a + nf + n:a + nf + 2 * n] = dram_off
    buf[a + nf + 2 * n:] = special[:n_special]
    return buf, n, nf, n_special, total


@njit(cache=True)
def _edge_kernels(sizes, T, S, GC, bias, edged, vsize):  # pragma: no cover - compiled
    """The kernels of the edge tile variants (`_edge_plan`): for each thread t, variant v that runs
    (no edge bit outside `edged`) and slot (resets, GEMMs, the bias ADD at slot `bias`; S: none), a
    new kernel when the slot sees all of v's bits (GEMMs see the ci bit, resets and the epilogue
    only the tile's h, w, co bits: `PAIR_BITS`), else the kernel of the variant it does see.
    Returns (kvar, sizes, origin: (thread, slot, variant) of every kernel)."""
    V = vsize.shape[0]
    n0 = sizes.shape[0]
    kvar = np.empty((n0, V), np.int64)
    for i in range(n0):
        kvar[i, :] = i
    cap = n0 + T * V * (2 * GC + 1)
    out = np.empty(cap, np.int64)
    out[:n0] = sizes
    origin = np.empty((cap, 3), np.int64)
    for i in range(n0):
        origin[i, 0], origin[i, 1], origin[i, 2] = i // S, i % S, 0
    n = n0
    for t in range(T):
        for v in range(1, V):
            if v & ~edged:  # never runs (an edge bit of an axis without edge tiles)
                continue
            for si in range(2 * GC + 1):
                slot = si if si < 2 * GC else bias
                gemm = GC <= slot < 2 * GC
                key = v if gemm else v & PAIR_BITS  # resets and the epilogue see the tile's h, w, co bits
                if slot >= S or key == 0:
                    continue
                if key != v:
                    kvar[t * S + slot, v] = kvar[t * S + slot, key]
                    continue
                kvar[t * S + slot, v] = n
                out[n] = vsize[key, 0] if gemm else vsize[key, 1] if slot < GC else vsize[key, 2]
                origin[n, 0], origin[n, 1], origin[n, 2] = t, slot, key
                n += 1
    return kvar, out[:n].copy(), origin[:n].copy()


@njit(cache=True)
def _edge_first(uses, S, GC, G, T, ci_last, pv, kvar, n_kernels):  # pragma: no cover - compiled
    """(kernels in first-use order, the pair of each kernel's first use: -1 never) with edge tiles
    (`_edge_plan`). Every kernel is first used in a pair that first runs some (thread t, sub-step c,
    variant of `pv` (T, P, C)); the uses of those pairs, pair by pair in program order, give the
    order. A use's variant: its thread's tile in its sub-step (resets and GEMMs: the ACC slot of
    its slot; the epilogue: slot 0), plus the ci bit for the GEMMs of the last reduction step."""
    T_, P, C = pv.shape
    U = uses.shape[0]
    slot_of = uses % S
    thread_of = uses // S
    ci = np.zeros(U, np.int64)
    sub = np.zeros(U, np.int64)
    n_gemm = 0
    for u in range(U):
        s = slot_of[u]
        if s < GC:
            sub[u] = s // G
        elif s < 2 * GC:  # T x GC GEMM uses per step, in step order
            sub[u] = (s - GC) // G
            if ci_last >= 0 and n_gemm // (T * GC) == ci_last:
                ci[u] = CI_BIT
            n_gemm += 1
    special = np.zeros(P, np.bool_)
    seen_code = np.zeros(T_ * C * 8, np.bool_)  # bits < 8
    for t in range(T_):
        for c in range(C):
            for p in range(P):
                code = (t * C + c) * 8 + pv[t, p, c]
                if not seen_code[code]:
                    seen_code[code] = True
                    special[p] = True
    first = np.empty(n_kernels, np.int64)
    first_pair = np.full(n_kernels, -1, np.int64)
    n = 0
    for p in range(P):
        if not special[p]:
            continue
        for u in range(U):
            kid = kvar[uses[u], pv[thread_of[u], p, sub[u]] | ci[u]]
            if first_pair[kid] < 0:
                first_pair[kid] = p
                first[n] = kid
                n += 1
    return first[:n].copy(), first_pair


def uop_array(m: Mapping, first: np.ndarray, wgt_depth: int = 0, origin: np.ndarray | None = None) -> np.ndarray:
    """The DRAM micro-op array: the kernels (each thread's SRAM slice and batch block shifted)
    in first-use order; `origin` (edge tiles, `uop_plan`): (thread, slot, variant) of each kernel."""
    if m.edges is not None and origin is not None:
        return np.concatenate([_thread_kernels(m, int(t), wgt_depth, int(v))[int(s)].uops
                               for t, s, v in origin[first].tolist()])
    kernels = [k for t in range(m.n_threads) for k in _thread_kernels(m, t, wgt_depth)]
    return np.concatenate([kernels[kid].uops for kid in first])


def _thread_kernels(m: Mapping, t: int, wgt_depth: int, v: int = 0) -> list[Kernel]:
    """Thread t's kernels by slot (G resets, G GEMMs, the epilogue's), of tile variant `v`
    (`mapping.edges`: its compact layouts start where the full tile's do)."""
    e = m.edges.variants[v] if v else None
    tl, G, C = m.tile, m.tile.b, m.n_inner  # C ACC slots per thread
    et, gemm, reset = (e.tile, e.gemm, e.reset) if e is not None else (tl, m.gemm, m.reset)
    acc_b, inp_b, hw_ = et.co * et.h * et.w, et.ci * et.hin * et.win, et.h * et.w
    fs = fused_slots(m, wgt_depth)
    kernels: list[Kernel] = []
    dsh, ssh, wsh = t * C * tl.acc_sram, (0 if m.inp_shared else t) * tl.inp_sram, t * tl.wgt_sram
    kernels += [reset.shifted(dsh + c * tl.acc_sram + b * acc_b, 0, 0) for c in range(C) for b in range(G)]
    kernels += [gemm.shifted(dsh + c * tl.acc_sram + b * acc_b + d, ssh + b * inp_b + s, wsh + w)
                for c in range(C) for b in range(G) for d, s, w in m.lift_offsets()]
    for a in m.epilogue:
        if a.src == "bias":  # channel block c of every pixel += bias block c of the thread
            kernels.append(Kernel.from_uops(np.array([[dsh + c * hw_, fs.bias + t * tl.co + c, 0]
                                                      for c in range(et.co)], dtype=np.int64)))
        elif a.src == "residual":  # chunk c: planes (g, c0..) of the ACC tile += the INP slice
            per_g = tl.co // fs.planes
            kernels += [Kernel.from_uops(np.array([[dsh + ((c // per_g) * tl.co + (c % per_g) * fs.planes) * hw_,
                                                    t * fs.res_pitch, wsh if fs.ident_each else fs.ident]],
                                                  dtype=np.int64))
                        for c in range(fs.chunks)]
        else:
            kernels.append(Kernel(np.zeros((0, 4), dtype=np.int64), offset=(dsh, dsh, 0)))
    return kernels
