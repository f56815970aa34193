"""Fused epilogues and pools on VTA: what they add to ResNet-18's layers (docs/vta.md §7.8–§7.9).

For each 3x3 conv of ResNet-18 on each `--hw`: the fastest template schedule (exhaustive
`measure_seconds`), then `measure_fused` of that schedule with bias+ReLU and with
bias+residual add+ReLU (la=1, lb=0, s=1), and the stem's 3x3/2 max pool (`measure_pool`).
Prints one JSON object. Usage: `python benchmarks/fused.py [--hw pynq_1x16 pynq_4x8]`.
"""

from __future__ import annotations

import argparse
import json
import sys

from codesign.evaluate.fused import Epilogue, fused_invalid, measure_fused
from codesign.evaluate.pool import Pool, measure_pool
from codesign.evaluate.run import measure_seconds
from codesign.hw.config import HwConfig
from codesign.schedule import get_space
from codesign.workloads.layers import Conv2D

CONVS = [(64, 56, 64, 1), (64, 56, 128, 2), (128, 28, 128, 1), (128, 28, 256, 2), (256, 14, 256, 1),
         (256, 14, 512, 2), (512, 7, 512, 1)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hw", nargs="+", default=["pynq_1x16", "pynq_4x8"])
    args = ap.parse_args(argv)
    out = []
    for name in args.hw:
        hw = HwConfig.resolve(name)
        for c, size, o, s in CONVS:
            layer = Conv2D(hw.batch, c, size, size, o, 3, 3, s, 1)
            sp = get_space(layer, hw)
            configs = [sp.get(int(i)) for i in sp.valid_indices()]
            best = min(configs, key=lambda cfg: measure_seconds(layer, cfg, hw)[0])
            row = {"hw": hw.name, "layer": layer.name, "plain_ms": measure_seconds(layer, best, hw)[0] * 1e3}
            for key, epi in (("bias_relu_ms", Epilogue(8, True, True)), ("bias_add_relu_ms", Epilogue(8, True, True, (1, 0, 1)))):
                row[key] = None if fused_invalid(layer, best, hw, epi) else measure_fused(layer, best, hw, epi).seconds * 1e3
            out.append(row)
            print(f"{hw.name} {layer.name}: " + ", ".join(f"{k} {v:.3f}" for k, v in row.items() if k.endswith("_ms")),
                  file=sys.stderr)
        pool = Pool("max", hw.batch, 64, 112, 112, 3, 2, 1)
        m = measure_pool(pool, hw)
        out.append({"hw": hw.name, "layer": pool.name, "pool_ms": m.seconds * 1e3, "cycles": m.cycles})
    print(json.dumps({"rows": out}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
