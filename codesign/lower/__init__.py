"""Lowering: `Mapping` → the VTA program, once (docs/architecture.md).

`access` computes every DMA field from the mapping's loop order and residency, `uops` the
micro-op kernels and the runtime's ring cache, `emit` writes the instruction rows of any pairs.
`lower_program` is every pair (the instruction matrix); `lower_blocks` is one pair per class of
identical pairs (the block form `timing.time_blocks` times with periodic fast-forward), so the
full matrix is exactly the block form expanded (tests/test_timing_fast.py)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from numba import njit

from codesign.errors import InvalidSchedule
from codesign.hw.config import HwConfig
from codesign.lower.access import (
    AXIS,
    INP_PLACE,
    INP_SPLIT,
    NC,
    NK,
    NP,
    NT,
    RES_CHUNKS,
    TB,
    WGT_PLACE,
    pad_classes,
    spec,
)
from codesign.lower.emit import (
    ALU_OPS,
    LOOP_FIELDS,
    block_tail,
    classes,
    emit,
    pair_rows,
    span_rows,
    step_blocks,
    step_units,
)
from codesign.lower.uops import Uops, preload_size, uop_array, uop_plan
from codesign.mapping.batch import Geometry, Kernel
from codesign.mapping.edges import Edges
from codesign.mapping.legality import violations
from codesign.mapping.mapping import SOURCES, AluOp, Mapping
from codesign.vta import isa
from codesign.vta.program import DramAllocator


@dataclass(frozen=True)
class Lowered:
    """The instruction matrix and the DRAM micro-op array (every kernel once, first-load order)."""

    insns: np.ndarray
    uops: np.ndarray
    mapping: Mapping


@dataclass(frozen=True)
class PairBlocks:
    """A program as blocks of instruction rows for `timing.time_blocks`: block b is
    rows[block_start[b]:block_start[b + 1]] (one member of a class of identical pairs, the last
    block the tail); `pair_class[j]` is the block pair j runs (last entry: the tail).

    Step form (`steps` > 1, a pair of `MIN_STEPS` sub-steps or more: K reduction steps x C ACC slots,
    `Mapping.n_inner`): the units of a pair are its K·C sub-steps, the rest (epilogue, stores) and C - 1
    empty units (`steps` = (K + 1)·C), or, when no sub-step repeats another, its K reduction steps and
    the rest (`steps` = K + 1; one block below `MIN_STEPS` steps, as before the sub-steps); `pair_class[j·steps + x]` is the block unit x of pair j runs, one block
    per class of identical units of a pair class (a pair's middle steps differ only in their DRAM
    offsets, and so do the sub-steps of a step whose tiles' sizes, pads and kernel sizes agree; those
    repeating another are not written, `emit.emit`), the periods in units: a long pair is written and
    timed a few sub-steps at a time.

    Rows after the tail block (span rows) are run by no block: rows of the full program that reach
    beyond the DRAM the blocks span, so the footprint `timing._decode` takes from all rows is the
    full program's (`lower_blocks`)."""

    rows: np.ndarray
    block_start: np.ndarray
    pair_class: np.ndarray
    periods: np.ndarray  # candidate periods in units (pairs or steps) for the fast-forward, largest first
    n_insns: int         # instructions of the full program
    steps: int = 1       # units per pair: 1, or (K + 1)·C or K + 1 (the step form)


def regions(m: Mapping, hw: HwConfig) -> list[tuple[str, int, int, str]]:
    """(name, bytes, alignment, role) of the data, weight and output regions, then those of a
    fused epilogue (bias: int32 ACC blocks; residual: int8 in the output's layout, read as INP
    blocks; identity: one WGT block), in DRAM order."""
    return _regions(m.geo, m.inp_channels, hw, m.has_bias, m.has_residual)


def _regions(g: Geometry, inp_channels: int, hw: HwConfig, bias: bool = False, residual: bool = False
             ) -> list[tuple[str, int, int, str]]:
    n_in, n_w, n_out = (g.b * inp_channels * g.height * g.width, g.co * g.ci * g.kh * g.kw,
                        g.b * g.co * g.out_h * g.out_w)
    out = [("data", n_in * hw.inp_elem_bytes, hw.inp_elem_bytes, "input"),
           ("weight", n_w * hw.wgt_elem_bytes, hw.wgt_elem_bytes, "input"),
           ("output", n_out * hw.out_elem_bytes, hw.out_elem_bytes, "output")]
    if bias:
        out.append(("bias", g.co * hw.acc_elem_bytes, hw.acc_elem_bytes, "input"))
    if residual:
        out += [("residual", n_out * hw.inp_elem_bytes, hw.inp_elem_bytes, "input"),
                ("identity", hw.wgt_elem_bytes, hw.wgt_elem_bytes, "input")]
    return out


#: element width of each region's DMA (the bias is read as ACC, the residual as INP blocks)
_ELEM = {"data": "inp", "weight": "wgt", "output": "out", "bias": "acc", "residual": "inp", "identity": "wgt"}


def dram_bases(m: Mapping, hw: HwConfig) -> tuple[tuple[int, ...], int]:
    """Element offsets of data/weight/output (then bias/residual/identity of a fused epilogue, 0
    when absent) and of the uop region: `DramAllocator` places them (the one allocator;
    `compile_layer` allocates the same regions with their data)."""
    return _bases(m.geo, m.inp_channels, hw, m.has_bias, m.has_residual)


@lru_cache(maxsize=256)
def _bases(geo: Geometry, inp_channels: int, hw: HwConfig, bias: bool = False, residual: bool = False
           ) -> tuple[tuple[int, ...], int]:
    alloc = DramAllocator()
    base = {r[0]: alloc.alloc(*r).addr // getattr(hw, f"{_ELEM[r[0]]}_elem_bytes")
            for r in _regions(geo, inp_channels, hw, bias, residual)}
    uop = alloc.alloc("uop", 0, isa.UOP_BYTES, "uop").addr
    names = ("data", "weight", "output") + (("bias", "residual", "identity") if bias or residual else ())
    return tuple(base.get(n, 0) for n in names), uop // isa.UOP_BYTES


def _emit_args(m: Mapping, u: Uops, sc: tuple) -> tuple:
    """What `emit` reads of `m` beyond the pairs: the spec, kernels, epilogue, micro-op plan, options
    (`_emit_rows`' arguments from `sc` to `early`)."""
    kern = (_kernel_row(m.gemm), _kernel_row(m.reset), _NO_VARIANTS if m.edges is None else _variant_kernels(m.edges))
    return (sc[0], sc[3], sc[1], sc[2], sc[4], *kern, _epilogue(m.epilogue),
            u.sizes, u.uses, u.kvar, u.ring.load, u.ring.bgn, u.first_pair, u.dram_off, sc[5],
            m.n_lift, preload_size(m, u), m.early_epilogue)


def _rows(m: Mapping, pairs: np.ndarray, u: Uops, sc: tuple) -> np.ndarray:
    """Rows of `pairs` + tail, every row written (`emit`, one unit per pair); `sc` = `_spec` of `m`."""
    return _into_scratch(_emit_rows, (pairs, *_emit_args(m, u, sc), 1, 0), _SCRATCH_ROWS, False)[0]


def _into_scratch(fn: Any, args: tuple, scratch_rows: int, borrow: bool) -> tuple:
    """fn(*args, out, mode, dirty) (`_emit_rows`, `_lower`: first the rows, last (n, dirty)) into the
    kept scratch, grown up to `scratch_rows` rows, or, when the rows may not fit it, into a matrix of
    their own (rows whose bound is larger are a whole program's: a scratch kept at that size would
    hold them). `borrow`: the rows may be the scratch's own."""
    mode = _BORROW if borrow else _COPY
    got = fn(*args, _scratch(0), mode, _SCRATCH.dirty)
    n = got[-2]
    if n < 0 and -n <= scratch_rows:  # a larger scratch
        got = fn(*args, _scratch(-n), mode, _SCRATCH.dirty)
    elif n < 0:
        out = np.zeros((-n, isa.N_FIELDS), dtype=np.int64)
        got = fn(*args, out, _OWN, 0)
        if got[0].shape[0] == 0:  # left in `out`
            got = (out[:got[-2]], *got[1:])
        return got
    # the scratch's rows lent out are zeroed by the next emission (left writeable: a read-only
    # array is another type to the compiled cycle model, another compilation)
    _SCRATCH.dirty = got[-1]
    return got


_F = isa.N_FIELDS
_NO_VARIANTS = np.zeros((0, 2, len(LOOP_FIELDS)), dtype=np.int64)  # no edge tiles: the full tile's kernels alone
_NO_VARIANTS.setflags(write=False)
_OWN, _COPY, _BORROW = 0, 1, 2  # `_emit_rows` modes: the rows in a matrix of their own, copied out, lent


@njit(cache=True)
def _emit_rows(pairs, sc, scv, loops, threads, inner, gemm, reset, variants, epi, sizes, uses, kvar, load, bgn,
               first_pair, dram_off, uop_base, n_lift, preload, early, steps, n_span, out, mode, dirty
               ):  # pragma: no cover - compiled
    """`emit` of `pairs` into `out` (zeroed but its first `dirty` rows, zeroed here first), then (rows,
    units, rep, n, dirty): the rows of `pairs` + tail, the row count of each unit of each pair and the
    unit each repeats (`emit`; `steps` units per pair: 1, every row written, or (K + 1)·C, a unit per
    sub-step, the rest of the pair and C - 1 empty ones, repeated steps and sub-steps not written), the
    row count written and the rows of `out` left for the next call to zero. The last `n_span` pairs
    are written for the DRAM footprint alone: of their rows, those reaching beyond the others' span
    follow the tail (`emit.span_rows`), their units are left out. `mode` `_COPY` (`out` is the kept scratch):
    the rows are a matrix of their own, the rows written zeroed again; `_BORROW` (the scratch too): the
    rows are out[:n] itself, left for the next call to zero as its `dirty` (span pairs: copied, as
    `_COPY`); `_OWN` (a matrix for this program alone): without span pairs the rows are left in `out`
    (rows empty: the caller takes out[:n]). n = -bound, nothing written, when `out` may be too short:
    `max_rows` bounds a pair's rows loosely (every load split, every kernel reloaded, every step
    written)."""
    T, K, G, C, R, E = sc[NT], sc[NK], sc[TB], sc[NC], sc[RES_CHUNKS], epi.shape[1]
    loads = max(scv[:, INP_SPLIT].max(), sc[INP_SPLIT])
    max_rows = (1 + (1 + loads) * T * K * C + G * T * C * (n_lift * K + 1) + (2 * E + 2 + 2 * R) * T + T * C
                + uses.shape[0] + 1)
    bound = pairs.shape[0] * max_rows + 3
    if bound > out.shape[0]:
        return np.empty((0, _F), np.int64), np.empty((0, steps), np.int64), np.empty((0, steps), np.int64), -bound, dirty
    out[:dirty] = 0
    kern = np.empty((1 + variants.shape[0], 2, gemm.shape[0]), np.int64)
    kern[0, 0] = gemm
    kern[0, 1] = reset
    kern[1:] = variants
    units, rep = emit(pairs, (sc, scv, loops, threads, inner), kern, epi,
                      (sizes, uses, kvar, load, bgn, first_pair, dram_off, dram_off + uop_base), out,
                      (n_lift, preload, early, steps))
    n = units.sum() + 3
    if n_span:  # the others' rows, the tail, the span rows
        q = pairs.shape[0] - n_span
        a = units[:q].sum()
        span = span_rows(out, a, n - 3, n)
        rows = np.empty((a + 3 + span.shape[0], _F), np.int64)
        rows[:a] = out[:a]
        rows[a:a + 3] = out[n - 3:n]
        for i in range(span.shape[0]):
            rows[a + 3 + i] = out[span[i]]
        units, rep = units[:q], rep[:q]
    elif mode == _BORROW:
        return out[:n], units, rep, n, n  # no copy: a block program is timed at once (`lower_blocks`)
    elif mode == _COPY:
        rows = out[:n].copy()
    else:
        rows = np.empty((0, _F), np.int64)
    if mode != _OWN:
        out[:n] = 0  # the emitter writes rows 0..n-1 only: the scratch is all zeros again
    return rows, units, rep, n, 0


_SCRATCH = threading.local()
#: Rows of the largest scratch kept for a whole program (15 MB; `lower_program`): a larger one gets a
#: matrix of its own rather than a scratch kept at its size (it writes every row it bounds)
_SCRATCH_ROWS = 1 << 16
#: The same for a block program (`lower_blocks`): its bound is loose (every step and kernel load
#: written) and its rows are few, so the scratch grows further (virtual memory: only the pages of rows
#: written are touched). A fresh matrix at such a bound costs a calloc of tens of MB, which glibc may
#: serve by zeroing heap pages: milliseconds, 30x the emitting, on 1 in 800 sampled schedules.
_BLOCK_SCRATCH_ROWS = 1 << 20


def _scratch(n: int) -> np.ndarray:
    """A (>= n, fields) matrix for the emitter, kept per thread, zeroed but its first
    `_SCRATCH.dirty` rows (lent out with a block program, zeroed by the next emission): `max_rows`
    bounds a pair's rows loosely (every load split, every kernel reloaded, every step written), so a
    fresh `np.zeros` of that bound cost about as much as the emitting (the memset of a large calloc);
    the user zeroes the rows used (`_emit_rows`)."""
    buf = getattr(_SCRATCH, "buf", None)
    if buf is None or buf.shape[0] < n:
        buf = _SCRATCH.buf = np.zeros((max(n, 1 << 12), isa.N_FIELDS), dtype=np.int64)
        _SCRATCH.dirty = 0
    return buf


def _kernel_row(k: Kernel) -> np.ndarray:
    """`_loop_fields` of `k` as a (read-only) array, kept on the kernel."""
    row = k.__dict__.get("_kernel_row")
    if row is None:
        row = k.__dict__["_kernel_row"] = np.array(_loop_fields(k), dtype=np.int64)
        row.setflags(write=False)
    return row


def _loop_fields(k: Kernel) -> list[int]:
    """`k`'s instruction loop fields (`emit.LOOP_FIELDS`), kept on the (frozen) kernel: the edge
    tiles' kernels are shared by every config of a space that runs them."""
    row = k.__dict__.get("_loop_fields")
    if row is None:
        row = k.__dict__["_loop_fields"] = [getattr(k, f) for f in LOOP_FIELDS]
    return row


def _variant_kernels(edges: Edges) -> np.ndarray:
    """(V - 1, 2, fields) loop fields of the GEMM and reset kernels of the edge tile variants 1..V-1
    (read-only), kept on the `Edges` (shared by the configs of a space that run the same variants)."""
    kern = edges.__dict__.get("_variant_kernels")
    if kern is None:
        # the variants of axes without an edge are one `EdgeTile` (the full tile's): read each once
        seen: dict[int, list[int]] = {}
        rows = []
        for e in edges.variants[1:]:
            row = seen.get(id(e))
            if row is None:
                row = seen[id(e)] = _loop_fields(e.gemm) + _loop_fields(e.reset)
            rows.append(row)
        kern = edges.__dict__["_variant_kernels"] = np.array(rows, dtype=np.int64).reshape(
            len(edges.variants) - 1, 2, len(LOOP_FIELDS))
        kern.setflags(write=False)
    return kern


@lru_cache(maxsize=64)
def _epilogue(ops: tuple[AluOp, ...]) -> np.ndarray:
    """(3, E) ALU opcodes, immediates and sources (0 imm, 1 bias, 2 residual GEMM) of an
    epilogue (read-only, shared)."""
    epi = np.array([[ALU_OPS.get(a.op, 0) for a in ops], [a.imm for a in ops],
                    [SOURCES.index(a.src) for a in ops]], dtype=np.int64).reshape(3, -1)
    epi.setflags(write=False)
    return epi


def _spec(m: Mapping, hw: HwConfig, u: Uops) -> tuple:
    """`access.spec` of `m` at its DRAM bases (scalars, loop tables, variant table), plus the uop
    region's base (elements). Kept on the (frozen) mapping for the last `hw` and plan `u` (a config
    measured again: its mapping is cached, `producer.row_mapping`); shared, so never written."""
    got = m.__dict__.get("_spec")
    if got is not None and got[0] is hw and got[1] is u:
        return got[2]
    bases, uop_base = dram_bases(m, hw)
    sc = (*spec(m, bases, -1 if u.ring.start is None else u.ring.start, hw.wgt_depth), uop_base)
    m.__dict__["_spec"] = (hw, u, sc)
    return sc


def legal(m: Mapping, hw: HwConfig) -> Mapping:
    """`m`, or InvalidSchedule naming the first legality rule it breaks (`mapping.legality`)."""
    bad = violations(m, hw)
    if bad:
        raise InvalidSchedule(bad[0][1])
    return m


def lower_program(m: Mapping, hw: HwConfig) -> Lowered:
    """The whole program of `m`: every pair, in order, and the tail."""
    legal(m, hw)
    u = uop_plan(m, hw.uop_depth)
    rows = _rows(m, np.arange(m.n_pairs, dtype=np.int64), u, _spec(m, hw, u))
    return Lowered(rows, uop_array(m, u.first, hw.wgt_depth, u.origin), m)


_H, _W, _CO = AXIS["h"], AXIS["w"], AXIS["co"]  # compile-time constants of `_pair_classes`


@njit(cache=True)
def _pair_classes(sc, scv, loops, threads, steady, n_rows, ring_start, special):  # pragma: no cover - compiled
    """`emit.classes` of the pairs of the spec (`access.spec`) in one compiled call: the pad classes
    of the first pair loop of each of h, w, co (`access.pad_classes`; an axis walked inside the
    reduction, `Mapping.inner_loops`, is alike in every pair: one class), the place values of the
    operands loaded outside the reduction, the ring's `n_rows` rows from `ring_start`."""
    h_loop, w_loop, co_loop = -1, -1, -1
    for lp in range(loops.shape[0] - 1, -1, -1):  # backwards: the first loop of each axis is kept
        ax = loops[lp, 2]
        if ax == _H:
            h_loop = lp
        elif ax == _W:
            w_loop = lp
        elif ax == _CO:
            co_loop = lp
    hc, wc, cc = pad_classes(sc, scv, loops, threads, h_loop, w_loop, co_loop)
    n_places = (1 if sc[INP_PLACE] else 0) + (1 if sc[WGT_PLACE] else 0)
    places = np.empty(n_places, np.int64)
    if sc[INP_PLACE]:
        places[0] = sc[INP_PLACE]
    if sc[WGT_PLACE]:
        places[n_places - 1] = sc[WGT_PLACE]
    return classes(sc[NP], hc, loops[h_loop, 1] if h_loop >= 0 else 1, wc, loops[w_loop, 1] if w_loop >= 0 else 1,
                   cc, loops[co_loop, 1] if co_loop >= 0 else 1, places, steady, n_rows, ring_start, special)


@njit(cache=True)
def _span_pairs(sc, pairs, pair_class):  # pragma: no cover - compiled
    """The pairs not written whose rows reach furthest in DRAM: an operand loaded outside the
    reduction is loaded at the pairs j % place == 0 (`access.loaded`), and its last load, at the
    furthest tiles of the pairs loading it (every DMA's DRAM offset grows with the tile indices,
    `access`), may fall in a pair whose class another pair stands for."""
    out = np.empty(2, np.int64)
    n = 0
    for place in (sc[INP_PLACE], sc[WGT_PLACE]):
        if place > 0:
            j = (sc[NP] - 1) // place * place
            if pairs[pair_class[j]] != j and (n == 0 or out[0] != j):
                out[n] = j
                n += 1
    return out[:n]


#: Sub-steps (reduction steps x ACC slots) from which `lower_blocks` writes a pair sub-step by sub-step
#: (the step form): with 3 the last may repeat the second; below, the pair is one block (as the full program).
MIN_STEPS = 3


def lower_blocks(m: Mapping, hw: HwConfig, *, borrow: bool = False) -> PairBlocks:
    """The program of `m` as `PairBlocks`: one pair per class of identical pairs is emitted, so
    the cost does not grow with the number of tiles. `borrow`: the rows may be rows of this thread's
    emitter scratch (not to be written), valid until its next lowering (a caller that times them at
    once saves their copy: `evaluate.run`)."""
    u = uop_plan(m, hw.uop_depth)
    ring = u.ring
    sc = _spec(m, hw, u)
    args = (*_emit_args(m, u, sc), ring.steady(m.n_pairs), ring.load.shape[0],
            -1 if ring.start is None else ring.start, u.special, MIN_STEPS)
    rows, block_start, seq, periods, n_insns, U, _, _ = _into_scratch(_lower, args, _BLOCK_SCRATCH_ROWS, borrow)
    return PairBlocks(rows=rows, block_start=block_start, pair_class=seq, n_insns=int(n_insns),
                      periods=periods, steps=int(U))


@njit(cache=True)
def _lower(sc, scv, loops, threads, inner, gemm, reset, variants, epi, sizes, uses, kvar, load, bgn, first_pair,
           dram_off, uop_base, n_lift, preload, early, steady, ring_m, ring_start, special, min_steps, out, mode,
           dirty):  # pragma: no cover - compiled
    """`lower_blocks` from the spec and the micro-op plan in one compiled call (`_emit_rows`' arguments
    but the pairs; the ring's steadiness, rows and period start; `Uops.special`): the classes of
    identical pairs (edge tiles: the pairs that load a kernel first are their own), one member of each
    written (`K·C` >= `min_steps` sub-steps: unit by unit, see `emit`), the span pairs for the
    footprint, the blocks. Returns (rows, block_start, block sequence, periods, instructions of the
    full program, units per pair, n, dirty) (n, dirty: `_emit_rows`')."""
    P, K, C = sc[NP], sc[NK], sc[NC]
    pairs, pair_class = _pair_classes(sc, scv, loops, threads, steady, ring_m, ring_start, special)
    U = (K + 1) * C if K * C >= min_steps else 1  # K·C sub-steps, the rest, C - 1 empty units
    span = _span_pairs(sc, pairs, pair_class)
    if span.shape[0]:
        pairs = np.concatenate((pairs, span))
    rows, units, rep, n, dirty = _emit_rows(pairs, sc, scv, loops, threads, inner, gemm, reset, variants, epi, sizes,
                                            uses, kvar, load, bgn, first_pair, dram_off, uop_base, n_lift, preload,
                                            early, U, span.shape[0], out, mode, dirty)
    if n < 0:  # `out` may be too short
        return rows, pair_class, pair_class, pair_class, 0, U, n, dirty
    extra = ring_m - ring_start if not steady and ring_start >= 0 else 0
    block_start, seq, periods, n_insns, U = _finish(units, rep, pair_class, loops, inner, P, extra, K, C, U,
                                                    min_steps)
    return rows, block_start, seq, periods, n_insns, U, n, dirty


@njit(cache=True)
def _finish(units, rep, pair_class, loops, inner, P, extra, K, NC, U, min_steps):  # pragma: no cover - compiled
    """The rest of `lower_blocks` from `emit`'s units in one compiled call: (block_start, the block
    sequence, periods, instructions of the full program, units per pair). Sub-step units become
    whole steps when no sub-step repeats (`emit.step_units`; one block below `min_steps` steps)."""
    if NC > 1 and U > 1:
        units, rep = step_units(units, rep, NC)
        if units.shape[1] == K + 1:  # no sub-step repeats: whole steps, as many as the step form takes
            NC = 1
            if K < min_steps:
                units = units.sum(axis=1).reshape(-1, 1)
        U = units.shape[1]
    if U == 1:
        block_start, n_insns, periods = block_tail(units[:, 0].copy(), pair_class, loops, P, extra)
        return block_start, pair_class, periods, n_insns, U
    _, n_insns, periods = block_tail(pair_rows(units, rep), pair_class, loops, P, extra)
    block_start, seq, periods = step_blocks(units, rep, pair_class, periods, NC, inner)
    return block_start, seq, periods, n_insns, U


__all__ = ["Lowered", "PairBlocks", "lower_program", "lower_blocks", "regions", "dram_bases"]
