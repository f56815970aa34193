"""GEMM kinds: conv2d and linear (VTA's conv/dense templates), and batch norm folded into the conv
before it (w' = w·γ/√(σ²+ε), b' = (b−μ)·γ/√(σ²+ε) + β)."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from codesign.cpu import ConvShape
from codesign.network.fx import Walk, arg, ints, shape_of, to_numpy
from codesign.network.graph import Network, Op
from codesign.network.kernels import conv2d_int, conv2d_sums, linear_int
from codesign.network.kinds.base import GEMM, OpKind, QuantContext, register, register_builder
from codesign.network.kinds.binary import build_channel_affine
from codesign.network.quantized import INT32, MAX_SHIFT, QParams, frac_bits, quantize_array
from codesign.workloads.layers import Dense

FOLDS_BN = ("conv2d", "conv_transpose2d")  # kinds a batch norm after them folds into


def zeros_bias(weight: Any) -> Any:
    if weight.device.type == "meta":
        return None
    return np.zeros(int(weight.shape[0]), np.float32)


def conv_args(node: Any, op: str) -> tuple[Any, Any, Any, Any]:
    """(stride, padding, dilation, groups) of an aten conv2d/conv1d/conv3d or convolution node."""
    if op == "convolution":  # (input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
        return arg(node, 3, "stride"), arg(node, 4, "padding"), arg(node, 5, "dilation"), arg(node, 8, "groups", 1)
    return arg(node, 3, "stride"), arg(node, 4, "padding"), arg(node, 5, "dilation"), arg(node, 6, "groups", 1)


def build_conv(w: Walk, node: Any, op: str) -> None:
    """aten conv2d (convolution, conv1d and transposed convs: `kinds.conv.build_convolution`)."""
    add_conv2d(w, node, *conv_args(node, op))


def add_conv2d(w: Walk, node: Any, stride: Any, padding: Any, dilation: Any, groups: Any) -> None:
    """The conv2d op of a 2-D convolution node."""
    x = node.args[0]
    if isinstance(padding, str):
        raise w.unsupported(node, f"padding={padding!r}: give explicit integer padding")
    weight, bias = w.param(node.args[1]), w.param(arg(node, 2, "bias"))
    wshape = tuple(int(d) for d in weight.shape)
    attrs = {"stride": ints(stride, default=1), "padding": ints(padding, default=0),
             "dilation": ints(dilation, default=1), "groups": int(groups or 1), "weight_shape": wshape}
    src = w.tensor(x, node)
    (ph, pw), n, c, h, wd = attrs["padding"], *shape_of(x)
    if ph != pw:
        # VTA's conv takes one padding for both axes (Inception's 1x7 / 7x1 convs pad one axis):
        # the zero border becomes a pad op (exact: zeros meet the weights either way), the conv none
        w.add(node, "pad", (src,), {"pads": ((0, 0), (0, 0), (ph, ph), (pw, pw)), "mode": "constant", "value": 0.0},
              shape=(n, c, h + 2 * ph, wd + 2 * pw), name=f"{node.name}_pad")
        src, attrs["padding"] = f"{node.name}_pad", (0, 0)
    w.add(node, "conv2d", (src,), attrs, weight, zeros_bias(weight) if bias is None else bias)
    w.weight_of[node.args[1].name] = node.name


def build_linear(w: Walk, node: Any, op: str) -> None:
    weight, bias = w.param(node.args[1]), w.param(arg(node, 2, "bias"))
    w.add(node, "linear", (w.tensor(node.args[0], node),), {"weight_shape": tuple(int(d) for d in weight.shape)},
          weight, zeros_bias(weight) if bias is None else bias)
    w.weight_of[node.args[1].name] = node.name


def _folds_into(w: Walk, node: Any) -> tuple[Op | None, Op | None]:
    """(the conv a batch norm at `node` folds into, the reshape between them or None): the conv
    producing its input, or reached through one reshape that keeps N and C (conv1d's reshape back
    to (N, C, L)), each consumed by the next alone."""
    conv, view = w.producer(node.args[0]), None
    if conv is not None and conv.kind == "flatten" and w.users.get(conv.name, 0) == 1:
        src = w.ops[w.index[conv.inputs[0]]] if conv.inputs[0] in w.index else None
        if src is not None and tuple(src.shape[:2]) == tuple(conv.shape[:2]):
            conv, view = src, conv
    if conv is None or conv.kind not in FOLDS_BN or w.users.get(conv.name, 0) != 1:
        return None, None
    return conv, view


def build_batch_norm(w: Walk, node: Any, op: str) -> None:
    """Fold an inference batch norm into the conv that produces its input (and only feeds it);
    any other batch norm is a per-channel affine op (`kinds.binary.build_channel_affine`)."""
    conv, view = _folds_into(w, node)
    if conv is None:
        build_channel_affine(w, node, op)
        return
    # batch_norm(input, weight, bias, mean, var, training, momentum, eps);
    # _native_batch_norm_legit_no_training(input, weight, bias, mean, var, momentum, eps)
    gamma, beta, mean, var = (w.param(node.args[i]) for i in range(1, 5))
    eps = float(arg(node, 7, "eps", 1e-5) if op == "batch_norm" else arg(node, 6, "eps", 1e-5))
    if conv.weight is not None:
        c = conv.bias.shape[0]
        g = np.ones(c) if gamma is None else to_numpy(gamma).astype(np.float64)
        b = np.zeros(c) if beta is None else to_numpy(beta).astype(np.float64)
        scale = g / np.sqrt(to_numpy(var).astype(np.float64) + eps)
        # output channels: axis 0 of a conv's OIHW weight, axis 1 of a transposed conv's IOHW
        axes = (slice(None), None, None, None) if conv.kind == "conv2d" else (None, slice(None), None, None)
        weight = (conv.weight.astype(np.float64) * scale[axes]).astype(np.float32)
        bias = ((conv.bias.astype(np.float64) - to_numpy(mean)) * scale + b).astype(np.float32)
        w.ops[w.index[conv.name]] = replace(conv, weight=weight, bias=bias)
    out = view or conv
    w.alias[node.name] = out.name
    w.users[out.name] = len(node.users)


def observed_frac(ctx: QuantContext, op: Op) -> int:
    """`ctx.output_frac(op)`, looking through the reshapes that alone consume `op` when its own
    output was not observed: a reshape keeps the range, and PT2E observed conv1d's output (or the
    ReLU after it) where the IR has the conv2d's reshape back to (N, C, L)."""
    users = ctx.net.consumers(op.name)
    if op.name not in ctx.amax and len(users) == 1 and users[0].kind == "flatten":
        return observed_frac(ctx, users[0])
    return ctx.output_frac(op)


def gemm_quant(ctx: QuantContext, op: Op) -> tuple[int, QParams]:
    """Weights int8 at f_w; bias int32 at f_x + f_w (+ the rounding offset 2^(shift-1)); shift =
    f_x + f_w - f_out kept in [0, 15] (f_out lowered to f_x + f_w, f_w lowered past 15). With
    `ctx.per_channel`, each output channel's weights at their own exponent (`channel_quant`)."""
    fx = ctx.frac[op.inputs[0]]
    fw = ctx.weight_frac(op)
    fout = min(observed_frac(ctx, op), fx + fw)
    fw = min(fw, fout + MAX_SHIFT - fx)
    shift = fx + fw - fout
    bias = np.rint(op.bias.astype(np.float64) * 2.0 ** (fx + fw)) + (1 << shift - 1 if shift else 0)
    tensor = QParams(quantize_array(op.weight, fw), fw, np.clip(bias, *INT32).astype(np.int32), shift)
    if not ctx.per_channel:
        return fout, tensor
    return fout, channel_quant(op, fx, fw, fout, tensor)


def out_axis(op: Op) -> int:
    """The weight's output-channel axis: 0 of OIHW / (out, in), 1 of a transposed conv's IOHW."""
    return 1 if op.kind == "conv_transpose2d" else 0


def channel_quant(op: Op, fx: int, fw: int, fout: int, tensor: QParams) -> QParams:
    """Per-output-channel exponents: f_w,c = frac_bits(max |w_c|) kept in [f_w, f_out + 15 - f_x]
    (the tensor's f_w already fits every channel; a larger one only refines a channel whose range
    is smaller), bias c at f_x + f_w,c with its rounding offset, shift c = f_x + f_w,c - f_out.
    The per-tensor parameters when every channel lands on f_w (nothing gained)."""
    axis = out_axis(op)
    w = np.moveaxis(op.weight.astype(np.float64), axis, 0)
    amax = np.abs(w.reshape(w.shape[0], -1)).max(axis=1) if w.size else np.zeros(w.shape[0])
    fwc = np.array([frac_bits(a) if a > 0 else fw for a in amax], np.int64)
    fwc = np.clip(fwc, fw, fout + MAX_SHIFT - fx)
    if np.all(fwc == fw):
        return tensor
    shifts = fx + fwc - fout
    scale = 2.0 ** fwc.astype(np.float64)
    q = np.clip(np.rint(w * scale.reshape((-1,) + (1,) * (w.ndim - 1))), -128, 127).astype(np.int8)
    bias = np.rint(op.bias.astype(np.float64) * 2.0 ** (fx + fwc)) + np.where(shifts > 0, 2.0 ** (shifts - 1), 0)
    return replace(tensor, weight=np.ascontiguousarray(np.moveaxis(q, 0, axis)),
                   bias=np.clip(bias, *INT32).astype(np.int32), shift=int(shifts.max()),
                   weight_fracs=fwc.astype(np.int32), shifts=shifts.astype(np.int32))


def conv_shape(net: Network, op: Op, rows: int) -> ConvShape:
    _, c, h, w = net.shape(op.inputs[0])
    o, _, kh, kw = op.attrs["weight_shape"]
    (sh, sw), (ph, pw), (dh, dw) = op.attrs["stride"], op.attrs["padding"], op.attrs["dilation"]
    return ConvShape(rows, c, h, w, o, kh, kw, sh, sw, (ph, pw, ph, pw), dh, dw, int(op.attrs["groups"]))


def linear_dense(net: Network, op: Op, rows: int) -> Dense:
    """The dense a linear op is for `rows` requests: every leading position of its input is a row
    (N x T tokens; all of a sequence-first input's positions when an op moved the batch axis)."""
    x = net.shape(op.inputs[0])
    return Dense(max(1, round(math.prod(x[:-1]) * rows / net.batch)), x[-1], int(op.attrs["weight_shape"][0]))


register(OpKind(
    "conv2d", "convolution with bias (batch norm folded in): stride, padding, dilation, groups",
    # convolution and conv1d listed for PT2E's annotation; their builder is kinds.conv's
    ("conv2d", "convolution", "conv1d", "conv3d"), None,
    int_ref=lambda op, p, xs, f: conv2d_int(xs[0], p.weight, p.bias, p.out_shift, op.attrs["stride"],
                                            op.attrs["padding"],
                                            op.attrs["dilation"], op.attrs["groups"]),
    float_ref=lambda op, xs: conv2d_sums(xs[0], op.weight, op.attrs["stride"], op.attrs["padding"], op.attrs["dilation"],
                                         op.attrs["groups"]) + op.bias.astype(np.float64)[None, :, None, None],
    label="convolution", quant=gemm_quant, observe=True, weight_arg=1,
    cpu=lambda net, op, rows, read, write: conv_shape(net, op, rows), vta=GEMM))

register(OpKind(
    "linear", "fully connected y = x W^T + b (any leading dims: every position is a row)",
    ("linear",), build_linear,
    int_ref=lambda op, p, xs, f: linear_int(xs[0], p.weight, p.bias, p.out_shift),
    float_ref=lambda op, xs: xs[0] @ op.weight.astype(np.float64).T + op.bias.astype(np.float64),
    label="fully connected", quant=gemm_quant, observe=True, weight_arg=1,
    cpu=lambda net, op, rows, read, write: linear_dense(net, op, rows), vta=GEMM))

register_builder(("conv2d",), build_conv)
# batch norm after a conv makes no op of its own: folded into the conv (its build edits that conv)
register_builder(("batch_norm", "_native_batch_norm_legit_no_training"), build_batch_norm)

__all__ = ["FOLDS_BN", "build_batch_norm", "channel_quant", "conv_shape", "gemm_quant", "linear_dense", "observed_frac",
           "out_axis", "zeros_bias"]
