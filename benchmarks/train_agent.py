"""Train the pretrained agents shipped with the package (`sim/agents/bandit_sim.pt` for the
AutoTVM template family, `sim/agents/bandit_vta_sim.pt` for the `vta` family).

The hardware-conditioned contextual bandit is trained on simulator measurements only: offloaded
ResNet-18 convs on each hardware config of `--hw`, `--budget` measurements per (layer, config)
task, the agent carried from task to task (`codesign.tune.env.pretrain`). Writes the checkpoint
and `<checkpoint>.json` with its training provenance (command, family, tasks — every (layer,
config) trained on, so the tuner benchmark can check its evaluation tasks are held out —,
measurements, observation length, seed, package commit, date, wall time). `codesign tune --tuner
auto` picks the family's agent when a measurement is expensive (a board) and the layer's template
is conv2d/dense; an agent whose observation length no longer matches the family (its features
changed) is refused in one line and the bandit starts cold: retrain it with this script.

`--schedules vta` trains, by default, on the ResNet-18 convs the tuner benchmark does not evaluate
(`tuners.VTA_EVAL_LAYERS` held out) on the benchmark's training configs (`tuners.TRAIN_HWS`; the
evaluation configs 1x16 and 4x8 held out). A task whose family is too large to enumerate (the vta
family: 10^5 valid schedules of 10^9-10^10 per ResNet-18 conv) is tuned on `--pool` of its valid
schedules drawn uniformly once (`codesign.tune.env.SampledView`), not the listed family: the agent
sees as many candidates per task as the deployed bandit ranks on such a space.

    python benchmarks/train_agent.py                       # writes sim/agents/bandit_sim.pt(.json)
    nice python benchmarks/train_agent.py --schedules vta  # writes sim/agents/bandit_vta_sim.pt(.json)
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
from codesign.paths import SHIPPED_AGENT, SHIPPED_VTA_AGENT
from codesign.schedule import partition
from codesign.tune.env import TRAIN_POOL, pretrain
from codesign.workloads import Conv2D, get_workload

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tuners  # noqa: E402 - the benchmark's held-out layers and training configs (one place)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--schedules", default="autotvm", choices=("autotvm", "vta"), help="schedule family")
    ap.add_argument("--hw", nargs="+", default=None,
                    help="training configs (default: pynq_1x16 pynq_4x8; vta: the tuner benchmark's training configs)")
    ap.add_argument("--layers", default=None,
                    help="comma-separated ResNet-18 conv numbers 0-9 (default: all; vta: those the benchmark holds out "
                         "excluded)")
    ap.add_argument("--budget", type=int, default=None,
                    help="simulator measurements per (layer, config) task (default 20; vta 40)")
    ap.add_argument("--pool", type=int, default=TRAIN_POOL,
                    help=f"valid schedules sampled per task of a family too large to enumerate (default {TRAIN_POOL})")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="checkpoint (default: the family's shipped agent)")
    args = ap.parse_args(argv)
    vta = args.schedules == "vta"
    hws = args.hw or (list(tuners.TRAIN_HWS) if vta else ["pynq_1x16", "pynq_4x8"])
    budget = args.budget or (40 if vta else 20)
    if args.pool < budget:
        raise SystemExit(f"train_agent.py: --pool {args.pool}: must be at least --budget ({budget})")
    if args.layers is not None:
        layer_ids = [int(x) for x in args.layers.split(",") if x]
    else:
        layer_ids = [i for i in range(10) if not vta or i not in tuners.VTA_EVAL_LAYERS]
    out = Path(args.out or (SHIPPED_VTA_AGENT if vta else SHIPPED_AGENT))
    tasks = []
    for name in hws:
        hw = HwConfig.resolve(name)
        offloaded, _ = partition(get_workload("resnet18").for_hw(hw), hw)
        convs = [layer for layer, _ in offloaded if isinstance(layer, Conv2D)]
        tasks += [(convs[i], hw) for i in layer_ids if i < len(convs)]
    t0 = time.perf_counter()
    agent = pretrain("bandit", tasks, budget=budget, seed=args.seed, family=args.schedules, pool=args.pool,
                     progress=False)
    wall = time.perf_counter() - t0
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
        "schedules": args.schedules, "obs_dim": agent.obs_dim,
        "hw": [HwConfig.resolve(h).name for h in hws], "workload": "resnet18 (offloaded convs)",
        "layers": layer_ids, "task_list": [[hw.name, layer.spec] for layer, hw in tasks],
        "tasks": len(tasks), "measurements": len(tasks) * budget, "budget_per_task": budget,
        "pool_per_task": args.pool, "pool": "valid schedules drawn uniformly per task (seed + task number) "
                                            "where the family is too large to enumerate",
        "seed": args.seed, "commit": commit, "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "wall_s": round(wall, 1), "bytes": out.stat().st_size,
    }
    atomic_write_json(out.with_suffix(out.suffix + ".json"), provenance)
    print(json.dumps(provenance))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
