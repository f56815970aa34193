"""Element-wise binary kinds with broadcasting and constant operands, and the per-channel affine of
a batch norm that follows no conv.

`binary` (attr `op`: add, sub, mul, div; attr `const`: None, or the position 0/1 of a constant
operand; attr `const_shape`: its shape, known without weights): one kind for the four, because
they share everything but the combining step: operands that broadcast by NumPy rules, a constant
operand, the observed output exponent, a bytes-bound CPU pass. The second operand is a graph
tensor (squeeze-excite's (N,C,H,W) * (N,C,1,1)), a module parameter or buffer (layer scale's γ of
shape (C,1,1)) or a Python number (x * 0.5, x + 3, x / 6); a constant is the op's `weight`
(float32, its own shape, `alpha` folded in; it may not broadcast the tensor to a larger shape) and
is quantized to int8 at its own exponent f_c (from its max |c|). aten `add` of two graph tensors of
one shape stays the residual `add` kind (`kinds.elementwise`: VTA's epilogue takes it); every
other add comes here (`elementwise.build_add` hands it over).
Integer semantics (all int32, a and b the int8 operands at exponents f_a, f_b):
- mul: a·b at f_a + f_b, then (p + 2^(s-1)) >> s with s = f_a + f_b - f_out, clip to int8. f_out
  is the observed exponent, lowered to f_a + f_b when finer (a finer one adds no information), so
  s >= 0.
- div by a constant c: mul by its reciprocal: the int8 multiplier is rint(2^f_r / c), f_r the
  largest exponent with max|1/c|·2^f_r <= 127 (round half to even), then as mul. The float
  reference divides (x / c). Division by a tensor is unsupported: an int8 quotient has no exact
  shift-and-round form.
- add / sub: both operands shifted left to the finer f_m = max(f_a, f_b), summed (subtracted),
  then rounded >> (f_m - f_out), clip (as the residual add); f_out = min(observed, f_m). A constant
  is quantized no finer than max(f_x, observed f_out): bits below both only move the rounding, and
  this bounds the left shifts. Shifts past int32 (a left shift > 22, a right shift > 30: exponents
  2^22 apart) are a one-line error naming the op.

`channel_affine` (a batch norm whose input no conv alone produces: DenseNet's pre-activation, a BN
after a concat or an add; `kinds.gemm.build_batch_norm` makes it): y = x·scale_c + shift_c along
axis 1, scale = γ/√(σ²+ε), shift = β − μ·scale (weight = scale, bias = shift, float32). Integer
semantics as a conv's epilogue: scale int8 at f_s (from max |scale|), shift int32 at f_x + f_s with
the rounding offset 2^(s-1), acc = x·scale_q + shift_q in int32, >> s = f_x + f_s - f_out, clip.

Placement: both are CPU passes. `layout_free` (runs on VTA's packed blocks (N/b, C/bi, H, W, b,
bi) as on NCHW): a channel affine always; a binary op when no operand broadcasts across channels
(4-D: every operand's channel axis is the output's and its batch is the output's or 1; scalars
and equal shapes at any rank), since only then is each packed block combined with one block of
every other operand.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from codesign.errors import ConfigError
from codesign.network.fx import Walk, arg, shape_of, to_numpy
from codesign.network.graph import Network, Op
from codesign.network.kernels import clip8, requant, round_shift
from codesign.network.kinds.base import OpKind, QuantContext, always, register
from codesign.network.quantized import INT32, QParams, frac_bits, quantize_array

BINARY_OPS = ("add", "sub", "mul", "div")
MAX_ALIGN = 22   # left shifts of add/sub operands: 2·128·2^22 + rounding stays inside int32
MAX_RSHIFT = 30  # a right shift by 31 or more is not an int32 shift


# ---- binary -----------------------------------------------------------------------------------

def _constant(w: Walk, value: Any, node: Any) -> np.ndarray | None:
    """A constant operand as float32 (None for a parameter on the meta device)."""
    if isinstance(value, bool) or not (isinstance(value, (int, float)) or w.is_param(value)):
        raise w.unsupported(node, f"an operand that is neither a graph tensor, a module parameter/buffer nor a "
                                  f"number ({value!r})")
    if isinstance(value, (int, float)):
        return np.asarray(value, dtype=np.float32)
    return to_numpy(w.param(value))


def build_binary(w: Walk, node: Any, op: str) -> None:
    """aten mul, div, sub, rsub (and add when not two graph tensors of one shape) -> `binary`."""
    a, b = node.args[0], node.args[1]
    if op == "rsub":  # rsub(x, y, alpha) = y - alpha·x
        a, b, op = b, a, "sub"
    if op == "div" and node.kwargs.get("rounding_mode") is not None:
        raise w.unsupported(node, f"div with rounding_mode={node.kwargs['rounding_mode']!r}")
    alpha = arg(node, 2, "alpha", 1) if op in ("add", "sub") else 1  # rsub.Scalar takes it positionally
    tensors = [w.is_tensor(v) for v in (a, b)]
    if not any(tensors):
        raise w.unsupported(node, f"{op} of two constants (the IR's {op} reads at least one graph tensor)")
    if op == "div" and tensors[1]:
        raise w.unsupported(node, "division by a tensor (the IR divides by constants only: an int8 quotient "
                                  "has no exact shift-and-round form)")
    if all(tensors):
        if alpha != 1:
            raise w.unsupported(node, f"{op} of two tensors with alpha={alpha}")
        w.add(node, "binary", (w.tensor(a, node), w.tensor(b, node)), {"op": op, "const": None, "const_shape": None})
        return
    pos = tensors.index(False)
    x, c = (b, a) if pos == 0 else (a, b)
    if shape_of(x) != shape_of(node):
        raise w.unsupported(node, f"a constant that broadcasts the tensor {shape_of(x)} to {shape_of(node)}")
    if alpha != 1 and pos == 0:
        raise w.unsupported(node, f"{op} with alpha={alpha} applied to a tensor")
    weight = _constant(w, c, node)
    if weight is not None and alpha != 1:  # a + alpha·c, a - alpha·c
        weight = np.asarray(weight.astype(np.float64) * float(alpha), dtype=np.float32)
    if op == "div" and weight is not None and not np.all(weight != 0):
        raise w.unsupported(node, "division by a constant that holds zeros")
    shape = tuple(int(d) for d in w.param(c).shape) if w.is_param(c) else ()  # known on the meta device too
    w.add(node, "binary", (w.tensor(x, node),), {"op": op, "const": pos, "const_shape": shape}, weight=weight)


def _fracs(op: Op, fin: list[int], fc: int) -> list[int]:
    """Exponents of the two operands in order (the constant's at its position)."""
    pos = op.attrs["const"]
    return list(fin) if pos is None else fin[:pos] + [fc] + fin[pos:]


def _limit(op: Op, what: str, value: int, top: int) -> int:
    if value > top:
        raise ConfigError(f"{op.where()}: {what} of {value} bits (more than {top}: the operands' exponents "
                          "are too far apart for int32)")
    return value


def binary_quant(ctx: QuantContext, op: Op) -> tuple[int, QParams]:
    """The constant at its own exponent; the output at the observed one (the module doc)."""
    kind, fin, fobs = op.attrs["op"], ctx.fin(op), ctx.output_frac(op)
    weight, fc = None, 0
    if op.attrs["const"] is not None:
        if op.weight is None:
            raise ConfigError(f"no constant for {op.where()} (built on the meta device)")
        c = op.weight.astype(np.float64)
        if kind == "div":
            c = 1.0 / c
            fc = frac_bits(float(np.max(np.abs(c))))
        else:
            fc = ctx.weight_frac(op)
        if kind in ("add", "sub"):
            fc = min(fc, max(fin[0], fobs))
        weight = quantize_array(c, fc)
    fa, fb = _fracs(op, fin, fc)
    if kind in ("mul", "div"):
        fout = min(fobs, fa + fb)
        return fout, QParams(weight=weight, weight_frac=fc, shift=_limit(op, "a right shift", fa + fb - fout,
                                                                               MAX_RSHIFT))
    fm = max(fa, fb)
    fout = min(fobs, fm)
    shifts = tuple(_limit(op, "an operand shift", fm - f, MAX_ALIGN) for f in (fa, fb))
    return fout, QParams(weight=weight, weight_frac=fc, shift=_limit(op, "a right shift", fm - fout, MAX_RSHIFT),
                         in_shifts=shifts)


def _operands(op: Op, xs: list[np.ndarray], const: np.ndarray | None) -> list[np.ndarray]:
    pos = op.attrs["const"]
    return list(xs) if pos is None else xs[:pos] + [const] + xs[pos:]


def binary_int(op: Op, p: QParams, xs: list[np.ndarray], frac: int) -> np.ndarray:
    a, b = (v.astype(np.int32) for v in _operands(op, xs, p.weight))
    kind = op.attrs["op"]
    if kind in ("mul", "div"):
        return clip8(round_shift(a * b, p.shift))
    a, b = a << np.int32(p.in_shifts[0]), b << np.int32(p.in_shifts[1])
    return clip8(round_shift(a + b if kind == "add" else a - b, p.shift))


def binary_float(op: Op, xs: list[np.ndarray]) -> np.ndarray:
    a, b = (np.asarray(v, dtype=np.float64) for v in _operands(op, xs, op.weight))
    return {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}[op.attrs["op"]](a, b)


def packed_broadcast(net: Network, op: Op) -> bool:
    """No operand broadcasts across channels: each of VTA's packed blocks meets one block of each."""
    out = op.shape
    shapes = [net.shape(t) for t in op.inputs] + ([op.attrs["const_shape"]] if op.attrs["const"] is not None else [])
    for s in shapes:
        if s == out or math.prod(s) == 1:
            continue
        if len(out) != 4 or len(s) > 4:
            return False
        s4 = (1,) * (4 - len(s)) + tuple(s)
        if s4[1] != out[1] or s4[0] not in (1, out[0]):
            return False
    return True


register(OpKind(
    "binary", "element-wise add/sub/mul/div (attr op) of two tensors broadcast by NumPy rules, or of a tensor "
              "and a constant (weight; attr const: its operand position)", ("mul", "div", "sub", "rsub"),
    build_binary, int_ref=binary_int, float_ref=binary_float, label="element-wise binary op",
    quant=binary_quant, observe=True, layout_free=packed_broadcast))


# ---- channel_affine (batch norm after no conv) ------------------------------------------------

def build_channel_affine(w: Walk, node: Any, op: str) -> None:
    """A batch norm on running statistics as y = x·scale + shift per channel (axis 1)."""
    x = node.args[0]
    shape = shape_of(x)
    if len(shape) < 2:
        raise w.unsupported(node, "batch norm of a tensor without a channel axis")
    # batch_norm(input, weight, bias, mean, var, training, momentum, eps, cudnn);
    # _native_batch_norm_legit_no_training(input, weight, bias, mean, var, momentum, eps)
    training = bool(arg(node, 5, "training", False)) if op == "batch_norm" else False
    mean_node, var_node = node.args[3], node.args[4]
    if training or mean_node is None or var_node is None:
        raise w.unsupported(node, "batch norm on batch statistics (the IR takes inference batch norm)")
    eps = float(arg(node, 7, "eps", 1e-5) if op == "batch_norm" else arg(node, 6, "eps", 1e-5))
    gamma, beta, mean, var = (to_numpy(w.param(node.args[i])) for i in range(1, 5))
    scale = shift = None
    if mean is not None and var is not None:
        c = shape[1]
        g = np.ones(c) if gamma is None else gamma.astype(np.float64)
        bt = np.zeros(c) if beta is None else beta.astype(np.float64)
        s = g / np.sqrt(var.astype(np.float64) + eps)
        scale, shift = s.astype(np.float32), (bt - mean.astype(np.float64) * s).astype(np.float32)
    w.add(node, "channel_affine", (w.tensor(x, node),), {}, scale, shift, shape=shape)


def _per_channel(v: np.ndarray, ndim: int) -> np.ndarray:
    return v.reshape((1, -1) + (1,) * (ndim - 2))


def affine_quant(ctx: QuantContext, op: Op) -> tuple[int, QParams]:
    """scale int8 at f_s; shift int32 at f_x + f_s plus 2^(s-1); s = f_x + f_s - f_out >= 0."""
    if op.weight is None or op.bias is None:
        raise ConfigError(f"no batch norm statistics for {op.where()} (built on the meta device)")
    fx, fs = ctx.frac[op.inputs[0]], ctx.weight_frac(op)
    fout = min(ctx.output_frac(op), fx + fs)
    shift = _limit(op, "a right shift", fx + fs - fout, MAX_RSHIFT)
    bias = np.rint(op.bias.astype(np.float64) * 2.0 ** (fx + fs)) + (1 << shift - 1 if shift else 0)
    return fout, QParams(weight=quantize_array(op.weight, fs), weight_frac=fs,
                         bias=np.clip(bias, *INT32).astype(np.int32), shift=shift)


def affine_int(op: Op, p: QParams, xs: list[np.ndarray], frac: int) -> np.ndarray:
    x = xs[0]
    acc = x.astype(np.int32) * _per_channel(p.weight.astype(np.int32), x.ndim) + _per_channel(p.bias, x.ndim)
    return requant(acc, p.shift)


register(OpKind(
    "channel_affine", "x·scale + shift per channel (axis 1): a batch norm that follows no conv "
                      "(weight = γ/√(σ²+ε), bias = β − μ·weight)",
    ("batch_norm", "_native_batch_norm_legit_no_training"), None,  # made by kinds.gemm.build_batch_norm
    int_ref=affine_int,
    float_ref=lambda op, xs: xs[0] * _per_channel(op.weight.astype(np.float64), xs[0].ndim)
    + _per_channel(op.bias.astype(np.float64), xs[0].ndim),
    label="per-channel affine (batch norm)", quant=affine_quant, observe=True, layout_free=always))

__all__ = ["BINARY_OPS", "affine_int", "affine_quant", "binary_float", "binary_int", "binary_quant",
           "build_binary", "build_channel_affine", "packed_broadcast"]
