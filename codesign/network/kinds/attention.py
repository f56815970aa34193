"""Matmul of two activations and attention (registered here; the record: codesign.network.kinds.base).

`matmul` is a batched product of two int8 activations (aten matmul, bmm, `@`): int32 accumulate,
an optional integer multiplier (a scale that is not a power of two), a rounded shift to the
output exponent, clip. Scaled dot-product attention is not a kind of its own: its builder
decomposes it into IR ops, scores = (Q·Kᵀ)·scale (a matmul with `transpose_b`), softmax,
A·V (a matmul named after the node).

On VTA (`codesign.network.layers.layer_of`, `codesign.place.plan`): each batch entry (batch x
heads) is a dense of M rows, K in, N out whose weight is the second operand's entry (transposed
to (out, in) unless `transpose_b`), loaded as WGT; the epilogue adds 2^(shift-1) as a bias (the
rounding) and shifts. VTA's ALU has no multiplier: only a power-of-two scale (folded into the
shift, mul = 1; ViT-B's 1/√64 = 2^-3) runs there, any other stays on the CPU.

torch.export (2.13) keeps F.scaled_dot_product_attention as aten.scaled_dot_product_attention;
a core-aten decomposition (`run_decompositions()`) turns it into mul, bmm, _softmax and a NaN
guard (where/any/logical_not) instead, which the IR does not read.

Exponents: PT2E observes fx nodes only, so it sees a plain matmul's output and the attention
node's output (the A·V matmul), never the scores or the softmax between them. `quantize` gives
them the ranges of the float IR on the calibration batches (`quantize.unobserved_ranges`: what an
observer would have seen). Without a range (`qplan.plan` called with observed ranges only), the
softmax's output exponent is 7 (`norm.softmax_quant`) and the scores' is derived from the inputs'
ranges (`derived_amax`): the worst case K·max|Q|·max|K|·scale, which never clips but costs bits
(a random (1, 16, 32) encoder block: f = 2 where the range gives 6; scores at 14.6 dB SQNR instead
of 29.6, the attention output at 21.1 dB instead of 29.9).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from codesign.network.fx import Walk, arg, shape_of
from codesign.network.graph import Network, Op
from codesign.network.kernels import clip8, wrap32
from codesign.network.kinds.base import GEMM, OpKind, QuantContext, register
from codesign.network.quantized import QParams, frac_bits
from codesign.workloads.layers import Dense

SCALE_BITS = 15  # a scale that is not 1 is the integer round(scale·2^15), its 2^-15 in the shift


def _operands(op: Op, xs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    a, b = xs
    return a, (np.swapaxes(b, -1, -2) if op.attrs.get("transpose_b") else b)


def matmul_float(op: Op, xs: list[np.ndarray]) -> np.ndarray:
    a, b = _operands(op, [x.astype(np.float64) for x in xs])
    return (a @ b) * float(op.attrs.get("scale", 1.0))


def matmul_int(op: Op, p: QParams, xs: list[np.ndarray], frac: int) -> np.ndarray:
    """acc = Σ a·b in int32 (exact sums, wrapped as an int32 accumulator), then in int64
    (acc·mul + 2^(shift-1)) >> shift (arithmetic; shift 0: acc·mul), clipped to int8."""
    a, b = _operands(op, xs)
    acc = wrap32(a.astype(np.float64) @ b.astype(np.float64)).astype(np.int64) * np.int64(p.mul)
    if p.shift > 0:
        acc = (acc + (np.int64(1) << np.int64(p.shift - 1))) >> np.int64(p.shift)
    return clip8(acc)


def _amax(ctx: QuantContext, tensor: str) -> float:
    """The observed range of `tensor`, else the largest value its exponent holds."""
    return ctx.amax.get(tensor, 127.0 * 2.0 ** -ctx.frac[tensor])


def derived_amax(ctx: QuantContext, op: Op) -> float:
    """A range for a matmul no observer saw: the worst case K·max|a|·max|b|·scale (never clips)."""
    a, b = op.inputs
    return int(op.attrs["contract"]) * _amax(ctx, a) * _amax(ctx, b) * float(op.attrs.get("scale", 1.0))


def scale_factor(scale: float) -> tuple[int, int]:
    """(mul, bits) with scale = mul·2^-bits: a power of two 2^-k is (1, k), exact and free of a
    multiply (VTA's ALU has none: ViT's 1/√64 = 2^-3); any other scale round(scale·2^15), 15."""
    mantissa, exp = math.frexp(scale)
    if mantissa == 0.5:  # scale = 2^(exp-1)
        return 1, 1 - exp
    return int(round(scale * 2 ** SCALE_BITS)), SCALE_BITS


def matmul_quant(ctx: QuantContext, op: Op) -> tuple[int, QParams]:
    """f_out from the observed range (else `derived_amax`), lowered to f_a + f_b + bits so the
    shift is >= 0, with (mul, bits) = `scale_factor(scale)`: a power-of-two scale folds into the
    shift (mul = 1, the same integers as the multiply it replaces), any other is
    mul = round(scale·2^15), bits = 15."""
    fa, fb = ctx.fin(op)
    scale = float(op.attrs.get("scale", 1.0))
    mul, sb = scale_factor(scale)
    fout = ctx.output_frac(op) if op.name in ctx.amax else frac_bits(derived_amax(ctx, op))
    fout = min(fout, fa + fb + sb)
    return fout, QParams(shift=fa + fb + sb - fout, mul=mul)


def matmul_dense(net: Network, op: Op, rows: int) -> Dense:
    """One dense of M x K x P per batch entry, as one dense of (entries·M) rows."""
    entries = rows * math.prod(op.shape[1:-2])
    return Dense(entries * op.shape[-2], int(op.attrs["contract"]), op.shape[-1])


# -- builders ---------------------------------------------------------------------------------
def _check_operands(w: Walk, node: Any, a: Any, b: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    for t in (a, b):
        if w.is_param(t) or not w.is_tensor(t):
            raise w.unsupported(node, "a product with a constant operand (use nn.Linear for a weight)")
    sa, sb = shape_of(a), shape_of(b)
    if len(sa) < 3 or len(sa) != len(sb):
        raise w.unsupported(node, f"a product of {len(sa)}-D and {len(sb)}-D operands (the IR's matmul takes "
                            "two operands of equal rank >= 3: a batch axis, then batch dims, then the matrices)")
    return sa, sb


def build_matmul(w: Walk, node: Any, op: str) -> None:
    if op == "scaled_dot_product_attention":
        build_sdpa(w, node, op)
        return
    a, b = node.args[0], node.args[1]
    sa, _ = _check_operands(w, node, a, b)
    w.add(node, "matmul", (w.tensor(a, node), w.tensor(b, node)),
          {"contract": sa[-1], "transpose_b": False, "scale": 1.0})


def build_sdpa(w: Walk, node: Any, op: str) -> None:
    """Q·Kᵀ·scale -> softmax -> ·V: intermediates named after the node (`_scores`, `_attn`), the
    node's own op (the A·V matmul) last."""
    # scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, *, scale=None,
    # enable_gqa=False)
    q, k, v = node.args[:3]
    mask, dropout, causal = arg(node, 3, "attn_mask"), arg(node, 4, "dropout_p", 0.0), arg(node, 5, "is_causal", False)
    scale, gqa = node.kwargs.get("scale"), node.kwargs.get("enable_gqa", False)
    if mask is not None:
        raise w.unsupported(node, "attention with attn_mask (give is_causal=True for a causal mask)")
    if dropout:
        raise w.unsupported(node, f"attention with dropout_p={dropout} (inference takes dropout_p=0)")
    if gqa:
        raise w.unsupported(node, "attention with enable_gqa=True")
    sq, sk = _check_operands(w, node, q, k)
    _check_operands(w, node, k, v)
    e = sq[-1]
    scale = 1.0 / math.sqrt(e) if scale is None else float(scale)
    scores = tuple(np.broadcast_shapes(sq[:-2], sk[:-2])) + (sq[-2], sk[-2])
    s = w.add(node, "matmul", (w.tensor(q, node), w.tensor(k, node)),
              {"contract": e, "transpose_b": True, "scale": scale}, shape=scores, name=f"{node.name}_scores")
    p = w.add(node, "softmax", (s.name,), {"dim": len(scores) - 1, "causal": bool(causal)}, shape=scores,
              name=f"{node.name}_attn")
    w.add(node, "matmul", (p.name, w.tensor(v, node)), {"contract": sk[-2], "transpose_b": False, "scale": 1.0})


register(OpKind(
    "matmul", "batched product of two activations a·b (b's last two axes swapped when `transpose_b`), times "
    "`scale`; `contract` = K (batch dims broadcast)", ("matmul", "bmm", "scaled_dot_product_attention"),
    build_matmul, int_ref=matmul_int, float_ref=matmul_float, label="matrix product", quant=matmul_quant,
    observe=True, cpu=lambda net, op, rows, read, write: matmul_dense(net, op, rows), vta=GEMM))

__all__ = ["SCALE_BITS", "derived_amax", "matmul_dense", "matmul_int", "matmul_quant", "scale_factor"]
