"""The rules a schedule space and a single `Mapping` share, written once over a table of Mapping fields.

A `MappingTable` holds, one row per config, the Mapping fields these rules read (numpy arrays of
shape (n,)). A schedule space fills it for many configs at once from its knobs
(`codesign.schedule.vta_space`, `codesign.schedule.validity`); `of_mapping` fills one row from a
hand-written or produced `Mapping` (`codesign.mapping.legality`). Each rule below is then the same
code on both paths, so the space and the lowering's legality check cannot disagree on it
(tests/test_rule_table.py feeds random configs of every family through both).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from codesign.hw.config import HwConfig
from codesign.mapping.mapping import Mapping, fused_slots


@dataclass
class Rule:
    name: str
    ok: np.ndarray                       # bool (n,)
    message: Callable[[int], str]        # message for config i (only called when not ok[i])


@dataclass(frozen=True)
class MappingTable:
    """Mapping fields per config (arrays of shape (n,)), the inputs of the shared rules."""

    n_threads: np.ndarray       # virtual threads (`Mapping.n_threads`)
    acc_sram: np.ndarray        # elements of one thread's tile in each buffer (`Tile.*_sram`)
    inp_sram: np.ndarray
    wgt_sram: np.ndarray
    inp_shared: np.ndarray      # bool: one INP tile serves every thread (`Mapping.inp_shared`)
    n_inner: np.ndarray         # output tiles resident in ACC per thread (`Mapping.n_inner`)
    inp_stationary: np.ndarray  # bool: INP resident across pairs (loaded outside the reduction loop)
    wgt_stationary: np.ndarray  # bool: WGT resident across pairs
    edges: np.ndarray           # bool: some tile size does not divide (`Mapping.edges`)
    uop_preload: np.ndarray     # bool: every kernel in the micro-op buffer at once (`Mapping.uop_preload`)
    tile_b: np.ndarray          # batch blocks per tile
    reset_uops: np.ndarray      # micro-ops of the reset kernel
    gemm_uops: np.ndarray       # micro-ops of one GEMM kernel
    n_lift: np.ndarray          # GEMM instructions per kernel use (`Mapping.n_lift`)
    epilogue_uops: np.ndarray   # micro-ops of one thread's epilogue kernels (`epilogue_uops`)

    @property
    def preload_uops(self) -> np.ndarray:
        """Micro-ops of every kernel of a full-tile mapping (`Mapping.uop_preload`): per thread, the C
        ACC slots x batch blocks x (reset + lifted GEMMs) and the epilogue's."""
        return self.n_threads * (self.n_inner * self.tile_b * (self.reset_uops + self.n_lift * self.gemm_uops)
                                 + self.epilogue_uops)


def epilogue_uops(m: Mapping) -> int:
    """Micro-ops of one thread's epilogue kernels: a bias ADD one per output channel block, a
    residual one per chunk, an ALU op with an immediate one."""
    return sum(m.tile.co if a.src == "bias" else fused_slots(m).chunks if a.src == "residual" else 1
               for a in m.epilogue)


def of_mapping(m: Mapping) -> MappingTable:
    """The one-row table of `m`."""
    def a(v: object) -> np.ndarray:
        return np.array([v])
    red = m.red
    return MappingTable(
        n_threads=a(m.n_threads), acc_sram=a(m.tile.acc_sram), inp_sram=a(m.tile.inp_sram),
        wgt_sram=a(m.tile.wgt_sram), inp_shared=a(m.inp_shared), n_inner=a(m.n_inner),
        inp_stationary=a(m.level("inp") < red), wgt_stationary=a(m.level("wgt") < red),
        edges=a(m.edges is not None), uop_preload=a(m.uop_preload), tile_b=a(m.tile.b),
        reset_uops=a(m.reset.size), gemm_uops=a(m.gemm.size), n_lift=a(m.n_lift), epilogue_uops=a(epilogue_uops(m)))


# -- the shared rules ------------------------------------------------------------------------------

def sram_message(buf: str, elems: int, n_threads: int, depth: int) -> str:
    return (f"SRAM capacity: {buf} tile {elems} elements x {n_threads} thread(s) = "
            f"{elems * n_threads} > {buf.upper()} depth {depth}")


def acc_spill_message(tiles: int, elems: int, n_threads: int, depth: int) -> str:
    return (f"ACC spill: {tiles} resident output tiles x {elems} elements x {n_threads} thread(s) = "
            f"{tiles * elems * n_threads} > ACC depth {depth}, and VTA's STORE reads the int8 OUT buffer, never "
            "ACC, so int32 partial sums cannot be spilled to DRAM and reloaded exactly")


def sram(t: MappingTable, hw: HwConfig, buf: str) -> Rule:
    """`sram_<buf>`: a tile per thread fits its buffer (one INP tile for all threads when shared)."""
    elems, depth = {"acc": (t.acc_sram, hw.acc_depth), "inp": (t.inp_sram, hw.inp_depth),
                    "wgt": (t.wgt_sram, hw.wgt_depth)}[buf]
    copies = np.where(t.inp_shared, 1, t.n_threads) if buf == "inp" else t.n_threads
    return Rule(f"sram_{buf}", elems * copies <= depth,
                lambda i: sram_message(buf, int(elems[i]), int(copies[i]), depth))


def acc_spill(t: MappingTable, hw: HwConfig) -> Rule:
    """`acc_spill`: the output tiles resident in ACC fit it (one slot each, per thread); one slot
    is `sram_acc`'s."""
    need = t.n_inner * t.acc_sram * t.n_threads
    return Rule("acc_spill", (t.n_inner <= 1) | (need <= hw.acc_depth), lambda i: acc_spill_message(
        int(t.n_inner[i]), int(t.acc_sram[i]), int(t.n_threads[i]), hw.acc_depth))


def nest_edge(t: MappingTable) -> Rule:
    return Rule("nest_edge", ~(t.edges & t.inp_stationary), lambda i: (
        "residency: input-stationary tiles are lowered for full tiles only; this schedule has edge tiles "
        "(a tile size that does not divide)"))


def stationary_both(t: MappingTable) -> Rule:
    return Rule("stationary_both", ~(t.inp_stationary & t.wgt_stationary), lambda i: (
        "residency: INP and WGT both resident across pairs leaves reduction steps with nothing to load "
        "(each load group carries the tokens of its GEMM)"))


def uop_preload_fit(t: MappingTable, hw: HwConfig) -> Rule:
    """`uop_preload_fit`: every kernel fits the micro-op buffer at once (with edge tiles every
    kernel is cached at once anyway: `edge_uop_cache`)."""
    need = t.preload_uops
    return Rule("uop_preload_fit", ~t.uop_preload | t.edges | (need <= hw.uop_depth), lambda i: (
        f"micro-op preload: every kernel loaded at once needs {need[i]} micro-ops > UOP depth {hw.uop_depth}"))
