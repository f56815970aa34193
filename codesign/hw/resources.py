"""FPGA resource model of a VTA config on a board: LUT, FF, BRAM18, DSP, area and feasibility.

What physics fixes is computed, not fitted:
- every on-chip memory is mapped onto Xilinx block RAM the way Vivado tiles it (cheapest
  column-wise mix of RAMB18/RAMB36 aspect ratios, parity bits used as data, 512-deep wide modes
  only for simple-dual-port memories), with VTA's banking rule for the block-design memories
  (docs/vta.md §1.2: banks = ceil(width/1024), bank width = min(width, 1024));
- the command/dependency FIFOs (docs/vta.md §4.2) and the HLS m_axi burst buffers are mapped the same way;
- the GEMM core has BATCH·BLOCK_IN·BLOCK_OUT int8 products. As the HLS csynth report of VTA's
  compute module shows (ZU3EG, int8 1x16, `hw_configs/reports/README.md`), HLS binds them in pairs:
  one product per DSP48 `i0 + i1*i2` MAC whose post-adder adds the partner product, which HLS
  leaves as a fabric multiply (128 DSP for 256 products). Vivado synthesis then maps fabric
  products onto free DSPs (the implemented 1x16 builds use 268-277 DSP), so a core needs at
  least products/2 DSPs and uses up to one per product while the device has them; the rest
  are LUT multipliers. The DSP post-adders are the first level of each BLOCK_IN-input adder
  tree; the remaining levels plus a 32-bit accumulate are fabric adders. The ALU has
  BATCH·BLOCK_OUT 32-bit lanes;
- the AXI data width sets the m_axi burst buffers (BRAM) and a per-bit data path per master.

Everything else (control, index generators, AXI/SmartConnect/DMA infrastructure) is one fixed
term per resource, fitted so that the published ZU3EG 1x16 build (22,173 LUT, 31,001 FF,
273 BRAM18, 277 DSP at 250 MHz) is reproduced; see `COEFFICIENTS` and `fit_error()`. With one
data point and one fixed term per resource the fit is exact by construction; the independent
checks against the other real ZU3EG reports (HLS csynth components, the INT4 builds) are
`check_against_reports()` and docs/resources.md, which states the error per resource.
Consistency check on the memory mapping: without parity bits as data (x8/x16/x32 modes only) the
memories, FIFOs and m_axi buffers of that build would need more BRAM18 than the 273 published.

Not modelled: resources do not depend on the clock (HLS adds pipeline registers at higher
targets; the FF term was fitted at 250 MHz, so 100 MHz builds are estimated conservatively),
timing closure is not checked (any PL clock of the board is accepted; see Board.clock_verified),
and UltraRAM is never used (VTA's memories are block-design BRAM generators).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from codesign.fileio import read_document
from codesign.hw.board import Board
from codesign.hw.config import HwConfig
from codesign.paths import HW_CONFIGS

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

MAX_BANK_BITS = 1024  # VTA pkg_config max_bus_width (docs/vta.md §1.2)


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
    """A block-design memory split into ceil(width/1024) banks of min(width, 1024) bits (docs/vta.md §1.2)."""
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

    # DSP: HLS binds half the int8 products to DSP48 MACs (`i0 + i1*i2`, the partner product
    # entering through the post-adder): csynth of compute, int8 1x16x16 on the ZU3EG: 128 DSP48E
    # MACs for 256 products (hw_configs/reports). These DSPs are the minimum a core needs.
    hls_products_per_dsp: int = 2
    # Vivado synthesis maps the fabric products HLS left to free DSPs: the implemented ZU3EG 1x16
    # builds use 277 (int8) and 268 (int4) DSP for 256 products, i.e. one per product plus
    # 12-21 for address arithmetic. Products beyond the device's DSPs stay in fabric.
    synthesis_fills_dsp: bool = True
    # An 8x8 signed fabric multiplier: 40 LUT (the HLS csynth operator estimate, 128 such `mul`
    # expressions of 8x8 bits at 40 LUT each) plus a 16-bit output register (assumed).
    lut_per_lut_mult: float = 40.0
    ff_per_lut_mult: float = 16.0
    # Adder trees and the 32-bit accumulate: one LUT per bit on the carry chain (physics of the
    # CARRY4/CARRY8 fabric); at the 250 MHz of the anchor build HLS registers every tree level.
    # The first tree level is the DSP post-adder, so the fabric tree has ceil(BLOCK_IN/2) inputs
    # of product_bits+1 bits (csynth: per output 4 x 18-, 2 x 19-, 1 x 20-bit adds + a 32-bit
    # accumulate for BLOCK_IN=16; HLS sign-extends one bit more than needed).
    lut_per_adder_bit: float = 1.0
    ff_per_adder_bit: float = 1.0
    product_bits: int = 16  # int8 x int8
    acc_bits: int = 32
    # ALU lane (32 bit): min, max, add, arithmetic shift (5-level barrel shifter on LUT6 4:1 muxes
    # ~3 LUT/bit), compare, result mux and immediate select: ~250 LUT and a 4-stage pipeline.
    # Assumed (HLS ALU II=2, TSIM valid_r4 latency, docs/vta.md §4.3/docs/vta.md §4.4).
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
    # Bus-wide data path per master besides the buffers (read/write data registers of the m_axi
    # adapter and the SmartConnect slice it feeds). Assumed 1 LUT + 2 FF per bit (a register and
    # a mux input per bit per direction). The csynth report bounds it from above: compute's
    # 128-bit data adapter and its 32-bit uop adapter cost the same 580 LUT / 512 FF, so most of
    # an adapter does not scale with the width; the width-dependent cost is the buffers' BRAM.
    lut_per_axi_bit: float = 1.0
    ff_per_axi_bit: float = 2.0
    # FIFOs between modules (docs/vta.md §4.2): 3 command FIFOs 128 b x 512, 4 dependency 8 b x 1024.
    cmd_fifos: tuple[int, int, int] = (3, 128, 512)
    dep_fifos: tuple[int, int, int] = (4, 8, 1024)
    # Fitted fixed terms (control FSMs, index generators, SmartConnect, AXI-lite, DMA engines, and
    # the residual of the memory mapping); set by fit() from the published build.
    fixed_lut: float = 0.0
    fixed_ff: float = 0.0
    fixed_bram18: float = 0.0
    fixed_dsp: float = 0.0
    provenance: dict[str, str] = field(default_factory=dict, compare=False, hash=False)


# The one measured build (docs/vta.md §10): Vivado post-implementation, Ultra96 (ZU3EG), 1x16 int8,
# 250 MHz, 128-bit S_AXI_HPC0 port.
PUBLISHED_BUILD: dict[str, Any] = {
    "hw": "ultra96_1x16_i8w8a32_15_15_18_17_250MHz",
    "board": "ultra96",
    "resources": {"lut": 22173, "ff": 31001, "bram18": 273, "dsp": 277},
    "source": "docs/vta.md §10: published VTA build, ZU3EG, 1x16 int8 at 250 MHz (post-implementation)",
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
        """The area objective: the mean of the four utilization fractions (LUT, FF, BRAM18, DSP).

        Why not the scarcest resource's fraction: it saturates at 1.0 for every design that uses all
        DSPs (LUT multipliers take over), so those designs tie and the front cannot rank larger
        cores (issue 9). The mean keeps growing with every resource a design adds, weighs each by
        its scarcity on the board (a BRAM18 on the XC7Z020 counts as 53,200/280 LUTs) without
        inventing exchange rates, and stays <= 1 for every feasible design. Feasibility stays the
        hard limit on each resource separately (`infeasible_reason`); see docs/resources.md."""
        util = self.utilization(board)
        return sum(util.values()) / len(util)

    def max_utilization(self, board: Board) -> float:
        """Utilization of the board's scarcest resource (> 1: does not fit)."""
        return max(self.utilization(board).values())

    def to_json(self, board: Board | None = None) -> dict[str, Any]:
        out: dict[str, Any] = self.as_dict()
        if board is not None:
            out["utilization"] = {k: round(v, 6) for k, v in self.utilization(board).items()}
            out["area"] = round(self.area(board), 6)
            out["max_utilization"] = round(self.max_utilization(board), 6)
        return out


def _variable_parts(hw: HwConfig, board: Board, k: ResourceCoefficients) -> dict[str, dict[str, float]]:
    """Every component except the fitted fixed terms."""
    zero = {r: 0.0 for r in RESOURCES}
    d: dict[str, dict[str, float]] = {}
    inp_bits, wgt_bits = hw.inp_elem_bytes * 8, hw.wgt_elem_bytes * 8
    acc_bits, out_bits = hw.acc_elem_bytes * 8, hw.out_elem_bytes * 8
    # Memories (docs/vta.md §1.2, §4.2): INP, WGT, OUT are true-dual-port block-design BRAMs with
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
    axi = int(hw.axi_bits)  # type: ignore[arg-type]
    d["axi_buffers"] = {**zero, "bram18": float(
        k.axi_masters * bram18_for_memory(axi, k.axi_buffer_depth, sdp=True))}
    d["axi_datapath"] = {**zero, "lut": k.axi_masters * axi * k.lut_per_axi_bit,
                         "ff": k.axi_masters * axi * k.ff_per_axi_bit}
    # GEMM core: HLS's DSP MACs (mandatory), then fabric products onto free DSPs.
    n_mult = hw.macs_per_cycle
    dsp_hls = math.ceil(n_mult / k.hls_products_per_dsp)
    dsp_free = max(0, board.dsp - int(round(k.fixed_dsp)) - dsp_hls)
    dsp_extra = min(n_mult - dsp_hls, dsp_free) if k.synthesis_fills_dsp else 0
    dsp_gemm = dsp_hls + dsp_extra
    lut_mults = n_mult - dsp_gemm
    trees = hw.batch * hw.block_out
    first_level = math.ceil(hw.block_in / k.hls_products_per_dsp)  # outputs of the DSP post-adders
    tree_bits = trees * (adder_tree_bits(first_level, k.product_bits + 1) + k.acc_bits)
    d["gemm"] = {
        "lut": lut_mults * k.lut_per_lut_mult + tree_bits * k.lut_per_adder_bit,
        "ff": lut_mults * k.ff_per_lut_mult + tree_bits * k.ff_per_adder_bit,
        "bram18": 0.0,
        "dsp": float(dsp_gemm),
    }
    # informational counts (not summed): fabric multipliers, HLS DSP MACs, fabric tree adds
    d["gemm_lut_multipliers"] = {**zero, "count": float(lut_mults), "dsp_macs": float(dsp_hls),
                                 "tree_adds": float(trees * max(0, first_level - 1))}
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
        "memories/fifos/axi_buffers": "computed: Vivado BRAM tiling (UG473/UG573), docs/vta.md §1.2, §4.2",
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


REPORTS_FILE = HW_CONFIGS / "reports" / "zu3eg_vta_builds.yaml"


def check_against_reports(path: Path = REPORTS_FILE) -> list[dict[str, Any]]:
    """The model next to every figure of the real ZU3EG reports it can be compared with.

    Rows {check, model, report, rel_error, independent}: `independent` is False for the fit
    anchor's totals (exact by construction) and True for figures the fit did not see (the HLS
    csynth components of compute, the INT4 builds' DSP count of a 256-product core)."""
    facts = read_document(path, "build report facts")
    rows: list[dict[str, Any]] = []

    def row(check: str, model: float, report: float, independent: bool) -> None:
        rows.append({"check": check, "model": model, "report": report,
                     "rel_error": (model - report) / report if report else 0.0, "independent": independent})

    u96 = Board.named("ultra96")
    anchor = facts["builds"]["int8_1x16_250mhz"]
    res = estimate(HwConfig.from_name(anchor["hw"]), u96)
    for r in RESOURCES:
        row(f"int8 1x16 250 MHz build: {r}", getattr(res, r), anchor["resources"][r], False)
    hls = facts["hls_compute_int8_1x16"]
    hw = HwConfig.from_name(hls["hw"])
    d = estimate(hw, u96).detail
    info = d["gemm_lut_multipliers"]
    row("HLS compute: DSP MACs bound by HLS", info["dsp_macs"], hls["dsp_macs"], True)
    row("HLS compute: LUT per fabric 8x8 multiply (coefficient taken from it)", COEFFICIENTS.lut_per_lut_mult,
        hls["lut_per_fabric_multiply"], False)
    row("HLS compute: fabric adder-tree adds", info["tree_adds"],
        hw.batch * hw.block_out * sum(hls["tree_adds_per_output"].values()), True)
    for mem, blocks in hls["memories_bram18"].items():
        row(f"HLS compute: {mem} BRAM18", d[mem]["bram18"], blocks, True)
    for name, build in facts["builds"].items():
        if "products" in build:  # same 256-product core, other datapath width: DSP only
            row(f"{name} build: dsp (256-product core)", res.dsp, build["resources"]["dsp"], True)
    return rows


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
    if hw.axi_bits not in board.axi_bits_choices:
        allowed = ", ".join(map(str, board.axi_bits_choices))
        return f"axi_bits={hw.axi_bits} is not buildable on {board.name} (allowed: {allowed})"
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


__all__ = [
    "BRAM_MODES", "COEFFICIENTS", "PUBLISHED_BUILD", "RESOURCES", "ResourceCoefficients", "Resources",
    "adder_tree_bits", "banked_bram18", "bram18_for_memory", "check_against_reports", "estimate", "fit", "fit_error",
    "infeasible_reason",
]
