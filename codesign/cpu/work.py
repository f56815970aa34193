"""What a layer or pass asks of a CPU: multiply-accumulates and bytes moved, by kernel kind.

A `ConvShape` is the full NCHW geometry TVM's arm_cpu templates take (separate h/w strides and
four paddings, which `codesign.workloads.Conv2D` does not carry); `conv_work` counts, for one
kernel kind, the MACs the kernel really executes and the bytes of the tensors it touches
(docs/cpu-model.md §2 states each count and its reason).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from codesign.errors import ConfigError
from codesign.workloads import Conv2D, Conv2DTranspose, Dense

# Kernel kinds, named after TVM's arm_cpu templates (docs/cpu-model.md §1).
SPATIAL_PACK = "spatial_pack"   # conv2d_nchw_spatial_pack.arm_cpu: direct conv, register-tiled
WINOGRAD = "winograd"           # conv2d_nchw_winograd.arm_cpu: F(4x4, 3x3)
DEPTHWISE = "depthwise"         # depthwise_conv2d_nchw.arm_cpu
TRANSPOSE = "transpose"         # conv2d_transpose_nchw.arm_cpu: direct conv over the dilated input
DENSE = "dense"                 # a fully connected layer (no record in the shipped data)
PASS = "pass"                   # bytes-bound passes: elementwise, pool, quantize, layout
KINDS = (SPATIAL_PACK, WINOGRAD, DEPTHWISE, TRANSPOSE, DENSE, PASS)
DTYPES = ("float32", "int8")
WINOGRAD_TILE = 4  # TVM's arm_cpu winograd computes 4x4 output tiles (alpha = 6)

_ELEM_BYTES = {"float32": 4, "int8": 1, "int32": 4}


def elem_bytes(dtype: str) -> int:
    if dtype not in _ELEM_BYTES:
        raise ConfigError(f"dtype {dtype!r} is not known to the CPU model; allowed: {', '.join(_ELEM_BYTES)}")
    return _ELEM_BYTES[dtype]


@dataclass(frozen=True)
class ConvShape:
    """One conv (or transposed conv) as the arm_cpu templates see it. `kernel` is OIHW for a
    conv (I = in_channels / groups) and IOHW for a transposed conv, as in TVM."""

    batch: int
    in_channels: int
    height: int
    width: int
    out_channels: int
    kernel_h: int
    kernel_w: int
    stride_h: int = 1
    stride_w: int = 1
    pad: tuple[int, int, int, int] = (0, 0, 0, 0)  # top, left, bottom, right
    dilation_h: int = 1
    dilation_w: int = 1
    groups: int = 1
    transpose: bool = False
    output_padding: tuple[int, int] = (0, 0)

    def __post_init__(self) -> None:
        for name in ("batch", "in_channels", "height", "width", "out_channels", "kernel_h", "kernel_w",
                     "stride_h", "stride_w", "dilation_h", "dilation_w", "groups"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"conv {name}={v!r} must be a positive integer")
        if len(self.pad) != 4 or any(not isinstance(p, int) or p < 0 for p in self.pad):
            raise ConfigError(f"conv padding {self.pad!r} must be four non-negative integers")
        if self.in_channels % self.groups or self.out_channels % self.groups:
            raise ConfigError(f"conv groups={self.groups} must divide in_channels={self.in_channels} "
                              f"and out_channels={self.out_channels}")
        if self.out_height < 1 or self.out_width < 1:
            raise ConfigError(f"conv output {self.out_height}x{self.out_width} is empty")

    @property
    def out_height(self) -> int:
        t, _, b, _ = self.pad
        if self.transpose:
            return (self.height - 1) * self.stride_h - t - b + self.kernel_h + self.output_padding[0]
        return (self.height + t + b - self.dilation_h * (self.kernel_h - 1) - 1) // self.stride_h + 1

    @property
    def out_width(self) -> int:
        _, left, _, r = self.pad
        if self.transpose:
            return (self.width - 1) * self.stride_w - left - r + self.kernel_w + self.output_padding[1]
        return (self.width + left + r - self.dilation_w * (self.kernel_w - 1) - 1) // self.stride_w + 1

    @property
    def depthwise(self) -> bool:
        return self.groups > 1 and self.groups == self.in_channels

    @property
    def macs(self) -> int:
        """Multiply-accumulates of the direct computation. A transposed conv counts every
        output's full kernel window over the dilated input (zeros included): TVM's arm_cpu
        template computes it that way."""
        per_out = (self.in_channels // self.groups) * self.kernel_h * self.kernel_w
        return self.batch * self.out_channels * self.out_height * self.out_width * per_out

    @property
    def name(self) -> str:
        t = "convT" if self.transpose else ("dwconv" if self.depthwise else "conv")
        g = f"_g{self.groups}" if self.groups > 1 and not self.depthwise else ""
        return (f"{t}_{self.batch}x{self.in_channels}x{self.height}x{self.width}_{self.out_channels}_"
                f"{self.kernel_h}x{self.kernel_w}_s{self.stride_h}x{self.stride_w}_p{'-'.join(map(str, self.pad))}{g}")

    def kinds(self) -> tuple[str, ...]:
        """The kernel kinds TVM's arm_cpu strategy offers for this conv (it keeps the fastest)."""
        if self.transpose:
            return (TRANSPOSE,)
        if self.depthwise:
            return (DEPTHWISE,)
        if (self.groups == 1 and (self.kernel_h, self.kernel_w) == (3, 3) and (self.stride_h, self.stride_w) == (1, 1)
                and (self.dilation_h, self.dilation_w) == (1, 1)):
            return (SPATIAL_PACK, WINOGRAD)
        return (SPATIAL_PACK,)


@dataclass(frozen=True)
class CpuWork:
    """What one op asks of the CPU: `macs` the kernel executes and `bytes` of the tensors it
    reads and writes, for kernel `kind` in `dtype` (the operand type)."""

    name: str
    kind: str
    dtype: str
    macs: int
    bytes: int

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConfigError(f"CPU kernel kind {self.kind!r}; allowed: {', '.join(KINDS)}")
        if self.dtype not in DTYPES:
            raise ConfigError(f"CPU op dtype {self.dtype!r}; allowed: {', '.join(DTYPES)}")
        if self.macs < 0 or self.bytes < 0:
            raise ConfigError(f"CPU op {self.name}: macs and bytes must be >= 0")


def _out_bytes(dtype: str) -> int:
    return 4  # float32 output, or int32 accumulators for int8 operands


def conv_work(shape: ConvShape, dtype: str = "float32", kind: str | None = None) -> CpuWork:
    """The work of `shape` run by kernel `kind` (default: the first kind the conv offers)."""
    kind = kind or shape.kinds()[0]
    if kind not in shape.kinds():
        raise ConfigError(f"{shape.name}: kernel kind {kind!r} does not apply; allowed: {', '.join(shape.kinds())}")
    eb, ob = elem_bytes(dtype), _out_bytes(dtype)
    n, c, k = shape.batch, shape.in_channels, shape.out_channels
    oh, ow = shape.out_height, shape.out_width
    weight = (c // shape.groups) * k * shape.kernel_h * shape.kernel_w
    tensors = eb * (n * c * shape.height * shape.width + weight) + ob * n * k * oh * ow
    macs = shape.macs
    if kind == WINOGRAD:
        # Batched GEMM over alpha^2 = 36 points per 4x4 tile; the input transform writes V and the
        # GEMM reads it, the GEMM writes M and the output transform reads it (float32).
        alpha = WINOGRAD_TILE + 2
        tiles = n * math.ceil(oh / WINOGRAD_TILE) * math.ceil(ow / WINOGRAD_TILE)
        macs = alpha * alpha * tiles * c * k
        tensors += 4 * 2 * alpha * alpha * tiles * (c + k)
    elif kind == TRANSPOSE:
        # The input dilated by the stride and padded is materialized before the direct conv.
        t, left, b, r = shape.pad
        dh = (shape.height - 1) * shape.stride_h + 1 + 2 * (shape.kernel_h - 1) - t - b
        dw = (shape.width - 1) * shape.stride_w + 1 + 2 * (shape.kernel_w - 1) - left - r
        tensors += eb * n * c * max(dh, 0) * max(dw, 0)
    return CpuWork(name=shape.name, kind=kind, dtype=dtype, macs=int(macs), bytes=int(tensors))


def shape_of(layer: Conv2D | Conv2DTranspose) -> ConvShape:
    """The arm_cpu geometry of a workloads layer."""
    if isinstance(layer, Conv2DTranspose):
        p = layer.padding
        return ConvShape(layer.batch, layer.in_channels, layer.height, layer.width, layer.out_channels,
                         layer.kernel_h, layer.kernel_w, layer.stride, layer.stride, (p, p, p, p),
                         transpose=True, output_padding=(layer.output_padding, layer.output_padding))
    if isinstance(layer, Conv2D):
        p, d = layer.padding, layer.dilation
        return ConvShape(layer.batch, layer.in_channels, layer.height, layer.width, layer.out_channels,
                         layer.kernel_h, layer.kernel_w, layer.stride, layer.stride, (p, p, p, p), d, d, layer.groups)
    raise ConfigError(f"no conv geometry for {type(layer).__name__}; allowed: Conv2D, Conv2DTranspose")


def dense_work(layer: Dense, dtype: str = "float32") -> CpuWork:
    """A fully connected layer: one weight read, batch x in_features MACs per output."""
    eb = elem_bytes(dtype)
    nbytes = eb * (layer.batch * layer.in_features + layer.in_features * layer.out_features)
    nbytes += _out_bytes(dtype) * layer.batch * layer.out_features
    return CpuWork(name=layer.name, kind=DENSE, dtype=dtype,
                   macs=layer.batch * layer.in_features * layer.out_features, bytes=nbytes)


def pass_work(name: str, nbytes: int, dtype: str = "float32") -> CpuWork:
    """A bytes-bound pass (elementwise add/ReLU, pooling, quantize/dequantize, layout packing):
    `nbytes` read plus written."""
    return CpuWork(name=name, kind=PASS, dtype=dtype, macs=0, bytes=int(nbytes))


def tensor_pass(name: str, read_elems: int, write_elems: int, read_dtype: str = "float32",
                write_dtype: str = "float32") -> CpuWork:
    """A pass that reads `read_elems` of `read_dtype` and writes `write_elems` of `write_dtype`:
    e.g. quantize (float32 -> int8, same count), a residual add (read 2n, write n), a 2x2 max
    pool (read n, write n/4), a layout pack (int8 -> int8)."""
    nbytes = read_elems * elem_bytes(read_dtype) + write_elems * elem_bytes(write_dtype)
    return pass_work(name, nbytes, "int8" if "int8" in (read_dtype, write_dtype) else "float32")


__all__ = ["SPATIAL_PACK", "WINOGRAD", "DEPTHWISE", "TRANSPOSE", "DENSE", "PASS", "KINDS", "DTYPES",
           "WINOGRAD_TILE", "ConvShape", "CpuWork", "conv_work", "shape_of", "dense_work", "pass_work", "tensor_pass",
           "elem_bytes"]
