"""Convolution kinds beyond conv2d: conv1d (imported as the conv2d kind on (N, C, 1, L), so VTA's
conv templates can take it) and conv_transpose2d (registered here; the record:
codesign.network.kinds.base).

conv1d is three ops: a reshape of the (N, C, L) input to (N, C, 1, L) (`<node>_2d`), the conv2d
(`<node>_conv`) and the reshape back to (N, O, L') (the node's own op). VTA's conv takes one
stride, padding and dilation for both axes, so the conv2d is made square: stride (s, s) and
dilation (d, d) change nothing on a height-1 input under a height-1 kernel; padding p > 0 becomes
(p, p) with a kernel 2p/d + 1 rows high whose middle row (p/d) is the 1-D kernel and the others
zero, so the one output row sees exactly the real input row (zero rows add exact zeros to the
int32 sums; the VTA/CPU MACs grow by that factor). When d does not divide p the padding stays
(0, p): exact, CPU only. BatchNorm1d after it folds into the conv2d through the reshape
(`gemm.build_batch_norm`).

conv_transpose2d (and conv_transpose1d, on (N, C, 1, L) likewise) is a VTA GEMM through the host
rewrite `zero_insert` (codesign.place.transforms): the stride-1 conv of the flipped OIHW kernel over
the input dilated by the stride, bias and ReLU fused like a conv's. Only square stride / padding /
output_padding have a layer (`network.layers.layer_of`); a 1-D one (stride (1, s)) stays on the CPU.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from codesign.cpu import ConvShape
from codesign.network.fx import Walk, arg, ints, shape_of, to_numpy
from codesign.network.graph import Network, Op
from codesign.network.kernels import conv_transpose2d_sums, requant, wrap32
from codesign.network.kinds.base import GEMM, OpKind, register, register_builder
from codesign.network.kinds.gemm import add_conv2d, conv_args, gemm_quant, zeros_bias
from codesign.network.quantized import QParams


def _one(w: Walk, node: Any, value: Any, default: int, what: str) -> int:
    vals = ints(value, 1, default=default)
    if len(vals) != 1:
        raise w.unsupported(node, f"{what}={list(vals)} for a 1-D convolution")
    return int(vals[0])


def _np(t: Any) -> np.ndarray | None:
    return t if isinstance(t, np.ndarray) or t is None else to_numpy(t)


def _as_2d(w: Walk, node: Any) -> str:
    """Add the reshape of the node's (N, C, L) input to (N, C, 1, L); its tensor name."""
    x = node.args[0]
    shape = shape_of(x)
    if len(shape) != 3:
        raise w.unsupported(node, f"a 1-D convolution of a {len(shape)}-D input (give it as (N, C, L))")
    n, c, length = shape
    return w.add(node, "flatten", (w.tensor(x, node),), {"shape": (n, c, 1, length)}, shape=(n, c, 1, length),
                 name=f"{node.name}_2d").name


def build_conv1d(w: Walk, node: Any, stride: Any, padding: Any, dilation: Any, groups: Any) -> None:
    """conv1d (or a convolution of a 3-D input) as a conv2d on (N, C, 1, L), square where it can be."""
    s, p, d = (_one(w, node, stride, 1, "stride"), _one(w, node, padding, 0, "padding"),
               _one(w, node, dilation, 1, "dilation"))
    x2d = _as_2d(w, node)
    weight, bias = w.param(node.args[1]), w.param(arg(node, 2, "bias"))
    o, cg, k = (int(v) for v in weight.shape)
    square = p % d == 0  # the 1-D kernel as the middle row of a (2p/d + 1)-row kernel (module doc)
    kh, ph, row = (2 * p // d + 1, p, p // d) if square else (1, 0, 0)
    w1 = _np(weight)
    w4 = None
    if w1 is not None:
        w4 = np.zeros((o, cg, kh, k), np.float32)
        w4[:, :, row, :] = w1
    out = shape_of(node)
    attrs = {"stride": (s, s), "padding": (ph, p), "dilation": (d, d), "groups": int(groups or 1),
             "weight_shape": (o, cg, kh, k)}
    conv = w.add(node, "conv2d", (x2d,), attrs, w4, zeros_bias(weight) if bias is None else bias,
                 shape=(out[0], out[1], 1, out[2]), name=f"{node.name}_conv")
    w.weight_of[node.args[1].name] = conv.name
    w.add(node, "flatten", (conv.name,), {"shape": out})


def build_convolution(w: Walk, node: Any, op: str) -> None:
    """aten convolution / conv1d / conv3d: a transposed conv, a conv1d (3-D input) or a conv2d."""
    if op == "convolution" and arg(node, 6, "transposed", False):
        build_conv_transpose(w, node, op)
        return
    stride, padding, dilation, groups = conv_args(node, op)
    if isinstance(padding, str):
        raise w.unsupported(node, f"padding={padding!r}: give explicit integer padding")
    rank = len(shape_of(node.args[0]))
    if op == "conv1d" or (op == "convolution" and rank == 3):
        build_conv1d(w, node, stride, padding, dilation, groups)
    elif op == "conv3d" or rank != 4:
        raise w.unsupported(node, f"{rank - 2}-D convolution (the IR's convolutions are 1-D and 2-D)")
    else:
        add_conv2d(w, node, stride, padding, dilation, groups)


def build_conv_transpose(w: Walk, node: Any, op: str) -> None:
    """conv_transpose2d / conv_transpose1d / convolution(transposed=True) -> a conv_transpose2d op
    (a 1-D one between reshapes to (N, C, 1, L) and back)."""
    if op == "convolution":  # (input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
        stride, padding, dilation, out_pad, groups = (arg(node, 3, "stride"), arg(node, 4, "padding"),
                                                      arg(node, 5, "dilation"), arg(node, 7, "output_padding"),
                                                      arg(node, 8, "groups", 1))
    else:  # conv_transpose{1,2}d(input, weight, bias, stride, padding, output_padding, groups, dilation)
        stride, padding, out_pad, groups, dilation = (arg(node, 3, "stride"), arg(node, 4, "padding"),
                                                      arg(node, 5, "output_padding"), arg(node, 6, "groups", 1),
                                                      arg(node, 7, "dilation"))
    rank = len(shape_of(node.args[0]))
    if rank not in (3, 4):
        raise w.unsupported(node, f"{rank - 2}-D transposed convolution (the IR's are 1-D and 2-D)")
    if int(groups or 1) != 1:
        raise w.unsupported(node, f"transposed convolution with groups={groups} (conv_transpose2d takes groups=1)")
    one_d = rank == 3
    n_axes = 1 if one_d else 2
    stride, padding, out_pad, dilation = (ints(stride, n_axes, default=1), ints(padding, n_axes, default=0),
                                          ints(out_pad, n_axes, default=0), ints(dilation, n_axes, default=1))
    if any(v != 1 for v in dilation):
        raise w.unsupported(node, f"transposed convolution with dilation={list(dilation)} "
                            "(conv_transpose2d takes dilation 1)")
    weight, bias = w.param(node.args[1]), w.param(arg(node, 2, "bias"))
    wt, wshape, out = _np(weight), tuple(int(v) for v in weight.shape), shape_of(node)
    if one_d:  # (1, s) etc.: the height-1 axis is untouched
        stride, padding, out_pad = (1,) + stride, (0,) + padding, (0,) + out_pad
        wt, wshape = None if wt is None else wt[:, :, None, :], wshape[:2] + (1,) + wshape[2:]
        x = _as_2d(w, node)
    else:
        x = w.tensor(node.args[0], node)
    i, o, kh, kw = wshape
    attrs = {"stride": stride, "padding": padding, "output_padding": out_pad, "dilation": (1, 1), "groups": 1,
             "weight_shape": wshape, "contract": i * kh * kw}
    if bias is None and wt is not None:  # IOHW: the output channels are axis 1
        bias = np.zeros(o, np.float32)
    if one_d:
        t = w.add(node, "conv_transpose2d", (x,), attrs, wt, bias, shape=(out[0], out[1], 1, out[2]),
                  name=f"{node.name}_convt")
        w.weight_of[node.args[1].name] = t.name
        w.add(node, "flatten", (t.name,), {"shape": out})
    else:
        w.add(node, "conv_transpose2d", (x,), attrs, wt, bias)
        w.weight_of[node.args[1].name] = node.name


def transpose_sums(op: Op, x: np.ndarray, weight: np.ndarray) -> np.ndarray:
    a = op.attrs
    return conv_transpose2d_sums(x, weight, a["stride"], a["padding"], a["output_padding"], a["dilation"])


def transpose_int(op: Op, p: QParams, xs: list[np.ndarray], frac: int) -> np.ndarray:
    """int32 accumulate of the transposed conv (wrapping), + int32 bias, >> shift, clip to int8."""
    acc = wrap32(transpose_sums(op, xs[0], p.weight)) + p.bias.astype(np.int32)[None, :, None, None]
    return requant(acc, p.out_shift)


def transpose_shape(net: Network, op: Op, rows: int) -> ConvShape:
    _, c, h, w = net.shape(op.inputs[0])
    _, o, kh, kw = op.attrs["weight_shape"]
    (sh, sw), (ph, pw) = op.attrs["stride"], op.attrs["padding"]
    return ConvShape(rows, c, h, w, o, kh, kw, sh, sw, (ph, pw, ph, pw), transpose=True,
                     output_padding=tuple(op.attrs["output_padding"]))


register(OpKind(
    "conv_transpose2d", "transposed convolution with bias (batch norm folded in), weight IOHW as torch holds it: "
    "stride, padding, output_padding; dilation 1, groups 1. int_ref: int32 sums of the stride-1 conv of the "
    "flipped kernel over the stride-dilated input, + bias, >> shift, clip (as conv2d). MACs (`contract`) "
    "count every tap over the dilated input, as the CPU model does",
    ("conv_transpose2d", "conv_transpose1d"), build_conv_transpose,
    int_ref=transpose_int,
    float_ref=lambda op, xs: transpose_sums(op, xs[0], op.weight.astype(np.float64))
    + op.bias.astype(np.float64)[None, :, None, None],
    label="transposed convolution", quant=gemm_quant, observe=True, weight_arg=1,
    cpu=lambda net, op, rows, read, write: transpose_shape(net, op, rows), vta=GEMM))

# the convolution node of any rank and transposition (and conv1d/conv3d), dispatched here
register_builder(("convolution", "conv1d", "conv3d"), build_convolution)

__all__ = ["build_conv1d", "build_conv_transpose", "build_convolution", "transpose_int", "transpose_shape"]
