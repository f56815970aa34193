"""Convolution kinds beyond conv2d (codesign.network.kinds.conv): conv1d imported as a conv2d on
(N, C, 1, L) that VTA takes, batch norm folded through its reshape; conv_transpose2d (and 1-D)
with its integer reference, on the CPU; one-line errors for what the IR does not take."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from codesign.errors import ConfigError
from codesign.network import import_network
from codesign.network.kernels import conv_transpose2d_sums
from codesign.network.reference import run_float


def _seeded_bn(bn: nn.Module, seed: int) -> nn.Module:
    """Running statistics and affine parameters away from the identity, so a missed fold shows."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        bn.running_mean.uniform_(-0.5, 0.5, generator=g)
        bn.running_var.uniform_(0.5, 2.0, generator=g)
        bn.weight.uniform_(0.5, 1.5, generator=g)
        bn.bias.uniform_(-0.3, 0.3, generator=g)
    return bn


class Conv1dStack(nn.Module):
    """conv1d -> BatchNorm1d -> ReLU -> conv1d."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.a, self.bn, self.b = nn.Conv1d(16, 64, 3, padding=1), _seeded_bn(nn.BatchNorm1d(64), 1), \
            nn.Conv1d(64, 64, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.bn(self.a(x))))


def test_conv1d_bn_relu_conv1d_runs_its_convs_on_vta(run_net):
    """16 -> 64 channels (on pynq_1x16 the cost model keeps a 16 -> 16 conv of this size on the CPU,
    2-D ones too): both conv1d's conv2d land on VTA, bit-exact, batch norm folded."""
    x = torch.randn(1, 16, 16, generator=torch.Generator().manual_seed(0))
    module = Conv1dStack().eval()
    plain = import_network(module, (x,))  # the IR's own fold (no PT2E): through conv1d's reshape back
    assert [(op.name, op.kind) for op in plain.ops] == [
        ("conv1d_2d", "flatten"), ("conv1d_conv", "conv2d"), ("conv1d", "flatten"), ("relu", "relu"),
        ("conv1d_1_2d", "flatten"), ("conv1d_1_conv", "conv2d"), ("conv1d_1", "flatten")]
    with torch.no_grad():
        np.testing.assert_allclose(run_float(plain, x.numpy())["conv1d_1"], module(x).numpy(), rtol=1e-4, atol=1e-4)
    conv = plain.op("conv1d_conv")
    assert conv.shape == (1, 64, 1, 16) and conv.attrs["weight_shape"] == (64, 16, 3, 3)
    assert (conv.attrs["stride"], conv.attrs["padding"], conv.attrs["dilation"]) == ((1, 1), (1, 1), (1, 1))
    assert not conv.weight[:, :, [0, 2]].any()  # the 1-D kernel is the middle row

    prep, exe = run_net(module, (x,))
    for name in ("conv1d_conv", "conv1d_1_conv"):
        step = prep.plan.step_of(name)
        assert step.placement == "vta", step.reason
    assert "batch_norm" not in {op.kind for op in prep.network.ops}
    assert prep.network.op("conv1d").shape == (1, 64, 16)


@pytest.mark.parametrize("stride, padding, dilation, groups, rows, pad2d", [
    (2, 2, 1, 1, 5, (2, 2)),    # stride 2: square (s, s) on the height-1 axis
    (1, 2, 2, 1, 3, (2, 2)),    # dilation 2 divides padding 2: 3 kernel rows, tap 1
    (1, 1, 2, 1, 1, (0, 1)),    # dilation 2 does not divide padding 1: (0, p), non-square (CPU)
    (1, 0, 1, 4, 1, (0, 0)),    # grouped, unpadded
])
def test_conv1d_geometry_is_a_conv2d_equal_to_torch(stride, padding, dilation, groups, rows, pad2d):
    torch.manual_seed(0)
    module = nn.Sequential(nn.Conv1d(8, 16, 3, stride, padding, dilation, groups)).eval()
    x = torch.randn(2, 8, 11)
    net = import_network(module, (x,))
    conv = net.op("conv1d_conv")
    assert conv.kind == "conv2d" and conv.attrs["weight_shape"][2] == rows and conv.attrs["padding"] == pad2d
    assert conv.attrs["stride"] == (stride, stride) and conv.attrs["groups"] == groups
    with torch.no_grad():
        np.testing.assert_allclose(run_float(net, x.numpy())[net.outputs[0]], module(x).numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("k, s, p, op", [(4, 2, 1, 0), (3, 2, 1, 1), (3, 1, 0, 0), (1, 3, 0, 2), (5, 2, 3, 1), (2, 2, 0, 0)])
def test_transposed_sums_equal_torch_on_int8(k, s, p, op):
    """The integer reference's sums (zero insertion + flipped kernel) are torch's, exactly."""
    rng = np.random.default_rng(k * 100 + s * 10 + p)
    x = rng.integers(-128, 128, (2, 3, 4, 5)).astype(np.float64)
    w = rng.integers(-128, 128, (3, 5, k, k)).astype(np.float64)
    want = torch.nn.functional.conv_transpose2d(torch.from_numpy(x), torch.from_numpy(w), stride=s, padding=p,
                                                output_padding=op).numpy()
    np.testing.assert_array_equal(conv_transpose2d_sums(x, w, (s, s), (p, p), (op, op)), want)


class Decoder(nn.Module):
    """DCGAN-style: ConvTranspose2d(16, 16, 4, 2, 1) -> BN -> ReLU -> ConvTranspose2d(16, 3, 4, 2, 1) -> ReLU."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.up1, self.bn, self.up2 = nn.ConvTranspose2d(16, 16, 4, 2, 1), _seeded_bn(nn.BatchNorm2d(16), 2), \
            nn.ConvTranspose2d(16, 3, 4, 2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.up2(torch.relu(self.bn(self.up1(x)))))


def test_transposed_conv_decoder(run_net):
    x = torch.randn(1, 16, 4, 4, generator=torch.Generator().manual_seed(0))
    module = Decoder().eval()
    plain = import_network(module, (x,))  # batch norm folded into the IOHW weight's output axis
    assert [op.kind for op in plain.ops] == ["conv_transpose2d", "relu", "conv_transpose2d", "relu"]
    with torch.no_grad():
        np.testing.assert_allclose(run_float(plain, x.numpy())[plain.outputs[0]], module(x).numpy(), rtol=1e-4,
                                   atol=1e-4)
    prep, exe = run_net(module, (x,))
    assert prep.network.op("conv_transpose2d_1").shape == (1, 3, 16, 16)
    step = prep.plan.step_of("conv_transpose2d")
    # on VTA as the stride-1 conv over the zero-inserted input, costed against the CPU's transpose
    assert step.placement == "vta" and step.transform == "zero_insert", step.reason
    assert "< CPU" in step.reason and "int8 transpose" in step.reason


class OutputPadding(nn.Module):
    """output_padding through conv_transpose2d, aten convolution(transposed=True) with a non-square
    stride, and conv_transpose1d; ends in a clamp."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.t = nn.ConvTranspose2d(16, 8, 3, stride=2, padding=1, output_padding=1)
        self.w2, self.b2 = nn.Parameter(torch.randn(8, 8, 3, 2) * 0.2), nn.Parameter(torch.randn(8) * 0.1)
        self.t1 = nn.ConvTranspose1d(80, 8, 3, stride=2, padding=0, output_padding=1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.t(x))                                     # 5x5 -> 10x10
        y = torch.ops.aten.convolution(y, self.w2, self.b2, [1, 2], [1, 0], [1, 1], True, [0, 1], 1)  # -> 10x21
        y = self.t1(y.flatten(1, 2))                                  # (N, 80, 21) -> (N, 8, 44)
        return torch.clamp(y, -1.0, 1.0)


def test_output_padding_forms(run_net):
    x = torch.randn(2, 16, 5, 5, generator=torch.Generator().manual_seed(0))
    module = OutputPadding().eval()
    with torch.no_grad():
        assert module(x).shape == (2, 8, 44)
    net = import_network(module, (x,))
    kinds = [(op.name, op.kind) for op in net.ops if op.kind == "conv_transpose2d"]
    assert [k for _, k in kinds] == ["conv_transpose2d"] * 3
    t = net.op("conv_transpose2d")
    assert t.shape == (2, 8, 10, 10) and t.attrs["output_padding"] == (1, 1)
    c = net.op("convolution")
    assert c.shape == (2, 8, 10, 21) and c.attrs["stride"] == (1, 2) and c.attrs["output_padding"] == (0, 1)
    one = net.op("conv_transpose1d_convt")
    assert one.shape == (2, 8, 1, 44) and one.attrs["stride"] == (1, 2) and one.attrs["output_padding"] == (0, 1)
    with torch.no_grad():
        np.testing.assert_allclose(run_float(net, x.numpy())[net.outputs[0]], module(x).numpy(), rtol=1e-4, atol=1e-4)
    run_net(module, (x,))


class Conv3d(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c = nn.Conv3d(4, 4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c(x)


@pytest.mark.parametrize("module, x, match", [
    (Conv3d(), torch.zeros(1, 4, 4, 4, 4),
     r"op aten\.conv3d\.default at node 'conv3d' \(module c: Conv3d\) cannot be represented: 3-D convolution"),
    (nn.Sequential(nn.ConvTranspose2d(16, 16, 4, 2, 1, groups=2)), torch.zeros(1, 16, 4, 4),
     r"op aten\.conv_transpose2d\.input at node 'conv_transpose2d' \(module 0: ConvTranspose2d\) cannot be "
     r"represented: transposed convolution with groups=2"),
    (nn.Sequential(nn.ConvTranspose2d(16, 16, 3, 2, 1, dilation=2)), torch.zeros(1, 16, 4, 4),
     r"op aten\.conv_transpose2d\.input at node 'conv_transpose2d' \(module 0: ConvTranspose2d\) cannot be "
     r"represented: transposed convolution with dilation=\[2, 2\]"),
])
def test_what_the_ir_does_not_take_is_one_line(module, x, match):
    with pytest.raises(ConfigError, match=match) as err:
        import_network(module.eval(), (x,))
    assert "\n" not in str(err.value)
