"""A mapping: how one layer runs on one VTA, as data (docs/architecture.md, "mapping → lower").

A `Mapping` states the loop nest of the tiles and nothing about instructions; `codesign.lower`
turns it into the program. Its parts:

- `loops`: the tile loops, outer to inner. Each walks one axis of the output/reduction space
  (b, h, co, w in tiles; ci in reduction steps) with a `scale` in tiles per iteration. The loops
  of `vthreads` are the virtual-thread axes (cthread outermost, docs/vta.md §7.3): every thread
  owns a 1/T slice of INP, WGT and ACC SRAM and its iteration is unrolled into the instruction
  stream. The reduction loop (`axis == "ci"`) keeps ACC resident across it: the loops inside it
  (`inner_loops`, none in the AutoTVM templates) walk output tiles whose partial sums all stay in
  ACC, one slot each (`n_inner` slots per thread), stored after the last reduction step. ACC
  cannot be spilled: VTA's STORE reads the int8 OUT buffer, never ACC (docs/vta.md §3.5), so
  int32 partial sums cannot go to DRAM and come back exactly.
- `residency`: per operand the loop at (and inside of) which it is loaded or stored; it stays on
  chip across the loops outside that level. INP and WGT are loaded at the reduction loop in the
  AutoTVM templates; a weight-stationary mapping loads WGT at its co loop, an input-stationary one
  INP at its innermost spatial loop; with inner loops an operand is loaded at the reduction loop
  (once per step, reused by every resident tile) or at the inner loop it changes with. OUT is
  stored at the innermost pair loop, or at the reduction loop when there are inner loops.
- `gemm` / `reset`: the micro-op kernels; their `iter_out`/`iter_in` are the loops folded into
  the fields of one GEMM instruction, the rest of the kernel's loops are unrolled micro-ops
  (`codesign.mapping.batch` builds them from `fold_uop_loop`).
- `epilogue`: the steps on the accumulator tile before its STORE, in order: ALU operations with an
  immediate (SHR, MIN, MAX, ADD; the templates' requantization), and the two fused steps `fuse`
  adds (docs/vta.md §7.8): the bias (`AluOp("add", src="bias")`: LOAD ACC of the tile's int32 bias
  blocks, ALU ADD broadcast over the pixels) and the residual (`AluOp("gemm", lb,
  src="residual")`: LOAD INP of the int8 residual tile, in chunks when it does not fit the INP
  slice, GEMM with 2^lb·identity accumulating onto the tile). The SRAM slots and chunks follow
  from the tile alone (`fused_slots`).
- `inp_loads`: how many LOADs bring one INP tile (1, or one per batch x channel block).
- `edges`: the smaller last tiles of tile sizes that do not divide their extent (`mapping.edges`),
  None when every tile size divides.
- `gemm_lift`: loops of the GEMM micro-op kernel lifted out into separate GEMM instructions
  (outer to inner, [extent, dst, src, wgt factor] each; `gemm` is the kernel without them): one
  instruction per iteration, its kernel shifted by the iteration's offsets. The uops hold absolute
  SRAM indices and a GEMM has no base field (docs/vta.md §2.4, §2.7), so every iteration is a
  kernel of its own, as the batch blocks are.
- `uop_preload`: every micro-op kernel of the program is in the micro-op buffer at once, loaded by
  one LOAD UOP at the head of the compute queue (the DRAM uop array in first-use order, SRAM start =
  DRAM offset), instead of the runtime's ring cache loading each at its use (`codesign.lower.uops`).
- `early_epilogue`: each thread's epilogue (up to a fused residual) follows its own GEMMs of the last
  reduction step, before the next thread's, instead of after every thread's: with T threads the
  epilogue of thread t runs while the loads of the threads after it are still in flight, so the
  pipeline drains after the last load by one thread's epilogue, not T.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from codesign.mapping.batch import Geometry, Kernel
from codesign.mapping.edges import Edges
from codesign.mapping.lazy import derived, lazy

AXES = ("b", "h", "co", "w", "ci")
OPERANDS = ("inp", "wgt", "out")  # loaded / stored operands (ACC and UOP live on chip, see lower)
#: The tensor axes each operand's tile depends on (what a loop over another axis may skip).
DEPENDS = {"inp": ("b", "h", "w", "ci", "co"), "wgt": ("co", "ci"), "out": ("b", "co", "h", "w")}


@dataclass(frozen=True)
class Loop:
    name: str
    axis: str    # one of AXES
    extent: int
    scale: int = 1  # tiles of `axis` per iteration


SOURCES = ("imm", "bias", "residual")


@dataclass(frozen=True)
class AluOp:
    """One epilogue step: an ALU op ("shr", "min", "max", "add", docs/vta.md §3.4) with the
    immediate `imm` (src "imm") or the bias blocks (src "bias", op "add"), or the residual GEMM
    (op "gemm", src "residual", imm = lb of its 2^lb·identity weight)."""

    op: str
    imm: int = 0
    src: str = "imm"  # one of SOURCES


@dataclass(frozen=True)
class Tile:
    """One output tile and the input/weight tiles it reads, in hardware units (blocks for b/ci/co,
    pixels for h/w), and their SRAM footprint per virtual thread in elements."""

    b: int
    h: int
    w: int
    ci: int
    co: int
    hin: int   # input rows / columns one tile reads (padded coordinates)
    win: int
    inp_sram: int
    wgt_sram: int
    acc_sram: int


@dataclass(frozen=True)
class Dma:
    """The 2-D DMA pattern of a tile load/store away from the padded border (docs/vta.md §7.4.2)."""

    y_size: int
    x_size: int
    x_stride: int


@dataclass(frozen=True)
class Mapping:
    geo: Geometry     # the tiled conv (dense: 1x1 conv), blocks
    tile: Tile
    loops: tuple[Loop, ...]     # temporal tile loops, outer to inner: pair loops, the reduction, inner loops
    vthreads: tuple[Loop, ...]  # virtual-thread loops, outer to inner
    residency: tuple[tuple[str, str], ...]  # (operand, loop name) for "inp", "wgt", "out"
    gemm: Kernel
    reset: Kernel
    epilogue: tuple[AluOp, ...]
    dma: tuple[tuple[str, Dma], ...]  # unpadded pattern of "inp", "wgt", "out"
    inp_channels: int = 0   # input channel blocks per image in DRAM (grouped conv: all groups)
    co_per_group: int = 0   # a tile reads the input channels of group co // co_per_group
    info: tuple[tuple[str, int], ...] = ()  # program metadata (tile sizes, thread counts)
    #: INP LOADs per load group: 1 = one (possibly padded) 2-D pattern; tile.b * tile.ci = one
    #: load per (batch, channel) block, each hin rows of win pixels at stride W, into its slice
    #: of the tile's inp[b][ci][hin][win] layout (tiles whose INP region is no 2-D pattern).
    inp_loads: int = 1
    edges: Edges | None = None  # edge tiles (mapping.edges); None: every tile size divides
    #: the INP tile is the unpadded image (hin/win = H/W): its kernel reads no padding (`pad_skip`)
    inp_unpadded: bool = False
    #: micro-ops the first / last row tile's GEMMs skip at the start / end of `gemm` (`pad_skip` on
    #: tiles that are not the whole plane: `mapping.batch.pad_rows_kernel`); (0, 0) otherwise
    gemm_trim: tuple[int, int] = (0, 0)
    gemm_lift: tuple[tuple[int, int, int, int], ...] = ()
    uop_preload: bool = False
    early_epilogue: bool = False

    def _nest(self) -> None:
        """The loop nest's counts below (`derived`) and the residency levels (`level`), in one pass:
        the lowering reads all of them for every fresh mapping."""
        loops = self.loops
        red = len(loops) - 1  # no reduction loop: the innermost
        for i, lp in enumerate(loops):
            if lp.axis == "ci":
                red = i
                break
        n_pairs = n_inner = n_threads = n_lift = 1
        for lp in loops[:red]:
            n_pairs *= lp.extent
        for lp in loops[red + 1:]:
            n_inner *= lp.extent
        for lp in self.vthreads:
            n_threads *= lp.extent
        for lift in self.gemm_lift:
            n_lift *= lift[0]
        levels = {}  # `level`: left to `_levels` (which raises) when a residency names no loop
        for op, name in self.residency:
            for i, lp in enumerate(loops):
                if lp.name == name:
                    levels[op] = i
                    break
        if len(levels) == len(self.residency):
            self.__dict__["_levels"] = levels
        srcs = [a.src for a in self.epilogue]
        self.__dict__.update(
            red=red, pair_loops=loops[:red], inner_loops=loops[red + 1:], n_inner=n_inner, n_pairs=n_pairs,
            n_steps=loops[red].extent if loops else 1, n_lift=n_lift, n_threads=n_threads,
            has_bias="bias" in srcs, has_residual="residual" in srcs)

    red = derived(_nest, "Index in `loops` of the reduction loop (axis ci).")
    pair_loops = derived(_nest, "The loops outside the reduction: one iteration of them is a *pair* (the tiles "
                                "of all virtual threads and inner loops, K reduction steps, epilogue and STOREs).")
    inner_loops = derived(_nest, "The loops inside the reduction: their output tiles stay resident in ACC.")
    n_inner = derived(_nest, "ACC slots per thread: the output tiles of the inner loops (1 without them).")
    n_pairs = derived(_nest, "Iterations of the pair loops.")
    n_steps = derived(_nest, "Reduction steps: the extent of the reduction loop.")
    n_lift = derived(_nest, "GEMM instructions per batch block and reduction step (1: the kernel is whole).")
    n_threads = derived(_nest, "Virtual threads: the product of the thread loops' extents.")
    has_bias = derived(_nest, "The epilogue adds the bias (a step with src \"bias\").")
    has_residual = derived(_nest, "The epilogue adds the residual (a step with src \"residual\").")

    def lift_offsets(self) -> list[tuple[int, int, int]]:
        """(dst, src, wgt) offset of each lifted iteration, in instruction order."""
        out = [(0, 0, 0)]
        for e, d, s, w in self.gemm_lift:
            out = [(a + i * d, b + i * s, c + i * w) for a, b, c in out for i in range(e)]
        return out

    def level(self, operand: str) -> int:
        """Index in `loops` of the loop where `operand` is loaded/stored."""
        if "_levels" not in self.__dict__:
            self._nest()  # sets them with the nest's counts, unless a residency names no loop
        return self._levels[operand]

    @lazy
    def _levels(self) -> dict[str, int]:
        names = [lp.name for lp in self.loops]
        return {op: names.index(name) for op, name in self.residency}

    def depends(self, operand: str) -> tuple[str, ...]:
        """The axes `operand`'s tile changes with: INP depends on co only in a grouped conv (a co
        tile reads the input channels of its group)."""
        if operand == "inp" and self.co_per_group >= self.geo.co:
            return tuple(a for a in DEPENDS["inp"] if a != "co")
        return DEPENDS[operand]

    def pattern(self, operand: str) -> Dma:
        return self._patterns[operand]

    @lazy
    def _patterns(self) -> dict[str, Dma]:
        return dict(self.dma)

    @lazy
    def inp_loads_per_thread(self) -> int:
        """INP load groups of one thread over the program (`lower.access.loaded`): per iteration of
        its residency loop and the pair loops outside it, or per reduction step (and inner loop
        iteration) when it is loaded at or inside the reduction."""
        lv = self.level("inp")
        if lv < self.red:
            return math.prod(lp.extent for lp in self.loops[:lv + 1])
        inside = math.prod(lp.extent for lp in self.loops[lv + 1:])  # inner loops it stays across
        return self.n_pairs * self.n_steps * self.n_inner // inside

    @lazy
    def inp_shared(self) -> bool:
        """One INP tile for the whole program, read by every thread: input-stationary and each thread
        would load it once, the same tile (no thread axis it depends on). Thread 0 loads it into its
        slice and every thread's GEMMs read that slice (`lower.emit`, `lower.uops`); INP SRAM holds
        it once instead of once per thread (`legality`). Thread t's GEMMs wait for its own load
        group, which the load module runs after thread 0's, and nothing overwrites the tile, so no
        token changes. Only input-stationary mappings: the templates' (INP loaded at the reduction
        loop) keep their programs, instruction for instruction."""
        if self.n_threads <= 1:  # most mappings: no thread to share with
            return False
        dep = self.depends("inp")
        return (self.level("inp") < self.red and self.inp_loads_per_thread == 1
                and not self.has_residual and all(lp.extent == 1 for lp in self.vthreads if lp.axis in dep))


@dataclass(frozen=True)
class FusedSlots:
    """Where the fused epilogue's operands live (docs/vta.md §7.8): thread t's bias blocks at ACC
    `bias + t·tile_co` (after every thread's ACC tile); its residual in its own INP slice (at
    t·`res_pitch`), the whole ACC tile in one load group when it fits there (`chunks` = 1), else
    `chunks` load groups of `planes` output channel planes (tile_h x tile_w pixels) of one batch
    block each; the 2^lb·identity weight at WGT `ident` (after every thread's WGT slice, loaded
    once; when no WGT row is free, at row 0 of the thread's own slice, loaded with every pair's
    first residual chunk: `ident_each`)."""

    bias: int
    res_pitch: int
    ident: int
    chunks: int
    planes: int
    acc_need: int   # ACC / WGT elements the fused program occupies
    wgt_need: int
    ident_each: bool = False


def fused_slots(m: Mapping, wgt_depth: int = 0) -> FusedSlots:
    """The slots of `m` on a WGT SRAM of `wgt_depth` rows (0: unknown, the identity then goes
    into the threads' slices; only `chunks`/`planes` do not depend on it)."""
    t, T = m.tile, m.n_threads
    chunks, planes = 1, t.co
    if m.has_residual and t.acc_sram > t.inp_sram:
        # a plane fits the INP slice (hin·win >= h·w); planes of one batch block are one 2-D DMA
        # when each is contiguous in DRAM (full-width rows, or one row)
        contiguous = t.w == m.geo.out_w or t.h == 1
        planes = max(d for d in range(1, t.co + 1) if t.co % d == 0 and d * t.h * t.w <= t.inp_sram
                     and (contiguous or d == 1))
        chunks = t.b * t.co // planes
    acc_need = T * (t.acc_sram + (t.co if m.has_bias else 0))
    each = m.has_residual and T * t.wgt_sram >= wgt_depth
    wgt_need = T * t.wgt_sram + (1 if m.has_residual and not each else 0)
    return FusedSlots(T * t.acc_sram, t.inp_sram, 0 if each else T * t.wgt_sram, chunks, planes, acc_need, wgt_need,
                      each)


def fuse(m: Mapping, epilogue: tuple[AluOp, ...]) -> Mapping:
    """`m` (any family's mapping) with `epilogue` in place of its own: same loops, tiles and
    kernels; `codesign.lower` emits the fused steps (legality checks their SRAM room)."""
    for a in epilogue:
        ok = {"imm": a.op in ("shr", "min", "max", "add"), "bias": a.op == "add", "residual": a.op == "gemm"}
        if not ok.get(a.src, False):
            raise ValueError(f"epilogue step {a}: allowed (op, src) are (shr|min|max|add, imm), "
                             "(add, bias), (gemm, residual)")
    if sum(a.src == "residual" for a in epilogue) > 1 or sum(a.src == "bias" for a in epilogue) > 1:
        raise ValueError("epilogue: at most one bias and one residual step")
    if not epilogue or epilogue[-1].src != "imm":
        raise ValueError("epilogue: the last step must be an ALU op with an immediate (the clip)")
    return replace(m, epilogue=tuple(epilogue))


def inner_products(extents: tuple[int, ...]) -> tuple[int, ...]:
    """Mixed-radix place values of loops outer to inner: iteration j of the nest has index
    (j // place[l]) % extent[l] in loop l."""
    out, acc = [], 1
    for e in reversed(extents):
        out.append(acc)
        acc *= int(e)
    return tuple(reversed(out))
