"""Pooling kinds (VTA's ALU pools them: `codesign.evaluate.pool`): max pool, average pool, adaptive
average pool (equal windows), and a mean over H and W (a global average pool)."""

from __future__ import annotations

from typing import Any

import numpy as np

from codesign.network.fx import Walk, arg, ints, shape_of
from codesign.network.graph import Op
from codesign.network.kernels import clip8, out_size, round_shift, windows
from codesign.network.kinds.base import POOL, OpKind, QuantContext, always, register, register_builder
from codesign.network.quantized import QParams, pool_factors


def build_pool(w: Walk, node: Any, op: str) -> None:
    x = w.tensor(node.args[0], node)
    if len(shape_of(node.args[0])) != 4:
        raise w.unsupported(node, "pooling of a tensor that is not NCHW")
    kernel = ints(arg(node, 1, "kernel_size"))
    stride = ints(arg(node, 2, "stride"), default=None) or kernel
    padding = ints(arg(node, 3, "padding", 0), default=0)
    if op.startswith("max_pool2d"):
        dilation = ints(arg(node, 4, "dilation", 1), default=1)
        w.add(node, "max_pool2d", (x,), {"kernel": kernel, "stride": stride, "padding": padding,
                                         "dilation": dilation, "ceil_mode": bool(arg(node, 5, "ceil_mode", False))})
        return
    ceil_mode, include_pad = bool(arg(node, 4, "ceil_mode", False)), bool(arg(node, 5, "count_include_pad", True))
    divisor = arg(node, 6, "divisor_override")
    if ceil_mode:
        raise w.unsupported(node, "avg_pool2d with ceil_mode=True (edge windows would need their own divisor)")
    if not include_pad and any(padding):
        raise w.unsupported(node, "avg_pool2d with padding and count_include_pad=False (divisor varies per window)")
    w.add(node, "avg_pool2d", (x,), {"kernel": kernel, "stride": stride, "padding": padding,
                                     "divisor": int(divisor) if divisor else kernel[0] * kernel[1]})


def add_adaptive(w: Walk, node: Any, out_hw: tuple[int, ...]) -> None:
    shape = shape_of(node.args[0])
    if len(shape) != 4:
        raise w.unsupported(node, "average pooling of a tensor that is not NCHW")
    (h, wd), (oh, ow) = shape[2:], out_hw
    if h % oh or wd % ow:
        raise w.unsupported(node, f"adaptive average pool {h}x{wd} -> {oh}x{ow}: windows of unequal size "
                            "(output size must divide the input size)")
    w.add(node, "adaptive_avg_pool2d", (w.tensor(node.args[0], node),), {"output_size": (oh, ow)})


def build_adaptive(w: Walk, node: Any, op: str) -> None:
    add_adaptive(w, node, ints(node.args[1]))


def build_mean(w: Walk, node: Any, op: str) -> None:
    x = node.args[0]
    dims = sorted(d % 4 for d in ints(arg(node, 1, "dim"), n=1)) if len(shape_of(x)) == 4 else []
    if dims != [2, 3]:
        raise w.unsupported(node, "mean over dimensions other than H and W of an NCHW tensor")
    add_adaptive(w, node, (1, 1))


def geometry(op: Op, in_hw: tuple[int, int]) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int]]:
    """(kernel, stride, padding) of an avg pool or adaptive avg pool op on an input of `in_hw`."""
    if op.kind == "adaptive_avg_pool2d":
        oh, ow = op.attrs["output_size"]
        k = (in_hw[0] // oh, in_hw[1] // ow)
        return k, k, (0, 0)
    return tuple(op.attrs["kernel"]), tuple(op.attrs["stride"]), tuple(op.attrs["padding"])


def out_hw(op: Op, x: np.ndarray) -> tuple[int, int]:
    if op.kind == "adaptive_avg_pool2d":
        return tuple(op.attrs["output_size"])
    if op.kind == "max_pool2d" and not op.attrs.get("ceil_mode"):
        k, s, p, d = op.attrs["kernel"], op.attrs["stride"], op.attrs["padding"], op.attrs["dilation"]
        return out_size(x.shape[2], k[0], s[0], p[0], d[0]), out_size(x.shape[3], k[1], s[1], p[1], d[1])
    if op.kind == "avg_pool2d":
        k, s, p = op.attrs["kernel"], op.attrs["stride"], op.attrs["padding"]
        return out_size(x.shape[2], k[0], s[0], p[0], 1), out_size(x.shape[3], k[1], s[1], p[1], 1)
    return op.shape[2], op.shape[3]  # ceil_mode max pool: the exported graph's size


def window_count(op: Op, in_shape: tuple[int, ...]) -> int:
    """Elements an average window divides by (its divisor; zero padding counted)."""
    if op.kind == "avg_pool2d":
        return int(op.attrs["divisor"])
    k, _, _ = geometry(op, in_shape[2:4])
    return k[0] * k[1]


def avg_quant(ctx: QuantContext, op: Op) -> tuple[int, QParams]:
    """Output keeps the input's f; window sum times `mul`, rounded >> shift (a window of 2^p:
    >> p; other sizes (sum·m + 2^15) >> 16 with m = round(2^16 / count))."""
    mul, shift = pool_factors(window_count(op, ctx.net.shape(op.inputs[0])))
    return ctx.frac[op.inputs[0]], QParams(shift=shift, mul=mul)


def _reshape(op: Op, x: np.ndarray) -> np.ndarray:
    return x.reshape((x.shape[0],) + tuple(op.shape[1:]))


def max_int(op: Op, p: QParams, xs: list[np.ndarray], frac: int) -> np.ndarray:
    a = op.attrs
    win = windows(xs[0], a["kernel"], a["stride"], a["padding"], a["dilation"], out_hw(op, xs[0]), -128)
    return win.max(axis=(4, 5)).astype(np.int8)


def max_float(op: Op, xs: list[np.ndarray]) -> np.ndarray:
    a = op.attrs
    return windows(xs[0], a["kernel"], a["stride"], a["padding"], a["dilation"], out_hw(op, xs[0]), -np.inf).max(axis=(4, 5))


def avg_int(op: Op, p: QParams, xs: list[np.ndarray], frac: int) -> np.ndarray:
    k, s, pad = geometry(op, xs[0].shape[2:4])
    win = windows(xs[0].astype(np.int32), k, s, pad, (1, 1), out_hw(op, xs[0]), 0)
    total = win.sum(axis=(4, 5), dtype=np.int32) * np.int32(p.mul)
    return _reshape(op, clip8(round_shift(total, p.shift)))


def avg_float(op: Op, xs: list[np.ndarray]) -> np.ndarray:
    k, s, pad = geometry(op, xs[0].shape[2:4])
    win = windows(xs[0], k, s, pad, (1, 1), out_hw(op, xs[0]), 0.0)
    return _reshape(op, win.sum(axis=(4, 5)) / window_count(op, xs[0].shape))


register(OpKind(
    "max_pool2d", "max over kernel windows: kernel, stride, padding, dilation", ("max_pool2d", "max_pool2d_with_indices"),
    build_pool, int_ref=max_int, float_ref=max_float, label="max pool", layout_free=always, vta=POOL))

register(OpKind(
    "avg_pool2d", "mean over kernel windows: kernel, stride, padding, divisor", ("avg_pool2d",), build_pool,
    int_ref=avg_int, float_ref=avg_float, label="average pool", quant=avg_quant, layout_free=always, vta=POOL))

register(OpKind(
    "adaptive_avg_pool2d", "mean over equal windows that tile the input to output_size (mean over H, W)",
    ("adaptive_avg_pool2d", "_adaptive_avg_pool2d"), build_adaptive,
    int_ref=avg_int, float_ref=avg_float, label="global average pool", quant=avg_quant, layout_free=always, vta=POOL))
# a mean over H and W is the global average pool
register_builder(("mean",), build_mean)

__all__ = ["avg_quant", "geometry", "out_hw", "window_count"]
