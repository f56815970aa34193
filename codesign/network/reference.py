"""NumPy references of a whole network: the integer network (bit-exact semantics VTA and the CPU
must match) and the float network (the module's arithmetic on the IR, for agreement figures).

Integer semantics (`codesign.network.quantized` says how exponents are chosen):
- conv2d / linear: int8 x int8 products accumulated in int32 (wrapping, as VTA's ACC), + int32
  bias, arithmetic shift right, clip to [-128, 127];
- relu: max(q, 0) in int8; clamp (relu6, hardtanh): clip to its bounds rounded to the tensor's
  scale; max pool: max over the window in int8 (padding is -128, below every value);
- add: int32 (a << la) + (b << lb), + 2^(s-1), >> s, clip;
- avg pool / adaptive avg pool: int32 window sum (zero padding counted, as count_include_pad),
  times `mul`, + 2^(s-1), >> s, clip;
- flatten: reshape; concat: each input (q + 2^(r-1)) >> r to the common exponent, then concatenate.
The batch is the inputs' (the IR's shapes carry the example batch).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from codesign.errors import ConfigError
from codesign.network.graph import Network, Op
from codesign.network.quantized import QParams, QuantizedNetwork, dequantize, quantize_array


def _out_size(size: int, k: int, s: int, p: int, d: int) -> int:
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def _windows(x: np.ndarray, kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int],
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


def conv2d_sums(x: np.ndarray, w: np.ndarray, stride: Sequence[int], padding: Sequence[int],
                dilation: Sequence[int], groups: int) -> np.ndarray:
    """Convolution sums in float64 (NCHW x OIHW). For int8 operands they are exact integers:
    |int8·int8| <= 2^14 and the C·KH·KW-term sums stay far below 2^53."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    oh = _out_size(h, kh, stride[0], padding[0], dilation[0])
    ow = _out_size(wd, kw, stride[1], padding[1], dilation[1])
    win = _windows(x.astype(np.float64), (kh, kw), stride, padding, dilation, (oh, ow), 0.0)
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


def _wrap32(v: np.ndarray) -> np.ndarray:
    """Exact integer float64/int64 values as int32 with two's-complement wrap-around (VTA's ACC)."""
    return np.rint(v).astype(np.int64).astype(np.int32)


def _requant(acc: np.ndarray, shift: int) -> np.ndarray:
    return np.clip(acc.astype(np.int32) >> np.int32(shift), -128, 127).astype(np.int8)


def conv2d_int(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, shift: int, stride: Sequence[int] = (1, 1),
               padding: Sequence[int] = (0, 0), dilation: Sequence[int] = (1, 1), groups: int = 1) -> np.ndarray:
    """int8 conv: int32 accumulate (+ int32 bias), arithmetic >> shift, clip to int8."""
    acc = _wrap32(conv2d_sums(x, w, stride, padding, dilation, groups))
    if bias is not None:
        acc = acc + bias.astype(np.int32)[None, :, None, None]
    return _requant(acc, shift)


def linear_int(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, shift: int) -> np.ndarray:
    acc = _wrap32(x.astype(np.float64) @ w.astype(np.float64).T)
    if bias is not None:
        acc = acc + bias.astype(np.int32)
    return _requant(acc, shift)


def _round_shift(v: np.ndarray, shift: int) -> np.ndarray:
    v = v.astype(np.int32)
    return (v + np.int32(1 << (shift - 1))) >> np.int32(shift) if shift > 0 else v


def _pool_geometry(op: Op, x: np.ndarray) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int]]:
    """(kernel, stride, padding) of an avg pool or adaptive avg pool op on input `x`."""
    if op.kind == "adaptive_avg_pool2d":
        oh, ow = op.attrs["output_size"]
        k = (x.shape[2] // oh, x.shape[3] // ow)
        return k, k, (0, 0)
    return tuple(op.attrs["kernel"]), tuple(op.attrs["stride"]), tuple(op.attrs["padding"])


def _pool_out(op: Op, x: np.ndarray) -> tuple[int, int]:
    if op.kind == "adaptive_avg_pool2d":
        return tuple(op.attrs["output_size"])
    if op.kind == "max_pool2d" and not op.attrs.get("ceil_mode"):
        k, s, p, d = op.attrs["kernel"], op.attrs["stride"], op.attrs["padding"], op.attrs["dilation"]
        return _out_size(x.shape[2], k[0], s[0], p[0], d[0]), _out_size(x.shape[3], k[1], s[1], p[1], d[1])
    if op.kind == "avg_pool2d":
        k, s, p = op.attrs["kernel"], op.attrs["stride"], op.attrs["padding"]
        return _out_size(x.shape[2], k[0], s[0], p[0], 1), _out_size(x.shape[3], k[1], s[1], p[1], 1)
    return op.shape[2], op.shape[3]  # ceil_mode max pool: the exported graph's size


def _reshape(op: Op, x: np.ndarray) -> np.ndarray:
    return x.reshape((x.shape[0],) + tuple(op.shape[1:]))


def _int_op(op: Op, p: QParams, xs: list[np.ndarray], frac: int = 0) -> np.ndarray:
    """One op of the integer network (`frac`: its output's fractional bits, for clamp bounds)."""
    a = op.attrs
    if op.kind == "conv2d":
        return conv2d_int(xs[0], p.weight, p.bias, p.shift, a["stride"], a["padding"], a["dilation"], a["groups"])
    if op.kind == "linear":
        return linear_int(xs[0], p.weight, p.bias, p.shift)
    if op.kind == "relu":
        return np.maximum(xs[0], np.int8(0))
    if op.kind == "clamp":
        lo, hi = (d if v is None else int(np.clip(np.rint(v * 2.0 ** frac), -128, 127))
                  for v, d in ((a["min"], -128), (a["max"], 127)))
        return np.clip(xs[0], lo, max(lo, hi)).astype(np.int8)
    if op.kind == "add":
        total = sum(x.astype(np.int32) << np.int32(s) for x, s in zip(xs, p.in_shifts))
        return np.clip(_round_shift(total, p.shift), -128, 127).astype(np.int8)
    if op.kind == "max_pool2d":
        win = _windows(xs[0], a["kernel"], a["stride"], a["padding"], a["dilation"], _pool_out(op, xs[0]), -128)
        return win.max(axis=(4, 5)).astype(np.int8)
    if op.kind in ("avg_pool2d", "adaptive_avg_pool2d"):
        k, s, pad = _pool_geometry(op, xs[0])
        win = _windows(xs[0].astype(np.int32), k, s, pad, (1, 1), _pool_out(op, xs[0]), 0)
        total = win.sum(axis=(4, 5), dtype=np.int32) * np.int32(p.mul)
        return _reshape(op, np.clip(_round_shift(total, p.shift), -128, 127).astype(np.int8))
    if op.kind == "flatten":
        return _reshape(op, xs[0])
    if op.kind == "concat":
        parts = [_round_shift(x, s).astype(np.int8) for x, s in zip(xs, p.in_shifts)]
        return np.concatenate(parts, axis=a["dim"])
    raise ConfigError(f"{op.where()}: no integer kernel for kind {op.kind!r}")


def _float_op(op: Op, xs: list[np.ndarray]) -> np.ndarray:
    a = op.attrs
    if op.kind == "conv2d":
        y = conv2d_sums(xs[0], op.weight, a["stride"], a["padding"], a["dilation"], a["groups"])
        return y + op.bias.astype(np.float64)[None, :, None, None]
    if op.kind == "linear":
        return xs[0] @ op.weight.astype(np.float64).T + op.bias.astype(np.float64)
    if op.kind == "relu":
        return np.maximum(xs[0], 0.0)
    if op.kind == "clamp":
        return np.clip(xs[0], -np.inf if a["min"] is None else a["min"], np.inf if a["max"] is None else a["max"])
    if op.kind == "add":
        return xs[0] + xs[1]
    if op.kind == "max_pool2d":
        win = _windows(xs[0], a["kernel"], a["stride"], a["padding"], a["dilation"], _pool_out(op, xs[0]), -np.inf)
        return win.max(axis=(4, 5))
    if op.kind in ("avg_pool2d", "adaptive_avg_pool2d"):
        k, s, pad = _pool_geometry(op, xs[0])
        win = _windows(xs[0], k, s, pad, (1, 1), _pool_out(op, xs[0]), 0.0)
        count = a.get("divisor", k[0] * k[1])
        return _reshape(op, win.sum(axis=(4, 5)) / count)
    if op.kind == "flatten":
        return _reshape(op, xs[0])
    if op.kind == "concat":
        return np.concatenate(xs, axis=a["dim"])
    raise ConfigError(f"{op.where()}: no float kernel for kind {op.kind!r}")


def _bind(net: Network, inputs: Any) -> list[np.ndarray]:
    arrays = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    if len(arrays) != len(net.inputs):
        raise ConfigError(f"network {net.name!r} takes {len(net.inputs)} input(s), got {len(arrays)}")
    out = []
    for arr, (name, shape) in zip(arrays, net.inputs):
        arr = np.asarray(arr)
        if arr.shape[1:] != tuple(shape[1:]):
            raise ConfigError(f"network {net.name!r}: input {name!r} has shape {arr.shape}, expected "
                              f"(N, {', '.join(map(str, shape[1:]))})")
        out.append(arr)
    return out


def int_op(qnet: QuantizedNetwork, op: Op, xs: list[np.ndarray]) -> np.ndarray:
    """One op of the integer network on int8 inputs `xs` (what a CPU step of a placed network runs)."""
    return _int_op(op, qnet.params.get(op.name, QParams()), xs, qnet.frac[op.name])


def run_int(qnet: QuantizedNetwork, inputs: Any, quantized: bool = False) -> dict[str, np.ndarray]:
    """Every tensor of the integer network (int8) on `inputs` (float arrays, quantized here with
    the inputs' exponents; or int8 arrays when `quantized`)."""
    net = qnet.network
    env: dict[str, np.ndarray] = {}
    for arr, (name, _) in zip(_bind(net, inputs), net.inputs):
        env[name] = arr.astype(np.int8) if quantized else quantize_array(arr, qnet.frac[name])
    for op in net.ops:
        env[op.name] = _int_op(op, qnet.params.get(op.name, QParams()), [env[t] for t in op.inputs], qnet.frac[op.name])
    return env


def run_float(net: Network, inputs: Any) -> dict[str, np.ndarray]:
    """Every tensor of the float network (float64) on `inputs`."""
    if not net.has_weights:
        raise ConfigError(f"network {net.name!r} has no weights (built on the meta device)")
    env = {name: arr.astype(np.float64) for arr, (name, _) in zip(_bind(net, inputs), net.inputs)}
    for op in net.ops:
        env[op.name] = _float_op(op, [env[t] for t in op.inputs])
    return env


def int_outputs(qnet: QuantizedNetwork, inputs: Any) -> list[np.ndarray]:
    """The network's outputs, dequantized (float64)."""
    env = run_int(qnet, inputs)
    return [dequantize(env[t], qnet.frac[t]) for t in qnet.network.outputs]


def agreement(reference: np.ndarray, quantized: np.ndarray, labels: np.ndarray | None = None) -> dict[str, Any]:
    """Integer vs float outputs (N, classes): top-1 agreement, max abs error, accuracies with labels."""
    ref, q = np.asarray(reference, dtype=np.float64), np.asarray(quantized, dtype=np.float64)
    out: dict[str, Any] = {"samples": int(ref.shape[0]), "max_abs_error": float(np.max(np.abs(ref - q))),
                           "output_range": float(np.max(np.abs(ref)))}
    if ref.ndim == 2 and ref.shape[1] > 1:
        top_ref, top_q = ref.argmax(1), q.argmax(1)
        out["top1_agreement"] = float(np.mean(top_ref == top_q))
        if labels is not None:
            out["accuracy_float"] = float(np.mean(top_ref == labels))
            out["accuracy_int"] = float(np.mean(top_q == labels))
    return out
