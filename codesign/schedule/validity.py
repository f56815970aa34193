"""Validity rules of a VTA schedule (docs/vta.md §7.4), vectorized over many configs.

`check(t)` evaluates every rule on a `MappingBatch` and returns them in order as `Rule`s (a boolean
`ok` array and a message builder); `valid_mask` ANDs them, `first_failure` names the first rule a
single config breaks. Rule order: SRAM capacity, 2-D DMA pattern, padding, micro-op capacity,
instruction field ranges, micro-op dst hazard, virtual-thread divisibility.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from codesign.mapping.batch import MAX_DMA_FIELD, MAX_ITER, MappingBatch
from codesign.mapping.table import MappingTable, Rule, sram
from codesign.workloads.layers import MAX_PAD

__all__ = ["Rule", "check", "first_failure", "table", "valid_mask"]


def table(t: MappingBatch, epilogue_uops: int) -> MappingTable:
    """The shared rules' table of `t`'s configs as the templates map them (`mapping.table`): one
    output tile per thread, INP and WGT loaded at every reduction step, no INP shared by the
    threads, the runtime's micro-op cache; `epilogue_uops`: the requantization's micro-ops."""
    no, one = np.zeros(t.n, dtype=bool), np.ones(t.n, dtype=np.int64)
    return MappingTable(n_threads=t.nthreads, acc_sram=t.acc_sram, inp_sram=t.inp_sram, wgt_sram=t.wgt_sram,
                        inp_shared=no, n_inner=one, inp_stationary=no, wgt_stationary=no, edges=no,
                        uop_preload=no, tile_b=t.tile_b, reset_uops=t.reset["n_uops"], gemm_uops=t.gemm["n_uops"],
                        n_lift=one, epilogue_uops=one * epilogue_uops)


def check(t: MappingBatch) -> list[Rule]:
    hw, g = t.hw, t.geo
    rules: list[Rule] = []

    def add(name: str, ok: np.ndarray, message: Callable[[int], str]) -> None:
        rules.append(Rule(name, np.broadcast_to(np.asarray(ok, dtype=bool), (t.n,)), message))

    # 1. SRAM capacity per virtual thread x nthreads (docs/vta.md §7.4.1), in elements (`mapping.table`).
    tab = table(t, 0)
    for buf in ("acc", "inp", "wgt"):
        r = sram(tab, hw, buf)
        add(r.name, r.ok, r.message)

    # 2. 2-D DMA patterns (docs/vta.md §7.4.2). Weights always fold; a padded INP load is not folded.
    t.patterns()  # the three in one pass
    store = t.store_pattern()
    add("dma_store", store["ok"], lambda i: (
        f"2-D DMA pattern: the STORE of a {t.tile_b[i]}x{t.tile_co[i]}x{t.tile_h[i]}x{t.tile_w[i]} "
        f"(b x co x h x w) tile of a {g.co}x{g.out_h}x{g.out_w} output does not reduce to 2-D "
        "(needs tile_co[1]=1, tile_h=OH or tile_w=OW)"))
    inp = t.inp_pattern()
    add("dma_inp", inp["ok"], lambda i: (
        f"2-D DMA pattern: the INP load of {t.tile_b[i]}x{t.tile_ci[i]}x{t.hin_t[i]}x{t.win_t[i]} "
        f"(b x ci x h x w) from a {g.ci}x{g.height}x{g.width} input does not reduce to 2-D "
        "(needs tile_ci[1]=1, win_t=W, hin_t=H or hin_t=1)"))

    # 3. Padded loads (docs/vta.md §7.4.3): pads only on the 2 spatial dims, 4-bit pad fields.
    if g.pad > 0:
        add("pad_ci", t.tile_ci == 1, lambda i: (
            f"padding: a padded conv (pad={g.pad}) needs tile_ci[1]=1, got {t.tile_ci[i]}"))
        add("pad_b", t.tile_b == 1, lambda i: (
            f"padding: a padded conv (pad={g.pad}) needs tile_b[1]=1, got {t.tile_b[i]}"))
    add("pad_max", np.full(t.n, g.pad <= MAX_PAD), lambda i: (
        f"padding: pad={g.pad} exceeds the 4-bit LOAD pad field (max {MAX_PAD})"))

    # 4. Micro-op capacity (docs/vta.md §7.4.5): every kernel fits the UOP buffer.
    uops = np.maximum(t.gemm["n_uops"], t.reset["n_uops"])
    add("uop_capacity", uops <= hw.uop_depth, lambda i: (
        f"uop capacity: the GEMM kernel unrolls {uops[i]} micro-ops > UOP depth {hw.uop_depth}"))

    # 5. Instruction field ranges (docs/vta.md §1.3, §7.4.6). sram_base, uop indices and the GEMM
    # index factors need no check of their own: every index and every factor of a loop with
    # extent >= 2 stays below the tile's SRAM region, which rule 1 bounds by the buffer depth.
    iters = np.max(np.stack([t.gemm["iter_out"], t.gemm["iter_in"], t.reset["iter_out"],
                             t.reset["iter_in"], t.acc_sram]), axis=0)
    add("field_iter", iters <= MAX_ITER, lambda i: (
        f"field range: a GEMM/ALU loop count {iters[i]} > {MAX_ITER} (14-bit iter_out/iter_in)"))
    wgt = t.wgt_pattern()
    dma_max = np.max(np.stack([p[k] for p in (store, inp, wgt) for k in ("x_size", "y_size", "x_stride")]),
                     axis=0)
    add("field_dma", dma_max <= MAX_DMA_FIELD, lambda i: (
        f"field range: a DMA size or stride {dma_max[i]} > {MAX_DMA_FIELD} (16-bit x_size/y_size/x_stride)"))

    # 6. Micro-op dst hazard (docs/vta.md §3.9, §7.4.4), derived exactly from the kernel (mapping/batch.py).
    hazard = t.gemm["hazard"] | t.reset["hazard"]
    add("uop_hazard", ~hazard, lambda i: (
        f"uop dst hazard: in the unrolled GEMM kernel ({t.gemm['n_uops'][i]} uops, tile_co={t.tile_co[i]}, "
        f"tile_h={t.tile_h[i]}) a micro-op writes the same ACC row as one of the previous two"))

    # 7. Virtual threads (derived): the template splits co0 by oc_nthread and h0 by h_nthread
    # (`s[output].split(x_co0, factor=nthread)`, docs/vta.md §7.3); a remainder would need a guarded
    # partial thread, which the VTA passes cannot lower, so the outer tile counts must divide.
    add("vthread_oc", t.co_tiles % t.oc_nthread == 0, lambda i: (
        f"virtual-thread divisibility: {t.co_tiles[i]} co tile(s) (co {g.co} / tile_co {t.tile_co[i]}) "
        f"not divisible by oc_nthread={t.oc_nthread[i]}"))
    add("vthread_h", t.h_tiles % t.h_nthread == 0, lambda i: (
        f"virtual-thread divisibility: {t.h_tiles[i]} h tile(s) (OH {g.out_h} / tile_h {t.tile_h[i]}) "
        f"not divisible by h_nthread={t.h_nthread[i]}"))
    # "VTA only supports 2 virtual threads" (docs/vta.md §7.3, convolution tutorial): the dependency
    # token scheme double-buffers, so oc_nthread and h_nthread cannot both be 2. No tophub record
    # has both.
    add("vthread_max", t.oc_nthread * t.h_nthread <= 2, lambda i: (
        f"virtual threads: oc_nthread={t.oc_nthread[i]} x h_nthread={t.h_nthread[i]} = "
        f"{t.oc_nthread[i] * t.h_nthread[i]} > 2, the most VTA supports"))
    return rules


def valid_mask(t: MappingBatch) -> np.ndarray:
    mask = np.ones(t.n, dtype=bool)
    for rule in check(t):
        mask &= rule.ok
    return mask


def first_failure(t: MappingBatch, i: int = 0, skip: tuple[str, ...] = ()) -> str | None:
    """Message of the first rule config `i` breaks (rules named in `skip` aside), or None."""
    for rule in check(t):
        if not rule.ok[i] and rule.name not in skip:
            return rule.message(i)
    return None
