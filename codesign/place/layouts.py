"""Where a tensor's elements lie in a packed VTA buffer, followed through views, and whether a
GEMM can read its operand from that buffer as it lies.

A VTA GEMM step writes its output as its layer's packed blocks (NCHW{b}n{bo}c, zero-padded
channels and rows; a matmul of E entries: E such buffers back to back, or one grouped conv's).
`Located` records, for every element of a tensor, its index in such a buffer (`positions`, the
tensor's logical shape). A view op (`OpKind.view`: permute, slice, reshape) moves values
without arithmetic, so its output's positions are its int_ref applied to its input's positions
(no data moved); a positional op (`OpKind.positional`: softmax) reads its input through the
positions and writes its output to a buffer of its own at the same positions.

A GEMM's input buffer is the VTA layer's packed input (`slots`: for each of its elements, the
operand's logical element it holds, -1 for a zero pad). It can read a located operand in place
(`window`) when every slot holding an element is the element's position in the source buffer
minus one common offset, and the window fits in that buffer: the DMA then reads the source
bytes at that offset. Its pad slots then hold whatever the source holds there, which is
harmless for a GEMM *input*: a zero-padded input channel meets zero weights, a padded row
yields an output row the host drops. A weight operand's pads must be zero (they meet input
pads), so a weight is never read in place: it is gathered into its blocks (`gather`).

ViT-B's self-attention (MHA, sequence-first inside): the QKV linear as a 1x1 conv over the tokens
writes [2304/16][197][16]; Q, the first 768 channels after the head split, is exactly the
prefix the score matmul (12 heads as one grouped 1x1 conv) reads as its input [12·64/16][197][16];
the scores' output is what the softmax and then A·V read; A·V's output after the head merge is
the out-projection's input. Only K and V (read as WGT) are gathered.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from codesign.errors import ConfigError
from codesign.hw.config import HwConfig
from codesign.network import kinds
from codesign.network.graph import Network, Op
from codesign.network.quantized import QParams
from codesign.place.transforms import ENTRIES, Rewrite, matmul_entries
from codesign.workloads.layers import Layer


@dataclass(frozen=True, eq=False)
class Located:
    """`positions[i]`: the index in tensor `buffer`'s packed bytes (`size` int8 elements) of element i."""

    buffer: str
    size: int
    positions: np.ndarray



class Locations(dict):
    """tensor -> where a packed buffer holds it: a `Located`, or a thunk that finds it when first
    asked (a view's positions cost a pass of its int_ref). What the planner's runners follow."""

    def where(self, tensor: str, who: str) -> Located:
        got = self.get(tensor)
        if got is None:
            raise ConfigError(f"{who}the plan reads {tensor} from a packed buffer, but no step left it in one")
        if not isinstance(got, Located):
            self[tensor] = got = got()
        return got

def _calls_output(layer: Layer, rewrite: Rewrite, hw: HwConfig, calls: int) -> np.ndarray:
    n = math.prod(layer.packed_output_shape(hw))
    outs = [rewrite.vta_output(layer.unpack_output(np.arange(n, dtype=np.int64) + k * n, hw)) for k in range(calls)]
    return outs[0] if calls == 1 else np.stack(outs)


def gemm_output(rewrite: Rewrite, hw: HwConfig, shape: tuple[int, ...], buffer: str, matmul: bool,
                views: Sequence[Op] = ()) -> Located:
    """Where the VTA step of `rewrite` leaves each element of its op's output (of `shape`): its
    layer's packed output, cut back to the op's (a matmul of per-entry calls: the calls' buffers
    back to back, stacked as the runner stacks them); behind `views` (a residual add fused
    through them, `fusion.Group.views`): where it leaves each element of the last view's."""
    calls = rewrite.calls if matmul and rewrite.kind != ENTRIES else 1
    pos = _calls_output(rewrite.layer, rewrite, hw, calls)
    loc = Located(buffer, calls * math.prod(rewrite.layer.packed_output_shape(hw)), pos.reshape(shape))
    for op in views:
        loc = through(op, loc)
    return loc


def through(op: Op, src: Located) -> Located:
    """The positions of view op `op`'s output: its int_ref on its input's positions."""
    return Located(src.buffer, src.size, kinds.get(op.kind).int_ref(op, QParams(), [src.positions], 0))


def view_index(shape: tuple[int, ...], views: Sequence[Op]) -> np.ndarray:
    """For each element of the last of `views` (element-keeping views from a tensor of `shape`),
    the flat index of the element of that tensor it is."""
    idx = np.arange(math.prod(shape), dtype=np.int64).reshape(shape)
    for op in views:
        idx = kinds.get(op.kind).int_ref(op, QParams(), [idx], 0)
    return idx


def unview(x: np.ndarray, index: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """`x`, shaped as the last view of `view_index`'s, put back in the viewed tensor's order (`shape`)."""
    out = np.empty(math.prod(shape), dtype=x.dtype)
    out[index.ravel()] = np.asarray(x).ravel()
    return out.reshape(shape)


def input_slots(net: Network, op: Op, rewrite: Rewrite, hw: HwConfig) -> np.ndarray:
    """For each element of the VTA input buffer `rewrite` gives op `op` (per-entry matmul calls:
    back to back), the flat index of the element of its first operand it holds, -1 for a pad."""
    a_shape = net.shape(op.inputs[0])
    idx = np.arange(1, math.prod(a_shape) + 1, dtype=np.int64).reshape(a_shape)
    v = rewrite.layer
    if op.kind == "matmul":
        b0 = np.zeros(net.shape(op.inputs[1]), np.int8)
        xs, ws = matmul_entries(idx, b0, op.shape, bool(op.attrs.get("transpose_b")))
        if rewrite.kind == ENTRIES:
            bufs = [v.pack_data(rewrite.vta_operands(xs, ws)[0], hw)]
        else:
            bufs = [v.pack_data(rewrite.vta_operands(a, b)[0], hw) for a, b in zip(xs, ws)]
    else:
        w0 = np.zeros(rewrite.original.weight_shape(), np.int8)
        bufs = [v.pack_data(rewrite.vta_operands(idx, w0)[0], hw)]
    return np.concatenate([b.ravel() for b in bufs]) - 1


def residual_slots(rewrite: Rewrite, hw: HwConfig, in_shape: tuple[int, ...], gemm_shape: tuple[int, ...],
                   views: Sequence[Op] = ()) -> np.ndarray:
    """For each element of the VTA output buffer a fused residual add loads into ACC (the layer's
    packed output layout), the flat index of the element of the residual tensor (shaped as the
    last of `views`, else as the GEMM's output) it holds, -1 for a pad."""
    shape = tuple(views[-1].shape) if views else gemm_shape
    idx = np.arange(1, math.prod(shape) + 1, dtype=np.int64).reshape(shape)
    if views:
        idx = unview(idx, view_index(gemm_shape, views), gemm_shape)
    x0 = np.zeros(in_shape, np.int8)
    w0 = np.zeros(rewrite.original.weight_shape(), np.int8)
    return rewrite.layer.pack_output(rewrite.vta_operands(x0, w0, None, idx)[3], hw).ravel() - 1


def window(src: Located, slots: np.ndarray) -> int | None:
    """The offset in `src`'s buffer at which `slots` read every element where it lies, or None.
    (A residual's pads then hold what the source holds there: they add into output pads only,
    which no consumer reads as values.)"""
    held = np.flatnonzero(slots >= 0)
    if held.size == 0:
        return None
    offsets = src.positions.ravel()[slots[held]] - held
    off = int(offsets[0])
    if off < 0 or off + slots.size > src.size or np.any(offsets != off):
        return None
    return off


def unpack_input(layer: Layer, packed: np.ndarray, hw: HwConfig) -> np.ndarray:
    """A VTA layer's packed input bytes (N/b, C/bi, *spatial, b, bi) -> its data layout, which the
    executor packs back to the same bytes (`Layer.pack_data` inverted)."""
    want = layer.packed_data_shape(hw)
    nd = len(want) - 4
    order = (0, nd + 2, 1, nd + 3, *range(2, 2 + nd))
    return np.ascontiguousarray(np.asarray(packed).reshape(want).transpose(order)).reshape(layer.data_shape())


__all__ = ["Located", "Locations", "gemm_output", "input_slots", "residual_slots", "through", "unpack_input", "unview", "view_index",
           "window"]
