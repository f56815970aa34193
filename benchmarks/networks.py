"""Zoo networks on the stock configs: what VTA offloads and how fast the offloaded part can run.

For each zoo network and hardware config (default pynq_1x16 and pynq_4x8), at the smallest batch
that is a multiple of the config's BATCH:
- unique layers offloaded / on the CPU, MACs offloaded vs on the CPU (per image);
- the exhaustive-optimum latency of the offloaded part: every valid schedule of every unique
  offloaded layer timed with the timing model (`codesign.tune.exhaustive`), the best of each
  x its multiplicity, per image;
- % of peak: offloaded real MACs (those that read no zero padding, `roofline.real_macs`: what a
  padding-skipping schedule runs) / (that latency x BATCH*BLOCK_IN*BLOCK_OUT MACs/cycle x clock).
Also the wall time and peak memory of `from_torch` on ResNet-50 (fresh subprocess; the torch
import is timed separately).

With `--schedules vta` each layer's best schedule comes from the `vta` family (docs/schedules.md)
instead: every valid schedule timed (`exhaustive_table`) when there are at most `--exhaustive-max`,
else the project's default search with a declared budget: `auto`'s template-first search (the
template's schedules, `from_template`, timed exhaustively, then `--budget` measurements of the
learned search over the whole family, seeded with them: never worse than the template optimum) —
the row says which (`search`: "exhaustive", or "auto: template+<tuner>" with its measurements). The template optimum is reported
beside it, and every winning schedule is simulated on random int8 inputs: bit-exact against the
NumPy reference and race-free (`simulate(check=True)`); evaluations per CPU-second of the family's
timing path are reported per network. Targets (issue 19): ResNet-18 on pynq_1x16 <= 80.5 ms per
image, >= 1.05x the template optimum on pynq_4x8, >= 10^5 valid schedules for ResNet-18's 3x3
convs on pynq_1x16.

Prints one JSON object; with --out also appends one JSON line per (network, config) as it goes.
Usage: `python benchmarks/networks.py [--nets resnet18,mobilenet] [--hw pynq_1x16,pynq_4x8] [--out f]
[--schedules vta [--exhaustive-max N] [--budget N] [--learned xgb]]`.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time

import numpy as np

from codesign.analysis.roofline import MIN_INSNS, real_macs, roofline
from codesign.evaluate.compiler import compile_layer
from codesign.evaluate.run import layer_io_bytes, random_inputs
from codesign.hw.config import HwConfig
from codesign.mapping.batch import geometry
from codesign.schedule import get_space, partition
from codesign.schedule.templates import clip_epilogue
from codesign.schedule.vta_space import VtaSpace
from codesign.tune.exhaustive import exhaustive, exhaustive_table
from codesign.tune.loop import tune_layer
from codesign.tune.registry import make_tuner
from codesign.vta import timing
from codesign.vta.simulator import simulate
from codesign.workloads import ZOO, get_workload

TARGET_R18_1X16_MS = 80.5     # issue 19: ResNet-18 offloaded layers on pynq_1x16, ms per image
TARGET_R18_4X8_SPEEDUP = 1.05  # issue 19: vs the template optimum on pynq_4x8
TARGET_VALID_3X3 = 10 ** 5    # issue 19: valid schedules of ResNet-18's 3x3 convs on pynq_1x16

FROM_TORCH_PROBE = """
import json, os, resource, time

def rss_mb():  # current resident set size
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
from codesign.workloads import from_torch
from codesign.workloads.zoo import resnet50
r0 = rss_mb()
t2 = time.perf_counter()
module, inputs = resnet50()  # real weights, as a user's module has them
t3 = time.perf_counter()
r1 = rss_mb()
wl = from_torch(module, inputs, name="resnet50")
t4 = time.perf_counter()
r2 = rss_mb()
print(json.dumps({"torch_import_s": t1 - t0, "build_module_s": t3 - t2, "from_torch_s": t4 - t3,
                  "rss_after_import_mb": r0, "rss_after_build_mb": r1, "rss_after_from_torch_mb": r2,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "unique_layers": len(wl.entries)}))
"""


def network_row(name: str, hw: HwConfig) -> dict:
    wl = get_workload(name).for_hw(hw)
    vta, cpu = partition(wl, hw)
    macs_vta = sum(layer.macs * n for layer, n in vta)
    real_vta = sum(real_macs(layer) * n for layer, n in vta)
    macs_cpu = sum(layer.macs * n for layer, n, _ in cpu) + sum(op.macs * n for op, n in wl.cpu_ops)
    t0 = time.perf_counter()
    seconds = 0.0
    layers = []
    for layer, count in vta:
        config, best = exhaustive(layer, hw)
        seconds += best * count
        layers.append({"layer": layer.name, "count": count, "best_ms": best * 1e3, "index": int(config.index)})
    peak = hw.macs_per_cycle * hw.clock_mhz * 1e6
    return {
        "network": name, "hw": hw.name, "batch": wl.batch,
        "unique_offloaded": len(vta), "unique_cpu": len(cpu) + len(wl.cpu_ops),
        "gmacs_offloaded_per_image": macs_vta / wl.batch / 1e9, "gmacs_cpu_per_image": macs_cpu / wl.batch / 1e9,
        "offloaded_ms_per_image": seconds / wl.batch * 1e3,
        "pct_of_peak": 100.0 * real_vta / seconds / peak if seconds else None,
        "exhaustive_wall_s": time.perf_counter() - t0, "layers": layers,
    }


def _verify(layer, config, hw) -> dict:
    """Simulate `config` on fixed-seed random int8 inputs: bit-exact vs NumPy, race check."""
    data, weight = random_inputs(layer)
    prog = compile_layer(layer, config, hw, data=data, weight=weight)
    res = simulate(prog, check=True)  # raises on an SRAM access no dependency token orders
    out = layer.unpack_output(np.asarray(res.outputs["output"]).view(np.int8), hw)
    return {"bit_exact": bool(np.array_equal(out, layer.reference(data, weight))),
            "race_free": res.tokens_left == {}}


def epilogue_floor(layer, hw) -> tuple[float, float]:
    """(roofline call seconds, the same bound with the requantization epilogue added to compute):
    the epilogue's ALU ops each pass over every accumulator row at alu_cycles_per_uop cycles per
    row (the timing model's ALU cost), on the same module as the GEMMs, in every schedule."""
    r = roofline(layer, hw)
    params = timing.default_params()
    g = geometry(layer, hw)
    alu = len(clip_epilogue(0)) * g.b * g.co * g.out_h * g.out_w * params.alu_cycles_per_uop
    cycles = max(r.compute_cycles + alu, r.memory_cycles)
    call = float(timing.predict_seconds(cycles, MIN_INSNS, hw, params, *layer_io_bytes(layer)))
    return float(r.bound_call_seconds), call


def vta_layer(layer, hw, exhaustive_max: int, budget: int, seed: int, learned: str | None = None) -> dict:
    space = get_space(layer, hw, "vta")
    t_config, t_best = exhaustive(layer, hw)  # the template optimum (AutoTVM family, exhaustive)
    # counted on an uncached copy: once the cached space is listed, every config mapped from it
    # (the winner's simulation) comes from a table of all its valid schedules (schedule.vta.producer.listed),
    # >1 GB at 10^6 valid, which get_space keeps: a many-layer network ran out of memory
    valid = VtaSpace(layer, hw).n_valid
    c0 = time.process_time()
    if valid <= exhaustive_max:
        table = exhaustive_table(layer, hw, family="vta")
        times = {i: s for i, (s, _) in table.items()}
        search, evaluations = "exhaustive", len(times)
        best = min(times, key=lambda i: (times[i], i))
        best_s = times[best]
    else:
        # the default search (`auto`) with a declared budget: the template's points timed
        # exhaustively first, then `budget` measurements of the learned search over the family
        tuner = make_tuner("auto", space, seed, time_budget_s=math.inf, exhaustive=False, learned=learned,
                           learned_budget=budget)
        res = tune_layer(layer, hw, tuner=tuner, budget=None, seed=seed)
        template_points = tuner.choice.get("template_points", 0)
        search = f"auto: {tuner.choice['search']} ({template_points} template points + {budget} learned)"
        evaluations, best, best_s = res.measurements, int(res.best.index), float(res.best_seconds)
    cpu = time.process_time() - c0
    config = space.get(best)
    return {"layer": layer.name, "valid": int(valid), "size": int(space.size), "search": search,
            "evaluations": evaluations, "cpu_s": cpu, "best_ms": best_s * 1e3,
            "template_best_ms": t_best * 1e3, "template_valid": int(get_space(layer, hw).n_valid),
            "index": best, "knobs": config.knobs, **_verify(layer, config, hw),
            **dict(zip(("roofline_ms", "roofline_with_epilogue_ms"), (1e3 * x for x in epilogue_floor(layer, hw))))}


def vta_network_row(name: str, hw: HwConfig, exhaustive_max: int, budget: int, learned: str | None = None) -> dict:
    wl = get_workload(name).for_hw(hw)
    vta, _ = partition(wl, hw)
    t0 = time.perf_counter()
    layers = []
    for layer, count in vta:
        row = vta_layer(layer, hw, exhaustive_max, budget, seed=0, learned=learned)
        row["count"] = count
        layers.append(row)
        print(f"  {layer.name}: {row['best_ms']:.3f} ms (template {row['template_best_ms']:.3f}), "
              f"{row['valid']} valid, {row['search']}, {row['cpu_s']:.1f} CPU-s, "
              f"bit-exact {row['bit_exact']}, race-free {row['race_free']}", file=sys.stderr, flush=True)
    ms = sum(r["best_ms"] * r["count"] for r in layers) / wl.batch
    t_ms = sum(r["template_best_ms"] * r["count"] for r in layers) / wl.batch
    evals, cpu = sum(r["evaluations"] for r in layers), sum(r["cpu_s"] for r in layers)
    macs = sum(real_macs(layer) * n for layer, n in vta)
    peak = hw.macs_per_cycle * hw.clock_mhz * 1e6
    return {
        "network": name, "hw": hw.name, "batch": wl.batch, "schedules": "vta",
        "offloaded_ms_per_image": ms, "template_ms_per_image": t_ms, "speedup_vs_template": t_ms / ms,
        "roofline_ms_per_image": sum(r["roofline_ms"] * r["count"] for r in layers) / wl.batch,
        "roofline_with_epilogue_ms_per_image": sum(r["roofline_with_epilogue_ms"] * r["count"] for r in layers) / wl.batch,
        "pct_of_peak": 100.0 * macs / (ms * 1e-3 * wl.batch) / peak if ms else None,
        "evaluations": evals, "search_cpu_s": cpu, "evals_per_cpu_s": evals / cpu if cpu else None,
        "all_winners_bit_exact": all(r["bit_exact"] for r in layers),
        "all_winners_race_free": all(r["race_free"] for r in layers),
        "wall_s": time.perf_counter() - t0, "layers": layers,
    }


def _targets(rows: list[dict]) -> dict:
    out = {}
    for r in rows:
        if r["network"] != "resnet18":
            continue
        if r["hw"].startswith("pynq_1x16"):
            three = [lr["valid"] for lr in r["layers"] if "_3x3_" in lr["layer"]]
            out["resnet18_pynq_1x16_ms"] = {"value": r["offloaded_ms_per_image"], "target": TARGET_R18_1X16_MS,
                                            "met": r["offloaded_ms_per_image"] <= TARGET_R18_1X16_MS}
            out["resnet18_3x3_min_valid_pynq_1x16"] = {"value": min(three), "target": TARGET_VALID_3X3,
                                                       "met": min(three) >= TARGET_VALID_3X3}
        if r["hw"].startswith("pynq_4x8"):
            out["resnet18_pynq_4x8_speedup"] = {"value": r["speedup_vs_template"], "target": TARGET_R18_4X8_SPEEDUP,
                                                "met": r["speedup_vs_template"] >= TARGET_R18_4X8_SPEEDUP}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nets", default=",".join(ZOO))
    ap.add_argument("--hw", default="pynq_1x16,pynq_4x8")
    ap.add_argument("--out", help="append one JSON line per (network, config) to this file")
    ap.add_argument("--skip-probe", action="store_true", help="do not time from_torch on ResNet-50")
    ap.add_argument("--schedules", choices=("autotvm", "vta"), default="autotvm",
                    help="schedule family of each layer's best schedule (default: %(default)s)")
    ap.add_argument("--exhaustive-max", type=int, default=30000,
                    help="vta: time every valid schedule of a layer with at most this many (default: %(default)s)")
    ap.add_argument("--budget", type=int, default=1000,
                    help="vta: measurements of the learned search after the template phase on a layer with more "
                         "than --exhaustive-max valid schedules (default: %(default)s)")
    ap.add_argument("--learned", default=None,
                    help="vta: the learned search of auto (default: auto's choice, the shipped vta agent or xgb)")
    args = ap.parse_args()
    rows = []
    for name in args.nets.split(","):
        for hw_name in args.hw.split(","):
            if args.schedules == "vta":
                row = vta_network_row(name, HwConfig.resolve(hw_name), args.exhaustive_max, args.budget, args.learned)
            else:
                row = network_row(name, HwConfig.resolve(hw_name))
            rows.append(row)
            if args.out:
                with open(args.out, "a") as f:
                    f.write(json.dumps(row) + "\n")
            print(f"{name} {hw_name}: {row['offloaded_ms_per_image']:.3f} ms, {row['pct_of_peak']:.1f}% of peak "
                  f"({row.get('exhaustive_wall_s', row.get('wall_s', 0)):.0f} s)", file=sys.stderr)
    probe = None
    if not args.skip_probe:
        out = subprocess.run([sys.executable, "-c", FROM_TORCH_PROBE], capture_output=True, text=True, check=True)
        probe = json.loads(out.stdout.strip().splitlines()[-1])
    summary = [{k: v for k, v in r.items() if k != "layers"} for r in rows]
    out = {"networks": summary, "from_torch_resnet50": probe}
    if args.schedules == "vta":
        out["layers"] = {f"{r['network']} {r['hw']}": [{k: lr[k] for k in ("layer", "count", "valid", "search",
                                                                          "evaluations", "best_ms", "template_best_ms")}
                                                      for lr in r["layers"]] for r in rows}
        out["targets"] = _targets(rows)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
