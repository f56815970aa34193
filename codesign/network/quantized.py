"""A quantized network: int8 tensors with power-of-two scales, and the integer parameters of every op.

Every tensor t holds int8 values q with real value q·2^-f_t (`frac[t]` = f_t, its fractional
bits): symmetric, per tensor, a power of two so that VTA requantizes by an arithmetic shift (its
ALU has SHR, MIN, MAX, ADD and no multiplier in hardware, docs/vta.md §3.4). `plan` turns the
calibrated ranges (max |x| per tensor, from the PT2E observers) into exponents, shifts and integer
weights; `codesign.network.reference.run_int` defines what the integer network computes.

Rules (f = fractional bits; f is the largest with max|x|·2^f <= 127):
- graph input: its observed range.
- conv2d / linear: weights int8 at f_w; bias int32 at f_x + f_w; output f_out from the range
  observed after the op, or after the ReLU that alone consumes it (the clip to int8 commutes with
  ReLU); shift = f_x + f_w - f_out, kept in [0, 15] (a shift >= 16 misbehaves on the HLS ALU,
  docs/vta.md §3.4: f_out is lowered to f_x + f_w, f_w lowered when the shift would exceed 15).
  Round half up by adding 2^(shift-1) to the bias, so the op stays int32 accumulate + bias, SHR,
  clip.
- relu, clamp, max pool, flatten: the input's f (int8 max/reshape do not change scale).
- add: both inputs shifted left to the finer f_m = max(f_a, f_b), summed in int32, then
  (sum + 2^(s-1)) >> s with s = f_m - f_out >= 0, clip.
- avg pool, adaptive avg pool: output keeps the input's f. A window of 2^p elements is an int32
  sum then (sum + 2^(p-1)) >> p. Other windows (3x3, ResNet's 7x7 global pool) need a multiply:
  (sum·m + 2^15) >> 16 with m = round(2^16 / count) -- exact to 1/2^16 of the mean; VTA's ALU has
  no MUL in hardware, so these pools are CPU work (or need the functional simulator's MUL).
- concat: the coarsest input f; finer inputs are shifted right with rounding.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from codesign.errors import ConfigError
from codesign.network.graph import Network, Op

MAX_SHIFT = 15        # SHR amounts the HLS ALU executes correctly (docs/vta.md §3.4)
RECIPROCAL_BITS = 16  # fixed-point bits of 1/count for pools whose window is not a power of two
INT32 = (-(2 ** 31), 2 ** 31 - 1)


def frac_bits(amax: float) -> int:
    """The largest f with amax·2^f <= 127 (a zero or non-finite range counts as 1.0)."""
    a = float(amax)
    if not math.isfinite(a) or a <= 0:
        a = 1.0
    f = math.floor(math.log2(127.0 / a))
    while a * 2.0 ** (f + 1) <= 127.0:  # log2 rounding at exact powers
        f += 1
    while a * 2.0 ** f > 127.0:
        f -= 1
    return f


def quantize_array(x: np.ndarray, frac: int) -> np.ndarray:
    """float -> int8: round half to even of x·2^f, clipped to [-128, 127]."""
    return np.clip(np.rint(np.asarray(x, dtype=np.float64) * 2.0 ** frac), -128, 127).astype(np.int8)


def dequantize(q: np.ndarray, frac: int) -> np.ndarray:
    return np.asarray(q, dtype=np.float64) * 2.0 ** -frac


@dataclass(frozen=True, eq=False)
class QParams:
    """Integer parameters of one op (unused fields stay at their defaults)."""

    weight: np.ndarray | None = None   # int8 (conv2d OIHW, linear (out, in))
    weight_frac: int = 0
    bias: np.ndarray | None = None     # int32 at f_x + f_w, with the rounding offset 2^(shift-1)
    shift: int = 0                     # arithmetic right shift of the int32 result
    mul: int = 1                       # avg pools: sum·mul before the shift
    in_shifts: tuple[int, ...] = ()    # add: left shifts aligning inputs; concat: right shifts


@dataclass(frozen=True, eq=False)
class QuantizedNetwork:
    network: Network
    frac: Mapping[str, int]            # tensor -> fractional bits (scale 2^-frac)
    params: Mapping[str, QParams] = field(default_factory=dict)

    def scale(self, tensor: str) -> float:
        return 2.0 ** -self.frac[tensor]

    def rows(self) -> list[dict]:
        """Per op: its output's fractional bits and its shifts (JSON-ready)."""
        out = []
        for op in self.network.ops:
            p = self.params.get(op.name, QParams())
            out.append({"name": op.name, "kind": op.kind, "frac": self.frac[op.name], "shift": p.shift,
                        "mul": p.mul, "weight_frac": p.weight_frac if p.weight is not None else None,
                        "in_shifts": list(p.in_shifts)})
        return out


def _sole_relu(net: Network, op: Op) -> Op | None:
    users = net.consumers(op.name)
    return users[0] if len(users) == 1 and users[0].kind == "relu" else None


def _observed(net: Network, op: Op, amax: Mapping[str, float]) -> float | None:
    relu = _sole_relu(net, op)
    if relu is not None and relu.name in amax:
        return amax[relu.name]
    return amax.get(op.name)


def _need(value: float | None, op: Op, what: str) -> float:
    if value is None:
        raise ConfigError(f"no calibrated range for the {what} of {op.where()}")
    return value


def _pool_factors(count: int) -> tuple[int, int]:
    """(mul, shift) dividing a window sum by `count`."""
    if count & (count - 1) == 0:
        return 1, count.bit_length() - 1
    return int(round(2 ** RECIPROCAL_BITS / count)), RECIPROCAL_BITS


def plan(net: Network, amax: Mapping[str, float]) -> QuantizedNetwork:
    """Exponents and integer parameters from calibrated ranges: `amax[tensor]` = max |x| observed
    for graph inputs and op outputs, `amax["<op>.weight"]` for weights (module rules above)."""
    if not net.has_weights:
        raise ConfigError(f"network {net.name!r} has no weights (built on the meta device): build it with weights")
    frac: dict[str, int] = {}
    params: dict[str, QParams] = {}
    for name, _ in net.inputs:
        frac[name] = frac_bits(_need(amax.get(name), net.ops[0], f"graph input {name!r}"))
    for op in net.ops:
        fin = [frac[t] for t in op.inputs]
        if op.kind in ("conv2d", "linear"):
            fw = frac_bits(_need(amax.get(f"{op.name}.weight"), op, "weight"))
            fout = min(frac_bits(_need(_observed(net, op, amax), op, "output")), fin[0] + fw)
            fw = min(fw, fout + MAX_SHIFT - fin[0])
            shift = fin[0] + fw - fout
            bias = np.rint(op.bias.astype(np.float64) * 2.0 ** (fin[0] + fw)) + (1 << shift - 1 if shift else 0)
            params[op.name] = QParams(quantize_array(op.weight, fw), fw, np.clip(bias, *INT32).astype(np.int32), shift)
            frac[op.name] = fout
        elif op.kind == "add":
            fm = max(fin)
            fout = min(frac_bits(_need(_observed(net, op, amax), op, "output")), fm)
            params[op.name] = QParams(shift=fm - fout, in_shifts=tuple(fm - f for f in fin))
            frac[op.name] = fout
        elif op.kind in ("avg_pool2d", "adaptive_avg_pool2d"):
            if op.kind == "avg_pool2d":
                count = int(op.attrs["divisor"])
            else:
                h, w = net.shape(op.inputs[0])[2:]
                oh, ow = op.attrs["output_size"]
                count = (h // oh) * (w // ow)
            mul, shift = _pool_factors(count)
            params[op.name] = QParams(shift=shift, mul=mul)
            frac[op.name] = fin[0]
        elif op.kind == "concat":
            fout = min(fin)
            params[op.name] = QParams(in_shifts=tuple(f - fout for f in fin))
            frac[op.name] = fout
        else:  # relu, clamp, max_pool2d, flatten
            frac[op.name] = fin[0]
    return QuantizedNetwork(net, frac, params)
