"""Roofline bounds of a layer on a VTA hardware config.

* compute bound: every MAC whose input is real data on the GEMM core at BATCH*BLOCK_IN*BLOCK_OUT
  MACs per cycle (one micro-op per cycle, docs/vta.md §4.3), i.e. real MACs /
  (BATCH*BLOCK_IN*BLOCK_OUT) cycles. A product with a tap on the conv's zero padding (or a
  transposed conv's inserted zeros) adds nothing and a schedule may skip it (the `vta` family's
  `pad_skip` kernel, the transposed conv's zero-skipping kernel), so counting every MAC of the
  padded conv would not be a bound (`real_macs`);
* memory bound: the minimum DRAM traffic -- each input element some output reads and each
  weight of a kernel tap that meets real input, once; the output written once; the fewest
  micro-ops any schedule needs (`min_bytes`) -- over the ONE shared memory port (docs/vta.md
  §4.2) at `bus_bytes` per cycle times the best port efficiency the timing model gives a footprint
  that large (`timing.port_efficiency`, the cycle model's formula; micro-ops go through the
  compute module's narrower uop port, §4.5). A strided 1x1 conv reads a quarter of its input, so
  counting the whole packed input would not be a bound;
* attainable bound = max of the two. `attained_fraction` = bound / achieved (<= 1).

Seconds: `bound_seconds` is device time at the config clock; `bound_call_seconds` adds the
unavoidable host overhead of one operator call with the smallest possible program and the
layer's own input/output buffers (the per-byte terms of a profile), through
`timing.predict_seconds` (the one place cycles become operator seconds), so it is comparable
with `run_layer(...).seconds`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from codesign.evaluate.run import layer_io_bytes
from codesign.hw.config import HwConfig
from codesign.vta import timing

# Fewest micro-ops of any program: one each for reset, GEMM and the three ALU ops (docs/vta.md §7.3).
MIN_KERNEL_UOPS = 1 + 1 + 3
# Fewest instructions of any program: INP + WGT loads, a LOAD UOP per kernel, reset GEMM, GEMM,
# 3 ALU, STORE, and the final load no-op, compute no-op and FINISH (docs/vta.md §5.4 Synchronize).
MIN_INSNS = 2 + MIN_KERNEL_UOPS + 1 + 1 + 3 + 1 + 3


@dataclass(frozen=True)
class Roofline:
    macs: int
    min_bytes: int  # DRAM bytes: inputs + weights + output + micro-ops
    compute_cycles: float
    memory_cycles: float
    bound_cycles: float
    bound_seconds: float  # device seconds at the config clock
    bound_call_seconds: float  # + minimum host overhead of one operator call
    bound: str  # "compute" | "memory"
    arithmetic_intensity: float  # MACs per DRAM byte
    real_macs: int = 0  # MACs whose input tap is real data (what the compute bound counts)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _touched(out: int, k: int, stride: int, dilation: int, pad: int, size: int, step: int) -> tuple[int, int]:
    """Along one axis: (input positions any output window covers, kernel taps that cover any).
    Positions are 0..size-1 of the (possibly dilated) input; only multiples of `step` hold real
    data (a transposed conv's inserted zeros are not data a schedule must read)."""
    rows: set[int] = set()
    taps = 0
    for kk in range(k):
        hit = {p for p in range(kk * dilation - pad, (out - 1) * stride + kk * dilation - pad + 1, stride)
               if 0 <= p < size and p % step == 0}
        rows |= hit
        taps += bool(hit)
    return len(rows), taps


def _pairs(out: int, k: int, stride: int, dilation: int, pad: int, size: int, step: int) -> int:
    """Along one axis: (output position, kernel tap) pairs whose input position holds data."""
    o = np.arange(out)[:, None]
    p = o * stride + np.arange(k)[None, :] * dilation - pad
    return int(((p >= 0) & (p < size) & (p % step == 0)).sum())


def real_macs(layer: Any) -> int:
    """MACs whose input is real data: the layer's MACs without the products with a tap on the zero
    padding or on a transposed conv's inserted zeros (dense: every MAC)."""
    if layer.kind == "dense":
        return int(layer.macs)
    view, step = (layer.schedule_view(), layer.stride) if layer.kind == "conv2d_transpose" else (layer, 1)
    h = _pairs(view.out_height, view.kernel_h, view.stride, view.dilation, view.padding, view.height, step)
    w = _pairs(view.out_width, view.kernel_w, view.stride, view.dilation, view.padding, view.width, step)
    return int(view.batch * view.out_channels * (view.in_channels // view.groups) * h * w)


def min_bytes(layer: Any, hw: HwConfig) -> tuple[int, int]:
    """(data bytes, micro-op bytes) of the minimum DRAM traffic of ANY schedule: each input
    element some output reads (a strided or cropped conv skips rows and columns; padding is made
    on chip, docs/vta.md §4.6; a transposed conv's inserted zeros are never needed), each weight of
    a kernel tap that meets real input, each output element once. int8: one byte per element. A
    DMA moves whole BATCH x BLOCK_IN vectors, and every channel block of a touched pixel is read,
    so counting touched pixels x channels x batch is exact for the packed layout."""
    def nbytes(shape: tuple[int, ...]) -> int:
        return int(math.prod(shape))

    out = nbytes(layer.packed_output_shape(hw))
    if layer.kind == "dense":  # every element is read
        data_in, weights = nbytes(layer.packed_data_shape(hw)), nbytes(layer.packed_weight_shape(hw))
    else:
        # a transposed conv runs as a stride-1 conv over its dilated input, whose real rows and
        # columns are every `stride`-th (Conv2DTranspose.schedule_view)
        view, step = (layer.schedule_view(), layer.stride) if layer.kind == "conv2d_transpose" else (layer, 1)
        h, kh = _touched(view.out_height, view.kernel_h, view.stride, view.dilation, view.padding, view.height, step)
        w, kw = _touched(view.out_width, view.kernel_w, view.stride, view.dilation, view.padding, view.width, step)
        data_in = view.batch * view.in_channels * h * w
        weights = view.out_channels * (view.in_channels // view.groups) * kh * kw
    return data_in + weights + out, MIN_KERNEL_UOPS * hw.uop_elem_bytes


def roofline(layer: Any, hw: HwConfig, params: timing.TimingParams | None = None) -> Roofline:
    hw = HwConfig.resolve(hw)
    params = timing.default_params() if params is None else params
    real = real_macs(layer)
    compute = real / hw.macs_per_cycle
    data, uop = min_bytes(layer, hw)
    # The same port model time_program uses (cache-hit mix over the operator's DRAM footprint).
    # A schedule's footprint (the bytes its DMAs span) is at least the minimum traffic, so the
    # port is at best as efficient as at that footprint or, if a profile makes DDR the faster
    # path, as for an unbounded one.
    eff = max(timing.port_efficiency(hw, data + uop, params), timing.port_efficiency(hw, math.inf, params))
    uop_port = max(1.0, min(params.uop_port_bytes, hw.bus_bytes))
    memory = (data / hw.bus_bytes + uop / uop_port) / eff
    bound = max(compute, memory)
    return Roofline(
        macs=int(layer.macs), min_bytes=data + uop, compute_cycles=float(compute),
        memory_cycles=float(memory), bound_cycles=float(bound),
        bound_seconds=bound / hw.clock_hz,
        bound_call_seconds=timing.predict_seconds(bound, MIN_INSNS, hw, params, *layer_io_bytes(layer)),
        bound="compute" if compute >= memory else "memory",
        arithmetic_intensity=layer.macs / (data + uop), real_macs=real,
    )


def attained_fraction(layer: Any, hw: HwConfig, seconds_or_cycles: float | int,
                      params: timing.TimingParams | None = None) -> float:
    """Fraction of the attainable bound a schedule reaches: an int is device cycles (compared
    with `bound_cycles`), a float is operator seconds as `run_layer`/`measure_seconds` report
    them (compared with `bound_call_seconds`)."""
    r = roofline(layer, hw, params)
    value = float(seconds_or_cycles)
    if value <= 0:
        raise ValueError(f"seconds_or_cycles={seconds_or_cycles}: must be > 0")
    if isinstance(seconds_or_cycles, (int, np.integer)) and not isinstance(seconds_or_cycles, bool):
        return r.bound_cycles / value
    return r.bound_call_seconds / value


__all__ = ["Roofline", "roofline", "attained_fraction", "min_bytes", "real_macs", "MIN_INSNS", "MIN_KERNEL_UOPS"]
