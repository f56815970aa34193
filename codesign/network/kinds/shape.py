"""Kinds that move data without arithmetic: reshape (flatten, view) and concatenation."""

from __future__ import annotations

from typing import Any

import numpy as np

from codesign.network.fx import Walk, arg, shape_of
from codesign.network.graph import FIXED_BATCH, Network, Op
from codesign.network.kernels import round_shift
from codesign.network.kinds.base import OpKind, QuantContext, register
from codesign.network.quantized import QParams, quantize_array

RESHAPES = ("flatten", "view", "reshape", "_unsafe_view", "squeeze", "unsqueeze", "unflatten", "view_as", "reshape_as")


def build_reshape(w: Walk, node: Any, op: str) -> None:
    """A reshape that keeps axis 0 (the batch) regroups the rest: row-major order keeps each
    sample's elements together, so it reshapes at any batch. One that changes axis 0 (Swin's
    window partition folds windows into it) fixes the network's batch (`FIXED_BATCH`)."""
    src, out = shape_of(node.args[0]), shape_of(node)
    if not src or not out:
        raise w.unsupported(node, f"a reshape {src} -> {out} of or to a scalar")
    attrs: dict[str, Any] = {"shape": out}
    if src[0] != out[0]:
        attrs[FIXED_BATCH] = True
    w.add(node, "flatten", (w.tensor(node.args[0], node),), attrs)


def build_cat(w: Walk, node: Any, op: str) -> None:
    tensors, dim = node.args[0], int(arg(node, 1, "dim", 0))
    w.add(node, "concat", tuple(w.tensor(t, node) for t in tensors), {"dim": dim % len(shape_of(node))})


def reshape(op: Op, x: np.ndarray) -> np.ndarray:
    """`x` in the op's shape, at `x`'s own batch (a batch-fixing reshape: exactly the op's shape)."""
    if op.attrs.get(FIXED_BATCH):
        return x.reshape(tuple(op.shape))
    return x.reshape((x.shape[0],) + tuple(op.shape[1:]))


def pixels_only(net: Network, op: Op) -> bool:
    """A flatten of (N, C, 1, 1) keeps VTA's blocks: (N/b, C/bi, 1, 1, b, bi) is the dense layout."""
    src = net.shape(op.inputs[0])
    return len(src) == 4 and src[2:] == (1, 1) and tuple(op.shape) == tuple(src[:2])


def concat_quant(ctx: QuantContext, op: Op) -> tuple[int, QParams]:
    """The coarsest input exponent; finer inputs rounded right to it."""
    fin = ctx.fin(op)
    fout = min(fin)
    return fout, QParams(in_shifts=tuple(f - fout for f in fin))


register(OpKind(
    "flatten", "reshape to `shape` (flatten, view, reshape): no arithmetic", RESHAPES, build_reshape,
    int_ref=lambda op, p, xs, f: reshape(op, xs[0]), float_ref=lambda op, xs: reshape(op, xs[0]),
    label="a reshape: no data moved", layout_free=pixels_only, moves_data=False, view=True))

def constant_quant(ctx: QuantContext, op: Op) -> tuple[int, QParams]:
    """Its own exponent from its values (max |w|), int8 once."""
    f = ctx.weight_frac(op)
    return f, QParams(weight=quantize_array(op.weight, f), weight_frac=f)


def at_shape(op: Op, a: np.ndarray) -> np.ndarray:
    """A constant at the op's shape: the same, or (a constant expanded to the calibration batch, or
    of batch 1) its first row broadcast to another batch."""
    if a.shape == tuple(op.shape) or a.shape[1:] != tuple(op.shape[1:]):
        return a
    return np.broadcast_to(a[:1], tuple(op.shape)).copy()


register(OpKind(
    "constant", "a module parameter or buffer used as an activation, or a value folded from them at import "
    "(weight; int8 at its own exponent)", (), None,
    int_ref=lambda op, p, xs, f: at_shape(op, p.weight), float_ref=lambda op, xs: at_shape(op, op.weight.astype(np.float64)),
    label="a constant (prepared once)", quant=constant_quant, moves_data=False))

register(OpKind(
    "concat", "concatenation along `dim`", ("cat",), build_cat,
    int_ref=lambda op, p, xs, f: np.concatenate([round_shift(x, s).astype(np.int8) for x, s in zip(xs, p.in_shifts)],
                                                axis=op.attrs["dim"]),
    float_ref=lambda op, xs: np.concatenate(xs, axis=op.attrs["dim"]),
    label="concatenation", quant=concat_quant))

__all__ = ["RESHAPES", "concat_quant", "pixels_only", "reshape"]
