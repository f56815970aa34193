"""Depthwise and narrow-group convs on VTA through the block-diagonal host rewrite
(`codesign.place.transforms.BLOCK_DIAGONAL`): k original groups packed into one group of
BLOCK_IN input channels whose weight is block-diagonal. The rewritten conv's int32 sums equal the
original's; a network runs it on VTA bit-exact against the integer reference; the planner keeps
the CPU where the rewrite is slower."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.hw.config import HwConfig
from codesign.network.graph import Network, Op
from codesign.network.kernels import conv2d_sums
from codesign.place import CPU, VTA, chooser, plan_network
from codesign.place.transforms import BLOCK_DIAGONAL, GroupPack, rewrites
from codesign.schedule.support import unsupported_reason
from codesign.workloads import Conv2D

HW = HwConfig.resolve("pynq_1x16")


def _block_diagonal(layer: Conv2D, hw: HwConfig):
    forms = {rw.kind: rw for rw in rewrites(layer, hw)}
    assert BLOCK_DIAGONAL in forms, [rw.kind for rw in rewrites(layer, hw)]
    return forms[BLOCK_DIAGONAL]


@pytest.mark.parametrize("hw_name, layer, groups_after", [
    ("pynq_1x16", Conv2D(1, 32, 8, 8, 32, 3, 3, 1, 1, 1, 32), 2),      # depthwise: 16 per group
    ("pynq_1x16", Conv2D(1, 32, 8, 8, 32, 3, 3, 2, 1, 1, 8), 2),       # ResNeXt-like cg = 4, stride 2
    ("pynq_1x16", Conv2D(1, 24, 7, 7, 24, 3, 3, 1, 1, 1, 24), 2),      # 24 groups padded to 32
    ("pynq_1x16", Conv2D(1, 16, 6, 6, 32, 3, 3, 1, 1, 1, 16), 1),      # depth multiplier 2: one dense conv
    ("pynq_1x16", Conv2D(1, 24, 6, 6, 48, 3, 3, 1, 0, 1, 8), 1),       # cg = 3: zero groups widen the input
    ("pynq_4x8", Conv2D(2, 16, 5, 5, 16, 3, 3, 1, 1, 1, 16), 2),       # batch padded to 4, BLOCK_IN 8
])
def test_the_block_diagonal_conv_has_the_original_int32_sums(hw_name, layer, groups_after):
    hw = HwConfig.resolve(hw_name)
    rw = _block_diagonal(layer, hw)
    v = rw.layer
    assert unsupported_reason(layer.with_batch(v.batch), hw) is not None  # the plain form VTA cannot take
    assert unsupported_reason(v, hw) is None and v.groups == groups_after
    gp = GroupPack.from_layers(layer, v)
    assert v.macs == layer.with_batch(v.batch).macs // layer.groups * gp.padded_groups * gp.pack
    rng = np.random.default_rng(layer.in_channels + layer.groups)
    x = rng.integers(-128, 128, layer.data_shape(), dtype=np.int8)
    w = rng.integers(-128, 128, layer.weight_shape(), dtype=np.int8)
    r = rng.integers(-128, 128, layer.output_shape(), dtype=np.int8)
    b = rng.integers(-4000, 4000, layer.out_channels).astype(np.int32)
    X, W, B, R = rw.vta_operands(x, w, b, r)
    assert X.shape == v.data_shape() and W.shape == v.weight_shape() and R.shape == v.output_shape()
    assert B.shape == (v.out_channels,) and not B[layer.out_channels:].any()
    want = conv2d_sums(x, w, (layer.stride,) * 2, (layer.padding,) * 2, (1, 1), layer.groups)
    got = conv2d_sums(X, W, (v.stride,) * 2, (v.padding,) * 2, (1, 1), v.groups)
    assert np.array_equal(rw.vta_output(got), want)
    assert not got[:, layer.out_channels:].any() and not got[layer.batch:].any()  # padding computes zeros
    # an input whose zero groups go past the usual BLOCK_IN padding is built by a host pass
    assert rw.reshapes_input == (v.in_channels > -(-layer.in_channels // hw.block_in) * hw.block_in)


def test_the_block_diagonal_weight_keeps_each_group_on_its_own_channels():
    layer = Conv2D(1, 32, 4, 4, 32, 1, 1, 1, 0, 1, 32)
    rw = _block_diagonal(layer, HW)
    w = np.arange(1, 33, dtype=np.int8).reshape(32, 1, 1, 1)
    _, W, _, _ = rw.vta_operands(np.zeros(layer.data_shape(), np.int8), w)
    # output channel c (pack c // 16) reads only input column c % 16, with its own weight
    assert W.shape == (32, 16, 1, 1)
    assert np.array_equal(W[:, :, 0, 0], np.concatenate([np.diag(w[i:i + 16, 0, 0, 0]) for i in (0, 16)]))
    assert "block-diagonal" in rw.describe() and "x16" in rw.describe()


def test_a_conv_vta_takes_as_is_gets_no_block_diagonal_form():
    assert BLOCK_DIAGONAL not in {rw.kind for rw in rewrites(Conv2D(1, 64, 8, 8, 64, 3, 3, 1, 1, 1, 4), HW)}
    assert BLOCK_DIAGONAL not in {rw.kind for rw in rewrites(Conv2D(1, 32, 8, 8, 32, 3, 3, 1, 1), HW)}


def _grouped_net(c: int, h: int, groups: int) -> Network:
    shape = (1, c, h, h)
    conv = Op("c", "conv2d", ("x",), shape, {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1),
                                              "groups": groups, "weight_shape": (c, c // groups, 3, 3)})
    return Network("g", (("x", shape),), (conv, Op("r", "relu", ("c",), shape)), ("r",))


def test_the_planner_keeps_the_cpu_where_the_rewrite_is_slower_and_vta_where_it_is_faster():
    small = plan_network(_grouped_net(32, 8, 32), HW, "pynq-z1", chooser(HW)).step_of("c")
    assert set(small.alternatives) == {CPU, f"{VTA}:{BLOCK_DIAGONAL}"}
    assert small.placement == CPU and small.alternatives[CPU] < small.alternatives[f"{VTA}:{BLOCK_DIAGONAL}"]
    assert small.reason.startswith("CPU ") and small.reason.endswith(f", {BLOCK_DIAGONAL})")
    big = plan_network(_grouped_net(32, 32, 32), HW, "pynq-z1", chooser(HW)).step_of("c")
    assert big.placement == VTA and big.transform == BLOCK_DIAGONAL and big.layer.groups == 2
    assert big.alternatives[f"{VTA}:{BLOCK_DIAGONAL}"] < big.alternatives[CPU]
    assert "via block-diagonal weights" in big.reason


def _conv_bn_relu(c: int, groups: int):
    import torch
    from torch import nn

    torch.manual_seed(groups)
    bn = nn.BatchNorm2d(c)
    with torch.no_grad():  # non-trivial folded scale and bias
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-0.2, 0.2)
        bn.running_mean.uniform_(-0.1, 0.1)
        bn.running_var.uniform_(0.5, 2.0)
    return nn.Sequential(nn.Conv2d(c, c, 3, 1, 1, groups=groups, bias=False), bn, nn.ReLU())


# 16x16 maps: at 8x8 the A9 is cheaper than VTA (the test above), so the planner would keep the CPU
@pytest.mark.parametrize("groups", [32, 8], ids=["depthwise", "cg4"])
def test_a_grouped_conv_bn_relu_runs_on_vta_via_the_rewrite_bit_exact(run_net, groups):
    import torch

    torch.manual_seed(7)
    x = torch.randn(1, 32, 16, 16)
    prep, exe = run_net(_conv_bn_relu(32, groups), x)
    conv = next(op for op in prep.network.ops if op.kind == "conv2d")
    step = prep.plan.step_of(conv.name)
    assert step.placement == VTA and step.transform == BLOCK_DIAGONAL
    assert step.layer.groups == 2 and step.layer.in_channels == 32 and len(step.ops) == 2  # ReLU fused
    row = next(r for r in exe.rows if r.name == conv.name)
    assert row.placement == "vta" and row.bit_exact and row.transform == BLOCK_DIAGONAL
