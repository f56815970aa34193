"""The one emitter: instruction rows of chosen pairs of a `Mapping` (docs/vta.md §7.3).

Per pair j (one iteration of the pair loops, `Mapping.pair_loops`) with T virtual threads t,
K reduction steps k and G batch blocks b per tile (G = tile_b; the GEMMs run once per block)::

    for k: for c: for t: LOAD INP(t, k, c), LOAD WGT(t, k, c)   [the operands loaded here, `access`]
                  for t: (k == 0: for b: GEMM reset(t, c, b)); for b, i: GEMM(t, k, c, b, i)
    [residual: for t: LOAD INP residual(t) (+ LOAD WGT identity, pair 0 only)]
    for t: the epilogue's steps over the thread's ACC slice ([LOAD ACC bias(t)] ALU ..., the
           residual GEMM between its ALU ops)
    for t: for c: STORE(t, c)
    ... after the last pair: LOAD INP no-op, LOAD UOP no-op, FINISH (docs/vta.md §2.6, §5.4)

with a LOAD UOP before a compute instruction whose kernel the ring does not hold (`uops`); a GEMM of a
tile in the first / last row tile runs its kernel's range without the micro-ops `access.gemm_trim`
names (`pad_skip` on row tiles: the taps above / below the image, `Mapping.gemm_trim`); i runs
over the iterations of the kernel loops lifted into instructions (`Mapping.gemm_lift`, one otherwise).
c walks the C output tiles of the loops inside the reduction (`Mapping.inner_loops`; C = 1 in
the templates), each in its own ACC slot of the thread; the epilogue runs once over the thread's
C slots. Dependency tokens follow from who writes and who reads each SRAM slot (docs/vta.md §2.8): the
load group (j, k, t) writes thread t's INP/WGT slice, so its first load pops g2l pushed by the
GEMM that last read that slice (T groups earlier; none for the first T groups) and its last load
pushes l2g for the GEMM (b = i = 0) that reads it (the last GEMM of the group pushes g2l; with T
slots this orders a ring of any T, docs/vta.md §7.3); the epilogue's last op pushes g2s for the STORE
reading the ACC slice (the thread's first STORE pops it), the thread's last STORE pushes s2g for
the first reset of the next pair of that thread, which overwrites the slice. Load groups are per
(k, c, t) and never empty (`legality` `stationary_both`), so the g2l/l2g pairing is unchanged. A fused residual (docs/vta.md §7.8) is one more load group per thread after
the reduction, with the same tokens as a reduction step (its GEMM pops l2g and pushes g2l; the
last pair's push nothing); LOAD ACC of the bias runs on the compute module, in order, without
tokens. Counts balance: the final no-op pops the last store's s2g and the l2g of
its own LOAD, so the FIFOs are empty at FINISH.

`emit` writes the rows of any list of pairs: all pairs are the program, one member per class of
identical pairs is the block form the cycle model times (`codesign.evaluate.blocks`)."""

from __future__ import annotations

import numpy as np
from numba import njit

from codesign.lower import access as ac
from codesign.mapping.edges import CI_BIT
from codesign.vta import isa
from codesign.vta.timing import dma_span

C = isa.COL
LOOP_FIELDS = ("iter_out", "iter_in", "dst_factor_out", "dst_factor_in", "src_factor_out",
               "src_factor_in", "wgt_factor_out", "wgt_factor_in")
DMA_COLS = np.array([C[f] for f in ("dram_base", "y_size", "x_size", "x_stride", "y_pad_0", "y_pad_1",
                                    "x_pad_0", "x_pad_1")], dtype=np.int64)
COLS = np.array([C[f] for f in ("opcode", "memory_type", "sram_base", "pop_prev_dep", "pop_next_dep",
                                "push_prev_dep", "push_next_dep", "reset_reg", "uop_bgn", "uop_end",
                                "alu_opcode", "use_imm", "imm", "dram_base", "y_size", "x_size", "x_stride")]
                + [C[f] for f in LOOP_FIELDS], dtype=np.int64)
ALU_OPS = {"shr": isa.ALU_SHR, "min": isa.ALU_MIN, "max": isa.ALU_MAX, "add": isa.ALU_ADD}
_OP, _MEM, _SRAM, _POP_P, _POP_N, _PUSH_P, _PUSH_N, _RST, _BGN, _END, _AOP, _IMM_ON, _IMM = range(13)
_LOOP0 = 17
# The blocks of one pair (`pair_order`): kind, thread t, reduction step k, sub-step / residual chunk c.
LOADS, RESET, GEMM, PRE, RES_LOADS, RES_GEMM, POST, STORE = range(8)


@njit(cache=True)
def pair_order(T, K, NC, R, early):  # pragma: no cover - compiled
    """(kind, t, k, c) of every block of one pair, in program order: the one statement of the order
    (the module docstring). The emitter writes the blocks' rows, `uops.use_order` reads the kernels
    they use from it."""
    out = np.empty((K * NC * 3 * T + 2 * T * R + 3 * T, 4), np.int64)
    n = 0
    for k in range(K):
        for c in range(NC):
            for t in range(T):
                out[n] = (LOADS, t, k, c)
                n += 1
            for t in range(T):
                if k == 0:
                    out[n] = (RESET, t, k, c)
                    n += 1
                out[n] = (GEMM, t, k, c)
                n += 1
                if early and k == K - 1 and c == NC - 1:
                    out[n] = (PRE, t, k, c)
                    n += 1
    for t in range(T if not early else 0):
        out[n] = (PRE, t, 0, 0)
        n += 1
    for c in range(R):
        for t in range(T):
            out[n] = (RES_LOADS, t, 0, c)
            n += 1
        for t in range(T):
            out[n] = (RES_GEMM, t, 0, c)
            n += 1
    for t in range(T if R else 0):
        out[n] = (POST, t, 0, 0)
        n += 1
    for t in range(T):
        out[n] = (STORE, t, 0, 0)
        n += 1
    return out[:n]


@njit(cache=True)
def pair_uses(order, G, GL, C, n_pre, R, n_post):  # pragma: no cover - compiled
    """The kernel of each compute instruction of a pair, block by block of `order` (`pair_order`):
    thread t's kernel slot s is kernel t * S + s, S = G·C + GL·C + n_pre + R + n_post: the resets of
    ACC slot c (G, from c·G), its GEMMs (GL, from G·C + c·GL), the epilogue before the residual
    (n_pre), residual chunk c's GEMM, the epilogue after it (n_post) (`uops.use_order`)."""
    S = G * C + GL * C + n_pre + R + n_post
    base = G * C + GL * C  # the epilogue's first slot
    uses = np.empty(order.shape[0] * max(G, GL, n_pre, n_post, 1), np.int64)
    n = 0
    for i in range(order.shape[0]):
        kind, t, c = order[i, 0], order[i, 1], order[i, 3]
        s0, k = 0, 0
        if kind == RESET:
            s0, k = c * G, G
        elif kind == GEMM:
            s0, k = G * C + c * GL, GL
        elif kind == PRE:
            s0, k = base, n_pre
        elif kind == RES_GEMM:
            s0, k = base + n_pre + c, 1
        elif kind == POST:
            s0, k = base + n_pre + R, n_post
        for x in range(k):
            uses[n] = t * S + s0 + x
            n += 1
    return uses[:n]


@njit(cache=True)
def _dma(out, r, fields, opcode, mem, sram):  # pragma: no cover - compiled
    out[r, COLS[_OP]] = opcode
    out[r, COLS[_MEM]] = mem
    out[r, COLS[_SRAM]] = sram
    for f in range(8):
        out[r, DMA_COLS[f]] = fields[f]


@njit(cache=True)
def _uop_load(out, r, sram, dram, size):  # pragma: no cover - compiled
    """A LOAD UOP of `size` micro-ops from DRAM `dram` to uop SRAM `sram`; returns the next row."""
    out[r, COLS[_OP]] = isa.OP_LOAD
    out[r, COLS[_MEM]] = isa.MEM_UOP
    out[r, COLS[_SRAM]] = sram
    out[r, COLS[13]] = dram
    out[r, COLS[14]] = 1
    out[r, COLS[15]] = size
    out[r, COLS[16]] = size
    return r + 1


@njit(cache=True)
def _compute(out, r, uop, seen, opcode, v, j, u, use):  # pragma: no cover - compiled
    """Compute instruction `use` of pair j (ring row u) on tile variant v: its kernel is
    `kvar[uses[use], v]`, preceded by its LOAD UOP when the ring loads it there (or, with edge
    tiles, at the kernel's first use: every kernel stays cached, `uops.uop_plan`). Returns the
    compute instruction's row."""
    sizes, uses, kvar, load, bgn, first_pair, kbgn, uop_dram = uop
    kid = kvar[uses[use], v]
    if first_pair.shape[0] == 0:
        ld, bg = load[u, use], bgn[u, use]
    else:
        ld = first_pair[kid] == j and not seen[kid]
        seen[kid] = True
        bg = kbgn[kid]
    if ld:
        r = _uop_load(out, r, bg, uop_dram[kid], sizes[kid])
    out[r, COLS[_OP]] = opcode
    out[r, COLS[_BGN]] = bg
    out[r, COLS[_END]] = bg + sizes[kid]
    return r


@njit(cache=True)
def _epilogue(out, r, scv, var, tiles, t, o_from, o_to, epi, uop, seen, j, u, use):  # pragma: no cover
    """Thread t's epilogue ALU ops o_from..o_to-1 over its ACC tile (the LOAD ACC of the bias before
    a bias ADD); the last op of the epilogue pushes g2s for the STORE. Returns the next row."""
    sc = scv[var[t]]  # the tile's row of the variant table
    E = epi.shape[1]
    for o in range(o_from, o_to):
        if epi[2, o] == 1:  # the tile's bias blocks: LOAD ACC runs on the compute module, in order
            _dma(out, r, ac.bias_access(sc, tiles[t, 2]), isa.OP_LOAD, isa.MEM_ACC,
                 sc[ac.BIAS_SRAM] + t * sc[ac.TCO])
            r += 1
        r = _compute(out, r, uop, seen, isa.OP_ALU, var[t], j, u, use + o - o_from)
        out[r, COLS[_AOP]] = epi[0, o]
        if epi[2, o] == 1:  # ADD bias[co] over the batch blocks (out) and pixels (in) of each co
            out[r, COLS[_LOOP0]] = sc[ac.TB]
            out[r, COLS[_LOOP0 + 1]] = sc[ac.E_PIX]
            out[r, COLS[_LOOP0 + 2]] = sc[ac.E_CO] * sc[ac.E_PIX]
            out[r, COLS[_LOOP0 + 3]] = 1
        else:  # one uop over the thread's ACC tile (the ALU runs over the tile's ACC elements)
            out[r, COLS[_LOOP0]] = 1
            out[r, COLS[_LOOP0 + 1]] = sc[ac.E_ACC]
            out[r, COLS[_LOOP0 + 3]] = 1
            out[r, COLS[_LOOP0 + 5]] = 1
            out[r, COLS[_IMM_ON]] = 1
            out[r, COLS[_IMM]] = epi[1, o]
        out[r, COLS[_PUSH_N]] = 1 if o == E - 1 else 0  # g2s
        r += 1
    return r


@njit(cache=True)
def emit(pairs, spec, kern, epi, uop, out, opts):  # pragma: no cover
    """Rows of the pairs `pairs` (program order) plus the 3 tail rows into `out` (zeroed), block by
    block of `pair_order`; returns (units, rep): the row count of each unit of each pair and the unit
    whose rows each unit repeats (`opts[3]` = U units per pair: 1, the whole pair, or (K + 1)·C, one per
    sub-step, see below). `spec` = (scalars, variant table, pair,
    thread and inner loop tables) is the access spec (`access.spec`; the inner loops are those inside
    the reduction: C = n_inner ACC slots per thread, each sub-step's tile of its own edge variant),
    `kern` the loop fields of the GEMM and reset kernels of each tile variant, `epi` the epilogue's ALU
    opcodes, immediates and sources. `uop` = (kernel sizes, kernel slot of each use, `kvar`, the ring's
    rows `load`/`bgn` (`uops.Ring`), `first_pair`, `kbgn`, DRAM offset of each kernel): a use's kernel
    is `kvar[uses[use], variant]`. With edge tiles (`first_pair` not empty: `uops.uop_plan`) every
    kernel stays in the micro-op cache once loaded: it is loaded at its first use, in pair
    `first_pair[kernel]`, at `kbgn`. `opts` = (n_lift: the GEMMs per batch block and step,
    `Mapping.gemm_lift`, 1 with edge tiles; preload, `Mapping.uop_preload`, 0: off: the micro-ops of
    every kernel, loaded by one LOAD UOP at the head of pair 0 from the start of the DRAM uop array,
    `kbgn` = each kernel's offset in it, `first_pair` -1 then; early, `Mapping.early_epilogue`; U).

    Sub-steps (U = (K + 1)·C): unit x = k·C + c < K·C of a pair is its sub-step (k, c), reduction step
    k of ACC slot c (its load groups, resets, GEMMs; unit 0 also the preloaded micro-ops, the last the
    early epilogue), unit K·C the rest of the pair (epilogue, residual, stores), units K·C + 1 .. U - 1
    empty (so steps start at multiples of C, a fast-forward period). A step k is written only when it
    differs from the last step written, kr, in more than its DRAM offsets: k and kr are middle steps
    (k >= 1: no resets or first-load token; the last step only without an early epilogue and but in
    the last pair, whose last GEMM pushes no g2l; not the ci edge step, `CI_LAST`, whose tiles are of
    another variant) and their compute instructions use the same kernels at the same micro-op SRAM
    places after the same LOAD UOPs (`_same_uops`; with edge tiles or preloaded micro-ops every kernel
    of kr is loaded by then, unless kr itself loads one); then `rep[q, k·C + c] = rep[q, kr·C + c]` and
    their counts are 0. The operands a step loads, their sizes, pads and SRAM slots and the GEMMs'
    kernels depend on the sub-step c, never on k (`access.loaded`: an operand loaded inside the
    reduction is loaded at every step of every pair alike), so those rows are kr's.

    In a step written, sub-step c is not written either when it repeats in all the cycle model reads
    (`timing._decode`: sizes, pads, tokens, and of a GEMM only uop_end - uop_bgn) the sub-step p before
    it, p = 1 or a place value of the inner loops (`_repeats`): its threads' tiles are of the same
    variants (edge bits, the ci bit of the step), GEMM trims and INP pads, it loads the same operands,
    its kernels (one per ACC slot, `pair_uses`) are of the same sizes, and neither loads micro-ops;
    never at k = 0 the sub-step 0 (its first load pops no g2l in pair 0, its resets pop s2g), nor the
    last (the early epilogue, the last pair's last GEMM), nor the last that loads INP or WGT (below).
    Then `rep` names the unit it repeats and its count is 0; it differs from it in DRAM offsets and
    micro-op places only. A written sub-step that no other repeats joins the unit before it
    (`_merge_units`: fewer unit starts for the engine), and when no sub-step of any pair repeats,
    `step_units` makes the units whole steps again (the step form with U = K + 1).

    The DRAM footprint (`timing._decode`: per memory type, the span of the rows written) is the one
    of the pairs written whole: a sub-step not written loads what the same operand's loads in
    sub-step 0 and in the last sub-step loading it load (both written) bracket, its tile's offsets
    between theirs (every DMA offset grows with the tile indices, and the inner loops' indices are
    all lowest at c = 0, highest at the last); the steps not written load what kr loads, tci channel
    blocks further per step, so every row of theirs lies inside the span of the same load in step 0
    of its pair and in the last step of the last pair (every pair loads it: the last pair's tiles are
    the furthest; its last step is written), or, with a residual, below the residual and identity regions (INP and
    WGT rows of the rest, after the data and weights in DRAM, `lower.regions`). An operand loaded
    outside the reduction is not loaded by every pair: its last load may be in a pair not written,
    whose rows `lower.lower_blocks` writes for the footprint alone (`span_rows`)."""
    sc, scv, loops, threads, inner = spec
    n_lift, preload, early, U = opts
    sizes, uses, kvar, load, first_pair, kbgn, uop_dram = uop[0], uop[1], uop[2], uop[3], uop[5], uop[6], uop[7]
    inp_place, inp_iplace, wgt_place, wgt_iplace = sc[ac.INP_PLACE], sc[ac.INP_IPLACE], sc[ac.WGT_PLACE], sc[ac.WGT_IPLACE]
    seen = np.zeros(first_pair.shape[0], np.bool_)
    P, K, T, ring_start = sc[ac.NP], sc[ac.NK], sc[ac.NT], sc[ac.RING_START]
    G, E, NC = sc[ac.TB], epi.shape[1], sc[ac.NC]
    var = np.zeros(T, np.int64)
    sub = np.empty((T, 4), np.int64)  # (b, h, co, w) of each thread's tile in the current sub-step
    # what the cycle model reads of each thread's sub-step beyond its place: variant, GEMM trims, INP pads
    sigs = np.zeros((NC, T, 7), np.int64)  # per sub-step of the current step
    s_use = np.zeros(NC, np.int64)  # each sub-step's first compute instruction's use
    s_uops = np.zeros(NC, np.bool_)  # does it load micro-ops?
    s_kid = np.zeros((NC, T * G * (n_lift + 1)), np.int64)  # the kernel of each compute instruction
    s_inp = np.zeros(NC, np.bool_)  # does it load INP, WGT?
    s_wgt = np.zeros(NC, np.bool_)
    # a sub-step may repeat the one 1 or an inner loop's place value before (`_repeats`)
    sub_periods = _sub_periods(inner)
    sram = (0 if sc[ac.INP_SHARED] else sc[ac.INP_PT], sc[ac.WGT_PT], sc[ac.ACC_PT])  # a shared INP tile: slice 0
    o_res, R = E, sc[ac.RES_CHUNKS]  # the residual step (E: none) and its load groups
    for o in range(E):
        if epi[2, o] == 2:
            o_res = o
    last_k = K * NC - 1 + R  # the last step x sub-step; a residual's load groups are R more steps (§7.8)
    blocks = pair_order(T, K, NC, R, early)
    m = load.shape[0]
    units = np.zeros((pairs.shape[0], U), np.int64)
    rep = np.zeros((pairs.shape[0], U), np.int64)
    step_uses = NC * T * G * n_lift  # compute instructions of a middle step: its GEMMs
    step_blocks = 2 * NC * T  # and its blocks in `pair_order` (load groups, GEMMs)
    ci_last = sc[ac.CI_LAST]
    # the sub-steps of a step always written: the first, the last, the last that loads INP / WGT
    # (an operand loaded inside the reduction, `access.loaded`: at c % iplace == 0)
    c_inp = NC - 1 - (NC - 1) % sc[ac.INP_IPLACE] if sc[ac.INP_PLACE] == 0 else 0
    c_wgt = NC - 1 - (NC - 1) % sc[ac.WGT_IPLACE] if sc[ac.WGT_PLACE] == 0 else 0
    tiles = np.empty((T, 4), np.int64)  # (b, h, co, w) tile of each thread in the current pair
    r = 0
    for q in range(pairs.shape[0]):
        j = pairs[q]
        r0 = r
        u = j
        if ring_start >= 0 and j >= m:
            u = ring_start + (j - m) % (m - ring_start)
        use = 0
        seen[:] = False
        if preload > 0 and j == 0:  # every kernel at once, before the first compute instruction
            r = _uop_load(out, r, 0, uop_dram[0] - kbgn[0], preload)  # from the array's start
        for t in range(T):
            tiles[t, 0], tiles[t, 1], tiles[t, 2], tiles[t, 3] = ac.tile_of(j, t, loops, threads)
            var[t] = ac.variant(sc, tiles[t, 1], tiles[t, 3], tiles[t, 2])
        cur, ustart = 0, r0  # the unit being written (-1: none) and its first row
        kstart = r0  # the first row of the current step
        kr = -1  # the middle step later steps may repeat (-1: none)
        kr_use = 0  # its first compute instruction's use
        # the last step is a middle step unless it runs the early epilogue or pushes no last g2l
        last_middle = not early and not (j == P - 1 and R == 0)
        rest = U == 1  # the rest of the pair (after the steps) started
        i = 0
        while i < blocks.shape[0]:
            kind, t, k, c = blocks[i, 0], blocks[i, 1], blocks[i, 2], blocks[i, 3]
            if not rest and (kind > PRE or (kind == PRE and not early)):  # the rest: close the last sub-step
                rest = True
                if cur >= 0:
                    units[q, cur] = r - ustart
                cur, ustart = K * NC, r
                rep[q, cur] = cur
                for x in range(K * NC + 1, U):  # the padding: one empty block
                    rep[q, x] = K * NC + 1
            elif kind == LOADS and t == 0:  # sub-step (k, c) starts
                x = k * NC + c
                n_sub = T * G * (n_lift + (1 if k == 0 else 0))  # its compute instructions (resets, GEMMs)
                if U > 1 and x > 0:  # close the unit written before
                    if cur >= 0:
                        units[q, cur] = r - ustart
                    cur, ustart = x, r
                    rep[q, x] = x
                if U > 1 and c == 0 and k > 0:  # step k starts: skip it if it repeats step kr
                    if kr == k - 1 and first_pair.shape[0] > 0 and _loads_uops(out, kstart, r):
                        kr = -1  # kernels first seen in kr: the steps after it load none
                    kstart = r
                    if 1 <= k and (k <= K - 2 or last_middle) and k != ci_last:
                        if kr >= 0 and (first_pair.shape[0] > 0 or _same_uops(uop, u, kr_use, use, step_uses)):
                            cur = -1
                            for cc in range(NC):
                                rep[q, x + cc] = rep[q, kr * NC + cc]
                            use += step_uses
                            i += step_blocks
                            continue
                        kr, kr_use = k, use
                    else:
                        kr = -1
                kb = CI_BIT if k == ci_last else 0
                for tt in range(T):  # the threads' tiles and what the cycle model reads of their rows
                    b, h, co, w = ac.sub_tile(tiles, tt, inner, c)
                    sub[tt, 0], sub[tt, 1], sub[tt, 2], sub[tt, 3] = b, h, co, w
                    v = ac.variant(sc, h, w, co) if NC > 1 else var[tt]
                    sigs[c, tt, 0] = v  # the tile's variant: its loads' sizes, its kernels
                    sigs[c, tt, 1], sigs[c, tt, 2] = ac.gemm_trim(sc, h)  # the micro-ops its GEMMs skip
                    if U > 1:  # its INP window's pads
                        _, _, sigs[c, tt, 3], sigs[c, tt, 4], sigs[c, tt, 5], sigs[c, tt, 6] = ac.window(
                            scv[v | kb], h, w)
                if U > 1:
                    s_use[c] = use
                    s_inp[c] = c % inp_iplace == 0 if inp_place == 0 else (k == 0 and c == 0 and j % inp_place == 0)
                    s_wgt[c] = c % wgt_iplace == 0 if wgt_place == 0 else (k == 0 and c == 0 and j % wgt_place == 0)
                    # the kernel of each of its compute instructions (per thread: resets at k == 0, GEMMs)
                    per = G * (n_lift + (1 if k == 0 else 0))
                    s_uops[c] = False
                    for y in range(n_sub):
                        tt, z = y // per, y % per
                        kid = kvar[uses[use + y], sigs[c, tt, 0] if k == 0 and z < G else sigs[c, tt, 0] | kb]
                        s_kid[c, y] = kid
                        if (load[u, use + y] if first_pair.shape[0] == 0 else (first_pair[kid] == j and not seen[kid])):
                            s_uops[c] = True  # a LOAD UOP before it (`_compute`)
                    if c != NC - 1 and c != c_inp and c != c_wgt and not s_uops[c]:
                        y = _repeats(sigs, s_kid, sizes, s_uops, s_inp, s_wgt, rep, q, c, k, NC, n_sub, sub_periods)
                        if y >= 0:  # repeats unit y but for DRAM offsets and micro-op places: not written
                            units[q, cur] = 0
                            cur = -1
                            rep[q, x] = y
                            use += n_sub
                            i += T * (3 if k == 0 else 2)
                            continue
            i += 1
            kb = CI_BIT if k == ci_last else 0
            if kind == LOADS:  # sub-step c: the output tile of the inner loops' iteration c (ACC slot c)
                first = r
                b, h, co, w = sub[t, 0], sub[t, 1], sub[t, 2], sub[t, 3]
                row = scv[sigs[c, t, 0] | kb]
                if ac.loaded(sc, sc[ac.INP_PLACE], sc[ac.INP_IPLACE], j, k, c) and (t == 0 or sc[ac.INP_SHARED] == 0):
                    split = row[ac.INP_SPLIT]
                    if split == 1:
                        _dma(out, r, ac.inp_access(row, b, h, co, w, k), isa.OP_LOAD, isa.MEM_INP, t * sram[0])
                        r += 1
                    else:  # one LOAD per (batch, channel) block of the tile (Mapping.inp_loads)
                        block = row[ac.HIN] * row[ac.WIN]
                        for part in range(split):
                            _dma(out, r, ac.inp_part_access(row, b, h, co, w, k, part), isa.OP_LOAD,
                                 isa.MEM_INP, t * sram[0] + part * block)
                            r += 1
                if ac.loaded(sc, sc[ac.WGT_PLACE], sc[ac.WGT_IPLACE], j, k, c):
                    _dma(out, r, ac.wgt_access(row, b, h, co, w, k), isa.OP_LOAD, isa.MEM_WGT, t * sram[1])
                    r += 1
                out[first, COLS[_POP_N]] = 0 if (j == 0 and k == 0 and c == 0) else 1  # g2l (WAR)
                out[r - 1, COLS[_PUSH_N]] = 1  # l2g (RAW)
            elif kind == RESET or kind == GEMM:
                reset = kind == RESET
                v = sigs[c, t, 0] if reset else sigs[c, t, 0] | kb
                n_b = G if reset else G * n_lift  # (batch block, lifted iteration) pairs
                for b in range(n_b):
                    r = _compute(out, r, uop, seen, isa.OP_GEMM, v, j, u, use)
                    lp = kern[v, 1] if reset else kern[v, 0]
                    for f in range(8):
                        out[r, COLS[_LOOP0 + f]] = lp[f]
                    if reset:
                        out[r, COLS[_RST]] = 1
                        # s2g: the thread's last STORE of the previous pair read its ACC slots
                        out[r, COLS[_POP_N]] = 1 if (b == 0 and c == 0 and j != 0) else 0
                    else:
                        out[r, COLS[_BGN]] += sigs[c, t, 1]  # the kernel's range this tile runs
                        out[r, COLS[_END]] -= sigs[c, t, 2]
                        out[r, COLS[_POP_P]] = 1 if b == 0 else 0  # l2g
                        out[r, COLS[_PUSH_P]] = 1 if (b == n_b - 1 and not (
                            j == P - 1 and k * NC + c == last_k)) else 0
                    r += 1
                    use += 1
            elif kind == PRE:  # the epilogue up to the residual (all of it without one)
                r = _epilogue(out, r, scv, var, tiles, t, 0, o_res, epi, uop, seen, j, u, use)
                use += o_res
            elif kind == RES_LOADS:  # residual chunk c: a load group and a GEMM per thread, as a step
                first = r
                b, h, co, w = tiles[t, 0], tiles[t, 1], tiles[t, 2], tiles[t, 3]
                _dma(out, r, ac.res_access(scv[var[t]], b, h, co, w, c), isa.OP_LOAD, isa.MEM_INP,
                     t * sc[ac.RES_PITCH])
                r += 1
                if c == 0 and (sc[ac.ID_EACH] == 1 or (j == 0 and t == 0)):  # the identity block
                    _dma(out, r, (sc[ac.ID_BASE], 1, 1, 1, 0, 0, 0, 0), isa.OP_LOAD, isa.MEM_WGT,
                         t * sram[1] if sc[ac.ID_EACH] == 1 else sc[ac.ID_SRAM])
                    r += 1
                out[first, COLS[_POP_N]] = 1  # g2l (WAR: the thread's last GEMM read its INP slice)
                out[r - 1, COLS[_PUSH_N]] = 1  # l2g (RAW)
            elif kind == RES_GEMM:
                r = _compute(out, r, uop, seen, isa.OP_GEMM, var[t], j, u, use)
                out[r, COLS[_LOOP0]] = 1
                out[r, COLS[_LOOP0 + 1]] = scv[var[t]][ac.E_ACC] if R == 1 else sc[ac.RES_PLANES] * sc[ac.TH] * sc[ac.TW]
                out[r, COLS[_LOOP0 + 3]] = 1
                out[r, COLS[_LOOP0 + 5]] = 1
                out[r, COLS[_POP_P]] = 1  # l2g
                out[r, COLS[_PUSH_P]] = 0 if (j == P - 1 and c == R - 1) else 1  # g2l
                r += 1
                use += 1
            elif kind == POST:  # the epilogue after the residual
                r = _epilogue(out, r, scv, var, tiles, t, o_res + 1, E, epi, uop, seen, j, u, use)
                use += E - o_res - 1
            else:  # STORE: one per ACC slot; the thread's first pops g2s, its last pushes s2g
                for c in range(NC):
                    b, h, co, w = ac.sub_tile(tiles, t, inner, c)
                    v = ac.variant(sc, h, w, co) if NC > 1 else var[t]
                    _dma(out, r, ac.out_access(scv[v], b, h, co, w), isa.OP_STORE, isa.MEM_OUT,
                         t * sram[2] + c * sc[ac.ACC_SUB])
                    out[r, COLS[_POP_P]] = 1 if c == 0 else 0  # g2s
                    out[r, COLS[_PUSH_P]] = 0 if (c < NC - 1 or (j == P - 1 and t < T - 1)) else 1  # s2g; last: tail
                    r += 1
        units[q, cur] = r - ustart
        if U > 1 and NC > 1:
            _merge_units(units[q], rep[q], K, NC)
    # Final synchronization (docs/vta.md §2.6, §5.4 Synchronize).
    out[r, COLS[_OP]] = isa.OP_LOAD
    out[r, COLS[_MEM]] = isa.MEM_INP
    out[r, COLS[_PUSH_N]] = 1
    out[r + 1, COLS[_OP]] = isa.OP_LOAD
    out[r + 1, COLS[_MEM]] = isa.MEM_UOP
    out[r + 1, COLS[_POP_P]] = 1
    out[r + 1, COLS[_POP_N]] = 1
    out[r + 2, COLS[_OP]] = isa.OP_FINISH
    return units, rep


@njit(cache=True)
def _loads_uops(out, a, b):  # pragma: no cover - compiled
    """Any LOAD UOP among rows a..b-1?"""
    for r in range(a, b):
        if out[r, COLS[_OP]] == isa.OP_LOAD and out[r, COLS[_MEM]] == isa.MEM_UOP:
            return True
    return False


@njit(cache=True)
def _sub_periods(inner):  # pragma: no cover - compiled
    """1 and the place values > 1 of the inner loops (`access.spec`), ascending."""
    out = np.ones(inner.shape[0] + 1, np.int64)
    n = 1
    for lp in range(inner.shape[0] - 1, -1, -1):
        if inner[lp, 1] > 1:
            out[n] = inner[lp, 1]
            n += 1
    return out[:n].copy()


@njit(cache=True, inline="always")
def _repeats(sigs, s_kid, sizes, s_uops, s_inp, s_wgt, rep, q, c, k, NC, n, periods):  # pragma: no cover
    """The unit sub-step c of step k (of pair q) repeats in all the cycle model reads (-1: none): that
    of the sub-step p before it, p in `periods`, whose tiles are of the same variants, trims and
    pads (`sigs`), which loads the same operands (`s_inp`, `s_wgt`), runs kernels of the same sizes
    (`s_kid`) and loads no micro-ops (`s_uops`; nor does c); at k == 0 not sub-step 0 (it pops the
    tokens of the pair before: its first load's g2l, its resets' s2g)."""
    for i in range(periods.shape[0]):
        c2 = c - periods[i]
        if c2 < 0:
            break
        y = rep[q, k * NC + c2]
        if (k == 0 and y == 0) or s_uops[c2] or s_inp[c2] != s_inp[c] or s_wgt[c2] != s_wgt[c]:
            continue
        same = True
        for t in range(sigs.shape[1]):
            for f in range(sigs.shape[2]):
                if sigs[c, t, f] != sigs[c2, t, f]:
                    same = False
        for x in range(n):
            if sizes[s_kid[c, x]] != sizes[s_kid[c2, x]]:
                same = False
        if same:
            return y
    return -1


@njit(cache=True)
def _merge_units(units, rep, K, NC):  # pragma: no cover - compiled
    """Sub-steps written that no other repeats (`_repeats`) need not be units of their own: each
    joins the unit before it when that one is written and not repeated either (its own unit stays,
    empty), so the engine examines fewer unit starts (`timing._fast_forward`)."""
    refd = np.zeros(K * NC, np.bool_)
    for x in range(K * NC):
        if rep[x] != x and rep[x] // NC == x // NC:
            refd[rep[x]] = True
    for k in range(K):
        owner = -1
        for c in range(NC):
            x = k * NC + c
            if rep[x] != x:
                owner = -1
            elif c == 0 or refd[x] or owner < 0 or refd[owner]:
                owner = x
            else:
                units[owner] += units[x]
                units[x] = 0


@njit(cache=True)
def _same_uops(uop, u, a, b, n):  # pragma: no cover - compiled
    """Do the n compute instructions from use a and from use b of ring row u use the same kernels at
    the same micro-op SRAM places, after the same LOAD UOPs (the ring, `uops.Ring`)?"""
    uses, load, bgn = uop[1], uop[3], uop[4]
    for x in range(n):
        if uses[a + x] != uses[b + x] or load[u, a + x] != load[u, b + x] or bgn[u, a + x] != bgn[u, b + x]:
            return False
    return True


@njit(cache=True)
def classes(P, hc, h_place, wc, w_place, cc, c_place, places, steady, m, ring_start,
            special):  # pragma: no cover - compiled
    """Classes of identical pairs: same INP padding and edge tiles (class of the h, w and co loop
    index), same operands loaded (`places`: loaded at pair j when j % place == 0), same uop loads
    (ring row), plus the first and the last pair (own tokens) and the `special` pairs (edge
    tiles: a kernel's first load). Returns (one member of each class in program order, the class
    = block index of every pair + the tail block)."""
    n_h, n_w, w_ids = hc.shape[0], wc.shape[0], wc.max() + 1
    n_c, c_ids = cc.shape[0], cc.max() + 1
    n_f = 1 << places.shape[0]
    n_u = 1 if steady else m
    n_code = (hc.max() + 1) * w_ids * c_ids * n_f * n_u
    codes = np.empty(P, np.int64)
    for j in range(P):
        u = 0
        if not steady:
            u = j
            if ring_start >= 0 and j >= m:
                u = ring_start + (j - m) % (m - ring_start)
        f = 0
        for i in range(places.shape[0]):
            if j % places[i] == 0:
                f |= 1 << i
        hw_code = (hc[(j // h_place) % n_h] * w_ids + wc[(j // w_place) % n_w]) * c_ids + cc[(j // c_place) % n_c]
        codes[j] = (hw_code * n_f + f) * n_u + u
    for i in range(special.shape[0]):
        codes[special[i]] = n_code + 2 + i
    codes[P - 1] = n_code + 1
    codes[0] = n_code
    block = np.full(n_code + 2 + special.shape[0], -1, np.int64)
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
def block_tail(counts, pair_class, loops, P, extra):  # pragma: no cover - compiled
    """The rest of `lower.PairBlocks` from the row count of each block (`emit`): (block_start,
    instructions of the full program, fast-forward periods). Block b starts at the sum of the
    counts before it, the tail block (3 rows) last; every pair runs its class's block, then the
    tail. Periods: each pair loop's extent x place value, 2, 1 and `extra` (> 0: the ring's period),
    those below P, distinct, largest first."""
    nb = counts.shape[0]
    block_start = np.zeros(nb + 2, np.int64)
    acc = 0
    for b in range(nb):
        acc += counts[b]
        block_start[b + 1] = acc
    block_start[nb + 1] = acc + 3
    n_insns = 3
    for j in range(pair_class.shape[0] - 1):
        n_insns += counts[pair_class[j]]
    cand = np.empty(loops.shape[0] + 3, np.int64)
    for i in range(loops.shape[0]):
        cand[i] = loops[i, 0] * loops[i, 1]
    cand[loops.shape[0]] = 2
    cand[loops.shape[0] + 1] = 1
    cand[loops.shape[0] + 2] = extra
    cand = np.sort(cand)[::-1]
    periods = np.empty(cand.shape[0], np.int64)
    n = 0
    for c in cand:
        if 0 < c < P and (n == 0 or periods[n - 1] != c):
            periods[n] = c
            n += 1
    return block_start, n_insns, periods[:n].copy()


@njit(cache=True)
def _reach(out, i, lo, hi):  # pragma: no cover - compiled
    """Widen the DRAM span of row i's memory type (per memory type, the first element of a DMA to the
    last, `timing._decode`'s footprint): 1 if it starts below, 2 if it ends above, 0 if neither."""
    mem = out[i, COLS[_MEM]]
    if out[i, COLS[_OP]] > isa.OP_STORE or out[i, DMA_COLS[2]] == 0 or mem < 0 or mem >= lo.shape[0]:
        return 0
    fb, fe = dma_span(out, i, DMA_COLS[0], DMA_COLS[1], DMA_COLS[3], DMA_COLS[2])
    got = 0
    if fb < lo[mem]:
        lo[mem] = fb
        got = 1
    if fe > hi[mem]:
        hi[mem] = fe
        got |= 2
    return got


@njit(cache=True)
def span_rows(out, a, b, n):  # pragma: no cover - compiled
    """The rows among a..b-1 of `out` (rows written for the DRAM footprint alone) that reach beyond
    the DRAM rows 0..a-1 and b..n-1 span, per memory type (`timing._decode`'s footprint): at most
    one per memory type and side, the one reaching furthest. Returns their row numbers."""
    lo = np.full(6, np.iinfo(np.int64).max, np.int64)
    hi = np.full(6, np.iinfo(np.int64).min, np.int64)
    for i in range(a):
        _reach(out, i, lo, hi)
    for i in range(b, n):
        _reach(out, i, lo, hi)
    at = np.full(12, -1, np.int64)  # the row of the lowest start, of the highest end, per memory type
    for i in range(a, b):
        got = _reach(out, i, lo, hi)
        if got & 1:
            at[2 * out[i, COLS[_MEM]]] = i
        if got & 2:
            at[2 * out[i, COLS[_MEM]] + 1] = i
    return np.unique(at[at >= 0])


@njit(cache=True)
def pair_rows(units, rep):  # pragma: no cover - compiled
    """Rows of each emitted pair in the full program: its units' counts, a repeat counting the rows
    of the unit it repeats (`emit`)."""
    totals = np.zeros(units.shape[0], np.int64)
    for q in range(units.shape[0]):
        for k in range(units.shape[1]):
            totals[q] += units[q, rep[q, k]]
    return totals


@njit(cache=True)
def step_blocks(units, rep, pair_class, periods, NC, inner):  # pragma: no cover - compiled
    """The step form of `lower.PairBlocks` (U units per pair: K·NC sub-steps and the rest, `emit`):
    (block_start, the block sequence, periods in units). Every unit written is a block, in the order
    written (rows are contiguous); a unit written as a repeat runs the block of the unit it repeats.
    The program runs, for pair j, the blocks of its class's units (`pair_class` of the pairs,
    `classes`), then the tail block. Periods: the pair periods (`block_tail`) x U, then NC (a middle
    step repeating), the place values of the `inner` loops and 1 (sub-steps repeating, `_repeats`)."""
    n, U = units.shape[0], units.shape[1]
    bid = np.empty((n, U), np.int64)
    block_start = np.zeros(n * U + 2, np.int64)
    nb = 0
    for q in range(n):
        for k in range(U):
            if rep[q, k] == k:
                bid[q, k] = nb
                block_start[nb + 1] = block_start[nb] + units[q, k]
                nb += 1
            else:
                bid[q, k] = bid[q, rep[q, k]]
    block_start[nb + 1] = block_start[nb] + 3
    P = pair_class.shape[0] - 1
    seq = np.empty(P * U + 1, np.int64)
    for j in range(P):
        b = pair_class[j]
        for k in range(U):
            seq[j * U + k] = bid[b, k]
    seq[P * U] = nb
    n_per = periods.shape[0]
    per = np.empty(n_per + 2 + inner.shape[0], np.int64)
    for i in range(n_per):
        per[i] = periods[i] * U
    if NC > 1:
        per[n_per] = NC
        n_per += 1
        for lp in range(inner.shape[0]):  # outer to inner: place values descending
            if 1 < inner[lp, 1] < NC:
                per[n_per] = inner[lp, 1]
                n_per += 1
    per[n_per] = 1
    return block_start[:nb + 2].copy(), seq, per[:n_per + 1].copy()


@njit(cache=True)
def step_units(units, rep, NC):  # pragma: no cover - compiled
    """The units of `emit` (U = (K + 1)·NC per pair), as whole steps when no sub-step repeats
    another of its step (then a sub-step a unit of its own buys nothing: the engine would only
    examine each sub-step's start, `timing._fast_forward`): (units, rep) of the K + 1 steps and the
    rest, or the sub-step units as they are."""
    n, U = units.shape[0], units.shape[1]
    for q in range(n):
        for x in range(U):
            if rep[q, x] != x and rep[q, x] // NC == x // NC and x < U - NC:
                return units, rep
    S = U // NC
    su = np.zeros((n, S), np.int64)
    sr = np.empty((n, S), np.int64)
    for q in range(n):
        for k in range(S):
            for c in range(NC):
                su[q, k] += units[q, k * NC + c]
            sr[q, k] = rep[q, k * NC] // NC
    return su, sr
