"""conv_transpose2d on VTA through the host rewrite `zero_insert`: the rewritten operands through the
stride-1 conv layer give the transposed conv's int32 sums exactly (random int8 data, several
geometries), and a DCGAN-style decoder is placed on VTA with the rewrite named and runs bit-exact."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from codesign.hw.config import HwConfig
from codesign.network.kernels import conv2d_sums, conv_transpose2d_sums
from codesign.place.transforms import ZERO_INSERT, ZeroInsert, rewrites
from codesign.workloads.layers import MAX_PAD, Conv2DTranspose

HW = HwConfig.resolve("pynq_1x16")


# (in channels, size, out channels, kernel h, kernel w, stride, padding, output_padding)
@pytest.mark.parametrize("geometry", [
    (3, 5, 4, 4, 4, 2, 1, 0),    # DCGAN's 4x4/2 pad 1
    (3, 5, 4, 4, 4, 2, 1, 1),    # output_padding: one more border row/column on the host
    (2, 4, 3, 3, 3, 3, 1, 0),    # stride 3
    (2, 4, 3, 3, 3, 3, 0, 2),    # stride 3, pad 0, output_padding 2
    (2, 5, 3, 3, 3, 2, 3, 0),    # padding > kernel - 1: the dilated input is cropped
    (2, 4, 3, 3, 5, 2, 1, 0),    # non-square kernel: VTA pads the smaller border, the host the rest
    (2, 1, 3, 4, 4, 1, 0, 0),    # DCGAN's first layer: 1x1 input, stride 1
    (1, 3, 2, 18, 18, 2, 0, 0),  # a border of 17 > MAX_PAD: the host writes the excess
])
def test_zero_insert_gives_the_transposed_conv_sums(geometry):
    c, size, o, kh, kw, s, p, q = geometry
    layer = Conv2DTranspose(1, c, size, size, o, kh, kw, s, p, q)
    [rw] = rewrites(layer, HW)
    assert rw.kind == ZERO_INSERT and rw.reshapes_input
    rng = np.random.default_rng(sum(geometry))
    x = rng.integers(-128, 128, layer.data_shape(), dtype=np.int8)
    w = rng.integers(-128, 128, layer.weight_shape(), dtype=np.int8)  # IOHW, as torch holds it
    b = rng.integers(-(1 << 14), 1 << 14, o).astype(np.int32)
    X, W, B, _ = rw.vta_operands(x, w, b)
    v = rw.layer
    assert X.shape == v.data_shape() and W.shape == v.weight_shape() and B.shape == (v.out_channels,)
    assert v.stride == 1 and 0 <= v.padding <= MAX_PAD and v.structural_reason(HW) is None
    assert rw.host_elems() == (x.size, X.size)
    got = rw.vta_output(conv2d_sums(X, W, (1, 1), (v.padding,) * 2, (1, 1), 1))
    want = conv_transpose2d_sums(x, w, (s, s), (p, p), (q, q))
    assert got.shape == want.shape == (1, o, layer.out_height, layer.out_width)
    assert np.array_equal(got, want)
    assert np.array_equal(B[:o], b) and not B[o:].any()  # zero-padded output channels


def test_vta_takes_the_symmetric_border_and_the_host_the_rest():
    zi = ZeroInsert.of(Conv2DTranspose(1, 16, 4, 4, 16, 4, 4, 2, 1, 1))
    assert (zi.pad, zi.top, zi.bottom, zi.left, zi.right) == (2, 0, 1, 0, 1)
    zi = ZeroInsert.of(Conv2DTranspose(1, 16, 4, 4, 16, 3, 3, 2, 3, 0))
    assert (zi.pad, zi.top, zi.bottom) == (0, -1, -1)  # cropped


class Decoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up1 = nn.ConvTranspose2d(32, 32, 4, 2, 1, bias=False)
        self.bn = nn.BatchNorm2d(32)
        self.up2 = nn.ConvTranspose2d(32, 16, 4, 2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.up2(torch.relu(self.bn(self.up1(x)))))


def test_a_dcgan_decoder_runs_on_vta_through_zero_insertion_bit_exact(run_net):
    torch.manual_seed(0)
    model = Decoder()
    with torch.no_grad():
        model.bn.running_mean.uniform_(-0.2, 0.2)
        model.bn.running_var.uniform_(0.5, 1.5)
        model.bn.weight.uniform_(0.5, 1.5)
    prep, exe = run_net(model, torch.randn(1, 32, 8, 8))
    convs = [s for s in prep.plan.steps if s.kind.startswith("conv_transpose2d")]
    assert [s.kind for s in convs] == ["conv_transpose2d+relu"] * 2  # BN folded, ReLU fused
    for s in convs:
        assert s.placement == "vta" and s.transform == ZERO_INSERT, s.reason
        assert "zero insertion" in s.reason
        assert s.alternatives["vta:zero_insert"] < s.alternatives["cpu"]
        # the dilation is a costed host pass before the step
        assert any(h.kind == "rewrite" and h.group == s.name for h in prep.plan.steps if h.host)
    rows = {r.name: r for r in exe.rows}
    assert rows[convs[0].name].placement == "vta" and rows[convs[0].name].transform == ZERO_INSERT
    assert exe.env[prep.network.outputs[0]].shape == (1, 16, 32, 32)
