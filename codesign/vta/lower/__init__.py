"""Lowering: `Mapping` → the VTA program, once (docs/architecture.md).

`access` computes every DMA field from the mapping's loop order and residency, `uops` the
micro-op kernels and the runtime's ring cache, `emit` writes the instruction rows of any pairs.
`lower_program` is every pair (the instruction matrix); `lower_blocks` is one pair per class of
identical pairs (the block form `timing.time_blocks` times with periodic fast-forward), so the
full matrix is exactly the block form expanded (tests/test_timing_fast.py)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from codesign.errors import InvalidSchedule
from codesign.hw.config import HwConfig
from codesign.mapping.legality import violations
from codesign.mapping.mapping import Mapping
from codesign.vta import isa
from codesign.vta.lower.access import load_places, pad_classes, spec
from codesign.vta.lower.emit import ALU_OPS, COLS, DMA_COLS, LOOP_FIELDS, classes, emit
from codesign.vta.lower.uops import Uops, uop_array, uop_plan
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
    block the tail); `pair_class[j]` is the block pair j runs (last entry: the tail)."""

    rows: np.ndarray
    block_start: np.ndarray
    pair_class: np.ndarray
    periods: np.ndarray  # candidate periods in pairs for the fast-forward, largest first
    n_insns: int         # instructions of the full program


def regions(m: Mapping, hw: HwConfig) -> list[tuple[str, int, int, str]]:
    """(name, bytes, alignment, role) of the data, weight and output regions, in DRAM order."""
    g = m.geo
    n_in, n_w, n_out = (g.b * m.inp_channels * g.height * g.width, g.co * g.ci * g.kh * g.kw,
                        g.b * g.co * g.out_h * g.out_w)
    return [("data", n_in * hw.inp_elem_bytes, hw.inp_elem_bytes, "input"),
            ("weight", n_w * hw.wgt_elem_bytes, hw.wgt_elem_bytes, "input"),
            ("output", n_out * hw.out_elem_bytes, hw.out_elem_bytes, "output")]


def dram_bases(m: Mapping, hw: HwConfig) -> tuple[tuple[int, int, int], int]:
    """Element offsets of data/weight/output and of the uop region: `DramAllocator` places them
    (the one allocator; `compile_layer` allocates the same regions with their data)."""
    alloc = DramAllocator()
    addrs = [alloc.alloc(*r).addr for r in regions(m, hw)]
    uop = alloc.alloc("uop", 0, isa.UOP_BYTES, "uop").addr
    widths = (hw.inp_elem_bytes, hw.wgt_elem_bytes, hw.out_elem_bytes)
    return tuple(a // w for a, w in zip(addrs, widths)), uop // isa.UOP_BYTES


def _rows(m: Mapping, hw: HwConfig, pairs: np.ndarray, u: Uops, sc: tuple) -> tuple[np.ndarray, np.ndarray]:
    """(rows of `pairs` + tail, row count of each pair); `sc` = `access.spec` of `m`."""
    tl, T, K, G = m.tile, m.n_threads, m.n_steps, m.tile.b
    max_rows = 2 * T * K + G * T * (K + 1) + (len(m.epilogue) + 1) * T + len(u.uses)
    out = np.zeros((len(pairs) * max_rows + 3, isa.N_FIELDS), dtype=np.int64)
    loop = np.array([[getattr(k, f) for f in LOOP_FIELDS] for k in (m.gemm, m.reset)], dtype=np.int64)
    counts = emit(pairs, m.n_pairs, K, T, G, np.array([tl.inp_sram, tl.wgt_sram, tl.acc_sram], dtype=np.int64),
                  sc[0], sc[1], sc[2], loop[0], loop[1], np.array([ALU_OPS[a.op] for a in m.epilogue], dtype=np.int64),
                  np.array([a.imm for a in m.epilogue], dtype=np.int64), u.sizes, u.uses, u.ring.load, u.ring.bgn,
                  -1 if u.ring.start is None else u.ring.start, u.dram_off + sc[3], COLS, DMA_COLS, out)
    return out[:int(counts.sum()) + 3], counts


def _spec(m: Mapping, hw: HwConfig) -> tuple:
    """`access.spec` of `m` at its DRAM bases, plus the uop region's base (elements)."""
    bases, uop_base = dram_bases(m, hw)
    return (*spec(m, bases), uop_base)


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
    rows, _ = _rows(m, hw, np.arange(m.n_pairs, dtype=np.int64), u, _spec(m, hw))
    return Lowered(rows, uop_array(m, u.first), m)


def lower_blocks(m: Mapping, hw: HwConfig) -> PairBlocks:
    """The program of `m` as `PairBlocks`: one pair per class of identical pairs is emitted, so
    the cost does not grow with the number of tiles."""
    P, T = m.n_pairs, m.n_threads
    u = uop_plan(m, hw.uop_depth)
    steady = u.ring.steady(P)
    loops = m.pair_loops
    sc = _spec(m, hw)
    h_loop, w_loop = (next(i for i, lp in enumerate(loops) if lp.axis == a) for a in ("h", "w"))
    hc, wc = pad_classes(sc[0], sc[1], sc[2], h_loop, w_loop)
    places = {op: p for op, p in load_places(m).items() if p}
    ring_start = -1 if u.ring.start is None else u.ring.start
    pairs, pair_class = classes(P, hc, sc[1][h_loop, 1], wc, sc[1][w_loop, 1],
                                np.array(list(places.values()), dtype=np.int64), steady, u.ring.load.shape[0],
                                ring_start)
    rows, counts = _rows(m, hw, pairs, u, sc)
    end = int(counts.sum())
    periods = set((sc[1][:, 0] * sc[1][:, 1]).tolist()) | {2, 1}
    if not steady and u.ring.start is not None:
        periods.add(u.ring.load.shape[0] - u.ring.start)
    K, G, E = m.n_steps, m.tile.b, len(m.epilogue)
    loads = sum(T * (P * K if not places.get(op) else P // places[op]) for op in ("inp", "wgt"))
    n_insns = loads + P * T * (G * (K + 1) + E + 1) + u.ring.n_loads(P) + 3
    return PairBlocks(
        rows=rows, block_start=np.concatenate([[0], np.cumsum(counts), [end + 3]]).astype(np.int64),
        pair_class=pair_class, n_insns=n_insns,
        periods=np.array(sorted((c for c in periods if c < P), reverse=True), dtype=np.int64))


__all__ = ["Lowered", "PairBlocks", "lower_program", "lower_blocks", "regions", "dram_bases"]
