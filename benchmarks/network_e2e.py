"""Whole-network latency per image: our network plan vs TVM's VTA flow, modelled on the same models.

For each (network, board, hw config) case, per image, the whole network:

- ours: `codesign.place.plan_network` (every op on VTA or the board's CPU by predicted cost: the
  stem offloaded through a host rewrite when cheaper, the dense padded to BLOCK_OUT, residual adds
  and ReLUs fused into the conv epilogues, host quantize/pack/unpack passes counted) with each VTA
  layer's best schedule of `--schedules` (autotvm: the AutoTVM templates, every valid schedule
  timed; vta: the `vta` schedule family, when it is in the tree).
- TVM's VTA flow (`relay.quantize` with the first conv skipped, `graph_pack` from the max pool to
  the global average pool, as in VTA's ResNet tutorial), costed with the same models: the convs
  VTA can run on VTA with the tophub schedule of the layer (`sim/calibration/pynq_resnet18.log`,
  `pynq_1x16_resnet50.log`; a layer tophub has no record for gets its best template schedule, as
  if the user had tuned it: `conv_schedules` counts which), timed by the VTA timing model with
  their fused bias/ReLU/shift/clip; the stem, the dense and every conv VTA cannot run in float32
  on the board's CPU (`codesign.cpu`); each residual add as its own VTA ALU pass over DRAM (both
  operands loaded into ACC as int32, ADD, SHR, MAX, MIN, an int8 store: the DMA bytes at the
  timing model's fitted port efficiency, overlapped with the ALU micro-ops, plus the fitted host
  cost of an operator call); max pool, average pool and the quantize/pack and unpack/dequantize
  where data crosses between the CPU and VTA as bytes-bound CPU passes.

Nothing here is a constant of a result: every number comes from the timing model
(`sim/timing_params.json`), the CPU model (`sim/cpu_params.json`) and the tophub records.

Prints one JSON object. Usage: `python benchmarks/network_e2e.py [--schedules autotvm|vta]
[--cases resnet18:pynq ...]`; a case is NETWORK:BOARD with BOARD pynq (pynq_1x16 at 100 MHz) or
ultra96 (the published 1x16 ZU3EG build at 250 MHz, 128-bit).
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import time
from typing import Any

CONFIGS = {"pynq": ("pynq-z1", "pynq_1x16_i8w8a32_15_15_18_17"),
           "ultra96": ("ultra96", "ultra96_1x16_i8w8a32_15_15_18_17_250MHz")}
DEFAULT_CASES = ("resnet18:pynq", "resnet50:pynq", "mobilenet:pynq", "resnet18:ultra96", "resnet50:ultra96",
                 "mobilenet:ultra96")
TOPHUB_LOGS = ("pynq_resnet18.log", "pynq_1x16_resnet50.log")
ALU_OPS_PER_ADD = 4  # ADD, SHR (requantize), MAX 0 (the ReLU after it), MIN 127 (clip)


@functools.lru_cache(maxsize=1)
def tophub() -> dict:
    from codesign.paths import SIM_DATA
    from codesign.tune.records import best_records, import_autotvm_log

    recs = []
    for name in TOPHUB_LOGS:
        recs += import_autotvm_log(SIM_DATA / "calibration" / name)
    return best_records(recs)


def best_schedule(layer: Any, hw: Any, family: str) -> tuple[Any, float]:
    """(config, seconds) of the layer's fastest valid schedule of `family` (every one timed)."""
    from codesign.errors import CodesignError
    from codesign.evaluate.run import measure
    from codesign.place import best_template_schedule
    from codesign.schedule import get_space

    if family == "autotvm":
        return best_template_schedule(layer, hw)
    try:
        space = get_space(layer, hw, family=family)
    except TypeError:
        raise SystemExit("--schedules vta: the vta schedule family is not in this tree yet") from None
    best = None
    for i in space.valid_indices():
        s = measure(layer, space.get(int(i)), hw).seconds
        if best is None or s < best[0]:
            best = (s, int(i))
    if best is None:
        raise CodesignError(f"layer {layer.name} has no valid {family} schedule on {hw.name}")
    return space.get(best[1]), best[0]


def alu_pass_s(elems: int, hw: Any, params: Any) -> float:
    """A residual add as its own VTA operator: int32 loads of both operands into ACC, the ALU ops,
    an int8 store; DMA at the fitted port efficiency (the L2 share of the footprint at the cached
    rate, the rest at the DRAM rate, bandwidth constant across clocks as in the timing model) and
    ALU micro-ops overlapped, plus the fitted host cost of one operator call."""
    nbytes = elems * (4 + 4 + 1)
    hit = min(1.0, params.cache_bytes / nbytes)
    eff = hit * params.dma_bytes_per_cycle_efficiency + (1 - hit) * params.dma_dram_efficiency
    beat = hw.axi_bits / 8
    bytes_per_s = min(beat * eff * params.ref_clock_mhz * 1e6, beat * hw.clock_hz)
    vectors = math.ceil(elems / (hw.batch * hw.block_out))
    alu_s = vectors * ALU_OPS_PER_ADD * params.alu_cycles_per_uop / hw.clock_hz
    return params.host_call_s + max(nbytes / bytes_per_s, alu_s)


def tvm_flow(net: Any, hw: Any, board: Any, family: str) -> dict[str, Any]:
    """Per-step seconds of TVM's VTA flow on `net` (see the module docstring)."""
    from codesign.cpu import layer_cost, tensor_pass
    from codesign.evaluate.run import measure
    from codesign.network.layers import layer_of
    from codesign.schedule import ScheduleSpace
    from codesign.schedule.support import unsupported_reason
    from codesign.vta.timing import default_params
    from codesign.workloads.layers import Conv2D

    params = default_params()
    table = tophub()
    where = {n: "cpu" for n, _ in net.inputs}  # float32 on the host
    steps: list[dict[str, Any]] = []
    sources = {"tophub": 0, "best template (no tophub record)": 0}

    def elems(t: str) -> int:
        return math.prod(net.shape(t))

    def cpu_pass(name: str, read: int, write: int, rd: str = "float32", wd: str = "float32") -> float:
        return layer_cost(tensor_pass(name, read, write, rd, wd), board).seconds

    def add(name: str, kind: str, placement: str, seconds: float) -> None:
        steps.append({"name": name, "kind": kind, "placement": placement, "ms": seconds * 1e3})

    def to_vta(t: str) -> None:
        if where[t] != "vta":
            add(f"quantize+pack:{t}", "quantize", "cpu", cpu_pass(t, elems(t), elems(t), "float32", "int8"))
            where[t] = "vta"

    def to_cpu(t: str) -> None:
        if where[t] != "cpu":
            add(f"unpack+dequantize:{t}", "dequantize", "cpu", cpu_pass(t, elems(t), elems(t), "int8", "float32"))
            where[t] = "cpu"

    inputs = {n for n, _ in net.inputs}
    for op in net.ops:
        ins = list(dict.fromkeys(op.inputs))
        if op.kind == "conv2d":
            layer, why = layer_of(net, op)
            if why is None and ins[0] in inputs:
                why = "the first conv: relay.quantize skips it and graph_pack starts after it"
            why = why or unsupported_reason(layer, hw)
            if why is None:
                to_vta(ins[0])
                rec = table.get((layer.name, hw.name))
                space = ScheduleSpace(layer, hw)
                config = space.from_knobs(rec.knobs) if rec is not None else None
                if config is not None and space.why_invalid(config) is None:
                    sources["tophub"] += 1
                else:
                    config = best_schedule(layer, hw, family)[0]
                    sources["best template (no tophub record)"] += 1
                add(op.name, "conv2d", "vta", measure(layer, config, hw, params).seconds)
                where[op.name] = "vta"
            else:
                to_cpu(ins[0])
                shape = layer if layer is not None else Conv2D(*net.shape(ins[0]), op.attrs["weight_shape"][0],
                                                              *op.attrs["weight_shape"][2:])
                add(op.name, "conv2d", "cpu", layer_cost(shape, board, "float32").seconds)
                where[op.name] = "cpu"
        elif op.kind == "linear":
            to_cpu(ins[0])
            layer, _ = layer_of(net, op)
            add(op.name, "linear", "cpu", layer_cost(layer, board, "float32").seconds)
            where[op.name] = "cpu"
        elif op.kind == "add" and all(where[t] == "vta" for t in ins):
            add(op.name, "add", "vta", alu_pass_s(elems(op.name), hw, params))
            where[op.name] = "vta"
        elif op.kind in ("relu", "clamp", "flatten"):  # fused into its producer / a reshape
            where[op.name] = where[ins[0]]
        else:  # pools, a CPU-side add or concat: float32 bytes-bound passes on the CPU
            for t in ins:
                to_cpu(t)
            add(op.name, op.kind, "cpu", cpu_pass(op.name, sum(elems(t) for t in ins), elems(op.name)))
            where[op.name] = "cpu"
    for t in net.outputs:
        to_cpu(t)
    total = sum(s["ms"] for s in steps)
    return {"latency_ms": total, "vta_ms": sum(s["ms"] for s in steps if s["placement"] == "vta"),
            "cpu_ms": sum(s["ms"] for s in steps if s["placement"] == "cpu"), "conv_schedules": sources,
            "residual_add_passes_ms": sum(s["ms"] for s in steps if s["kind"] == "add"),
            "cpu_steps": [s for s in steps if s["placement"] == "cpu" and s["ms"] >= 0.5]}


def ours(net: Any, hw: Any, board: Any, family: str) -> dict[str, Any]:
    from codesign.place import plan_network

    plan = plan_network(net, hw, board, lambda layer: best_schedule(layer, hw, family))
    summary = plan.summary()
    keep = ("latency_ms", "throughput_ips", "vta_ms", "cpu_ms", "host_ms", "steps", "vta_steps")
    out = {k: summary[k] for k in keep}
    out["stem"] = next(({"placement": s.placement, "transform": s.transform, "ms": s.predicted_s * 1e3}
                        for s in plan.steps if s.kind.startswith("conv2d")), None)
    out["cpu_steps"] = [{"name": s.name, "kind": s.kind, "ms": s.predicted_s * 1e3}
                        for s in plan.steps if s.placement == "cpu" and s.predicted_s >= 0.5e-3]
    return out


def case(spec: str, family: str) -> dict[str, Any]:
    from codesign.hw import Board, HwConfig
    from codesign.sweep.network import timing_network

    name, _, where = spec.partition(":")
    if where not in CONFIGS:
        raise SystemExit(f"case {spec!r}: BOARD must be one of {', '.join(CONFIGS)}")
    board_name, hw_name = CONFIGS[where]
    board, hw = Board.named(board_name), HwConfig.from_name(hw_name)
    net, why = timing_network(name)
    if net is None:
        raise SystemExit(f"case {spec!r}: {why}")
    t0 = time.perf_counter()
    a = ours(net, hw, board, family)
    b = tvm_flow(net, hw, board, family)
    return {"network": name, "board": board.name, "cpu": board.cpu, "hw": hw.name, "clock_mhz": hw.clock_mhz,
            "per": "image (batch 1), whole network", "ours_ms": a["latency_ms"], "tvm_flow_ms": b["latency_ms"],
            "speedup": b["latency_ms"] / a["latency_ms"], "ours": a, "tvm_flow": b,
            "wall_s": time.perf_counter() - t0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--schedules", choices=("autotvm", "vta"), default="autotvm",
                    help="schedule family of our VTA layers (default: autotvm, the AutoTVM templates)")
    ap.add_argument("--cases", nargs="+", default=list(DEFAULT_CASES), metavar="NETWORK:BOARD")
    args = ap.parse_args()

    rows = [case(c, args.schedules) for c in args.cases]
    print(json.dumps({"schedules": args.schedules, "cases": rows,
                      "summary": [{k: r[k] for k in ("network", "board", "ours_ms", "tvm_flow_ms", "speedup")}
                                  for r in rows]}, indent=1))


if __name__ == "__main__":
    main()
