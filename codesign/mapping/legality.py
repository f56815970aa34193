"""Legality of a `Mapping`: named rules, checked before lowering a mapping no space validated.

The AutoTVM mappings are legal by construction from a valid config (the space's rules,
`codesign.schedule.validity`, cover their tiles); these rules add what a loop nest of any order
must satisfy for `codesign.lower` to emit a correct, race-free program. The rules a space checks
too (SRAM, ACC spill, residency on edge tiles, both operands stationary, micro-op preload) are
written once in `mapping.table` and run here on the mapping's one-row table."""

from __future__ import annotations

from codesign.hw.config import HwConfig
from codesign.mapping.edges import EDGE_AXES
from codesign.mapping.mapping import AXES, Mapping, fused_slots
from codesign.mapping.table import (
    Rule,
    acc_spill,
    acc_spill_message,
    nest_edge,
    of_mapping,
    sram,
    sram_message,
    stationary_both,
    uop_preload_fit,
)
from codesign.vta.isa import TOKEN_FIFO_DEPTH

__all__ = ["acc_spill_message", "preload_uops", "sram_message", "violations"]


def violations(m: Mapping, hw: HwConfig) -> list[tuple[str, str]]:
    """(rule name, message) of every rule `m` breaks, in order."""
    out: list[tuple[str, str]] = []
    loops, red = m.loops, m.red
    if m.inner_loops and m.level("out") != red:
        out.append(("reduction_innermost", f"loop order: the loops inside the reduction loop keep their output tiles "
                                           f"resident in ACC, so OUT is stored at the reduction loop {loops[red].name!r}, "
                                           f"got {loops[m.level('out')].name!r}"))
    elif not m.inner_loops and m.level("out") != red - 1:
        out.append(("residency_out", f"residency: OUT is stored at the innermost tile loop {loops[red - 1].name!r}"))
    for axis in AXES[:4]:
        walking = [lp.name for lp in m.pair_loops + m.inner_loops if lp.axis == axis]
        if len(walking) != 1:
            out.append(("one_loop_per_axis", f"loop order: axis {axis} needs exactly one tile loop, got {walking}"))
    g, t = m.geo, m.tile
    sizes = {"b": (g.b, t.b), "h": (g.out_h, t.h), "w": (g.out_w, t.w), "co": (g.co, t.co), "ci": (g.ci, t.ci)}
    for axis, (size, tile) in sizes.items():
        n = 1
        for lp in m.loops + m.vthreads:
            n *= lp.extent if lp.axis == axis else 1
        edge = m.edges is not None and axis in EDGE_AXES and m.edges.last[EDGE_AXES.index(axis)] >= 0
        if n * tile != size and not (edge and n == -(-size // tile)):  # a smaller last tile: mapping.edges
            out.append(("cover", f"divisibility: axis {axis} of {size} is covered by {n} tile(s) of {tile}"))
    tab = of_mapping(m)  # the rules the schedule spaces share, on this one row (`mapping.table`)

    def shared(*rules: Rule) -> None:
        out.extend((r.name, r.message(0)) for r in rules if not r.ok[0])

    shared(sram(tab, hw, "acc"), sram(tab, hw, "inp"), sram(tab, hw, "wgt"), acc_spill(tab, hw))
    for op in ("inp", "wgt"):
        inside = [lp for lp in loops[m.level(op) + 1:] if lp.extent > 1 and lp.axis in m.depends(op)]
        if inside:
            out.append(("residency_reuse", f"residency: {op.upper()} is resident at loop "
                                           f"{loops[m.level(op)].name!r} but its tile changes in loop {inside[0].name!r}"))
    shared(nest_edge(tab), stationary_both(tab))
    if m.inp_loads not in (1, t.b * t.ci):
        out.append(("inp_loads", f"INP loads: {m.inp_loads} per tile, allowed 1 or one per batch x channel "
                                 f"block ({t.b * t.ci})"))
    if m.n_threads > TOKEN_FIFO_DEPTH:  # each FIFO holds at most one token per thread (docs/vta.md §7.3)
        out.append(("vthread_max", f"virtual threads: {m.n_threads} > {TOKEN_FIFO_DEPTH}, the tokens a "
                                   "dependency FIFO holds"))
    shared(uop_preload_fit(tab, hw))
    if (m.has_bias or m.has_residual) and m.n_inner > 1:
        out.append(("fused_acc_resident", "fused epilogue: its bias and residual slots follow one output tile per "
                                          f"thread, got {m.n_inner} tiles resident in ACC"))
    elif m.has_bias or m.has_residual:
        if m.edges is not None and m.has_residual and fused_slots(m).chunks > 1:
            out.append(("fused_edge", "fused residual: a residual tile loaded in chunks (larger than the thread's "
                                      "INP slice) is lowered for full tiles only; this schedule has edge tiles"))
        out += _fused(m, hw)
    return out


def preload_uops(m: Mapping) -> int:
    """Micro-ops of every kernel of a full-tile mapping (`Mapping.uop_preload`, `table.preload_uops`)."""
    return int(of_mapping(m).preload_uops[0])


def _fused(m: Mapping, hw: HwConfig) -> list[tuple[str, str]]:
    """The fused epilogue's SRAM room and block shapes (docs/vta.md §7.8)."""
    out: list[tuple[str, str]] = []
    fs = fused_slots(m, hw.wgt_depth)
    if m.has_residual and m.level("inp") != m.red:
        out.append(("fused_inp", "fused residual: its chunks overwrite the thread's INP slice, which stays "
                                 "resident across pairs (input-stationary)"))
    if fs.ident_each and m.level("wgt") != m.red:
        out.append(("fused_ident", "fused residual: no free WGT row for the identity block, and the thread's "
                                   "WGT slice stays resident across pairs (weight-stationary)"))
    if m.has_residual and hw.block_in != hw.block_out:
        out.append(("fused_blocks", f"fused residual: the residual tile is loaded as INP blocks, which needs "
                                    f"BLOCK_IN == BLOCK_OUT (got {hw.block_in} and {hw.block_out})"))
    for buf, need, depth, what in (("acc", fs.acc_need, hw.acc_depth, "ACC tile + bias blocks"),
                                   ("wgt", fs.wgt_need, hw.wgt_depth, "WGT tile + identity block")):
        if need > depth:
            out.append((f"fused_sram_{buf}", f"SRAM capacity: fused epilogue: {what} x {m.n_threads} "
                                             f"thread(s) = {need} > {buf.upper()} depth {depth}"))
    return out
