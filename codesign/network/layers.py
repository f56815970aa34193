"""The VTA layer form (`Conv2D`, `Dense` of codesign.workloads) of a network's GEMM ops: what the
schedule spaces, the compiler and the simulator take, so placement can cost an op on VTA. The
layers of a whole network are the ones `from_torch` lists for the timing-only workload."""

from __future__ import annotations

import math
from collections import Counter

from codesign.network.graph import Network, Op
from codesign.workloads.layers import Conv2D, Conv2DTranspose, Dense, Layer


def layer_of(net: Network, op: Op) -> tuple[Layer | None, str | None]:
    """(layer, None) for a conv2d, conv_transpose2d or linear op at the IR's batch, or a matmul's
    per-entry dense (`calls_of`: how many entries), else (None, why it has none). A transposed
    conv's layer is `Conv2DTranspose`; VTA runs it through the host rewrite `zero_insert`
    (codesign.place.transforms) as a stride-1 conv."""
    if op.kind == "conv2d":
        n, c, h, w = net.shape(op.inputs[0])
        o, _, kh, kw = op.attrs["weight_shape"]
        (sh, sw), (ph, pw), (dh, dw) = op.attrs["stride"], op.attrs["padding"], op.attrs["dilation"]
        if sh != sw or ph != pw or dh != dw:
            return None, (f"non-square stride {sh}x{sw} / padding {ph}x{pw} / dilation {dh}x{dw}: "
                          "the VTA conv templates take one value for both axes")
        return Conv2D(n, c, h, w, o, kh, kw, sh, ph, dh, int(op.attrs["groups"])), None
    if op.kind == "conv_transpose2d":
        n, c, h, w = net.shape(op.inputs[0])
        _, o, kh, kw = op.attrs["weight_shape"]
        (sh, sw), (ph, pw), (qh, qw) = op.attrs["stride"], op.attrs["padding"], op.attrs["output_padding"]
        if sh != sw or ph != pw or qh != qw:
            return None, (f"non-square stride {sh}x{sw} / padding {ph}x{pw} / output_padding {qh}x{qw}: "
                          "the transposed conv layer takes one value for both axes")
        return Conv2DTranspose(n, c, h, w, o, kh, kw, sh, ph, qh), None
    if op.kind == "linear":
        x = net.shape(op.inputs[0])
        return Dense(math.prod(x[:-1]) if len(x) > 1 else 1, x[-1], int(op.attrs["weight_shape"][0])), None
    if op.kind == "matmul":
        # each batch entry (batch x heads) is a dense of M rows, K in, N out; its weight (N, K) is
        # the second operand's entry (transposed unless `transpose_b`), loaded as WGT
        return Dense(op.shape[-2], int(op.attrs["contract"]), op.shape[-1]), None
    return None, f"{op.kind} is not a GEMM layer"


def calls_of(op: Op) -> int:
    """How many times the op's VTA layer runs: a matmul's batch entries (its output's leading
    axes), 1 for a conv2d or linear."""
    return math.prod(op.shape[:-2]) if op.kind == "matmul" else 1


def gemm_layers(net: Network) -> dict[Layer, int]:
    """Every conv2d/conv_transpose2d/linear/matmul op's layer with its multiplicity (a matmul's once per batch
    entry), in first-seen order."""
    counts: Counter[Layer] = Counter()
    for op in net.ops:
        layer, _ = layer_of(net, op)
        if layer is not None:
            counts[layer] += calls_of(op)
    return dict(counts)
