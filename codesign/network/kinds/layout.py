"""Data-movement and reduction kinds: permute, slice (slice, select, narrow and the items of split,
chunk, unbind), stack, expand, repeat, pad, nearest upsample, and sum / mean over any dims but the batch.

The IR's tensors carry the example batch on axis 0 and `codesign.netrun.network.at_batch` rewrites
it, so every kind here keeps axis 0 the batch: its attrs never name the batch size, its references
read the output's other dims from `op.shape[1:]`, and an op that would move, slice, pad or reduce
the batch axis is a one-line error at import.

Integer semantics (int8 in, int8 out; f = fractional bits):
- permute, slice, expand, repeat, pad (reflect, replicate, circular), upsample: the input's values moved,
  f kept. Constant pad: value v as rint(v·2^f) clipped to int8 (0 stays exactly 0).
- stack: as concat, the coarsest input f; finer inputs (q + 2^(r-1)) >> r.
- sum: int32 sum of the int8 values at f_in, then (s + 2^(k-1)) >> k, clip, with
  k = f_in - f_out and f_out the range PT2E observes at the sum's output (observe=True), lowered to
  f_in at most (k >= 0). Observed rather than derived from the count: a sum of n values of mixed
  sign grows like sqrt(n), so f_in - ceil(log2 n) would throw bits away.
- mean: f kept; int32 sum times `mul`, (t + 2^(shift-1)) >> shift, clip, with (mul, shift) =
  `quantized.pool_factors(count)` as the average pools (count a power of two: mul 1, shift log2 n;
  else mul = round(2^16 / n), shift 16). A mean over H and W of an NCHW tensor is the pool kind
  `adaptive_avg_pool2d` (`kinds.pool.build_mean`), which VTA runs.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from codesign.cpu import tensor_pass
from codesign.network.fx import Walk, arg, ints, shape_of
from codesign.network.graph import FIXED_BATCH, Network, Op
from codesign.network.kernels import clip8, round_shift
from codesign.network.kinds.base import OpKind, QuantContext, register, register_builder
from codesign.network.kinds.shape import concat_quant
from codesign.network.quantized import QParams, pool_factors

BATCH = "the IR's tensors keep the batch on axis 0"


def _alias(w: Walk, node: Any) -> None:
    """`node` computes nothing (a no-op permute, a full slice): its output is its input."""
    w.alias[node.name] = w.tensor(node.args[0], node)


def _batched(x: np.ndarray, op: Op) -> tuple[int, ...]:
    """The op's output shape at `x`'s own batch (a batch-fixing op: exactly its shape)."""
    if op.attrs.get(FIXED_BATCH):
        return tuple(op.shape)
    return (x.shape[0],) + tuple(op.shape[1:])


# -- permute -------------------------------------------------------------------------------------
PERMUTES = ("permute", "transpose", "swapaxes", "swapdims", "t", "numpy_T", "mT", "movedim", "moveaxis")


def permutation(node: Any, op: str, rank: int) -> tuple[int, ...]:
    """The axis order `op` gives a tensor of `rank` dims (output axis i is input axis dims[i])."""
    axes = list(range(rank))
    if op == "permute":
        return tuple(int(d) % rank for d in arg(node, 1, "dims"))
    if op in ("transpose", "swapaxes", "swapdims", "mT", "t"):
        if op == "mT" or (op == "t" and rank == 2):
            a, b = rank - 2, rank - 1
        elif op == "t":  # t of a 0-D or 1-D tensor is the tensor
            return tuple(axes)
        else:
            a, b = int(node.args[1]) % rank, int(node.args[2]) % rank
        axes[a], axes[b] = axes[b], axes[a]
        return tuple(axes)
    if op == "numpy_T":
        return tuple(reversed(axes))
    # movedim(x, source, destination): the other axes keep their order (np.moveaxis's rule)
    src = [s % rank for s in ints(node.args[1], n=1)]
    dst = [d % rank for d in ints(node.args[2], n=1)]
    order = [a for a in axes if a not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return tuple(order)


def build_permute(w: Walk, node: Any, op: str) -> None:
    dims = permutation(node, op, len(shape_of(node.args[0])))
    if dims == tuple(sorted(dims)):
        _alias(w, node)
        return
    # a permute that moves the batch axis (nn.MultiheadAttention's sequence-first layout) fixes the
    # network's batch: the IR is then evaluated at its exported batch (reference.run_int chunks)
    attrs: dict[str, Any] = {"dims": dims, **({FIXED_BATCH: True} if dims and dims[0] != 0 else {})}
    w.add(node, "permute", (w.tensor(node.args[0], node),), attrs)


def build_roll(w: Walk, node: Any, op: str) -> None:
    """torch.roll over named dims (Swin's shifted windows); a roll of the flattened tensor or of
    the batch axis is refused."""
    rank = len(shape_of(node.args[0]))
    shifts, dims = ints(arg(node, 1, "shifts"), n=1), ints(arg(node, 2, "dims", ()), n=1)
    if not dims or len(dims) != len(shifts):
        raise w.unsupported(node, "a roll without one dim per shift (of the flattened tensor)")
    dims = tuple(d % rank for d in dims)
    if 0 in dims:
        raise w.unsupported(node, f"a roll of the batch axis (dim 0); {BATCH}")
    w.add(node, "roll", (w.tensor(node.args[0], node),), {"shifts": shifts, "dims": dims})


# -- slices --------------------------------------------------------------------------------------
def _slice_op(w: Walk, node: Any, src: Any, dim: int, start: int, stop: int, step: int = 1) -> None:
    """`node`'s output: axis `dim` of `src` at start:stop:step, in `node`'s shape (select and
    unbind drop the axis: the reshape to the node's shape does it). A full slice is `src` itself."""
    size = shape_of(src)[dim]
    start, stop, step = slice(start, stop, step).indices(size)
    if (start, stop, step) == (0, size, 1) and shape_of(node) == shape_of(src):
        w.alias[node.name] = w.tensor(src, node)
        return
    # a slice of axis 0 (q, k, v of a sequence-first attention's packed projection) fixes the batch
    attrs: dict[str, Any] = {"dim": dim, "start": start, "stop": stop, "step": step,
                             **({FIXED_BATCH: True} if dim == 0 else {})}
    w.add(node, "slice", (w.tensor(src, node),), attrs)


def build_slice(w: Walk, node: Any, op: str) -> None:
    x = node.args[0]
    rank = len(shape_of(x))
    if op == "slice":
        dim = int(arg(node, 1, "dim", 0)) % rank
        start, end, step = arg(node, 2, "start"), arg(node, 3, "end"), int(arg(node, 4, "step", 1))
        _slice_op(w, node, x, dim, start, end, step)
    elif op == "select":
        dim = int(arg(node, 1, "dim")) % rank
        i = int(arg(node, 2, "index")) % shape_of(x)[dim]
        _slice_op(w, node, x, dim, i, i + 1)
    else:  # narrow(x, dim, start, length)
        dim, length = int(arg(node, 1, "dim")) % rank, arg(node, 3, "length")
        start = arg(node, 2, "start")
        if not isinstance(start, int) or not isinstance(length, int):
            raise w.unsupported(node, "narrow at a start computed by the graph (the IR's slices are constant)")
        start %= shape_of(x)[dim]
        _slice_op(w, node, x, dim, start, start + length)


SPLITS = ("split", "split_with_sizes", "chunk", "unbind", "tensor_split", "unsafe_split", "unsafe_split_with_sizes")


def build_split(w: Walk, node: Any, op: str) -> None:
    """A multi-output op makes no op of its own: each item read (getitem) is a slice of the input.
    Item sizes come from the node's own outputs, so chunk's and tensor_split's rules need no copy."""
    x = node.args[0]
    rank = len(shape_of(x))
    dim = int(arg(node, 1, "dim", 0)) % rank if op == "unbind" else int(arg(node, 2, "dim", 0)) % rank
    vals = node.meta.get("val")
    if not isinstance(vals, (list, tuple)):
        raise w.unsupported(node, "a multi-output op without shape information")
    sizes = [1] * len(vals) if op == "unbind" else [int(v.shape[dim]) for v in vals]
    starts = [sum(sizes[:i]) for i in range(len(sizes))]

    def item(w: Walk, getitem: Any, i: int) -> None:
        _slice_op(w, getitem, x, dim, starts[i], starts[i] + sizes[i])

    w.items[node.name] = item


def slice_int(op: Op, x: np.ndarray) -> np.ndarray:
    a = op.attrs
    index = (slice(None),) * a["dim"] + (slice(a["start"], a["stop"], a["step"]),)
    return np.ascontiguousarray(x[index]).reshape(_batched(x, op))


def spatial(net: Network, op: Op) -> bool:
    """An NCHW op that moves only H and W keeps VTA's packed blocks (N/b, C/bi, H, W, b, bi): its
    CPU pass runs on them as on NCHW (padded channels carried along), with no unpack between VTA ops."""
    if len(op.shape) != 4 or len(net.shape(op.inputs[0])) != 4:
        return False
    if op.kind == "slice":
        return op.attrs["dim"] >= 2
    if op.kind == "pad":
        return op.attrs["pads"][1] == (0, 0)
    return op.kind == "upsample_nearest"


def slice_cpu(net: Network, op: Op, rows: int, read: int, write: int) -> Any:
    """A slice reads only what it writes (the rest of its input is skipped)."""
    return tensor_pass(op.name, write, write, "int8", "int8")


# -- stack, expand -------------------------------------------------------------------------------
def build_stack(w: Walk, node: Any, op: str) -> None:
    tensors = node.args[0]
    dim = int(arg(node, 1, "dim", 0)) % len(shape_of(node))
    if dim == 0:
        raise w.unsupported(node, f"stack along the batch axis (dim 0); {BATCH}")
    w.add(node, "stack", tuple(w.tensor(t, node) for t in tensors), {"dim": dim})


def stack_int(op: Op, p: QParams, xs: list[np.ndarray], f: int) -> np.ndarray:
    return np.stack([round_shift(x, s).astype(np.int8) for x, s in zip(xs, p.in_shifts)], axis=op.attrs["dim"])


def build_expand(w: Walk, node: Any, op: str) -> None:
    src, out = shape_of(node.args[0]), shape_of(node)
    if len(src) != len(out) or src[0] != out[0]:
        raise w.unsupported(node, f"expand {src} -> {out} that changes the batch axis (dim 0); {BATCH}")
    if src == out:
        _alias(w, node)
        return
    w.add(node, "expand", (w.tensor(node.args[0], node),))


def build_repeat(w: Walk, node: Any, op: str) -> None:
    src, reps = shape_of(node.args[0]), ints(node.args[1], n=1)
    if len(reps) != len(src) or reps[0] != 1:
        raise w.unsupported(node, f"repeat {list(reps)} of a {len(src)}-D tensor that changes the batch axis; {BATCH}")
    if all(r == 1 for r in reps):
        _alias(w, node)
        return
    w.add(node, "repeat", (w.tensor(node.args[0], node),), {"reps": reps})


def expand(op: Op, x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.broadcast_to(x, _batched(x, op)))


# -- reductions ----------------------------------------------------------------------------------
def add_reduction(w: Walk, node: Any, kind: str) -> None:
    """`kind` ("sum" or "mean") of `node.args[0]` over `dim` (any but the batch; keepdim or not)."""
    rank = len(shape_of(node.args[0]))
    dims = ints(arg(node, 1, "dim"), n=1)
    if not dims:
        raise w.unsupported(node, f"a {kind} over every axis, the batch axis too; {BATCH}")
    dims = tuple(sorted({d % rank for d in dims}))
    if 0 in dims:
        raise w.unsupported(node, f"a {kind} over the batch axis (dim 0); {BATCH}")
    if node.kwargs.get("dtype") is not None:
        raise w.unsupported(node, f"a {kind} with a dtype (the IR's reductions are of int8 tensors)")
    w.add(node, kind, (w.tensor(node.args[0], node),), {"dims": dims, "keepdim": bool(arg(node, 2, "keepdim", False))})


def reduction_count(net: Network, op: Op) -> int:
    shape = net.shape(op.inputs[0])
    return math.prod(shape[d] for d in op.attrs["dims"])


def sum_quant(ctx: QuantContext, op: Op) -> tuple[int, QParams]:
    fin = ctx.frac[op.inputs[0]]
    fout = min(ctx.output_frac(op), fin)
    return fout, QParams(shift=fin - fout)


def mean_quant(ctx: QuantContext, op: Op) -> tuple[int, QParams]:
    mul, shift = pool_factors(reduction_count(ctx.net, op))
    return ctx.frac[op.inputs[0]], QParams(shift=shift, mul=mul)


def int_sum(op: Op, x: np.ndarray) -> np.ndarray:
    return x.astype(np.int32).sum(axis=op.attrs["dims"], keepdims=op.attrs["keepdim"], dtype=np.int32)


def sum_int(op: Op, p: QParams, xs: list[np.ndarray], f: int) -> np.ndarray:
    return clip8(round_shift(int_sum(op, xs[0]), p.shift))


def mean_int(op: Op, p: QParams, xs: list[np.ndarray], f: int) -> np.ndarray:
    return clip8(round_shift(int_sum(op, xs[0]) * np.int32(p.mul), p.shift))


# -- pad -----------------------------------------------------------------------------------------
PAD_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}
PADS = ("pad", "constant_pad_nd", "reflection_pad1d", "reflection_pad2d", "reflection_pad3d", "replication_pad1d",
        "replication_pad2d", "replication_pad3d", "_pad_circular")


def build_pad(w: Walk, node: Any, op: str) -> None:
    rank = len(shape_of(node.args[0]))
    pad = [int(p) for p in node.args[1]]
    value = 0.0
    if op == "pad":
        mode, value = str(arg(node, 2, "mode", "constant")), arg(node, 3, "value", None)
    elif op == "constant_pad_nd":
        mode, value = "constant", arg(node, 2, "value", 0)
    else:
        mode = "reflect" if op.startswith("reflection") else "replicate" if op.startswith("replication") else "circular"
    if mode not in PAD_MODES:
        raise w.unsupported(node, f"pad mode {mode!r}; allowed: {', '.join(PAD_MODES)}")
    # torch lists (before, after) from the last axis backwards
    widths = [(0, 0)] * rank
    for k in range(len(pad) // 2):
        widths[rank - 1 - k] = (pad[2 * k], pad[2 * k + 1])
    if any(a < 0 or b < 0 for a, b in widths):
        raise w.unsupported(node, "a negative pad (a crop): give a slice")
    if widths[0] != (0, 0):
        raise w.unsupported(node, f"a pad of the batch axis (dim 0); {BATCH}")
    w.add(node, "pad", (w.tensor(node.args[0], node),),
          {"pads": tuple(widths), "mode": mode, "value": float(value or 0.0)})


def pad_int(op: Op, p: QParams, xs: list[np.ndarray], f: int) -> np.ndarray:
    a = op.attrs
    if a["mode"] != "constant":
        return np.pad(xs[0], a["pads"], mode=PAD_MODES[a["mode"]])
    q = int(np.clip(np.rint(a["value"] * 2.0 ** f), -128, 127))  # 0 -> 0 exactly
    return np.pad(xs[0], a["pads"], constant_values=np.int8(q))


def pad_float(op: Op, xs: list[np.ndarray]) -> np.ndarray:
    a = op.attrs
    if a["mode"] != "constant":
        return np.pad(xs[0], a["pads"], mode=PAD_MODES[a["mode"]])
    return np.pad(xs[0], a["pads"], constant_values=a["value"])


# -- nearest upsample ----------------------------------------------------------------------------
UPSAMPLES = ("upsample_nearest2d", "_upsample_nearest_exact2d")


def build_upsample(w: Walk, node: Any, op: str) -> None:
    if len(shape_of(node.args[0])) != 4:
        raise w.unsupported(node, "nearest upsampling of a tensor that is not NCHW")
    target = str(node.target)
    if target.endswith(".vec"):  # (input, output_size, scale_factors)
        scales = arg(node, 2, "scale_factors")
    else:  # (input, output_size, scales_h, scales_w)
        scales = (arg(node, 2, "scales_h"), arg(node, 3, "scales_w"))
    scales = tuple(None if s is None else float(s) for s in (scales or (None, None)))
    w.add(node, "upsample_nearest", (w.tensor(node.args[0], node),),
          {"scales": scales, "exact": op.startswith("_upsample_nearest_exact")})


def nearest_index(out_size: int, in_size: int, scale: float | None, exact: bool) -> np.ndarray:
    """The source index of every output index, as ATen computes it (UpSample.h, float32 arithmetic):
    scale = 1/scale_factor if given, else in/out; src = min(floor(dst·scale), in - 1) ('nearest-exact':
    floor((dst + 0.5)·scale)); 'nearest' copies dst at equal sizes and takes dst >> 1 at twice."""
    dst = np.arange(out_size)
    if not exact and out_size == in_size:
        return dst
    if not exact and out_size == 2 * in_size:
        return dst >> 1
    s = np.float32(1.0 / scale) if scale is not None and scale > 0 else np.float32(in_size) / np.float32(out_size)
    pos = (dst.astype(np.float32) + np.float32(0.5)) * s if exact else dst.astype(np.float32) * s
    return np.minimum(np.floor(pos).astype(np.int64), in_size - 1)


def upsample(op: Op, x: np.ndarray) -> np.ndarray:
    (oh, ow), (ih, iw) = op.shape[2:], x.shape[2:]
    sh, sw = op.attrs["scales"]
    rows = nearest_index(oh, ih, sh, op.attrs["exact"])
    cols = nearest_index(ow, iw, sw, op.attrs["exact"])
    return x[:, :, rows][:, :, :, cols]


# -- registry ------------------------------------------------------------------------------------
register(OpKind(
    "roll", "elements shifted cyclically by `shifts` along `dims` (torch.roll; not the batch axis)", ("roll",),
    build_roll, int_ref=lambda op, p, xs, f: np.roll(xs[0], op.attrs["shifts"], op.attrs["dims"]),
    float_ref=lambda op, xs: np.roll(xs[0], op.attrs["shifts"], op.attrs["dims"]), label="roll (a copy)"))

register(OpKind(
    "permute", "axes reordered (permute, transpose, t, mT, movedim): output axis i is input axis dims[i] "
    "(dims[0] != 0 moves the batch axis: the network then runs at its exported batch)", PERMUTES, build_permute,
    int_ref=lambda op, p, xs, f: np.ascontiguousarray(np.transpose(xs[0], op.attrs["dims"])),
    float_ref=lambda op, xs: np.transpose(xs[0], op.attrs["dims"]),
    label="permute (a copy in the new axis order)", view=True))

register(OpKind(
    "slice", "axis `dim` at start:stop:step, reshaped to the op's shape (slice, select, narrow, items of split, "
    "chunk, unbind: select and unbind drop the axis)", ("slice", "select", "narrow"), build_slice,
    int_ref=lambda op, p, xs, f: slice_int(op, xs[0]), float_ref=lambda op, xs: slice_int(op, xs[0]),
    label="slice", cpu=slice_cpu, layout_free=spatial, view=True))
register_builder(SPLITS, build_split)  # its items are slices

register(OpKind(
    "stack", "inputs stacked along a new axis `dim` (not the batch); the coarsest input exponent",
    ("stack",), build_stack, int_ref=stack_int, float_ref=lambda op, xs: np.stack(xs, axis=op.attrs["dim"]),
    label="stack", quant=concat_quant))

register(OpKind(
    "expand", "size-1 axes repeated to the op's shape (expand; the batch axis unchanged)", ("expand", "expand_as"),
    build_expand, int_ref=lambda op, p, xs, f: expand(op, xs[0]), float_ref=lambda op, xs: expand(op, xs[0]),
    label="expand (broadcast copy)"))

register(OpKind(
    "repeat", "the tensor tiled `reps` times along each axis (reps[0] = 1: the batch unchanged)", ("repeat",),
    build_repeat, int_ref=lambda op, p, xs, f: np.tile(xs[0], op.attrs["reps"]),
    float_ref=lambda op, xs: np.tile(xs[0], op.attrs["reps"]), label="repeat (tiled copy)"))

register(OpKind(
    "sum", "sum over `dims` (not the batch), keepdim: int32 sum, rounded >> (f_in - f_out) to the observed range",
    ("sum",), lambda w, node, op: add_reduction(w, node, "sum"), int_ref=sum_int,
    float_ref=lambda op, xs: xs[0].sum(axis=op.attrs["dims"], keepdims=op.attrs["keepdim"]),
    label="sum reduction", quant=sum_quant, observe=True))

# made by kinds.pool.build_mean (aten mean), which keeps a mean over H, W of NCHW the VTA pool
register(OpKind(
    "mean", "mean over `dims` (not the batch), keepdim: int32 sum times mul, rounded >> shift (pool_factors)",
    (), None, int_ref=mean_int,
    float_ref=lambda op, xs: xs[0].mean(axis=op.attrs["dims"], keepdims=op.attrs["keepdim"]),
    label="mean reduction", quant=mean_quant))

register(OpKind(
    "pad", "pad by `pads` ((before, after) per axis, batch (0, 0)); mode constant (value), reflect, replicate, "
    "circular", PADS, build_pad, int_ref=pad_int, float_ref=pad_float, label="pad (a copy with a border)",
    layout_free=spatial))

register(OpKind(
    "upsample_nearest", "nearest-neighbour upsampling of NCHW to the op's H, W (`scales`: the scale factors "
    "given, else None; `exact`: 'nearest-exact')", UPSAMPLES, build_upsample,
    int_ref=lambda op, p, xs, f: upsample(op, xs[0]), float_ref=lambda op, xs: upsample(op, xs[0]),
    label="nearest upsample", layout_free=spatial))

__all__ = ["PERMUTES", "SPLITS", "add_reduction", "nearest_index", "permutation", "reduction_count", "spatial"]
