"""The `vta` family's residency nests (`inp_stationary`, `acc_resident`; docs/schedules.md) on a
zoo network's offloaded layers: per layer the best schedule without them (every valid config with
both knobs at 0 timed, up to --exhaustive-max, else a seeded sample) and the best with them (every
valid nest config up to --cap, else a seeded sample of --cap), with the roofline and the roofline
plus the requantization epilogue (`networks.epilogue_floor`); the winning nest is simulated
bit-exact against NumPy and race-checked. Prints one JSON object.

Usage: `python benchmarks/nests.py [--nets resnet18] [--hw pynq_1x16,pynq_4x8] [--cap 3000]`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from codesign.evaluate.run import measure
from codesign.hw.config import HwConfig
from codesign.schedule import get_space, partition
from codesign.workloads import get_workload

sys.path.insert(0, str(Path(__file__).resolve().parent))
from networks import _verify, epilogue_floor  # noqa: E402 - the sibling benchmark's helpers


def _best(layer, space, hw, indices: np.ndarray, cap: int, seed: int) -> tuple[float, int, str]:
    if len(indices) > cap:
        indices = np.random.default_rng(seed).choice(indices, size=cap, replace=False)
        how = f"sample {cap}"
    else:
        how = "exhaustive"
    times = {int(i): measure(layer, space.get(int(i)), hw).seconds for i in indices}
    best = min(times, key=lambda i: (times[i], i))
    return times[best], best, how


def layer_row(layer, hw: HwConfig, exhaustive_max: int, cap: int) -> dict:
    space = get_space(layer, hw, "vta")
    valid = space.valid_indices()
    b = space.batch(valid)
    nest = (b.ins == 1) | (b.acc > 0)
    c0 = time.process_time()
    old_s, old_i, old_how = _best(layer, space, hw, valid[~nest], exhaustive_max, 0)
    row = {"layer": layer.name, "valid": int(len(valid)), "nest_valid": int(nest.sum()),
           "best_without_ms": old_s * 1e3, "search_without": old_how}
    if nest.any():
        new_s, new_i, new_how = _best(layer, space, hw, valid[nest], cap, 1)
        config = space.get(new_i)
        row.update({"best_nest_ms": new_s * 1e3, "search_nest": new_how, "nest_knobs": config.knobs,
                    **{f"nest_{k}": v for k, v in _verify(layer, config, hw).items()}})
    row["cpu_s"] = time.process_time() - c0
    row.update(dict(zip(("roofline_ms", "roofline_with_epilogue_ms"), (1e3 * x for x in epilogue_floor(layer, hw)))))
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nets", default="resnet18")
    ap.add_argument("--hw", default="pynq_1x16,pynq_4x8")
    ap.add_argument("--exhaustive-max", type=int, default=40000,
                    help="time every valid config without the nests up to this many (default: %(default)s)")
    ap.add_argument("--cap", type=int, default=3000, help="nest configs timed per layer (default: %(default)s)")
    args = ap.parse_args()
    out = []
    for name in args.nets.split(","):
        for hw_name in args.hw.split(","):
            hw = HwConfig.resolve(hw_name)
            wl = get_workload(name).for_hw(hw)
            vta, _ = partition(wl, hw)
            rows = []
            for layer, count in vta:
                row = {**layer_row(layer, hw, args.exhaustive_max, args.cap), "count": count}
                rows.append(row)
                print(f"  {layer.name}: without {row['best_without_ms']:.3f} ms, best nest "
                      f"{row.get('best_nest_ms', float('nan')):.3f} ms", file=sys.stderr)

            def per_image(key: str, rows: list[dict] = rows, batch: int = wl.batch) -> float:
                return sum(r[key] * r["count"] for r in rows) / batch

            with_nests = sum(min(r["best_without_ms"], r.get("best_nest_ms", np.inf)) * r["count"]
                             for r in rows) / wl.batch
            out.append({"network": name, "hw": hw.name, "ms_per_image_without_nests": per_image("best_without_ms"),
                        "ms_per_image_with_nests": with_nests, "roofline_ms_per_image": per_image("roofline_ms"),
                        "roofline_with_epilogue_ms_per_image": per_image("roofline_with_epilogue_ms"),
                        "layers_where_a_nest_wins": [r["layer"] for r in rows
                                                     if r.get("best_nest_ms", np.inf) < r["best_without_ms"]],
                        "layers": rows})
    print(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
