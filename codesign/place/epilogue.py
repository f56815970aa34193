"""The seams placement costs VTA steps through: `codesign.evaluate.fused` (Epilogue, fused_reason,
measure_fused) and `codesign.evaluate.pool` (pools on VTA's ALU: pool_of, pool_reason,
measure_pool) when they are in the tree (`pools` is None otherwise: pools stay on the CPU). Until it lands, the same `Epilogue` value is
defined here, `fused_reason` is the plain layer's `unsupported_reason` plus the shift rule, and
`measure_fused` is None: a VTA step is then costed by the plain layer's schedule time (the ACC load
of a residual and the ALU MAX/ADD passes it adds are not counted; `FUSED_TIMING` says which)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from codesign.hw.config import HwConfig
from codesign.schedule.support import unsupported_reason
from codesign.workloads.layers import Layer

try:  # evaluate/fused.py is another engineer's module landing in this session
    _fused = importlib.import_module("codesign.evaluate.fused")
except ModuleNotFoundError as exc:  # pragma: no cover - only before evaluate/fused.py is on main
    if exc.name != "codesign.evaluate.fused":
        raise
    _fused = None

try:
    pools = importlib.import_module("codesign.evaluate.pool")
except ModuleNotFoundError as exc:  # pragma: no cover - only before evaluate/pool.py is on main
    if exc.name != "codesign.evaluate.pool":
        raise
    pools = None

if _fused is not None:
    Epilogue, fused_reason, measure_fused = _fused.Epilogue, _fused.fused_reason, _fused.measure_fused
    FUSED_TIMING = True
else:
    FUSED_TIMING = False
    measure_fused = None  # type: ignore[assignment]
    MAX_SHIFT = 15  # SHR amounts the HLS ALU executes correctly (docs/vta.md §3.4)

    @dataclass(frozen=True)
    class Epilogue:  # type: ignore[no-redef]
        """What VTA does to a GEMM's int32 accumulators before the int8 store (shared decision)."""

        shift: int
        bias: bool = False
        relu: bool = False
        residual: tuple[int, int, int] | None = None  # (la, lb, s) of the add

    def fused_reason(layer: Layer, epi: Epilogue, hw: HwConfig) -> str | None:  # type: ignore[no-redef]
        reason = unsupported_reason(layer, hw)
        if reason is not None:
            return reason
        shifts = [epi.shift] + list(epi.residual or ())
        if any(not 0 <= s <= MAX_SHIFT for s in shifts):
            return f"shift {max(shifts)} outside [0, {MAX_SHIFT}] (the HLS ALU's SHR)"
        return None


__all__ = ["Epilogue", "fused_reason", "measure_fused", "FUSED_TIMING", "pools"]
