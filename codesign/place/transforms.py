"""Host rewrites that let VTA run a GEMM op it cannot take as it stands, as NumPy functions.

VTA's conv needs channels in multiples of BLOCK_IN/BLOCK_OUT, the batch a multiple of BATCH and one
symmetric padding of at most 15 (docs/vta.md §7.1, §7.4.3). A network's stem (3 input channels, a
7x7/2 kernel) fits none of that directly; three exact rewrites make it fit:
- `pad`: zero channels (input, weight and output) and zero batch rows. Zero input channels meet zero
  weights; zero output channels are dropped when the host unpacks, zero rows likewise.
- `space_to_depth`: a stride-s conv becomes a stride-1 conv over s x s pixel blocks. The kernel is
  padded with leading zero taps to a multiple of s (K' = ceil((k + z) / s) taps per block axis),
  channel c·s² + dy·s + dx of the new input holds pixel (s·j + dy, s·i + dx) of channel c, and the
  host pads the image asymmetrically while it rearranges it so that VTA's conv uses padding 0
  (3x224x224 ⊛ 7x7/2 pad 3 → 12 channels ⊛ 4x4/1 on 115x115 → 112x112).
- `im2col`: the conv becomes a 1x1 conv over C·KH·KW channels (each output pixel's window).
- `block_diagonal`: a grouped conv whose channels per group are not BLOCK multiples (depthwise:
  one) packs k consecutive groups into one: G groups of cg in / og out channels become G'/k groups
  of k·cg in / k·og out channels (G' = G rounded up to k with zero groups), each new group's
  weight block-diagonal — original group r of the pack sees only its own cg input channels, zeros
  elsewhere. k is the least with k·cg a BLOCK_IN and k·og a BLOCK_OUT multiple; G'/k = 1 is a
  dense conv. The channels stay where they were (groups are contiguous), so the input is only
  zero-padded; MACs grow by k. When zero groups pad the channels past the next BLOCK multiple
  (cg or og not dividing BLOCK: rare) the packed output carries them; the host drops them.
- `tokens_as_pixels`: a dense of many rows (a linear over a transformer's tokens) becomes a 1x1
  conv whose pixels are the rows (BATCH images of ceil(rows / BATCH) x 1 pixels): the conv
  templates keep a weight tile resident across pixels, where the dense template reloads it per
  row block (ViT-B's 197x768 -> 2304 projection: 11.4 vs 34.6 ms on Ultra96's 1x16).
- `zero_insert`: a transposed conv is the stride-1 conv of its flipped, in/out-swapped kernel over
  the input dilated by the stride (zeros between pixels) and bordered by k-1-p (+ output_padding
  after); VTA's symmetric LOAD pad takes what it can of the border, the host the rest. MACs x s².
- `entries_as_groups`: all E batch entries of a matmul (batch x heads) in one call, as a grouped
  1x1 conv over the M rows: group e reads entry e's K channels (zero-padded to a BLOCK_IN
  multiple) and writes its N outputs (zero-padded to BLOCK_OUT) — the same block-diagonal
  weight as E separate convs, without E-1 host calls.
All seven compute the same int32 sums as the original op, so bias, shift, residual and ReLU
after them are unchanged (tests/test_place_rewrite.py and tests/test_place_groups.py check it on
random int8 data).

`Rewrite` carries the geometry; `vta_operands` / `vta_output` are what the network runner applies
to an op's tensors around its VTA layer, and `host_elems` what the planner costs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from codesign.errors import ConfigError
from codesign.hw.config import HwConfig
from codesign.workloads.layers import MAX_PAD, Conv2D, Conv2DTranspose, Dense, Layer

PAD = "pad"
SPACE_TO_DEPTH = "space_to_depth"
IM2COL = "im2col"
BLOCK_DIAGONAL = "block_diagonal"
TOKENS = "tokens_as_pixels"
ZERO_INSERT = "zero_insert"
ENTRIES = "entries_as_groups"
TRANSFORMS = (PAD, SPACE_TO_DEPTH, IM2COL, BLOCK_DIAGONAL, TOKENS, ZERO_INSERT, ENTRIES)


def round_up(n: int, multiple: int) -> int:
    return -(-int(n) // int(multiple)) * int(multiple)


def pad_axis(a: np.ndarray, axis: int, size: int) -> np.ndarray:
    """`a` with zeros appended along `axis` up to `size` (unchanged when already that size)."""
    extra = size - a.shape[axis]
    if extra < 0:
        raise ConfigError(f"cannot pad axis {axis} of shape {a.shape} down to {size}")
    if extra == 0:
        return a
    widths = [(0, 0)] * a.ndim
    widths[axis] = (0, extra)
    return np.pad(a, widths)


@dataclass(frozen=True)
class ConvGeometry:
    """The original conv as the network has it (square kernel, stride, padding; dilation 1)."""

    batch: int
    channels: int
    height: int
    width: int
    out_channels: int
    kernel: int
    stride: int
    padding: int

    @property
    def out_height(self) -> int:
        return (self.height + 2 * self.padding - self.kernel) // self.stride + 1

    @property
    def out_width(self) -> int:
        return (self.width + 2 * self.padding - self.kernel) // self.stride + 1

    @classmethod
    def of(cls, layer: Conv2D) -> ConvGeometry:
        if layer.kernel_h != layer.kernel_w or layer.dilation != 1 or layer.groups != 1:
            raise ConfigError(f"{layer.name}: the host rewrites take a square kernel, dilation 1, groups 1")
        return cls(layer.batch, layer.in_channels, layer.height, layer.width, layer.out_channels,
                   layer.kernel_h, layer.stride, layer.padding)


@dataclass(frozen=True)
class S2DGeometry:
    """Space-to-depth of a stride-s conv: `zeros` leading zero taps, `taps` per block axis, the
    input padded by `top` (= left) rows before and cut/padded to `rows` x `cols` pixels."""

    block: int
    zeros: int
    taps: int
    top: int
    rows: int
    cols: int

    @classmethod
    def of(cls, g: ConvGeometry) -> S2DGeometry:
        s = g.stride
        # Leading zero taps z make padding + z a multiple of s, so each output's window starts on
        # a block boundary (block i - (p + z) / s).
        zeros = (-g.padding) % s
        taps = -(-(g.kernel + zeros) // s)
        lead = (g.padding + zeros) // s
        return cls(s, zeros, taps, lead * s, (g.out_height + taps - 1) * s, (g.out_width + taps - 1) * s)


def space_to_depth_input(x: np.ndarray, g: ConvGeometry) -> np.ndarray:
    """NCHW int8 → (N, C·s², OH + K' - 1, OW + K' - 1): padded asymmetrically, then rearranged."""
    sg = S2DGeometry.of(g)
    s = sg.block
    n, c, h, w = x.shape
    bottom, right = sg.rows - sg.top - h, sg.cols - sg.top - w
    xp = np.pad(x, ((0, 0), (0, 0), (sg.top, max(bottom, 0)), (sg.top, max(right, 0))))[:, :, :sg.rows, :sg.cols]
    blocks = xp.reshape(n, c, sg.rows // s, s, sg.cols // s, s)
    return np.ascontiguousarray(blocks.transpose(0, 1, 3, 5, 2, 4).reshape(n, c * s * s, sg.rows // s, sg.cols // s))


def space_to_depth_weight(w: np.ndarray, g: ConvGeometry) -> np.ndarray:
    """OIHW k x k → (O, I·s², K', K'): leading zero taps, then taps split by their block phase."""
    sg = S2DGeometry.of(g)
    s, kp = sg.block, sg.taps
    o, i, k, _ = w.shape
    full = np.zeros((o, i, kp * s, kp * s), dtype=w.dtype)
    full[:, :, sg.zeros:sg.zeros + k, sg.zeros:sg.zeros + k] = w
    blocks = full.reshape(o, i, kp, s, kp, s)
    return np.ascontiguousarray(blocks.transpose(0, 1, 3, 5, 2, 4).reshape(o, i * s * s, kp, kp))


def im2col_input(x: np.ndarray, g: ConvGeometry) -> np.ndarray:
    """NCHW → (N, C·K·K, OH, OW): channel c·K² + ky·K + kx holds each output's window tap."""
    k, s, p = g.kernel, g.stride, g.padding
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (k, k), axis=(2, 3))[:, :, ::s, ::s][:, :, :g.out_height, :g.out_width]
    n, c = x.shape[:2]
    return np.ascontiguousarray(win.transpose(0, 1, 4, 5, 2, 3).reshape(n, c * k * k, g.out_height, g.out_width))


def im2col_weight(w: np.ndarray) -> np.ndarray:
    o = w.shape[0]
    return np.ascontiguousarray(w.reshape(o, -1, 1, 1))


@dataclass(frozen=True)
class GroupPack:
    """`pack` consecutive groups of a grouped conv (`groups` of `cg` in / `og` out channels) as one,
    the groups zero-padded to `padded_groups` (a multiple of `pack`)."""

    groups: int
    cg: int
    og: int
    pack: int
    padded_groups: int

    @property
    def new_groups(self) -> int:
        return self.padded_groups // self.pack

    @classmethod
    def of(cls, layer: Conv2D, block_in: int, block_out: int) -> GroupPack:
        g = layer.groups
        cg, og = layer.in_channels // g, layer.out_channels // g
        # the least k with k·cg % BLOCK_IN == 0 and k·og % BLOCK_OUT == 0
        k = math.lcm(block_in // math.gcd(cg, block_in), block_out // math.gcd(og, block_out))
        return cls(g, cg, og, k, round_up(g, k))

    @classmethod
    def from_layers(cls, original: Conv2D, packed: Conv2D) -> GroupPack:
        """The pack that turns `original` into `packed` (a rewrite's layers)."""
        g = original.groups
        cg, og = original.in_channels // g, original.out_channels // g
        k = (packed.in_channels // packed.groups) // cg
        return cls(g, cg, og, k, packed.groups * k)


def block_diagonal_weight(w: np.ndarray, gp: GroupPack) -> np.ndarray:
    """OIHW (G·og, cg, KH, KW) → (G'·og, k·cg, KH, KW): output channel j of original group
    g = n·k + r reads new input columns r·cg .. (r + 1)·cg of its pack n; zeros elsewhere and in
    the padding groups."""
    o, cg, kh, kw = w.shape
    k, og = gp.pack, gp.og
    out = np.zeros((gp.padded_groups, og, k, cg, kh, kw), dtype=w.dtype)
    r = np.arange(gp.groups) % k
    out[np.arange(gp.groups), :, r] = w.reshape(gp.groups, og, cg, kh, kw)
    return np.ascontiguousarray(out.reshape(gp.padded_groups * og, k * cg, kh, kw))


@dataclass(frozen=True)
class ZeroInsert:
    """A transposed conv as a stride-1 conv: the input dilated by `stride`, then bordered by
    (`top`, `bottom`) rows and (`left`, `right`) columns on the host (negative: cropped) and by
    `pad` more on every side by VTA's LOAD."""

    stride: int
    top: int
    bottom: int
    left: int
    right: int
    pad: int

    @classmethod
    def of(cls, t: Conv2DTranspose) -> ZeroInsert:
        p, q = t.padding, t.output_padding
        before_h, before_w = t.kernel_h - 1 - p, t.kernel_w - 1 - p  # the conv's border; +q after
        # VTA pads all four sides alike, at most MAX_PAD: it takes the smallest border, the host the rest
        pad = max(0, min(before_h, before_w, MAX_PAD))
        return cls(t.stride, before_h - pad, before_h + q - pad, before_w - pad, before_w + q - pad, pad)

    def layer(self, t: Conv2DTranspose, batch: int, in_channels: int, out_channels: int) -> Conv2D:
        s = self.stride
        h, w = (t.height - 1) * s + 1 + self.top + self.bottom, (t.width - 1) * s + 1 + self.left + self.right
        return Conv2D(batch, in_channels, h, w, out_channels, t.kernel_h, t.kernel_w, 1, self.pad)


def zero_insert_input(x: np.ndarray, zi: ZeroInsert) -> np.ndarray:
    """NCHW → the dilated input with the host's share of the border (VTA's LOAD pads the rest)."""
    n, c, h, w = x.shape
    s = zi.stride
    pads = ((zi.top, zi.bottom), (zi.left, zi.right))
    out = np.zeros((n, c, (h - 1) * s + 1 + sum(max(a, 0) for a in pads[0]),
                    (w - 1) * s + 1 + sum(max(a, 0) for a in pads[1])), dtype=x.dtype)
    out[:, :, max(zi.top, 0):max(zi.top, 0) + (h - 1) * s + 1:s, max(zi.left, 0):max(zi.left, 0) + (w - 1) * s + 1:s] = x
    # a negative border crops (padding > kernel - 1)
    return np.ascontiguousarray(out[:, :, max(-zi.top, 0):out.shape[2] - max(-zi.bottom, 0),
                                    max(-zi.left, 0):out.shape[3] - max(-zi.right, 0)])


def zero_insert_weight(w: np.ndarray) -> np.ndarray:
    """IOHW → OIHW flipped in space: the stride-1 conv's kernel."""
    return np.ascontiguousarray(w[:, :, ::-1, ::-1].transpose(1, 0, 2, 3))


@dataclass(frozen=True)
class Rewrite:
    """How an op's VTA layer relates to the op: `kind` one of TRANSFORMS (or None: as it stands),
    the op's own layer `original` and the VTA `layer` it runs as."""

    kind: str | None
    original: Layer
    layer: Layer
    wide_input: bool = False  # block_diagonal: more input channels than the usual packed layout has
    calls: int = 1            # the VTA layer runs this many times (a matmul: once per batch entry)

    @property
    def reshapes_input(self) -> bool:
        """The VTA input is not the op's input packed as usual (channels zero-padded to BLOCK_IN)
        but built by a host pass: space-to-depth, im2col, or a block-diagonal pack whose zero
        groups pad the channels past the next BLOCK_IN multiple (`wide_input`)."""
        return self.kind in (SPACE_TO_DEPTH, IM2COL, TOKENS, ZERO_INSERT) or self.wide_input

    def host_elems(self) -> tuple[int, int]:
        """(int8 elements the host reads, int8 elements it writes) to build the VTA input."""
        written = math.prod(self.layer.data_shape())
        if self.kind == IM2COL:
            g = ConvGeometry.of(self.original)
            return g.batch * g.channels * g.kernel ** 2 * g.out_height * g.out_width, written
        return math.prod(self.original.data_shape()), written

    def describe(self) -> str:
        if self.kind is None:
            return "as is"
        o, v = self.original, self.layer
        if self.kind == SPACE_TO_DEPTH:
            g = ConvGeometry.of(o)
            sg = S2DGeometry.of(g)
            return (f"space-to-depth {sg.block}x{sg.block}: {g.channels}x{g.height}x{g.width} ⊛ {g.kernel}x{g.kernel}/{g.stride} "
                    f"-> {g.channels * sg.block ** 2} (padded {v.in_channels}) channels ⊛ {sg.taps}x{sg.taps}/1 on "
                    f"{v.height}x{v.width}, pad 0")
        if self.kind == IM2COL:
            g = ConvGeometry.of(o)
            return (f"im2col: {g.channels}x{g.kernel}x{g.kernel} windows -> 1x1 conv over {g.channels * g.kernel ** 2} "
                    f"(padded {v.in_channels}) channels on {v.height}x{v.width}")
        if self.kind == TOKENS:
            return (f"tokens as pixels: dense {o.batch}x{o.in_features}->{o.out_features} as a 1x1 conv on "
                    f"{v.batch}x{v.height}x{v.width} pixels")
        if self.kind == ENTRIES:
            return f"entries as groups: {v.groups} x {o.spec} as one grouped 1x1 conv over {o.batch} pixels ({v.spec})"
        if self.kind == BLOCK_DIAGONAL:
            gp = GroupPack.from_layers(o, v)
            form = "dense conv" if v.groups == 1 else f"{v.groups} groups"
            return (f"block-diagonal weights: {gp.groups} groups of {gp.cg}->{gp.og} channels packed {gp.pack} "
                    f"per group -> {form} of {gp.pack * gp.cg}->{gp.pack * gp.og} channels ({v.spec}, MACs x{gp.pack})")
        if self.kind == ZERO_INSERT:
            zi = ZeroInsert.of(o)
            return (f"zero insertion: {o.in_channels}x{o.height}x{o.width} ⊛ᵀ {o.kernel_h}x{o.kernel_w}/{o.stride} "
                    f"pad {o.padding}{f' out-pad {o.output_padding}' if o.output_padding else ''} -> dilated "
                    f"{v.height}x{v.width} ⊛ flipped {o.kernel_h}x{o.kernel_w}/1 pad {zi.pad} ({v.spec})")
        return f"zero padding {o.spec} -> {v.spec}"

    # -- what the runner applies ------------------------------------------------------------
    def vta_operands(self, x: np.ndarray, w: np.ndarray, bias: np.ndarray | None = None,
                     residual: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
        """The op's int8 input, weight, int32 bias and residual in the VTA layer's shapes
        (`entries_as_groups`: x (E, M, K), w (E, N, K), the bias (N,) of every entry)."""
        v = self.layer
        if self.kind == ENTRIES:
            return (*self._grouped(x, w, bias), None)
        if self.kind == SPACE_TO_DEPTH:
            g = ConvGeometry.of(self.original)
            x, w = space_to_depth_input(x, g), space_to_depth_weight(w, g)
        elif self.kind == IM2COL:
            g = ConvGeometry.of(self.original)
            x, w = im2col_input(x, g), im2col_weight(w)
        elif self.kind == ZERO_INSERT:  # the weight comes IOHW, as the transposed conv's
            x, w = zero_insert_input(x, ZeroInsert.of(self.original)), zero_insert_weight(w)
        elif self.kind == BLOCK_DIAGONAL:  # the channels stay in place: only the weight changes
            w = block_diagonal_weight(w, GroupPack.from_layers(self.original, v))
        elif self.kind == TOKENS:
            x = tokens_to_pixels(x.reshape(-1, x.shape[-1]), v)
            w = w.reshape(w.shape[0], w.shape[1], 1, 1)
            residual = None if residual is None else tokens_to_pixels(residual.reshape(-1, residual.shape[-1]), v)
        if isinstance(v, Dense):
            # a linear over tokens (N, T, C) is the dense of N·T rows: rows flattened here, the
            # output reshaped back to the op's shape by the runner
            x = x.reshape(-1, x.shape[-1])
            residual = None if residual is None else residual.reshape(-1, residual.shape[-1])
            x = pad_axis(pad_axis(x, 0, v.batch), 1, v.in_features)
            w = pad_axis(pad_axis(w, 0, v.out_features), 1, v.in_features)
            out = v.out_features
        else:
            x = pad_axis(pad_axis(x, 0, v.batch), 1, v.in_channels)
            w = pad_axis(pad_axis(w, 0, v.out_channels), 1, v.in_channels // v.groups)
            out = v.out_channels
        if bias is not None:
            bias = pad_axis(np.asarray(bias), 0, out)
        if residual is not None:
            residual = pad_axis(pad_axis(residual, 0, v.batch), 1, out)
        return x, w, bias, residual

    def _grouped(self, x: np.ndarray, w: np.ndarray, bias: np.ndarray | None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        v, e = self.layer, self.layer.groups
        kp, npad = v.in_channels // e, v.out_channels // e
        x = pad_axis(x, 2, kp).transpose(0, 2, 1).reshape(1, e * kp, x.shape[1], 1)  # (1, E·K', M, 1)
        w = pad_axis(pad_axis(w, 1, npad), 2, kp).reshape(e * npad, kp, 1, 1)
        bias = None if bias is None else np.tile(pad_axis(np.asarray(bias), 0, npad), e)
        return pad_axis(np.ascontiguousarray(x), 0, v.batch), np.ascontiguousarray(w), bias

    def vta_output(self, y: np.ndarray) -> np.ndarray:
        """The VTA layer's output cut back to the op's (rows and channels; `entries_as_groups`:
        (E, M, N))."""
        o = self.original
        if self.kind == ENTRIES:  # (B, E·N', M, 1) -> (E, M, N)
            e = self.layer.groups
            return np.ascontiguousarray(y[0, :, :, 0].reshape(e, -1, o.batch)[:, :o.out_features].transpose(0, 2, 1))
        if self.kind == TOKENS:
            rows = np.asarray(y).transpose(0, 2, 3, 1).reshape(-1, y.shape[1])
            return np.ascontiguousarray(rows[:o.batch, :o.out_features])
        n, c = (o.batch, o.out_features) if isinstance(o, Dense) else (o.batch, o.out_channels)
        return np.ascontiguousarray(y[:n, :c])


def tokens_to_pixels(rows: np.ndarray, v: Conv2D) -> np.ndarray:
    """(rows, C) -> (BATCH, C, H, 1) NCHW pixels of the VTA conv `v`, zero rows appended."""
    n, h = v.batch, v.height
    x = pad_axis(rows, 0, n * h).reshape(n, h, rows.shape[1])
    return np.ascontiguousarray(x.transpose(0, 2, 1)[..., None])


def _tokens(layer: Dense, hw: HwConfig) -> Rewrite | None:
    """The 1x1-conv form of a dense of more rows than one BATCH block (tokens), else None."""
    if layer.batch <= hw.batch:
        return None
    h = -(-layer.batch // hw.batch)
    conv = Conv2D(hw.batch, round_up(layer.in_features, hw.block_in), h, 1, round_up(layer.out_features, hw.block_out),
                  1, 1, 1, 0)
    return Rewrite(TOKENS, layer, conv)


def matmul_entries(a: np.ndarray, b: np.ndarray, out_shape: tuple[int, ...], transpose_b: bool
                   ) -> tuple[np.ndarray, np.ndarray]:
    """A matmul's operands as its VTA dense calls take them, one per batch entry (the output's
    leading axes, broadcast and flattened): inputs (E, M, K) and weights (E, N, K) — the second
    operand's entry transposed to the dense weight's (out, in) unless `transpose_b` (it is then)."""
    lead = tuple(out_shape[:-2])
    a = np.broadcast_to(a, lead + a.shape[-2:]).reshape(-1, *a.shape[-2:])
    b = np.broadcast_to(b, lead + b.shape[-2:]).reshape(-1, *b.shape[-2:])
    return a, (b if transpose_b else np.swapaxes(b, -1, -2))


def rounding_bias(shift: int, out: int) -> np.ndarray | None:
    """The int32 bias that makes the epilogue's floor shift round half up, 2^(shift-1) on every
    output (None for shift 0): a matmul has no bias of its own, a conv's carries this offset."""
    return np.full(out, 1 << (shift - 1), np.int32) if shift > 0 else None


def entries_as_groups(layer: Dense, entries: int, hw: HwConfig) -> Rewrite | None:
    """`entries` calls of the dense `layer` as one grouped 1x1 conv (`ENTRIES`), None for one entry."""
    if entries < 2:
        return None
    k, n = round_up(layer.in_features, hw.block_in), round_up(layer.out_features, hw.block_out)
    conv = Conv2D(round_up(1, hw.batch), entries * k, layer.batch, 1, entries * n, 1, 1, 1, 0, 1, entries)
    return Rewrite(ENTRIES, layer, conv)


def _padded(layer: Layer, hw: HwConfig) -> Layer:
    b = round_up(layer.batch, hw.batch)
    if isinstance(layer, Dense):
        return Dense(b, round_up(layer.in_features, hw.block_in), round_up(layer.out_features, hw.block_out))
    g = layer.groups
    if g > 1:  # grouped: per-group channels must be block multiples; padding them changes the grouping
        return Conv2D(**{**layer._asdict(), "batch": b})
    return Conv2D(**{**layer._asdict(), "batch": b, "in_channels": round_up(layer.in_channels, hw.block_in),
                     "out_channels": round_up(layer.out_channels, hw.block_out)})


def _block_diagonal(layer: Conv2D, hw: HwConfig) -> Rewrite | None:
    """The block-diagonal pack of a grouped conv whose channels per group VTA's group template
    cannot take as they stand (None when it can, or when the pack would be the original)."""
    if layer.groups == 1 or layer.dilation != 1:
        return None
    gp = GroupPack.of(layer, hw.block_in, hw.block_out)
    if gp.pack == 1:
        return None
    cin, cout = gp.padded_groups * gp.cg, gp.padded_groups * gp.og
    v = Conv2D(**{**layer._asdict(), "batch": round_up(layer.batch, hw.batch), "in_channels": cin,
                  "out_channels": cout, "groups": gp.new_groups})
    return Rewrite(BLOCK_DIAGONAL, layer, v, wide_input=cin > round_up(layer.in_channels, hw.block_in))


def rewrites(layer: Layer, hw: HwConfig) -> list[Rewrite]:
    """The VTA forms of `layer` worth costing: as is (padded to BATCH / BLOCK multiples when it is
    not one already); a transposed conv as the stride-1 conv over its zero-inserted input only;
    for a conv whose input channels are not a BLOCK_IN multiple (a stem),
    space-to-depth (stride > 1) and im2col; for a grouped conv whose channels per group are not
    BLOCK multiples (depthwise, ResNeXt's 4-channel groups), the block-diagonal pack."""
    if isinstance(layer, Conv2DTranspose):  # only as a stride-1 conv: the runner has no transpose path
        v = ZeroInsert.of(layer).layer(layer, round_up(layer.batch, hw.batch), round_up(layer.in_channels, hw.block_in),
                                       round_up(layer.out_channels, hw.block_out))
        return [Rewrite(ZERO_INSERT, layer, v)]
    out: list[Rewrite] = []
    padded = _padded(layer, hw)
    out.append(Rewrite(None if padded == layer else PAD, layer, padded))
    if isinstance(layer, Conv2D) and (bd := _block_diagonal(layer, hw)) is not None:
        out.append(bd)
    if isinstance(layer, Dense) and (tk := _tokens(layer, hw)) is not None:
        out.append(tk)
    if (isinstance(layer, Conv2D) and layer.in_channels % hw.block_in and layer.groups == 1 and layer.dilation == 1
            and layer.kernel_h == layer.kernel_w and layer.kernel_h > 1):
        g = ConvGeometry.of(layer)
        b = round_up(g.batch, hw.batch)
        o = round_up(g.out_channels, hw.block_out)
        if g.stride > 1:
            sg = S2DGeometry.of(g)
            c = round_up(g.channels * sg.block ** 2, hw.block_in)
            out.append(Rewrite(SPACE_TO_DEPTH, layer,
                               Conv2D(b, c, sg.rows // sg.block, sg.cols // sg.block, o, sg.taps, sg.taps, 1, 0)))
        c = round_up(g.channels * g.kernel ** 2, hw.block_in)
        out.append(Rewrite(IM2COL, layer, Conv2D(b, c, g.out_height, g.out_width, o, 1, 1, 1, 0)))
    return out


__all__ = ["PAD", "SPACE_TO_DEPTH", "IM2COL", "BLOCK_DIAGONAL", "TOKENS", "ZERO_INSERT", "TRANSFORMS", "ZeroInsert",
           "tokens_to_pixels", "zero_insert_input", "zero_insert_weight", "GroupPack", "block_diagonal_weight", "ConvGeometry",
           "S2DGeometry", "Rewrite", "rewrites",
           "space_to_depth_input", "space_to_depth_weight", "im2col_input", "im2col_weight", "pad_axis", "round_up",
           "matmul_entries", "rounding_bias", "ENTRIES", "entries_as_groups"]
