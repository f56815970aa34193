"""The `vta` family's validity rules (`RulesMixin.rules`), its rule sets for the staged
enumeration, and the shared rules' table of its configs (`mapping.table`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from codesign.mapping import table as shared
from codesign.mapping.batch import (
    FOLD_PAIRS,
    GEMM_LOOPS,
    MAX_DMA_FIELD,
    MAX_ITER,
)
from codesign.mapping.edges import edge_bits
from codesign.mapping.table import MappingTable
from codesign.schedule import edge_rules, templates
from codesign.schedule.validity import Rule, check
from codesign.schedule.vta.batch import _POS, CANONICAL, VtaBatch
from codesign.schedule.vta.kernels import whole_plane_unpadded
from codesign.schedule.vta.knobs import (
    LIFTS,
    ORDERS,
    PAIR_AXES,
    THREAD_COUNTS,
    VTHREADS,
)

#: This family's rules that depend on the loop order or the residency (`valid_indices`).
ORDER_RULES = frozenset({"wgt_stationary_ci", "wgt_stationary_reuse", "order_canonical", "inp_stationary_ci",
                         "inp_stationary_reuse", "stationary_both", "acc_resident_live", "acc_resident_stationary",
                         "acc_resident_group", "acc_spill", "field_acc_resident", "nest_edge",
                         "nest_edge_uop_cache", "uop_preload_fit", "sram_inp_shared"})
KERNEL_RULES = frozenset({"uop_capacity", "field_iter", "uop_hazard", "uop_fold_live", "uop_lift_live",
                          "uop_lift_edge", "pad_skip_tile", "pad_skip_lift", "uop_flat_reset_edge", "sram_inp"})
#: Template rules this family replaces: INP loads split per block (pad_ci, pad_b, dma_inp), and
#: its own thread rule (one axis, `vthread_div`) instead of the template's two knobs.
REPLACED = frozenset({"pad_ci", "pad_b", "dma_inp", "vthread_oc", "vthread_h", "vthread_max", "sram_inp"})


def _ok_msg(rule: Rule) -> tuple[np.ndarray, Callable[[int], str]]:
    return rule.ok, rule.message


class RulesMixin:
    """Validity of `VtaSpace` configs (mixed into it)."""

    def rules(self, b: VtaBatch, edges: bool = True) -> list[Rule]:
        """Every rule, in order: the template rules that still hold, the layer template's own,
        then this family's (the edge tiles' last, `edge_rules`; `edges=False` leaves them out)."""
        t, n = b.t, b.t.n
        out = [r for r in check(t) if r.name not in REPLACED] + templates.rules(self.layer, t)

        def add(name: str, ok: np.ndarray, message: Callable[[int], str]) -> None:
            out.append(Rule(name, np.broadcast_to(np.asarray(ok, dtype=bool), (n,)), message))

        axis_tiles = np.stack([b.tiles[a] if a else np.ones(n, dtype=np.int64) for a in VTHREADS], axis=1)
        tiles_vt = axis_tiles[np.arange(n), b.vt]
        add("vthread_div", tiles_vt % b.nt == 0, lambda i: (
            f"virtual threads: {b.nt[i]} threads on axis {VTHREADS[b.vt[i]]} need a tile count divisible "
            f"by {b.nt[i]}, got {tiles_vt[i]}"))
        # INP SRAM: one tile per thread, or one for all threads when the tile never changes and the
        # threads split co (one loaded once is then shared: `Mapping.inp_shared`; pass C's rule
        # sram_inp_shared keeps the residencies that reload it to one tile per thread)
        shareable, _once = self._inp_shared(b)
        tab = self.table(b)
        # the rule over the tile any residency could share (pass B runs without order and residency)
        add("sram_inp", *_ok_msg(shared.sram(dataclasses.replace(tab, inp_shared=shareable), self.hw, "inp")))
        # the same over the smallest tile any kernel knob gives the geometry (pad_skip's unpadded
        # whole planes, `apply_pad_skip`): the first pass of `valid_indices` runs with them at 0
        g = self._geo
        whole = whole_plane_unpadded(t, self.tmpl.transposed)
        low = np.where(whole, np.minimum(t.inp_sram, t.tile_b * t.tile_ci * g.height * g.width), t.inp_sram)
        add("sram_inp_bound", *_ok_msg(shared.sram(dataclasses.replace(tab, inp_sram=low, inp_shared=shareable),
                                                   self.hw, "inp")))
        # the rule itself (with sram_inp, whose bound it tightens to the residency's sharing)
        add("sram_inp_shared", shared.sram(tab, self.hw, "inp").ok, lambda i: (
            f"{shared.sram_message('inp', int(t.inp_sram[i]), int(b.nt[i]), self.hw.inp_depth)}; one tile shared by "
            "the threads needs it loaded once: input-stationary (inp_stationary=1)"))
        add("early_epilogue_live", (b.early == 0) | (b.nt > 1), lambda i: (
            "early epilogue: with one thread the epilogue follows its GEMMs anyway (the same program as "
            "early_epilogue=0)"))
        add("vthread_count", (b.vt > 0) | (b.nt_pos == 0), lambda i: (
            f"virtual threads: n_threads={THREAD_COUNTS[b.nt_pos[i]]} needs a thread axis (vthread=0 runs one "
            f"thread; only n_threads={THREAD_COUNTS[0]} is kept)"))
        add("wgt_stationary_ci", (b.ws == 0) | (t.ci_steps == 1), lambda i: (
            f"residency: a stationary weight tile must hold the whole reduction (tile_ci = {self._geo.ci} "
            f"blocks), got {t.ci_steps[i]} reduction steps"))
        inside = self._loads_per_co(b) < b.t.n_tiles // b.nt
        add("wgt_stationary_reuse", (b.ws == 0) | inside, lambda i: (
            "residency: a stationary weight tile is reused by no loop inside the co loop (the same "
            "program as wgt_stationary=0)"))
        live = sum((b.extent[a] > 1).astype(np.int64) << k for k, a in enumerate(PAIR_AXES))
        live = live | (b.ws << PAIR_AXES.index("co"))  # a resident co loop's place matters even at extent 1
        add("order_canonical", CANONICAL[live, b.order], lambda i: (
            f"loop order: order {b.order[i]} {ORDERS[b.order[i]]} moves only extent-1 loops of a "
            f"smaller order index (the same program)"))
        add("uop_fold_live", b.fold_ok, lambda i: (
            f"micro-op fold: pair {b.fold[i]} folds GEMM loops "
            f"{[GEMM_LOOPS[j] for j in FOLD_PAIRS[b.fold[i] - 1]]}, which needs both loops of extent > 1 "
            "and not the template's own fold (uop_fold=0); a transposed conv's kernel is not folded"))
        add("uop_lift_live", b.lift_ok, lambda i: (
            f"micro-op lift: GEMM loops {[GEMM_LOOPS[j] for j in LIFTS[b.lift[i]]]} need extent > 1 each (nothing "
            "to lift otherwise); a transposed conv's kernel is not lifted"))
        add("uop_lift_edge", (b.lift == 0) | (edge_bits(t) == 0), lambda i: (
            f"micro-op lift: uop_lift={b.lift[i]} lifts a loop of the full tile's kernel, but the edge tiles of "
            "tile sizes that do not divide have kernels of their own extents (lowered whole only)"))
        self._nest_rules(b, tab, add)
        self._preload_rules(b, tab, add)
        add("pad_skip_tile", b.ps_ok, lambda i: (
            "pad_skip: the padding-skipping kernel needs a conv that is not transposed, tile sizes that divide (no "
            f"edge tiles) and uop_fold = 0 (got {b.fold[i]}), and either a tile covering the whole output plane of a "
            f"padded or strided conv (tile_h = {self._geo.out_h}, tile_w = {self._geo.out_w}) or a padded conv whose "
            f"middle row tiles read no row padding (got tile_h = {t.tile_h[i]}, tile_w = {t.tile_w[i]}, "
            f"pad = {self._geo.pad})"))
        add("pad_skip_lift", (b.ps == 0) | (b.lift == 0), lambda i: (
            f"pad_skip: the padding-skipping kernel is explicit micro-ops over the taps inside the image; no loop "
            f"of it is lifted into instructions (uop_lift = 0), got uop_lift={b.lift[i]}"))
        split_max = np.maximum(np.maximum(t.hin_t, t.win_t), self._geo.width)
        add("field_inp_split", ~b.split | (split_max <= MAX_DMA_FIELD), lambda i: (
            f"field range: an INP block load size or stride {split_max[i]} > {MAX_DMA_FIELD}"))
        if edges:
            out += edge_rules.rules(b)
            need_u = b.edge_uops * b.slots
            add("nest_edge_uop_cache", need_u <= self.hw.uop_depth, lambda i: (
                f"micro-op cache: with edge tiles every kernel stays cached; {b.slots[i]} ACC slots per thread "
                f"x {b.edge_uops[i]} micro-ops of one slot's kernels = {need_u[i]} > UOP depth {self.hw.uop_depth}"))
        return out

    def _nest_rules(self, b: VtaBatch, tab: MappingTable,
                    add: Callable[[str, np.ndarray, Callable[[int], str]], None]) -> None:
        """The rules of `inp_stationary` and `acc_resident`."""
        t = b.t
        add("inp_stationary_ci", (b.ins == 0) | (t.ci_steps == 1), lambda i: (
            f"residency: a stationary input tile must hold the whole reduction (tile_ci = {self._geo.ci} "
            f"blocks), got {t.ci_steps[i]} reduction steps"))
        spatial = np.stack([np.where(b.extent[a] > 1, b.pos[:, PAIR_AXES.index(a)], -1) for a in ("b", "h", "w")],
                           axis=1).max(axis=1)
        co_pos = b.pos[:, PAIR_AXES.index("co")]
        add("inp_stationary_reuse", (b.ins == 0) | ((b.extent["co"] > 1) & (co_pos > spatial)), lambda i: (
            "residency: a stationary input tile is reused by no co loop inside the innermost spatial loop "
            "(the same program as inp_stationary=0)"))
        add("stationary_both", *_ok_msg(shared.stationary_both(tab)))
        add("acc_resident_live", b.acc <= b.n_live, lambda i: (
            f"residency: acc_resident={b.acc[i]} needs {b.acc[i]} tile loops of extent > 1 to move inside the "
            f"reduction, got {b.n_live[i]} (the same program as acc_resident={b.n_live[i]})"))
        add("acc_resident_stationary", (b.acc == 0) | ((b.ws == 0) & (b.ins == 0)), lambda i: (
            "residency: loops inside the reduction load their operands per reduction step (wgt_stationary "
            "and inp_stationary must be 0)"))
        grouped = self.tmpl.grouped
        co_in = b.inner[:, PAIR_AXES.index("co")]
        add("acc_resident_group", ~(grouped & (co_in | (b.ins == 1))), lambda i: (
            "residency: a grouped conv's input tile changes with the co tile's group, so it is not reused "
            "across a co loop (inp_stationary=0, co not inside the reduction)"))
        add("acc_spill", *_ok_msg(shared.acc_spill(tab, self.hw)))
        add("nest_edge", *_ok_msg(shared.nest_edge(tab)))
        if hasattr(b, "edge_uops"):  # the edge kernels of one slot per thread (`edge_rules.rules`) x the slots
            need_u = b.edge_uops * b.slots
            add("nest_edge_uop_cache", need_u <= self.hw.uop_depth, lambda i: (
                f"micro-op cache: with edge tiles every kernel stays cached; {b.slots[i]} ACC slots per thread "
                f"x {b.edge_uops[i]} micro-ops of one slot's kernels = {need_u[i]} > UOP depth {self.hw.uop_depth}"))
        add("field_acc_resident", b.slots * t.acc_sram <= MAX_ITER, lambda i: (
            f"field range: the epilogue's ALU iter_in {b.slots[i] * t.acc_sram[i]} (ACC slots x tile) > {MAX_ITER}"))

    def _preload_rules(self, b: VtaBatch, tab: MappingTable,
                       add: Callable[[str, np.ndarray, Callable[[int], str]], None]) -> None:
        """The rules of `uop_preload`: every kernel of the program fits the micro-op buffer at once
        (with edge tiles they do already: `edge_uop_cache`), flat resets on full tiles only."""
        edge = tab.edges
        add("uop_preload_fit", *_ok_msg(shared.uop_preload_fit(tab, self.hw)))
        add("uop_flat_reset_edge", (b.pre != 2) | ~edge, lambda i: (
            "micro-op preload: flat reset kernels (uop_preload=2) are built for full tiles only; this schedule has "
            "edge tiles (a tile size that does not divide)"))

    def table(self, b: VtaBatch) -> MappingTable:
        """The shared rules' table (`mapping.table`) of the configs of `b`: the fields of the
        mappings the producer builds from them (`VtaSpace.mapping`)."""
        t = b.t
        shareable, once = self._inp_shared(b)
        spatial = np.isin(np.array(PAIR_AXES), ("b", "h", "w"))
        # resident across pairs: loaded outside the reduction loop, so not at a loop moved inside it
        ins = (b.ins == 1) & ~(b.inner & spatial[None, :]).any(axis=1)
        ws = (b.ws == 1) & ~b.inner[:, PAIR_AXES.index("co")]
        return MappingTable(n_threads=b.nt, acc_sram=t.acc_sram, inp_sram=t.inp_sram, wgt_sram=t.wgt_sram,
                            inp_shared=shareable & once, n_inner=b.slots, inp_stationary=ins, wgt_stationary=ws,
                            edges=edge_bits(t) != 0, uop_preload=b.pre > 0, tile_b=t.tile_b,
                            reset_uops=t.reset["n_uops"], gemm_uops=t.gemm["n_uops"],
                            n_lift=b.lift_loop[..., 0].prod(axis=1),
                            epilogue_uops=np.full(t.n, len(templates.clip_epilogue(0)), dtype=np.int64))

    def _inp_shared(self, b: VtaBatch) -> tuple[np.ndarray, np.ndarray]:
        """(shareable, loaded once): the INP tile never changes and the threads split co, so one
        tile can serve them all; and it is input-stationary, so loaded once per thread
        (order_canonical keeps order 0): then it is shared (`Mapping.inp_shared`)."""
        shareable = ((b.vt == VTHREADS.index("co")) & (b.t.ci_steps == 1) & (b.extent["b"] == 1)
                     & (b.extent["h"] == 1) & (b.extent["w"] == 1) & (not self.tmpl.grouped))
        return shareable, b.ins == 1

    @staticmethod
    def _loads_per_co(b: VtaBatch) -> np.ndarray:
        """Iterations of the co loop and the loops outside it: the loads of a stationary weight
        tile per thread."""
        pos = _POS[b.order]
        co = pos[:, PAIR_AXES.index("co")]
        n = np.ones_like(co)
        for k, a in enumerate(PAIR_AXES):
            n = n * np.where(pos[:, k] <= co, b.extent[a], 1)
        return n

    @staticmethod
    def _loads_per_inp(b: VtaBatch) -> np.ndarray:
        """Iterations of the innermost spatial loop of extent > 1 and the loops outside it: the
        loads of a stationary input tile per thread."""
        spatial = np.stack([np.where(b.extent[a] > 1, b.pos[:, PAIR_AXES.index(a)], -1) for a in ("b", "h", "w")],
                           axis=1).max(axis=1)
        n = np.ones_like(spatial)
        for k, a in enumerate(PAIR_AXES):
            n = n * np.where(b.pos[:, k] <= spatial, b.extent[a], 1)
        return n
