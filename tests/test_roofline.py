"""Roofline bounds."""

from __future__ import annotations

import pytest

from codesign.analysis.roofline import MIN_INSNS, attained_fraction, roofline
from codesign.evaluate.run import measure_seconds
from codesign.hw.config import HwConfig
from codesign.schedule import get_space
from codesign.vta import timing
from codesign.workloads import Conv2D, Dense

HW = HwConfig()
PARAMS = timing.TimingParams()


def test_compute_bound_layer():
    layer = Conv2D(1, 256, 14, 14, 256, 3, 3, 1, 1)
    r = roofline(layer, HW, PARAMS)
    assert r.macs == 14 * 14 * 256 * 256 * 9
    # the products with a tap on the zero padding are skippable (the vta family's pad_skip): 40 of
    # the 42 (pixel, tap) pairs per axis read the image
    assert r.real_macs == 40 * 40 * 256 * 256
    assert r.compute_cycles == r.real_macs / 256 == 409600
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


def test_strided_1x1_conv_counts_only_the_rows_and_columns_it_reads():
    """conv2d:4,64,56,56,128,1,1,2,0 on pynq_4x8 reads input rows and columns 0, 2, ..., 54: a
    quarter of the input. Counting all of it put the 'bound' (2.868 ms) above the optimum (2.772 ms)."""
    from codesign.analysis.roofline import min_bytes
    from codesign.workloads import parse_layer

    hw = HwConfig.resolve("pynq_4x8")
    data, uop = min_bytes(parse_layer("conv2d:4,64,56,56,128,1,1,2,0"), hw)
    assert data == 4 * 64 * 28 * 28 + 128 * 64 + 4 * 128 * 28 * 28
    # a 3x3 pad-1 conv on a 1x1 input: one real pixel, only the centre tap ever meets it
    data, _ = min_bytes(parse_layer("conv2d:1,16,1,1,16,3,3,1,1"), HwConfig())
    assert data == 16 + 16 * 16 + 16
    # a transposed conv reads its real pixels, not the zeros its dilated input holds
    data, _ = min_bytes(parse_layer("conv2d_transpose:1,16,4,4,16,4,4,2,1"), HwConfig())
    assert data == 16 * 4 * 4 + 16 * 16 * 4 * 4 + 16 * 8 * 8


def _shipped_offloaded_layers():
    """Every layer VTA runs of every zoo network on every shipped config, once per (layer, config)."""
    from codesign.paths import HW_CONFIGS
    from codesign.schedule.support import unsupported_reason
    from codesign.workloads import WORKLOADS, get_workload

    seen: dict[tuple[str, str], tuple] = {}
    for path in sorted(HW_CONFIGS.glob("*.yaml")):
        hw = HwConfig.resolve(str(path))
        for name in WORKLOADS:
            for layer, _ in get_workload(name).for_hw(hw).unique_layers():
                if unsupported_reason(layer, hw) is None:
                    seen.setdefault((layer.spec, hw.name), (layer, hw))
    return list(seen.values())


def test_roofline_is_below_every_schedule_of_every_zoo_layer_on_the_shipped_configs():
    """bound <= the exhaustive optimum, device cycles and host time separately (so it holds for
    any host terms a profile adds), for all ~140 offloaded zoo layers on pynq_1x16 and pynq_4x8."""
    from codesign.evaluate.run import layer_io_bytes
    from codesign.tune.exhaustive import exhaustive_table

    params = timing.default_params()
    layers = _shipped_offloaded_layers()
    assert len(layers) > 100 and {hw.name for _, hw in layers} == {
        HwConfig.resolve("pynq_1x16").name, HwConfig.resolve("pynq_4x8").name}
    over = []
    for layer, hw in layers:
        table = exhaustive_table(layer, hw, params=params)
        assert table, layer.spec
        r = roofline(layer, hw, params)
        best_s = min(s for s, _ in table.values())
        best_cycles = min(c for _, c in table.values())
        host = min(s - c / hw.clock_hz for s, c in table.values())
        min_host = timing.host_seconds(MIN_INSNS, params, *layer_io_bytes(layer))
        if not (r.bound_cycles <= best_cycles and r.bound_call_seconds <= best_s and min_host <= host * (1 + 1e-9)):
            over.append((layer.spec, hw.name, r.bound_cycles, best_cycles, r.bound_call_seconds, best_s))
        assert 0 < attained_fraction(layer, hw, best_s, params) <= 1
    assert not over


@pytest.mark.parametrize("profile", ["tophub-2019-08", "tophub-2019"])
def test_roofline_stays_below_the_optimum_under_a_profile_with_host_byte_terms(profile):
    """A calibration profile adds host seconds per input/output byte (the 2019 boards: ~47 ns per
    output byte); every schedule pays them for the layer's own buffers, and so does the bound."""
    from codesign.calibrate.profiles import resolve_params
    from codesign.tune.exhaustive import exhaustive_table
    from codesign.workloads import parse_layer

    params, _ = resolve_params(profile)
    for spec, hw_name in (("conv2d:4,64,56,56,128,1,1,2,0", "pynq_4x8"), ("conv2d:1,256,14,14,256,3,3,1,1", "pynq_1x16"),
                          ("dense:1,512,1024", "pynq_1x16")):
        layer, hw = parse_layer(spec), HwConfig.resolve(hw_name)
        table = exhaustive_table(layer, hw, params=params)
        r = roofline(layer, hw, params)
        assert r.bound_call_seconds <= min(s for s, _ in table.values())
        assert r.bound_cycles <= min(c for _, c in table.values())
