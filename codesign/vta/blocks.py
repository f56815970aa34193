"""The timing fast path: a layer's program as blocks of identical pairs, built in compiled code.

`timing.time_blocks` times a program given as one block of instruction rows per class of
identical pairs (pairs that differ only in DRAM offsets: same INP padding, same micro-op loads)
plus the sequence of classes; with its periodic fast-forward the cost no longer grows with the
number of tiles. This module builds that input for `measure_seconds` without assembling the
whole program: `compile_blocks` classifies the pairs (`layout.pad_classes`, the uop ring) and
`_emit` writes the rows of one member of each class, row for row what `compiler.assemble`
writes for those pairs (the compiler docstring is the reference for the stream; a test
compares both row by row, and `time_blocks` with `time_program` on every valid config).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from codesign.hw.config import HwConfig
from codesign.schedule.knobs import Config, KnobValue
from codesign.vta import isa
from codesign.vta.compiler import CLIP_MAX, _check_shift, _dram_bases, ring_schedule, uop_uses
from codesign.vta.layout import base_plan, pad_classes
from codesign.workloads.layers import Layer

C = isa.COL
NF = isa.N_FIELDS
#: Templates whose programs `compile_blocks` emits (the others go through `compile_insns`).
BLOCK_TEMPLATES = ("conv2d_packed.vta", "dense_packed.vta")


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


# Scalar inputs of `_emit`, in this order.
_SCALARS = ("P", "K", "T", "G", "inp_pt", "wgt_pt", "acc_pt", "shift", "clip",
            "nb", "nh_t", "nco_t", "nw", "ont", "tb", "th", "tw", "tci", "tco", "hin", "win",
            "H", "W", "OH", "OW", "CIB", "COB", "s", "p", "kk",
            "inp_y", "inp_x", "inp_stride", "wgt_y", "wgt_x", "wgt_stride", "st_y", "st_x", "st_stride",
            "inp_base", "wgt_base", "out_base", "uop_base")
_LOOP = ("iter_out", "iter_in", "dst_factor_out", "dst_factor_in", "src_factor_out",
         "src_factor_in", "wgt_factor_out", "wgt_factor_in")
_COLS = np.array([C[f] for f in ("opcode", "memory_type", "sram_base", "dram_base", "y_size", "x_size",
                                 "x_stride", "y_pad_0", "y_pad_1", "x_pad_0", "x_pad_1", "pop_prev_dep",
                                 "pop_next_dep", "push_prev_dep", "push_next_dep", "reset_reg", "uop_bgn",
                                 "uop_end", "alu_opcode", "use_imm", "imm")]
                 + [C[f] for f in _LOOP], dtype=np.int64)
_OPS = np.array([isa.OP_LOAD, isa.OP_STORE, isa.OP_GEMM, isa.OP_FINISH, isa.OP_ALU, isa.MEM_UOP, isa.MEM_WGT,
                 isa.MEM_INP, isa.MEM_OUT, isa.ALU_SHR, isa.ALU_MIN, isa.ALU_MAX], dtype=np.int64)


@njit(cache=True)
def _classes(hc, wc, P, nco_t, nw, steady, m, ring_start):  # pragma: no cover - compiled
    """Classes of identical pairs: same INP padding (h0' class, w0 class), same uop loads (ring
    row), plus the first and the last pair (own tokens). Returns (one member of each class in
    program order, the class = block index of every pair + the tail block)."""
    n_w = wc.max() + 1
    n_u = 1 if steady else m
    n_code = (hc.max() + 1) * n_w * n_u
    codes = np.empty(P, np.int64)
    for j in range(P):
        w0 = j % nw
        h0i = (j // (nw * nco_t)) % hc.shape[0]
        u = 0
        if not steady:
            u = j
            if ring_start >= 0 and j >= m:
                u = ring_start + (j - m) % (m - ring_start)
        codes[j] = (hc[h0i] * n_w + wc[w0]) * n_u + u
    codes[P - 1] = n_code + 1
    codes[0] = n_code
    block = np.full(n_code + 2, -1, np.int64)
    members = np.empty(P, np.int64)
    n_blocks = 0
    for j in range(P):  # blocks numbered in order of first appearance: members are sorted
        if block[codes[j]] < 0:
            block[codes[j]] = n_blocks
            members[n_blocks] = j
            n_blocks += 1
    pair_class = np.empty(P + 1, np.int64)
    for j in range(P):
        pair_class[j] = block[codes[j]]
    pair_class[P] = n_blocks
    return members[:n_blocks].copy(), pair_class


@njit(cache=True)
def _kernel_use(out, r, opcode, load, bgn, size, dram, cols, ops):  # pragma: no cover - compiled
    """A compute instruction (`opcode`) using the micro-op kernel of `size` uops at uop SRAM
    `bgn`, preceded by the kernel's LOAD UOP from DRAM `dram` when the ring loads it there
    (`load`); the rows go to `out` from row `r`. Returns the row of the compute instruction
    (its caller fills the remaining fields and advances past it). Numba inlines it into `_emit`."""
    if load:
        out[r, cols[0]] = ops[0]  # LOAD
        out[r, cols[1]] = ops[5]  # MEM_UOP
        out[r, cols[2]] = bgn
        out[r, cols[3]] = dram
        out[r, cols[4]] = 1
        out[r, cols[5]] = size
        out[r, cols[6]] = size
        r += 1
    out[r, cols[0]] = opcode
    out[r, cols[16]] = bgn  # uop_bgn
    out[r, cols[17]] = bgn + size  # uop_end
    return r


@njit(cache=True)
def _emit(pairs, sc, gloop, rloop, sizes, uses, load, bgn, ring_start, dram_off, cols, ops, out):  # pragma: no cover
    """Rows of the pairs `pairs` (program order) plus the 3 tail rows into `out` (zeroed);
    returns the row count of each pair. Mirrors `compiler.assemble` (see its docstring)."""
    P, K, T, G = sc[0], sc[1], sc[2], sc[3]
    inp_pt, wgt_pt, acc_pt, shift, clip = sc[4], sc[5], sc[6], sc[7], sc[8]
    nh_t, nco_t, nw, ont = sc[10], sc[11], sc[12], sc[13]
    tb, th, tw, tci, tco, hin, win = sc[14], sc[15], sc[16], sc[17], sc[18], sc[19], sc[20]
    H, W, OH, OW, CIB, COB, s, p, kk = sc[21], sc[22], sc[23], sc[24], sc[25], sc[26], sc[27], sc[28], sc[29]
    inp_y, inp_x, inp_st, wgt_y, wgt_x, wgt_st = sc[30], sc[31], sc[32], sc[33], sc[34], sc[35]
    st_y, st_x, st_st = sc[36], sc[37], sc[38]
    inp_base, wgt_base, out_base, uop_base = sc[39], sc[40], sc[41], sc[42]
    c_op, c_mem, c_sram, c_dram, c_y, c_x, c_st = cols[0], cols[1], cols[2], cols[3], cols[4], cols[5], cols[6]
    c_yp0, c_yp1, c_xp0, c_xp1 = cols[7], cols[8], cols[9], cols[10]
    c_pp, c_pn, c_hp, c_hn, c_rst = cols[11], cols[12], cols[13], cols[14], cols[15]
    c_aop, c_imm_on, c_imm = cols[18], cols[19], cols[20]
    OP_LOAD, OP_STORE, OP_GEMM, OP_FINISH, OP_ALU = ops[0], ops[1], ops[2], ops[3], ops[4]
    MEM_UOP, MEM_WGT, MEM_INP, MEM_OUT = ops[5], ops[6], ops[7], ops[8]
    m = load.shape[0]
    counts = np.zeros(pairs.shape[0], np.int64)
    r = 0
    for q in range(pairs.shape[0]):
        j = pairs[q]
        r0 = r
        u = j
        if ring_start >= 0 and j >= m:
            u = ring_start + (j - m) % (m - ring_start)
        w0 = j % nw
        co0i = (j // nw) % nco_t
        h0i = (j // (nw * nco_t)) % nh_t
        bo = j // (nw * nco_t * nh_t)
        b0 = bo * tb
        use = 0
        for k in range(K):
            for t in range(T):
                h0 = (t // ont) * nh_t + h0i
                co0 = (t % ont) * nco_t + co0i
                hs = h0 * th * s - p
                ws = w0 * tw * s - p
                chan = b0 * CIB + k * tci
                out[r, c_op] = OP_LOAD
                out[r, c_mem] = MEM_INP
                out[r, c_sram] = t * inp_pt
                if p > 0:
                    yp0 = max(-hs, 0)
                    yp1 = max(hs + hin - H, 0)
                    xp0 = max(-ws, 0)
                    xp1 = max(ws + win - W, 0)
                    out[r, c_dram] = inp_base + (chan * H + hs + yp0) * W + ws + xp0
                    out[r, c_y] = hin - yp0 - yp1
                    out[r, c_x] = win - xp0 - xp1
                    out[r, c_st] = W
                    out[r, c_yp0] = yp0
                    out[r, c_yp1] = yp1
                    out[r, c_xp0] = xp0
                    out[r, c_xp1] = xp1
                else:
                    out[r, c_dram] = inp_base + (chan * H + hs) * W + ws
                    out[r, c_y] = inp_y
                    out[r, c_x] = inp_x
                    out[r, c_st] = inp_st
                out[r, c_pn] = 0 if (j == 0 and k == 0) else 1
                r += 1
                out[r, c_op] = OP_LOAD
                out[r, c_mem] = MEM_WGT
                out[r, c_sram] = t * wgt_pt
                out[r, c_dram] = wgt_base + (co0 * tco * CIB + k * tci) * kk
                out[r, c_y] = wgt_y
                out[r, c_x] = wgt_x
                out[r, c_st] = wgt_st
                out[r, c_hn] = 1
                r += 1
            for _t in range(T):
                for phase in range(2):
                    if phase == 0 and k > 0:
                        continue
                    for b in range(G):
                        r = _kernel_use(out, r, OP_GEMM, load[u, use], bgn[u, use], sizes[uses[use]],
                                        dram_off[uses[use]] + uop_base, cols, ops)
                        lp = rloop if phase == 0 else gloop
                        for f in range(8):
                            out[r, cols[21 + f]] = lp[f]
                        if phase == 0:
                            out[r, c_rst] = 1
                            out[r, c_pn] = 1 if (b == 0 and j != 0) else 0
                        else:
                            out[r, c_pp] = 1 if b == 0 else 0
                            out[r, c_hp] = 1 if (b == G - 1 and not (j == P - 1 and k == K - 1)) else 0
                        r += 1
                        use += 1
        for _t in range(T):
            for o in range(3):
                r = _kernel_use(out, r, OP_ALU, load[u, use], bgn[u, use], sizes[uses[use]],
                                dram_off[uses[use]] + uop_base, cols, ops)
                out[r, cols[21]] = 1
                out[r, cols[22]] = acc_pt
                out[r, cols[24]] = 1
                out[r, cols[26]] = 1
                out[r, c_imm_on] = 1
                out[r, c_aop] = ops[9 + o]
                out[r, c_imm] = shift if o == 0 else (clip if o == 1 else 0)
                out[r, c_hn] = 1 if o == 2 else 0
                r += 1
                use += 1
        for t in range(T):
            h0 = (t // ont) * nh_t + h0i
            co0 = (t % ont) * nco_t + co0i
            out[r, c_op] = OP_STORE
            out[r, c_mem] = MEM_OUT
            out[r, c_sram] = t * acc_pt
            out[r, c_dram] = out_base + ((b0 * COB + co0 * tco) * OH + h0 * th) * OW + w0 * tw
            out[r, c_y] = st_y
            out[r, c_x] = st_x
            out[r, c_st] = st_st
            out[r, c_pp] = 1
            out[r, c_hp] = 0 if (j == P - 1 and t < T - 1) else 1
            r += 1
        counts[q] = r - r0
    # Final synchronization (docs/vta.md §2.6, §5.4 Synchronize).
    out[r, c_op] = OP_LOAD
    out[r, c_mem] = MEM_INP
    out[r, c_hn] = 1
    out[r + 1, c_op] = OP_LOAD
    out[r + 1, c_mem] = MEM_UOP
    out[r + 1, c_pp] = 1
    out[r + 1, c_pn] = 1
    out[r + 2, c_op] = OP_FINISH
    return counts


def compile_blocks(layer: Layer, config: Config | dict[str, KnobValue], hw: HwConfig, *, shift: int = 8
                   ) -> PairBlocks:
    """The program `compiler.compile_insns` builds, as `PairBlocks`: one pair per class of
    identical pairs is emitted, so the cost does not grow with the number of tiles."""
    plan = base_plan(layer, config, hw)
    P, K, T, G = plan.n_pairs, plan.n_steps, plan.n_threads, plan.n_batch
    nb, nh_t, nco_t, nw = plan.grid
    sizes, uses, order = uop_uses(plan)
    ring = ring_schedule(sizes, uses, P, hw.uop_depth)
    steady = ring.steady(P)

    hc, wc = pad_classes(plan)
    ring_start = -1 if ring.start is None else ring.start
    pairs, pair_class = _classes(hc, wc, P, nco_t, nw, steady, ring.load.shape[0], ring_start)
    (a_in, a_w, a_out), a_uop = _dram_bases(plan, hw)
    g, info, geo = plan.dma_shape, plan.info, plan.geo
    vals = {
        "P": P, "K": K, "T": T, "G": G, "inp_pt": plan.inp_per_thread, "wgt_pt": plan.wgt_per_thread,
        "acc_pt": plan.acc_per_thread, "shift": _check_shift(shift), "clip": CLIP_MAX,
        "nb": nb, "nh_t": nh_t, "nco_t": nco_t, "nw": nw, "ont": info["oc_nthread"],
        "tb": info["tile_b"], "th": info["tile_h"], "tw": info["tile_w"], "tci": info["tile_ci"],
        "tco": info["tile_co"], "hin": info["hin_t"], "win": info["win_t"],
        "H": geo.height, "W": geo.width, "OH": geo.out_h, "OW": geo.out_w, "CIB": geo.ci, "COB": geo.co,
        "s": geo.stride, "p": geo.pad, "kk": geo.kh * geo.kw,
        "inp_y": g["inp_y_size"], "inp_x": g["inp_x_size"], "inp_stride": g["inp_x_stride"],
        "wgt_y": g["wgt_y_size"], "wgt_x": g["wgt_x_size"], "wgt_stride": g["wgt_x_stride"],
        "st_y": g["store_y_size"], "st_x": g["store_x_size"], "st_stride": g["store_x_stride"],
        "inp_base": a_in // hw.inp_elem_bytes, "wgt_base": a_w // hw.wgt_elem_bytes,
        "out_base": a_out // hw.out_elem_bytes, "uop_base": a_uop // isa.UOP_BYTES,
    }
    sc = np.array([vals[k] for k in _SCALARS], dtype=np.int64)
    gloop = np.array([getattr(plan.gemm, f) for f in _LOOP], dtype=np.int64)
    rloop = np.array([getattr(plan.reset, f) for f in _LOOP], dtype=np.int64)
    dram_off = np.zeros(len(sizes), dtype=np.int64)
    dram_off[order] = np.concatenate([[0], np.cumsum(sizes[order])[:-1]])
    R = 2 * T * K + G * T * (K + 1) + 4 * T
    n_rows = len(pairs) * (R + len(uses)) + 3
    out = np.zeros((n_rows, NF), dtype=np.int64)
    counts = _emit(pairs, sc, gloop, rloop, sizes, uses, ring.load, ring.bgn, ring_start, dram_off, _COLS,
                   _OPS, out)
    end = int(counts.sum())
    rows = out[:end + 3]
    block_start = np.concatenate([[0], np.cumsum(counts), [end + 3]]).astype(np.int64)
    periods = {nw * nco_t * nh_t, nw * nco_t, nw, 2, 1}
    if not steady and ring.start is not None:
        periods.add(ring.load.shape[0] - ring.start)
    return PairBlocks(
        rows=rows, block_start=block_start, pair_class=pair_class,
        periods=np.array(sorted((c for c in periods if c < P), reverse=True), dtype=np.int64),
        n_insns=P * R + ring.n_loads(P) + 3)


__all__ = ["BLOCK_TEMPLATES", "PairBlocks", "compile_blocks"]
