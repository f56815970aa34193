"""Resource model: Vivado BRAM mapping by hand, the published ZU3EG fit, feasibility reasons."""

import pytest

from codesign.hw import Board, HwConfig
from codesign.hw.resources import (
    COEFFICIENTS,
    PUBLISHED_BUILD,
    adder_tree_bits,
    banked_bram18,
    bram18_for_memory,
    estimate,
    fit_error,
    infeasible_reason,
)

PYNQ = Board.named("pynq-z1")
U96 = Board.named("ultra96")


@pytest.mark.parametrize(
    "width, depth, sdp, expected",
    [
        (1024, 1024, False, 57),  # WGT bank of the default config: 1K x 18 RAMB18, ceil(1024/18)
        (128, 2048, False, 15),  # INP/OUT default: 2K x 9 RAMB18 (parity bits as data), ceil(128/9)
        (512, 2048, True, 57),  # ACC default: 2K x 9, ceil(512/9)
        # UOP default: 3 columns of 2K x 9 cascaded 4 deep (27 bits, 12) + 3 columns 8K x 2 (6 bits, 3);
        # lower bound 32 / 2.25 bits per BRAM18 = 14.2 -> 15
        (32, 8192, True, 15),
        (128, 512, True, 4),  # command FIFO: 512 x 36 SDP RAMB18, ceil(128/36)
        (128, 512, False, 8),  # same memory as true dual port: 1K x 18 is the widest TDP mode
        (8, 1024, True, 1),  # dependency FIFO: one 1K x 18
        (72, 512, True, 2),  # one RAMB36 in 512 x 72
        (1, 32768, False, 2),  # one RAMB36 32K x 1 (= two 16K x 1 RAMB18)
        (36, 1024, False, 2),  # one RAMB36 1K x 36
        (18, 1024, False, 1),
        (64, 256, True, 2),  # 64-bit HLS m_axi burst buffer: 512 x 36 twice
        (1, 1, False, 1),
    ],
)
def test_bram_mapping_hand_counts(width, depth, sdp, expected):
    assert bram18_for_memory(width, depth, sdp) == expected


def test_banking_rule_splits_at_1024_bits():
    # docs/vta.md §1.2: WGT of the default config is 2 banks of 1024 b x 1024
    assert banked_bram18(2048, 1024) == 2 * 57
    assert banked_bram18(1024, 1024) == 57
    assert banked_bram18(4096, 256) == 4 * 57  # shallow wide memories waste depth


def test_adder_tree_bits():
    # 16 products of 16 bits: 8 x 17 + 4 x 18 + 2 x 19 + 1 x 20
    assert adder_tree_bits(16, 16) == 136 + 72 + 38 + 20
    assert adder_tree_bits(1, 16) == 0
    assert adder_tree_bits(3, 16) == 17 + 18


def test_published_zu3eg_build_is_reproduced_exactly():
    hw = HwConfig.from_name(PUBLISHED_BUILD["hw"])
    res = estimate(hw, U96)
    assert res.as_dict() == {"lut": 22173, "ff": 31001, "bram18": 273, "dsp": 277}
    err = fit_error()
    assert all(e["rel_error"] == 0.0 for e in err.values())
    # the fitted fixed terms are physical (non-negative) and smaller than the whole build
    for r in ("lut", "ff", "bram18", "dsp"):
        fixed = getattr(COEFFICIENTS, f"fixed_{r}")
        assert 0 <= fixed < PUBLISHED_BUILD["resources"][r]
    # memory + FIFO + m_axi buffer BRAM is computed, not fitted: 15+15+114+57+15 + 16 + 5*4
    mem = sum(res.detail[k]["bram18"] for k in ("uop_mem", "inp_mem", "wgt_mem", "acc_mem", "out_mem"))
    assert mem == 216
    assert res.detail["fifos"]["bram18"] == 3 * 4 + 4 * 1
    assert res.detail["axi_buffers"]["bram18"] == 5 * 4
    assert res.detail["gemm"]["dsp"] == 256  # one int8 product per DSP48E2, no spill on the ZU3EG


def test_stock_configs_fit_the_pynq():
    for alias in ("pynq_1x16", "pynq_4x8"):
        hw = HwConfig.resolve(alias)
        res = estimate(hw, PYNQ)
        assert infeasible_reason(hw, PYNQ) is None
        util = res.utilization(PYNQ)
        assert res.bram18 == 263 and util["bram18"] == pytest.approx(263 / 280)
        # 256 products on 220 DSP48E1: 199 in DSPs (220 - 21 fixed), 57 spill to LUT multipliers
        assert res.dsp == 220 and res.detail["gemm"]["dsp"] == 199
        assert res.detail["gemm_lut_multipliers"]["count"] == 57
        assert res.max_utilization(PYNQ) == max(util.values()) == 1.0
        assert res.area(PYNQ) == pytest.approx(sum(util.values()) / 4)
    d = estimate(HwConfig(), PYNQ).detail
    # 16 adder trees: the DSP post-adders sum product pairs, the fabric adds the 8 pair sums
    # (4 x 18 + 2 x 19 + 1 x 20 bits, as in the HLS csynth report) and a 32-bit accumulate
    assert d["gemm"]["lut"] == 57 * COEFFICIENTS.lut_per_lut_mult + 16 * (130 + 32)


def test_smaller_core_uses_fewer_resources():
    small = HwConfig.from_name("pynq_1x8_i8w8a32_15_14_16_16")
    big = HwConfig()
    rs, rb = estimate(small, PYNQ), estimate(big, PYNQ)
    assert rs.lut < rb.lut and rs.ff < rb.ff and rs.dsp < rb.dsp and rs.bram18 < rb.bram18
    assert rs.area(PYNQ) < rb.area(PYNQ)
    assert rs.dsp == 64 + 21


@pytest.mark.parametrize(
    "hw, board, fragment",
    [
        (HwConfig.from_name("pynq_1x32_i8w8a32_15_15_18_18"), PYNQ, "LUT but pynq-z1 has 53200"),
        (HwConfig.from_name("pynq_2x16_i8w8a32_14_13_15_18"), PYNQ, "needs 327 BRAM18 but pynq-z1 has 280"),
        (HwConfig().with_(clock_mhz=150), PYNQ, "clock_mhz=150 is not a PL clock of pynq-z1 (allowed: 100, 142, 167, 200)"),
        (HwConfig().with_(axi_bits=128), PYNQ, "axi_bits=128 exceeds the 64-bit PS port"),
        (HwConfig(), U96, "TARGET='pynq' does not match board ultra96"),
    ],
)
def test_infeasible_reasons(hw, board, fragment):
    reason = infeasible_reason(hw, board)
    assert reason is not None and fragment in reason


def test_utilization_and_json():
    res = estimate(HwConfig(), PYNQ)
    j = res.to_json(PYNQ)
    assert j["lut"] == res.lut and j["max_utilization"] == pytest.approx(1.0)
    assert j["area"] == pytest.approx(sum(res.utilization(PYNQ).values()) / 4)
    assert set(j["utilization"]) == {"lut", "ff", "bram18", "dsp"}
