"""Zynq UltraScale+ boards (ZCU104, KV260, Ultra96), the AXI data width as a hardware parameter,
verified clocks, and the resource model checked against the real ZU3EG reports (issue 14)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml

from codesign.errors import ConfigError
from codesign.hw import Board, HwConfig
from codesign.hw.resources import check_against_reports, estimate, infeasible_reason
from codesign.hw.space import HwSpace
from codesign.paths import BOARDS
from codesign.vta import isa
from codesign.vta.timing import TimingParams, time_program


@pytest.mark.parametrize("name, lut, ff, bram36, uram, dsp", [
    ("zcu104", 230_400, 460_800, 312, 96, 1728),
    ("kv260", 117_120, 234_240, 144, 64, 1248),
    ("ultra96", 70_560, 141_120, 216, 0, 360),
])
def test_zu_plus_board_totals_and_port(name, lut, ff, bram36, uram, dsp):
    b = Board.named(name)
    assert (b.lut, b.ff, b.bram36, b.uram, b.dsp) == (lut, ff, bram36, uram, dsp)
    assert b.dsp_kind == "DSP48E2" and b.axi_bits == 128 and b.axi_bits_choices == (64, 128)
    assert b.dram_bandwidth_gbps > 8 and b.pl_clocks_mhz[-1] == 333


def test_verified_clocks_per_board():
    u96, zcu, kv, pynq = (Board.named(n) for n in ("ultra96", "zcu104", "kv260", "pynq-z1"))
    assert u96.verified_clock_mhz == 250 and "+0.146 ns" in u96.verified_clock_note
    assert u96.clock_verified(250) and not u96.clock_verified(300)
    assert u96.verified_clocks() == (100, 150, 200, 250)
    # no VTA build is known on the XCZU7EV or XCK26: nothing is verified there, and it says so
    for b in (zcu, kv):
        assert b.verified_clock_mhz is None and b.verified_clocks() == ()
        assert not any(b.clock_verified(c) for c in b.pl_clocks_mhz)
        assert "no verified clock" in b.clock_status() and "none known" in b.clock_status()
    assert pynq.verified_clocks() == (100,) and pynq.axi_bits_choices == (64,)


def test_board_file_rejects_bad_axi_choices(tmp_path):
    data = yaml.safe_load((BOARDS / "ultra96.yaml").read_text())
    data["axi_bits_choices"] = [64, 256]
    path = tmp_path / "b.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=r"axi_bits_choices=\[64, 256\]: each must be one of .* <= axi_bits=128"):
        Board.load(path)


def test_axi_width_resource_cost():
    u96 = Board.named("ultra96")
    wide = HwConfig.from_name("ultra96_1x16_i8w8a32_15_15_18_17_250MHz")
    narrow = wide.with_(axi_bits=64)
    rw, rn = estimate(wide, u96), estimate(narrow, u96)
    # five m_axi masters: burst buffers 256 deep (4 -> 2 BRAM18 each) and a 1 LUT + 2 FF per-bit path
    assert rw.bram18 - rn.bram18 == 5 * (4 - 2)
    assert (rw.lut - rn.lut, rw.ff - rn.ff) == (5 * 64, 5 * 128)
    assert rw.dsp == rn.dsp and infeasible_reason(narrow, u96) is None
    assert "axi_bits=256 exceeds the 128-bit PS port of ultra96" in infeasible_reason(wide.with_(axi_bits=256), u96)
    assert "axi_bits=32 is not buildable on ultra96 (allowed: 64, 128)" in infeasible_reason(
        wide.with_(axi_bits=32), u96)


def test_axi_width_in_the_timing_model():
    """A WGT load of 8 rows x 4 elements (256 B each) is 128 beats at 128 bits, 256 at 64."""
    params = TimingParams(dma_bytes_per_cycle_efficiency=0.5, dma_dram_efficiency=0.5, dma_insn_latency=20,
                          dma_row_overhead=3, ref_clock_mhz=250.0)
    ld = isa.insn_from_fields(opcode=isa.OP_LOAD, memory_type=isa.MEM_WGT, y_size=8, x_size=4, x_stride=4)
    prog = np.vstack([ld])
    hw128 = HwConfig.from_name("ultra96_1x16_i8w8a32_15_15_18_17_250MHz")
    t128, t64 = (time_program(prog, h, params) for h in (hw128, hw128.with_(axi_bits=64)))
    assert t128.port_busy == 8 * math.ceil(4 * 256 / 16) / 0.5
    assert t64.port_busy == 2 * t128.port_busy
    assert t64.cycles - t128.cycles == t128.port_busy


def test_zu_plus_spaces_have_axi_width_and_fit_their_boards():
    for name, cores in (("ultra96", {(1, 16), (2, 16), (4, 8)}), ("zcu104", {(1, 32), (4, 16)}),
                        ("kv260", {(2, 16), (4, 16)})):
        space = HwSpace.load(name)
        hws = space.enumerate()
        assert {h.axi_bits for h in hws} == {64, 128}
        assert cores <= {(h.batch, h.block_in) for h in hws}
        assert all(infeasible_reason(h, space.board) is None for h in hws)
        assert space.to_hw(space.default_point()).name.endswith("_1x16_i8w8a32_15_15_18_17_250MHz")
    # the XCK26's 288 BRAM18 stop 1x32 cores whose DSPs it has (1,024 products, 512 MACs)
    assert "BRAM18 but kv260 has 288" in infeasible_reason(
        HwConfig.from_name("kv260_1x32_i8w8a32_15_16_18_17_250MHz"), Board.named("kv260"))


def test_space_axi_width_outside_the_board_is_one_line(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"board": "pynq-z1", "params": {"LOG_BATCH": [0], "axi_bits": [64, 128]}}))
    with pytest.raises(ConfigError, match="axi_bits 128 is not buildable on pynq-z1; allowed: 64"):
        HwSpace.load(path)


def test_verified_clocks_only_restricts_the_space():
    u96 = HwSpace.load("ultra96").verified_clocks_only()
    assert u96.params["clock_mhz"] == (100, 150, 200, 250)
    pynq = HwSpace.load("pynq-z1").verified_clocks_only()
    assert {h.clock_mhz for h in pynq.enumerate()} == {100}
    with pytest.raises(ConfigError, match="board zcu104 has no verified clock"):
        HwSpace.load("zcu104").verified_clocks_only()


def test_resource_model_against_the_zu3eg_reports():
    rows = {r["check"]: r for r in check_against_reports()}
    # the fit anchor is exact by construction
    for r in ("lut", "ff", "bram18", "dsp"):
        assert rows[f"int8 1x16 250 MHz build: {r}"]["rel_error"] == 0
    # independent figures of the HLS csynth report: half the 256 products on DSP MACs (two int8
    # products per DSP48E2: one multiplied in it, one added by its post-adder), the 7 fabric adds per
    # output tree, and the BRAM tiling of the compute module's own memories
    assert rows["HLS compute: DSP MACs bound by HLS"]["model"] == 128
    assert rows["HLS compute: fabric adder-tree adds"]["model"] == 16 * 7
    assert rows["HLS compute: acc_mem BRAM18"]["model"] == 57
    assert rows["HLS compute: uop_mem BRAM18"]["model"] == 15
    # the INT4 builds' 268 DSP for the same 256-product core: model within 4%
    assert 0 < rows["int4_o4_200mhz build: dsp (256-product core)"]["rel_error"] < 0.04


def test_dsp_packing_bounds_the_core():
    """A core needs products/2 DSPs (HLS's MACs) even when LUTs could take the rest."""
    pynq = Board.named("pynq-z1")
    res = estimate(HwConfig.from_name("pynq_2x16_i8w8a32_15_15_18_17"), pynq)
    assert res.detail["gemm_lut_multipliers"]["dsp_macs"] == 256
    assert res.dsp == 256 + 21 > pynq.dsp
    zcu = Board.named("zcu104")
    big = estimate(HwConfig.from_name("zcu104_1x32_i8w8a32_15_16_18_17_250MHz"), zcu)
    assert big.detail["gemm"]["dsp"] == 1024  # every product on a DSP while the device has them


def test_larger_buffers_never_lose_a_schedule():
    """benchmarks/boards.py times only buffer-maximal designs: it relies on every schedule valid on
    smaller buffers being valid, and timing identically, on larger ones (same core and clock)."""
    from codesign.evaluate.run import measure
    from codesign.schedule import ScheduleSpace
    from codesign.workloads import parse_layer

    layer = parse_layer("conv2d:1,64,28,28,64,3,3,1,1")
    small = HwConfig.from_name("pynq_1x16_i8w8a32_14_14_16_16")
    big = HwConfig.from_name("pynq_1x16_i8w8a32_15_15_18_17")
    s_small, s_big = ScheduleSpace(layer, small), ScheduleSpace(layer, big)
    valid_small, valid_big = set(s_small.valid_indices()), set(s_big.valid_indices())
    assert valid_small < valid_big  # strictly more schedules fit the larger buffers
    for idx in sorted(valid_small)[:: max(1, len(valid_small) // 25)]:
        a, b = measure(layer, s_small.get(idx), small), measure(layer, s_big.get(idx), big)
        assert (a.cycles, a.seconds) == (b.cycles, b.seconds)
