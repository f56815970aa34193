"""Zoo networks on the stock configs: what VTA offloads and how fast the offloaded part can run.

For each zoo network and hardware config (default pynq_1x16 and pynq_4x8), at the smallest batch
that is a multiple of the config's BATCH:
- unique layers offloaded / on the CPU, MACs offloaded vs on the CPU (per image);
- the exhaustive-optimum latency of the offloaded part: every valid schedule of every unique
  offloaded layer timed with the timing model (`codesign.tune.exhaustive`), the best of each
  x its multiplicity, per image;
- % of peak: offloaded MACs / (that latency x BATCH*BLOCK_IN*BLOCK_OUT MACs/cycle x clock).
Also the wall time and peak memory of `from_torch` on ResNet-50 (fresh subprocess; the torch
import is timed separately).

Prints one JSON object; with --out also appends one JSON line per (network, config) as it goes.
Usage: `python benchmarks/networks.py [--nets resnet18,mobilenet] [--hw pynq_1x16,pynq_4x8] [--out f]`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from codesign.hw.config import HwConfig
from codesign.schedule import partition
from codesign.tune.exhaustive import exhaustive
from codesign.workloads import ZOO, get_workload

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
        "pct_of_peak": 100.0 * macs_vta / seconds / peak if seconds else None,
        "exhaustive_wall_s": time.perf_counter() - t0, "layers": layers,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nets", default=",".join(ZOO))
    ap.add_argument("--hw", default="pynq_1x16,pynq_4x8")
    ap.add_argument("--out", help="append one JSON line per (network, config) to this file")
    ap.add_argument("--skip-probe", action="store_true", help="do not time from_torch on ResNet-50")
    args = ap.parse_args()
    rows = []
    for name in args.nets.split(","):
        for hw_name in args.hw.split(","):
            row = network_row(name, HwConfig.resolve(hw_name))
            rows.append(row)
            if args.out:
                with open(args.out, "a") as f:
                    f.write(json.dumps(row) + "\n")
            print(f"{name} {hw_name}: {row['offloaded_ms_per_image']:.3f} ms, {row['pct_of_peak']:.1f}% of peak "
                  f"({row['exhaustive_wall_s']:.0f} s)", file=sys.stderr)
    probe = None
    if not args.skip_probe:
        out = subprocess.run([sys.executable, "-c", FROM_TORCH_PROBE], capture_output=True, text=True, check=True)
        probe = json.loads(out.stdout.strip().splitlines()[-1])
    summary = [{k: v for k, v in r.items() if k != "layers"} for r in rows]
    print(json.dumps({"networks": summary, "from_torch_resnet50": probe}, indent=1))


if __name__ == "__main__":
    main()
