"""Conv2D / Dense: validation, parse_layer, names, packing (docs/vta.md §7.1), exact reference,
unsupported reasons."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.errors import ConfigError
from codesign.hw.config import HwConfig
from codesign.schedule import unsupported_reason
from codesign.workloads import Conv2D, Conv2DTranspose, Dense, parse_layer

HW1 = HwConfig()                                   # 1x16
HW4 = HwConfig.from_name("pynq_4x8_i8w8a32_15_16_16_18")


def naive_conv(data: np.ndarray, weight: np.ndarray, stride: int, pad: int) -> np.ndarray:
    n, c, h, w = data.shape
    o, _, kh, kw = weight.shape
    oh = (h + 2 * pad - kh) // stride + 1
    ow = (w + 2 * pad - kw) // stride + 1
    x = np.pad(data.astype(np.int64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    out = np.zeros((n, o, oh, ow), dtype=np.int64)
    for i in range(oh):
        for j in range(ow):
            patch = x[:, :, i * stride:i * stride + kh, j * stride:j * stride + kw]
            out[:, :, i, j] = np.einsum("nchw,ochw->no", patch, weight.astype(np.int64))
    return out


def requant(acc: np.ndarray, shift: int) -> np.ndarray:
    return np.clip(acc >> shift, 0, 127).astype(np.int8)


def test_validation_names_the_field():
    with pytest.raises(ConfigError, match="Conv2D.batch=0"):
        Conv2D(0, 16, 8, 8, 16, 3, 3, 1, 1)
    with pytest.raises(ConfigError, match="Conv2D.padding=-1"):
        Conv2D(1, 16, 8, 8, 16, 3, 3, 1, -1)
    with pytest.raises(ConfigError, match="Conv2D.stride"):
        Conv2D(1, 16, 8, 8, 16, 3, 3, 1.5, 1)
    with pytest.raises(ConfigError, match="Dense.out_features"):
        Dense(1, 16, 0)
    with pytest.raises(ConfigError, match="groups=3"):
        Conv2D(1, 16, 8, 8, 16, 3, 3, 1, 1, groups=3)


def test_shapes_macs_and_names():
    c = Conv2D(1, 64, 56, 56, 128, 3, 3, 2, 1)
    assert (c.out_height, c.out_width) == (28, 28)
    assert c.macs == 1 * 128 * 28 * 28 * 64 * 9
    assert c.name == "conv2d_1x64x56x56_128_3x3_s2_p1"
    assert c.template == "conv2d_packed.vta"
    assert Conv2D(1, 64, 56, 56, 128, 1, 1, 2, 0).out_height == 28
    d = Dense(16, 512, 2048)
    assert d.name == "dense_16x512_2048" and d.macs == 16 * 512 * 2048
    assert d.template == "dense_packed.vta"
    assert Conv2D(1, 16, 8, 8, 16, 3, 3, 1, 1, dilation=2).name.endswith("_d2_g1")


@pytest.mark.parametrize("spec", ["conv2d:1,64,56,56,64,3,3,1,1", "conv2d:4,16,7,9,32,1,3,2,0",
                                  "dense:1,512,1024", "conv2d:1,16,8,8,16,3,3,1,1,2,1"])
def test_parse_layer_round_trip(spec):
    layer = parse_layer(spec)
    assert layer.spec == spec
    assert parse_layer(layer.spec) == layer
    assert parse_layer(f"  {spec.upper()}  ") == layer


@pytest.mark.parametrize("bad, match", [
    ("conv2d:1,64,56", "got 3 numbers, expected conv2d:N,C,H,W,O,KH,KW,stride,pad"),
    ("dense:1,2", "expected dense:N,IN,OUT"),
    ("pool:1,2,3", "expected conv2d:N,C,H,W,O,KH,KW,stride,pad"),
    ("conv2d:1,a,3,3,3,3,3,1,1", "must be integers"),
    ("dense:0,16,16", "Dense.batch=0"),
])
def test_parse_layer_errors(bad, match):
    with pytest.raises(ConfigError, match=match):
        parse_layer(bad)


@pytest.mark.parametrize("hw", [HW1, HW4], ids=["1x16", "4x8"])
def test_conv_packing_layout(hw):
    rng = np.random.default_rng(0)
    layer = Conv2D(8, 32, 5, 6, 48, 3, 2, 1, 1)
    data = rng.integers(-128, 128, layer.data_shape(), dtype=np.int8)
    weight = rng.integers(-128, 128, layer.weight_shape(), dtype=np.int8)
    pd, pw = layer.pack_data(data, hw), layer.pack_weight(weight, hw)
    b, bi, bo = hw.batch, hw.block_in, hw.block_out
    assert pd.shape == layer.packed_data_shape(hw) == (8 // b, 32 // bi, 5, 6, b, bi)
    assert pw.shape == layer.packed_weight_shape(hw) == (48 // bo, 32 // bi, 3, 2, bo, bi)
    n, c, h, w = np.meshgrid(*[np.arange(s) for s in data.shape], indexing="ij")
    assert np.array_equal(pd[n // b, c // bi, h, w, n % b, c % bi], data)
    o, i, kh, kw = np.meshgrid(*[np.arange(s) for s in weight.shape], indexing="ij")
    assert np.array_equal(pw[o // bo, i // bi, kh, kw, o % bo, i % bi], weight)
    out = rng.integers(-128, 128, layer.output_shape(), dtype=np.int8)
    packed = layer.pack_output(out, hw)
    assert packed.shape == (8 // b, 48 // bo, 5, 7, b, bo)
    assert np.array_equal(layer.unpack_output(packed, hw), out)
    assert np.array_equal(layer.unpack_output(packed.reshape(-1), hw), out)  # flat DRAM bytes too


@pytest.mark.parametrize("hw", [HW1, HW4], ids=["1x16", "4x8"])
def test_dense_packing_layout(hw):
    rng = np.random.default_rng(1)
    layer = Dense(8, 64, 32)
    data = rng.integers(-128, 128, (8, 64), dtype=np.int8)
    weight = rng.integers(-128, 128, (32, 64), dtype=np.int8)
    pd, pw = layer.pack_data(data, hw), layer.pack_weight(weight, hw)
    b, bi, bo = hw.batch, hw.block_in, hw.block_out
    assert pd.shape == (8 // b, 64 // bi, b, bi)
    n, c = np.meshgrid(np.arange(8), np.arange(64), indexing="ij")
    assert np.array_equal(pd[n // b, c // bi, n % b, c % bi], data)
    o, i = np.meshgrid(np.arange(32), np.arange(64), indexing="ij")
    assert np.array_equal(pw[o // bo, i // bi, o % bo, i % bi], weight)
    out = rng.integers(-128, 128, (8, 32), dtype=np.int8)
    assert np.array_equal(layer.unpack_output(layer.pack_output(out, hw), hw), out)


def test_packing_rejects_bad_shapes_and_unsupported():
    layer = Conv2D(1, 32, 4, 4, 32, 3, 3, 1, 1)
    with pytest.raises(ConfigError, match=r"shape \(1, 16, 4, 4\), expected \(1, 32, 4, 4\)"):
        layer.pack_data(np.zeros((1, 16, 4, 4), np.int8), HW1)
    with pytest.raises(ConfigError, match="BATCH=4"):
        layer.pack_data(np.zeros((1, 32, 4, 4), np.int8), HW4)


@pytest.mark.parametrize("stride, pad, kh, kw", [(1, 1, 3, 3), (2, 1, 3, 3), (2, 0, 1, 1), (1, 2, 5, 3)])
def test_conv_reference_is_exact(stride, pad, kh, kw):
    rng = np.random.default_rng(stride * 10 + pad)
    layer = Conv2D(2, 32, 9, 8, 16, kh, kw, stride, pad)
    data = rng.integers(-128, 128, layer.data_shape(), dtype=np.int8)
    weight = rng.integers(-128, 128, layer.weight_shape(), dtype=np.int8)
    acc = naive_conv(data, weight, stride, pad)
    assert np.array_equal(layer.accumulate(data, weight), acc)
    for shift in (0, 8, 12):
        ref = layer.reference(data, weight, shift=shift)
        assert ref.dtype == np.int8 and ref.shape == layer.output_shape()
        assert np.array_equal(ref, requant(acc, shift))
    # extreme operands: every product is (-128)*(-128) = 2^14
    full = np.full(layer.data_shape(), -128, np.int8)
    wfull = np.full(layer.weight_shape(), -128, np.int8)
    assert np.array_equal(layer.accumulate(full, wfull), naive_conv(full, wfull, stride, pad))


def test_conv_reference_resnet_layer_spot_check():
    rng = np.random.default_rng(7)
    layer = Conv2D(1, 64, 56, 56, 64, 3, 3, 1, 1)
    data = rng.integers(-128, 128, layer.data_shape(), dtype=np.int8)
    weight = rng.integers(-128, 128, layer.weight_shape(), dtype=np.int8)
    acc = layer.accumulate(data, weight)
    x = np.pad(data.astype(np.int64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    for o, i, j in [(0, 0, 0), (63, 55, 55), (17, 30, 2), (5, 0, 55)]:
        want = int((x[0, :, i:i + 3, j:j + 3] * weight[o].astype(np.int64)).sum())
        assert acc[0, o, i, j] == want
    ref = layer.reference(data, weight)
    assert np.array_equal(ref, requant(acc, 8))


def test_dense_reference_is_exact():
    rng = np.random.default_rng(3)
    layer = Dense(4, 64, 48)
    data = rng.integers(-128, 128, (4, 64), dtype=np.int8)
    weight = rng.integers(-128, 128, (48, 64), dtype=np.int8)
    acc = data.astype(np.int64) @ weight.astype(np.int64).T
    assert np.array_equal(layer.accumulate(data, weight), acc)
    assert np.array_equal(layer.reference(data, weight, shift=6), requant(acc, 6))
    with pytest.raises(ConfigError, match="shift=40"):
        layer.reference(data, weight, shift=40)
    with pytest.raises(ConfigError, match="integer"):
        layer.reference(data.astype(np.float32), weight)


@pytest.mark.parametrize("layer, hw, match", [
    (Conv2D(1, 3, 224, 224, 64, 7, 7, 2, 3), HW1, "in_channels=3 is not a multiple of BLOCK_IN=16"),
    (Conv2D(1, 16, 8, 8, 24, 3, 3, 1, 1), HW1, "out_channels=24 is not a multiple of BLOCK_OUT=16"),
    (Conv2D(1, 64, 56, 56, 64, 3, 3, 1, 1), HW4, "batch=1 is not a multiple of BATCH=4"),
    # grouped convs run on group_conv2d_packed.vta when each group holds whole channel blocks
    (Conv2D(1, 32, 8, 8, 32, 3, 3, 1, 1, groups=32), HW1, "depthwise .groups=32"),
    (Conv2D(1, 32, 8, 8, 32, 3, 3, 1, 1, groups=4), HW1, "in_channels/groups=8 is not a multiple of BLOCK_IN=16"),
    (Conv2DTranspose(1, 32, 4, 4, 16, 4, 4, 2, 1, output_padding=1), HW1, "output_padding=1"),
    (Conv2DTranspose(1, 24, 4, 4, 16, 4, 4, 2, 1), HW1, "in_channels=24"),
    (Conv2D(1, 16, 8, 8, 16, 3, 3, 1, 1, dilation=2), HW1, "dilation=2"),
    (Conv2D(1, 16, 8, 8, 16, 3, 3, 1, 16), HW1, "padding=16 exceeds the 4-bit"),
    (Conv2D(1, 16, 2, 2, 16, 5, 5, 1, 0), HW1, "empty output"),
    # a 33x33 kernel needs 1089 weight elements for the smallest tile: WGT holds 1024
    (Conv2D(1, 16, 40, 40, 16, 33, 33, 1, 0), HW1, "no schedule fits .*SRAM capacity: wgt tile 1089"),
    (Dense(1, 24, 16), HW1, "in_features=24"),
    (Dense(2, 16, 16), HW4, "batch=2 is not a multiple of BATCH=4"),
])
def test_unsupported_reason(layer, hw, match):
    reason = unsupported_reason(layer, hw)
    assert reason is not None
    assert __import__("re").search(match, reason), reason


def test_supported_layers_have_no_reason():
    assert unsupported_reason(Conv2D(1, 64, 56, 56, 64, 3, 3, 1, 1), HW1) is None
    assert unsupported_reason(Conv2D(4, 64, 56, 56, 64, 3, 3, 1, 1), HW4) is None
    assert unsupported_reason(Dense(1, 512, 1024), HW1) is None


def test_with_batch():
    c = Conv2D(1, 64, 56, 56, 64, 3, 3, 1, 1)
    assert c.with_batch(4) == Conv2D(4, 64, 56, 56, 64, 3, 3, 1, 1)
    assert Dense(1, 16, 32).with_batch(8) == Dense(8, 16, 32)
    with pytest.raises(ConfigError):
        c.with_batch(0)


try:
    from hypothesis import given, settings
    from hypothesis import strategies as st
except ImportError:  # pragma: no cover - hypothesis is a dev dependency
    given = None

if given is not None:
    @settings(max_examples=60, deadline=None)
    @given(n=st.integers(1, 3), c=st.integers(1, 3), o=st.integers(1, 3), h=st.integers(1, 9),
           w=st.integers(1, 9), k=st.integers(1, 3), s=st.integers(1, 3), p=st.integers(0, 2),
           four=st.booleans())
    def test_layer_round_trips_property(n, c, o, h, w, k, s, p, four):
        hw = HW4 if four else HW1
        layer = Conv2D(n * hw.batch, c * hw.block_in, h, w, o * hw.block_out, k, k, s, p)
        assert parse_layer(layer.spec) == layer
        if layer.out_height < 1 or layer.out_width < 1:
            assert "empty output" in unsupported_reason(layer, hw)
            return
        rng = np.random.default_rng(n + 10 * c + 100 * h)
        out = rng.integers(-128, 128, layer.output_shape(), dtype=np.int8)
        assert np.array_equal(layer.unpack_output(layer.pack_output(out, hw), hw), out)
        data = rng.integers(-128, 128, layer.data_shape(), dtype=np.int8)
        weight = rng.integers(-128, 128, layer.weight_shape(), dtype=np.int8)
        assert np.array_equal(layer.accumulate(data, weight), naive_conv(data, weight, s, p))
