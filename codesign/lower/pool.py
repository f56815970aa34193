"""Max and average pools on VTA's ALU (docs/vta.md §7.9): the instruction rows and micro-ops.

int8 data reaches the accumulator only through a GEMM, so each tile of output rows is
    LOAD INP   the input rows it reads, full width, zero-padded by the DMA (pads ≤ 15)
    GEMM       reset of the tile's ACC rows, then INP · I (the identity WGT block, loaded once)
    ALU        max pool: MIN −128 on the pad positions (the reference pads with −128), ADD −128 on
               the output rows (after the reset they hold 0); then per window offset (di, dj) one
               MAX (avg: ADD) of the output rows with the input rows it covers (iter_out over
               output rows, iter_in over columns, strides as factors); avg: ADD 2^(p−1), SHR p,
               MIN 127, MAX −128
    STORE      the output rows
one channel block of one batch block per tile, `rows` output rows (the most that divide the
output height and fit INP and ACC), tiles alternating between two SRAM slots when two fit (so
the next tile's LOAD and the last one's STORE overlap this one's ALU work). Tokens as in `emit`
with a virtual thread per slot: the load pops g2l of the GEMM of the tile two back (it
overwrites that tile's INP rows), the GEMM pops l2g and pushes g2l, the reset pops s2g of the
STORE two tiles back (it overwrites the rows that STORE reads), the last ALU op pushes g2s. Every micro-op is loaded once, by the first compute instruction.
A window offset is one ALU instruction of one micro-op, so consecutive micro-ops never write
the same ACC row (docs/vta.md §3.9).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from codesign.hw.config import HwConfig
from codesign.mapping.batch import MAX_DMA_FIELD, MAX_ITER
from codesign.vta import isa
from codesign.vta.program import DramAllocator

MAX_PAD = 15  # DMA pad fields are 4 bits (docs/vta.md §1.3)


@dataclass(frozen=True)
class PoolShape:
    """A square pool on packed int8 data, in hardware units (blocks for b and c)."""

    kind: str     # "max" or "avg"
    b: int        # batch blocks
    c: int        # channel blocks
    height: int
    width: int
    kernel: int
    stride: int
    pad: int
    shift: int = 0  # avg: the window sum, + 2^(shift-1), >> shift

    @property
    def out_h(self) -> int:
        return (self.height + 2 * self.pad - self.kernel) // self.stride + 1

    @property
    def out_w(self) -> int:
        return (self.width + 2 * self.pad - self.kernel) // self.stride + 1

    @property
    def win(self) -> int:
        return self.width + 2 * self.pad

    def hin(self, rows: int) -> int:
        return (rows - 1) * self.stride + self.kernel


def tile_rows(p: PoolShape, hw: HwConfig) -> tuple[int, int] | None:
    """(output rows per tile, SRAM slots): the most rows that divide the output height and fit
    INP, ACC and the instruction fields twice (two slots: the next tile loads while this one
    computes and the last one stores), else once; None if not even one row fits."""
    for slots in (2, 1):
        for rows in range(p.out_h, 0, -1):
            if p.out_h % rows:
                continue
            area = p.hin(rows) * p.win
            acc = area + rows * p.out_w
            if (slots * area <= hw.inp_depth and slots * acc <= hw.acc_depth and acc <= MAX_ITER
                    and max(p.width, rows * p.out_w) <= MAX_DMA_FIELD):
                return rows, slots
    return None


def pool_regions(p: PoolShape, hw: HwConfig) -> list[tuple[str, int, int, str]]:
    """(name, bytes, alignment, role) of the data, identity and output regions, in DRAM order."""
    return [("data", p.b * p.c * p.height * p.width * hw.inp_elem_bytes, hw.inp_elem_bytes, "input"),
            ("identity", hw.wgt_elem_bytes, hw.wgt_elem_bytes, "input"),
            ("output", p.b * p.c * p.out_h * p.out_w * hw.out_elem_bytes, hw.out_elem_bytes, "output")]


@dataclass(frozen=True)
class PoolProgram:
    insns: np.ndarray
    uops: np.ndarray   # (m, 3) [dst, src, wgt], loaded once at DRAM uop base
    rows: int          # output rows per tile
    slots: int         # SRAM slots the tiles rotate through


def _alu(comp: list[dict[str, int]], op: int, kern: tuple[int, int], imm: int | None = None, **loops: int) -> None:
    """Append an ALU instruction over the micro-ops `kern` (immediate `imm`, else ACC source)."""
    f = dict(opcode=isa.OP_ALU, alu_opcode=op, uop_bgn=kern[0], uop_end=kern[1], iter_out=1, iter_in=1)
    f.update(loops)
    if imm is not None:
        f.update(use_imm=1, imm=imm)
    comp.append(f)


class _Uops:
    def __init__(self) -> None:
        self.rows: list[tuple[int, int, int]] = []
        self.kernels: dict[tuple, tuple[int, int]] = {}

    def kernel(self, uops: list[tuple[int, int, int]]) -> tuple[int, int]:
        key = tuple(uops)
        if key not in self.kernels:
            self.kernels[key] = (len(self.rows), len(self.rows) + len(uops))
            self.rows += uops
        return self.kernels[key]


def lower_pool(p: PoolShape, hw: HwConfig, rows: int, slots: int = 1) -> PoolProgram:
    """The whole pool program (module docstring); `rows`, `slots` from `tile_rows`."""
    C = isa.COL
    alloc = DramAllocator()
    base = {r[0]: alloc.alloc(*r).addr for r in pool_regions(p, hw)}
    data, ident, out_base = (base["data"] // hw.inp_elem_bytes, base["identity"] // hw.wgt_elem_bytes,
                             base["output"] // hw.out_elem_bytes)
    uop_base = alloc.alloc("uop", 0, isa.UOP_BYTES, "uop").addr // isa.UOP_BYTES
    s, k, pad, win, ow = p.stride, p.kernel, p.pad, p.win, p.out_w
    hin = p.hin(rows)
    area, n_out = hin * win, rows * ow
    u = _Uops()
    out: list[dict[str, int]] = []

    def row(**f: int) -> dict[str, int]:
        out.append(f)
        return f

    n_tiles = p.b * p.c * (p.out_h // rows)
    first_uop = True
    for n in range(n_tiles):
        i, bc = n % (p.out_h // rows), n // (p.out_h // rows)
        # slot n % slots: INP rows at z·area, ACC input rows at a0, output rows at a0 + area
        z = n % slots
        a0 = z * (area + n_out)
        gemm = u.kernel([(a0, z * area, 0)])
        outk = u.kernel([(a0 + area, 0, 0)])
        pad_cols = u.kernel([(a0 + x, 0, 0) for x in list(range(pad)) + list(range(pad + p.width, win))]) if pad else None
        windows = [u.kernel([(a0 + area, a0 + di * win + dj, 0)]) for di in range(k) for dj in range(k)]
        oh0 = i * rows
        hs = oh0 * s - pad
        yp0, yp1 = max(-hs, 0), max(hs + hin - p.height, 0)
        if n == 0:
            row(opcode=isa.OP_LOAD, memory_type=isa.MEM_WGT, sram_base=0, dram_base=ident, y_size=1, x_size=1,
                x_stride=1)
        row(opcode=isa.OP_LOAD, memory_type=isa.MEM_INP, sram_base=z * area,
                 dram_base=data + (bc * p.height + hs + yp0) * p.width, y_size=hin - yp0 - yp1, x_size=p.width,
                 x_stride=p.width, y_pad_0=yp0, y_pad_1=yp1, x_pad_0=pad, x_pad_1=pad,
                 pop_next_dep=1 if n >= slots else 0, push_next_dep=1)  # g2l (WAR), l2g (RAW)
        comp: list[dict[str, int]] = []
        reset = u.kernel([(a0, 0, 0)])
        comp.append(dict(opcode=isa.OP_GEMM, reset_reg=1, uop_bgn=reset[0], uop_end=reset[1], iter_out=1,
                         iter_in=area + n_out, dst_factor_in=1, pop_next_dep=1 if n >= slots else 0))
        comp.append(dict(opcode=isa.OP_GEMM, uop_bgn=gemm[0], uop_end=gemm[1], iter_out=1, iter_in=area,
                         dst_factor_in=1, src_factor_in=1, pop_prev_dep=1,
                         push_prev_dep=1 if n < n_tiles - slots else 0))

        alu = partial(_alu, comp)
        if p.kind == "max":
            if pad_cols is not None:
                alu(isa.ALU_MIN, pad_cols, -128, iter_out=hin, dst_factor_out=win)
            for r0, nr in ((0, yp0), (hin - yp1, yp1)):
                if nr:
                    alu(isa.ALU_MIN, u.kernel([(a0 + r * win, 0, 0) for r in range(r0, r0 + nr)]), -128,
                        iter_in=win, dst_factor_in=1)
            alu(isa.ALU_ADD, outk, -128, iter_in=n_out, dst_factor_in=1)
        op = isa.ALU_MAX if p.kind == "max" else isa.ALU_ADD
        for kern in windows:
            alu(op, kern, None, iter_out=rows, dst_factor_out=ow, src_factor_out=s * win, iter_in=ow,
                dst_factor_in=1, src_factor_in=s)
        if p.kind == "avg":
            if p.shift:
                alu(isa.ALU_ADD, outk, 1 << (p.shift - 1), iter_in=n_out, dst_factor_in=1)
                alu(isa.ALU_SHR, outk, p.shift, iter_in=n_out, dst_factor_in=1)
            alu(isa.ALU_MIN, outk, 127, iter_in=n_out, dst_factor_in=1)
            alu(isa.ALU_MAX, outk, -128, iter_in=n_out, dst_factor_in=1)
        comp[-1]["push_next_dep"] = 1  # g2s
        if first_uop:
            comp.insert(0, dict(opcode=isa.OP_LOAD, memory_type=isa.MEM_UOP, sram_base=0, dram_base=uop_base,
                                y_size=1, x_size=-1, x_stride=-1))
            first_uop = False
        out.extend(comp)
        row(opcode=isa.OP_STORE, memory_type=isa.MEM_OUT, sram_base=a0 + area,
            dram_base=out_base + (bc * p.out_h + oh0) * ow, y_size=rows, x_size=ow, x_stride=ow, pop_prev_dep=1,
            push_prev_dep=1 if (n < n_tiles - slots or n == n_tiles - 1) else 0)  # s2g; the last to the tail
    # Final synchronization, as `emit`'s tail (docs/vta.md §2.6, §5.4).
    row(opcode=isa.OP_LOAD, memory_type=isa.MEM_INP, push_next_dep=1)
    row(opcode=isa.OP_LOAD, memory_type=isa.MEM_UOP, pop_prev_dep=1, pop_next_dep=1)
    row(opcode=isa.OP_FINISH)
    uops = np.array(u.rows, dtype=np.int64).reshape(-1, 3)
    insns = np.zeros((len(out), isa.N_FIELDS), dtype=np.int64)
    for r, f in enumerate(out):
        for name, v in f.items():
            insns[r, C[name]] = v
    first = np.flatnonzero((insns[:, C["opcode"]] == isa.OP_LOAD) & (insns[:, C["memory_type"]] == isa.MEM_UOP))[0]
    insns[first, C["x_size"]] = insns[first, C["x_stride"]] = uops.shape[0]
    return PoolProgram(insns, uops, rows, slots)


__all__ = ["PoolShape", "PoolProgram", "tile_rows", "lower_pool", "pool_regions"]
