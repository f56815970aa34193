"""`VtaSpace`: the `vta` schedule family of a layer on one hardware config (docs/schedules.md).

The AutoTVM templates fix one loop nest (b, h, co, w tile loops, the reduction innermost, INP and
WGT loaded at every reduction step, virtual threads on h or co). This family keeps the tile
geometry of `mapping.MappingBatch` and frees what the lowering (`codesign.lower`) can emit
correctly for any nest:

- `tile_b/h/w/ci/co`: the template's split knobs (divisors of the extent, `[n // f, f]`), then for
  h, w, ci, co the sizes that do not divide (`[ceil(n / f), f]`, one per tile count: f =
  ceil(n / k)): the last tile is a smaller edge tile (`mapping.edges`; not for transposed convs,
  whose zero-skipping kernel depends on the tile, nor co of grouped convs, whose co tiles lie in
  one group; batch blocks are 1 in every zoo workload);
- `order`: the order of the four pair loops, an index into `ORDERS` (0 = the template's);
- `wgt_stationary`: 1 loads each weight tile once per iteration of the co loop and keeps it
  across the loops inside it (needs the whole reduction in one tile, `ci_steps == 1`);
- `vthread`: virtual threads on axis `VTHREADS[v]` (0 = none; h and co are the template's);
- `uop_fold`: which two loops of the GEMM micro-op kernel (`mapping.batch.GEMM_LOOPS`) become the
  instruction's iter_out / iter_in fields, the rest unrolled into micro-ops: 0 = the template's
  `fold_uop_loop` (the two outermost live loops), k = the pair `FOLD_PAIRS[k - 1]` (both live,
  not the template's pair; the dst hazard is checked over the whole GEMM stream). Fewer loop
  iterations cost less loop overhead, bigger kernels more micro-op cache and loads;
- `inp_stationary`: 1 loads each input tile once per iteration of the innermost spatial (b, h, w)
  loop of extent > 1 and keeps it across the co loop inside it (needs the whole reduction in one
  tile; the mirror of `wgt_stationary`);
- `acc_resident`: n moves the n innermost pair loops of extent > 1 inside the reduction loop: the partial sums
  of their output tiles all stay in ACC (one slot each), an operand that does not change with
  them is loaded once per reduction step and reused by every slot (INP across co tiles, WGT
  across spatial tiles), the requantization and STOREs run after the last step. ACC cannot be
  spilled (VTA's STORE reads the int8 OUT buffer, never ACC): nests whose slots do not fit are
  refused (`acc_spill`);
- `pad_skip`: 1 replaces the GEMM kernel by one that skips every tap reading zero padding
  (`mapping.batch.pad_skip_kernel`: explicit micro-ops over the (pixel, tap) pairs inside the image,
  iter_out / iter_in over the input / output channel blocks), for tiles covering the whole output
  plane of a padded conv (one tile position, so one kernel; no edge tiles, uop_fold = 0): fewer
  GEMM cycles than the MACs of the padded conv (a 3x3 conv on a 7x7 image: 19² of 21² taps). On
  other tiles of a padded conv (row tiles, column tiles) it is `mapping.batch.pad_rows_kernel`: one
  kernel whose micro-op range the first / last row tile's GEMM trims (the taps above / below the
  image), the column padding skipped when the tile is the whole width (`apply_pad_rows`);
- INP tiles whose region is no single 2-D DMA pattern (padded loads of several channel or batch
  blocks, unpadded tiles that do not fold) are loaded one (batch, channel) block per LOAD
  (`Mapping.inp_loads`), so the template's `pad_ci`, `pad_b` and `dma_inp` rules do not apply;
- `n_threads`: how many virtual threads run on the `vthread` axis, `THREAD_COUNTS` (2 = the
  template's). Each owns 1/T of INP/WGT/ACC SRAM; the emitter's tokens order a ring of T slots
  (docs/vta.md §7.3 "More than two virtual threads");
- `uop_lift`: 0 = the whole GEMM kernel in one instruction per batch block and step, k = the loops
  `LIFTS[k]` (one of `GEMM_LOOPS`, k = 1..6, or two of them, k = 7..21) lifted out of the micro-op
  kernel into one GEMM instruction per iteration (`Mapping.gemm_lift`): smaller kernels (the capacity rule admits bigger tiles, the dst hazard is
  checked per instruction over its whole stream), more instructions. The others fold as above;
- `uop_preload`: 0 = the runtime's ring cache (each kernel loaded by a LOAD UOP at its use, reloaded
  when evicted); 1 = every kernel of the program in the micro-op buffer at once, loaded by one LOAD
  UOP at the head of the compute queue (`Mapping.uop_preload`): no LOAD UOP waits for the shared
  port behind the weight stream (rule `uop_preload_fit`: they fit); 2 = 1 with each reset kernel
  flat, one micro-op per accumulator row and no loop (`Mapping.reset_flat`: its II=1 pipeline fills
  once, not once per (iter_out, iter_in) pair; rule `uop_flat_reset_edge`: full tiles only);
- `early_epilogue`: 1 runs each thread's requantization (up to a fused residual) right after its own
  GEMMs of the last reduction step, before the next thread's (`Mapping.early_epilogue`): thread 0's
  ALU passes overlap thread 1's last loads instead of adding to the drain after them (rule
  `early_epilogue_live`: more than one thread, else the same program).

Index and knobs work as in `ScheduleSpace` (mixed radix, first knob least significant), so the
tuners and `SpaceView` walk it unchanged. Validity is the template rules of
`schedule.validity` (SRAM per thread x threads, DMA patterns, micro-op capacity and hazard, field
ranges) that still hold, the group/transpose rules of `schedule.templates`, and this family's
own (`RULES`); `why_invalid` prefixes the message with the rule's name. Every valid template
config is a point of this space (`from_template`), so the family's optimum is never worse.
"""

from codesign.schedule.vta.batch import CANONICAL, VtaBatch
from codesign.schedule.vta.kernels import (
    apply_flat_reset,
    apply_fold,
    apply_pad_rows,
    apply_pad_skip,
    whole_plane_unpadded,
)
from codesign.schedule.vta.knobs import (
    ACC_RESIDENT_MAX,
    BASE_KNOBS,
    EXTRA_FEATURE_NAMES,
    KERNEL_KNOBS,
    LIFTS,
    N_FEATURES,
    N_THREADS,
    NESTS,
    ORDERS,
    PAIR_AXES,
    PRELOADS,
    THREAD_COUNTS,
    TILE_KNOBS,
    VTHREADS,
)
from codesign.schedule.vta.rules import KERNEL_RULES, ORDER_RULES, REPLACED
from codesign.schedule.vta.space import VtaSpace

__all__ = ["ACC_RESIDENT_MAX", "BASE_KNOBS", "CANONICAL", "EXTRA_FEATURE_NAMES", "KERNEL_KNOBS", "KERNEL_RULES", "LIFTS",
           "N_FEATURES", "N_THREADS", "NESTS", "ORDERS", "ORDER_RULES", "PAIR_AXES", "PRELOADS", "REPLACED",
           "THREAD_COUNTS", "TILE_KNOBS", "VTHREADS", "VtaBatch", "VtaSpace", "apply_flat_reset", "apply_fold",
           "apply_pad_rows", "apply_pad_skip", "whole_plane_unpadded"]
