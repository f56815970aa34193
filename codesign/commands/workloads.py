"""`codesign workloads [NAME] [--hw HW]`: the model zoo, or one network's layers with their
multiplicities, MACs and what VTA offloads on a hardware config (and why the rest stays on the CPU)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from codesign.hw.config import HwConfig
from codesign.schedule import partition
from codesign.workloads import ZOO, get_workload

EPILOG = """\
examples:
  codesign workloads                                # the zoo: names and what each network is
  codesign workloads mobilenet --hw pynq_1x16       # layers, counts, MACs, offloaded or CPU + reason
  codesign workloads resnet50 --hw pynq_4x8 --json  # the same as JSON
  codesign workloads my_net.py:build --hw pynq_1x16 # your own torch module: build() -> (module, inputs)
  codesign workloads exported.pt2                   # a torch.export.save archive

NAME is a zoo name, path/to/file.py:factory (a function returning (module, example_inputs)) or a
.pt2 file; the same forms work for `--workload` of tune, space and sweep. A layer is offloaded when
its template has at least one valid schedule on the hardware (the rules of `codesign space`);
the batch grows to a multiple of the config's BATCH (4 on pynq_4x8).
"""


def register(sub: argparse._SubParsersAction, summary: str) -> None:
    p = sub.add_parser("workloads", help=summary, description=summary.capitalize() + ".", epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name", nargs="?", metavar="NAME", help="zoo name, file.py:factory or .pt2 (default: list the zoo)")
    p.add_argument("--hw", default="pynq_1x16", help="hardware config name or YAML (default: pynq_1x16)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def _gmacs(macs: int) -> str:
    return f"{macs / 1e9:.3f}"


def describe(name: str, hw_name: str) -> dict[str, Any]:
    """One network on one hardware config: every unique layer with count, MACs, template and
    offload decision (reason when on the CPU), plus totals. MACs are per run of the batch."""
    hw = HwConfig.resolve(hw_name)
    wl = get_workload(name).for_hw(hw)
    vta, cpu = partition(wl, hw)
    reasons = {layer: reason for layer, _, reason in cpu}
    layers = []
    for layer, count in wl.unique_layers():
        layers.append({"layer": layer.name, "spec": layer.spec, "template": layer.template, "count": count,
                       "macs": layer.macs * count, "offloaded": layer not in reasons,
                       "reason": reasons.get(layer)})
    for op, count in wl.cpu_ops:
        layers.append({"layer": op.name, "spec": None, "template": None, "count": count, "macs": op.macs * count,
                       "offloaded": False, "reason": op.reason})
    off = sum(x["macs"] for x in layers if x["offloaded"])
    total = sum(x["macs"] for x in layers)
    return {"workload": wl.name, "description": wl.description, "hw": hw.name, "batch": wl.batch,
            "unique_layers": len(layers), "unique_offloaded": len(vta), "macs_offloaded": off,
            "macs_cpu": total - off, "layers": layers}


def run(args: argparse.Namespace) -> int:
    if not args.name:
        rows = [{"workload": n, "description": d} for n, (_, d) in ZOO.items()]
        if args.json:
            print(json.dumps(rows, indent=1))
        else:
            width = max(len(n) for n in ZOO)
            for r in rows:
                print(f"{r['workload'].ljust(width)}  {r['description']}")
            print("\n`codesign workloads NAME --hw HW` shows a network's layers and what is offloaded.")
        return 0
    doc = describe(args.name, args.hw)
    if args.json:
        print(json.dumps(doc, indent=1))
        return 0
    print(f"{doc['workload']}: {doc['description']}")
    print(f"on {doc['hw']} at batch {doc['batch']}: {doc['unique_offloaded']} of {doc['unique_layers']} unique "
          f"layers offloaded; GMACs offloaded {_gmacs(doc['macs_offloaded'])}, on CPU {_gmacs(doc['macs_cpu'])}")
    width = max(len(x["layer"]) for x in doc["layers"])
    print(f"{'layer'.ljust(width)}  count  GMACs   where")
    for x in doc["layers"]:
        where = "VTA " + x["template"] if x["offloaded"] else f"CPU: {x['reason']}"
        print(f"{x['layer'].ljust(width)}  {x['count']:5d}  {_gmacs(x['macs'])}  {where}")
    return 0
