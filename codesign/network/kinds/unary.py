"""Non-linear unary kinds as exact int8 lookup tables: sigmoid, silu, hardswish, hardsigmoid, gelu
(attr `approximate`: "none" = erf, "tanh"), tanh.

An int8 input takes 256 values, so each of these functions is, exactly, a 256-entry table: in
`quant`, the float64 function of the 256 dequantized inputs q·2^-f_in, quantized at the observed
output exponent f_out (round half to even, clip to [-128, 127]). Every entry is the int8 nearest
to the true function value. `int_ref` is `table[q + 128]`: no arithmetic at run time, so the CPU
(or any future lowering) matches bit for bit. The output's scale is its own (PT2E observes it).
A table lookup reads and writes one byte per element: a bytes-bound pass on the CPU, on NCHW or
VTA's packed blocks alike (`layout_free`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from codesign.network.fx import Walk, arg
from codesign.network.graph import Op
from codesign.network.kinds.base import OpKind, QuantContext, always, register
from codesign.network.quantized import QParams, dequantize, quantize_array

INT8_VALUES = np.arange(-128, 128, dtype=np.int8)  # table index q + 128
GELU_FORMS = ("none", "tanh")

_erf = np.vectorize(math.erf, otypes=[np.float64])


def sigmoid(x: np.ndarray) -> np.ndarray:
    # exp of -|x| only: no overflow warning for large |x|
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def hardsigmoid(x: np.ndarray) -> np.ndarray:
    return np.clip(x + 3.0, 0.0, 6.0) / 6.0


def gelu(x: np.ndarray, approximate: str) -> np.ndarray:
    if approximate == "tanh":
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


# kind -> the float64 function of (op, x)
FUNCTIONS: dict[str, Callable[[Op, np.ndarray], np.ndarray]] = {
    "sigmoid": lambda op, x: sigmoid(x),
    "silu": lambda op, x: x * sigmoid(x),
    "hardswish": lambda op, x: x * hardsigmoid(x),
    "hardsigmoid": lambda op, x: hardsigmoid(x),
    "gelu": lambda op, x: gelu(x, op.attrs["approximate"]),
    "tanh": lambda op, x: np.tanh(x),
}


def build_unary(w: Walk, node: Any, op: str) -> None:
    attrs = {}
    if op == "gelu":
        form = str(arg(node, 1, "approximate", "none"))
        if form not in GELU_FORMS:
            raise w.unsupported(node, f"gelu approximate={form!r}; allowed: {', '.join(GELU_FORMS)}")
        attrs["approximate"] = form
    w.add(node, op, (w.tensor(node.args[0], node),), attrs)


def table_quant(ctx: QuantContext, op: Op) -> tuple[int, QParams]:
    """The exact table: f(q·2^-f_in) for the 256 int8 q, quantized at the observed f_out."""
    fin, fout = ctx.frac[op.inputs[0]], ctx.output_frac(op)
    values = FUNCTIONS[op.kind](op, dequantize(INT8_VALUES, fin))
    return fout, QParams(table=quantize_array(values, fout))


def table_int(op: Op, p: QParams, xs: list[np.ndarray], frac: int) -> np.ndarray:
    return p.table[xs[0].astype(np.int16) + 128]


def _table_kind(name: str, doc: str, label: str, positional: bool = False) -> OpKind:
    fn = FUNCTIONS[name]
    return register(OpKind(
        name, f"{doc}, as an exact int8 table (index q + 128)", (name,), build_unary,
        int_ref=table_int, float_ref=lambda op, xs: fn(op, xs[0]),
        label=f"{label} (int8 table)", quant=table_quant, observe=True, layout_free=always,
        positional=positional))


_table_kind("sigmoid", "1 / (1 + e^-x)", "sigmoid")
_table_kind("silu", "x · sigmoid(x) (SiLU, swish)", "SiLU")
_table_kind("hardswish", "x · relu6(x + 3) / 6", "hardswish")
_table_kind("hardsigmoid", "relu6(x + 3) / 6", "hardsigmoid")
_table_kind("gelu", "x · Φ(x); attr approximate: 'none' (erf) or 'tanh' "
            "(0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))))", "GELU",
            # a transformer MLP's: over the first linear's tracked blocks, so the second reads it in place
            positional=True)
_table_kind("tanh", "tanh(x)", "tanh")

__all__ = ["FUNCTIONS", "GELU_FORMS", "INT8_VALUES", "build_unary", "table_int", "table_quant"]
