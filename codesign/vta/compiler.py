"""Compile a layer + schedule into the VTA program the TVM VTA flow would run (docs/vta.md §7.3).

Instruction stream, per *pair* p (one iteration of the tile loops bo, h0, co0, w0 outside the
virtual-thread axis, in that order) with T virtual threads t (cthread outermost: each thread owns
a 1/T slice of INP, WGT and ACC SRAM), K input-channel steps k and G batch blocks b per tile
(G = tile_b; the GEMMs run once per batch block, `codesign.schedule.tiling`)::

    for k in 0..K-1:
        for t: LOAD INP(t, k) [pop g2l unless it is one of the first T load groups]
               LOAD WGT(t, k) [push l2g]
        for t: (k == 0: for b: GEMM reset(t, b) [b = 0 pops s2g unless p == 0])
               for b: GEMM(t, k, b)   [b = 0 pops l2g; b = G-1 pushes g2l unless one of the
                                       last T groups]
    for t: ALU SHR(t), MIN(t), MAX(t) [MAX pushes g2s]
    for t: STORE(t)           [pop g2s; push s2g unless one of the last T stores, except the
                               very last store, whose token the final no-op pops]
    ... after the last pair: LOAD INP no-op [push l2g], LOAD UOP no-op [pop l2g, pop s2g], FINISH

Token semantics (docs/vta.md §2.8): l2g = "load group (t, k) is in SRAM" (RAW, load -> compute);
g2l = "GEMM of group g is done, slice t may be overwritten", popped by load group g + T (WAR);
g2s = "tile's epilogue is done" (RAW on the accumulator, compute -> store); s2g = "tile stored",
popped by the reset of the tile T tiles later, which reuses the same ACC slice (WAR). With T = 2,
thread 1's loads run while thread 0's GEMM computes (double buffering, §7.3 "Virtual threads").
Counts balance exactly: every push has one pop, so the FIFOs are empty at FINISH. The end is the
runtime's `Synchronize` (docs/vta.md §2.6, §5.4): a compute no-op that pops s2g and l2g, then FINISH.

Micro-op kernels (per thread: reset and GEMM per batch block, SHR, MIN, MAX; one per runtime
call site; thread slices differ only by their SRAM offsets) are placed
in the micro-op SRAM by the runtime's ring cache (`UopQueue::Push`, §5.4): loaded by one LOAD UOP
the first time they are used, reloaded only after being evicted.

Construction is vectorized: a per-pair template of rows is broadcast over the P pairs and the
position-dependent fields (DRAM offsets, sizes, pads, first/last-pair tokens) are filled with
array arithmetic (`codesign.vta.layout` computes them over the tile grid).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numba import njit

from codesign.errors import ConfigError
from codesign.hw.config import HwConfig
from codesign.schedule.knobs import Config, KnobValue
from codesign.vta import isa
from codesign.vta.layout import Dma2D, Kernel, TilePlan
from codesign.vta.program import DramAllocator, Program
from codesign.vta.template_plans import plan_for
from codesign.workloads.layers import Layer

C = isa.COL
NF = isa.N_FIELDS
CLIP_MAX = 127  # int8 clip of the tuning template (docs/vta.md §7.3 "ALU epilogue")


class Scratch:
    """A reusable instruction buffer for the timing hot path: big programs (10^5 rows, tens of
    MB) otherwise pay page faults on every fresh allocation."""

    def __init__(self) -> None:
        self._buf = np.empty((0, NF), dtype=np.int64)

    def get(self, n_rows: int) -> np.ndarray:
        if self._buf.shape[0] < n_rows:
            self._buf = np.empty((max(n_rows, 2 * self._buf.shape[0]), NF), dtype=np.int64)
        return self._buf[:n_rows]


@dataclass(frozen=True)
class Compiled:
    """The instruction matrix plus what is needed to place it in DRAM."""

    insns: np.ndarray
    uops: np.ndarray  # DRAM micro-op array: every kernel once, in first-load order
    plan: TilePlan
    uop_load_rows: np.ndarray  # rows of LOAD UOP instructions whose dram_base is region-relative
    pair_rows: np.ndarray | None = None  # instructions of each assembled pair (before the tail)


# -- micro-op ring cache (docs/vta.md §5.4, runtime.cc UopQueue::Push) ---------------------------
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
        return self.start != 0 and not self.load[1:].any()

    def n_loads(self, n_pairs: int) -> int:
        """LOAD UOP instructions over all n_pairs pairs."""
        per = self.load.sum(axis=1)
        m = per.shape[0]
        if self.start is None or n_pairs <= m:
            return int(per[:n_pairs].sum())
        period = m - self.start
        full, rest = divmod(n_pairs - m, period)
        return int(per.sum() + full * per[self.start:].sum() + per[self.start:self.start + rest].sum())


# -- assembly -------------------------------------------------------------------------------------
@lru_cache(maxsize=256)
def _positions(T: int, K: int, G: int) -> dict[str, np.ndarray]:
    """Row index of every instruction of one pair in the pair template (see module docstring);
    G = batch blocks per tile, each with its own reset and accumulate GEMM."""
    t = np.arange(T)[:, None]
    bb = np.arange(G)
    first = 2 * T + 2 * G * T  # rows of the k = 0 block
    step = 2 * T + G * T  # rows of a k >= 1 block
    base = np.concatenate([[0], first + np.arange(K - 1) * step])[:, None]  # (K, 1)
    gemm = np.empty((K, T, G), dtype=np.int64)
    gemm[0] = 2 * T + 2 * G * t + G + bb
    gemm[1:] = base[1:, :, None] + 2 * T + G * t[None] + bb
    alu0 = first + (K - 1) * step
    return {
        "inp": base + 2 * t.T, "wgt": base + 2 * t.T + 1,  # (K, T)
        "gemm": gemm,  # (K, T, G)
        "reset": 2 * T + 2 * G * t + bb,  # (T, G)
        "alu": alu0 + 3 * t + np.arange(3),  # (T, 3): SHR, MIN, MAX
        "store": alu0 + 3 * T + t[:, 0],  # (T,)
        "rows": np.array(alu0 + 4 * T),
    }


def _set_loop(T_: np.ndarray, rows: np.ndarray, kern: Kernel) -> None:
    for name in ("iter_out", "iter_in", "dst_factor_out", "dst_factor_in", "src_factor_out",
                 "src_factor_in", "wgt_factor_out", "wgt_factor_in"):
        T_[rows, C[name]] = getattr(kern, name)


_DMA_FIELDS = ("y_size", "x_size", "x_stride", "y_pad_0", "y_pad_1", "x_pad_0", "x_pad_1")


def _dma_template(tpl: np.ndarray, rows: np.ndarray, dma: Dma2D) -> None:
    """Fields of a DMA that are the same at every tile position go into the pair template."""
    for name in _DMA_FIELDS:
        v = getattr(dma, name)
        if np.ndim(v) == 0:
            tpl[rows, C[name]] = int(v)


def _dma_fill(M: np.ndarray, rows: np.ndarray, dma: Dma2D, base_elem: int) -> None:
    """Position-dependent DMA fields into the (P, R, NF) matrix; `rows` has the grid's trailing
    shape, so `M[:, rows, col]` has the grid's shape and the values broadcast without copies."""
    M[:, rows, C["dram_base"]] = dma.dram + base_elem
    for name in _DMA_FIELDS:
        v = getattr(dma, name)
        if np.ndim(v) != 0:
            M[:, rows, C[name]] = v


def _kernels(plan: TilePlan) -> list[Kernel]:
    """One kernel per runtime call site: (thread, batch block) for reset and GEMM, thread for each
    ALU op; every thread's SRAM slice shifted (docs/vta.md §7.3 cthread). Order: per thread, G resets, G
    GEMMs, SHR, MIN, MAX."""
    kernels: list[Kernel] = []
    G = plan.n_batch
    for t in range(plan.n_threads):
        dsh, ssh, wsh = t * plan.acc_per_thread, t * plan.inp_per_thread, t * plan.wgt_per_thread
        kernels += [plan.reset.shifted(dsh + b * plan.acc_per_batch, 0, 0) for b in range(G)]
        kernels += [plan.gemm.shifted(dsh + b * plan.acc_per_batch, ssh + b * plan.inp_per_batch, wsh)
                    for b in range(G)]
        kernels += [Kernel(np.zeros((0, 4), dtype=np.int64), offset=(dsh, dsh, 0))] * 3
    return kernels


@dataclass(frozen=True)
class UopSchedule:
    """Micro-op kernels of a plan and where the runtime's ring cache puts them (docs/vta.md §5.4)."""

    sizes: np.ndarray      # uops per kernel
    comp_rows: np.ndarray  # pair-template rows of the compute instructions using a kernel, in order
    comp_kid: np.ndarray   # the kernel each of them uses
    ring: Ring
    dram_off: np.ndarray   # kernel -> offset in the DRAM uop array (first-load order)
    uops: np.ndarray       # the DRAM uop array


@lru_cache(maxsize=256)
def _use_order(T: int, K: int, G: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(pair-template rows of the compute instructions in order, the kernel each uses, the
    kernels in first-use order). One kernel per runtime call site (`_kernels`): per thread t,
    G resets, G GEMMs, SHR, MIN, MAX, numbered t * (2G + 3) + slot."""
    pos = _positions(T, K, G)
    slots = 2 * G + 3
    kb = np.arange(G)
    tsl = np.arange(T)
    comp_rows = np.concatenate([pos["reset"].reshape(-1), pos["gemm"].reshape(-1), pos["alu"].reshape(-1)])
    comp_kid = np.concatenate([
        (tsl[:, None] * slots + kb).reshape(-1),
        np.broadcast_to(tsl[:, None] * slots + G + kb, (K, T, G)).reshape(-1),
        (tsl[:, None] * slots + 2 * G + np.arange(3)).reshape(-1)])
    order = np.argsort(comp_rows, kind="stable")
    comp_rows, comp_kid = comp_rows[order], comp_kid[order]
    first = np.array(list(dict.fromkeys(comp_kid.tolist())), dtype=np.int64)
    for arr in (comp_rows, comp_kid, first):
        arr.setflags(write=False)
    return comp_rows, comp_kid, first


def uop_uses(plan: TilePlan) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(uops per kernel, kernel of each compute instruction of a pair in program order,
    kernels in first-use order = the DRAM uop array), see `_use_order`. Kernels fit the uop
    buffer: that is validity rule `uop_capacity`, checked by `layout.base_plan`."""
    T, K, G = plan.n_threads, plan.n_steps, plan.n_batch
    sizes = np.tile(np.array([plan.reset.size] * G + [plan.gemm.size] * G + [1, 1, 1], dtype=np.int64), T)
    _, comp_kid, first = _use_order(T, K, G)
    return sizes, comp_kid, first


def uop_schedule(plan: TilePlan, hw: HwConfig) -> UopSchedule:
    sizes, comp_kid, first = uop_uses(plan)
    comp_rows = _use_order(plan.n_threads, plan.n_steps, plan.n_batch)[0]
    kernels = _kernels(plan)
    ring = ring_schedule(sizes, comp_kid, plan.n_pairs, hw.uop_depth)
    dram_off = np.zeros(len(kernels), dtype=np.int64)
    dram_off[first] = np.concatenate([[0], np.cumsum(sizes[first])[:-1]])
    uops = np.concatenate([kernels[kid].uops for kid in first])
    return UopSchedule(sizes, comp_rows, comp_kid, ring, dram_off, uops)


def assemble(plan: TilePlan, hw: HwConfig, *, shift: int, inp_base: int, wgt_base: int,
             out_base: int, scratch: Scratch | None = None, sched: UopSchedule | None = None
             ) -> Compiled:
    """The instruction matrix of `plan`'s pairs `plan.pair_ids` (all pairs: the program) plus
    the final synchronization. `*_base` are DRAM element indices of the regions; LOAD UOP rows
    get region-relative offsets (patched by `compile_insns` once the uop region exists). With
    `scratch`, the matrix is a view into its reusable buffer (valid until the next use)."""
    P, K, T, G = plan.n_pairs, plan.n_steps, plan.n_threads, plan.n_batch
    sched = uop_schedule(plan, hw) if sched is None else sched
    pos = _positions(T, K, G)
    R = int(pos["rows"])
    inp_rows, wgt_rows, g, r, a, st = (pos[k] for k in ("inp", "wgt", "gemm", "reset", "alu", "store"))
    tsl = np.arange(T)
    pairs = plan.pair_ids
    n_sel = len(pairs)
    ring_rows = sched.ring.row_of(pairs)
    load, bgn = sched.ring.load[ring_rows], sched.ring.bgn[ring_rows]
    comp_rows, comp_kid, size_arr = sched.comp_rows, sched.comp_kid, sched.sizes

    # The pair template.
    tpl = np.zeros((R, NF), dtype=np.int64)
    for rows, mem, per, dma in ((inp_rows, isa.MEM_INP, plan.inp_per_thread, plan.inp),
                                (wgt_rows, isa.MEM_WGT, plan.wgt_per_thread, plan.wgt)):
        tpl[rows, C["opcode"]] = isa.OP_LOAD
        tpl[rows, C["memory_type"]] = mem
        tpl[rows, C["sram_base"]] = tsl * per
        _dma_template(tpl, rows, dma)
    tpl[inp_rows, C["pop_next_dep"]] = 1  # g2l (WAR), cleared for the first T groups below
    tpl[wgt_rows, C["push_next_dep"]] = 1  # l2g (RAW)
    # GEMMs: per (thread, batch block) a reset and, per ci step, an accumulate GEMM.
    tpl[g, C["opcode"]] = isa.OP_GEMM
    tpl[r, C["opcode"]] = isa.OP_GEMM
    tpl[r, C["reset_reg"]] = 1
    _set_loop(tpl, g, plan.gemm)
    _set_loop(tpl, r, plan.reset)
    tpl[g[:, :, 0], C["pop_prev_dep"]] = 1  # l2g
    tpl[g[:, :, -1], C["push_prev_dep"]] = 1  # g2l, cleared for the last T groups below
    tpl[r[:, 0], C["pop_next_dep"]] = 1  # s2g, cleared in the first pair
    # ALU epilogue: one instruction over the whole acc slice, 1 uop (docs/vta.md §7.3).
    tpl[a, C["opcode"]] = isa.OP_ALU
    tpl[a, C["iter_out"]] = 1
    tpl[a, C["iter_in"]] = plan.acc_per_thread
    tpl[a, C["dst_factor_in"]] = 1
    tpl[a, C["src_factor_in"]] = 1
    tpl[a, C["use_imm"]] = 1
    tpl[a, C["alu_opcode"]] = (isa.ALU_SHR, isa.ALU_MIN, isa.ALU_MAX)
    tpl[a, C["imm"]] = (shift, CLIP_MAX, 0)
    tpl[a[:, 2], C["push_next_dep"]] = 1  # g2s
    # STORE.
    tpl[st, C["opcode"]] = isa.OP_STORE
    tpl[st, C["memory_type"]] = isa.MEM_OUT
    tpl[st, C["sram_base"]] = tsl * plan.acc_per_thread
    tpl[st, C["pop_prev_dep"]] = 1  # g2s
    tpl[st, C["push_prev_dep"]] = 1  # s2g
    _dma_template(tpl, st, plan.store)
    # Steady: only pair 0 loads kernels, which then stay cached (uop_bgn/end equal in all pairs).
    steady = pairs[0] == 0 and not load[1:].any() and sched.ring.steady(P)
    if steady:
        tpl[comp_rows, C["uop_bgn"]] = bgn[0]
        tpl[comp_rows, C["uop_end"]] = bgn[0] + size_arr[comp_kid]

    # LOAD UOP rows: (pair, use) of each, inserted before the instruction using the kernel.
    lp, lu = np.nonzero(load)
    kid = comp_kid[lu]
    lrows = np.zeros((lp.size, NF), dtype=np.int64)
    lrows[:, C["opcode"]] = isa.OP_LOAD
    lrows[:, C["memory_type"]] = isa.MEM_UOP
    lrows[:, C["sram_base"]] = bgn[lp, lu]
    lrows[:, C["dram_base"]] = sched.dram_off[kid]
    lrows[:, C["y_size"]] = 1
    lrows[:, C["x_size"]] = size_arr[kid]
    lrows[:, C["x_stride"]] = size_arr[kid]
    # Final synchronization (docs/vta.md §2.6, §5.4 Synchronize).
    tail = np.zeros((3, NF), dtype=np.int64)
    tail[0, [C["opcode"], C["memory_type"], C["push_next_dep"]]] = (isa.OP_LOAD, isa.MEM_INP, 1)
    tail[1, [C["opcode"], C["memory_type"], C["pop_prev_dep"], C["pop_next_dep"]]] = (
        isa.OP_LOAD, isa.MEM_UOP, 1, 1)
    tail[2, C["opcode"]] = isa.OP_FINISH

    # One allocation; the pairs are written in place (a view), pair 0 is then widened by its
    # LOAD UOP rows. Only when kernels are evicted and reloaded in later pairs is the body
    # rebuilt with np.insert.
    n_lu = lp.size
    n_rows = n_lu + n_sel * R + 3
    out = np.empty((n_rows, NF), dtype=np.int64) if scratch is None else scratch.get(n_rows)
    M = out[n_lu:n_lu + n_sel * R].reshape(n_sel, R, NF) if steady else np.empty((n_sel, R, NF), dtype=np.int64)
    M[:] = tpl
    _dma_fill(M, inp_rows, plan.inp, inp_base)
    _dma_fill(M, wgt_rows, plan.wgt, wgt_base)
    _dma_fill(M, st, plan.store, out_base)
    if not steady:
        M[:, comp_rows, C["uop_bgn"]] = bgn
        M[:, comp_rows, C["uop_end"]] = bgn + size_arr[comp_kid]
    # First/last-pair tokens.
    first_sel = np.flatnonzero(pairs == 0)
    last_sel = np.flatnonzero(pairs == P - 1)
    M[first_sel[:, None], inp_rows[0], C["pop_next_dep"]] = 0
    M[first_sel[:, None], r[:, 0], C["pop_next_dep"]] = 0
    M[last_sel[:, None], g[K - 1, :, -1], C["push_prev_dep"]] = 0
    M[last_sel[:, None], st[:-1], C["push_prev_dep"]] = 0  # the very last store's token goes to the final no-op

    at = lp * R + comp_rows[lu]
    if steady:
        out[:R + n_lu] = np.insert(M[0].copy(), at, lrows, axis=0)
    else:
        out[:-3] = np.insert(M.reshape(n_sel * R, NF), at, lrows, axis=0)
    out[-3:] = tail
    return Compiled(insns=out, uops=sched.uops, plan=plan, uop_load_rows=at + np.arange(n_lu),
                    pair_rows=R + np.bincount(lp, minlength=n_sel))


# -- public entry ---------------------------------------------------------------------------------
def _check_shift(shift: int) -> int:
    # HLS reads the shift as a signed 5-bit value, so >= 16 becomes a left shift (docs/vta.md §3.4).
    if not isinstance(shift, (int, np.integer)) or not 0 <= int(shift) <= 15:
        raise ConfigError(f"shift={shift!r}: allowed integers 0..15 (the HLS ALU reads a signed "
                          "5-bit shift amount)")
    return int(shift)


def _layout_bytes(plan: TilePlan, hw: HwConfig) -> list[tuple[str, int, int, str]]:
    return [("data", plan.inp_elems * hw.inp_elem_bytes, hw.inp_elem_bytes, "input"),
            ("weight", plan.wgt_elems * hw.wgt_elem_bytes, hw.wgt_elem_bytes, "input"),
            ("output", plan.out_elems * hw.out_elem_bytes, hw.out_elem_bytes, "output")]


def _dram_bases(plan: TilePlan, hw: HwConfig) -> tuple[list[int], int]:
    """Byte addresses of data/weight/output and of the uop region: `DramAllocator` places them
    (the one allocator; `compile_layer` allocates the same regions with their data)."""
    alloc = DramAllocator()
    addrs = [alloc.alloc(name, nbytes, align, role).addr for name, nbytes, align, role in _layout_bytes(plan, hw)]
    return addrs, alloc.alloc("uop", 0, isa.UOP_BYTES, "uop").addr


def compile_insns(layer: Layer, config: Config | dict[str, KnobValue], hw: HwConfig, *, shift: int = 8,
                  scratch: Scratch | None = None) -> Compiled:
    """Timing-path compile: the final instruction matrix without building DRAM data. With
    `scratch` the matrix lives in that reusable buffer (use it before the next compile)."""
    plan = plan_for(layer, config, hw)
    (a_in, a_w, a_out), a_uop = _dram_bases(plan, hw)
    comp = assemble(plan, hw, shift=_check_shift(shift), inp_base=a_in // hw.inp_elem_bytes,
                    wgt_base=a_w // hw.wgt_elem_bytes, out_base=a_out // hw.out_elem_bytes,
                    scratch=scratch)
    comp.insns[comp.uop_load_rows, C["dram_base"]] += a_uop // isa.UOP_BYTES
    return comp


def compile_layer(layer: Layer, config: Config | dict[str, KnobValue], hw: HwConfig, *,
                  data: np.ndarray | None = None, weight: np.ndarray | None = None, shift: int = 8,
                  functional: bool = True) -> Program:
    """The VTA program of `layer` under `config` (a `Config` or an AutoTVM knob dict).

    `data` (int8 NCHW / (N, IN)) and `weight` (int8 OIHW / (OUT, IN)) are packed into the DRAM
    regions "data" and "weight" (docs/vta.md §7.1) when given; "output" receives the int8 result
    in packed layout and "uop" holds the micro-ops. Invalid schedules raise `InvalidSchedule`.
    """
    comp = compile_insns(layer, config, hw, shift=shift)
    plan = comp.plan
    alloc = DramAllocator()
    packed = {"data": (data, layer.pack_data), "weight": (weight, layer.pack_weight)}
    for name, nbytes, align, role in _layout_bytes(plan, hw):
        arr = None
        if name in packed and functional and packed[name][0] is not None:
            arr = np.ascontiguousarray(packed[name][1](np.asarray(packed[name][0]), hw)).view(np.uint8)
        alloc.alloc(name, nbytes, align, role, arr)
    if functional:
        uop_region = alloc.alloc_uops(comp.uops, hw)
    else:
        uop_region = alloc.alloc("uop", comp.uops.shape[0] * isa.UOP_BYTES, isa.UOP_BYTES, "uop")
    # LOAD UOP dram_base was computed from `_dram_bases`; the allocator must agree.
    assert uop_region.addr == _dram_bases(plan, hw)[1], "DRAM layout mismatch"
    meta = {"layer": getattr(layer, "name", str(layer)), "template": layer.template,
            "knobs": dict(getattr(config, "knobs", config)), "shift": int(shift),
            "index": getattr(config, "index", None), "n_pairs": plan.n_pairs,
            "n_steps": plan.n_steps, "n_threads": plan.n_threads, **plan.info}
    return Program(hw, comp.insns, comp.uops, alloc.regions, meta)


__all__ = ["compile_layer", "compile_insns", "assemble", "Compiled", "Scratch"]
