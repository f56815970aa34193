"""A quantized network: int8 tensors with power-of-two scales, and the integer parameters of every op.

Every tensor t holds int8 values q with real value q·2^-f_t (`frac[t]` = f_t, its fractional
bits): symmetric, per tensor, a power of two so that VTA requantizes by an arithmetic shift (its
ALU has SHR, MIN, MAX, ADD and no multiplier in hardware, docs/vta.md §3.4). `codesign.network.qplan.plan` turns the
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

Per-output-channel weight exponents (`quantize(..., per_channel=True)`; per tensor stays the
default): conv2d / linear / conv_transpose2d weights of output channel c at their own f_w,c =
frac_bits(max |w_c|), never below the tensor's f_w (a zero channel keeps it) and capped so the
shift stays <= 15; bias c at f_x + f_w,c; shift c = f_x + f_w,c - f_out (f_out as per tensor,
so no other op's exponent changes). The int32 result of channel c is shifted by its own amount:
on VTA an ALU SHR whose amount is a vector held in ACC (loaded like the bias), which the lowering
(`codesign.lower`) does not emit yet -- so `QuantizedNetwork.fallback` keeps each such op's
per-tensor parameters, and the ops of VTA steps run with them (`per_tensor`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from codesign.network.graph import Network

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
    # per-output-channel exponents (None: per tensor): weight_fracs[c] and shifts[c] replace
    # weight_frac and shift for channel c (bias already at f_x + weight_fracs[c]); `shift` is then
    # the largest, what a single-shift epilogue would be costed with
    weight_fracs: np.ndarray | None = None
    shifts: np.ndarray | None = None
    mul: int = 1                       # avg pools: sum·mul before the shift
    in_shifts: tuple[int, ...] = ()    # add: left shifts aligning inputs; concat: right shifts
    table: np.ndarray | None = None    # unary ops: the int8 output of each int8 input, indexed by q + 128
    extra: Mapping[str, int] = field(default_factory=dict)  # kind-specific integer constants

    @property
    def out_shift(self) -> int | np.ndarray:
        """The requantizing shift: one amount, or one per output channel."""
        return self.shift if self.shifts is None else self.shifts


@dataclass(frozen=True, eq=False)
class QuantizedNetwork:
    network: Network
    frac: Mapping[str, int]            # tensor -> fractional bits (scale 2^-frac)
    params: Mapping[str, QParams] = field(default_factory=dict)
    # per-channel ops -> their per-tensor parameters (same output exponent: swapping one changes
    # no other op)
    fallback: Mapping[str, QParams] = field(default_factory=dict)

    def per_tensor(self, ops: Iterable[str]) -> QuantizedNetwork:
        """This network with `ops` (those with per-channel exponents) back on per-tensor ones."""
        swap = {name: self.fallback[name] for name in ops if name in self.fallback}
        if not swap:
            return self
        return replace(self, params={**self.params, **swap},
                       fallback={k: v for k, v in self.fallback.items() if k not in swap})

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
            if p.shifts is not None:
                out[-1].update(shifts=[int(s) for s in p.shifts], weight_fracs=[int(f) for f in p.weight_fracs])
        return out


def pool_factors(count: int) -> tuple[int, int]:
    """(mul, shift) dividing a window sum by `count`."""
    if count & (count - 1) == 0:
        return 1, count.bit_length() - 1
    return int(round(2 ** RECIPROCAL_BITS / count)), RECIPROCAL_BITS
