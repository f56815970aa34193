"""Normalization kinds: layer norm and softmax (registered here; the record: codesign.network.kinds.base).

Both run on the CPU (VTA's ALU has no divide or square root). Their integer semantics are exact
integer sums of the int8 input followed by one deterministic float64 (layer norm) or integer
(softmax) step; the board runtime must compute the same formulas to match bit for bit.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from codesign.network.fx import Walk, arg, ints, shape_of
from codesign.network.graph import Op
from codesign.network.kernels import clip8
from codesign.network.kinds.base import OpKind, QuantContext, register, register_builder
from codesign.network.quantized import QParams, frac_bits

SOFTMAX_FRAC = 7        # softmax output without an observed range: q = round(p·128), clipped to 127
EXP_BITS = 16           # softmax exp table: round(exp(-d·2^-f)·2^16), d = max - q in 0..255


# -- layer norm ---------------------------------------------------------------------------------
def _add_layer_norm(w: Walk, node: Any, x: Any, normalized: Any, gamma: Any, beta: Any, eps: Any,
                    out: Any) -> None:
    dims = ints(normalized, n=1)
    shape = shape_of(x)
    if tuple(shape[len(shape) - len(dims):]) != dims:
        raise w.unsupported(node, f"layer norm over {dims} of a {shape} tensor (normalized dims must be trailing)")
    if len(dims) >= len(shape):
        raise w.unsupported(node, "layer norm over the batch axis (the IR keeps axis 0 as the batch)")
    weight, bias = w.param(gamma), w.param(beta)
    attrs = {"normalized_shape": dims, "eps": float(eps if eps is not None else 1e-5)}
    w.add(out, "layer_norm", (w.tensor(x, node),), attrs, weight, bias)


def build_layer_norm(w: Walk, node: Any, op: str) -> None:
    # layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5, cudnn_enable)
    _add_layer_norm(w, node, node.args[0], node.args[1], arg(node, 2, "weight"), arg(node, 3, "bias"),
                    arg(node, 4, "eps", 1e-5), node)


def build_native_layer_norm(w: Walk, node: Any, op: str) -> None:
    """native_layer_norm(input, normalized_shape, weight, bias, eps) -> (out, mean, rstd): the op is
    made at its getitem 0 (named after it); mean and rstd are not tensors of the IR."""

    def item(w: Walk, get: Any, i: int) -> None:
        if i != 0:
            raise w.unsupported(get, f"item {i} (mean / rstd) of native_layer_norm")
        _add_layer_norm(w, node, node.args[0], node.args[1], node.args[2], node.args[3], node.args[4], get)

    w.items[node.name] = item


def _ln_axes(op: Op, x: np.ndarray) -> tuple[int, ...]:
    return tuple(range(x.ndim - len(op.attrs["normalized_shape"]), x.ndim))


def _affine(op: Op, t: np.ndarray) -> np.ndarray:
    """t·γ + β over the normalized dims (float64 of the float32 module parameters)."""
    dims = tuple(op.attrs["normalized_shape"])
    if op.weight is not None:
        t = t * op.weight.astype(np.float64).reshape(dims)
    if op.bias is not None:
        t = t + op.bias.astype(np.float64).reshape(dims)
    return t


def ln_quant(ctx: QuantContext, op: Op) -> tuple[int, QParams]:
    """Output at the observed exponent; without an observed range (a native_layer_norm item, which
    PT2E does not observe) at the bound |t| <= sqrt(D - 1) of a standardized vector, times max|γ|
    plus max|β|. extra: frac_in (the input's exponent, for ε's term)."""
    fin = ctx.frac[op.inputs[0]]
    if op.name in ctx.amax:
        fout = ctx.output_frac(op)
    else:
        d = math.prod(op.attrs["normalized_shape"])
        g = float(np.max(np.abs(op.weight))) if op.weight is not None and op.weight.size else 1.0
        b = float(np.max(np.abs(op.bias))) if op.bias is not None and op.bias.size else 0.0
        fout = frac_bits(math.sqrt(max(d - 1, 1)) * g + b)
    return fout, QParams(extra={"frac_in": fin})


def ln_int(op: Op, p: QParams, xs: list[np.ndarray], frac: int) -> np.ndarray:
    """With D elements q_i (int8 at f_in) per normalized group, exactly in int64:
    S = Σq, S2 = Σq², num_i = D·q_i − S, V = D·S2 − S² (= D²·var in units of 2^-2f_in).
    Then in float64, in this order: t = num / sqrt(V + ε·D²·4^f_in); z = t·γ + β (γ, β the module's
    float32 values as float64, absent: 1, 0); out = clip(rint(z·2^f_out), -128, 127). The only
    float steps are IEEE-754 correctly rounded (sqrt, /, ·, +; no fused multiply-add), so the
    result is deterministic: the board's CPU must evaluate the same float64 expression."""
    x = xs[0].astype(np.int64)
    axes = _ln_axes(op, x)
    d = math.prod(op.attrs["normalized_shape"])
    s = x.sum(axis=axes, keepdims=True)
    s2 = (x * x).sum(axis=axes, keepdims=True)
    num = d * x - s
    v = d * s2 - s * s
    eps_term = float(op.attrs["eps"]) * float(d * d) * 4.0 ** int(p.extra["frac_in"])
    den = np.sqrt(v.astype(np.float64) + eps_term)
    t = np.divide(num.astype(np.float64), den, out=np.zeros(num.shape), where=den > 0)  # ε = 0, constant input: 0
    z = _affine(op, t)
    return np.clip(np.rint(z * 2.0 ** frac), -128, 127).astype(np.int8)


def ln_float(op: Op, xs: list[np.ndarray]) -> np.ndarray:
    x = xs[0].astype(np.float64)
    axes = _ln_axes(op, x)
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    return _affine(op, (x - mean) / np.sqrt(var + float(op.attrs["eps"])))


# -- softmax ------------------------------------------------------------------------------------
def build_softmax(w: Walk, node: Any, op: str) -> None:
    # softmax(input, dim, dtype=None); _softmax(input, dim, half_to_float)
    ndim = len(shape_of(node.args[0]))
    dim = int(arg(node, 1, "dim")) % ndim
    if dim == 0:
        raise w.unsupported(node, "softmax over the batch axis (the IR keeps axis 0 as the batch)")
    w.add(node, "softmax", (w.tensor(node.args[0], node),), {"dim": dim, "causal": False})


def exp_table(frac_in: int) -> np.ndarray:
    """table[d] = round(exp(-d·2^-f_in)·2^16) for d = 0..255 (int64; table[0] = 2^16)."""
    d = np.arange(256, dtype=np.float64)
    return np.rint(np.exp(-d * 2.0 ** -frac_in) * 2.0 ** EXP_BITS).astype(np.int64)


def softmax_quant(ctx: QuantContext, op: Op) -> tuple[int, QParams]:
    """Output exponent: the observed range's (max p < 1 gives finer steps than 1/128: a softmax
    over 32 classes peaks near 0.1), else 7 (p in [0, 1] as round(128·p), 127 at most: a softmax
    inside an attention, which PT2E does not observe, when `quantize` gives it no range); table: `exp_table` of the
    input's exponent (indexed by max − q, not by q + 128 as a unary LUT)."""
    fout = ctx.output_frac(op) if op.name in ctx.amax else SOFTMAX_FRAC
    return fout, QParams(table=exp_table(ctx.frac[op.inputs[0]]))


def causal_mask(shape: tuple[int, ...]) -> np.ndarray:
    """Positions a causal softmax keeps over its last two axes (row i keeps columns j <= i,
    torch's tril(ones(L, S))), broadcastable to `shape`."""
    length, size = shape[-2], shape[-1]
    return np.tril(np.ones((length, size), dtype=bool))


def softmax_int(op: Op, p: QParams, xs: list[np.ndarray], frac: int) -> np.ndarray:
    """Along `dim`, exactly in integers: m = max q (over kept positions), e = table[m − q]
    (d = m − q in 0..255), S = Σe (int64), out = (2^(f+1)·e + S) // (2S) = round half up of
    2^f·e/S (f the output exponent), clipped to 127. A causal softmax (`causal`, the last axis) counts only columns j <= i: the
    others get e = 0 and output 0."""
    dim = op.attrs["dim"]
    x = xs[0].astype(np.int64)
    keep = causal_mask(x.shape) if op.attrs.get("causal") else None
    xm = x if keep is None else np.where(keep, x, -128)
    m = xm.max(axis=dim, keepdims=True)
    if keep is None:
        e = p.table[m - x]
    else:  # a masked position may exceed the kept max: index it at 255, then zero it
        e = np.where(keep, p.table[np.where(keep, m - x, 255)], 0)
    s = e.sum(axis=dim, keepdims=True)
    return clip8(((np.int64(2) << np.int64(frac)) * e + s) // (2 * s))


def softmax_float(op: Op, xs: list[np.ndarray]) -> np.ndarray:
    dim = op.attrs["dim"]
    x = xs[0].astype(np.float64)
    keep = causal_mask(x.shape) if op.attrs.get("causal") else None
    if keep is not None:
        x = np.where(keep, x, -np.inf)
    e = np.exp(x - x.max(axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)


register(OpKind(
    "layer_norm", "layer norm over the trailing `normalized_shape` dims with ε `eps`; weight γ, bias β "
    "(elementwise affine, None without)", ("layer_norm",), build_layer_norm,
    int_ref=ln_int, float_ref=ln_float, label="layer norm", quant=ln_quant, observe=True,
    positional=True))
# native_layer_norm (a decomposed export) returns (out, mean, rstd): its getitem 0 makes the op
register_builder(("native_layer_norm",), build_native_layer_norm)

register(OpKind(
    "softmax", "softmax along `dim` (output exponent observed, 7 when not: q = round(128·p)); `causal`: over "
    "the last axis row i keeps columns j <= i", ("softmax", "_softmax"), build_softmax,
    int_ref=softmax_int, float_ref=softmax_float, label="softmax", quant=softmax_quant, observe=True,
    positional=True))

__all__ = ["EXP_BITS", "SOFTMAX_FRAC", "causal_mask", "exp_table", "ln_int", "softmax_int"]
