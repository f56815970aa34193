"""The compute floor of VTA steps (`codesign.place.floor`): its cycle counts follow from the
layer's shape and the epilogue's ALU steps, and no schedule's timing-model figure is below it."""

from __future__ import annotations

import pytest

from codesign.evaluate.fused import Epilogue, measure_fused
from codesign.hw.config import HwConfig
from codesign.place import best_template_schedule
from codesign.place.floor import step_floor_cycles
from codesign.schedule import get_space
from codesign.vta import timing
from codesign.workloads import Conv2D, Dense

HW = HwConfig.resolve("pynq_1x16")
EPI = Epilogue(shift=6, bias=True, clip=(0, 96))  # ADD bias, SHR, MIN, MAX: MobileNetV2's conv + ReLU6


def test_the_floor_counts_uops_and_alu_steps():
    alu = timing.default_params().alu_cycles_per_uop
    # 1x1 conv 32 -> 48 at 8x8: 3 output blocks x 64 pixels = 192 vectors, 2 input blocks each
    assert step_floor_cycles(Conv2D(1, 32, 8, 8, 48, 1, 1, 1, 0), EPI, HW) == (192 * 2, 192 * 4 * alu)
    # a block-diagonal depthwise (2 groups of 16): one input block per output block, 9 taps
    assert step_floor_cycles(Conv2D(1, 32, 8, 8, 32, 3, 3, 1, 1, 1, 2), EPI, HW) == (128 * 9, 128 * 4 * alu)
    # a dense 256 -> 64 called 3 times, no epilogue steps but SHR/MIN/MAX of a plain layer
    gemm, alu_c = step_floor_cycles(Dense(1, 256, 64), Epilogue(shift=8), HW, calls=3)
    assert (gemm, alu_c) == (3 * 4 * 16, 3 * 4 * 3 * alu)


@pytest.mark.parametrize("layer", [Conv2D(1, 16, 28, 28, 96, 1, 1, 1, 0), Conv2D(1, 32, 14, 14, 32, 3, 3, 1, 1, 1, 2),
                                   Dense(1, 512, 256)])
def test_no_schedule_is_below_the_floor(layer):
    gemm, alu = step_floor_cycles(layer, EPI, HW)
    floor_s = (gemm + alu) / HW.clock_hz
    best, _ = best_template_schedule(layer, HW)
    assert measure_fused(layer, best, HW, EPI).seconds >= floor_s
    space = get_space(layer, HW)
    for i in space.valid_indices()[:20]:
        assert measure_fused(layer, space.get(int(i)), HW, EPI).seconds >= floor_s


def test_a_plans_vta_steps_take_at_least_their_floor():
    import torch
    from torch import nn

    from codesign.network import import_network
    from codesign.place import chooser, plan_network
    from codesign.place.floor import plan_floor_s

    torch.manual_seed(0)
    module = nn.Sequential(nn.Conv2d(16, 32, 1), nn.ReLU6(), nn.Conv2d(32, 32, 3, 1, 1, groups=32), nn.ReLU6())
    net = import_network(module, (torch.randn(1, 16, 28, 28),), "mb")
    plan = plan_network(net, HW, "pynq-z1", chooser(HW))
    floor = plan_floor_s(plan)
    assert floor["predicted"] == pytest.approx(plan.vta_s) and plan.vta_s > 0
    assert 0 < floor["total"] <= floor["predicted"]
    assert floor["total"] == pytest.approx(floor["gemm"] + floor["alu"])
