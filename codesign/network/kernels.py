"""NumPy kernels the integer and float references share: window views, convolution sums, the
int32 wrap and requantization. Pure NumPy; the op kinds (`codesign.network.kinds`) compose them."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

INT8 = (-128, 127)


def out_size(size: int, k: int, s: int, p: int, d: int) -> int:
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def windows(x: np.ndarray, kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int],
            dilation: Sequence[int], out_hw: Sequence[int], pad_value: float) -> np.ndarray:
    """(N, C, OH, OW, KH, KW) view of the padded input's windows (extra right/bottom padding
    where ceil_mode asks for a partial last window)."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw), (oh, ow) = kernel, stride, padding, dilation, out_hw
    eh, ew = (kh - 1) * dh + 1, (kw - 1) * dw + 1
    extra_h = max(0, (oh - 1) * sh + eh - (x.shape[2] + 2 * ph))
    extra_w = max(0, (ow - 1) * sw + ew - (x.shape[3] + 2 * pw))
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph + extra_h), (pw, pw + extra_w)), constant_values=pad_value)
    win = np.lib.stride_tricks.sliding_window_view(xp, (eh, ew), axis=(2, 3))
    return win[:, :, ::sh, ::sw, ::dh, ::dw][:, :, :oh, :ow]


def window_max(x: np.ndarray, kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int],
               dilation: Sequence[int], out_hw: Sequence[int], pad_value: float) -> np.ndarray:
    """The max of every window of `windows(...)`, as (N, C, OH, OW): one elementwise maximum per
    kernel offset over strided slices (a max over the 6-D window view is ~10x slower in NumPy)."""
    win = windows(x, kernel, stride, padding, dilation, out_hw, pad_value)
    out = win[..., 0, 0].copy()
    for i in range(win.shape[4]):
        for j in range(win.shape[5]):
            np.maximum(out, win[..., i, j], out=out)
    return out


def conv2d_sums(x: np.ndarray, w: np.ndarray, stride: Sequence[int], padding: Sequence[int],
                dilation: Sequence[int], groups: int) -> np.ndarray:
    """Convolution sums in float64 (NCHW x OIHW). For int8 operands they are exact integers:
    |int8·int8| <= 2^14 and the C·KH·KW-term sums stay far below 2^53."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    oh = out_size(h, kh, stride[0], padding[0], dilation[0])
    ow = out_size(wd, kw, stride[1], padding[1], dilation[1])
    win = windows(x.astype(np.float64), (kh, kw), stride, padding, dilation, (oh, ow), 0.0)
    og = o // groups
    out = np.empty((n, o, oh, ow), dtype=np.float64)
    rows = max(1, (1 << 22) // max(1, ow * cg * kh * kw))  # ~32 MiB of columns per chunk
    for g in range(groups):
        wmat = w[g * og:(g + 1) * og].reshape(og, -1).astype(np.float64)
        for b in range(n):
            for r0 in range(0, oh, rows):
                blk = win[b, g * cg:(g + 1) * cg, r0:r0 + rows]
                cols = blk.transpose(1, 2, 0, 3, 4).reshape(-1, cg * kh * kw)
                out[b, g * og:(g + 1) * og, r0:r0 + rows] = (cols @ wmat.T).T.reshape(og, -1, ow)
    return out


def conv_transpose2d_sums(x: np.ndarray, w: np.ndarray, stride: Sequence[int], padding: Sequence[int],
                          output_padding: Sequence[int] = (0, 0), dilation: Sequence[int] = (1, 1)) -> np.ndarray:
    """Transposed convolution sums in float64 (NCHW x IOHW, groups 1), as a stride-1 conv: the input
    dilated by the stride (stride-1 zeros between pixels), padded by dilation·(k-1)-padding on each
    side (+ output_padding bottom/right; a negative pad crops) and convolved with the kernel flipped
    in space and transposed to OIHW. Exact integers for int8 operands, as `conv2d_sums`."""
    n, c, h, wd = x.shape
    (sh, sw), (ph, pw), (oh, ow), (dh, dw) = stride, padding, output_padding, dilation
    _, _, kh, kw = w.shape
    xd = np.zeros((n, c, (h - 1) * sh + 1, (wd - 1) * sw + 1), np.float64)
    xd[:, :, ::sh, ::sw] = x
    pads = ((dh * (kh - 1) - ph, dh * (kh - 1) - ph + oh), (dw * (kw - 1) - pw, dw * (kw - 1) - pw + ow))
    xd = np.pad(xd, ((0, 0), (0, 0)) + tuple((max(a, 0), max(b, 0)) for a, b in pads))
    crop = tuple(slice(max(-a, 0), size - max(-b, 0)) for (a, b), size in zip(pads, xd.shape[2:]))
    flipped = np.ascontiguousarray(w[:, :, ::-1, ::-1].transpose(1, 0, 2, 3))
    return conv2d_sums(xd[:, :, crop[0], crop[1]], flipped, (1, 1), (0, 0), (dh, dw), 1)


def wrap32(v: np.ndarray) -> np.ndarray:
    """Exact integer float64/int64 values as int32 with two's-complement wrap-around (VTA's ACC)."""
    return np.rint(v).astype(np.int64).astype(np.int32)


def requant(acc: np.ndarray, shift: int | np.ndarray, axis: int = 1) -> np.ndarray:
    """int32 >> shift (arithmetic), clipped to int8. `shift` is one amount, or one per output
    channel (a vector along `axis` of `acc`: per-channel weight exponents)."""
    return np.clip(acc.astype(np.int32) >> channel_shifts(shift, acc.ndim, axis), *INT8).astype(np.int8)


def channel_shifts(shift: int | np.ndarray, ndim: int, axis: int) -> np.ndarray:
    """`shift` as int32 broadcasting against an `ndim`-D tensor: a scalar, or a vector placed on `axis`."""
    s = np.asarray(shift, dtype=np.int32)
    if s.ndim == 0:
        return s
    shape = [1] * ndim
    shape[axis] = s.size
    return s.reshape(shape)


def round_shift(v: np.ndarray, shift: int) -> np.ndarray:
    """int32 (v + 2^(shift-1)) >> shift: a right shift rounding half up (shift 0: v)."""
    v = v.astype(np.int32)
    return (v + np.int32(1 << (shift - 1))) >> np.int32(shift) if shift > 0 else v


def clip8(v: np.ndarray) -> np.ndarray:
    return np.clip(v, *INT8).astype(np.int8)


def conv2d_int(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, shift: int | np.ndarray, stride: Sequence[int] = (1, 1),
               padding: Sequence[int] = (0, 0), dilation: Sequence[int] = (1, 1), groups: int = 1) -> np.ndarray:
    """int8 conv: int32 accumulate (+ int32 bias), arithmetic >> shift (one, or one per output
    channel), clip to int8."""
    acc = wrap32(conv2d_sums(x, w, stride, padding, dilation, groups))
    if bias is not None:
        acc = acc + bias.astype(np.int32)[None, :, None, None]
    return requant(acc, shift)


def linear_int(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, shift: int | np.ndarray) -> np.ndarray:
    acc = wrap32(x.astype(np.float64) @ w.astype(np.float64).T)
    if bias is not None:
        acc = acc + bias.astype(np.int32)
    return requant(acc, shift, axis=-1)


__all__ = ["INT8", "out_size", "windows", "conv2d_sums", "conv_transpose2d_sums", "wrap32", "requant", "channel_shifts",
           "round_shift", "clip8", "conv2d_int", "linear_int"]
