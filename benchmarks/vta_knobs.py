"""Do the `vta` family's appended knobs win? Every valid schedule of each offloaded layer timed.

For each network and hardware config, every valid `vta`-family schedule of each unique offloaded
layer is timed with the timing model (exhaustive, `codesign.evaluate.run.measure`). Per layer it
reports the valid count and best time of the whole space and of the space before the knobs
appended after `uop_fold` (every one at its position-0 value, today's program: `n_threads` = 2,
`uop_lift` = 0, ...), the best time at each value of each appended knob, and the winner's knobs;
per network the offloaded ms per image both ways. The winner is simulated bit-exact against NumPy
and race-checked. Prints one JSON object (`--out` appends one JSON line per network and config).

Usage: `python benchmarks/vta_knobs.py [--nets resnet18] [--hw pynq_1x16,pynq_4x8] [--out f]`
(ResNet-18 on both stock configs: about 20 CPU-minutes).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from codesign.evaluate.compiler import compile_layer
from codesign.evaluate.run import measure, random_inputs
from codesign.hw.config import HwConfig
from codesign.schedule import get_space
from codesign.schedule.support import partition
from codesign.schedule.vta_space import BASE_KNOBS
from codesign.vta.simulator import simulate
from codesign.workloads import get_workload


def layer_row(layer, hw) -> dict:
    space = get_space(layer, hw, "vta")
    valid = space.valid_indices()
    c0 = time.process_time()
    ms = np.array([measure(layer, space.get(int(i)), hw).seconds for i in valid]) * 1e3
    cpu = time.process_time() - c0
    pos = space.positions_of(valid)
    appended = [j for j, name in enumerate(space.knob_names) if name not in BASE_KNOBS]
    base = (pos[:, appended] == 0).all(axis=1)
    per_value = {space.knob_names[j]: {str(space.knobs[j].candidates[p]): float(ms[pos[:, j] == p].min())
                                       for p in sorted(set(pos[:, j].tolist()))} for j in appended}
    best = space.get(int(valid[ms.argmin()]))
    data, weight = random_inputs(layer)
    res = simulate(compile_layer(layer, best, hw, data=data, weight=weight), check=True)  # raises on a race
    out = layer.unpack_output(np.asarray(res.outputs["output"]).view(np.int8), hw)
    return {"layer": layer.name, "valid": int(len(valid)), "valid_before": int(base.sum()),
            "best_ms": float(ms.min()), "best_before_ms": float(ms[base].min()), "best_per_value_ms": per_value,
            "knobs": best.knobs, "bit_exact": bool(np.array_equal(out, layer.reference(data, weight))),
            "race_free": res.tokens_left == {}, "evals_per_cpu_s": len(valid) / cpu if cpu else None}


def network_row(name: str, hw: HwConfig) -> dict:
    wl = get_workload(name).for_hw(hw)
    vta, _ = partition(wl, hw)
    layers = []
    for layer, count in vta:
        row = layer_row(layer, hw) | {"count": count}
        layers.append(row)
        print(f"  {layer.name}: {row['best_ms']:.3f} ms (before {row['best_before_ms']:.3f}), {row['valid']} valid "
              f"({row['valid_before']} before)", file=sys.stderr)
    total = {k: sum(r[k] * r["count"] for r in layers) / wl.batch for k in ("best_ms", "best_before_ms")}
    return {"network": name, "hw": hw.name, "batch": wl.batch, "offloaded_ms_per_image": total["best_ms"],
            "offloaded_ms_per_image_before": total["best_before_ms"],
            "layers_won": sum(r["best_ms"] < r["best_before_ms"] for r in layers),
            "all_winners_bit_exact": all(r["bit_exact"] for r in layers),
            "all_winners_race_free": all(r["race_free"] for r in layers), "layers": layers}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nets", default="resnet18")
    ap.add_argument("--hw", default="pynq_1x16,pynq_4x8")
    ap.add_argument("--out", help="append one JSON line per (network, config) to this file")
    args = ap.parse_args()
    rows = []
    for name in args.nets.split(","):
        for hw_name in args.hw.split(","):
            row = network_row(name, HwConfig.resolve(hw_name))
            rows.append(row)
            if args.out:
                with open(args.out, "a") as f:
                    f.write(json.dumps(row) + "\n")
            print(f"{name} {hw_name}: {row['offloaded_ms_per_image']:.3f} ms per image "
                  f"(before the appended knobs {row['offloaded_ms_per_image_before']:.3f})", file=sys.stderr)
    print(json.dumps({"networks": rows}, indent=1))


if __name__ == "__main__":
    main()
