"""The two layer types VTA offloads — `Conv2D` (template `conv2d_packed.vta`) and `Dense`
(`dense_packed.vta`) — with their VTA packing (docs/vta.md §7.1), MAC counts, an exact integer
reference implementation and the reason a layer must stay on the CPU.

Packed layouts (docs/vta.md §7.1), for BATCH=b, BLOCK_IN=bi, BLOCK_OUT=bo:
  conv data    NCHW -> (N/b, C/bi, H, W, b, bi)          `NCHW{b}n{bi}c`
  conv weight  OIHW -> (O/bo, I/bi, KH, KW, bo, bi)      `OIHW{bo}o{bi}i`
  conv output  NCHW <- (N/b, O/bo, OH, OW, b, bo)
  dense data   NC   -> (N/b, C/bi, b, bi)
  dense weight OI   -> (O/bo, I/bi, bo, bi)
  dense output NO   <- (N/b, O/bo, b, bo)
Each innermost (b, bi) / (bo, bi) / (b, bo) block is exactly one SRAM element.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from codesign.errors import ConfigError
from codesign.hw.config import HwConfig

# Largest pad a LOAD can write: the y/x pad fields are 4 bits (docs/vta.md §2.3, §7.4.3).
MAX_PAD = 15

CONV_FORM = "conv2d:N,C,H,W,O,KH,KW,stride,pad[,dilation,groups]"
TRANSPOSE_FORM = "conv2d_transpose:N,C,H,W,O,KH,KW,stride,pad[,output_padding]"
DENSE_FORM = "dense:N,IN,OUT"


def _check_ints(obj: object, names: tuple[str, ...], minimum: int) -> None:
    kind = type(obj).__name__
    for name in names:
        value = getattr(obj, name)
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise ConfigError(f"{kind}.{name}={value!r}: must be an integer >= {minimum}")
        if value < minimum:
            raise ConfigError(f"{kind}.{name}={value}: must be an integer >= {minimum}")
        object.__setattr__(obj, name, int(value))


def _shape_error(what: str, got: tuple[int, ...], want: tuple[int, ...]) -> ConfigError:
    return ConfigError(f"{what} has shape {tuple(got)}, expected {tuple(want)}")


def _packed_shape(shape: tuple[int, ...], outer: int, inner: int) -> tuple[int, ...]:
    a, b, *rest = shape
    return (a // outer, b // inner, *rest, outer, inner)


def _pack(arr: np.ndarray, outer: int, inner: int) -> np.ndarray:
    """(A, B, *rest) -> (A/outer, B/inner, *rest, outer, inner): docs/vta.md §7.1's
    `reshape(A/o, o, B/i, i, ...)` then moving the two block axes innermost."""
    a, b, *rest = arr.shape
    nd = len(rest)
    blocked = arr.reshape(a // outer, outer, b // inner, inner, *rest)
    return np.ascontiguousarray(blocked.transpose(0, 2, *range(4, 4 + nd), 1, 3))


def _requant(acc: np.ndarray, shift: int) -> np.ndarray:
    """int32 accumulator -> int8 as the tuning template's epilogue does: arithmetic `>> shift`,
    clip to [0, 127] (ALU SHR, MIN, MAX; docs/vta.md §7.3), narrowing store."""
    if not isinstance(shift, (int, np.integer)) or not 0 <= shift < 32:
        raise ConfigError(f"shift={shift!r}: must be an integer in [0, 31]")
    acc32 = acc.astype(np.int64).astype(np.int32)  # hardware accumulates in int32 (wraps)
    return np.clip(acc32 >> np.int32(shift), 0, 127).astype(np.int8)


def _as_int_array(arr: np.ndarray, what: str) -> np.ndarray:
    arr = np.asarray(arr)
    if not np.issubdtype(arr.dtype, np.integer):
        raise ConfigError(f"{what} must be an integer (int8) array, got dtype {arr.dtype}")
    return arr


class _PackedLayer:
    """What Conv2D and Dense share: packing to VTA layouts, support checks, the NumPy reference.
    Subclasses give the shapes, `structural_reason` and `accumulate`."""

    def __str__(self) -> str:
        return self.name  # type: ignore[attr-defined]

    def _need_supported(self, hw: HwConfig) -> None:
        reason = self.structural_reason(hw)
        if reason is not None:
            raise ConfigError(f"layer {self.name} cannot be packed for {hw.name}: {reason}")

    def _checked(self, arr: np.ndarray, what: str, want: tuple[int, ...]) -> np.ndarray:
        arr = np.asarray(arr)
        if arr.shape != want:
            raise _shape_error(f"{self.name} {what}", arr.shape, want)
        return arr

    def packed_data_shape(self, hw: HwConfig) -> tuple[int, ...]:
        return _packed_shape(self.data_shape(), hw.batch, hw.block_in)

    def packed_weight_shape(self, hw: HwConfig) -> tuple[int, ...]:
        return _packed_shape(self.weight_shape(), hw.block_out, hw.block_in)

    def packed_output_shape(self, hw: HwConfig) -> tuple[int, ...]:
        return _packed_shape(self.output_shape(), hw.batch, hw.block_out)

    def pack_data(self, arr: np.ndarray, hw: HwConfig) -> np.ndarray:
        self._need_supported(hw)
        return _pack(self._checked(arr, "data", self.data_shape()), hw.batch, hw.block_in)

    def pack_weight(self, arr: np.ndarray, hw: HwConfig) -> np.ndarray:
        self._need_supported(hw)
        return _pack(self._checked(arr, "weight", self.weight_shape()), hw.block_out, hw.block_in)

    def pack_output(self, arr: np.ndarray, hw: HwConfig) -> np.ndarray:
        self._need_supported(hw)
        return _pack(self._checked(arr, "output", self.output_shape()), hw.batch, hw.block_out)

    def unpack_output(self, arr: np.ndarray, hw: HwConfig) -> np.ndarray:
        """Packed (N/b, O/bo, *spatial, b, bo) -> the layer's output layout."""
        arr = np.asarray(arr)
        want = self.packed_output_shape(hw)
        if arr.size != int(np.prod(want)):
            raise _shape_error(f"{self.name} packed output", arr.shape, want)
        nd = len(want) - 4
        order = (0, nd + 2, 1, nd + 3, *range(2, 2 + nd))
        return np.ascontiguousarray(arr.reshape(want).transpose(order)).reshape(self.output_shape())

    def _operands(self, data: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        data = self._checked(_as_int_array(data, f"{self.name} data"), "data", self.data_shape())
        weight = self._checked(_as_int_array(weight, f"{self.name} weight"), "weight", self.weight_shape())
        return data, weight

    def reference(self, data: np.ndarray, weight: np.ndarray, shift: int = 8) -> np.ndarray:
        """int8 output: `clip(layer(data, weight) >> shift, 0, 127)` with int32 accumulation."""
        return np.ascontiguousarray(_requant(self.accumulate(data, weight), shift))


@dataclass(frozen=True)
class Conv2D(_PackedLayer):
    """A 2-D convolution, NCHW data and OIHW weights; square stride and padding."""

    batch: int
    in_channels: int
    height: int
    width: int
    out_channels: int
    kernel_h: int
    kernel_w: int
    stride: int
    padding: int
    dilation: int = 1
    groups: int = 1

    def __post_init__(self) -> None:
        _check_ints(self, ("batch", "in_channels", "height", "width", "out_channels", "kernel_h",
                           "kernel_w", "stride", "dilation", "groups"), 1)
        _check_ints(self, ("padding",), 0)
        if self.in_channels % self.groups or self.out_channels % self.groups:
            raise ConfigError(f"Conv2D.groups={self.groups}: must divide in_channels={self.in_channels} "
                              f"and out_channels={self.out_channels}")

    # -- shapes ------------------------------------------------------------------------------
    @property
    def out_height(self) -> int:
        return (self.height + 2 * self.padding - self.dilation * (self.kernel_h - 1) - 1) // self.stride + 1

    @property
    def out_width(self) -> int:
        return (self.width + 2 * self.padding - self.dilation * (self.kernel_w - 1) - 1) // self.stride + 1

    @property
    def macs(self) -> int:
        return (self.batch * self.out_channels * max(self.out_height, 0) * max(self.out_width, 0)
                * (self.in_channels // self.groups) * self.kernel_h * self.kernel_w)

    @property
    def template(self) -> str:
        # Grouped convolutions have their own AutoTVM template (docs/vta.md §7.2, §7.6).
        return "group_conv2d_packed.vta" if self.groups > 1 else "conv2d_packed.vta"

    def schedule_view(self) -> Conv2D:
        """The groups=1 conv whose tile geometry the template schedules: for a grouped conv one
        group's input channels (kernel.shape[1], docs/vta.md §7.2) against all output channels."""
        if self.groups == 1:
            return self
        return Conv2D(**{**self._asdict(), "in_channels": self.in_channels // self.groups, "groups": 1})

    @property
    def kind(self) -> str:
        return "conv2d"

    @property
    def name(self) -> str:
        """Stable, filesystem-safe id, e.g. `conv2d_1x64x56x56_64_3x3_s1_p1`."""
        name = (f"conv2d_{self.batch}x{self.in_channels}x{self.height}x{self.width}_{self.out_channels}"
                f"_{self.kernel_h}x{self.kernel_w}_s{self.stride}_p{self.padding}")
        if self.dilation != 1 or self.groups != 1:
            name += f"_d{self.dilation}_g{self.groups}"
        return name

    @property
    def spec(self) -> str:
        """The `parse_layer` string that rebuilds this layer."""
        spec = (f"conv2d:{self.batch},{self.in_channels},{self.height},{self.width},{self.out_channels},"
                f"{self.kernel_h},{self.kernel_w},{self.stride},{self.padding}")
        if self.dilation != 1 or self.groups != 1:
            spec += f",{self.dilation},{self.groups}"
        return spec

    def with_batch(self, n: int) -> Conv2D:
        return Conv2D(**{**self._asdict(), "batch": n})

    def _asdict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    # -- hardware support ----------------------------------------------------------------------
    def structural_reason(self, hw: HwConfig) -> str | None:
        if self.dilation != 1:
            return f"dilation={self.dilation}: {self.template} handles only dilation=1"
        if self.groups > 1:
            cg, og = self.in_channels // self.groups, self.out_channels // self.groups
            if cg == 1:
                return (f"depthwise (groups={self.groups} = in_channels): one input channel per group "
                        f"is not a multiple of BLOCK_IN={hw.block_in}")
            if cg % hw.block_in:
                return f"in_channels/groups={cg} is not a multiple of BLOCK_IN={hw.block_in}"
            if og % hw.block_out:
                return f"out_channels/groups={og} is not a multiple of BLOCK_OUT={hw.block_out}"
        if self.out_height < 1 or self.out_width < 1:
            return (f"empty output {self.out_height}x{self.out_width}: kernel "
                    f"{self.kernel_h}x{self.kernel_w} exceeds the padded {self.height}x{self.width} input")
        if self.batch % hw.batch:
            return f"batch={self.batch} is not a multiple of BATCH={hw.batch}"
        if self.in_channels % hw.block_in:
            return f"in_channels={self.in_channels} is not a multiple of BLOCK_IN={hw.block_in}"
        if self.out_channels % hw.block_out:
            return f"out_channels={self.out_channels} is not a multiple of BLOCK_OUT={hw.block_out}"
        if self.padding > MAX_PAD:
            return f"padding={self.padding} exceeds the 4-bit LOAD pad field (max {MAX_PAD})"
        return None

    # -- packing (docs/vta.md §7.1) ----------------------------------------------------------------
    def data_shape(self) -> tuple[int, int, int, int]:
        return (self.batch, self.in_channels, self.height, self.width)

    def weight_shape(self) -> tuple[int, int, int, int]:
        return (self.out_channels, self.in_channels // self.groups, self.kernel_h, self.kernel_w)

    def output_shape(self) -> tuple[int, int, int, int]:
        return (self.batch, self.out_channels, self.out_height, self.out_width)

    def accumulate(self, data: np.ndarray, weight: np.ndarray) -> np.ndarray:
        """Exact int64 convolution sums (no requantization), NCHW."""
        data, weight = self._operands(data, weight)
        if self.out_height < 1 or self.out_width < 1:
            raise ConfigError(f"layer {self.name} has an empty output")
        p, s, d, g = self.padding, self.stride, self.dilation, self.groups
        oh, ow, kh, kw = self.out_height, self.out_width, self.kernel_h, self.kernel_w
        # im2col + one float64 BLAS matmul per group, exact here: |int8*int8| <= 2^14 and the
        # C*KH*KW-term sums stay far below 2^53. Output rows are chunked to bound memory.
        x = np.pad(data.astype(np.float64), ((0, 0), (0, 0), (p, p), (p, p)))
        win = np.lib.stride_tricks.sliding_window_view(x, ((kh - 1) * d + 1, (kw - 1) * d + 1), axis=(2, 3))
        win = win[:, :, ::s, ::s, ::d, ::d][:, :, :oh, :ow]          # (N, C, OH, OW, KH, KW)
        cg, og = self.in_channels // g, self.out_channels // g
        out = np.empty((self.batch, self.out_channels, oh, ow), dtype=np.int64)
        rows = max(1, (1 << 23) // max(1, ow * cg * kh * kw))           # ~64 MiB of columns per chunk
        for gi in range(g):
            wmat = weight[gi * og:(gi + 1) * og].reshape(og, cg * kh * kw).astype(np.float64)
            for n in range(self.batch):
                for r0 in range(0, oh, rows):
                    blk = win[n, gi * cg:(gi + 1) * cg, r0:r0 + rows]      # (cg, r, OW, KH, KW)
                    cols = blk.transpose(1, 2, 0, 3, 4).reshape(-1, cg * kh * kw)
                    res = np.rint(cols @ wmat.T).astype(np.int64)       # (r*OW, og)
                    out[n, gi * og:(gi + 1) * og, r0:r0 + rows] = res.T.reshape(og, -1, ow)
        return out


@dataclass(frozen=True)
class Dense(_PackedLayer):
    """A fully connected layer: data (N, IN), weight (OUT, IN), output (N, OUT)."""

    batch: int
    in_features: int
    out_features: int

    def __post_init__(self) -> None:
        _check_ints(self, ("batch", "in_features", "out_features"), 1)

    @property
    def out_height(self) -> int:
        return 1  # a dense output is one "pixel" per sample (dense_packed as a 1x1 conv)

    @property
    def out_width(self) -> int:
        return 1

    @property
    def macs(self) -> int:
        return self.batch * self.in_features * self.out_features

    @property
    def template(self) -> str:
        return "dense_packed.vta"

    @property
    def kind(self) -> str:
        return "dense"

    @property
    def name(self) -> str:
        """Stable, filesystem-safe id, e.g. `dense_1x512_1024`."""
        return f"dense_{self.batch}x{self.in_features}_{self.out_features}"

    @property
    def spec(self) -> str:
        return f"dense:{self.batch},{self.in_features},{self.out_features}"

    def with_batch(self, n: int) -> Dense:
        return Dense(n, self.in_features, self.out_features)

    def schedule_view(self) -> Dense:
        return self

    def structural_reason(self, hw: HwConfig) -> str | None:
        if self.batch % hw.batch:
            return f"batch={self.batch} is not a multiple of BATCH={hw.batch}"
        if self.in_features % hw.block_in:
            return f"in_features={self.in_features} is not a multiple of BLOCK_IN={hw.block_in}"
        if self.out_features % hw.block_out:
            return f"out_features={self.out_features} is not a multiple of BLOCK_OUT={hw.block_out}"
        return None

    def data_shape(self) -> tuple[int, int]:
        return (self.batch, self.in_features)

    def weight_shape(self) -> tuple[int, int]:
        return (self.out_features, self.in_features)

    def output_shape(self) -> tuple[int, int]:
        return (self.batch, self.out_features)

    def accumulate(self, data: np.ndarray, weight: np.ndarray) -> np.ndarray:
        """Exact int64 sums data @ weight.T, shape (N, OUT)."""
        data, weight = self._operands(data, weight)
        # float64 BLAS is exact for int8 operands (sums far below 2^53).
        return np.rint(data.astype(np.float64) @ weight.astype(np.float64).T).astype(np.int64)


@dataclass(frozen=True)
class Conv2DTranspose(_PackedLayer):
    """A 2-D transposed convolution (torch `ConvTranspose2d`): NCHW data, IOHW weights
    (in_channels, out_channels, KH, KW), square stride and padding, groups 1, dilation 1.

    VTA runs it as template `conv2d_transpose_packed.vta` (docs/vta.md §7.6): a stride-1 conv of the
    flipped kernel over the input dilated by the stride (stride-1 zeros inserted between pixels)
    and padded by KH-1-padding — `schedule_view()` is that conv. The packed data is the dilated
    input; the micro-op kernel skips the multiplications by inserted zeros (docs/vta.md)."""

    batch: int
    in_channels: int
    height: int
    width: int
    out_channels: int
    kernel_h: int
    kernel_w: int
    stride: int
    padding: int
    output_padding: int = 0

    def __post_init__(self) -> None:
        _check_ints(self, ("batch", "in_channels", "height", "width", "out_channels", "kernel_h",
                           "kernel_w", "stride"), 1)
        _check_ints(self, ("padding", "output_padding"), 0)

    @property
    def out_height(self) -> int:
        return (self.height - 1) * self.stride - 2 * self.padding + self.kernel_h + self.output_padding

    @property
    def out_width(self) -> int:
        return (self.width - 1) * self.stride - 2 * self.padding + self.kernel_w + self.output_padding

    def _taps(self, out: int, k: int, size: int) -> int:
        """Sum over output rows of the kernel rows whose input is a real (not inserted-zero,
        not border) pixel: the multiplications a transposed conv really does along one axis."""
        total = 0
        for o in range(max(out, 0)):
            for kk in range(k):
                q = o + self.padding - kk  # input position times stride
                total += q % self.stride == 0 and 0 <= q // self.stride < size
        return total

    @property
    def macs(self) -> int:
        return (self.batch * self.out_channels * self.in_channels
                * self._taps(self.out_height, self.kernel_h, self.height)
                * self._taps(self.out_width, self.kernel_w, self.width))

    @property
    def template(self) -> str:
        return "conv2d_transpose_packed.vta"

    @property
    def kind(self) -> str:
        return "conv2d_transpose"

    @property
    def name(self) -> str:
        """Stable id, e.g. `conv2d_transpose_1x512x4x4_256_4x4_s2_p1`."""
        name = (f"conv2d_transpose_{self.batch}x{self.in_channels}x{self.height}x{self.width}_"
                f"{self.out_channels}_{self.kernel_h}x{self.kernel_w}_s{self.stride}_p{self.padding}")
        return name + (f"_op{self.output_padding}" if self.output_padding else "")

    @property
    def spec(self) -> str:
        spec = (f"conv2d_transpose:{self.batch},{self.in_channels},{self.height},{self.width},"
                f"{self.out_channels},{self.kernel_h},{self.kernel_w},{self.stride},{self.padding}")
        return spec + (f",{self.output_padding}" if self.output_padding else "")

    def with_batch(self, n: int) -> Conv2DTranspose:
        return Conv2DTranspose(**{**{f.name: getattr(self, f.name) for f in fields(self)}, "batch": n})

    @property
    def back_padding(self) -> int:
        """Zero border of the dilated input: KH-1-padding (conv2d_transpose_packed's bpad)."""
        return self.kernel_h - 1 - self.padding

    def schedule_view(self) -> Conv2D:
        """The stride-1 conv over the dilated, padded input that the template schedules."""
        s = self.stride
        return Conv2D(self.batch, self.in_channels, (self.height - 1) * s + 1, (self.width - 1) * s + 1,
                      self.out_channels, self.kernel_h, self.kernel_w, 1, self.back_padding)

    def structural_reason(self, hw: HwConfig) -> str | None:
        if self.output_padding:
            return (f"output_padding={self.output_padding}: conv2d_transpose_packed.vta supports only "
                    "output padding 0")
        if self.kernel_h != self.kernel_w:
            return f"kernel {self.kernel_h}x{self.kernel_w} is not square (one border for both axes)"
        if self.padding > self.kernel_h - 1:
            return f"padding={self.padding} > kernel-1={self.kernel_h - 1}: the dilated input would be cropped"
        if self.out_height < 1 or self.out_width < 1:
            return f"empty output {self.out_height}x{self.out_width}"
        if self.batch % hw.batch:
            return f"batch={self.batch} is not a multiple of BATCH={hw.batch}"
        if self.in_channels % hw.block_in:
            return f"in_channels={self.in_channels} is not a multiple of BLOCK_IN={hw.block_in}"
        if self.out_channels % hw.block_out:
            return f"out_channels={self.out_channels} is not a multiple of BLOCK_OUT={hw.block_out}"
        if self.back_padding > MAX_PAD:
            return f"border {self.back_padding} of the dilated input exceeds the 4-bit LOAD pad field (max {MAX_PAD})"
        return None

    # -- shapes and packing: the packed tensors are those of `schedule_view()` --------------------
    def data_shape(self) -> tuple[int, int, int, int]:
        return (self.batch, self.in_channels, self.height, self.width)

    def weight_shape(self) -> tuple[int, int, int, int]:
        return (self.in_channels, self.out_channels, self.kernel_h, self.kernel_w)

    def output_shape(self) -> tuple[int, int, int, int]:
        return (self.batch, self.out_channels, self.out_height, self.out_width)

    def dilate(self, data: np.ndarray) -> np.ndarray:
        """NCHW data with stride-1 zeros inserted between pixels (topi.nn.dilate)."""
        data = self._checked(np.asarray(data), "data", self.data_shape())
        s = self.stride
        out = np.zeros(self.schedule_view().data_shape(), dtype=data.dtype)
        out[:, :, ::s, ::s] = data
        return out

    def conv_weight(self, weight: np.ndarray) -> np.ndarray:
        """IOHW weights -> the OIHW weights of the equivalent conv: transposed and flipped."""
        weight = self._checked(np.asarray(weight), "weight", self.weight_shape())
        return np.ascontiguousarray(weight.transpose(1, 0, 2, 3)[:, :, ::-1, ::-1])

    def packed_data_shape(self, hw: HwConfig) -> tuple[int, ...]:
        return self.schedule_view().packed_data_shape(hw)

    def packed_weight_shape(self, hw: HwConfig) -> tuple[int, ...]:
        return self.schedule_view().packed_weight_shape(hw)

    def pack_data(self, arr: np.ndarray, hw: HwConfig) -> np.ndarray:
        self._need_supported(hw)
        return self.schedule_view().pack_data(self.dilate(arr), hw)

    def pack_weight(self, arr: np.ndarray, hw: HwConfig) -> np.ndarray:
        self._need_supported(hw)
        return self.schedule_view().pack_weight(self.conv_weight(arr), hw)

    def accumulate(self, data: np.ndarray, weight: np.ndarray) -> np.ndarray:
        """Exact int64 transposed-convolution sums, NCHW: every input pixel scatters its
        C->O products over a KHxKW window at stride `stride`, cropped by `padding` (torch's
        definition, independent of the dilated-conv lowering)."""
        data, weight = self._operands(data, weight)
        s, p, kh, kw = self.stride, self.padding, self.kernel_h, self.kernel_w
        full_h = (self.height - 1) * s + kh + self.output_padding
        full_w = (self.width - 1) * s + kw + self.output_padding
        full = np.zeros((self.batch, self.out_channels, max(full_h, p + self.out_height),
                         max(full_w, p + self.out_width)), dtype=np.int64)
        x = data.astype(np.float64)
        for i in range(kh):
            for j in range(kw):
                # exact in float64: int8 products summed over C stay far below 2^53
                part = np.rint(np.einsum("nchw,co->nohw", x, weight[:, :, i, j].astype(np.float64)))
                full[:, :, i:i + (self.height - 1) * s + 1:s, j:j + (self.width - 1) * s + 1:s] += part.astype(np.int64)
        return np.ascontiguousarray(full[:, :, p:p + self.out_height, p:p + self.out_width])


Layer = Conv2D | Conv2DTranspose | Dense


def parse_layer(text: str) -> Layer:
    """`conv2d:N,C,H,W,O,KH,KW,stride,pad[,dilation,groups]`,
    `conv2d_transpose:N,C,H,W,O,KH,KW,stride,pad[,output_padding]` or `dense:N,IN,OUT` -> layer."""
    if isinstance(text, (Conv2D, Conv2DTranspose, Dense)):
        return text
    raw = str(text).strip()
    kind, sep, rest = raw.partition(":")
    kind = kind.strip().lower()
    forms = f"expected {CONV_FORM}, {TRANSPOSE_FORM} or {DENSE_FORM}, e.g. conv2d:1,64,56,56,64,3,3,1,1"
    if not sep or kind not in ("conv2d", "conv2d_transpose", "dense"):
        raise ConfigError(f"layer {raw!r}: {forms}")
    try:
        nums = [int(x) for x in rest.split(",")]
    except ValueError:
        raise ConfigError(f"layer {raw!r}: values must be integers; {forms}") from None
    if kind == "conv2d":
        if len(nums) not in (9, 11):
            raise ConfigError(f"layer {raw!r}: got {len(nums)} numbers, expected {CONV_FORM}")
        return Conv2D(*nums)
    if kind == "conv2d_transpose":
        if len(nums) not in (9, 10):
            raise ConfigError(f"layer {raw!r}: got {len(nums)} numbers, expected {TRANSPOSE_FORM}")
        return Conv2DTranspose(*nums)
    if len(nums) != 3:
        raise ConfigError(f"layer {raw!r}: got {len(nums)} numbers, expected {DENSE_FORM}")
    return Dense(*nums)
