"""Train the pretrained agent shipped with the package (`sim/agents/bandit_sim.pt`).

The hardware-conditioned contextual bandit is trained on simulator measurements only: every
offloaded ResNet-18 conv on each hardware config of `--hw`, `--budget` measurements per (layer,
config) task, the agent carried from task to task (`codesign.tune.env.pretrain`). Writes the
checkpoint and `<checkpoint>.json` with its training provenance (command, tasks, measurements,
seed, package commit, date, wall time). `codesign tune --tuner auto` picks this agent when a
measurement is expensive (a board) and the layer's template is conv2d/dense.

    python benchmarks/train_agent.py                 # writes sim/agents/bandit_sim.pt(.json)
    python benchmarks/train_agent.py --budget 20 --out /tmp/agent.pt
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from codesign.fileio import atomic_write_json
from codesign.hw.config import HwConfig
from codesign.paths import SHIPPED_AGENT
from codesign.schedule import partition
from codesign.tune.env import pretrain
from codesign.workloads import Conv2D, get_workload


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hw", nargs="+", default=["pynq_1x16", "pynq_4x8"])
    ap.add_argument("--budget", type=int, default=20, help="simulator measurements per (layer, config) task")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(SHIPPED_AGENT))
    args = ap.parse_args(argv)
    tasks = []
    for name in args.hw:
        hw = HwConfig.resolve(name)
        offloaded, _ = partition(get_workload("resnet18").for_hw(hw), hw)
        tasks += [(layer, hw) for layer, _ in offloaded if isinstance(layer, Conv2D)]
    t0 = time.perf_counter()
    agent = pretrain("bandit", tasks, budget=args.budget, seed=args.seed)
    wall = time.perf_counter() - t0
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    agent.save(out)
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                check=False).stdout.strip() or None
    except OSError:
        commit = None
    provenance = {
        "algo": "bandit", "trained_on": "simulator (codesign.vta timing model, sim/timing_params.json)",
        "command": "python benchmarks/train_agent.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "hw": [HwConfig.resolve(h).name for h in args.hw], "workload": "resnet18 (offloaded convs)",
        "tasks": len(tasks), "measurements": len(tasks) * args.budget, "budget_per_task": args.budget,
        "seed": args.seed, "commit": commit, "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "wall_s": round(wall, 1), "bytes": out.stat().st_size,
    }
    atomic_write_json(out.with_suffix(out.suffix + ".json"), provenance)
    print(json.dumps(provenance))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
