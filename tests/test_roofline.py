"""Roofline bounds."""

from __future__ import annotations

import pytest

from codesign.analysis.roofline import MIN_INSNS, attained_fraction, roofline
from codesign.hw.config import HwConfig
from codesign.schedule import get_space
from codesign.vta import timing
from codesign.vta.run import measure_seconds
from codesign.workloads import Conv2D, Dense

HW = HwConfig()
PARAMS = timing.TimingParams()


def test_compute_bound_layer():
    layer = Conv2D(1, 256, 14, 14, 256, 3, 3, 1, 1)
    r = roofline(layer, HW, PARAMS)
    assert r.macs == 14 * 14 * 256 * 256 * 9
    assert r.compute_cycles == r.macs / 256 == 451584
    data = 256 * 14 * 14 + 256 * 256 * 9 + 256 * 14 * 14
    assert r.min_bytes == data + 5 * 4
    # the port efficiency is the cycle model's own (cache-hit mix over the DRAM footprint)
    eff = timing.port_efficiency(HW, data + 20, PARAMS)
    assert r.memory_cycles == pytest.approx((data / 8 + 20 / 4) / eff)
    assert r.memory_cycles < r.compute_cycles and r.bound == "compute"
    assert r.bound_cycles == max(r.compute_cycles, r.memory_cycles)
    assert r.bound_seconds == pytest.approx(r.bound_cycles / 100e6)
    assert r.bound_call_seconds == pytest.approx(
        r.bound_seconds + PARAMS.host_call_s + PARAMS.host_per_insn_s * MIN_INSNS)


def test_memory_bound_dense_and_axi_width():
    layer = Dense(1, 1024, 1024)  # 1 MiB of weights for 1 M MACs: memory bound
    r = roofline(layer, HW, PARAMS)
    assert r.bound == "memory" and r.bound_cycles == r.memory_cycles > r.compute_cycles
    wide = roofline(layer, HW.with_(axi_bits=128), PARAMS)
    assert wide.memory_cycles < r.memory_cycles
    assert wide.compute_cycles == r.compute_cycles


def test_attained_fraction_of_real_schedules_is_at_most_one():
    layer = Conv2D(1, 64, 14, 14, 64, 3, 3, 1, 1)
    space = get_space(layer, HW)
    r = roofline(layer, HW, PARAMS)
    for index in space.valid_indices()[::9]:
        seconds, cycles = measure_seconds(layer, space.get(int(index)), HW, PARAMS)
        f_cyc = attained_fraction(layer, HW, cycles, PARAMS)
        f_sec = attained_fraction(layer, HW, seconds, PARAMS)
        assert 0 < f_cyc <= 1 and 0 < f_sec <= 1
        assert f_cyc == pytest.approx(r.bound_cycles / cycles)
    with pytest.raises(ValueError):
        attained_fraction(layer, HW, 0, PARAMS)
