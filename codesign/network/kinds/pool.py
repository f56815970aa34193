"""Pooling kinds (VTA's ALU pools them: `codesign.evaluate.pool`): max pool, average pool, adaptive
average pool (equal windows), and a mean over H and W (a global average pool). Adaptive pools whose
windows do not tile the input evenly are CPU kinds of their own (`adaptive_avg_pool2d_uneven`,
`adaptive_max_pool2d`); an evenly tiling adaptive max pool is a `max_pool2d`."""

from __future__ import annotations

from typing import Any

import numpy as np

from codesign.network.fx import Walk, arg, ints, shape_of
from codesign.network.graph import Op
from codesign.network.kernels import clip8, out_size, round_shift, window_max, windows
from codesign.network.kinds.base import POOL, OpKind, QuantContext, always, register, register_builder
from codesign.network.kinds.layout import add_reduction
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
    """Equal windows tiling the input: `adaptive_avg_pool2d` (VTA pools it); else the CPU kind
    `adaptive_avg_pool2d_uneven` (each window its own count)."""
    shape = shape_of(node.args[0])
    if len(shape) != 4:
        raise w.unsupported(node, "average pooling of a tensor that is not NCHW")
    (h, wd), (oh, ow) = shape[2:], out_hw
    kind = "adaptive_avg_pool2d_uneven" if h % oh or wd % ow else "adaptive_avg_pool2d"
    w.add(node, kind, (w.tensor(node.args[0], node),), {"output_size": (oh, ow)})


def build_adaptive(w: Walk, node: Any, op: str) -> None:
    add_adaptive(w, node, ints(node.args[1]))


def build_adaptive_max(w: Walk, node: Any, op: str) -> None:
    """Equal windows: a `max_pool2d` of kernel = stride = input / output (VTA pools it); else the
    CPU kind `adaptive_max_pool2d`. The op's output is the values (getitem 0); indices are refused."""
    shape, (oh, ow) = shape_of(node.args[0]), ints(node.args[1])
    if len(shape) != 4:
        raise w.unsupported(node, "max pooling of a tensor that is not NCHW")
    vals = node.meta.get("val")
    out = shape_of(node) if not isinstance(vals, (list, tuple)) else tuple(int(d) for d in vals[0].shape)
    x, (h, wd) = w.tensor(node.args[0], node), shape[2:]
    if h % oh or wd % ow:
        w.add(node, "adaptive_max_pool2d", (x,), {"output_size": (oh, ow)}, shape=out)
    else:
        k = (h // oh, wd // ow)
        w.add(node, "max_pool2d", (x,), {"kernel": k, "stride": k, "padding": (0, 0), "dilation": (1, 1),
                                         "ceil_mode": False}, shape=out)
    w.items[node.name] = values_only


def values_only(w: Walk, getitem: Any, i: int) -> None:
    """Item 0 of a (values, indices) op is the op's output; indices nobody reads are dropped."""
    if i == 0:
        w.alias[getitem.name] = w.alias[getitem.args[0].name]
    elif getitem.users:
        raise w.unsupported(getitem, "the indices of a max pool (the IR's max pools give values)")


def build_mean(w: Walk, node: Any, op: str) -> None:
    """A mean over H and W of an NCHW tensor is the global average pool; any other the `mean` kind."""
    x = node.args[0]
    dims = sorted(d % 4 for d in ints(arg(node, 1, "dim"), n=1)) if len(shape_of(x)) == 4 else []
    if dims != [2, 3] or node.kwargs.get("dtype") is not None:
        add_reduction(w, node, "mean")
        return
    add_adaptive(w, node, (1, 1))


def adaptive_windows(in_size: int, out_size: int) -> list[tuple[int, int]]:
    """PyTorch's adaptive windows: [floor(i·in/out), ceil((i+1)·in/out)) for each output i."""
    return [(i * in_size // out_size, -(-(i + 1) * in_size // out_size)) for i in range(out_size)]


def _each_window(x: np.ndarray, op: Op, reduce: Any) -> np.ndarray:
    """`reduce(window, count)` of every adaptive window, as (N, C, OH, OW), in the op's shape."""
    (oh, ow), (h, wd) = op.attrs["output_size"], x.shape[2:4]
    rows, cols = adaptive_windows(h, oh), adaptive_windows(wd, ow)
    out = np.stack([np.stack([reduce(x[:, :, r0:r1, c0:c1], (r1 - r0) * (c1 - c0)) for c0, c1 in cols], axis=-1)
                    for r0, r1 in rows], axis=-2)
    return _reshape(op, out)


def uneven_int(op: Op, p: QParams, xs: list[np.ndarray], frac: int) -> np.ndarray:
    """Each window: int32 sum times its own `mul`, rounded >> its own shift, with (mul, shift) =
    pool_factors(its count), as the equal-window pool does for its one count."""
    def mean(win: np.ndarray, count: int) -> np.ndarray:
        mul, shift = pool_factors(count)
        return clip8(round_shift(win.sum(axis=(2, 3), dtype=np.int32) * np.int32(mul), shift))
    return _each_window(xs[0].astype(np.int32), op, mean)


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
    return window_max(xs[0], a["kernel"], a["stride"], a["padding"], a["dilation"], out_hw(op, xs[0]),
                      -128).astype(np.int8)


def max_float(op: Op, xs: list[np.ndarray]) -> np.ndarray:
    a = op.attrs
    return window_max(xs[0], a["kernel"], a["stride"], a["padding"], a["dilation"], out_hw(op, xs[0]), -np.inf)


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

register(OpKind(
    "adaptive_avg_pool2d_uneven", "adaptive average pool to output_size whose windows do not tile the input "
    "(PyTorch's [floor(i·H/oh), ceil((i+1)·H/oh)) windows, each divided by its own count)", (), None,
    int_ref=uneven_int, float_ref=lambda op, xs: _each_window(xs[0], op, lambda win, n: win.sum(axis=(2, 3)) / n),
    label="adaptive average pool (unequal windows)", layout_free=always))

register(OpKind(
    "adaptive_max_pool2d", "adaptive max pool to output_size whose windows do not tile the input (PyTorch's "
    "windows, overlapping)", ("adaptive_max_pool2d",), build_adaptive_max,
    int_ref=lambda op, p, xs, f: _each_window(xs[0], op, lambda win, n: win.max(axis=(2, 3))).astype(np.int8),
    float_ref=lambda op, xs: _each_window(xs[0], op, lambda win, n: win.max(axis=(2, 3))),
    label="adaptive max pool (unequal windows)", layout_free=always))

__all__ = ["adaptive_windows", "avg_quant", "geometry", "out_hw", "window_count"]
