"""Compiler benchmark: timing-only evaluations per second and functional simulation time.

1. Every valid config of every ResNet-18 layer VTA offloads, on each `--hw` (default: pynq_1x16
   and pynq_4x8); each evaluation is `measure_seconds` (compile + cycle model + seconds), the
   path tuners call. Per evaluation the CPU time of the process (`time.process_time_ns`: what
   one core spends, unaffected by other processes on a shared machine) and the wall time are
   taken, best of `--repeats` runs. Reported: median, p99 and max per evaluation and the
   evaluations/s at the median. Targets: >= 5,000 evaluations/s per core at the median, no
   evaluation slower than 2 ms. `--check` also compares every result with the
   instruction-level model on the full program (`compile_insns` + `time_program`).
2. Functional simulation of all offloaded ResNet-18 convs (10 unique layers x multiplicity),
   each with the best config found, on the first `--hw`: compile with data + simulate, output
   checked against the NumPy reference. Target: <= 1 s total (what TVM's C++ functional
   simulator took).

Prints one JSON object. Usage: `python benchmarks/compiler.py [--hw pynq_1x16 pynq_4x8]
[--repeats 3] [--check]`.
"""

from __future__ import annotations

import os

# Per-core figures: one BLAS thread. (Multi-threaded OpenBLAS on tiny matmuls is ~20x slower on
# a busy 2-core machine; the simulator's GEMM tables are such matmuls.) Set before numpy loads.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from codesign.evaluate.compiler import compile_insns, compile_layer  # noqa: E402
from codesign.evaluate.run import measure_seconds, random_inputs  # noqa: E402
from codesign.hw.config import HwConfig  # noqa: E402
from codesign.schedule import get_space, partition  # noqa: E402
from codesign.vta.simulator import simulate  # noqa: E402
from codesign.vta.timing import time_program  # noqa: E402
from codesign.workloads import Conv2D, get_workload  # noqa: E402


def _percentiles(us: list[float]) -> dict:
    a = np.asarray(us)
    return {"median_us": float(np.median(a)), "p99_us": float(np.percentile(a, 99)), "max_us": float(a.max()),
            "evals_per_s_at_median": 1e6 / float(np.median(a))}


def timing_evals(layers, hw, repeats: int, check: bool) -> tuple[list[dict], dict, list[float], list[float], int]:
    rows, best, cpu_all, wall_all, mismatches = [], {}, [], [], 0
    for layer, _count in layers:
        space = get_space(layer, hw)
        valid = space.valid_indices()
        cpu, wall, results = [], [], []
        for index in valid:
            config = space.get(int(index))
            c_best = w_best = float("inf")
            for _ in range(repeats):
                c0, w0 = time.process_time_ns(), time.perf_counter_ns()
                seconds, cycles = measure_seconds(layer, config, hw)
                c_best = min(c_best, (time.process_time_ns() - c0) / 1e3)
                w_best = min(w_best, (time.perf_counter_ns() - w0) / 1e3)
            cpu.append(c_best)
            wall.append(w_best)
            results.append(seconds)
            if check:
                insns = compile_insns(layer, config, hw).insns
                mismatches += time_program(insns, hw).cycles != cycles
        k = int(np.argmin(results))
        best[layer] = space.get(int(valid[k]))
        cpu_all += cpu
        wall_all += wall
        rows.append({"layer": layer.name, "valid": int(len(valid)), "cpu": _percentiles(cpu),
                     "wall": _percentiles(wall), "best_index": int(valid[k]), "best_seconds": results[k]})
        print(f"{hw.name} {layer.name}: {len(valid)} configs, median {rows[-1]['cpu']['median_us']:.0f} us CPU, "
              f"max {rows[-1]['cpu']['max_us']:.0f} us", file=sys.stderr)
    return rows, best, cpu_all, wall_all, mismatches


def functional_time(layers, hw, best) -> dict:
    per_layer, total, total_cpu, exact = [], 0.0, 0.0, True
    for layer, count in layers:
        data, weight = random_inputs(layer)
        ref = layer.reference(data, weight)
        c0 = time.process_time()
        t0 = time.perf_counter()
        prog = compile_layer(layer, best[layer], hw, data=data, weight=weight)
        t1 = time.perf_counter()
        res = simulate(prog)
        t2 = time.perf_counter()
        total_cpu += (time.process_time() - c0) * count
        out = layer.unpack_output(np.asarray(res.outputs["output"]).view(np.int8), hw)
        ok = bool(np.array_equal(out, ref))
        exact &= ok
        total += (t2 - t0) * count
        per_layer.append({"layer": layer.name, "count": count, "index": best[layer].index,
                          "n_insns": prog.n_insns, "compile_s": t1 - t0, "simulate_s": t2 - t1,
                          "bit_exact": ok})
    return {"total_s": total, "total_cpu_s": total_cpu, "bit_exact": exact, "layers": per_layer}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hw", nargs="+", default=["pynq_1x16", "pynq_4x8"])
    ap.add_argument("--repeats", type=int, default=3, help="runs per evaluation; the fastest counts")
    ap.add_argument("--check", action="store_true", help="compare with the instruction-level model")
    args = ap.parse_args(argv)
    per_hw, cpu_all, wall_all, mismatches, first = [], [], [], 0, None
    for name in args.hw:
        hw = HwConfig.resolve(name)
        # the offloaded ResNet-18 convs (from_torch also yields the CPU stem and the classifier)
        wl = get_workload("resnet18").for_hw(hw)
        layers = [(ly, n) for ly, n in partition(wl, hw)[0] if isinstance(ly, Conv2D)]
        # Warm-up: numba kernels (timing, simulator) compile or load from cache outside the clock.
        layer0 = layers[-1][0]
        space0 = get_space(layer0, hw)
        warm = space0.get(int(space0.valid_indices()[0]))
        measure_seconds(layer0, warm, hw)
        rows, best, cpu, wall, bad = timing_evals(layers, hw, args.repeats, args.check)
        cpu_all += cpu
        wall_all += wall
        mismatches += bad
        per_hw.append({"hw": hw.name, "evaluations": len(cpu), "cpu": _percentiles(cpu),
                       "wall": _percentiles(wall), "layers": rows})
        if first is None:
            first = (hw, layers, best)
    hw, layers, best = first
    data0, weight0 = random_inputs(layers[-1][0])
    simulate(compile_layer(layers[-1][0], best[layers[-1][0]], hw, data=data0, weight=weight0))
    func = functional_time(layers, hw, best)
    summary = {
        "hw": [h["hw"] for h in per_hw],
        "evaluations": len(cpu_all),
        "repeats": args.repeats,
        "per_eval_cpu": _percentiles(cpu_all),
        "per_eval_wall": _percentiles(wall_all),
        "timing_target_evals_per_s": 5000,
        "timing_target_max_us": 2000,
        "checked_against_instruction_level_model": bool(args.check),
        "mismatches": int(mismatches) if args.check else None,
        "functional_hw": hw.name,
        "functional_resnet18_total_s": func["total_s"],
        "functional_resnet18_total_cpu_s": func["total_cpu_s"],
        "functional_target_s": 1.0,
        "functional_bit_exact": func["bit_exact"],
        "per_hw": per_hw,
        "functional": func["layers"],
    }
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
