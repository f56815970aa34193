"""FPGA resource model of a VTA config on a board: LUT, FF, BRAM18, DSP, area and feasibility.

What physics fixes is computed, not fitted:
- every on-chip memory is mapped onto Xilinx block RAM the way Vivado tiles it (cheapest
  column-wise mix of RAMB18/RAMB36 aspect ratios, parity bits used as data, 512-deep wide modes
  only for simple-dual-port memories), with VTA's banking rule for the block-design memories
  (vta-reference §1.2: banks = ceil(width/1024), bank width = min(width, 1024));
- the command/dependency FIFOs (§4.2) and the HLS m_axi burst buffers are mapped the same way;
- the GEMM core has BATCH·BLOCK_IN·BLOCK_OUT int8 multipliers and BATCH·BLOCK_OUT adder trees of
  BLOCK_IN products plus a 32-bit accumulate; the ALU has BATCH·BLOCK_OUT 32-bit lanes.

Everything else (control, index generators, AXI/SmartConnect/DMA infrastructure) is one fixed
term per resource, fitted so that the published ZU3EG 1x16 build (landscape: 22,173 LUT,
31,001 FF, 273 BRAM18, 277 DSP at 250 MHz) is reproduced; see `COEFFICIENTS` and `fit_error()`.
With one data point and one fixed term per resource the fit is exact by construction (error 0 on
all four); it cannot validate the assumed per-unit coefficients, only bound them (every fixed term
must stay non-negative, which `fit()` checks). Consistency check on the memory mapping: without
parity bits as data (x8/x16/x32 modes only) the memories, FIFOs and m_axi buffers of that build
would need 276 BRAM18, more than the 273 published, so the build must use parity bits as we do.

Not modelled: resources do not depend on the clock (HLS adds pipeline registers at higher
targets; the FF term was fitted at 250 MHz, so 100 MHz builds are estimated conservatively), and
timing closure is not checked (any PL clock of the board is accepted).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from codesign.hw.board import Board
from codesign.hw.config import HwConfig

RESOURCES = ("lut", "ff", "bram18", "dsp")

# -- Block RAM primitives (7-series / UltraScale+ are identical here) -------------------------
# (depth, width, cost in BRAM18 equivalents, simple-dual-port only). Widths include parity bits,
# which Vivado uses as data bits for x9/x18/x36/x72 modes. Source: Xilinx UG473 / UG573.
BRAM_MODES: tuple[tuple[int, int, int, bool], ...] = (
    # RAMB18E1/E2
    (16384, 1, 1, False), (8192, 2, 1, False), (4096, 4, 1, False), (2048, 9, 1, False),
    (1024, 18, 1, False), (512, 36, 1, True),
    # RAMB36E1/E2 (counts as two BRAM18)
    (32768, 1, 2, False), (16384, 2, 2, False), (8192, 4, 2, False), (4096, 9, 2, False),
    (2048, 18, 2, False), (1024, 36, 2, False), (512, 72, 2, True),
)

MAX_BANK_BITS = 1024  # VTA pkg_config max_bus_width (reference §1.2)


@lru_cache(maxsize=4096)
def bram18_for_memory(width_bits: int, depth: int, sdp: bool = False) -> int:
    """BRAM18 equivalents of one width x depth memory: the cheapest column-wise tiling.

    Each column uses one aspect ratio, cascaded in depth (ceil(depth/d) primitives); the columns
    together must cover `width_bits`. Minimum-cost cover is a small unbounded knapsack over width.
    """
    if width_bits <= 0 or depth <= 0:
        return 0
    options = [
        (w, cost * math.ceil(depth / d))
        for d, w, cost, sdp_only in BRAM_MODES
        if sdp or not sdp_only
    ]
    best = [0] + [math.inf] * width_bits  # best[b] = min cost to cover at least b bits
    for bits in range(1, width_bits + 1):
        best[bits] = min(c + best[max(0, bits - w)] for w, c in options)
    return int(best[width_bits])


def banked_bram18(width_bits: int, depth: int, sdp: bool = False) -> int:
    """A block-design memory split into ceil(width/1024) banks of min(width, 1024) bits (§1.2)."""
    banks = math.ceil(width_bits / MAX_BANK_BITS)
    return banks * bram18_for_memory(min(width_bits, MAX_BANK_BITS), depth, sdp)


def adder_tree_bits(n_inputs: int, input_bits: int) -> int:
    """Total adder bits of a balanced binary tree over n products (level l adds are input_bits+l wide)."""
    total, level, n = 0, 1, n_inputs
    while n > 1:
        pairs = n // 2
        total += pairs * (input_bits + level)
        n = pairs + (n % 2)
        level += 1
    return total


# -- Coefficients: the one place for every number of the model ---------------------------------
@dataclass(frozen=True)
class ResourceCoefficients:
    """Per-unit costs. `assumed` ones are engineering figures, `fixed_*` are fitted (see fit())."""

    # DSP: one int8 x int8 product per DSP48. Assumed from the data: packing two int8 products per
    # DSP48E2 (WP486) needs hand-written HLS code VTA does not have, and with packing the published
    # 277 DSP would leave 149 DSPs for control, which its index arithmetic cannot use. One per DSP
    # leaves 21, which matches the few 32-bit address multiplies of fetch/load/compute/store.
    mults_per_dsp: int = 1
    # Multipliers beyond the DSP budget are built in fabric (assumed: the build caps DSP use at the
    # device, as the shipped PYNQ 1x16 build with 256 products on 220 DSP48E1 must have done).
    # An 8x8 signed LUT multiplier is about 64 LUT6 (Xilinx Multiplier LogiCORE, PG108, area mode)
    # plus a 16-bit output register.
    lut_per_lut_mult: float = 64.0
    ff_per_lut_mult: float = 16.0
    # Adder trees and the 32-bit accumulate: one LUT per bit on the carry chain (physics of the
    # CARRY4/CARRY8 fabric); at the 250 MHz of the anchor build HLS registers every tree level.
    lut_per_adder_bit: float = 1.0
    ff_per_adder_bit: float = 1.0
    product_bits: int = 16  # int8 x int8
    acc_bits: int = 32
    # ALU lane (32 bit): min, max, add, arithmetic shift (5-level barrel shifter on LUT6 4:1 muxes
    # ~3 LUT/bit), compare, result mux and immediate select: ~250 LUT and a 4-stage pipeline.
    # Assumed (HLS ALU II=2, TSIM valid_r4 latency, reference §4.3/§4.4).
    lut_per_alu_lane: float = 250.0
    ff_per_alu_lane: float = 128.0
    # Wide memory datapaths (INP, WGT, ACC, OUT words): compute registers each read word and the
    # load/store modules assemble words from bus beats. Assumed 1 LUT and 2 FF per bit.
    lut_per_datapath_bit: float = 1.0
    ff_per_datapath_bit: float = 2.0
    # HLS m_axi adapters (fetch, load, compute uop, compute data, store): one burst buffer each,
    # depth = 16 outstanding x 16-beat bursts (Vivado HLS defaults), bus-wide, simple dual port.
    axi_masters: int = 5
    axi_buffer_depth: int = 256
    # FIFOs between modules (reference §4.2): 3 command FIFOs 128 b x 512, 4 dependency 8 b x 1024.
    cmd_fifos: tuple[int, int, int] = (3, 128, 512)
    dep_fifos: tuple[int, int, int] = (4, 8, 1024)
    # Fitted fixed terms (control FSMs, index generators, SmartConnect, AXI-lite, DMA engines, and
    # the residual of the memory mapping); set by fit() from the published build.
    fixed_lut: float = 0.0
    fixed_ff: float = 0.0
    fixed_bram18: float = 0.0
    fixed_dsp: float = 0.0
    provenance: dict[str, str] = field(default_factory=dict, compare=False, hash=False)


# The one measured build (landscape.md): Vivado post-implementation, Ultra96 (ZU3EG), 1x16 int8,
# 250 MHz, 128-bit S_AXI_HPC0 port.
PUBLISHED_BUILD: dict[str, Any] = {
    "hw": "ultra96_1x16_i8w8a32_15_15_18_17_250MHz",
    "board": "ultra96",
    "resources": {"lut": 22173, "ff": 31001, "bram18": 273, "dsp": 277},
    "source": "landscape.md: published VTA build, ZU3EG, 1x16 int8 at 250 MHz (post-implementation)",
}


@dataclass(frozen=True)
class Resources:
    lut: int
    ff: int
    bram18: int
    dsp: int
    detail: dict[str, dict[str, float]] = field(default_factory=dict, compare=False, hash=False)

    def as_dict(self) -> dict[str, int]:
        return {"lut": self.lut, "ff": self.ff, "bram18": self.bram18, "dsp": self.dsp}

    def utilization(self, board: Board) -> dict[str, float]:
        totals = board.totals()
        return {r: getattr(self, r) / totals[r] for r in RESOURCES}

    def area(self, board: Board) -> float:
        """The area objective: utilization of the board's scarcest resource (issue 5 §2)."""
        return max(self.utilization(board).values())

    def to_json(self, board: Board | None = None) -> dict[str, Any]:
        out: dict[str, Any] = self.as_dict()
        if board is not None:
            out["utilization"] = {k: round(v, 6) for k, v in self.utilization(board).items()}
            out["area"] = round(self.area(board), 6)
        return out


def _variable_parts(hw: HwConfig, board: Board, k: ResourceCoefficients) -> dict[str, dict[str, float]]:
    """Every component except the fitted fixed terms."""
    zero = {r: 0.0 for r in RESOURCES}
    d: dict[str, dict[str, float]] = {}
    inp_bits, wgt_bits = hw.inp_elem_bytes * 8, hw.wgt_elem_bytes * 8
    acc_bits, out_bits = hw.acc_elem_bytes * 8, hw.out_elem_bytes * 8
    # Memories (reference §1.2, §4.2): INP, WGT, OUT are true-dual-port block-design BRAMs with
    # VTA's banking; UOP and ACC live inside the compute HLS module (one read + one write port).
    mems = {
        "uop_mem": bram18_for_memory(32, hw.uop_depth, sdp=True),
        "inp_mem": banked_bram18(inp_bits, hw.inp_depth),
        "wgt_mem": banked_bram18(wgt_bits, hw.wgt_depth),
        "acc_mem": bram18_for_memory(acc_bits, hw.acc_depth, sdp=True),
        "out_mem": banked_bram18(out_bits, hw.out_depth),
    }
    for name, b in mems.items():
        d[name] = {**zero, "bram18": float(b)}
    n, w, depth = k.cmd_fifos
    m, w2, depth2 = k.dep_fifos
    d["fifos"] = {**zero, "bram18": float(n * bram18_for_memory(w, depth, sdp=True)
                                          + m * bram18_for_memory(w2, depth2, sdp=True))}
    d["axi_buffers"] = {**zero, "bram18": float(
        k.axi_masters * bram18_for_memory(int(hw.axi_bits), k.axi_buffer_depth, sdp=True))}
    # GEMM core.
    n_mult = hw.macs_per_cycle
    dsp_budget = max(0, board.dsp - int(round(k.fixed_dsp)))
    dsp_gemm = min(math.ceil(n_mult / k.mults_per_dsp), dsp_budget)
    lut_mults = max(0, n_mult - dsp_gemm * k.mults_per_dsp)
    trees = hw.batch * hw.block_out
    tree_bits = trees * (adder_tree_bits(hw.block_in, k.product_bits) + k.acc_bits)
    d["gemm"] = {
        "lut": lut_mults * k.lut_per_lut_mult + tree_bits * k.lut_per_adder_bit,
        "ff": lut_mults * k.ff_per_lut_mult + tree_bits * k.ff_per_adder_bit,
        "bram18": 0.0,
        "dsp": float(dsp_gemm),
    }
    d["gemm_lut_multipliers"] = {**zero, "count": float(lut_mults)}  # informational
    lanes = hw.batch * hw.block_out
    d["alu"] = {**zero, "lut": lanes * k.lut_per_alu_lane, "ff": lanes * k.ff_per_alu_lane}
    path_bits = inp_bits + wgt_bits + acc_bits + out_bits
    d["datapath"] = {**zero, "lut": path_bits * k.lut_per_datapath_bit,
                     "ff": path_bits * k.ff_per_datapath_bit}
    return d


def _sum(detail: dict[str, dict[str, float]], resource: str) -> float:
    return sum(part.get(resource, 0.0) for name, part in detail.items() if name != "gemm_lut_multipliers")


def fit(base: ResourceCoefficients | None = None) -> ResourceCoefficients:
    """Fit the fixed terms so the published ZU3EG build is matched exactly (one data point, four
    unknowns: one fixed term per resource; everything else is fixed by physics or assumed)."""
    base = base or ResourceCoefficients()
    hw = HwConfig.from_name(PUBLISHED_BUILD["hw"])
    board = Board.named(PUBLISHED_BUILD["board"])
    published = PUBLISHED_BUILD["resources"]
    # DSP first: the DSP budget of the GEMM core depends on it (no spill on the ZU3EG anchor).
    parts = _variable_parts(hw, board, replace(base, fixed_dsp=0.0))
    fixed = {r: published[r] - _sum(parts, r) for r in RESOURCES}
    for r, v in fixed.items():
        if v < 0:  # the assumed coefficients alone already exceed the build: they are wrong
            raise AssertionError(f"resource fit: negative fixed {r} term {v}")
    prov = {
        "fixed_*": f"fitted to {PUBLISHED_BUILD['source']}",
        "memories/fifos/axi_buffers": "computed: Vivado BRAM tiling (UG473/UG573), reference §1.2, §4.2",
        "others": "assumed engineering coefficients (see ResourceCoefficients comments)",
    }
    return replace(base, fixed_lut=fixed["lut"], fixed_ff=fixed["ff"], fixed_bram18=fixed["bram18"],
                   fixed_dsp=fixed["dsp"], provenance=prov)


COEFFICIENTS = fit()


@lru_cache(maxsize=8192)
def _estimate_cached(hw: HwConfig, board: Board, k: ResourceCoefficients) -> Resources:
    detail = _variable_parts(hw, board, k)
    detail["control"] = {"lut": k.fixed_lut, "ff": k.fixed_ff, "bram18": k.fixed_bram18,
                         "dsp": k.fixed_dsp}
    totals = {r: int(round(_sum(detail, r))) for r in RESOURCES}
    return Resources(**totals, detail=detail)


def estimate(hw: HwConfig, board: Board, coefficients: ResourceCoefficients | None = None) -> Resources:
    """LUT, FF, BRAM18 and DSP of `hw` built for `board`, with a per-component `detail`."""
    return _estimate_cached(hw, board, coefficients or COEFFICIENTS)


def fit_error() -> dict[str, dict[str, float]]:
    """Model vs the published build, per resource: estimate, published, relative error."""
    hw = HwConfig.from_name(PUBLISHED_BUILD["hw"])
    res = estimate(hw, Board.named(PUBLISHED_BUILD["board"]))
    out = {}
    for r in RESOURCES:
        pub = PUBLISHED_BUILD["resources"][r]
        out[r] = {"estimate": getattr(res, r), "published": pub, "rel_error": (getattr(res, r) - pub) / pub}
    return out


def clock_reason(hw: HwConfig, board: Board) -> str | None:
    if not any(abs(float(hw.clock_mhz) - c) < 1e-6 for c in board.pl_clocks_mhz):  # type: ignore[arg-type]
        clocks = ", ".join(f"{c:g}" for c in board.pl_clocks_mhz)
        return f"clock_mhz={hw.clock_mhz:g} is not a PL clock of {board.name} (allowed: {clocks})"
    return None


def infeasible_reason(hw: HwConfig, board: Board, resources: Resources | None = None) -> str | None:
    """Why `hw` cannot be built on `board` (first failing rule), or None if it can."""
    if hw.TARGET != board.target:
        return f"TARGET={hw.TARGET!r} does not match board {board.name} (needs TARGET={board.target!r})"
    if hw.axi_bits > board.axi_bits:  # type: ignore[operator]
        return (f"axi_bits={hw.axi_bits} exceeds the {board.axi_bits}-bit PS port of {board.name}")
    reason = clock_reason(hw, board)
    if reason:
        return reason
    res = resources or estimate(hw, board)
    totals = board.totals()
    for r in RESOURCES:
        need = getattr(res, r)
        if need > totals[r]:
            return (f"{hw.name} needs {need} {r.upper()} but {board.name} has {totals[r]} "
                    f"({100.0 * need / totals[r]:.0f}%)")
    return None


def is_feasible(hw: HwConfig, board: Board) -> bool:
    return infeasible_reason(hw, board) is None


__all__ = [
    "BRAM_MODES", "COEFFICIENTS", "PUBLISHED_BUILD", "RESOURCES", "ResourceCoefficients", "Resources",
    "adder_tree_bits", "banked_bram18", "bram18_for_memory", "estimate", "fit", "fit_error",
    "infeasible_reason", "is_feasible",
]
