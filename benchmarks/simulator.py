"""Simulator throughput: instructions/s and micro-ops/s of `simulate()` in functional
and timing-only mode on ResNet-18 3x3 layer programs from the compiler, plus the functional time
of the whole ResNet-18 conv stack. Prints one JSON summary (medians) on stdout.

Programs: conv2d 1x128x28x28 -> 128, 3x3, s1, p1 on the default 1x16 config, compiled by
`codesign.evaluate.compiler.compile_layer` under two schedules drawn from its valid space (seeded):
"tuned" = the fastest of a sample by the timing model (few, large instructions: what run_layer
sees after tuning) and "fine" = the sample's config with the most instructions (stresses
per-instruction overhead). For the ResNet-18 stack, each unique conv layer uses its "tuned"
config and the time is weighted by how often the layer occurs.

    /work/venv/bin/python benchmarks/simulator.py            # ~30 s
    /work/venv/bin/python benchmarks/simulator.py --quick    # fewer repeats, no ResNet-18 stack
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np

from codesign.evaluate.compiler import compile_insns, compile_layer
from codesign.hw.config import HwConfig
from codesign.schedule import unsupported_reason
from codesign.schedule.space import ScheduleSpace
from codesign.vta.simulator import simulate
from codesign.vta.timing import time_program
from codesign.workloads import Conv2D, get_workload


def pick_configs(layer, hw, rng, sample: int) -> dict:
    space = ScheduleSpace(layer, hw)
    valid = space.valid_indices()
    cand = [space.get(int(i)) for i in rng.choice(valid, min(sample, len(valid)), replace=False)]
    comp = [compile_insns(layer, c, hw) for c in cand]
    cycles = [time_program(c.insns, hw).cycles for c in comp]
    sizes = [c.insns.shape[0] for c in comp]
    return {"tuned": cand[int(np.argmin(cycles))], "fine": cand[int(np.argmax(sizes))]}


def median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def bench_program(layer, config, hw, rng, repeats_fun: int, repeats_tim: int) -> dict:
    data = rng.integers(-128, 128, layer.data_shape(), dtype=np.int8)
    weight = rng.integers(-128, 128, layer.weight_shape(), dtype=np.int8)
    prog = compile_layer(layer, config, hw, data=data, weight=weight)
    res = simulate(prog)  # warm-up (numba compile on a cold cache) and correctness check
    out = res.outputs["output"].view(np.int8).reshape(layer.packed_output_shape(hw))
    exact = bool(np.array_equal(layer.unpack_output(out, hw), layer.reference(data, weight)))
    uops = res.counters["gemm_counter"] + res.counters["alu_counter"]
    t_fun = median_time(lambda: simulate(prog), repeats_fun)
    t_tim = median_time(lambda: simulate(prog, functional=False), repeats_tim)
    return {
        "knobs": config.knobs, "n_insns": prog.n_insns, "n_uops_executed": uops,
        "gemm_uops": res.counters["gemm_counter"], "cycles": res.cycles, "bit_exact_vs_reference": exact,
        "functional": {"seconds": t_fun, "insns_per_s": prog.n_insns / t_fun, "uops_per_s": uops / t_fun,
                       "gmac_per_s": res.counters["gemm_counter"] * hw.macs_per_cycle / t_fun / 1e9},
        "timing_only": {"seconds": t_tim, "insns_per_s": prog.n_insns / t_tim, "uops_per_s": uops / t_tim},
        "timing_only_speedup": t_fun / t_tim,
    }


def bench_resnet18(hw, rng, sample: int) -> dict:
    total, insns, layers = 0.0, 0, 0
    for layer, count in get_workload("resnet18").unique_layers():
        if not isinstance(layer, Conv2D) or unsupported_reason(layer, hw):
            continue
        cfg = pick_configs(layer, hw, rng, sample)["tuned"]
        data = rng.integers(-128, 128, layer.data_shape(), dtype=np.int8)
        weight = rng.integers(-128, 128, layer.weight_shape(), dtype=np.int8)
        prog = compile_layer(layer, cfg, hw, data=data, weight=weight)
        simulate(prog)
        total += median_time(lambda p=prog: simulate(p), 3) * count
        insns += prog.n_insns * count
        layers += count
    return {"conv_layers": layers, "n_insns": insns, "functional_seconds": total}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer repeats; skip the ResNet-18 stack")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sample", type=int, default=48, help="configs sampled per layer to pick from")
    args = ap.parse_args(argv)
    hw = HwConfig()
    rng = np.random.default_rng(args.seed)
    layer = Conv2D(1, 128, 28, 28, 128, 3, 3, 1, 1)
    configs = pick_configs(layer, hw, rng, args.sample)
    rf, rt = (3, 10) if args.quick else (5, 30)
    summary = {"hw": hw.name, "layer": layer.name,
               "programs": {k: bench_program(layer, c, hw, rng, rf, rt) for k, c in configs.items()}}
    if not args.quick:
        summary["resnet18_conv_stack"] = bench_resnet18(hw, rng, args.sample)
    json.dump(summary, sys.stdout, indent=1, default=str)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
