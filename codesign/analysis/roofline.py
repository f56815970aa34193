"""Roofline bounds of a layer on a VTA hardware config.

* compute bound: every MAC on the GEMM core at BATCH*BLOCK_IN*BLOCK_OUT MACs per cycle
  (one micro-op per cycle, docs/vta.md §4.3), i.e. MACs / (BATCH*BLOCK_IN*BLOCK_OUT) cycles;
* memory bound: the minimum DRAM traffic -- packed inputs and weights read once, the output
  written once, the fewest micro-ops any schedule needs -- over the ONE shared memory port
  (docs/vta.md §4.2) at `bus_bytes` per cycle times the timing model's port efficiency for that
  footprint (`timing.port_efficiency`, the same formula the cycle model uses; micro-ops
  go through the compute module's narrower uop port, §4.5);
* attainable bound = max of the two. `attained_fraction` = bound / achieved (<= 1).

Seconds: `bound_seconds` is device time at the config clock; `bound_call_seconds` adds the
unavoidable host overhead of one operator call with the smallest possible program, through
`timing.predict_seconds` (the one place cycles become operator seconds), so it is comparable
with `run_layer(...).seconds`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

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

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def min_bytes(layer: Any, hw: HwConfig) -> tuple[int, int]:
    """(data bytes, micro-op bytes) of the minimum traffic: packed tensors once each."""
    def nbytes(shape: tuple[int, ...]) -> int:
        return int(math.prod(shape))  # int8 tensors: one byte per element

    data = (nbytes(layer.packed_data_shape(hw)) + nbytes(layer.packed_weight_shape(hw))
            + nbytes(layer.packed_output_shape(hw)))
    return data, MIN_KERNEL_UOPS * hw.uop_elem_bytes


def roofline(layer: Any, hw: HwConfig, params: timing.TimingParams | None = None) -> Roofline:
    hw = HwConfig.resolve(hw)
    params = timing.default_params() if params is None else params
    compute = layer.macs / hw.macs_per_cycle
    data, uop = min_bytes(layer, hw)
    # The same port model time_program uses (cache-hit mix over the operator's DRAM footprint).
    eff = timing.port_efficiency(hw, data + uop, params)
    uop_port = max(1.0, min(params.uop_port_bytes, hw.bus_bytes))
    memory = (data / hw.bus_bytes + uop / uop_port) / eff
    bound = max(compute, memory)
    return Roofline(
        macs=int(layer.macs), min_bytes=data + uop, compute_cycles=float(compute),
        memory_cycles=float(memory), bound_cycles=float(bound),
        bound_seconds=bound / hw.clock_hz,
        bound_call_seconds=timing.predict_seconds(bound, MIN_INSNS, hw, params),
        bound="compute" if compute >= memory else "memory",
        arithmetic_intensity=layer.macs / (data + uop),
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


__all__ = ["Roofline", "roofline", "attained_fraction", "min_bytes", "MIN_INSNS", "MIN_KERNEL_UOPS"]
