"""MobileNetV2 (and ResNeXt-50 32x4d) on VTA: placement cost before and after the block-diagonal
rewrite of depthwise / narrow-group convs (`codesign.place.transforms.BLOCK_DIAGONAL`).

The networks are faithful re-implementations of torchvision's `mobilenet_v2` (width 1.0: a 3x3/2
stem, 17 inverted-residual blocks (t, c, n, s) = (1,16,1,1) (6,24,2,2) (6,32,3,2) (6,64,4,2)
(6,96,3,1) (6,160,3,2) (6,320,1,1) with BN + ReLU6, a linear 1x1 projection and the residual
when stride 1 and channels match, a 1x1 conv to 1280, global average pool, Linear(1280, 1000))
and `resnext50_32x4d` (bottlenecks of 32 groups x 4 channels per group at the first stage), at
224x224, built here without torchvision; random seeded weights (placement reads shapes only).

Each is planned on `--hw` (default pynq_1x16) + its board with `codesign.place.plan_network` and
the chooser `codesign workloads --placement` uses (`codesign.place.chooser`: the best template
schedule by the timing model), twice: with the block-diagonal rewrite withheld from the planner
("before": `rewrites` filtered here, for this benchmark only) and as the library offers it
("after"). Prints one JSON object: ms per image, CPU / VTA / host ms, the CPU's share, and the
grouped convs' time on each side. Target (issue): MobileNetV2 on pynq_1x16 <= 50 ms per image.

Usage: `python benchmarks/mobilenet_v2.py [--nets mobilenet_v2,resnext50] [--hw pynq_1x16]`.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

TARGET_MS = 50.0


def mobilenet_v2() -> tuple[Any, tuple[Any, ...]]:
    import torch
    from torch import nn

    def cbr(cin: int, cout: int, k: int, stride: int, groups: int = 1, relu: bool = True) -> list[nn.Module]:
        layers: list[nn.Module] = [nn.Conv2d(cin, cout, k, stride, (k - 1) // 2, groups=groups, bias=False),
                                   nn.BatchNorm2d(cout)]
        return layers + [nn.ReLU6()] if relu else layers

    class InvertedResidual(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int, t: int) -> None:
            super().__init__()
            hidden = cin * t
            layers = cbr(cin, hidden, 1, 1) if t != 1 else []
            layers += cbr(hidden, hidden, 3, stride, groups=hidden) + cbr(hidden, cout, 1, 1, relu=False)
            self.conv = nn.Sequential(*layers)
            self.residual = stride == 1 and cin == cout

        def forward(self, x: Any) -> Any:
            return x + self.conv(x) if self.residual else self.conv(x)

    settings = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                (6, 320, 1, 1))
    features: list[nn.Module] = [nn.Sequential(*cbr(3, 32, 3, 2))]
    cin = 32
    for t, c, n, s in settings:
        for i in range(n):
            features.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
            cin = c
    features.append(nn.Sequential(*cbr(cin, 1280, 1, 1)))
    net = nn.Sequential(*features, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.2), nn.Linear(1280, 1000))
    return net, (torch.zeros(1, 3, 224, 224),)


def resnext50() -> tuple[Any, tuple[Any, ...]]:
    import torch
    from torch import nn

    groups, width_per_group = 32, 4

    class Bottleneck(nn.Module):
        def __init__(self, cin: int, planes: int, stride: int) -> None:
            super().__init__()
            width, cout = planes * width_per_group // 64 * groups, planes * 4
            self.body = nn.Sequential(
                nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
                nn.Conv2d(width, width, 3, stride, 1, groups=groups, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
                nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout))
            self.down = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                         if stride != 1 or cin != cout else nn.Identity())

        def forward(self, x: Any) -> Any:
            return torch.relu(self.body(x) + self.down(x))

    layers: list[nn.Module] = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                               nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for stage, n in enumerate((3, 4, 6, 3)):
        planes = 64 << stage
        for i in range(n):
            layers.append(Bottleneck(cin, planes, 2 if i == 0 and stage > 0 else 1))
            cin = planes * 4
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, 1000)]
    return nn.Sequential(*layers), (torch.zeros(1, 3, 224, 224),)


NETS = {"mobilenet_v2": mobilenet_v2, "resnext50": resnext50}


def _grouped_ms(plan: Any) -> dict[str, float]:
    """ms of the grouped convs (groups > 1) by placement, with the host passes placed before them."""
    out = {"cpu": 0.0, "vta": 0.0}
    where = {}
    for s in plan.steps:
        op = None if s.host or not s.ops else plan.graph.op(s.ops[0])
        if op is not None and op.kind == "conv2d" and int(op.attrs["groups"]) > 1:
            where[s.name] = s.placement
            out[s.placement] += s.predicted_s * 1e3
    for s in plan.steps:  # a pack / unpack / rewrite pass for a grouped conv counts with it
        if s.host and s.group in where:
            out[where[s.group]] += s.predicted_s * 1e3
    return out


def _row(plan: Any, wall_s: float) -> dict[str, Any]:
    lat = plan.latency_s * 1e3
    vta_groups = [s for s in plan.steps if s.transform == "block_diagonal"]
    return {"ms_per_image": lat, "cpu_ms": plan.cpu_s * 1e3, "vta_ms": plan.vta_s * 1e3,
            "host_ms": sum(s.predicted_s for s in plan.steps if s.host) * 1e3,
            "cpu_share": plan.cpu_s * 1e3 / lat, "grouped_conv_ms": _grouped_ms(plan),
            "block_diagonal_steps": len(vta_groups), "plan_wall_s": wall_s}


def measure(name: str, hw_name: str) -> dict[str, Any]:
    import numpy as np
    import torch

    from codesign.hw.board import Board
    from codesign.hw.config import HwConfig
    from codesign.network import import_network
    from codesign.place import chooser, plan_network
    from codesign.place import plan as plan_mod
    from codesign.place.transforms import BLOCK_DIAGONAL, rewrites

    torch.manual_seed(0)
    np.random.seed(0)
    module, inputs = NETS[name]()
    module = module.eval()
    hw = HwConfig.resolve(hw_name)
    board = Board.for_target(hw.TARGET)
    net = import_network(module, inputs, name)
    choose = chooser(hw)  # one chooser: a layer's schedule is searched once for both plans
    memo: dict[Any, Any] = {}

    def cached(layer: Any) -> Any:
        if layer not in memo:
            memo[layer] = choose(layer)
        return memo[layer]

    rows = {}
    for label, offered in (("before", lambda layer, hw_: [r for r in rewrites(layer, hw_) if r.kind != BLOCK_DIAGONAL]),
                           ("after", rewrites)):
        plan_mod.rewrites = offered  # this benchmark only: withhold the rewrite for "before"
        try:
            t0 = time.perf_counter()
            plan = plan_network(net, hw, board, cached)
            rows[label] = _row(plan, time.perf_counter() - t0)
        finally:
            plan_mod.rewrites = rewrites
    return {"network": name, "hw": hw.name, "board": board.name, **rows,
            "speedup": rows["before"]["ms_per_image"] / rows["after"]["ms_per_image"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nets", default="mobilenet_v2,resnext50")
    ap.add_argument("--hw", default="pynq_1x16")
    args = ap.parse_args()
    out = [measure(n, args.hw) for n in args.nets.split(",")]
    mnv2 = next((r for r in out if r["network"] == "mobilenet_v2"), None)
    doc: dict[str, Any] = {"results": out}
    if mnv2 is not None:
        doc["target_ms"] = TARGET_MS
        doc["target_met"] = mnv2["after"]["ms_per_image"] <= TARGET_MS
    print(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
