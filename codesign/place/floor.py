"""The compute floor of a plan's VTA steps: the cycles VTA's compute module cannot avoid at the
timing model's rates, whatever the schedule — one cycle per GEMM uop (a BATCH x BLOCK_IN by
BLOCK_IN x BLOCK_OUT product, no loop or instruction overhead) plus `alu_cycles_per_uop` per
output vector for each ALU step of the epilogue (`evaluate.fused.epilogue_steps`; the residual's
identity GEMM one cycle), with every DMA hidden behind them. A plan whose VTA steps already take
this floor cannot be made faster by a schedule; the docs quote it as a roofline."""

from __future__ import annotations

import math

from codesign.evaluate.fused import Epilogue, epilogue_steps
from codesign.hw.config import HwConfig
from codesign.place.plan import Plan
from codesign.vta import timing
from codesign.workloads.layers import Conv2D, Dense, Layer


def step_floor_cycles(layer: Layer, epi: Epilogue | None, hw: HwConfig, params: timing.TimingParams | None = None,
                      calls: int = 1) -> tuple[float, float] | None:
    """(GEMM cycles, ALU cycles) of `calls` calls of `layer` with epilogue `epi` at the floor;
    None for a layer kind without a formula here (a transposed conv)."""
    p = params or timing.default_params()
    rows = math.ceil(layer.batch / hw.batch)
    if isinstance(layer, Conv2D):
        vectors = rows * math.ceil(layer.out_channels / hw.block_out) * layer.out_height * layer.out_width
        uops_per_vector = math.ceil(layer.in_channels // layer.groups / hw.block_in) * layer.kernel_h * layer.kernel_w
    elif isinstance(layer, Dense):
        vectors = rows * math.ceil(layer.out_features / hw.block_out)
        uops_per_vector = math.ceil(layer.in_features / hw.block_in)
    else:
        return None
    steps = epilogue_steps(epi) if epi is not None else ()
    alu = sum(1.0 if s.op == "gemm" else p.alu_cycles_per_uop for s in steps)
    return float(calls * vectors * uops_per_vector), float(calls * vectors * alu)


def plan_floor_s(plan: Plan) -> dict[str, float]:
    """Seconds at the floor of the plan's VTA steps, split "gemm" / "alu" / "total", and the
    steps' predicted "predicted" seconds (steps without a formula count in neither)."""
    out = {"gemm": 0.0, "alu": 0.0, "predicted": 0.0}
    for s in plan.steps:
        if s.placement != "vta" or s.host or s.layer is None:
            continue
        calls = s.rewrite.calls if s.rewrite is not None else 1
        f = step_floor_cycles(s.layer, s.epilogue, plan.hw, calls=calls)
        if f is None:
            continue
        out["gemm"] += f[0] / plan.hw.clock_hz
        out["alu"] += f[1] / plan.hw.clock_hz
        out["predicted"] += s.predicted_s
    out["total"] = out["gemm"] + out["alu"]
    return out


__all__ = ["plan_floor_s", "step_floor_cycles"]
