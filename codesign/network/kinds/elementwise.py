"""Element-wise kinds VTA's GEMM epilogue can take: ReLU, clamp (relu6, hardtanh), residual add."""

from __future__ import annotations

from typing import Any

import numpy as np

from codesign.network.fx import Walk, arg, shape_of
from codesign.network.graph import Network, Op
from codesign.network.kernels import clip8, round_shift
from codesign.network.kinds.base import EPILOGUE, OpKind, QuantContext, always, register
from codesign.network.kinds.binary import build_binary
from codesign.network.quantized import QParams


def build_relu(w: Walk, node: Any, op: str) -> None:
    w.add(node, "relu", (w.tensor(node.args[0], node),))


def build_clamp(w: Walk, node: Any, op: str) -> None:
    lo, hi = {"hardtanh": (-1.0, 1.0), "relu6": (0.0, 6.0), "clamp": (None, None)}[op]
    if op != "relu6":
        lo = arg(node, 1, "min_val" if op == "hardtanh" else "min", lo)
        hi = arg(node, 2, "max_val" if op == "hardtanh" else "max", hi)
    if any(v is not None and not isinstance(v, (int, float)) for v in (lo, hi)):
        raise w.unsupported(node, "clamp to tensor bounds (the IR's clamp takes constants)")
    w.add(node, "clamp", (w.tensor(node.args[0], node),),
          {"min": None if lo is None else float(lo), "max": None if hi is None else float(hi)})


def build_add(w: Walk, node: Any, op: str) -> None:
    a, b = node.args[0], node.args[1]
    if not (w.is_tensor(a) and w.is_tensor(b) and shape_of(a) == shape_of(b)):
        build_binary(w, node, op)  # a constant or a broadcast operand: the `binary` kind
        return
    if float(node.kwargs.get("alpha", 1)) != 1:
        raise w.unsupported(node, "add with alpha != 1")
    w.add(node, "add", (w.tensor(a, node), w.tensor(b, node)))


def clamp_bounds(op: Op, frac: int) -> tuple[int, int]:
    """The clamp's int8 (lo, hi): its bounds rounded to the tensor's scale (None: unbounded), hi >= lo
    (a fused epilogue clips to the same pair)."""
    lo, hi = (d if v is None else int(np.clip(np.rint(v * 2.0 ** frac), -128, 127))
              for v, d in ((op.attrs["min"], -128), (op.attrs["max"], 127)))
    return lo, max(lo, hi)


def clamp_int(op: Op, p: QParams, xs: list[np.ndarray], frac: int) -> np.ndarray:
    """Clip to the bounds rounded to the tensor's scale (None: unbounded)."""
    return np.clip(xs[0], *clamp_bounds(op, frac)).astype(np.int8)


def add_quant(ctx: QuantContext, op: Op) -> tuple[int, QParams]:
    """Inputs shifted left to the finer f_m = max(f_a, f_b), summed in int32, rounded >> (f_m - f_out)."""
    fin = ctx.fin(op)
    fm = max(fin)
    fout = min(ctx.output_frac(op), fm)
    return fout, QParams(shift=fm - fout, in_shifts=tuple(fm - f for f in fin))


def add_int(op: Op, p: QParams, xs: list[np.ndarray], frac: int) -> np.ndarray:
    total = sum(x.astype(np.int32) << np.int32(s) for x, s in zip(xs, p.in_shifts))
    return clip8(round_shift(total, p.shift))


def same_shape(net: Network, op: Op) -> bool:
    return len({net.shape(t) for t in op.inputs}) == 1


register(OpKind(
    "relu", "max(x, 0)", ("relu",), build_relu,
    int_ref=lambda op, p, xs, f: np.maximum(xs[0], np.int8(0)),
    float_ref=lambda op, xs: np.maximum(xs[0], 0.0),
    label="ReLU", layout_free=always, vta=EPILOGUE))

register(OpKind(
    "clamp", "clip to [min, max] (relu6, hardtanh, clamp; None = unbounded)", ("hardtanh", "relu6", "clamp"),
    build_clamp, int_ref=clamp_int,
    float_ref=lambda op, xs: np.clip(xs[0], -np.inf if op.attrs["min"] is None else op.attrs["min"],
                                     np.inf if op.attrs["max"] is None else op.attrs["max"]),
    label="clamp", layout_free=always, vta=EPILOGUE))

register(OpKind(
    "add", "element-wise sum of two tensors of one shape (residual add)", ("add",), build_add,
    int_ref=add_int, float_ref=lambda op, xs: xs[0] + xs[1],
    label="residual add", quant=add_quant, observe=True, layout_free=same_shape, vta=EPILOGUE))

__all__ = ["add_int", "add_quant", "clamp_bounds", "clamp_int", "same_shape"]
