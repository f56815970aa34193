"""The host rewrites placement uses to put a GEMM op on VTA are exact: the rewritten operands through
the rewritten layer give the original op's int8 output (int32 sums, bias, shift and clip), on
random int8 data. The stem case is ResNet's 3x224x224 ⊛ 7x7/2 pad 3."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.hw.config import HwConfig
from codesign.network.reference import conv2d_int, linear_int
from codesign.place.transforms import (
    IM2COL,
    PAD,
    SPACE_TO_DEPTH,
    ConvGeometry,
    S2DGeometry,
    rewrites,
    space_to_depth_input,
)
from codesign.workloads import Conv2D, Dense

HW = HwConfig.resolve("pynq_1x16")


def _conv_case(layer: Conv2D, seed: int):
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, layer.data_shape(), dtype=np.int8)
    w = rng.integers(-128, 128, layer.weight_shape(), dtype=np.int8)
    b = rng.integers(-(1 << 14), 1 << 14, layer.out_channels).astype(np.int32)
    ref = conv2d_int(x, w, b, 9, (layer.stride,) * 2, (layer.padding,) * 2)
    return x, w, b, ref


def _rewritten(rw, x, w, b):
    X, W, B, _ = rw.vta_operands(x, w, b)
    v = rw.layer
    assert X.shape == v.data_shape() and W.shape == v.weight_shape()
    assert v.structural_reason(HW) is None  # the rewritten layer is one VTA takes
    return rw.vta_output(conv2d_int(X, W, B, 9, (v.stride,) * 2, (v.padding,) * 2))


def test_the_stem_space_to_depth_is_12_channels_4x4_stride_1_and_exact():
    stem = Conv2D(1, 3, 224, 224, 64, 7, 7, 2, 3)
    forms = {rw.kind: rw for rw in rewrites(stem, HW)}
    assert set(forms) == {PAD, SPACE_TO_DEPTH, IM2COL}
    s2d = forms[SPACE_TO_DEPTH].layer
    # 12 channels padded to BLOCK_IN, a 4x4 stride-1 kernel with pad 0 on the host-padded 115x115
    assert (s2d.in_channels, s2d.kernel_h, s2d.stride, s2d.padding, s2d.height) == (16, 4, 1, 0, 115)
    assert (s2d.out_height, s2d.out_width) == (112, 112)
    g = S2DGeometry.of(ConvGeometry.of(stem))
    assert (g.zeros, g.taps, g.top, g.rows) == (1, 4, 4, 230)  # one zero tap; pad 4 top, 2 bottom
    x, w, b, ref = _conv_case(Conv2D(1, 3, 224, 224, 8, 7, 7, 2, 3), 0)  # 8 filters keep it fast
    small = {rw.kind: rw for rw in rewrites(Conv2D(1, 3, 224, 224, 8, 7, 7, 2, 3), HW)}
    for kind in (SPACE_TO_DEPTH, IM2COL, PAD):
        assert np.array_equal(_rewritten(small[kind], x, w, b), ref), kind


@pytest.mark.parametrize("shape", [(3, 31, 5, 2, 1), (5, 20, 3, 3, 2), (3, 17, 7, 2, 3), (4, 16, 3, 1, 1), (2, 9, 4, 2, 0)])
def test_rewrites_are_exact_on_other_geometries(shape):
    c, h, k, s, p = shape
    layer = Conv2D(1, c, h, h, 20, k, k, s, p)
    x, w, b, ref = _conv_case(layer, sum(shape))
    for rw in rewrites(layer, HW):
        assert np.array_equal(_rewritten(rw, x, w, b), ref), (rw.kind, shape)


def test_space_to_depth_moves_each_pixel_to_its_block_channel():
    g = ConvGeometry(1, 1, 4, 4, 1, 3, 2, 1)
    x = np.arange(16, dtype=np.int8).reshape(1, 1, 4, 4)
    y = space_to_depth_input(x, g)
    # padding 1 + one zero tap = 2 pixels on top/left: pixel (0, 0) is block (1, 1), phase (0, 0)
    assert y.shape == (1, 4, 3, 3)
    assert y[0, 0, 1, 1] == 0 and y[0, 1, 1, 1] == 1 and y[0, 2, 1, 1] == 4 and y[0, 3, 1, 1] == 5
    assert y[0, :, 0, :].max() == 0  # the top block row is all padding


def test_dense_is_padded_to_block_out_and_batch_and_exact():
    hw = HwConfig.resolve("pynq_4x8")
    dense = Dense(1, 512, 1000)
    (rw,) = rewrites(dense, hw)
    assert rw.kind == PAD and rw.layer == Dense(hw.batch, 512, 1000 + (-1000) % hw.block_out)
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, (1, 512), dtype=np.int8)
    w = rng.integers(-128, 128, (1000, 512), dtype=np.int8)
    b = rng.integers(-4000, 4000, 1000).astype(np.int32)
    X, W, B, _ = rw.vta_operands(x, w, b)
    assert X.shape == (hw.batch, 512) and W.shape[0] % hw.block_out == 0
    assert np.array_equal(rw.vta_output(linear_int(X, W, B, 7)), linear_int(x, w, b, 7))
